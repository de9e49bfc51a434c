//! `readygap watch`'s session: every Deployment matching a label selector, in one namespace
//! or all, each replacement of each one an external trial measured passively, each finished
//! trial handed to the fleet's registry ([`readygap_core::fleet::FleetMetrics`]).
//!
//! One watch per resource kind for what a label selector can scope: Deployments and Pods
//! with the label selector, and EndpointSlices of the namespace (their labels are the
//! Service's, not the pods'). A demultiplexer routes every object to the Deployment that
//! owns it ([`owner`]: the pod's ReplicaSet `<deployment>-<hash>`, else the Deployment's
//! `matchLabels`). Events have no labels and their field selectors match whole values only,
//! so one watch of the namespace's pod Events would read every other pod's too (5,000
//! unschedulable pods each have their `FailedScheduling`): each Deployment's session watches
//! the Events of its own pods, its Deployment and ReplicaSets by name, as the dashboard does
//! ([`crate::sources::pod_events`], told which pods there are by the demultiplexer).
//!
//! Each Deployment has its own session: an event channel, a store, the trial runner of the
//! dashboard in serve mode with `read_only` (no inference, no action: T0 first evidence, T1
//! Ready, T2 GET probes, T3/T4 from the runtime's request log), its runtime adapter guessed
//! from its pods ([`crate::sources::runtime::choice`]) and optionally its recording, rotated
//! by size at trial ends. The store is compacted between trials ([`Runner::compact_after`]) and the
//! registry keeps a ring of the last trials per Deployment: nothing grows with time.
//!
//! A trial interrupted by the watcher itself (the Deployment was deleted, the watcher is
//! stopping) is not counted: it measured nothing about the Deployment.

use crate::actions::Executor;
use crate::cluster::{self, ClusterConfig};
use crate::session::Recording;
use crate::settings::{MemoryConfig, StageTimeouts};
use crate::sources::pod_events::{self, PodSeen};
use crate::sources::runtime::choice::Ask;
use crate::sources::runtime::{AccessMode, PollConfig, RuntimeKind};
use crate::sources::watch::{Watched, convert, watch_error_message};
use crate::trial::{Command, Runner, RunnerParts, TrialConfig};
use chrono::Utc;
use color_eyre::eyre::Result;
use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use readygap_core::event::{Event, EventKind, SessionInfo, Source};
use readygap_core::fleet::{FleetMetrics, SeriesKey};
use readygap_core::record::jsonl;
use readygap_core::timeline::Trial;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What `readygap watch` watches and how it measures.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchConfig {
    /// Kubeconfig, context and namespace (`deployment`, `selector`, `service` unused).
    pub cluster: ClusterConfig,
    /// Every namespace instead of one.
    pub all_namespaces: bool,
    /// Label selector of the Deployments.
    pub selector: String,
    /// Label selector of their pods (default: `selector`, which the pod template then
    /// carries too).
    pub pod_selector: Option<String>,
    pub access: AccessMode,
    pub direct_url: String,
    /// The runtime of every Deployment; `None`: guessed per Deployment.
    pub runtime: Option<RuntimeKind>,
    pub runtime_port: u16,
    pub probe_path: String,
    pub probe_interval: Duration,
    /// Limits of the stages (T3 → T4: the first inference, someone else's), handed whole
    /// to each Deployment's runner.
    pub timeouts: StageTimeouts,
    /// Intervals of the residency and models-on-disk polls, handed whole likewise.
    pub poll: PollConfig,
    /// The memory feed (exec into the container: needs `pods/exec`), off by default.
    pub memory: MemoryConfig,
    pub container: Option<String>,
    /// Trials kept per Deployment (the ring).
    pub ring: usize,
    /// At most this many series in the registry.
    pub max_series: usize,
    /// Compact each Deployment's store once this many trials ended.
    pub compact_after: usize,
    /// Record each Deployment to `DIR/<namespace>/<deployment>/…jsonl`.
    pub record_dir: Option<PathBuf>,
    /// Start a new file at the end of a trial once the current one is this large.
    pub record_max_bytes: u64,
    /// Keep this many files per Deployment (older ones are deleted).
    pub record_keep: usize,
    pub record_redact: bool,
}

