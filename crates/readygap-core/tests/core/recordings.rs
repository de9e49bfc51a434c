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
    // The report says the file is mixed, not warm.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../recordings/warm-3b-series.jsonl");
    let r = readygap_core::report::report_file(&path).expect("report");
    assert_eq!(
        r.measured.get("cache").map(String::as_str),
        Some("mixed (unflagged, warm)")
    );
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

/// The verdicts of kind `kind` in a replayed recording.
fn contract(
    s: &State,
    kind: readygap_core::verdict::ContractKind,
) -> Vec<&readygap_core::verdict::ContractVerdict> {
    s.contract
        .verdicts
        .iter()
        .filter(|v| v.kind == kind)
        .collect()
}

#[test]
fn shallow_readiness_demo_names_the_probe_and_the_window() {
    use readygap_core::verdict::ContractKind::*;
    let s = replay("shallow-readiness.jsonl");
    let t = &s.timeline.trials[0];
    let v = contract(&s, ShallowReadiness);
    assert_eq!(v.len(), 1, "{:#?}", s.contract.verdicts);
    assert!(
        v[0].message
            .contains("readinessProbe httpGet /api/tags :11434")
    );
    // The window is Ready (the endpoint) to the first answer: the model's load at speed 1.
    let m = &t.marks;
    let window = (m.t4.unwrap() - m.endpoint_ready.unwrap())
        .num_microseconds()
        .unwrap() as f64
        / 1e6;
    assert!((v[0].seconds.unwrap() - window).abs() < 1e-6);
    assert!(window > 5.0, "local-3b loads for seconds: {window}");
    assert_eq!(contract(&s, TrafficGap).len(), 1);
    assert_eq!(contract(&s, ModelNotResident).len(), 1);
}

#[test]
fn inference_readiness_demo_covers_inference() {
    use readygap_core::verdict::ContractKind::*;
    let s = replay("inference-readiness.jsonl");
    assert_eq!(
        contract(&s, ReadinessCoversInference).len(),
        1,
        "{:#?}",
        s.contract.verdicts
    );
    assert!(contract(&s, ShallowReadiness).is_empty());
}

#[test]
fn emptydir_demo_is_model_missing_on_an_emptydir() {
    let s = replay("emptydir-model-missing.jsonl");
    let v = contract(
        &s,
        readygap_core::verdict::ContractKind::ModelMissingAfterReplacement,
    );
    assert!(!v.is_empty(), "{:#?}", s.contract.verdicts);
    assert!(v.iter().all(|v| v.evidence["models_volume"] == "emptyDir"));
    assert!(!s.timeline.trials[0].is_ok());
}

#[test]
fn aggressive_liveness_demo_is_killed_during_load() {
    let s = replay("aggressive-liveness.jsonl");
    let v = contract(
        &s,
        readygap_core::verdict::ContractKind::LivenessKilledDuringLoad,
    );
    assert!(!v.is_empty(), "{:#?}", s.contract.verdicts);
    assert!(
        v[0].message.contains("failed liveness probe"),
        "{}",
        v[0].message
    );
    assert!(
        v[0].message.contains("every 5 s, 5 s timeout, 2 failures"),
        "{}",
        v[0].message
    );
    // Between trials (the broken one closed, the restart's not open yet): it goes to the
    // trial of its pod.
    let t = v[0].trial.expect("a trial");
    let trial = s
        .timeline
        .trials
        .iter()
        .find(|x| x.index == t)
        .expect("that trial");
    assert_eq!(trial.new_pod.as_deref(), Some(v[0].pod.as_str()));
    assert!(
        trial
            .verdicts
            .contains(&readygap_core::verdict::ContractKind::LivenessKilledDuringLoad)
    );
}

#[test]
fn gpu_surge_demo_is_a_stalled_rollout() {
    let s = replay("gpu-surge-stalled.jsonl");
    let v = contract(&s, readygap_core::verdict::ContractKind::RolloutStalled);
    assert_eq!(v.len(), 1, "{:#?}", s.contract.verdicts);
    assert!(v[0].message.contains("Insufficient nvidia.com/gpu"));
    assert!(v[0].seconds.unwrap() >= 15.0);
}

#[test]
fn warm_series_is_flagged_warm_and_the_cold_one_is_not() {
    let s = replay("warm-3b-series.jsonl");
    let warm: Vec<_> = s
        .timeline
        .trials
        .iter()
        .filter(|t| t.condition.as_deref() == Some("warm"))
        .collect();
    // Trials 2 and 3 ran on the node where trial 1 had loaded the model.
    assert!(
        warm.len() >= 2,
        "{:?}",
        s.timeline
            .trials
            .iter()
            .map(|t| &t.condition)
            .collect::<Vec<_>>()
    );
    assert_eq!(
        contract(&s, readygap_core::verdict::ContractKind::WarmNodeBias).len(),
        warm.len()
    );
    // The report says the file is mixed, not warm.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../recordings/warm-3b-series.jsonl");
    let r = readygap_core::report::report_file(&path).expect("report");
    assert_eq!(
        r.measured.get("cache").map(String::as_str),
        Some("mixed (unflagged, warm)")
    );
    let s = replay("cold-3b-series.jsonl");
    for t in &s.timeline.trials {
        if t.cold.as_ref().is_some_and(|c| c.dropped) {
            assert_eq!(t.condition.as_deref(), Some("cold"));
        }
    }
}

