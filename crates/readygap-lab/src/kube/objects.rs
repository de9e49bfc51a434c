//! Builders of the lab's Kubernetes objects (namespace, nodes, the `ollama` Deployment,
//! Service, PVC, pods from a template, events), written as JSON and checked by a round trip
//! through the k8s-openapi types so what the API serves is what real clients expect.

use crate::scenario::{Readiness, Scenario};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The lab's namespace.
pub const NAMESPACE: &str = "llm-recovery-lab";
/// The names of the lab's nodes.
pub const NODE_NAMES: &[&str] = &["lab-node-1", "lab-node-2"];
/// The Ollama image of the Deployment.
pub const OLLAMA_IMAGE: &str = "ollama/ollama:0.6.8";
/// The Ollama port.
pub const OLLAMA_PORT: u16 = 11434;
/// The Kubernetes version the lab reports.
pub const KUBE_VERSION: &str = "v1.33.4";

/// Seconds-precision RFC 3339, as `metav1.Time` serializes.
pub fn time(ts: DateTime<Utc>) -> String {
    ts.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Microsecond RFC 3339, as `metav1.MicroTime` serializes.
pub fn micro_time(ts: DateTime<Utc>) -> String {
    ts.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// Check a JSON object against a k8s-openapi type and return its canonical serialization.
pub fn typed<T: DeserializeOwned + Serialize>(v: Value) -> Result<Value, String> {
    let t: T = serde_json::from_value(v).map_err(|e| e.to_string())?;
    serde_json::to_value(&t).map_err(|e| e.to_string())
}

/// A memory quantity as Kubernetes prints it (`4Gi`, `512Mi`).
pub fn memory_quantity(bytes: u64) -> String {
    const GI: u64 = 1 << 30;
    const MI: u64 = 1 << 20;
    if bytes.is_multiple_of(GI) {
        format!("{}Gi", bytes / GI)
    } else if bytes.is_multiple_of(MI) {
        format!("{}Mi", bytes / MI)
    } else {
        bytes.to_string()
    }
}

/// Parse a memory quantity (`4Gi`, `512Mi`, `1G`, plain bytes) into bytes: the parser
/// readygap itself uses for a Node's capacity, so the lab and readygap read quantities alike.
pub fn parse_quantity(q: &str) -> Option<u64> {
    readygap_core::units::parse_memory(q)
}

/// The namespace.
pub fn namespace(name: &str) -> Value {
    json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"}
    })
}

/// Give a node `n` GPUs (`nvidia.com/gpu` capacity and allocatable, as the NVIDIA device
/// plugin advertises them).
pub fn with_gpus(mut node: Value, n: u32) -> Value {
    for key in ["capacity", "allocatable"] {
        node["status"][key]["nvidia.com/gpu"] = json!(n.to_string());
    }
    node
}

/// A Ready node (`index` numbers them from 1).
pub fn node(name: &str, index: usize, now: DateTime<Utc>) -> Value {
    let t = time(now);
    let cond = |ty: &str, status: &str, reason: &str, msg: &str| {
        json!({"type": ty, "status": status, "reason": reason, "message": msg,
               "lastHeartbeatTime": t, "lastTransitionTime": t})
    };
    json!({
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "beta.kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": "lab-cpu-8x32",
            "topology.kubernetes.io/zone": format!("lab-zone-{index}"),
            "readygap.dev/lab": "true"
        }},
        "spec": {"providerID": format!("lab://readygap/{name}"), "podCIDR": format!("10.244.{index}.0/24")},
        "status": {
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "allocatable": {"cpu": "7800m", "memory": "30Gi", "pods": "110", "ephemeral-storage": "95Gi"},
            "conditions": [
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                cond("Ready", "True", "KubeletReady", "kubelet is posting ready status")
            ],
            "addresses": [
                {"type": "InternalIP", "address": format!("127.0.0.{}", index + 1)},
                {"type": "Hostname", "address": name}
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": format!("lab{index:029}"), "systemUUID": format!("lab-{index}"),
                "bootID": format!("lab-boot-{index}"), "kernelVersion": "6.8.0-lab",
                "osImage": "readygap lab", "containerRuntimeVersion": "containerd://1.7.27",
                "kubeletVersion": KUBE_VERSION, "kubeProxyVersion": KUBE_VERSION,
                "operatingSystem": "linux", "architecture": "amd64"
            }
        }
    })
}

