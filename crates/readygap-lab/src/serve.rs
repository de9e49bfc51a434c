//! `readygap lab serve`: start the built-in lab (API server, controllers, runtimes) on
//! loopback, write its kubeconfig, and hand back a `LabHandle` for in-process use (tests,
//! `readygap demo`, the trial runner) with the lab's fault switches.

use crate::ground_truth::{GroundTruth, Transition};
use crate::kube::api::{self, Api};
use crate::kube::cluster::{self, Cluster, LabSettings};
use crate::kube::objects::{self, NAMESPACE, OLLAMA_IMAGE};
use crate::kube::resources::{DEPLOYMENTS, NAMESPACES, NODES, PODS, PVCS, SERVICES};
use crate::kube::store::Store;
use crate::kube::{kubeconfig, objects::typed};
use crate::profile::Profile;
use crate::runtime::RuntimeFaults;
use crate::scenario::{self, Scenario};
use axum::serve::ListenerExt;
use color_eyre::eyre::{Result, WrapErr, eyre};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolumeClaim, Service};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Everything `serve` needs.
#[derive(Clone)]
pub struct LabOptions {
    pub profile: Profile,
    pub scenario: Scenario,
    pub speed: f64,
    pub port: u16,
    pub kubeconfig_out: Option<PathBuf>,
    pub ground_truth: GroundTruth,
    pub seed: u64,
    /// Replicas of the `ollama` Deployment at start.
    pub replicas: i32,
    /// How often watches with `allowWatchBookmarks` get a BOOKMARK.
    pub bookmark_interval: Duration,
    /// Create the lab's own PVC, Service and `ollama` Deployment at start. Off: the
    /// namespace is empty and the workload is whatever gets applied (e.g. `manifests/`).
    pub builtin_workload: bool,
    /// What runs the serving containers.
    pub engine: crate::engine::EngineKind,
    /// Which server the built-in workload runs (`--lab-server`; `--engine llamacpp` is
    /// llama-server's shape whatever this says).
    pub shape: crate::kube::shapes::Shape,
    /// Serve the API over TLS and refuse requests without the kubeconfig's credentials (401).
    /// Always on with a real engine, whose exec runs commands on this machine.
    pub tls: bool,
}

impl LabOptions {
    /// Options for a profile with defaults (baseline, speed 1, any port).
    pub fn new(profile: Profile) -> Self {
        Self {
            profile,
            scenario: Scenario::Baseline,
            speed: 1.0,
            port: 0,
            kubeconfig_out: None,
            ground_truth: GroundTruth::in_memory(),
            seed: 0x5EED,
            replicas: 1,
            bookmark_interval: Duration::from_secs(5),
            builtin_workload: true,
            engine: crate::engine::EngineKind::Simulated,
            shape: crate::kube::shapes::Shape::Ollama,
            tls: false,
        }
    }
}

/// A running lab.
pub struct LabHandle {
    pub api_url: String,
    pub kubeconfig: PathBuf,
    pub namespace: String,
    pub addr: SocketAddr,
    api: Arc<Api>,
    stop: CancellationToken,
    server: tokio::task::JoinHandle<()>,
    controllers: tokio::task::JoinHandle<()>,
}

impl LabHandle {
    /// The ground-truth log.
    pub fn ground_truth(&self) -> GroundTruth {
        self.api.cluster.settings.ground_truth.clone()
    }

    /// The cluster (store, pods, nodes) for in-process inspection.
    pub fn cluster(&self) -> Arc<Cluster> {
        self.api.cluster.clone()
    }

    /// The runtimes' fault switches.
    pub fn runtime_faults(&self) -> Arc<RuntimeFaults> {
        self.api.cluster.runtime_faults.clone()
    }

    /// The JSON line `lab serve` prints.
    pub fn announce(&self) -> serde_json::Value {
        serde_json::json!({"api_url": self.api_url, "kubeconfig": self.kubeconfig, "namespace": self.namespace})
    }

    /// How many watch streams clients opened so far.
    pub fn watches_opened(&self) -> u64 {
        self.api.watches_opened.load(Ordering::Relaxed)
    }

