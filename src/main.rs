//! The `readygap` binary: parses the command line and hands over to [`readygap::cli`].

use clap::Parser;

fn main() -> color_eyre::Result<()> {
    color_eyre::install()?;
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::WARN)
        .init();
    let cli = readygap::cli::Cli::parse();
    let code = readygap::cli::run(cli)?;
    std::process::exit(code);
}
