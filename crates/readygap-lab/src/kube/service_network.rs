//! The cluster network a lab pod sees: cluster DNS for Services and kube-proxy's rules.
//!
//! DNS (the kubelet writes `search NS.svc.cluster.local svc.cluster.local cluster.local` into
//! a pod's resolv.conf, so `ollama`, `ollama.NS`, `ollama.NS.svc` and
//! `ollama.NS.svc.cluster.local` all name Service `ollama` of namespace NS): a ClusterIP
//! Service resolves to its ClusterIP whether or not it has endpoints; a headless one
//! (`clusterIP: None`) to a ready endpoint's address, or to nothing.
//!
//! kube-proxy: a connection to `ClusterIP:port` goes to a random endpoint of the Service's
//! EndpointSlices that is `ready` (kube-proxy `pkg/proxy/iptables/proxier.go`: one rule per
//! endpoint with `--probability`), falling back to endpoints that are `serving` and
//! `terminating` when none is ready (KEP-1669, `pkg/proxy/topology.go`); with neither it is
//! refused (kube-proxy's REJECT rule for a Service without endpoints). A port the Service
//! does not have is dropped (nothing answers). A pod address (127.0.0.N) is reached
//! directly, as on a flat pod network.

use super::resources::{ENDPOINT_SLICES, SERVICES};
use super::store::Store;
use crate::runtime::network::{ClusterNetwork, Route};
use serde_json::Value;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Weak;

/// The lab cluster's DNS and Service routing, read from its object store (held weakly: a
/// container outliving its lab reaches nothing).
pub struct ServiceNetwork(pub Weak<Store>);

/// The Service a DNS name names from a pod of `ns`: (namespace, name).
fn service_of<'a>(ns: &'a str, name: &'a str) -> Option<(&'a str, &'a str)> {
    let labels: Vec<&str> = name.split('.').collect();
    match labels.as_slice() {
        [svc] => Some((ns, svc)),
        [svc, n] | [svc, n, "svc"] | [svc, n, "svc", "cluster", "local"] => Some((n, svc)),
        _ => None,
    }
}

/// The addresses of the endpoints whose conditions pass `want`, each with the port of the
/// slice's port named `port_name`.
fn addresses(
    slices: &[std::sync::Arc<Value>],
    port_name: &Value,
    want: &dyn Fn(&Value) -> bool,
) -> Vec<SocketAddr> {
    let mut out = Vec::new();
    for slice in slices {
        let Some(port) = slice["ports"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| &p["name"] == port_name))
            .and_then(|p| p["port"].as_u64())
            .and_then(|p| u16::try_from(p).ok())
        else {
            continue;
        };
        for ep in slice["endpoints"].as_array().into_iter().flatten() {
            if !want(&ep["conditions"]) {
                continue;
            }
            for a in ep["addresses"].as_array().into_iter().flatten() {
                if let Some(ip) = a.as_str().and_then(|s| s.parse::<Ipv4Addr>().ok()) {
                    out.push(SocketAddr::from((ip, port)));
                }
            }
        }
    }
    out
}

/// An endpoint condition `ready` (absent counts as ready, as the API documents it).
fn is_ready(c: &Value) -> bool {
    c["ready"] != false
}

/// The endpoints kube-proxy sends a Service's traffic to: ready ones, else serving and
/// terminating ones; each as (address, port) for the Service port `port_name`.
fn endpoints(slices: &[std::sync::Arc<Value>], port_name: &Value) -> Vec<SocketAddr> {
    let ready = addresses(slices, port_name, &is_ready);
    if !ready.is_empty() {
        return ready;
    }
    addresses(slices, port_name, &|c| {
        c["serving"] == true && c["terminating"] == true
    })
}

