//! The reducer: `State::apply(&mut self, &Event)` turns the event stream into everything the
//! screen, the statistics and the reports show. Pure: no clock, no I/O, no randomness; time
//! advances only through event timestamps (`State::now` is the newest one seen).

use super::event::{
    Action, CacheDrop, EndpointSliceView, Event, EventKind, Feed, HostSample, InferenceResult,
    KubeEventView, MemorySample, MemorySource, NodeAccessInfo, NodeView, Outcome, PodView,
    ResidentModel, Resource, RuntimeProbe, SessionInfo, Source, Timestamp,
};
use super::residency::OomDetector;
use super::series::Series;
use super::timeline::Timeline;
use super::verdict::ContractDetector;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// How many Kubernetes Events, messages and finished actions are kept.
const KEEP_RECENT: usize = 200;

/// Ready/serving/terminating endpoint counts across the watched slices, one per pod (a
/// dual-stack Service has an IPv4 and an IPv6 slice naming the same pods).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointCounts {
    pub ready: u32,
    pub serving: u32,
    pub terminating: u32,
    pub total: u32,
    /// Terminating endpoints that still serve.
    #[serde(default)]
    pub serving_terminating: u32,
}

impl EndpointCounts {
    /// No endpoint is ready but a terminating one still serves: kube-proxy sends the
    /// Service's traffic to it (KEP-1669 ProxyTerminatingEndpoints, GA in 1.28; kubernetes
    /// pkg/proxy/topology.go CategorizeEndpoints falls back to serving-terminating
    /// endpoints when there are no ready ones). Not "no traffic".
    pub fn terminating_fallback(&self) -> bool {
        self.ready == 0 && self.serving_terminating > 0
    }
}

/// What readygap knows of one pod's runtime.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RuntimeView {
    pub last_probe_ok: Option<bool>,
    pub last_probe_ts: Option<Timestamp>,
    pub last_probe_error: Option<String>,
    pub last_latency_ms: Option<f64>,
    /// The last probe was answered by the runtime itself (any status).
    #[serde(default)]
    pub last_probe_answered: bool,
    pub resident: Vec<ResidentModel>,
    pub resident_ts: Option<Timestamp>,
    pub on_disk: Vec<super::event::DiskModel>,
    /// The runtime's last `/metrics` figures (llama-server, vLLM), with when they were read.
    pub metrics: Option<(Timestamp, super::event::RuntimeMetrics)>,
}

/// One memory point of a container.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryPoint {
    pub current: u64,
    pub working_set: Option<u64>,
}

/// Memory of one pod's serving container.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryView {
    pub series: Series<MemoryPoint>,
    pub limit: Option<u64>,
    pub oom_kill: Option<u64>,
    pub source: MemorySource,
    pub peak: u64,
}

/// An action and how far it got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionView {
    pub id: u64,
    pub action: Action,
    pub requested: Timestamp,
    pub started: Option<Timestamp>,
    pub finished: Option<(Timestamp, Outcome)>,
}

/// One inference request and its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InferenceView {
    pub request_id: u64,
    pub pod: String,
    pub model: String,
    pub started: Timestamp,
    pub first_token: Option<Timestamp>,
    pub done: Option<(Timestamp, super::event::InferenceResult)>,
}

/// Whether a feed is connected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeedStatus {
    pub connected: bool,
    pub since: Timestamp,
    pub detail: String,
}

/// How serious a status message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    Warn,
    Error,
}

/// A line for the footer / message log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub ts: Timestamp,
    pub severity: Severity,
    pub text: String,
}

