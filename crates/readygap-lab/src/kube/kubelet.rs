//! The kubelet of the lab, one task per pod: the pod placed by the lab's scheduler
//! (`scheduler`), container creation after `profile.container_start`, the Ollama runtime started in the container,
//! readiness from the pod's own readinessProbe (none: at start; httpGet: the runtime answers
//! that path; tcpSocket: the port accepts; exec: a one-token generate with the served model
//! finishes, as the inference-aware probe script does), with its period, initial delay,
//! timeout and failure threshold (scaled by the lab's speed),
//! container restarts after an OOM kill, and graceful termination when the pod is deleted.
//! A container that is not the Ollama runtime gets a plain
//! container (exec only, sees its node: see `runtime::PlainContainer`). Past its
//! `activeDeadlineSeconds` a pod turns Failed (DeadlineExceeded) and its container is killed.
//! Every status change is one store update with the conditions and container states a real
//! kubelet writes, and the matching ground-truth line at the same instant.

use super::cluster::Cluster;
use super::objects::{self, OLLAMA_PORT, time};
use super::resources::{CONFIGMAPS, NODES, PODS};
use super::scheduler::{self, Unplaced};
use crate::ground_truth::Transition;
use crate::runtime::{
    self, ModelDisk, PlainContainer, PlainSpec, RuntimeEvent, RuntimeHandle, RuntimeSpec,
};
use chrono::Utc;
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, Pod, PodCondition, PodIP,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;
use std::future::Future;
use std::net::Ipv4Addr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A chrono instant as a k8s `Time`.
pub fn k8s_time(ts: chrono::DateTime<Utc>) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_microsecond(ts.timestamp_micros()).unwrap_or_default())
}

/// What a readiness probe checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeAction {
    /// No readiness probe: Ready once the container started.
    None,
    /// `httpGet`: a 2xx answer on this path and port.
    Http { path: String, port: u16 },
    /// `tcpSocket`: the port accepts a connection.
    Tcp { port: u16 },
    /// `exec`: the lab runs the inference-aware check (a one-token generate of the served
    /// model that finishes with `"done":true`), what the manifests' probe script does.
    Inference,
}

/// A container's probe (readiness, liveness or startup), with Kubernetes' defaults for
/// missing fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadinessSpec {
    pub action: ProbeAction,
    /// This probe's own `exec.command` (what the real engine runs in the container), `None`
    /// for another kind of probe.
    pub command: Option<Vec<String>>,
    pub period_seconds: u64,
    pub initial_delay_seconds: u64,
    pub timeout_seconds: u64,
    pub failure_threshold: u32,
    /// Consecutive successes before a failing (or not yet passed) probe counts as passed;
    /// Kubernetes requires 1 for liveness and startup probes (validation), so only readiness
    /// reads it here.
    pub success_threshold: u32,
}

/// What the kubelet runs for a pod, read from its first container (as applied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerPlan {
    pub name: String,
    pub image: String,
    /// The port the runtime listens on: the first `containerPort`, else `OLLAMA_HOST`'s.
    pub port: u16,
    pub memory_limit: Option<u64>,
    pub readiness: ReadinessSpec,
    /// The liveness probe, when the container has one (the same checks as readiness; a
    /// failure past its threshold restarts the container).
    pub liveness: Option<ReadinessSpec>,
    /// The startup probe, when the container has one: until it succeeds the container is
    /// not `started`, and neither readiness nor liveness is probed (a failure past its
    /// threshold restarts the container).
    pub startup: Option<ReadinessSpec>,
    /// The served model, from `OLLAMA_MODEL`/`READYGAP_MODEL` in `env` or an `envFrom`
    /// ConfigMap (`None`: the profile's).
    pub model: Option<String>,
    /// Where the container mounts a `hostPath` volume of the node's `/proc`, if it does.
    pub host_proc: Option<String>,
    /// `securityContext.privileged` of the container.
    pub privileged: bool,
    /// GPUs of the container (`resources.limits["nvidia.com/gpu"]`, 0 without).
    pub gpus: u32,
}

/// The mount path of a `hostPath: /proc` volume in the first container.
fn host_proc_mount(pod: &serde_json::Value) -> Option<String> {
    let volumes = pod["spec"]["volumes"].as_array()?;
    let names: Vec<&str> = volumes
        .iter()
        .filter(|v| {
            v["hostPath"]["path"]
                .as_str()
                .is_some_and(|p| p.trim_end_matches('/') == "/proc")
        })
        .filter_map(|v| v["name"].as_str())
        .collect();
    pod["spec"]["containers"][0]["volumeMounts"]
        .as_array()?
        .iter()
        .find(|m| m["name"].as_str().is_some_and(|n| names.contains(&n)))
        .and_then(|m| m["mountPath"].as_str())
        .map(str::to_string)
}

fn seconds(v: &serde_json::Value, default: u64) -> u64 {
    v.as_u64().unwrap_or(default)
}

/// Resolve a probe's port (number or container port name) against the container.
fn probe_port(port: &serde_json::Value, container: &serde_json::Value, default: u16) -> u16 {
    if let Some(n) = port.as_u64() {
        return u16::try_from(n).unwrap_or(default);
    }
    let Some(name) = port.as_str() else {
        return default;
    };
    if let Ok(n) = name.parse::<u16>() {
        return n;
    }
    container["ports"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == name))
        .and_then(|p| p["containerPort"].as_u64())
        .and_then(|n| u16::try_from(n).ok())
        .unwrap_or(default)
}

const MODEL_KEYS: &[&str] = &["OLLAMA_MODEL", "READYGAP_MODEL"];

