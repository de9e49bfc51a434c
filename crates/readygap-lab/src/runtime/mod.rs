//! The Ollama-compatible runtime of one lab pod's container.
//!
//! `start` boots it (the profile's `runtime_listen` stage), then it serves Ollama's HTTP API on
//! `ip:port` (see `http`), loads models with the profile's timings (slower when the node's page
//! cache is cold), keeps them resident until their keep-alive expires, and accounts memory the
//! way the container's cgroup would: about 14 MiB idle, rising linearly while a model loads,
//! held while resident. A load that cannot fit next to the models already resident kills the
//! container at the instant its memory would cross the limit (the published "1B resident,
//! then 3B under 4 GiB" case) — as Ollama 0.12 does; imitating 0.13 or later on cgroup v2
//! (`Profile::ollama_version`, see `lab::ollama_version`) the runtime instead evicts an idle
//! resident model to make room, or refuses the load with HTTP 500 "model requires more system
//! memory (X) than is available (Y)". A pod with GPUs (`nvidia.com/gpu` limits) holds model
//! weights in VRAM: `/api/ps` reports them as `size_vram` (part of `size`), and only the rest
//! is charged to the container's cgroup. `exec` runs the few commands a dashboard runs inside a
//! container (see `exec`), reading cgroup v1/v2 files and /proc/meminfo rendered from this
//! state (see `files`). A container that is not the runtime (a debug pod) is a
//! `PlainContainer`: exec only, seeing its node's files (see `plain`), with `curl` (see `curl`)
//! reaching Services and pods through the pod's network (see `network`).
//!
//! Other servers: `RuntimeSpec::dialect` (from the container image) makes the same runtime
//! llama.cpp's `llama-server` (HTTP at once, 503 "Loading model" until the served model is
//! loaded, which starts at once) or vLLM (nothing listens until the served model is loaded),
//! with their HTTP API (see `openai_http`).
//!
//! Timing: every sampled stage is divided by `RuntimeSpec::speed`. Ollama's own durations in
//! responses (`load_duration`, ...) are the wall-clock times the lab really spent, so they stay
//! consistent with what a client measures at any speed.

mod curl;
mod disk;
mod exec;
mod files;
mod format;
mod grep;
mod http;
mod listener;
pub mod network;
mod openai_http;
mod plain;
pub mod request_log;

pub use disk::{ModelDisk, NodeCache};
pub use exec::{ExecChunk, ExecOutput, ExecStream};
pub use openai_http::Dialect;
pub use plain::{NodeAnonBytes, OnDrop, PlainContainer, PlainSpec};

use crate::ground_truth::{GroundTruth, Transition};
use crate::profile::{ModelSpec, Profile, Stage, duration_from_ms};
use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Everything one runtime (one container of one pod) needs.
#[derive(Clone)]
pub struct RuntimeSpec {
    pub pod_name: String,
    pub pod_uid: String,
    pub node_name: String,
    /// 127.0.0.N, unique per pod.
    pub ip: Ipv4Addr,
    /// 11434.
    pub port: u16,
    pub memory_limit_bytes: u64,
    pub profile: Arc<Profile>,
    /// The pod's volume: models on disk (a PVC shared by the pods of the deployment, or a
    /// fresh empty one per pod in the emptyDir scenario).
    pub disk: Arc<ModelDisk>,
    /// The node's page cache.
    pub node_cache: Arc<NodeCache>,
    /// Every timing is divided by this.
    pub speed: f64,
    pub ground_truth: GroundTruth,
    pub faults: Arc<RuntimeFaults>,
    /// GPUs of the container (its `nvidia.com/gpu` limit), each with [`GPU_VRAM_BYTES`].
    pub gpus: u32,
    /// Which server the runtime imitates (from the container image).
    pub dialect: Dialect,
    /// The node's one physical GPU when it is time-sliced between pods (the `gpu-shared`
    /// scenario); `None`: the container's GPUs are its own.
    pub shared_gpu: Option<SharedGpu>,
}

/// A node's physical GPU shared by the pods given a slice of it: its UUID, and the VRAM
/// the other pods' containers on the node hold now.
#[derive(Clone)]
pub struct SharedGpu {
    pub uuid: String,
    /// VRAM held by the runtimes of the node's other pods (this pod's name excluded).
    pub others: Arc<dyn Fn(&str) -> u64 + Send + Sync>,
}

impl SharedGpu {
    /// The VRAM others hold, seen from pod `me`.
    pub fn others_bytes(&self, me: &str) -> u64 {
        (self.others)(me)
    }
}

/// VRAM of one lab GPU (24 GiB, an NVIDIA L4's).
pub const GPU_VRAM_BYTES: u64 = 24 << 30;

/// What the runtime tells the kube side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeEvent {
    /// The runtime answers HTTP.
    Listening,
    ModelResident {
        model: String,
    },
    ModelUnloaded {
        model: String,
    },
    /// The container was OOM-killed; `resident` holds each model's bytes at the kill.
    OomKilled {
        resident: Vec<(String, u64)>,
        limit: u64,
    },
    /// The container's main process ended by itself, not OOM-killed (the real engine: e.g.
    /// `ollama serve` could not bind its address); the kubelet restarts it (reason Error).
    Exited {
        exit_code: i32,
    },
}

/// Runtime-level faults, set by tests or the lab's admin API at any time.
#[derive(Debug, Default)]
pub struct RuntimeFaults {
    hang: AtomicBool,
    http_500: AtomicBool,
    slow_exec_ms: AtomicU64,
    crash_mid_inference: AtomicBool,
}

