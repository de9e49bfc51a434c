//! The readiness-contract verdicts, one rule per test, through the reducer: each with the
//! events that must produce it and a near miss that must not.

use readygap_core::event::*;
use readygap_core::fixtures::*;
use readygap_core::state::State;
use readygap_core::verdict::{ContractKind, ContractVerdict, VerdictThresholds};

fn kinds(s: &State) -> Vec<ContractKind> {
    s.contract.verdicts.iter().map(|v| v.kind).collect()
}

fn one(s: &State, kind: ContractKind) -> &ContractVerdict {
    let found: Vec<_> = s
        .contract
        .verdicts
        .iter()
        .filter(|v| v.kind == kind)
        .collect();
    assert_eq!(found.len(), 1, "one {kind:?} in {:#?}", s.contract.verdicts);
    found[0]
}

fn probe_facts(kind: &str, target: &str, inference: bool) -> ProbeFacts {
    ProbeFacts {
        kind: kind.into(),
        target: target.into(),
        inference,
        initial_delay_seconds: 0,
        period_seconds: 5,
        timeout_seconds: 10,
        failure_threshold: 1,
    }
}

fn with_spec(mut p: PodView, readiness: Option<ProbeFacts>, volume: &str) -> PodView {
    p.containers[0].spec = Some(PodSpecFacts {
        readiness,
        liveness: None,
        startup: None,
        models_volume: Some(volume.into()),
        models_mount: Some("/root/.ollama".into()),
        gpus: 0,
    });
    p
}

/// A readygap trial replacing ollama-a by ollama-b whose pods carry a spec (fixtures'
/// `full_trial`: Ready at 1.7 s, T4 at 8 s, a 4 s load).
fn trial_with_spec(readiness: Option<ProbeFacts>) -> Vec<Event> {
    let mut events = vec![applied(
        -10_000,
        pod("ollama-a", "uid-a", Stage::Ready, -10_000),
    )];
    for e in full_trial(0, 1, ("ollama-a", "uid-a"), ("ollama-b", "uid-b")) {
        events.push(match e.kind {
            EventKind::PodApplied(p) if p.name == "ollama-b" => Event::new(
                e.ts,
                e.source,
                EventKind::PodApplied(with_spec(
                    p,
                    readiness.clone(),
                    "persistentVolumeClaim ollama-models",
                )),
            ),
            _ => e,
        });
    }
    events
}

fn residency(ms: i64, pod: &str, models: &[&str]) -> Event {
    Event::new(
        at(ms),
        Source::Runtime,
        EventKind::Residency {
            pod: pod.into(),
            models: models
                .iter()
                .map(|m| ResidentModel {
                    name: (*m).into(),
                    size: 3 << 30,
                    ..Default::default()
                })
                .collect(),
        },
    )
}

fn on_disk(ms: i64, pod: &str, models: &[&str]) -> Event {
    Event::new(
        at(ms),
        Source::Runtime,
        EventKind::ModelsOnDisk {
            pod: pod.into(),
            models: models
                .iter()
                .map(|m| DiskModel {
                    name: (*m).into(),
                    size: 2 << 30,
                })
                .collect(),
        },
    )
}

fn kube_event(ms: i64, pod: &str, reason: &str, message: &str) -> Event {
    Event::new(
        at(ms),
        Source::Kube,
        EventKind::KubeEvent(KubeEventView {
            object: format!("pod/{pod}"),
            reason: reason.into(),
            message: message.into(),
            type_: "Warning".into(),
            time: Some(at(ms)),
            ..Default::default()
        }),
    )
}

fn session_model(model: &str) -> Event {
    Event::new(
        at(-20_000),
        Source::Session,
        EventKind::Session(SessionInfo {
            model: Some(model.into()),
            ..Default::default()
        }),
    )
}

