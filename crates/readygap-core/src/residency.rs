//! Overlapping residency and OOM attribution: a pure detector fed by the same events as the
//! reducer, which says *why* a serving container was killed and warns before it happens.
//!
//! The published case: a 3B model "did not fit" under 4 GiB — but it did; a 1B model from an
//! earlier request was still resident, and loading the 3B next to it got both killed. A
//! health check never says so. Verdicts:
//! - `overlapping_residency_oom`: killed while two or more models were resident (or one
//!   resident and one loading);
//! - `single_model_oom`: killed with one model, larger than the limit or close to it;
//! - `runner_oom`: the cgroup's oom_kill counter rose and an inference failed, but the
//!   container lived (the kernel killed the runner process only);
//! - `oom_risk` (a warning, before it happens): resident sizes plus the size of the model about
//!   to load exceed the limit;
//! - `evicted_for_memory` (Ollama ≥ 0.13 on cgroup v2, which reads memory.max/memory.current
//!   and unloads a resident model to make room, server/sched.go): a model left `/api/ps`
//!   while a load of another was waiting, and that other model then loaded; the trial whose
//!   inference waited carries it as evidence (its load included the eviction);
//! - `insufficient_memory` (Ollama ≥ 0.13 with nothing to evict): the load was refused with
//!   500 "model requires more system memory (X) than is available (Y)" (llm/server.go); both
//!   figures are parsed.
//!
//! Memory is host memory: `/api/ps` `size` includes `size_vram`, and VRAM is charged to no
//! cgroup, so every sum against the limit uses `size − size_vram`.
//!
//! "Resident at the kill" is what `/api/ps` last said before the kill plus the models of
//! inferences in flight whose model was not resident (Ollama lists a model only once loaded).
//! Sizes of a model not resident yet come from earlier `/api/ps` sightings, else `/api/tags`.

use super::event::{
    ContainerState, Event, EventKind, InferenceResult, PodView, ResidentModel, Timestamp,
};
use crate::units::Gib;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the detector concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    OverlappingResidencyOom,
    SingleModelOom,
    RunnerOom,
    OomRisk,
    EvictedForMemory,
    InsufficientMemory,
}

impl VerdictKind {
    /// Every kind (the fleet watcher's closed list of verdict label values).
    pub const ALL: [VerdictKind; 6] = [
        VerdictKind::OverlappingResidencyOom,
        VerdictKind::SingleModelOom,
        VerdictKind::RunnerOom,
        VerdictKind::OomRisk,
        VerdictKind::EvictedForMemory,
        VerdictKind::InsufficientMemory,
    ];

    pub fn name(self) -> &'static str {
        match self {
            VerdictKind::OverlappingResidencyOom => "overlapping_residency_oom",
            VerdictKind::SingleModelOom => "single_model_oom",
            VerdictKind::RunnerOom => "runner_oom",
            VerdictKind::OomRisk => "oom_risk",
            VerdictKind::EvictedForMemory => "evicted_for_memory",
            VerdictKind::InsufficientMemory => "insufficient_memory",
        }
    }

    /// A kill (as opposed to a warning, an eviction or a refused load).
    pub fn is_kill(self) -> bool {
        matches!(
            self,
            VerdictKind::OverlappingResidencyOom
                | VerdictKind::SingleModelOom
                | VerdictKind::RunnerOom
        )
    }

    /// Something failed (a kill or a refused load), as opposed to a warning or an eviction.
    pub fn is_failure(self) -> bool {
        self.is_kill() || self == VerdictKind::InsufficientMemory
    }
}

/// One verdict with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub ts: Timestamp,
    pub pod: String,
    pub kind: VerdictKind,
    /// Models resident (or loading) at the time, with sizes in bytes.
    pub models: Vec<(String, u64)>,
    pub limit: Option<u64>,
    /// The sentence shown on screen.
    pub message: String,
    /// Models of `models` whose size is an estimate from their size on disk (never seen
    /// resident in `/api/ps`).
    #[serde(default)]
    pub estimated: Vec<String>,
    /// `evicted_for_memory`: the models of `models` that were unloaded (the others loaded).
    #[serde(default)]
    pub evicted: Vec<String>,
    /// `insufficient_memory`: the system memory the model needs and what was available, as
    /// Ollama's message gave them.
    pub required: Option<u64>,
    pub available: Option<u64>,
    /// The inference the verdict is about (the one whose load evicted, or was refused).
    pub request_id: Option<u64>,
}