/// The served model of a container: an explicit env value wins over `envFrom` ConfigMaps
/// (looked up with `config_map(name)`), as in a real pod.
fn served_model(
    container: &serde_json::Value,
    config_map: impl Fn(&str) -> Option<serde_json::Value>,
) -> Option<String> {
    let env = container["env"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for key in MODEL_KEYS {
        if let Some(v) = env
            .iter()
            .find(|e| e["name"] == *key)
            .and_then(|e| e["value"].as_str())
            .filter(|v| !v.is_empty())
        {
            return Some(v.to_string());
        }
    }
    let from = container["envFrom"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for src in from {
        let Some(name) = src["configMapRef"]["name"].as_str() else {
            continue;
        };
        let prefix = src["prefix"].as_str().unwrap_or("");
        if let Some(cm) = config_map(name) {
            for key in MODEL_KEYS {
                if let Some(v) = cm["data"]
                    .as_object()
                    .and_then(|d| {
                        d.iter()
                            .find(|(k, _)| format!("{prefix}{k}") == *key)
                            .map(|(_, v)| v)
                    })
                    .and_then(|v| v.as_str())
                    .filter(|v| !v.is_empty())
                {
                    return Some(v.to_string());
                }
            }
        }
    }
    None
}

/// A probe of container `c` (readiness or liveness), with Kubernetes' defaults for missing
/// fields (core/v1 defaults.go: period 10 s, timeout 1 s, failureThreshold 3).
fn probe_spec(p: &serde_json::Value, c: &serde_json::Value, port: u16) -> ReadinessSpec {
    let action = if p["httpGet"].is_object() {
        ProbeAction::Http {
            path: p["httpGet"]["path"].as_str().unwrap_or("/").to_string(),
            port: probe_port(&p["httpGet"]["port"], c, port),
        }
    } else if p["tcpSocket"].is_object() {
        ProbeAction::Tcp {
            port: probe_port(&p["tcpSocket"]["port"], c, port),
        }
    } else if p["exec"].is_object() || p["grpc"].is_object() {
        ProbeAction::Inference
    } else {
        ProbeAction::None
    };
    let command = p["exec"]["command"].as_array().map(|a| {
        a.iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    });
    ReadinessSpec {
        action,
        command,
        period_seconds: seconds(&p["periodSeconds"], 10).max(1),
        initial_delay_seconds: seconds(&p["initialDelaySeconds"], 0),
        timeout_seconds: seconds(&p["timeoutSeconds"], 1).max(1),
        failure_threshold: u32::try_from(seconds(&p["failureThreshold"], 3))
            .unwrap_or(3)
            .max(1),
        success_threshold: u32::try_from(seconds(&p["successThreshold"], 1))
            .unwrap_or(1)
            .max(1),
    }
}

impl ContainerPlan {
    /// Read the plan from a pod object; `config_map(name)` finds ConfigMaps of its namespace.
    pub fn of_pod(
        pod: &serde_json::Value,
        config_map: impl Fn(&str) -> Option<serde_json::Value>,
    ) -> Self {
        let c = &pod["spec"]["containers"][0];
        let env_port = c["env"].as_array().and_then(|env| {
            env.iter()
                .find(|e| e["name"] == "OLLAMA_HOST")
                .and_then(|e| e["value"].as_str())
                .and_then(|v| v.rsplit_once(':'))
                .and_then(|(_, p)| p.parse::<u16>().ok())
        });
        let port = c["ports"][0]["containerPort"]
            .as_u64()
            .and_then(|n| u16::try_from(n).ok())
            .or(env_port)
            .unwrap_or(OLLAMA_PORT);
        Self {
            name: c["name"].as_str().unwrap_or("ollama").to_string(),
            image: c["image"].as_str().unwrap_or_default().to_string(),
            port,
            memory_limit: c["resources"]["limits"]["memory"]
                .as_str()
                .and_then(objects::parse_quantity),
            // Extended resources are whole numbers (the device plugin's `nvidia.com/gpu`).
            gpus: match &c["resources"]["limits"]["nvidia.com/gpu"] {
                serde_json::Value::String(n) => n.trim().parse().unwrap_or(0),
                serde_json::Value::Number(n) => {
                    n.as_u64().and_then(|n| u32::try_from(n).ok()).unwrap_or(0)
                }
                _ => 0,
            },
            readiness: probe_spec(&c["readinessProbe"], c, port),
            liveness: c
                .get("livenessProbe")
                .filter(|p| p.is_object())
                .map(|p| probe_spec(p, c, port)),
            startup: c
                .get("startupProbe")
                .filter(|p| p.is_object())
                .map(|p| probe_spec(p, c, port)),
            model: served_model(c, config_map),
            host_proc: host_proc_mount(pod),
            privileged: c["securityContext"]["privileged"] == true,
        }
    }
}

/// Sets the pod condition `ty` (its lastTransitionTime changes only with its status).
pub(super) fn set_condition(
    pod: &mut Pod,
    ty: &str,
    status: bool,
    reason: Option<&str>,
    message: Option<String>,
    now: chrono::DateTime<Utc>,
) {
    let st = pod.status.get_or_insert_with(Default::default);
    let conds = st.conditions.get_or_insert_with(Vec::new);
    let status_s = if status { "True" } else { "False" }.to_string();
    if let Some(c) = conds.iter_mut().find(|c| c.type_ == ty) {
        if c.status != status_s {
            c.status = status_s;
            c.last_transition_time = Some(k8s_time(now));
        }
        c.reason = reason.map(str::to_string);
        c.message = message;
    } else {
        conds.push(PodCondition {
            type_: ty.to_string(),
            status: status_s,
            reason: reason.map(str::to_string),
            message,
            last_transition_time: Some(k8s_time(now)),
            ..Default::default()
        });
    }
    // Keep the order a real kubelet reports.
    let order = [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ];
    conds.sort_by_key(|c| {
        order
            .iter()
            .position(|o| *o == c.type_)
            .unwrap_or(order.len())
    });
}

fn container_status(pod: &mut Pod) -> &mut ContainerStatus {
    let spec_container = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .cloned()
        .unwrap_or_default();
    let st = pod.status.get_or_insert_with(Default::default);
    let list = st.container_statuses.get_or_insert_with(Vec::new);
    if list.is_empty() {
        list.push(ContainerStatus {
            name: spec_container.name.clone(),
            image: spec_container.image.clone().unwrap_or_default(),
            image_id: String::new(),
            ready: false,
            restart_count: 0,
            started: Some(false),
            ..Default::default()
        });
    }
    &mut list[0]
}

fn set_ready(pod: &mut Pod, ready: bool, now: chrono::DateTime<Utc>) {
    let cname = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .map(|c| c.name.clone())
        .unwrap_or_default();
    let (reason, msg) = if ready {
        (None, None)
    } else {
        (
            Some("ContainersNotReady"),
            Some(format!("containers with unready status: [{cname}]")),
        )
    };
    set_condition(pod, "Ready", ready, reason, msg.clone(), now);
    set_condition(pod, "ContainersReady", ready, reason, msg, now);
    container_status(pod).ready = ready;
}

/// The state of one pod's container as the kubelet tracks it.
struct Container {
    runtime: Option<Arc<RuntimeHandle>>,
    plain: Option<Arc<PlainContainer>>,
    events: Option<mpsc::UnboundedReceiver<RuntimeEvent>>,
    ready: bool,
    started_at: chrono::DateTime<Utc>,
    container_id: String,
}

struct PodRun {
    cluster: Arc<Cluster>,
    ns: String,
    name: String,
    uid: String,
    node: String,
    ip: Option<Ipv4Addr>,
    disk: Arc<ModelDisk>,
    runs_ollama: bool,
    memory_limit: u64,
    plan: ContainerPlan,
    /// The model the inference-aware probe asks for.
    model: String,
}

impl PodRun {
    fn update(&self, f: impl FnOnce(&mut Pod)) -> Option<serde_json::Value> {
        match self
            .cluster
            .store
            .mutate_typed::<Pod>(PODS, &self.ns, &self.name, f)
        {
            Ok(p) => Some(p),
            Err(e) => {
                tracing::debug!("lab kubelet: updating pod {}: {e}", self.name);
                None
            }
        }
    }

    fn event(&self, pod: &serde_json::Value, ty: &str, reason: &str, msg: &str) {
        self.cluster
            .record_event(pod, ty, reason, msg, "kubelet", &self.node);
    }

    fn log(&self, at: chrono::DateTime<Utc>, t: Transition, detail: serde_json::Value) {
        self.cluster
            .settings
            .ground_truth
            .log_at(at, &self.name, t, detail);
    }

    /// Bound to `node`: the pod's IP and host IP, the lab's pod entry (node, IP, its own
    /// model disk when its models live in an emptyDir), and the status of a pod whose
    /// container is being created (startTime, Initialized, ContainerCreating).
    fn admit(&mut self, node: &str, emptydir: bool) {
        let cluster = &self.cluster;
        self.node = node.to_owned();
        let ip = cluster.allocate_ip();
        self.ip = Some(ip);
        cluster.with_pod(&self.ns, &self.name, |e| {
            e.ip = Some(ip);
            e.node = Some(node.to_owned());
            e.own_disk = emptydir.then(|| self.disk.clone());
        });
        let host_ip = node_ip(cluster, node);
        let now = Utc::now();
        self.update(|p| {
            let st = p.status.get_or_insert_with(Default::default);
            st.host_ip = Some(host_ip.clone());
            st.host_ips = Some(vec![k8s_openapi::api::core::v1::HostIP {
                ip: host_ip.clone(),
            }]);
            st.start_time = Some(k8s_time(now));
            set_condition(p, "PodReadyToStartContainers", false, None, None, now);
            set_condition(p, "Initialized", true, None, None, now);
            set_ready(p, false, now);
            let cs = container_status(p);
            cs.state = Some(ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some("ContainerCreating".into()),
                    message: None,
                }),
                ..Default::default()
            });
        });
    }

    /// The Unhealthy event of a failed `probe` ("Liveness", "Startup") with its output.
    fn unhealthy(&self, probe: &str, output: &str) {
        if let Some(pod) = self.cluster.store.get(PODS, &self.ns, &self.name) {
            self.event(
                &pod,
                "Warning",
                "Unhealthy",
                &format!("{probe} probe failed: {output}"),
            );
        }
    }

    /// The Killing event of a container that failed its `probe` ("liveness", "startup").
    fn killing(&self, probe: &str) {
        if let Some(pod) = self.cluster.store.get(PODS, &self.ns, &self.name) {
            let cname = &self.plan.name;
            self.event(
                &pod,
                "Normal",
                "Killing",
                &format!("Container {cname} failed {probe} probe, will be restarted"),
            );
        }
    }

    async fn start_container(&self, restart_count: i32) -> Container {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut runtime = None;
        if self.runs_ollama
            && let Some(ip) = self.ip
        {
            let spec = RuntimeSpec {
                pod_name: self.name.clone(),
                pod_uid: self.uid.clone(),
                node_name: self.node.clone(),
                ip,
                port: self.plan.port,
                memory_limit_bytes: self.memory_limit,
                profile: self.cluster.settings.profile.clone(),
                disk: self.disk.clone(),
                node_cache: self.node_cache(),
                speed: self.cluster.settings.speed,
                ground_truth: self.cluster.settings.ground_truth.clone(),
                faults: self.cluster.runtime_faults.clone(),
                gpus: self.plan.gpus,
                dialect: runtime::Dialect::of_image(&self.plan.image),
                shared_gpu: self.shared_gpu(),
            };
            let started = match self.cluster.settings.engine.real() {
                Some(engine) => start_real(engine, &self.cluster, &self.ns, spec, tx).await,
                None => runtime::start(spec, tx).await,
            };
            match started {
                Ok(h) => runtime = Some(Arc::new(h)),
                Err(e) => tracing::warn!("lab kubelet: starting the runtime of {}: {e}", self.name),
            }
        }
        let plain = (!self.runs_ollama).then(|| self.plain_container());
        self.cluster.with_pod(&self.ns, &self.name, |e| {
            e.runtime = runtime.clone();
            e.plain = plain.clone();
        });
        let now = Utc::now();
        let container_id = format!("containerd://{}", self.cluster.hex(64));
        // Without a startupProbe the container counts as started at once; with one, only
        // when it succeeded (pkg/kubelet/prober/prober_manager.go UpdatePodStatus: started =
        // the startup result, else "no startup worker"; ready only once started).
        let started = self.plan.startup.is_none();
        let baseline = started && self.plan.readiness.action == ProbeAction::None;
        let ip = self.ip;
        let cid = container_id.clone();
        let gt = self.cluster.settings.ground_truth.clone();
        let pod_name = self.name.clone();
        let pod = self.update(|p| {
            // Logged inside the store update: the entry exists before anyone sees the change.
            gt.log_at(now, &pod_name, Transition::ContainerStarted, json!({"restart_count": restart_count}));
            if baseline {
                gt.log_at(now, &pod_name, Transition::PodReady, json!({}));
            }
            let st = p.status.get_or_insert_with(Default::default);
            st.phase = Some("Running".into());
            if let Some(ip) = ip {
                st.pod_ip = Some(ip.to_string());
                st.pod_ips = Some(vec![PodIP { ip: ip.to_string() }]);
            }
            set_condition(p, "PodReadyToStartContainers", true, None, None, now);
            let cs = container_status(p);
            cs.state = Some(ContainerState { running: Some(ContainerStateRunning { started_at: Some(k8s_time(now)) }), ..Default::default() });
            cs.started = Some(started);
            cs.restart_count = restart_count;
            cs.container_id = Some(cid.clone());
            cs.image_id = "docker.io/ollama/ollama@sha256:5d9a3e3a1b0b2ba6a0d2b0c3f1e0f2e6a4e2c4d1b7f5a8f0e4c1d2b3a4f5e6d7".into();
            set_ready(p, baseline, now);
        });
        if let Some(pod) = &pod {
            let (image, cname) = (&self.plan.image, &self.plan.name);
            self.event(
                pod,
                "Normal",
                "Pulled",
                &format!("Container image \"{image}\" already present on machine"),
            );
            self.event(
                pod,
                "Normal",
                "Created",
                &format!("Created container: {cname}"),
            );
            self.event(
                pod,
                "Normal",
                "Started",
                &format!("Started container {cname}"),
            );
        }
        Container {
            runtime,
            plain,
            events: Some(rx),
            ready: baseline,
            started_at: now,
            container_id,
        }
    }

    /// The node's one physical GPU, time-sliced between the pods given a slice of it (the
    /// `gpu-shared` scenario): its UUID from the node's name, the others' VRAM from the
    /// node's other runtimes.
    fn shared_gpu(&self) -> Option<crate::runtime::SharedGpu> {
        if self.plan.gpus == 0 || self.cluster.settings.scenario.gpu_replicas() < 2 {
            return None;
        }
        let weak = Arc::downgrade(&self.cluster);
        let node = self.node.clone();
        let others = move |me: &str| {
            weak.upgrade().map_or(0, |c| {
                c.runtimes()
                    .iter()
                    .filter(|(_, pod, n, _)| n.as_deref() == Some(node.as_str()) && pod != me)
                    .map(|(_, _, _, rt)| rt.vram_bytes())
                    .sum()
            })
        };
        let id = self
            .node
            .bytes()
            .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
        Some(crate::runtime::SharedGpu {
            uuid: format!("GPU-{id:08x}-5a4b-4c2d-8e0f-a9b8c7d6e5f4"),
            others: Arc::new(others),
        })
    }

    fn node_cache(&self) -> Arc<crate::runtime::NodeCache> {
        self.cluster
            .node_caches
            .get(&self.node)
            .cloned()
            .unwrap_or_else(|| Arc::new(crate::runtime::NodeCache::new(false)))
    }

    /// The container of a pod that does not run Ollama: it sees its node (see `plain`).
    fn plain_container(&self) -> Arc<PlainContainer> {
        let weak = Arc::downgrade(&self.cluster);
        let node = self.node.clone();
        let gt = self.cluster.settings.ground_truth.clone();
        let (node_d, pod) = (self.node.clone(), self.name.clone());
        PlainContainer::start(PlainSpec {
            pod_name: self.name.clone(),
            node_name: self.node.clone(),
            node_cache: self.node_cache(),
            host_proc: self.plan.host_proc.clone(),
            privileged: self.plan.privileged,
            node_anon_bytes: Arc::new(move || {
                weak.upgrade().map_or(0, |c| c.node_anon_bytes(&node))
            }),
            on_drop: Arc::new(move |before, after| {
                gt.log(
                    &node_d,
                    Transition::CachesDropped,
                    json!({"cached_kb_before": before, "cached_kb_after": after, "via": pod}),
                );
            }),
            network: crate::runtime::network::PodNetwork {
                namespace: self.ns.clone(),
                pod_ip: self.ip,
                cluster: Some(Arc::new(super::service_network::ServiceNetwork(
                    Arc::downgrade(&self.cluster.store),
                ))),
            },
        })
    }

    /// Run one readiness probe; true when it passed.
    async fn probe(&self, spec: &ReadinessSpec) -> bool {
        self.probe_within(spec, Duration::from_secs(5))
            .await
            .is_ok()
    }

    /// Run one probe whose inference (exec) check gets at least `inference_floor` however
    /// fast the lab runs. Readiness keeps 5 s (a slow machine must not fail it); liveness
    /// takes its own scaled timeout, or the aggressive probe could never miss at speed.
    /// A failure is the output the kubelet puts after "… probe failed: " in its Event.
    async fn probe_within(
        &self,
        spec: &ReadinessSpec,
        inference_floor: Duration,
    ) -> Result<(), String> {
        let Some(ip) = self.ip else {
            return Err(failure_output(spec, None));
        };
        if !self.runs_ollama {
            return Ok(());
        }
        let http = &self.cluster.http;
        let timeout = |floor: Duration| {
            self.cluster
                .scaled(Duration::from_secs(spec.timeout_seconds))
                .max(floor)
        };
        if spec.action == ProbeAction::Inference
            && let Some(argv) = spec.command.clone()
            && let Some(real) = self.cluster.runtime_of(&self.ns, &self.name)
            && let Some(real) = real.as_real_process()
        {
            // The real engine runs this probe's own exec command (inside the container's
            // cgroup): exit 0 within the timeout passes (pkg/probe/exec/exec.go). Another
            // exit status fails with the command's output, verbatim: its stdout then its
            // stderr (kuberuntime_container.go `RunInContainer`), trailing newline and all,
            // as the real kubelet's Event said on the real cluster
            // (tests/real_cluster/liveness.rs).
            let t = timeout(Duration::from_secs(1));
            return match tokio::time::timeout(t, real.exec(argv).collect()).await {
                Ok(o) if o.code == Some(0) => Ok(()),
                Ok(o) => Err(String::from_utf8_lossy(&[o.stdout, o.stderr].concat()).into_owned()),
                Err(_) => Err(failure_output(spec, Some(ip))),
            };
        }
        let ok = match &spec.action {
            ProbeAction::None => true,
            ProbeAction::Http { path, port } => {
                let path = if path.starts_with('/') {
                    path.clone()
                } else {
                    format!("/{path}")
                };
                let url = format!("http://{ip}:{port}{path}");
                let t = timeout(Duration::from_millis(200));
                matches!(http.get(url).timeout(t).send().await, Ok(r) if r.status().is_success())
            }
            ProbeAction::Tcp { port } => {
                let t = timeout(Duration::from_millis(200));
                matches!(
                    tokio::time::timeout(t, tokio::net::TcpStream::connect((ip, *port))).await,
                    Ok(Ok(_))
                )
            }
            ProbeAction::Inference => {
                let base = format!("http://{ip}:{}", self.plan.port);
                let body = json!({"model": self.model, "prompt": "Reply with exactly: READY", "stream": false});
                match http
                    .post(format!("{base}/api/generate"))
                    .json(&body)
                    .timeout(timeout(inference_floor))
                    .send()
                    .await
                {
                    Ok(r) if r.status().is_success() => r
                        .json::<serde_json::Value>()
                        .await
                        .is_ok_and(|v| v["done"] == true),
                    _ => false,
                }
            }
        };
        if ok {
            Ok(())
        } else {
            Err(failure_output(spec, Some(ip)))
        }
    }
}