    /// Drop every open watch connection (clients must resume).
    pub fn drop_watches(&self) {
        self.api.drop_watches();
    }

    /// Forget the change history: watches from an older resourceVersion get 410 Expired.
    pub fn expire_resource_versions(&self) {
        self.api.cluster.store.expire_history();
    }

    /// Restart the API server: drop the listener and every connection, rebind the same port.
    pub fn restart_api_server(&self) {
        self.api.restart.notify_one();
    }

    /// Delay every exec's output by `d` (slow exec fault).
    pub fn set_exec_delay(&self, d: Duration) {
        self.api
            .exec_delay_ms
            .store(d.as_millis() as u64, Ordering::Relaxed);
    }

    /// Drop a node's page cache: (cached kB before, after).
    pub fn drop_caches(&self, node: &str) -> Option<(u64, u64)> {
        let cache = self.api.cluster.node_caches.get(node)?;
        let r = cache.drop_caches();
        self.ground_truth().log(
            node,
            Transition::CachesDropped,
            serde_json::json!({"cached_kb_before": r.0, "cached_kb_after": r.1}),
        );
        Some(r)
    }

    /// Wait (bounded) until the `ollama` Deployment has exactly its replicas as live (not
    /// terminating) pods, all Ready, and its status says so.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<()> {
        let store = self.api.cluster.store.clone();
        let mut rx = store.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(d) = store.get(DEPLOYMENTS, &self.namespace, "ollama") {
                let want = d["spec"]["replicas"].as_i64().unwrap_or(1);
                let live: Vec<_> = store
                    .list(PODS, Some(&self.namespace))
                    .0
                    .into_iter()
                    .filter(|p| {
                        p["metadata"]["labels"]["app"] == "ollama"
                            && p["metadata"]["deletionTimestamp"].is_null()
                    })
                    .collect();
                let all_ready = live.iter().all(|p| cluster::pod_ready(p));
                if live.len() as i64 == want
                    && all_ready
                    && d["status"]["readyReplicas"].as_i64().unwrap_or(0) >= want
                {
                    return Ok(());
                }
            }
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                return Err(eyre!(
                    "the lab's ollama deployment was not ready within {timeout:?}"
                ));
            }
        }
    }

    /// Stop everything (runtimes, controllers, server).
    /// Serve an imitation of the DCGM exporter's `/metrics` on loopback (until the lab shuts
    /// down) and return its URL: for each running container that has GPUs,
    /// `DCGM_FI_DEV_FB_USED` and `DCGM_FI_DEV_FB_FREE` in MiB per GPU, labelled as the
    /// exporter's Kubernetes pod mapping labels them (`gpu`, `UUID`, `device`, `modelName`,
    /// `Hostname`, `namespace`, `pod`; NVIDIA/dcgm-exporter `internal/pkg/transformation`),
    /// the figures the lab's `nvidia-smi` gives.
    pub async fn dcgm_exporter(&self) -> Result<String> {
        let cluster = self.api.cluster.clone();
        let metrics = move || {
            let cluster = cluster.clone();
            async move {
                let mib = |b: u64| b >> 20;
                let mut used = String::from(
                    "# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).\n# TYPE DCGM_FI_DEV_FB_USED gauge\n",
                );
                let mut free = String::from(
                    "# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).\n# TYPE DCGM_FI_DEV_FB_FREE gauge\n",
                );
                for (ns, pod, node, rt) in cluster.runtimes() {
                    for (i, (uuid, bytes)) in rt.gpu_memory().into_iter().enumerate() {
                        let labels = format!(
                            "gpu=\"{i}\",UUID=\"{uuid}\",device=\"nvidia{i}\",modelName=\"NVIDIA L4\",Hostname=\"{}\",namespace=\"{ns}\",pod=\"{pod}\"",
                            node.as_deref().unwrap_or_default()
                        );
                        let total = crate::runtime::GPU_VRAM_BYTES;
                        used.push_str(&format!("DCGM_FI_DEV_FB_USED{{{labels}}} {}\n", mib(bytes)));
                        free.push_str(&format!(
                            "DCGM_FI_DEV_FB_FREE{{{labels}}} {}\n",
                            mib(total.saturating_sub(bytes))
                        ));
                    }
                }
                used + &free
            }
        };
        let app = axum::Router::new().route("/metrics", axum::routing::get(metrics));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .wrap_err("binding the lab's DCGM exporter")?;
        let addr = listener.local_addr().wrap_err("its address")?;
        let stop = self.stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await;
        });
        Ok(format!("http://{addr}/metrics"))
    }

    pub async fn shutdown(self) {
        self.api.cluster.shutdown.cancel();
        self.api.drop_connections();
        self.stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.server).await;
        let _ = tokio::time::timeout(Duration::from_secs(5), self.controllers).await;
        // Let the kubelets stop their runtimes (bounded), then free the pod IPs.
        let cluster = self.api.cluster.clone();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !cluster.runtimes().is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        cluster.release_all_ips();
        // A timed answer's line waits for a task that may not have run.
        cluster.settings.ground_truth.flush();
    }
}