fn slice(ms: i64, endpoints: &[(&str, bool, bool, bool)]) -> Event {
    Event::new(
        at(ms),
        Source::Kube,
        EventKind::EndpointSliceApplied(EndpointSliceView {
            name: "ollama-x".into(),
            service: Some("ollama".into()),
            endpoints: endpoints
                .iter()
                .map(|(pod, ready, serving, terminating)| EndpointView {
                    addresses: vec![format!("10.0.0.{}", pod.len())],
                    pod: Some((*pod).into()),
                    ready: *ready,
                    serving: *serving,
                    terminating: *terminating,
                })
                .collect(),
        }),
    )
}

#[test]
fn shallow_readiness_measures_the_ready_window_and_names_the_probe() {
    let s = State::from_events(&trial_with_spec(Some(probe_facts(
        "httpGet",
        "/api/tags :11434",
        false,
    ))));
    let v = one(&s, ContractKind::ShallowReadiness);
    // Ready (T1, no EndpointSlice seen) at 1.7 s, first answer at 8 s.
    assert_eq!(v.seconds, Some(6.3));
    assert!(
        v.message
            .contains("readinessProbe httpGet /api/tags :11434"),
        "{}",
        v.message
    );
    assert!(v.advice.contains("manifests/base/probe"), "{}", v.advice);
    assert_eq!(v.trial, Some(1));
    assert_eq!(s.timeline.trials[0].verdicts, vec!["shallow_readiness"]);
    assert!(!kinds(&s).contains(&ContractKind::ReadinessCoversInference));
    // On screen: the footer's message log carries it.
    assert!(s.messages.iter().any(|m| {
        m.text
            .starts_with("shallow_readiness: ollama-b ready and serving 6.300 s")
    }));
}

#[test]
fn readiness_covers_inference_when_the_model_was_resident_at_ready() {
    let mut events = trial_with_spec(Some(probe_facts(
        "exec",
        "bash /etc/readygap/ready-inference.sh",
        true,
    )));
    // The probe's inference loaded the model before the pod turned Ready (1.7 s).
    events.insert(7, residency(1_600, "ollama-b", &["llama3.2:3b"]));
    let s = State::from_events(&events);
    let v = one(&s, ContractKind::ReadinessCoversInference);
    assert!(v.message.contains("model was resident"), "{}", v.message);
    assert!(v.message.contains("ready-inference.sh"), "{}", v.message);
    assert!(!kinds(&s).contains(&ContractKind::ShallowReadiness));
    // Seen resident only 3 s after Ready: that was the trial's own load, shallow.
    let mut late = trial_with_spec(None);
    late.push(residency(4_700, "ollama-b", &["llama3.2:3b"]));
    late.sort_by_key(|e| e.ts);
    let s = State::from_events(&late);
    let v = one(&s, ContractKind::ShallowReadiness);
    assert!(
        v.message
            .contains("no readinessProbe: Ready when the container starts"),
        "{}",
        v.message
    );
}

#[test]
fn model_missing_after_replacement_names_the_volume() {
    let new = with_spec(
        pod("ollama-b", "uid-b", Stage::Ready, 1_000),
        None,
        "emptyDir",
    );
    let base = vec![session_model("llama3.2:3b"), applied(1_000, new)];
    // The runtime answers, /api/tags lists nothing.
    let mut events = base.clone();
    events.extend([
        probe(1_200, "ollama-b", true),
        on_disk(1_300, "ollama-b", &[]),
    ]);
    let s = State::from_events(&events);
    let v = one(&s, ContractKind::ModelMissingAfterReplacement);
    assert!(
        v.message.contains("llama3.2:3b is not on disk"),
        "{}",
        v.message
    );
    assert!(
        v.message.contains("/root/.ollama on emptyDir"),
        "{}",
        v.message
    );
    assert_eq!(v.evidence["models_volume"], "emptyDir");
    assert_eq!(v.ts, at(1_300));
    // A generate that answers 404 says the same.
    let mut events = base.clone();
    events.push(infer_start(1_500, 7, "ollama-b"));
    events.push(Event::new(
        at(1_510),
        Source::Runtime,
        EventKind::InferenceDone(InferenceResult {
            request_id: 7,
            ok: false,
            http_status: Some(404),
            error: Some("model 'llama3.2:3b' not found".into()),
            ..Default::default()
        }),
    ));
    let s = State::from_events(&events);
    let v = one(&s, ContractKind::ModelMissingAfterReplacement);
    assert!(v.message.contains("generate answered 404"), "{}", v.message);
    // The model on disk (an untagged name is `:latest`): no verdict.
    let mut events = vec![session_model("llama3.2"), base[1].clone()];
    events.extend([
        probe(1_200, "ollama-b", true),
        on_disk(1_300, "ollama-b", &["llama3.2:latest"]),
    ]);
    assert!(kinds(&State::from_events(&events)).is_empty());
}

