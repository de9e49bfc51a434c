//! The Kubernetes feeds: conversions of real-shaped API objects (JSON fixtures) into the
//! compact views, and the watch adapter fed directly with raw watcher event streams
//! (re-lists, deletions, errors and recovery).

use futures::stream;
use k8s_openapi::api::core::v1::{Event as CoreEvent, Node, Pod};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::watcher;
use readygap_core::event::{ContainerState, Event, EventKind, Source};
use readygap_core::state::State;
use readygap_live::sources::kube::{
    adapt, endpoint_slice_view, kube_event_view, node_view, pod_view,
};
use std::path::Path;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

fn load<T: serde::de::DeserializeOwned>(name: &str) -> T {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/k8s")
        .join(name);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn ts(s: &str) -> chrono::DateTime<chrono::Utc> {
    s.parse().unwrap()
}

#[test]
fn a_ready_pod() {
    let v = pod_view(&load::<Pod>("pod-ready.json"));
    assert_eq!(v.name, "ollama-6d8f7c9b5-x7k2p");
    assert_eq!(v.uid, "7f3c2a9e-1b4d-4c8e-a6f2-5d9e0b1c2a3f");
    assert_eq!(v.node.as_deref(), Some("minikube"));
    assert_eq!(v.ip.as_deref(), Some("10.244.0.57"));
    assert_eq!(v.phase, "Running");
    assert_eq!(v.owner.as_deref(), Some("ollama-6d8f7c9b5"));
    assert_eq!(v.resource_version, "184223");
    assert!(v.is_ready());
    let ready = v.condition("Ready").unwrap();
    assert_eq!(ready.last_transition, Some(ts("2026-11-30T09:58:44Z")));
    assert_eq!(v.conditions.len(), 5);
    assert_eq!(v.containers.len(), 1);
    assert_eq!(
        v.containers[0].state,
        ContainerState::Running {
            started_at: Some(ts("2026-11-30T09:58:43Z"))
        }
    );
    assert_eq!(
        v.containers[0].last_state, None,
        "an empty lastState is no state"
    );
    assert_eq!(v.created, Some(ts("2026-11-30T09:58:41Z")));
    assert_eq!(v.deletion_timestamp, None);
    assert!(!v.oom_killed());
}

#[test]
fn an_oom_killed_and_restarted_pod() {
    let v = pod_view(&load::<Pod>("pod-oomkilled.json"));
    assert!(!v.is_ready());
    assert_eq!(
        v.condition("Ready").unwrap().reason.as_deref(),
        Some("ContainersNotReady")
    );
    assert_eq!(v.restarts(), 1);
    assert!(v.oom_killed());
    assert_eq!(
        v.containers[0].last_state,
        Some(ContainerState::Terminated {
            reason: "OOMKilled".into(),
            exit_code: 137,
            finished_at: Some(ts("2026-11-30T10:04:11Z"))
        })
    );
    assert_eq!(
        v.containers[0].last_state.as_ref().unwrap().label(),
        "Terminated: OOMKilled (137)"
    );
}

#[test]
fn a_terminating_and_a_pending_pod() {
    let t = pod_view(&load::<Pod>("pod-terminating.json"));
    assert_eq!(t.deletion_timestamp, Some(ts("2026-11-30T10:05:30Z")));
    let p = pod_view(&load::<Pod>("pod-pending.json"));
    assert_eq!(p.phase, "Pending");
    assert_eq!(p.ip, None);
    assert!(!p.is_ready());
    assert_eq!(
        p.containers[0].state,
        ContainerState::Waiting {
            reason: "ContainerCreating".into()
        }
    );
}

#[test]
fn an_endpoint_slice_with_ready_terminating_and_bare_endpoints() {
    let s = endpoint_slice_view(&load::<EndpointSlice>("endpointslice.json"));
    assert_eq!(s.name, "ollama-8xq2d");
    assert_eq!(s.service.as_deref(), Some("ollama"));
    assert_eq!(s.endpoints.len(), 3);
    let old = &s.endpoints[0];
    assert_eq!(
        (old.ready, old.serving, old.terminating),
        (false, true, true)
    );
    assert_eq!(old.pod.as_deref(), Some("ollama-6d8f7c9b5-x7k2p"));
    let new = &s.endpoints[1];
    assert_eq!(
        (new.ready, new.serving, new.terminating),
        (true, true, false)
    );
    assert_eq!(new.addresses, vec!["10.244.0.58".to_string()]);
    // Unset conditions: ready (nil means ready), serving follows ready, not terminating.
    let bare = &s.endpoints[2];
    assert_eq!(
        (
            bare.ready,
            bare.serving,
            bare.terminating,
            bare.pod.as_deref()
        ),
        (true, true, false, None)
    );
}

#[test]
fn an_event_and_a_node() {
    let e = kube_event_view(&load::<CoreEvent>("event.json"));
    assert_eq!(e.object, "pod/ollama-6d8f7c9b5-x7k2p");
    assert_eq!(e.reason, "Killing");
    assert_eq!(e.type_, "Normal");
    assert!(e.message.contains("liveness probe"));
    let n = node_view(&load::<Node>("node.json"));
    assert_eq!(n.name, "minikube");
    assert!(n.ready);
    assert_eq!(n.provider_id.as_deref(), Some("docker://minikube"));
    assert_eq!(n.internal_ip.as_deref(), Some("192.168.49.2"));
}

async fn run_adapter<K>(
    items: Vec<Result<watcher::Event<K>, watcher::Error>>,
    keep: impl Fn(&K) -> bool,
) -> Vec<Event>
where
    K: readygap_live::sources::kube::Watched,
{
    let (tx, mut rx) = mpsc::channel(64);
    adapt(
        stream::iter(items),
        "pods",
        keep,
        tx,
        CancellationToken::new(),
    )
    .await;
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(e);
    }
    out
}

