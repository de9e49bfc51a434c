//! A surge rollout stalled by the real scheduler (issue 32): the node advertises one
//! `nvidia.com/gpu` (a JSON patch of its status capacity, the documented way to advertise an
//! extended resource: kubernetes.io/docs/tasks/administer-cluster/extended-resource-node/),
//! the model pod takes it, and a default-strategy rollout (25 % surge, 25 % unavailable: one
//! new pod first, none of the old one gone) leaves the surge pod Pending with the real
//! scheduler's `FailedScheduling … Insufficient nvidia.com/gpu`. `readygap run --replace
//! restart` must say `rollout_stalled` and fail its trial with the scheduler's words; the
//! extended resource is removed again at the end, pass or fail.

use crate::support::{Cluster, MODEL, cluster, repo, wait_until};
use serde_json::Value;
use std::time::Duration;

const GPU: &str = "nvidia.com/gpu";

/// The node's status JSON-patch path of the extended resource (`/` escaped as `~1`).
fn gpu_path(field: &str) -> String {
    format!("/status/{field}/nvidia.com~1gpu")
}

/// The one node's name.
fn node(c: &Cluster) -> String {
    c.k(&["get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"])
}

/// What the node advertises of the extended resource: (capacity, allocatable).
fn advertised(c: &Cluster, node: &str) -> (Option<String>, Option<String>) {
    let v: Value =
        serde_json::from_str(&c.k(&["get", "node", node, "-o", "json"])).expect("the node");
    let get = |f: &str| v["status"][f][GPU].as_str().map(str::to_string);
    (get("capacity"), get("allocatable"))
}

/// Removes the advertised GPU from the node's status when dropped (the test leaves the
/// cluster as it found it, also when it fails).
struct AdvertisedGpu<'a> {
    c: &'a Cluster,
    node: String,
}

impl AdvertisedGpu<'_> {
    fn remove(&self) {
        for field in ["capacity", "allocatable"] {
            let patch = format!(r#"[{{"op":"remove","path":"{}"}}]"#, gpu_path(field));
            // The kubelet may have dropped allocatable's copy already: a failed remove of an
            // absent key is fine, what counts is the check below.
            let _ = self.c.try_k(&[
                "patch",
                "node",
                &self.node,
                "--subresource=status",
                "--type=json",
                "-p",
                &patch,
            ]);
        }
    }
}

impl Drop for AdvertisedGpu<'_> {
    fn drop(&mut self) {
        // A failed test: the shipped Deployment back (no GPU request, maxSurge 0) before the
        // node stops advertising the GPU its pod holds.
        if std::thread::panicking() {
            let smollm2 = repo().join("manifests/overlays/smollm2");
            let _ = self.c.try_k(&["apply", "-k", &smollm2.to_string_lossy()]);
        }
        self.remove();
    }
}

/// The smollm2 overlay with one GPU requested and the Deployment's default strategy.
fn gpu_overlay(dir: &std::path::Path) -> std::path::PathBuf {
    crate::support::smollm2_overlay(
        dir,
        "gpu-surge",
        r#"patches:
  - target: {group: apps, version: v1, kind: Deployment, name: ollama}
    patch: |-
      - op: replace
        path: /spec/strategy
        value:
          type: RollingUpdate
          rollingUpdate: {maxSurge: 25%, maxUnavailable: 25%}
      - op: add
        path: /spec/template/spec/containers/0/resources/requests/nvidia.com~1gpu
        value: "1"
      - op: add
        path: /spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu
        value: "1"
"#,
    )
}