impl Default for WatchConfig {
    fn default() -> Self {
        Self {
            cluster: ClusterConfig::default(),
            all_namespaces: false,
            selector: "readygap.io/watch=true".into(),
            pod_selector: None,
            access: AccessMode::Proxy,
            direct_url: "http://{pod_ip}:{port}".into(),
            runtime: None,
            runtime_port: RuntimeKind::Ollama.default_port(),
            probe_path: "/api/tags".into(),
            probe_interval: Duration::from_millis(200),
            // A watcher waits longer and polls less often than an experimenter's session.
            timeouts: StageTimeouts {
                ready: Duration::from_secs(900),
                runtime: Duration::from_secs(900),
                inference: Duration::from_secs(900),
                ..StageTimeouts::default()
            },
            poll: PollConfig {
                residency: Duration::from_secs(1),
                tags: Duration::from_secs(30),
                probe: None,
            },
            memory: MemoryConfig {
                follow: false,
                interval: Duration::from_secs(1),
            },
            container: None,
            ring: 50,
            max_series: 2000,
            compact_after: 5,
            record_dir: None,
            record_max_bytes: 16 << 20,
            record_keep: 5,
            record_redact: false,
        }
    }
}

/// What the watcher shares with its HTTP endpoints.
pub struct Shared {
    pub metrics: Mutex<FleetMetrics>,
    /// Deployments and pods listed once (`/readyz`).
    pub ready: AtomicBool,
    /// The runtime of each watched Deployment and how it was chosen (`/trials`).
    pub runtimes: Mutex<BTreeMap<(String, String), String>>,
}

impl Shared {
    pub fn new(cfg: &WatchConfig) -> Self {
        Self {
            metrics: Mutex::new(FleetMetrics::new(cfg.max_series, cfg.ring)),
            ready: AtomicBool::new(false),
            runtimes: Mutex::new(BTreeMap::new()),
        }
    }
}

/// A Deployment: (namespace, name).
pub type DeploymentKey = (String, String);

/// A watched Deployment's selector (`matchLabels`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Owner {
    pub key: DeploymentKey,
    pub match_labels: BTreeMap<String, String>,
}

/// The Deployment owning a pod: the one whose ReplicaSet (`<deployment>-<pod-template-hash>`)
/// controls it, else the one whose `matchLabels` the pod's labels satisfy (same namespace).
pub fn owner<'a>(
    namespace: &str,
    labels: &BTreeMap<String, String>,
    owner_names: &[String],
    deployments: impl IntoIterator<Item = &'a Owner>,
) -> Option<DeploymentKey> {
    let candidates: Vec<&Owner> = deployments
        .into_iter()
        .filter(|d| d.key.0 == namespace)
        .collect();
    if let Some(hash) = labels.get("pod-template-hash") {
        for d in &candidates {
            let rs = format!("{}-{hash}", d.key.1);
            if owner_names.contains(&rs) {
                return Some(d.key.clone());
            }
        }
    }
    candidates
        .iter()
        .find(|d| {
            !d.match_labels.is_empty()
                && d.match_labels
                    .iter()
                    .all(|(k, v)| labels.get(k).is_some_and(|l| l == v))
        })
        .map(|d| d.key.clone())
}

/// The connected cluster and settings every Deployment's session shares.
#[derive(Clone)]
struct Ctx {
    client: Client,
    runtime_client: Client,
    context: String,
    cfg: Arc<WatchConfig>,
    shared: Arc<Shared>,
}

/// A watched Deployment's session, seen from the demultiplexer.
struct Member {
    owner: Owner,
    tx: mpsc::Sender<Event>,
    /// What its pods did, for the watches of their Events (`pod_events`).
    pods: mpsc::UnboundedSender<PodSeen>,
    cancel: CancellationToken,
}

