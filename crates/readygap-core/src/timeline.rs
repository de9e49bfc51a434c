//! Trials and their T0–T4 marks, derived from the event stream.
//!
//! A trial starts at T0 = a replacement requested by readygap (the `action_started` of a pod
//! delete or rollout restart). A replacement readygap did not start (someone's `kubectl delete
//! pod`, a rollout, a drain, a container restart after an OOM kill) is a trial too, marked
//! `external`, with T0 = the first evidence observed (the watch event carrying
//! deletionTimestamp, or the terminated container state).
//!
//! T1 = the replacement pod's Ready condition turned true in a watch event (the API's
//! lastTransitionTime is kept too); T2 = first HTTP 200 from the new pod's runtime ("model
//! ready" where the runtime tells it apart: llama-server answers 503 "Loading model" first,
//! and that first answer of the runtime is the mark `t2_http`, "HTTP answers"); T3 = first
//! inference request sent to it; T4 = that inference finished with `done: true`.
//!
//! Sources do not agree on order: a runtime probe of the new pod can arrive before the watch
//! event that says the pod is Ready. So observations of every pod that is not being replaced
//! are kept per pod, and the trial's marks are taken from the replacement pod's observations
//! once it is known. Each mark is the source's own timestamp, never the arrival order.

use super::event::{
    Action, CacheDrop, ContainerState, EndpointSliceView, Event, EventKind, InferenceResult,
    LoggedRequest, MemorySample, PodSpecFacts, PodView, Resource, RuntimeDurations, RuntimeProbe,
    Timestamp,
};
use super::residency::Verdict;
use super::verdict::ContractKind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The marks of one trial. `None` = not reached.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Marks {
    pub t0: Option<Timestamp>,
    pub t1: Option<Timestamp>,
    /// The Ready condition's lastTransitionTime as the API reported it.
    pub t1_api: Option<Timestamp>,
    pub t2: Option<Timestamp>,
    /// T2 "HTTP answers": the runtime's first HTTP answer of any status (T2 itself is
    /// "model ready"); equal to T2 where the runtime does not answer before it is ready.
    pub t2_http: Option<Timestamp>,
    pub t3: Option<Timestamp>,
    pub t4: Option<Timestamp>,
    /// T2 "answers through the Service": the first HTTP 200 of the runtime's probe path sent
    /// through the target's Service at or after T1, the study's T2 (its loop of `curl
    /// http://ollama:11434/api/tags` from a client pod began once the new pod was Ready), so
    /// never before T1, unlike T2 on the pod's own address. With other ready pods behind the
    /// Service the answer can be theirs: then it says only that the Service answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t2_service: Option<Timestamp>,
    /// The old pod's deletionTimestamp seen in a watch event.
    pub deletion_seen: Option<Timestamp>,
    pub scheduled: Option<Timestamp>,
    pub container_started: Option<Timestamp>,
    pub endpoint_ready: Option<Timestamp>,
    pub model_resident: Option<Timestamp>,
    pub first_token: Option<Timestamp>,
    /// The end of the first inference the runtime logged from inside the pod after T0 (the
    /// inference-aware readiness probe's own generate): shown, never taken as T3/T4.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_inference: Option<Timestamp>,
    /// The new pod's runtime start-up phases as its own log writes them, the first instant
    /// of each after T0, by name (`model_loaded`; vLLM's `weights_loaded`,
    /// `kv_cache_profiled`, `kv_cache_allocated`, `graphs_captured`, `engine_ready`;
    /// `listening`): secondary marks, mostly between T1 and T2 (`crate::runtime_log`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub startup: BTreeMap<String, Timestamp>,
}

/// Whether a trial is still going.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum TrialStatus {
    #[default]
    Running,
    Ok,
    Failed {
        reason: Failure,
    },
}

/// The reason of a `trial_abort` the runner gives when it is interrupted (Ctrl-C, the end of
/// a watch): such a trial is [`FailureKind::Interrupted`].
pub const INTERRUPTED: &str = "interrupted";

/// Why a trial failed, as a kind the code branches on. The sentence for people is
/// [`Failure::text`]; the kind is set where the failure is decided, never read back from
/// the sentence (except for a trial serialised by an older build: [`FailureKind::of_text`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// A new replacement began while this one was open (`superseded by a new replacement …`).
    Superseded,
    /// The runner gave up on it (`TrialAbort`: a stage timeout, …).
    Aborted,
    /// The runner was interrupted (Ctrl-C, the end of a fleet watch): `interrupted`.
    Interrupted,
    /// The delete or rollout restart itself failed (`replacement request failed: …`).
    RequestFailed,
    /// The replacement pod was deleted before the trial ended.
    PodDeleted,
    /// The T3 inference failed (`inference_error: …`).
    InferenceError,
    /// The pod's container restarted, not yet explained (`container restarted (…)`).
    ContainerRestarted,
    /// The pod's container restarted, killed by a probe the Events name
    /// (`container restarted: killed by the liveness probe (…)`).
    KilledByProbe,
    /// The pod was OOM-killed (`oom_killed`, `oom_killed (inference_error: …)`).
    OomKilled,
    /// An OOM verdict explains it (`overlapping_residency_oom: …`, …).
    OomVerdict(super::residency::VerdictKind),
    /// Any other reason (a study CSV's own words).
    Other,
}

impl FailureKind {
    /// The kind of a reason written by an older build (or imported): read from its
    /// wording, the only place the sentence decides the kind.
    pub fn of_text(text: &str) -> FailureKind {
        use super::residency::VerdictKind;
        if text == INTERRUPTED {
            return FailureKind::Interrupted;
        }
        if let Some(v) = VerdictKind::ALL
            .into_iter()
            .find(|v| text.starts_with(&format!("{}:", v.name())))
        {
            return FailureKind::OomVerdict(v);
        }
        let prefixes = [
            ("superseded by a new replacement", FailureKind::Superseded),
            ("replacement request failed", FailureKind::RequestFailed),
            ("replacement pod deleted", FailureKind::PodDeleted),
            ("inference_error", FailureKind::InferenceError),
            ("container restarted: killed by", FailureKind::KilledByProbe),
            ("container restarted", FailureKind::ContainerRestarted),
            ("oom_killed", FailureKind::OomKilled),
            ("timeout", FailureKind::Aborted),
        ];
        prefixes
            .into_iter()
            .find(|(p, _)| text.starts_with(p))
            .map_or(FailureKind::Other, |(_, k)| k)
    }

