//! Verdicts on the readiness contract: a pure detector fed by the same events as the reducer,
//! which says what a recovery *meant* beyond its T0–T4 marks. Ready is a contract: a pod is
//! Ready when the Service may send it traffic, and the study's lesson is that a shallow probe
//! breaks it. Each verdict has a timestamp (the event that revealed it), evidence, and a
//! one-line advice:
//! - `shallow_readiness`: the pod's endpoint was ready and serving for X s before the first
//!   successful inference, and the model was not resident when it turned ready (the first
//!   request paid the load); names the readiness probe from the pod spec;
//! - `readiness_covers_inference`: the endpoint turned ready only after a completed
//!   inference (the model was resident at Ready, or an inference had already finished);
//! - `model_missing_after_replacement`: the runtime answers but the model is not on disk
//!   (`/api/tags` lacks it, or a generate answered 404 "not found"); names the volume of the
//!   models directory from the pod spec (the study's emptyDir run);
//! - `model_not_resident`: Ready, the model on disk, nothing of it resident and the container's
//!   memory near the runtime's own size: the first request will pay the load;
//! - `liveness_killed_during_load`: a container restart whose Events show a failed liveness
//!   (or startup) probe while a model was loading (an inference waiting for a model that was
//!   not resident);
//! - `rollout_stalled`: a replacement Pending for longer than a threshold (15 s) with
//!   a scheduling failure (`FailedScheduling`: Insufficient nvidia.com/gpu, memory, taints);
//! - `warm_node_bias`: a trial on a node where the model had already been loaded (its files in
//!   the page cache) without a cold step, or whose cold step did not make Cached fall: its
//!   statistics are flagged `warm`, apart from the `cold` ones;
//! - `vram_overcommit`: a GPU held by two pods or more (time-slicing, MPS) whose used memory
//!   reaches its total, or an engine's own out-of-memory line (vLLM, PyTorch, ggml/CUDA),
//!   with the pods, the GPU and its figures (`vram.rs`); and `rollout_stalled` also when a
//!   pod asking for a GPU is Running but not Ready past the threshold on a GPU that is full
//!   and shared, or after such a line: the surge pod waits for VRAM that its predecessor
//!   holds;
//! - `traffic_gap`: an interval with no ready endpoint, its exact length from the watch, and
//!   how much of it serving-terminating endpoints covered (kube-proxy sends them traffic,
//!   KEP-1669).
//!
//! Time is the events' own: the detector never reads a clock. The thresholds a user may
//! judge differently ([`VerdictThresholds`]: `[verdicts]` in the config file, `--verdict-*`
//! flags) come with the session's `session` event, so a replay judges as the session did.

use super::event::{Event, EventKind, PodSpecFacts, PodView, Timestamp};
use super::timeline::Trial;
use crate::residency::{list_or, same_model};
pub use crate::thresholds::VerdictThresholds;
use crate::units::Gib;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// The verdicts on the readiness contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContractKind {
    ShallowReadiness,
    ReadinessCoversInference,
    ModelMissingAfterReplacement,
    ModelNotResident,
    LivenessKilledDuringLoad,
    RolloutStalled,
    WarmNodeBias,
    TrafficGap,
    VramOvercommit,
}

