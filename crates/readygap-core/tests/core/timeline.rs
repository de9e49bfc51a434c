//! The T0–T4 timeline on event sequences: normal, external, OOM restart, failed inference,
//! back-to-back trials, and events arriving out of order across sources.

use readygap_core::event::*;
use readygap_core::fixtures::*;
use readygap_core::state::State;
use readygap_core::timeline::{Metric, TrialStatus};

fn state_of(events: &[Event]) -> State {
    State::from_events(events)
}

fn with_initial_pod(mut events: Vec<Event>, name: &str, uid: &str) -> Vec<Event> {
    let mut v = vec![applied(-10_000, pod(name, uid, Stage::Ready, -10_000))];
    v.append(&mut events);
    v
}

#[test]
fn normal_trial_has_all_marks_and_metrics() {
    let events = with_initial_pod(
        full_trial(0, 1, ("ollama-a", "uid-a"), ("ollama-b", "uid-b")),
        "ollama-a",
        "uid-a",
    );
    let s = state_of(&events);
    assert_eq!(s.timeline.trials.len(), 1);
    let t = &s.timeline.trials[0];
    assert!(!t.external);
    assert_eq!(t.status, TrialStatus::Ok);
    assert_eq!(t.new_pod.as_deref(), Some("ollama-b"));
    let m = &t.marks;
    assert_eq!(m.t0, Some(at(0)));
    assert_eq!(m.deletion_seen, Some(at(20)));
    assert_eq!(m.scheduled, Some(at(300)));
    assert_eq!(m.container_started, Some(at(1500)));
    assert_eq!(m.t1, Some(at(1700)));
    assert_eq!(m.t1_api, Some(at(1690)));
    assert_eq!(m.t2, Some(at(2400)), "the failed probe is not T2");
    assert_eq!(m.t3, Some(at(2410)));
    assert_eq!(m.first_token, Some(at(6000)));
    assert_eq!(m.t4, Some(at(8000)));
    assert_eq!(t.metric(Metric::K8sRecovery), Some(1.7));
    assert_eq!(t.metric(Metric::RuntimeRecovery), Some(2.4));
    assert_eq!(t.metric(Metric::ReadyToRuntime), Some(0.7));
    assert_eq!(t.metric(Metric::FunctionalRecovery), Some(8.0));
    assert_eq!(t.metric(Metric::ReadyToInference), Some(6.3));
    assert_eq!(t.metric(Metric::InferenceWall), Some(5.59));
    assert_eq!(t.metric(Metric::LoadDuration), Some(4.0));
    assert_eq!(t.metric(Metric::MemoryAfter), Some(2.9e9));
}

#[test]
fn external_delete_is_a_trial_from_the_deletion_event() {
    let mut events = vec![applied(0, pod("ollama-a", "uid-a", Stage::Ready, 0))];
    events.push(deleting(5_000, pod("ollama-a", "uid-a", Stage::Ready, 0)));
    events.push(applied(
        5_100,
        pod("ollama-b", "uid-b", Stage::Pending, 5_100),
    ));
    events.push(applied(
        6_900,
        pod("ollama-b", "uid-b", Stage::Ready, 6_900),
    ));
    events.push(probe(7_200, "ollama-b", true));
    let s = state_of(&events);
    assert_eq!(s.timeline.trials.len(), 1);
    let t = &s.timeline.trials[0];
    assert!(t.external);
    assert!(t.trigger.contains("ollama-a deleted"), "{}", t.trigger);
    assert_eq!(t.marks.t0, Some(at(5_000)));
    assert_eq!(t.marks.t1, Some(at(6_900)));
    assert_eq!(t.marks.t2, Some(at(7_200)));
    assert!(t.is_running(), "no inference yet: still open");
    // A second update of the same deleting pod does not start another trial.
    let mut more = events.clone();
    more.push(deleting(5_500, pod("ollama-a", "uid-a", Stage::Ready, 0)));
    assert_eq!(state_of(&more).timeline.trials.len(), 1);
}