    /// A restart of the pod's container ended the trial (explained or not).
    pub fn is_restart(self) -> bool {
        matches!(
            self,
            FailureKind::ContainerRestarted | FailureKind::KilledByProbe
        )
    }
}

/// A trial's failure: its kind and the sentence shown and recorded (`reason` in JSON, the
/// same text as before the kinds existed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub struct Failure {
    pub kind: FailureKind,
    pub text: String,
}

impl Failure {
    pub fn new(kind: FailureKind, text: impl Into<String>) -> Self {
        Failure {
            kind,
            text: text.into(),
        }
    }
}

/// A reason given as text (an import, an older serialisation): its kind read from it.
impl From<String> for Failure {
    fn from(text: String) -> Self {
        Failure {
            kind: FailureKind::of_text(&text),
            text,
        }
    }
}

impl From<&str> for Failure {
    fn from(text: &str) -> Self {
        Failure::from(text.to_string())
    }
}

impl From<Failure> for String {
    fn from(f: Failure) -> Self {
        f.text
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// Where a trial's T3/T4 came from, when not from readygap's own request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InferenceSource {
    /// The runtime's request log (an observed trial: someone else's request).
    Log,
}

impl InferenceSource {
    /// The name in JSON (`log`); a trial without one says `request` (readygap's own).
    pub fn name(self) -> &'static str {
        match self {
            InferenceSource::Log => "log",
        }
    }
}

impl std::fmt::Display for InferenceSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What is being replaced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Replacement {
    /// New pods replace these (uids and names of the pods present or named at T0).
    Pods {
        uids: Vec<String>,
        names: Vec<String>,
    },
    /// The container of this pod restarts in place (T1 when Ready again after the restart).
    Restart {
        uid: String,
        name: String,
        restarts_before: u32,
    },
}

/// No pods (an imported trial's).
impl Default for Replacement {
    fn default() -> Self {
        Replacement::Pods {
            uids: vec![],
            names: vec![],
        }
    }
}

/// What a trial saw of one pod that is not being replaced (a candidate replacement).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PodObservations {
    pub probe_ok: Option<Timestamp>,
    /// The runtime's first HTTP answer of any status.
    pub http_answered: Option<Timestamp>,
    pub inference: Option<(u64, Timestamp)>,
    pub scheduled: Option<Timestamp>,
    pub container_started: Option<Timestamp>,
    pub endpoint_ready: Option<Timestamp>,
    pub model_resident: Option<Timestamp>,
    /// The first inference the runtime logged after T0: (its start when the line has the
    /// latency, its end, its HTTP status).
    pub logged_inference: Option<(Option<Timestamp>, Timestamp, u16)>,
    /// The same for the first inference from inside the pod (a loopback client: the exec
    /// probe's), kept apart from the users' (`LoggedRequest::from_inside_pod`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_inference: Option<(Option<Timestamp>, Timestamp, u16)>,
}

/// One recovery trial.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    /// 1-based.
    pub index: u32,
    /// Not started by readygap.
    pub external: bool,
    /// What started it, for people: `delete pod ollama-x`, `external: pod ollama-x deleted`.
    pub trigger: String,
    /// The cold step, when this trial ran one.
    pub cold: Option<CacheDrop>,
    pub marks: Marks,
    pub status: TrialStatus,
    pub replacement: Replacement,
    /// The replacement pod, once it turned Ready.
    pub new_pod: Option<String>,
    pub new_uid: Option<String>,
    /// The runtime's own durations of the T3 inference.
    pub durations: RuntimeDurations,
    /// Memory of the new pod after T4 (first sample at or after T4), bytes.
    pub memory_after: Option<u64>,
    /// When the T3 inference ended if it failed (T4 is only for `done: true`).
    pub inference_end: Option<Timestamp>,
    /// The request id of the T3 inference.
    pub inference_request: Option<u64>,
    /// HTTP status of the T3 inference, when known.
    pub http_status: Option<u16>,
    #[serde(default)]
    pub observed: BTreeMap<String, PodObservations>,
    /// The OOM verdict that ended this trial, with its evidence.
    pub oom: Option<Verdict>,
    /// Uids of the pods that existed just before T0: none of them is the replacement (a
    /// Ready sibling re-listed or updated after T0 is no T1), except the pod a container
    /// restart replaces in place.
    #[serde(default)]
    pub present_at_t0: Vec<String>,
    /// Where T3/T4 came from: `None` = readygap's own request, `Some(Log)` (`"log"`) = the
    /// runtime's request log (an observed trial: someone else's request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inference_source: Option<InferenceSource>,
    /// The cache condition of the trial: `cold` (its cold step made Cached fall), `warm`
    /// (flagged `warm_node_bias`: the model's files were in the node's page cache), or a
    /// study CSV's own condition column; `None` without evidence. Statistics keep
    /// conditions apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    /// The readiness-contract verdicts of this trial, by kind (serialised by name:
    /// `shallow_readiness`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verdicts: Vec<ContractKind>,
}

impl Trial {
    fn new(index: u32, external: bool, trigger: String, t0: Timestamp, r: Replacement) -> Self {
        Trial {
            index,
            external,
            trigger,
            marks: Marks {
                t0: Some(t0),
                ..Marks::default()
            },
            replacement: r,
            ..Trial::default()
        }
    }

    /// An empty finished trial, for importers (CSV).
    pub fn imported(index: u32, marks: Marks, status: TrialStatus) -> Self {
        Trial {
            index,
            trigger: "imported".into(),
            marks,
            status,
            ..Trial::default()
        }
    }

    pub fn is_running(&self) -> bool {
        self.status == TrialStatus::Running
    }

    pub fn is_ok(&self) -> bool {
        self.status == TrialStatus::Ok
    }

