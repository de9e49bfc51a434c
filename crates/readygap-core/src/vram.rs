//! GPUs shared by pods and how full they are, pure: which pods hold which GPU (by the UUID
//! their GPU memory samples name), each GPU's latest used and total, each pod's own VRAM
//! where its runtime says it (Ollama's `size_vram`), and the engines' out-of-memory lines.
//! Kubernetes neither schedules nor limits VRAM: pods given one GPU (time-slicing, MPS)
//! each see the whole device, and the one that loads last can fill it and fail. What is
//! found here becomes the verdicts `vram_overcommit` and `rollout_stalled` (a surge pod
//! Running but stuck loading on a full GPU) in `verdict.rs`.
//!
//! `nvidia-smi --query-gpu`'s `memory.used` and DCGM's `DCGM_FI_DEV_FB_USED` are the whole
//! device's use: the same figure in every pod that holds the GPU, so the latest sample of
//! any of them is the GPU's. A pod's own share is known only from its runtime.

use crate::event::{ResidentModel, Timestamp};
use crate::gpu::GpuMemory;
use crate::units::Gib;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A GPU whose used memory reaches this fraction of its total is full: nothing more of any
/// size worth loading fits (vLLM takes 0.9 of the total by default, so one vLLM alone stays
/// under it).
pub const FULL: f64 = 0.95;

const GIB: f64 = (1u64 << 30) as f64;

/// One GPU as its latest sample gave it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct GpuSeen {
    used: u64,
    total: u64,
    at: Option<Timestamp>,
}

/// A full GPU: its figures and every pod that holds it, with the pod's own VRAM if known.
#[derive(Debug, Clone, PartialEq)]
pub struct FullGpu {
    pub uuid: String,
    pub used: u64,
    pub total: u64,
    pub pods: Vec<(String, Option<u64>)>,
}

impl FullGpu {
    /// Shared by two pods or more.
    pub fn shared(&self) -> bool {
        self.pods.len() > 1
    }

    /// `GPU-1ab00000… 23.1 of 24.0 GiB used (96 %), held by a (11.2 GiB), b (its share not known)`.
    pub fn describe(&self) -> String {
        let pods: Vec<String> = self
            .pods
            .iter()
            .map(|(p, v)| match v {
                Some(b) => format!("{p} ({:.1})", Gib(*b)),
                None => format!("{p} (its share not known)"),
            })
            .collect();
        format!(
            "GPU {} {:.1} of {:.1} GiB used ({:.0} %), held by {}",
            short(&self.uuid),
            self.used as f64 / GIB,
            self.total as f64 / GIB,
            100.0 * self.used as f64 / self.total.max(1) as f64,
            pods.join(", ")
        )
    }

    /// The same as structured evidence.
    pub fn to_json(&self) -> serde_json::Value {
        let pods: Vec<serde_json::Value> = self
            .pods
            .iter()
            .map(|(p, v)| serde_json::json!({"pod": p, "vram_bytes": v}))
            .collect();
        serde_json::json!({"gpu": self.uuid, "used_bytes": self.used,
            "total_bytes": self.total, "pods": pods})
    }
}

/// The first 12 characters of a GPU UUID (`GPU-5b6c3a2e`): enough to tell GPUs apart.
fn short(uuid: &str) -> &str {
    uuid.get(..12).unwrap_or(uuid)
}

/// The GPUs, their holders and the out-of-memory lines seen so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuShare {
    /// GPU UUID → its latest figures.
    gpus: BTreeMap<String, GpuSeen>,
    /// Pod → the GPUs of its latest sample.
    held: BTreeMap<String, Vec<String>>,
    /// Pod → the VRAM of its resident models, as its runtime says it.
    runtime_vram: BTreeMap<String, u64>,
    /// Pod → its first out-of-memory line: (when, the line).
    oom_line: BTreeMap<String, (Timestamp, String)>,
}

impl GpuShare {
    /// A GPU memory sample of `pod`.
    pub fn sample(&mut self, ts: Timestamp, pod: &str, gpus: &[GpuMemory]) {
        for g in gpus.iter().filter(|g| !g.uuid.is_empty()) {
            let seen = GpuSeen {
                used: g.used,
                total: g.total,
                at: Some(ts),
            };
            self.gpus.insert(g.uuid.clone(), seen);
        }
        let uuids = gpus.iter().map(|g| g.uuid.clone()).collect();
        self.held.insert(pod.to_string(), uuids);
    }

    /// What `/api/ps` says `pod` holds in VRAM.
    pub fn residency(&mut self, pod: &str, models: &[ResidentModel]) {
        // Zero is "not said" (vLLM and llama.cpp report no VRAM), not an empty GPU.
        let vram: u64 = models.iter().map(|m| m.size_vram).sum();
        if vram > 0 {
            self.runtime_vram.insert(pod.to_string(), vram);
        } else {
            self.runtime_vram.remove(pod);
        }
    }

