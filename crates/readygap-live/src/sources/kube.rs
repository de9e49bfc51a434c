//! Kubernetes feeds: watches of the target's Pods, its EndpointSlices and the Events about
//! its pods (`super::pod_events`), through `kube::runtime::watcher` with its default
//! backoff, turned into events by `super::watch` (re-lists and deletions explicit to the
//! reducer).
//!
//! Conversions from API objects to the compact views ([`pod_view`], [`endpoint_slice_view`],
//! [`kube_event_view`], [`node_view`]) are pure; [`adapt`] turns any watcher `Stream` into
//! events, so tests feed it directly.

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event as CoreEvent, Node, Pod};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use readygap_core::event::{
    ContainerState, ContainerView, EndpointSliceView, EndpointView, Event, EventKind,
    KubeEventView, NodeView, PodCondition, PodView, Timestamp,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use super::watch::{Watched, adapt, convert, watch_error_message};

fn ts(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> Timestamp {
    // k8s-openapi 0.29 wraps jiff::Timestamp.
    micro_ts(&t.0)
}

fn container_state(s: Option<&k8s_openapi::api::core::v1::ContainerState>) -> ContainerState {
    let Some(s) = s else {
        return ContainerState::Unknown;
    };
    if let Some(r) = &s.running {
        ContainerState::Running {
            started_at: r.started_at.as_ref().map(ts),
        }
    } else if let Some(t) = &s.terminated {
        ContainerState::Terminated {
            reason: t.reason.clone().unwrap_or_default(),
            exit_code: t.exit_code,
            finished_at: t.finished_at.as_ref().map(ts),
        }
    } else if let Some(w) = &s.waiting {
        ContainerState::Waiting {
            reason: w.reason.clone().unwrap_or_default(),
        }
    } else {
        ContainerState::Unknown
    }
}

/// The compact view of a Pod.
pub fn pod_view(pod: &Pod) -> PodView {
    let md = &pod.metadata;
    let status = pod.status.as_ref();
    let conditions = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .map(|c| PodCondition {
            type_: c.type_.clone(),
            status: c.status == "True",
            last_transition: c.last_transition_time.as_ref().map(ts),
            reason: c.reason.clone(),
        })
        .collect();
    let mut containers: Vec<ContainerView> = status
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .map(|c| ContainerView {
            name: c.name.clone(),
            ready: c.ready,
            restart_count: c.restart_count.max(0) as u32,
            state: container_state(c.state.as_ref()),
            last_state: Some(container_state(c.last_state.as_ref()))
                .filter(|s| *s != ContainerState::Unknown),
            spec: None,
        })
        .collect();
    // The serving container's view carries the spec facts.
    if let Some((serving, facts)) = super::pod_spec::pod_spec_facts(pod)
        && let Some(c) = containers.iter_mut().find(|c| c.name == serving)
    {
        c.spec = Some(facts);
    }
    PodView {
        name: md.name.clone().unwrap_or_default(),
        uid: md.uid.clone().unwrap_or_default(),
        node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
        ip: status.and_then(|s| s.pod_ip.clone()),
        phase: status.and_then(|s| s.phase.clone()).unwrap_or_default(),
        conditions,
        containers,
        created: md.creation_timestamp.as_ref().map(ts),
        deletion_timestamp: md.deletion_timestamp.as_ref().map(ts),
        owner: md
            .owner_references
            .as_ref()
            .and_then(|o| o.iter().find(|r| r.controller == Some(true)).or(o.first()))
            .map(|r| r.name.clone()),
        resource_version: md.resource_version.clone().unwrap_or_default(),
    }
}

/// The view of an EndpointSlice.
pub fn endpoint_slice_view(s: &EndpointSlice) -> EndpointSliceView {
    EndpointSliceView {
        name: s.metadata.name.clone().unwrap_or_default(),
        service: s
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("kubernetes.io/service-name").cloned()),
        endpoints: s
            .endpoints
            .iter()
            .map(|e| {
                let c = e.conditions.as_ref();
                // k8s.io/api discovery/v1 types.go EndpointConditions: a nil ready and a nil
                // serving are both "true", a nil terminating is "false".
                EndpointView {
                    addresses: e.addresses.clone(),
                    pod: e
                        .target_ref
                        .as_ref()
                        .filter(|r| r.kind.as_deref().is_none_or(|k| k == "Pod"))
                        .and_then(|r| r.name.clone()),
                    ready: c.and_then(|c| c.ready).unwrap_or(true),
                    serving: c.and_then(|c| c.serving).unwrap_or(true),
                    terminating: c.and_then(|c| c.terminating).unwrap_or(false),
                }
            })
            .collect(),
    }
}

/// The view of a core/v1 Event.
pub fn kube_event_view(e: &CoreEvent) -> KubeEventView {
    let o = &e.involved_object;
    KubeEventView {
        object: format!(
            "{}/{}",
            o.kind.as_deref().unwrap_or("").to_lowercase(),
            o.name.as_deref().unwrap_or("")
        ),
        reason: e.reason.clone().unwrap_or_default(),
        message: e.message.clone().unwrap_or_default(),
        type_: e.type_.clone().unwrap_or_default(),
        name: e.metadata.name.clone().unwrap_or_default(),
        count: e
            .series
            .as_ref()
            .and_then(|s| s.count)
            .or(e.count)
            .and_then(|c| u32::try_from(c).ok()),
        time: e
            .event_time
            .as_ref()
            .map(|t| micro_ts(&t.0))
            .or_else(|| e.last_timestamp.as_ref().map(ts))
            .or_else(|| e.first_timestamp.as_ref().map(ts))
            .or_else(|| e.metadata.creation_timestamp.as_ref().map(ts)),
    }
}

fn micro_ts(t: &k8s_openapi::jiff::Timestamp) -> Timestamp {
    chrono::DateTime::from_timestamp(t.as_second(), t.subsec_nanosecond().max(0) as u32)
        .unwrap_or_default()
}

/// The view of a Node.
pub fn node_view(n: &Node) -> NodeView {
    let status = n.status.as_ref();
    NodeView {
        name: n.metadata.name.clone().unwrap_or_default(),
        ready: status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .is_some_and(|c| c.status == "True"),
        provider_id: n.spec.as_ref().and_then(|s| s.provider_id.clone()),
        internal_ip: status
            .and_then(|s| s.addresses.as_ref())
            .and_then(|a| a.iter().find(|a| a.type_ == "InternalIP"))
            .map(|a| a.address.clone()),
    }
}

impl Watched for Pod {
    const RESOURCE: &'static str = "pods";
    fn applied(&self) -> Option<EventKind> {
        Some(EventKind::PodApplied(pod_view(self)))
    }
    fn deleted(&self) -> Option<EventKind> {
        Some(EventKind::PodDeleted(pod_view(self)))
    }
}

impl Watched for EndpointSlice {
    const RESOURCE: &'static str = "endpointslices";
    fn applied(&self) -> Option<EventKind> {
        Some(EventKind::EndpointSliceApplied(endpoint_slice_view(self)))
    }
    fn deleted(&self) -> Option<EventKind> {
        Some(EventKind::EndpointSliceDeleted {
            name: self.metadata.name.clone().unwrap_or_default(),
        })
    }
}

impl Watched for CoreEvent {
    const RESOURCE: &'static str = "events";
    fn applied(&self) -> Option<EventKind> {
        Some(EventKind::KubeEvent(kube_event_view(self)))
    }
}

impl Watched for Node {
    const RESOURCE: &'static str = "nodes";
    fn applied(&self) -> Option<EventKind> {
        Some(EventKind::NodeApplied(node_view(self)))
    }
}

/// What the Kubernetes feeds watch (Nodes apart: `super::nodes::run`, retried when the
/// selected node changes).
#[derive(Debug, Clone)]
pub struct KubeConfig {
    pub namespace: String,
    /// Label selector of the target's pods.
    pub selector: String,
    /// The Service whose EndpointSlices are watched.
    pub service: Option<String>,
    /// The Deployment, when the target is one: its Events and its ReplicaSets' are watched
    /// too (`super::pod_events`).
    pub deployment: Option<String>,
}

/// Run all Kubernetes feeds until cancelled.
pub async fn run(
    client: kube::Client,
    cfg: KubeConfig,
    tx: mpsc::Sender<Event>,
    cancel: CancellationToken,
) {
    // The pod watch also tells the Event watches which pods there are (`pod_events`).
    let (seen_tx, seen_rx) = mpsc::unbounded_channel();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &cfg.namespace);
    let pod_stream = watcher(pods, watcher::Config::default().labels(&cfg.selector))
        .default_backoff()
        .inspect(move |item| {
            if let Ok(ev) = item {
                for seen in super::pod_events::PodSeen::all(ev) {
                    let _ = seen_tx.send(seen);
                }
            }
        });
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(adapt(
        pod_stream,
        "pods",
        |_: &Pod| true,
        tx.clone(),
        cancel.clone(),
    ));
    if let Some(svc) = &cfg.service {
        let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), &cfg.namespace);
        let s = watcher(
            slices,
            watcher::Config::default().labels(&format!("kubernetes.io/service-name={svc}")),
        )
        .default_backoff();
        tasks.spawn(adapt(
            s,
            "endpointslices",
            |_: &EndpointSlice| true,
            tx.clone(),
            cancel.clone(),
        ));
    }
    tasks.spawn(super::pod_events::run(
        Api::namespaced(client.clone(), &cfg.namespace),
        cfg.deployment.clone(),
        seen_rx,
        tx.clone(),
        cancel.clone(),
    ));
    while tasks.join_next().await.is_some() {}
}