    /// Why it failed, for people (`None` unless failed).
    pub fn reason(&self) -> Option<&str> {
        self.failure().map(|f| f.text.as_str())
    }

    /// Why it failed.
    pub fn failure(&self) -> Option<&Failure> {
        match &self.status {
            TrialStatus::Failed { reason } => Some(reason),
            _ => None,
        }
    }

    /// The kind of its failure, if it failed.
    pub fn failure_kind(&self) -> Option<FailureKind> {
        self.failure().map(|f| f.kind)
    }

    fn fail(&mut self, kind: FailureKind, text: impl Into<String>) {
        if self.is_running() {
            self.status = TrialStatus::Failed {
                reason: Failure::new(kind, text),
            };
        }
    }

    /// Replace the reason of a trial already failed or running (a later explanation).
    fn refail(&mut self, kind: FailureKind, text: impl Into<String>) {
        self.status = TrialStatus::Failed {
            reason: Failure::new(kind, text),
        };
    }

    /// Whether a pod (by uid or name) is one this trial replaces.
    fn replaces(&self, uid: &str, name: &str) -> bool {
        match &self.replacement {
            Replacement::Pods { uids, names } => {
                uids.iter().any(|u| u == uid) || (uid.is_empty() && names.iter().any(|n| n == name))
            }
            Replacement::Restart { .. } => false,
        }
    }

    /// Whether observations of the pod named `name` count for this trial.
    fn candidate_name(&self, name: &str) -> bool {
        match &self.replacement {
            Replacement::Pods { names, .. } => match &self.new_pod {
                Some(n) => n == name,
                None => !names.iter().any(|n| n == name),
            },
            Replacement::Restart { name: n, .. } => n == name,
        }
    }

    /// Whether `pod` may be this trial's replacement: a pod that did not exist just before
    /// T0 (readygap's own index at T0, not creationTimestamp, which has whole seconds and
    /// the API server's clock), or the pod a container restart replaces in place.
    fn may_replace(&self, pod: &PodView) -> bool {
        match &self.replacement {
            Replacement::Restart { uid, .. } => *uid == pod.uid,
            Replacement::Pods { .. } => !self.present_at_t0.contains(&pod.uid),
        }
    }

    fn observe(&mut self, pod: &str) -> Option<&mut PodObservations> {
        if !self.candidate_name(pod) {
            return None;
        }
        Some(self.observed.entry(pod.to_string()).or_default())
    }

    /// Copy the replacement pod's observations into the marks and close the trial when done.
    fn sync(&mut self) {
        let Some(pod) = &self.new_pod else { return };
        let Some(o) = self.observed.get(pod).cloned() else {
            return;
        };
        let t0 = self.marks.t0;
        let after_t0 = |t: Option<Timestamp>| t.filter(|t| t0.is_none_or(|t0| *t >= t0));
        let m = &mut self.marks;
        m.t2 = m.t2.or(after_t0(o.probe_ok));
        m.t2_http = m.t2_http.or(after_t0(o.http_answered));
        m.scheduled = m.scheduled.or(o.scheduled);
        m.container_started = m.container_started.or(o.container_started);
        m.endpoint_ready = m.endpoint_ready.or(o.endpoint_ready);
        m.model_resident = m.model_resident.or(o.model_resident);
        m.probe_inference = m
            .probe_inference
            .or(o.probe_inference.map(|(_, end, _)| end));
        if m.t3.is_none()
            && let Some((id, ts)) = o.inference
        {
            m.t3 = Some(ts);
            self.inference_request = Some(id);
        }
        // An observed trial: T3/T4 of the first inference the runtime logged after T0 (T4
        // the line's instant, T3 = T4 − its latency); any other status fails the trial.
        if self.inference_request.is_none()
            && m.t4.is_none()
            && self.inference_end.is_none()
            && let Some((start, end, status)) = o.logged_inference
        {
            self.inference_source = Some(InferenceSource::Log);
            self.http_status = Some(status);
            m.t3 = start;
            if status == 200 {
                m.t4 = Some(end);
            } else {
                self.inference_end = Some(end);
                self.status = TrialStatus::Failed {
                    reason: Failure::new(
                        FailureKind::InferenceError,
                        format!("inference_error: HTTP {status} (from the runtime's log)"),
                    ),
                };
            }
        }
        if self.status == TrialStatus::Running && m.t1.is_some() && m.t4.is_some() {
            self.status = TrialStatus::Ok;
        }
    }

    /// Duration between two marks in seconds.
    fn span(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<f64> {
        let (a, b) = (a?, b?);
        Some((b - a).num_microseconds()? as f64 / 1e6)
    }

    /// The value of a metric for this trial, in seconds (bytes for `memory_after`).
    /// Metrics ending at T4 exist only for a trial whose inference completed.
    pub fn metric(&self, metric: Metric) -> Option<f64> {
        let m = &self.marks;
        let ns = |v: Option<u64>| v.map(|n| n as f64 / 1e9);
        match metric {
            Metric::K8sRecovery => Self::span(m.t0, m.t1),
            Metric::RuntimeRecovery => Self::span(m.t0, m.t2),
            Metric::ReadyToRuntime => Self::span(m.t1, m.t2),
            Metric::RuntimeHttp => Self::span(m.t0, m.t2_http),
            Metric::HttpToModelReady => Self::span(m.t2_http, m.t2),
            Metric::RuntimeRecoveryService => Self::span(m.t0, m.t2_service),
            Metric::ReadyToRuntimeService => Self::span(m.t1, m.t2_service),
            Metric::FunctionalRecovery => Self::span(m.t0, m.t4),
            Metric::ReadyToInference => Self::span(m.t1, m.t4),
            Metric::InferenceWall => Self::span(m.t3, m.t4),
            Metric::LoadDuration => ns(self.durations.load_ns),
            Metric::TotalDuration => ns(self.durations.total_ns),
            Metric::PromptEvalDuration => ns(self.durations.prompt_eval_ns),
            Metric::EvalDuration => ns(self.durations.eval_ns),
            Metric::EvalRate => match (self.durations.eval_tokens, self.durations.eval_ns) {
                (Some(n), Some(ns)) if ns > 0 => Some(n as f64 * 1e9 / ns as f64),
                _ => None,
            },
            Metric::MemoryAfter => self.memory_after.map(|b| b as f64),
        }
    }
}

/// The metrics, named as in the published study.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    K8sRecovery,
    RuntimeRecovery,
    ReadyToRuntime,
    FunctionalRecovery,
    ReadyToInference,
    InferenceWall,
    LoadDuration,
    TotalDuration,
    PromptEvalDuration,
    EvalDuration,
    MemoryAfter,
    /// T0 → T2 "HTTP answers".
    RuntimeHttp,
    /// T2 "HTTP answers" → T2 "model ready".
    HttpToModelReady,
    /// Generated tokens per second, from the runtime's timings.
    EvalRate,
    /// T0 → T2 "answers through the Service" (the study's `runtime_recovery`).
    RuntimeRecoveryService,
    /// T1 → T2 "answers through the Service" (the study's `ready_to_runtime`: never negative).
    ReadyToRuntimeService,
}

