//! Calibration profiles of the lab: how long each stage of a recovery takes (mean and spread
//! taken from the published k8s-llm-recovery-lab results in `data/published`), which model
//! is served, its size on disk and in memory, and the memory limit of the pod.
//!
//! # How a trial maps onto the stages
//!
//! The published trial is: delete the pod (T0) → a replacement pod reports ready (T1; the
//! baseline manifests had no readiness probe, so T1 = container started) → `GET /api/tags`
//! answers 200 (T2) → a non-streaming `POST /api/generate` (T3 sent, T4 done). The lab splits
//! it into these stages, each a truncated normal:
//!
//! | published interval | lab stages |
//! |---|---|
//! | pod_recovery = T1−T0 | `schedule` + `container_start` (kube side) |
//! | runtime_recovery = T2−T0 | the above + `runtime_listen` (runtime boot) |
//! | ready_to_inference = T4−T1 | `runtime_listen` + `request_overhead` + model `load` (×`cold_load_factor` when the node cache is cold) + `prompt_eval` + `eval` |
//!
//! The study's own script also spends 15–32 ms between T2 and T3 (column
//! `t3_inference_start_ms − t2_runtime_ms`); that is client time, left to the client, and is
//! under 1% of every published ready_to_inference mean.
//!
//! # Where every number comes from
//!
//! All means and standard deviations are over the 10 published runs of one file (columns
//! named as in the CSV headers, all in ms):
//!
//! - `schedule`: `new_pod_first_seen_ms − rollout_start_ms` of the readiness summaries
//!   (`local-mac/.../readiness/ollama-3b-inference-readiness-summary.csv`: 146.6 ± 40.4;
//!   `cloud-cpu/.../readiness/inference-readiness-summary.csv`: 71.8 ± 2.0). The recovery
//!   files only publish T1−T0, so this is the only split of it the study gives.
//! - `container_start`: mean(`pod_recovery_ms`) − schedule mean; its sd is
//!   sqrt(sd(pod_recovery)² − sd(schedule)²).
//! - `runtime_listen`: `ready_to_runtime_ms` (T2−T1).
//! - `request_overhead`: `request_wall_ms − load_duration_ms − prompt_eval_duration_ms −
//!   eval_duration_ms`: the client-visible time outside Ollama's stages (port-forward, HTTP).
//! - model `load`, `prompt_eval`, `eval`: `load_duration_ms`, `prompt_eval_duration_ms`,
//!   `eval_duration_ms`.
//! - `resident_bytes`: mean `memory_current_bytes` (cgroup v2 memory.current after T4) of the
//!   3B and 8B files. The 1B files have no memory column: the 1B resident size is its disk
//!   size scaled by the 3B resident/disk ratio of the same environment (an estimate).
//! - `cold_load_factor`: mean `load_duration_ms` of `cache/cold-cache-recovery.csv` (4606.1)
//!   over that of `cache/warm-cache-recovery.csv` (3951.8) = 1.1656 (the study's "~16.6%
//!   slower"). Measured on cloud-cpu 3B only; applied to every profile.
//! - `idle_bytes`: `cgroup memory current` of the idle 8B pod in
//!   `llama3.1-8b/environment/runtime-snapshot.txt` (14 987 264).
//! - Disk sizes and digests: the public Ollama library tags (`llama3.2:1b` 1.3 GB, `llama3.2:3b`
//!   2.0 GB, `llama3.1:8b` 4.9 GB, ID `46e0c10c039e` as in the published snapshot).
//!
//! Per-file figures used below (mean ± sd, ms):
//!
//! | profile | file | pod_recovery | ready_to_runtime | overhead | load | prompt_eval | eval |
//! |---|---|---|---|---|---|---|---|
//! | local-1b | local-mac/ollama/llama3.2-1b/pvc-recovery.csv | 1656.9 ± 280.3 | 772.5 ± 482.3 | 197.9 ± 19.0 | 5507.7 ± 583.2 | 2616.3 ± 492.7 | 332.7 ± 97.9 |
//! | local-3b | local-mac/ollama/llama3.2-3b/pvc-recovery-4gi.csv | 1961.9 ± 561.1 | 475.3 ± 303.0 | 244.2 ± 73.2 | 8596.3 ± 1790.1 | 4328.4 ± 371.3 | 633.5 ± 357.5 |
//! | azure-1b | cloud-cpu/ollama/llama3.2-1b/pvc-recovery.csv | 1606.0 ± 334.7 | 579.7 ± 338.1 | 127.2 ± 28.5 | 2161.3 ± 113.9 | 821.4 ± 183.5 | 123.1 ± 26.7 |
//! | azure-3b | cloud-cpu/ollama/llama3.2-3b/pvc-recovery-4gi.csv | 1689.4 ± 306.5 | 482.0 ± 285.2 | 114.8 ± 4.8 | 3961.8 ± 182.8 | 1269.6 ± 131.2 | 201.9 ± 13.4 |
//! | azure-3b-cold | cloud-cpu/ollama/llama3.2-3b/cache/cold-cache-recovery.csv | 1834.4 ± 293.9 | 543.9 ± 282.4 | 117.5 ± 2.2 | 3951.8 ± 159.6 (warm file) ×1.1656 | 772.0 ± 132.1 | 203.4 ± 62.8 |
//! | azure-8b | cloud-cpu/ollama/llama3.1-8b/pvc-recovery-16gi.csv | 1860.6 ± 856.2 | 551.9 ± 507.1 | 118.9 ± 4.9 | 3657.2 ± 2.5 | 197.0 ± 10.6 | 76.2 ± 1.0 |