impl ContractKind {
    pub const ALL: [ContractKind; 9] = [
        ContractKind::ShallowReadiness,
        ContractKind::ReadinessCoversInference,
        ContractKind::ModelMissingAfterReplacement,
        ContractKind::ModelNotResident,
        ContractKind::LivenessKilledDuringLoad,
        ContractKind::RolloutStalled,
        ContractKind::WarmNodeBias,
        ContractKind::TrafficGap,
        ContractKind::VramOvercommit,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ContractKind::ShallowReadiness => "shallow_readiness",
            ContractKind::ReadinessCoversInference => "readiness_covers_inference",
            ContractKind::ModelMissingAfterReplacement => "model_missing_after_replacement",
            ContractKind::ModelNotResident => "model_not_resident",
            ContractKind::LivenessKilledDuringLoad => "liveness_killed_during_load",
            ContractKind::RolloutStalled => "rollout_stalled",
            ContractKind::WarmNodeBias => "warm_node_bias",
            ContractKind::TrafficGap => "traffic_gap",
            ContractKind::VramOvercommit => "vram_overcommit",
        }
    }

    /// The kind named `name` (`shallow_readiness`, ...).
    pub fn of_name(name: &str) -> Option<ContractKind> {
        ContractKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// A broken contract (all but `readiness_covers_inference`, which says it held).
    pub fn is_problem(self) -> bool {
        self != ContractKind::ReadinessCoversInference
    }

    /// The one-line advice shown with the verdict.
    pub fn advice(self) -> &'static str {
        match self {
            ContractKind::ShallowReadiness => {
                "make Ready wait for an answer: the inference-aware readiness probe \
                 manifests/base/probe/ready-inference.sh (manifests/base)"
            }
            ContractKind::ReadinessCoversInference => {
                "the readiness probe waits for a completed inference: traffic reaches only a pod that answers"
            }
            ContractKind::ModelMissingAfterReplacement => {
                "keep the models on a PersistentVolumeClaim (manifests/base/pvc.yaml), not an emptyDir, \
                 or pull them before the pod turns Ready"
            }
            ContractKind::ModelNotResident => {
                "warm the model before Ready (the inference-aware probe loads it) and keep it \
                 with OLLAMA_KEEP_ALIVE"
            }
            ContractKind::LivenessKilledDuringLoad => {
                "add a startupProbe with room for the load and keep the livenessProbe lenient \
                 (GET /, failureThreshold >= 3), never an inference"
            }
            ContractKind::RolloutStalled => {
                "set maxSurge: 0, maxUnavailable: 1 (replace in place) or keep spare capacity for the surge pod"
            }
            ContractKind::WarmNodeBias => {
                "run the cold step (--cold) or report these trials as warm, apart from cold ones"
            }
            ContractKind::TrafficGap => {
                "requests in this interval had no endpoint: surge (maxSurge 1, maxUnavailable 0) \
                 with an inference-aware probe keeps one ready"
            }
            ContractKind::VramOvercommit => {
                "give each model server a GPU of its own (no time-slicing), or cap each engine's \
                 share (vLLM --gpu-memory-utilization) so the sum fits; replace in place \
                 (maxSurge: 0) when the GPU holds one server only"
            }
        }
    }
}

/// One verdict with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContractVerdict {
    /// When the evidence was complete (the timestamp of the event that revealed it).
    pub ts: Timestamp,
    /// The pod it is about (empty for `traffic_gap`, which is about the Service).
    pub pod: String,
    pub kind: ContractKind,
    /// The measured figure: the Ready window, the gap, the Pending time (seconds).
    pub seconds: Option<f64>,
    /// The sentence shown on screen.
    pub message: String,
    pub advice: String,
    /// Structured evidence (probe, volume, models, memory, events, interval).
    #[serde(default)]
    pub evidence: Value,
    /// The trial it belongs to, when one was open or just finished.
    pub trial: Option<u32>,
}

impl ContractVerdict {
    /// The verdict as JSON for `run --format json` and `report --format json`.
    pub fn to_json(&self) -> Value {
        json!({
            "verdict": self.kind.name(),
            "at": self.ts.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "pod": self.pod,
            "seconds": self.seconds,
            "trial": self.trial,
            "message": self.message,
            "advice": self.advice,
            "evidence": self.evidence,
        })
    }

    /// The line for the screen: `shallow_readiness: … → advice`.
    pub fn line(&self) -> String {
        format!("{}: {}", self.kind.name(), self.message)
    }
}

/// Tests and callers compare a kind with its name (`v == "shallow_readiness"`).
impl PartialEq<str> for ContractKind {
    fn eq(&self, other: &str) -> bool {
        self.name() == other
    }
}

impl PartialEq<&str> for ContractKind {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

/// What the detector knows of one pod (its current container).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct PodContract {
    spec: Option<PodSpecFacts>,
    node: Option<String>,
    created: Option<Timestamp>,
    ready: bool,
    pending: bool,
    /// The endpoint turned ready and serving (first time for this container).
    endpoint_ready: Option<Timestamp>,
    /// The runtime answered HTTP.
    answers: Option<Timestamp>,
    on_disk: Option<Vec<String>>,
    resident: Option<Vec<String>>,
    /// When the model was first seen resident.
    resident_since: Option<Timestamp>,
    memory: Option<u64>,
    first_ok_inference: Option<Timestamp>,
    logged_ok_inference: Option<Timestamp>,
    /// Inferences in flight: request id → (model, sent).
    in_flight: BTreeMap<u64, (String, Timestamp)>,
    /// The latest inference that failed: (model, sent, failed at) — a kill may be reported
    /// after the request broke.
    interrupted: Option<(String, Timestamp, Timestamp)>,
    /// A restart seen, waiting for its probe Events: (when, what was loading).
    restart: Option<(Timestamp, Option<String>)>,
    /// Liveness/startup probe failures and kills from Events: (when, reason, message).
    probe_failures: Vec<(Timestamp, String, String)>,
    /// The latest FailedScheduling Event: (when, message).
    failed_scheduling: Option<(Timestamp, String)>,
    /// When the pod's phase became Running (a restart of its container does not change it).
    #[serde(default)]
    running_since: Option<Timestamp>,
    reported: BTreeSet<ContractKind>,
}

