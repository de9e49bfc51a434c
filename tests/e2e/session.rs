//! The session's recording: switched on mid-session, it writes a file that starts with a
//! snapshot and replays to the same pods, endpoints and memory; a path that cannot be
//! written is a status, not an error that ends the session.

use readygap_core::fixtures::*;
use readygap_core::record::jsonl::{self, Header};
use readygap_core::state::State;
use readygap_live::session::{RecordStatus, Recording};

#[test]
fn recording_started_mid_session_replays_to_the_same_facts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mid.jsonl");
    let mut rec = Recording::new(
        Header::new(at(0), "lab", "llm-recovery-lab", "deployment/ollama"),
        false,
    );
    let events = full_trial(0, 1, ("ollama-a", "uid-a"), ("ollama-b", "uid-b"));
    let (before, after) = events.split_at(7);
    let mut live = State::new();
    for e in before {
        live.apply(e);
        assert_eq!(rec.write(e), None, "not recording: nothing written");
    }
    let ts = live.now.unwrap();
    assert_eq!(
        rec.start(&live, &path, ts),
        vec![RecordStatus::Recording(path.clone())]
    );
    assert_eq!(rec.path(), Some(path.as_path()));
    for e in after {
        live.apply(e);
        assert_eq!(rec.write(e), None);
    }
    let stopped = rec.stop();
    assert!(
        matches!(&stopped, Some(RecordStatus::Stopped { events, .. }) if *events as usize > after.len()),
        "{stopped:?}"
    );
    assert_eq!(rec.stop(), None, "stopped once");

    let file = jsonl::read(&path).unwrap();
    let replayed = State::from_events(&file.events);
    assert_eq!(replayed.pods, live.pods);
    assert_eq!(replayed.slices, live.slices);
    assert_eq!(
        replayed.memory.get("ollama-b").map(|m| m.peak),
        live.memory.get("ollama-b").map(|m| m.peak)
    );
    assert_eq!(replayed.session, live.session);
}

#[test]
fn an_unwritable_path_is_reported_and_the_session_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "x").unwrap();
    let mut rec = Recording::new(Header::new(at(0), "lab", "ns", "t"), false);
    let s = rec.start(&State::new(), &blocker.join("sub/r.jsonl"), at(0));
    assert!(
        matches!(&s[..], [RecordStatus::Failed(m)] if m.contains("sub/r.jsonl")),
        "{s:?}"
    );
    assert_eq!(rec.path(), None);
    assert_eq!(rec.write(&probe(5, "ollama-a", true)), None);
}
