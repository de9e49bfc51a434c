//! The published overlapping-residency case end to end: against the built-in lab, a 1B model
//! resident on the new pod, then the trial's 3B inference under 4 GiB. readygap's own feeds
//! (watch, /api/ps, /api/tags, cgroup memory over exec) and its detector must warn before the
//! kill (`oom_risk`) and name both models in `overlapping_residency_oom`.

use readygap_core::record::jsonl;
use readygap_core::residency::VerdictKind;
use readygap_core::state::State;
use std::process::Command;

#[test]
fn overlap_oom_is_warned_then_named_with_both_models() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("overlap.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_readygap"))
        .args([
            "run",
            "--lab",
            "local-3b",
            "--lab-speed",
            "4",
            "--lab-scenario",
            "overlap-oom",
            "--model",
            "llama3.2:3b",
            "--preload-model",
            "llama3.2:1b",
            "--trials",
            "1",
            "--cooldown",
            "2s",
            "--format",
            "json",
            "--record",
        ])
        .arg(&rec)
        .output()
        .unwrap();
    // The trial fails (that is the point): exit code 1, and a report on stdout.
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recording = jsonl::read(&rec).unwrap();
    let state = State::from_events(&recording.events);
    let v = &state.oom.verdicts;
    let risk = v.iter().position(|v| v.kind == VerdictKind::OomRisk);
    let kill = v
        .iter()
        .position(|v| v.kind == VerdictKind::OverlappingResidencyOom);
    let (Some(risk), Some(kill)) = (risk, kill) else {
        panic!("expected oom_risk then overlapping_residency_oom, got {v:#?}");
    };
    assert!(
        risk < kill && v[risk].ts <= v[kill].ts,
        "the warning comes first"
    );
    let names: Vec<&str> = v[kill].models.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["llama3.2:1b", "llama3.2:3b"], "{}", v[kill].message);
    assert_eq!(v[kill].limit, Some(4 << 30));
    // The kernel-side evidence: the container was OOM-killed (exit 137) and restarted.
    assert!(state.pods.values().any(|p| p.oom_killed()));
    // The trial ends with the verdict as its reason.
    let first = &state.timeline.trials[0];
    assert!(
        first
            .reason()
            .is_some_and(|r| r.starts_with("overlapping_residency_oom: llama3.2:1b")),
        "{:?}",
        first.status
    );
    // `--format json` carries the same verdict as structured evidence on the trial.
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    let oom = &report["files"][0]["trials"][0]["oom"];
    assert_eq!(oom["verdict"], "overlapping_residency_oom", "{report:#}");
    assert_eq!(oom["pod"].as_str(), Some(v[kill].pod.as_str()));
    assert_eq!(oom["limit_bytes"], 4u64 << 30);
    let models: Vec<(&str, u64)> = oom["models"]
        .as_array()
        .expect("models")
        .iter()
        .map(|m| {
            (
                m["name"].as_str().expect("name"),
                m["bytes"].as_u64().expect("a known size"),
            )
        })
        .collect();
    assert_eq!(
        models,
        v[kill]
            .models
            .iter()
            .map(|(n, b)| (n.as_str(), *b))
            .collect::<Vec<_>>()
    );
    // The 1B model was seen resident; the 3B one never was: its size is an estimate.
    assert_eq!(oom["models"][0]["estimated"], false);
    assert_eq!(oom["models"][1]["estimated"], true);
    assert!(
        oom["at"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{oom}"
    );
}
