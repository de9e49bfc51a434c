//! A liveness probe that kills Ollama while it loads, on the real kubelet (issue 32), and the
//! Events that explain it on the dashboard's screen at 200×55 and 80×24 (issue 34).
//!
//! The shipped smollm2 overlay with the probes most Ollama manifests get wrong: the shipped
//! inference-aware script (`manifests/base/probe/ready-inference.sh`) as the *liveness* probe
//! with a 1 s deadline (`READYGAP_PROBE_TIMEOUT_SECONDS=1`, every 2 s, 2 failures), no
//! startupProbe, the shallow `GET /api/tags` as readiness, and a 200m CPU limit, under which
//! the model's load takes longer than the probe allows. The probe's own generate starts the
//! load; the real kubelet records `Unhealthy` "Liveness probe failed: <the script's output>"
//! twice, then `Killing` "Container ollama failed liveness probe, will be restarted", and
//! restarts the container. The dashboard (read-only, recording) watches the rollout as an
//! external trial; the recording must hold `liveness_killed_during_load` and the trial's
//! failure in the kubelet's words, beside what kubectl and the audit log say.

use crate::external::audit_log;
use crate::support::{Cluster, MODEL, NS, Tmux, cluster, repo, wait_until};
use serde_json::Value;
use std::time::{Duration, Instant};

/// The test overlay over `manifests/overlays/smollm2` (kustomize takes the base as a path
/// relative to the kustomization).
fn aggressive_overlay(dir: &std::path::Path) -> std::path::PathBuf {
    crate::support::smollm2_overlay(
        dir,
        "aggressive-liveness",
        r#"configMapGenerator:
  - name: ollama-config
    behavior: merge
    literals:
      - READYGAP_PROBE_TIMEOUT_SECONDS=1
patches:
  - target: {group: apps, version: v1, kind: Deployment, name: ollama}
    patch: |-
      - op: remove
        path: /spec/template/spec/containers/0/startupProbe
      - op: replace
        path: /spec/template/spec/containers/0/livenessProbe
        value:
          exec:
            command: ["bash", "/etc/readygap/ready-inference.sh"]
          periodSeconds: 2
          timeoutSeconds: 2
          failureThreshold: 2
      - op: replace
        path: /spec/template/spec/containers/0/readinessProbe
        value:
          httpGet: {path: /api/tags, port: http}
          periodSeconds: 1
          timeoutSeconds: 1
          failureThreshold: 3
      - op: replace
        path: /spec/template/spec/containers/0/resources
        value:
          requests: {cpu: 200m, memory: 1Gi}
          limits: {cpu: 200m, memory: 1Gi}
"#,
    )
}

/// The pods of `deployment/ollama` as kubectl returns them.
fn pods(c: &Cluster) -> Vec<Value> {
    let out = c.kn(&["get", "pods", "-l", "app=ollama", "-o", "json"]);
    let v: Value = serde_json::from_str(&out).expect("kubectl's pod list");
    v["items"].as_array().cloned().unwrap_or_default()
}

/// The Events kubectl lists for `pod`: (reason, count, first, last, message).
fn events_of(c: &Cluster, pod: &str) -> Vec<(String, u64, String, String, String)> {
    let field = format!("involvedObject.name={pod}");
    let out = c.kn(&["get", "events", "--field-selector", &field, "-o", "json"]);
    let v: Value = serde_json::from_str(&out).expect("kubectl's event list");
    let s = |e: &Value, k: &str| e[k].as_str().unwrap_or_default().to_string();
    v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (
                s(e, "reason"),
                e["count"].as_u64().unwrap_or(1),
                s(e, "firstTimestamp"),
                s(e, "lastTimestamp"),
                s(e, "message"),
            )
        })
        .collect()
}