/// `t + d`, saturating at a year from `t` (absurd speeds must not overflow).
pub(super) fn later(t: Instant, d: Duration) -> Instant {
    t.checked_add(d)
        .or_else(|| t.checked_add(Duration::from_secs(365 * 86_400)))
        .unwrap_or(t)
}

/// Sleeps `d`; false when `cancel` fired first.
pub(super) async fn sleep_or(d: Duration, cancel: &CancellationToken) -> bool {
    sleep_until_or(later(Instant::now(), d), cancel).await
}

/// Sleeps until `at`; false when `cancel` fired first.
pub(super) async fn sleep_until_or(at: Instant, cancel: &CancellationToken) -> bool {
    tokio::select! {
        _ = tokio::time::sleep_until(at.into()) => true,
        _ = cancel.cancelled() => false,
    }
}

/// Starts [`run_pod`] on its own task: the cluster's [`super::cluster::StartKubelet`].
pub fn start(
    cluster: Arc<Cluster>,
    ns: String,
    name: String,
    uid: String,
    deleting: CancellationToken,
    created: Instant,
) {
    tokio::spawn(run_pod(cluster, ns, name, uid, deleting, created));
}

/// Drive one pod from creation to removal: prepare its container plan, let the scheduler
/// place and bind it ([`scheduler`]), admit it on its node, start its container after
/// `profile.container_start` and supervise it until it is deleted.
///
/// Stage delays run from planned instants (creation, then the planned scheduling instant), so
/// the lab's own processing time does not add up along the chain.
async fn run_pod(
    cluster: Arc<Cluster>,
    ns: String,
    name: String,
    uid: String,
    deleting: CancellationToken,
    created: Instant,
) {
    let Some((mut run, pod_json, emptydir)) = prepare(&cluster, ns, name, uid) else {
        return;
    };
    let gpus = run.plan.gpus;
    let placement = match scheduler::schedule(
        &cluster, &run.ns, &run.name, &pod_json, gpus, created, &deleting,
    )
    .await
    {
        Ok(placement) => placement,
        Err(Unplaced::Deleted) => return finish(&run, None, &deleting).await,
        Err(Unplaced::Shutdown) => return,
    };
    if scheduler::bind(&cluster, &run.ns, &run.name, &placement).is_none() {
        return finish(&run, None, &deleting).await;
    }
    run.admit(&placement.node, emptydir);
    // A bound helper container (a debug pod: image present, no model) starts at once; the
    // profile's stage is the runtime pod's, and drawing it would shift the seeded timings.
    let container_start = if placement.preassigned && !run.runs_ollama {
        cluster.scaled(Duration::from_millis(300))
    } else {
        cluster.sample("container_start", &cluster.settings.profile.container_start)
    };
    if !sleep_until_or(later(placement.at, container_start), &deleting).await {
        return finish(&run, None, &deleting).await;
    }
    let container = run.start_container(0).await;
    // activeDeadlineSeconds counts from the pod's startTime (set when it was bound), in real
    // seconds: it is an API contract, not a calibrated stage.
    let active_deadline = pod_json["spec"]["activeDeadlineSeconds"]
        .as_u64()
        .map(|secs| later(placement.at, Duration::from_secs(secs)));
    supervise(&run, container, active_deadline, &deleting).await;
}

