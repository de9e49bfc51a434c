//! `readygap run` on the real cluster with the shipped manifests: every mark, the real
//! engine's own load_duration, the container's real cgroup memory read through exec, `/api/ps`
//! as `ollama ps` prints it in the pod; the readiness contract judged with the shipped
//! inference-aware probe and with the shallow HTTP probe of `overlays/http-readiness`.

use crate::support::{MODEL, cluster, ollama_ps_sizes, own_trials, recorded, repo};
use readygap_core::event::{EventKind, MemorySource};
use readygap_core::timeline::Trial;
use std::path::Path;

/// `readygap run --trials N` against the deployed overlay; the recording's trials and events.
fn run(
    c: &crate::support::Cluster,
    trials: usize,
    rec: &Path,
) -> (Vec<Trial>, Vec<readygap_core::event::Event>) {
    let n = trials.to_string();
    let out = c.run(
        rec,
        &[
            "--model",
            MODEL,
            "--trials",
            &n,
            "--cooldown",
            "2s",
            "--format",
            "json",
        ],
    );
    assert!(
        out.status.success(),
        "readygap run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = recorded(rec);
    let own = own_trials(rec);
    assert_eq!(own.len(), trials, "{own:#?}");
    (own, events)
}

#[ignore = "needs the real cluster: scripts/cluster.sh up"]
#[test]
fn three_trials_with_the_shipped_probe_measure_real_load_and_cgroup_memory() {
    let c = cluster();
    c.deploy(&repo().join("manifests/overlays/smollm2"));
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("run.jsonl");
    let (trials, events) = run(&c, 3, &rec);

    for t in &trials {
        let m = &t.marks;
        assert!(t.is_ok(), "trial {} failed: {:?}", t.index, t.status);
        let (t0, t1, t2, t3, t4) = (
            m.t0.expect("T0"),
            m.t1.expect("T1"),
            m.t2.expect("T2"),
            m.t3.expect("T3"),
            m.t4.expect("T4"),
        );
        eprintln!(
            "trial {}: T0→T1 {} ms, T0→T2 {} ms, T1→T4 {} ms, load {:.1} ms, memory after {:?}",
            t.index,
            (t1 - t0).num_milliseconds(),
            (t2 - t0).num_milliseconds(),
            (t4 - t1).num_milliseconds(),
            t.durations.load_ns.unwrap_or(0) as f64 / 1e6,
            t.memory_after
        );
        assert!(
            t0 < t1 && t0 < t2 && t2 <= t3 && t3 < t4,
            "marks out of order: {m:?}"
        );
        // The study's T2, through the real API server's service proxy (a ready address of
        // the Service's Endpoints): after Ready, after the runtime answered on the pod, and
        // soon after (probes every 50 ms from T1).
        let svc = m.t2_service.expect("T2 through the Service");
        eprintln!(
            "trial {}: T1→T2 on the pod {} ms, through the Service {} ms",
            t.index,
            (t2 - t1).num_milliseconds(),
            (svc - t1).num_milliseconds()
        );
        assert!(svc >= t1 && svc >= t2, "{m:?}");
        assert!((svc - t1).num_milliseconds() < 5_000, "{m:?}");
        // The real engine's own figure, not a lab's draw: positive and below the request's wall.
        let load = t
            .durations
            .load_ns
            .expect("load_duration from the real Ollama");
        assert!(load > 0, "load_duration {load}");
        assert!(
            (load as i64) / 1_000_000 <= (t4 - t3).num_milliseconds(),
            "load_duration {load} ns beyond the request's wall time"
        );
        assert!(t.memory_after.is_some(), "no memory after T4: {t:?}");
        // The shipped probe is inference-aware: Ready means the model answered.
        assert!(
            !t.verdicts.iter().any(|v| v == "shallow_readiness"),
            "shallow_readiness with the inference-aware probe: {:?}",
            t.verdicts
        );
        // Memory of the replacement pod from its real cgroup (v1 here, v2 elsewhere),
        // rising while the model loads.
        let pod = t.new_pod.as_deref().expect("the replacement pod");
        let samples: Vec<u64> = events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::MemorySample(s)
                    if s.pod == pod
                        && matches!(s.source, MemorySource::CgroupV1 | MemorySource::CgroupV2) =>
                {
                    Some(s.current)
                }
                _ => None,
            })
            .collect();
        assert!(
            samples.len() >= 3,
            "{pod}: {} cgroup samples",
            samples.len()
        );
        let (lo, hi) = (samples.iter().min().unwrap(), samples.iter().max().unwrap());
        eprintln!(
            "{pod}: cgroup memory {lo} → {hi} bytes over {} samples",
            samples.len()
        );
        assert!(
            hi - lo >= 20 << 20,
            "{pod}: memory did not rise with the model load ({lo} → {hi})"
        );
    }

    // Where T2 came before T1 (the shipped probe passes only once the runtime answers), the
    // report says why ready_to_runtime is negative (issue 31 defect 4); where not, nothing.
    let negative = trials.iter().filter(|t| t.marks.t2 < t.marks.t1).count();
    let report = std::process::Command::new(env!("CARGO_BIN_EXE_readygap"))
        .arg("report")
        .arg(&rec)
        .output()
        .expect("readygap report");
    let report = String::from_utf8_lossy(&report.stdout);
    eprintln!(
        "{negative} of {} trials with T2 before T1:\n{report}",
        trials.len()
    );
    assert_eq!(
        report.contains(&format!(
            "ready_to_runtime: negative in {negative} of 3 trials"
        )),
        negative > 0,
        "{report}"
    );
    // ... and names the figure to compare with the study's instead.
    assert_eq!(
        report.contains("`ready_to_runtime_service` (the first answer through the Service after Ready, in 3 trials)"),
        negative > 0,
        "{report}"
    );

    // What readygap read from /api/ps last is what `ollama ps` prints in the pod.
    let pod = c.pod();
    let ps = c.kn(&["exec", &pod, "-c", "ollama", "--", "ollama", "ps"]);
    let printed = ollama_ps_sizes(&ps);
    let recorded = events
        .iter()
        .rev()
        .find_map(|e| match &e.kind {
            EventKind::Residency { pod: p, models } if *p == pod => Some(models.clone()),
            _ => None,
        })
        .expect("a residency reading of the serving pod");
    assert_eq!(
        recorded.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(),
        printed
            .iter()
            .map(|(n, _, _)| n.as_str())
            .collect::<Vec<_>>(),
        "ollama ps:\n{ps}"
    );
    for (m, (_, bytes, unit)) in recorded.iter().zip(&printed) {
        assert!(
            (m.size as f64 - bytes).abs() < *unit,
            "{}: /api/ps {} bytes, ollama ps {ps}",
            m.name,
            m.size
        );
    }
}

#[ignore = "needs the real cluster: scripts/cluster.sh up"]
#[test]
fn the_shallow_http_probe_is_judged_shallow_on_the_same_model() {
    let c = cluster();
    let dir = tempfile::tempdir().unwrap();
    let overlay = crate::support::http_readiness_overlay(dir.path());
    c.deploy(&overlay);
    let rec = dir.path().join("run.jsonl");
    let (trials, _) = run(&c, 1, &rec);
    let t = &trials[0];
    assert!(t.is_ok(), "{:?}", t.status);
    assert!(
        t.verdicts.iter().any(|v| v == "shallow_readiness"),
        "no shallow_readiness with the HTTP probe: {:?} (T1 {:?}, T4 {:?})",
        t.verdicts,
        t.marks.t1,
        t.marks.t4
    );
    // Back to the shipped probe for the tests that follow.
    c.deploy(&repo().join("manifests/overlays/smollm2"));
}
