//! Replay benchmarks on a generated 1-hour recording (`session`: a trial every 30 s with 4 Hz
//! memory, probe and residency samples, about 47,000 events):
//! - `replay/hour_at_x100`: the whole hour replayed at ×100 on a virtual wall clock (no
//!   sleeping): the controller's due events every frame of 33 ms, reduced into the store the
//!   dashboard reads, and one
//!   frame drawn at 200×60 through a `TestBackend` terminal when something changed (at most
//!   30 frames/s, as the real loop). Throughput is in recorded seconds; the work per recorded
//!   second must stay under 10 ms (at ×100 a wall second replays 100 recorded seconds, so
//!   that is the whole second of one core).
//! - `replay/index_build`: `ReplayIndex::new` on the hour (done once, before the dashboard).
//! - `replay/seek_middle`: a seek to the middle: `state_after(n/2)` (snapshot clone plus at
//!   most 5,000 events), and the controller's `End` (the state after every event).

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use readygap::commands::replay::publish;
use readygap::ui::app::{Dashboard, DashboardOptions, FRAME};
use readygap::ui::intent::ReplayCommand;
use readygap_core::event::Event;
use readygap_core::record::index::ReplayIndex;
use readygap_core::replay::{ReplayOptions, Replayer, Speed};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// About one hour of a session.
fn hour() -> Vec<Event> {
    let mut events = readygap_core::fixtures::session(48_000);
    let start = events[0].ts;
    events.retain(|e| (e.ts - start).num_seconds() < 3_600);
    events
}

/// Replay everything from the start at the replayer's speed on a virtual clock; returns the
/// frames drawn.
fn replay_all(r: &mut Replayer, term: &mut Terminal<TestBackend>) -> usize {
    let store = readygap_live::store::Store::new();
    let mut dash = Dashboard::new(
        &DashboardOptions {
            read_only: true,
            mode_label: "replay".into(),
            ..DashboardOptions::default()
        },
        store.reader(),
    );
    let mut now = Instant::now();
    let mut frames = 0;
    publish(&store, r.command(ReplayCommand::Start, now));
    let mut changed = dash.changed();
    while !r.ended() {
        now += FRAME;
        let steps = r.advance(now, usize::MAX);
        if !steps.is_empty() {
            publish(&store, steps);
            changed |= dash.changed();
        }
        if changed {
            dash.draw(term).expect("draw");
            frames += 1;
            changed = false;
        }
    }
    frames
}

fn bench(c: &mut Criterion) {
    let events = hour();
    let span = (events[events.len() - 1].ts - events[0].ts).num_milliseconds() as f64 / 1000.0;
    eprintln!("recording: {} events over {span:.0} s", events.len());

    let mut g = c.benchmark_group("replay");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(20));
    g.throughput(Throughput::Elements(events.len() as u64));
    g.bench_function("index_build", |b| {
        b.iter_batched(
            || events.clone(),
            |ev| black_box(ReplayIndex::new(ev).marks().len()),
            BatchSize::LargeInput,
        )
    });

    let opts = ReplayOptions {
        speed: Speed::Factor(100.0),
        ..Default::default()
    };
    let mut r =
        Replayer::new(ReplayIndex::new(events.clone()), &opts, Instant::now()).expect("replayer");
    let middle = events.len() / 2;
    g.throughput(Throughput::Elements(1));
    g.bench_function("seek_middle", |b| {
        b.iter(|| black_box(r.index().state_after(middle).events_applied))
    });
    g.bench_function("seek_end_command", |b| {
        b.iter(|| black_box(r.command(ReplayCommand::End, Instant::now()).len()))
    });

    let mut term = Terminal::new(TestBackend::new(200, 60)).expect("terminal");
    // One run outside criterion for the headline figures.
    let t = Instant::now();
    let frames = replay_all(&mut r, &mut term);
    let took = t.elapsed();
    eprintln!(
        "hour at ×100: {frames} frames, {:.1} ms of work for {span:.0} recorded s = {:.3} ms per \
         recorded second (target < 10 ms)",
        took.as_secs_f64() * 1e3,
        took.as_secs_f64() * 1e3 / span
    );
    g.throughput(Throughput::Elements(span as u64));
    g.bench_function("hour_at_x100", |b| {
        b.iter(|| black_box(replay_all(&mut r, &mut term)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
