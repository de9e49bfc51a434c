//! The node host feed: CPU, memory, available memory and page cache of the *selected node*
//! (the node of the pod readygap is focused on), every 2 s, and how that node is reached,
//! announced as a [`EventKind::NodeAccess`] event so it shows in the Host panel and in
//! recordings.
//!
//! - The selected node is [`readygap_core::focus::node`] (the one "which pod" rule), which
//!   the session publishes into [`NodeSelection`] (a `watch` of the node name). It is
//!   sticky: while no pod is Ready (during a replacement) the previous node stays selected,
//!   so a trial does not restart the sampler.
//! - [`AccessPolicy::plan`] decides, per node, what samples it:
//!   * `--node-access VIA` (with `--node-identity` / `--node-known-hosts`) or a matching
//!     `[nodes."PATTERN"]` table: the node itself, through [`crate::host::run_node_sampler`]
//!     (one long-lived remote loop on one ssh session, or one exec in a debug pod; never a
//!     connection per sample);
//!   * a guess from labels, providerID and InternalIP is *shown* but never used for
//!     continuous sampling (a guessed ssh target may be wrong, and readygap must not keep
//!     knocking on a host nobody configured);
//!   * otherwise, and in the lab without explicit access: the kubelet **Summary API** through
//!     the API server's node proxy (`/api/v1/nodes/NODE/proxy/stats/summary`, needs
//!     `nodes/proxy get`).
//! - The Summary API has no page-cache figure. Its node `usageBytes` includes all file
//!   pages, and `workingSetBytes` is usage minus the *inactive* file pages, so
//!   `usage − workingSet` is the inactive file cache: a lower bound of `Cached:`. readygap
//!   shows it, flagged approximate ([`HostSample::cache_approx`], "≈" on screen), rather
//!   than nothing. Available memory is the kubelet's `availableBytes` (capacity − working
//!   set), close to but not the kernel's `MemAvailable`; the total is the Node's
//!   `status.capacity.memory`; CPU is `usageNanoCores` over `status.capacity.cpu`.
//!
//! Errors (refused key, unknown host key, timeout, lost connection, a forbidden proxy)
//! become [`EventKind::SourceError`] events of the feed `host NODE`; the samplers retry
//! after [`RETRY_AFTER`]; a sample after an error reports [`EventKind::SourceConnected`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use k8s_openapi::api::core::v1::Node;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::node::config::{NodeFacts, NodesSection, access_from_via};
use crate::node::{NodeAccess, NodeName, User};
use readygap_core::event::{Event, EventKind, HostSample, NodeAccessInfo, Source, Timestamp};
use readygap_core::units::{parse_cpu, parse_memory};

/// How often a node is sampled.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(2);
/// How long a failed sampler waits before it tries again.
pub const RETRY_AFTER: Duration = Duration::from_secs(15);
/// The name of the Summary API fallback on screen.
pub const SUMMARY_API: &str = "kubelet Summary API (node proxy)";

use readygap_core::event::Feed as FeedName;

/// The selected node, as a `watch` the node feed follows: the session publishes
/// [`readygap_core::focus::node`] after each pod event and pod choice. Sticky: `None` (no
/// Ready pod, during a replacement) keeps the node selected before.
#[derive(Clone, Default)]
pub struct NodeSelection {
    node: Arc<watch::Sender<Option<String>>>,
}

impl NodeSelection {
    pub fn new() -> Self {
        Self::default()
    }

    /// Select `node` (a change wakes the feed; `None` changes nothing).
    pub fn set(&self, node: Option<String>) {
        if let Some(node) = node {
            // Wakes the feed only when the old node differs from the new one.
            self.node.send_if_modified(|cur| {
                let changed = cur.as_ref() != Some(&node);
                *cur = Some(node);
                changed
            });
        }
    }

    /// The selected node now.
    pub fn node(&self) -> Option<String> {
        self.node.borrow().clone()
    }

