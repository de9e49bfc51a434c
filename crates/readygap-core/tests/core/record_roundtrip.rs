//! Property: for random event sequences, applying them directly and applying
//! `read(write(events))` give equal state and equal timelines.

use proptest::prelude::*;
use readygap_core::event::*;
use readygap_core::fixtures::*;
use readygap_core::record::jsonl::{self, Header, Recorder};
use readygap_core::state::State;

const PODS: [(&str, &str); 3] = [
    ("ollama-a", "uid-a"),
    ("ollama-b", "uid-b"),
    ("ollama-c", "uid-c"),
];

fn any_stage() -> impl Strategy<Value = Stage> {
    prop_oneof![
        Just(Stage::Pending),
        Just(Stage::Scheduled),
        Just(Stage::Started),
        Just(Stage::Ready)
    ]
}

/// One random event at `ms` (the generator adds increasing offsets).
fn any_event() -> impl Strategy<Value = (i64, Event)> {
    let pod_ix = 0..PODS.len();
    let kind = prop_oneof![
        (pod_ix.clone(), any_stage(), any::<bool>(), 0u32..3).prop_map(|(i, st, del, restarts)| {
            let mut p = pod(PODS[i].0, PODS[i].1, st, 0);
            p.containers[0].restart_count = restarts;
            if restarts > 0 {
                p.containers[0].last_state = Some(ContainerState::Terminated {
                    reason: "OOMKilled".into(),
                    exit_code: 137,
                    finished_at: Some(at(1)),
                });
            }
            if del {
                p.deletion_timestamp = Some(at(2));
            }
            (Source::Kube, EventKind::PodApplied(p))
        }),
        pod_ix.clone().prop_map(|i| (
            Source::Kube,
            EventKind::PodDeleted(pod(PODS[i].0, PODS[i].1, Stage::Ready, 0))
        )),
        (pod_ix.clone(), any::<bool>(), 0.0f64..500.0).prop_map(|(i, ok, lat)| (
            Source::Runtime,
            EventKind::RuntimeProbe(RuntimeProbe {
                pod: PODS[i].0.into(),
                ok,
                status: ok.then_some(200),
                latency_ms: lat,
                error: (!ok).then(|| "refused \"quoted\" ünïcode".into()),
                ..Default::default()
            })
        )),
        (pod_ix.clone(), 0u64..6, any::<bool>()).prop_map(|(i, id, del)| {
            let action = if del {
                Action::DeletePod {
                    pod: PODS[i].0.into(),
                    grace_seconds: Some(1),
                }
            } else {
                Action::RolloutRestart {
                    deployment: "ollama".into(),
                }
            };
            (Source::Action, EventKind::ActionRequested { id, action })
        }),
        (0u64..6).prop_map(|id| (Source::Action, EventKind::ActionStarted { id })),
        (pod_ix.clone(), 0u64..4).prop_map(|(i, r)| (
            Source::Runtime,
            EventKind::InferenceStarted {
                request_id: r,
                pod: PODS[i].0.into(),
                model: "llama3.2:3b".into()
            }
        )),
        (0u64..4).prop_map(|r| (
            Source::Runtime,
            EventKind::InferenceFirstToken { request_id: r }
        )),
        (0u64..4, any::<bool>(), any::<u32>()).prop_map(|(r, ok, ns)| (
            Source::Runtime,
            EventKind::InferenceDone(InferenceResult {
                request_id: r,
                ok,
                http_status: Some(if ok { 200 } else { 500 }),
                error: None,
                durations: RuntimeDurations {
                    total_ns: Some(ns as u64),
                    load_ns: Some(ns as u64 / 2),
                    prompt_eval_ns: None,
                    eval_ns: Some(7),
                    ..Default::default()
                },
                response: None,
                done_at: None,
            })
        )),
        (pod_ix.clone(), any::<u32>()).prop_map(|(i, b)| (
            Source::Memory,
            EventKind::MemorySample(MemorySample {
                pod: PODS[i].0.into(),
                current: b as u64 * 7,
                working_set: None,
                limit: Some(4 << 30),
                oom_kill: Some(1),
                source: MemorySource::CgroupV1
            })
        )),
        (pod_ix.clone(), 0usize..3).prop_map(|(i, n)| (
            Source::Runtime,
            EventKind::Residency {
                pod: PODS[i].0.into(),
                models: (0..n)
                    .map(|k| ResidentModel {
                        name: format!("m{k}"),
                        size: 1 << 30,
                        size_vram: 0,
                        expires_at: Some(at(9)),
                        ..Default::default()
                    })
                    .collect()
            }
        )),
        (pod_ix.clone(), any::<bool>(), any::<bool>()).prop_map(|(i, r, t)| (
            Source::Kube,
            EventKind::EndpointSliceApplied(EndpointSliceView {
                name: "ollama-x".into(),
                service: Some("ollama".into()),
                endpoints: vec![EndpointView {
                    addresses: vec!["127.0.0.10".into()],
                    pod: Some(PODS[i].0.into()),
                    ready: r,
                    serving: r,
                    terminating: t
                }]
            })
        )),
        any::<bool>().prop_map(|cold| (Source::Runner, EventKind::TrialBegin { cold })),
        "[a-z ]{0,12}".prop_map(|reason| (Source::Runner, EventKind::TrialAbort { reason })),
        "[a-z]{1,8}".prop_map(|feed| (
            Source::Memory,
            EventKind::SourceError {
                feed: feed.into(),
                message: "lost".into()
            }
        )),
        (
            proptest::option::of(0.0f32..100.0),
            proptest::option::of(any::<u32>()),
            proptest::option::of(any::<u64>()),
            any::<bool>()
        )
            .prop_map(|(cpu, c, swap, remote)| (
                Source::Host,
                EventKind::HostSample(HostSample {
                    node: remote.then(|| "node-a".into()),
                    cpu_percent: cpu,
                    mem_total: 24 << 30,
                    mem_available: c.map(|_| 20 << 30),
                    cached: c.map(u64::from),
                    cache_approx: remote && c.is_some_and(|c| c % 2 == 0),
                    swap_total: swap,
                    swap_free: swap.map(|s| s / 2),
                    connection: remote.then(|| "10.0.0.1 5000 10.0.0.5 22".into()),
                    ..HostSample::default()
                })
            )),
        ("[a-z]{1,8}", any::<bool>()).prop_map(|(node, sampling)| (
            Source::Host,
            EventKind::NodeAccess(NodeAccessInfo {
                node,
                target: "ssh root@10.0.0.5:22".into(),
                origin: "configured by [nodes.\"gpu-*\"]".into(),
                sampling,
                sampled_via: (!sampling).then(|| "kubelet Summary API".into()),
            })
        )),
    ];
    // Mostly increasing time, sometimes a step back (sources disagree on order).
    (-200i64..2_000, kind).prop_map(|(dt, (source, kind))| (dt, Event::new(at(0), source, kind)))
}

fn timed(events: Vec<(i64, Event)>) -> Vec<Event> {
    let mut t = 0i64;
    events
        .into_iter()
        .map(|(dt, mut e)| {
            t += dt;
            // Microsecond steps so the precision of the format is exercised.
            e.ts = at(t) + chrono::Duration::microseconds(dt.rem_euclid(1000));
            e
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn replaying_a_recording_gives_the_same_state(events in prop::collection::vec(any_event(), 0..120)) {
        let events = timed(events);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let mut rec = Recorder::create(&path, &Header::new(at(0), "ctx", "ns", "deployment/ollama")).unwrap();
        for e in &events {
            rec.write(e).unwrap();
        }
        drop(rec);
        let read = jsonl::read(&path).unwrap();
        prop_assert!(read.warnings.is_empty());
        prop_assert_eq!(&read.events, &events);
        let direct = State::from_events(&events);
        let replayed = State::from_events(&read.events);
        prop_assert_eq!(&direct.timeline, &replayed.timeline);
        prop_assert_eq!(direct, replayed);
    }
}