/// The pod's kubelet state before it is placed: its container plan (image, probes,
/// limits, model) and its model disk. `None` (and the pod's entry removed) when the pod is
/// already gone. Also returns the pod object and whether its models live in an emptyDir.
fn prepare(
    cluster: &Arc<Cluster>,
    ns: String,
    name: String,
    uid: String,
) -> Option<(PodRun, Arc<serde_json::Value>, bool)> {
    let profile = &cluster.settings.profile;
    let Some(pod_json) = cluster.store.get(PODS, &ns, &name) else {
        cluster.remove_pod_entry(&ns, &name);
        return None;
    };
    let plan = ContainerPlan::of_pod(&pod_json, |cm| {
        cluster
            .store
            .get(CONFIGMAPS, &ns, cm)
            .map(|v| v.as_ref().clone())
    });
    let runs_ollama = serves_llm(&plan.image);
    let memory_limit = plan.memory_limit.unwrap_or(profile.memory_limit_bytes);
    let model = plan.model.clone().unwrap_or_else(|| profile.model.clone());
    let emptydir = pod_json["spec"]["volumes"].as_array().is_some_and(|vs| {
        vs.iter()
            .any(|v| v["name"] == "models" && v.get("emptyDir").is_some())
    });
    let disk = if emptydir {
        // The first pod had its models pulled into its emptyDir; they die with it, so every
        // later pod starts with an empty model store (the published archive experiment).
        if cluster
            .emptydir_seeded
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            Arc::new(ModelDisk::empty())
        } else {
            Arc::new(ModelDisk::with_models(&profile.models))
        }
    } else {
        cluster.shared_disk.clone()
    };
    let run = PodRun {
        cluster: cluster.clone(),
        ns,
        name,
        uid,
        node: String::new(),
        ip: None,
        disk,
        runs_ollama,
        memory_limit,
        plan,
        model,
    };
    Some((run, pod_json, emptydir))
}

