//! Event builders shared by the integration tests and benches.

use crate::event::*;

pub const BASE_MS: i64 = 1_800_000_000_000;

pub fn at(ms: i64) -> Timestamp {
    chrono::DateTime::from_timestamp_millis(BASE_MS + ms).expect("valid timestamp")
}

pub fn ev(ms: i64, source: Source, kind: EventKind) -> Event {
    Event::new(at(ms), source, kind)
}

/// A pod of the `ollama` deployment in a given lifecycle stage.
pub fn pod(name: &str, uid: &str, stage: Stage, ms: i64) -> PodView {
    let cond = |t: &str, s: bool| PodCondition {
        type_: t.into(),
        status: s,
        last_transition: Some(at(ms)),
        reason: None,
    };
    let (phase, conditions, state, ready) = match stage {
        Stage::Pending => ("Pending", vec![], ContainerState::Unknown, false),
        Stage::Scheduled => (
            "Pending",
            vec![cond("PodScheduled", true)],
            ContainerState::Waiting {
                reason: "ContainerCreating".into(),
            },
            false,
        ),
        Stage::Started => (
            "Running",
            vec![cond("PodScheduled", true), cond("Ready", false)],
            ContainerState::Running {
                started_at: Some(at(ms)),
            },
            false,
        ),
        Stage::Ready => (
            "Running",
            vec![cond("PodScheduled", true), cond("Ready", true)],
            ContainerState::Running {
                started_at: Some(at(ms)),
            },
            true,
        ),
    };
    PodView {
        name: name.into(),
        uid: uid.into(),
        node: Some("lab-node-1".into()),
        ip: Some("127.0.0.10".into()),
        phase: phase.into(),
        conditions,
        containers: vec![ContainerView {
            name: "ollama".into(),
            ready,
            restart_count: 0,
            state,
            last_state: None,
            spec: None,
        }],
        created: Some(at(0)),
        deletion_timestamp: None,
        owner: Some("ollama-abc".into()),
        resource_version: ms.to_string(),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Pending,
    Scheduled,
    Started,
    Ready,
}

pub fn applied(ms: i64, p: PodView) -> Event {
    ev(ms, Source::Kube, EventKind::PodApplied(p))
}

pub fn deleting(ms: i64, mut p: PodView) -> Event {
    p.deletion_timestamp = Some(at(ms));
    if let Some(c) = p.conditions.iter_mut().find(|c| c.type_ == "Ready") {
        c.status = false;
    }
    applied(ms, p)
}

pub fn probe(ms: i64, pod: &str, ok: bool) -> Event {
    ev(
        ms,
        Source::Runtime,
        EventKind::RuntimeProbe(RuntimeProbe {
            pod: pod.into(),
            ok,
            status: ok.then_some(200),
            latency_ms: 1.5,
            error: (!ok).then(|| "connection refused".into()),
            ..Default::default()
        }),
    )
}

pub fn action(ms: i64, id: u64, a: Action) -> [Event; 2] {
    [
        ev(
            ms,
            Source::Action,
            EventKind::ActionRequested { id, action: a },
        ),
        ev(ms, Source::Action, EventKind::ActionStarted { id }),
    ]
}

pub fn delete_pod(ms: i64, id: u64, pod: &str) -> [Event; 2] {
    action(
        ms,
        id,
        Action::DeletePod {
            pod: pod.into(),
            grace_seconds: None,
        },
    )
}

pub fn infer_start(ms: i64, req: u64, pod: &str) -> Event {
    ev(
        ms,
        Source::Runtime,
        EventKind::InferenceStarted {
            request_id: req,
            pod: pod.into(),
            model: "llama3.2:3b".into(),
        },
    )
}

pub fn infer_done(ms: i64, req: u64, ok: bool) -> Event {
    ev(
        ms,
        Source::Runtime,
        EventKind::InferenceDone(InferenceResult {
            request_id: req,
            ok,
            http_status: Some(if ok { 200 } else { 500 }),
            error: (!ok).then(|| "llama runner process has terminated: signal: killed".into()),
            durations: RuntimeDurations {
                total_ns: ok.then_some(5_000_000_000),
                load_ns: ok.then_some(4_000_000_000),
                prompt_eval_ns: ok.then_some(800_000_000),
                eval_ns: ok.then_some(200_000_000),
                ..Default::default()
            },
            response: ok.then(|| "READY".into()),
            done_at: None,
        }),
    )
}

pub fn memory(ms: i64, pod: &str, current: u64) -> Event {
    ev(
        ms,
        Source::Memory,
        EventKind::MemorySample(MemorySample {
            pod: pod.into(),
            current,
            working_set: Some(current),
            limit: Some(4 << 30),
            oom_kill: Some(0),
            source: MemorySource::CgroupV2,
        }),
    )
}

/// A complete readygap-driven trial replacing `old` by `new`, starting at `t` ms.
pub fn full_trial(t: i64, id: u64, old: (&str, &str), new: (&str, &str)) -> Vec<Event> {
    let old_ready = pod(old.0, old.1, Stage::Ready, t - 10_000);
    let mut v = Vec::new();
    v.extend(delete_pod(t, id, old.0));
    v.push(deleting(t + 20, old_ready));
    v.push(applied(t + 40, pod(new.0, new.1, Stage::Pending, t + 40)));
    v.push(applied(
        t + 300,
        pod(new.0, new.1, Stage::Scheduled, t + 300),
    ));
    v.push(applied(
        t + 1500,
        pod(new.0, new.1, Stage::Started, t + 1500),
    ));
    v.push(applied(t + 1700, pod(new.0, new.1, Stage::Ready, t + 1690)));
    v.push(probe(t + 2000, new.0, false));
    v.push(probe(t + 2400, new.0, true));
    v.push(infer_start(t + 2410, id * 100, new.0));
    v.push(ev(
        t + 6000,
        Source::Runtime,
        EventKind::InferenceFirstToken {
            request_id: id * 100,
        },
    ));
    v.push(infer_done(t + 8000, id * 100, true));
    v.push(memory(t + 8100, new.0, 2_900_000_000));
    v
}

/// A long session: a trial every 30 s, with memory, residency and probe samples at 4 Hz and a
/// host sample every 2 s, as the live sources produce them.
pub fn session(n: usize) -> Vec<Event> {
    let mut out = Vec::with_capacity(n + 64);
    let mut block = 0i64;
    out.push(applied(-1, pod("ollama-0", "uid-0", Stage::Ready, -1)));
    while out.len() < n {
        let t = block * 30_000;
        let old = format!("ollama-{block}");
        let new = format!("ollama-{}", block + 1);
        let (old_uid, new_uid) = (format!("uid-{block}"), format!("uid-{}", block + 1));
        let mut trial = full_trial(t, block as u64 + 1, (&old, &old_uid), (&new, &new_uid));
        trial.push(ev(
            t + 9_000,
            Source::Kube,
            EventKind::PodDeleted(pod(&old, &old_uid, Stage::Ready, t)),
        ));
        let mut samples = Vec::with_capacity(400);
        for k in 0..120i64 {
            let ms = t + k * 250;
            samples.push(memory(ms, &new, 14 << 20 | (k as u64) << 24));
            samples.push(probe(ms + 5, &new, k > 10));
            samples.push(ev(
                ms + 7,
                Source::Runtime,
                EventKind::Residency {
                    pod: new.clone(),
                    models: vec![ResidentModel {
                        name: "llama3.2:3b".into(),
                        size: 2_900_000_000,
                        size_vram: 0,
                        expires_at: Some(at(ms + 300_000)),
                        ..Default::default()
                    }],
                },
            ));
            if k % 8 == 0 {
                samples.push(ev(
                    ms + 9,
                    Source::Host,
                    EventKind::HostSample(HostSample {
                        node: None,
                        cpu_percent: Some(12.5),
                        mem_total: 24 << 30,
                        mem_available: Some(20 << 30),
                        cached: Some(3 << 30),
                        ..HostSample::default()
                    }),
                ));
            }
        }
        // Merge by time, as a channel would deliver them.
        trial.extend(samples);
        trial.sort_by_key(|e| e.ts);
        out.extend(trial);
        block += 1;
    }
    out.truncate(n);
    out
}

/// A long monotonic session made of a real recording's events repeated end to end until `n`
/// events: each copy's timestamps, the events' own and those they carry (conditions, Event
/// times, expiries), are shifted past the copy before it (by its span plus one second), so a
/// recording of 3 trials in 482 events gives 1,000,000 events with about 6,200 trials.
pub fn repeated(events: &[Event], n: usize) -> Vec<Event> {
    let (Some(first), Some(last)) = (events.first(), events.last()) else {
        return vec![];
    };
    let span = last.ts - first.ts + chrono::Duration::seconds(1);
    let values: Vec<serde_json::Value> = events
        .iter()
        .map(|e| serde_json::to_value(e).expect("an event serialises"))
        .collect();
    let mut out = Vec::with_capacity(n);
    let mut by = chrono::Duration::zero();
    while out.len() < n {
        for v in values.iter().take(n - out.len()) {
            let mut v = v.clone();
            shift_times(&mut v, by);
            out.push(serde_json::from_value(v).expect("a shifted event reads back"));
        }
        by += span;
    }
    out
}

/// Every RFC 3339 timestamp in `v` moved by `by`.
fn shift_times(v: &mut serde_json::Value, by: chrono::Duration) {
    use serde_json::Value;
    match v {
        Value::String(s) => {
            if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
                let t = t.with_timezone(&chrono::Utc) + by;
                *s = t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| shift_times(x, by)),
        Value::Object(o) => o.values_mut().for_each(|x| shift_times(x, by)),
        _ => {}
    }
}
