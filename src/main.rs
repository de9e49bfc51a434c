//! The `readygap` binary: parses the command line and hands over to [`readygap::cli`].

use clap::Parser;
use std::io::IsTerminal;
use std::sync::Mutex;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::prelude::*;

fn main() -> color_eyre::Result<()> {
    // Colour only on a terminal: a message written to a file or a pipe is plain text.
    let tty = std::io::stderr().is_terminal();
    color_eyre::config::HookBuilder::default()
        .theme(if tty {
            color_eyre::config::Theme::dark()
        } else {
            color_eyre::config::Theme::new()
        })
        .install()?;
    let cli = readygap::cli::Cli::parse();
    // Library diagnostics go to stderr for the line-oriented commands. The full-screen ones
    // (dashboard, demo, replay) must not write over the screen: there they go to the file
    // named by READYGAP_LOG, if any; sources report their failures on screen as events anyway.
    // kube's client logs every non-2xx answer (a runtime probed through the pod proxy before
    // it listens answers 503 on purpose), so it is kept to errors of its own making.
    let filter = Targets::new()
        .with_default(LevelFilter::WARN)
        .with_target("kube_client::client::builder", LevelFilter::OFF);
    // kube's watcher logs each failed list or watch as a Rust debug structure (a 403 as
    // `Api(ErrorResponse { … })`); readygap says the same in a sentence (the feed's state,
    // the run's error, the recording's note), so on stderr the watcher's own lines are left
    // out. The READYGAP_LOG file keeps them.
    let stderr_filter = filter
        .clone()
        .with_target("kube_runtime::watcher", LevelFilter::OFF);
    let full_screen = matches!(
        cli.command,
        None | Some(readygap::cli::Command::Demo(_)) | Some(readygap::cli::Command::Replay(_))
    );
    let layer = tracing_subscriber::fmt::layer();
    let layer = match std::env::var_os("READYGAP_LOG") {
        Some(path) => std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .ok()
            .map(|file| {
                layer
                    .with_writer(BoxMakeWriter::new(Mutex::new(file)))
                    .with_ansi(false)
            }),
        None => (!full_screen).then(|| {
            layer
                .with_writer(BoxMakeWriter::new(std::io::stderr))
                .with_ansi(tty)
        }),
    };
    let to_file = std::env::var_os("READYGAP_LOG").is_some();
    if let Some(layer) = layer {
        tracing_subscriber::registry()
            .with(layer.with_filter(if to_file { filter } else { stderr_filter }))
            .init();
    }
    let code = readygap::cli::run(cli)?;
    std::process::exit(code);
}