/// What the supervisor does after a wake-up.
enum Next {
    Continue,
    /// Restart the container: OOM-killed (the resident models and the limit), or exited
    /// (killed by a failed liveness or startup probe: exit 0, Ollama handles SIGTERM).
    Restart {
        oom: Option<(Vec<(String, u64)>, u64)>,
        exit_code: i32,
    },
}

/// Watch the running container until the pod is deleted, runs past its deadline or the
/// lab shuts down: its runtime's events (an OOM kill or an exit restarts it) and its
/// probes ([`Prober`]).
async fn supervise(
    run: &PodRun,
    mut container: Container,
    active_deadline: Option<Instant>,
    deleting: &CancellationToken,
) {
    let cluster = &run.cluster;
    let mut prober = Prober::new(run);
    let readiness = prober.readiness.clone();
    loop {
        let probe_due = readiness.action != ProbeAction::None && prober.started;
        let wait = prober.next_probe.saturating_duration_since(Instant::now());
        let mut events = container.events.take();
        let ev = async {
            match events.as_mut() {
                Some(rx) => rx.recv().await,
                None => std::future::pending().await,
            }
        };
        let next = tokio::select! {
            _ = deleting.cancelled() => {
                return finish(run, Some(container), deleting).await;
            }
            _ = async {
                match active_deadline {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            } => {
                return deadline_exceeded(run, container, deleting).await;
            }
            _ = cluster.shutdown.cancelled() => {
                if let Some(rt) = container.runtime.take() { rt.stop().await; }
                if let Some(p) = container.plain.take() { p.stop(); }
                cluster.with_pod(&run.ns, &run.name, |e| e.runtime = None);
                return;
            }
            e = ev => {
                container.events = events;
                match e {
                    Some(RuntimeEvent::OomKilled { resident, limit }) => Next::Restart {
                        oom: Some((resident, limit)),
                        exit_code: 137,
                    },
                    Some(RuntimeEvent::Exited { exit_code }) => Next::Restart { oom: None, exit_code },
                    Some(_) => Next::Continue,
                    None => {
                        container.events = None;
                        Next::Continue
                    }
                }
            }
            probed = &mut prober.startup.fut, if !prober.started && prober.startup.spec.is_some() => {
                container.events = events;
                prober.on_startup(probed, &mut container)
            }
            probed = &mut prober.liveness.fut, if prober.liveness.spec.is_some() && prober.started => {
                container.events = events;
                prober.on_liveness(probed)
            }
            ok = async {
                tokio::time::sleep(wait).await;
                run.probe(&readiness).await
            }, if probe_due => {
                container.events = events;
                prober.on_readiness(ok, &mut container);
                Next::Continue
            }
        };
        if let Next::Restart { oom, exit_code } = next {
            container = oom_restart(run, container, deleting, oom, exit_code).await;
            if deleting.is_cancelled() {
                return finish(run, Some(container), deleting).await;
            }
            prober.start_over();
        }
    }
}

/// A probe in flight.
type ProbeFuture<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;

/// A liveness or startup probe: one in flight at a time, kept across the supervisor's
/// other wake-ups (the readiness probe and runtime events must not cancel it, or it could
/// never time out), on a ticker that runs from each probe's start (prober/worker.go), not
/// from its end: a probe that timed out is followed by the next at once.
struct Ticker<'a> {
    run: &'a PodRun,
    spec: Option<ReadinessSpec>,
    period: Duration,
    initial_delay: Duration,
    failures: u32,
    next: Instant,
    fut: ProbeFuture<'a>,
}

impl<'a> Ticker<'a> {
    fn new(run: &'a PodRun, spec: Option<ReadinessSpec>) -> Self {
        let scaled = |f: fn(&ReadinessSpec) -> u64| {
            spec.as_ref()
                .map(|p| run.cluster.scaled(Duration::from_secs(f(p))))
                .unwrap_or_default()
        };
        let period = scaled(|p| p.period_seconds);
        let initial_delay = scaled(|p| p.initial_delay_seconds);
        let next = later(Instant::now(), initial_delay);
        let fut = Self::probe_at(run, spec.clone(), next);
        Self {
            run,
            spec,
            period,
            initial_delay,
            failures: 0,
            next,
            fut,
        }
    }

    /// The probe due at `due` (never, without a probe).
    fn probe_at(run: &'a PodRun, spec: Option<ReadinessSpec>, due: Instant) -> ProbeFuture<'a> {
        Box::pin(async move {
            tokio::time::sleep_until(due.into()).await;
            match &spec {
                Some(l) => run.probe_within(l, Duration::from_millis(200)).await,
                None => std::future::pending().await,
            }
        })
    }

    /// A new container: failures forgotten, the first probe after the initial delay.
    fn start_over(&mut self) {
        self.failures = 0;
        self.next = later(Instant::now(), self.initial_delay);
        self.fut = Self::probe_at(self.run, self.spec.clone(), self.next);
    }

    /// The probe just finished: the next one a period after its start.
    fn tick(&mut self) {
        self.next = later(self.next, self.period);
        self.fut = Self::probe_at(self.run, self.spec.clone(), self.next);
    }

    /// Begin now, unless the initial delay is still running.
    fn begin_now(&mut self) {
        self.next = self.next.max(Instant::now());
        self.fut = Self::probe_at(self.run, self.spec.clone(), self.next);
    }
}

/// The kubelet's prober for one pod's container: readiness (Ready after
/// `successThreshold` successes, not Ready after `failureThreshold` failures), liveness
/// and startup (a restart after `failureThreshold` failures), each with its period and
/// initial delay scaled by the lab's speed.
struct Prober<'a> {
    run: &'a PodRun,
    readiness: ReadinessSpec,
    period: Duration,
    initial_delay: Duration,
    /// Consecutive readiness failures and successes: Ready only once successes reach
    /// successThreshold (pkg/kubelet/prober/worker.go doProbe: a result below its
    /// threshold "leave[s] the probe state unchanged"; the initial state is Failure).
    failures: u32,
    successes: u32,
    next_probe: Instant,
    liveness: Ticker<'a>,
    /// Until the startup probe succeeds the container is not started, and the prober
    /// runs neither readiness nor liveness (pkg/kubelet/prober/worker.go doProbe: "Disable
    /// other probes until container has started"); a failure past its threshold restarts
    /// the container like a liveness failure.
    startup: Ticker<'a>,
    started: bool,
}