    /// A line of `pod`'s log: true when it is the pod's first out-of-memory line.
    pub fn log_line(&mut self, ts: Timestamp, pod: &str, text: &str) -> bool {
        if !crate::runtime_log::gpu_out_of_memory(text) || self.oom_line.contains_key(pod) {
            return false;
        }
        self.oom_line
            .insert(pod.to_string(), (ts, text.trim().to_string()));
        true
    }

    /// The pod's first out-of-memory line.
    pub fn oom_line(&self, pod: &str) -> Option<&(Timestamp, String)> {
        self.oom_line.get(pod)
    }

    /// The pod is gone: it holds nothing.
    pub fn forget(&mut self, pod: &str) {
        self.held.remove(pod);
        self.runtime_vram.remove(pod);
        self.oom_line.remove(pod);
    }

    /// The pod's container restarted: its runtime's figure starts over; its first
    /// out-of-memory line stays the pod's (an engine that keeps failing on a full GPU says it
    /// again on each start).
    pub fn restarted(&mut self, pod: &str) {
        self.runtime_vram.remove(pod);
    }

    /// The GPUs `pod` holds, each with its figures and every pod holding it.
    fn of_pod(&self, pod: &str) -> impl Iterator<Item = FullGpu> + '_ {
        self.held.get(pod).into_iter().flatten().filter_map(|uuid| {
            let g = self.gpus.get(uuid)?;
            let pods = self
                .held
                .iter()
                .filter(|(_, u)| u.contains(uuid))
                .map(|(p, _)| (p.clone(), self.runtime_vram.get(p).copied()))
                .collect();
            Some(FullGpu {
                uuid: uuid.clone(),
                used: g.used,
                total: g.total,
                pods,
            })
        })
    }

    /// A GPU of `pod` that is full (used ≥ [`FULL`] of its total).
    pub fn full(&self, pod: &str) -> Option<FullGpu> {
        self.of_pod(pod)
            .find(|g| g.total > 0 && g.used as f64 >= FULL * g.total as f64)
    }

    /// A GPU of `pod`, full or not (the figures an out-of-memory verdict quotes).
    pub fn any(&self, pod: &str) -> Option<FullGpu> {
        self.of_pod(pod).next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn at(s: i64) -> Timestamp {
        chrono::DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
    }

    fn gpu(uuid: &str, used: u64) -> GpuMemory {
        GpuMemory {
            index: 0,
            uuid: uuid.into(),
            used,
            total: 24 * GIB,
        }
    }

    fn resident(vram: u64) -> ResidentModel {
        ResidentModel {
            name: "m".into(),
            size: vram + GIB,
            size_vram: vram,
            ..ResidentModel::default()
        }
    }

    /// Two pods naming one GPU share it; the latest sample is the device's figure; a pod on
    /// its own GPU shares nothing; a deleted pod holds nothing.
    #[test]
    fn pods_naming_one_gpu_share_it_and_the_latest_sample_is_its_figure() {
        let mut s = GpuShare::default();
        s.sample(at(0), "a", &[gpu("GPU-aaaaaaaa-1", 11 * GIB)]);
        s.residency("a", &[resident(11 * GIB)]);
        s.sample(at(1), "c", &[gpu("GPU-cccccccc-1", 23 * GIB)]);
        assert!(s.full("a").is_none(), "11 of 24 GiB is not full");
        let c = s.full("c").expect("23 of 24 GiB is full");
        assert!(!c.shared(), "{c:?}");
        s.sample(at(2), "b", &[gpu("GPU-aaaaaaaa-1", 23 * GIB)]);
        let f = s.full("a").expect("b's sample filled a's GPU");
        assert!(f.shared());
        assert_eq!(f.used, 23 * GIB);
        assert_eq!(
            f.pods,
            vec![("a".to_string(), Some(11 * GIB)), ("b".to_string(), None)]
        );
        let d = f.describe();
        assert!(
            d.contains("GPU-aaaaaaaa")
                && d.contains("a (11.0 GiB)")
                && d.contains("b (its share not known)"),
            "{d}"
        );
        s.forget("b");
        assert!(!s.full("a").expect("still full").shared());
    }

    /// Only an engine's out-of-memory line counts, the pod's first, kept across restarts.
    #[test]
    fn the_first_out_of_memory_line_of_a_pod_is_kept() {
        let mut s = GpuShare::default();
        assert!(!s.log_line(at(0), "b", "INFO loading weights"));
        let oom = "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4096.00 MiB on device 0: cudaMalloc failed: out of memory";
        assert!(s.log_line(at(1), "b", oom));
        assert!(!s.log_line(at(2), "b", oom), "once");
        assert_eq!(s.oom_line("b").map(|(t, _)| *t), Some(at(1)));
        s.restarted("b");
        assert!(!s.log_line(at(3), "b", oom), "the pod's, across restarts");
        assert_eq!(s.oom_line("b").map(|(t, _)| *t), Some(at(1)));
        s.forget("b");
        assert!(s.log_line(at(4), "b", oom), "a pod of the same name, later");
    }
}
