//! The parts of a pod spec the readiness-contract verdicts cite: the serving container's
//! readiness, liveness and startup probes (kind, target, timings) and the volume its models
//! directory is mounted from. Pure: tests call it on fixtures.

use k8s_openapi::api::core::v1::{Container, Pod, Probe, Volume};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use readygap_core::event::{PodSpecFacts, ProbeFacts};

/// The runtime port the serving container is recognised by when it has no better name.
const OLLAMA_PORT: i32 = crate::sources::runtime::RuntimeKind::Ollama.default_port() as i32;
/// Mount paths that hold an LLM runtime's models (Ollama's `~/.ollama`, `/models` of
/// llama.cpp and vLLM images, a Hugging Face cache).
const MODEL_DIRS: [&str; 4] = [".ollama", "/models", "huggingface", "/root/.cache"];

/// The serving container's name and the facts of the pod's spec, `None` when it has no
/// containers.
pub fn pod_spec_facts(pod: &Pod) -> Option<(String, PodSpecFacts)> {
    let spec = pod.spec.as_ref()?;
    let c = spec
        .containers
        .iter()
        .find(|c| {
            c.ports
                .as_ref()
                .is_some_and(|ps| ps.iter().any(|p| p.container_port == OLLAMA_PORT))
        })
        .or_else(|| spec.containers.iter().find(|c| c.readiness_probe.is_some()))
        .or(spec.containers.first())?;
    let (models_volume, models_mount) = models_volume(c, spec.volumes.as_deref().unwrap_or(&[]));
    let facts = PodSpecFacts {
        readiness: c.readiness_probe.as_ref().map(probe_facts),
        liveness: c.liveness_probe.as_ref().map(probe_facts),
        startup: c.startup_probe.as_ref().map(probe_facts),
        models_volume,
        models_mount,
        gpus: gpus(c),
    };
    Some((c.name.clone(), facts))
}

/// `nvidia.com/gpu` of the container's limits (where extended resources must be), else of
/// its requests.
fn gpus(c: &Container) -> u32 {
    let r = c.resources.as_ref();
    let of = |m: Option<
        &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >| {
        m.and_then(|m| m.get("nvidia.com/gpu"))
            .and_then(|q| q.0.parse::<u32>().ok())
    };
    of(r.and_then(|r| r.limits.as_ref()))
        .or_else(|| of(r.and_then(|r| r.requests.as_ref())))
        .unwrap_or(0)
}

fn port(p: &IntOrString) -> String {
    match p {
        IntOrString::Int(n) => format!(":{n}"),
        IntOrString::String(s) => format!(":{s}"),
    }
}

/// Whether a probe's command or path sends an inference.
fn is_inference(text: &str) -> bool {
    ["generate", "/api/chat", "completion", "ready-inference"]
        .iter()
        .any(|w| text.contains(w))
}

/// Defaults as the API server fills them (core/v1 defaults.go): period 10 s, timeout 1 s,
/// failureThreshold 3.
fn probe_facts(p: &Probe) -> ProbeFacts {
    let (kind, target) = if let Some(h) = &p.http_get {
        (
            "httpGet",
            format!("{} {}", h.path.as_deref().unwrap_or("/"), port(&h.port)),
        )
    } else if let Some(t) = &p.tcp_socket {
        ("tcpSocket", port(&t.port))
    } else if let Some(e) = &p.exec {
        let cmd = e.command.as_deref().unwrap_or(&[]).join(" ");
        let mut short: String = cmd.chars().take(80).collect();
        if short.len() < cmd.len() {
            short.push('…');
        }
        ("exec", short)
    } else if let Some(g) = &p.grpc {
        ("grpc", format!(":{}", g.port))
    } else {
        ("none", String::new())
    };
    let full = p
        .exec
        .as_ref()
        .and_then(|e| e.command.as_ref())
        .map(|c| c.join(" "))
        .or_else(|| p.http_get.as_ref().and_then(|h| h.path.clone()))
        .unwrap_or_default();
    let n = |v: Option<i32>, d: u32| v.map(|v| v.max(0) as u32).unwrap_or(d);
    ProbeFacts {
        kind: kind.into(),
        target,
        inference: is_inference(&full),
        initial_delay_seconds: n(p.initial_delay_seconds, 0),
        period_seconds: n(p.period_seconds, 10),
        timeout_seconds: n(p.timeout_seconds, 1),
        failure_threshold: n(p.failure_threshold, 3),
    }
}