    /// Follow changes of the selected node.
    pub fn subscribe(&self) -> watch::Receiver<Option<String>> {
        self.node.subscribe()
    }
}

/// Where node access comes from in this session.
#[derive(Debug, Clone, PartialEq)]
pub enum AccessPolicy {
    /// One access for every node: `--node-access VIA`, with `--node-identity` /
    /// `--node-known-hosts` for ssh (or the built-in lab's debug pods). `origin` says where
    /// it comes from on screen and in recordings.
    Explicit {
        via: String,
        identity: Option<PathBuf>,
        known_hosts: Option<PathBuf>,
        origin: String,
    },
    /// `[nodes."PATTERN"]` tables. In the lab (`lab`), a node no table matches is the lab's
    /// (Summary API); elsewhere it gets a guess, shown but not sampled.
    Config { section: NodesSection, lab: bool },
    /// No access can be resolved (the config file failed): the reason.
    Unavailable(String),
}

impl Default for AccessPolicy {
    /// No `[nodes]` tables: guesses are shown, the Summary API samples.
    fn default() -> Self {
        Self::Config {
            section: NodesSection::default(),
            lab: false,
        }
    }
}

/// What samples one node.
#[derive(Debug, Clone, PartialEq)]
pub enum Sampler {
    /// The node's own `/proc`, through its access.
    Remote(Box<NodeAccess>),
    /// The kubelet Summary API through the node proxy.
    Summary,
    /// Nothing (the access is broken).
    Off,
}

/// The decision for one node: what is shown, and what samples it.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub info: NodeAccessInfo,
    pub sampler: Sampler,
    /// An error to report on the node's feed (a configured access that cannot be built).
    pub error: Option<String>,
}

impl AccessPolicy {
    /// The access `--node-access` names for `node`, with the identity and known_hosts
    /// flags applied to ssh.
    pub fn explicit_access(
        via: &str,
        identity: Option<&PathBuf>,
        known_hosts: Option<&PathBuf>,
        node: &str,
    ) -> Result<NodeAccess, String> {
        let name = NodeName::new(node).map_err(|e| e.to_string())?;
        let user = crate::node::access::current_user()
            .or_else(|| User::new("root").ok())
            .ok_or("no user for ssh")?;
        let mut access = access_from_via(via, &name, &user).map_err(|e| e.to_string())?;
        if let NodeAccess::Ssh(ssh) = &mut access {
            ssh.identity = identity.cloned().or(ssh.identity.take());
            ssh.known_hosts = known_hosts.cloned().or(ssh.known_hosts.take());
        }
        Ok(access)
    }

    /// What to show for the node and what samples it.
    pub fn plan(&self, facts: &NodeFacts) -> Plan {
        let node = facts.name.clone();
        let summary = |target: String, origin: String, sampling: bool| Plan {
            info: NodeAccessInfo {
                node: node.clone(),
                target,
                origin,
                sampling,
                sampled_via: (!sampling).then(|| SUMMARY_API.to_owned()),
            },
            sampler: Sampler::Summary,
            error: None,
        };
        let broken = |target: String, origin: String, error: String| Plan {
            info: NodeAccessInfo {
                node: node.clone(),
                target,
                origin,
                sampling: false,
                sampled_via: None,
            },
            sampler: Sampler::Off,
            error: Some(error),
        };
        let remote = |access: NodeAccess, origin: String| Plan {
            info: NodeAccessInfo {
                node: node.clone(),
                target: access.target(),
                origin,
                sampling: true,
                sampled_via: None,
            },
            sampler: Sampler::Remote(Box::new(access)),
            error: None,
        };
        match self {
            Self::Explicit {
                via,
                identity,
                known_hosts,
                origin,
            } => match Self::explicit_access(via, identity.as_ref(), known_hosts.as_ref(), &node) {
                Ok(a) => remote(a, origin.clone()),
                Err(e) => broken(via.clone(), origin.clone(), e),
            },
            Self::Config { section, lab } => match section.lookup(&node) {
                Some((pattern, _)) => {
                    let origin = format!("configured by [nodes.{pattern:?}]");
                    match section.resolve(facts) {
                        Ok((a, _)) => remote(a, origin),
                        Err(e) => broken(format!("[nodes.{pattern:?}]"), origin, e.to_string()),
                    }
                }
                None if *lab => summary(
                    SUMMARY_API.into(),
                    "lab (no [nodes] table matches)".into(),
                    true,
                ),
                None => match facts.guess() {
                    Ok((a, why)) => {
                        let basis = match (&a, &facts.internal_ip) {
                            (NodeAccess::Ssh(_), Some(ip)) => format!("InternalIP {ip}"),
                            (NodeAccess::Ssh(_), None) => "the node name".to_owned(),
                            _ => why,
                        };
                        summary(
                            a.target(),
                            format!(
                                "guessed from {basis}, not sampled: set [nodes.{node:?}] to sample over it"
                            ),
                            false,
                        )
                    }
                    Err(e) => summary("none".into(), format!("no guess: {e}"), false),
                },
            },
            Self::Unavailable(why) => summary("none".into(), why.clone(), false),
        }
    }
}

