//! The live dashboard: `readygap` on the current cluster context, and `readygap demo` on the
//! built-in lab started in-process. It wires the pieces together:
//!
//! ```text
//! feeds ─▶ trial runner (reduces into the one store, records, drives trials)
//!                ▲                          │ publishes (state, recording, connection)
//!                │                          ▼
//!                │                  store ──notify──▶ dashboard (reads, draws)
//!                └──────────── commands (bounded) ◀── keys ◀──┘
//! ```
//!
//! The runner owns the event stream and the one store: the screen reads the state the runner
//! decides from and the recording holds; nothing else reduces events. Until the cluster
//! answers, this module writes the store itself (this machine's Host figures, the connection
//! state), then hands it to the runner. A key names an action ([`Command`]) and goes straight
//! to the runner, which decides its pod (the focus rule), its model and whether read-only
//! allows it. A cluster that cannot be reached opens the dashboard anyway, with the error
//! and the next try on screen, and this machine's Host figures; the session starts when it
//! answers.

use crate::ui::app::{Actions, run_dashboard};
use chrono::Utc;
use color_eyre::eyre::Result;
use readygap_core::event::{Event, EventKind, Source};
use readygap_live::run::{Built, RunConfig, SessionConfig, build};
use readygap_live::store::Store;
use readygap_live::trial::Command;
use std::path::PathBuf;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Options of the screen (shared by the dashboard and `demo`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ScreenArgs {
    /// Disable the destructive keys (delete, restart, trials, unload, drop caches).
    #[arg(long)]
    pub read_only: bool,
    /// Colour theme: default, light, solarized-dark, high-contrast, monochrome, or a user theme.
    #[arg(long)]
    pub theme: Option<String>,
    /// Config file (default ~/.config/readygap/config.toml).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Where `R` writes new recordings.
    #[arg(long, default_value = "recordings")]
    pub recordings_dir: PathBuf,
}

/// `readygap demo`: the lab's options.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// Calibration profile of the lab.
    #[arg(long, default_value = "local-3b")]
    pub profile: String,
    /// Lab scenario (baseline, http-readiness, inference-readiness, emptydir, overlap-oom, rollout, gpu, gpu-surge, gpu-shared, aggressive-liveness).
    #[arg(long, default_value = "baseline")]
    pub scenario: readygap_lab::scenario::Scenario,
    /// Run the lab's timings this many times faster.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// What runs the lab's serving containers: simulated, or ollama (a real `ollama serve`
    /// per pod; the profile becomes `real-smollm2`).
    #[arg(long, default_value = "simulated", value_parser = crate::args::one_of(&readygap_lab::engine::EngineKind::NAMES))]
    pub engine: readygap_lab::engine::EngineKind,
    /// Record the session to this file from the start.
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// Leave prompts and responses out of recordings.
    #[arg(long)]
    pub record_redact: bool,
    #[command(flatten)]
    pub screen: ScreenArgs,
}

/// The keys the header shows.
const HINT: &str = "t: trial · c: cold · d: delete · ? help";

/// `readygap` without a subcommand: the dashboard on the cluster the session names.
pub async fn live(mut session: crate::args::SessionArgs, screen: ScreenArgs) -> Result<i32> {
    // The `[nodes]` tables of the dashboard's --config apply.
    session.node_config = screen.config.clone();
    let mut config = session.to_config(false);
    config.verdicts = session.verdict_thresholds()?;
    config.dcgm = session.dcgm_source()?;
    dashboard(config, screen, "live", HINT).await
}

/// The dashboard on the cluster named by `session`.
pub async fn dashboard(
    session: SessionConfig,
    screen: ScreenArgs,
    mode: &str,
    hint: &str,
) -> Result<i32> {
    let (file, file_path) = crate::config::load(screen.config.as_deref())?;
    let mut opts = crate::config::resolve(
        &file,
        file_path.as_deref(),
        screen.theme.as_deref(),
        screen.read_only,
    )?;
    opts.mode_label = mode.into();
    // Read-only, the header offers no key that changes the cluster.
    opts.title = if opts.read_only {
        let rest = hint.strip_prefix(HINT).unwrap_or_default();
        format!("read-only: observing only (no trial, delete or restart) · ? help{rest}")
    } else {
        hint.into()
    };
    // The runner is built as `run` builds it; trials start one at a time from the keys.
    let mut args = RunConfig {
        session,
        cooldown: std::time::Duration::ZERO,
        // The machine readygap runs on, every 2 s (the Host panel).
        local_host: Some(std::time::Duration::from_secs(2)),
        ..RunConfig::default()
    };
    let read_only = opts.read_only;
    // --read-only reaches the runner and the executor: only GETs leave readygap (and no
    // debug pod is created for node access).
    args.session.read_only = read_only;
    if read_only {
        args.session.nodes = crate::args::read_only_nodes(args.session.nodes.clone());
    }

    let cancel = CancellationToken::new();
    let store = Store::new();
    let reader = store.reader();
    let (cmd_tx, cmd_rx) = mpsc::channel::<Command>(16);
    let session = tokio::spawn(run_session(
        args,
        store,
        cmd_rx,
        cancel.clone(),
        mode.to_owned(),
        screen.recordings_dir.clone(),
    ));
    let result = run_dashboard(opts, reader, Actions::Session(cmd_tx)).await;
    // Leave: the session stops its feeds and runner and closes the recording.
    cancel.cancel();
    let _ = session.await;
    result.map(|_| 0)
}

/// The first wait between two tries to reach the cluster; it doubles up to [`RETRY_MAX`].
const RETRY_FIRST: std::time::Duration = std::time::Duration::from_secs(1);
/// The longest wait between two tries (client-go's reflector backs off to 30 s; a screen a
/// user is looking at should come up sooner once the API server answers).
const RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(10);