use rand_distr::{Distribution, Normal};
use serde::{Deserialize, Serialize};

/// The duration of one stage: a mean and a standard deviation in milliseconds, sampled as a
/// normal distribution truncated to [min_ms, max_ms].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    pub mean_ms: f64,
    pub sd_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
}

impl Stage {
    /// A stage with the given mean and sd, truncated symmetrically around the mean (to ±2.5 sd,
    /// but never below 10% of the mean), so truncation does not move the mean.
    pub fn around(mean_ms: f64, sd_ms: f64) -> Self {
        let mean_ms = mean_ms.max(0.0);
        let sd_ms = sd_ms.max(0.0);
        let half = (2.5 * sd_ms).min(0.9 * mean_ms);
        Self {
            mean_ms,
            sd_ms,
            min_ms: mean_ms - half,
            max_ms: mean_ms + half,
        }
    }

    /// A stage that always takes `ms`.
    pub fn fixed(ms: f64) -> Self {
        Self::around(ms, 0.0)
    }

    /// One sample of the stage (before the lab's speed factor is applied).
    pub fn sample<R: rand::Rng>(&self, rng: &mut R) -> std::time::Duration {
        let lo = self.min_ms.max(0.0);
        let hi = self.max_ms.max(lo);
        let ms = match Normal::new(self.mean_ms, self.sd_ms) {
            Ok(normal) if self.sd_ms > 0.0 && hi > lo => {
                // Rejection sampling keeps the shape of the normal inside the bounds; the
                // bounds are at least ±0.1 sd wide in practice, so this ends quickly.
                let mut value = self.mean_ms;
                for _ in 0..64 {
                    let x = normal.sample(rng);
                    if (lo..=hi).contains(&x) {
                        value = x;
                        break;
                    }
                }
                value
            }
            _ => self.mean_ms,
        };
        duration_from_ms(ms.clamp(lo, hi.max(lo)))
    }
}

/// Milliseconds as a `Duration`, without panicking: negative or NaN is zero, too large is
/// `Duration::MAX`.
pub fn duration_from_ms(ms: f64) -> std::time::Duration {
    if ms.is_nan() || ms <= 0.0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::try_from_secs_f64(ms / 1000.0).unwrap_or(std::time::Duration::MAX)
}