/// The detector's state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContractDetector {
    pods: BTreeMap<String, PodContract>,
    /// The pods whose phase is Pending (the only ones a rollout can stall on), so that the
    /// stall check of every event looks at them, not at every pod seen.
    #[serde(default)]
    pending: BTreeSet<String>,
    /// The pods asking for a GPU that are Running but not Ready (a surge pod can stall there,
    /// loading on a GPU another pod fills).
    #[serde(default)]
    loading_on_gpu: BTreeSet<String>,
    /// Which pods hold which GPU, how full, and the engines' out-of-memory lines.
    #[serde(default)]
    gpu_share: crate::vram::GpuShare,
    /// The served model (the session's, else the latest inference's).
    model: Option<String>,
    /// Nodes where the model was loaded (resident or answered), with when and on which pod.
    warm_nodes: BTreeMap<String, (Timestamp, String)>,
    /// An open interval with no ready endpoint: (start, covered seconds so far, fallback since).
    gap: Option<(Timestamp, f64, Option<Timestamp>)>,
    /// Some endpoint was ready once (a gap needs something to lose).
    had_ready: bool,
    /// The open trial, for attribution.
    open_trial: Option<u32>,
    pub verdicts: Vec<ContractVerdict>,
    /// The thresholds in force (the session event's, else the defaults).
    #[serde(default)]
    pub thresholds: VerdictThresholds,
}

fn secs(a: Timestamp, b: Timestamp) -> f64 {
    (b - a).num_microseconds().unwrap_or(0) as f64 / 1e6
}

fn clock(ts: Timestamp) -> String {
    ts.format("%H:%M:%S%.3f").to_string()
}

fn readiness_label(spec: Option<&PodSpecFacts>) -> String {
    match spec {
        None => "readiness probe unknown (no pod spec seen)".into(),
        Some(s) => match &s.readiness {
            None => "no readinessProbe: Ready when the container starts".into(),
            Some(p) => format!("readinessProbe {}", p.label()),
        },
    }
}