#[ignore = "needs the real cluster: scripts/cluster.sh up"]
#[test]
fn an_aggressive_liveness_probe_kills_ollama_during_load_and_readygap_names_it() {
    let c = cluster();
    c.deploy(&repo().join("manifests/overlays/smollm2"));
    let dir = tempfile::tempdir().unwrap();
    let overlay = aggressive_overlay(dir.path());
    let rec = dir.path().join("dashboard.jsonl");
    let bin = env!("CARGO_BIN_EXE_readygap");
    let script = format!(
        "'{bin}' --kubeconfig '{}' -n {NS} --model {MODEL} --read-only --record '{}'; echo EXITED $?; sleep 60",
        c.kubeconfig.display(),
        rec.display()
    );
    let tmux = Tmux::start("liveness", c.home.path(), (200, 55), &script);
    tmux.wait("the pod on screen, read-only", 60, |s| {
        s.contains("Running True") && s.contains("read-only")
    });

    // Someone applies the aggressive probes: a rollout (maxSurge 0) to a pod that cannot
    // survive its own liveness probe.
    let applied = Instant::now();
    c.k(&["apply", "-k", &overlay.to_string_lossy()]);
    // The new pod (the one with the exec liveness probe) restarted by the kubelet.
    let mut pod = String::new();
    let mut restarted = Duration::ZERO;
    wait_until(
        "the kubelet to restart the new pod's container",
        Duration::from_secs(240),
        || {
            let found = pods(&c).into_iter().find(|p| {
                p["spec"]["containers"][0]["livenessProbe"]["exec"].is_object()
                    && p["status"]["containerStatuses"][0]["restartCount"]
                        .as_u64()
                        .is_some_and(|n| n >= 1)
            });
            if let Some(p) = found {
                pod = p["metadata"]["name"].as_str().unwrap_or_default().into();
                restarted = applied.elapsed();
            }
            !pod.is_empty()
        },
    );
    let status = c.kn(&[
        "get",
        "pod",
        &pod,
        "-o",
        "jsonpath={.status.containerStatuses[0].restartCount} {.status.containerStatuses[0].lastState}",
    ]);
    eprintln!(
        "kubectl: {pod} restarted {:.1} s after the apply; restartCount lastState: {status}",
        restarted.as_secs_f64()
    );

    // The kubelet's own Events for that pod: the probe's output, then the kill.
    let mut events = Vec::new();
    wait_until(
        "the kubelet's Unhealthy and Killing Events",
        Duration::from_secs(60),
        || {
            events = events_of(&c, &pod);
            events
                .iter()
                .any(|e| e.0 == "Unhealthy" && e.4.starts_with("Liveness probe failed: "))
                && events.iter().any(|e| {
                    e.0 == "Killing" && e.4.ends_with("failed liveness probe, will be restarted")
                })
        },
    );
    eprintln!("kubectl get events (the kubelet's words):");
    for (reason, count, first, last, msg) in &events {
        eprintln!("  {first} … {last} ×{count} {reason}: {}", msg.trim_end());
    }
    let unhealthy = events
        .iter()
        .find(|e| e.0 == "Unhealthy" && e.4.starts_with("Liveness probe failed: "))
        .map(|e| e.4.trim_end().to_string())
        .unwrap();
    // The script's own reason: the generate that loads the model did not finish in 1 s.
    assert!(
        unhealthy.contains("/api/generate"),
        "the probe's output in the Event: {unhealthy}"
    );

    // The audit log: the kubelet's writes of the pod's status (the restart among them).
    let text = std::fs::read_to_string(audit_log()).expect("the audit log");
    let writes: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| {
            e["objectRef"]["name"] == pod.as_str()
                && e["objectRef"]["subresource"] == "status"
                && e["stage"] == "ResponseComplete"
        })
        .map(|e| {
            format!(
                "{} {} pods/status by {}",
                e["stageTimestamp"].as_str().unwrap_or_default(),
                e["verb"].as_str().unwrap_or_default(),
                e["user"]["username"].as_str().unwrap_or_default()
            )
        })
        .collect();
    eprintln!("audit log, {pod}'s status writes:");
    for w in &writes {
        eprintln!("  {w}");
    }
    assert!(
        writes
            .iter()
            .any(|w| w.ends_with("system:node:readygap-node")),
        "the kubelet's status writes in the audit log: {writes:?}"
    );

    // The dashboard: the Events under the Pods panel say why, at 200×55 and at 80×24.
    for (w, h) in [(200u16, 55u16), (80, 24)] {
        if (w, h) != (200, 55) {
            tmux.resize((w, h));
        }
        let screen = tmux.wait(
            &format!("the kubelet's Unhealthy and Killing on screen at {w}×{h}"),
            90,
            |s| {
                s.lines().count() >= h as usize - 1
                    && s.lines().all(|l| l.chars().count() <= w as usize)
                    && s.contains("Unhealthy")
                    && s.contains("Liveness probe failed")
                    && (w < 200 || (s.contains("Killing") && s.contains("/api/generate")))
            },
        );
        eprintln!("the dashboard at {w}×{h}:\n{screen}");
        if w == 200 {
            let failed = tmux.wait("the trial failed in the kubelet's words", 90, |s| {
                s.contains("killed by the liveness")
            });
            eprintln!("the dashboard at 200×55, the failed trial:\n{failed}");
        }
    }
    tmux.keys("q");
    let screen = tmux.wait("the process to exit", 30, |s| s.contains("EXITED"));
    assert!(screen.contains("EXITED 0"), "{screen}");

    // readygap's recording: the verdict and the failed trial, in the kubelet's words.
    let loaded = readygap_core::report::load_trials(&rec).expect("the dashboard's recording");
    let verdict = loaded
        .readiness_verdicts
        .iter()
        .find(|v| v["verdict"] == "liveness_killed_during_load" && v["pod"] == pod.as_str())
        .unwrap_or_else(|| {
            panic!(
                "no liveness_killed_during_load for {pod}: {:#?}",
                loaded.readiness_verdicts
            )
        });
    let message = verdict["message"].as_str().unwrap_or_default();
    eprintln!("readygap's verdict: liveness_killed_during_load: {message}");
    eprintln!("  advice: {}", verdict["advice"]);
    assert!(
        message.contains("after a failed liveness probe (exec"),
        "{message}"
    );
    assert!(
        message.contains(MODEL),
        "the model that was loading: {message}"
    );
    assert!(
        message.contains(&unhealthy),
        "the kubelet's words: {message}"
    );
    let evidence = verdict["evidence"]["events"].as_array().expect("events");
    assert!(
        evidence.iter().any(|e| e["reason"] == "Unhealthy"
            && e["message"].as_str().map(str::trim_end) == Some(unhealthy.as_str())),
        "{verdict:#}"
    );
    let reasons: Vec<String> = loaded
        .trials
        .iter()
        .filter_map(|t| t.reason().map(str::to_string))
        .collect();
    eprintln!("readygap's trials: {reasons:#?}");
    let want =
        format!("container restarted: killed by the liveness probe ({unhealthy}), restart 1");
    assert!(
        reasons.contains(&want),
        "no trial failed with {want:?}: {reasons:#?}"
    );

    // Back to the shipped probes for the tests that follow.
    c.deploy(&repo().join("manifests/overlays/smollm2"));
}