impl<'a> Prober<'a> {
    fn new(run: &'a PodRun) -> Self {
        let readiness = run.plan.readiness.clone();
        let period = run
            .cluster
            .scaled(Duration::from_secs(readiness.period_seconds));
        let initial_delay = run
            .cluster
            .scaled(Duration::from_secs(readiness.initial_delay_seconds));
        Self {
            run,
            readiness,
            period,
            initial_delay,
            failures: 0,
            successes: 0,
            next_probe: later(Instant::now(), initial_delay),
            liveness: Ticker::new(run, run.plan.liveness.clone()),
            startup: Ticker::new(run, run.plan.startup.clone()),
            started: run.plan.startup.is_none(),
        }
    }

    /// A new container: every probe starts over (initial delays count from its start).
    fn start_over(&mut self) {
        self.failures = 0;
        self.successes = 0;
        self.next_probe = later(Instant::now(), self.initial_delay);
        self.liveness.start_over();
        self.started = self.startup.spec.is_none();
        self.startup.start_over();
    }

    /// A startup probe finished.
    fn on_startup(&mut self, probed: Result<(), String>, container: &mut Container) -> Next {
        let run = self.run;
        self.startup.tick();
        let Some(spec) = self.startup.spec.as_ref() else {
            return Next::Continue;
        };
        let Err(output) = probed else {
            self.started = true;
            // The other probes begin now (or at their initial delay, counted from the
            // container's start); without a readiness probe the pod is Ready now.
            self.next_probe = self.next_probe.max(Instant::now());
            self.liveness.begin_now();
            let ready_now = self.readiness.action == ProbeAction::None;
            let now = Utc::now();
            run.update(|p| {
                container_status(p).started = Some(true);
                if ready_now {
                    run.log(now, Transition::PodReady, json!({"probe": "None"}));
                    set_ready(p, true, now);
                }
            });
            container.ready |= ready_now;
            return Next::Continue;
        };
        self.startup.failures += 1;
        let failures = self.startup.failures;
        run.unhealthy("Startup", &output);
        if failures < spec.failure_threshold {
            return Next::Continue;
        }
        run.killing("startup");
        run.log(
            Utc::now(),
            Transition::StartupKilled,
            json!({"failures": failures}),
        );
        Next::Restart {
            oom: None,
            exit_code: 0,
        }
    }

    /// A liveness probe finished.
    fn on_liveness(&mut self, probed: Result<(), String>) -> Next {
        let run = self.run;
        self.liveness.tick();
        let Err(output) = probed else {
            self.liveness.failures = 0;
            return Next::Continue;
        };
        self.liveness.failures += 1;
        let failures = self.liveness.failures;
        // kubelet pkg/kubelet/prober/prober.go: an Unhealthy event per failed probe
        // ("Liveness probe failed: <output>"); at the threshold kuberuntime kills the
        // container with "Container NAME failed liveness probe, will be restarted"
        // (reason Killing) and restarts it.
        let Some(spec) = self.liveness.spec.as_ref() else {
            return Next::Continue;
        };
        run.unhealthy("Liveness", &output);
        if failures < spec.failure_threshold {
            return Next::Continue;
        }
        run.killing("liveness");
        run.log(
            Utc::now(),
            Transition::LivenessKilled,
            json!({"failures": failures}),
        );
        // Ollama exits 0 on SIGTERM (it handles the signal and shuts down).
        Next::Restart {
            oom: None,
            exit_code: 0,
        }
    }

    /// A readiness probe finished (`ok`: it passed).
    fn on_readiness(&mut self, ok: bool, container: &mut Container) {
        let run = self.run;
        self.next_probe = later(Instant::now(), self.period);
        if ok {
            self.failures = 0;
            self.successes = self.successes.saturating_add(1);
            if !container.ready && self.successes >= self.readiness.success_threshold {
                container.ready = true;
                let now = Utc::now();
                let probe = probe_name(&self.readiness.action);
                run.update(|p| {
                    run.log(now, Transition::PodReady, json!({"probe": probe}));
                    set_ready(p, true, now);
                });
            }
        } else {
            self.successes = 0;
            self.failures += 1;
            if container.ready && self.failures >= self.readiness.failure_threshold {
                container.ready = false;
                let now = Utc::now();
                if let Some(pod) = run.update(|p| set_ready(p, false, now)) {
                    run.event(&pod, "Warning", "Unhealthy", "Readiness probe failed");
                }
            }
        }
    }
}

/// What the Unhealthy event of a failed liveness or startup probe says after "… probe
/// failed: " (pkg/kubelet/prober/prober.go) when the probe did not answer in time: an exec
/// probe past its timeout gets the CRI client's error, `command timed out: "CMD" timed out
/// after 5s` (cri-client pkg/remote_runtime.go `execSyncV1`: `%w: %q timed out after %s`,
/// a Go duration; pkg/probe/exec/exec.go passes `err.Error()` on as the output; the real
/// v1.34.4 kubelet said exactly that for `sleep 5` with a 1 s timeout), an httpGet one the
/// Go client's deadline error, a tcpSocket one the dial's error.
fn failure_output(spec: &ReadinessSpec, ip: Option<Ipv4Addr>) -> String {
    match (&spec.action, &spec.command) {
        (ProbeAction::Inference, Some(cmd)) => format!(
            "command timed out: {:?} timed out after {}",
            cmd.join(" "),
            go_duration(spec.timeout_seconds)
        ),
        (ProbeAction::Http { path, port }, _) => format!(
            "Get \"http://{}:{port}{path}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
            ip.map(|i| i.to_string()).unwrap_or_default()
        ),
        // pkg/probe/tcp/tcp.go DoTCPProbe passes the dial's error on: Go's
        // `dial tcp IP:PORT: connect: connection refused` while nothing listens.
        (ProbeAction::Tcp { port }, _) => format!(
            "dial tcp {}:{port}: connect: connection refused",
            ip.map(|i| i.to_string()).unwrap_or_default()
        ),
        _ => "probe failed".to_string(),
    }
}

/// Whole seconds as Go's `time.Duration.String` prints them: `5s`, `1m0s`, `1h2m3s`.
fn go_duration(secs: u64) -> String {
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s}s"),
        _ => format!("{h}h{m}m{s}s"),
    }
}

/// The name of a probe in ground-truth entries.
fn probe_name(a: &ProbeAction) -> &'static str {
    match a {
        ProbeAction::None => "None",
        ProbeAction::Http { .. } => "Http",
        ProbeAction::Tcp { .. } => "Tcp",
        ProbeAction::Inference => "Inference",
    }
}

