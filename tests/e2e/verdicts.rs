//! The readiness-contract verdicts end to end: `readygap run --lab` against the built-in
//! lab's scenarios (real HTTP, the real kube client and watches), one test per verdict. Each
//! reads `--format json` (the verdict with its evidence, its count, the trial that carries
//! it) and the recording (the same verdict when replayed through the reducer).

use readygap_core::record::jsonl;
use readygap_core::state::State;
use readygap_core::verdict::ContractKind;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// One run at a time: each starts its own lab (two cores, a per-process loopback IP pool).
static ONE_RUN: std::sync::Mutex<()> = std::sync::Mutex::new(());

struct Run {
    code: Option<i32>,
    report: Value,
    state: State,
    stderr: String,
}

fn run(args: &[&str], rec: &Path) -> Run {
    let _one = ONE_RUN.lock().unwrap_or_else(|e| e.into_inner());
    let out = Command::new(env!("CARGO_BIN_EXE_readygap"))
        .arg("run")
        .args(args)
        .args(["--format", "json", "--record"])
        .arg(rec)
        .output()
        .expect("running readygap");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is JSON ({e}): {}\nstderr: {stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    let recording = jsonl::read(rec).expect("the recording reads");
    Run {
        code: out.status.code(),
        report,
        state: State::from_events(&recording.events),
        stderr,
    }
}

/// The run's verdicts of `kind` in `--format json`.
fn verdicts<'a>(r: &'a Run, kind: &str) -> Vec<&'a Value> {
    r.report["files"][0]["readiness_verdicts"]
        .as_array()
        .map(|a| a.iter().filter(|v| v["verdict"] == kind).collect())
        .unwrap_or_default()
}

/// The verdicts of `kind` are the same in the JSON and the replayed recording, and counted.
fn agree(r: &Run, kind: ContractKind) -> usize {
    let json = verdicts(r, kind.name());
    let replayed: Vec<_> = r
        .state
        .contract
        .verdicts
        .iter()
        .filter(|v| v.kind == kind)
        .collect();
    assert_eq!(
        json.len(),
        replayed.len(),
        "{kind:?}: run and replay agree\njson: {json:#?}\nreplayed: {replayed:#?}"
    );
    for (j, v) in json.iter().zip(&replayed) {
        assert_eq!(j["message"].as_str(), Some(v.message.as_str()));
        assert_eq!(j["pod"].as_str(), Some(v.pod.as_str()));
    }
    let count = r.report["files"][0]["verdicts"][kind.name()]
        .as_u64()
        .unwrap_or(0) as usize;
    assert_eq!(count, json.len(), "the count of {kind:?}");
    json.len()
}

fn lab_args<'a>(profile: &'a str, scenario: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "--lab",
        profile,
        "--lab-speed",
        "4",
        "--lab-scenario",
        scenario,
    ];
    v.extend_from_slice(extra);
    if !extra.contains(&"--cooldown") {
        v.extend(["--cooldown", "1s"]);
    }
    v
}

#[test]
fn http_readiness_is_shallow_readiness_with_the_measured_window() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("r.jsonl");
    let r = run(
        &lab_args("local-3b", "http-readiness", &["--trials", "1"]),
        &rec,
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(agree(&r, ContractKind::ShallowReadiness), 1);
    assert_eq!(agree(&r, ContractKind::ReadinessCoversInference), 0);
    let v = verdicts(&r, "shallow_readiness")[0];
    let trial = &r.report["files"][0]["trials"][0];
    assert_eq!(v["pod"], trial["new_pod"]);
    assert_eq!(v["trial"], 1);
    // The window is the endpoint's ready instant to T4, as the marks say.
    let marks = &trial["marks"];
    let ms = |k: &str| {
        chrono::DateTime::parse_from_rfc3339(marks[k].as_str().expect(k))
            .expect("a mark")
            .timestamp_millis() as f64
            / 1000.0
    };
    let window = v["seconds"].as_f64().expect("seconds");
    assert!(
        (window - (ms("t4") - ms("endpoint_ready"))).abs() < 0.0015,
        "{v:#}\n{marks:#}"
    );
    // local-3b loads for seconds: the window is the load, not a rounding error.
    assert!(window > 1.0, "{v:#}");
    assert!(
        v["message"]
            .as_str()
            .is_some_and(|m| m.contains("readinessProbe httpGet /api/tags :11434")),
        "{v:#}"
    );
    assert_eq!(v["evidence"]["readiness"]["kind"], "httpGet");
    assert!(
        v["advice"]
            .as_str()
            .is_some_and(|a| a.contains("manifests/base/probe/ready-inference.sh"))
    );
    assert!(
        trial["verdicts"]
            .as_array()
            .is_some_and(|a| a.iter().any(|k| k == "shallow_readiness")),
        "{trial:#}"
    );
}