#[test]
fn model_not_resident_needs_ready_on_disk_and_the_runtimes_own_memory() {
    let ready = pod("ollama-b", "uid-b", Stage::Ready, 1_000);
    let events = vec![
        session_model("llama3.2:3b"),
        applied(1_000, ready.clone()),
        on_disk(1_100, "ollama-b", &["llama3.2:3b"]),
        residency(1_200, "ollama-b", &[]),
        memory(1_300, "ollama-b", 14 << 20),
    ];
    let s = State::from_events(&events);
    let v = one(&s, ContractKind::ModelNotResident);
    assert!(v.message.contains("14 MiB"), "{}", v.message);
    assert!(v.message.contains("first request will pay the load"));
    assert_eq!(v.ts, at(1_300));
    // The model resident (memory high): none.
    let mut other = events.clone();
    other[3] = residency(1_200, "ollama-b", &["llama3.2:3b"]);
    other[4] = memory(1_300, "ollama-b", 3 << 30);
    assert!(kinds(&State::from_events(&other)).is_empty());
    // Not Ready yet: none.
    let mut other = events.clone();
    other[1] = applied(1_000, pod("ollama-b", "uid-b", Stage::Started, 1_000));
    assert!(kinds(&State::from_events(&other)).is_empty());
}

#[test]
fn liveness_killed_during_load_needs_probe_events_a_restart_and_a_load() {
    let started = pod("ollama-b", "uid-b", Stage::Ready, 1_000);
    let mut restarted = started.clone();
    restarted.containers[0].restart_count = 1;
    restarted.containers[0].last_state = Some(ContainerState::Terminated {
        reason: "Error".into(),
        exit_code: 137,
        finished_at: Some(at(9_000)),
    });
    let unhealthy = kube_event(
        8_000,
        "ollama-b",
        "Unhealthy",
        "Liveness probe failed: command timed out",
    );
    let killing = kube_event(
        8_010,
        "ollama-b",
        "Killing",
        "Container ollama failed liveness probe, will be restarted",
    );
    let base = vec![
        session_model("llama3.2:3b"),
        applied(1_000, started.clone()),
        residency(1_500, "ollama-b", &[]),
        infer_start(2_000, 5, "ollama-b"),
    ];
    // Events first, then the restart.
    let mut events = base.clone();
    events.extend([
        unhealthy.clone(),
        killing.clone(),
        applied(9_100, restarted.clone()),
    ]);
    let s = State::from_events(&events);
    let v = one(&s, ContractKind::LivenessKilledDuringLoad);
    assert!(v.message.contains("failed liveness probe"), "{}", v.message);
    assert!(
        v.message
            .contains("llama3.2:3b (an inference waiting since"),
        "{}",
        v.message
    );
    assert_eq!(v.evidence["events"].as_array().map(Vec::len), Some(2));
    // The restart first, the Events after (watches do not agree on order).
    let mut events = base.clone();
    events.extend([applied(9_100, restarted.clone()), unhealthy.clone()]);
    let s = State::from_events(&events);
    assert_eq!(
        one(&s, ContractKind::LivenessKilledDuringLoad).ts,
        at(8_000)
    );
    // … and the Killing Event after both joins the verdict's evidence.
    events.push(killing.clone());
    let s = State::from_events(&events);
    let v = one(&s, ContractKind::LivenessKilledDuringLoad);
    assert_eq!(
        v.evidence["events"].as_array().map(Vec::len),
        Some(2),
        "{v:#?}"
    );
    // As the lab at speed 1 shows it: the model turned resident just before the kill, the
    // waiting inference broke first, then the restart. Still killed during the load.
    let mut events = base.clone();
    events.extend([
        unhealthy.clone(),
        residency(8_500, "ollama-b", &["llama3.2:3b"]),
        killing.clone(),
        infer_done(8_990, 5, false),
        applied(9_100, restarted.clone()),
    ]);
    let s = State::from_events(&events);
    let v = one(&s, ContractKind::LivenessKilledDuringLoad);
    assert!(v.message.contains("resident at"), "{}", v.message);
    // A restart without probe Events (an OOM, a crash): none.
    let mut events = base.clone();
    events.push(applied(9_100, restarted.clone()));
    assert!(kinds(&State::from_events(&events)).is_empty());
    // A liveness kill with the model resident and nothing waiting: not during a load.
    let events = vec![
        session_model("llama3.2:3b"),
        applied(1_000, started),
        residency(1_500, "ollama-b", &["llama3.2:3b"]),
        unhealthy,
        applied(9_100, restarted),
    ];
    assert!(kinds(&State::from_events(&events)).is_empty());
}

