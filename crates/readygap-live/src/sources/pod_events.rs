//! Events about the target's pods, and only those: one Event watch per pod
//! (`fieldSelector=involvedObject.kind=Pod,involvedObject.name=NAME`), started when the pod
//! watch first sees the pod and stopped [`LINGER`] after it is gone (the last Events of a
//! deleted pod, `Killing` say, may reach readygap after the pod's deletion does).
//!
//! Why not one watch of the namespace's pod Events: Event field selectors match whole
//! values only (no prefix, no label selector on the involved object), so such a watch
//! lists and streams every pod Event of the namespace. Next to 5,000 other pods that was
//! 95 % of the bytes readygap read and 68.7 MiB of its peak RSS (`readygap lab bench
//! --scale 5000`, docs/benchmarks.md). A watch started when the pod appears misses nothing:
//! its initial list holds the Events created before it, its watch those after.
//!
//! A Deployment of more than [`MAX_PER_POD`] live pods would need as many connections;
//! past that, the pods seen later are covered by one namespace-wide watch kept to the pods
//! the pod watch has seen and no per-pod watch covers (so no Event comes twice).
//!
//! The target's Deployment and its ReplicaSets have Events of their own that explain a
//! replacement that never got a pod (the ReplicaSet controller's `FailedCreate`: a quota, an
//! admission webhook) and say what a rollout did (`ScalingReplicaSet`, `SuccessfulCreate`).
//! Each is watched by name too: the Deployment's from the start; a ReplicaSet's once its
//! name is known, from a pod it owns or from the Deployment's `ScalingReplicaSet` Event that
//! scaled it ([`scaled_replica_set`]), which comes before any pod (a ReplicaSet that cannot
//! create a pod shows in no pod watch). A namespace-wide watch of ReplicaSet Events would
//! read every other Deployment's too.
//!
//! [`Scopes`] decides (pure, tested); [`run`] carries its orders out.

use super::watch::adapt;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Event as CoreEvent;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use readygap_core::event::Event;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// How long a gone pod's Event watch stays open.
pub const LINGER: Duration = Duration::from_secs(10);

/// Live pods watched one by one at most; more go to one namespace-wide watch.
pub const MAX_PER_POD: usize = 32;

/// What the pod watch saw, by name (`watcher::Event<Pod>` without the pod).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodSeen {
    /// A re-list began.
    Relist,
    /// A pod was listed or changed.
    Pod(String),
    /// The re-list ended: pods it did not hold are gone.
    RelistDone,
    /// A pod was deleted.
    Gone(String),
    /// A ReplicaSet of the target: a pod's owner, or one its Deployment scaled.
    ReplicaSet(String),
}

impl PodSeen {
    /// The names in one pod watcher event.
    pub fn of(ev: &watcher::Event<k8s_openapi::api::core::v1::Pod>) -> Self {
        let name =
            |p: &k8s_openapi::api::core::v1::Pod| p.metadata.name.clone().unwrap_or_default();
        match ev {
            watcher::Event::Init => Self::Relist,
            watcher::Event::InitApply(p) | watcher::Event::Apply(p) => Self::Pod(name(p)),
            watcher::Event::InitDone => Self::RelistDone,
            watcher::Event::Delete(p) => Self::Gone(name(p)),
        }
    }

    /// What one pod watcher event tells: the pod, and its owning ReplicaSet.
    pub fn all(ev: &watcher::Event<k8s_openapi::api::core::v1::Pod>) -> Vec<Self> {
        let owner = match ev {
            watcher::Event::InitApply(p) | watcher::Event::Apply(p) => p
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.kind == "ReplicaSet")
                .map(|o| Self::ReplicaSet(o.name.clone())),
            _ => None,
        };
        std::iter::once(Self::of(ev)).chain(owner).collect()
    }
}

