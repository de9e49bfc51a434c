//! Benchmarks of the core: reducer throughput, and `report` on a generated 1,000,000-event
//! recording. Targets (issue 2): ≥ 2 million events/s through the reducer; report of 1M
//! events in < 1 s.

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use readygap_core::fixtures::*;
use readygap_core::record::jsonl::{Header, Recorder};
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

criterion_group!(benches, reducer, report);
criterion_main!(benches);
