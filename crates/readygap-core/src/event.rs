//! The event model: everything readygap observes or does is an [`Event`]. Live sources, the lab
//! and a replayed recording all produce these; the reducer ([`crate::state`]) is their
//! only interpreter, and the recorder writes them as they are.
//!
//! Every event carries the wall-clock instant (UTC, microsecond precision) at which its source
//! observed the fact. Names are stable: they are the recording format (snake_case).
//!
//! The shape on the wire is `{"ts":"…Z","source":"kube","kind":{"pod_applied":{…}}}`: the
//! kind is an externally tagged enum, which serde reads without buffering (fast replay).
//!
//! A missing `Option` field reads as `None` (serde's rule for `Option` fields without a
//! custom deserializer), so recordings made before a field existed still read; fields read
//! with `opt_ts` or of other types say `#[serde(default)]`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A UTC instant, as stamped by a source.
pub type Timestamp = DateTime<Utc>;

/// One observed fact or one step of an action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// When the source observed it.
    #[serde(with = "ts_format")]
    pub ts: Timestamp,
    /// Which feed produced it.
    pub source: Source,
    /// What happened.
    pub kind: EventKind,
}

impl Event {
    pub fn new(ts: Timestamp, source: Source, kind: EventKind) -> Self {
        Self { ts, source, kind }
    }
}

/// An event's instant as a recording keeps it (whole microseconds, truncated as
/// [`ts_format`] writes it): a live session reduces this, so replaying its recording gives
/// the same state, figures and trial documents to the microsecond.
pub fn recorded_instant(ts: Timestamp) -> Timestamp {
    use chrono::SubsecRound;
    ts.trunc_subsecs(6)
}

/// Timestamps are written as RFC 3339 with microseconds and `Z`, read from any RFC 3339 form.
pub mod ts_format {
    use super::Timestamp;
    use chrono::SecondsFormat;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(ts: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&ts.to_rfc3339_opts(SecondsFormat::Micros, true))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        parse(&s).map_err(serde::de::Error::custom)
    }

    /// Parse RFC 3339. The form readygap writes (`2026-11-30T10:00:00.123456Z`) takes a fast
    /// path (replay parses millions of these); anything else goes through chrono.
    pub fn parse(s: &str) -> Result<Timestamp, chrono::ParseError> {
        fast(s.as_bytes()).map_or_else(
            || chrono::DateTime::parse_from_rfc3339(s).map(|t| t.with_timezone(&chrono::Utc)),
            Ok,
        )
    }

    fn fast(b: &[u8]) -> Option<Timestamp> {
        // YYYY-MM-DDTHH:MM:SS.ffffffZ (27 bytes)
        if b.len() != 27 || [b[4], b[7], b[10], b[13], b[16], b[19], b[26]] != *b"--T::.Z" {
            return None;
        }
        let num = |r: std::ops::Range<usize>| -> Option<u32> {
            b[r].iter().try_fold(0u32, |acc, c| {
                c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
            })
        };
        let date = chrono::NaiveDate::from_ymd_opt(num(0..4)? as i32, num(5..7)?, num(8..10)?)?;
        let time = chrono::NaiveTime::from_hms_micro_opt(
            num(11..13)?,
            num(14..16)?,
            num(17..19)?,
            num(20..26)?,
        )?;
        Some(chrono::DateTime::from_naive_utc_and_offset(
            date.and_time(time),
            chrono::Utc,
        ))
    }
}

/// The feed an event came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Kubernetes watches (pods, EndpointSlices, Events, Nodes).
    Kube,
    /// The LLM runtime's HTTP API (probe, residency, models, inference).
    Runtime,
    /// The serving container's memory (cgroup files or the Summary API).
    Memory,
    /// The machine readygap runs on, or a node's host metrics.
    Host,
    /// Effects readygap carried out (delete, restart, drop caches, inference).
    Action,
    /// The trial runner (begin/abort of trials).
    Runner,
    /// The serving container's log (the runtime's request lines), stamped with the
    /// instant each line was written.
    Log,
    /// readygap itself (session header, notes).
    Session,
}

