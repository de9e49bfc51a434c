//! The command line: clap subcommands and their dispatch.

use crate::commands;
use clap::{Parser, Subcommand};
use color_eyre::eyre::{Result, WrapErr};
use std::path::PathBuf;

/// readygap: watch, measure and record how long an LLM pod on Kubernetes takes to really
/// recover (Ready is not the same as able to answer).
#[derive(Debug, Parser)]
#[command(name = "readygap", version, about, long_about = None)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Without a subcommand: the dashboard on the current cluster context.
    #[command(flatten)]
    pub live: Box<crate::args::SessionArgs>,
    #[command(flatten)]
    pub screen: crate::commands::dashboard::ScreenArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The dashboard on the built-in lab (a Kubernetes API and Ollama runtimes on loopback,
    /// calibrated to the published measurements): press `t` to run a trial.
    Demo(Box<crate::commands::dashboard::DemoArgs>),
    /// Statistics of recordings (.jsonl) and of the study's CSV files.
    Report(commands::report::ReportArgs),
    /// Drop a node's page cache (sync; echo 3 > /proc/sys/vm/drop_caches) for cold-cache
    /// trials, reporting `Cached:` before and after.
    DropCaches(crate::commands::drop_caches::DropCachesArgs),
    /// Run recovery trials headless (delete → Ready → runtime → inference) and print the
    /// statistics.
    Run(Box<RunCommand>),
    /// The built-in lab: a Kubernetes API and Ollama-compatible runtimes on loopback.
    Lab {
        #[command(subcommand)]
        command: LabCommand,
    },
    /// Replay a recording in the dashboard (read-only) with a replay bar: space pauses,
    /// ←/→ previous/next mark, [/] previous/next trial, +/- speed, Home/End; `q` quits.
    Replay(commands::replay::ReplayArgs),
    /// Render a recording offscreen through the dashboard into an asciicast v2 file (plays in
    /// asciinema players; markers at every T0–T4).
    Cast(commands::cast::CastArgs),
    /// Watch every model Deployment matching a label selector, measure each replacement as
    /// an external trial (GETs only, T3/T4 from the runtime's request log) and serve the
    /// trials as OpenMetrics on --metrics-addr (/metrics, /healthz, /readyz, /trials).
    Watch(Box<crate::commands::watch::WatchArgs>),
    /// Write the trials of a recording (or CSV) in the study's CSV column order.
    Export(commands::export::ExportArgs),
}

/// `readygap run`: the run's options and the config file whose `[nodes]` tables apply.
#[derive(Debug, clap::Args)]
pub struct RunCommand {
    #[command(flatten)]
    pub run: crate::args::RunArgs,
    /// Config file whose `[nodes."PATTERN"]` tables give node access (default
    /// ~/.config/readygap/config.toml; with `--lab` only when given) and whose `[verdicts]`
    /// set the verdict thresholds (default file too, also with `--lab`).
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// `readygap lab …`
#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Serve the lab until Ctrl-C; prints one JSON line with the API URL, kubeconfig path and
    /// namespace.
    Serve(commands::lab::LabArgs),
    /// readygap's measuring error and cost against the published study's kubectl-and-curl
    /// loops: N trials each on one lab, compared with the lab's ground truth.
    Bench(commands::bench::BenchArgs),
}

/// Run a parsed command line; returns the process exit code.
pub fn run(cli: Cli) -> Result<i32> {
    let Some(command) = cli.command else {
        return runtime()?.block_on(commands::dashboard::live(*cli.live, cli.screen));
    };
    match command {
        Command::Demo(args) => runtime()?.block_on(commands::dashboard::demo(*args)),
        Command::Report(args) => commands::report::report(&args),
        Command::Run(cmd) => {
            let RunCommand { mut run, config } = *cmd;
            run.session.node_config = config;
            runtime()?.block_on(commands::run::run(run))
        }
        Command::DropCaches(args) => {
            runtime()?.block_on(commands::drop_caches::drop_caches_cli(args))
        }
        Command::Lab { command } => match command {
            LabCommand::Serve(args) => runtime()?.block_on(commands::lab::lab_serve(args)),
            LabCommand::Bench(args) => commands::lab_bench(args),
        },
        Command::Replay(args) => {
            let (cfg, cfg_path) = crate::config::load(args.config.as_deref())?;
            let theme = args.theme.as_deref();
            let opts = crate::config::resolve(&cfg, cfg_path.as_deref(), theme, true)?;
            let replay = readygap_core::replay::ReplayOptions {
                speed: args.speed,
                from: args.from,
                pause_at_marks: args.pause_at_marks,
            };
            commands::replay::run(&args.file, &replay, opts)
        }
        Command::Cast(args) => commands::cast::cast(&args),
        Command::Watch(args) => runtime()?.block_on(commands::watch::watch(*args)),
        Command::Export(args) => commands::export::export(&args),
    }
}

/// A multi-threaded tokio runtime for the commands that do network I/O.
fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .wrap_err("starting the async runtime")
}
