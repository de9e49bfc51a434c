//! `readygap lab serve`: the built-in lab until Ctrl-C, announced as one JSON line with the
//! API URL, kubeconfig path and namespace.

use crate::args::one_of;
use color_eyre::eyre::{Result, WrapErr, eyre};
use readygap_lab::engine::EngineKind;
use readygap_lab::ground_truth::GroundTruth;
use readygap_lab::scenario::Scenario;
use readygap_lab::serve::{LabOptions, serve};
use std::path::PathBuf;

/// The command-line arguments of `readygap lab serve`.
#[derive(clap::Args, Debug, Clone)]
pub struct LabArgs {
    /// Calibration profile (local-1b, local-3b, azure-1b, azure-3b, azure-3b-cold, azure-8b).
    #[arg(long, default_value = "local-3b")]
    pub profile: String,
    /// Scenario: baseline, none, http-readiness, inference-readiness, emptydir, overlap-oom, rollout, gpu, gpu-surge, gpu-shared, aggressive-liveness.
    #[arg(long, default_value = "baseline")]
    pub scenario: Scenario,
    /// Divide every timing by this factor.
    #[arg(long, default_value_t = 1.0, value_parser = crate::args::speed)]
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
    /// The Ollama version the runtimes imitate (default: the profile's, 0.12.6). 0.12.x loads
    /// next to resident models and is OOM-killed; 0.13+ on cgroup v2 evicts or refuses.
    #[arg(long, value_name = "VERSION", value_parser = readygap_lab::ollama_version::check)]
    pub ollama_version: Option<String>,
    /// What runs each pod's serving container: the lab's simulated runtime, or a real
    /// `ollama serve` per pod (peers from scripts/peers.sh; profile `real-smollm2`).
    #[arg(long, default_value = "simulated", value_parser = one_of(&EngineKind::NAMES))]
    pub engine: EngineKind,
    /// The server the simulated runtime imitates (ollama, llamacpp, vllm).
    #[arg(long, default_value = "ollama", value_parser = one_of(&readygap_lab::kube::shapes::Shape::NAMES))]
    pub server: readygap_lab::kube::shapes::Shape,
    /// Serve the API over TLS (a CA made at start, in the kubeconfig) and answer 401 to a
    /// request without the kubeconfig's token. Always on with a real `--engine`, whose exec
    /// runs commands on this machine.
    #[arg(long)]
    pub tls: bool,
}

impl LabArgs {
    /// Resolve the arguments (profile by name, ground-truth file opened).
    pub fn to_options(&self) -> Result<LabOptions> {
        let mut profile = readygap_lab::engine::profiles::resolve(self.engine, &self.profile, None)
            .map_err(|e| eyre!(e))?;
        let ground_truth = match &self.ground_truth {
            Some(p) => GroundTruth::to_file(p)
                .wrap_err_with(|| format!("opening the ground-truth log {}", p.display()))?,
            None => GroundTruth::in_memory(),
        };
        if let Some(v) = &self.ollama_version {
            profile.ollama_version = v.clone();
        }
        let mut o = LabOptions::new(profile);
        o.scenario = self.scenario;
        o.speed = self.speed;
        o.port = self.port;
        o.kubeconfig_out = self.kubeconfig_out.clone();
        o.ground_truth = ground_truth;
        o.builtin_workload = !self.no_workload;
        o.engine = self.engine;
        o.shape = self.server;
        o.tls = self.tls;
        // Without --seed: the clock's nanoseconds.
        o.seed = self
            .seed
            .unwrap_or_else(|| chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0) as u64);
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