#[test]
fn oom_restart_fails_the_open_trial_and_starts_an_external_one() {
    let mut events = with_initial_pod(
        full_trial(0, 1, ("ollama-a", "uid-a"), ("ollama-b", "uid-b"))[..10].to_vec(),
        "ollama-a",
        "uid-a",
    );
    // Trial 1 has sent its inference (T3) when the container is OOM-killed and restarted.
    let mut killed = pod("ollama-b", "uid-b", Stage::Started, 9_000);
    killed.conditions[1].status = false;
    killed.containers[0].restart_count = 1;
    killed.containers[0].ready = false;
    killed.containers[0].last_state = Some(ContainerState::Terminated {
        reason: "OOMKilled".into(),
        exit_code: 137,
        finished_at: Some(at(8_990)),
    });
    events.push(applied(9_000, killed.clone()));
    events.push(infer_done(9_010, 100, false));
    let mut ready_again = killed.clone();
    ready_again.conditions[1].status = true;
    ready_again.containers[0].ready = true;
    events.push(applied(11_000, ready_again));
    events.push(probe(11_500, "ollama-b", true));

    let s = state_of(&events);
    assert_eq!(s.timeline.trials.len(), 2);
    let first = &s.timeline.trials[0];
    // The reducer's OOM detector names the cause (one model known: a single-model kill).
    let reason = first.reason().unwrap_or_default();
    assert!(
        reason.starts_with("single_model_oom: llama3.2:3b (size unknown) resident: OOM kill at"),
        "{reason}"
    );
    assert_eq!(first.marks.t3, Some(at(2410)), "marks are kept on failure");
    let second = &s.timeline.trials[1];
    assert!(second.external);
    assert!(second.trigger.contains("OOMKilled"), "{}", second.trigger);
    assert_eq!(second.marks.t0, Some(at(9_000)));
    assert_eq!(second.marks.t1, Some(at(11_000)));
    assert_eq!(second.marks.t2, Some(at(11_500)));
    assert!(s.pods["ollama-b"].oom_killed());
}

/// The runtime of the pod a trial is deleting crashes and its container restarts before the
/// deletion is seen (the previous trial failed at once on the crash, the next one's delete
/// went out before the kubelet's report): the restart is not another replacement, the trial
/// goes on and finds its replacement.
#[test]
fn restart_of_the_pod_being_replaced_does_not_supersede_the_trial() {
    let trial = full_trial(0, 1, ("ollama-a", "uid-a"), ("ollama-b", "uid-b"));
    let n_delete = delete_pod(0, 1, "ollama-a").len();
    let mut events = with_initial_pod(trial[..n_delete].to_vec(), "ollama-a", "uid-a");
    let mut crashed = pod("ollama-a", "uid-a", Stage::Started, -10_000);
    crashed.conditions[1].status = false;
    crashed.containers[0].restart_count = 1;
    crashed.containers[0].ready = false;
    crashed.containers[0].last_state = Some(ContainerState::Terminated {
        reason: "Error".into(),
        exit_code: 2,
        finished_at: Some(at(5)),
    });
    events.push(applied(10, crashed));
    events.extend(trial[n_delete..].iter().cloned());
    let s = state_of(&events);
    assert_eq!(s.timeline.trials.len(), 1, "{:?}", s.timeline.trials);
    let t = &s.timeline.trials[0];
    assert_eq!(t.status, TrialStatus::Ok, "{:?}", t.status);
    assert_eq!(t.new_pod.as_deref(), Some("ollama-b"));
    assert_eq!(t.marks.t4, Some(at(8000)));
}

#[test]
fn failed_inference_fails_the_trial_with_its_reason() {
    let mut events = with_initial_pod(
        full_trial(0, 1, ("ollama-a", "uid-a"), ("ollama-b", "uid-b"))[..10].to_vec(),
        "ollama-a",
        "uid-a",
    );
    events.push(infer_done(3_000, 100, false));
    let s = state_of(&events);
    let t = &s.timeline.trials[0];
    assert!(
        t.reason()
            .is_some_and(|r| r.starts_with("inference_error: llama runner")),
        "{:?}",
        t.status
    );
    assert_eq!(t.marks.t4, None);
    assert_eq!(t.inference_end, Some(at(3_000)));
    assert_eq!(t.marks.t2, Some(at(2_400)));
    assert_eq!(t.metric(Metric::K8sRecovery), Some(1.7));
    assert_eq!(t.metric(Metric::ReadyToInference), None);
}

#[test]
fn two_trials_back_to_back() {
    let mut events = with_initial_pod(
        full_trial(0, 1, ("ollama-a", "uid-a"), ("ollama-b", "uid-b")),
        "ollama-a",
        "uid-a",
    );
    events.push(ev(
        8_500,
        Source::Kube,
        EventKind::PodDeleted(pod("ollama-a", "uid-a", Stage::Ready, 0)),
    ));
    events.extend(full_trial(
        20_000,
        2,
        ("ollama-b", "uid-b"),
        ("ollama-c", "uid-c"),
    ));
    let s = state_of(&events);
    assert_eq!(s.timeline.trials.len(), 2);
    let (a, b) = (&s.timeline.trials[0], &s.timeline.trials[1]);
    assert!(a.is_ok() && b.is_ok());
    assert_eq!(b.index, 2);
    assert_eq!(b.new_pod.as_deref(), Some("ollama-c"));
    assert_eq!(b.marks.t0, Some(at(20_000)));
    assert_eq!(b.marks.t1, Some(at(21_700)));
    assert_eq!(a.marks.t4, Some(at(8_000)), "the first trial is untouched");
}

