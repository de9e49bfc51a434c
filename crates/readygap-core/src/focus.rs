//! Focus: the one rule for "which pod" (and so which node) readygap is looking at. The
//! panels show it, `d`/`t`/`i`/`u` act on it, the runner replaces it, and the node host feed
//! samples its node. Pure: a function of the state and the user's choice (`p`).

use crate::event::PodView;
use crate::state::State;

/// The focused pod: the one the user chose, while it still exists (as a pod, or as memory
/// samples of a pod that is gone); else the newest Ready pod that is not terminating; else
/// the newest pod that is not terminating; else the pod with the latest memory sample.
pub fn pod(state: &State, chosen: Option<&str>) -> Option<String> {
    if let Some(p) = chosen
        && (state.pods.contains_key(p) || state.memory.contains_key(p))
    {
        return Some(p.to_string());
    }
    let live = state
        .pods
        .values()
        .filter(|p| p.deletion_timestamp.is_none())
        .max_by_key(|p| (p.is_ready(), p.created, p.name.clone()));
    live.map(|p| p.name.clone()).or_else(|| {
        state
            .memory
            .iter()
            .max_by_key(|(_, m)| m.series.points().next_back().map(|p| p.ts))
            .map(|(k, _)| k.clone())
    })
}

/// The focused pod as a pod that exists and is not terminating: the one a trial replaces
/// and actions are sent to.
pub fn live_pod<'a>(state: &'a State, chosen: Option<&str>) -> Option<&'a PodView> {
    let name = pod(state, chosen)?;
    state
        .pods
        .get(&name)
        .filter(|p| p.deletion_timestamp.is_none())
}

/// The node to sample: the chosen pod's node, else the focused pod's node while that pod is
/// Ready. `None` means "keep the node selected before" (sticky: while no pod is Ready, during
/// a replacement, the node stays, so a trial does not restart the node's sampler).
pub fn node(state: &State, chosen: Option<&str>) -> Option<String> {
    let name = pod(state, chosen)?;
    let p = state.pods.get(&name)?;
    (chosen == Some(name.as_str()) || p.is_ready())
        .then(|| p.node.clone())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, EventKind, PodCondition, Source};

    fn pod_ev(name: &str, node: &str, ready: bool, created_s: i64, deleting: bool) -> Event {
        let at = |s| chrono::DateTime::from_timestamp(1_800_000_000 + s, 0);
        Event::new(
            at(created_s).unwrap(),
            Source::Kube,
            EventKind::PodApplied(PodView {
                name: name.into(),
                uid: format!("uid-{name}"),
                node: Some(node.into()),
                created: at(created_s),
                deletion_timestamp: if deleting { at(created_s) } else { None },
                conditions: vec![PodCondition {
                    type_: "Ready".into(),
                    status: ready,
                    ..Default::default()
                }],
                ..Default::default()
            }),
        )
    }

    #[test]
    fn the_choice_wins_then_the_newest_ready_pod() {
        let s = State::from_events(&[
            pod_ev("a", "n1", true, 0, false),
            pod_ev("b", "n2", true, 10, false),
            pod_ev("c", "n3", false, 20, false),
            pod_ev("d", "n4", true, 30, true),
        ]);
        assert_eq!(pod(&s, None).as_deref(), Some("b"), "newest Ready, live");
        assert_eq!(node(&s, None).as_deref(), Some("n2"));
        assert_eq!(pod(&s, Some("a")).as_deref(), Some("a"), "the choice");
        assert_eq!(node(&s, Some("a")).as_deref(), Some("n1"));
        assert_eq!(
            pod(&s, Some("gone")).as_deref(),
            Some("b"),
            "a choice that is gone"
        );
        // A chosen pod that is terminating is still shown, but is no pod to act on.
        assert_eq!(pod(&s, Some("d")).as_deref(), Some("d"));
        assert!(live_pod(&s, Some("d")).is_none());
        assert_eq!(live_pod(&s, Some("a")).map(|p| p.name.as_str()), Some("a"));
    }

    #[test]
    fn without_a_ready_pod_the_newest_live_one() {
        let s = State::from_events(&[
            pod_ev("a", "n1", false, 0, false),
            pod_ev("b", "n2", false, 10, false),
            pod_ev("c", "n3", true, 20, true),
        ]);
        assert_eq!(pod(&s, None).as_deref(), Some("b"));
        assert!(pod(&State::new(), None).is_none());
        assert_eq!(
            node(&s, None),
            None,
            "no Ready pod: keep the node selected before"
        );
        assert_eq!(node(&s, Some("a")).as_deref(), Some("n1"), "unless chosen");
    }
}
