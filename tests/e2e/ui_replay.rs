//! Replay pacing: events are never sent before their recorded offset divided by the speed (and
//! the whole replay is not much longer than that: a generous bound for a loaded machine),
//! `max` sends without waiting, feeding stops when the dashboard is gone; speeds parse; a bad
//! recording is an error naming the file.

use crate::ui_support::*;
use clap::Parser;
use readygap::cli::{Cli, Command};
use readygap::commands::replay;
use readygap::ui::app::DashboardOptions;
use readygap_core::replay::{ReplayOptions, Speed};
use tokio::sync::mpsc;
use tokio::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_arrive_at_recorded_pace_times_speed() {
    let events = until(AFTER_T4);
    let first = events[0].ts;
    for speed in [40.0, 20.0] {
        let (tx, mut rx) = mpsc::channel(8);
        let start = Instant::now();
        let feeder = tokio::spawn(replay::feed(events.clone(), Speed::Factor(speed), tx));
        let mut n = 0;
        while let Some(ev) = rx.recv().await {
            let due = (ev.ts - first).num_microseconds().unwrap_or(0) as f64 / 1e6 / speed;
            let got = start.elapsed().as_secs_f64();
            assert!(got + 1e-6 >= due, "event {n} early: {got} < {due}");
            assert_eq!(ev, events[n]);
            n += 1;
        }
        assert_eq!(n, events.len());
        assert_eq!(feeder.await.expect("feeder"), events.len());
        let span = (events[n - 1].ts - first).num_milliseconds() as f64 / 1000.0;
        let took = start.elapsed().as_secs_f64();
        assert!(
            took >= span / speed && took < span / speed + 10.0,
            "{took} s for {span} s at ×{speed}"
        );
    }
}

#[tokio::test]
async fn max_speed_does_not_wait_and_feeding_stops_without_a_reader() {
    let events = until(AFTER_OOM);
    let (tx, mut rx) = mpsc::channel(events.len());
    // 30 s of events at max speed into a channel that holds them all: done without a timer
    // (a timeout far below the recorded 30 s proves no pacing happened).
    let sent = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        replay::feed(events.clone(), Speed::Max, tx),
    )
    .await
    .expect("max speed does not pace");
    assert_eq!(sent, events.len());
    assert_eq!(rx.recv().await.as_ref(), events.first());

    let (tx, rx) = mpsc::channel(1);
    drop(rx);
    assert_eq!(replay::feed(events, Speed::Factor(1.0), tx).await, 0);
}

#[test]
fn speeds_parse() {
    assert_eq!("max".parse::<Speed>(), Ok(Speed::Max));
    assert_eq!("0".parse::<Speed>(), Ok(Speed::Max));
    assert_eq!("2".parse::<Speed>(), Ok(Speed::Factor(2.0)));
    assert_eq!("0.5x".parse::<Speed>(), Ok(Speed::Factor(0.5)));
    for bad in ["-1", "fast", "inf", "NaN", ""] {
        assert!(bad.parse::<Speed>().is_err(), "{bad:?}");
    }
    let cli = Cli::try_parse_from([
        "readygap", "replay", "r.jsonl", "--speed", "max", "--theme", "light",
    ])
    .expect("replay parses");
    match cli.command.expect("a subcommand") {
        Command::Replay(r) => {
            assert_eq!(r.file.to_str(), Some("r.jsonl"));
            assert_eq!(r.speed, Speed::Max);
            assert_eq!(r.theme.as_deref(), Some("light"));
        }
        other => panic!("parsed as {other:?}"),
    }
    assert!(Cli::try_parse_from(["readygap", "replay", "r.jsonl", "--speed", "-3"]).is_err());
}

fn max() -> ReplayOptions {
    ReplayOptions {
        speed: Speed::Max,
        ..Default::default()
    }
}

#[test]
fn bad_recordings_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing.jsonl");
    let err = replay::run(&missing, &max(), DashboardOptions::default()).expect_err("missing file");
    assert!(format!("{err:#}").contains("missing.jsonl"));
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "not json\n").expect("write");
    let err = replay::run(&bad, &max(), DashboardOptions::default()).expect_err("not a recording");
    let msg = format!("{err:#}");
    assert!(msg.contains("bad.jsonl:1"), "{msg}");
}
