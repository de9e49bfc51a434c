//! What a lab pod's network looks like from inside one of its containers: the pod's own
//! loopback (`localhost`, `127.0.0.1` are the pod's address, shared by its containers), the
//! cluster DNS with the pod's search path, and kube-proxy's Service rules. The cluster side
//! (`kube::service_network`) answers names and routes; this module only asks it.
//!
//! Every connection the lab makes goes to a loopback address (pod IPs are 127.0.0.N): a
//! route to anything else is never dialled (it is a [`Route::Blackhole`], as a packet to an
//! address nobody answers for).

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

/// Where a connection to an address goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// To this socket (a pod's address and port; always loopback).
    To(SocketAddr),
    /// Refused at once: a Service without ready endpoints (kube-proxy's REJECT rule), or a
    /// pod address where nothing listens.
    Refused,
    /// Nothing answers: the connection attempt hangs until the client gives up.
    Blackhole,
}

/// The cluster as a pod's network sees it: DNS and kube-proxy.
pub trait ClusterNetwork: Send + Sync {
    /// The address a DNS name has for a pod in `namespace` (its search path applied), or
    /// None (NXDOMAIN).
    fn resolve(&self, namespace: &str, name: &str) -> Option<Ipv4Addr>;
    /// Where a connection to `ip:port` goes.
    fn route(&self, ip: Ipv4Addr, port: u16) -> Route;
}

/// One pod's network: its namespace, its address, and the cluster behind them.
#[derive(Clone, Default)]
pub struct PodNetwork {
    pub namespace: String,
    /// The pod's IP (None: not assigned; the pod's loopback then reaches nothing).
    pub pod_ip: Option<Ipv4Addr>,
    /// None: a container outside any cluster (unit tests): only the pod itself exists.
    pub cluster: Option<Arc<dyn ClusterNetwork>>,
}

/// A name the resolver does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved;

impl PodNetwork {
    /// The address of `host` (a name or an IPv4 literal) as the pod's resolver answers.
    pub fn resolve(&self, host: &str) -> Result<Ipv4Addr, Unresolved> {
        let host = host.trim_end_matches('.');
        if host.eq_ignore_ascii_case("localhost") {
            return Ok(Ipv4Addr::LOCALHOST);
        }
        if let Ok(ip) = host.parse::<Ipv4Addr>() {
            return Ok(ip);
        }
        self.cluster
            .as_ref()
            .and_then(|c| c.resolve(&self.namespace, &host.to_ascii_lowercase()))
            .ok_or(Unresolved)
    }

    /// Where a connection to `ip:port` goes from this pod.
    pub fn route(&self, ip: Ipv4Addr, port: u16) -> Route {
        // The pod's own loopback: all its containers share one network namespace.
        if ip.is_loopback() && (ip == Ipv4Addr::LOCALHOST || Some(ip) == self.pod_ip) {
            return match self.pod_ip {
                Some(own) => Route::To(SocketAddr::from((own, port))),
                None => Route::Refused,
            };
        }
        let route = match &self.cluster {
            Some(c) => c.route(ip, port),
            None => Route::Blackhole,
        };
        match route {
            Route::To(addr) if !addr.ip().is_loopback() => Route::Blackhole,
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct OneService;
    impl ClusterNetwork for OneService {
        fn resolve(&self, ns: &str, name: &str) -> Option<Ipv4Addr> {
            (ns == "lab" && name == "ollama").then_some(Ipv4Addr::new(10, 96, 0, 50))
        }
        fn route(&self, ip: Ipv4Addr, port: u16) -> Route {
            match (ip.octets(), port) {
                ([10, 96, 0, 50], 11434) => Route::To(SocketAddr::from(([127, 0, 0, 7], 11434))),
                ([10, 96, 0, 50], _) => Route::Blackhole,
                ([10, 1, 2, 3], _) => Route::To(SocketAddr::from(([10, 1, 2, 3], port))),
                _ => Route::Refused,
            }
        }
    }

    fn pod(ip: Option<Ipv4Addr>) -> PodNetwork {
        PodNetwork {
            namespace: "lab".into(),
            pod_ip: ip,
            cluster: Some(Arc::new(OneService)),
        }
    }

    #[test]
    fn localhost_is_the_pod_itself_and_names_go_to_the_cluster() {
        let own = Ipv4Addr::new(127, 0, 0, 3);
        let net = pod(Some(own));
        let local = net.resolve("localhost").unwrap();
        assert_eq!(net.route(local, 80), Route::To(SocketAddr::from((own, 80))));
        assert_eq!(
            net.route(Ipv4Addr::LOCALHOST, 11434),
            Route::To(SocketAddr::from((own, 11434)))
        );
        assert_eq!(pod(None).route(Ipv4Addr::LOCALHOST, 80), Route::Refused);
        let svc = net.resolve("Ollama.").unwrap();
        assert_eq!(
            net.route(svc, 11434),
            Route::To(SocketAddr::from(([127, 0, 0, 7], 11434)))
        );
        assert_eq!(net.route(svc, 80), Route::Blackhole);
        assert_eq!(net.resolve("nope"), Err(Unresolved));
    }

    #[test]
    fn a_route_off_loopback_is_never_dialled() {
        let net = pod(Some(Ipv4Addr::new(127, 0, 0, 3)));
        assert_eq!(net.route(Ipv4Addr::new(10, 1, 2, 3), 80), Route::Blackhole);
        assert_eq!(
            PodNetwork::default().route(Ipv4Addr::new(127, 0, 0, 9), 80),
            Route::Blackhole
        );
    }
}
