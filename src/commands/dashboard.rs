//! The live dashboard: `readygap` on the current cluster context, and `readygap demo` on the
//! built-in lab started in-process. It wires the pieces together:
//!
//! ```text
//! feeds ─▶ trial runner (State, drives trials) ─sink─▶ pump (recording, R toggle) ─▶ dashboard
//!                ▲                                                                     │
//!                └──────────── commands ◀── intents (keys) ◀───────────────────────────┘
//! ```
//!
//! The runner owns the event stream and decides from the same reduced state that the screen
//! and the recording show. Key presses become intents; this module maps them onto the
//! runner's commands (a full or cold trial, or one action in the background). A cluster that
//! cannot be reached opens the dashboard anyway, with the error on screen.

use crate::ui::app::{Feed, LiveFeed, run_dashboard};
use crate::ui::intent::Intent;
use chrono::Utc;
use color_eyre::eyre::Result;
use readygap_core::event::{Event, EventKind, Source};
use readygap_core::record::jsonl::Header;
use readygap_core::state::State;
use readygap_live::actions::Request;
use readygap_live::run::{Built, RunConfig, SessionConfig, build};
use readygap_live::session::{Pump, RecordControl, RecordStatus, default_recording_path};
use readygap_live::sources::runtime::PodRef;
use readygap_live::trial::Command as RunnerCommand;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
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
    /// Lab scenario (baseline, http-readiness, inference-readiness, emptydir, overlap-oom, rollout, gpu, gpu-surge, aggressive-liveness).
    #[arg(long, default_value = "baseline")]
    pub scenario: String,
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

/// `readygap` without a subcommand: the dashboard on the cluster the session names.
pub async fn live(
    mut session: crate::args::SessionArgs,
    screen: ScreenArgs,
    hint: &str,
) -> Result<i32> {
    // The `[nodes]` tables of the dashboard's --config apply.
    session.node_config = screen.config.clone();
    dashboard(session.to_config(false), screen, "live", hint).await
}

