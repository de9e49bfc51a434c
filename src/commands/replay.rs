//! `readygap replay FILE`: the dashboard on a recording, read-only, with replay controls.
//! The pure [`Replayer`] (readygap-core) decides what is due; [`drive`] is the tokio task
//! around it: it reduces the due events into the replay's one store (and replaces its state
//! on a seek, and publishes the playhead), which the dashboard reads as it reads a live
//! session's, and carries out the replay keys ([`ReplayCommand`]) the dashboard sends back.

use crate::ui::app::{Actions, DashboardOptions, run_dashboard};
use crate::ui::intent::ReplayCommand;
use color_eyre::eyre::{Result, WrapErr, eyre};
use readygap_core::event::Event;
use readygap_core::record::index::ReplayIndex;
use readygap_core::record::jsonl;
use readygap_core::replay::{BATCH, ReplayOptions, Replayer, Speed, Step};
use readygap_live::store::Store;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// The command-line arguments of `readygap replay`.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    pub file: PathBuf,
    /// Pace: a factor of the recorded pace (`2` = twice as fast), or `0`/`max` for as fast
    /// as possible.
    #[arg(long, default_value = "1")]
    pub speed: readygap_core::replay::Speed,
    /// Where to start: an RFC 3339 time, an offset from the start (`90s`, `1m30s`), or
    /// `t0:N` / `trial:N` (T0 of trial N).
    #[arg(long)]
    pub from: Option<readygap_core::replay::StartAt>,
    /// Pause whenever the playhead reaches a T0–T4 mark (space resumes).
    #[arg(long)]
    pub pause_at_marks: bool,
    /// Colour theme (a preset or a file in ~/.config/readygap/themes).
    #[arg(long)]
    pub theme: Option<String>,
    /// Config file (default ~/.config/readygap/config.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// Carry the replayer's steps into the store.
pub fn publish(store: &Store, steps: Vec<Step>) {
    for step in steps {
        match step {
            Step::Event(ev) => store.apply(&ev),
            Step::Reset(state) => store.reset(*state),
            Step::Bar(bar) => store.update(|p| p.replay = Some(bar)),
        }
    }
}

/// A plain pacer without controls (no pause or seek; the dashboard uses [`drive`]): send
/// `events` on `tx`, each when its offset from the first event (divided by the speed) has
/// passed since the call. Stops early when the receiver is gone; returns how many were sent.
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
            let at = Duration::from_secs_f64((offset_us as f64 / 1e6 / f).min(1e9));
            tokio::time::sleep_until(start + at).await;
        }
        if tx.send(ev).await.is_err() {
            break;
        }
        sent += 1;
    }
    sent
}

/// The replay task: publishes due events and the bar in `store`, and carries out the replay
/// keys the dashboard sends back. Ends when the dashboard is gone (its keys' channel closed).
pub async fn drive(
    mut replayer: Replayer,
    store: Store,
    mut commands: mpsc::Receiver<ReplayCommand>,
) {
    publish(&store, replayer.begin());
    loop {
        let wake = replayer
            .next_wake(Instant::now())
            .map(tokio::time::Instant::from_std);
        let steps = tokio::select! {
            cmd = commands.recv() => match cmd {
                Some(c) => replayer.command(c, Instant::now()),
                None => return,
            },
            _ = async {
                if let Some(w) = wake {
                    tokio::time::sleep_until(w).await;
                }
            }, if wake.is_some() => replayer.advance(Instant::now(), BATCH),
        };
        publish(&store, steps);
        // At `max` the next batch is due at once: let the screen and the keys have a turn.
        tokio::task::yield_now().await;
    }
}

/// Replay a recording in the dashboard; returns the exit code.
pub fn run(path: &Path, replay: &ReplayOptions, mut opts: DashboardOptions) -> Result<i32> {
    let rec =
        jsonl::read(path).wrap_err_with(|| format!("reading recording {}", path.display()))?;
    if rec.events.is_empty() {
        return Err(eyre!("{}: the recording has no events", path.display()));
    }
    let index = ReplayIndex::new(rec.events);
    let replayer = Replayer::new(index, replay, Instant::now())
        .map_err(|e| eyre!("replaying {}: {e}", path.display()))?;
    opts.read_only = true;
    opts.mode_label = "replay".into();
    if opts.title.is_empty() {
        opts.title = path.display().to_string();
    }
    opts.notices.extend(rec.warnings.iter().cloned());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .wrap_err("starting the async runtime")?;
    rt.block_on(async move {
        let store = Store::new();
        let reader = store.reader();
        let (cmd_tx, cmd_rx) = mpsc::channel(64);
        let controller = tokio::spawn(drive(replayer, store, cmd_rx));
        let result = run_dashboard(opts, reader, Actions::Replay(cmd_tx)).await;
        controller.abort();
        result
    })?;
    Ok(0)
}