/// The container died: OOM-killed (`oom`: the resident models and the limit; exit 137), or
/// its process exited by itself (`None`: reason Error with `exit_code`). Restart it.
async fn oom_restart(
    run: &PodRun,
    mut container: Container,
    deleting: &CancellationToken,
    oom: Option<(Vec<(String, u64)>, u64)>,
    exit_code: i32,
) -> Container {
    if let Some(rt) = container.runtime.take() {
        rt.stop().await;
    }
    run.cluster
        .with_pod(&run.ns, &run.name, |e| e.runtime = None);
    let now = Utc::now();
    let started_at = container.started_at;
    let cid = container.container_id.clone();
    let mut restarts = 0;
    let pod = run.update(|p| {
        set_ready(p, false, now);
        let cs = container_status(p);
        cs.restart_count += 1;
        restarts = cs.restart_count;
        let term = ContainerStateTerminated {
            exit_code,
            reason: Some(
                match (&oom, exit_code) {
                    (Some(_), _) => "OOMKilled",
                    (None, 0) => "Completed",
                    _ => "Error",
                }
                .into(),
            ),
            started_at: Some(k8s_time(started_at)),
            finished_at: Some(k8s_time(now)),
            container_id: Some(cid.clone()),
            ..Default::default()
        };
        cs.last_state = Some(ContainerState {
            terminated: Some(term),
            ..Default::default()
        });
        cs.state = Some(ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some("ContainerCreating".into()),
                message: None,
            }),
            ..Default::default()
        });
        cs.started = Some(false);
    });
    if let Some((resident, limit)) = &oom
        && let Some(node) = run.cluster.store.get(NODES, "", &run.node)
    {
        let models: Vec<String> = resident
            .iter()
            .map(|(m, b)| format!("{m} ({b} bytes)"))
            .collect();
        run.cluster.record_event(
            &node,
            "Warning",
            "SystemOOM",
            &format!(
                "System OOM encountered, victim process: ollama, limit {limit} bytes, resident: {}",
                models.join(", ")
            ),
            "kubelet",
            &run.node,
        );
    }
    if let Some(pod) = &pod {
        run.event(
            pod,
            "Warning",
            "BackOff",
            &format!(
                "Back-off restarting failed container ollama in pod {}_{}({})",
                run.name, run.ns, run.uid
            ),
        );
    }
    // The kubelet restarts the container at once (first restart: no back-off).
    let delay = run
        .cluster
        .sample("restart", &run.cluster.settings.profile.container_start);
    if !sleep_or(delay, deleting).await {
        return container;
    }
    let mut c = run.start_container(restarts).await;
    c.started_at = Utc::now();
    c
}

/// The pod ran past its `activeDeadlineSeconds`: the kubelet kills the container and the
/// pod turns Failed (reason DeadlineExceeded); the object stays until it is deleted.
async fn deadline_exceeded(run: &PodRun, c: Container, deleting: &CancellationToken) {
    let message = "Pod was active on the node longer than the specified deadline";
    let pod = stop_container(run, c, 137, "Error", |st| {
        st.phase = Some("Failed".into());
        st.reason = Some("DeadlineExceeded".into());
        st.message = Some(message.into());
    })
    .await;
    if let Some(pod) = &pod {
        run.event(pod, "Warning", "DeadlineExceeded", message);
    }
    tokio::select! {
        _ = deleting.cancelled() => finish(run, None, deleting).await,
        _ = run.cluster.shutdown.cancelled() => {}
    }
}

/// Stops the container's runtime (or plain process), marks it terminated with `exit_code`
/// and `reason`, the pod not Ready, and lets `status` adjust the pod's status; returns the
/// updated pod.
async fn stop_container(
    run: &PodRun,
    mut c: Container,
    exit_code: i32,
    reason: &str,
    status: impl FnOnce(&mut k8s_openapi::api::core::v1::PodStatus),
) -> Option<serde_json::Value> {
    if let Some(rt) = c.runtime.take() {
        // A real process gets SIGTERM, then SIGKILL when the grace period ends.
        let grace_end = run
            .cluster
            .with_pod(&run.ns, &run.name, |e| e.remove_at)
            .flatten();
        rt.stop_by(grace_end).await;
    }
    if let Some(p) = c.plain.take() {
        p.stop();
    }
    run.cluster.with_pod(&run.ns, &run.name, |e| {
        e.runtime = None;
        e.plain = None;
    });
    let now = Utc::now();
    let started_at = c.started_at;
    let cid = c.container_id.clone();
    run.update(|p| {
        set_ready(p, false, now);
        let cs = container_status(p);
        cs.state = Some(ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code,
                reason: Some(reason.into()),
                started_at: Some(k8s_time(started_at)),
                finished_at: Some(k8s_time(now)),
                container_id: Some(cid.clone()),
                ..Default::default()
            }),
            ..Default::default()
        });
        cs.started = Some(false);
        status(p.status.get_or_insert_with(Default::default));
    })
}

async fn finish(run: &PodRun, container: Option<Container>, deleting: &CancellationToken) {
    use super::termination::{self, OnSigterm};
    let cluster = &run.cluster;
    let _ = deleting;
    let remove_at = cluster
        .with_pod(&run.ns, &run.name, |e| e.remove_at)
        .flatten();
    // SIGTERM, then SIGKILL at the end of the grace period (see `termination`): the pod
    // leaves the API once every container has stopped.
    let pod = cluster.store.get(PODS, &run.ns, &run.name);
    let (main, sidecar_holds) = pod.as_deref().map_or((OnSigterm::Ignores, false), |p| {
        termination::plan(p, &run.name, run.runs_ollama)
    });
    let until = |at: Option<Instant>| async move {
        if let Some(at) = at {
            tokio::select! {
                _ = tokio::time::sleep_until(at.into()) => {}
                _ = cluster.shutdown.cancelled() => {}
            }
        }
    };
    if let Some(c) = container {
        let exits_at = match main {
            OnSigterm::Exits(d) => Some(later(Instant::now(), cluster.scaled(d))),
            OnSigterm::Ignores => None,
        };
        match (exits_at, remove_at) {
            (Some(e), Some(r)) if e >= r => {
                until(remove_at).await;
                stop_container(run, c, 137, "Error", |_| {}).await;
            }
            (Some(_), _) => {
                until(exits_at).await;
                stop_container(run, c, 0, "Completed", |_| {}).await;
            }
            (None, _) => {
                until(remove_at).await;
                stop_container(run, c, 137, "Error", |_| {}).await;
            }
        }
    }
    if sidecar_holds {
        until(remove_at).await;
    }
    if cluster.store.get(PODS, &run.ns, &run.name).is_some() {
        run.log(Utc::now(), Transition::PodGone, json!({}));
        let _ = cluster.store.delete(PODS, &run.ns, &run.name);
    }
    if let Some(ip) = run.ip {
        cluster.release_ip(ip);
    }
    cluster.remove_pod_entry(&run.ns, &run.name);
}

fn node_ip(cluster: &Cluster, node: &str) -> String {
    cluster
        .store
        .get(NODES, "", node)
        .and_then(|n| {
            n["status"]["addresses"].as_array().and_then(|a| {
                a.iter()
                    .find(|x| x["type"] == "InternalIP")
                    .and_then(|x| x["address"].as_str().map(str::to_string))
            })
        })
        .unwrap_or_else(|| "127.0.0.2".into())
}

/// Seconds-precision time string of now (for callers building JSON).
pub fn now_str() -> String {
    time(Utc::now())
}