/// Memory and CPU capacity of a node (`status.capacity`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Capacity {
    pub memory_bytes: Option<u64>,
    pub cpu_cores: Option<f64>,
}

impl Capacity {
    pub fn from_node(node: &Node) -> Self {
        let cap = node.status.as_ref().and_then(|s| s.capacity.as_ref());
        let get = |k: &str| cap.and_then(|c| c.get(k)).map(|q| q.0.clone());
        Self {
            memory_bytes: get("memory").and_then(|q| parse_memory(&q)),
            cpu_cores: get("cpu").and_then(|q| parse_cpu(&q)),
        }
    }
}

/// One node sample from a kubelet Summary API document (see the module comment for what
/// each figure means). Fails when the node's memory figures are missing.
pub fn summary_sample(
    summary: &serde_json::Value,
    node: &str,
    capacity: Capacity,
) -> Result<HostSample, String> {
    let mem = &summary["node"]["memory"];
    let field = |k: &str| mem[k].as_u64();
    let usage = field("usageBytes").ok_or("no node.memory.usageBytes in the summary")?;
    let ws = field("workingSetBytes").ok_or("no node.memory.workingSetBytes in the summary")?;
    let available = field("availableBytes");
    let total = capacity
        .memory_bytes
        .or_else(|| available.map(|a| a.saturating_add(ws)))
        .ok_or("no memory capacity on the Node and no availableBytes in the summary")?;
    let cpu_percent = summary["node"]["cpu"]["usageNanoCores"]
        .as_u64()
        .zip(capacity.cpu_cores)
        .map(|(nano, cores)| (nano as f64 / (cores * 1e9) * 100.0).clamp(0.0, 100.0));
    Ok(HostSample {
        node: Some(node.to_owned()),
        cpu_percent: cpu_percent.map(|c| c as f32),
        mem_total: total,
        mem_available: Some(available.unwrap_or_else(|| total.saturating_sub(ws))),
        cached: Some(usage.saturating_sub(ws)),
        cache_approx: true,
        ..HostSample::default()
    })
}

async fn send(tx: &mpsc::Sender<Event>, ts: Timestamp, kind: EventKind) -> bool {
    tx.send(Event::new(ts, Source::Host, kind)).await.is_ok()
}

/// The feed `host NODE` as its events tell it: the first sample, and the first after an
/// error, is preceded by [`EventKind::SourceConnected`]; an error becomes a
/// [`EventKind::SourceError`] that says the retry interval. Each send says whether the
/// receiver is still there.
struct Feed<'a> {
    tx: &'a mpsc::Sender<Event>,
    name: FeedName,
    healthy: bool,
}

