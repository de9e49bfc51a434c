//! The OOM detector on event sequences: overlapping residency (the published 1B-then-3B under
//! 4 GiB case), a single model too large, a runner killed inside a living container, and the
//! warning before it happens.

use readygap_core::event::*;
use readygap_core::fixtures::*;
use readygap_core::residency::VerdictKind;
use readygap_core::state::State;

const GIB: u64 = 1 << 30;

fn resident(ms: i64, pod: &str, models: &[(&str, u64)]) -> Event {
    ev(
        ms,
        Source::Runtime,
        EventKind::Residency {
            pod: pod.into(),
            models: models
                .iter()
                .map(|(n, s)| ResidentModel {
                    name: (*n).into(),
                    size: *s,
                    size_vram: 0,
                    expires_at: None,
                    ..Default::default()
                })
                .collect(),
        },
    )
}

fn on_disk(ms: i64, pod: &str) -> Event {
    ev(
        ms,
        Source::Runtime,
        EventKind::ModelsOnDisk {
            pod: pod.into(),
            models: vec![
                DiskModel {
                    name: "llama3.2:1b".into(),
                    size: 1_321_098_329,
                },
                DiskModel {
                    name: "llama3.2:3b".into(),
                    size: 3_113_851_289,
                },
            ],
        },
    )
}

fn infer(ms: i64, req: u64, pod: &str, model: &str) -> Event {
    ev(
        ms,
        Source::Runtime,
        EventKind::InferenceStarted {
            request_id: req,
            pod: pod.into(),
            model: model.into(),
        },
    )
}

fn mem(ms: i64, pod: &str, current: u64, oom_kill: u64) -> Event {
    ev(
        ms,
        Source::Memory,
        EventKind::MemorySample(MemorySample {
            pod: pod.into(),
            current,
            working_set: Some(current),
            limit: Some(4 * GIB),
            oom_kill: Some(oom_kill),
            source: MemorySource::CgroupV1,
        }),
    )
}

fn oom_killed(ms: i64, base: &PodView) -> Event {
    let mut p = base.clone();
    p.containers[0].restart_count += 1;
    p.containers[0].ready = false;
    p.containers[0].state = ContainerState::Running {
        started_at: Some(at(ms)),
    };
    p.containers[0].last_state = Some(ContainerState::Terminated {
        reason: "OOMKilled".into(),
        exit_code: 137,
        finished_at: Some(at(ms - 5)),
    });
    if let Some(c) = p.conditions.iter_mut().find(|c| c.type_ == "Ready") {
        c.status = false;
    }
    applied(ms, p)
}

/// The published case: 1B resident, then a 3B inference under 4 GiB.
fn overlap_sequence() -> Vec<Event> {
    let p = pod("ollama-b", "uid-b", Stage::Ready, 0);
    vec![
        applied(0, p.clone()),
        on_disk(100, "ollama-b"),
        mem(200, "ollama-b", 14 << 20, 0),
        infer(1_000, 1, "ollama-b", "llama3.2:1b"),
        infer_done(3_000, 1, true),
        resident(3_100, "ollama-b", &[("llama3.2:1b", 1_395_864_371)]),
        mem(3_200, "ollama-b", 1_400_000_000, 0),
        infer(5_000, 2, "ollama-b", "llama3.2:3b"),
        infer_done(7_000, 2, false),
        oom_killed(7_020, &p),
    ]
}

#[test]
fn overlapping_residency_oom_names_both_models_and_warns_first() {
    let s = State::from_events(&overlap_sequence());
    let v = &s.oom.verdicts;
    assert_eq!(v.len(), 2, "{v:#?}");
    assert_eq!(v[0].kind, VerdictKind::OomRisk);
    assert_eq!(
        v[0].ts,
        at(5_000),
        "the warning comes when the 3B load starts"
    );
    assert!(v[0].message.contains("llama3.2:3b"), "{}", v[0].message);
    assert_eq!(v[1].kind, VerdictKind::OverlappingResidencyOom);
    let names: Vec<&str> = v[1].models.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["llama3.2:1b", "llama3.2:3b"]);
    assert_eq!(v[1].limit, Some(4 * GIB));
    assert_eq!(
        v[1].ts,
        at(7_015),
        "the container's finishedAt is the kill time"
    );
    assert!(
        v[1].message.starts_with(
            "llama3.2:1b 1.3 GiB + llama3.2:3b ~3.1 GiB (estimated) resident under 4.0 GiB: OOM kill at"
        ),
        "{}",
        v[1].message
    );
    assert!(
        s.last_message()
            .is_some_and(|m| m.text.starts_with("overlapping_residency_oom")),
        "the verdict is on screen"
    );
}