#[test]
fn rollout_stalled_after_the_threshold_with_a_scheduling_failure() {
    let mut pending = pod("ollama-c", "uid-c", Stage::Pending, 0);
    pending.created = Some(at(0));
    pending.conditions = vec![PodCondition {
        type_: "PodScheduled".into(),
        status: false,
        reason: Some("Unschedulable".into()),
        last_transition: Some(at(50)),
    }];
    let failed = kube_event(
        60,
        "ollama-c",
        "FailedScheduling",
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
    );
    let mut events = vec![
        applied(0, pending.clone()),
        failed,
        memory(10_000, "ollama-a", 1),
    ];
    assert!(
        kinds(&State::from_events(&events)).is_empty(),
        "10 s: not yet"
    );
    events.push(memory(15_500, "ollama-a", 1));
    let s = State::from_events(&events);
    let v = one(&s, ContractKind::RolloutStalled);
    assert_eq!(v.seconds, Some(15.5));
    assert!(
        v.message.contains("Insufficient nvidia.com/gpu"),
        "{}",
        v.message
    );
    assert!(v.advice.contains("maxSurge: 0, maxUnavailable: 1"));
    events.push(memory(20_000, "ollama-a", 1));
    assert_eq!(
        State::from_events(&events).contract.verdicts.len(),
        1,
        "once"
    );
    // Pending as long without a FailedScheduling Event (an image pull): none.
    let events = vec![applied(0, pending), memory(20_000, "ollama-a", 1)];
    assert!(kinds(&State::from_events(&events)).is_empty());
}

/// The session event carries the user's thresholds (`[verdicts]`, `--verdict-*`): the
/// reducer judges with them, so a recording replays with the thresholds it was made with.
fn session_with(t: VerdictThresholds) -> Event {
    Event::new(
        at(-20_000),
        Source::Session,
        EventKind::Session(SessionInfo {
            model: Some("llama3.2:3b".into()),
            verdicts: Some(t),
            ..Default::default()
        }),
    )
}