impl Metric {
    pub const ALL: [Metric; 16] = [
        Metric::K8sRecovery,
        Metric::RuntimeRecovery,
        Metric::ReadyToRuntime,
        Metric::FunctionalRecovery,
        Metric::ReadyToInference,
        Metric::InferenceWall,
        Metric::LoadDuration,
        Metric::TotalDuration,
        Metric::PromptEvalDuration,
        Metric::EvalDuration,
        Metric::MemoryAfter,
        Metric::RuntimeHttp,
        Metric::HttpToModelReady,
        Metric::EvalRate,
        Metric::RuntimeRecoveryService,
        Metric::ReadyToRuntimeService,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::K8sRecovery => "k8s_recovery",
            Metric::RuntimeRecovery => "runtime_recovery",
            Metric::ReadyToRuntime => "ready_to_runtime",
            Metric::FunctionalRecovery => "functional_recovery",
            Metric::ReadyToInference => "ready_to_inference",
            Metric::InferenceWall => "inference_wall",
            Metric::LoadDuration => "load_duration",
            Metric::TotalDuration => "total_duration",
            Metric::PromptEvalDuration => "prompt_eval_duration",
            Metric::EvalDuration => "eval_duration",
            Metric::MemoryAfter => "memory_after",
            Metric::RuntimeHttp => "runtime_http_answers",
            Metric::HttpToModelReady => "http_to_model_ready",
            Metric::EvalRate => "eval_tokens_per_second",
            Metric::RuntimeRecoveryService => "runtime_recovery_service",
            Metric::ReadyToRuntimeService => "ready_to_runtime_service",
        }
    }

    /// Seconds for durations, bytes for memory.
    pub fn is_bytes(self) -> bool {
        self == Metric::MemoryAfter
    }
}

/// A trial the runner announced but whose T0 has not come yet (it may run a cold step first).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Announced {
    cold: bool,
    drop: Option<CacheDrop>,
}

/// All trials of a session, in order.
///
/// Trial `i` (1-based) is `trials[i - 1]`, and only the latest trial is ever running (a new
/// trial ends the open one first): the reducer finds the trial an event concerns without
/// scanning the trials so far, so its work per event does not grow with the session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    pub trials: Vec<Trial>,
    /// Per replacement pod, the latest trial it is the new pod of.
    #[serde(default)]
    by_new_pod: BTreeMap<String, u32>,
    /// Actions requested, by id, until they start.
    requested: BTreeMap<u64, Action>,
    /// Replacement actions that started a trial: action id → trial index (kept after the
    /// action finished: the runner asks which trial its request opened,
    /// [`Timeline::trial_of_action`]).
    started: BTreeMap<u64, u32>,
    announced: Option<Announced>,
    /// A (re-)list of pods is going on: a pod first seen in it was there before readygap
    /// looked (history, never the first evidence of a trial).
    #[serde(default)]
    listing_pods: bool,
    /// Per pod, what the kubelet's and the scheduler's Events said of it: the words a
    /// failed trial is explained in.
    #[serde(default)]
    pod_evidence: BTreeMap<String, PodEvidence>,
}

/// What the Events said of one pod, the words a failed trial is explained in: the kubelet's
/// latest `Unhealthy` (a liveness or startup probe failed, with its output) and `Killing` for
/// a failed probe (kubernetes `pkg/kubelet/prober/prober.go`:
/// `"%s probe failed: %s"`; `pkg/kubelet/kuberuntime/kuberuntime_manager.go`: `"Container %s
/// failed %s probe, will be restarted"`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct PodEvidence {
    /// The latest `Liveness probe failed: …` / `Startup probe failed: …`.
    failure: Option<String>,
    /// `liveness` or `startup`, and when the kill was reported.
    killed: Option<(String, Timestamp)>,
    /// The scheduler's latest `FailedScheduling` message (`0/1 nodes are available: 1
    /// Insufficient nvidia.com/gpu. …`) while the pod is Pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    unschedulable: Option<String>,
}

impl Timeline {
    /// The trial still waiting for its marks, if any.
    pub fn open(&self) -> Option<&Trial> {
        self.trials.last().filter(|t| t.is_running())
    }

    fn open_mut(&mut self) -> Option<&mut Trial> {
        self.trials.last_mut().filter(|t| t.is_running())
    }

    /// The latest trial (open or not).
    pub fn current(&self) -> Option<&Trial> {
        self.trials.last()
    }

    /// Trial `index` (1-based).
    pub fn trial(&self, index: u32) -> Option<&Trial> {
        let t = self.trials.get((index as usize).checked_sub(1)?)?;
        (t.index == index).then_some(t)
    }

    pub(crate) fn trial_mut(&mut self, index: u32) -> Option<&mut Trial> {
        let t = self.trials.get_mut((index as usize).checked_sub(1)?)?;
        (t.index == index).then_some(t)
    }

    /// The trial the replacement action `id` opened at its `action_started` (its T0), if it
    /// opened one: the runner's own trial, never an external one that opened meanwhile.
    pub fn trial_of_action(&self, id: u64) -> Option<&Trial> {
        self.started.get(&id).and_then(|&i| self.trial(i))
    }