/// The dashboard on the cluster named by `session`.
pub async fn dashboard(
    session: SessionConfig,
    screen: ScreenArgs,
    mode: &str,
    hint: &str,
) -> Result<i32> {
    let (file, file_path) = crate::config::load(screen.config.as_deref())?;
    let cfg = crate::config::resolve(
        &file,
        file_path.as_deref(),
        screen.theme.as_deref(),
        screen.read_only,
    )?;
    // The runner is built as `run` builds it; trials start one at a time from the keys.
    let mut args = RunConfig {
        session,
        cooldown: std::time::Duration::ZERO,
        ..RunConfig::default()
    };
    let record_to = args.session.record.take();
    let mut opts = cfg.dashboard_options(mode, hint);
    opts.recording = record_to.as_ref().map(|p| p.display().to_string());
    let read_only = opts.read_only;
    // --read-only reaches the runner and the executor: only GETs leave readygap (and no
    // debug pod is created for node access).
    args.session.read_only = read_only;
    if read_only {
        args.session.nodes = crate::args::read_only_nodes(args.session.nodes.clone());
    }

    let cancel = CancellationToken::new();
    let (fwd_tx, mut fwd_rx) = mpsc::unbounded_channel::<Event>();
    let built = build(&args, cancel.clone(), Some(fwd_tx), mode).await;

    let (ui_tx, ui_rx) = mpsc::channel::<Event>(8192);
    let Built {
        mut runner,
        tx,
        feeds,
        target,
        model,
        node_selection,
        node_feed,
        ..
    } = match built {
        Ok(b) => b,
        Err(e) => {
            // No cluster: the screen says so, and stays until `q`.
            let msg = format!("{e:#}");
            ui_tx
                .send(Event::new(
                    Utc::now(),
                    Source::Kube,
                    EventKind::SourceError {
                        feed: "cluster".into(),
                        message: msg,
                    },
                ))
                .await
                .ok();
            opts.read_only = true;
            return run_dashboard(opts, ui_rx, None).await.map(|_| 1);
        }
    };

    // The machine readygap runs on, every 2 s.
    {
        let (host_tx, mut host_rx) = mpsc::channel(4);
        let cancel = feeds.clone();
        tokio::spawn(readygap_live::host::run_local_sampler(
            std::time::Duration::from_secs(2),
            host_tx,
            cancel,
        ));
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Some(h) = host_rx.recv().await {
                if tx.send(h.event(None)).await.is_err() {
                    break;
                }
            }
        });
    }

    // Runner sink → (state for intents) → pump (recording) → dashboard.
    let pods = Arc::new(Mutex::new(State::new()));
    let (pump_tx, pump_rx) = mpsc::channel::<Event>(8192);
    {
        let pods = pods.clone();
        tokio::spawn(async move {
            while let Some(ev) = fwd_rx.recv().await {
                if let Ok(mut s) = pods.lock() {
                    s.apply(&ev);
                }
                if pump_tx.send(ev).await.is_err() {
                    break;
                }
            }
        });
    }
    let (ctl_tx, ctl_rx) = mpsc::channel(4);
    let recording = Arc::new(AtomicBool::new(record_to.is_some()));
    let (st_tx, mut st_rx) = mpsc::unbounded_channel();
    let mut header = Header::new(
        Utc::now(),
        &target.context,
        &target.namespace,
        &target.label(),
    );
    header.settings =
        serde_json::json!({"mode": mode, "model": model, "access": args.session.access});
    tokio::spawn(
        Pump {
            input: pump_rx,
            output: ui_tx.clone(),
            control: ctl_rx,
            status: st_tx,
            header,
            record_to,
            redact: args.session.record_redact,
        }
        .run(),
    );
    // Recording status: the header's indicator and a line in the footer, on screen only.
    let (control_tx, control_rx) = mpsc::unbounded_channel::<Feed>();
    {
        let ui_tx = ui_tx.clone();
        let recording = recording.clone();
        tokio::spawn(async move {
            while let Some(s) = st_rx.recv().await {
                let (text, now) = match s {
                    RecordStatus::Recording(p) => {
                        (format!("recording to {}", p.display()), Some(p))
                    }
                    RecordStatus::Stopped { path, events } => (
                        format!("recording stopped: {} ({events} events)", path.display()),
                        None,
                    ),
                    RecordStatus::Failed(e) => (format!("recording failed: {e}"), None),
                };
                recording.store(now.is_some(), Ordering::SeqCst);
                let shown = now.map(|p| p.display().to_string());
                if control_tx.send(Feed::Recording(shown)).is_err() {
                    break;
                }
                let ev = Event::new(Utc::now(), Source::Session, EventKind::Note { text });
                if ui_tx.send(ev).await.is_err() {
                    break;
                }
            }
        });
    }

    // The runner serves commands until the dashboard closes.
    let (cmd_tx, cmd_rx) = mpsc::channel::<RunnerCommand>(16);
    let runner_task = tokio::spawn(async move {
        let mut on_trial = |_: &readygap_core::timeline::Trial| {};
        runner.serve(cmd_rx, &mut on_trial).await;
        runner.stop();
    });

    // Intents from the keys.
    let (intent_tx, mut intent_rx) = mpsc::channel::<Intent>(16);
    let deployment = target
        .deployment
        .clone()
        .unwrap_or_else(|| args.session.cluster.deployment.clone());
    let recordings_dir = screen.recordings_dir.clone();
    let context = target.context.clone();
    let notes = ui_tx.clone();
    let intents = tokio::spawn(async move {
        let mut pod_choice: Option<String> = None;
        let mut model_choice: Option<String> = None;
        while let Some(intent) = intent_rx.recv().await {
            let focus = || -> Option<PodRef> {
                let s = pods.lock().ok()?;
                let name = pod_choice
                    .clone()
                    .filter(|p| s.pods.contains_key(p))
                    .or_else(|| {
                        s.pods
                            .values()
                            .filter(|p| p.is_ready() && p.deletion_timestamp.is_none())
                            .max_by_key(|p| p.created)
                            .map(|p| p.name.clone())
                    })?;
                let ip = s.pods.get(&name).and_then(|p| p.ip.clone());
                Some(PodRef { name, ip })
            };
            let cmd = match intent {
                Intent::Quit => break,
                Intent::ChoosePod(p) => {
                    node_selection.choose_pod(Some(p.clone()));
                    pod_choice = Some(p);
                    None
                }
                Intent::ChooseModel(m) => {
                    model_choice = Some(m);
                    None
                }
                Intent::ToggleRecord => {
                    // The status task keeps `recording` true only while a file is written,
                    // so a failed start does not leave the key in the wrong state.
                    if recording.load(Ordering::SeqCst) {
                        ctl_tx.send(RecordControl::Stop).await.ok();
                    } else {
                        let path = default_recording_path(&recordings_dir, &context, Utc::now());
                        ctl_tx
                            .send(RecordControl::Start { path, reply: None })
                            .await
                            .ok();
                    }
                    None
                }
                _ if read_only => None,
                Intent::FullTrial => Some(RunnerCommand::Trial { cold: false }),
                Intent::ColdTrial => Some(RunnerCommand::Trial { cold: true }),
                Intent::DeletePod { pod } => Some(RunnerCommand::Act(Request::DeletePod {
                    pod,
                    grace_seconds: None,
                })),
                Intent::RolloutRestart => Some(RunnerCommand::Act(Request::RolloutRestart {
                    deployment: deployment.clone(),
                })),
                Intent::InferNow | Intent::Unload => match focus() {
                    Some(pod) => Some(RunnerCommand::Act(if intent == Intent::InferNow {
                        Request::Infer {
                            pod,
                            model: model_choice.clone(),
                        }
                    } else {
                        Request::Unload {
                            pod,
                            model: model_choice.clone(),
                        }
                    })),
                    None => {
                        let text = "no Ready pod to send it to".to_string();
                        let ev = Event::new(Utc::now(), Source::Session, EventKind::Note { text });
                        notes.send(ev).await.ok();
                        None
                    }
                },
                Intent::Replay(_) => None,
            };
            if let Some(c) = cmd
                && cmd_tx.send(c).await.is_err()
            {
                break;
            }
        }
    });

    let feed = LiveFeed {
        events: ui_rx,
        control: control_rx,
    };
    let result = run_dashboard(opts, feed, Some(intent_tx)).await;
    // Leave: stop the feeds and the runner, close the recording.
    cancel.cancel();
    feeds.cancel();
    intents.abort();
    // The node host feed stops its sampler (and deletes a debug pod it created).
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), node_feed).await;
    drop(tx);
    // (up to 10 s: the runner deletes the debug pods its cold steps created)
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), runner_task).await;
    result.map(|_| 0)
}

/// `readygap demo`: the lab in-process, then the dashboard on it.
pub async fn demo(d: DemoArgs) -> Result<i32> {
    let profile = readygap_lab::engine::profiles::resolve(d.engine, &d.profile, None)
        .map_err(|e| color_eyre::eyre::eyre!("lab profile: {e}"))?;
    let model = profile.model.clone();
    let mut o = readygap_lab::serve::LabOptions::new(profile);
    o.engine = d.engine;
    o.speed = d.speed;
    o.scenario = d
        .scenario
        .parse()
        .map_err(|e| color_eyre::eyre::eyre!("{e}"))?;
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
    let hint = format!(
        "t: trial · c: cold · d: delete · ? help — lab {} {}",
        d.profile, d.scenario
    );
    let code = dashboard(session, d.screen, "demo", &hint).await;
    lab.shutdown().await;
    code
}
