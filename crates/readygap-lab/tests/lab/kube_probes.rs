//! The lab kubelet's startupProbe, as the real prober runs it (kubernetes
//! pkg/kubelet/prober/worker.go doProbe: "Disable other probes until container has started";
//! prober_manager.go UpdatePodStatus: `started` is the startup result, Ready only once
//! started): liveness and readiness wait for it, and a startup probe failing past its
//! threshold restarts the container with the Events a real kubelet writes.

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::Api;
use readygap_lab::ground_truth::{GroundTruth, Transition};
use readygap_lab::scenario::Scenario;
use readygap_lab::serve::LabHandle;
use readygap_lab::testkit::{client, start_lab, wait_for};
use serde_json::json;
use std::time::Duration;

const NS: &str = "llm-recovery-lab";

/// The inference check the lab's kubelet runs for an exec probe (the manifests' script).
fn inference_exec(timeout_seconds: u64, failure_threshold: u64) -> serde_json::Value {
    json!({
        "exec": {"command": ["bash", "/etc/readygap/ready-inference.sh"]},
        "periodSeconds": 1, "timeoutSeconds": timeout_seconds,
        "failureThreshold": failure_threshold,
    })
}

async fn create(lab: &LabHandle, name: &str, container: serde_json::Value) -> Api<Pod> {
    let pods: Api<Pod> = Api::namespaced(client(lab).await, NS);
    let mut c = json!({"name": "ollama", "image": "ollama/ollama:0.6.8",
                       "ports": [{"containerPort": 11434, "name": "http"}]});
    c.as_object_mut()
        .unwrap()
        .extend(container.as_object().unwrap().clone());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "probe-test"}},
        "spec": {"containers": [c]}
    }))
    .unwrap();
    pods.create(&Default::default(), &pod).await.unwrap();
    pods
}

/// The messages of the kubelet's Events about pod `name` with `reason`.
async fn events(lab: &LabHandle, name: &str, reason: &str) -> Vec<String> {
    let api: Api<Event> = Api::namespaced(client(lab).await, NS);
    api.list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(name))
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.message)
        .collect()
}

fn started(p: &Pod) -> Option<bool> {
    p.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()?
        .started
}

/// A startupProbe with room for the load (the inference check, 6 s scaled) and a liveness
/// probe that fails at once whenever it runs (`GET /never`, failureThreshold 1): the
/// container is not `started` while the startup inference loads the model, the first
/// liveness failure comes only after the startup probe passed (then, as a real kubelet
/// would, it kills the container). Without the gating the liveness probe kills the
/// container at its first period, long before the model is resident.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_startup_probe_holds_the_liveness_probe_back_during_the_load() {
    let (lab, _dir) = start_lab("local-3b", Scenario::Baseline, 10.0, 93).await;
    lab.wait_ready(Duration::from_secs(60)).await.unwrap();
    let pods = create(
        &lab,
        "gated",
        json!({
            "startupProbe": inference_exec(60, 30),
            "livenessProbe": {"httpGet": {"path": "/never", "port": "http"},
                              "periodSeconds": 1, "failureThreshold": 1},
        }),
    )
    .await;
    // Running, not started: the startup inference is loading the model.
    let first = wait_for(Duration::from_secs(30), "the container runs", || {
        let pods = pods.clone();
        async move {
            let p = pods.get("gated").await.ok()?;
            let s = p
                .status
                .as_ref()?
                .container_statuses
                .as_ref()?
                .first()?
                .clone();
            s.state?.running.map(|_| p)
        }
    })
    .await;
    let gt = lab.ground_truth();
    let first_at = |gt: &GroundTruth, t: Transition| {
        gt.entries()
            .iter()
            .find(|e| e.pod == "gated" && e.transition == t)
            .map(|e| e.ts)
    };
    if first_at(&gt, Transition::ModelResident).is_none() {
        assert_eq!(started(&first), Some(false), "not started during the load");
    }
    let killed = wait_for(Duration::from_secs(30), "the liveness kill", || {
        let gt = gt.clone();
        async move { first_at(&gt, Transition::LivenessKilled) }
    })
    .await;
    let all: Vec<_> = gt
        .entries()
        .into_iter()
        .filter(|e| e.pod == "gated")
        .map(|e| {
            format!(
                "{} {:?} {}",
                e.ts.format("%H:%M:%S%.3f"),
                e.transition,
                e.detail
            )
        })
        .collect();
    let resident = first_at(&gt, Transition::ModelResident).expect("the startup inference loaded");
    // No readinessProbe: Ready is "started" here, the startup probe's success.
    let ready = first_at(&gt, Transition::PodReady).expect("started, so Ready");
    assert!(
        resident < ready && ready <= killed,
        "liveness ran before the startup probe passed: {all:#?}"
    );
    let unhealthy = events(&lab, "gated", "Unhealthy").await;
    assert!(
        unhealthy
            .iter()
            .any(|m| m.starts_with("Liveness probe failed: ")),
        "{unhealthy:?}"
    );
    lab.shutdown().await;
}