/// Which Deployment each pod and slice went to, and the pods no Deployment owns yet.
#[derive(Default)]
struct Routes {
    members: BTreeMap<DeploymentKey, Member>,
    pods: BTreeMap<(String, String), DeploymentKey>,
    /// Pods seen before their Deployment (the latest version of each).
    orphans: BTreeMap<(String, String), Pod>,
    slices: BTreeMap<(String, String), BTreeSet<DeploymentKey>>,
    /// Slices whose endpoints name no pod of a watched Deployment yet (the latest version of
    /// each): the initial list arrives before the pods are known, and a member must see the
    /// Service ready before a replacement, or the first gap is never measured.
    unowned_slices: BTreeMap<(String, String), EndpointSlice>,
    /// Deployments seen during an ongoing re-list of Deployments.
    relisting: Option<BTreeSet<DeploymentKey>>,
    deployments_listed: bool,
    pods_listed: bool,
}

/// One item of the three watches (boxed: the objects are large and of different sizes).
enum Seen {
    Deployment(Box<Result<watcher::Event<Deployment>, watcher::Error>>),
    Pod(Box<Result<watcher::Event<Pod>, watcher::Error>>),
    Slice(Box<Result<watcher::Event<EndpointSlice>, watcher::Error>>),
}

/// The watch of `K` in `namespace` (all when `None`), its items wrapped as [`Seen`].
fn stream<K>(
    client: &Client,
    namespace: Option<&str>,
    cfg: watcher::Config,
    wrap: fn(Result<watcher::Event<K>, watcher::Error>) -> Seen,
) -> BoxStream<'static, Seen>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    <K as Resource>::DynamicType: Default + Eq + std::hash::Hash + Clone + Send,
{
    let api = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    watcher(api, cfg).default_backoff().map(wrap).boxed()
}

/// Watch until `cancel`. Fails only when the cluster cannot be reached at the start.
pub async fn run(cfg: WatchConfig, shared: Arc<Shared>, cancel: CancellationToken) -> Result<()> {
    let (kcfg, context) = cluster::config(&cfg.cluster).await?;
    let namespace = kcfg.default_namespace.clone();
    let (client, runtime_client) = cluster::clients(kcfg).await?;
    let scope = (!cfg.all_namespaces).then_some(namespace.as_str());
    let pod_selector = cfg.pod_selector.clone().unwrap_or(cfg.selector.clone());
    let watches = futures::stream::select_all([
        stream::<Deployment>(
            &client,
            scope,
            watcher::Config::default().labels(&cfg.selector),
            |r| Seen::Deployment(Box::new(r)),
        ),
        stream::<Pod>(
            &client,
            scope,
            watcher::Config::default().labels(&pod_selector),
            |r| Seen::Pod(Box::new(r)),
        ),
        stream::<EndpointSlice>(&client, scope, watcher::Config::default(), |r| {
            Seen::Slice(Box::new(r))
        }),
    ]);
    let ctx = Ctx {
        client,
        runtime_client,
        context,
        cfg: Arc::new(cfg),
        shared,
    };
    let mut routes = Routes::default();
    let mut watches = std::pin::pin!(watches);
    let mut errors: BTreeSet<&'static str> = BTreeSet::new();
    loop {
        let seen = tokio::select! {
            _ = cancel.cancelled() => break,
            s = watches.next() => s,
        };
        let Some(seen) = seen else { break };
        routes.take(&ctx, &cancel, seen, &mut errors).await;
    }
    for m in routes.members.values() {
        m.cancel.cancel();
    }
    Ok(())
}

/// A watch error, said once per resource until the watch works again.
fn said<K>(
    errors: &mut BTreeSet<&'static str>,
    resource: &'static str,
    r: &Result<watcher::Event<K>, watcher::Error>,
) {
    match r {
        Ok(_) => _ = errors.remove(resource),
        Err(e) if errors.insert(resource) => {
            tracing::warn!("{}", watch_error_message(e, resource))
        }
        Err(_) => {}
    }
}

