//! The API server's proxies: `pods/{name}[:port]/proxy/…` and `services/{name}[:port]/proxy/…`
//! forward the HTTP request to the pod's runtime (a ready endpoint of the service), and
//! `nodes/{name}/proxy/stats/summary` answers as the kubelet Summary API with each pod's
//! container memory from its runtime.

use super::objects::OLLAMA_PORT;
use super::resources::ResourcePath;
use super::resources::{NODES, PODS, SERVICES};
use super::responses::{error, json_response};
use super::server::Api;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::Response;
use futures::TryStreamExt;
use serde_json::{Value, json};
use std::sync::Arc;

/// Split `name`, `name:port` or `scheme:name:port`.
pub fn split_name_port(s: &str) -> (String, Option<u16>) {
    let parts: Vec<&str> = s.split(':').collect();
    match parts.as_slice() {
        [name] => (name.to_string(), None),
        [name, port] => (name.to_string(), port.parse().ok()),
        [_scheme, name, port, ..] => (name.to_string(), port.parse().ok()),
        _ => (s.to_string(), None),
    }
}

/// Forward a proxied request.
pub async fn proxy(
    api: Arc<Api>,
    rp: ResourcePath,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let ns = rp.namespace.clone().unwrap_or_default();
    let (name, port) = split_name_port(rp.name.as_deref().unwrap_or(""));
    let target = match rp.resource {
        PODS => {
            let Some(pod) = api.cluster.store.get(PODS, &ns, &name) else {
                return error(404, "NotFound", &format!("pods \"{name}\" not found"));
            };
            match pod["status"]["podIP"].as_str() {
                Some(ip) => (ip.to_string(), port.unwrap_or(OLLAMA_PORT)),
                None => {
                    return error(
                        503,
                        "ServiceUnavailable",
                        &format!("pod {name} has no IP yet"),
                    );
                }
            }
        }
        // As the real API server's ResourceLocation: a random ready address of the Service's
        // endpoints, at the endpoint port of the named Service port.
        SERVICES => {
            let id = rp.name.as_deref().unwrap_or("");
            let mut parts = id.split(':').collect::<Vec<_>>();
            if parts.len() == 3 {
                parts.remove(0);
            }
            let (svc, port) = (parts[0], parts.get(1).copied().filter(|p| !p.is_empty()));
            match super::service_network::proxy_endpoints(&api.cluster.store, &ns, svc, port) {
                Ok(eps) => {
                    let a = eps[rand::random_range(0..eps.len())];
                    (a.ip().to_string(), a.port())
                }
                Err((404, msg)) => return error(404, "NotFound", &msg),
                Err((code, msg)) => return error(code, "ServiceUnavailable", &msg),
            }
        }
        NODES => return node_proxy(&api, &name, &rp.rest),
        _ => {
            return error(
                404,
                "NotFound",
                "the server could not find the requested resource",
            );
        }
    };
    let (ip, port) = target;
    let mut url = format!("http://{ip}:{port}/{}", rp.rest);
    if let Some(q) = uri.query() {
        url.push('?');
        url.push_str(q);
    }
    let mut req = api.cluster.proxy_http.request(method, &url).body(body);
    for h in [header::CONTENT_TYPE, header::ACCEPT] {
        if let Some(v) = headers.get(&h) {
            req = req.header(h, v);
        }
    }
    match req.send().await {
        Ok(resp) => {
            let status =
                StatusCode::from_u16(resp.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
            let ct = resp.headers().get(header::CONTENT_TYPE).cloned();
            let stream = resp.bytes_stream().map_err(std::io::Error::other);
            let mut b = Response::builder().status(status);
            if let Some(ct) = ct {
                b = b.header(header::CONTENT_TYPE, ct);
            }
            b.body(Body::from_stream(stream))
                .unwrap_or_else(|_| error(502, "InternalError", "building the proxy response"))
        }
        Err(e) => error(
            503,
            "ServiceUnavailable",
            &format!("error trying to reach service: {e}"),
        ),
    }
}

fn node_proxy(api: &Api, node: &str, rest: &str) -> Response {
    if api.cluster.store.get(NODES, "", node).is_none() {
        return error(404, "NotFound", &format!("nodes \"{node}\" not found"));
    }
    match rest {
        "stats/summary" => json_response(StatusCode::OK, &summary(api, node)),
        "healthz" => Response::builder()
            .status(StatusCode::OK)
            .body(Body::from("ok"))
            .unwrap_or_else(|_| error(500, "InternalError", "healthz")),
        _ => error(
            404,
            "NotFound",
            &format!("the lab's kubelet does not serve /{rest}"),
        ),
    }
}

/// Memory capacity of a lab node (its Node's `status.capacity.memory`, 32Gi).
pub const NODE_CAPACITY_BYTES: u64 = 32 << 30;
/// Working set of a lab node's own processes (kernel, systemd, containerd, kubelet), on top
/// of its pods: a small node idles around this.
pub const NODE_SYSTEM_WORKING_SET_BYTES: u64 = 1_200 << 20;

/// The kubelet Summary API of a node. As on a real kubelet, the node's `usageBytes`
/// includes its page cache (here the lab's cache model, so a drop lowers it), its
/// `workingSetBytes` does not (the lab's cache is all inactive file pages), and
/// `availableBytes` is capacity − working set.
pub fn summary(api: &Api, node: &str) -> Value {
    let now = super::objects::time(chrono::Utc::now());
    let mut pods = Vec::new();
    let mut total_ws: u64 = NODE_SYSTEM_WORKING_SET_BYTES;
    for (ns, name, pod_node, rt) in api.cluster.runtimes() {
        if pod_node.as_deref() != Some(node) {
            continue;
        }
        let m = rt.memory();
        total_ws += m.working_set_bytes;
        let pod = api.cluster.store.get(PODS, &ns, &name);
        let uid = pod
            .as_ref()
            .and_then(|p| p["metadata"]["uid"].as_str().map(str::to_string))
            .unwrap_or_default();
        // The runtime runs in the pod's first container, under its own name.
        let container = pod
            .as_ref()
            .and_then(|p| {
                p["spec"]["containers"][0]["name"]
                    .as_str()
                    .map(str::to_string)
            })
            .unwrap_or_else(|| "ollama".into());
        let mem = json!({"time": now, "usageBytes": m.current_bytes, "workingSetBytes": m.working_set_bytes,
                         "rssBytes": m.anon_bytes, "pageFaults": 0, "majorPageFaults": 0,
                         "availableBytes": m.limit_bytes.saturating_sub(m.working_set_bytes)});
        pods.push(json!({
            "podRef": {"name": name, "namespace": ns, "uid": uid},
            "startTime": now,
            "containers": [{"name": container, "startTime": now, "memory": mem, "cpu": {"time": now, "usageNanoCores": 0, "usageCoreNanoSeconds": 0}}],
            "memory": mem,
            "cpu": {"time": now, "usageNanoCores": 0, "usageCoreNanoSeconds": 0}
        }));
    }
    let cached_kb = api
        .cluster
        .node_caches
        .get(node)
        .map(|c| c.cached_kb())
        .unwrap_or(0);
    json!({
        "node": {"nodeName": node, "startTime": now,
                 "memory": {"time": now, "availableBytes": NODE_CAPACITY_BYTES.saturating_sub(total_ws), "usageBytes": total_ws + cached_kb * 1024,
                            "workingSetBytes": total_ws, "rssBytes": total_ws, "pageFaults": 0, "majorPageFaults": 0},
                 "systemContainers": []},
        "pods": pods
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_and_port() {
        assert_eq!(split_name_port("ollama"), ("ollama".into(), None));
        assert_eq!(
            split_name_port("ollama:11434"),
            ("ollama".into(), Some(11434))
        );
        assert_eq!(
            split_name_port("http:ollama:11434"),
            ("ollama".into(), Some(11434))
        );
        assert_eq!(split_name_port("ollama:bad"), ("ollama".into(), None));
    }
}