#[test]
fn the_trial_ends_with_the_verdict_as_its_reason() {
    let mut events = vec![applied(
        -9_000,
        pod("ollama-a", "uid-a", Stage::Ready, -9_000),
    )];
    events.extend(delete_pod(-8_000, 9, "ollama-a"));
    events.push(applied(
        -7_000,
        pod("ollama-b", "uid-b", Stage::Ready, -7_000),
    ));
    events.push(probe(-6_900, "ollama-b", true));
    // The 1B model is resident (loaded by someone else); the trial's own inference, its T3, is
    // the 3B one.
    let seq = overlap_sequence();
    events.extend(
        seq.into_iter()
            .enumerate()
            .filter(|(i, _)| ![0, 3, 4].contains(i))
            .map(|(_, e)| e),
    );
    let s = State::from_events(&events);
    let t = &s.timeline.trials[0];
    let reason = t.reason().unwrap_or_default();
    assert!(
        reason.starts_with("overlapping_residency_oom: llama3.2:1b"),
        "{reason}"
    );
    assert_eq!(s.oom.counts().get("overlapping_residency_oom"), Some(&1));
    // The same verdict as structured evidence in the trial's JSON (`readygap run --format
    // json`, `readygap report --format json`): the 1B size from /api/ps, the 3B one estimated
    // from its size on disk.
    let j = readygap_live::run::trial_json(t);
    let oom = &j["oom"];
    assert_eq!(oom["verdict"], "overlapping_residency_oom", "{j:#}");
    assert_eq!(oom["pod"], "ollama-b");
    assert_eq!(oom["limit_bytes"], 4 * GIB);
    assert_eq!(oom["at"], "2027-01-15T08:00:07.015Z");
    assert_eq!(oom["models"][0]["name"], "llama3.2:1b");
    assert_eq!(oom["models"][0]["bytes"], 1_395_864_371u64);
    assert_eq!(oom["models"][0]["estimated"], false);
    assert_eq!(oom["models"][1]["name"], "llama3.2:3b");
    assert_eq!(oom["models"][1]["estimated"], true);
    let est = oom["models"][1]["bytes"]
        .as_u64()
        .expect("an estimated size");
    assert!(est > 3 * GIB && est < 4 * GIB, "{est}");
    assert_eq!(oom["models"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        oom["message"].as_str(),
        reason.split_once(": ").map(|(_, m)| m)
    );
}

#[test]
fn a_trial_that_ends_otherwise_has_no_oom_evidence() {
    let mut events = vec![applied(
        -9_000,
        pod("ollama-a", "uid-a", Stage::Ready, -9_000),
    )];
    events.extend(delete_pod(-8_000, 9, "ollama-a"));
    let s = State::from_events(&events);
    let j = readygap_live::run::trial_json(&s.timeline.trials[0]);
    assert!(j["oom"].is_null(), "{j:#}");
}

#[test]
fn single_model_too_large() {
    let p = pod("ollama-b", "uid-b", Stage::Ready, 0);
    let events = vec![
        applied(0, p.clone()),
        ev(
            10,
            Source::Runtime,
            EventKind::ModelsOnDisk {
                pod: "ollama-b".into(),
                models: vec![DiskModel {
                    name: "llama3.1:8b".into(),
                    size: 5 * GIB,
                }],
            },
        ),
        mem(20, "ollama-b", 14 << 20, 0),
        infer(100, 1, "ollama-b", "llama3.1:8b"),
        oom_killed(900, &p),
    ];
    let s = State::from_events(&events);
    let kinds: Vec<_> = s.oom.verdicts.iter().map(|v| v.kind).collect();
    assert_eq!(kinds, [VerdictKind::OomRisk, VerdictKind::SingleModelOom]);
    assert_eq!(
        s.oom.verdicts[1].models,
        vec![("llama3.1:8b".to_string(), 5 * GIB)]
    );
}

#[test]
fn runner_oom_inside_a_living_container() {
    let p = pod("ollama-b", "uid-b", Stage::Ready, 0);
    let events = vec![
        applied(0, p),
        resident(100, "ollama-b", &[("llama3.2:1b", 1_395_864_371)]),
        mem(200, "ollama-b", 1_400_000_000, 0),
        infer(300, 5, "ollama-b", "llama3.2:3b"),
        mem(450, "ollama-b", 4 * GIB - 4096, 1),
        infer_done(500, 5, false),
    ];
    let s = State::from_events(&events);
    let last = s.oom.verdicts.last().unwrap();
    assert_eq!(last.kind, VerdictKind::RunnerOom);
    assert!(
        last.message.contains("runner OOM-killed"),
        "{}",
        last.message
    );
    assert_eq!(last.models.len(), 2);
    // The pod never restarted: no container kill verdict.
    assert!(
        !s.oom
            .verdicts
            .iter()
            .any(|v| v.kind == VerdictKind::OverlappingResidencyOom)
    );
}

/// Real Ollama 0.12.6 lists a model in `/api/ps` while it is still loading (seen against the
/// lab's real engine: gemma3:270m at 470,458,880 B from 1.3 s into its load until the kernel
/// killed the runner): the failed inference must still be found, and the kill named.
#[test]
fn runner_oom_of_a_model_already_listed_while_loading() {
    let p = pod("ollama-b", "uid-b", Stage::Ready, 0);
    let events = vec![
        applied(0, p),
        resident(100, "ollama-b", &[("smollm2:135m", 298_153_728)]),
        mem(200, "ollama-b", 353_000_000, 0),
        infer(300, 2, "ollama-b", "gemma3:270m"),
        resident(
            400,
            "ollama-b",
            &[("gemma3:270m", 470_458_880), ("smollm2:135m", 298_153_728)],
        ),
        mem(450, "ollama-b", 667_607_040, 1),
        infer_done(500, 2, false),
    ];
    let s = State::from_events(&events);
    let last = s.oom.verdicts.last().expect("a verdict");
    assert_eq!(last.kind, VerdictKind::RunnerOom, "{:#?}", s.oom.verdicts);
    let mut names: Vec<&str> = last.models.iter().map(|(n, _)| n.as_str()).collect();
    names.sort();
    assert_eq!(names, ["gemma3:270m", "smollm2:135m"], "{}", last.message);
}

/// The cgroup is sampled, the runtime's error is not: against real Ollama 0.12.6 the 500 came
/// at 18.869 s and the sample showing the counter's rise at 18.947 s. The rise one sample
/// after the failure is still that failure's runner OOM, with the models of the failure.
#[test]
fn runner_oom_counted_one_sample_after_the_failed_inference() {
    let p = pod("ollama-b", "uid-b", Stage::Ready, 0);
    let events = vec![
        applied(0, p),
        resident(100, "ollama-b", &[("smollm2:135m", 298_153_728)]),
        mem(200, "ollama-b", 353_000_000, 0),
        infer(300, 2, "ollama-b", "gemma3:270m"),
        resident(
            400,
            "ollama-b",
            &[("gemma3:270m", 470_458_880), ("smollm2:135m", 298_153_728)],
        ),
        infer_done(500, 2, false),
        // The runner is gone: /api/ps lists the survivor only, before the counter is read.
        resident(520, "ollama-b", &[("smollm2:135m", 298_153_728)]),
        mem(580, "ollama-b", 300_000_000, 1),
    ];
    let s = State::from_events(&events);
    let last = s.oom.verdicts.last().expect("a verdict");
    assert_eq!(last.kind, VerdictKind::RunnerOom, "{:#?}", s.oom.verdicts);
    let mut names: Vec<&str> = last.models.iter().map(|(n, _)| n.as_str()).collect();
    names.sort();
    assert_eq!(names, ["gemma3:270m", "smollm2:135m"], "{}", last.message);
    assert_eq!(last.ts, at(500), "stamped at the failure");
    // A rise long after a failure is not that failure's cause.
    let late = vec![
        applied(0, pod("ollama-b", "uid-b", Stage::Ready, 0)),
        mem(200, "ollama-b", 353_000_000, 0),
        infer(300, 2, "ollama-b", "gemma3:270m"),
        infer_done(500, 2, false),
        mem(9_000, "ollama-b", 300_000_000, 1),
    ];
    let s = State::from_events(&late);
    assert!(
        !s.oom
            .verdicts
            .iter()
            .any(|v| v.kind == VerdictKind::RunnerOom),
        "{:#?}",
        s.oom.verdicts
    );
}

#[test]
fn a_kill_right_after_a_runner_verdict_replaces_it() {
    let p = pod("ollama-b", "uid-b", Stage::Ready, 0);
    let events = vec![
        applied(0, p.clone()),
        resident(100, "ollama-b", &[("llama3.2:1b", 1_395_864_371)]),
        mem(200, "ollama-b", 1_400_000_000, 0),
        infer(300, 5, "ollama-b", "llama3.2:3b"),
        mem(450, "ollama-b", 4 * GIB - 4096, 1),
        infer_done(500, 5, false),
        oom_killed(700, &p),
    ];
    let s = State::from_events(&events);
    let kinds: Vec<_> = s.oom.verdicts.iter().map(|v| v.kind).collect();
    assert_eq!(kinds, [VerdictKind::OverlappingResidencyOom]);
}

#[test]
fn history_of_an_old_kill_is_not_a_new_verdict() {
    // The first sight of a pod that was OOM-killed before readygap started.
    let mut p = pod("ollama-b", "uid-b", Stage::Ready, 0);
    p.containers[0].restart_count = 3;
    p.containers[0].last_state = Some(ContainerState::Terminated {
        reason: "OOMKilled".into(),
        exit_code: 137,
        finished_at: None,
    });
    let s = State::from_events(&[applied(0, p.clone()), applied(500, p)]);
    assert!(s.oom.verdicts.is_empty());
}