/// Where the API server's service proxy sends a request for Service `svc` of `ns` at `port`
/// (`NAME`, `NAME:PORT` where PORT is the Service's port number or name; none: the unnamed
/// port), as kubernetes `pkg/registry/core/service/storage/storage.go` `ResourceLocation`
/// does: a port number becomes that Service port's name; the addresses are the Endpoints'
/// ready ones (what the EndpointSlices mark `ready`: the proxy, unlike kube-proxy, has no
/// fallback to terminating endpoints), each with the endpoint port of that name. Errors are
/// the API server's: 404 without the Service, 503 "no service port" or "no endpoints
/// available".
pub fn proxy_endpoints(
    store: &Store,
    ns: &str,
    svc: &str,
    port: Option<&str>,
) -> Result<Vec<SocketAddr>, (u16, String)> {
    let Some(service) = store.get(SERVICES, ns, svc) else {
        return Err((404, format!("services \"{svc}\" not found")));
    };
    let port_name = match port {
        Some(p) => match p.parse::<u64>() {
            Ok(n) => match service["spec"]["ports"]
                .as_array()
                .and_then(|ps| ps.iter().find(|sp| sp["port"].as_u64() == Some(n)))
            {
                Some(sp) => sp["name"].clone(),
                None => {
                    return Err((
                        503,
                        format!("no service port {n} found for service \"{svc}\""),
                    ));
                }
            },
            Err(_) => Value::String(p.to_string()),
        },
        None => Value::Null,
    };
    // An unnamed port is "" in Endpoints and absent or "" in a slice's port.
    let name = match &port_name {
        Value::Null => Value::String(String::new()),
        v => v.clone(),
    };
    let slices: Vec<std::sync::Arc<Value>> = ServiceNetwork::slices_of(store, ns, svc)
        .into_iter()
        .map(|sl| {
            let mut v = (*sl).clone();
            for p in v["ports"].as_array_mut().into_iter().flatten() {
                if p["name"].is_null() {
                    p["name"] = Value::String(String::new());
                }
            }
            std::sync::Arc::new(v)
        })
        .collect();
    let ready = addresses(&slices, &name, &is_ready);
    if ready.is_empty() {
        return Err((503, format!("no endpoints available for service \"{svc}\"")));
    }
    Ok(ready)
}

impl ServiceNetwork {
    fn slices_of(store: &Store, ns: &str, svc: &str) -> Vec<std::sync::Arc<Value>> {
        store
            .list(ENDPOINT_SLICES, Some(ns))
            .0
            .into_iter()
            .filter(|s| s["metadata"]["labels"]["kubernetes.io/service-name"] == svc)
            .collect()
    }
}

impl ClusterNetwork for ServiceNetwork {
    fn resolve(&self, namespace: &str, name: &str) -> Option<Ipv4Addr> {
        let store = self.0.upgrade()?;
        let (ns, svc) = service_of(namespace, name)?;
        let service = store.get(SERVICES, ns, svc)?;
        match service["spec"]["clusterIP"].as_str() {
            Some("None") | None => {
                let slices = Self::slices_of(&store, ns, svc);
                let first_port = service["spec"]["ports"][0]["name"].clone();
                let eps = endpoints(&slices, &first_port);
                eps.first().map(|a| match a.ip() {
                    std::net::IpAddr::V4(ip) => ip,
                    std::net::IpAddr::V6(_) => Ipv4Addr::UNSPECIFIED,
                })
            }
            Some(ip) => ip.parse().ok(),
        }
    }