impl Verdict {
    /// The verdict as structured evidence for JSON output: kind, models with sizes (null when
    /// unknown) and whether each size is estimated, the memory limit, the time.
    pub fn evidence_json(&self) -> serde_json::Value {
        let models: Vec<serde_json::Value> = self
            .models
            .iter()
            .map(|(name, bytes)| {
                serde_json::json!({
                    "name": name,
                    "bytes": (*bytes > 0).then_some(*bytes),
                    "estimated": self.estimated.contains(name),
                })
            })
            .collect();
        let mut v = serde_json::json!({
            "verdict": self.kind.name(),
            "pod": self.pod,
            "models": models,
            "limit_bytes": self.limit,
            "at": self.ts.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "message": self.message,
        });
        match self.kind {
            VerdictKind::EvictedForMemory => {
                let (evicted, loaded): (Vec<_>, Vec<_>) = models.into_iter().partition(|m| {
                    m["name"]
                        .as_str()
                        .is_some_and(|n| self.evicted.iter().any(|e| e == n))
                });
                v["evicted"] = serde_json::json!(evicted);
                v["loaded"] = loaded.into_iter().next().unwrap_or_default();
            }
            VerdictKind::InsufficientMemory => {
                v["required_bytes"] = serde_json::json!(self.required);
                v["available_bytes"] = serde_json::json!(self.available);
            }
            _ => {}
        }
        v
    }
}

/// The figures of Ollama's refusal "model requires more system memory (5.3 GiB) than is
/// available (3.8 GiB)" (llm/server.go, sizes as format.HumanBytes2 prints them: B, KiB,
/// MiB, GiB with one decimal), in bytes.
pub fn parse_insufficient_memory(error: &str) -> Option<(u64, u64)> {
    const HEAD: &str = "model requires more system memory (";
    let rest = &error[error.find(HEAD)? + HEAD.len()..];
    let (required, rest) = rest.split_once(") than is available (")?;
    let (available, _) = rest.split_once(')')?;
    Some((human_bytes(required)?, human_bytes(available)?))
}

/// `5.3 GiB` → bytes.
fn human_bytes(text: &str) -> Option<u64> {
    let (number, unit) = text.trim().split_once(' ')?;
    let n: f64 = number
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite() && *n >= 0.0)?;
    let scale = match unit {
        "B" => 1u64,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        _ => return None,
    };
    Some((n * scale as f64) as u64)
}

/// The items joined by `sep`, or `none` when there are none.
pub(crate) fn list_or(items: &[String], sep: &str, none: &str) -> String {
    if items.is_empty() {
        none.to_string()
    } else {
        items.join(sep)
    }
}

/// ` under 4.0 GiB` for a known limit, else nothing.
fn under(limit: Option<u64>) -> String {
    limit
        .map(|l| format!(" under {:.1}", Gib(l)))
        .unwrap_or_default()
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct PodMemory {
    resident: Vec<ResidentModel>,
    /// Inferences in flight: request id → model.
    in_flight: BTreeMap<u64, String>,
    /// Every inference not answered yet (request id → model), also once its model shows up in
    /// `/api/ps` (real Ollama 0.12 lists a model while it is still loading): its failure is
    /// still this pod's.
    #[serde(default)]
    requests: BTreeMap<u64, String>,
    /// Models whose load failed just now (the request errored): they count as loading for a
    /// kill reported after the error.
    failed_loads: Vec<String>,
    limit: Option<u64>,
    oom_kill: Option<u64>,
    /// The counter rose at this instant and no container kill explained it yet.
    counter_rose: Option<Timestamp>,
    /// Models (with sizes) at the moment the counter rose.
    counter_models: Vec<(String, u64)>,
    /// An inference that failed while the counter had not risen (yet): the cgroup is sampled
    /// every few hundred ms, so the kernel's kill can show one sample after the runtime's
    /// error (seen against real Ollama 0.12.6: the 500 at 18.869 s, the counter at 18.947 s).
    failed_inference: Option<FailedInference>,
    /// Models that left `/api/ps` while a load was waiting (Ollama ≥ 0.13 making room), with
    /// their sizes; a verdict once the waiting model shows up resident.
    #[serde(default)]
    evicted: Vec<(String, u64)>,
    /// Host share (size − size_vram) / size of the last non-empty `/api/ps`: models of this
    /// pod not seen yet are estimated with it (a GPU pod holds most of a model in VRAM).
    host_share: Option<f64>,
}

/// A failed inference waiting for the cgroup evidence that would make it a runner OOM.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct FailedInference {
    ts: Timestamp,
    /// Models resident or loading when it failed.
    models: Vec<(String, u64)>,
    error: Option<String>,
}