/// A startup probe that never passes: an Unhealthy "Startup probe failed: …" Event per
/// failure, then Killing "… failed startup probe, will be restarted" at the threshold and a
/// restart; the liveness probe (failing at once if it ran) never runs, and the pod is never
/// Ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_startup_probe_restarts_the_container_and_liveness_never_runs() {
    let (lab, _dir) = start_lab("local-1b", Scenario::Baseline, 10.0, 94).await;
    lab.wait_ready(Duration::from_secs(60)).await.unwrap();
    let never = json!({"httpGet": {"path": "/never", "port": "http"},
                       "periodSeconds": 1, "timeoutSeconds": 1, "failureThreshold": 3});
    let mut liveness = never.clone();
    liveness["failureThreshold"] = json!(1);
    let pods = create(
        &lab,
        "never-started",
        json!({"startupProbe": never, "livenessProbe": liveness}),
    )
    .await;
    let gt = lab.ground_truth();
    wait_for(Duration::from_secs(30), "a startup kill", || {
        let gt = gt.clone();
        async move {
            gt.entries()
                .iter()
                .any(|e| e.pod == "never-started" && e.transition == Transition::StartupKilled)
                .then_some(())
        }
    })
    .await;
    let unhealthy = events(&lab, "never-started", "Unhealthy").await;
    assert!(
        unhealthy
            .iter()
            .filter(|m| m.starts_with("Startup probe failed: "))
            .count()
            >= 3,
        "{unhealthy:?}"
    );
    assert!(
        !unhealthy
            .iter()
            .any(|m| m.starts_with("Liveness probe failed")),
        "liveness ran before the container started: {unhealthy:?}"
    );
    let killing = events(&lab, "never-started", "Killing").await;
    assert!(
        killing
            .iter()
            .any(|m| m == "Container ollama failed startup probe, will be restarted"),
        "{killing:?}"
    );
    assert!(
        !gt.entries().iter().any(|e| e.pod == "never-started"
            && matches!(
                e.transition,
                Transition::LivenessKilled | Transition::PodReady
            )),
        "neither a liveness kill nor Ready"
    );
    let p = wait_for(Duration::from_secs(30), "the restart in the status", || {
        let pods = pods.clone();
        async move {
            let p = pods.get("never-started").await.ok()?;
            let cs = p
                .status
                .as_ref()?
                .container_statuses
                .as_ref()?
                .first()?
                .clone();
            (cs.restart_count >= 1).then_some(p)
        }
    })
    .await;
    assert_eq!(started(&p), Some(false));
    lab.shutdown().await;
}

/// successThreshold, as the real prober counts it (pkg/kubelet/prober/worker.go doProbe:
/// `result == Success && resultRun < SuccessThreshold` leaves the state unchanged, and the
/// readiness state starts as Failure): the pod turns Ready only after 4 consecutive passing
/// probes, read from the runtime's own request log (each probe is a `GET "/api/tags"` line
/// answered 200 before the Ready transition). With the threshold ignored, Ready came at the
/// first pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_waits_for_success_threshold_consecutive_passes() {
    use kube::api::LogParams;
    let (lab, _dir) = start_lab("local-1b", Scenario::Baseline, 10.0, 97).await;
    lab.wait_ready(Duration::from_secs(60)).await.unwrap();
    let pods = create(
        &lab,
        "four-passes",
        json!({"readinessProbe": {"httpGet": {"path": "/api/tags", "port": "http"},
                                  "periodSeconds": 1, "successThreshold": 4}}),
    )
    .await;
    let gt = lab.ground_truth();
    let ready = wait_for(Duration::from_secs(30), "Ready", || {
        let gt = gt.clone();
        async move {
            gt.entries()
                .iter()
                .find(|e| e.pod == "four-passes" && e.transition == Transition::PodReady)
                .map(|e| e.ts)
        }
    })
    .await;
    let log = pods
        .logs(
            "four-passes",
            &LogParams {
                timestamps: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let passes_before: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("GET") && l.contains("\"/api/tags\"") && l.contains("| 200 |"))
        .filter(|l| {
            l.split_whitespace()
                .next()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .is_some_and(|t| t <= ready)
        })
        .collect();
    assert!(
        passes_before.len() >= 4,
        "Ready at {ready} after {} passing probes: {passes_before:#?}\n{log}",
        passes_before.len()
    );
    lab.shutdown().await;
}