/// The ReplicaSet a Deployment's `ScalingReplicaSet` Event names: "Scaled up replica set
/// ollama-7d4b9c8f6 from 0 to 1" (kubernetes `pkg/controller/deployment/sync.go`
/// `scaleReplicaSet`: "Scaled %s replica set %s from %d to %d"; before 1.30 "… %s to %d").
pub fn scaled_replica_set<'a>(reason: &str, message: &'a str) -> Option<&'a str> {
    if reason != "ScalingReplicaSet" {
        return None;
    }
    let rest = message
        .strip_prefix("Scaled up replica set ")
        .or_else(|| message.strip_prefix("Scaled down replica set "))?;
    rest.split_whitespace().next()
}

/// What [`run`] is to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Order {
    /// Start the Event watch of this pod.
    Watch(String),
    /// Stop the Event watch of this pod.
    Stop(String),
    /// Start the namespace-wide watch (once).
    WatchNamespace,
    /// Start the Event watch of this ReplicaSet.
    WatchReplicaSet(String),
}

/// Which pods have an Event watch, and until when.
#[derive(Debug, Default)]
pub struct Scopes {
    /// Pods with their own watch; `Some(t)`: gone, stopped at `t`.
    per_pod: BTreeMap<String, Option<Instant>>,
    /// Every pod the pod watch has seen (the namespace-wide watch keeps their Events).
    seen: BTreeSet<String>,
    /// The pods of the re-list under way.
    relisted: Option<BTreeSet<String>>,
    wide: bool,
    /// The ReplicaSets whose Events are watched (kept: old ones are few, see
    /// `revisionHistoryLimit`).
    replica_sets: BTreeSet<String>,
}

impl Scopes {
    /// The orders one pod watch event gives.
    pub fn on(&mut self, seen: PodSeen, now: Instant) -> Vec<Order> {
        match seen {
            PodSeen::Relist => {
                self.relisted = Some(BTreeSet::new());
                Vec::new()
            }
            PodSeen::Pod(name) => {
                if let Some(r) = &mut self.relisted {
                    r.insert(name.clone());
                }
                self.seen.insert(name.clone());
                if let Some(gone) = self.per_pod.get_mut(&name) {
                    *gone = None; // back (a StatefulSet's pod keeps its name)
                    return Vec::new();
                }
                let live = self.per_pod.values().filter(|g| g.is_none()).count();
                if live < MAX_PER_POD && !self.wide {
                    self.per_pod.insert(name.clone(), None);
                    vec![Order::Watch(name)]
                } else if !self.wide {
                    self.wide = true;
                    vec![Order::WatchNamespace]
                } else {
                    Vec::new()
                }
            }
            PodSeen::RelistDone => {
                let listed = self.relisted.take().unwrap_or_default();
                for (name, gone) in &mut self.per_pod {
                    if gone.is_none() && !listed.contains(name) {
                        *gone = Some(now + LINGER);
                    }
                }
                Vec::new()
            }
            PodSeen::Gone(name) => {
                if let Some(gone) = self.per_pod.get_mut(&name) {
                    gone.get_or_insert(now + LINGER);
                }
                Vec::new()
            }
            PodSeen::ReplicaSet(rs) => {
                if self.replica_sets.len() < MAX_PER_POD && self.replica_sets.insert(rs.clone()) {
                    vec![Order::WatchReplicaSet(rs)]
                } else {
                    Vec::new()
                }
            }
        }
    }

    /// The stops due at `now`.
    pub fn expire(&mut self, now: Instant) -> Vec<Order> {
        let due: Vec<String> = self
            .per_pod
            .iter()
            .filter(|(_, g)| g.is_some_and(|t| t <= now))
            .map(|(n, _)| n.clone())
            .collect();
        for n in &due {
            self.per_pod.remove(n);
        }
        due.into_iter().map(Order::Stop).collect()
    }

    /// When the next stop is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.per_pod.values().flatten().min().copied()
    }

    /// Whether the namespace-wide watch is to keep an Event about this pod.
    pub fn wide_keeps(&self, pod: &str) -> bool {
        self.seen.contains(pod) && !self.per_pod.contains_key(pod)
    }
}

