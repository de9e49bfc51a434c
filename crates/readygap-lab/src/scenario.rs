//! Lab scenarios: how the `ollama` Deployment is set up (readiness probe, rollout strategy,
//! where the models live) and what the lab does around it, one per published experiment.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// When the kubelet of the lab reports the container Ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Readiness {
    /// No readiness probe: Ready as soon as the container started (the published baseline).
    Started,
    /// An HTTP probe on `/api/tags`.
    Http,
    /// A probe that sends a generate and waits for `done: true`.
    Inference,
}

/// A named scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// No probe, models on a PVC: the published pvc-recovery baseline.
    Baseline,
    /// Same as baseline (kept for the CLI: `--scenario none`).
    None,
    /// HTTP readiness probe on `/api/tags`.
    HttpReadiness,
    /// Inference readiness probe (a generate must finish).
    InferenceReadiness,
    /// Models on an emptyDir: every replacement starts with an empty model store.
    Emptydir,
    /// A 1B model resident, then a 3B inference under the 4 GiB limit: the runtime is
    /// OOM-killed and the kubelet restarts the container (lastState OOMKilled, exit 137,
    /// restartCount + 1). The trial driver sends the two requests; the lab reacts.
    OverlapOom,
    /// A rolling update with surge (maxSurge 1, maxUnavailable 0) and an inference probe,
    /// as in the published readiness experiment.
    Rollout,
    /// The `gpu` overlay (manifests/overlays/gpu): one `nvidia.com/gpu`, models in VRAM.
    Gpu,
    /// The `gpu` pod rolled out with surge (maxSurge 1, maxUnavailable 0) on a node with one
    /// GPU: the surge pod cannot be scheduled while the old pod holds the GPU (Pending,
    /// FailedScheduling "Insufficient nvidia.com/gpu"), so the rollout stalls.
    GpuSurge,
    /// The `gpu` pod rolled out with surge on a node whose one physical GPU is time-sliced
    /// into two `nvidia.com/gpu` (the NVIDIA device plugin's `sharing.timeSlicing`,
    /// replicas 2): the surge pod is scheduled next to the old one on the same GPU, both see
    /// the whole device (one UUID, its memory the sum of theirs), and a vLLM that finds too
    /// little free memory refuses to start (its `Free memory on device … less than desired
    /// GPU memory utilization` line) and is restarted, again and again.
    GpuShared,
    /// A shallow readiness probe and a liveness probe that sends an inference with a short
    /// timeout and no startupProbe (the classic mistake): the kubelet kills the container
    /// while the model is still loading, again and again.
    AggressiveLiveness,
}

/// Every scenario name, for help texts.
pub const NAMES: &[&str] = &[
    "baseline",
    "none",
    "http-readiness",
    "inference-readiness",
    "emptydir",
    "overlap-oom",
    "rollout",
    "gpu",
    "gpu-surge",
    "gpu-shared",
    "aggressive-liveness",
];

impl Scenario {
    /// The readiness rule of this scenario.
    pub fn readiness(&self) -> Readiness {
        match self {
            // gpu-shared: Ready once the server answers, so the rollout keeps the old pod
            // (and its VRAM) until the surge pod's engine is up, as the vllm overlay's
            // `GET /health` probe does.
            Scenario::HttpReadiness | Scenario::AggressiveLiveness | Scenario::GpuShared => {
                Readiness::Http
            }
            Scenario::InferenceReadiness | Scenario::Rollout => Readiness::Inference,
            _ => Readiness::Started,
        }
    }

    /// (maxSurge, maxUnavailable) of the Deployment's rolling update.
    pub fn strategy(&self) -> (i32, i32) {
        match self {
            Scenario::Rollout | Scenario::GpuSurge | Scenario::GpuShared => (1, 0),
            _ => (0, 1),
        }
    }

    /// Whether the pod asks for a GPU (`nvidia.com/gpu: 1`).
    pub fn gpu(&self) -> bool {
        matches!(
            self,
            Scenario::Gpu | Scenario::GpuSurge | Scenario::GpuShared
        )
    }

    /// How many `nvidia.com/gpu` the GPU node advertises for its one physical GPU (2 when
    /// time-sliced).
    pub fn gpu_replicas(&self) -> u32 {
        if *self == Scenario::GpuShared { 2 } else { 1 }
    }

    /// Whether the serving container gets the aggressive liveness probe (an inference with
    /// a 5 s timeout, failing after 2 misses, no startupProbe).
    pub fn aggressive_liveness(&self) -> bool {
        matches!(self, Scenario::AggressiveLiveness)
    }

    /// Whether models live on an emptyDir (lost with the pod) rather than the PVC.
    pub fn models_on_emptydir(&self) -> bool {
        matches!(self, Scenario::Emptydir)
    }

    /// Seconds between readiness probes (before the lab's speed factor).
    pub fn probe_period_seconds(&self) -> u32 {
        match self.readiness() {
            Readiness::Started => 0,
            Readiness::Http => 1,
            Readiness::Inference => 5,
        }
    }

    /// The scenario's name.
    pub fn name(&self) -> &'static str {
        match self {
            Scenario::Baseline => "baseline",
            Scenario::None => "none",
            Scenario::HttpReadiness => "http-readiness",
            Scenario::InferenceReadiness => "inference-readiness",
            Scenario::Emptydir => "emptydir",
            Scenario::OverlapOom => "overlap-oom",
            Scenario::Rollout => "rollout",
            Scenario::Gpu => "gpu",
            Scenario::GpuSurge => "gpu-surge",
            Scenario::GpuShared => "gpu-shared",
            Scenario::AggressiveLiveness => "aggressive-liveness",
        }
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Scenario {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "baseline" => Scenario::Baseline,
            "none" => Scenario::None,
            "http-readiness" => Scenario::HttpReadiness,
            "inference-readiness" => Scenario::InferenceReadiness,
            "emptydir" => Scenario::Emptydir,
            "overlap-oom" => Scenario::OverlapOom,
            "rollout" => Scenario::Rollout,
            "gpu" => Scenario::Gpu,
            "gpu-surge" => Scenario::GpuSurge,
            "gpu-shared" => Scenario::GpuShared,
            "aggressive-liveness" => Scenario::AggressiveLiveness,
            other => {
                return Err(format!(
                    "unknown scenario {other:?}; known: {}",
                    NAMES.join(", ")
                ));
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for n in NAMES {
            let s: Scenario = n.parse().unwrap();
            assert_eq!(s.name(), *n);
        }
        assert!("bogus".parse::<Scenario>().unwrap_err().contains("known:"));
    }

    #[test]
    fn readiness_and_strategy_per_scenario() {
        assert_eq!(Scenario::Baseline.readiness(), Readiness::Started);
        assert_eq!(Scenario::HttpReadiness.readiness(), Readiness::Http);
        assert_eq!(Scenario::Rollout.strategy(), (1, 0));
        assert_eq!(Scenario::Baseline.strategy(), (0, 1));
        assert!(Scenario::Emptydir.models_on_emptydir());
    }
}
