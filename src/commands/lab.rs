//! `readygap lab serve`: the built-in lab until Ctrl-C, announced as one JSON line with the
//! API URL, kubeconfig path and namespace.

use color_eyre::eyre::{Result, WrapErr, eyre};
use readygap_lab::ground_truth::GroundTruth;
use readygap_lab::profile::Profile;
use readygap_lab::scenario::Scenario;
use readygap_lab::serve::{LabOptions, serve};
use std::path::PathBuf;

/// The command-line arguments of `readygap lab serve` .
#[derive(clap::Args, Debug, Clone)]
pub struct LabArgs {
    /// Calibration profile (local-1b, local-3b, azure-1b, azure-3b, azure-3b-cold, azure-8b).
    #[arg(long, default_value = "local-3b")]
    pub profile: String,
    /// Scenario: baseline, none, http-readiness, inference-readiness, emptydir, overlap-oom, rollout.
    #[arg(long, default_value = "baseline")]
    pub scenario: Scenario,
    /// Divide every timing by this factor.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// Port of the API server on 127.0.0.1 (0: pick a free one).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Where to write the kubeconfig (default: a file in the temp directory).
    #[arg(long)]
    pub kubeconfig_out: Option<PathBuf>,
    /// Append the ground-truth log (JSON lines) to this file.
    #[arg(long)]
    pub ground_truth: Option<PathBuf>,
    /// Seed of the lab's random timings (same seed, same timings).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Start without the lab's own PVC, Service and Deployment: the workload is what you
    /// apply (`kubectl apply -k manifests/overlays/llama3.2-3b`).
    #[arg(long)]
    pub no_workload: bool,
}

impl LabArgs {
    /// Resolve the arguments (profile by name, ground-truth file opened).
    pub fn to_options(&self) -> Result<LabOptions> {
        let profile = Profile::named(&self.profile).ok_or_else(|| {
            let known: Vec<String> = Profile::all().into_iter().map(|p| p.name).collect();
            eyre!(
                "unknown profile {:?}; known: {}",
                self.profile,
                known.join(", ")
            )
        })?;
        if !(self.speed.is_finite() && self.speed > 0.0) {
            return Err(eyre!(
                "--speed must be a positive number, got {}",
                self.speed
            ));
        }
        let ground_truth = match &self.ground_truth {
            Some(p) => GroundTruth::to_file(p)
                .wrap_err_with(|| format!("opening the ground-truth log {}", p.display()))?,
            None => GroundTruth::in_memory(),
        };
        let mut o = LabOptions::new(profile);
        o.scenario = self.scenario;
        o.speed = self.speed;
        o.port = self.port;
        o.kubeconfig_out = self.kubeconfig_out.clone();
        o.ground_truth = ground_truth;
        o.builtin_workload = !self.no_workload;
        o.seed = self.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0)
        });
        Ok(o)
    }
}

/// `readygap lab serve`.
pub async fn lab_serve(args: LabArgs) -> Result<i32> {
    let lab = serve(args.to_options()?).await?;
    println!("{}", lab.announce());
    tokio::signal::ctrl_c()
        .await
        .wrap_err("waiting for Ctrl-C")?;
    lab.shutdown().await;
    Ok(0)
}