/// A Kubernetes resource readygap watches: the `resource` of a resync, and the name of its
/// watch's feed. Recorded as the API's plural name (`pods`, `endpointslices`, `events`,
/// `nodes`); a name this build does not know (a newer recording's) is kept as it is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum Resource {
    Pods,
    EndpointSlices,
    Events,
    Nodes,
    Other(String),
}

impl Resource {
    /// The API's plural name, as recorded.
    pub fn name(&self) -> &str {
        match self {
            Resource::Pods => "pods",
            Resource::EndpointSlices => "endpointslices",
            Resource::Events => "events",
            Resource::Nodes => "nodes",
            Resource::Other(s) => s,
        }
    }
}

impl From<&str> for Resource {
    fn from(s: &str) -> Self {
        match s {
            "pods" => Resource::Pods,
            "endpointslices" => Resource::EndpointSlices,
            "events" => Resource::Events,
            "nodes" => Resource::Nodes,
            other => Resource::Other(other.to_string()),
        }
    }
}

impl From<String> for Resource {
    fn from(s: String) -> Self {
        Resource::from(s.as_str())
    }
}

impl From<Resource> for String {
    fn from(r: Resource) -> Self {
        r.name().to_string()
    }
}

impl std::fmt::Display for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Tests and callers compare a resource with its name (`resource == "pods"`).
impl PartialEq<str> for Resource {
    fn eq(&self, other: &str) -> bool {
        self.name() == other
    }
}

impl PartialEq<&str> for Resource {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

/// The feed a `source_error`/`source_connected` names: a watch (by its resource), the
/// memory sampler (`memory`), a node's host sampler (`host NODE`, [`host_feed`]), the log
/// follower (`logs`), the cluster connection (`cluster`). Recorded as that text; a name this
/// build does not know is kept as it is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum Feed {
    Watch(Resource),
    Memory,
    Host(String),
    Logs,
    Cluster,
    Other(String),
}

impl Feed {
    /// The feed's recorded name (the key of `State::feeds`).
    pub fn name(&self) -> String {
        match self {
            Feed::Watch(r) => r.name().to_string(),
            Feed::Memory => "memory".into(),
            Feed::Host(node) => host_feed(node),
            Feed::Logs => "logs".into(),
            Feed::Cluster => "cluster".into(),
            Feed::Other(s) => s.clone(),
        }
    }
}

impl From<&str> for Feed {
    fn from(s: &str) -> Self {
        match s {
            "memory" => Feed::Memory,
            "logs" => Feed::Logs,
            "cluster" => Feed::Cluster,
            _ => match s.strip_prefix("host ") {
                Some(node) => Feed::Host(node.to_string()),
                None => match Resource::from(s) {
                    Resource::Other(s) => Feed::Other(s),
                    r => Feed::Watch(r),
                },
            },
        }
    }
}

impl From<String> for Feed {
    fn from(s: String) -> Self {
        Feed::from(s.as_str())
    }
}

impl From<Feed> for String {
    fn from(f: Feed) -> Self {
        f.name()
    }
}

impl std::fmt::Display for Feed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// Tests and callers compare a feed with its name (`feed == "memory"`).
impl PartialEq<str> for Feed {
    fn eq(&self, other: &str) -> bool {
        self.name() == other
    }
}

