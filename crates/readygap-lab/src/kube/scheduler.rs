//! The lab's kube-scheduler: when a pod is placed (after `profile.schedule`, counted from
//! its creation), on which node (a pod mounting the models' ReadWriteOnce volume on the
//! volume's node, others on the node with the fewest pods), whether a node has the GPUs it
//! asks for (none free: Pending with PodScheduled False, Unschedulable, and a
//! FailedScheduling event until one frees up), and the binding (`spec.nodeName`,
//! PodScheduled True, the Scheduled event). A pod created with `spec.nodeName` is bound
//! already and skips the scheduler (as `kubectl debug node/...` pods do): it waits for its
//! node to exist. What runs on the node afterwards is the kubelet's (`kubelet`).

use super::cluster::Cluster;
use super::kubelet::set_condition;
use super::objects;
use super::resources::{NODES, PODS};
use crate::ground_truth::Transition;
use chrono::Utc;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// A pod placed on a node.
pub struct Placement {
    pub node: String,
    /// When it was placed (the planned instant, or when a GPU freed up); the kubelet's
    /// container start counts from here.
    pub at: Instant,
    /// The scheduling delay drawn from the profile (zero for a pod bound at creation).
    pub sampled: Duration,
    /// Whether the pod came with `spec.nodeName` (no scheduler involved).
    pub preassigned: bool,
}

/// Why a pod was never placed.
pub enum Unplaced {
    /// It was deleted first.
    Deleted,
    /// The lab is shutting down.
    Shutdown,
}

/// Waits until the pod `ns/name` (its object `pod`, asking for `gpus` GPUs, created at
/// `created`) can be placed and picks its node. Does not bind: see [`bind`].
pub async fn schedule(
    cluster: &Arc<Cluster>,
    ns: &str,
    name: &str,
    pod: &serde_json::Value,
    gpus: u32,
    created: Instant,
    deleting: &CancellationToken,
) -> Result<Placement, Unplaced> {
    if let Some(node) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
        // Its node must exist, else no kubelet ever runs it and it stays Pending.
        if cluster.store.get(NODES, "", node).is_none() {
            tokio::select! {
                _ = deleting.cancelled() => return Err(Unplaced::Deleted),
                _ = cluster.shutdown.cancelled() => return Err(Unplaced::Shutdown),
            }
        }
        return Ok(Placement {
            node: node.to_owned(),
            at: Instant::now(),
            sampled: Duration::ZERO,
            preassigned: true,
        });
    }
    let sampled = cluster.sample("schedule", &cluster.settings.profile.schedule);
    let mut at = super::kubelet::later(created, sampled);
    if !super::kubelet::sleep_until_or(at, deleting).await {
        return Err(Unplaced::Deleted);
    }
    // Extended resources: no node with a free GPU leaves the pod Pending
    // (Unschedulable, FailedScheduling) until one frees up.
    let mut reported = false;
    while let Some(msg) = gpu_unschedulable(cluster, pod, gpus, name) {
        if !reported {
            reported = true;
            report_unschedulable(cluster, ns, name, &msg);
        }
        if !super::kubelet::sleep_or(Duration::from_millis(100), deleting).await {
            return Err(Unplaced::Deleted);
        }
        at = Instant::now();
    }
    Ok(Placement {
        node: pick_node(cluster, pod),
        at,
        sampled,
        preassigned: false,
    })
}

/// PodScheduled False (Unschedulable) with the scheduler's message, and its
/// FailedScheduling event.
fn report_unschedulable(cluster: &Cluster, ns: &str, name: &str, msg: &str) {
    let now = Utc::now();
    let updated = cluster.store.mutate_typed::<Pod>(PODS, ns, name, |p| {
        set_condition(
            p,
            "PodScheduled",
            false,
            Some("Unschedulable"),
            Some(msg.to_owned()),
            now,
        );
    });
    match updated {
        Ok(pod) => cluster.record_event(
            &pod,
            "Warning",
            "FailedScheduling",
            msg,
            "default-scheduler",
            "",
        ),
        Err(e) => tracing::debug!("lab scheduler: updating pod {name}: {e}"),
    }
}

/// Binds the pod to its node: `spec.nodeName`, PodScheduled True and the ground truth's
/// PodScheduled in one store update, then (when the scheduler placed it) the Scheduled
/// event. `None` when the pod is gone.
pub fn bind(
    cluster: &Cluster,
    ns: &str,
    name: &str,
    placement: &Placement,
) -> Option<serde_json::Value> {
    let now = Utc::now();
    let node = placement.node.as_str();
    let sampled_ms = placement.sampled.as_secs_f64() * 1000.0;
    let gt = &cluster.settings.ground_truth;
    let bound = cluster.store.mutate_typed::<Pod>(PODS, ns, name, |p| {
        // Logged inside the store update: the entry exists before anyone sees the change.
        gt.log_at(
            now,
            name,
            Transition::PodScheduled,
            json!({"node": node, "sampled_ms": sampled_ms}),
        );
        p.spec.get_or_insert_with(Default::default).node_name = Some(node.to_owned());
        set_condition(p, "PodScheduled", true, None, None, now);
    });
    let pod = match bound {
        Ok(pod) => pod,
        Err(e) => {
            tracing::debug!("lab kubelet: updating pod {name}: {e}");
            return None;
        }
    };
    if !placement.preassigned {
        cluster.record_event(
            &pod,
            "Normal",
            "Scheduled",
            &format!("Successfully assigned {ns}/{name} to {node}"),
            "default-scheduler",
            "",
        );
    }
    Some(pod)
}