/// Everything derived from the events so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    pub session: SessionInfo,
    /// The newest event timestamp seen: the reducer's only notion of "now".
    pub now: Option<Timestamp>,
    pub events_applied: u64,
    pub pods: BTreeMap<String, PodView>,
    pub slices: BTreeMap<String, EndpointSliceView>,
    pub endpoints: Series<EndpointCounts>,
    pub kube_events: VecDeque<(Timestamp, KubeEventView)>,
    /// The Log view's lines (`L`): the latest lines of the pods whose logs were followed.
    #[serde(default)]
    pub log_tail: crate::runtime_log::Tail,
    pub nodes: BTreeMap<String, NodeView>,
    pub runtimes: BTreeMap<String, RuntimeView>,
    /// The latest probe of the runtime through the target's Service (the study's T2), when
    /// the observed instant it was answered.
    #[serde(default)]
    pub service_probe: Option<(Timestamp, crate::event::ServiceProbe)>,
    pub memory: BTreeMap<String, MemoryView>,
    /// GPU memory per pod (pods that request a GPU).
    #[serde(default)]
    pub gpu: BTreeMap<String, crate::gpu::GpuView>,
    /// Host samples: `None` is the machine readygap runs on, `Some(node)` a node.
    pub hosts: BTreeMap<Option<String>, Series<HostSample>>,
    /// How each node that readygap followed is reached (the latest announcement per node).
    #[serde(default)]
    pub node_access: BTreeMap<String, NodeAccessInfo>,
    pub actions: BTreeMap<u64, ActionView>,
    pub inferences: VecDeque<InferenceView>,
    pub timeline: Timeline,
    /// OOM verdicts and warnings (overlapping residency and friends).
    pub oom: OomDetector,
    /// Verdicts on the readiness contract (shallow readiness, missing models, stalls, ...).
    #[serde(default)]
    pub contract: ContractDetector,
    pub feeds: BTreeMap<String, FeedStatus>,
    pub messages: VecDeque<Message>,
    /// Contract verdicts already listed on their trials.
    #[serde(default)]
    contract_attributed: usize,
    /// Objects seen during an ongoing re-list, per resource.
    resync: BTreeMap<Resource, BTreeSet<String>>,
}

fn push_bounded<T>(q: &mut VecDeque<T>, item: T) {
    if q.len() == KEEP_RECENT {
        q.pop_front();
    }
    q.push_back(item);
}

impl State {
    pub fn new() -> Self {
        Self::default()
    }