impl PartialEq<&str> for Feed {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

/// Everything that can happen. Variant names are the stable recording names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// Context of the session: first event of a live session or a recording.
    Session(SessionInfo),
    /// A pod was added or changed (watch ADDED/MODIFIED, or an item of a re-list).
    PodApplied(PodView),
    /// A pod was removed from the API.
    PodDeleted(PodView),
    /// A watch began a (re-)list of a resource: objects not re-applied before the matching
    /// `resync_done` are gone.
    ResyncStarted { resource: Resource },
    /// The (re-)list of a resource is complete.
    ResyncDone { resource: Resource },
    /// An EndpointSlice was added or changed.
    EndpointSliceApplied(EndpointSliceView),
    /// An EndpointSlice was removed.
    EndpointSliceDeleted { name: String },
    /// A Kubernetes Event about one of the watched objects.
    KubeEvent(KubeEventView),
    /// A node was added or changed.
    NodeApplied(NodeView),
    /// One probe of a pod's runtime HTTP API.
    RuntimeProbe(RuntimeProbe),
    /// One probe of the runtime through the target's Service (after T1, until it answers 200):
    /// the study's T2.
    ServiceProbe(ServiceProbe),
    /// Models resident in a pod's runtime (Ollama `/api/ps`).
    Residency {
        pod: String,
        models: Vec<ResidentModel>,
    },
    /// Models on disk of a pod's runtime (Ollama `/api/tags`).
    ModelsOnDisk { pod: String, models: Vec<DiskModel> },
    /// What a pod's runtime says of its own load on `/metrics` (llama-server with
    /// `--metrics`, vLLM); emitted when it changes.
    RuntimeMetrics {
        pod: String,
        metrics: RuntimeMetrics,
    },
    /// One memory sample of the serving container.
    MemorySample(MemorySample),
    /// The GPU memory a pod's container sees, from `source` (`nvidia-smi in the container`).
    GpuSample {
        pod: String,
        source: String,
        gpus: Vec<crate::gpu::GpuMemory>,
        /// Why the sources preferred to `source` are not used.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        passed_over: Vec<String>,
    },
    /// A pod's GPU memory cannot be read, and why (no source, or it failed).
    GpuUnavailable { pod: String, why: String },
    /// One sample of a host's CPU and memory.
    HostSample(HostSample),
    /// How the selected node is reached (access for its host samples and the cold step).
    NodeAccess(NodeAccessInfo),
    /// An action was asked for (key press, runner step, CLI).
    ActionRequested { id: u64, action: Action },
    /// The action's request is being sent now (for a replacement action this is T0).
    ActionStarted { id: u64 },
    /// The action ended.
    ActionFinished { id: u64, outcome: Outcome },
    /// An inference request was sent (T3 when it is the first to the replacement pod).
    InferenceStarted {
        request_id: u64,
        pod: String,
        model: String,
    },
    /// The first streamed token of an inference arrived.
    InferenceFirstToken { request_id: u64 },
    /// An inference ended: `ok` is HTTP 200 with `done: true`.
    InferenceDone(InferenceResult),
    /// A request line of the runtime's own log (Ollama's gin line, llama.cpp server's
    /// request line), stamped with the instant the line was written (the request's end).
    RequestLogged(LoggedRequest),
    /// One line of a pod's container log, followed while the Log view is on (`L`),
    /// stamped with the instant the kubelet says it was written.
    LogLine { pod: String, text: String },
    /// The Log view's follower of a pod's log: following, or stopped (the container ended;
    /// with `error`, the log cannot be read and why).
    LogFollow {
        pod: String,
        following: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The page cache of a node was dropped (or the attempt failed): the cold step of a trial.
    CachesDropped(CacheDrop),
    /// The trial runner begins a trial it will drive (before its cold step or T0).
    TrialBegin { cold: bool },
    /// The trial runner gives up on the open trial (stage timeout, Ctrl-C, ...).
    TrialAbort { reason: String },
    /// A source lost its connection or failed; the message is shown on screen.
    SourceError { feed: Feed, message: String },
    /// A source (re)connected.
    SourceConnected { feed: Feed, detail: String },
    /// A free-form status line.
    Note { text: String },
}

/// Session context, shown in the header and stored in recordings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    pub context: String,
    pub namespace: String,
    pub target: String,
    pub model: Option<String>,
    /// `live`, `demo`, `run`, ...
    #[serde(default)]
    pub mode: String,
    /// The LLM runtime readygap talks to (`ollama`, `llamacpp`, `openai`), and how it was
    /// chosen (`--runtime`, the container image, the runtime's answers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// The verdict thresholds the session judged with (`None`: the defaults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdicts: Option<super::thresholds::VerdictThresholds>,
}