/// GPUs a pod asks for (`nvidia.com/gpu` limits of its containers).
pub fn pod_gpus(pod: &serde_json::Value) -> u64 {
    pod["spec"]["containers"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| match &c["resources"]["limits"]["nvidia.com/gpu"] {
                    serde_json::Value::String(n) => n.trim().parse().unwrap_or(0),
                    serde_json::Value::Number(n) => n.as_u64().unwrap_or(0),
                    _ => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}

/// Why the scheduler cannot place a pod asking for `gpus` GPUs, as its FailedScheduling
/// message, or `None` when a node has them free. A node's free GPUs are its allocatable
/// `nvidia.com/gpu` minus those of the pods bound to it that have not finished (a
/// terminating pod holds its GPU until it is gone). Only when some node advertises GPUs
/// (a lab without a device plugin keeps placing GPU pods, as before). The message follows
/// kube-scheduler's FitError (pkg/scheduler/framework/types.go: "0/N nodes are available:
/// COUNT REASON." then the preemption summary; NodeResourcesFit's "Insufficient RESOURCE").
fn gpu_unschedulable(
    cluster: &Cluster,
    pod: &serde_json::Value,
    gpus: u32,
    name: &str,
) -> Option<String> {
    if gpus == 0 {
        return None;
    }
    let nodes = cluster.store.list(NODES, None).0;
    let allocatable = |n: &serde_json::Value| -> u64 {
        n["status"]["allocatable"]["nvidia.com/gpu"]
            .as_str()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    if nodes.iter().all(|n| allocatable(n) == 0) {
        return None;
    }
    let pods = cluster.store.list(PODS, None).0;
    let uses_pvc = pod["spec"]["volumes"]
        .as_array()
        .is_some_and(|vs| vs.iter().any(|v| v.get("persistentVolumeClaim").is_some()));
    let free = |n: &serde_json::Value| -> u64 {
        let node = n["metadata"]["name"].as_str().unwrap_or_default();
        let used: u64 = pods
            .iter()
            .filter(|p| p["spec"]["nodeName"] == node && p["metadata"]["name"] != name)
            .filter(|p| !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")))
            .map(|p| pod_gpus(p))
            .sum();
        allocatable(n).saturating_sub(used)
    };
    let fits = nodes.iter().any(|n| {
        // The models' ReadWriteOnce volume is attached to the first node (see pick_node).
        let reachable = !uses_pvc || n["metadata"]["name"] == objects::NODE_NAMES[0];
        reachable && free(n) >= u64::from(gpus)
    });
    if fits {
        return None;
    }
    let n = nodes.len();
    // The scheduler's FitError (pkg/scheduler/framework/types.go `FitError.Error`): the
    // filter reasons, then the PostFilter plugins' messages joined by ", "
    // (framework/runtime/framework.go `RunPostFilterPlugins`). From 1.34 DynamicResources
    // (DRA, on by default) runs before DefaultPreemption (apis/config/v1/default_plugins.go)
    // and says "no new claims to deallocate" for a pod without claims
    // (plugins/dynamicresources/dynamicresources.go `PostFilter`): the real v1.34.4
    // scheduler's Event, tests/real_cluster/gpu_surge.rs.
    Some(format!(
        "0/{n} nodes are available: {n} Insufficient nvidia.com/gpu. no new claims to deallocate, \
         preemption: 0/{n} nodes are available: {n} No preemption victims found for incoming pod."
    ))
}

/// Where a pod goes: pods mounting a PVC go to the node the (ReadWriteOnce) volume is
/// attached to, the first node; others to the node with the fewest pods (ties: the first).
fn pick_node(cluster: &Cluster, pod: &serde_json::Value) -> String {
    let uses_pvc = pod["spec"]["volumes"]
        .as_array()
        .is_some_and(|vs| vs.iter().any(|v| v.get("persistentVolumeClaim").is_some()));
    if uses_pvc {
        return objects::NODE_NAMES[0].to_string();
    }
    let pods = cluster.store.list(PODS, None).0;
    let nodes: Vec<String> = cluster
        .store
        .list(NODES, None)
        .0
        .iter()
        .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    nodes
        .iter()
        .min_by_key(|n| {
            pods.iter()
                .filter(|p| p["spec"]["nodeName"] == n.as_str())
                .count()
        })
        .cloned()
        .unwrap_or_else(|| objects::NODE_NAMES[0].to_string())
}