impl Routes {
    async fn take(
        &mut self,
        ctx: &Ctx,
        cancel: &CancellationToken,
        seen: Seen,
        errors: &mut BTreeSet<&'static str>,
    ) {
        match seen {
            Seen::Deployment(r) => {
                said(errors, "deployments", &r);
                if let Ok(ev) = *r {
                    self.deployment(ctx, cancel, ev).await;
                }
            }
            Seen::Pod(r) => {
                said(errors, Pod::RESOURCE, &r);
                if let Ok(ev) = *r {
                    self.pod(ev).await;
                }
            }
            Seen::Slice(r) => {
                said(errors, EndpointSlice::RESOURCE, &r);
                if let Ok(ev) = *r {
                    self.slice(ev).await;
                }
            }
        }
        let ready = self.deployments_listed && self.pods_listed;
        ctx.shared.ready.store(ready, Ordering::Relaxed);
        if let Ok(mut m) = ctx.shared.metrics.lock() {
            m.watched = self.members.len() as u64;
        }
    }

    /// One watch event to the session of `dep`.
    async fn forward<K: Watched>(&self, dep: &DeploymentKey, ev: watcher::Event<K>) {
        let Some(m) = self.members.get(dep) else {
            return;
        };
        for kind in convert(ev) {
            let _ = m.tx.send(Event::new(Utc::now(), Source::Kube, kind)).await;
        }
    }

    async fn deployment(
        &mut self,
        ctx: &Ctx,
        cancel: &CancellationToken,
        ev: watcher::Event<Deployment>,
    ) {
        match ev {
            watcher::Event::Init => self.relisting = Some(BTreeSet::new()),
            watcher::Event::InitDone => {
                if let Some(seen) = self.relisting.take() {
                    let gone: Vec<DeploymentKey> = self
                        .members
                        .keys()
                        .filter(|k| !seen.contains(*k))
                        .cloned()
                        .collect();
                    for k in gone {
                        self.remove(ctx, &k);
                    }
                }
                self.deployments_listed = true;
            }
            watcher::Event::InitApply(d) | watcher::Event::Apply(d) => {
                let key = (d.namespace().unwrap_or_default(), d.name_any());
                if let Some(seen) = &mut self.relisting {
                    seen.insert(key.clone());
                }
                let Some(match_labels) = d
                    .spec
                    .as_ref()
                    .and_then(|s| s.selector.match_labels.clone())
                    .filter(|l| !l.is_empty())
                else {
                    tracing::warn!(
                        "deployment {}/{} has no matchLabels selector: not watched",
                        key.0,
                        key.1
                    );
                    return;
                };
                if let Some(m) = self.members.get_mut(&key) {
                    m.owner.match_labels = match_labels;
                    return;
                }
                let owner = Owner {
                    key: key.clone(),
                    match_labels,
                };
                let member = spawn_member(ctx, cancel, &owner);
                self.members.insert(key.clone(), member);
                // Its pods seen before it, in the order of their names.
                let orphans: Vec<Pod> = self
                    .orphans
                    .iter()
                    .filter(|((ns, _), _)| *ns == key.0)
                    .map(|(_, p)| p.clone())
                    .collect();
                for p in orphans {
                    self.pod(watcher::Event::Apply(p)).await;
                }
            }
            watcher::Event::Delete(d) => {
                let key = (d.namespace().unwrap_or_default(), d.name_any());
                self.remove(ctx, &key);
            }
        }
    }

    fn remove(&mut self, ctx: &Ctx, key: &DeploymentKey) {
        if let Some(m) = self.members.remove(key) {
            m.cancel.cancel();
        }
        self.pods.retain(|_, d| d != key);
        for owners in self.slices.values_mut() {
            owners.remove(key);
        }
        if let Ok(mut m) = ctx.shared.metrics.lock() {
            m.forget(&key.0, &key.1);
        }
        if let Ok(mut r) = ctx.shared.runtimes.lock() {
            r.remove(key);
        }
    }

