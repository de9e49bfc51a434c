//! The demo recordings shipped in `recordings/` replay to the timelines and statistics they
//! were made to show (see recordings/README.md for how each was made).

use readygap_core::record::jsonl;
use readygap_core::residency::VerdictKind;
use readygap_core::state::State;
use readygap_core::stats::TrialStats;
use readygap_core::timeline::Metric;
use std::path::Path;

fn replay(name: &str) -> State {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../recordings")
        .join(name);
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(
        size < 2 << 20,
        "{name} is {size} bytes: recordings must stay under 2 MB"
    );
    let rec = jsonl::read(&path).unwrap_or_else(|e| panic!("{e}"));
    assert!(rec.warnings.is_empty(), "{:?}", rec.warnings);
    assert_eq!(rec.header.namespace, "llm-recovery-lab");
    State::from_events(&rec.events)
}

#[test]
fn warm_3b_series() {
    let s = replay("warm-3b-series.jsonl");
    let own: Vec<_> = s.timeline.trials.iter().filter(|t| !t.external).collect();
    assert_eq!(own.len(), 3);
    assert!(own.iter().all(|t| t.is_ok() && t.cold.is_none()));
    for t in &own {
        let m = &t.marks;
        assert!(m.t0 < m.t1 && m.t1 < m.t4 && m.t3 < m.t4, "{m:?}");
        assert!(m.t2.is_some() && m.model_resident.is_some() && m.first_token.is_some());
    }
    let stats = TrialStats::of(own.iter().copied());
    // The local-3b profile follows the published local-mac 3B means (k8s 1.962 s,
    // ready→inference 14.310 s); a 3-trial sample stays within 25% of them.
    let k8s = stats.get(Metric::K8sRecovery).unwrap().mean;
    let r2i = stats.get(Metric::ReadyToInference).unwrap().mean;
    assert!((k8s / 1.962 - 1.0).abs() < 0.25, "k8s_recovery mean {k8s}");
    assert!(
        (r2i / 14.310 - 1.0).abs() < 0.25,
        "ready_to_inference mean {r2i}"
    );
    assert!(stats.get(Metric::MemoryAfter).is_some());
}

#[test]
fn cold_3b_series_records_the_cold_step() {
    let s = replay("cold-3b-series.jsonl");
    let own: Vec<_> = s.timeline.trials.iter().filter(|t| !t.external).collect();
    assert_eq!(own.len(), 3);
    assert!(own.iter().all(|t| t.is_ok()));
    for t in &own {
        let c = t.cold.as_ref().expect("every trial ran the cold step");
        assert!(c.cached_kb_before.is_some() && c.cached_kb_after.is_some());
        if c.dropped {
            assert!(c.cached_kb_after < c.cached_kb_before);
        } else {
            // The node started cold: nothing to drop, and readygap said so.
            assert!(
                c.error
                    .as_deref()
                    .is_some_and(|e| e.contains("fell by only"))
            );
        }
    }
    assert!(
        own.iter()
            .filter(|t| t.cold.as_ref().is_some_and(|c| c.dropped))
            .count()
            >= 2
    );
    // Cold loads follow the published cold-cache file (load_duration mean 4.6 s).
    let load = TrialStats::of(own.iter().copied())
        .get(Metric::LoadDuration)
        .unwrap()
        .mean;
    assert!(
        (load / 4.606 - 1.0).abs() < 0.25,
        "load_duration mean {load}"
    );
}

#[test]
fn overlap_oom_is_named() {
    let s = replay("overlap-oom.jsonl");
    let kinds: Vec<VerdictKind> = s.oom.verdicts.iter().map(|v| v.kind).collect();
    assert_eq!(
        kinds,
        [VerdictKind::OomRisk, VerdictKind::OverlappingResidencyOom]
    );
    let kill = &s.oom.verdicts[1];
    let names: Vec<&str> = kill.models.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["llama3.2:1b", "llama3.2:3b"]);
    let first = &s.timeline.trials[0];
    assert!(
        first
            .reason()
            .is_some_and(|r| r.starts_with("overlapping_residency_oom")),
        "{:?}",
        first.status
    );
}