/// The `ollama` Service.
pub fn service(ns: &str) -> Value {
    json!({
        "metadata": {"name": "ollama", "namespace": ns, "labels": {"app": "ollama"}},
        "spec": {
            "type": "ClusterIP", "clusterIP": "10.96.0.50", "clusterIPs": ["10.96.0.50"],
            "selector": {"app": "ollama"},
            "ports": [{"name": "http", "port": OLLAMA_PORT, "targetPort": OLLAMA_PORT, "protocol": "TCP"}],
            "sessionAffinity": "None", "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
            "internalTrafficPolicy": "Cluster"
        },
        "status": {"loadBalancer": {}}
    })
}

/// The `ollama-models` PVC (bound).
pub fn pvc(ns: &str) -> Value {
    json!({
        "metadata": {"name": "ollama-models", "namespace": ns, "labels": {"app": "ollama"},
                     "finalizers": ["kubernetes.io/pvc-protection"]},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "20Gi"}},
                 "storageClassName": "lab-local", "volumeMode": "Filesystem",
                 "volumeName": "pvc-lab-ollama-models"},
        "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "20Gi"}}
    })
}

/// The readiness probe of a scenario (None for the baseline).
pub fn readiness_probe(scenario: Scenario, model: &str) -> Option<Value> {
    let period = scenario.probe_period_seconds();
    match scenario.readiness() {
        Readiness::Started => None,
        Readiness::Http => Some(json!({
            "httpGet": {"path": "/api/tags", "port": OLLAMA_PORT, "scheme": "HTTP"},
            "periodSeconds": period, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3
        })),
        Readiness::Inference => Some(json!({
            "exec": {"command": ["sh", "-c", format!(
                "curl -sf http://127.0.0.1:{OLLAMA_PORT}/api/generate -d '{{\"model\":\"{model}\",\"prompt\":\"Reply with exactly: READY\",\"stream\":false}}' | grep -q '\"done\":true'"
            )]},
            "periodSeconds": period, "timeoutSeconds": 120, "successThreshold": 1, "failureThreshold": 3
        })),
    }
}

/// A Deployment with defaults filled as the API server fills them.
pub fn deployment(
    ns: &str,
    name: &str,
    replicas: i32,
    image: &str,
    memory_limit_bytes: u64,
    scenario: Scenario,
    model: &str,
) -> Value {
    let (surge, unavailable) = scenario.strategy();
    let mut container = json!({
        "name": name, "image": image,
        "ports": [{"name": "http", "containerPort": OLLAMA_PORT, "protocol": "TCP"}],
        "env": [{"name": "OLLAMA_HOST", "value": format!("0.0.0.0:{OLLAMA_PORT}")},
                {"name": "OLLAMA_KEEP_ALIVE", "value": "24h"}],
        "resources": {
            "limits": {"cpu": "2", "memory": memory_quantity(memory_limit_bytes)},
            "requests": {"cpu": "2", "memory": memory_quantity(memory_limit_bytes)}
        },
        "volumeMounts": [{"name": "models", "mountPath": "/root/.ollama"}],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent"
    });
    if let Some(p) = readiness_probe(scenario, model) {
        container["readinessProbe"] = p;
    }
    if scenario.aggressive_liveness() {
        // The readiness probe's inference reused as liveness, with a short timeout and no
        // startupProbe: it cannot pass while the model loads.
        container["livenessProbe"] = json!({
            "exec": {"command": ["sh", "-c", format!(
                "curl -sf -m 5 http://127.0.0.1:{OLLAMA_PORT}/api/generate -d '{{\"model\":\"{model}\",\"prompt\":\"ping\",\"stream\":false}}'"
            )]},
            "periodSeconds": 5, "timeoutSeconds": 5, "successThreshold": 1, "failureThreshold": 2
        });
    }
    if scenario.gpu() {
        // manifests/overlays/gpu/gpu.yaml: one GPU, requested and limited.
        container["resources"]["limits"]["nvidia.com/gpu"] = json!("1");
        container["resources"]["requests"]["nvidia.com/gpu"] = json!("1");
        if let Some(env) = container["env"].as_array_mut() {
            env.push(
                json!({"name": "CUDA_CACHE_PATH", "value": "/root/.ollama/cuda-compute-cache"}),
            );
        }
    }
    let volume = if scenario.models_on_emptydir() {
        json!({"name": "models", "emptyDir": {}})
    } else {
        json!({"name": "models", "persistentVolumeClaim": {"claimName": "ollama-models"}})
    };
    let mut deployment = json!({
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name}, "generation": 1,
                     "annotations": {"deployment.kubernetes.io/revision": "1"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}},
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [container],
                    "volumes": [volume],
                    "restartPolicy": "Always",
                    "terminationGracePeriodSeconds": 30,
                    "dnsPolicy": "ClusterFirst",
                    "schedulerName": "default-scheduler",
                    "securityContext": {}
                }
            }
        },
        "status": {}
    });
    if scenario.gpu() {
        deployment["spec"]["template"]["spec"]["tolerations"] =
            json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]);
    }
    deployment
}