    async fn pod(&mut self, ev: watcher::Event<Pod>) {
        match ev {
            watcher::Event::Init | watcher::Event::InitDone => {
                let done = matches!(ev, watcher::Event::InitDone);
                for (k, m) in &self.members {
                    let _ = m.pods.send(PodSeen::of(&ev));
                    self.forward(k, ev.clone()).await;
                }
                self.pods_listed |= done;
            }
            watcher::Event::InitApply(p) | watcher::Event::Apply(p) => {
                let key = (p.namespace().unwrap_or_default(), p.name_any());
                let dep = self.pods.get(&key).cloned().or_else(|| {
                    let owners: Vec<String> = p
                        .owner_references()
                        .iter()
                        .map(|o| o.name.clone())
                        .collect();
                    owner(
                        &key.0,
                        p.labels(),
                        &owners,
                        self.members.values().map(|m| &m.owner),
                    )
                });
                match dep {
                    Some(dep) => {
                        self.orphans.remove(&key);
                        self.pods.insert(key.clone(), dep.clone());
                        let ev = watcher::Event::Apply(p);
                        if let Some(m) = self.members.get(&dep) {
                            for seen in PodSeen::all(&ev) {
                                let _ = m.pods.send(seen);
                            }
                        }
                        self.forward(&dep, ev).await;
                        // Slices listed before this pod was known now have an owner.
                        let named: Vec<EndpointSlice> = self
                            .unowned_slices
                            .iter()
                            .filter(|((ns, _), s)| {
                                *ns == key.0
                                    && s.endpoints.iter().any(|e| {
                                        e.target_ref.as_ref().and_then(|r| r.name.as_deref())
                                            == Some(key.1.as_str())
                                    })
                            })
                            .map(|(_, s)| s.clone())
                            .collect();
                        for s in named {
                            self.slice(watcher::Event::Apply(s)).await;
                        }
                    }
                    None => {
                        self.orphans.insert(key, p);
                    }
                }
            }
            watcher::Event::Delete(p) => {
                let key = (p.namespace().unwrap_or_default(), p.name_any());
                self.orphans.remove(&key);
                if let Some(dep) = self.pods.remove(&key) {
                    if let Some(m) = self.members.get(&dep) {
                        let _ = m.pods.send(PodSeen::Gone(key.1.clone()));
                    }
                    self.forward(&dep, watcher::Event::Delete(p)).await;
                }
            }
        }
    }

    async fn slice(&mut self, ev: watcher::Event<EndpointSlice>) {
        match ev {
            watcher::Event::InitApply(s) | watcher::Event::Apply(s) => {
                let ns = s.namespace().unwrap_or_default();
                let key = (ns.clone(), s.name_any());
                let now: BTreeSet<DeploymentKey> = s
                    .endpoints
                    .iter()
                    .filter_map(|e| e.target_ref.as_ref()?.name.clone())
                    .filter_map(|pod| self.pods.get(&(ns.clone(), pod)).cloned())
                    .collect();
                let owners = self.slices.entry(key.clone()).or_default();
                owners.extend(now);
                let owners = owners.clone();
                if owners.is_empty() {
                    self.slices.remove(&key);
                    self.unowned_slices.insert(key, s);
                    return;
                }
                self.unowned_slices.remove(&key);
                for dep in owners {
                    self.forward(&dep, watcher::Event::Apply(s.clone())).await;
                }
            }
            watcher::Event::Delete(s) => {
                let key = (s.namespace().unwrap_or_default(), s.name_any());
                self.unowned_slices.remove(&key);
                for dep in self.slices.remove(&key).unwrap_or_default() {
                    self.forward(&dep, watcher::Event::Delete(s.clone())).await;
                }
            }
            watcher::Event::Init | watcher::Event::InitDone => {}
        }
    }
}