/// Watch the Events of the pods `pods` reports, and of `deployment` and its ReplicaSets,
/// until cancelled.
pub async fn run(
    api: Api<CoreEvent>,
    deployment: Option<String>,
    mut pods: mpsc::UnboundedReceiver<PodSeen>,
    tx: mpsc::Sender<Event>,
    cancel: CancellationToken,
) {
    let mut scopes = Scopes::default();
    let mut watches: BTreeMap<String, CancellationToken> = BTreeMap::new();
    // What the namespace-wide watch keeps, as `scopes` has it after each change.
    let (keep_tx, keep_rx) = watch::channel(BTreeSet::<String>::new());
    let events_of = |fields: &str| {
        watcher(api.clone(), watcher::Config::default().fields(fields)).default_backoff()
    };
    // The Deployment's Events, which also name the ReplicaSets it scales.
    let (scaled_tx, mut scaled) = mpsc::unbounded_channel();
    if let Some(d) = &deployment {
        let own = events_of(&format!(
            "involvedObject.kind=Deployment,involvedObject.name={d}"
        ))
        .inspect(move |item| {
            if let Ok(watcher::Event::Apply(e) | watcher::Event::InitApply(e)) = item
                && let Some(rs) = scaled_replica_set(
                    e.reason.as_deref().unwrap_or_default(),
                    e.message.as_deref().unwrap_or_default(),
                )
            {
                let _ = scaled_tx.send(PodSeen::ReplicaSet(rs.to_string()));
            }
        });
        let all = |_: &CoreEvent| true;
        tokio::spawn(adapt(own, "events", all, tx.clone(), cancel.child_token()));
    }
    loop {
        let due = scopes.next_due();
        let orders = tokio::select! {
            _ = cancel.cancelled() => break,
            seen = pods.recv() => match seen {
                Some(seen) => scopes.on(seen, Instant::now()),
                None => break,
            },
            Some(rs) = scaled.recv() => scopes.on(rs, Instant::now()),
            _ = tokio::time::sleep_until(due.unwrap_or_else(Instant::now).into()), if due.is_some() => {
                scopes.expire(Instant::now())
            }
        };
        for order in orders {
            match order {
                Order::Watch(name) => {
                    let token = cancel.child_token();
                    let stream = events_of(&format!(
                        "involvedObject.kind=Pod,involvedObject.name={name}"
                    ));
                    let all = |_: &CoreEvent| true;
                    tokio::spawn(adapt(stream, "events", all, tx.clone(), token.clone()));
                    watches.insert(name, token);
                }
                Order::WatchReplicaSet(rs) => {
                    // A pod's owner outside the Deployment (a selector that matches more)
                    // is watched too: its Events are about the target's pods.
                    let stream = events_of(&format!(
                        "involvedObject.kind=ReplicaSet,involvedObject.name={rs}"
                    ));
                    let all = |_: &CoreEvent| true;
                    tokio::spawn(adapt(
                        stream,
                        "events",
                        all,
                        tx.clone(),
                        cancel.child_token(),
                    ));
                }
                Order::Stop(name) => {
                    if let Some(token) = watches.remove(&name) {
                        token.cancel();
                    }
                }
                Order::WatchNamespace => {
                    let stream = events_of("involvedObject.kind=Pod");
                    let keep = keep_rx.clone();
                    let kept = move |e: &CoreEvent| {
                        e.involved_object
                            .name
                            .as_ref()
                            .is_some_and(|n| keep.borrow().contains(n))
                    };
                    let token = cancel.child_token();
                    tokio::spawn(adapt(stream, "events", kept, tx.clone(), token));
                }
            }
        }
        if scopes.wide {
            let keep: BTreeSet<String> = scopes
                .seen
                .iter()
                .filter(|n| scopes.wide_keeps(n))
                .cloned()
                .collect();
            keep_tx.send_if_modified(|k| {
                let changed = *k != keep;
                *k = keep;
                changed
            });
        }
    }
    for token in watches.values() {
        token.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(n: &str) -> PodSeen {
        PodSeen::Pod(n.into())
    }

    #[test]
    fn a_replica_set_is_watched_once_from_a_pod_or_a_scaling_event() {
        let t0 = Instant::now();
        let mut s = Scopes::default();
        let rs = |n: &str| PodSeen::ReplicaSet(n.into());
        assert_eq!(
            s.on(rs("ollama-7d4b9c8f6"), t0),
            vec![Order::WatchReplicaSet("ollama-7d4b9c8f6".into())]
        );
        assert_eq!(s.on(rs("ollama-7d4b9c8f6"), t0), vec![], "once");
        assert_eq!(
            scaled_replica_set(
                "ScalingReplicaSet",
                "Scaled up replica set ollama-5f6d7 from 0 to 1"
            ),
            Some("ollama-5f6d7")
        );
        assert_eq!(
            scaled_replica_set(
                "ScalingReplicaSet",
                "Scaled down replica set ollama-1a2b3 to 0"
            ),
            Some("ollama-1a2b3")
        );
        assert_eq!(
            scaled_replica_set("SuccessfulCreate", "Created pod: ollama-x"),
            None
        );
        assert_eq!(
            scaled_replica_set("ScalingReplicaSet", "something else"),
            None
        );
    }

    #[test]
    fn a_pod_gets_one_watch_stopped_a_linger_after_it_is_gone() {
        let t0 = Instant::now();
        let mut s = Scopes::default();
        assert_eq!(s.on(pod("a"), t0), vec![Order::Watch("a".into())]);
        assert_eq!(
            s.on(pod("a"), t0),
            vec![],
            "a change of the pod is no new watch"
        );
        assert_eq!(s.on(PodSeen::Gone("a".into()), t0), vec![]);
        assert_eq!(s.next_due(), Some(t0 + LINGER));
        assert_eq!(s.expire(t0 + LINGER / 2), vec![]);
        assert_eq!(s.expire(t0 + LINGER), vec![Order::Stop("a".into())]);
        assert_eq!(s.next_due(), None);
        assert_eq!(s.on(pod("a"), t0 + LINGER), vec![Order::Watch("a".into())]);
    }

    #[test]
    fn a_pod_back_within_the_linger_keeps_its_watch() {
        let t0 = Instant::now();
        let mut s = Scopes::default();
        s.on(pod("web-0"), t0);
        s.on(PodSeen::Gone("web-0".into()), t0);
        assert_eq!(s.on(pod("web-0"), t0), vec![]);
        assert_eq!(s.expire(t0 + LINGER * 2), vec![]);
    }

    #[test]
    fn a_relist_without_the_pod_is_its_deletion() {
        let t0 = Instant::now();
        let mut s = Scopes::default();
        s.on(pod("a"), t0);
        s.on(pod("b"), t0);
        s.on(PodSeen::Relist, t0);
        s.on(pod("b"), t0);
        s.on(PodSeen::RelistDone, t0);
        assert_eq!(s.expire(t0 + LINGER), vec![Order::Stop("a".into())]);
    }

    #[test]
    fn past_the_limit_one_namespace_watch_keeps_the_other_pods_only() {
        let t0 = Instant::now();
        let mut s = Scopes::default();
        for i in 0..MAX_PER_POD {
            assert_eq!(s.on(pod(&format!("p{i}")), t0).len(), 1);
        }
        assert_eq!(s.on(pod("late"), t0), vec![Order::WatchNamespace]);
        assert_eq!(s.on(pod("later"), t0), vec![], "one namespace watch");
        assert!(s.wide_keeps("late") && s.wide_keeps("later"));
        assert!(!s.wide_keeps("p0"), "p0's own watch has its Events");
        assert!(!s.wide_keeps("ollama-client"), "not a pod of the target");
    }
}