/// With no cooldown the next trial can begin (and delete this trial's pod) before the first
/// memory sample after T4 arrives: that sample still belongs to the first trial, as long as
/// it was taken before the next trial's T0; one taken after it does not.
#[test]
fn memory_after_t4_is_kept_when_the_next_trial_has_begun() {
    let mut first = full_trial(0, 1, ("ollama-a", "uid-a"), ("ollama-b", "uid-b"));
    first.pop(); // no memory sample right after T4
    let mut events = with_initial_pod(first, "ollama-a", "uid-a");
    // Trial 2 starts at 8.5 s (deleting ollama-b); a sample of ollama-b stamped 8.3 s
    // arrives only then, and one stamped 8.7 s (after trial 2's T0) arrives later.
    let mut second = full_trial(8_500, 2, ("ollama-b", "uid-b"), ("ollama-c", "uid-c"));
    let second_rest = second.split_off(2);
    events.extend(second);
    events.push(memory(8_300, "ollama-b", 3_000_000_000));
    events.push(memory(8_700, "ollama-b", 1_000_000_000));
    events.extend(second_rest);
    let s = state_of(&events);
    assert_eq!(s.timeline.trials.len(), 2);
    let (a, b) = (&s.timeline.trials[0], &s.timeline.trials[1]);
    assert_eq!(
        b.marks.t0,
        Some(at(8_500)),
        "trial 2 began before the sample arrived"
    );
    assert_eq!(a.metric(Metric::MemoryAfter), Some(3.0e9));
    assert_eq!(
        b.metric(Metric::MemoryAfter),
        Some(2.9e9),
        "trial 2 has its own"
    );

    // A first sample taken only after the next trial's T0 is not "after the inference".
    let mut first = full_trial(0, 1, ("ollama-a", "uid-a"), ("ollama-b", "uid-b"));
    first.pop();
    let mut events = with_initial_pod(first, "ollama-a", "uid-a");
    events.extend(full_trial(
        8_500,
        2,
        ("ollama-b", "uid-b"),
        ("ollama-c", "uid-c"),
    ));
    events.push(memory(8_700, "ollama-b", 1_000_000_000));
    let s = state_of(&events);
    assert_eq!(s.timeline.trials[0].memory_after, None);
}

#[test]
fn runtime_probe_arriving_before_the_ready_event() {
    // Arrival order: delete, new pod pending, probe OK of the new pod (stamped 1.65 s), then
    // the watch event saying Ready (stamped 1.70 s, lastTransitionTime 1.60 s).
    let mut events = vec![applied(
        -5_000,
        pod("ollama-a", "uid-a", Stage::Ready, -5_000),
    )];
    events.extend(delete_pod(0, 1, "ollama-a"));
    events.push(applied(40, pod("ollama-b", "uid-b", Stage::Pending, 40)));
    events.push(probe(1_650, "ollama-b", true));
    events.push(infer_start(1_660, 100, "ollama-b"));
    events.push(applied(
        1_700,
        pod("ollama-b", "uid-b", Stage::Ready, 1_600),
    ));
    events.push(infer_done(5_000, 100, true));
    let s = state_of(&events);
    let t = &s.timeline.trials[0];
    assert_eq!(t.marks.t1, Some(at(1_700)));
    assert_eq!(t.marks.t1_api, Some(at(1_600)));
    assert_eq!(t.marks.t2, Some(at(1_650)));
    assert_eq!(t.marks.t3, Some(at(1_660)));
    assert_eq!(t.marks.t4, Some(at(5_000)));
    assert!(t.is_ok());
    // ready_to_runtime is negative here, and is reported as measured.
    assert!((t.metric(Metric::ReadyToRuntime).unwrap() + 0.05).abs() < 1e-9);
}