fn spawn_member(ctx: &Ctx, cancel: &CancellationToken, owner: &Owner) -> Member {
    let (tx, rx) = mpsc::channel(8192);
    let token = cancel.child_token();
    tokio::spawn(member(
        ctx.clone(),
        owner.clone(),
        tx.clone(),
        rx,
        token.clone(),
    ));
    let (pods, seen) = mpsc::unbounded_channel();
    let (namespace, name) = &owner.key;
    tokio::spawn(pod_events::run(
        Api::namespaced(ctx.client.clone(), namespace),
        Some(name.clone()),
        seen,
        tx.clone(),
        token.clone(),
    ));
    Member {
        owner: owner.clone(),
        tx,
        pods,
        cancel: token,
    }
}

/// The files of a Deployment's recording: `DIR/<namespace>/<deployment>/readygap-watch-
/// <namespace>-<deployment>-<NNNNNN>.jsonl`, numbered on from the files already there.
pub struct RecordFiles {
    dir: PathBuf,
    stem: String,
    next: u64,
    pub max_bytes: u64,
    pub keep: usize,
    pub current: Option<PathBuf>,
}

impl RecordFiles {
    pub fn new(root: &Path, key: &DeploymentKey, max_bytes: u64, keep: usize) -> Self {
        let dir = root.join(&key.0).join(&key.1);
        let stem = format!("readygap-watch-{}-{}-", key.0, key.1);
        let next = Self::numbered(&dir, &stem).last().map_or(1, |(n, _)| n + 1);
        Self {
            dir,
            stem,
            next,
            max_bytes,
            keep: keep.max(1),
            current: None,
        }
    }

    /// The numbered files in `dir`, oldest first.
    fn numbered(dir: &Path, stem: &str) -> Vec<(u64, PathBuf)> {
        let mut v: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().to_string();
                let n = name
                    .strip_prefix(stem)?
                    .strip_suffix(".jsonl")?
                    .parse::<u64>()
                    .ok()?;
                Some((n, e.path()))
            })
            .collect();
        v.sort();
        v
    }

    /// The next file (its directory created), and the oldest files beyond `keep` (counting
    /// the new one) deleted.
    pub fn next_file(&mut self) -> std::io::Result<PathBuf> {
        std::fs::create_dir_all(&self.dir)?;
        let path = self
            .dir
            .join(format!("{}{:06}.jsonl", self.stem, self.next));
        self.next += 1;
        let old = Self::numbered(&self.dir, &self.stem);
        let too_many = (old.len() + 1).saturating_sub(self.keep);
        for (_, p) in old.into_iter().take(too_many) {
            let _ = std::fs::remove_file(p);
        }
        self.current = Some(path.clone());
        Ok(path)
    }

    /// Whether the current file has grown past `max_bytes`.
    pub fn full(&self) -> bool {
        self.current
            .as_ref()
            .and_then(|p| std::fs::metadata(p).ok())
            .is_some_and(|m| m.len() >= self.max_bytes)
    }
}

/// The model a Deployment serves, from what its runtime polls already say (no request of
/// its own): the latest resident model, else the first model on disk.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ServedModel {
    resident: Option<String>,
    on_disk: Option<String>,
}

impl ServedModel {
    /// Learn from one applied event.
    pub fn learn(&mut self, ev: &Event) {
        match &ev.kind {
            EventKind::Residency { models, .. } => {
                if let Some(m) = models.first() {
                    self.resident = Some(m.name.clone());
                }
            }
            EventKind::ModelsOnDisk { models, .. } => {
                if let Some(m) = models.first() {
                    self.on_disk = Some(m.name.clone());
                }
            }
            _ => {}
        }
    }

    /// Whether the runtime has held a model resident: the label is the model it serves and
    /// stays so. Before, the label is a guess (the first model on disk, or `unknown`) that
    /// the first residency replaces, which would put a trial's early intervals and its
    /// later ones, or two trials, in different series.
    pub fn settled(&self) -> bool {
        self.resident.is_some()
    }