    /// The latest trial whose replacement pod is `pod`.
    pub fn latest_of_new_pod(&self, pod: &str) -> Option<&Trial> {
        self.by_new_pod.get(pod).and_then(|&i| self.trial(i))
    }

    fn begin(
        &mut self,
        external: bool,
        trigger: String,
        t0: Timestamp,
        r: Replacement,
        pods: &BTreeMap<String, PodView>,
    ) {
        if let Some(open) = self.open_mut() {
            open.fail(
                FailureKind::Superseded,
                format!("superseded by a new replacement ({trigger})"),
            );
        }
        let index = self.trials.len() as u32 + 1;
        let mut trial = Trial::new(index, external, trigger, t0, r);
        trial.present_at_t0 = pods.values().map(|p| p.uid.clone()).collect();
        if !external && let Some(a) = self.announced.take() {
            trial.cold = a.drop.or_else(|| {
                a.cold.then(|| CacheDrop {
                    error: Some("cold step did not report".into()),
                    ..CacheDrop::default()
                })
            });
        }
        self.trials.push(trial);
    }

    /// Apply one event. `pods` is the pod index as it was before this event; `prev` is the
    /// previous version of the pod a `pod_applied`/`pod_deleted` event carries.
    pub fn apply(&mut self, ev: &Event, pods: &BTreeMap<String, PodView>, prev: Option<&PodView>) {
        let ts = ev.ts;
        match &ev.kind {
            EventKind::TrialBegin { cold } => {
                self.announced = Some(Announced {
                    cold: *cold,
                    drop: None,
                });
            }
            EventKind::CachesDropped(drop) => {
                if let Some(a) = self.announced.as_mut() {
                    a.drop = Some(drop.clone());
                }
            }
            EventKind::TrialAbort { reason } => self.trial_abort(reason, pods),
            EventKind::ActionRequested { id, action } if action.is_replacement() => {
                self.requested.insert(*id, action.clone());
            }
            EventKind::ActionStarted { id } => self.action_started(ts, *id, pods),
            EventKind::ActionFinished { id, outcome } => {
                if let Some(&index) = self.started.get(id)
                    && let super::event::Outcome::Error { message } = outcome
                    && let Some(t) = self.trials.get_mut(index as usize - 1)
                {
                    t.fail(
                        FailureKind::RequestFailed,
                        format!("replacement request failed: {message}"),
                    );
                }
            }
            EventKind::ResyncStarted {
                resource: Resource::Pods,
            } => self.listing_pods = true,
            EventKind::ResyncDone {
                resource: Resource::Pods,
            } => self.listing_pods = false,
            EventKind::PodApplied(pod) => self.pod_applied(ts, pod, prev, pods),
            EventKind::PodDeleted(pod) => {
                self.pod_evidence.remove(&pod.name);
                if let Some(t) = self.open_mut()
                    && t.new_pod.as_deref() == Some(pod.name.as_str())
                {
                    t.fail(FailureKind::PodDeleted, "replacement pod deleted");
                }
            }
            EventKind::RuntimeProbe(p) if p.ok || p.http_answered => self.runtime_probe(ts, p),
            // The study's T2: the first answer through the Service once the new pod is Ready
            // (the trial may have reached T4 already: the mark is a fact of the latest trial).
            EventKind::ServiceProbe(p) if p.ok => {
                if let Some(t) = self.trials.last_mut()
                    && t.marks.t2_service.is_none()
                    && t.marks.t1.is_some_and(|t1| ts >= t1)
                {
                    t.marks.t2_service = Some(ts);
                }
            }
            EventKind::Residency { pod, models } if models.iter().any(|m| m.is_loaded()) => {
                if let Some(t) = self.open_mut()
                    && let Some(o) = t.observe(pod)
                {
                    o.model_resident.get_or_insert(ts);
                    t.sync();
                }
            }
            EventKind::EndpointSliceApplied(slice) => self.endpoint_slice(ts, slice),
            EventKind::InferenceStarted {
                request_id, pod, ..
            } => {
                if let Some(t) = self.open_mut()
                    && t.marks.t0.is_some_and(|t0| ts >= t0)
                    && let Some(o) = t.observe(pod)
                {
                    o.inference.get_or_insert((*request_id, ts));
                    t.sync();
                }
            }
            EventKind::InferenceFirstToken { request_id } => {
                if let Some(t) = self.trial_of_request(*request_id) {
                    t.marks.first_token.get_or_insert(ts);
                }
            }
            EventKind::InferenceDone(result) => self.inference_done(ts, result),
            EventKind::RequestLogged(r) if r.is_inference() => self.request_logged(ts, r, pods),
            EventKind::KubeEvent(e) => self.kube_event(e, pods),
            EventKind::LogLine { pod, text } => self.log_line(ts, pod, text),
            EventKind::MemorySample(s) => self.memory_sample(ts, s),
            _ => {}
        }
    }

    /// The runner gave up on the open trial: it fails with the runner's reason (and, for a
    /// replacement that never left Pending, the scheduler's words).
    fn trial_abort(&mut self, reason: &str, pods: &BTreeMap<String, PodView>) {
        self.announced = None;
        // A replacement that never left Pending says why in the scheduler's words.
        let pending = self.open().and_then(|t| {
            t.observed.keys().find_map(|p| {
                let pod = pods.get(p).filter(|v| v.phase == "Pending")?;
                self.pod_evidence.get(&pod.name)?.unschedulable.clone()
            })
        });
        if let Some(t) = self.open_mut() {
            // The runner's own word for an interruption ([`INTERRUPTED`]).
            let kind = if reason == INTERRUPTED && pending.is_none() {
                FailureKind::Interrupted
            } else {
                FailureKind::Aborted
            };
            t.fail(
                kind,
                match pending {
                    Some(why) => format!("{reason} (Pending: {why})"),
                    None => reason.to_string(),
                },
            );
        }
    }