/// A model the lab's runtime knows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    /// Ollama name, e.g. `llama3.2:3b`.
    pub name: String,
    /// Model family (`llama`).
    pub family: String,
    /// Size on disk in bytes (as `/api/tags` reports it).
    pub disk_bytes: u64,
    /// Resident size in bytes (as `/api/ps` reports it, and what memory.current rises to).
    pub resident_bytes: u64,
    /// Parameter size label, e.g. `3.2B`.
    pub parameter_size: String,
    /// Quantization label, e.g. `Q4_K_M`.
    pub quantization_level: String,
    /// Digest (sha256 hex).
    pub digest: String,
    /// Model load time (warm page cache).
    pub load: Stage,
    /// Prompt evaluation time.
    pub prompt_eval: Stage,
    /// Generation time.
    pub eval: Stage,
    /// The model can think (Ollama's `thinking` capability): its answer is preceded by
    /// `thinking` chunks unless the request says `"think": false`.
    #[serde(default)]
    pub thinking: bool,
}

impl ModelSpec {
    /// The short ID the Ollama CLI prints (first 12 hex digits of the digest).
    pub fn short_id(&self) -> &str {
        self.digest.get(..12).unwrap_or(&self.digest)
    }
}

/// A calibration profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// `local-1b`, `local-3b`, `azure-1b`, `azure-3b`, `azure-3b-cold`, `azure-8b`.
    pub name: String,
    /// The published file the profile was calibrated from.
    pub source: String,
    /// The model served (and pulled onto the PVC) by default.
    pub model: String,
    /// Every model on the PVC (the served one first).
    pub models: Vec<ModelSpec>,
    /// Memory limit of the serving container in bytes.
    pub memory_limit_bytes: u64,
    /// Memory of the idle runtime (about 14 MiB).
    pub idle_bytes: u64,
    /// Replacement requested → replacement pod scheduled.
    pub schedule: Stage,
    /// Scheduled → container running.
    pub container_start: Stage,
    /// Container running → runtime answers HTTP.
    pub runtime_listen: Stage,
    /// Client-visible time of a generate request outside Ollama's own stages.
    pub request_overhead: Stage,
    /// Multiplier on model load time when the node's page cache was dropped.
    pub cold_load_factor: f64,
    /// Whether the node starts with a cold page cache.
    pub start_cold: bool,
    /// Whether the pod sees cgroup v1 files (`/sys/fs/cgroup/memory/...`) instead of v2.
    pub cgroup_v1: bool,
    /// Context length the runtime reports for resident models.
    pub context_length: u32,
    /// The Ollama version imitated (see `lab::ollama_version`): 0.12.x is OOM-killed by a
    /// load that does not fit, 0.13+ on cgroup v2 evicts a resident model or refuses.
    #[serde(default = "default_ollama_version")]
    pub ollama_version: String,
}

fn default_ollama_version() -> String {
    crate::ollama_version::DEFAULT.to_string()
}

/// The published means a profile is meant to reproduce (ms).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrialMeans {
    /// T1−T0.
    pub pod_recovery_ms: f64,
    /// T2−T0.
    pub runtime_recovery_ms: f64,
    /// T4−T1.
    pub ready_to_inference_ms: f64,
}

const GIB: u64 = 1024 * 1024 * 1024;
/// `cgroup memory current` of the idle runtime in the published 8B snapshot.
const IDLE_BYTES: u64 = 14_987_264;
/// Cold over warm mean `load_duration_ms` (cache/cold-cache-recovery.csv 4606.1 over
/// cache/warm-cache-recovery.csv 3951.8).
const COLD_LOAD_FACTOR: f64 = 4606.1 / 3951.8;

const DIGEST_1B: &str = "baf6a787fdffd633537aa2eb51cfd54cb93ff08e28040095462bb63daf552878";
const DIGEST_3B: &str = "a80c4f17acd55265feec403c7aef86be0c25983ab279d83f3bcd3abbcb5b8b72";
const DIGEST_8B: &str = "46e0c10c039e019119339687c3c1757cc81b9da49709a3b3924863ba87ca666e";
const DISK_1B: u64 = 1_321_098_329;
const DISK_3B: u64 = 2_019_393_189;
const DISK_8B: u64 = 4_920_753_328;