impl RuntimeFaults {
    pub fn new() -> Self {
        Self::default()
    }
    /// Accept connections and never answer. Requests that arrived while hung stay hung until
    /// the container stops, even after the fault is cleared.
    pub fn set_hang(&self, on: bool) {
        self.hang.store(on, Ordering::SeqCst);
    }
    pub fn hang(&self) -> bool {
        self.hang.load(Ordering::SeqCst)
    }
    /// Answer every request with HTTP 500.
    pub fn set_http_500(&self, on: bool) {
        self.http_500.store(on, Ordering::SeqCst);
    }
    pub fn http_500(&self) -> bool {
        self.http_500.load(Ordering::SeqCst)
    }
    /// Every command run by `exec` starts this much later.
    pub fn set_slow_exec_ms(&self, ms: u64) {
        self.slow_exec_ms.store(ms, Ordering::SeqCst);
    }
    pub fn slow_exec_ms(&self) -> u64 {
        self.slow_exec_ms.load(Ordering::SeqCst)
    }
    /// The next generation that has streamed its first token crashes the runtime's process
    /// (exit status 2, as a Go runtime panic exits): its connections are reset mid-stream and
    /// the kubelet restarts the container. One crash per setting.
    pub fn set_crash_mid_inference(&self, on: bool) {
        self.crash_mid_inference.store(on, Ordering::SeqCst);
    }
    pub fn crash_mid_inference(&self) -> bool {
        self.crash_mid_inference.load(Ordering::SeqCst)
    }
    /// Take the armed crash (the switch turns off).
    pub(crate) fn take_crash_mid_inference(&self) -> bool {
        self.crash_mid_inference.swap(false, Ordering::SeqCst)
    }
}

/// The container's memory as its cgroup reports it (for the kubelet Summary API).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct MemorySnapshot {
    /// memory.current / memory.usage_in_bytes.
    pub current_bytes: u64,
    /// memory.max (0 = unlimited).
    pub limit_bytes: u64,
    /// oom_kill of memory.events.
    pub oom_kill_count: u64,
    /// current − inactive_file (what the kubelet calls the working set).
    pub working_set_bytes: u64,
    pub anon_bytes: u64,
    pub file_bytes: u64,
    pub active_file_bytes: u64,
    pub inactive_file_bytes: u64,
    pub kernel_bytes: u64,
    /// max of memory.events (times usage hit the limit).
    pub max_events: u64,
}

/// Lifecycle of the container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Booting,
    Listening,
    Stopped,
    OomKilled,
}

/// Kernel memory of the idle container (part of the published 14 987 264 idle bytes).
const IDLE_KERNEL: u64 = 720_896;
/// File pages of the idle container (the runtime's binary and libraries, active).
const IDLE_ACTIVE_FILE: u64 = 4_882_432;
/// How close the page cache of a cold load gets to the limit before reclaim: the published
/// cold-cache memory.current (mean 4 292 521 165) is this far below 4 GiB.
const RECLAIM_HEADROOM: u64 = 2_445_312;
/// load_duration Ollama reports when the model is already resident (ms).
const RESIDENT_REUSE: Stage = Stage {
    mean_ms: 12.0,
    sd_ms: 4.0,
    min_ms: 4.0,
    max_ms: 20.0,
};

#[derive(Debug, Clone)]
pub(crate) struct Resident {
    pub spec: ModelSpec,
    /// Bytes of the model in VRAM (`size_vram`); the rest is in the container's memory.
    pub vram: u64,
    pub expires_at: DateTime<Utc>,
    in_use: u32,
    generation: u64,
}

#[derive(Debug, Clone)]
struct Loading {
    spec: ModelSpec,
    /// Bytes going to VRAM.
    vram: u64,
    started: Instant,
    duration: Duration,
    cold: bool,
}

#[derive(Debug)]
struct State {
    phase: Phase,
    resident: BTreeMap<String, Resident>,
    loading: Option<Loading>,
    /// Page cache charged to the container by cold loads (inactive file pages).
    cache_bytes: u64,
    oom_kills: u64,
    max_events: u64,
    next_generation: u64,
    /// VRAM the engine holds beyond its weights (vLLM: its KV cache and CUDA graphs).
    gpu_reserved: u64,
}

/// When a resident model should be unloaded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum KeepAlive {
    For(Duration),
    Forever,
}

impl KeepAlive {
    /// Ollama's default (OLLAMA_KEEP_ALIVE=5m).
    pub const DEFAULT: KeepAlive = KeepAlive::For(Duration::from_secs(300));
}

/// Why a model could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RunError {
    /// The container was OOM-killed during the request.
    Killed,
    /// The container was stopped during the request.
    Stopped,
    /// Ollama ≥ 0.13 refused the load: the model needs `required` bytes of system memory
    /// and `available` are free (memory.max − memory.current).
    InsufficientMemory { required: u64, available: u64 },
}

impl Resident {
    /// Bytes charged to the container's cgroup.
    pub fn host_bytes(&self) -> u64 {
        self.spec.resident_bytes.saturating_sub(self.vram)
    }
}

/// The shared state of one runtime.
pub(crate) struct Runtime {
    pub(crate) spec: RuntimeSpec,
    events: UnboundedSender<RuntimeEvent>,
    state: Mutex<State>,
    load_lock: tokio::sync::Mutex<()>,
    listening: AtomicBool,
    /// Set when the container was killed (connections are reset rather than closed).
    pub(crate) killed: Arc<AtomicBool>,
    /// Cancelled when the container stops for any reason.
    pub(crate) shutdown: CancellationToken,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    rng: Mutex<StdRng>,
    /// Exec commands still running.
    pub(crate) running_execs: Arc<std::sync::atomic::AtomicUsize>,
    /// What the container writes to stdout (`kubectl logs`): Ollama's request lines.
    pub(crate) log: Arc<request_log::ContainerLog>,
}

/// A running (or booting, or dead) lab container: this simulated runtime, or a real process
/// of the real engine (`crate::engine`).
#[derive(Clone)]
pub struct RuntimeHandle {
    inner: Backend,
}

#[derive(Clone)]
enum Backend {
    Sim(Arc<Runtime>),
    Real(Arc<dyn RealProcess>),
}