/// A long session is the short one many times over: the shipped series repeated with
/// shifted times (`fixtures::repeated`, the shape of `benches/core.rs`'s long session) gives
/// its trials again in every copy, measured the same: what the reducer finds of a trial does
/// not depend on how many trials came before it.
#[test]
fn a_recording_repeated_gives_the_same_trials_in_every_copy() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../recordings/warm-3b-series.jsonl");
    let rec = jsonl::read(&path).unwrap_or_else(|e| panic!("{e}"));
    let once = State::from_events(&rec.events).timeline.trials;
    let copies = 12;
    let long = readygap_core::fixtures::repeated(&rec.events, rec.events.len() * copies);
    let trials = State::from_events(&long).timeline.trials;
    let n = once.len();
    assert_eq!(trials.len(), n * copies);
    let seen = |t: &readygap_core::timeline::Trial| {
        let metrics: Vec<_> = Metric::ALL.iter().map(|m| t.metric(*m)).collect();
        (
            t.external,
            t.status.clone(),
            t.new_pod.clone(),
            t.condition.clone(),
            t.verdicts.clone(),
            metrics,
        )
    };
    // The first copy is the recording itself; every later one starts from the state the one
    // before left (its node warm), so each is compared with the second.
    for (i, t) in trials.iter().enumerate() {
        let like = if i < n { &once[i] } else { &trials[n + i % n] };
        assert_eq!(seen(t), seen(like), "trial {}", t.index);
        assert_eq!(t.index as usize, i + 1);
    }
    assert!(trials.iter().all(|t| t.is_ok() && t.memory_after.is_some()));
}

/// The lab's vLLM on its simulated GPU (recordings/README.md): each trial's marks hold
/// vLLM's start-up phases in its order between T0 and T2, the new pods' GPU memory rises
/// as the weights and the KV cache fill it (read with `nvidia-smi`, said as such), and the
/// HTML report draws it as "GPU memory".
#[test]
fn vllm_gpu_startup_demo_has_the_phases_and_the_gpu_memory() {
    let s = replay("vllm-gpu-startup.jsonl");
    let own: Vec<_> = s.timeline.trials.iter().filter(|t| !t.external).collect();
    assert_eq!(own.len(), 2);
    for t in &own {
        assert!(t.is_ok(), "{t:?}");
        let m = &t.marks;
        let at = |p: &str| {
            *m.startup
                .get(p)
                .unwrap_or_else(|| panic!("no {p} in {:?}", m.startup))
        };
        let phases = [
            "weights_loaded",
            "kv_cache_profiled",
            "kv_cache_allocated",
            "graphs_captured",
            "engine_ready",
        ];
        let times: Vec<_> = phases.iter().map(|p| at(p)).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{:?}", m.startup);
        assert!(m.t0.unwrap() <= times[0] && times[4] <= m.t2.unwrap());
        let pod = t.new_pod.as_deref().unwrap();
        let g = &s.gpu[pod];
        assert_eq!(g.source.as_deref(), Some("nvidia-smi in the container"));
        let used: Vec<u64> = g
            .series
            .points()
            .filter_map(|p| p.value.map(|v| v.used))
            .collect();
        assert!(used.len() >= 3 && used.last() > used.first(), "{used:?}");
    }
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../recordings/vllm-gpu-startup.jsonl");
    let report = readygap_core::report::Report {
        files: vec![readygap_core::report::report_file(&path).unwrap()],
    };
    let html = readygap_core::report::render(&report, readygap_core::report::Format::Html).unwrap();
    assert!(
        html.contains("GPU memory (VRAM") && html.matches(r#"class="gpu-line""#).count() >= 2,
        "the VRAM curve of each trial's new pod"
    );
}

/// The lab's `gpu-shared` scenario (recordings/README.md): the surge vLLM refuses to start
/// on the GPU its predecessor fills; `vram_overcommit` quotes vLLM's line and names the one
/// GPU with both pods, and the trial failed by the restart.
#[test]
fn vllm_gpu_shared_demo_is_vram_overcommit() {
    let s = replay("vllm-gpu-shared-overcommit.jsonl");
    let v = contract(&s, readygap_core::verdict::ContractKind::VramOvercommit);
    assert_eq!(v.len(), 1, "{:#?}", s.contract.verdicts);
    assert!(
        v[0].message
            .contains("Free memory on device (2.09/24.00 GiB)"),
        "{}",
        v[0].message
    );
    assert_eq!(
        v[0].evidence["gpu"]["pods"].as_array().map(Vec::len),
        Some(2)
    );
    let own: Vec<_> = s.timeline.trials.iter().filter(|t| !t.external).collect();
    assert_eq!(own.len(), 1);
    assert!(!own[0].is_ok(), "{:?}", own[0].status);
}