/// Timings of one model in one environment: (load, prompt_eval, eval), each (mean, sd) in ms.
type ModelTimings = ((f64, f64), (f64, f64), (f64, f64));

fn llama32_1b(t: ModelTimings, resident_bytes: u64) -> ModelSpec {
    model("llama3.2:1b", "1.2B", DISK_1B, resident_bytes, DIGEST_1B, t)
}

fn llama32_3b(t: ModelTimings, resident_bytes: u64) -> ModelSpec {
    model("llama3.2:3b", "3.2B", DISK_3B, resident_bytes, DIGEST_3B, t)
}

fn model(
    name: &str,
    parameter_size: &str,
    disk_bytes: u64,
    resident_bytes: u64,
    digest: &str,
    (load, prompt_eval, eval): ModelTimings,
) -> ModelSpec {
    ModelSpec {
        name: name.to_string(),
        family: "llama".to_string(),
        disk_bytes,
        resident_bytes,
        parameter_size: parameter_size.to_string(),
        quantization_level: "Q4_K_M".to_string(),
        digest: digest.to_string(),
        load: Stage::around(load.0, load.1),
        prompt_eval: Stage::around(prompt_eval.0, prompt_eval.1),
        eval: Stage::around(eval.0, eval.1),
        thinking: false,
    }
}

/// A model that thinks (named `qwen3:1.7b`, about 1.4 GB on disk as the Ollama library lists
/// it), for tests and demos of thinking streams; add it to a profile's `models`. Not in the
/// published study: its timings are the cloud-cpu llama3.2:1b figures, its resident size is
/// its disk size scaled by the 3B resident/disk ratio (an estimate), and its digest is the
/// lab's own (not the library's).
pub fn thinking_model() -> ModelSpec {
    const DISK: u64 = 1_359_300_000;
    let mut m = model(
        "qwen3:1.7b",
        "2.0B",
        DISK,
        (DISK as f64 * CLOUD_3B_RESIDENT as f64 / DISK_3B as f64) as u64,
        "1ab0000000000000000000000000000000000000000000000000000000000001",
        CLOUD_1B,
    );
    m.family = "qwen3".into();
    m.thinking = true;
    m
}

/// 1B resident size: its disk size times the 3B resident/disk ratio of the environment.
fn scaled_1b_resident(resident_3b: u64) -> u64 {
    (DISK_1B as f64 * resident_3b as f64 / DISK_3B as f64) as u64
}

// local-mac figures.
const LOCAL_SCHEDULE: (f64, f64) = (146.6, 40.4);
const LOCAL_1B: ModelTimings = ((5507.7, 583.2), (2616.3, 492.7), (332.7, 97.9));
const LOCAL_3B: ModelTimings = ((8596.3, 1790.1), (4328.4, 371.3), (633.5, 357.5));
const LOCAL_3B_RESIDENT: u64 = 2_925_813_350;
// cloud-cpu figures.
const CLOUD_SCHEDULE: (f64, f64) = (71.8, 2.0);
const CLOUD_1B: ModelTimings = ((2161.3, 113.9), (821.4, 183.5), (123.1, 26.7));
const CLOUD_3B: ModelTimings = ((3961.8, 182.8), (1269.6, 131.2), (201.9, 13.4));
const CLOUD_3B_COLD: ModelTimings = ((3951.8, 159.6), (772.0, 132.1), (203.4, 62.8));
const CLOUD_8B: ModelTimings = ((3657.2, 2.5), (197.0, 10.6), (76.2, 1.0));
const CLOUD_3B_RESIDENT: u64 = 2_640_238_592;
const CLOUD_8B_RESIDENT: u64 = 5_667_214_541;

