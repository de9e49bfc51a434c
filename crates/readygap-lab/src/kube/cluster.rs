//! The lab cluster's shared state and its controllers: the Deployment controller (rolling
//! updates honoring maxSurge/maxUnavailable, scaling), the ReplicaSet controller (replaces
//! deleted pods at once), the EndpointSlice controller, and graceful pod deletion. The
//! kubelet side of each pod lives in `kubelet`, which uses this state; the cluster starts it
//! through [`LabSettings::kubelet`] (given by whoever builds the lab), so this module does
//! not depend on the kubelet, as a real controller knows nothing of the kubelets.

use super::objects::{self, time};
use super::resources::{
    CORE_EVENTS, DEPLOYMENTS, ENDPOINT_SLICES, EVENTS, PODS, REPLICASETS, SERVICES,
};
use super::selectors::LabelSelector;
use super::store::{Store, StoreError};
use crate::ground_truth::{GroundTruth, Transition};
use crate::profile::{Profile, Stage};
use crate::runtime::{ModelDisk, NodeCache, PlainContainer, RuntimeFaults, RuntimeHandle};
use crate::scenario::Scenario;
use chrono::{DateTime, Utc};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Pods by the uid of each owner.
type OwnerIndex = HashMap<String, Vec<Arc<Value>>>;

/// The address the lab's API server dials pods from (the pod proxy). A real API server
/// reaches a pod's IP from its own host (`pkg/registry/core/pod/rest/subresources.go`:
/// `ProxyREST` proxies to the pod IP and port), never from the pod's localhost, which only
/// what runs in the pod (an exec probe) or the kubelet's port-forward dials; the runtime's
/// request log names the client, and readygap tells the probe's requests by it. The lab's
/// node addresses start at 127.0.0.1, so the API server gets an address of its own, outside
/// the pod range (127.0.0.10–127.0.255.254).
pub const API_SERVER_SOURCE: Ipv4Addr = Ipv4Addr::new(127, 1, 0, 1);

/// Pod IPs in use by any lab of this process.
static IPS_IN_USE: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());
/// Where the next pod IP search starts (see [`Cluster::allocate_ip`]).
static NEXT_IP: Mutex<u32> = Mutex::new(0);
/// A bound, not listening, SO_REUSEADDR socket on each allocated pod IP's Ollama port: the
/// runtime (also SO_REUSEADDR) can still bind and listen there, but another process's
/// allocation probe (without SO_REUSEADDR) sees the address taken from allocation on, not only
/// once the runtime listens (two labs in two processes used to share a pod IP).
static IP_RESERVATIONS: Mutex<BTreeMap<u32, tokio::net::TcpSocket>> = Mutex::new(BTreeMap::new());

/// Whether no socket at all (listening, bound, or reserved) holds `ip`'s Ollama port, and if
/// so a reservation of it.
fn reserve(ip: Ipv4Addr) -> Option<tokio::net::TcpSocket> {
    let addr = std::net::SocketAddr::from((ip, objects::OLLAMA_PORT));
    let probe = tokio::net::TcpSocket::new_v4().ok()?;
    probe.bind(addr).ok()?;
    drop(probe);
    let hold = tokio::net::TcpSocket::new_v4().ok()?;
    hold.set_reuseaddr(true).ok()?;
    hold.bind(addr).ok()?;
    Some(hold)
}

/// The alphabet Kubernetes uses for generated name suffixes.
const SAFE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Everything the lab's cluster is made of.
pub struct LabSettings {
    pub namespace: String,
    pub profile: Arc<Profile>,
    pub scenario: Scenario,
    pub speed: f64,
    pub seed: u64,
    pub ground_truth: GroundTruth,
    /// What runs the serving containers (`--engine`).
    pub engine: crate::engine::Engine,
    /// Starts the kubelet task of a pod just created (`kubelet::start`).
    pub kubelet: StartKubelet,
}

/// Starts the kubelet task of a just created pod: the cluster, the pod's namespace, name
/// and uid, the token cancelled when its deletion is accepted, and when it was created.
pub type StartKubelet = fn(Arc<Cluster>, String, String, String, CancellationToken, Instant);

/// What the lab knows about one pod beyond its object.
pub struct PodEntry {
    pub uid: String,
    pub ip: Option<Ipv4Addr>,
    pub node: Option<String>,
    pub runtime: Option<Arc<RuntimeHandle>>,
    /// The container when it is not the Ollama runtime (a debug pod, a sidecar).
    pub plain: Option<Arc<PlainContainer>>,
    /// Cancelled when the pod's deletion was accepted.
    pub deleting: CancellationToken,
    /// When the object is removed (set with the deletion).
    pub remove_at: Option<Instant>,
    /// The pod's own model disk (emptyDir volumes).
    pub own_disk: Option<Arc<ModelDisk>>,
}

/// The shared state of the lab cluster.
pub struct Cluster {
    pub store: Arc<Store>,
    pub settings: LabSettings,
    /// Names and IDs.
    rng: Mutex<StdRng>,
    /// Stage timings only, so the same seed gives the same timings whatever else happens.
    timing_rng: Mutex<StdRng>,
    /// Stratified draws per stage.
    strata: Mutex<HashMap<&'static str, super::timing::Strata>>,
    pub node_caches: BTreeMap<String, Arc<NodeCache>>,
    pub shared_disk: Arc<ModelDisk>,
    pub runtime_faults: Arc<RuntimeFaults>,
    pods: Mutex<HashMap<(String, String), PodEntry>>,
    ips: Mutex<BTreeSet<u32>>,
    pub shutdown: CancellationToken,
    /// What the kubelet sends (probes): from 127.0.0.1.
    pub http: reqwest::Client,
    /// What the API server's pod proxy sends: from [`API_SERVER_SOURCE`].
    pub proxy_http: reqwest::Client,
    /// Pods by owner uid, with the pods version it was built at.
    owner_index: Mutex<(u64, OwnerIndex)>,
    /// Whether the first emptyDir pod (the one with pulled models) was started.
    pub emptydir_seeded: std::sync::atomic::AtomicBool,
}