#[test]
fn inference_readiness_covers_inference() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("r.jsonl");
    let r = run(
        &lab_args("local-3b", "inference-readiness", &["--trials", "1"]),
        &rec,
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(agree(&r, ContractKind::ReadinessCoversInference), 1);
    assert_eq!(agree(&r, ContractKind::ShallowReadiness), 0);
    let v = verdicts(&r, "readiness_covers_inference")[0];
    assert_eq!(v["evidence"]["readiness"]["kind"], "exec");
    assert_eq!(v["evidence"]["readiness"]["inference"], true);
}

#[test]
fn emptydir_replacement_is_model_missing_and_names_the_volume() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("r.jsonl");
    let r = run(
        &lab_args(
            "local-3b",
            "emptydir",
            &["--trials", "1", "--model", "llama3.2:3b"],
        ),
        &rec,
    );
    // The trial fails: the model is gone with the old pod's emptyDir.
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(agree(&r, ContractKind::ModelMissingAfterReplacement) >= 1);
    let new_pod = r.state.timeline.trials[0].new_pod.clone();
    let v = verdicts(&r, "model_missing_after_replacement")
        .into_iter()
        .find(|v| v["pod"].as_str() == new_pod.as_deref())
        .unwrap_or_else(|| panic!("a verdict on the new pod {new_pod:?}: {:#}", r.report));
    assert_eq!(v["evidence"]["models_volume"], "emptyDir", "{v:#}");
    assert_eq!(v["evidence"]["models_mount"], "/root/.ollama");
    assert!(
        v["message"]
            .as_str()
            .is_some_and(|m| m.contains("llama3.2:3b is not on disk")),
        "{v:#}"
    );
}

#[test]
fn aggressive_liveness_is_liveness_killed_during_load() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("r.jsonl");
    let r = run(
        &lab_args(
            "local-3b",
            "aggressive-liveness",
            &[
                "--trials",
                "1",
                "--model",
                "llama3.2:3b",
                "--cooldown",
                "3s",
            ],
        ),
        &rec,
    );
    assert!(
        agree(&r, ContractKind::LivenessKilledDuringLoad) >= 1,
        "{}",
        r.stderr
    );
    let v = verdicts(&r, "liveness_killed_during_load")[0];
    let events = v["evidence"]["events"].as_array().expect("events");
    assert!(
        events.iter().any(|e| e["reason"] == "Killing"
            && e["message"]
                .as_str()
                .is_some_and(|m| m.ends_with("failed liveness probe, will be restarted"))),
        "{v:#}"
    );
    // The simulated probe does not answer in time: the real kubelet's words for an exec
    // probe past its timeout (the CRI client's error), the command and the spec's 5 s.
    assert!(
        events.iter().any(|e| e["reason"] == "Unhealthy"
            && e["message"].as_str().is_some_and(|m| m
                .starts_with("Liveness probe failed: command timed out: \"sh -c curl -sf -m 5 ")
                && m.ends_with("\" timed out after 5s"))),
        "{v:#}"
    );
    assert!(
        v["evidence"]["loading"]
            .as_str()
            .is_some_and(|l| l.starts_with("llama3.2:3b")),
        "{v:#}"
    );
    assert_eq!(v["evidence"]["liveness"]["kind"], "exec");
    // The kubelet restarted the container: the pod's restart count rose.
    let pod = v["pod"].as_str().expect("pod");
    assert!(r.state.pods.get(pod).is_none_or(|p| p.restarts() >= 1));
}