fn local_models() -> [ModelSpec; 2] {
    [
        llama32_1b(LOCAL_1B, scaled_1b_resident(LOCAL_3B_RESIDENT)),
        llama32_3b(LOCAL_3B, LOCAL_3B_RESIDENT),
    ]
}

fn cloud_models(three_b: ModelTimings) -> [ModelSpec; 3] {
    [
        llama32_1b(CLOUD_1B, scaled_1b_resident(CLOUD_3B_RESIDENT)),
        llama32_3b(three_b, CLOUD_3B_RESIDENT),
        model(
            "llama3.1:8b",
            "8.0B",
            DISK_8B,
            CLOUD_8B_RESIDENT,
            DIGEST_8B,
            CLOUD_8B,
        ),
    ]
}

/// The per-file recovery figures of one profile: (pod_recovery, ready_to_runtime,
/// request_overhead), each (mean, sd) in ms.
struct Recovery {
    pod: (f64, f64),
    listen: (f64, f64),
    overhead: (f64, f64),
}

#[allow(clippy::too_many_arguments)]
fn build(
    name: &str,
    source: &str,
    served: &str,
    models: Vec<ModelSpec>,
    memory_limit_bytes: u64,
    schedule: (f64, f64),
    r: Recovery,
    start_cold: bool,
) -> Profile {
    // Put the served model first.
    let mut models = models;
    models.sort_by_key(|m| m.name != served);
    let container_sd = (r.pod.1.powi(2) - schedule.1.powi(2)).max(0.0).sqrt();
    Profile {
        name: name.to_string(),
        source: source.to_string(),
        model: served.to_string(),
        models,
        memory_limit_bytes,
        idle_bytes: IDLE_BYTES,
        schedule: Stage::around(schedule.0, schedule.1),
        container_start: Stage::around(r.pod.0 - schedule.0, container_sd),
        runtime_listen: Stage::around(r.listen.0, r.listen.1),
        request_overhead: Stage::around(r.overhead.0, r.overhead.1),
        cold_load_factor: COLD_LOAD_FACTOR,
        start_cold,
        cgroup_v1: false,
        context_length: 4096,
        ollama_version: default_ollama_version(),
    }
}

impl Profile {
    /// The profile with this name, if any.
    pub fn named(name: &str) -> Option<Profile> {
        Self::all().into_iter().find(|p| p.name == name)
    }

    /// Every built-in profile.
    pub fn all() -> Vec<Profile> {
        vec![
            build(
                "local-1b",
                "local-mac/ollama/llama3.2-1b/pvc-recovery.csv",
                "llama3.2:1b",
                local_models().to_vec(),
                4 * GIB,
                LOCAL_SCHEDULE,
                Recovery {
                    pod: (1656.9, 280.3),
                    listen: (772.5, 482.3),
                    overhead: (197.9, 19.0),
                },
                false,
            ),
            build(
                "local-3b",
                "local-mac/ollama/llama3.2-3b/pvc-recovery-4gi.csv",
                "llama3.2:3b",
                local_models().to_vec(),
                4 * GIB,
                LOCAL_SCHEDULE,
                Recovery {
                    pod: (1961.9, 561.1),
                    listen: (475.3, 303.0),
                    overhead: (244.2, 73.2),
                },
                false,
            ),
            build(
                "azure-1b",
                "cloud-cpu/ollama/llama3.2-1b/pvc-recovery.csv",
                "llama3.2:1b",
                cloud_models(CLOUD_3B).to_vec(),
                4 * GIB,
                CLOUD_SCHEDULE,
                Recovery {
                    pod: (1606.0, 334.7),
                    listen: (579.7, 338.1),
                    overhead: (127.2, 28.5),
                },
                false,
            ),
            build(
                "azure-3b",
                "cloud-cpu/ollama/llama3.2-3b/pvc-recovery-4gi.csv",
                "llama3.2:3b",
                cloud_models(CLOUD_3B).to_vec(),
                4 * GIB,
                CLOUD_SCHEDULE,
                Recovery {
                    pod: (1689.4, 306.5),
                    listen: (482.0, 285.2),
                    overhead: (114.8, 4.8),
                },
                false,
            ),
            build(
                "azure-3b-cold",
                "cloud-cpu/ollama/llama3.2-3b/cache/cold-cache-recovery.csv",
                "llama3.2:3b",
                cloud_models(CLOUD_3B_COLD).to_vec(),
                4 * GIB,
                CLOUD_SCHEDULE,
                Recovery {
                    pod: (1834.4, 293.9),
                    listen: (543.9, 282.4),
                    overhead: (117.5, 2.2),
                },
                true,
            ),
            build(
                "azure-8b",
                "cloud-cpu/ollama/llama3.1-8b/pvc-recovery-16gi.csv",
                "llama3.1:8b",
                cloud_models(CLOUD_3B).to_vec(),
                16 * GIB,
                CLOUD_SCHEDULE,
                Recovery {
                    pod: (1860.6, 856.2),
                    listen: (551.9, 507.1),
                    overhead: (118.9, 4.9),
                },
                false,
            ),
        ]
    }