/// A client for pods, dialling from `from` (else the kernel's choice, 127.0.0.1).
fn pod_client(from: Option<Ipv4Addr>) -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        // Pod IPs are reused: never keep a connection to a pod that may be gone.
        .pool_max_idle_per_host(0)
        .local_address(from.map(std::net::IpAddr::V4))
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn fnv32(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in bytes {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The pod-template-hash of a template, encoded as Kubernetes encodes it.
pub fn template_hash(template: &Value) -> String {
    let mut t = template.clone();
    if let Some(labels) = t
        .get_mut("metadata")
        .and_then(|m| m.get_mut("labels"))
        .and_then(Value::as_object_mut)
    {
        labels.remove("pod-template-hash");
    }
    let h = fnv32(t.to_string().as_bytes());
    h.to_string()
        .bytes()
        .map(|b| SAFE_ALPHABET[usize::from(b) % SAFE_ALPHABET.len()] as char)
        .collect()
}

fn owned_by(obj: &Value, uid: &str) -> bool {
    obj["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid))
}

/// Is the pod's Ready condition True?
pub fn pod_ready(pod: &Value) -> bool {
    pod["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

fn terminating(pod: &Value) -> bool {
    pod["metadata"]["deletionTimestamp"].is_string()
}

fn active(pod: &Value) -> bool {
    !terminating(pod)
        && !matches!(
            pod["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed")
        )
}

/// Resolve an intOrString against a total (percent: surge rounds up, unavailable down).
fn resolve(v: Option<&IntOrString>, total: i32, round_up: bool, default_pct: i32) -> i32 {
    match v {
        Some(IntOrString::Int(i)) => *i,
        Some(IntOrString::String(s)) => {
            let pct: i32 = s.trim_end_matches('%').parse().unwrap_or(default_pct);
            let x = f64::from(pct) * f64::from(total) / 100.0;
            if round_up {
                x.ceil() as i32
            } else {
                x.floor() as i32
            }
        }
        None => {
            let x = f64::from(default_pct) * f64::from(total) / 100.0;
            if round_up {
                x.ceil() as i32
            } else {
                x.floor() as i32
            }
        }
    }
}

impl Cluster {
    /// A cluster with its nodes' page caches and the shared model disk.
    pub fn new(store: Arc<Store>, settings: LabSettings) -> Self {
        let node_caches = objects::NODE_NAMES
            .iter()
            .map(|n| {
                (
                    n.to_string(),
                    Arc::new(NodeCache::new(settings.profile.start_cold)),
                )
            })
            .collect();
        let shared_disk = Arc::new(ModelDisk::with_models(&settings.profile.models));
        let rng = Mutex::new(StdRng::seed_from_u64(settings.seed));
        let timing_rng = Mutex::new(StdRng::seed_from_u64(settings.seed ^ 0x7111_1135));
        Self {
            store,
            rng,
            timing_rng,
            strata: Mutex::new(HashMap::new()),
            node_caches,
            shared_disk,
            runtime_faults: Arc::new(RuntimeFaults::new()),
            pods: Mutex::new(HashMap::new()),
            ips: Mutex::new(BTreeSet::new()),
            shutdown: CancellationToken::new(),
            http: pod_client(None),
            proxy_http: pod_client(Some(API_SERVER_SOURCE)),
            emptydir_seeded: std::sync::atomic::AtomicBool::new(false),
            owner_index: Mutex::new((0, HashMap::new())),
            settings,
        }
    }

    /// A draw of a stage (stratified per `key`, see `timing`), divided by the lab's speed.
    pub fn sample(&self, key: &'static str, stage: &Stage) -> Duration {
        let mut rng = lock(&self.timing_rng);
        let mut strata = lock(&self.strata);
        let d = strata.entry(key).or_default().draw(stage, &mut rng);
        self.scaled(d)
    }

    /// A duration divided by the lab's speed.
    pub fn scaled(&self, d: Duration) -> Duration {
        let speed = self.settings.speed.max(1e-6);
        Duration::try_from_secs_f64(d.as_secs_f64() / speed).unwrap_or(Duration::MAX)
    }

    /// A random name suffix of `n` characters.
    pub fn suffix(&self, n: usize) -> String {
        let mut rng = lock(&self.rng);
        (0..n)
            .map(|_| SAFE_ALPHABET[rng.random_range(0..SAFE_ALPHABET.len())] as char)
            .collect()
    }

    /// Random lowercase hex of `n` characters (container IDs, event names, exec IDs). Not
    /// from the lab's seed: how many execs and events clients cause must not shift the seeded
    /// draws of pod names (and so of each pod's runtime stages, seeded by its name).
    pub fn hex(&self, n: usize) -> String {
        let mut rng = rand::rng();
        (0..n)
            .map(|_| char::from_digit(rng.random_range(0..16u32), 16).unwrap_or('0'))
            .collect()
    }

    /// Take the next free pod IP after the last one handed out (127.0.0.10 to
    /// 127.0.255.254, then from the start again): round robin, as the host-local IPAM plugin
    /// of a real node allocates (containernetworking/plugins, plugins/ipam/host-local), so a
    /// client still holding a deleted pod's address does not reach the pod that replaced it.
    /// The pool is shared by every lab in the process, and an address whose Ollama port is
    /// taken (another process) is skipped.
    pub fn allocate_ip(&self) -> Ipv4Addr {
        const FIRST: u32 = 10;
        const END: u32 = 0x0001_0000;
        let mut used = lock(&IPS_IN_USE);
        let mut next = lock(&NEXT_IP);
        let mut n = (*next).max(FIRST);
        for _ in FIRST..END {
            if n >= END {
                n = FIRST;
            }
            let last = n & 0xFF;
            if last != 0 && last != 255 && !used.contains(&n) {
                let ip = Ipv4Addr::from(0x7F00_0000 | n);
                if let Some(hold) = reserve(ip) {
                    lock(&IP_RESERVATIONS).insert(n, hold);
                    break;
                }
            }
            n += 1;
        }
        *next = n + 1;
        used.insert(n);
        lock(&self.ips).insert(n);
        Ipv4Addr::from(0x7F00_0000 | n)
    }

    /// Return a pod IP to the pool.
    pub fn release_ip(&self, ip: Ipv4Addr) {
        let n = u32::from(ip) & 0x00FF_FFFF;
        lock(&self.ips).remove(&n);
        lock(&IPS_IN_USE).remove(&n);
        lock(&IP_RESERVATIONS).remove(&n);
    }

    /// Return every IP this lab still holds (at shutdown).
    pub fn release_all_ips(&self) {
        let mine: Vec<u32> = lock(&self.ips).iter().copied().collect();
        let mut all = lock(&IPS_IN_USE);
        let mut held = lock(&IP_RESERVATIONS);
        for n in mine {
            all.remove(&n);
            held.remove(&n);
        }
    }

    /// Run `f` on the pod's entry.
    pub fn with_pod<R>(
        &self,
        ns: &str,
        name: &str,
        f: impl FnOnce(&mut PodEntry) -> R,
    ) -> Option<R> {
        lock(&self.pods)
            .get_mut(&(ns.to_string(), name.to_string()))
            .map(f)
    }

    /// Forget a pod's entry.
    pub fn remove_pod_entry(&self, ns: &str, name: &str) -> Option<PodEntry> {
        lock(&self.pods).remove(&(ns.to_string(), name.to_string()))
    }

    /// The runtime of a pod, if its container runs one.
    pub fn runtime_of(&self, ns: &str, name: &str) -> Option<Arc<RuntimeHandle>> {
        self.with_pod(ns, name, |e| e.runtime.clone()).flatten()
    }

    /// The container of a pod that does not run the Ollama runtime, if it runs.
    pub fn plain_of(&self, ns: &str, name: &str) -> Option<Arc<PlainContainer>> {
        self.with_pod(ns, name, |e| e.plain.clone()).flatten()
    }

    /// Anon memory of the runtimes on `node`, in bytes (the node's meminfo counts it).
    pub fn node_anon_bytes(&self, node: &str) -> u64 {
        self.runtimes()
            .iter()
            .filter(|(_, _, n, _)| n.as_deref() == Some(node))
            .map(|(_, _, _, rt)| rt.memory().anon_bytes)
            .sum()
    }

    /// Every running runtime with its pod (namespace, name, node).
    pub fn runtimes(&self) -> Vec<(String, String, Option<String>, Arc<RuntimeHandle>)> {
        lock(&self.pods)
            .iter()
            .filter_map(|((ns, n), e)| {
                e.runtime
                    .clone()
                    .map(|r| (ns.clone(), n.clone(), e.node.clone(), r))
            })
            .collect()
    }

    /// Record an event (core/v1 and events.k8s.io/v1) about an object.
    pub fn record_event(
        &self,
        regarding: &Value,
        ty: &str,
        reason: &str,
        message: &str,
        component: &str,
        host: &str,
    ) {
        let ns = regarding["metadata"]["namespace"]
            .as_str()
            .filter(|s| !s.is_empty())
            .unwrap_or("default");
        let name = format!(
            "{}.{}",
            regarding["metadata"]["name"].as_str().unwrap_or("object"),
            self.hex(16)
        );
        let (core, new) = objects::events(
            regarding,
            ns,
            &name,
            ty,
            reason,
            message,
            component,
            host,
            Utc::now(),
        );
        if let Err(e) = self.store.create(CORE_EVENTS, core) {
            tracing::warn!("lab: recording event {name}: {e}");
        }
        if let Err(e) = self.store.create(EVENTS, new) {
            tracing::warn!("lab: recording event {name}: {e}");
        }
    }

    /// Accept a pod deletion: with a grace period, set deletionTimestamp and let the kubelet
    /// stop the container and remove the object when the grace ends; an unscheduled pod or
    /// grace 0 is removed at once.
    pub fn delete_pod(
        &self,
        ns: &str,
        name: &str,
        grace: Option<i64>,
    ) -> Result<Value, StoreError> {
        let Some(pod) = self.store.get(PODS, ns, name) else {
            return Err(StoreError::NotFound {
                kind: "pods".into(),
                name: name.into(),
            });
        };
        if terminating(&pod) {
            return Ok((*pod).clone());
        }
        let grace = grace
            .or_else(|| pod["spec"]["terminationGracePeriodSeconds"].as_i64())
            .unwrap_or(30)
            .max(0);
        let scheduled = pod["spec"]["nodeName"]
            .as_str()
            .is_some_and(|n| !n.is_empty());
        let now = Utc::now();
        let gt = &self.settings.ground_truth;
        if grace == 0 || !scheduled {
            // Logged first: the entries exist before anyone can see the change.
            gt.log_at(
                now,
                name,
                Transition::DeleteAccepted,
                json!({"grace_seconds": grace}),
            );
            gt.log_at(now, name, Transition::PodGone, json!({}));
            let gone = self.store.delete(PODS, ns, name)?;
            self.with_pod(ns, name, |e| e.deleting.cancel());
            return Ok(gone);
        }
        // Any int64 is a valid grace period; timing is capped at a year so nothing overflows.
        let wait = self.scaled(Duration::from_secs(grace.min(365 * 86_400) as u64));
        let deadline = chrono::Duration::from_std(wait)
            .ok()
            .and_then(|d| now.checked_add_signed(d))
            .unwrap_or(now);
        let updated = self.store.mutate(PODS, ns, name, |p| {
            gt.log_at(
                now,
                name,
                Transition::DeleteAccepted,
                json!({"grace_seconds": grace}),
            );
            p["metadata"]["deletionTimestamp"] = json!(time(deadline));
            p["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
            Ok(())
        })?;
        self.with_pod(ns, name, |e| {
            e.remove_at = Instant::now().checked_add(wait);
            e.deleting.cancel();
        });
        self.record_event(
            &updated,
            "Normal",
            "Killing",
            "Stopping container ollama",
            "kubelet",
            pod["spec"]["nodeName"].as_str().unwrap_or(""),
        );
        Ok(updated)
    }

    /// Create a pod from a ReplicaSet and start its kubelet.
    fn create_pod(self: &Arc<Self>, rs: &Value) -> Result<(), StoreError> {
        let ns = rs["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let rs_name = rs["metadata"]["name"].as_str().unwrap_or_default();
        let name = format!("{rs_name}-{}", self.suffix(5));
        let template = &rs["spec"]["template"];
        let mut spec = template["spec"].clone();
        spec["serviceAccountName"] = json!("default");
        spec["serviceAccount"] = json!("default");
        spec["enableServiceLinks"] = json!(true);
        spec["priority"] = json!(0);
        spec["preemptionPolicy"] = json!("PreemptLowerPriority");
        // The DefaultTolerationSeconds admission plugin adds these to the pod's own.
        let mut tolerations = spec["tolerations"].as_array().cloned().unwrap_or_default();
        tolerations.extend([
            json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}),
            json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}),
        ]);
        spec["tolerations"] = json!(tolerations);
        let now = Utc::now();
        let mut meta = json!({
            "name": name, "generateName": format!("{rs_name}-"), "namespace": ns,
            "labels": template["metadata"]["labels"].clone(),
            "creationTimestamp": time(now),
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs_name,
                "uid": rs["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}]
        });
        if let Some(a) = template["metadata"].get("annotations") {
            meta["annotations"] = a.clone();
        }
        let pod = json!({"metadata": meta, "spec": spec, "status": {"phase": "Pending", "qosClass": "Guaranteed"}});
        let pod = objects::typed::<Pod>(pod).map_err(StoreError::Invalid)?;
        self.settings.ground_truth.log_at(
            now,
            &name,
            Transition::PodCreated,
            json!({"replicaset": rs_name}),
        );
        let created = self.store.create(PODS, pod)?;
        self.record_event(
            rs,
            "Normal",
            "SuccessfulCreate",
            &format!("Created pod: {name}"),
            "replicaset-controller",
            "",
        );
        self.start_kubelet(&created);
        Ok(())
    }

    /// Start the kubelet task of a pod that was just created.
    pub fn start_kubelet(self: &Arc<Self>, pod: &Value) {
        let ns = pod["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let name = pod["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let uid = pod["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let created = Instant::now();
        let deleting = CancellationToken::new();
        lock(&self.pods).insert(
            (ns.clone(), name.clone()),
            PodEntry {
                uid: uid.clone(),
                ip: None,
                node: None,
                runtime: None,
                plain: None,
                deleting: deleting.clone(),
                remove_at: None,
                own_disk: None,
            },
        );
        (self.settings.kubelet)(self.clone(), ns, name, uid, deleting, created);
    }

    /// Background cascading deletion: the ReplicaSets and pods owned by `owner_uid`.
    pub fn delete_dependents(&self, ns: &str, owner_uid: &str) {
        for rs in self
            .store
            .list(REPLICASETS, Some(ns))
            .0
            .iter()
            .filter(|r| owned_by(r, owner_uid))
        {
            let name = rs["metadata"]["name"].as_str().unwrap_or_default();
            if self.store.delete(REPLICASETS, ns, name).is_ok() {
                self.delete_dependents(ns, rs["metadata"]["uid"].as_str().unwrap_or_default());
            }
        }
        for p in self
            .store
            .list(PODS, Some(ns))
            .0
            .iter()
            .filter(|p| owned_by(p, owner_uid))
        {
            let name = p["metadata"]["name"].as_str().unwrap_or_default();
            let _ = self.delete_pod(ns, name, None);
        }
    }

    /// One pass of every controller.
    pub fn reconcile(self: &Arc<Self>) {
        for d in self.store.list(DEPLOYMENTS, None).0 {
            if let Err(e) = self.reconcile_deployment(&d) {
                tracing::warn!("lab: deployment controller: {e}");
            }
        }
        for rs in self.store.list(REPLICASETS, None).0 {
            if let Err(e) = self.reconcile_replicaset(&rs) {
                tracing::warn!("lab: replicaset controller: {e}");
            }
        }
        for svc in self.store.list(SERVICES, None).0 {
            if let Err(e) = self.reconcile_endpoints(&svc) {
                tracing::warn!("lab: endpointslice controller: {e}");
            }
        }
    }

    /// The pods whose ownerReferences name `uid`, from an index rebuilt only when pods
    /// changed (a pass over 500 pods and 50 Deployments stays linear).
    fn pods_of(&self, ns: &str, uid: &str) -> Vec<Arc<Value>> {
        let version = self.store.last_change(PODS);
        let mut cache = lock(&self.owner_index);
        if cache.0 != version || version == 0 {
            let mut index = OwnerIndex::new();
            for p in self.store.list(PODS, None).0 {
                if let Some(refs) = p["metadata"]["ownerReferences"].as_array() {
                    for r in refs {
                        if let Some(u) = r["uid"].as_str() {
                            index.entry(u.to_string()).or_default().push(p.clone());
                        }
                    }
                }
            }
            *cache = (version, index);
        }
        cache
            .1
            .get(uid)
            .map(|v| {
                v.iter()
                    .filter(|p| p["metadata"]["namespace"] == ns)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The Deployment controller's sync of one Deployment: its ReplicaSet for the current
    /// template (created when missing), one step of its strategy (Recreate or
    /// RollingUpdate), and its status counted from the pods.
    fn reconcile_deployment(self: &Arc<Self>, d: &Value) -> Result<(), StoreError> {
        let dep: Deployment =
            serde_json::from_value(d.clone()).map_err(|e| StoreError::Invalid(e.to_string()))?;
        let spec = dep.spec.clone().unwrap_or_default();
        let rollout = Rollout {
            d,
            ns: dep.metadata.namespace.clone().unwrap_or_default(),
            name: dep.metadata.name.clone().unwrap_or_default(),
            uid: dep.metadata.uid.clone().unwrap_or_default(),
            desired: spec.replicas.unwrap_or(1),
            spec,
        };
        let mut rss: Vec<Arc<Value>> = self
            .store
            .list(REPLICASETS, Some(&rollout.ns))
            .0
            .into_iter()
            .filter(|r| owned_by(r, &rollout.uid))
            .collect();
        let new_rs = self.new_replica_set(&rollout, &mut rss)?;
        let new_uid = new_rs["metadata"]["uid"].as_str().unwrap_or_default();
        let olds: Vec<Arc<Value>> = rss
            .iter()
            .filter(|r| r["metadata"]["uid"] != new_uid)
            .cloned()
            .collect();
        let (surge, unavailable) = rollout.surge_and_unavailable();
        if rollout.recreate() {
            self.recreate_step(&rollout, &new_rs, &olds)?;
        } else {
            self.rolling_step(&rollout, &new_rs, &olds, surge, unavailable)?;
        }
        self.write_deployment_status(&rollout, &rss, &new_rs, unavailable)
    }

    /// The Deployment's ReplicaSet for its current pod template (`pod-template-hash`);
    /// when there is none, a new one with the next revision (scaled to the desired
    /// replicas at once when no old one is active, else to 0 for the strategy to scale),
    /// added to `rss`.
    fn new_replica_set(
        self: &Arc<Self>,
        rollout: &Rollout<'_>,
        rss: &mut Vec<Arc<Value>>,
    ) -> Result<Arc<Value>, StoreError> {
        let Rollout {
            d,
            ns,
            name,
            uid,
            desired,
            ..
        } = rollout;
        let hash = template_hash(&d["spec"]["template"]);
        if let Some(r) = rss
            .iter()
            .find(|r| r["metadata"]["labels"]["pod-template-hash"] == hash.as_str())
        {
            return Ok(r.clone());
        }
        let revision_of = |r: &Value| -> i64 {
            r["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0)
        };
        let max_rev = rss.iter().map(|r| revision_of(r)).max().unwrap_or(0);
        let any_old_active = rss
            .iter()
            .any(|r| r["spec"]["replicas"].as_i64().unwrap_or(0) > 0);
        let rs_name = format!("{name}-{hash}");
        let mut template = d["spec"]["template"].clone();
        template["metadata"]["labels"]["pod-template-hash"] = json!(hash);
        let mut selector = d["spec"]["selector"].clone();
        selector["matchLabels"]["pod-template-hash"] = json!(hash);
        let rev = (max_rev + 1).to_string();
        let min_ready = rollout.spec.min_ready_seconds.unwrap_or(0);
        let rs = json!({
            "metadata": {"name": rs_name, "namespace": ns, "labels": template["metadata"]["labels"].clone(),
                "annotations": {"deployment.kubernetes.io/revision": rev,
                    "deployment.kubernetes.io/desired-replicas": desired.to_string(),
                    "deployment.kubernetes.io/max-replicas": desired.to_string()},
                "generation": 1,
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                    "uid": uid, "controller": true, "blockOwnerDeletion": true}]},
            "spec": {"replicas": if any_old_active { 0 } else { *desired }, "selector": selector,
                     "template": template, "minReadySeconds": min_ready},
            "status": {"replicas": 0, "observedGeneration": 1}
        });
        let rs = objects::typed::<ReplicaSet>(rs).map_err(StoreError::Invalid)?;
        let created = Arc::new(self.store.create(REPLICASETS, rs)?);
        self.store.mutate(DEPLOYMENTS, ns, name, |o| {
            o["metadata"]["annotations"]["deployment.kubernetes.io/revision"] =
                json!((max_rev + 1).to_string());
            Ok(())
        })?;
        let scaled = created["spec"]["replicas"].as_i64().unwrap_or(0);
        self.record_event(
            d,
            "Normal",
            "ScalingReplicaSet",
            &format!("Scaled up replica set {rs_name} from 0 to {scaled}"),
            "deployment-controller",
            "",
        );
        rss.push(created.clone());
        Ok(created)
    }

    /// Scales one of the Deployment's ReplicaSets to `to`, with its ScalingReplicaSet event.
    fn scale_replica_set(
        &self,
        rollout: &Rollout<'_>,
        r: &Value,
        to: i32,
    ) -> Result<(), StoreError> {
        let from = replicas_of(r);
        let rname = r["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let desired = rollout.desired;
        self.store.mutate(REPLICASETS, &rollout.ns, &rname, |o| {
            o["spec"]["replicas"] = json!(to);
            o["metadata"]["annotations"]["deployment.kubernetes.io/desired-replicas"] =
                json!(desired.to_string());
            Ok(())
        })?;
        let verb = if to > from { "up" } else { "down" };
        self.record_event(
            rollout.d,
            "Normal",
            "ScalingReplicaSet",
            &format!("Scaled {verb} replica set {rname} from {from} to {to}"),
            "deployment-controller",
            "",
        );
        Ok(())
    }

    /// Active and Ready pods of a ReplicaSet.
    fn available_of(&self, ns: &str, r: &Value) -> i32 {
        let uid = r["metadata"]["uid"].as_str().unwrap_or_default();
        self.pods_of(ns, uid)
            .iter()
            .filter(|p| active(p) && pod_ready(p))
            .count() as i32
    }

    /// Recreate: the old ReplicaSets to 0, and the new one to the desired replicas once
    /// their pods are all gone.
    fn recreate_step(
        &self,
        rollout: &Rollout<'_>,
        new_rs: &Value,
        olds: &[Arc<Value>],
    ) -> Result<(), StoreError> {
        for r in olds.iter().filter(|r| replicas_of(r) > 0) {
            self.scale_replica_set(rollout, r, 0)?;
        }
        let old_pods_left = olds.iter().any(|r| {
            !self
                .pods_of(
                    &rollout.ns,
                    r["metadata"]["uid"].as_str().unwrap_or_default(),
                )
                .is_empty()
        });
        if !old_pods_left && replicas_of(new_rs) != rollout.desired {
            self.scale_replica_set(rollout, new_rs, rollout.desired)?;
        }
        Ok(())
    }

    /// One RollingUpdate step: the new ReplicaSet up within maxSurge, else the old ones
    /// down within maxUnavailable (first their pods that are not available).
    fn rolling_step(
        &self,
        rollout: &Rollout<'_>,
        new_rs: &Value,
        olds: &[Arc<Value>],
        surge: i32,
        unavailable: i32,
    ) -> Result<(), StoreError> {
        let desired = rollout.desired;
        let old_total: i32 = olds.iter().map(|r| replicas_of(r)).sum();
        let new_replicas = replicas_of(new_rs);
        if old_total == 0 {
            if new_replicas != desired {
                self.scale_replica_set(rollout, new_rs, desired)?;
            }
            return Ok(());
        }
        let all: i32 = old_total + new_replicas;
        if new_replicas < desired && all < desired + surge {
            let up = (desired + surge - all).min(desired - new_replicas);
            return self.scale_replica_set(rollout, new_rs, new_replicas + up);
        }
        if new_replicas > desired {
            return self.scale_replica_set(rollout, new_rs, desired);
        }
        let min_available = desired - unavailable;
        let new_unavailable = new_replicas - self.available_of(&rollout.ns, new_rs);
        let mut budget = all - min_available - new_unavailable;
        // First the old replicas that are not available, then available ones.
        for r in olds.iter().filter(|r| replicas_of(r) > 0) {
            if budget <= 0 {
                break;
            }
            let cur = replicas_of(r);
            let unhealthy = cur - self.available_of(&rollout.ns, r);
            let down = unhealthy.max(0).min(budget);
            let down = if down == 0 { budget.min(cur) } else { down };
            if down > 0 {
                self.scale_replica_set(rollout, r, cur - down)?;
                budget -= down;
            }
        }
        Ok(())
    }

    /// The Deployment's status, counted from the pods themselves: replicas, updated, ready
    /// and available counts and the Available and Progressing conditions (their
    /// lastTransitionTime kept while the status stays, lastUpdateTime while the reason
    /// does too).
    fn write_deployment_status(
        &self,
        rollout: &Rollout<'_>,
        rss: &[Arc<Value>],
        new_rs: &Value,
        unavailable: i32,
    ) -> Result<(), StoreError> {
        let desired = rollout.desired;
        let new_name = new_rs["metadata"]["name"].as_str().unwrap_or_default();
        let new_uid = new_rs["metadata"]["uid"].as_str().unwrap_or_default();
        let mut replicas = 0;
        let mut ready = 0;
        let mut updated = 0;
        for r in rss {
            let ruid = r["metadata"]["uid"].as_str().unwrap_or_default();
            for p in self.pods_of(&rollout.ns, ruid).iter().filter(|p| active(p)) {
                replicas += 1;
                if pod_ready(p) {
                    ready += 1;
                }
                if ruid == new_uid {
                    updated += 1;
                }
            }
        }
        let complete = updated == desired && replicas == desired && ready == desired;
        let available_ok = ready >= desired - unavailable;
        let now = time(Utc::now());
        let generation = rollout.d["metadata"]["generation"].clone();
        self.store.mutate(DEPLOYMENTS, &rollout.ns, &rollout.name, |o| {
            let old_conds = o["status"]["conditions"].clone();
            let cond = |ty: &str, status: &str, reason: &str, msg: String| -> Value {
                let prev = old_conds.as_array().and_then(|cs| cs.iter().find(|c| c["type"] == ty).cloned());
                let same_status = prev.as_ref().is_some_and(|p| p["status"] == status);
                let same_reason = prev.as_ref().is_some_and(|p| p["reason"] == reason);
                let ltt = if same_status { prev.as_ref().map(|p| p["lastTransitionTime"].clone()).unwrap_or(json!(now)) } else { json!(now) };
                let lut = if same_status && same_reason { prev.as_ref().map(|p| p["lastUpdateTime"].clone()).unwrap_or(json!(now)) } else { json!(now) };
                json!({"type": ty, "status": status, "reason": reason, "message": msg, "lastTransitionTime": ltt, "lastUpdateTime": lut})
            };
            let available = if available_ok {
                cond("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability.".into())
            } else {
                cond("Available", "False", "MinimumReplicasUnavailable", "Deployment does not have minimum availability.".into())
            };
            let progressing = if complete {
                cond("Progressing", "True", "NewReplicaSetAvailable", format!("ReplicaSet \"{new_name}\" has successfully progressed."))
            } else {
                cond("Progressing", "True", "ReplicaSetUpdated", format!("ReplicaSet \"{new_name}\" is progressing."))
            };
            o["status"] = json!({
                "observedGeneration": generation,
                "replicas": replicas, "updatedReplicas": updated, "readyReplicas": ready,
                "availableReplicas": ready, "unavailableReplicas": (desired - ready).max(0),
                "conditions": [available, progressing]
            });
            // Zero counts are omitted, as the API server's omitempty does.
            if let Some(m) = o["status"].as_object_mut() {
                m.retain(|k, v| k == "replicas" || *v != 0);
            }
            Ok(())
        })?;
        Ok(())
    }

    fn reconcile_replicaset(self: &Arc<Self>, rs: &Value) -> Result<(), StoreError> {
        let ns = rs["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let name = rs["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let uid = rs["metadata"]["uid"].as_str().unwrap_or_default();
        let want = rs["spec"]["replicas"].as_i64().unwrap_or(1) as usize;
        let pods = self.pods_of(&ns, uid);
        let mut live: Vec<&Arc<Value>> = pods.iter().filter(|p| active(p)).collect();
        if live.len() < want {
            for _ in live.len()..want {
                self.create_pod(rs)?;
            }
        } else if live.len() > want {
            // Delete unscheduled first, then not ready, then the newest.
            live.sort_by_key(|p| {
                let scheduled = p["spec"]["nodeName"].is_string();
                let ready = pod_ready(p);
                let created = p["metadata"]["creationTimestamp"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                (scheduled, ready, std::cmp::Reverse(created))
            });
            for p in live.iter().take(live.len() - want) {
                let pname = p["metadata"]["name"].as_str().unwrap_or_default();
                self.delete_pod(&ns, pname, None)?;
                self.record_event(
                    rs,
                    "Normal",
                    "SuccessfulDelete",
                    &format!("Deleted pod: {pname}"),
                    "replicaset-controller",
                    "",
                );
            }
        }
        let pods = self.pods_of(&ns, uid);
        let live: Vec<&Arc<Value>> = pods.iter().filter(|p| active(p)).collect();
        let ready = live.iter().filter(|p| pod_ready(p)).count();
        let generation = rs["metadata"]["generation"].clone();
        self.store.mutate(REPLICASETS, &ns, &name, |o| {
            let mut status = json!({"replicas": live.len(), "fullyLabeledReplicas": live.len(),
                "readyReplicas": ready, "availableReplicas": ready, "observedGeneration": generation});
            if let Some(m) = status.as_object_mut() {
                m.retain(|k, v| k == "replicas" || k == "observedGeneration" || *v != 0);
            }
            o["status"] = status;
            Ok(())
        })?;
        Ok(())
    }

    fn reconcile_endpoints(self: &Arc<Self>, svc: &Value) -> Result<(), StoreError> {
        let ns = svc["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let name = svc["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let Some(sel) = svc["spec"]["selector"].as_object() else {
            return Ok(());
        };
        let selector = LabelSelector(
            sel.iter()
                .map(|(k, v)| {
                    super::selectors::LabelReq::Eq(
                        k.clone(),
                        v.as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect(),
        );
        let mut pods: Vec<Arc<Value>> = self
            .store
            .list(PODS, Some(&ns))
            .0
            .into_iter()
            .filter(|p| selector.matches(p) && p["status"]["podIP"].is_string())
            .collect();
        pods.sort_by(|a, b| {
            a["metadata"]["creationTimestamp"]
                .as_str()
                .cmp(&b["metadata"]["creationTimestamp"].as_str())
                .then(
                    a["metadata"]["name"]
                        .as_str()
                        .cmp(&b["metadata"]["name"].as_str()),
                )
        });
        // k8s.io/endpointslice utils.go podToEndpoint: serving = the pod's Ready, ready =
        // publishNotReadyAddresses || (serving && !terminating).
        let publish_not_ready = svc["spec"]["publishNotReadyAddresses"] == true;
        let endpoints: Vec<Value> = pods
            .iter()
            .map(|p| {
                let serving = pod_ready(p);
                let term = terminating(p);
                let ready = publish_not_ready || (serving && !term);
                json!({
                    "addresses": [p["status"]["podIP"]],
                    "conditions": {"ready": ready, "serving": serving, "terminating": term},
                    "nodeName": p["spec"]["nodeName"],
                    "targetRef": {"kind": "Pod", "namespace": ns, "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}
                })
            })
            .collect();
        let ports: Vec<Value> = svc["spec"]["ports"]
            .as_array()
            .map(|ps| {
                ps.iter()
                    .map(|p| {
                        // A named targetPort resolves against the pods' container ports.
                        let named = p["targetPort"].as_str().and_then(|n| {
                            pods.iter().find_map(|pod| {
                                pod["spec"]["containers"].as_array()?.iter().find_map(|c| {
                                    c["ports"].as_array()?.iter().find(|cp| cp["name"] == n)?["containerPort"].as_i64()
                                })
                            })
                        });
                        json!({"name": p["name"], "port": p["targetPort"].as_i64().or(named).or(p["port"].as_i64()), "protocol": p["protocol"]})
                    })
                    .collect()
            })
            .unwrap_or_default();
        let existing = self
            .store
            .list(ENDPOINT_SLICES, Some(&ns))
            .0
            .into_iter()
            .find(|s| s["metadata"]["labels"]["kubernetes.io/service-name"] == name.as_str());
        // The ground truth of each endpoint change, logged before the change is visible.
        let before = existing
            .as_ref()
            .map(|s| endpoint_conditions(&s["endpoints"]))
            .unwrap_or_default();
        let after = endpoint_conditions(&json!(endpoints));
        let now = Utc::now();
        for (pod, change) in readygap_core::bench::diff_endpoints(&before, &after) {
            self.settings.ground_truth.log_at(
                now,
                &pod,
                Transition::of_endpoint(change),
                json!({"service": name}),
            );
        }
        match existing {
            Some(slice) => {
                let sname = slice["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                self.store.mutate(ENDPOINT_SLICES, &ns, &sname, |o| {
                    o["endpoints"] = json!(endpoints);
                    o["ports"] = json!(ports);
                    Ok(())
                })?;
            }
            None => {
                let slice = json!({
                    "metadata": {"name": format!("{name}-{}", self.suffix(5)), "namespace": ns,
                        "generateName": format!("{name}-"),
                        "labels": {"kubernetes.io/service-name": name,
                                   "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"},
                        "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": name,
                            "uid": svc["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}]},
                    "addressType": "IPv4", "endpoints": endpoints, "ports": ports
                });
                let slice = objects::typed::<k8s_openapi::api::discovery::v1::EndpointSlice>(slice)
                    .map_err(StoreError::Invalid)?;
                self.store.create(ENDPOINT_SLICES, slice)?;
            }
        }
        Ok(())
    }
}

/// The endpoints of a slice's `endpoints` array by pod name (the bench's ground truth).
fn endpoint_conditions(endpoints: &Value) -> readygap_core::bench::Endpoints {
    endpoints
        .as_array()
        .map(|eps| {
            eps.iter()
                .filter_map(|e| {
                    let pod = e["targetRef"]["name"].as_str()?.to_string();
                    let c = &e["conditions"];
                    Some((
                        pod,
                        readygap_core::bench::EndpointConditions {
                            ready: c["ready"] == true,
                            serving: c["serving"] == true,
                            terminating: c["terminating"] == true,
                        },
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Run the controllers until the cluster shuts down: one pass after every store change
/// (changes made by a pass trigger another pass, until nothing changes).
pub async fn run_controllers(cluster: Arc<Cluster>) {
    let mut rx = cluster.store.subscribe();
    loop {
        rx.borrow_and_update();
        cluster.reconcile();
        tokio::select! {
            _ = cluster.shutdown.cancelled() => return,
            r = rx.changed() => if r.is_err() { return },
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// The current time (one place, so tests of pure parts can pass their own).
pub fn now() -> DateTime<Utc> {
    Utc::now()
}

/// A Deployment as its controller reads it for one sync.
struct Rollout<'a> {
    /// The stored object (events are recorded on it).
    d: &'a Value,
    ns: String,
    name: String,
    uid: String,
    desired: i32,
    spec: k8s_openapi::api::apps::v1::DeploymentSpec,
}

impl Rollout<'_> {
    fn recreate(&self) -> bool {
        self.spec.strategy.as_ref().and_then(|s| s.type_.as_deref()) == Some("Recreate")
    }

    /// maxSurge and maxUnavailable resolved against the desired replicas (25% each by
    /// default); both 0 would stall, so unavailable is then 1.
    fn surge_and_unavailable(&self) -> (i32, i32) {
        let ru = self
            .spec
            .strategy
            .as_ref()
            .and_then(|s| s.rolling_update.clone())
            .unwrap_or_default();
        let surge = resolve(ru.max_surge.as_ref(), self.desired, true, 25);
        let unavailable = resolve(ru.max_unavailable.as_ref(), self.desired, false, 25);
        if surge == 0 && unavailable == 0 {
            (0, 1)
        } else {
            (surge, unavailable)
        }
    }
}

/// A ReplicaSet's `spec.replicas`.
fn replicas_of(r: &Value) -> i32 {
    r["spec"]["replicas"].as_i64().unwrap_or(0) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_hash_ignores_its_own_label_and_changes_with_the_template() {
        let t = json!({"metadata": {"labels": {"app": "ollama"}}, "spec": {"containers": []}});
        let mut labelled = t.clone();
        labelled["metadata"]["labels"]["pod-template-hash"] = json!("x");
        assert_eq!(template_hash(&t), template_hash(&labelled));
        let mut restarted = t.clone();
        restarted["metadata"]["annotations"] = json!({"kubectl.kubernetes.io/restartedAt": "now"});
        assert_ne!(template_hash(&t), template_hash(&restarted));
        assert!(
            template_hash(&t)
                .bytes()
                .all(|b| SAFE_ALPHABET.contains(&b))
        );
    }

    #[test]
    fn int_or_percent() {
        assert_eq!(
            resolve(Some(&IntOrString::String("25%".into())), 3, true, 25),
            1
        );
        assert_eq!(
            resolve(Some(&IntOrString::String("25%".into())), 3, false, 25),
            0
        );
        assert_eq!(resolve(Some(&IntOrString::Int(2)), 3, false, 25), 2);
        assert_eq!(resolve(None, 4, true, 25), 1);
    }
}