/// The container process of a real engine (`crate::engine`), as the kubelet and the API
/// see it: the engine implements it, so the runtime never names the engine.
pub trait RealProcess: Send + Sync + 'static {
    fn exec(&self, argv: Vec<String>) -> ExecStream;
    /// SIGTERM, SIGKILL at `kill_at`, then what is left in the cgroup.
    fn stop(&self, kill_at: Option<Instant>) -> futures::future::BoxFuture<'_, ()>;
    fn lines(&self) -> Arc<request_log::ContainerLog>;
    fn memory(&self) -> MemorySnapshot;
    fn is_listening(&self) -> bool;
    fn addr(&self) -> SocketAddr;
    fn resident(&self) -> Vec<(String, u64)>;
    fn running_execs(&self) -> usize;
    fn oom_killed(&self) -> bool;
    /// For the engine's own view of its container.
    fn as_any(&self) -> &dyn std::any::Any;
}

/// Addresses held by live runtimes of this process. With SO_REUSEADDR (needed so a restarted
/// container can rebind while old connections sit in TIME_WAIT) the kernel would let two
/// booting runtimes bind the same address; this registry refuses the second.
static CLAIMED: Mutex<std::collections::BTreeSet<SocketAddr>> =
    Mutex::new(std::collections::BTreeSet::new());

/// A claim on `ip:port`, released when the runtime's listener is gone.
pub(crate) struct AddrClaim(SocketAddr);

impl AddrClaim {
    fn take(addr: SocketAddr) -> Option<Self> {
        let mut claimed = CLAIMED.lock().unwrap_or_else(|e| e.into_inner());
        claimed.insert(addr).then_some(Self(addr))
    }
}

impl Drop for AddrClaim {
    fn drop(&mut self) {
        CLAIMED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.0);
    }
}

fn bind(addr: SocketAddr) -> std::io::Result<(AddrClaim, tokio::net::TcpSocket)> {
    let in_use = || std::io::Error::new(std::io::ErrorKind::AddrInUse, "address in use");
    let claim = AddrClaim::take(addr).ok_or_else(in_use)?;
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    Ok((claim, socket))
}

/// How long `start` waits for a dying runtime (e.g. one just OOM-killed) to free its address.
const REBIND_WAIT: Duration = Duration::from_secs(2);

/// A seed from a pod's name (FNV-1a).
fn name_seed(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Boot a runtime. Returns at once after reserving `ip:port` (waiting up to 2 s if a dying
/// runtime still holds it); connections are refused until the runtime listens, after the
/// profile's `runtime_listen` stage. A restarted container is a new `start` with the same
/// spec; calling `stop` on the old handle first frees the address at once.
pub async fn start(
    spec: RuntimeSpec,
    events: UnboundedSender<RuntimeEvent>,
) -> std::io::Result<RuntimeHandle> {
    spec.profile
        .validate()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    if spec.memory_limit_bytes > 1 << 50 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("memory limit {} above 1 PiB", spec.memory_limit_bytes),
        ));
    }
    let addr = SocketAddr::from((spec.ip, spec.port));
    let deadline = Instant::now() + REBIND_WAIT;
    let (claim, socket) = loop {
        match bind(addr) {
            Ok(bound) => break bound,
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => {
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("lab runtime binding {addr}: {e}"),
                ));
            }
        }
    };
    let seed = name_seed(&spec.pod_name);
    let runtime = Arc::new(Runtime {
        spec,
        events,
        state: Mutex::new(State {
            phase: Phase::Booting,
            resident: BTreeMap::new(),
            loading: None,
            cache_bytes: 0,
            oom_kills: 0,
            max_events: 0,
            next_generation: 0,
            gpu_reserved: 0,
        }),
        load_lock: tokio::sync::Mutex::new(()),
        listening: AtomicBool::new(false),
        killed: Arc::new(AtomicBool::new(false)),
        shutdown: CancellationToken::new(),
        tasks: Mutex::new(Vec::new()),
        // Seeded by the pod's name (itself drawn from the lab's seed): two labs with one seed
        // draw the same stages for the same pods, so a loop can be compared with itself.
        rng: Mutex::new(rand::SeedableRng::seed_from_u64(seed)),
        running_execs: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
        log: Arc::new(request_log::ContainerLog::new()),
    });
    let boot = tokio::spawn(boot(runtime.clone(), socket, claim));
    runtime.track(boot);
    Ok(RuntimeHandle {
        inner: Backend::Sim(runtime),
    })
}

async fn boot(runtime: Arc<Runtime>, socket: tokio::net::TcpSocket, claim: AddrClaim) {
    let delay = runtime.sample(&runtime.spec.profile.runtime_listen);
    tokio::select! {
        _ = tokio::time::sleep(delay) => {}
        _ = runtime.shutdown.cancelled() => return,
    }
    let dialect = runtime.spec.dialect;
    // vLLM loads its weights before it serves HTTP: connections are refused meanwhile.
    if dialect == Dialect::Vllm && !runtime.load_served().await {
        return;
    }
    let listener = match socket.listen(1024) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(pod = %runtime.spec.pod_name, "lab runtime cannot listen: {e}");
            runtime.lock().phase = Phase::Stopped;
            runtime.shutdown.cancel();
            return;
        }
    };
    {
        let mut state = runtime.lock();
        if state.phase != Phase::Booting {
            return;
        }
        state.phase = Phase::Listening;
    }
    let server = match dialect {
        Dialect::Ollama => tokio::spawn(http::serve(runtime.clone(), listener, claim)),
        d => tokio::spawn(openai_http::serve(runtime.clone(), listener, claim, d)),
    };
    runtime.track(server);
    runtime.listening.store(true, Ordering::SeqCst);
    // llama-server loads its model once it listens (and answers 503 meanwhile).
    if dialect == Dialect::LlamaCpp {
        let rt = runtime.clone();
        let load = tokio::spawn(async move {
            rt.load_served().await;
        });
        runtime.track(load);
    }
    // The server's start-up line: Ollama's (server/routes.go Serve: slog "Listening on"),
    // vLLM's (vllm/entrypoints/openai/api_server.py: "Starting vLLM API server 0 on …").
    let now = chrono::Utc::now();
    let line = match dialect {
        Dialect::Vllm => format!(
            "(APIServer pid=1) INFO {} [api_server.py:1971] Starting vLLM API server 0 on http://{}:{}",
            now.format("%m-%d %H:%M:%S"),
            runtime.spec.ip,
            runtime.spec.port,
        ),
        _ => format!(
            "time={} level=INFO source=routes.go msg=\"Listening on {}:{} (version {})\"",
            now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            runtime.spec.ip,
            runtime.spec.port,
            runtime.spec.profile.ollama_version,
        ),
    };
    runtime.log.write(now, line);
    runtime.spec.ground_truth.log(
        &runtime.spec.pod_name,
        Transition::RuntimeListening,
        serde_json::json!({ "addr": format!("{}:{}", runtime.spec.ip, runtime.spec.port) }),
    );
    let _ = runtime.events.send(RuntimeEvent::Listening);
}