/// The compact view of a Pod that the reducer needs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PodView {
    pub name: String,
    pub uid: String,
    pub node: Option<String>,
    pub ip: Option<String>,
    /// Pending, Running, Succeeded, Failed, Unknown.
    #[serde(default)]
    pub phase: String,
    #[serde(default)]
    pub conditions: Vec<PodCondition>,
    #[serde(default)]
    pub containers: Vec<ContainerView>,
    #[serde(default, with = "opt_ts")]
    pub created: Option<Timestamp>,
    #[serde(default, with = "opt_ts")]
    pub deletion_timestamp: Option<Timestamp>,
    /// The owner (ReplicaSet) name, when any.
    pub owner: Option<String>,
    #[serde(default)]
    pub resource_version: String,
}

/// The parts of a pod spec the readiness-contract verdicts cite: the serving container's
/// probes and the volume its models live on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PodSpecFacts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness: Option<ProbeFacts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub liveness: Option<ProbeFacts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup: Option<ProbeFacts>,
    /// The models directory's volume: `emptyDir`, `persistentVolumeClaim ollama-models`,
    /// `hostPath /data`, ...; `None` when no volume is mounted there (the image's own disk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models_volume: Option<String>,
    /// Where the models directory is mounted (`/root/.ollama`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub models_mount: Option<String>,
    /// The GPUs the serving container asks for (`nvidia.com/gpu` in its limits or requests).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub gpus: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One probe of a container spec.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeFacts {
    /// `httpGet`, `tcpSocket`, `exec` or `grpc`.
    pub kind: String,
    /// `/api/tags :11434`, `:11434`, the command line (shortened).
    pub target: String,
    /// The probe sends an inference (an exec or path naming generate/chat/completion, or
    /// the repository's `ready-inference.sh`).
    #[serde(default)]
    pub inference: bool,
    #[serde(default)]
    pub initial_delay_seconds: u32,
    #[serde(default)]
    pub period_seconds: u32,
    #[serde(default)]
    pub timeout_seconds: u32,
    #[serde(default)]
    pub failure_threshold: u32,
}

impl PodSpecFacts {
    /// One of the serving container's probes is an exec probe that sends an inference (the
    /// shipped `ready-inference.sh`): its requests reach the runtime from the pod's localhost.
    pub fn exec_probe_infers(&self) -> bool {
        [&self.readiness, &self.liveness, &self.startup]
            .into_iter()
            .flatten()
            .any(|p| p.kind == "exec" && p.inference)
    }
}

impl ProbeFacts {
    /// `httpGet /api/tags :11434`.
    pub fn label(&self) -> String {
        if self.target.is_empty() {
            self.kind.clone()
        } else {
            format!("{} {}", self.kind, self.target)
        }
    }
}

impl PodView {
    /// The status of a condition type (`Ready`, `PodScheduled`, ...), if present.
    pub fn condition(&self, type_: &str) -> Option<&PodCondition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    /// What the pod spec says about the serving container's probes and models volume (the
    /// readiness-contract verdicts name them): carried by that container's view.
    pub fn spec(&self) -> Option<&PodSpecFacts> {
        self.containers.iter().find_map(|c| c.spec.as_ref())
    }

    /// Whether the Ready condition is true.
    pub fn is_ready(&self) -> bool {
        self.condition("Ready").is_some_and(|c| c.status)
    }

    /// Total restarts across containers.
    pub fn restarts(&self) -> u32 {
        self.containers.iter().map(|c| c.restart_count).sum()
    }

    /// Whether any container is (or was last) OOM-killed.
    pub fn oom_killed(&self) -> bool {
        self.containers.iter().any(|c| {
            c.state.is_oom_killed() || c.last_state.as_ref().is_some_and(|s| s.is_oom_killed())
        })
    }
}