#[test]
fn t4_arriving_before_the_ready_event_closes_the_trial_when_t1_comes() {
    let mut events = vec![applied(
        -5_000,
        pod("ollama-a", "uid-a", Stage::Ready, -5_000),
    )];
    events.extend(delete_pod(0, 1, "ollama-a"));
    events.push(probe(1_650, "ollama-b", true));
    events.push(infer_start(1_660, 100, "ollama-b"));
    events.push(infer_done(4_000, 100, true));
    let open = state_of(&events);
    assert!(open.timeline.trials[0].is_running());
    events.push(applied(
        1_700,
        pod("ollama-b", "uid-b", Stage::Ready, 1_600),
    ));
    let s = state_of(&events);
    assert!(s.timeline.trials[0].is_ok());
    assert_eq!(s.timeline.trials[0].marks.t4, Some(at(4_000)));
}

#[test]
fn probes_of_the_old_pod_do_not_count() {
    let mut events = vec![applied(
        -5_000,
        pod("ollama-a", "uid-a", Stage::Ready, -5_000),
    )];
    events.extend(delete_pod(0, 1, "ollama-a"));
    events.push(probe(100, "ollama-a", true));
    events.push(applied(
        1_700,
        pod("ollama-b", "uid-b", Stage::Ready, 1_600),
    ));
    let s = state_of(&events);
    assert_eq!(s.timeline.trials[0].marks.t2, None);
}

#[test]
fn runner_abort_and_cold_step_are_kept() {
    let mut events = vec![applied(
        -5_000,
        pod("ollama-a", "uid-a", Stage::Ready, -5_000),
    )];
    events.push(ev(
        -2_000,
        Source::Runner,
        EventKind::TrialBegin { cold: true },
    ));
    events.push(ev(
        -1_000,
        Source::Action,
        EventKind::CachesDropped(CacheDrop {
            node: "lab-node-1".into(),
            cached_kb_before: Some(2_900_000),
            cached_kb_after: Some(740_000),
            dropped: true,
            error: None,
        }),
    ));
    events.extend(delete_pod(0, 1, "ollama-a"));
    events.push(ev(
        60_000,
        Source::Runner,
        EventKind::TrialAbort {
            reason: "timeout: replacement not Ready after 60 s".into(),
        },
    ));
    let s = state_of(&events);
    let t = &s.timeline.trials[0];
    assert_eq!(
        t.cold.as_ref().and_then(|c| c.cached_kb_after),
        Some(740_000)
    );
    assert_eq!(
        t.reason(),
        Some("timeout: replacement not Ready after 60 s")
    );
}

/// Ctrl-C right after readygap's delete was accepted: the deletion's watch event comes after
/// the trial was aborted. It is the echo of readygap's own request, not an external trial
/// (a recording of such a run used to replay as two trials).
#[test]
fn the_deletion_of_an_aborted_trials_pod_is_no_external_trial() {
    let mut events = with_initial_pod(delete_pod(0, 1, "ollama-a").to_vec(), "ollama-a", "uid-a");
    events.push(ev(
        5,
        Source::Runner,
        EventKind::TrialAbort {
            reason: "interrupted".into(),
        },
    ));
    events.push(deleting(
        12,
        pod("ollama-a", "uid-a", Stage::Ready, -10_000),
    ));
    let s = state_of(&events);
    assert_eq!(s.timeline.trials.len(), 1, "{:#?}", s.timeline.trials);
    assert_eq!(s.timeline.trials[0].reason(), Some("interrupted"));
    // A later deletion of another pod is still an external trial.
    let mut more = events.clone();
    more.insert(
        0,
        applied(-9_000, pod("ollama-b", "uid-b", Stage::Ready, -9_000)),
    );
    more.push(deleting(
        20_000,
        pod("ollama-b", "uid-b", Stage::Ready, -9_000),
    ));
    let s = state_of(&more);
    assert_eq!(s.timeline.trials.len(), 2);
    assert!(s.timeline.trials[1].external);
}

#[test]
fn rollout_restart_replaces_every_pod_present() {
    let mut events = vec![
        applied(-5_000, pod("ollama-a", "uid-a", Stage::Ready, -5_000)),
        applied(-5_000, pod("ollama-x", "uid-x", Stage::Ready, -5_000)),
    ];
    events.extend(action(
        0,
        1,
        Action::RolloutRestart {
            deployment: "ollama".into(),
        },
    ));
    events.push(deleting(
        500,
        pod("ollama-x", "uid-x", Stage::Ready, -5_000),
    ));
    events.push(applied(
        2_000,
        pod("ollama-n", "uid-n", Stage::Ready, 2_000),
    ));
    let s = state_of(&events);
    assert_eq!(
        s.timeline.trials.len(),
        1,
        "the old pod's deletion is expected"
    );
    assert_eq!(s.timeline.trials[0].marks.t1, Some(at(2_000)));
    assert_eq!(s.timeline.trials[0].marks.deletion_seen, Some(at(500)));
}