impl RuntimeHandle {
    /// The GPUs the container sees, UUID and bytes in use (a real engine's: none).
    pub fn gpu_memory(&self) -> Vec<(String, u64)> {
        match &self.inner {
            Backend::Sim(rt) => rt.gpu_memory(),
            Backend::Real(_) => Vec::new(),
        }
    }

    /// The VRAM the container holds (a real engine's: none counted).
    pub fn vram_bytes(&self) -> u64 {
        match &self.inner {
            Backend::Sim(rt) => rt.vram_bytes(),
            Backend::Real(_) => 0,
        }
    }

    /// The handle of a real engine's container.
    pub fn real(c: Arc<dyn RealProcess>) -> Self {
        Self {
            inner: Backend::Real(c),
        }
    }

    /// The real engine's container, if this is one (`engine::ollama::AsReal` gives the
    /// engine's own type).
    pub fn as_real_process(&self) -> Option<&Arc<dyn RealProcess>> {
        match &self.inner {
            Backend::Real(c) => Some(c),
            Backend::Sim(_) => None,
        }
    }

    /// Run a command inside the container (`kubectl exec`). Dropping the stream cancels it.
    /// Call it from within a Tokio runtime (the command runs as a task).
    pub fn exec(&self, argv: Vec<String>) -> ExecStream {
        match &self.inner {
            Backend::Sim(rt) => exec::spawn(exec::Host::Runtime(rt.clone()), argv),
            Backend::Real(c) => c.exec(argv),
        }
    }

    /// Stop the container: stop listening, free the port, drop residency.
    pub async fn stop(&self) {
        self.stop_by(None).await;
    }

    /// `stop`, for a real process: SIGTERM, then SIGKILL at `kill_at` (the end of the pod's
    /// grace period; `None`: Kubernetes' default 30 s).
    pub async fn stop_by(&self, kill_at: Option<Instant>) {
        let inner = match &self.inner {
            Backend::Sim(rt) => rt,
            Backend::Real(c) => return c.stop(kill_at).await,
        };
        let unloaded: Vec<String> = {
            let mut state = inner.lock();
            if matches!(state.phase, Phase::Booting | Phase::Listening) {
                state.phase = Phase::Stopped;
            }
            state.loading = None;
            std::mem::take(&mut state.resident).into_keys().collect()
        };
        inner.listening.store(false, Ordering::SeqCst);
        inner.shutdown.cancel();
        inner.log.close();
        for model in unloaded {
            let _ = inner.events.send(RuntimeEvent::ModelUnloaded { model });
        }
        inner.join_tasks().await;
    }

    /// What the container wrote to stdout (its request log).
    pub fn log(&self) -> Arc<request_log::ContainerLog> {
        match &self.inner {
            Backend::Sim(rt) => rt.log.clone(),
            Backend::Real(c) => c.lines(),
        }
    }

    /// The container's memory now.
    pub fn memory(&self) -> MemorySnapshot {
        match &self.inner {
            Backend::Sim(rt) => rt.memory(),
            Backend::Real(c) => c.memory(),
        }
    }

    /// Whether the runtime answers HTTP.
    pub fn is_listening(&self) -> bool {
        match &self.inner {
            Backend::Sim(rt) => rt.listening.load(Ordering::SeqCst),
            Backend::Real(c) => c.is_listening(),
        }
    }

    /// The address the runtime serves on.
    pub fn addr(&self) -> SocketAddr {
        match &self.inner {
            Backend::Sim(rt) => SocketAddr::from((rt.spec.ip, rt.spec.port)),
            Backend::Real(c) => c.addr(),
        }
    }

    /// Models resident now (name, resident bytes).
    pub fn resident(&self) -> Vec<(String, u64)> {
        match &self.inner {
            Backend::Sim(rt) => rt
                .lock()
                .resident
                .values()
                .map(|r| (r.spec.name.clone(), r.spec.resident_bytes))
                .collect(),
            Backend::Real(c) => c.resident(),
        }
    }

    /// How many exec commands are still running (a dropped stream ends its command).
    pub fn running_execs(&self) -> usize {
        match &self.inner {
            Backend::Sim(rt) => rt.running_execs.load(Ordering::SeqCst),
            Backend::Real(c) => c.running_execs(),
        }
    }

    /// Whether the container was OOM-killed.
    pub fn oom_killed(&self) -> bool {
        match &self.inner {
            Backend::Sim(rt) => rt.lock().phase == Phase::OomKilled,
            Backend::Real(c) => c.oom_killed(),
        }
    }
}

/// Memory of the container broken down like memory.stat.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Breakdown {
    pub anon: u64,
    pub active_file: u64,
    pub inactive_file: u64,
    pub kernel: u64,
    pub limit: u64,
    pub oom_kills: u64,
    pub max_events: u64,
}

impl Breakdown {
    pub fn current(&self) -> u64 {
        self.anon + self.active_file + self.inactive_file + self.kernel
    }
    pub fn file(&self) -> u64 {
        self.active_file + self.inactive_file
    }
}