#[test]
fn gpu_surge_on_a_one_gpu_node_is_rollout_stalled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("r.jsonl");
    let r = run(
        &lab_args(
            "local-3b",
            "gpu-surge",
            &[
                "--trials",
                "1",
                "--replace",
                "restart",
                "--ready-timeout",
                "25s",
            ],
        ),
        &rec,
    );
    assert_eq!(r.code, Some(1), "the trial cannot finish: {}", r.stderr);
    assert_eq!(agree(&r, ContractKind::RolloutStalled), 1);
    let v = verdicts(&r, "rollout_stalled")[0];
    assert_eq!(
        v["evidence"]["failed_scheduling"],
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. no new claims to deallocate, \
         preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    );
    assert!(v["seconds"].as_f64().is_some_and(|s| s >= 15.0), "{v:#}");
    assert!(
        v["advice"]
            .as_str()
            .is_some_and(|a| a.contains("maxSurge: 0, maxUnavailable: 1"))
    );
    // The surge pod is the one Pending, not the old one.
    let pod = v["pod"].as_str().expect("pod");
    let p = r.state.pods.get(pod).expect("the surge pod is still there");
    assert_eq!(p.phase, "Pending");
    assert!(p.condition("PodScheduled").is_some_and(|c| !c.status));
    // The trial that timed out says why in the scheduler's words (issue 34).
    let t = r.state.timeline.trials.last().expect("the trial");
    let reason = t.reason().unwrap_or_default();
    assert!(
        reason.starts_with("timeout: the replacement pod was not Ready within")
            && reason.ends_with(
                "(Pending: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu. no new claims \
                 to deallocate, preemption: 0/2 nodes are available: 2 No preemption victims \
                 found for incoming pod.)"
            ),
        "{reason}"
    );
}

/// `--verdict-rollout-stall-after` moves the stall threshold (15 s by default): a surge pod
/// Pending 3 s with its scheduling failure is stalled, the evidence names the threshold,
/// and the replayed recording judges the same (the session event carries it).
#[test]
fn the_rollout_stall_threshold_is_the_users() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("r.jsonl");
    let r = run(
        &lab_args(
            "local-3b",
            "gpu-surge",
            &[
                "--trials",
                "1",
                "--replace",
                "restart",
                "--ready-timeout",
                "8s",
                "--verdict-rollout-stall-after",
                "3s",
            ],
        ),
        &rec,
    );
    assert_eq!(agree(&r, ContractKind::RolloutStalled), 1, "{}", r.stderr);
    let v = verdicts(&r, "rollout_stalled")[0];
    assert_eq!(v["evidence"]["threshold_seconds"], 3.0, "{v:#}");
    assert!(
        v["seconds"]
            .as_f64()
            .is_some_and(|s| (3.0..8.0).contains(&s)),
        "{v:#}"
    );
    assert_eq!(r.state.contract.thresholds.rollout_stall_after_s, 3.0);
}

#[test]
fn repeated_trials_on_the_same_node_are_warm_and_cold_ones_are_apart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("warm.jsonl");
    let r = run(&lab_args("local-3b", "baseline", &["--trials", "2"]), &rec);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(agree(&r, ContractKind::WarmNodeBias) >= 1);
    let trials = r.report["files"][0]["trials"].as_array().expect("trials");
    assert_eq!(trials[1]["condition"], "warm", "{:#}", trials[1]);
    let warm = &r.report["files"][0]["conditions"]["warm"];
    assert!(
        warm["trials"].as_u64().is_some_and(|n| n >= 1),
        "{:#}",
        r.report
    );
    // The table shows the warm trials under their own heading.
    let table = Command::new(env!("CARGO_BIN_EXE_readygap"))
        .arg("report")
        .arg(&rec)
        .output()
        .expect("report");
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("\n  warm: "), "{text}");

    // Cold trials (the cache dropped before each) are cold, with no warm verdict.
    let rec = dir.path().join("cold.jsonl");
    let r = run(
        &lab_args("azure-3b-cold", "baseline", &["--trials", "2", "--cold"]),
        &rec,
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let trials = r.report["files"][0]["trials"].as_array().expect("trials");
    let conditions: Vec<&Value> = trials.iter().map(|t| &t["condition"]).collect();
    // The lab's node starts cold: the first drop finds nothing to drop (Cached did not
    // fall), so that trial is flagged warm only if the model was loaded there before.
    assert_eq!(
        conditions.last().copied(),
        Some(&Value::from("cold")),
        "{trials:#?}"
    );
    for (t, v) in trials.iter().zip(
        r.state
            .timeline
            .trials
            .iter()
            .map(|t| t.cold.as_ref().map(|c| c.dropped)),
    ) {
        if v == Some(true) {
            assert_eq!(t["condition"], "cold");
            assert!(
                !t["verdicts"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|k| k == "warm_node_bias"))
            );
        }
    }
}