    /// A replacement readygap requested started: its T0, a trial of readygap's own, mapped
    /// from the action's id ([`Timeline::trial_of_action`]).
    fn action_started(&mut self, ts: Timestamp, id: u64, pods: &BTreeMap<String, PodView>) {
        let Some(action) = self.requested.remove(&id) else {
            return;
        };
        let r = match &action {
            Action::DeletePod { pod, .. } => Replacement::Pods {
                uids: pods.get(pod).map(|p| p.uid.clone()).into_iter().collect(),
                names: vec![pod.clone()],
            },
            _ => Replacement::Pods {
                uids: pods.values().map(|p| p.uid.clone()).collect(),
                names: pods.keys().cloned().collect(),
            },
        };
        self.begin(false, action.label(), ts, r, pods);
        self.started.insert(id, self.trials.len() as u32);
    }

    /// A runtime probe that answered: T2 "HTTP answers" and "model ready" candidates.
    fn runtime_probe(&mut self, ts: Timestamp, p: &RuntimeProbe) {
        if let Some(t) = self.open_mut()
            && let Some(o) = t.observe(&p.pod)
        {
            if p.http_answered {
                o.http_answered = Some(o.http_answered.map_or(ts, |x| x.min(ts)));
            }
            if p.ok {
                o.probe_ok = Some(o.probe_ok.map_or(ts, |x| x.min(ts)));
            }
            t.sync();
        }
    }

    /// The replacement's endpoint can take traffic once it is serving (its pod Ready). Not
    /// `ready`: with publishNotReadyAddresses the controller marks every endpoint ready
    /// (k8s.io/endpointslice utils.go podToEndpoint: ready = PublishNotReadyAddresses ||
    /// (serving && !terminating)), so without it `serving && !terminating` is `ready`.
    fn endpoint_slice(&mut self, ts: Timestamp, slice: &EndpointSliceView) {
        let Some(t) = self.open_mut() else { return };
        for ep in slice
            .endpoints
            .iter()
            .filter(|e| e.serving && !e.terminating)
        {
            if let Some(pod) = &ep.pod
                && let Some(o) = t.observe(pod)
            {
                o.endpoint_ready.get_or_insert(ts);
            }
        }
        t.sync();
    }

    /// A line of the new pod's log after T0: the first instant of each start-up phase.
    fn log_line(&mut self, ts: Timestamp, pod: &str, text: &str) {
        if let Some(t) = self.open_mut()
            && t.new_pod.as_deref() == Some(pod)
            && t.marks.t0.is_some_and(|t0| ts >= t0)
            && let Some(m) = crate::runtime_log::mark(text).filter(|m| m.is_startup())
        {
            t.marks.startup.entry(m.name().to_string()).or_insert(ts);
        }
    }

    /// Memory after T4: the first sample of the trial's new pod at or after its T4 and
    /// before the next trial's T0 (a next trial may already have begun when the sample
    /// arrives: with no cooldown it deletes this very pod).
    fn memory_sample(&mut self, ts: Timestamp, s: &MemorySample) {
        let Some(&index) = self.by_new_pod.get(&s.pod) else {
            return;
        };
        let i = index as usize - 1;
        let next_t0 = self.trials.get(i + 1).and_then(|n| n.marks.t0);
        let t = &mut self.trials[i];
        if t.memory_after.is_none()
            && t.marks.t4.is_some_and(|t4| ts >= t4)
            && next_t0.is_none_or(|t0| ts < t0)
        {
            t.memory_after = Some(s.current);
        }
    }

    /// A kubelet or scheduler Event about a pod: kept as its evidence, and a trial that
    /// failed by that pod's restart is explained in its words.
    fn kube_event(&mut self, e: &crate::event::KubeEventView, pods: &BTreeMap<String, PodView>) {
        let Some(pod) = e.object.strip_prefix("pod/") else {
            return;
        };
        let probe = ["liveness", "startup"].into_iter().find(|p| {
            e.message
                .to_lowercase()
                .contains(&format!("failed {p} probe"))
        });
        match e.reason.as_str() {
            "Unhealthy"
                if e.message.starts_with("Liveness probe failed")
                    || e.message.starts_with("Startup probe failed") =>
            {
                // An exec probe's output ends with its own newline, kept by the kubelet
                // ("Liveness probe failed: not ready: …\n"); the reason is one line.
                self.pod_evidence
                    .entry(pod.to_string())
                    .or_default()
                    .failure = Some(e.message.trim_end().to_string());
            }
            "FailedScheduling" => {
                self.pod_evidence
                    .entry(pod.to_string())
                    .or_default()
                    .unschedulable = Some(e.message.clone());
                return;
            }
            "Killing" => match (probe, e.time) {
                (Some(p), Some(at)) => {
                    self.pod_evidence.entry(pod.to_string()).or_default().killed =
                        Some((p.to_string(), at));
                }
                _ => return,
            },
            _ => return,
        }
        self.explain_restart(pod, pods.get(pod).map(PodView::restarts));
    }

    /// The latest trial of `pod` that failed by a container restart, not yet explained, says
    /// why in the kubelet's words once its Events tell of a probe kill at or after its T0:
    /// `container restarted: killed by the liveness probe (Liveness probe failed: …),
    /// restart 3`.
    fn explain_restart(&mut self, pod: &str, restarts: Option<u32>) {
        let Some(PodEvidence {
            failure,
            killed: Some((probe, at)),
            ..
        }) = self.pod_evidence.get(pod).cloned()
        else {
            return;
        };
        // The latest trial of the pod failed by a restart and not explained yet (a trial of
        // the next restart may have begun since), if the kill lies between its T0 and the next
        // trial's (event times from `lastTimestamp` have whole seconds).
        let Some(i) = self.trials.iter().rposition(|t| {
            (t.new_pod.as_deref() == Some(pod) || t.observed.contains_key(pod))
                && t.failure_kind() == Some(FailureKind::ContainerRestarted)
        }) else {
            return;
        };
        let second = chrono::Duration::seconds(1);
        let next_t0 = self.trials.get(i + 1).and_then(|n| n.marks.t0);
        let t = &mut self.trials[i];
        let in_trial = t.marks.t0.is_some_and(|t0| at >= t0 - second)
            && next_t0.is_none_or(|n| at <= n + second);
        if !in_trial {
            return;
        }
        let output = failure.unwrap_or_else(|| format!("no {probe} probe failure seen"));
        let restart = restarts
            .map(|n| format!(", restart {n}"))
            .unwrap_or_default();
        t.refail(
            FailureKind::KilledByProbe,
            format!("container restarted: killed by the {probe} probe ({output}){restart}"),
        );
    }

