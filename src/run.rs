//! run (stub while building).
#[derive(Debug, clap::Args)]
pub struct RunArgs {}
pub async fn run(_a: RunArgs) -> color_eyre::Result<i32> {
    Ok(0)
}