/// One pod condition.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PodCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: bool,
    #[serde(default, with = "opt_ts")]
    pub last_transition: Option<Timestamp>,
    pub reason: Option<String>,
}

/// One container's status.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContainerView {
    pub name: String,
    #[serde(default)]
    pub ready: bool,
    #[serde(default)]
    pub restart_count: u32,
    #[serde(default)]
    pub state: ContainerState,
    pub last_state: Option<ContainerState>,
    /// The serving container's probes and models volume from the pod spec (only on the
    /// serving container; `None` in recordings made before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<PodSpecFacts>,
}

/// A container state, as in the Kubernetes API.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContainerState {
    #[default]
    Unknown,
    Waiting {
        reason: String,
    },
    Running {
        #[serde(default, with = "opt_ts")]
        started_at: Option<Timestamp>,
    },
    Terminated {
        reason: String,
        exit_code: i32,
        #[serde(default, with = "opt_ts")]
        finished_at: Option<Timestamp>,
    },
}

impl ContainerState {
    pub fn is_oom_killed(&self) -> bool {
        matches!(self, ContainerState::Terminated { reason, .. } if reason == "OOMKilled")
    }

    /// A short label such as `Running`, `Waiting: ContainerCreating`, `Terminated: OOMKilled (137)`.
    pub fn label(&self) -> String {
        match self {
            ContainerState::Unknown => "Unknown".into(),
            ContainerState::Waiting { reason } => format!("Waiting: {reason}"),
            ContainerState::Running { .. } => "Running".into(),
            ContainerState::Terminated {
                reason, exit_code, ..
            } => format!("Terminated: {reason} ({exit_code})"),
        }
    }
}

/// The view of one EndpointSlice.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EndpointSliceView {
    pub name: String,
    pub service: Option<String>,
    #[serde(default)]
    pub endpoints: Vec<EndpointView>,
}

/// One endpoint of a slice with its conditions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EndpointView {
    #[serde(default)]
    pub addresses: Vec<String>,
    pub pod: Option<String>,
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
}

/// A Kubernetes Event (reason, message) about an object.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KubeEventView {
    pub object: String,
    pub reason: String,
    pub message: String,
    /// `Normal` or `Warning`.
    #[serde(rename = "type", default)]
    pub type_: String,
    /// The Event object's name: a repeat updates the same object (its `count` grows).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// How many times it happened, as the Event says (`count`, or `series.count`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// When it last happened, by the Event's own clock (`eventTime`, else `lastTimestamp`,
    /// else `firstTimestamp`, else its creation): an Event from before readygap started
    /// (replayed by the initial list) keeps its time and is history, never fresh evidence.
    #[serde(default, with = "opt_ts", skip_serializing_if = "Option::is_none")]
    pub time: Option<Timestamp>,
}

/// A node's name, readiness and the labels that help to reach it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeView {
    pub name: String,
    pub ready: bool,
    pub provider_id: Option<String>,
    pub internal_ip: Option<String>,
}

/// One probe of the runtime through a Service: the runtime's probe path (`GET /api/tags` for
/// Ollama, as the study asked it) sent to the Service, which hands it to one of its ready
/// endpoints.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServiceProbe {
    /// The Service's name.
    pub service: String,
    /// The Service's port the probe was sent to (its number or name).
    pub port: String,
    /// How it reached the Service: `api-server service proxy`.
    pub route: String,
    /// HTTP 200 was received.
    pub ok: bool,
    pub status: Option<u16>,
    /// Round trip in milliseconds.
    pub latency_ms: f64,
    pub error: Option<String>,
}

/// One probe of a runtime's HTTP API.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RuntimeProbe {
    pub pod: String,
    /// HTTP 200 was received.
    pub ok: bool,
    pub status: Option<u16>,
    /// Round trip in milliseconds.
    pub latency_ms: f64,
    pub error: Option<String>,
    /// The runtime itself answered over HTTP, with any status (llama-server's 503 "Loading
    /// model" while it loads; not a proxy's error page): T2 "HTTP answers", where `ok` is
    /// T2 "model ready". Absent in recordings made before the split.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub http_answered: bool,
}