    /// The label value (`unknown` before any answer).
    pub fn label(&self) -> String {
        self.resident
            .clone()
            .or_else(|| self.on_disk.clone())
            .unwrap_or_else(|| "unknown".into())
    }
}

/// One Deployment's session until `cancel`.
async fn member(
    ctx: Ctx,
    owner: Owner,
    tx: mpsc::Sender<Event>,
    rx: mpsc::Receiver<Event>,
    cancel: CancellationToken,
) {
    let cfg = ctx.cfg.clone();
    let (namespace, name) = owner.key.clone();
    let selector = cluster::selector_string(&owner.match_labels);
    let ask = Ask {
        given: cfg.runtime,
        client: &ctx.runtime_client,
        namespace: &namespace,
        selector: &selector,
        port: cfg.runtime_port,
        probe_path: &cfg.probe_path,
        access: cfg.access,
        direct_url: &cfg.direct_url,
    };
    let (chosen, runtime) = crate::run::runtime_of(ask, cfg.timeouts.inference, None).await;
    if let Ok(mut r) = ctx.shared.runtimes.lock() {
        r.insert(owner.key.clone(), chosen.label());
    }
    let model = Arc::new(Mutex::new(ServedModel::default()));
    let learns = model.clone();
    let exec = Executor::new(
        ctx.client.clone(),
        &namespace,
        runtime.clone(),
        "",
        tx.clone(),
    );
    let tcfg = TrialConfig {
        deployment: Some(name.clone()),
        namespace: namespace.clone(),
        probe_interval: cfg.probe_interval,
        timeouts: cfg.timeouts,
        memory: cfg.memory,
        container: cfg.container.clone(),
        runtime_port: chosen.port,
        probe_external: false,
        read_only: true,
        poll: cfg.poll,
        ..TrialConfig::default()
    };
    let target = format!("deployment/{name}");
    let mut header = jsonl::Header::new(Utc::now(), &ctx.context, &namespace, &target);
    header.settings = json!({
        "mode": "watch", "selector": cfg.selector, "runtime": chosen.kind.name(),
        "runtime_chosen_by": chosen.how, "runtime_port": chosen.port,
        "probe_path": chosen.probe_path, "access": cfg.access, "read_only": true,
        "probe_interval_ms": cfg.probe_interval.as_millis() as u64,
    });
    let mut recording = Recording::new(header, cfg.record_redact);
    let mut files = cfg
        .record_dir
        .as_ref()
        .map(|d| RecordFiles::new(d, &owner.key, cfg.record_max_bytes, cfg.record_keep));
    if let Some(f) = &mut files {
        match f.next_file() {
            Ok(path) => recording
                .begin(&path)
                .unwrap_or_else(|e| tracing::warn!("{e}")),
            Err(e) => tracing::warn!("recording {namespace}/{name}: {e}"),
        }
    }
    let mut runner = Runner::new(RunnerParts {
        rx,
        tx: tx.clone(),
        exec,
        runtime,
        client: ctx.client.clone(),
        cfg: tcfg,
        sink: Box::new(move |ev: &Event| {
            if let Ok(mut m) = learns.lock() {
                m.learn(ev);
            }
        }),
        recording,
        cancel: cancel.clone(),
    });
    runner.compact_after(cfg.compact_after);
    let session = crate::run::session_event(SessionInfo {
        context: ctx.context.clone(),
        namespace: namespace.clone(),
        target,
        model: None,
        mode: "watch".into(),
        runtime: Some(chosen.label()),
        // The watcher judges with the default verdict thresholds.
        verdicts: None,
    });
    let _ = tx.send(session).await;
    let (cmd_tx, cmd_rx) = mpsc::channel::<Command>(4);
    let shared = ctx.shared.clone();
    let runtime_name = chosen.kind.name().to_string();
    let served = model.clone();
    let series = {
        let (namespace, name, runtime) = (namespace.clone(), name.clone(), runtime_name.clone());
        move || SeriesKey {
            namespace: namespace.clone(),
            deployment: name.clone(),
            model: model
                .lock()
                .map(|m| m.label())
                .unwrap_or_else(|_| "unknown".into()),
            runtime: runtime.clone(),
        }
    };
    // Each interval goes into its histogram as soon as its end mark is known: a recovery
    // shows within one scrape after T1, whether or not anyone sends the pod a request. Only
    // once the runtime has held its model resident (`ServedModel::settled`): before, the
    // series' model label is a guess the first residency replaces; the intervals then wait
    // for the trial's end, as before.
    {
        let (series, shared) = (series.clone(), shared.clone());
        runner.on_open_trial(Box::new(move |t: &Trial| {
            if served.lock().is_ok_and(|m| m.settled())
                && let Ok(mut m) = shared.metrics.lock()
            {
                m.observe_intervals(&series(), t);
            }
        }));
    }
    let mut on_trial = move |t: &Trial| {
        if t.failure_kind() == Some(readygap_core::timeline::FailureKind::Interrupted) {
            return;
        }
        let key = series();
        if let Ok(mut m) = shared.metrics.lock() {
            m.observe(&key, t);
        }
        // A new file at a trial's end once this one is full: each file replays on its own.
        if let Some(f) = &mut files
            && f.full()
        {
            match f.next_file() {
                Ok(path) => {
                    let _ = cmd_tx.try_send(Command::Record(Some(path)));
                }
                Err(e) => tracing::warn!("rotating the recording of {namespace}/{name}: {e}"),
            }
        }
    };
    runner.serve(cmd_rx, &mut on_trial).await;
    runner.stop();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(v: &[(&str, &str)]) -> BTreeMap<String, String> {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_pod_belongs_to_its_replicasets_deployment_before_any_selector() {
        let deps = [
            Owner {
                key: ("ns".into(), "chat".into()),
                match_labels: labels(&[("tier", "llm")]),
            },
            Owner {
                key: ("ns".into(), "chat-big".into()),
                match_labels: labels(&[("app", "chat-big")]),
            },
        ];
        // Both selectors match; the ReplicaSet names the owner.
        let pod = labels(&[
            ("tier", "llm"),
            ("app", "chat-big"),
            ("pod-template-hash", "5d8f"),
        ]);
        let rs = vec!["chat-big-5d8f".to_string()];
        assert_eq!(
            owner("ns", &pod, &rs, &deps),
            Some(("ns".into(), "chat-big".into()))
        );
        // No ReplicaSet: the first selector the labels satisfy.
        assert_eq!(
            owner("ns", &labels(&[("tier", "llm")]), &[], &deps),
            Some(("ns".into(), "chat".into()))
        );
        // Another namespace, or labels that satisfy no selector: nobody's.
        assert_eq!(owner("other", &pod, &rs, &deps), None);
        assert_eq!(owner("ns", &labels(&[("app", "x")]), &[], &deps), None);
    }

    #[test]
    fn recordings_rotate_and_keep_the_newest_files() {
        let dir = tempfile::tempdir().unwrap();
        let key = ("lab".to_string(), "chat".to_string());
        let mut f = RecordFiles::new(dir.path(), &key, 10, 2);
        let a = f.next_file().unwrap();
        std::fs::write(&a, "x").unwrap();
        assert!(!f.full());
        std::fs::write(&a, "0123456789ab").unwrap();
        assert!(f.full());
        let b = f.next_file().unwrap();
        std::fs::write(&b, "x").unwrap();
        let c = f.next_file().unwrap();
        std::fs::write(&c, "x").unwrap();
        assert!(!a.exists() && b.exists(), "only the newest two stay");
        assert!(
            c.to_string_lossy()
                .ends_with("readygap-watch-lab-chat-000003.jsonl")
        );
        // A restarted watcher numbers on.
        let mut again = RecordFiles::new(dir.path(), &key, 10, 2);
        assert!(
            again
                .next_file()
                .unwrap()
                .to_string_lossy()
                .ends_with("000004.jsonl")
        );
    }
}