fn forbidden() -> watcher::Error {
    let status = kube::core::Status {
        code: 403,
        reason: "Forbidden".into(),
        message: "pods is forbidden: User \"system:serviceaccount:llm:readygap\" cannot watch resource \"pods\" in API group \"\" in the namespace \"llm\"".into(),
        ..Default::default()
    };
    watcher::Error::WatchFailed(kube::Error::Api(status.boxed()))
}

#[tokio::test]
async fn raw_watcher_events_map_one_to_one_and_errors_are_reported_once() {
    let ready: Pod = load("pod-ready.json");
    let pending: Pod = load("pod-pending.json");
    let terminating: Pod = load("pod-terminating.json");
    let items = vec![
        Ok(watcher::Event::Init),
        Ok(watcher::Event::InitApply(ready.clone())),
        Ok(watcher::Event::InitDone),
        Ok(watcher::Event::Apply(terminating.clone())),
        Err(forbidden()),
        Err(forbidden()),
        Ok(watcher::Event::Init),
        Ok(watcher::Event::InitApply(pending.clone())),
        Ok(watcher::Event::InitDone),
        Ok(watcher::Event::Delete(terminating.clone())),
    ];
    let events = run_adapter(items, |_: &Pod| true).await;
    assert!(events.iter().all(|e| e.source == Source::Kube));
    assert!(
        events.windows(2).all(|w| w[0].ts <= w[1].ts),
        "stamped in arrival order"
    );
    let names: Vec<&str> = events
        .iter()
        .map(|e| match &e.kind {
            EventKind::SourceConnected { .. } => "connected",
            EventKind::ResyncStarted { resource } if resource == "pods" => "resync_started",
            EventKind::ResyncDone { resource } if resource == "pods" => "resync_done",
            EventKind::PodApplied(_) => "applied",
            EventKind::PodDeleted(_) => "deleted",
            EventKind::SourceError { .. } => "error",
            _ => "other",
        })
        .collect();
    assert_eq!(
        names,
        vec![
            "connected",
            "resync_started",
            "applied",
            "resync_done",
            "applied",
            "error",
            "connected",
            "resync_started",
            "applied",
            "resync_done",
            "deleted"
        ]
    );
    let err = events.iter().find_map(|e| match &e.kind {
        EventKind::SourceError { feed, message } => Some((feed.clone(), message.clone())),
        _ => None,
    });
    let (feed, message) = err.unwrap();
    assert_eq!(feed, "pods");
    assert!(
        message.contains("watch pods"),
        "the RBAC explanation: {message}"
    );

    // Applied to the reducer: the re-list drops the pod that was not re-listed.
    let s = State::from_events(&events);
    assert!(s.pods.contains_key("ollama-6d8f7c9b5-q9w4z"));
    assert!(!s.pods.contains_key("ollama-6d8f7c9b5-x7k2p"));
    assert!(s.feeds["pods"].connected);
}

#[tokio::test]
async fn the_filter_drops_objects_but_not_resyncs() {
    let ev: CoreEvent = load("event.json");
    let items = || -> Vec<Result<watcher::Event<CoreEvent>, watcher::Error>> {
        vec![
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(ev.clone())),
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Apply(ev.clone())),
        ]
    };
    let kept = run_adapter(items(), |e: &CoreEvent| {
        e.involved_object
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("ollama-"))
    })
    .await;
    assert_eq!(
        kept.iter()
            .filter(|e| matches!(e.kind, EventKind::KubeEvent(_)))
            .count(),
        2
    );
    let dropped = run_adapter(items(), |e: &CoreEvent| {
        e.involved_object
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("vllm-"))
    })
    .await;
    assert_eq!(
        dropped
            .iter()
            .filter(|e| matches!(e.kind, EventKind::KubeEvent(_)))
            .count(),
        0
    );
    assert_eq!(
        dropped
            .iter()
            .filter(|e| matches!(
                e.kind,
                EventKind::ResyncStarted { .. } | EventKind::ResyncDone { .. }
            ))
            .count(),
        2
    );
}

#[tokio::test]
async fn cancel_stops_the_adapter() {
    let (tx, mut rx) = mpsc::channel(8);
    let cancel = CancellationToken::new();
    cancel.cancel();
    // A stream that never ends: only the cancel can stop the adapter.
    adapt(
        stream::pending::<Result<watcher::Event<Pod>, watcher::Error>>(),
        "pods",
        |_: &Pod| true,
        tx,
        cancel,
    )
    .await;
    assert!(rx.recv().await.is_none(), "nothing sent, sender dropped");
}
