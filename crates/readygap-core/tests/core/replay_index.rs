//! Seeking through a replay index gives exactly the state of a full replay up to that point.

use readygap_core::fixtures::*;
use readygap_core::record::index::ReplayIndex;
use readygap_core::state::State;

fn long_session() -> Vec<readygap_core::event::Event> {
    let mut events = vec![applied(-1, pod("ollama-0", "uid-0", Stage::Ready, -1))];
    for i in 0..40i64 {
        let t = i * 30_000;
        let (old, new) = (format!("ollama-{i}"), format!("ollama-{}", i + 1));
        let (ou, nu) = (format!("uid-{i}"), format!("uid-{}", i + 1));
        events.extend(full_trial(t, i as u64 + 1, (&old, &ou), (&new, &nu)));
        for k in 0..400 {
            events.push(memory(t + 9_000 + k * 50, &new, 1_000_000 + k as u64));
        }
    }
    events
}

#[test]
fn state_at_any_position_equals_a_full_replay() {
    let events = long_session();
    let index = ReplayIndex::new(events.clone());
    for n in [0, 1, 4_999, 5_000, 5_001, 9_876, events.len()] {
        let direct = State::from_events(&events[..n]);
        assert_eq!(index.state_after(n), direct, "after {n} events");
    }
}

#[test]
fn marks_navigate_in_order() {
    let index = ReplayIndex::new(long_session());
    assert_eq!(index.marks().len(), 40 * 5);
    let first = &index.marks()[0];
    assert_eq!(first.label(), "trial 1 T0 replacement requested");
    let next = index.next_mark(first.ts).unwrap();
    assert_eq!(next.label(), "trial 1 T1 Ready");
    assert_eq!(index.prev_mark(next.ts).unwrap().ts, first.ts);
    let t3 = index.next_trial(first.ts).unwrap();
    assert_eq!((t3.trial, t3.which), (2, 0));
    assert_eq!(index.prev_trial(t3.ts).unwrap().trial, 1);
    assert_eq!(index.trial_start(7).unwrap().ts, at(6 * 30_000));
    assert!(index.position_at(at(30_000)) > index.position_at(at(29_999)));
}