/// Bind a newly created PVC as the lab's provisioner would: a volume of the requested size
/// on the `lab-local` class (the lab stores data on no volume; the runtime's model disk is
/// the lab's shared disk).
pub fn bind_pvc(pvc: &mut Value) {
    let uid_part = pvc["metadata"]["name"]
        .as_str()
        .unwrap_or("claim")
        .to_string();
    let spec = &mut pvc["spec"];
    if spec["storageClassName"].is_null() {
        spec["storageClassName"] = json!("lab-local");
    }
    if spec["volumeMode"].is_null() {
        spec["volumeMode"] = json!("Filesystem");
    }
    if spec["volumeName"].is_null() {
        spec["volumeName"] = json!(format!("pvc-lab-{uid_part}"));
    }
    let modes = spec["accessModes"].clone();
    let size = spec["resources"]["requests"]["storage"].clone();
    pvc["status"] = json!({"phase": "Bound", "accessModes": modes, "capacity": {"storage": size}});
}

/// A Secret as the API server stores it: `stringData` (write-only) merged into `data`,
/// base64, over the keys already there, and `type` Opaque when empty (k8s.io/kubernetes
/// `pkg/apis/core/v1` conversion and defaults).
pub fn secret_as_stored(mut secret: Value) -> Value {
    use base64::Engine;
    let Some(obj) = secret.as_object_mut() else {
        return secret;
    };
    if let Some(Value::Object(strings)) = obj.remove("stringData") {
        if !obj.get("data").is_some_and(Value::is_object) {
            obj.insert("data".into(), json!({}));
        }
        let data = obj["data"].as_object_mut().unwrap();
        for (k, v) in strings {
            let text = v.as_str().unwrap_or_default().as_bytes();
            let encoded = base64::engine::general_purpose::STANDARD.encode(text);
            data.insert(k, json!(encoded));
        }
    }
    if obj
        .get("type")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        obj.insert("type".into(), json!("Opaque"));
    }
    secret
}

/// Fill the defaults the API server fills for a new Service: type, a cluster IP from
/// `cluster_ip`, session affinity, and each port's protocol and target port.
pub fn default_service(svc: &mut Value, cluster_ip: impl FnOnce() -> String) {
    let spec = &mut svc["spec"];
    if spec["type"].is_null() {
        spec["type"] = json!("ClusterIP");
    }
    if spec["clusterIP"].is_null() {
        let ip = cluster_ip();
        spec["clusterIP"] = json!(ip);
        spec["clusterIPs"] = json!([ip]);
    }
    for (k, v) in [
        ("sessionAffinity", json!("None")),
        ("ipFamilies", json!(["IPv4"])),
        ("ipFamilyPolicy", json!("SingleStack")),
        ("internalTrafficPolicy", json!("Cluster")),
    ] {
        if spec[k].is_null() {
            spec[k] = v;
        }
    }
    if let Some(ports) = spec["ports"].as_array_mut() {
        for p in ports {
            if p["protocol"].is_null() {
                p["protocol"] = json!("TCP");
            }
            if p["targetPort"].is_null() {
                p["targetPort"] = p["port"].clone();
            }
        }
    }
    if svc["status"].is_null() {
        svc["status"] = json!({"loadBalancer": {}});
    }
}

/// The status of a Job that completed at `now` (the lab stores Jobs without running them).
pub fn job_complete_status(now: DateTime<Utc>) -> Value {
    let t = time(now);
    let cond = |ty: &str, reason: &str, msg: &str| {
        json!({"type": ty, "status": "True", "reason": reason, "message": msg,
               "lastProbeTime": t, "lastTransitionTime": t})
    };
    json!({
        "startTime": t, "completionTime": t, "succeeded": 1, "active": 0, "failed": 0,
        "ready": 0, "terminating": 0,
        "uncountedTerminatedPods": {},
        "conditions": [
            cond("SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods"),
            cond("Complete", "CompletionsReached", "Reached expected number of succeeded pods")
        ]
    })
}

