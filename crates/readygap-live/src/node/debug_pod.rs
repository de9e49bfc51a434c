//! The spec of a privileged "debug pod" that reaches a node's kernel when neither ssh nor
//! a local tool can: pinned to the node, `hostPID`, privileged, the host's `/proc` mounted
//! read-write at `/host/proc`, tolerating every taint. Creating it, waiting for it and
//! exec-ing [`super::access::debug_pod_exec_argv`] inside it go through the Kubernetes API:
//! see [`super::debug_session::DebugPodSession`].

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, HostPathVolumeSource, Pod, PodSpec, SecurityContext, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::access::DEFAULT_DEBUG_IMAGE;
use super::validate::NodeName;

/// Pod name prefix; the node name follows, cut to keep the pod name ≤ 63 characters.
pub const DEBUG_POD_PREFIX: &str = "readygap-node-";
/// The pod deletes itself after this many seconds even if the caller forgets it.
pub const DEBUG_POD_LIFETIME_SECS: i64 = 600;

/// The debug pod for `node` with the default image.
pub fn debug_pod_manifest(node: &NodeName) -> Pod {
    debug_pod_manifest_with_image(node, DEFAULT_DEBUG_IMAGE)
}

/// The debug pod for `node` running `image` (which must have `sh`, `grep`, `sync`, `sleep`).
pub fn debug_pod_manifest_with_image(node: &NodeName, image: &str) -> Pod {
    let mut name = format!("{DEBUG_POD_PREFIX}{node}");
    name.truncate(63);
    // A pod name is a DNS subdomain: it may not end with '-' or '.'.
    let name = name.trim_end_matches(['-', '.']).to_owned();
    let labels = [
        ("app.kubernetes.io/name", "readygap"),
        ("app.kubernetes.io/component", "node-access"),
    ];
    let labels = labels.map(|(k, v)| (k.to_owned(), v.to_owned()));
    let annotations = BTreeMap::from([("readygap.io/node".to_owned(), node.to_string())]);
    Pod {
        metadata: ObjectMeta {
            name: Some(name),
            labels: Some(BTreeMap::from(labels)),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.to_string()),
            host_pid: Some(true),
            restart_policy: Some("Never".into()),
            active_deadline_seconds: Some(DEBUG_POD_LIFETIME_SECS),
            termination_grace_period_seconds: Some(0),
            automount_service_account_token: Some(false),
            tolerations: Some(vec![Toleration {
                operator: Some("Exists".into()),
                ..Toleration::default()
            }]),
            containers: vec![Container {
                name: "node".into(),
                image: Some(image.to_owned()),
                command: Some(vec!["sleep".into(), DEBUG_POD_LIFETIME_SECS.to_string()]),
                security_context: Some(SecurityContext {
                    privileged: Some(true),
                    ..SecurityContext::default()
                }),
                volume_mounts: Some(vec![VolumeMount {
                    name: "host-proc".into(),
                    mount_path: "/host/proc".into(),
                    ..VolumeMount::default()
                }]),
                ..Container::default()
            }],
            volumes: Some(vec![Volume {
                name: "host-proc".into(),
                host_path: Some(HostPathVolumeSource {
                    path: "/proc".into(),
                    type_: Some("Directory".into()),
                }),
                ..Volume::default()
            }]),
            ..PodSpec::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_is_privileged_hostpid_with_host_proc_on_the_node() {
        let node = NodeName::new("worker-1").expect("name");
        let pod = debug_pod_manifest(&node);
        let spec = pod.spec.as_ref().expect("spec");
        assert_eq!(spec.node_name.as_deref(), Some("worker-1"));
        assert_eq!(spec.host_pid, Some(true));
        let c = &spec.containers[0];
        assert_eq!(
            c.security_context.as_ref().and_then(|s| s.privileged),
            Some(true)
        );
        let mount = &c.volume_mounts.as_ref().expect("mounts")[0];
        assert_eq!(mount.mount_path, "/host/proc");
        let vol = &spec.volumes.as_ref().expect("volumes")[0];
        assert_eq!(
            vol.host_path.as_ref().map(|h| h.path.as_str()),
            Some("/proc")
        );
        assert_eq!(vol.name, mount.name);
        assert_eq!(pod.metadata.name.as_deref(), Some("readygap-node-worker-1"));
        // It serialises to a valid Pod that round-trips.
        let json = serde_json::to_value(&pod).expect("json");
        assert_eq!(json["spec"]["hostPID"], true);
        let back: Pod = serde_json::from_value(json).expect("pod");
        assert_eq!(back, pod);
    }

    #[test]
    fn long_node_names_give_valid_pod_names() {
        // 14 + 48 characters, then the '.' is the 63rd: it must be trimmed.
        let node = NodeName::new(&format!("{}.example.com", "a".repeat(48))).expect("name");
        let name = debug_pod_manifest(&node).metadata.name.expect("name");
        assert_eq!(name, format!("readygap-node-{}", "a".repeat(48)));
        assert!(NodeName::new(&name).is_ok(), "{name}");
    }
}