#[test]
fn the_session_s_thresholds_move_the_rollout_stall_and_the_runtime_only_memory() {
    let mut pending = pod("ollama-c", "uid-c", Stage::Pending, 0);
    pending.created = Some(at(0));
    let failed = kube_event(
        60,
        "ollama-c",
        "FailedScheduling",
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
    );
    let stall = |t: Option<VerdictThresholds>, until_ms: i64| {
        let mut events: Vec<Event> = t.into_iter().map(session_with).collect();
        events.extend([
            applied(0, pending.clone()),
            failed.clone(),
            memory(until_ms, "ollama-a", 1),
        ]);
        State::from_events(&events)
    };
    let thirty = VerdictThresholds {
        rollout_stall_after_s: 30.0,
        ..VerdictThresholds::default()
    };
    // 20 s Pending: stalled by the default 15 s, not by a 30 s threshold.
    assert_eq!(kinds(&stall(None, 20_000)), [ContractKind::RolloutStalled]);
    assert!(kinds(&stall(Some(thirty.clone()), 20_000)).is_empty());
    let s = stall(Some(thirty), 31_000);
    let v = one(&s, ContractKind::RolloutStalled);
    assert_eq!(v.evidence["threshold_seconds"], 30.0);

    // 200 MiB of memory: over the default 128 MiB (a model may be in it), under 256 MiB.
    let events = |t: Option<VerdictThresholds>| {
        let mut e: Vec<Event> = t.into_iter().map(session_with).collect();
        e.extend([
            session_model("llama3.2:3b"),
            applied(1_000, pod("ollama-b", "uid-b", Stage::Ready, 1_000)),
            on_disk(1_100, "ollama-b", &["llama3.2:3b"]),
            residency(1_200, "ollama-b", &[]),
            memory(1_300, "ollama-b", 200 << 20),
        ]);
        e
    };
    assert!(kinds(&State::from_events(&events(None))).is_empty());
    let bigger = VerdictThresholds {
        runtime_only_bytes: 256 << 20,
        ..VerdictThresholds::default()
    };
    let s = State::from_events(&events(Some(bigger)));
    assert_eq!(kinds(&s), [ContractKind::ModelNotResident]);
}

#[test]
fn warm_node_bias_flags_repeated_trials_without_a_cold_drop() {
    let mut events = vec![applied(
        -10_000,
        pod("ollama-a", "uid-a", Stage::Ready, -10_000),
    )];
    events.extend(full_trial(
        0,
        1,
        ("ollama-a", "uid-a"),
        ("ollama-b", "uid-b"),
    ));
    events.extend(full_trial(
        20_000,
        2,
        ("ollama-b", "uid-b"),
        ("ollama-c", "uid-c"),
    ));
    let s = State::from_events(&events);
    let t = &s.timeline.trials;
    assert_eq!(t.len(), 2);
    // Trial 1: nothing known of the node before it. Trial 2: same node, model loaded there
    // by trial 1, no cold step.
    assert_eq!(t[0].condition, None);
    assert_eq!(t[1].condition.as_deref(), Some("warm"));
    let v = one(&s, ContractKind::WarmNodeBias);
    assert_eq!(v.trial, Some(2));
    assert!(v.message.contains("no cold step ran"), "{}", v.message);
    assert!(t[1].verdicts.contains(&ContractKind::WarmNodeBias));

    // A cold step that made Cached fall: cold, no verdict; one that did not: warm.
    for (dropped, expect) in [(true, "cold"), (false, "warm")] {
        let mut events = events.clone();
        let at_begin = events
            .iter()
            .position(|e| e.ts == at(20_000))
            .expect("trial 2");
        events.insert(
            at_begin,
            Event::new(
                at(19_000),
                Source::Runner,
                EventKind::TrialBegin { cold: true },
            ),
        );
        events.insert(
            at_begin + 1,
            Event::new(
                at(19_500),
                Source::Action,
                EventKind::CachesDropped(CacheDrop {
                    node: "lab-node-1".into(),
                    cached_kb_before: Some(3_000_000),
                    cached_kb_after: Some(if dropped { 100_000 } else { 2_990_000 }),
                    dropped,
                    error: None,
                }),
            ),
        );
        let s = State::from_events(&events);
        assert_eq!(
            s.timeline.trials[1].condition.as_deref(),
            Some(expect),
            "dropped {dropped}: {:?}",
            s.timeline.trials[1].cold
        );
        let warm = kinds(&s).contains(&ContractKind::WarmNodeBias);
        assert_eq!(warm, !dropped);
        if !dropped {
            let v = one(&s, ContractKind::WarmNodeBias);
            assert!(v.message.contains("Cached did not fall"), "{}", v.message);
        }
    }
}