/// How long after a failed inference a rise of the oom_kill counter is still that failure's
/// cause (a few memory samples; the kernel kills before the runtime reports).
const KILL_AFTER_FAILURE_LIMIT: chrono::TimeDelta = chrono::TimeDelta::seconds(5);

/// The detector's state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OomDetector {
    pods: BTreeMap<String, PodMemory>,
    /// Best known size of each model (resident sizes first, then disk sizes).
    sizes: BTreeMap<String, u64>,
    disk_sizes: BTreeMap<String, u64>,
    /// VRAM part of each model's size as `/api/ps` last showed it.
    #[serde(default)]
    vram: BTreeMap<String, u64>,
    pub verdicts: Vec<Verdict>,
}

impl OomDetector {
    /// The resident size of a model: as `/api/ps` last showed it, else estimated from its
    /// size on disk scaled by the largest resident/disk ratio seen for any model here (a
    /// model takes more memory than its file: context and runner overhead), else 0 (unknown).
    fn size_of(&self, model: &str) -> u64 {
        if let Some(s) = self.sizes.get(model) {
            return *s;
        }
        let Some(disk) = self.disk_sizes.get(model) else {
            return 0;
        };
        let ratio = self
            .sizes
            .iter()
            .filter_map(|(name, res)| {
                let d = *self.disk_sizes.get(name)?;
                (d > 0).then(|| *res as f64 / d as f64)
            })
            .fold(1.0f64, f64::max);
        (*disk as f64 * ratio) as u64
    }

    /// The host-memory part of a model on `pod`: its size minus its VRAM as last seen, else
    /// the size estimate times the pod's host share.
    fn host_size_of(&self, pod: &str, model: &str) -> u64 {
        if let Some(s) = self.sizes.get(model) {
            return s.saturating_sub(self.vram.get(model).copied().unwrap_or(0));
        }
        let share = self.pods.get(pod).and_then(|p| p.host_share).unwrap_or(1.0);
        (self.size_of(model) as f64 * share) as u64
    }

    /// Whether a model's size is an estimate (never seen resident).
    fn estimated(&self, model: &str) -> bool {
        !self.sizes.contains_key(model) && self.disk_sizes.contains_key(model)
    }