/// The volume mounted at the container's models directory, as `emptyDir`,
/// `persistentVolumeClaim NAME`, `hostPath PATH`, ..., and the mount path.
fn models_volume(c: &Container, volumes: &[Volume]) -> (Option<String>, Option<String>) {
    let mounts = c.volume_mounts.as_deref().unwrap_or(&[]);
    let Some(m) = mounts
        .iter()
        .find(|m| MODEL_DIRS.iter().any(|d| m.mount_path.contains(d)))
        .or_else(|| mounts.iter().find(|m| m.name.contains("model")))
    else {
        return (None, None);
    };
    let v = volumes.iter().find(|v| v.name == m.name);
    let kind = v.map(|v| {
        if v.empty_dir.is_some() {
            "emptyDir".to_string()
        } else if let Some(p) = &v.persistent_volume_claim {
            format!("persistentVolumeClaim {}", p.claim_name)
        } else if let Some(h) = &v.host_path {
            format!("hostPath {}", h.path)
        } else if v.config_map.is_some() {
            "configMap".to_string()
        } else if v.ephemeral.is_some() {
            "ephemeral volume".to_string()
        } else if v.nfs.is_some() {
            "nfs".to_string()
        } else {
            format!("volume {}", v.name)
        }
    });
    (kind, Some(m.mount_path.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).expect("pod")
    }

    #[test]
    fn names_the_probes_and_the_models_volume() {
        let p = pod(serde_json::json!({"spec": {"containers": [
            {"name": "sidecar"},
            {"name": "ollama", "ports": [{"containerPort": 11434}],
             "readinessProbe": {"httpGet": {"path": "/api/tags", "port": 11434}, "periodSeconds": 1},
             "livenessProbe": {"exec": {"command": ["sh", "-c", "curl -s localhost:11434/api/generate -d x"]},
                               "timeoutSeconds": 5, "failureThreshold": 1},
             "volumeMounts": [{"name": "data", "mountPath": "/root/.ollama"}]}],
            "volumes": [{"name": "data", "emptyDir": {}}]}}));
        let (serving, f) = pod_spec_facts(&p).expect("facts");
        assert_eq!(serving, "ollama", "the container exposing 11434");
        let r = f.readiness.expect("readiness");
        assert_eq!(r.label(), "httpGet /api/tags :11434");
        assert!(!r.inference);
        assert_eq!(
            (r.period_seconds, r.timeout_seconds, r.failure_threshold),
            (1, 1, 3)
        );
        let l = f.liveness.expect("liveness");
        assert_eq!(l.kind, "exec");
        assert!(l.inference);
        assert_eq!((l.timeout_seconds, l.failure_threshold), (5, 1));
        assert!(f.startup.is_none());
        assert_eq!(f.models_volume.as_deref(), Some("emptyDir"));
        assert_eq!(f.models_mount.as_deref(), Some("/root/.ollama"));
    }

    #[test]
    fn the_gpus_asked_for_are_read_from_limits_then_requests() {
        let with = |resources: serde_json::Value| {
            pod(
                serde_json::json!({"spec": {"containers": [{"name": "vllm", "resources": resources}]}}),
            )
        };
        let gpus = |p: &Pod| pod_spec_facts(p).map(|(_, f)| f.gpus);
        assert_eq!(
            gpus(&with(
                serde_json::json!({"limits": {"nvidia.com/gpu": "2"}})
            )),
            Some(2)
        );
        assert_eq!(
            gpus(&with(
                serde_json::json!({"requests": {"nvidia.com/gpu": "1"}})
            )),
            Some(1)
        );
        assert_eq!(
            gpus(&with(serde_json::json!({"limits": {"memory": "4Gi"}}))),
            Some(0)
        );
    }

    #[test]
    fn a_pvc_and_the_repository_probe_script() {
        let p = pod(serde_json::json!({"spec": {"containers": [
            {"name": "ollama",
             "readinessProbe": {"exec": {"command": ["bash", "/etc/readygap/ready-inference.sh"]}},
             "volumeMounts": [{"name": "models", "mountPath": "/root/.ollama"}]}],
            "volumes": [{"name": "models", "persistentVolumeClaim": {"claimName": "ollama-models"}}]}}));
        let (_, f) = pod_spec_facts(&p).expect("facts");
        assert!(f.readiness.expect("readiness").inference);
        assert_eq!(
            f.models_volume.as_deref(),
            Some("persistentVolumeClaim ollama-models")
        );
        // No models mount: the image's own disk.
        let bare = pod(serde_json::json!({"spec": {"containers": [{"name": "ollama"}]}}));
        let (_, f) = pod_spec_facts(&bare).expect("facts");
        assert_eq!((f.models_volume, f.readiness), (None, None));
    }
}