#[test]
fn traffic_gap_has_its_exact_length_and_says_what_covered_it() {
    // maxSurge 0: the old endpoint goes not-ready (terminating, still serving for 0.4 s),
    // then only the new one, not ready, then ready.
    let events = vec![
        slice(0, &[("ollama-a", true, true, false)]),
        slice(1_000, &[("ollama-a", false, true, true)]),
        slice(1_400, &[("ollama-a", false, false, true)]),
        slice(2_000, &[("ollama-b", false, false, false)]),
        slice(3_250, &[("ollama-b", true, true, false)]),
    ];
    let s = State::from_events(&events);
    let v = one(&s, ContractKind::TrafficGap);
    assert_eq!(v.seconds, Some(2.25));
    assert_eq!(v.evidence["covered_by_serving_terminating_seconds"], 0.4);
    assert!(v.message.contains("covered 0.400 s of it"), "{}", v.message);
    assert_eq!(v.ts, at(3_250));
    // Nothing was ever ready: the first pod coming up is no gap.
    let s = State::from_events(&events[3..]);
    assert!(kinds(&s).is_empty());
    // A gap with nothing serving.
    let s = State::from_events(&[
        slice(0, &[("ollama-a", true, true, false)]),
        slice(500, &[]),
        slice(1_500, &[("ollama-b", true, true, false)]),
    ]);
    assert!(
        one(&s, ContractKind::TrafficGap)
            .message
            .contains("no serving-terminating endpoint covered it")
    );
}

/// A pod that asks for one GPU.
fn gpu_pod(name: &str, stage: Stage, ms: i64) -> PodView {
    let mut p = pod(name, &format!("uid-{name}"), stage, ms);
    p.created = Some(at(ms));
    p.containers[0].spec = Some(PodSpecFacts {
        gpus: 1,
        ..PodSpecFacts::default()
    });
    p
}

/// `nvidia-smi` in `pod` sees GPU `uuid` with `used` of its 24 GiB.
fn gpu_sample(ms: i64, pod: &str, uuid: &str, used_gib: f64) -> Event {
    ev(
        ms,
        Source::Memory,
        EventKind::GpuSample {
            pod: pod.into(),
            source: "nvidia-smi in the container".into(),
            gpus: vec![readygap_core::gpu::GpuMemory {
                index: 0,
                uuid: uuid.into(),
                used: (used_gib * (1u64 << 30) as f64) as u64,
                total: 24 << 30,
            }],
            passed_over: Vec::new(),
        },
    )
}

