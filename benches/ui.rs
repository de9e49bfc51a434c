//! Dashboard benchmarks. Criterion: one frame at 200×60 of a state holding one hour of 4 Hz
//! memory samples, host samples, endpoint changes and a trial every 5 minutes (target < 2 ms),
//! rendered into a buffer and drawn through a `TestBackend` terminal (with its diff).
//! Then an idle-CPU measurement: the real event loop with no events and no keys for
//! `READYGAP_IDLE_SECS` seconds (default 5), and with 4 Hz memory events, CPU time from
//! /proc/self/stat (target idle < 2 % of one core). Last, event → frame: a pod's Ready
//! event reduced into the store the real loop reads (as the runner reduces it), and the wall time until a flushed frame shows
//! `True` on that pod's row (a `TestBackend` that checks each flushed frame; target: within
//! one frame, 33 ms, plus the frame's own drawing).

use criterion::{Criterion, criterion_group};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use readygap::ui::app::{DashboardOptions, run_loop};
use readygap::ui::theme::Theme;
use readygap::ui::view::ViewState;
use readygap_core::event::*;
use readygap_core::fixtures::*;
use readygap_core::state::State;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// One hour of a live session.
fn hour() -> Vec<Event> {
    let mut out = Vec::new();
    out.push(applied(-1, pod("ollama-0", "uid-0", Stage::Ready, -1)));
    let mut current = "ollama-0".to_string();
    for block in 0..12i64 {
        let t = block * 300_000 + 60_000;
        let old = current.clone();
        let new = format!("ollama-{}", block + 1);
        out.extend(full_trial(
            t,
            block as u64 + 1,
            (&old, &format!("uid-{block}")),
            (&new, &format!("uid-{}", block + 1)),
        ));
        out.push(ev(
            t + 9_000,
            Source::Kube,
            EventKind::PodDeleted(pod(&old, &format!("uid-{block}"), Stage::Ready, t)),
        ));
        for (k, ready) in [(0, true), (20, false), (1_800, true)] {
            out.push(ev(
                t + k,
                Source::Kube,
                EventKind::EndpointSliceApplied(EndpointSliceView {
                    name: "ollama-abc".into(),
                    service: Some("ollama".into()),
                    endpoints: vec![EndpointView {
                        pod: Some(new.clone()),
                        ready,
                        serving: ready,
                        terminating: !ready,
                        ..Default::default()
                    }],
                }),
            ));
        }
        current = new;
    }
    for k in 0..(3600 * 4) {
        let ms = k * 250;
        // One pod's series holds the whole hour (the chart shows its last 10 minutes).
        out.push(memory(
            ms,
            "ollama-12",
            2_000_000_000 + (k as u64 % 400) * 4_000_000,
        ));
        if k % 8 == 0 {
            out.push(ev(
                ms + 1,
                Source::Host,
                EventKind::HostSample(HostSample {
                    node: None,
                    cpu_percent: Some((k % 100) as f32),
                    mem_total: 16 << 30,
                    mem_available: Some(8 << 30),
                    cached: Some(3 << 30),
                    ..HostSample::default()
                }),
            ));
        }
    }
    out.sort_by_key(|e| e.ts);
    out
}

fn frames(c: &mut Criterion) {
    let state = State::from_events(&hour());
    let view = ViewState::default();
    let theme = Theme::default_theme();
    let area = Rect::new(0, 0, 200, 60);
    let mut buf = Buffer::empty(area);
    c.bench_function("render 200x60, 1 h of 4 Hz memory", |b| {
        b.iter(|| {
            buf.reset();
            readygap::ui::render(black_box(&state), &view, &theme, area, &mut buf);
        })
    });
    let mut term = Terminal::new(TestBackend::new(200, 60)).expect("terminal");
    c.bench_function("draw 200x60 via TestBackend (render + diff)", |b| {
        b.iter(|| {
            term.draw(|f| readygap::ui::render(&state, &view, &theme, f.area(), f.buffer_mut()))
                .expect("draw");
        })
    });
}

