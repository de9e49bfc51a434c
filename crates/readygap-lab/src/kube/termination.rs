//! How a deleted pod's containers stop, as on a real node: the kubelet sends SIGTERM, waits
//! at most the grace period, then SIGKILL (exit 137). A process that handles SIGTERM (the
//! Ollama runtime: `cmd/cmd.go` of ollama/ollama traps SIGINT/SIGTERM and shuts the server
//! down) exits within its shutdown time and the pod leaves the API as soon as every container
//! has stopped (kubelet `pkg/kubelet/kuberuntime/kuberuntime_container.go` killContainer:
//! the grace period is an upper bound, not a wait). PID 1 gets no default signal action in a
//! container, so a shell or `sleep` as PID 1 without a trap (the `sh -c` readiness sidecar of
//! the study's manifests, `kubectl run … -- sleep infinity`) ignores SIGTERM and holds the
//! pod for the whole grace period (the published readiness data: the old endpoint is removed
//! 30.0–31.1 s after it turned not ready, the default 30 s grace).

use serde_json::Value;
use std::time::Duration;

/// How one container answers SIGTERM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnSigterm {
    /// Exits by itself after this long (code 0).
    Exits(Duration),
    /// Keeps running until SIGKILL at the end of the grace period (exit 137).
    Ignores,
}

/// Whether a container's PID 1 ignores SIGTERM: a shell or `sleep` that does not `exec`
/// another program and sets no `trap`.
pub fn ignores_sigterm(container: &Value) -> bool {
    let argv: Vec<&str> = ["command", "args"]
        .iter()
        .filter_map(|k| container[*k].as_array())
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let Some(first) = argv.first() else {
        return false;
    };
    let prog = first.rsplit('/').next().unwrap_or(first);
    let script = argv.join(" ");
    matches!(prog, "sh" | "bash" | "ash" | "dash" | "sleep")
        && !script.contains("trap ")
        && !script.contains("exec ")
}

/// The shutdown time of the Ollama runtime on SIGTERM: 0.5–1.0 s (unscaled), fixed per pod
/// (from its name, so no draw of the lab's seeded timings moves).
pub fn runtime_shutdown(pod_name: &str) -> Duration {
    let h = pod_name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    Duration::from_millis(500 + h % 501)
}

/// How the modelled container (the first) of `pod` answers SIGTERM, and whether another
/// container of the pod (a sidecar) ignores it and so holds the pod until the grace ends.
pub fn plan(pod: &Value, pod_name: &str, runs_ollama: bool) -> (OnSigterm, bool) {
    let containers = pod["spec"]["containers"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let first = containers.first().unwrap_or(&Value::Null);
    let main = if !runs_ollama && ignores_sigterm(first) {
        OnSigterm::Ignores
    } else if runs_ollama {
        OnSigterm::Exits(runtime_shutdown(pod_name))
    } else {
        OnSigterm::Exits(Duration::from_millis(100))
    };
    let sidecar_holds = containers.iter().skip(1).any(ignores_sigterm);
    (main, sidecar_holds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shells_and_sleep_as_pid_1_ignore_sigterm() {
        assert!(ignores_sigterm(
            &json!({"command": ["sh", "-c", "while true; do sleep 1; done"]})
        ));
        assert!(ignores_sigterm(&json!({"args": ["sleep", "infinity"]})));
        assert!(ignores_sigterm(
            &json!({"command": ["/bin/bash", "-c", "x"]})
        ));
        assert!(!ignores_sigterm(
            &json!({"command": ["sh", "-c", "exec ollama serve"]})
        ));
        assert!(!ignores_sigterm(
            &json!({"command": ["sh", "-c", "trap 'exit 0' TERM; sleep 9"]})
        ));
        assert!(!ignores_sigterm(&json!({"image": "ollama/ollama:0.6.8"})));
        assert!(!ignores_sigterm(&json!({"command": ["ollama", "serve"]})));
    }

    #[test]
    fn the_runtime_exits_in_half_a_second_to_a_second_and_a_sidecar_holds_the_pod() {
        let pod = json!({"spec": {"containers": [
            {"name": "ollama", "image": "ollama/ollama:0.6.8"},
            {"name": "probe", "image": "curlimages/curl", "command": ["sh", "-c", "sleep 3600"]},
        ]}});
        let (main, held) = plan(&pod, "ollama-abc", true);
        let OnSigterm::Exits(d) = main else {
            panic!("the runtime handles SIGTERM")
        };
        assert!((500..=1000).contains(&d.as_millis()), "{d:?}");
        assert!(held);
        let plain = json!({"spec": {"containers": [{"name": "ollama", "image": "ollama/ollama"}]}});
        assert!(!plan(&plain, "x", true).1);
    }
}