impl<'a> Feed<'a> {
    fn new(tx: &'a mpsc::Sender<Event>, node: &str) -> Self {
        Self {
            tx,
            name: FeedName::Host(node.to_string()),
            healthy: false,
        }
    }

    /// Sends `sample` observed `at`; `detail` says how the node was reached.
    async fn sample(&mut self, at: Timestamp, sample: HostSample, detail: String) -> bool {
        if !self.healthy {
            self.healthy = true;
            let feed = self.name.clone();
            send(self.tx, at, EventKind::SourceConnected { feed, detail }).await;
        }
        send(self.tx, at, EventKind::HostSample(sample)).await
    }

    async fn error(&mut self, message: impl std::fmt::Display) -> bool {
        self.healthy = false;
        let message = format!("{message} (retrying every {} s)", RETRY_AFTER.as_secs());
        let feed = self.name.clone();
        let kind = EventKind::SourceError { feed, message };
        send(self.tx, Utc::now(), kind).await
    }
}

/// The node a task follows, the token that stops it, and the task.
type Following = (String, CancellationToken, tokio::task::JoinHandle<()>);

/// Stops the task that follows a node and waits for it (bounded).
async fn stop_following(following: Option<Following>) {
    if let Some((_, stop, task)) = following {
        stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
    }
}

/// Follows the selected node until `cancel` fires: when it changes, the old node's sampler
/// stops and one for the new node starts.
pub async fn run(
    policy: AccessPolicy,
    client: kube::Client,
    namespace: String,
    mut selected: watch::Receiver<Option<String>>,
    tx: mpsc::Sender<Event>,
    cancel: CancellationToken,
) {
    let mut current: Option<Following> = None;
    loop {
        let node = selected.borrow_and_update().clone();
        if current.as_ref().map(|(n, ..)| n) != node.as_ref() {
            stop_following(current.take()).await;
            current = node.map(|n| {
                let stop = cancel.child_token();
                let task = tokio::spawn(follow(
                    policy.clone(),
                    client.clone(),
                    namespace.clone(),
                    n.clone(),
                    tx.clone(),
                    stop.clone(),
                ));
                (n, stop, task)
            });
        }
        tokio::select! {
            () = cancel.cancelled() => break,
            changed = selected.changed() => if changed.is_err() { break },
        }
    }
    stop_following(current).await;
}

/// Announces how `node` is reached and samples it until `cancel` fires.
async fn follow(
    policy: AccessPolicy,
    client: kube::Client,
    namespace: String,
    node: String,
    tx: mpsc::Sender<Event>,
    cancel: CancellationToken,
) {
    let api: kube::Api<Node> = kube::Api::all(client.clone());
    let (facts, capacity) =
        match tokio::time::timeout(Duration::from_secs(10), api.get(&node)).await {
            Ok(Ok(n)) => (NodeFacts::from_node(&n), Capacity::from_node(&n)),
            // Without the Node object the access can still come from --node-access or a
            // table; the guess and the capacity are then missing.
            _ => (
                NodeFacts {
                    name: node.clone(),
                    ..NodeFacts::default()
                },
                Capacity::default(),
            ),
        };
    let plan = policy.plan(&facts);
    if !send(&tx, Utc::now(), EventKind::NodeAccess(plan.info.clone())).await {
        return;
    }
    let feed = FeedName::Host(node.clone());
    if let Some(message) = plan.error {
        send(&tx, Utc::now(), EventKind::SourceError { feed, message }).await;
        return;
    }
    match plan.sampler {
        Sampler::Remote(access) => {
            let kube = Some((client, namespace));
            sample_remote(*access, kube, &node, &tx, cancel).await;
        }
        Sampler::Summary => sample_summary(client, &node, capacity, &tx, cancel).await,
        Sampler::Off => {}
    }
}