    /// The latest trial that failed because the verdict's pod was OOM-killed (or whose
    /// inference failed on it) takes the verdict as its reason and its OOM evidence.
    /// An `evicted_for_memory` verdict instead goes, as evidence only, to the trial whose
    /// inference waited for that load (the trial did not fail: its load included the
    /// eviction).
    pub fn attribute_oom(&mut self, verdict: &Verdict) {
        if verdict.kind == super::residency::VerdictKind::EvictedForMemory {
            if let Some(id) = verdict.request_id
                && let Some(t) = self.trial_of_request(id)
                && t.oom.is_none()
            {
                t.oom = Some(verdict.clone());
            }
            return;
        }
        let pod = verdict.pod.as_str();
        let hit = self.trials.iter_mut().rev().take(3).find(|t| {
            (t.new_pod.as_deref() == Some(pod) || t.observed.contains_key(pod))
                && matches!(
                    t.failure_kind(),
                    Some(FailureKind::OomKilled | FailureKind::InferenceError)
                )
        });
        if let Some(t) = hit {
            t.refail(
                FailureKind::OomVerdict(verdict.kind),
                format!("{}: {}", verdict.kind.name(), verdict.message),
            );
            t.oom = Some(verdict.clone());
        }
    }

    /// The trial whose T3 inference has this request id (pending or confirmed).
    fn trial_of_request(&mut self, id: u64) -> Option<&mut Trial> {
        let t = self.trials.last_mut()?;
        let pending = t
            .observed
            .values()
            .any(|o| o.inference.is_some_and(|(r, _)| r == id));
        (t.inference_request == Some(id) || pending).then_some(t)
    }

    /// A request line of a pod's runtime log: the first inference after T0 of an external
    /// trial readygap sends none to.
    fn request_logged(
        &mut self,
        ts: Timestamp,
        r: &LoggedRequest,
        pods: &BTreeMap<String, PodView>,
    ) {
        let Some(t) = self.open_mut() else { return };
        if !t.external || t.inference_request.is_some() {
            return;
        }
        let start = r
            .latency_ms
            .map(|ms| ts - chrono::Duration::microseconds((ms * 1000.0).round() as i64));
        if t.marks.t0.is_none_or(|t0| start.unwrap_or(ts) < t0) {
            return;
        }
        // The exec probe's own inference (from the pod's localhost, in a pod whose exec probe
        // infers) is a mark of its own; T3/T4 are the first user's request.
        let probe = r.from_localhost()
            && pods
                .get(&r.pod)
                .and_then(PodView::spec)
                .is_some_and(PodSpecFacts::exec_probe_infers);
        if let Some(o) = t.observe(&r.pod) {
            let slot = if probe {
                &mut o.probe_inference
            } else {
                &mut o.logged_inference
            };
            if slot.is_none() {
                *slot = Some((start, ts, r.status));
                t.sync();
            }
        }
    }

    fn inference_done(&mut self, ts: Timestamp, r: &InferenceResult) {
        let Some(t) = self.trial_of_request(r.request_id) else {
            return;
        };
        if !t.is_running() {
            return;
        }
        // Bind the request to its pod now if T1 has not arrived yet.
        t.http_status = r.http_status;
        if r.ok {
            t.marks.t4.get_or_insert(ts);
            t.durations = r.durations;
            if t.new_pod.is_none() {
                // T4 before the Ready event: keep it; the trial closes when T1 arrives.
                return;
            }
            t.sync();
        } else {
            t.inference_end = Some(ts);
            let why = r
                .error
                .clone()
                .or_else(|| r.http_status.map(|s| format!("HTTP {s}")))
                .unwrap_or_else(|| "no done: true".into());
            t.fail(
                FailureKind::InferenceError,
                format!("inference_error: {why}"),
            );
        }
    }

    fn pod_applied(
        &mut self,
        ts: Timestamp,
        pod: &PodView,
        prev: Option<&PodView>,
        pods: &BTreeMap<String, PodView>,
    ) {
        // A pod first seen in a list was there before readygap looked: its deletion (or
        // its existence) is history, not the first evidence of a replacement.
        let history = self.listing_pods && prev.is_none();
        let newly_deleting =
            pod.deletion_timestamp.is_some() && prev.is_none_or(|p| p.deletion_timestamp.is_none());
        let prev_restarts = prev.map_or(pod.restarts(), |p| p.restarts());
        let terminated = |p: &PodView| {
            p.containers
                .iter()
                .any(|c| matches!(c.state, ContainerState::Terminated { .. }))
        };
        let restarted = pod.deletion_timestamp.is_none()
            && prev.is_some()
            && (pod.restarts() > prev_restarts
                || (terminated(pod) && !prev.is_some_and(terminated)));

        if newly_deleting {
            if !history {
                self.pod_deleting(ts, pod, pods);
            }
            return;
        }
        self.external_rollout(ts, pod, prev.is_none() && !history, pods);
        if restarted {
            self.container_restarted(ts, pod, prev_restarts, pods);
        }
        self.replacement_progress(ts, pod);
    }

    /// A pod newly carrying deletionTimestamp: the deletion of a trial's pod (its
    /// `deletion_seen`), an echo of readygap's own request, or an external trial's first
    /// evidence.
    fn pod_deleting(&mut self, ts: Timestamp, pod: &PodView, pods: &BTreeMap<String, PodView>) {
        let covered = self.open().is_some_and(|t| t.replaces(&pod.uid, &pod.name));
        // The deletion readygap asked for, seen after its trial already ended (aborted
        // by Ctrl-C or a timeout between the request and the watch event): an echo of
        // readygap's own request, not an external trial.
        let echo = !covered
            && self
                .trials
                .last()
                .is_some_and(|t| !t.external && t.replaces(&pod.uid, &pod.name));
        if echo {
            return;
        }
        if !covered {
            // A deletion readygap did not ask for (or one of a pod that is not being
            // replaced): an external trial.
            self.begin(
                true,
                format!("external: pod {} deleted", pod.name),
                ts,
                Replacement::Pods {
                    uids: vec![pod.uid.clone()],
                    names: vec![pod.name.clone()],
                },
                pods,
            );
        }
        if let Some(t) = self.open_mut() {
            t.marks.deletion_seen.get_or_insert(ts);
        }
    }

