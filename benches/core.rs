//! Benchmarks of the core: reducer throughput, and `report` on a generated 1,000,000-event
//! recording. Targets (issue 2): ≥ 2 million events/s through the reducer; report of 1M
//! events in < 1 s.

#[path = "../tests/common/mod.rs"]
mod common;

use common::*;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use readygap::core::event::*;
use readygap::core::state::State;
use readygap::record::jsonl::{Header, Recorder};
use std::hint::black_box;

/// A long session: a trial every 30 s, with memory, residency and probe samples at 4 Hz and a
/// host sample every 2 s, as the live sources produce them.
fn session(n: usize) -> Vec<Event> {
    let mut out = Vec::with_capacity(n + 64);
    let mut block = 0i64;
    out.push(applied(-1, pod("ollama-0", "uid-0", Stage::Ready, -1)));
    while out.len() < n {
        let t = block * 30_000;
        let old = format!("ollama-{block}");
        let new = format!("ollama-{}", block + 1);
        let (old_uid, new_uid) = (format!("uid-{block}"), format!("uid-{}", block + 1));
        let mut trial = full_trial(t, block as u64 + 1, (&old, &old_uid), (&new, &new_uid));
        trial.push(ev(
            t + 9_000,
            Source::Kube,
            EventKind::PodDeleted(pod(&old, &old_uid, Stage::Ready, t)),
        ));
        let mut samples = Vec::with_capacity(400);
        for k in 0..120i64 {
            let ms = t + k * 250;
            samples.push(memory(ms, &new, 14 << 20 | (k as u64) << 24));
            samples.push(probe(ms + 5, &new, k > 10));
            samples.push(ev(
                ms + 7,
                Source::Runtime,
                EventKind::Residency {
                    pod: new.clone(),
                    models: vec![ResidentModel {
                        name: "llama3.2:3b".into(),
                        size: 2_900_000_000,
                        size_vram: 0,
                        expires_at: Some(at(ms + 300_000)),
                    }],
                },
            ));
            if k % 8 == 0 {
                samples.push(ev(
                    ms + 9,
                    Source::Host,
                    EventKind::HostSample(HostSample {
                        node: None,
                        cpu_percent: 12.5,
                        mem_total: 24 << 30,
                        mem_available: 20 << 30,
                        cached: 3 << 30,
                    }),
                ));
            }
        }
        // Merge by time, as a channel would deliver them.
        trial.extend(samples);
        trial.sort_by_key(|e| e.ts);
        out.extend(trial);
        block += 1;
    }
    out.truncate(n);
    out
}

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
            let r = readygap::report::report_file(&path).expect("report");
            black_box(r.trials)
        })
    });
    g.finish();
}

criterion_group!(benches, reducer, report);
criterion_main!(benches);