/// A time-sliced GPU: the old pod holds it (11 GiB by its own runtime's count), the surge
/// pod is given the same one and its load fills it. Both name one UUID: `vram_overcommit`
/// on the surge pod (the one that came last) with the GPU's figures and both pods; past the
/// stall threshold Running but not Ready, `rollout_stalled` names the full GPU too. Near
/// misses: the same figures on two different GPUs; the shared GPU below full; the surge pod
/// Ready in time.
#[test]
fn vram_overcommit_names_the_pods_sharing_a_full_gpu_and_the_surge_stalls_on_it() {
    let shared = "GPU-5b6c3a2e-1f0d-4c1e-9f3a-2b7d8e9f0a1b";
    let base = |surge_uuid: &str, filled: f64| {
        let mut r = residency(500, "vllm-a", &["m"]);
        if let EventKind::Residency { models, .. } = &mut r.kind {
            models[0].size_vram = 11 << 30;
        }
        vec![
            applied(-60_000, gpu_pod("vllm-a", Stage::Ready, -60_000)),
            applied(0, gpu_pod("vllm-b", Stage::Started, 0)),
            r,
            gpu_sample(1_000, "vllm-a", shared, 11.2),
            gpu_sample(2_000, "vllm-b", surge_uuid, filled),
        ]
    };
    let s = State::from_events(&base(shared, 23.4));
    let v = one(&s, ContractKind::VramOvercommit);
    assert_eq!(v.pod, "vllm-b");
    assert!(
        v.message.contains("GPU-5b6c3a2e")
            && v.message.contains("23.4 of 24.0 GiB")
            && v.message.contains("vllm-a (11.0 GiB)")
            && v.message.contains("vllm-b (its share not known)"),
        "{}",
        v.message
    );
    assert_eq!(v.evidence["gpu"]["pods"].as_array().map(Vec::len), Some(2));
    assert!(v.advice.contains("gpu-memory-utilization"));
    assert!(
        kinds(&State::from_events(&base("GPU-other", 23.4))).is_empty(),
        "a GPU of its own"
    );
    assert!(
        kinds(&State::from_events(&base(shared, 20.0))).is_empty(),
        "not full"
    );

    // Still Running and not Ready 15 s after it started: the rollout stalls on the GPU.
    let mut events = base(shared, 23.4);
    events.push(memory(14_000, "vllm-a", 1));
    assert_eq!(
        kinds(&State::from_events(&events)).len(),
        1,
        "14 s: not yet"
    );
    events.push(memory(15_500, "vllm-a", 1));
    let s = State::from_events(&events);
    let v = one(&s, ContractKind::RolloutStalled);
    assert_eq!((v.pod.as_str(), v.seconds), ("vllm-b", Some(15.5)));
    assert!(
        v.message.contains("Running for 15.5 s but not Ready")
            && v.message.contains("the GPU it was given is full"),
        "{}",
        v.message
    );
    // Ready before the threshold: no stall.
    let mut events = base(shared, 23.4);
    events.push(applied(10_000, gpu_pod("vllm-b", Stage::Ready, 0)));
    events.push(memory(15_500, "vllm-a", 1));
    assert_eq!(
        kinds(&State::from_events(&events)),
        [ContractKind::VramOvercommit]
    );
}

/// The engine's own out-of-memory line (vLLM refusing to start on a GPU already in use) is
/// a `vram_overcommit` of that pod, quoting the line and the GPU's figures; with no sample
/// of a shared GPU, it alone makes a Running surge pod's stall.
#[test]
fn an_engines_out_of_memory_line_is_vram_overcommit_and_explains_a_stall() {
    let line = "(EngineCore_DP0 pid=167) ERROR 02-28 16:12:13 [core.py:866] ValueError: Free memory on device (4.04/23.63 GiB) on startup is less than desired GPU memory utilization (0.9, 21.3 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.";
    let log = |ms, text: &str| {
        ev(
            ms,
            Source::Log,
            EventKind::LogLine {
                pod: "vllm-b".into(),
                text: text.into(),
            },
        )
    };
    let mut events = vec![
        applied(0, gpu_pod("vllm-b", Stage::Started, 0)),
        gpu_sample(1_000, "vllm-b", "GPU-aaaa", 19.6),
        log(2_000, "INFO loading weights"),
    ];
    assert!(kinds(&State::from_events(&events)).is_empty());
    events.push(log(3_000, line));
    events.push(log(3_100, line));
    let s = State::from_events(&events);
    let v = one(&s, ContractKind::VramOvercommit);
    assert!(
        v.message.contains("ran out of GPU memory")
            && v.message.contains("Free memory on device (4.04/23.63 GiB)")
            && v.message.contains("19.6 of 24.0 GiB"),
        "{}",
        v.message
    );
    assert_eq!(v.evidence["line"], line);
    events.push(memory(16_000, "vllm-b", 1));
    let s = State::from_events(&events);
    let v = one(&s, ContractKind::RolloutStalled);
    assert!(
        v.message.contains("its engine ran out of GPU memory"),
        "{}",
        v.message
    );
}