criterion_group!(benches, frames);

/// User + system CPU time of this process, from /proc/self/stat.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    let hz = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(100);
    Some(Duration::from_secs_f64(ticks as f64 / hz as f64))
}

/// Run the real loop for `secs` with events at `hz` (0 = idle); returns CPU % of one core.
fn loop_cpu(secs: u64, hz: u64) -> Option<f64> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .ok()?;
    let state_events = hour();
    rt.block_on(async move {
        let store = readygap_live::store::Store::new();
        let rx = store.reader();
        let mut term = Terminal::new(TestBackend::new(200, 60)).ok()?;
        let input = futures::stream::pending::<std::io::Result<crossterm::event::Event>>();
        let ui = tokio::spawn(async move {
            let _ = run_loop(
                &mut term,
                input,
                DashboardOptions::default(),
                rx,
                readygap::ui::app::Actions::None,
                None,
            )
            .await;
        });
        for e in &state_events {
            store.apply(e);
        }
        // Let the backlog be applied and drawn, then measure.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (c0, t0) = (cpu_time()?, Instant::now());
        match 1000u64.checked_div(hz) {
            None => tokio::time::sleep(Duration::from_secs(secs)).await,
            Some(period_ms) => {
                let mut tick = tokio::time::interval(Duration::from_millis(period_ms));
                let mut k = 0i64;
                while t0.elapsed() < Duration::from_secs(secs) {
                    tick.tick().await;
                    k += 1;
                    store.apply(&memory(3_600_000 + k * 250, "ollama-12", 2_500_000_000));
                }
            }
        }
        let (c1, wall) = (cpu_time()?, t0.elapsed());
        ui.abort();
        Some(100.0 * (c1 - c0).as_secs_f64() / wall.as_secs_f64())
    })
}

/// The pod row the flush watcher looks for, and when a flushed frame first showed it Ready.
#[derive(Default)]
struct Probe {
    pod: String,
    want: &'static str,
    shown: Option<Instant>,
}

/// A `TestBackend` that, at each flush, checks whether the probe's pod row shows its word.
struct Watching {
    inner: TestBackend,
    probe: std::sync::Arc<std::sync::Mutex<Probe>>,
}