    /// Check a (possibly user-supplied) profile: finite, non-negative stages; sizes below
    /// 1 PiB; the served model among the models; a sane cold-load factor.
    pub fn validate(&self) -> Result<(), String> {
        const MAX_BYTES: u64 = 1 << 50;
        let stage_ok = |what: &str, s: &Stage| -> Result<(), String> {
            let values = [s.mean_ms, s.sd_ms, s.min_ms, s.max_ms];
            if values.iter().all(|v| v.is_finite()) && s.mean_ms >= 0.0 && s.sd_ms >= 0.0 {
                Ok(())
            } else {
                Err(format!(
                    "profile {}: stage {what} is invalid: {s:?}",
                    self.name
                ))
            }
        };
        stage_ok("schedule", &self.schedule)?;
        stage_ok("container_start", &self.container_start)?;
        stage_ok("runtime_listen", &self.runtime_listen)?;
        stage_ok("request_overhead", &self.request_overhead)?;
        if !(self.cold_load_factor.is_finite() && (0.0..=100.0).contains(&self.cold_load_factor)) {
            return Err(format!(
                "profile {}: cold_load_factor {} is not in [0, 100]",
                self.name, self.cold_load_factor
            ));
        }
        if self.memory_limit_bytes > MAX_BYTES || self.idle_bytes > MAX_BYTES {
            return Err(format!("profile {}: memory sizes above 1 PiB", self.name));
        }
        if self.models.len() > 1024 {
            return Err(format!("profile {}: more than 1024 models", self.name));
        }
        for m in &self.models {
            if m.disk_bytes > MAX_BYTES || m.resident_bytes > MAX_BYTES {
                return Err(format!("model {}: sizes above 1 PiB", m.name));
            }
            stage_ok(&format!("{} load", m.name), &m.load)?;
            stage_ok(&format!("{} prompt_eval", m.name), &m.prompt_eval)?;
            stage_ok(&format!("{} eval", m.name), &m.eval)?;
        }
        if self.served_model().is_none() {
            return Err(format!(
                "profile {}: served model {} is not among its models",
                self.name, self.model
            ));
        }
        Ok(())
    }

    /// The served model.
    pub fn served_model(&self) -> Option<&ModelSpec> {
        self.model_named(&self.model)
    }

    /// A model of this profile by name.
    pub fn model_named(&self, name: &str) -> Option<&ModelSpec> {
        self.models.iter().find(|m| m.name == name)
    }

