//! The session pump: events pass through in order; recording switched on mid-session writes a
//! file that starts with a snapshot and replays to the same pods, endpoints and memory.

use readygap_core::fixtures::*;
use readygap_core::record::jsonl::{self, Header};
use readygap_core::state::State;
use readygap_live::session::{Pump, RecordControl, RecordStatus};
use tokio::sync::{mpsc, oneshot};

#[tokio::test]
async fn recording_started_mid_session_replays_to_the_same_facts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mid.jsonl");
    let (in_tx, in_rx) = mpsc::channel(64);
    let (out_tx, mut out_rx) = mpsc::channel(64);
    let (ctl_tx, ctl_rx) = mpsc::channel(4);
    let (st_tx, mut st_rx) = mpsc::unbounded_channel();
    let pump = tokio::spawn(
        Pump {
            input: in_rx,
            output: out_tx,
            control: ctl_rx,
            status: st_tx,
            header: Header::new(at(0), "lab", "llm-recovery-lab", "deployment/ollama"),
            record_to: None,
            redact: false,
        }
        .run(),
    );
    let events = full_trial(0, 1, ("ollama-a", "uid-a"), ("ollama-b", "uid-b"));
    let (before, after) = events.split_at(7);
    let mut live = State::new();
    for e in before {
        in_tx.send(e.clone()).await.unwrap();
        let got = out_rx.recv().await.unwrap();
        assert_eq!(&got, e, "events pass through unchanged and in order");
        live.apply(&got);
    }
    let (reply_tx, reply_rx) = oneshot::channel();
    ctl_tx
        .send(RecordControl::Start {
            path: path.clone(),
            reply: Some(reply_tx),
        })
        .await
        .unwrap();
    assert_eq!(reply_rx.await.unwrap(), Ok(path.clone()));
    for e in after {
        in_tx.send(e.clone()).await.unwrap();
        live.apply(&out_rx.recv().await.unwrap());
    }
    ctl_tx.send(RecordControl::Stop).await.unwrap();
    drop(in_tx);
    pump.await.unwrap();
    let mut statuses = Vec::new();
    while let Ok(s) = st_rx.try_recv() {
        statuses.push(s);
    }
    assert_eq!(statuses[0], RecordStatus::Recording(path.clone()));
    assert!(
        matches!(&statuses[1], RecordStatus::Stopped { events, .. } if *events as usize > after.len())
    );

    let rec = jsonl::read(&path).unwrap();
    let replayed = State::from_events(&rec.events);
    assert_eq!(replayed.pods, live.pods);
    assert_eq!(replayed.slices, live.slices);
    assert_eq!(
        replayed.memory.get("ollama-b").map(|m| m.peak),
        live.memory.get("ollama-b").map(|m| m.peak)
    );
    assert_eq!(replayed.session, live.session);
}

#[tokio::test]
async fn an_unwritable_path_is_reported_and_the_session_goes_on() {
    let (in_tx, in_rx) = mpsc::channel(4);
    let (out_tx, mut out_rx) = mpsc::channel(4);
    let (_ctl_tx, ctl_rx) = mpsc::channel(1);
    let (st_tx, mut st_rx) = mpsc::unbounded_channel();
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "x").unwrap();
    let pump = tokio::spawn(
        Pump {
            input: in_rx,
            output: out_tx,
            control: ctl_rx,
            status: st_tx,
            header: Header::new(at(0), "lab", "ns", "t"),
            record_to: Some(blocker.join("sub/r.jsonl")),
            redact: false,
        }
        .run(),
    );
    let e = probe(5, "ollama-a", true);
    in_tx.send(e.clone()).await.unwrap();
    assert_eq!(out_rx.recv().await.unwrap(), e);
    drop(in_tx);
    pump.await.unwrap();
    let s = st_rx.try_recv().unwrap();
    assert!(
        matches!(&s, RecordStatus::Failed(m) if m.contains("sub/r.jsonl")),
        "{s:?}"
    );
}