/// A runtime's own figures from its Prometheus `/metrics` (each summed over its label sets,
/// `None` when the runtime does not export it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RuntimeMetrics {
    /// Requests being generated: `llamacpp:requests_processing`, `vllm:num_requests_running`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<f64>,
    /// Requests waiting for a slot: `llamacpp:requests_deferred`, `vllm:num_requests_waiting`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<f64>,
    /// KV cache in use, 0–1: `vllm:kv_cache_usage_perc` (a fraction despite its name; before
    /// v0.10 `vllm:gpu_cache_usage_perc`), `llamacpp:kv_cache_usage_ratio` (older servers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache: Option<f64>,
    /// Tokens generated since the server started: `llamacpp:tokens_predicted_total`,
    /// `vllm:generation_tokens_total`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_generated: Option<f64>,
}

/// A model resident in the runtime (`/api/ps`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResidentModel {
    pub name: String,
    pub size: u64,
    #[serde(default)]
    pub size_vram: u64,
    #[serde(default, with = "opt_ts")]
    pub expires_at: Option<Timestamp>,
    /// The runtime's own word for the model's state, when it has one (llama-server's router
    /// `/models`: `loading`, `loaded`, `sleeping`); absent: resident.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

impl ResidentModel {
    /// Fully resident (not loading).
    pub fn is_loaded(&self) -> bool {
        self.status.as_deref().is_none_or(|s| s == "loaded")
    }

    /// Bytes in the host's memory: `size` includes `size_vram` (Ollama server/routes.go
    /// PsHandler reports the model's total as `size`, its GPU part as `size_vram`), and no
    /// cgroup is charged for VRAM.
    pub fn host_bytes(&self) -> u64 {
        self.size.saturating_sub(self.size_vram)
    }
}

/// A model on disk (`/api/tags`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskModel {
    pub name: String,
    pub size: u64,
}

/// Where a memory sample came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemorySource {
    #[default]
    CgroupV2,
    CgroupV1,
    /// The kubelet Summary API through the node proxy (when exec is forbidden).
    SummaryApi,
}

/// One sample of the serving container's memory.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemorySample {
    pub pod: String,
    /// Usage in bytes (`memory.current` / `memory.usage_in_bytes`).
    pub current: u64,
    /// Usage minus inactive file cache, when known.
    pub working_set: Option<u64>,
    /// The limit in bytes; `None` when unlimited or unknown.
    pub limit: Option<u64>,
    /// The cgroup's OOM-kill counter, when known.
    pub oom_kill: Option<u64>,
    #[serde(default)]
    pub source: MemorySource,
}

/// The feed name of a node's host samples (`host NODE`): their errors and connection
/// events name it, the Host panel looks it up.
pub fn host_feed(node: &str) -> String {
    format!("host {node}")
}

/// One sample of a host's CPU and memory, stamped (the event's `ts`) when its sampler
/// observed it. Byte counts of a node's or this machine's `/proc/meminfo` are kB × 1024. A
/// figure the sampler could not know is `None` (a gap, shown as `—`), never 0; `None`
/// figures are left out of recordings, and old recordings' plain numbers still read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostSample {
    /// `None` for the machine readygap runs on, else the node name.
    pub node: Option<String>,
    /// CPU busy share over all CPUs since the previous sample, 0–100; `None` for a
    /// sampler's first sample and when the source has no CPU figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_percent: Option<f32>,
    pub mem_total: u64,
    /// `MemAvailable` (the kernel's estimate of memory usable without swapping).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_available: Option<u64>,
    /// Page cache (`Cached:` of /proc/meminfo, including shared memory and tmpfs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached: Option<u64>,
    /// `cached` is an estimate, not `Cached:` of /proc/meminfo: from the kubelet Summary
    /// API as usage − working set (the inactive file pages, a lower bound of the cache).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cache_approx: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_free: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffers: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shmem: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_total: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_free: Option<u64>,
    /// For a node sampled over ssh: the remote `$SSH_CONNECTION` (`client_ip client_port
    /// server_ip server_port`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<String>,
}