    /// The models of `models` whose size is an estimate.
    fn estimated_of(&self, models: &[(String, u64)]) -> Vec<String> {
        models
            .iter()
            .filter(|(n, bytes)| *bytes > 0 && self.estimated(n))
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// `name 1.3 GiB`, `name ~1.3 GiB (estimated)` or `name (size unknown)`.
    fn label(&self, name: &str, bytes: u64) -> String {
        if bytes == 0 {
            format!("{name} (size unknown)")
        } else if self.estimated(name) {
            format!("{name} ~{:.1} (estimated)", Gib(bytes))
        } else {
            format!("{name} {:.1}", Gib(bytes))
        }
    }

    /// `[a 1.3 GiB, b ~2.0 GiB (estimated)]`.
    fn labels(&self, models: &[(String, u64)]) -> Vec<String> {
        models.iter().map(|(n, s)| self.label(n, *s)).collect()
    }

    /// The memory limit of the pod's container, when known.
    fn limit(&self, pod: &str) -> Option<u64> {
        self.pods.get(pod).and_then(|p| p.limit)
    }

    /// A verdict about `models` on `pod` under its limit, naming the estimated sizes.
    fn verdict(
        &self,
        ts: Timestamp,
        pod: &str,
        kind: VerdictKind,
        message: String,
        models: Vec<(String, u64)>,
    ) -> Verdict {
        Verdict {
            ts,
            pod: pod.to_string(),
            kind,
            estimated: self.estimated_of(&models),
            models,
            limit: self.limit(pod),
            message,
            evicted: Vec::new(),
            required: None,
            available: None,
            request_id: None,
        }
    }

    /// Keep a verdict and return it.
    fn record(&mut self, v: Verdict) -> Verdict {
        self.verdicts.push(v.clone());
        v
    }

    /// Models resident plus those loading in the pod, with sizes.
    fn models_now(&self, pod: &str) -> Vec<(String, u64)> {
        let Some(p) = self.pods.get(pod) else {
            return Vec::new();
        };
        let mut out: Vec<(String, u64)> = p
            .resident
            .iter()
            .map(|m| (m.name.clone(), m.size))
            .collect();
        for model in p.in_flight.values().chain(p.failed_loads.iter()) {
            if !out.iter().any(|(n, _)| n == model) {
                out.push((model.clone(), self.size_of(model)));
            }
        }
        out
    }

    fn describe(&self, pod: &str, models: &[(String, u64)]) -> String {
        let list = list_or(&self.labels(models), " + ", "no model known");
        format!("{list} resident{}", under(self.limit(pod)))
    }

    fn kill(&mut self, ts: Timestamp, pod: &str, models: Vec<(String, u64)>) -> Verdict {
        let kind = if models.len() >= 2 {
            VerdictKind::OverlappingResidencyOom
        } else {
            VerdictKind::SingleModelOom
        };
        let message = format!(
            "{}: OOM kill at {}",
            self.describe(pod, &models),
            ts.format("%H:%M:%S%.3f")
        );
        self.record(self.verdict(ts, pod, kind, message, models))
    }

    /// `evicted_for_memory`: `evicted` left `/api/ps` so that `loaded` (request `id`) could.
    fn eviction(
        &mut self,
        ts: Timestamp,
        pod: &str,
        id: u64,
        evicted: Vec<(String, u64)>,
        loaded: (String, u64),
    ) -> Verdict {
        let names = evicted.iter().map(|(n, _)| n.clone()).collect();
        let message = format!(
            "{} unloaded to make room for {}{} at {} (the runtime evicts instead of \
             being OOM-killed; the load included the eviction)",
            self.labels(&evicted).join(" + "),
            self.label(&loaded.0, loaded.1),
            under(self.limit(pod)),
            ts.format("%H:%M:%S%.3f")
        );
        let mut models = evicted;
        models.push(loaded);
        let v = Verdict {
            evicted: names,
            request_id: Some(id),
            ..self.verdict(ts, pod, VerdictKind::EvictedForMemory, message, models)
        };
        self.record(v)
    }

    /// Feed one event; returns a new kill verdict when this event revealed one.
    pub fn apply(&mut self, ev: &Event, prev: Option<&PodView>) -> Option<Verdict> {
        let ts = ev.ts;
        match &ev.kind {
            EventKind::Residency { pod, models } => {
                for m in models {
                    self.sizes.insert(m.name.clone(), m.size);
                    self.vram.insert(m.name.clone(), m.size_vram);
                }
                let p = self.pods.entry(pod.clone()).or_default();
                // Waiting loads: inferences whose model was not resident.
                let waiting: Vec<(u64, String)> = p
                    .in_flight
                    .iter()
                    .filter(|(_, m)| !p.resident.iter().any(|r| &r.name == *m))
                    .map(|(id, m)| (*id, m.clone()))
                    .collect();
                // Models gone while a load of another waited: evicted to make room for it.
                let gone = p.resident.iter().filter(|r| {
                    !waiting.is_empty()
                        && !models.iter().any(|m| m.name == r.name)
                        && !waiting.iter().any(|(_, m)| *m == r.name)
                });
                p.evicted
                    .extend(gone.map(|r| (r.name.clone(), r.host_bytes())));
                let total: u64 = models.iter().map(|m| m.size).sum();
                if total > 0 {
                    let host: u64 = models.iter().map(ResidentModel::host_bytes).sum();
                    p.host_share = Some(host as f64 / total as f64);
                }
                p.resident = models.clone();
                p.failed_loads.clear();
                // A model that shows up resident is no longer "loading".
                p.in_flight
                    .retain(|_, m| !models.iter().any(|r| &r.name == m));
                let loaded = waiting
                    .iter()
                    .find(|(_, m)| models.iter().any(|r| &r.name == m));
                match loaded {
                    Some((id, model)) if !p.evicted.is_empty() => {
                        let evicted = std::mem::take(&mut p.evicted);
                        let size = models
                            .iter()
                            .find(|r| &r.name == model)
                            .map(ResidentModel::host_bytes)
                            .unwrap_or(0);
                        Some(self.eviction(ts, pod, *id, evicted, (model.clone(), size)))
                    }
                    _ => None,
                }
            }
            EventKind::ModelsOnDisk { models, .. } => {
                for m in models {
                    self.disk_sizes.insert(m.name.clone(), m.size);
                }
                None
            }
            EventKind::MemorySample(s) => {
                let models = self.models_now(&s.pod);
                let p = self.pods.entry(s.pod.clone()).or_default();
                p.limit = s.limit.or(p.limit);
                let rose =
                    matches!((p.oom_kill, s.oom_kill), (Some(before), Some(now)) if now > before);
                p.oom_kill = s.oom_kill.or(p.oom_kill);
                if !rose {
                    return None;
                }
                // The inference failed a moment ago: this rise was its cause.
                if let Some(f) = p.failed_inference.take()
                    && ts - f.ts <= KILL_AFTER_FAILURE_LIMIT
                {
                    let pod = s.pod.clone();
                    return Some(self.runner_oom(f.ts, ts, &pod, f.models, f.error));
                }
                p.counter_rose = Some(ts);
                p.counter_models = models;
                None
            }
            EventKind::InferenceStarted {
                request_id,
                pod,
                model,
            } => {
                let limit = self.limit(pod);
                // Host memory only: VRAM is charged to no cgroup.
                let resident: Vec<(String, u64)> = self
                    .pods
                    .get(pod)
                    .map(|p| {
                        p.resident
                            .iter()
                            .map(|m| (m.name.clone(), m.host_bytes()))
                            .collect()
                    })
                    .unwrap_or_default();
                let loading = !resident.iter().any(|(n, _)| n == model);
                if loading && let Some(limit) = limit {
                    let size = self.host_size_of(pod, model);
                    let sum: u64 = resident.iter().map(|(_, s)| s).sum::<u64>() + size;
                    if size > 0 && sum > limit {
                        let mut models = resident.clone();
                        models.push((model.clone(), size));
                        let sizes: Vec<String> = resident
                            .iter()
                            .map(|(n, s)| format!("{n} {:.1}", Gib(*s)))
                            .collect();
                        let message = format!(
                            "loading {} next to {}: {:.1} > limit {:.1}",
                            self.label(model, size),
                            list_or(&sizes, " + ", "nothing"),
                            Gib(sum),
                            Gib(limit)
                        );
                        let v = self.verdict(ts, pod, VerdictKind::OomRisk, message, models);
                        self.verdicts.push(Verdict {
                            request_id: Some(*request_id),
                            ..v
                        });
                    }
                }
                let p = self.pods.entry(pod.clone()).or_default();
                p.in_flight.insert(*request_id, model.clone());
                p.requests.insert(*request_id, model.clone());
                None
            }
            EventKind::InferenceDone(r) => self.inference_done(ts, r),
            EventKind::PodApplied(pod) => {
                let killed = newly_oom_killed(pod, prev)?;
                let at = killed.unwrap_or(ts);
                let p = self.pods.entry(pod.name.clone()).or_default();
                // The counter evidence, if any, is the same kill.
                let counter_models = p
                    .counter_rose
                    .take()
                    .map(|_| std::mem::take(&mut p.counter_models));
                let mut models = self.models_now(&pod.name);
                if models.is_empty() {
                    models = counter_models.unwrap_or_default();
                }
                // A runner OOM reported just before was this container kill after all.
                if let Some(last) = self.verdicts.last()
                    && last.pod == pod.name
                    && last.kind == VerdictKind::RunnerOom
                    && (at - last.ts).num_seconds().abs() < 5
                {
                    let last = self.verdicts.pop();
                    if models.is_empty() {
                        models = last.map(|v| v.models).unwrap_or_default();
                    }
                }
                let v = self.kill(at, &pod.name, models);
                // The container restarted: nothing is resident or in flight any more.
                if let Some(p) = self.pods.get_mut(&pod.name) {
                    p.resident.clear();
                    p.in_flight.clear();
                    p.requests.clear();
                    p.failed_loads.clear();
                    p.failed_inference = None;
                }
                Some(v)
            }
            EventKind::PodDeleted(pod) => {
                self.pods.remove(&pod.name);
                None
            }
            _ => None,
        }
    }

    fn inference_done(&mut self, ts: Timestamp, r: &InferenceResult) -> Option<Verdict> {
        let pod = self
            .pods
            .iter()
            .find(|(_, p)| {
                p.in_flight.contains_key(&r.request_id) || p.requests.contains_key(&r.request_id)
            })
            .map(|(k, _)| k.clone())?;
        let models = self.models_now(&pod);
        let p = self.pods.get_mut(&pod)?;
        p.requests.remove(&r.request_id);
        let model = p.in_flight.remove(&r.request_id);
        if r.ok {
            p.failed_loads.clear();
            p.failed_inference = None;
            // A model evicted for this load, which finished before `/api/ps` showed it.
            let waited = model
                .as_ref()
                .is_some_and(|m| !p.resident.iter().any(|x| &x.name == m));
            if waited && !p.evicted.is_empty() {
                let evicted = std::mem::take(&mut p.evicted);
                let m = model.unwrap_or_default();
                let size = self.host_size_of(&pod, &m);
                return Some(self.eviction(ts, &pod, r.request_id, evicted, (m, size)));
            }
            return None;
        }
        if let Some((required, available)) = r.error.as_deref().and_then(parse_insufficient_memory)
        {
            // Refused, not killed: nothing was loaded, and an eviction on the way did not help.
            p.evicted.clear();
            let name = model.unwrap_or_default();
            let message = format!(
                "{name} needs {:.1} of system memory, {:.1} available{}: the runtime refused the load",
                Gib(required),
                Gib(available),
                under(p.limit),
            );
            let kind = VerdictKind::InsufficientMemory;
            let v = Verdict {
                estimated: Vec::new(),
                required: Some(required),
                available: Some(available),
                request_id: Some(r.request_id),
                ..self.verdict(ts, &pod, kind, message, vec![(name, required)])
            };
            return Some(self.record(v));
        }
        if let Some(m) = model
            && !p.resident.iter().any(|x| x.name == m)
        {
            p.failed_loads.push(m);
        }
        // The counter rose and the inference failed, and no container kill was seen:
        // the runner process was killed inside a living container.
        let Some(rose) = p.counter_rose.take() else {
            // No rise yet: the next memory sample may still show it.
            p.failed_inference = Some(FailedInference {
                ts,
                models,
                error: r.error.clone(),
            });
            return None;
        };
        let mut models_then = std::mem::take(&mut p.counter_models);
        if models_then.is_empty() {
            models_then = models;
        }
        Some(self.runner_oom(ts, rose, &pod, models_then, r.error.clone()))
    }

    /// The runner-OOM verdict: an inference failed at `ts` and the cgroup's oom_kill counter
    /// rose at `rose` (before or just after), with these models resident or loading.
    fn runner_oom(
        &mut self,
        ts: Timestamp,
        rose: Timestamp,
        pod: &str,
        models: Vec<(String, u64)>,
        error: Option<String>,
    ) -> Verdict {
        let why = error.unwrap_or_else(|| "inference failed".into());
        let message = format!(
            "{}: runner OOM-killed at {}, container kept running ({why})",
            self.describe(pod, &models),
            rose.format("%H:%M:%S%.3f")
        );
        self.record(self.verdict(ts, pod, VerdictKind::RunnerOom, message, models))
    }

    /// Kill verdicts and warnings so far, by kind name.
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let mut c = BTreeMap::new();
        for v in &self.verdicts {
            *c.entry(v.kind.name()).or_insert(0) += 1;
        }
        c
    }
}

