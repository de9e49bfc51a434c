//! Which container of a pod serves the runtime, and what an exec into it that cannot work
//! means. A pod with sidecars (Istio, a readiness helper) needs the container named in every
//! exec: without one the API server answers 400 "a container name must be specified for pod
//! P, choose one of: [...]" (kubernetes `pkg/registry/core/pod/strategy.go`,
//! `validateContainer`), and kube-rs only sees the 400 of the refused WebSocket upgrade. An
//! image without `sh` (distroless) fails each exec with "executable file not found". Both
//! are permanent: the memory feed says so once and switches to the kubelet Summary API.

use k8s_openapi::api::core::v1::Pod;

/// The serving container: the one exposing `runtime_port`, else the first.
pub fn serving_container(pod: &Pod, runtime_port: u16) -> Option<String> {
    let containers = &pod.spec.as_ref()?.containers;
    containers
        .iter()
        .find(|c| {
            c.ports
                .iter()
                .flatten()
                .any(|p| p.container_port == i32::from(runtime_port))
        })
        .or_else(|| containers.first())
        .map(|c| c.name.clone())
}

/// Why an exec into the serving container cannot work, if the error says it never will.
pub fn permanent_exec_failure(e: &kube::Error, pod: &str, container: &str) -> Option<String> {
    use kube::client::UpgradeConnectionError;
    match e {
        kube::Error::UpgradeConnection(UpgradeConnectionError::ProtocolSwitch(code))
            if code.as_u16() == 400 =>
        {
            Some(format!(
                "the API server refused the exec into container {container} of pod {pod} \
                 (HTTP 400: a pod with several containers needs one named, and it must be one \
                 of the pod's; pass --container)"
            ))
        }
        kube::Error::Api(s) if s.code == 400 && s.message.contains("container") => Some(format!(
            "the API server refused the exec into container {container} of pod {pod}: {}",
            s.message
        )),
        _ => {
            let text = e.to_string();
            no_shell(&text).then(|| {
                format!(
                    "container {container} of pod {pod} has no `sh` (a distroless image?): {text}"
                )
            })
        }
    }
}

/// Whether an exec failure message says the command does not exist in the image (runc and
/// crun through containerd or CRI-O: `exec: "sh": executable file not found in $PATH`).
pub fn no_shell(message: &str) -> bool {
    message.contains("executable file not found")
        || (message.contains("exec") && message.contains("no such file or directory"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn the_container_exposing_the_runtime_port_serves() {
        let p = pod(serde_json::json!({"spec": {"containers": [
            {"name": "istio-proxy", "ports": [{"containerPort": 15090}]},
            {"name": "server", "ports": [{"containerPort": 11434}]},
        ]}}));
        assert_eq!(serving_container(&p, 11434).as_deref(), Some("server"));
        // No container exposes it: the first.
        assert_eq!(serving_container(&p, 8080).as_deref(), Some("istio-proxy"));
        let none = pod(serde_json::json!({"spec": {"containers": []}}));
        assert_eq!(serving_container(&none, 11434), None);
    }

    #[test]
    fn permanent_failures_are_told_apart() {
        let refused = kube::Error::UpgradeConnection(
            kube::client::UpgradeConnectionError::ProtocolSwitch(http::StatusCode::BAD_REQUEST),
        );
        let why = permanent_exec_failure(&refused, "p", "server").expect("permanent");
        assert!(
            why.contains("container server of pod p") && why.contains("400"),
            "{why}"
        );
        let busy =
            kube::Error::UpgradeConnection(kube::client::UpgradeConnectionError::ProtocolSwitch(
                http::StatusCode::SERVICE_UNAVAILABLE,
            ));
        assert_eq!(permanent_exec_failure(&busy, "p", "server"), None);
        let shell = kube::Error::Service(
            "OCI runtime exec failed: exec failed: unable to start container process: exec: \"sh\": executable file not found in $PATH: unknown".into(),
        );
        let why = permanent_exec_failure(&shell, "p", "server").expect("permanent");
        assert!(why.contains("no `sh`"), "{why}");
    }
}