    /// A pod first seen outside a list (`first_seen`) may be an external rollout's first
    /// evidence.
    fn external_rollout(
        &mut self,
        ts: Timestamp,
        pod: &PodView,
        first_seen: bool,
        pods: &BTreeMap<String, PodView>,
    ) {
        // A rollout readygap did not start: with maxSurge the new ReplicaSet's pod comes
        // before any deletion, and may be Ready before the old pod goes. Its first
        // appearance is the first evidence (T0); the old pods are the ones replaced.
        if first_seen
            && pod.deletion_timestamp.is_none()
            && self.open().is_none()
            && let Some(owner) = &pod.owner
        {
            let old: Vec<&PodView> = pods
                .values()
                .filter(|p| p.deletion_timestamp.is_none() && p.name != pod.name)
                .collect();
            if !old.is_empty()
                && old
                    .iter()
                    .all(|p| p.owner.as_ref().is_some_and(|o| o != owner))
            {
                self.begin(
                    true,
                    format!("external: rollout (new pod {} of {owner})", pod.name),
                    ts,
                    Replacement::Pods {
                        uids: old.iter().map(|p| p.uid.clone()).collect(),
                        names: old.iter().map(|p| p.name.clone()).collect(),
                    },
                    pods,
                );
            }
        }
    }

    /// The pod's container restarted (its count rose, or it terminated): the open trial
    /// that relied on it fails with the cause, and the restart is an external trial of its
    /// own (unless the open trial is already that restart or is replacing this pod).
    fn container_restarted(
        &mut self,
        ts: Timestamp,
        pod: &PodView,
        prev_restarts: u32,
        pods: &BTreeMap<String, PodView>,
    ) {
        let already = self.open().is_some_and(|t| {
            matches!(&t.replacement, Replacement::Restart { uid, .. } if uid == &pod.uid)
                && t.marks.t1.is_none()
        });
        // The pod the open trial is replacing (its delete sent, the deletion not yet
        // seen): its container restarting is not another replacement. A runtime that
        // crashed mid-inference fails its trial at once, and the next trial's delete can
        // precede the kubelet's report of the restart.
        let being_replaced = self.open().is_some_and(|t| t.replaces(&pod.uid, &pod.name));
        if !already && !being_replaced {
            let why = if pod.oom_killed() {
                "OOMKilled".to_string()
            } else {
                pod.containers
                    .iter()
                    .find_map(|c| match c.last_state.as_ref().unwrap_or(&c.state) {
                        ContainerState::Terminated {
                            reason, exit_code, ..
                        } => Some(format!("{reason}, exit {exit_code}")),
                        _ => None,
                    })
                    .unwrap_or_else(|| "restarted".into())
            };
            // The open trial loses its pod: it fails with the cause.
            if let Some(t) = self.open_mut()
                && (t.new_pod.as_deref() == Some(pod.name.as_str())
                    || t.observed.contains_key(&pod.name))
            {
                if pod.oom_killed() {
                    t.fail(FailureKind::OomKilled, "oom_killed");
                } else {
                    t.fail(
                        FailureKind::ContainerRestarted,
                        format!("container restarted ({why})"),
                    );
                }
                self.explain_restart(&pod.name, Some(pod.restarts()));
            }
            // A finished trial whose inference failed because of this kill learns why.
            if pod.oom_killed()
                && let Some(t) = self.trials.last_mut()
                && t.new_pod.as_deref() == Some(pod.name.as_str())
                && t.failure_kind() == Some(FailureKind::InferenceError)
            {
                let r = t.reason().unwrap_or_default().to_string();
                t.refail(FailureKind::OomKilled, format!("oom_killed ({r})"));
            }
            self.begin(
                true,
                format!("external: container restart of {} ({why})", pod.name),
                ts,
                Replacement::Restart {
                    uid: pod.uid.clone(),
                    name: pod.name.clone(),
                    restarts_before: prev_restarts,
                },
                pods,
            );
        }
    }

    /// What a pod's change tells the open trial: scheduled, container started, and T1 once
    /// its replacement turned Ready.
    fn replacement_progress(&mut self, ts: Timestamp, pod: &PodView) {
        let Some(t) = self.open_mut() else { return };
        if t.replaces(&pod.uid, &pod.name) || pod.deletion_timestamp.is_some() {
            return;
        }
        let restart_done = match &t.replacement {
            Replacement::Restart {
                uid,
                restarts_before,
                ..
            } => {
                if uid != &pod.uid {
                    return;
                }
                pod.restarts() > *restarts_before
            }
            Replacement::Pods { .. } => true,
        };
        // T1 belongs to the replacement (once known): a pod that did not exist before T0.
        if t.new_pod.as_ref().is_some_and(|n| *n != pod.name) || !t.may_replace(pod) {
            return;
        }
        if let Some(o) = t.observe(&pod.name) {
            if pod.condition("PodScheduled").is_some_and(|c| c.status) {
                o.scheduled.get_or_insert(ts);
            }
            if restart_done
                && pod
                    .containers
                    .iter()
                    .any(|c| matches!(c.state, ContainerState::Running { .. }))
            {
                o.container_started.get_or_insert(ts);
            }
        }
        if t.marks.t1.is_none() && restart_done && pod.is_ready() {
            t.marks.t1 = Some(ts);
            t.marks.t1_api = pod.condition("Ready").and_then(|c| c.last_transition);
            t.new_pod = Some(pod.name.clone());
            t.new_uid = Some(pod.uid.clone());
            // Observations of other candidate pods do not belong to this trial.
            let keep = pod.name.clone();
            t.observed.retain(|k, _| *k == keep);
            t.sync();
            let index = t.index;
            self.by_new_pod.insert(pod.name.clone(), index);
            return;
        }
        t.sync();
    }
}