fn resync(ms: i64, done: bool) -> Event {
    let resource = readygap_core::event::Resource::Pods;
    ev(
        ms,
        Source::Kube,
        if done {
            EventKind::ResyncDone { resource }
        } else {
            EventKind::ResyncStarted { resource }
        },
    )
}

fn owned(mut p: PodView, owner: &str) -> PodView {
    p.owner = Some(owner.into());
    p
}

/// Issue 14.3: with maxSurge 1 / maxUnavailable 0 the new ReplicaSet's pod is Ready before
/// the old pod is deleted. The external trial opens at the new pod (the first evidence) and
/// its T1 is that pod's Ready, although the deletion comes after it.
#[test]
fn an_external_surge_rollout_is_one_trial_from_the_new_pod_to_its_ready() {
    let old = || {
        owned(
            pod("ollama-a", "uid-a", Stage::Ready, -10_000),
            "ollama-old",
        )
    };
    let new = |s, ms| owned(pod("ollama-b", "uid-b", s, ms), "ollama-new");
    let events = vec![
        resync(-10_000, false),
        applied(-10_000, old()),
        resync(-10_000, true),
        applied(1_000, new(Stage::Pending, 1_000)),
        applied(1_200, new(Stage::Started, 1_200)),
        applied(3_000, new(Stage::Ready, 3_000)),
        deleting(3_100, old()),
        ev(3_900, Source::Kube, EventKind::PodDeleted(old())),
    ];
    let s = state_of(&events);
    assert_eq!(s.timeline.trials.len(), 1, "{:#?}", s.timeline.trials);
    let t = &s.timeline.trials[0];
    assert!(t.external, "{}", t.trigger);
    assert!(t.trigger.contains("rollout"), "{}", t.trigger);
    assert!(
        t.is_running(),
        "no T4 yet, but no failure either: {:?}",
        t.status
    );
    assert_eq!(t.marks.t0, Some(at(1_000)));
    assert_eq!(t.marks.t1, Some(at(3_000)));
    assert_eq!(t.new_pod.as_deref(), Some("ollama-b"));
    assert_eq!(
        t.marks.deletion_seen,
        Some(at(3_100)),
        "the old pod's deletion"
    );
    assert!(t.marks.t0 < t.marks.t1);
}

/// A scale-up (a new pod of the same ReplicaSet) is no replacement.
#[test]
fn a_new_pod_of_the_same_replicaset_is_no_trial() {
    let events = vec![
        applied(0, pod("ollama-a", "uid-a", Stage::Ready, 0)),
        applied(1_000, pod("ollama-b", "uid-b", Stage::Pending, 1_000)),
        applied(3_000, pod("ollama-b", "uid-b", Stage::Ready, 3_000)),
    ];
    assert!(state_of(&events).timeline.trials.is_empty());
}

/// Issue 14.4: with two replicas, a re-list during the trial re-applies the Ready sibling;
/// that is no T1 (nor is any later update of it): T1 is the Ready of a pod that did not
/// exist before T0.
#[test]
fn a_ready_sibling_relisted_after_t0_is_not_t1() {
    let a = || pod("ollama-a", "uid-a", Stage::Ready, -10_000);
    let sib = || pod("ollama-s", "uid-s", Stage::Ready, -10_000);
    let mut events = vec![
        resync(-10_000, false),
        applied(-10_000, a()),
        applied(-10_000, sib()),
        resync(-10_000, true),
    ];
    events.extend(delete_pod(0, 1, "ollama-a"));
    events.push(deleting(20, a()));
    // The watch drops and re-lists: the sibling comes again (InitApply), then updates.
    events.push(resync(500, false));
    events.push(deleting(500, a()));
    events.push(applied(500, sib()));
    events.push(resync(500, true));
    events.push(applied(800, sib()));
    events.push(applied(
        1_000,
        pod("ollama-b", "uid-b", Stage::Pending, 1_000),
    ));
    events.push(applied(
        2_500,
        pod("ollama-b", "uid-b", Stage::Ready, 2_500),
    ));
    let s = state_of(&events);
    assert_eq!(s.timeline.trials.len(), 1);
    let t = &s.timeline.trials[0];
    assert_eq!(t.new_pod.as_deref(), Some("ollama-b"), "{:?}", t.marks);
    assert_eq!(t.marks.t1, Some(at(2_500)));
}

