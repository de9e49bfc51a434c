//! The Kubernetes Events of the target's pods as a person reads them (`kubectl describe pod`,
//! "events at the bottom"): one row per object, reason and message, with how many times it
//! happened and when last, newest first; the Events that explain a trial's state (a probe
//! failed, a container killed, a pod that cannot be scheduled or mounted) first while they
//! belong to the latest trial, the most telling reason first.

use crate::event::{KubeEventView, Timestamp};
use crate::timeline::{Replacement, Trial};
use std::collections::{BTreeMap, VecDeque};

/// The reasons that explain why a replacement is not Ready or not serving: the scheduler's
/// `FailedScheduling`, the kubelet's `Unhealthy` (a probe failed, with its output), `Killing`,
/// `BackOff`, `FailedMount`, `Evicted`, the node's `OOMKilling`, and the ReplicaSet
/// controller's `FailedCreate` (no pod at all: a quota, an admission webhook; kubernetes
/// `pkg/controller/replicaset/replica_set.go`, "Error creating: …").
pub const EXPLAINING: [&str; 8] = [
    "FailedScheduling",
    "FailedCreate",
    "Unhealthy",
    "Killing",
    "BackOff",
    "OOMKilling",
    "FailedMount",
    "Evicted",
];

/// Whether an Event of this reason and message explains a trial's state: an [`EXPLAINING`]
/// reason, except the kubelet's `Killing` of an ordinary stop ("Stopping container X", a
/// delete's; kubernetes `pkg/kubelet/kuberuntime/kuberuntime_container.go`), which is not a
/// failure — its kills for a failed probe are ("Container X failed liveness probe, will be
/// restarted").
pub fn explaining(reason: &str, message: &str) -> bool {
    EXPLAINING.contains(&reason) && !(reason == "Killing" && message.starts_with("Stopping"))
}

/// One row: an object's Event reason and message, how often and when last.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    /// When it last happened (the Event's own clock).
    pub last: Timestamp,
    pub object: String,
    pub reason: String,
    pub message: String,
    pub warning: bool,
    /// Times it happened: each Event object's own count (its latest), summed over the
    /// objects that say the same.
    pub count: u32,
    /// It explains the latest trial's state: an [`EXPLAINING`] reason at or after `since`
    /// (less a second: Event times may have whole seconds).
    pub explains: bool,
}

/// The rows of `events` (as `State::kube_events` keeps them: the time each happened), newest
/// first, those that explain the trial since `since` (its T0) before the others, in the
/// order of [`EXPLAINING`].
pub fn rows(
    events: &VecDeque<(Timestamp, KubeEventView)>,
    since: Option<Timestamp>,
) -> Vec<EventRow> {
    // (object, reason, message) → (last time, warning, Event name → its latest count).
    type Key = (String, String, String);
    let mut groups: BTreeMap<Key, (Timestamp, bool, BTreeMap<String, u32>)> = BTreeMap::new();
    for (i, (ts, e)) in events.iter().enumerate() {
        let key = (e.object.clone(), e.reason.clone(), e.message.clone());
        let g = groups
            .entry(key)
            .or_insert_with(|| (*ts, false, BTreeMap::new()));
        g.0 = g.0.max(*ts);
        g.1 |= e.type_ == "Warning";
        // An Event without a name (an old recording) counts once per sighting.
        let name = if e.name.is_empty() {
            format!("#{i}")
        } else {
            e.name.clone()
        };
        let c = g.2.entry(name).or_insert(0);
        *c = (*c).max(e.count.unwrap_or(1));
    }
    let mut out: Vec<EventRow> = groups
        .into_iter()
        .map(|((object, reason, message), (last, warning, counts))| {
            // core/v1 Event times (`lastTimestamp`) have whole seconds: one that happened
            // just after T0 can read up to a second before it.
            let explains = explaining(&reason, &message)
                && since.is_some_and(|s| last >= s - chrono::Duration::seconds(1));
            EventRow {
                last,
                object,
                reason,
                message,
                warning,
                count: counts.values().sum(),
                explains,
            }
        })
        .collect();
    // Explaining rows in the order of EXPLAINING (a probe's output before the kill it caused
    // and the back-off after it), a failed liveness or startup probe (which kills) before a
    // failed readiness probe (which a kill brings about: the runtime is gone), each newest
    // first; then the others, newest first. On 80×24 only the first few rows show.
    let rank = |r: &EventRow| {
        let reason = r
            .explains
            .then(|| EXPLAINING.iter().position(|x| *x == r.reason))
            .flatten()
            .unwrap_or(EXPLAINING.len());
        (
            reason,
            r.explains && r.message.starts_with("Readiness probe failed"),
        )
    };
    out.sort_by(|a, b| rank(a).cmp(&rank(b)).then(b.last.cmp(&a.last)));
    out
}

