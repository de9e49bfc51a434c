//! Calibration profiles of the lab: how long each stage of a recovery takes (mean and spread
//! taken from `../shared/lab-data`), which model is served, its resident size and the memory
//! limit of the pod.

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

/// A model the lab's runtime knows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    /// Ollama name, e.g. `llama3.2:3b`.
    pub name: String,
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
}

/// A calibration profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// `local-1b`, `local-3b`, `azure-1b`, `azure-3b`, `azure-3b-cold`, `azure-8b`.
    pub name: String,
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
    /// Multiplier on model load time when the node's page cache was dropped.
    pub cold_load_factor: f64,
    /// Whether the node starts with a cold page cache.
    pub start_cold: bool,
}