    /// The means of the published intervals that this profile's stage means add up to, for a
    /// trial with the served model (cold page cache when `start_cold`).
    pub fn trial_means(&self) -> TrialMeans {
        let pod = self.schedule.mean_ms + self.container_start.mean_ms;
        let (load, prompt_eval, eval) = self
            .served_model()
            .map(|m| (m.load.mean_ms, m.prompt_eval.mean_ms, m.eval.mean_ms))
            .unwrap_or_default();
        let load = if self.start_cold {
            load * self.cold_load_factor
        } else {
            load
        };
        TrialMeans {
            pod_recovery_ms: pod,
            runtime_recovery_ms: pod + self.runtime_listen.mean_ms,
            ready_to_inference_ms: self.runtime_listen.mean_ms
                + self.request_overhead.mean_ms
                + load
                + prompt_eval
                + eval,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use std::collections::HashMap;
    use std::path::PathBuf;

    /// The published results, part of the repository (`data/published`, see its SOURCE.md).
    fn lab_data() -> PathBuf {
        let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/published");
        assert!(
            p.join("results").is_dir(),
            "{} is missing from the repository",
            p.display()
        );
        p
    }

    /// Column name → values of a CSV file with a header line and no quoted fields.
    fn columns(path: &std::path::Path) -> HashMap<String, Vec<f64>> {
        let text = std::fs::read_to_string(path).expect("read csv");
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().expect("header").split(',').collect();
        let mut cols: HashMap<String, Vec<f64>> = HashMap::new();
        for line in lines.filter(|l| !l.is_empty()) {
            for (name, cell) in header.iter().zip(line.split(',')) {
                if let Ok(v) = cell.parse::<f64>() {
                    cols.entry(name.to_string()).or_default().push(v);
                }
            }
        }
        cols
    }

    fn mean(v: &[f64]) -> f64 {
        v.iter().sum::<f64>() / v.len() as f64
    }

    fn within(actual: f64, published: f64, tolerance: f64) -> bool {
        (actual - published).abs() <= tolerance * published.abs()
    }

    #[test]
    fn profile_stage_means_reproduce_the_published_means() {
        let root = lab_data();
        let results = root.join("results");
        for profile in Profile::all() {
            let cols = columns(&results.join(&profile.source));
            let published = TrialMeans {
                pod_recovery_ms: mean(&cols["pod_recovery_ms"]),
                runtime_recovery_ms: mean(&cols["runtime_recovery_ms"]),
                ready_to_inference_ms: mean(&cols["ready_to_inference_ms"]),
            };
            let lab = profile.trial_means();
            for (what, l, p) in [
                (
                    "pod_recovery",
                    lab.pod_recovery_ms,
                    published.pod_recovery_ms,
                ),
                (
                    "runtime_recovery",
                    lab.runtime_recovery_ms,
                    published.runtime_recovery_ms,
                ),
                (
                    "ready_to_inference",
                    lab.ready_to_inference_ms,
                    published.ready_to_inference_ms,
                ),
            ] {
                assert!(
                    within(l, p, 0.05),
                    "{}: {what} lab {l:.1} ms vs published {p:.1} ms",
                    profile.name
                );
            }
            // The served model's load time alone also matches its column.
            let served = profile.served_model().expect("served model");
            let factor = if profile.start_cold {
                profile.cold_load_factor
            } else {
                1.0
            };
            let load = mean(&cols["load_duration_ms"]);
            assert!(
                within(served.load.mean_ms * factor, load, 0.05),
                "{}: load {} vs published {load}",
                profile.name,
                served.load.mean_ms * factor
            );
            // Resident sizes follow memory.current where the file has it (warm loads only:
            // the cold file's memory.current includes page cache charged up to the limit).
            if let Some(mem) = cols.get("memory_current_bytes")
                && !profile.start_cold
            {
                let m = mean(mem);
                assert!(
                    within(served.resident_bytes as f64, m, 0.05),
                    "{}: resident {} vs memory_current {m}",
                    profile.name,
                    served.resident_bytes
                );
            }
        }
    }

    #[test]
    fn cold_load_factor_is_cold_over_warm_load_duration() {
        let root = lab_data();
        let cache = root.join("results/cloud-cpu/ollama/llama3.2-3b/cache");
        let cold = mean(&columns(&cache.join("cold-cache-recovery.csv"))["load_duration_ms"]);
        let warm = mean(&columns(&cache.join("warm-cache-recovery.csv"))["load_duration_ms"]);
        let measured = cold / warm;
        assert!((measured - 1.166).abs() < 0.01, "cold/warm = {measured}");
        for p in Profile::all() {
            assert!(
                (p.cold_load_factor - measured).abs() < 0.005,
                "{}: {} vs {measured}",
                p.name,
                p.cold_load_factor
            );
        }
    }

    #[test]
    fn every_named_profile_exists_with_limits_and_realistic_sizes() {
        let names = [
            "local-1b",
            "local-3b",
            "azure-1b",
            "azure-3b",
            "azure-3b-cold",
            "azure-8b",
        ];
        assert_eq!(Profile::all().len(), names.len());
        for name in names {
            let p = Profile::named(name).expect(name);
            let served = p.served_model().expect("served model on the PVC");
            assert_eq!(p.models[0].name, p.model, "served model first");
            let limit = if name.ends_with("8b") { 16 } else { 4 };
            assert_eq!(p.memory_limit_bytes, limit * GIB);
            assert!(served.resident_bytes > served.disk_bytes);
            assert!(served.resident_bytes < p.memory_limit_bytes);
        }
        assert!(Profile::named("nope").is_none());
        // The published OOM case: 1B resident then 3B does not fit under 4 GiB.
        for name in ["local-1b", "azure-1b", "local-3b", "azure-3b"] {
            let p = Profile::named(name).expect(name);
            let one = p.model_named("llama3.2:1b").expect("1b");
            let three = p.model_named("llama3.2:3b").expect("3b");
            assert!(
                p.idle_bytes + one.resident_bytes + three.resident_bytes > p.memory_limit_bytes,
                "{name}: 1B+3B must exceed the limit"
            );
        }
    }

    #[test]
    fn built_in_profiles_validate_and_bad_ones_do_not() {
        for p in Profile::all() {
            assert_eq!(p.validate(), Ok(()), "{}", p.name);
        }
        let good = Profile::named("azure-3b").expect("profile");
        let mut bad = good.clone();
        bad.cold_load_factor = f64::NAN;
        assert!(bad.validate().unwrap_err().contains("cold_load_factor"));
        let mut bad = good.clone();
        bad.models[0].load.mean_ms = f64::INFINITY;
        assert!(bad.validate().unwrap_err().contains("load"));
        let mut bad = good.clone();
        bad.models[0].resident_bytes = u64::MAX;
        assert!(bad.validate().unwrap_err().contains("1 PiB"));
        let mut bad = good;
        bad.model = "other:1b".into();
        assert!(bad.validate().unwrap_err().contains("served model"));
    }

    #[test]
    fn durations_from_bad_numbers_do_not_panic() {
        use std::time::Duration;
        assert_eq!(duration_from_ms(f64::NAN), Duration::ZERO);
        assert_eq!(duration_from_ms(-5.0), Duration::ZERO);
        assert_eq!(duration_from_ms(f64::INFINITY), Duration::MAX);
        assert_eq!(duration_from_ms(1500.0), Duration::from_millis(1500));
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let weird = Stage {
            mean_ms: f64::NAN,
            sd_ms: f64::NAN,
            min_ms: f64::NAN,
            max_ms: f64::NAN,
        };
        assert_eq!(weird.sample(&mut rng), Duration::ZERO);
    }

    #[test]
    fn samples_stay_in_bounds_and_keep_the_mean() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for stage in [
            Stage::around(772.5, 482.3),
            Stage::around(3657.2, 2.5),
            Stage::around(100.0, 0.0),
        ] {
            let n = 20_000;
            let mut sum = 0.0;
            for _ in 0..n {
                let ms = stage.sample(&mut rng).as_secs_f64() * 1000.0;
                assert!(
                    ms >= stage.min_ms - 1e-6 && ms <= stage.max_ms + 1e-6,
                    "{ms} outside {stage:?}"
                );
                sum += ms;
            }
            let m = sum / n as f64;
            assert!(
                within(m, stage.mean_ms, 0.02),
                "sample mean {m} vs {stage:?}"
            );
        }
    }
}
