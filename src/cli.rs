//! Command line of readygap (for now only `readygap lab serve`; the lead merges the rest).

use crate::lab::serve::LabArgs;
use clap::{Parser, Subcommand};

/// readygap: a terminal dashboard and instrument for LLM recovery experiments on Kubernetes.
#[derive(Parser, Debug)]
#[command(name = "readygap", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// The built-in lab.
    Lab {
        #[command(subcommand)]
        command: LabCommand,
    },
}

/// `readygap lab …`
#[derive(Subcommand, Debug)]
pub enum LabCommand {
    /// Serve the lab (Kubernetes API + Ollama-compatible runtimes on loopback) until Ctrl-C.
    Serve(LabArgs),
}