/// How readygap reaches a node, as shown under the node in the Host panel.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeAccessInfo {
    pub node: String,
    /// What is used, e.g. `ssh root@10.0.0.5:22` or `kubelet Summary API (node proxy)`.
    pub target: String,
    /// Where the choice comes from: `--node-access`, `configured by [nodes."gpu-*"]`,
    /// `guessed from InternalIP 10.0.0.5`, `lab`.
    pub origin: String,
    /// True when the node's host samples come through `target`.
    pub sampling: bool,
    /// When `target` is not used for sampling: what feeds the samples instead (e.g. the
    /// kubelet Summary API), if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled_via: Option<String>,
}

/// An action readygap can take.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Delete a pod (starts a trial).
    DeletePod {
        pod: String,
        grace_seconds: Option<u32>,
    },
    /// `kubectl rollout restart` of a deployment (starts a trial).
    RolloutRestart { deployment: String },
    /// Send one inference.
    Infer { pod: String, model: String },
    /// Unload a model (`keep_alive: 0`).
    Unload { pod: String, model: String },
    /// Drop a node's page cache.
    DropCaches { node: String },
}

impl Action {
    /// Whether this action replaces pods (its start is a trial's T0).
    pub fn is_replacement(&self) -> bool {
        matches!(
            self,
            Action::DeletePod { .. } | Action::RolloutRestart { .. }
        )
    }

    /// A short human label.
    pub fn label(&self) -> String {
        match self {
            Action::DeletePod { pod, .. } => format!("delete pod {pod}"),
            Action::RolloutRestart { deployment } => format!("rollout restart {deployment}"),
            Action::Infer { pod, model } => format!("inference {model} on {pod}"),
            Action::Unload { pod, model } => format!("unload {model} on {pod}"),
            Action::DropCaches { node } => format!("drop caches on {node}"),
        }
    }
}

/// How an action ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    Error { message: String },
    Timeout { after_ms: u64 },
}

/// The runtime's own durations for one request, in nanoseconds: Ollama's `done: true`
/// chunk, llama.cpp's `timings` (`prompt_ms` → `prompt_eval_ns`, `predicted_ms` →
/// `eval_ns`), with the token counts where the runtime gives them (llama.cpp `prompt_n` /
/// `predicted_n`, OpenAI `usage`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RuntimeDurations {
    pub total_ns: Option<u64>,
    pub load_ns: Option<u64>,
    pub prompt_eval_ns: Option<u64>,
    pub eval_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval_tokens: Option<u64>,
}

/// One request the runtime logged (not one readygap sent).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoggedRequest {
    pub pod: String,
    pub method: String,
    pub path: String,
    pub status: u16,
    /// How long the request took, when the line says (gin does; llama.cpp's does not).
    pub latency_ms: Option<f64>,
    /// The client address the runtime saw.
    pub client: Option<String>,
}

impl LoggedRequest {
    /// Sent to the pod's own localhost from inside it: the client is exactly 127.0.0.1 or
    /// ::1 (the source a process in the pod's network namespace gets when it dials its own
    /// loopback). An exec probe does that: the kubelet runs it in the container, and the
    /// shipped `manifests/base/probe/ready-inference.sh` POSTs `/api/generate` to
    /// 127.0.0.1. A request through `kubectl port-forward` arrives the same way (the
    /// kubelet's streaming server dials the pod's localhost), so this alone does not say
    /// "probe": `Timeline` also asks whether the pod has an exec probe that infers.
    pub fn from_localhost(&self) -> bool {
        self.client
            .as_deref()
            .and_then(|c| c.parse::<std::net::IpAddr>().ok())
            .is_some_and(|ip| {
                let ip = ip.to_canonical();
                ip == std::net::Ipv4Addr::LOCALHOST || ip == std::net::Ipv6Addr::LOCALHOST
            })
    }