/// `Some(when)` when this version of the pod shows an OOM kill the previous one did not:
/// a container whose state or last state is `OOMKilled` with a new restart count or state.
fn newly_oom_killed(pod: &PodView, prev: Option<&PodView>) -> Option<Option<Timestamp>> {
    for c in &pod.containers {
        let before = prev.and_then(|p| p.containers.iter().find(|x| x.name == c.name));
        let term_at = |s: &ContainerState| match s {
            ContainerState::Terminated { finished_at, .. } => *finished_at,
            _ => None,
        };
        if prev.is_some()
            && c.state.is_oom_killed()
            && !before.is_some_and(|b| b.state.is_oom_killed())
        {
            return Some(term_at(&c.state));
        }
        if let Some(last) = &c.last_state
            && last.is_oom_killed()
        {
            let new_restart = before.is_none_or(|b| b.restart_count < c.restart_count);
            // Already reported from the terminated state of the same kill?
            let seen_as_state = before.is_some_and(|b| b.state.is_oom_killed());
            if new_restart && !seen_as_state && prev.is_some() {
                return Some(term_at(last));
            }
        }
    }
    None
}

/// `llama3.2` and `llama3.2:latest` are the same Ollama model.
pub fn same_model(a: &str, b: &str) -> bool {
    let norm = |s: &str| {
        if s.contains(':') {
            s.to_string()
        } else {
            format!("{s}:latest")
        }
    };
    norm(a) == norm(b)
}
