//! The readygap binary.

use clap::Parser;
use color_eyre::eyre::{Result, WrapErr};
use readygap::cli::{Cli, Command, LabCommand};

#[tokio::main]
async fn main() -> Result<()> {
    color_eyre::install()?;
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::WARN)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::Lab {
            command: LabCommand::Serve(args),
        } => {
            let lab = readygap::lab::serve::serve(args.to_options()?).await?;
            println!("{}", lab.announce());
            tokio::signal::ctrl_c()
                .await
                .wrap_err("waiting for Ctrl-C")?;
            lab.shutdown().await;
        }
    }
    Ok(())
}