    /// A generation request (what T3/T4 of an observed trial are made of).
    pub fn is_inference(&self) -> bool {
        self.method == "POST"
            && matches!(
                self.path.split('?').next().unwrap_or(""),
                "/api/generate"
                    | "/api/chat"
                    | "/completion"
                    | "/completions"
                    | "/v1/completions"
                    | "/v1/chat/completions"
                    | "/chat/completions"
            )
    }
}

/// The end of one inference request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InferenceResult {
    pub request_id: u64,
    /// HTTP 200 and `done: true`.
    pub ok: bool,
    pub http_status: Option<u16>,
    pub error: Option<String>,
    #[serde(default)]
    pub durations: RuntimeDurations,
    pub response: Option<String>,
    /// When the source saw the answer complete (the chunk that ended it arrived), for the
    /// event that carries this result to be stamped with; not recorded (that event's `ts` is).
    #[serde(skip)]
    pub done_at: Option<Timestamp>,
}

/// The result of dropping a node's page cache.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CacheDrop {
    pub node: String,
    pub cached_kb_before: Option<u64>,
    pub cached_kb_after: Option<u64>,
    /// The cache really fell (by the configured threshold).
    pub dropped: bool,
    pub error: Option<String>,
}

/// Optional timestamps in the same format as [`Event::ts`].
pub mod opt_ts {
    use super::Timestamp;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(ts: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
        match ts {
            Some(t) => super::ts_format::serialize(t, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error> {
        let s = <Option<std::borrow::Cow<'de, str>>>::deserialize(d)?;
        s.map(|s| super::ts_format::parse(&s).map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_shape_is_stable() {
        let ts = "2026-11-30T10:00:00.123456Z".parse().unwrap();
        let ev = Event::new(ts, Source::Action, EventKind::ActionStarted { id: 7 });
        let line = serde_json::to_string(&ev).unwrap();
        assert_eq!(
            line,
            r#"{"ts":"2026-11-30T10:00:00.123456Z","source":"action","kind":{"action_started":{"id":7}}}"#
        );
        let back: Event = serde_json::from_str(&line).unwrap();
        assert_eq!(back, ev);
    }

    #[test]
    fn timestamps_keep_microseconds_and_accept_offsets() {
        let line = r#"{"ts":"2026-11-30T11:00:00.000250+01:00","source":"kube","kind":{"note":{"text":"x"}}}"#;
        let ev: Event = serde_json::from_str(line).unwrap();
        assert_eq!(
            ev.ts.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            "2026-11-30T10:00:00.000250Z"
        );
    }

    #[test]
    fn fast_timestamp_path_agrees_with_chrono() {
        for s in [
            "2026-11-30T10:00:00.123456Z",
            "1999-12-31T23:59:59.999999Z",
            "2024-02-29T00:00:00.000001Z",
        ] {
            let slow = chrono::DateTime::parse_from_rfc3339(s).unwrap();
            assert_eq!(ts_format::parse(s).unwrap(), slow);
        }
        // Not the fast form: still parsed, or refused, by chrono.
        assert!(ts_format::parse("2026-11-30T10:00:00Z").is_ok());
        assert!(ts_format::parse("2026-02-30T10:00:00.000000Z").is_err());
        assert!(ts_format::parse("2026-11-30T1a:00:00.000000Z").is_err());
    }

    #[test]
    fn oom_killed_is_seen_in_last_state() {
        let pod = PodView {
            containers: vec![ContainerView {
                name: "ollama".into(),
                restart_count: 1,
                state: ContainerState::Running { started_at: None },
                last_state: Some(ContainerState::Terminated {
                    reason: "OOMKilled".into(),
                    exit_code: 137,
                    finished_at: None,
                }),
                ready: false,
                spec: None,
            }],
            ..Default::default()
        };
        assert!(pod.oom_killed());
        assert_eq!(pod.restarts(), 1);
    }
}
