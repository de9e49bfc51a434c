//! The command line: clap subcommands and their dispatch.

use crate::args::one_of;
use crate::commands;
use clap::{Parser, Subcommand};
use color_eyre::eyre::{Result, WrapErr};
use readygap_core::report::Format;
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
    Report {
        /// Recordings, CSV files, or directories holding them.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[arg(long, default_value = "table", value_parser = one_of(&Format::NAMES))]
        format: Format,
        /// Print the warnings (inconsistent data, torn lines) on stderr.
        #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
        warnings: bool,
        /// Write the report to this file instead of stdout (`--format html -o OUT.html`: one
        /// self-contained page; with `--format markdown` the bars go to OUT.svg beside it,
        /// linked as an image).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
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
    Replay {
        file: PathBuf,
        /// Pace: a factor of the recorded pace (`2` = twice as fast), or `0`/`max` for as fast
        /// as possible.
        #[arg(long, default_value = "1")]
        speed: readygap_core::replay::Speed,
        /// Where to start: an RFC 3339 time, an offset from the start (`90s`, `1m30s`), or
        /// `t0:N` / `trial:N` (T0 of trial N).
        #[arg(long)]
        from: Option<readygap_core::replay::StartAt>,
        /// Pause whenever the playhead reaches a T0–T4 mark (space resumes).
        #[arg(long)]
        pause_at_marks: bool,
        /// Colour theme (a preset or a file in ~/.config/readygap/themes).
        #[arg(long)]
        theme: Option<String>,
        /// Config file (default ~/.config/readygap/config.toml).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Render a recording offscreen through the dashboard into an asciicast v2 file (plays in
    /// asciinema players; markers at every T0–T4).
    Cast {
        file: PathBuf,
        /// The .cast file to write.
        #[arg(short = 'o', long = "output")]
        output: PathBuf,
        /// Terminal size COLSxROWS.
        #[arg(long, default_value = "120x36", value_parser = parse_size)]
        size: (u16, u16),
        /// Colour theme (a preset).
        #[arg(long, default_value = "default")]
        theme: String,
        /// Playback speed relative to the recording.
        #[arg(long, default_value_t = 1.0)]
        speed: f64,
        /// Shorten pauses longer than this many seconds (0 keeps them).
        #[arg(long, default_value_t = 2.0)]
        idle_limit: f64,
    },
    /// Watch every model Deployment matching a label selector, measure each replacement as
    /// an external trial (GETs only, T3/T4 from the runtime's request log) and serve the
    /// trials as OpenMetrics on --metrics-addr (/metrics, /healthz, /readyz, /trials).
    Watch(Box<crate::commands::watch::WatchArgs>),
    /// Write the trials of a recording (or CSV) in the study's CSV column order.
    Export {
        file: PathBuf,
        /// The CSV to write (`-` for stdout).
        #[arg(long)]
        csv: PathBuf,
    },
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
        let hint = "t: trial · c: cold · d: delete · ? help".to_string();
        return runtime()?.block_on(commands::dashboard::live(*cli.live, cli.screen, &hint));
    };
    match command {
        Command::Demo(args) => runtime()?.block_on(commands::dashboard::demo(*args)),
        Command::Report {
            files,
            format,
            warnings,
            output,
        } => commands::report::report(&files, format, warnings, output.as_deref()),
        Command::Run(cmd) => {
            let RunCommand { mut run, config } = *cmd;
            run.session.node_config = config;
            runtime()?.block_on(commands::run::run(run))
        }
        Command::DropCaches(args) => {
            runtime()?.block_on(commands::drop_caches::drop_caches_cli(args))
        }
        Command::Lab {
            command: LabCommand::Serve(args),
        } => runtime()?.block_on(commands::lab::lab_serve(args)),
        Command::Lab {
            command: LabCommand::Bench(args),
        } => match args.scale {
            Some(pods) => commands::bench_scale::scale(args, pods),
            None => commands::bench::bench(args),
        },
        Command::Replay {
            file,
            speed,
            from,
            pause_at_marks,
            theme,
            config,
        } => {
            let (cfg, cfg_path) = crate::config::load(config.as_deref())?;
            let cfg = crate::config::resolve(&cfg, cfg_path.as_deref(), theme.as_deref(), true)?;
            let replay = readygap_core::replay::ReplayOptions {
                speed,
                from,
                pause_at_marks,
            };
            commands::replay::run(&file, &replay, cfg.dashboard_options("replay", ""))
        }
        Command::Cast {
            file,
            output,
            size,
            theme,
            speed,
            idle_limit,
        } => commands::cast::cast(&file, &output, size, &theme, speed, idle_limit),
        Command::Watch(args) => runtime()?.block_on(commands::watch::watch(*args)),
        Command::Export { file, csv } => commands::export::export(&file, &csv),
    }
}

/// A multi-threaded tokio runtime for the commands that do network I/O.
fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .wrap_err("starting the async runtime")
}

/// `120x36` → (120, 36).
fn parse_size(s: &str) -> std::result::Result<(u16, u16), String> {
    let (w, h) = s
        .split_once(['x', 'X'])
        .ok_or_else(|| format!("{s:?}: expected COLSxROWS, e.g. 120x36"))?;
    let n = |v: &str| {
        v.trim()
            .parse::<u16>()
            .ok()
            .filter(|n| (10..=1000).contains(n))
            .ok_or_else(|| format!("{s:?}: sizes are whole numbers from 10 to 1000"))
    };
    Ok((n(w)?, n(h)?))
}