#[ignore = "needs the real cluster: scripts/cluster.sh up"]
#[test]
fn a_surge_pod_without_a_free_gpu_is_rollout_stalled_in_the_schedulers_words() {
    let c = cluster();
    // From the shipped Deployment (no GPU request): one pod, before the node has a GPU.
    c.deploy(&repo().join("manifests/overlays/smollm2"));
    let node = node(&c);
    assert_eq!(
        advertised(&c, &node),
        (None, None),
        "the node advertises no {GPU} before the test"
    );
    let gpu = AdvertisedGpu {
        c: &c,
        node: node.clone(),
    };
    let patch = format!(
        r#"[{{"op":"add","path":"{}","value":"1"}}]"#,
        gpu_path("capacity")
    );
    c.k(&[
        "patch",
        "node",
        &node,
        "--subresource=status",
        "--type=json",
        "-p",
        &patch,
    ]);
    // The kubelet copies the new capacity into allocatable at its next status update.
    wait_until(
        "the node's allocatable nvidia.com/gpu",
        Duration::from_secs(60),
        || advertised(&c, &node).1.as_deref() == Some("1"),
    );
    eprintln!(
        "kubectl: node {node} advertises {GPU}: {:?}",
        advertised(&c, &node)
    );

    let dir = tempfile::tempdir().unwrap();
    c.deploy(&gpu_overlay(dir.path()));
    let holder = c.pod();
    let rec = dir.path().join("run.jsonl");
    let out = c.run(
        &rec,
        &[
            "--model",
            MODEL,
            "--trials",
            "1",
            "--replace",
            "restart",
            "--ready-timeout",
            "25s",
            "--format",
            "json",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "the trial cannot finish: {}",
        String::from_utf8_lossy(&out.stdout)
    );

    // The real components' evidence: the surge pod Pending, never bound, with the
    // scheduler's Event.
    let pods: Value =
        serde_json::from_str(&c.kn(&["get", "pods", "-l", "app=ollama", "-o", "json"]))
            .expect("the pods");
    let pending: Vec<&Value> = pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["status"]["phase"] == "Pending")
        .collect();
    assert_eq!(pending.len(), 1, "one surge pod Pending: {pods:#}");
    let surge = pending[0]["metadata"]["name"].as_str().unwrap().to_string();
    let scheduled = pending[0]["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "PodScheduled")
        .cloned()
        .unwrap_or_default();
    eprintln!(
        "kubectl: {surge} Pending, PodScheduled {} {}: {}; {holder} (holding the GPU) {}",
        scheduled["status"],
        scheduled["reason"],
        scheduled["message"],
        c.kn(&["get", "pod", &holder, "-o", "jsonpath={.status.phase}"])
    );
    assert_eq!(scheduled["status"], "False");
    assert_eq!(scheduled["reason"], "Unschedulable");
    let field = format!("involvedObject.name={surge},reason=FailedScheduling");
    let events: Value =
        serde_json::from_str(&c.kn(&["get", "events", "--field-selector", &field, "-o", "json"]))
            .expect("the events");
    let scheduler: Vec<String> = events["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["message"].as_str().map(str::to_string))
        .collect();
    eprintln!("kubectl get events: FailedScheduling {surge}: {scheduler:?}");
    let said = scheduler
        .last()
        .unwrap_or_else(|| panic!("no FailedScheduling Event for {surge}"))
        .clone();
    assert!(said.contains("Insufficient nvidia.com/gpu"), "{said}");
    let audit = std::fs::read_to_string(crate::external::audit_log()).expect("the audit log");
    let writes: Vec<String> = audit
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["objectRef"]["name"] == surge.as_str() && e["stage"] == "ResponseComplete")
        .map(|e| {
            format!(
                "{} {} pods{} by {}",
                e["stageTimestamp"].as_str().unwrap_or_default(),
                e["verb"].as_str().unwrap_or_default(),
                e["objectRef"]["subresource"]
                    .as_str()
                    .map(|s| format!("/{s}"))
                    .unwrap_or_default(),
                e["user"]["username"].as_str().unwrap_or_default()
            )
        })
        .collect();
    eprintln!("audit log, {surge}: {writes:#?}");
    // The pod's create has no name in its audit record (the ReplicaSet's generateName); what
    // the scheduler wrote is the PodScheduled=False condition, never a binding.
    assert!(
        writes
            .iter()
            .any(|w| w.ends_with("patch pods/status by system:kube-scheduler")),
        "{writes:?}"
    );
    assert!(
        !writes.iter().any(|w| w.contains("pods/binding")),
        "the scheduler never bound the surge pod: {writes:?}"
    );

    // readygap's verdict and the trial's reason, in the scheduler's words.
    let loaded = readygap_core::report::load_trials(&rec).expect("the recording");
    let v = loaded
        .readiness_verdicts
        .iter()
        .find(|v| v["verdict"] == "rollout_stalled")
        .unwrap_or_else(|| panic!("no rollout_stalled: {:#?}", loaded.readiness_verdicts));
    eprintln!(
        "readygap's verdict: rollout_stalled ({} s): {}\n  advice: {}",
        v["seconds"], v["message"], v["advice"]
    );
    assert_eq!(v["pod"], surge.as_str(), "{v:#}");
    assert_eq!(v["evidence"]["failed_scheduling"], said.as_str(), "{v:#}");
    assert!(v["seconds"].as_f64().is_some_and(|s| s >= 15.0), "{v:#}");
    let t = loaded
        .trials
        .iter()
        .rfind(|t| !t.external)
        .expect("readygap's trial");
    let reason = t.reason().unwrap_or_default();
    eprintln!("readygap's trial: {reason}");
    assert!(
        reason.starts_with("timeout: the replacement pod was not Ready within")
            && reason.ends_with(&format!("(Pending: {said})")),
        "{reason}"
    );

    // As found: the shipped strategy and no GPU request, then no GPU on the node.
    c.deploy(&repo().join("manifests/overlays/smollm2"));
    gpu.remove();
    wait_until(
        "the node without nvidia.com/gpu",
        Duration::from_secs(60),
        || advertised(&c, &node) == (None, None),
    );
}