async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

/// The ground truth's name for the API server's own transitions.
pub const APISERVER: &str = "kube-apiserver";

async fn server_loop(
    api: Arc<Api>,
    first: TcpListener,
    addr: SocketAddr,
    tls: Option<crate::kube::tls::LabTls>,
    stop: CancellationToken,
) {
    let mut listener = Some(first);
    // When the server went down for a restart, until it listens again.
    let mut down_since: Option<std::time::Instant> = None;
    loop {
        let l = match listener.take() {
            Some(l) => l,
            None => {
                let mut tries = 0;
                loop {
                    match bind(addr).await {
                        Ok(l) => {
                            if let Some(down) = down_since.take() {
                                api.cluster.settings.ground_truth.log(
                                    APISERVER,
                                    Transition::ApiServerUp,
                                    serde_json::json!({"down_ms": down.elapsed().as_millis() as u64}),
                                );
                            }
                            break l;
                        }
                        Err(e) if tries < 100 => {
                            tries += 1;
                            tracing::debug!("lab: rebinding {addr}: {e}");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        Err(e) => {
                            tracing::error!("lab: could not rebind {addr}: {e}");
                            return;
                        }
                    }
                }
            }
        };
        let graceful = CancellationToken::new();
        let g = graceful.clone();
        let router = api::router(api.clone());
        let shutdown = async move { g.cancelled().await };
        let mut serve: std::pin::Pin<Box<dyn Future<Output = std::io::Result<()>> + Send>> =
            match &tls {
                Some(t) => Box::pin(
                    axum::serve(t.listener(l), router)
                        .with_graceful_shutdown(shutdown)
                        .into_future(),
                ),
                None => Box::pin(
                    axum::serve(l.tap_io(|t| crate::kube::tls::no_delay(t)), router)
                        .with_graceful_shutdown(shutdown)
                        .into_future(),
                ),
            };
        tokio::select! {
            _ = &mut serve => return,
            _ = api.restart.notified() => {
                let truth = &api.cluster.settings.ground_truth;
                truth.log(APISERVER, Transition::ApiServerDown, serde_json::json!({}));
                down_since = Some(std::time::Instant::now());
                api.drop_connections();
                graceful.cancel();
                let _ = tokio::time::timeout(Duration::from_secs(5), &mut serve).await;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            _ = stop.cancelled() => {
                api.drop_connections();
                graceful.cancel();
                let _ = tokio::time::timeout(Duration::from_secs(5), &mut serve).await;
                return;
            }
        }
    }
}

/// Start the lab.
pub async fn serve(opts: LabOptions) -> Result<LabHandle> {
    let listener = bind(SocketAddr::from(([127, 0, 0, 1], opts.port)))
        .await
        .wrap_err_with(|| format!("binding the lab API server on 127.0.0.1:{}", opts.port))?;
    let addr = listener
        .local_addr()
        .wrap_err("reading the lab's listen address")?;
    let tls = if opts.tls || opts.engine != crate::engine::EngineKind::Simulated {
        Some(crate::kube::tls::LabTls::new().map_err(|e| eyre!(e))?)
    } else {
        None
    };
    let api_url = match tls {
        Some(_) => format!("https://{addr}"),
        None => format!("http://{addr}"),
    };
    let namespace = NAMESPACE.to_string();
    let kubeconfig_path = opts.kubeconfig_out.clone().unwrap_or_else(|| {
        std::env::temp_dir()
            .join(format!("readygap-lab-{}", addr.port()))
            .join("kubeconfig")
    });
    let ca_pem = tls.as_ref().map(|t| t.ca_pem.as_str());
    kubeconfig::write(&kubeconfig_path, &api_url, &namespace, ca_pem)
        .wrap_err_with(|| format!("writing the lab kubeconfig {}", kubeconfig_path.display()))?;

    let store = Arc::new(Store::default());
    let profile = Arc::new(opts.profile.clone());
    let settings = LabSettings {
        namespace: namespace.clone(),
        profile: profile.clone(),
        scenario: opts.scenario,
        speed: opts.speed,
        seed: opts.seed,
        ground_truth: opts.ground_truth.clone(),
        engine: crate::engine::Engine::new(opts.engine).map_err(|e| eyre!(e))?,
        kubelet: crate::kube::kubelet::start,
    };
    let cluster = Arc::new(Cluster::new(store.clone(), settings));
    let now = chrono::Utc::now();
    let invalid = |e: String| eyre!("building the lab's objects: {e}");
    for ns in ["default", namespace.as_str()] {
        store.create(
            NAMESPACES,
            typed::<Namespace>(objects::namespace(ns)).map_err(invalid)?,
        )?;
    }
    for (i, n) in objects::NODE_NAMES.iter().enumerate() {
        let mut node = objects::node(n, i + 1, now);
        if opts.scenario.gpu() && i == 0 {
            // One GPU on the node the models' volume is attached to (time-sliced into two
            // in the gpu-shared scenario).
            node = objects::with_gpus(node, opts.scenario.gpu_replicas());
        }
        store.create(NODES, typed::<Node>(node).map_err(invalid)?)?;
    }
    if opts.builtin_workload {
        store.create(
            PVCS,
            typed::<PersistentVolumeClaim>(objects::pvc(&namespace)).map_err(invalid)?,
        )?;
        let llama = opts.engine == crate::engine::EngineKind::Llamacpp;
        let mut svc = objects::service(&namespace);
        let mut dep = objects::deployment(
            &namespace,
            "ollama",
            opts.replicas,
            OLLAMA_IMAGE,
            profile.memory_limit_bytes,
            opts.scenario,
            &profile.model,
        );
        // The same workload served by llama-server (--engine llamacpp, or its imitation)
        // or vLLM's imitation (manifests/overlays/llamacpp, …/vllm).
        let shape = if llama {
            crate::kube::shapes::Shape::Llamacpp
        } else {
            opts.shape
        };
        if shape != crate::kube::shapes::Shape::Ollama
            && opts.engine == crate::engine::EngineKind::Ollama
        {
            return Err(eyre!(
                "a {shape:?} workload needs --engine simulated or llamacpp, not the real Ollama"
            ));
        }
        crate::kube::shapes::apply(shape, &mut dep, &mut svc, &profile.model);
        store.create(SERVICES, typed::<Service>(svc).map_err(invalid)?)?;
        store.create(DEPLOYMENTS, typed::<Deployment>(dep).map_err(invalid)?)?;
    }

    let api = Arc::new(Api::new(cluster.clone(), opts.bookmark_interval));
    api.port.store(u64::from(addr.port()), Ordering::Relaxed);
    api.require_credentials
        .store(tls.is_some(), Ordering::Relaxed);
    let stop = CancellationToken::new();
    let server = tokio::spawn(server_loop(api.clone(), listener, addr, tls, stop.clone()));
    let controllers = tokio::spawn(cluster::run_controllers(cluster.clone()));
    Ok(LabHandle {
        api_url,
        kubeconfig: kubeconfig_path,
        namespace,
        addr,
        api,
        stop,
        server,
        controllers,
    })
}

/// The scenario names (for help texts).
pub fn scenario_names() -> &'static [&'static str] {
    scenario::NAMES
}