/// Issue 14.10: what the initial list replays happened before readygap looked. A pod
/// already terminating is history, not an external trial; a Kubernetes Event keeps its own
/// time.
#[test]
fn what_the_initial_list_replays_is_history() {
    let mut old = pod("ollama-a", "uid-a", Stage::Ready, -60_000);
    old.deletion_timestamp = Some(at(-30_000));
    let events = vec![
        resync(0, false),
        applied(0, old),
        applied(0, pod("ollama-b", "uid-b", Stage::Ready, -50_000)),
        resync(0, true),
        ev(
            1,
            Source::Kube,
            EventKind::KubeEvent(KubeEventView {
                object: "pod/ollama-a".into(),
                reason: "Killing".into(),
                message: "Stopping container ollama".into(),
                type_: "Normal".into(),
                time: Some(at(-30_000)),
                ..Default::default()
            }),
        ),
    ];
    let s = state_of(&events);
    assert!(s.timeline.trials.is_empty(), "{:#?}", s.timeline.trials);
    assert_eq!(s.kube_events.back().map(|(ts, _)| *ts), Some(at(-30_000)));
    // A deletion seen live afterwards is a trial again.
    let mut more = events.clone();
    more.push(deleting(
        5_000,
        pod("ollama-b", "uid-b", Stage::Ready, -50_000),
    ));
    let s = state_of(&more);
    assert_eq!(s.timeline.trials.len(), 1);
    assert_eq!(s.timeline.trials[0].marks.t0, Some(at(5_000)));
}

/// A probe the runtime answered with `status` but that is not "model ready" (llama-server's
/// 503 "Loading model"), or, with `by_runtime` false, the API server's own 503.
fn answered(ms: i64, pod: &str, status: u16, by_runtime: bool) -> Event {
    let mut e = probe(ms, pod, false);
    if let EventKind::RuntimeProbe(p) = &mut e.kind {
        p.status = Some(status);
        p.http_answered = by_runtime;
    }
    e
}

#[test]
fn t2_splits_into_http_answers_and_model_ready() {
    let mut events = full_trial(0, 1, ("ollama-a", "uid-a"), ("ollama-b", "uid-b"));
    // Before the probe at 2400 that is the 200: the API server's 503 (not the runtime's),
    // then the runtime's own 503 "Loading model".
    let at_ok = events
        .iter()
        .position(|e| matches!(&e.kind, EventKind::RuntimeProbe(p) if p.ok))
        .unwrap();
    events.insert(at_ok, answered(1900, "ollama-b", 503, true));
    events.insert(at_ok, answered(1800, "ollama-b", 503, false));
    // The 200 itself is an HTTP answer too.
    if let EventKind::RuntimeProbe(p) = &mut events[at_ok + 2].kind {
        p.http_answered = true;
    }
    let s = state_of(&with_initial_pod(events, "ollama-a", "uid-a"));
    let t = &s.timeline.trials[0];
    assert_eq!(
        t.marks.t2_http,
        Some(at(1900)),
        "the runtime's 503, not the proxy's"
    );
    assert_eq!(t.marks.t2, Some(at(2400)), "model ready is the 200");
    assert_eq!(t.metric(Metric::RuntimeHttp), Some(1.9));
    assert_eq!(t.metric(Metric::HttpToModelReady), Some(0.5));
}

#[test]
fn without_http_answers_recorded_there_is_no_split() {
    // Recordings made before the split have no `http_answered`: no T2 HTTP, no new metrics.
    let s = state_of(&with_initial_pod(
        full_trial(0, 1, ("ollama-a", "uid-a"), ("ollama-b", "uid-b")),
        "ollama-a",
        "uid-a",
    ));
    let t = &s.timeline.trials[0];
    assert_eq!(t.marks.t2_http, None);
    assert_eq!(t.metric(Metric::HttpToModelReady), None);
}

/// The runtime's log line of a generate, from `client`, that took `latency_ms`.
fn logged_generate(ms: i64, pod: &str, client: &str, latency_ms: f64) -> Event {
    ev(
        ms,
        Source::Log,
        EventKind::RequestLogged(LoggedRequest {
            pod: pod.into(),
            method: "POST".into(),
            path: "/api/generate".into(),
            status: 200,
            latency_ms: Some(latency_ms),
            client: Some(client.into()),
        }),
    )
}

/// A pod whose readiness probe is the shipped exec probe that sends an inference.
fn with_exec_inference_probe(mut p: PodView) -> PodView {
    p.containers[0].spec = Some(PodSpecFacts {
        readiness: Some(ProbeFacts {
            kind: "exec".into(),
            target: "bash /etc/readygap/ready-inference.sh".into(),
            inference: true,
            ..ProbeFacts::default()
        }),
        ..PodSpecFacts::default()
    });
    p
}