/// An `involvedObject`/`regarding` reference to an object.
pub fn object_ref(obj: &Value) -> Value {
    json!({
        "kind": obj["kind"], "apiVersion": obj["apiVersion"],
        "name": obj["metadata"]["name"], "namespace": obj["metadata"]["namespace"],
        "uid": obj["metadata"]["uid"], "resourceVersion": obj["metadata"]["resourceVersion"]
    })
}

/// A core/v1 Event and its events.k8s.io/v1 twin.
#[allow(clippy::too_many_arguments)]
pub fn events(
    regarding: &Value,
    ns: &str,
    name: &str,
    ty: &str,
    reason: &str,
    message: &str,
    component: &str,
    host: &str,
    now: DateTime<Utc>,
) -> (Value, Value) {
    let r = object_ref(regarding);
    let core = json!({
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": time(now)},
        "involvedObject": r, "reason": reason, "message": message, "type": ty,
        "source": {"component": component, "host": host},
        "firstTimestamp": time(now), "lastTimestamp": time(now), "count": 1,
        "eventTime": null, "reportingComponent": component, "reportingInstance": host
    });
    let new = json!({
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": time(now)},
        "eventTime": micro_time(now), "regarding": r, "reason": reason, "note": message,
        "type": ty, "action": reason, "reportingController": component,
        "reportingInstance": if host.is_empty() { component.to_string() } else { format!("{component}-{host}") },
        "deprecatedCount": 1, "deprecatedFirstTimestamp": time(now), "deprecatedLastTimestamp": time(now),
        "deprecatedSource": {"component": component, "host": host}
    });
    (core, new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolumeClaim, Service};

    #[test]
    fn a_secret_is_stored_with_its_string_data_in_data_and_a_type() {
        let s = secret_as_stored(json!({
            "metadata": {"name": "s"},
            "data": {"a": "eA==", "b": "eQ=="},
            "stringData": {"b": "over", "c": "p@ss"}
        }));
        assert_eq!(
            s,
            json!({
                "metadata": {"name": "s"},
                "data": {"a": "eA==", "b": "b3Zlcg==", "c": "cEBzcw=="},
                "type": "Opaque"
            })
        );
        let tls = secret_as_stored(json!({"type": "kubernetes.io/tls", "stringData": {"k": ""}}));
        assert_eq!(tls, json!({"type": "kubernetes.io/tls", "data": {"k": ""}}));
    }

    #[test]
    fn objects_parse_as_k8s_openapi_types() {
        let now = Utc::now();
        typed::<Namespace>(namespace(NAMESPACE)).unwrap();
        typed::<Node>(node("lab-node-1", 1, now)).unwrap();
        typed::<Service>(service(NAMESPACE)).unwrap();
        typed::<PersistentVolumeClaim>(pvc(NAMESPACE)).unwrap();
        for sc in [
            Scenario::Baseline,
            Scenario::HttpReadiness,
            Scenario::Rollout,
            Scenario::Emptydir,
        ] {
            let d = typed::<Deployment>(deployment(
                NAMESPACE,
                "ollama",
                1,
                OLLAMA_IMAGE,
                4 << 30,
                sc,
                "llama3.2:1b",
            ))
            .unwrap();
            let c = &d["spec"]["template"]["spec"]["containers"][0];
            assert_eq!(c["resources"]["limits"]["memory"], "4Gi");
            assert_eq!(
                c.get("readinessProbe").is_some(),
                sc.readiness() != Readiness::Started
            );
        }
        let (core, new) = events(
            &json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p"}}),
            NAMESPACE,
            "p.1",
            "Normal",
            "Scheduled",
            "m",
            "default-scheduler",
            "",
            now,
        );
        typed::<k8s_openapi::api::core::v1::Event>(core).unwrap();
        typed::<k8s_openapi::api::events::v1::Event>(new).unwrap();
    }

    #[test]
    fn quantities() {
        assert_eq!(memory_quantity(16 << 30), "16Gi");
        assert_eq!(memory_quantity(512 << 20), "512Mi");
        assert_eq!(parse_quantity("4Gi"), Some(4 << 30));
        assert_eq!(parse_quantity("1G"), Some(1_000_000_000));
        assert_eq!(parse_quantity("bogus"), None);
    }
}
