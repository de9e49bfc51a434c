//! Benchmarks of the core: reducer throughput, and `report` on a generated 1,000,000-event
//! recording. Targets (issue 2): ≥ 2 million events/s through the reducer; report of 1M
//! events in < 1 s.
//!
//! `report_long_session` (issue 36): `report` of one monotonic session, the shipped
//! `recordings/warm-3b-series.jsonl` repeated with shifted times (`fixtures::repeated`), at
//! 100,000 events (about 620 trials) and 1,000,000 (about 6,200). The reducer's work per
//! event must not grow with the trials so far: 1M under 1 s, and 10× the events about 10×
//! the time (the ratio is printed). `reduce_long_session`: the same sessions through the
//! reducer alone, their events already parsed (what a long dashboard session pays).

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use readygap_core::fixtures::*;
use readygap_core::record::jsonl::{self, Header, Recorder};
use readygap_core::state::State;
use std::hint::black_box;

fn reducer(c: &mut Criterion) {
    let events = session(200_000);
    let mut g = c.benchmark_group("reducer");
    g.throughput(Throughput::Elements(events.len() as u64));
    g.sample_size(20);
    g.bench_function("apply_200k_mixed_events", |b| {
        b.iter_batched(
            State::new,
            |mut s| {
                for e in &events {
                    s.apply(e);
                }
                black_box(s.timeline.trials.len())
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn report(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("session-1m.jsonl");
    let events = session(1_000_000);
    let mut rec = Recorder::create(
        &path,
        &Header::new(at(0), "bench", "ns", "deployment/ollama"),
    )
    .expect("create recording");
    for e in &events {
        rec.write(e).expect("write");
    }
    drop(rec);
    drop(events);
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    eprintln!("generated recording: 1,000,000 events, {} MiB", size >> 20);
    let mut g = c.benchmark_group("report");
    g.throughput(Throughput::Elements(1_000_000));
    g.sample_size(10);
    g.bench_function("report_1m_event_recording", |b| {
        b.iter(|| {
            let r = readygap_core::report::report_file(&path).expect("report");
            black_box(r.trials)
        })
    });
    g.finish();
}

/// The events of the shipped `recordings/warm-3b-series.jsonl`, the long sessions' unit.
fn warm_series() -> Vec<readygap_core::event::Event> {
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("recordings")
        .join("warm-3b-series.jsonl");
    jsonl::read(&shipped).expect("the shipped recording").events
}

fn report_long_session(c: &mut Criterion) {
    let recorded = warm_series();
    let dir = tempfile::tempdir().expect("temp dir");
    let mut g = c.benchmark_group("report_long_session");
    g.sample_size(10);
    let mut took = Vec::new();
    for n in [100_000, 1_000_000] {
        let path = dir.path().join(format!("warm-3b-series-x{n}.jsonl"));
        let mut rec = Recorder::create(
            &path,
            &Header::new(at(0), "bench", "ns", "deployment/ollama"),
        )
        .expect("create recording");
        for e in &repeated(&recorded, n) {
            rec.write(e).expect("write");
        }
        drop(rec);
        let run = || readygap_core::report::report_file(&path).expect("report");
        let t = std::time::Instant::now();
        let trials = run().trials;
        took.push(t.elapsed().as_secs_f64());
        eprintln!(
            "{n} events, {trials} trials: report once in {:.3} s",
            took[took.len() - 1]
        );
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(format!("report_{n}_events"), |b| {
            b.iter(|| black_box(run().trials))
        });
    }
    g.finish();
    eprintln!(
        "report time 1M / 100k events: {:.1} (work per event independent of the session: ~10)",
        took[1] / took[0]
    );
}

/// The reducer alone over the same long session, its events already in memory: what a
/// day-long dashboard pays per event (issue 36: 1M events under 1 s, 1M / 100k near 10).
fn reduce_long_session(c: &mut Criterion) {
    let recorded = warm_series();
    let mut g = c.benchmark_group("reduce_long_session");
    g.sample_size(10);
    let mut took = Vec::new();
    for n in [100_000, 1_000_000] {
        let events = repeated(&recorded, n);
        let reduce = || {
            let mut s = State::new();
            for e in &events {
                s.apply(e);
            }
            s.timeline.trials.len()
        };
        let t = std::time::Instant::now();
        let trials = reduce();
        took.push(t.elapsed().as_secs_f64());
        eprintln!(
            "{n} events, {trials} trials: reduced once in {:.3} s",
            took[took.len() - 1]
        );
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(format!("reduce_{n}_events"), |b| {
            b.iter(|| black_box(reduce()))
        });
    }
    g.finish();
    eprintln!(
        "reduce time 1M / 100k events: {:.1} (work per event independent of the session: ~10)",
        took[1] / took[0]
    );
}

criterion_group!(
    benches,
    reducer,
    report,
    report_long_session,
    reduce_long_session
);
criterion_main!(benches);