/// Until connected: apply what this machine's Host feed sends to the store, until `work`
/// ends (its output) or the dashboard closes (`None`).
async fn meanwhile<T>(
    work: impl Future<Output = T>,
    store: &Store,
    offline: &mut mpsc::Receiver<Event>,
    cancel: &CancellationToken,
) -> Option<T> {
    tokio::pin!(work);
    loop {
        tokio::select! {
            () = cancel.cancelled() => return None,
            out = &mut work => return Some(out),
            Some(ev) = offline.recv() => store.apply(&ev),
        }
    }
}

/// Connect (retrying with backoff until it works or the dashboard closes), then run the
/// session: feeds, the runner, the keys' intents. Until connected the screen shows the
/// state and this machine's Host figures, which need no cluster; this task writes them to
/// the store, then hands the store to the runner.
async fn run_session(
    args: RunConfig,
    store: Store,
    commands: mpsc::Receiver<Command>,
    cancel: CancellationToken,
    mode: String,
    recordings_dir: PathBuf,
) {
    let (offline_tx, mut offline) = mpsc::channel::<Event>(64);
    let offline_host = cancel.child_token();
    if let Some(every) = args.local_host {
        tokio::spawn(readygap_live::host::run_local_sampler(
            every,
            offline_tx,
            offline_host.clone(),
        ));
    }
    let mut wait = RETRY_FIRST;
    let mut last_error = String::new();
    let mut tries = 0u32;
    let built = loop {
        tries += 1;
        let trying = match tries {
            1 => "connecting…".to_owned(),
            n => format!("connecting (try {n})…"),
        };
        store.update(|p| p.connection = Some(trying));
        let attempt = build(&args, cancel.clone(), &mode);
        let Some(attempt) = meanwhile(attempt, &store, &mut offline, &cancel).await else {
            return;
        };
        let e = match attempt {
            Ok(b) => break b,
            Err(e) => format!("{e:#}"),
        };
        let next = Utc::now() + chrono::Duration::from_std(wait).unwrap_or_default();
        let state = format!(
            "try {tries} failed, next try at {} (every ≤{}s)",
            next.with_timezone(&chrono::Local).format("%H:%M:%S"),
            RETRY_MAX.as_secs()
        );
        store.update(|p| p.connection = Some(state));
        // The reason goes to the footer's messages once per change, not once per try.
        if e != last_error {
            let ev = Event::new(
                Utc::now(),
                Source::Kube,
                EventKind::SourceError {
                    feed: "cluster".into(),
                    message: e.clone(),
                },
            );
            store.apply(&ev);
            last_error = e;
        }
        let pause = tokio::time::sleep(wait);
        if meanwhile(pause, &store, &mut offline, &cancel)
            .await
            .is_none()
        {
            return;
        }
        wait = (wait * 2).min(RETRY_MAX);
    };
    // Connected: the runner's own Host feed takes over from the one started here.
    offline_host.cancel();
    store.update(|p| p.connection = None);
    let Built {
        mut runner,
        tx,
        feeds,
        node_feed,
        ..
    } = built;
    if tries > 1 {
        // The footer's last message was the failure: say that it is over.
        let detail = format!("the API server answered at try {tries}");
        for kind in [
            EventKind::SourceConnected {
                feed: "cluster".into(),
                detail: detail.clone(),
            },
            EventKind::Note {
                text: format!("connected: {detail}"),
            },
        ] {
            store.apply(&Event::new(Utc::now(), Source::Kube, kind));
        }
    }
    // From here on the runner is the store's only writer (the recording indicator included).
    runner.adopt_store(store);
    runner.record_into(recordings_dir);

    // The runner serves the keys' commands until the dashboard closes.
    let runner_task = tokio::spawn(async move {
        let mut on_trial = |_: &readygap_core::timeline::Trial| {};
        runner.serve(commands, &mut on_trial).await;
        runner.stop();
    });

    cancel.cancelled().await;
    // Leave: stop the feeds and the runner, close the recording.
    feeds.cancel();
    // The node host feed stops its sampler (and deletes a debug pod it created).
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), node_feed).await;
    drop(tx);
    // (up to 10 s: the runner deletes the debug pods its cold steps created)
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), runner_task).await;
}

/// `readygap demo`: the lab in-process, then the dashboard on it.
pub async fn demo(d: DemoArgs) -> Result<i32> {
    let profile = readygap_lab::engine::profiles::resolve(d.engine, &d.profile, None)
        .map_err(|e| color_eyre::eyre::eyre!("lab profile: {e}"))?;
    let model = profile.model.clone();
    let mut o = readygap_lab::serve::LabOptions::new(profile);
    o.engine = d.engine;
    o.speed = d.speed;
    o.scenario = d.scenario;
    let lab = readygap_lab::serve::serve(o).await?;
    lab.wait_ready(std::time::Duration::from_secs(120)).await?;
    let mut session = SessionConfig::default();
    session.cluster.kubeconfig = Some(lab.kubeconfig.clone());
    session.cluster.namespace = Some(lab.namespace.clone());
    session.model = Some(model);
    session.record = d.record.clone();
    session.record_redact = d.record_redact;
    // The lab's node through a debug pod, as a user's cluster offers it (the `[nodes]`
    // tables of an explicit --config instead, if given).
    session.nodes = crate::args::configured_nodes(d.screen.config.as_deref(), true);
    let hint = format!("{HINT} — lab {} {}", d.profile, d.scenario);
    let code = dashboard(session, d.screen, "demo", &hint).await;
    lab.shutdown().await;
    code
}