/// Samples a node through its access (ssh/minikube/kind/local: one remote loop; a debug
/// pod, created in `kube`'s namespace: one long-lived exec): the ONE place that starts the
/// node sampler.
async fn sample_remote(
    access: NodeAccess,
    kube: Option<(kube::Client, String)>,
    node: &str,
    tx: &mpsc::Sender<Event>,
    cancel: CancellationToken,
) {
    let target = access.target();
    let (stx, mut srx) = mpsc::channel(4);
    let task = tokio::spawn(crate::host::run_node_sampler(
        access,
        kube,
        SAMPLE_INTERVAL,
        RETRY_AFTER,
        stx,
        cancel.clone(),
    ));
    let mut feed = Feed::new(tx, node);
    while let Some(result) = srx.recv().await {
        let ok = match result {
            Ok((at, sample)) => {
                let detail = match &sample.connection {
                    Some(c) => format!("{target} (connection {c})"),
                    None => target.clone(),
                };
                let node = Some(node.to_owned());
                feed.sample(at, HostSample { node, ..sample }, detail).await
            }
            Err(e) => feed.error(e).await,
        };
        if !ok {
            cancel.cancel();
            break;
        }
    }
    // The sampler kills its ssh process when cancelled; wait for that.
    let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
}

/// Polls the kubelet Summary API of `node` every [`SAMPLE_INTERVAL`].
async fn sample_summary(
    client: kube::Client,
    node: &str,
    capacity: Capacity,
    tx: &mpsc::Sender<Event>,
    cancel: CancellationToken,
) {
    let mut feed = Feed::new(tx, node);
    let path = format!("/api/v1/nodes/{node}/proxy/stats/summary");
    loop {
        let (ok, wait) = match fetch_summary(&client, &path, node, capacity).await {
            Ok(sample) => {
                let sent = feed
                    .sample(Utc::now(), sample, SUMMARY_API.to_owned())
                    .await;
                (sent, SAMPLE_INTERVAL)
            }
            Err(message) => (feed.error(message).await, RETRY_AFTER),
        };
        if !ok {
            return;
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// One reading of the Summary API at `path`, as `node`'s sample.
async fn fetch_summary(
    client: &kube::Client,
    path: &str,
    node: &str,
    capacity: Capacity,
) -> Result<HostSample, String> {
    let req = http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| format!("building the request {path}: {e}"))?;
    let limit = SAMPLE_INTERVAL * 5;
    let sample = match tokio::time::timeout(limit, client.request::<serde_json::Value>(req)).await {
        Err(_) => Err(format!("no answer within {} s", limit.as_secs())),
        Ok(Err(e)) => {
            let request = crate::rbac::Request {
                verb: "get",
                group: "",
                resource: "nodes/proxy",
                namespace: None,
            };
            Err(crate::rbac::explain_kube_error(&e, &request).unwrap_or_else(|| e.to_string()))
        }
        Ok(Ok(v)) => summary_sample(&v, node, capacity),
    };
    sample.map_err(|e| format!("{SUMMARY_API} of {node}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use readygap_core::event::{PodCondition, PodView};

    fn at(ms: i64) -> Timestamp {
        chrono::DateTime::from_timestamp_millis(1_800_000_000_000 + ms).expect("ts")
    }

    fn pod(name: &str, node: &str, ready: bool, created: i64) -> Event {
        Event::new(
            at(created),
            Source::Kube,
            EventKind::PodApplied(PodView {
                name: name.into(),
                node: Some(node.into()),
                created: Some(at(created)),
                conditions: vec![PodCondition {
                    type_: "Ready".into(),
                    status: ready,
                    ..PodCondition::default()
                }],
                ..PodView::default()
            }),
        )
    }

    /// The session's part of node selection: the one store, the focus rule, the watch.
    #[derive(Default)]
    struct Focus {
        state: readygap_core::state::State,
        chosen: Option<String>,
        sel: NodeSelection,
    }

    impl Focus {
        fn apply(&mut self, ev: &Event) {
            self.state.apply(ev);
            self.publish();
        }
        fn choose(&mut self, pod: Option<String>) {
            self.chosen = pod;
            self.publish();
        }
        fn publish(&self) {
            let node = readygap_core::focus::node(&self.state, self.chosen.as_deref());
            self.sel.set(node);
        }
        fn node(&self) -> Option<String> {
            self.sel.node()
        }
    }

    #[test]
    fn focus_follows_the_newest_ready_pod_and_the_users_choice() {
        let mut f = Focus::default();
        assert_eq!(f.node(), None);
        f.apply(&pod("a", "n1", true, 0));
        assert_eq!(f.node().as_deref(), Some("n1"));
        // A newer pod that is not Ready yet does not move the focus.
        f.apply(&pod("b", "n2", false, 10));
        assert_eq!(f.node().as_deref(), Some("n1"));
        // The old pod is deleted: no Ready pod, the node stays (sticky).
        let mut gone = pod("a", "n1", true, 0);
        if let EventKind::PodApplied(p) = &gone.kind {
            gone.kind = EventKind::PodDeleted(p.clone());
        }
        f.apply(&gone);
        assert_eq!(f.node().as_deref(), Some("n1"));
        f.apply(&pod("b", "n2", true, 10));
        assert_eq!(f.node().as_deref(), Some("n2"));
        // The user picks an older pod on another node; unknown picks are ignored.
        f.apply(&pod("c", "n3", true, 5));
        assert_eq!(f.node().as_deref(), Some("n2"));
        f.choose(Some("c".into()));
        assert_eq!(f.node().as_deref(), Some("n3"));
        f.choose(Some("nope".into()));
        assert_eq!(f.node().as_deref(), Some("n2"));
    }

    #[test]
    fn a_relist_drops_pods_that_are_gone() {
        let mut f = Focus::default();
        f.apply(&pod("old", "n1", true, 20));
        let resync = |done: bool| {
            let resource = readygap_core::event::Resource::Pods;
            Event::new(
                at(30),
                Source::Kube,
                if done {
                    EventKind::ResyncDone { resource }
                } else {
                    EventKind::ResyncStarted { resource }
                },
            )
        };
        f.apply(&resync(false));
        f.apply(&pod("new", "n2", true, 10));
        f.apply(&resync(true));
        assert_eq!(f.node().as_deref(), Some("n2"));
    }

    #[tokio::test]
    async fn the_selection_publishes_only_changes() {
        let mut f = Focus::default();
        let mut rx = f.sel.subscribe();
        f.apply(&pod("a", "n1", true, 0));
        assert!(rx.has_changed().expect("open"));
        assert_eq!(rx.borrow_and_update().as_deref(), Some("n1"));
        f.apply(&pod("a", "n1", true, 0));
        assert!(!rx.has_changed().expect("open"), "same node: no wake-up");
        f.apply(&pod("b", "n2", true, 5));
        f.choose(Some("a".into()));
        assert_eq!(f.node().as_deref(), Some("n1"));
    }

    fn facts(name: &str, ip: Option<&str>) -> NodeFacts {
        NodeFacts {
            name: name.into(),
            internal_ip: ip.map(str::to_owned),
            ..NodeFacts::default()
        }
    }

    #[test]
    fn plans_say_what_samples_the_node_and_why() {
        let explicit = AccessPolicy::Explicit {
            via: "ssh://root@127.0.0.1:2222".into(),
            identity: Some("/keys/id".into()),
            known_hosts: Some("/keys/kh".into()),
            origin: "--node-access".into(),
        };
        let p = explicit.plan(&facts("n1", None));
        assert_eq!(p.info.target, "ssh root@127.0.0.1:2222");
        assert_eq!(p.info.origin, "--node-access");
        assert!(p.info.sampling);
        let Sampler::Remote(access) = p.sampler else {
            panic!("expected a remote sampler: {p:?}");
        };
        let NodeAccess::Ssh(ssh) = *access else {
            panic!("expected ssh: {access:?}");
        };
        assert_eq!(ssh.identity, Some(PathBuf::from("/keys/id")));
        assert_eq!(ssh.known_hosts, Some(PathBuf::from("/keys/kh")));

        let bad = AccessPolicy::Explicit {
            via: "telnet://x".into(),
            identity: None,
            known_hosts: None,
            origin: "--node-access".into(),
        };
        let p = bad.plan(&facts("n1", None));
        assert_eq!(p.sampler, Sampler::Off);
        assert!(p.error.expect("error").contains("expected ssh"));

        let section = NodesSection::from_toml(
            "[nodes.\"gpu-*\"]\nvia = \"ssh\"\nuser = \"admin\"\n[nodes.\"mk\"]\nvia = \"minikube\"\n",
        )
        .expect("config");
        let config = AccessPolicy::Config {
            section: section.clone(),
            lab: false,
        };
        let p = config.plan(&facts("gpu-1", Some("10.0.0.5")));
        assert_eq!(p.info.target, "ssh admin@10.0.0.5:22");
        assert_eq!(p.info.origin, "configured by [nodes.\"gpu-*\"]");
        assert!(matches!(p.sampler, Sampler::Remote(_)));

        // No table: the guess is shown, the Summary API samples.
        let p = config.plan(&facts("cpu-1", Some("10.0.0.9")));
        assert!(p.info.target.ends_with("@10.0.0.9:22"), "{:?}", p.info);
        assert!(p.info.origin.starts_with("guessed"), "{:?}", p.info);
        assert!(
            p.info.origin.contains("InternalIP 10.0.0.9"),
            "{:?}",
            p.info
        );
        assert!(p.info.origin.contains("[nodes.\"cpu-1\"]"), "{:?}", p.info);
        assert!(!p.info.sampling);
        assert_eq!(p.info.sampled_via.as_deref(), Some(SUMMARY_API));
        assert_eq!(p.sampler, Sampler::Summary);

        // In the lab an unmatched node is the lab's.
        let lab_config = AccessPolicy::Config { section, lab: true };
        let p = lab_config.plan(&facts("lab-node-1", Some("10.0.0.9")));
        assert!(p.info.sampling && p.sampler == Sampler::Summary);
    }

    #[test]
    fn a_summary_document_becomes_an_approximate_sample() {
        // Shape of a real kubelet /stats/summary (trimmed).
        let v = serde_json::json!({"node": {"nodeName": "n1",
            "cpu": {"time": "2026-11-30T10:00:00Z", "usageNanoCores": 2_000_000_000u64, "usageCoreNanoSeconds": 1},
            "memory": {"time": "2026-11-30T10:00:00Z", "availableBytes": 20u64 << 30,
                       "usageBytes": 14u64 << 30, "workingSetBytes": 12u64 << 30,
                       "rssBytes": 10u64 << 30, "pageFaults": 1, "majorPageFaults": 0}},
            "pods": []});
        let cap = Capacity {
            memory_bytes: Some(32 << 30),
            cpu_cores: Some(8.0),
        };
        let s = summary_sample(&v, "n1", cap).expect("sample");
        assert_eq!(s.node.as_deref(), Some("n1"));
        assert_eq!(s.mem_total, 32 << 30);
        assert_eq!(s.mem_available, Some(20 << 30));
        assert_eq!(s.cached, Some(2 << 30));
        assert!(s.cache_approx);
        let cpu = s.cpu_percent.expect("usageNanoCores over the capacity");
        assert!((cpu - 25.0).abs() < 1e-3, "{cpu}");
        // No capacity: total from available + working set.
        let s = summary_sample(&v, "n1", Capacity::default()).expect("sample");
        assert_eq!(s.mem_total, 32 << 30);
        assert_eq!(s.cpu_percent, None, "no CPU capacity: unknown, not 0 %");
        let err = summary_sample(&serde_json::json!({"node": {}}), "n1", cap).expect_err("bad");
        assert!(err.contains("usageBytes"), "{err}");
    }
}