/// The shipped inference-aware readiness probe POSTs a generate from inside the container
/// (127.0.0.1) before the pod turns Ready; on a real cluster that line came first and was
/// taken as T3/T4, before T1. It is the probe's own mark; T3/T4 are the first user's request.
/// Without such a probe, a request from localhost is a user's (`kubectl port-forward`).
#[test]
fn the_exec_probes_own_inference_is_no_users_t3_t4() {
    let b = |stage, ms| with_exec_inference_probe(pod("ollama-b", "uid-b", stage, ms));
    let mut events = vec![applied(0, pod("ollama-a", "uid-a", Stage::Ready, 0))];
    events.push(deleting(5_000, pod("ollama-a", "uid-a", Stage::Ready, 0)));
    events.push(applied(5_100, b(Stage::Pending, 5_100)));
    // The probe's generate (loads the model) ends just before the kubelet marks Ready.
    events.push(logged_generate(9_000, "ollama-b", "127.0.0.1", 2_500.0));
    events.push(applied(9_050, b(Stage::Ready, 9_050)));
    // A later probe, over IPv6 loopback, is no user either.
    events.push(logged_generate(14_000, "ollama-b", "::1", 40.0));
    // The user's request, from a client pod.
    events.push(logged_generate(15_000, "ollama-b", "10.244.0.7", 300.0));
    let s = state_of(&events);
    let t = &s.timeline.trials[0];
    assert!(t.external);
    assert_eq!(t.status, TrialStatus::Ok);
    assert_eq!(t.marks.t1, Some(at(9_050)));
    assert_eq!(t.marks.t3, Some(at(14_700)));
    assert_eq!(t.marks.t4, Some(at(15_000)));
    assert_eq!(t.marks.probe_inference, Some(at(9_000)));
    assert!(t.metric(Metric::ReadyToInference).is_some_and(|s| s > 0.0));
    // Only the probe so far: the trial waits for a user.
    let s = state_of(&events[..5]);
    let t = &s.timeline.trials[0];
    assert!(t.is_running());
    assert_eq!(t.marks.t4, None);
    assert_eq!(t.marks.probe_inference, Some(at(9_000)));

    // No exec probe that infers: a request from localhost is a user's (port-forward).
    let mut plain = vec![applied(0, pod("ollama-a", "uid-a", Stage::Ready, 0))];
    plain.push(deleting(5_000, pod("ollama-a", "uid-a", Stage::Ready, 0)));
    plain.push(applied(
        5_100,
        pod("ollama-b", "uid-b", Stage::Pending, 5_100),
    ));
    plain.push(applied(
        9_050,
        pod("ollama-b", "uid-b", Stage::Ready, 9_050),
    ));
    plain.push(logged_generate(12_000, "ollama-b", "127.0.0.1", 500.0));
    let s = state_of(&plain);
    let t = &s.timeline.trials[0];
    assert_eq!(t.marks.t4, Some(at(12_000)));
    assert_eq!(t.marks.probe_inference, None);
}

/// T2 "answers through the Service" is the study's T2: the first 200 through the Service at or
/// after T1. An answer before T1 (another pod behind the Service, or the old one) is not it; a
/// failed probe is not it; a later 200 does not move it; it may come after T4.
#[test]
fn t2_through_the_service_is_the_first_answer_at_or_after_t1() {
    let service = |ms: i64, ok: bool| {
        ev(
            ms,
            Source::Runtime,
            EventKind::ServiceProbe(ServiceProbe {
                service: "ollama".into(),
                port: "11434".into(),
                route: "api-server service proxy".into(),
                ok,
                status: Some(if ok { 200 } else { 503 }),
                latency_ms: 3.0,
                error: (!ok).then(|| "HTTP 503: no endpoints available".into()),
            }),
        )
    };
    let mut events = vec![applied(
        -5_000,
        pod("ollama-a", "uid-a", Stage::Ready, -5_000),
    )];
    events.extend(delete_pod(0, 1, "ollama-a"));
    events.push(service(10, true)); // the old pod, still behind the Service
    events.push(applied(40, pod("ollama-b", "uid-b", Stage::Pending, 40)));
    events.push(probe(1_650, "ollama-b", true));
    events.push(applied(
        1_700,
        pod("ollama-b", "uid-b", Stage::Ready, 1_600),
    ));
    events.push(service(1_750, false));
    events.push(infer_start(1_760, 100, "ollama-b"));
    events.push(infer_done(1_900, 100, true));
    let s = state_of(&events);
    let t = &s.timeline.trials[0];
    assert!(t.is_ok());
    assert_eq!(t.marks.t2_service, None, "{:?}", t.marks);
    assert_eq!(t.metric(Metric::ReadyToRuntimeService), None);
    events.push(service(2_120, true));
    events.push(service(2_200, true));
    let s = state_of(&events);
    let t = &s.timeline.trials[0];
    assert_eq!(t.marks.t2_service, Some(at(2_120)));
    assert!((t.metric(Metric::ReadyToRuntimeService).unwrap() - 0.42).abs() < 1e-9);
    assert!((t.metric(Metric::RuntimeRecoveryService).unwrap() - 2.12).abs() < 1e-9);
    // On the pod's address the runtime answered 50 ms before Ready; through the Service, after.
    assert!(t.metric(Metric::ReadyToRuntime).unwrap() < 0.0);
    let (_, last) = s
        .service_probe
        .as_ref()
        .expect("the latest service probe kept");
    assert!(last.ok);
}