    /// Apply every event in order.
    pub fn from_events<'a>(events: impl IntoIterator<Item = &'a Event>) -> Self {
        let mut s = State::new();
        for e in events {
            s.apply(e);
        }
        s
    }

    fn message(&mut self, ts: Timestamp, severity: Severity, text: String) {
        push_bounded(&mut self.messages, Message { ts, severity, text });
    }

    /// The latest message, for the footer.
    pub fn last_message(&self) -> Option<&Message> {
        self.messages.back()
    }

    /// Apply one event.
    pub fn apply(&mut self, ev: &Event) {
        let ts = ev.ts;
        self.events_applied += 1;
        if self.now.is_none_or(|n| ts > n) {
            self.now = Some(ts);
        }
        // The timeline sees the pod index as it was before this event.
        let prev = match &ev.kind {
            EventKind::PodApplied(p) | EventKind::PodDeleted(p) => self.pods.get(&p.name),
            _ => None,
        };
        // The one trial this event can finish: only the latest trial is ever open.
        let open_before = self.timeline.open().map(|t| t.index);
        self.timeline.apply(ev, &self.pods, prev);
        let contract_before = self.contract.verdicts.len();
        self.contract.apply(ev, prev);
        let verdicts_before = self.oom.verdicts.len();
        if let Some(v) = self.oom.apply(ev, prev) {
            // The trial that lost its pod ends with the verdict as its reason.
            self.timeline.attribute_oom(&v);
        }

        match &ev.kind {
            EventKind::Session(info) => self.session = info.clone(),
            EventKind::PodApplied(pod) => self.pod_applied(ts, pod),
            EventKind::PodDeleted(pod) => {
                self.pods.remove(&pod.name);
                self.runtimes.remove(&pod.name);
            }
            EventKind::ResyncStarted { resource } => {
                self.resync.insert(resource.clone(), BTreeSet::new());
            }
            EventKind::ResyncDone { resource } => self.resync_done(ts, resource),
            EventKind::EndpointSliceApplied(slice) => {
                self.seen(Resource::EndpointSlices, &slice.name);
                self.slices.insert(slice.name.clone(), slice.clone());
                self.count_endpoints(ts);
            }
            EventKind::EndpointSliceDeleted { name } => {
                self.slices.remove(name);
                self.count_endpoints(ts);
            }
            // An Event keeps its own time (one replayed by the initial list is history).
            EventKind::KubeEvent(e) => {
                push_bounded(&mut self.kube_events, (e.time.unwrap_or(ts), e.clone()))
            }
            EventKind::NodeApplied(n) => {
                self.seen(Resource::Nodes, &n.name);
                self.nodes.insert(n.name.clone(), n.clone());
            }
            EventKind::RuntimeProbe(p) => self.runtime_probe(ts, p),
            EventKind::ServiceProbe(p) => self.service_probe = Some((ts, p.clone())),
            EventKind::Residency { pod, models } => self.residency(ts, pod, models),
            EventKind::ModelsOnDisk { pod, models } => {
                self.runtimes.entry(pod.clone()).or_default().on_disk = models.clone();
            }
            EventKind::RuntimeMetrics { pod, metrics } => {
                self.runtimes.entry(pod.clone()).or_default().metrics = Some((ts, metrics.clone()));
            }
            EventKind::MemorySample(s) => self.memory_sample(ts, s),
            EventKind::GpuSample {
                pod,
                source,
                gpus,
                passed_over,
            } => self
                .gpu
                .entry(pod.clone())
                .or_default()
                .sample(ts, source, passed_over, gpus),
            EventKind::GpuUnavailable { pod, why } => self
                .gpu
                .entry(pod.clone())
                .or_default()
                .unavailable(ts, why),
            EventKind::HostSample(h) => self
                .hosts
                .entry(h.node.clone())
                .or_default()
                .push(ts, h.clone()),
            EventKind::NodeAccess(a) => {
                self.node_access.insert(a.node.clone(), a.clone());
            }
            EventKind::ActionRequested { id, action } => self.action_requested(ts, *id, action),
            EventKind::ActionStarted { id } => {
                if let Some(a) = self.actions.get_mut(id) {
                    a.started = Some(ts);
                }
            }
            EventKind::ActionFinished { id, outcome } => self.action_finished(ts, *id, outcome),
            EventKind::InferenceStarted {
                request_id,
                pod,
                model,
            } => self.inference_started(ts, *request_id, pod, model),
            EventKind::InferenceFirstToken { request_id } => {
                if let Some(i) = self.inference_mut(*request_id) {
                    i.first_token.get_or_insert(ts);
                }
            }
            EventKind::InferenceDone(r) => self.inference_done(ts, r),
            EventKind::CachesDropped(d) => self.caches_dropped(ts, d),
            EventKind::TrialAbort { reason } => {
                self.message(ts, Severity::Warn, format!("trial aborted: {reason}"))
            }
            EventKind::SourceError { feed, message } => {
                self.source_error(ts, ev.source, feed, message)
            }
            EventKind::SourceConnected { feed, detail } => self.feed(ts, feed, true, detail),
            EventKind::Note { text } => self.message(ts, Severity::Info, text.clone()),
            EventKind::LogLine { pod, text } => self.log_tail.line(ts, pod, text),
            EventKind::LogFollow {
                pod,
                following,
                error,
            } => self.log_follow(pod, *following, error.as_ref()),
            EventKind::TrialBegin { .. } | EventKind::RequestLogged(_) => {}
        }
        self.contract_trials(ts, open_before);
        self.verdict_messages(ts, contract_before, verdicts_before);
    }

    /// A pod added or changed: an OOM kill is said once, when it first shows.
    fn pod_applied(&mut self, ts: Timestamp, pod: &PodView) {
        self.seen(Resource::Pods, &pod.name);
        let was_oom = self.pods.get(&pod.name).is_some_and(|p| p.oom_killed());
        if pod.oom_killed() && !was_oom {
            self.message(ts, Severity::Error, format!("pod {} OOMKilled", pod.name));
        }
        self.pods.insert(pod.name.clone(), pod.clone());
    }

    /// A re-list is complete: the objects of that resource it did not list are gone.
    fn resync_done(&mut self, ts: Timestamp, resource: &Resource) {
        let Some(seen) = self.resync.remove(resource) else {
            return;
        };
        match resource {
            Resource::Pods => self.pods.retain(|k, _| seen.contains(k)),
            Resource::EndpointSlices => {
                self.slices.retain(|k, _| seen.contains(k));
                self.count_endpoints(ts);
            }
            Resource::Nodes => self.nodes.retain(|k, _| seen.contains(k)),
            Resource::Events | Resource::Other(_) => {}
        }
    }

    fn runtime_probe(&mut self, ts: Timestamp, p: &RuntimeProbe) {
        let r = self.runtimes.entry(p.pod.clone()).or_default();
        r.last_probe_ok = Some(p.ok);
        r.last_probe_ts = Some(ts);
        r.last_latency_ms = Some(p.latency_ms);
        r.last_probe_error = p.error.clone();
        r.last_probe_answered = p.http_answered;
    }

    /// The runtime's resident models (and, on a GPU pod, its own VRAM figure).
    fn residency(&mut self, ts: Timestamp, pod: &str, models: &[ResidentModel]) {
        let r = self.runtimes.entry(pod.to_string()).or_default();
        r.resident = models.to_vec();
        r.resident_ts = Some(ts);
        if let Some(g) = self.gpu.get_mut(pod) {
            g.runtime_figure(models);
        }
    }

    fn memory_sample(&mut self, ts: Timestamp, s: &MemorySample) {
        let m = self.memory.entry(s.pod.clone()).or_default();
        m.series.push(
            ts,
            MemoryPoint {
                current: s.current,
                working_set: s.working_set,
            },
        );
        m.limit = s.limit.or(m.limit);
        m.oom_kill = s.oom_kill.or(m.oom_kill);
        m.source = s.source;
        m.peak = m.peak.max(s.current);
    }

    fn action_requested(&mut self, ts: Timestamp, id: u64, action: &Action) {
        let view = ActionView {
            id,
            action: action.clone(),
            requested: ts,
            started: None,
            finished: None,
        };
        self.actions.insert(id, view);
        self.message(ts, Severity::Info, format!("requested: {}", action.label()));
    }

    /// An action's outcome, said; the action table stays bounded (the oldest finished
    /// ones go).
    fn action_finished(&mut self, ts: Timestamp, id: u64, outcome: &Outcome) {
        let label = self.actions.get(&id).map(|a| a.action.label());
        if let Some(a) = self.actions.get_mut(&id) {
            a.finished = Some((ts, outcome.clone()));
        }
        let label = label.unwrap_or_else(|| format!("action {id}"));
        let (sev, text) = match outcome {
            Outcome::Ok => (Severity::Info, format!("done: {label}")),
            Outcome::Error { message } => (Severity::Error, format!("{label} failed: {message}")),
            Outcome::Timeout { after_ms } => (
                Severity::Error,
                format!("{label} timed out after {after_ms} ms"),
            ),
        };
        self.message(ts, sev, text);
        let excess = self.actions.len().saturating_sub(KEEP_RECENT);
        let finished = self.actions.iter().filter(|(_, a)| a.finished.is_some());
        let oldest: Vec<u64> = finished.map(|(k, _)| *k).take(excess).collect();
        for id in oldest {
            self.actions.remove(&id);
        }
    }

    fn inference_started(&mut self, ts: Timestamp, request_id: u64, pod: &str, model: &str) {
        let view = InferenceView {
            request_id,
            pod: pod.to_string(),
            model: model.to_string(),
            started: ts,
            first_token: None,
            done: None,
        };
        push_bounded(&mut self.inferences, view);
    }

    fn inference_done(&mut self, ts: Timestamp, r: &InferenceResult) {
        if let Some(i) = self.inference_mut(r.request_id) {
            i.done = Some((ts, r.clone()));
        }
        if !r.ok {
            let why = r.error.clone().unwrap_or_else(|| "failed".into());
            self.message(ts, Severity::Error, format!("inference failed: {why}"));
        }
    }

    /// The cold step's outcome, said as it matters: dropped, failed, or not cold.
    fn caches_dropped(&mut self, ts: Timestamp, d: &CacheDrop) {
        let (sev, text) = match (&d.error, d.dropped) {
            (Some(e), _) => (Severity::Error, format!("drop caches on {}: {e}", d.node)),
            (None, true) => (
                Severity::Info,
                format!(
                    "page cache of {} dropped: {} → {} kB",
                    d.node,
                    d.cached_kb_before.unwrap_or(0),
                    d.cached_kb_after.unwrap_or(0)
                ),
            ),
            (None, false) => (
                Severity::Warn,
                format!("page cache of {} did not fall: not a cold trial", d.node),
            ),
        };
        self.message(ts, sev, text);
    }

    /// A failing feed: marked, said, and a gap left in its series.
    fn source_error(&mut self, ts: Timestamp, source: Source, feed: &Feed, message: &str) {
        self.feed(ts, feed, false, message);
        match (source, feed) {
            (Source::Memory, _) => self.memory.values_mut().for_each(|m| m.series.gap(ts)),
            (Source::Kube, Feed::Watch(Resource::EndpointSlices)) => self.endpoints.gap(ts),
            (Source::Host, _) => {
                let node = match feed {
                    Feed::Host(node) => Some(node.clone()),
                    _ => None,
                };
                if let Some(series) = self.hosts.get_mut(&node) {
                    series.gap(ts);
                }
            }
            _ => {}
        }
        self.message(ts, Severity::Error, format!("{feed}: {message}"));
    }

    fn log_follow(&mut self, pod: &str, following: bool, error: Option<&String>) {
        use crate::runtime_log::Following;
        let state = match (following, error) {
            (_, Some(e)) => Following::Failed(e.clone()),
            (true, None) => Following::Yes,
            (false, None) => Following::Ended,
        };
        self.log_tail.follow(pod, state);
    }

    /// The verdicts this event gave, said last, so the footer shows them rather than the
    /// plainer facts: the contract's (a problem warns), then the OOM detector's (a failure
    /// is an error).
    fn verdict_messages(&mut self, ts: Timestamp, contract_before: usize, verdicts_before: usize) {
        use Severity::{Error, Info, Warn};
        let contract = &self.contract.verdicts[contract_before.min(self.contract.verdicts.len())..];
        let oom = &self.oom.verdicts[verdicts_before.min(self.oom.verdicts.len())..];
        let new: Vec<_> = contract
            .iter()
            .map(|v| (if v.kind.is_problem() { Warn } else { Info }, v.line()))
            .chain(oom.iter().map(|v| {
                let sev = if v.kind.is_failure() { Error } else { Warn };
                (sev, format!("{}: {}", v.kind.name(), v.message))
            }))
            .collect();
        for (sev, text) in new {
            self.message(ts, sev, text);
        }
    }

    /// An object seen during the ongoing re-list of its resource.
    fn seen(&mut self, resource: Resource, name: &str) {
        if let Some(seen) = self.resync.get_mut(&resource) {
            seen.insert(name.to_string());
        }
    }

    fn feed(&mut self, since: Timestamp, feed: &Feed, connected: bool, detail: &str) {
        let detail = detail.to_string();
        let status = FeedStatus {
            connected,
            since,
            detail,
        };
        self.feeds.insert(feed.name(), status);
    }

    /// The trial that finished with this event (`open_before`: the trial open before it)
    /// gets its readiness verdict and cache condition; verdicts name the trial open at the
    /// time. Work per event is independent of the number of trials so far.
    fn contract_trials(&mut self, ts: Timestamp, open_before: Option<u32>) {
        if let Some(t) = open_before
            .and_then(|i| self.timeline.trial(i))
            .filter(|t| !t.is_running())
        {
            let model = t.inference_request.and_then(|id| {
                self.inferences
                    .iter()
                    .find(|x| x.request_id == id)
                    .map(|x| x.model.clone())
            });
            let index = t.index;
            let condition = self.contract.trial_finished(ts, t, model);
            if let Some(t) = self.timeline.trial_mut(index) {
                t.condition = condition.map(str::to_string);
            }
        }
        self.contract
            .set_open_trial(self.timeline.open().map(|t| t.index));
        // Each trial lists the verdicts attributed to it; a verdict that came between
        // trials goes to the latest trial of its pod.
        let n = self.contract.verdicts.len();
        let first = self.contract_attributed.min(n);
        for v in &mut self.contract.verdicts[first..] {
            if v.trial.is_none() && !v.pod.is_empty() {
                v.trial = self.timeline.latest_of_new_pod(&v.pod).map(|t| t.index);
            }
            if let Some(t) = v.trial.and_then(|i| self.timeline.trial_mut(i))
                && !t.verdicts.contains(&v.kind)
            {
                t.verdicts.push(v.kind);
            }
        }
        self.contract_attributed = n;
    }

    fn inference_mut(&mut self, id: u64) -> Option<&mut InferenceView> {
        self.inferences
            .iter_mut()
            .rev()
            .find(|i| i.request_id == id)
    }

    fn count_endpoints(&mut self, ts: Timestamp) {
        // One endpoint per pod (else per address set): the slices of a dual-stack Service
        // name each pod once per address family. A pod ready in either slice is ready.
        let mut by_pod: BTreeMap<String, (bool, bool, bool)> = BTreeMap::new();
        for ep in self.slices.values().flat_map(|s| s.endpoints.iter()) {
            let key = match &ep.pod {
                Some(p) => format!("pod/{p}"),
                None => format!("addr/{}", ep.addresses.join(",")),
            };
            let e = by_pod.entry(key).or_insert((false, false, false));
            e.0 |= ep.ready;
            e.1 |= ep.serving;
            e.2 |= ep.terminating;
        }
        let mut c = EndpointCounts::default();
        let ready_pods: Vec<String> = by_pod
            .iter()
            .filter(|(_, (ready, serving, _))| *ready && *serving)
            .filter_map(|(k, _)| k.strip_prefix("pod/").map(str::to_string))
            .collect();
        for (ready, serving, terminating) in by_pod.into_values() {
            c.total += 1;
            c.ready += ready as u32;
            c.serving += serving as u32;
            c.terminating += terminating as u32;
            c.serving_terminating += (serving && terminating) as u32;
        }
        let was_fallback = self
            .endpoints
            .last_value()
            .is_some_and(EndpointCounts::terminating_fallback);
        if c.terminating_fallback() && !was_fallback {
            self.message(
                ts,
                Severity::Warn,
                format!(
                    "endpoints: 0 ready, {} terminating still serving (kube-proxy sends traffic to them)",
                    c.serving_terminating
                ),
            );
        }
        self.contract
            .endpoints(ts, &ready_pods, c.ready, c.serving_terminating);
        self.endpoints.push(ts, c);
    }

    /// Events that rebuild the current state's facts (not its trials) from nothing, stamped `ts`.
    pub fn snapshot_events(&self, ts: crate::event::Timestamp) -> Vec<Event> {
        let mut out = vec![Event::new(
            ts,
            Source::Session,
            EventKind::Session(self.session.clone()),
        )];
        let kube = |kind| Event::new(ts, Source::Kube, kind);
        let nodes = self
            .nodes
            .values()
            .map(|n| EventKind::NodeApplied(n.clone()));
        let pods = self.pods.values().map(|p| EventKind::PodApplied(p.clone()));
        let slices = self
            .slices
            .values()
            .map(|s| EventKind::EndpointSliceApplied(s.clone()));
        out.extend(nodes.chain(pods).chain(slices).map(kube));
        let runtime = |kind| Event::new(ts, Source::Runtime, kind);
        for (pod, r) in &self.runtimes {
            let pod = pod.clone();
            out.push(runtime(EventKind::ModelsOnDisk {
                pod: pod.clone(),
                models: r.on_disk.clone(),
            }));
            out.push(runtime(EventKind::Residency {
                pod: pod.clone(),
                models: r.resident.clone(),
            }));
            if let Some((_, metrics)) = r.metrics.clone() {
                out.push(runtime(EventKind::RuntimeMetrics { pod, metrics }));
            }
        }
        for (pod, m) in &self.memory {
            if let Some(p) = m.series.last_value() {
                let sample = crate::event::MemorySample {
                    pod: pod.clone(),
                    current: p.current,
                    working_set: p.working_set,
                    limit: m.limit,
                    oom_kill: m.oom_kill,
                    source: m.source,
                };
                out.push(Event::new(
                    ts,
                    Source::Memory,
                    EventKind::MemorySample(sample),
                ));
            }
        }
        for (pod, v) in &self.gpu {
            if let Some(source) = v.source.clone().filter(|_| v.latest().is_some()) {
                let (pod, gpus) = (pod.clone(), v.gpus.clone());
                let passed_over = v.passed_over.clone();
                let kind = EventKind::GpuSample {
                    pod,
                    source,
                    gpus,
                    passed_over,
                };
                out.push(Event::new(ts, Source::Memory, kind));
            }
        }
        let hosts = self.hosts.values().filter_map(Series::last_value);
        out.extend(hosts.map(|h| Event::new(ts, Source::Host, EventKind::HostSample(h.clone()))));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::NodeAccessInfo;

    fn at(ms: i64) -> Timestamp {
        chrono::DateTime::from_timestamp_millis(1_800_000_000_000 + ms).expect("ts")
    }

    fn access(node: &str, target: &str, sampling: bool) -> Event {
        Event::new(
            at(0),
            Source::Host,
            EventKind::NodeAccess(NodeAccessInfo {
                node: node.into(),
                target: target.into(),
                origin: "--node-access".into(),
                sampling,
                sampled_via: None,
            }),
        )
    }

    fn sample(ms: i64, node: &str) -> Event {
        Event::new(
            at(ms),
            Source::Host,
            EventKind::HostSample(HostSample {
                node: Some(node.into()),
                cpu_percent: Some(10.0),
                mem_total: 100,
                mem_available: Some(60),
                cached: Some(30),
                ..HostSample::default()
            }),
        )
    }

    #[test]
    fn node_access_is_kept_per_node_and_the_latest_wins() {
        let s = State::from_events(&[
            access("n1", "ssh root@10.0.0.5:22", true),
            access("n2", "kubelet Summary API (node proxy)", true),
            access("n1", "ssh admin@10.0.0.5:2200", false),
        ]);
        assert_eq!(s.node_access.len(), 2);
        let n1 = &s.node_access["n1"];
        assert_eq!(n1.target, "ssh admin@10.0.0.5:2200");
        assert!(!n1.sampling);
        assert_eq!(
            s.node_access["n2"].target,
            "kubelet Summary API (node proxy)"
        );
        // Announcing access is not a footer message (the Host panel shows it).
        assert!(s.messages.is_empty());
    }

    #[test]
    fn a_host_feed_error_marks_the_feed_and_leaves_a_gap_in_that_nodes_series() {
        let err = Event::new(
            at(3_000),
            Source::Host,
            EventKind::SourceError {
                feed: "host n1".into(),
                message: "connection refused".into(),
            },
        );
        let s = State::from_events(&[sample(0, "n1"), sample(0, "n2"), err.clone()]);
        let feed = &s.feeds["host n1"];
        assert!(!feed.connected);
        assert_eq!(feed.detail, "connection refused");
        let n1: Vec<_> = s.hosts[&Some("n1".into())].points().collect();
        assert_eq!(n1.len(), 2);
        assert!(n1[1].value.is_none(), "a gap after the error");
        assert_eq!(
            s.hosts[&Some("n2".into())].len(),
            1,
            "other nodes untouched"
        );
        // Samples resume after the gap; a reconnect clears the error state.
        let back = Event::new(
            at(20_000),
            Source::Host,
            EventKind::SourceConnected {
                feed: "host n1".into(),
                detail: "ssh root@127.0.0.1:2222".into(),
            },
        );
        let s = State::from_events(&[sample(0, "n1"), err, back, sample(20_000, "n1")]);
        assert!(s.feeds["host n1"].connected);
        assert_eq!(s.hosts[&Some("n1".into())].len(), 3);
        assert_eq!(
            s.hosts[&Some("n1".into())]
                .last_value()
                .and_then(|h| h.cached),
            Some(30)
        );
    }

    #[test]
    fn node_access_events_survive_a_json_round_trip() {
        let ev = access("n1", "ssh root@10.0.0.5:22", true);
        let line = serde_json::to_string(&ev).expect("json");
        assert!(line.contains("\"node_access\""), "{line}");
        assert!(!line.contains("sampled_via"), "None is left out: {line}");
        let back: Event = serde_json::from_str(&line).expect("read");
        assert_eq!(back, ev);
    }

    #[test]
    fn an_old_recordings_host_sample_reads_as_known_figures() {
        // Plain numbers, no cache_approx (recordings/*.jsonl have this shape).
        let old = r#"{"ts":"2027-01-15T08:00:00.000000Z","source":"host","kind":{"host_sample":{"node":"n1","cpu_percent":1.0,"mem_total":10,"mem_available":5,"cached":2}}}"#;
        let e: Event = serde_json::from_str(old).expect("old sample");
        let EventKind::HostSample(h) = e.kind else {
            panic!("host sample expected");
        };
        assert_eq!(h.cpu_percent, Some(1.0));
        assert_eq!(
            (h.mem_total, h.mem_available, h.cached),
            (10, Some(5), Some(2))
        );
        assert!(!h.cache_approx);
        assert_eq!(h.swap_total, None);
    }

    #[test]
    fn unknown_host_figures_are_left_out_of_a_recording_and_read_back_as_gaps() {
        let unknown = HostSample {
            node: Some("n1".into()),
            mem_total: 100,
            ..HostSample::default()
        };
        let ev = Event::new(at(0), Source::Host, EventKind::HostSample(unknown.clone()));
        let line = serde_json::to_string(&ev).expect("json");
        for field in [
            "cpu_percent",
            "mem_available",
            "cached",
            "swap_",
            "connection",
        ] {
            assert!(!line.contains(field), "{field} is unknown, not 0: {line}");
        }
        let back: Event = serde_json::from_str(&line).expect("read");
        let EventKind::HostSample(h) = &back.kind else {
            panic!("host sample expected");
        };
        assert_eq!(
            (h.cpu_percent, h.mem_available, h.cached),
            (None, None, None)
        );
        assert_eq!(h, &unknown);
        // A measured 0 % is a figure, kept as such.
        let idle = HostSample {
            cpu_percent: Some(0.0),
            ..unknown
        };
        let line = serde_json::to_string(&idle).expect("json");
        assert!(line.contains(r#""cpu_percent":0.0"#), "{line}");
    }
}
