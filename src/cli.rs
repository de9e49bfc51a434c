//! The command line: clap subcommands and their dispatch.

use crate::record::labcsv;
use crate::report::{self, Format, Report};
use clap::{Parser, Subcommand};
use color_eyre::eyre::{Result, WrapErr};
use std::io::Write;
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
    pub live: Box<crate::run::SessionArgs>,
    #[command(flatten)]
    pub screen: crate::live::ScreenArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The dashboard on the built-in lab (a Kubernetes API and Ollama runtimes on loopback,
    /// calibrated to the published measurements): press `t` to run a trial.
    Demo(Box<crate::live::DemoArgs>),
    /// Statistics of recordings (.jsonl) and of the study's CSV files.
    Report {
        /// Recordings, CSV files, or directories holding them.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
        /// Print the warnings (inconsistent data, torn lines) on stderr.
        #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
        warnings: bool,
    },
    /// Drop a node's page cache (sync; echo 3 > /proc/sys/vm/drop_caches) for cold-cache
    /// trials, reporting `Cached:` before and after.
    DropCaches(crate::node::cli::DropCachesArgs),
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
        speed: crate::replay::Speed,
        /// Where to start: an RFC 3339 time, an offset from the start (`90s`, `1m30s`), or
        /// `t0:N` / `trial:N` (T0 of trial N).
        #[arg(long)]
        from: Option<crate::replay::StartAt>,
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
    pub run: crate::run::RunArgs,
    /// Config file whose `[nodes."PATTERN"]` tables give node access (default
    /// ~/.config/readygap/config.toml; with `--lab` only when given).
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// `readygap lab …`
#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Serve the lab until Ctrl-C; prints one JSON line with the API URL, kubeconfig path and
    /// namespace.
    Serve(crate::lab::serve::LabArgs),
}

/// Run a parsed command line; returns the process exit code.
pub fn run(cli: Cli) -> Result<i32> {
    let Some(command) = cli.command else {
        let hint = "t: trial · c: cold · d: delete · ? help".to_string();
        return runtime()?.block_on(crate::live::dashboard(
            *cli.live, cli.screen, None, "live", &hint,
        ));
    };
    match command {
        Command::Demo(args) => runtime()?.block_on(crate::live::demo(*args)),
        Command::Report {
            files,
            format,
            warnings,
        } => {
            let mut files_out = Vec::new();
            for path in report::expand_paths(&files)? {
                let r = report::report_file(&path)?;
                if warnings {
                    for w in &r.warnings {
                        eprintln!("warning: {w}");
                    }
                }
                files_out.push(r);
            }
            let text = report::render(&Report { files: files_out }, format)?;
            std::io::stdout().write_all(text.as_bytes())?;
            Ok(0)
        }
        Command::Run(cmd) => {
            let RunCommand { mut run, config } = *cmd;
            run.session.node_config = config;
            runtime()?.block_on(crate::run::run(run))
        }
        Command::DropCaches(args) => runtime()?.block_on(crate::node::cli::drop_caches_cli(args)),
        Command::Lab {
            command: LabCommand::Serve(args),
        } => runtime()?.block_on(async {
            let lab = crate::lab::serve::serve(args.to_options()?).await?;
            println!("{}", lab.announce());
            tokio::signal::ctrl_c()
                .await
                .wrap_err("waiting for Ctrl-C")?;
            lab.shutdown().await;
            Ok(0)
        }),
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
            let replay = crate::replay::ReplayOptions {
                speed,
                from,
                pause_at_marks,
            };
            crate::replay::run(&file, &replay, cfg.dashboard_options("replay", ""))
        }
        Command::Cast {
            file,
            output,
            size,
            theme,
            speed,
            idle_limit,
        } => {
            let rec = crate::record::jsonl::read(&file)?;
            for w in &rec.warnings {
                eprintln!("warning: {w}");
            }
            let (theme, unknown) = crate::ui::theme::Themes::builtin().pick(&theme);
            if let Some(msg) = unknown {
                eprintln!("warning: {msg}");
            }
            let view = crate::ui::view::ViewState {
                read_only: true,
                mode_label: "replay".into(),
                title: file.display().to_string(),
                ..Default::default()
            };
            let opts = crate::record::cast::CastOptions {
                width: size.0,
                height: size.1,
                speed,
                idle_limit: (idle_limit > 0.0).then_some(idle_limit),
                title: format!("readygap: {}", file.display()),
                ..Default::default()
            };
            let cast = crate::record::cast::export(&rec.events, &opts, |state, area, buf| {
                crate::ui::render(state, &view, &theme, area, buf)
            });
            std::fs::write(&output, cast.to_text())
                .wrap_err_with(|| format!("writing {}", output.display()))?;
            eprintln!(
                "wrote {} ({} events, {:.1} s)",
                output.display(),
                cast.events.len(),
                cast.header.duration
            );
            Ok(0)
        }
        Command::Export { file, csv } => {
            let loaded = report::load_trials(&file)?;
            let trials = loaded.trials;
            for w in &loaded.warnings {
                eprintln!("warning: {w}");
            }
            if csv.as_os_str() == "-" {
                labcsv::export(&trials, std::io::stdout().lock())?;
            } else {
                let out = std::fs::File::create(&csv)
                    .wrap_err_with(|| format!("creating {}", csv.display()))?;
                labcsv::export(&trials, out)
                    .wrap_err_with(|| format!("writing {}", csv.display()))?;
            }
            Ok(0)
        }
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
