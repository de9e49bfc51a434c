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
//!   to load exceed the limit.
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
}

impl VerdictKind {
    pub fn name(self) -> &'static str {
        match self {
            VerdictKind::OverlappingResidencyOom => "overlapping_residency_oom",
            VerdictKind::SingleModelOom => "single_model_oom",
            VerdictKind::RunnerOom => "runner_oom",
            VerdictKind::OomRisk => "oom_risk",
        }
    }

    /// A kill (as opposed to a warning).
    pub fn is_kill(self) -> bool {
        self != VerdictKind::OomRisk
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
        serde_json::json!({
            "verdict": self.kind.name(),
            "pod": self.pod,
            "models": models,
            "limit_bytes": self.limit,
            "at": self.ts.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "message": self.message,
        })
    }
}

/// `name 1.3 GiB`, or `name (size unknown)`.
fn size_label(name: &str, bytes: u64) -> String {
    if bytes == 0 {
        format!("{name} (size unknown)")
    } else {
        format!("{name} {:.1}", Gib(bytes))
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct PodMemory {
    resident: Vec<ResidentModel>,
    /// Inferences in flight: request id → model.
    in_flight: BTreeMap<u64, String>,
    /// Models whose load failed just now (the request errored): they count as loading for a
    /// kill reported after the error.
    failed_loads: Vec<String>,
    limit: Option<u64>,
    oom_kill: Option<u64>,
    /// The counter rose at this instant and no container kill explained it yet.
    counter_rose: Option<Timestamp>,
    /// Models (with sizes) at the moment the counter rose.
    counter_models: Vec<(String, u64)>,
}

/// The detector's state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OomDetector {
    pods: BTreeMap<String, PodMemory>,
    /// Best known size of each model (resident sizes first, then disk sizes).
    sizes: BTreeMap<String, u64>,
    disk_sizes: BTreeMap<String, u64>,
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

    fn label(&self, name: &str, bytes: u64) -> String {
        if self.estimated(name) && bytes > 0 {
            format!("{name} ~{:.1} (estimated)", Gib(bytes))
        } else {
            size_label(name, bytes)
        }
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

    fn describe(&self, models: &[(String, u64)], limit: Option<u64>) -> String {
        let list = if models.is_empty() {
            "no model known".to_string()
        } else {
            models
                .iter()
                .map(|(n, s)| self.label(n, *s))
                .collect::<Vec<_>>()
                .join(" + ")
        };
        match limit {
            Some(l) => format!("{list} resident under {:.1}", Gib(l)),
            None => format!("{list} resident"),
        }
    }

    fn kill(&mut self, ts: Timestamp, pod: &str, models: Vec<(String, u64)>) -> Verdict {
        let limit = self.pods.get(pod).and_then(|p| p.limit);
        let kind = if models.len() >= 2 {
            VerdictKind::OverlappingResidencyOom
        } else {
            VerdictKind::SingleModelOom
        };
        let message = format!(
            "{}: OOM kill at {}",
            self.describe(&models, limit),
            ts.format("%H:%M:%S%.3f")
        );
        let v = Verdict {
            ts,
            pod: pod.to_string(),
            kind,
            estimated: self.estimated_of(&models),
            models,
            limit,
            message,
        };
        self.verdicts.push(v.clone());
        v
    }

    /// Feed one event; returns a new kill verdict when this event revealed one.
    pub fn apply(&mut self, ev: &Event, prev: Option<&PodView>) -> Option<Verdict> {
        let ts = ev.ts;
        match &ev.kind {
            EventKind::Residency { pod, models } => {
                for m in models {
                    self.sizes.insert(m.name.clone(), m.size);
                }
                let p = self.pods.entry(pod.clone()).or_default();
                p.resident = models.clone();
                p.failed_loads.clear();
                // A model that shows up resident is no longer "loading".
                p.in_flight
                    .retain(|_, m| !models.iter().any(|r| &r.name == m));
                None
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
                if let (Some(before), Some(now)) = (p.oom_kill, s.oom_kill)
                    && now > before
                {
                    p.counter_rose = Some(ts);
                    p.counter_models = models;
                }
                p.oom_kill = s.oom_kill.or(p.oom_kill);
                None
            }
            EventKind::InferenceStarted {
                request_id,
                pod,
                model,
            } => {
                let limit = self.pods.get(pod).and_then(|p| p.limit);
                let resident: Vec<(String, u64)> = self
                    .pods
                    .get(pod)
                    .map(|p| {
                        p.resident
                            .iter()
                            .map(|m| (m.name.clone(), m.size))
                            .collect()
                    })
                    .unwrap_or_default();
                let loading = !resident.iter().any(|(n, _)| n == model);
                if loading && let Some(limit) = limit {
                    let size = self.size_of(model);
                    let sum: u64 = resident.iter().map(|(_, s)| s).sum::<u64>() + size;
                    if size > 0 && sum > limit {
                        let mut models = resident.clone();
                        models.push((model.clone(), size));
                        let message = format!(
                            "loading {} next to {}: {:.1} > limit {:.1}",
                            self.label(model, size),
                            if resident.is_empty() {
                                "nothing".to_string()
                            } else {
                                resident
                                    .iter()
                                    .map(|(n, s)| format!("{n} {:.1}", Gib(*s)))
                                    .collect::<Vec<_>>()
                                    .join(" + ")
                            },
                            Gib(sum),
                            Gib(limit)
                        );
                        self.verdicts.push(Verdict {
                            ts,
                            pod: pod.clone(),
                            kind: VerdictKind::OomRisk,
                            estimated: self.estimated_of(&models),
                            models,
                            limit: Some(limit),
                            message,
                        });
                    }
                }
                self.pods
                    .entry(pod.clone())
                    .or_default()
                    .in_flight
                    .insert(*request_id, model.clone());
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
                    p.failed_loads.clear();
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
            .find(|(_, p)| p.in_flight.contains_key(&r.request_id))
            .map(|(k, _)| k.clone())?;
        let models = self.models_now(&pod);
        let p = self.pods.get_mut(&pod)?;
        let model = p.in_flight.remove(&r.request_id);
        if r.ok {
            p.failed_loads.clear();
            return None;
        }
        if let Some(m) = model
            && !p.resident.iter().any(|x| x.name == m)
        {
            p.failed_loads.push(m);
        }
        // The counter rose and the inference failed, and no container kill was seen:
        // the runner process was killed inside a living container.
        let rose = p.counter_rose.take()?;
        let mut models_then = std::mem::take(&mut p.counter_models);
        if models_then.is_empty() {
            models_then = models;
        }
        let limit = p.limit;
        let why = r.error.clone().unwrap_or_else(|| "inference failed".into());
        let message = format!(
            "{}: runner OOM-killed at {}, container kept running ({why})",
            self.describe(&models_then, limit),
            rose.format("%H:%M:%S%.3f")
        );
        let v = Verdict {
            ts,
            pod,
            kind: VerdictKind::RunnerOom,
            estimated: self.estimated_of(&models_then),
            models: models_then,
            limit,
            message,
        };
        self.verdicts.push(v.clone());
        Some(v)
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