#[test]
fn a_replacement_without_surge_is_a_traffic_gap_of_the_exact_length() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rec = dir.path().join("r.jsonl");
    let r = run(&lab_args("local-3b", "baseline", &["--trials", "1"]), &rec);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(agree(&r, ContractKind::TrafficGap) >= 1);
    // The length from the recording's own EndpointSlice events: the first instant no
    // endpoint was ready after one was, to the next instant one was.
    let recording = jsonl::read(&rec).expect("recording");
    let mut s = State::new();
    let (mut from, mut gap) = (None, None);
    for ev in &recording.events {
        s.apply(ev);
        if !matches!(
            ev.kind,
            readygap_core::event::EventKind::EndpointSliceApplied(_)
                | readygap_core::event::EventKind::EndpointSliceDeleted { .. }
                | readygap_core::event::EventKind::ResyncDone { .. }
        ) {
            continue;
        }
        let ready = s.endpoints.last_value().map(|c| c.ready).unwrap_or(0);
        match (ready, from) {
            (0, None)
                if s.endpoints
                    .points()
                    .any(|p| p.value.is_some_and(|c| c.ready > 0)) =>
            {
                from = Some(ev.ts)
            }
            (n, Some(f)) if n > 0 && gap.is_none() => gap = Some((ev.ts - f).num_microseconds()),
            _ => {}
        }
    }
    let expected = gap.flatten().expect("a gap in the recording") as f64 / 1e6;
    let v = verdicts(&r, "traffic_gap")[0];
    assert!(
        // Both sides are whole microseconds of nanosecond stamps: they may differ by one.
        (v["seconds"].as_f64().expect("seconds") - expected).abs() < 1.5e-6,
        "{v:#} vs {expected}"
    );
    assert!(
        v["evidence"]["covered_by_serving_terminating_seconds"].is_number(),
        "{v:#}"
    );
}

#[test]
fn report_on_the_published_csvs_says_which_condition_each_file_is() {
    let results = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/published/results");
    let cache = results.join("cloud-cpu/ollama/llama3.2-3b/cache");
    let out = Command::new(env!("CARGO_BIN_EXE_readygap"))
        .args(["report", "--format", "json"])
        .arg(&cache)
        .arg(results.join("cloud-cpu/ollama/llama3.2-3b/pvc-recovery-4gi.csv"))
        .output()
        .expect("report");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    let file = |name: &str| {
        report["files"]
            .as_array()
            .and_then(|fs| {
                fs.iter()
                    .find(|f| f["path"].as_str().is_some_and(|p| p.ends_with(name)))
            })
            .unwrap_or_else(|| panic!("{name} in {report:#}"))
            .clone()
    };
    let cold = file("cold-cache-recovery.csv");
    let warm = file("warm-cache-recovery.csv");
    let baseline = file("pvc-recovery-4gi.csv");
    // The cache_condition column.
    assert_eq!(cold["measured"]["cache"], "cold");
    assert_eq!(warm["measured"]["cache"], "warm");
    assert!(baseline["measured"].get("cache").is_none(), "{baseline:#}");
    assert_eq!(cold["conditions"]["cold"]["trials"], 10);
    assert_eq!(warm["conditions"]["warm"]["trials"], 10);
    // Every one of these runs had Ready before the model answered (no inference-aware
    // probe): the first inference after Ready paid the load.
    for f in [&cold, &warm, &baseline] {
        assert!(
            f["measured"]["readiness"]
                .as_str()
                .is_some_and(|r| r.starts_with("shallow")),
            "{f:#}"
        );
    }
}