impl ContractDetector {
    /// Verdict counts by kind name.
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let mut c = BTreeMap::new();
        for v in &self.verdicts {
            *c.entry(v.kind.name()).or_insert(0) += 1;
        }
        c
    }

    /// The trial verdicts are attributed to (set by the reducer as trials open and close).
    pub fn set_open_trial(&mut self, trial: Option<u32>) {
        self.open_trial = trial;
    }

    /// Give a verdict, attributed to the open trial; returns it for its figure and trial.
    fn push(
        &mut self,
        ts: Timestamp,
        pod: &str,
        kind: ContractKind,
        message: String,
        evidence: Value,
    ) -> &mut ContractVerdict {
        if let Some(p) = self.pods.get_mut(pod) {
            p.reported.insert(kind);
        }
        self.verdicts.push(ContractVerdict {
            ts,
            pod: pod.to_string(),
            kind,
            seconds: None,
            message,
            advice: kind.advice().to_string(),
            evidence,
            trial: self.open_trial,
        });
        self.verdicts.last_mut().expect("just pushed")
    }

    fn pod(&mut self, name: &str) -> &mut PodContract {
        self.pods.entry(name.to_string()).or_default()
    }

    /// The pod, unless it already has a verdict of this kind.
    fn unreported(&self, pod: &str, kind: ContractKind) -> Option<&PodContract> {
        self.pods.get(pod).filter(|p| !p.reported.contains(&kind))
    }

    /// Feed one event (`prev`: the pod as it was before a pod event).
    pub fn apply(&mut self, ev: &Event, prev: Option<&PodView>) {
        let ts = ev.ts;
        match &ev.kind {
            EventKind::Session(info) => {
                if info.model.is_some() {
                    self.model = info.model.clone();
                }
                if let Some(t) = &info.verdicts {
                    self.thresholds = t.clone();
                }
            }
            EventKind::PodApplied(pod) => self.pod_applied(ts, pod, prev),
            EventKind::PodDeleted(pod) => {
                self.pods.remove(&pod.name);
                self.pending.remove(&pod.name);
                self.loading_on_gpu.remove(&pod.name);
                self.gpu_share.forget(&pod.name);
            }
            EventKind::GpuSample { pod, gpus, .. } => {
                self.gpu_share.sample(ts, pod, gpus);
                self.overcommit_check(ts, pod);
            }
            EventKind::LogLine { pod, text } if self.gpu_share.log_line(ts, pod, text) => {
                self.overcommit_check(ts, pod);
            }
            EventKind::KubeEvent(e) => {
                let Some(name) = e.object.strip_prefix("pod/") else {
                    return;
                };
                let at = e.time.unwrap_or(ts);
                let kill_window = self.thresholds.kill_window_s;
                let msg = e.message.to_lowercase();
                let probe_kill = (e.reason == "Unhealthy"
                    && (msg.starts_with("liveness probe failed")
                        || msg.starts_with("startup probe failed")))
                    || (e.reason == "Killing"
                        && (msg.contains("failed liveness probe")
                            || msg.contains("failed startup probe")));
                // A Killing Event that arrives after the restart it announced joins the
                // evidence of the verdict already given (watches do not agree on order).
                if probe_kill
                    && e.reason == "Killing"
                    && let Some(v) = self.verdicts.iter_mut().rev().find(|v| {
                        v.pod == name
                            && v.kind == ContractKind::LivenessKilledDuringLoad
                            && secs(v.ts, at).abs() <= kill_window
                    })
                    && let Some(events) = v.evidence["events"].as_array_mut()
                    && !events.iter().any(|x| x["reason"] == "Killing")
                {
                    events.push(json!({
                        "at": at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                        "reason": e.reason, "message": e.message,
                    }));
                    return;
                }
                let p = self.pods.entry(name.to_string()).or_default();
                if probe_kill {
                    // The probe's output keeps its newline in the kubelet's message; the
                    // verdict quotes it in a sentence.
                    p.probe_failures
                        .push((at, e.reason.clone(), e.message.trim_end().to_string()));
                    if p.probe_failures.len() > 20 {
                        p.probe_failures.remove(0);
                    }
                    self.liveness_check(ts, name);
                } else if e.reason == "FailedScheduling" {
                    p.failed_scheduling = Some((at, e.message.clone()));
                }
            }
            EventKind::RuntimeProbe(p) if p.ok => {
                self.pod(&p.pod).answers.get_or_insert(ts);
                self.missing_check(ts, &p.pod, None);
            }
            EventKind::ModelsOnDisk { pod, models } => {
                self.pod(pod).on_disk = Some(models.iter().map(|m| m.name.clone()).collect());
                self.missing_check(ts, pod, None);
                self.not_resident_check(ts, pod);
            }
            EventKind::Residency { pod, models } => {
                let model = self.model.clone();
                self.gpu_share.residency(pod, models);
                let p = self.pods.entry(pod.clone()).or_default();
                p.resident = Some(models.iter().map(|m| m.name.clone()).collect());
                if let Some(m) = &model
                    && models.iter().any(|r| same_model(&r.name, m))
                {
                    p.resident_since.get_or_insert(ts);
                    if let Some(node) = p.node.clone() {
                        self.warm_nodes.entry(node).or_insert((ts, pod.clone()));
                    }
                }
                self.not_resident_check(ts, pod);
            }
            EventKind::MemorySample(s) => {
                self.pod(&s.pod).memory = Some(s.current);
                self.not_resident_check(ts, &s.pod);
            }
            EventKind::InferenceStarted {
                request_id,
                pod,
                model,
            } => {
                self.model.get_or_insert_with(|| model.clone());
                self.pod(pod)
                    .in_flight
                    .insert(*request_id, (model.clone(), ts));
            }
            EventKind::InferenceDone(r) => {
                let Some(pod) = self
                    .pods
                    .iter()
                    .find(|(_, p)| p.in_flight.contains_key(&r.request_id))
                    .map(|(k, _)| k.clone())
                else {
                    return;
                };
                let p = self.pods.get_mut(&pod).expect("found above");
                let (model, sent) = p.in_flight.remove(&r.request_id).unwrap_or_default();
                if r.ok {
                    p.first_ok_inference.get_or_insert(ts);
                    if let Some(node) = p.node.clone() {
                        self.warm_nodes.entry(node).or_insert((ts, pod.clone()));
                    }
                } else {
                    p.interrupted = Some((model.clone(), sent, ts));
                    let err = r.error.clone().unwrap_or_default();
                    if r.http_status == Some(404) || err.contains("not found") {
                        let why = format!(
                            "generate answered {}{}",
                            r.http_status.map(|s| s.to_string()).unwrap_or_default(),
                            if err.is_empty() {
                                String::new()
                            } else {
                                format!(" \"{err}\"")
                            }
                        );
                        self.missing_check(ts, &pod, Some((model, why)));
                    }
                }
            }
            EventKind::RequestLogged(l) if l.is_inference() => {
                let p = self.pods.entry(l.pod.clone()).or_default();
                if l.status == 200 {
                    p.logged_ok_inference.get_or_insert(ts);
                    if let Some(node) = p.node.clone() {
                        self.warm_nodes.entry(node).or_insert((ts, l.pod.clone()));
                    }
                } else if l.status == 404 {
                    let model = self.model.clone().unwrap_or_default();
                    let why = format!("the runtime logged {} {} 404", l.method, l.path);
                    self.missing_check(ts, &l.pod, Some((model, why)));
                }
            }
            _ => {}
        }
        self.stall_check(ts);
    }

    fn pod_applied(&mut self, ts: Timestamp, pod: &PodView, prev: Option<&PodView>) {
        let model = self.model.clone();
        let p = self.pods.entry(pod.name.clone()).or_default();
        p.spec = pod.spec().cloned().or(p.spec.take());
        p.node = pod.node.clone().or(p.node.take());
        p.created = pod.created.or(p.created);
        p.ready = pod.is_ready();
        p.pending = pod.phase == "Pending";
        if p.pending {
            self.pending.insert(pod.name.clone());
        } else {
            self.pending.remove(&pod.name);
        }
        if pod.phase == "Running" {
            p.running_since.get_or_insert(ts);
        } else {
            p.running_since = None;
        }
        let asks_gpu = p.spec.as_ref().is_some_and(|s| s.gpus > 0);
        if asks_gpu && pod.phase == "Running" && !p.ready {
            self.loading_on_gpu.insert(pod.name.clone());
        } else {
            self.loading_on_gpu.remove(&pod.name);
        }
        if prev.is_some_and(|old| old.restarts() < pod.restarts()) {
            // What was loading when the container died: an inference waiting for a model
            // that was not resident, or the served model not resident yet.
            // An inference that waited for its model's load: sent before the model showed
            // up resident (or it never did), still in flight or failed just now.
            let resident = p.resident.clone().unwrap_or_default();
            let since = p.resident_since;
            let waited = |m: &str, sent: Timestamp| {
                !resident.iter().any(|r| same_model(r, m)) || since.is_some_and(|r| sent < r)
            };
            let waiting = p
                .in_flight
                .values()
                .map(|(m, sent)| (m.clone(), *sent))
                .chain(
                    p.interrupted
                        .clone()
                        .filter(|(_, _, failed)| secs(*failed, ts).abs() <= 5.0)
                        .map(|(m, sent, _)| (m, sent)),
                )
                .find(|(m, sent)| waited(m, *sent))
                .map(|(m, sent)| {
                    format!(
                        "{m} (an inference waiting since {}{})",
                        clock(sent),
                        since
                            .map(|r| format!(", resident at {} but not answered yet", clock(r)))
                            .unwrap_or_default()
                    )
                });
            let not_yet = match (&model, &p.resident) {
                (Some(m), Some(res)) if !res.iter().any(|r| same_model(r, m)) => {
                    Some(format!("{m} (not resident in /api/ps yet)"))
                }
                _ => None,
            };
            p.restart = Some((ts, waiting.or(not_yet)));
            // Still Running (the phase) since before: a pod whose engine keeps failing on a
            // full GPU is stuck across its restarts.
            self.gpu_share.restarted(&pod.name);
            // A new container: its readiness and residency start over.
            p.endpoint_ready = None;
            p.answers = None;
            p.resident = None;
            p.resident_since = None;
            p.first_ok_inference = None;
            p.logged_ok_inference = None;
            p.in_flight.clear();
            p.interrupted = None;
            p.reported.remove(&ContractKind::ModelNotResident);
            self.liveness_check(ts, &pod.name);
        }
        self.not_resident_check(ts, &pod.name);
    }

    /// Endpoints changed: the per-pod ready-and-serving instants and the Service's gaps.
    /// `ready_pods`: pods whose endpoint is ready and serving; `ready`/`serving_terminating`:
    /// the Service's counts (one per pod).
    pub fn endpoints(
        &mut self,
        ts: Timestamp,
        ready_pods: &[String],
        ready: u32,
        serving_terminating: u32,
    ) {
        for name in ready_pods {
            self.pod(name).endpoint_ready.get_or_insert(ts);
        }
        if ready > 0 {
            self.had_ready = true;
            if let Some((start, mut covered, since)) = self.gap.take() {
                if let Some(s) = since {
                    covered += secs(s, ts);
                }
                self.gap_verdict(start, ts, covered);
            }
            return;
        }
        if !self.had_ready {
            return;
        }
        let fallback = serving_terminating > 0;
        match &mut self.gap {
            None => self.gap = Some((ts, 0.0, fallback.then_some(ts))),
            Some((_, covered, since)) => match (*since, fallback) {
                (None, true) => *since = Some(ts),
                (Some(s), false) => {
                    *covered += secs(s, ts);
                    *since = None;
                }
                _ => {}
            },
        }
    }

    fn gap_verdict(&mut self, start: Timestamp, end: Timestamp, covered: f64) {
        let len = secs(start, end);
        let cover = if covered <= 0.0 {
            "no serving-terminating endpoint covered it: requests failed".to_string()
        } else if covered + 1e-6 >= len {
            format!(
                "serving-terminating endpoints covered all of it ({covered:.3} s): kube-proxy sent traffic there"
            )
        } else {
            format!("serving-terminating endpoints covered {covered:.3} s of it")
        };
        let message = format!(
            "no ready endpoint for {len:.3} s ({}–{}); {cover}",
            clock(start),
            clock(end)
        );
        let evidence = json!({
            "from": start.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            "to": end.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            "seconds": len,
            "covered_by_serving_terminating_seconds": covered,
        });
        self.push(end, "", ContractKind::TrafficGap, message, evidence)
            .seconds = Some(len);
    }

    fn missing_check(
        &mut self,
        ts: Timestamp,
        pod: &str,
        from_inference: Option<(String, String)>,
    ) {
        let kind = ContractKind::ModelMissingAfterReplacement;
        let Some(p) = self.unreported(pod, kind) else {
            return;
        };
        let (model, why) = match from_inference {
            Some((m, why)) => (
                Some(m).filter(|m| !m.is_empty()).or(self.model.clone()),
                why,
            ),
            None => {
                let (Some(model), Some(disk), Some(_)) = (&self.model, &p.on_disk, p.answers)
                else {
                    return;
                };
                if disk.iter().any(|d| same_model(d, model)) {
                    return;
                }
                let list = list_or(disk, ", ", "no model");
                (Some(model.clone()), format!("/api/tags lists {list}"))
            }
        };
        let model = model.unwrap_or_else(|| "the model".into());
        let spec = p.spec.as_ref();
        let volume = spec
            .and_then(|s| s.models_volume.clone())
            .unwrap_or_else(|| match spec {
                Some(_) => "no volume (the image's own disk)".into(),
                None => "unknown (no pod spec seen)".into(),
            });
        let mount = spec.and_then(|s| s.models_mount.clone());
        let message = format!(
            "{pod}: the runtime answers but {model} is not on disk ({why}); models directory{} on {volume}",
            mount
                .as_deref()
                .map(|m| format!(" {m}"))
                .unwrap_or_default()
        );
        let evidence = json!({"model": model, "why": why, "models_volume": volume,
                               "models_mount": mount, "on_disk": p.on_disk});
        self.push(ts, pod, kind, message, evidence);
    }

    fn not_resident_check(&mut self, ts: Timestamp, pod: &str) {
        let Some(model) = self.model.clone() else {
            return;
        };
        let Some(p) = self.unreported(pod, ContractKind::ModelNotResident) else {
            return;
        };
        let (Some(disk), Some(resident), Some(memory)) = (&p.on_disk, &p.resident, p.memory) else {
            return;
        };
        let ready = p.ready || p.endpoint_ready.is_some();
        let loading = p.in_flight.values().any(|(m, _)| same_model(m, &model));
        if !ready
            || loading
            || p.first_ok_inference.is_some()
            || !disk.iter().any(|d| same_model(d, &model))
            || resident.iter().any(|r| same_model(r, &model))
            // More than the runtime's own size (Ollama idles at ~14 MiB).
            || memory > self.thresholds.runtime_only_bytes
        {
            return;
        }
        let message = format!(
            "{pod} is Ready with {model} on disk but not resident (/api/ps: {}; memory {:.0} MiB, \
             the runtime alone): the first request will pay the load",
            list_or(resident, ", ", "nothing"),
            memory as f64 / (1u64 << 20) as f64
        );
        let evidence = json!({"model": model, "resident": resident, "memory_bytes": memory,
                              "readiness": p.spec.as_ref().and_then(|s| s.readiness.as_ref())});
        self.push(ts, pod, ContractKind::ModelNotResident, message, evidence);
    }

    fn liveness_check(&mut self, ts: Timestamp, pod: &str) {
        let Some(p) = self.pods.get_mut(pod) else {
            return;
        };
        let Some((restart_at, loading)) = p.restart.clone() else {
            return;
        };
        let failures: Vec<(Timestamp, String, String)> = p
            .probe_failures
            .iter()
            .filter(|(at, _, _)| secs(*at, restart_at).abs() <= self.thresholds.kill_window_s)
            .cloned()
            .collect();
        if failures.is_empty() {
            return;
        }
        p.restart = None;
        let Some(loading) = loading else {
            // A probe kill, but nothing was loading: not this verdict.
            return;
        };
        p.probe_failures.clear();
        let spec = p.spec.clone().unwrap_or_default();
        let startup = failures
            .iter()
            .any(|(_, _, m)| m.to_lowercase().contains("startup"));
        let (which, probe) = if startup {
            ("startup", &spec.startup)
        } else {
            ("liveness", &spec.liveness)
        };
        let first = failures.first().map(|f| f.2.clone()).unwrap_or_default();
        let message = format!(
            "{pod}: container restarted at {} after a failed {which} probe{} while {loading} was loading ({first})",
            clock(restart_at),
            probe
                .as_ref()
                .map(|p| format!(
                    " ({}, every {} s, {} s timeout, {} failures)",
                    p.label(),
                    p.period_seconds,
                    p.timeout_seconds,
                    p.failure_threshold
                ))
                .unwrap_or_default(),
        );
        let events: Vec<Value> = failures
            .iter()
            .map(|(at, reason, msg)| {
                json!({"at": at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                       "reason": reason, "message": msg})
            })
            .collect();
        let evidence = json!({"probe": which, "loading": loading, "events": events,
                   "restart_at": restart_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                   "liveness": spec.liveness, "startup": spec.startup});
        self.push(
            ts,
            pod,
            ContractKind::LivenessKilledDuringLoad,
            message,
            evidence,
        );
    }

    /// `pod`'s GPU is full and shared, or its engine said it ran out of GPU memory:
    /// `vram_overcommit`, once per pod (a full shared GPU is given to the pod that came
    /// last, the one whose load did not fit).
    fn overcommit_check(&mut self, ts: Timestamp, pod: &str) {
        let line = self.gpu_share.oom_line(pod).cloned();
        let (who, message, evidence) = if let Some((at, text)) = line {
            let gpu = self.gpu_share.any(pod);
            let quoted: String = text.chars().take(240).collect();
            let message = format!(
                "{pod}: the engine ran out of GPU memory at {}: \"{quoted}\"{}",
                clock(at),
                gpu.as_ref()
                    .map(|g| format!("; {}", g.describe()))
                    .unwrap_or_default()
            );
            let mut evidence = json!({"line": text,
                "at": at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)});
            if let Some(g) = gpu {
                evidence["gpu"] = g.to_json();
            }
            (pod.to_string(), message, evidence)
        } else {
            let Some(g) = self.gpu_share.full(pod).filter(|g| g.shared()) else {
                return;
            };
            // The pod that came last: the newest creation among the holders.
            let who = g
                .pods
                .iter()
                .max_by_key(|(p, _)| self.pods.get(p).and_then(|c| c.created))
                .map(|(p, _)| p.clone())
                .unwrap_or_else(|| pod.to_string());
            let message = format!(
                "{who} shares a full GPU: {}; the pods' VRAM reaches the GPU's total",
                g.describe()
            );
            (who, message, json!({"gpu": g.to_json()}))
        };
        if self
            .unreported(&who, ContractKind::VramOvercommit)
            .is_none()
        {
            return;
        }
        self.push(ts, &who, ContractKind::VramOvercommit, message, evidence);
    }

    fn stall_check(&mut self, ts: Timestamp) {
        let after = self.thresholds.rollout_stall_after_s;
        let stalled: Vec<(String, Timestamp, String)> = self
            .pending
            .iter()
            .filter_map(|name| Some((name, self.pods.get(name)?)))
            .filter(|(_, p)| p.pending && !p.reported.contains(&ContractKind::RolloutStalled))
            .filter_map(|(name, p)| {
                let (_, msg) = p.failed_scheduling.clone()?;
                let since = p.created?;
                (secs(since, ts) >= after).then(|| (name.clone(), since, msg))
            })
            .collect();
        for (pod, since, msg) in stalled {
            let pending = secs(since, ts);
            let message = format!(
                "{pod} Pending for {pending:.1} s: FailedScheduling \"{msg}\"; the rollout cannot proceed"
            );
            let evidence = json!({
                "pending_since": since.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                "pending_seconds": pending, "failed_scheduling": msg, "threshold_seconds": after});
            self.push(ts, &pod, ContractKind::RolloutStalled, message, evidence)
                .seconds = Some(pending);
        }
        // Running but stuck loading on a full GPU that another pod holds (or after the
        // engine's out-of-memory line).
        let stuck: Vec<(String, Timestamp, String, Value)> = self
            .loading_on_gpu
            .iter()
            .filter_map(|name| Some((name, self.pods.get(name)?)))
            .filter(|(_, p)| !p.reported.contains(&ContractKind::RolloutStalled))
            .filter_map(|(name, p)| {
                let since = p.running_since?;
                if secs(since, ts) < after {
                    return None;
                }
                let full = self.gpu_share.full(name).filter(|g| g.shared());
                let line = self.gpu_share.oom_line(name);
                let why = match (&full, line) {
                    (Some(g), _) => format!("the GPU it was given is full: {}", g.describe()),
                    (None, Some((_, text))) => format!(
                        "its engine ran out of GPU memory: \"{}\"",
                        text.chars().take(160).collect::<String>()
                    ),
                    (None, None) => return None,
                };
                let evidence = json!({
                    "running_since": since.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                    "running_seconds": secs(since, ts), "threshold_seconds": after,
                    "gpu": full.map(|g| g.to_json()), "line": line.map(|(_, t)| t)});
                Some((name.clone(), since, why, evidence))
            })
            .collect();
        for (pod, since, why, evidence) in stuck {
            let running = secs(since, ts);
            let message = format!(
                "{pod} Running for {running:.1} s but not Ready: {why}; the rollout cannot proceed"
            );
            self.push(ts, &pod, ContractKind::RolloutStalled, message, evidence)
                .seconds = Some(running);
        }
    }

    /// A trial finished: its readiness verdict (`shallow_readiness` or
    /// `readiness_covers_inference`) and whether it ran warm. Returns the trial's condition:
    /// `Some("cold")` when its cold step made Cached fall, `Some("warm")` when flagged
    /// `warm_node_bias`, else `None` (no evidence either way). `model`: the model its T3
    /// inference asked for, when known.
    pub fn trial_finished(
        &mut self,
        ts: Timestamp,
        t: &Trial,
        model: Option<String>,
    ) -> Option<&'static str> {
        let (m, pod) = (&t.marks, t.new_pod.clone().unwrap_or_default());
        if t.is_ok()
            && let (Some(ready), Some(t4)) = (m.endpoint_ready.or(m.t1), m.t4)
        {
            let p = self.pods.get(&pod);
            let spec = p.and_then(|p| p.spec.as_ref());
            let logged_before = p
                .and_then(|p| p.logged_ok_inference)
                .is_some_and(|l| l <= ready);
            let resident_at_ready = m
                .model_resident
                .is_some_and(|r| secs(ready, r) <= self.thresholds.resident_slack_s);
            let no_load = t
                .durations
                .load_ns
                .is_some_and(|n| (n as f64) / 1e9 < self.thresholds.no_load_s);
            let window = secs(ready, t4);
            let probe = readiness_label(spec);
            let evidence = json!({
                "endpoint_ready": ready.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
                "first_inference_done": t4.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
                "model_resident": m.model_resident.map(|r| r.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)),
                "load_seconds": t.durations.load_ns.map(|n| n as f64 / 1e9),
                "readiness": spec.and_then(|s| s.readiness.as_ref()),
            });
            let how = if t4 <= ready {
                Some("an inference completed before Ready")
            } else if logged_before {
                Some("the runtime logged a completed inference before Ready")
            } else if resident_at_ready {
                Some("the model was resident when the endpoint turned ready")
            } else if no_load {
                Some("the first inference after Ready did not load the model")
            } else {
                None
            };
            if let Some(how) = how {
                let message =
                    format!("{pod} ready only after a completed inference ({how}; {probe})");
                let kind = ContractKind::ReadinessCoversInference;
                self.push(ts, &pod, kind, message, evidence).trial = Some(t.index);
            } else if window >= self.thresholds.shallow_min_s {
                let message = format!(
                    "{pod} ready and serving {window:.3} s before the first successful inference \
                     ({probe}; the model loaded after Ready)"
                );
                let v = self.push(ts, &pod, ContractKind::ShallowReadiness, message, evidence);
                v.seconds = Some(window);
                v.trial = Some(t.index);
            }
        }
        let dropped = t
            .cold
            .as_ref()
            .is_some_and(|c| c.dropped && c.error.is_none());
        if dropped {
            return Some("cold");
        }
        let node = self.pods.get(&pod).and_then(|p| p.node.clone())?;
        let t0 = m.t0?;
        let (seen, on_pod) = self.warm_nodes.get(&node).cloned()?;
        if seen > t0 {
            return None;
        }
        let model = model
            .or(self.model.clone())
            .unwrap_or_else(|| "the model".into());
        let step = match &t.cold {
            None => "no cold step ran".to_string(),
            Some(c) => match (&c.error, c.cached_kb_before, c.cached_kb_after) {
                (Some(e), _, _) => format!("the cold step failed ({e})"),
                (None, Some(b), Some(a)) => format!(
                    "Cached did not fall ({:.1} → {:.1})",
                    Gib(b * 1024),
                    Gib(a * 1024)
                ),
                _ => "Cached did not fall".to_string(),
            },
        };
        let message = format!(
            "trial {} on {node}, where {model} was loaded at {} (pod {on_pod}): its files were in the \
             page cache and {step}; counted as warm",
            t.index,
            clock(seen)
        );
        let evidence = json!({"node": node, "model": model, "loaded_at": seen.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                   "loaded_on_pod": on_pod, "cold_step": t.cold.as_ref().map(|c| json!({
                       "dropped": c.dropped, "cached_kb_before": c.cached_kb_before,
                       "cached_kb_after": c.cached_kb_after, "error": c.error}))});
        self.push(ts, &pod, ContractKind::WarmNodeBias, message, evidence)
            .trial = Some(t.index);
        Some("warm")
    }
}