/// Whether an image is an LLM runtime the lab runs (Ollama, llama.cpp's server, vLLM); any
/// other image is a plain container (a debug pod, `kubectl run`).
pub fn serves_llm(image: &str) -> bool {
    image.starts_with("ollama/ollama")
        || image.contains("llama.cpp")
        || image.contains("vllm-openai")
}

/// Start the real container of a lab pod: the pod object and its namespace's ConfigMaps
/// come from the lab's store; an emptyDir gets the models when the kubelet's model disk for
/// the pod has them (the first emptyDir pod, as in the simulation).
async fn start_real(
    engine: &Arc<crate::engine::ollama::OllamaEngine>,
    cluster: &super::cluster::Cluster,
    ns: &str,
    spec: RuntimeSpec,
    events: mpsc::UnboundedSender<RuntimeEvent>,
) -> std::io::Result<RuntimeHandle> {
    use crate::kube::resources::{CONFIGMAPS, PODS};
    let pod = cluster.store.get(PODS, ns, &spec.pod_name).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("pod {ns}/{} is gone", spec.pod_name),
        )
    })?;
    let c = crate::engine::ollama::ContainerSpec {
        namespace: ns,
        pod_name: &spec.pod_name,
        pod_uid: &spec.pod_uid,
        pod: &pod,
        ip: spec.ip,
        port: spec.port,
        memory_limit: spec.memory_limit_bytes,
        seed_empty_dir: !spec.disk.list().is_empty(),
        ground_truth: spec.ground_truth.clone(),
    };
    let config_map = |name: &str| {
        cluster
            .store
            .get(CONFIGMAPS, ns, name)
            .map(|v| v.as_ref().clone())
    };
    engine.start(c, config_map, events).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn pod(container: Value) -> Value {
        json!({"spec": {"containers": [container]}})
    }

    /// An exec probe past its timeout, in the real v1.34.4 kubelet's words (seen on the real
    /// cluster: `Liveness probe failed: command timed out: "sleep 5" timed out after 1s`).
    #[test]
    fn a_timed_out_exec_probe_says_what_the_cri_client_says() {
        let spec = |timeout_seconds| ReadinessSpec {
            action: ProbeAction::Inference,
            command: Some(vec!["sleep".into(), "5".into()]),
            period_seconds: 3,
            initial_delay_seconds: 0,
            timeout_seconds,
            failure_threshold: 3,
            success_threshold: 1,
        };
        assert_eq!(
            failure_output(&spec(1), None),
            r#"command timed out: "sleep 5" timed out after 1s"#
        );
        assert_eq!(
            failure_output(&spec(90), None),
            r#"command timed out: "sleep 5" timed out after 1m30s"#
        );
        assert_eq!(go_duration(60), "1m0s");
        assert_eq!(go_duration(3723), "1h2m3s");
    }

    #[test]
    fn plan_follows_the_applied_container() {
        let c = json!({
            "name": "server", "image": "ollama/ollama:0.6.8",
            "ports": [{"name": "web", "containerPort": 8080}],
            "envFrom": [{"configMapRef": {"name": "cfg"}}],
            "resources": {"limits": {"memory": "16Gi"}},
            "readinessProbe": {"httpGet": {"path": "/api/tags", "port": "web"},
                               "periodSeconds": 2, "initialDelaySeconds": 7, "failureThreshold": 5,
                               "successThreshold": 2}
        });
        let cms =
            |n: &str| (n == "cfg").then(|| json!({"data": {"READYGAP_MODEL": "llama3.1:8b"}}));
        let p = ContainerPlan::of_pod(&pod(c), cms);
        assert_eq!(p.name, "server");
        assert_eq!(p.port, 8080);
        assert_eq!(p.memory_limit, Some(16 << 30));
        assert_eq!(p.model.as_deref(), Some("llama3.1:8b"));
        assert_eq!(
            p.readiness.action,
            ProbeAction::Http {
                path: "/api/tags".into(),
                port: 8080
            }
        );
        assert_eq!(
            (
                p.readiness.period_seconds,
                p.readiness.initial_delay_seconds,
                p.readiness.failure_threshold,
                p.readiness.success_threshold
            ),
            (2, 7, 5, 2)
        );
    }

    #[test]
    fn exec_tcp_and_missing_probes_and_defaults() {
        let none = |_: &str| None;
        let exec = ContainerPlan::of_pod(
            &pod(
                json!({"name": "o", "env": [{"name": "OLLAMA_HOST", "value": "0.0.0.0:9000"},
                                             {"name": "OLLAMA_MODEL", "value": "m:1"}],
                        "readinessProbe": {"exec": {"command": ["bash", "probe.sh"]}}}),
            ),
            none,
        );
        assert_eq!(exec.readiness.action, ProbeAction::Inference);
        assert_eq!(exec.port, 9000);
        assert_eq!(exec.model.as_deref(), Some("m:1"));
        // Kubernetes' defaults for the fields left out.
        assert_eq!(
            (
                exec.readiness.period_seconds,
                exec.readiness.timeout_seconds,
                exec.readiness.failure_threshold,
                exec.readiness.success_threshold
            ),
            (10, 1, 3, 1)
        );
        let tcp = ContainerPlan::of_pod(
            &pod(json!({"name": "o", "readinessProbe": {"tcpSocket": {"port": 11434}}})),
            none,
        );
        assert_eq!(tcp.readiness.action, ProbeAction::Tcp { port: 11434 });
        let bare = ContainerPlan::of_pod(&pod(json!({"name": "o"})), none);
        assert_eq!(bare.readiness.action, ProbeAction::None);
        assert_eq!(
            (bare.port, bare.memory_limit, bare.model),
            (OLLAMA_PORT, None, None)
        );
        // Garbage does not panic and falls back to defaults.
        let junk = ContainerPlan::of_pod(
            &json!({"spec": {"containers": [{"ports": [{"containerPort": 99999}],
                    "readinessProbe": {"httpGet": {"port": "nope"}, "periodSeconds": -3}}]}}),
            none,
        );
        assert_eq!(junk.port, OLLAMA_PORT);
        assert_eq!(
            junk.readiness.action,
            ProbeAction::Http {
                path: "/".into(),
                port: OLLAMA_PORT
            }
        );
        assert_eq!(junk.readiness.period_seconds, 10);
    }

    #[test]
    fn builtin_scenario_probes_read_back_as_their_scenarios() {
        use crate::kube::objects::{OLLAMA_IMAGE, deployment};
        use crate::scenario::{Readiness, Scenario};
        for sc in [
            Scenario::Baseline,
            Scenario::HttpReadiness,
            Scenario::InferenceReadiness,
        ] {
            let d = deployment("ns", "ollama", 1, OLLAMA_IMAGE, 4 << 30, sc, "llama3.2:1b");
            let p = ContainerPlan::of_pod(&d["spec"]["template"], |_| None);
            let want = match sc.readiness() {
                Readiness::Started => ProbeAction::None,
                Readiness::Http => ProbeAction::Http {
                    path: "/api/tags".into(),
                    port: OLLAMA_PORT,
                },
                Readiness::Inference => ProbeAction::Inference,
            };
            assert_eq!(p.readiness.action, want, "{sc}");
            if want != ProbeAction::None {
                assert_eq!(
                    p.readiness.period_seconds,
                    u64::from(sc.probe_period_seconds())
                );
            }
            assert_eq!(p.memory_limit, Some(4 << 30));
        }
    }
}