/// A trial failed by a container restart says why in the kubelet's words (issue 34): its
/// `Unhealthy` with the probe's output and its `Killing` for a failed liveness probe turn
/// "container restarted (Completed, exit 0)" into "container restarted: killed by the
/// liveness probe (Liveness probe failed: …), restart 2", whether the Events come before the
/// restart is seen or after; a restart with no such Event keeps its plain reason.
#[test]
fn a_restart_by_the_liveness_probe_is_said_in_the_kubelets_words() {
    let restarted = |ms: i64, n: u32| {
        let mut p = pod("ollama-a", "uid-a", Stage::Started, -10_000);
        p.conditions[1].status = false;
        p.containers[0].restart_count = n;
        p.containers[0].ready = false;
        p.containers[0].last_state = Some(ContainerState::Terminated {
            reason: "Completed".into(),
            exit_code: 0,
            finished_at: Some(at(ms - 10)),
        });
        applied(ms, p)
    };
    let kube = |ms: i64, reason: &str, message: &str| {
        ev(
            ms,
            Source::Kube,
            EventKind::KubeEvent(KubeEventView {
                object: "pod/ollama-a".into(),
                reason: reason.into(),
                message: message.into(),
                type_: "Warning".into(),
                time: Some(at(ms)),
                ..Default::default()
            }),
        )
    };
    let unhealthy = kube(
        3_000,
        "Unhealthy",
        "Liveness probe failed: command timed out: \"/bin/sh -c ollama ps\" timed out after 5s",
    );
    let killing = kube(
        4_000,
        "Killing",
        "Container ollama failed liveness probe, will be restarted",
    );
    // Restarted once, Ready again (T1 of the restart's trial), killed during the load.
    let mut ready_again = pod("ollama-a", "uid-a", Stage::Ready, 2_000);
    ready_again.containers[0].restart_count = 1;
    let base = vec![
        applied(-10_000, pod("ollama-a", "uid-a", Stage::Ready, -10_000)),
        restarted(1_000, 1),
        applied(2_000, ready_again),
    ];
    let want = "container restarted: killed by the liveness probe (Liveness probe failed: \
                command timed out: \"/bin/sh -c ollama ps\" timed out after 5s), restart 2";
    // Events first, then the restart; and the restart first, then the Events.
    for events in [
        [
            base.clone(),
            vec![unhealthy.clone(), killing.clone(), restarted(5_000, 2)],
        ]
        .concat(),
        [
            base.clone(),
            vec![restarted(5_000, 2), unhealthy.clone(), killing.clone()],
        ]
        .concat(),
    ] {
        let s = state_of(&events);
        assert_eq!(s.timeline.trials.len(), 2, "{:#?}", s.timeline.trials);
        assert_eq!(s.timeline.trials[0].reason(), Some(want));
    }
    // An exec probe that printed its reason and exited 1: the real kubelet's Event keeps the
    // output's newline (seen on the real cluster, tests/real_cluster/liveness.rs); the reason
    // stays one line.
    let printed = kube(
        3_000,
        "Unhealthy",
        "Liveness probe failed: not ready: no complete answer from /api/generate within 1s\n",
    );
    let s = state_of(
        &[
            base.clone(),
            vec![printed, killing.clone(), restarted(5_000, 2)],
        ]
        .concat(),
    );
    assert_eq!(
        s.timeline.trials[0].reason(),
        Some(
            "container restarted: killed by the liveness probe (Liveness probe failed: not \
             ready: no complete answer from /api/generate within 1s), restart 2"
        )
    );
    // Without the kubelet's Events the reason stays what the pod said.
    let s = state_of(&[base, vec![restarted(5_000, 2)]].concat());
    assert_eq!(
        s.timeline.trials[0].reason(),
        Some("container restarted (Completed, exit 0)")
    );
}