    fn route(&self, ip: Ipv4Addr, port: u16) -> Route {
        let Some(store) = self.0.upgrade() else {
            return Route::Blackhole;
        };
        let ip_text = ip.to_string();
        let (services, _) = store.list(SERVICES, None);
        if let Some(svc) = services
            .iter()
            .find(|s| s["spec"]["clusterIP"].as_str() == Some(ip_text.as_str()))
        {
            let Some(svc_port) = svc["spec"]["ports"]
                .as_array()
                .and_then(|ps| ps.iter().find(|p| p["port"].as_u64() == Some(port.into())))
            else {
                return Route::Blackhole;
            };
            let ns = svc["metadata"]["namespace"].as_str().unwrap_or_default();
            let name = svc["metadata"]["name"].as_str().unwrap_or_default();
            let eps = endpoints(&Self::slices_of(&store, ns, name), &svc_port["name"]);
            return match eps.len() {
                0 => Route::Refused,
                n => Route::To(eps[rand::random_range(0..n)]),
            };
        }
        if ip.is_loopback() {
            return Route::To(SocketAddr::from((ip, port)));
        }
        Route::Blackhole
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    #[test]
    fn every_name_form_of_the_search_path_is_the_service() {
        for name in [
            "ollama",
            "ollama.lab",
            "ollama.lab.svc",
            "ollama.lab.svc.cluster.local",
        ] {
            assert_eq!(service_of("lab", name), Some(("lab", "ollama")), "{name}");
        }
        assert_eq!(service_of("lab", "ollama.other"), Some(("other", "ollama")));
        assert_eq!(service_of("lab", "ollama.lab.svc.cluster"), None);
        assert_eq!(service_of("lab", "a.b.c.d.e.f"), None);
    }

    /// The API server's service proxy, as ResourceLocation: a port number is the Service
    /// port's name, only ready endpoints count (no terminating fallback), and its errors.
    #[test]
    fn the_service_proxy_takes_ready_endpoints_at_the_named_ports_target() {
        use super::super::resources::{ENDPOINT_SLICES, SERVICES};
        let store = Store::new(100);
        let put = |r, v: Value| store.create(r, v).expect("created");
        put(
            SERVICES,
            json!({"metadata": {"name": "ollama", "namespace": "lab"},
                   "spec": {"clusterIP": "10.96.0.10",
                            "ports": [{"name": "http", "port": 80, "targetPort": 11434}]}}),
        );
        put(
            ENDPOINT_SLICES,
            json!({"metadata": {"name": "ollama-x", "namespace": "lab",
                                "labels": {"kubernetes.io/service-name": "ollama"}},
                   "ports": [{"name": "http", "port": 11434}],
                   "endpoints": [
                       {"addresses": ["127.0.0.2"], "conditions": {"ready": false, "serving": true, "terminating": true}},
                       {"addresses": ["127.0.0.3"], "conditions": {"ready": true, "serving": true, "terminating": false}}]}),
        );
        let at = |port| proxy_endpoints(&store, "lab", "ollama", port);
        let want = Ok(vec![SocketAddr::from(([127, 0, 0, 3], 11434))]);
        assert_eq!(at(Some("80")), want);
        assert_eq!(at(Some("http")), want);
        assert_eq!(at(Some("11434")).unwrap_err().0, 503, "not a Service port");
        assert_eq!(
            proxy_endpoints(&store, "lab", "nope", None).unwrap_err().0,
            404
        );
        // Only the terminating one left: kube-proxy would still send to it, the proxy not.
        store
            .delete(ENDPOINT_SLICES, "lab", "ollama-x")
            .expect("deleted");
        put(
            ENDPOINT_SLICES,
            json!({"metadata": {"name": "ollama-y", "namespace": "lab",
                                "labels": {"kubernetes.io/service-name": "ollama"}},
                   "ports": [{"name": "http", "port": 11434}],
                   "endpoints": [
                       {"addresses": ["127.0.0.2"], "conditions": {"ready": false, "serving": true, "terminating": true}}]}),
        );
        let err = at(Some("80")).unwrap_err();
        assert_eq!(
            err,
            (503, "no endpoints available for service \"ollama\"".into())
        );
    }

    #[test]
    fn ready_endpoints_first_then_serving_terminating_ones() {
        let slice = |eps: Value| {
            Arc::new(json!({"ports": [{"name": "http", "port": 11434}], "endpoints": eps}))
        };
        let name = json!("http");
        let both = slice(json!([
            {"addresses": ["127.0.0.2"], "conditions": {"ready": false, "serving": true, "terminating": true}},
            {"addresses": ["127.0.0.3"], "conditions": {"ready": true, "serving": true, "terminating": false}},
        ]));
        assert_eq!(
            endpoints(&[both], &name),
            [SocketAddr::from(([127, 0, 0, 3], 11434))]
        );
        let old = slice(json!([
            {"addresses": ["127.0.0.2"], "conditions": {"ready": false, "serving": true, "terminating": true}},
            {"addresses": ["127.0.0.4"], "conditions": {"ready": false, "serving": false, "terminating": false}},
        ]));
        assert_eq!(
            endpoints(&[old], &name),
            [SocketAddr::from(([127, 0, 0, 2], 11434))]
        );
        let none = slice(json!([
            {"addresses": ["127.0.0.4"], "conditions": {"ready": false, "serving": false, "terminating": false}},
        ]));
        assert!(endpoints(&[none], &name).is_empty());
    }
}
