//! `readygap replay FILE`: feeds a recording's events into the dashboard at the recorded pace
//! times a speed factor (or as fast as possible), read-only. The feeding lives here so it can
//! grow (pause, seek, marks).

use crate::core::event::Event;
use crate::record::jsonl;
use crate::ui::app::{DashboardOptions, run_dashboard};
use color_eyre::eyre::{Result, WrapErr, eyre};
use std::path::Path;
use std::str::FromStr;
use tokio::sync::mpsc;

/// How fast to replay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Speed {
    /// As fast as the dashboard takes them.
    Max,
    /// Recorded pace times this factor (> 0).
    Factor(f64),
}

impl FromStr for Speed {
    type Err = String;
    fn from_str(s: &str) -> Result<Speed, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("max") {
            return Ok(Speed::Max);
        }
        let f: f64 = s
            .trim_end_matches(['x', 'X'])
            .parse()
            .map_err(|_| format!("speed {s:?}: a positive number, 0 or `max`"))?;
        if f == 0.0 {
            Ok(Speed::Max)
        } else if f.is_finite() && f > 0.0 {
            Ok(Speed::Factor(f))
        } else {
            Err(format!("speed {s:?}: a positive number, 0 or `max`"))
        }
    }
}

/// Send `events` on `tx`, each when its offset from the first event (divided by the speed)
/// has passed since the call. Stops early when the receiver is gone; returns how many were
/// sent.
pub async fn feed(events: Vec<Event>, speed: Speed, tx: mpsc::Sender<Event>) -> usize {
    let start = tokio::time::Instant::now();
    let first = events.first().map(|e| e.ts);
    let mut sent = 0;
    for ev in events {
        if let (Speed::Factor(f), Some(first)) = (speed, first) {
            let offset_us = (ev.ts - first)
                .num_microseconds()
                .unwrap_or(i64::MAX)
                .max(0);
            let at = std::time::Duration::from_secs_f64(offset_us as f64 / 1e6 / f);
            tokio::time::sleep_until(start + at).await;
        }
        if tx.send(ev).await.is_err() {
            break;
        }
        sent += 1;
    }
    sent
}

/// Replay a recording in the dashboard; returns the exit code.
pub fn run(path: &Path, speed: Speed, mut opts: DashboardOptions) -> Result<i32> {
    let rec =
        jsonl::read(path).wrap_err_with(|| format!("reading recording {}", path.display()))?;
    if rec.events.is_empty() {
        return Err(eyre!("{}: the recording has no events", path.display()));
    }
    opts.read_only = true;
    opts.mode_label = "replay".into();
    if opts.title.is_empty() {
        opts.title = match speed {
            Speed::Max => format!("{} (max speed)", path.display()),
            Speed::Factor(f) => format!("{} ×{f}", path.display()),
        };
    }
    opts.notices.extend(rec.warnings.iter().cloned());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .wrap_err("starting the async runtime")?;
    rt.block_on(async move {
        let (tx, rx) = mpsc::channel(1024);
        let feeder = tokio::spawn(feed(rec.events, speed, tx));
        let result = run_dashboard(opts, rx, None).await;
        feeder.abort();
        result
    })?;
    Ok(0)
}