impl Runtime {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means another task panicked mid-update; the state is still the
        // best we have.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn track(&self, task: JoinHandle<()>) {
        if let Ok(mut tasks) = self.tasks.lock() {
            tasks.retain(|t| !t.is_finished());
            tasks.push(task);
        }
    }

    /// Wait for every task of the container (tasks spawned meanwhile too), aborting any that
    /// has not ended 5 s after the shutdown.
    async fn join_tasks(&self) {
        loop {
            let tasks: Vec<JoinHandle<()>> = self
                .tasks
                .lock()
                .map(|mut t| std::mem::take(&mut *t))
                .unwrap_or_default();
            if tasks.is_empty() {
                return;
            }
            for task in tasks {
                let abort = task.abort_handle();
                if tokio::time::timeout(Duration::from_secs(5), task)
                    .await
                    .is_err()
                {
                    abort.abort();
                }
            }
        }
    }

    pub(crate) fn track_task(&self, task: JoinHandle<()>) {
        self.track(task);
    }
    /// The bytes in use on each of the container's simulated GPUs (`nvidia-smi`): the
    /// resident models' VRAM, and the share of the loading one's loaded so far, filling GPU 0
    /// first.
    pub(crate) fn vram_used(&self) -> Vec<u64> {
        let mut left = self.vram_bytes();
        if let Some(shared) = &self.spec.shared_gpu {
            // One device seen whole: what every pod on it holds.
            let all = left + shared.others_bytes(&self.spec.pod_name);
            return vec![all.min(GPU_VRAM_BYTES)];
        }
        (0..self.spec.gpus)
            .map(|_| {
                let on = left.min(GPU_VRAM_BYTES);
                left -= on;
                on
            })
            .collect()
    }

    /// Each GPU the container sees, with its UUID (the node's shared GPU's, else one of the
    /// container's own) and its bytes in use: what `nvidia-smi` and the DCGM exporter say.
    pub(crate) fn gpu_memory(&self) -> Vec<(String, u64)> {
        self.vram_used()
            .into_iter()
            .enumerate()
            .map(|(i, used)| {
                let uuid = match &self.spec.shared_gpu {
                    Some(s) => s.uuid.clone(),
                    None => format!(
                        "GPU-1ab{i:05}-0000-4000-8000-{:012x}",
                        self.spec.pod_name.len()
                    ),
                };
                (uuid, used)
            })
            .collect()
    }

    /// The VRAM this container holds: the resident models', the share of the loading one's
    /// loaded so far, and what the engine reserved beyond its weights.
    pub(crate) fn vram_bytes(&self) -> u64 {
        let state = self.lock();
        let resident: u64 = state.resident.values().map(|r| r.vram).sum();
        let loading = state.loading.as_ref().map_or(0, |l| {
            let done = l.started.elapsed().as_secs_f64() / l.duration.as_secs_f64().max(1e-9);
            (l.vram as f64 * done.clamp(0.0, 1.0)) as u64
        });
        resident + loading + state.gpu_reserved
    }

    /// vLLM's start-up within the load's `duration`, each phase's line written as it ends,
    /// in its v1 engine's words (`crate::runtime` leaves the formats to
    /// `readygap_core::runtime_log`, which cites vLLM's files): the weights (60 % of the
    /// load), the memory profile and the KV cache (10 %), the CUDA graphs (25 %), the rest of
    /// the engine's start (5 %). `vram` is what the weights take on the simulated GPU.
    async fn vllm_start_up(&self, duration: Duration, vram: u64) -> Result<(), RunError> {
        const GIB: f64 = (1u64 << 30) as f64;
        let gpu = u64::from(self.spec.gpus).saturating_mul(GPU_VRAM_BYTES) as f64;
        // vLLM's default gpu_memory_utilization 0.9: the KV cache gets what is left of it.
        let kv = (gpu * 0.9 - vram as f64).max(0.0);
        let graphs = 0.31 * GIB;
        let line = |level: &str, msg: String| {
            let now = chrono::Utc::now();
            let at = now.format("%m-%d %H:%M:%S");
            self.log
                .write(now, format!("(EngineCore_DP0 pid=212) {level} {at} {msg}"));
        };
        let engine = |msg: String| line("INFO", msg);
        // On a shared GPU vLLM first checks that its share is free (vllm/v1/worker/
        // gpu_worker.py `init_device`), and refuses to start otherwise: the engine exits.
        if let Some(shared) = &self.spec.shared_gpu {
            let free = (gpu - shared.others_bytes(&self.spec.pod_name) as f64).max(0.0);
            if free < gpu * 0.9 {
                line(
                    "ERROR",
                    format!(
                        "[core.py:708] ValueError: Free memory on device ({:.2}/{:.2} GiB) on startup is less than desired GPU memory utilization (0.9, {:.2} GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
                        free / GIB,
                        gpu / GIB,
                        gpu * 0.9 / GIB
                    ),
                );
                self.lock().loading = None;
                let _ = self.events.send(RuntimeEvent::Exited { exit_code: 1 });
                return Err(RunError::Stopped);
            }
        }
        let part = |f: f64| mul(duration, f);
        self.sleep_alive(part(0.60)).await?;
        engine(format!(
            "[gpu_model_runner.py:1971] Model loading took {:.4} GiB and {:.6} seconds",
            vram as f64 / GIB,
            part(0.60).as_secs_f64()
        ));
        self.sleep_alive(part(0.10)).await?;
        engine(format!(
            "[gpu_worker.py:276] Available KV cache memory: {:.2} GiB",
            kv / GIB
        ));
        // A token's KV cache for a small model: ~32 KiB.
        let tokens = (kv / 32_768.0) as u64;
        engine(format!(
            "[kv_cache_utils.py:1087] GPU KV cache size: {} tokens",
            thousands(tokens)
        ));
        self.lock().gpu_reserved = kv as u64;
        self.sleep_alive(part(0.25)).await?;
        self.lock().gpu_reserved = (kv + graphs) as u64;
        engine(format!(
            "[gpu_model_runner.py:3480] Graph capturing finished in {:.0} secs, took {:.2} GiB",
            part(0.25).as_secs_f64(),
            graphs / GIB
        ));
        self.sleep_alive(part(0.05)).await?;
        engine(format!(
            "[core.py:214] init engine (profile, create kv cache, warmup model) took {:.2} seconds",
            part(0.40).as_secs_f64()
        ));
        Ok(())
    }

    /// The engine's own log lines of a model load: begun (`took` `None`) or done, as the
    /// real servers print them (Ollama 0.12.6 `llm/server.go`: `msg="starting runner"`,
    /// `msg="llama runner started in 0.54 seconds"`; llama-server `tools/server/server.cpp`:
    /// `load_model: loading model '…'`, `llama_server: model loaded`). vLLM's are its own
    /// start-up phases, not written by the lab yet.
    fn log_load(&self, model: &str, took: Option<Duration>) {
        let now = chrono::Utc::now();
        let at = now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let line = match (self.spec.dialect, took) {
            (Dialect::Ollama, None) => format!(
                "time={at} level=INFO source=server.go:400 msg=\"starting runner\" cmd=\"/usr/bin/ollama runner --model /root/.ollama/models/{model}\""
            ),
            (Dialect::Ollama, Some(d)) => format!(
                "time={at} level=INFO source=server.go:1310 msg=\"llama runner started in {:.2} seconds\"",
                d.as_secs_f64()
            ),
            (Dialect::LlamaCpp, None) => {
                format!("srv    load_model: loading model '/models/{model}'")
            }
            (Dialect::LlamaCpp, Some(_)) => "srv  llama_server: model loaded".to_string(),
            _ => return,
        };
        self.log.write(now, line);
    }

    /// Load the served model and keep it (llama-server and vLLM load one model at start and
    /// hold it); false when the container died meanwhile or the model is unknown.
    async fn load_served(self: &Arc<Self>) -> bool {
        let Some(spec) = self.spec.profile.served_model().cloned() else {
            tracing::warn!(pod = %self.spec.pod_name, "lab runtime: the profile serves no known model");
            return false;
        };
        match self.acquire(&spec, KeepAlive::Forever).await {
            Ok(_) => {
                self.release(&spec.name, KeepAlive::Forever);
                true
            }
            Err(_) => false,
        }
    }

    pub(crate) fn phase(&self) -> Phase {
        self.lock().phase
    }

    /// A stage sampled and divided by the speed.
    pub(crate) fn sample(&self, stage: &Stage) -> Duration {
        let raw = match self.rng.lock() {
            Ok(mut rng) => stage.sample(&mut *rng),
            Err(_) => duration_from_ms(stage.mean_ms),
        };
        self.scaled(raw)
    }

    /// A duration divided by the speed.
    pub(crate) fn scaled(&self, d: Duration) -> Duration {
        let speed = self.spec.speed;
        if speed.is_finite() && speed > 0.0 {
            mul(d, 1.0 / speed)
        } else {
            d
        }
    }

    fn limit(&self) -> u64 {
        self.spec.memory_limit_bytes
    }

    fn idle_anon(&self) -> u64 {
        self.spec
            .profile
            .idle_bytes
            .saturating_sub(IDLE_KERNEL + IDLE_ACTIVE_FILE)
    }

    pub(crate) fn breakdown(&self) -> Breakdown {
        let state = self.lock();
        self.breakdown_of(&state)
    }

    fn breakdown_of(&self, state: &State) -> Breakdown {
        let limit = self.limit();
        let mut b = Breakdown {
            limit,
            oom_kills: state.oom_kills,
            max_events: state.max_events,
            ..Breakdown::default()
        };
        if matches!(state.phase, Phase::Stopped | Phase::OomKilled) {
            return b;
        }
        b.kernel = IDLE_KERNEL;
        b.active_file = IDLE_ACTIVE_FILE;
        b.anon = self.idle_anon()
            + state
                .resident
                .values()
                .map(Resident::host_bytes)
                .fold(0u64, u64::saturating_add);
        let mut cache = state.cache_bytes;
        if let Some(loading) = &state.loading {
            let progress = if loading.duration.is_zero() {
                1.0
            } else {
                (loading.started.elapsed().as_secs_f64() / loading.duration.as_secs_f64())
                    .clamp(0.0, 1.0)
            };
            let host = loading.spec.resident_bytes.saturating_sub(loading.vram);
            b.anon += (host as f64 * progress) as u64;
            if loading.cold {
                cache += (loading.spec.disk_bytes as f64 * progress) as u64;
            }
        }
        if limit > 0 {
            // The kernel never lets usage pass memory.max: the OOM kill comes first.
            b.anon = b.anon.min(limit.saturating_sub(b.kernel + b.active_file));
        }
        let room = if limit == 0 {
            u64::MAX
        } else {
            limit.saturating_sub(b.anon + b.kernel + b.active_file + RECLAIM_HEADROOM)
        };
        b.inactive_file = cache.min(room);
        b
    }

    pub(crate) fn memory(&self) -> MemorySnapshot {
        let b = self.breakdown();
        MemorySnapshot {
            current_bytes: b.current(),
            limit_bytes: b.limit,
            oom_kill_count: b.oom_kills,
            working_set_bytes: b.current() - b.inactive_file,
            anon_bytes: b.anon,
            file_bytes: b.file(),
            active_file_bytes: b.active_file,
            inactive_file_bytes: b.inactive_file,
            kernel_bytes: b.kernel,
            max_events: b.max_events,
        }
    }

    pub(crate) fn resident_models(&self) -> Vec<Resident> {
        self.lock().resident.values().cloned().collect()
    }

    /// Make `spec` resident (loading it if needed) and mark it in use. Returns how long the
    /// load took (Ollama's `load_duration`).
    /// Until the request ends, `expires_at` shows the request's keep-alive counted from the
    /// load, as Ollama does.
    pub(crate) async fn acquire(
        self: &Arc<Self>,
        spec: &ModelSpec,
        keep_alive: KeepAlive,
    ) -> Result<Duration, RunError> {
        let _load = self.load_lock.lock().await;
        let start = Instant::now();
        let reuse = {
            let mut state = self.lock();
            self.check_alive(&state)?;
            state.next_generation += 1;
            let generation = state.next_generation;
            match state.resident.get_mut(&spec.name) {
                Some(r) => {
                    r.in_use += 1;
                    r.generation = generation;
                    r.expires_at = self.expiry(keep_alive);
                    true
                }
                None => false,
            }
        };
        if reuse {
            let d = self.sample(&RESIDENT_REUSE);
            self.sleep_alive(d).await?;
            return Ok(start.elapsed());
        }

        self.make_room(spec).await?;
        self.log_load(&spec.name, None);
        let cold = !self.spec.node_cache.is_warm(&spec.name);
        let mut duration = self.sample(&spec.load);
        if cold {
            duration = mul(duration, self.spec.profile.cold_load_factor);
        }
        // Anon memory that cannot be reclaimed: idle + every resident model.
        let (kill_after, vram) = {
            let mut state = self.lock();
            let pinned = self.idle_anon()
                + IDLE_KERNEL
                + IDLE_ACTIVE_FILE
                + state
                    .resident
                    .values()
                    .map(Resident::host_bytes)
                    .sum::<u64>();
            let limit = self.limit();
            let vram = self.vram_for(&state, spec);
            let host = spec.resident_bytes - vram;
            state.loading = Some(Loading {
                spec: spec.clone(),
                vram,
                started: Instant::now(),
                duration,
                cold,
            });
            let kill = (limit > 0 && pinned + host > limit).then(|| {
                let room = limit.saturating_sub(pinned) as f64;
                mul(duration, room / host.max(1) as f64)
            });
            (kill, vram)
        };
        if let Some(after) = kill_after {
            self.sleep_alive(after).await?;
            self.oom_kill();
            return Err(RunError::Killed);
        }
        if self.spec.dialect == Dialect::Vllm {
            self.vllm_start_up(duration, vram).await?;
        } else {
            self.sleep_alive(duration).await?;
        }
        {
            let mut state = self.lock();
            self.check_alive(&state)?;
            state.loading = None;
            state.next_generation += 1;
            let generation = state.next_generation;
            state.resident.insert(
                spec.name.clone(),
                Resident {
                    spec: spec.clone(),
                    vram,
                    expires_at: self.expiry(keep_alive),
                    in_use: 1,
                    generation,
                },
            );
            if cold {
                let anon = self.idle_anon()
                    + state
                        .resident
                        .values()
                        .map(Resident::host_bytes)
                        .sum::<u64>();
                let room = match self.limit() {
                    0 => u64::MAX,
                    limit => limit
                        .saturating_sub(anon + IDLE_KERNEL + IDLE_ACTIVE_FILE + RECLAIM_HEADROOM),
                };
                let wanted = state.cache_bytes + spec.disk_bytes;
                if wanted > room {
                    state.max_events += 1;
                }
                state.cache_bytes = wanted.min(room);
            }
        }
        self.spec.node_cache.mark_warm(&spec.name, spec.disk_bytes);
        let load = start.elapsed();
        self.log_load(&spec.name, Some(load));
        self.spec.ground_truth.log(
            &self.spec.pod_name,
            Transition::ModelResident,
            serde_json::json!({
                "model": spec.name,
                "cold": cold,
                "load_ms": load.as_secs_f64() * 1000.0,
                "resident_bytes": spec.resident_bytes,
            }),
        );
        let _ = self.events.send(RuntimeEvent::ModelResident {
            model: spec.name.clone(),
        });
        Ok(load)
    }

    /// VRAM the model would take: all of it if it fits in what the resident models leave
    /// free on the container's GPUs, else what is left (a partial offload).
    fn vram_for(&self, state: &State, spec: &ModelSpec) -> u64 {
        let total = u64::from(self.spec.gpus).saturating_mul(GPU_VRAM_BYTES);
        let used: u64 = state.resident.values().map(|r| r.vram).sum();
        spec.resident_bytes.min(total.saturating_sub(used))
    }

    /// Ollama ≥ 0.13 on cgroup v2 (see `lab::ollama_version`): before loading, compare the
    /// model's system-memory part with memory.max − memory.current; while it does not fit,
    /// unload an idle resident model (sched.go findRunnerToUnload sorts by keep-alive duration,
    /// then name: approximated here by the earliest expiry, then name), waiting for a busy
    /// one to finish;
    /// with nothing left to unload, refuse. Earlier versions and cgroup v1 load regardless.
    async fn make_room(&self, spec: &ModelSpec) -> Result<(), RunError> {
        let version =
            crate::ollama_version::OllamaVersion::parse(&self.spec.profile.ollama_version)
                .unwrap_or(crate::ollama_version::OllamaVersion(0, 12, 6));
        let limit = self.limit();
        if !version.reads_cgroup_memory() || self.spec.profile.cgroup_v1 || limit == 0 {
            return Ok(());
        }
        loop {
            let evict = {
                let state = self.lock();
                self.check_alive(&state)?;
                let required = spec.resident_bytes - self.vram_for(&state, spec);
                let available = limit.saturating_sub(self.breakdown_of(&state).current());
                if required <= available {
                    return Ok(());
                }
                if state.resident.is_empty() {
                    return Err(RunError::InsufficientMemory {
                        required,
                        available,
                    });
                }
                let mut idle: Vec<&Resident> =
                    state.resident.values().filter(|r| r.in_use == 0).collect();
                idle.sort_by(|a, b| {
                    a.expires_at
                        .cmp(&b.expires_at)
                        .then(a.spec.name.cmp(&b.spec.name))
                });
                idle.first()
                    .map(|r| (r.spec.name.clone(), r.host_bytes(), required, available))
            };
            match evict {
                Some((model, bytes, required, available)) => {
                    self.spec.ground_truth.log(
                        &self.spec.pod_name,
                        Transition::ModelEvicted,
                        serde_json::json!({
                            "model": model, "bytes": bytes, "for": spec.name,
                            "required": required, "available": available,
                        }),
                    );
                    self.unload(&model);
                }
                // Every resident model is busy: wait for one to finish.
                None => self.sleep_alive(Duration::from_millis(10)).await?,
            }
        }
    }

    /// A request is done with `model`: start its keep-alive (0 unloads it now).
    pub(crate) fn release(self: &Arc<Self>, model: &str, keep_alive: KeepAlive) {
        let timer = {
            let mut state = self.lock();
            state.next_generation += 1;
            let generation = state.next_generation;
            let Some(r) = state.resident.get_mut(model) else {
                return;
            };
            r.in_use = r.in_use.saturating_sub(1);
            r.generation = generation;
            r.expires_at = self.expiry(keep_alive);
            match keep_alive {
                KeepAlive::Forever => None,
                KeepAlive::For(d) => {
                    let d = self.scaled(d);
                    Some((d, generation, r.in_use == 0 && d.is_zero()))
                }
            }
        };
        match timer {
            Some((_, _, true)) => self.unload(model),
            Some((d, generation, false)) => {
                let runtime = self.clone();
                let model = model.to_string();
                let task = tokio::spawn(async move {
                    tokio::select! {
                        _ = tokio::time::sleep(d) => runtime.expire(&model, generation),
                        _ = runtime.shutdown.cancelled() => {}
                    }
                });
                self.track(task);
            }
            None => {}
        }
    }

    /// When a model kept alive for `keep_alive` from now expires (the lab's clock: / speed).
    fn expiry(&self, keep_alive: KeepAlive) -> DateTime<Utc> {
        match keep_alive {
            // Go's time.Now().Add(math.MaxInt64): about 292 years ahead.
            KeepAlive::Forever => {
                let now = Utc::now();
                now.checked_add_signed(chrono::Duration::nanoseconds(i64::MAX))
                    .unwrap_or(now)
            }
            KeepAlive::For(d) => chrono::Duration::from_std(self.scaled(d))
                .ok()
                .and_then(|d| Utc::now().checked_add_signed(d))
                .unwrap_or_else(|| self.expiry(KeepAlive::Forever)),
        }
    }

    /// Unload `model` if it has not been used since the keep-alive that set this timer.
    fn expire(&self, model: &str, generation: u64) {
        let due = self
            .lock()
            .resident
            .get(model)
            .is_some_and(|r| r.generation == generation && r.in_use == 0);
        if due {
            self.unload(model);
        }
    }

    /// Drop a model from memory (its page cache stays charged to the container).
    pub(crate) fn unload(&self, model: &str) {
        let removed = self.lock().resident.remove(model).is_some();
        if removed {
            let _ = self.events.send(RuntimeEvent::ModelUnloaded {
                model: model.to_string(),
            });
        }
    }

    fn check_alive(&self, state: &State) -> Result<(), RunError> {
        match state.phase {
            Phase::OomKilled => Err(RunError::Killed),
            Phase::Stopped => Err(RunError::Stopped),
            Phase::Booting | Phase::Listening => Ok(()),
        }
    }

    /// Sleep unless the container dies first.
    pub(crate) async fn sleep_alive(&self, d: Duration) -> Result<(), RunError> {
        tokio::select! {
            _ = tokio::time::sleep(d) => Ok(()),
            _ = self.shutdown.cancelled() => {
                Err(if self.killed.load(Ordering::SeqCst) { RunError::Killed } else { RunError::Stopped })
            }
        }
    }

    /// The runtime's process exits by itself with `exit_code` (a crash): its connections are
    /// reset, and the kubelet restarts the container (reason Error), as for a real engine
    /// whose process ended ([`RuntimeEvent::Exited`]).
    pub(crate) fn crash(&self, exit_code: i32) {
        {
            let mut state = self.lock();
            if !matches!(state.phase, Phase::Booting | Phase::Listening) {
                return;
            }
            state.phase = Phase::Stopped;
            state.loading = None;
            state.resident.clear();
        }
        self.killed.store(true, Ordering::SeqCst);
        self.listening.store(false, Ordering::SeqCst);
        self.shutdown.cancel();
        self.spec.ground_truth.log(
            &self.spec.pod_name,
            Transition::ContainerExited,
            serde_json::json!({ "exit_code": exit_code }),
        );
        let _ = self.events.send(RuntimeEvent::Exited { exit_code });
    }

    /// The kernel's OOM killer takes the container (at the instant of the load in progress).
    fn oom_kill(&self) {
        let (resident, limit) = {
            let mut state = self.lock();
            if !matches!(state.phase, Phase::Booting | Phase::Listening) {
                return;
            }
            let limit = self.limit();
            let mut resident: Vec<(String, u64)> = state
                .resident
                .values()
                .map(|r| (r.spec.name.clone(), r.host_bytes()))
                .collect();
            if let Some(loading) = &state.loading {
                let pinned = self.idle_anon()
                    + IDLE_KERNEL
                    + IDLE_ACTIVE_FILE
                    + resident.iter().map(|(_, b)| b).sum::<u64>();
                resident.push((
                    loading.spec.name.clone(),
                    limit
                        .saturating_sub(pinned)
                        .min(loading.spec.resident_bytes.saturating_sub(loading.vram)),
                ));
            }
            state.phase = Phase::OomKilled;
            state.oom_kills += 1;
            state.max_events += 1;
            state.loading = None;
            state.resident.clear();
            (resident, limit)
        };
        self.killed.store(true, Ordering::SeqCst);
        self.listening.store(false, Ordering::SeqCst);
        self.shutdown.cancel();
        self.spec.ground_truth.log(
            &self.spec.pod_name,
            Transition::OomKilled,
            serde_json::json!({
                "resident": resident.iter().map(|(m, b)| serde_json::json!({"model": m, "bytes": b})).collect::<Vec<_>>(),
                "limit": limit,
            }),
        );
        let _ = self
            .events
            .send(RuntimeEvent::OomKilled { resident, limit });
    }
}

/// `d × f` without panicking (negative or NaN is zero, overflow is `Duration::MAX`).
fn mul(d: Duration, f: f64) -> Duration {
    duration_from_ms(d.as_secs_f64() * 1000.0 * f)
}

/// `49152` as vLLM prints it: `49,152`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