impl ratatui::backend::Backend for Watching {
    type Error = <TestBackend as ratatui::backend::Backend>::Error;
    fn draw<'a, I>(&mut self, content: I) -> Result<(), Self::Error>
    where
        I: Iterator<Item = (u16, u16, &'a ratatui::buffer::Cell)>,
    {
        self.inner.draw(content)
    }
    fn hide_cursor(&mut self) -> Result<(), Self::Error> {
        self.inner.hide_cursor()
    }
    fn show_cursor(&mut self) -> Result<(), Self::Error> {
        self.inner.show_cursor()
    }
    fn get_cursor_position(&mut self) -> Result<ratatui::layout::Position, Self::Error> {
        self.inner.get_cursor_position()
    }
    fn set_cursor_position<P: Into<ratatui::layout::Position>>(
        &mut self,
        position: P,
    ) -> Result<(), Self::Error> {
        self.inner.set_cursor_position(position)
    }
    fn clear(&mut self) -> Result<(), Self::Error> {
        self.inner.clear()
    }
    fn clear_region(&mut self, t: ratatui::backend::ClearType) -> Result<(), Self::Error> {
        self.inner.clear_region(t)
    }
    fn size(&self) -> Result<ratatui::layout::Size, Self::Error> {
        self.inner.size()
    }
    fn window_size(&mut self) -> Result<ratatui::backend::WindowSize, Self::Error> {
        self.inner.window_size()
    }
    fn flush(&mut self) -> Result<(), Self::Error> {
        self.inner.flush()?;
        let mut p = self.probe.lock().expect("probe");
        if p.shown.is_none() && !p.pod.is_empty() {
            let buf = self.inner.buffer();
            let area = buf.area;
            let shows = (area.top()..area.bottom()).any(|y| {
                let row: String = (area.left()..area.right())
                    .map(|x| buf[(x, y)].symbol())
                    .collect();
                row.contains(p.pod.as_str()) && row.contains(p.want)
            });
            if shows {
                p.shown = Some(Instant::now());
            }
        }
        Ok(())
    }
}

/// Ready event → the first flushed frame showing it, `n` times (ms each), with an hour of
/// session in the state.
fn event_to_frame(n: usize) -> Option<Vec<f64>> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .ok()?;
    rt.block_on(async move {
        let store = readygap_live::store::Store::new();
        let rx = store.reader();
        let probe = std::sync::Arc::new(std::sync::Mutex::new(Probe::default()));
        let backend = Watching {
            inner: TestBackend::new(200, 60),
            probe: probe.clone(),
        };
        let mut term = Terminal::new(backend).ok()?;
        let input = futures::stream::pending::<std::io::Result<crossterm::event::Event>>();
        let ui = tokio::spawn(async move {
            let _ = run_loop(
                &mut term,
                input,
                DashboardOptions::default(),
                rx,
                readygap::ui::app::Actions::None,
                None,
            )
            .await;
        });
        for e in &hour() {
            store.apply(e);
        }
        let wait = |want: &'static str, pod: String| {
            let probe = probe.clone();
            async move {
                let deadline = Instant::now() + Duration::from_secs(5);
                loop {
                    if let Some(t) = probe.lock().ok()?.shown {
                        return Some(t);
                    }
                    if Instant::now() > deadline {
                        eprintln!("{pod}: never showed {want}");
                        return None;
                    }
                    tokio::time::sleep(Duration::from_micros(200)).await;
                }
            }
        };
        let mut out = Vec::new();
        for k in 0..n {
            let name = format!("bench-ready-{k:03}");
            let uid = format!("uid-bench-{k}");
            let ms = 3_700_000 + k as i64 * 1000;
            *probe.lock().ok()? = Probe {
                pod: name.clone(),
                want: "False",
                shown: None,
            };
            store.apply(&applied(ms, pod(&name, &uid, Stage::Started, ms)));
            wait("False", name.clone()).await?;
            // A random phase against the frame clock, as a watch event has.
            tokio::time::sleep(Duration::from_micros(1000 + (k as u64 * 7919) % 40_000)).await;
            *probe.lock().ok()? = Probe {
                pod: name.clone(),
                want: "True",
                shown: None,
            };
            let sent = Instant::now();
            store.apply(&applied(ms + 500, pod(&name, &uid, Stage::Ready, ms + 500)));
            let shown = wait("True", name.clone()).await?;
            out.push((shown - sent).as_secs_f64() * 1000.0);
            store.apply(&ev(
                ms + 900,
                Source::Kube,
                EventKind::PodDeleted(pod(&name, &uid, Stage::Ready, ms + 900)),
            ));
        }
        ui.abort();
        Some(out)
    })
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    let secs = std::env::var("READYGAP_IDLE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    match loop_cpu(secs, 0) {
        Some(p) => println!("dashboard loop idle: {p:.2}% of one core over {secs} s (target < 2%)"),
        None => println!("dashboard loop idle: could not measure (/proc/self/stat)"),
    }
    match loop_cpu(secs, 4) {
        Some(p) => println!(
            "dashboard loop with 4 Hz memory events, 200x60: {p:.2}% of one core over {secs} s"
        ),
        None => println!("dashboard loop 4 Hz: could not measure"),
    }
    match event_to_frame(100) {
        Some(mut v) => {
            v.sort_by(f64::total_cmp);
            let at = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
            println!(
                "Ready event -> first frame showing it, 200x60, {} events: median {:.1} ms, p95 {:.1} ms, max {:.1} ms (one frame: {} ms)",
                v.len(),
                at(0.5),
                at(0.95),
                at(1.0),
                readygap::ui::app::FRAME.as_millis()
            );
        }
        None => println!("Ready event -> frame: could not measure"),
    }
}