/// The rows of one trial: the Events about its pods (the ones it replaces, its new pod, the
/// candidates it observed) from a second before its T0 up to the next trial's T0, the
/// explaining ones first. `events` are (the time each happened, the Event).
pub fn of_trial<'a>(
    trial: &Trial,
    next_t0: Option<Timestamp>,
    events: impl IntoIterator<Item = &'a (Timestamp, KubeEventView)>,
) -> Vec<EventRow> {
    let Some(t0) = trial.marks.t0 else {
        return Vec::new();
    };
    let mut pods: Vec<&str> = trial.observed.keys().map(String::as_str).collect();
    pods.extend(trial.new_pod.as_deref());
    match &trial.replacement {
        Replacement::Pods { names, .. } => pods.extend(names.iter().map(String::as_str)),
        Replacement::Restart { name, .. } => pods.push(name),
    }
    let from = t0 - chrono::Duration::seconds(1);
    let mine: VecDeque<(Timestamp, KubeEventView)> = events
        .into_iter()
        .filter(|(ts, e)| {
            *ts >= from
                && next_t0.is_none_or(|n| *ts < n)
                && e.object
                    .strip_prefix("pod/")
                    .is_some_and(|p| pods.contains(&p))
        })
        .cloned()
        .collect();
    rows(&mine, Some(t0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(s: i64) -> Timestamp {
        chrono::Utc.timestamp_opt(1_800_000_000 + s, 0).unwrap()
    }

    fn ev(
        s: i64,
        name: &str,
        reason: &str,
        message: &str,
        count: Option<u32>,
    ) -> (Timestamp, KubeEventView) {
        (
            at(s),
            KubeEventView {
                object: "pod/ollama-b".into(),
                reason: reason.into(),
                message: message.into(),
                type_: if reason == "Unhealthy" {
                    "Warning"
                } else {
                    "Normal"
                }
                .into(),
                name: name.into(),
                count,
                time: Some(at(s)),
            },
        )
    }

    #[test]
    fn repeats_are_one_row_with_their_count_and_explaining_ones_come_first() {
        let failed = "Liveness probe failed: curl: (7) Failed to connect";
        let events: VecDeque<_> = [
            ev(
                0,
                "a.1",
                "Scheduled",
                "Successfully assigned llm/ollama-b to node",
                None,
            ),
            // The real kubelet updates one Event: count 1, 2, 3.
            ev(10, "a.2", "Unhealthy", failed, Some(1)),
            ev(15, "a.2", "Unhealthy", failed, Some(2)),
            ev(20, "a.2", "Unhealthy", failed, Some(3)),
            // The lab writes one Event per occurrence.
            ev(
                21,
                "a.3",
                "Pulled",
                "Container image already present",
                Some(1),
            ),
            ev(
                31,
                "a.4",
                "Pulled",
                "Container image already present",
                Some(1),
            ),
        ]
        .into();
        let mut with_kill = events.clone();
        with_kill.push_back(ev(
            22,
            "a.5",
            "Killing",
            "Container ollama failed liveness probe, will be restarted",
            Some(1),
        ));
        let r = rows(&with_kill, Some(at(5)));
        assert_eq!(
            r.iter().map(|r| r.reason.as_str()).collect::<Vec<_>>(),
            ["Unhealthy", "Killing", "Pulled", "Scheduled"],
            "the probe's output before the newer kill it caused"
        );
        // A readiness failure after the kill (the runtime is gone) comes after the liveness
        // failure that killed, though newer: on 80×24 only the first rows show.
        let mut after_kill = with_kill.clone();
        for (s, name, message) in [
            (
                23,
                "a.6",
                "Readiness probe failed: Get \"http://10.0.0.9:11434/api/tags\": EOF",
            ),
            (
                24,
                "a.7",
                "Readiness probe failed: dial tcp 10.0.0.9:11434: connect: connection refused",
            ),
        ] {
            after_kill.push_back(ev(s, name, "Unhealthy", message, Some(1)));
        }
        let r = rows(&after_kill, Some(at(5)));
        let heads: Vec<&str> = r.iter().take(3).map(|r| &r.message[..10]).collect();
        assert_eq!(heads, ["Liveness p", "Readiness ", "Readiness "], "{r:?}");
        assert!(r[1].last > r[2].last, "readiness failures newest first");
        let r = rows(&events, Some(at(5)));
        assert_eq!(r.len(), 3, "{r:?}");
        assert_eq!((r[0].reason.as_str(), r[0].count), ("Unhealthy", 3));
        assert!(r[0].explains && r[0].warning);
        assert_eq!(r[0].last, at(20));
        assert_eq!(
            (r[1].reason.as_str(), r[1].count),
            ("Pulled", 2),
            "newest next"
        );
        assert_eq!(r[2].reason, "Scheduled");
        // Before the trial (since after them): only newest first.
        let r = rows(&events, Some(at(25)));
        assert!(!r.iter().any(|r| r.explains));
        assert_eq!(r[0].reason, "Pulled");
    }
}
