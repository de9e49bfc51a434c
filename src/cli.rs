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
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
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
    Run(Box<crate::run::RunArgs>),
    /// The built-in lab.
    Lab {
        #[command(subcommand)]
        command: LabCommand,
    },
    /// Write the trials of a recording (or CSV) in the study's CSV column order.
    Export {
        file: PathBuf,
        /// The CSV to write (`-` for stdout).
        #[arg(long)]
        csv: PathBuf,
    },
}

/// `readygap lab …`
#[derive(Debug, Subcommand)]
pub enum LabCommand {
    /// Serve the lab (Kubernetes API + Ollama-compatible runtimes on loopback) until Ctrl-C.
    Serve(crate::lab::serve::LabArgs),
}

/// Run a parsed command line; returns the process exit code.
pub fn run(cli: Cli) -> Result<i32> {
    match cli.command {
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
        Command::Run(args) => runtime()?.block_on(crate::run::run(*args)),
        Command::Lab {
            command: LabCommand::Serve(args),
        } => runtime()?.block_on(async move {
            let lab = crate::lab::serve::serve(args.to_options()?).await?;
            println!("{}", lab.announce());
            tokio::signal::ctrl_c()
                .await
                .wrap_err("waiting for Ctrl-C")?;
            lab.shutdown().await;
            Ok(0)
        }),
        Command::DropCaches(args) => runtime()?.block_on(crate::node::cli::drop_caches_cli(args)),
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
