//! The real engine: each lab pod's serving container is a real `ollama serve` (the peers
//! script's build) on this machine, bound to the pod's address (`OLLAMA_HOST=127.0.0.N:PORT`),
//! with the container's env (`env` values and `envFrom` ConfigMaps, e.g. `OLLAMA_KEEP_ALIVE`),
//! its models directory on the pod's volume (see `volume`), started inside its own memory
//! cgroup with the container's limit (see `cgroup`). Its stdout and stderr are the container's
//! log. Exec runs the real command on this machine inside the cgroup with the container's env;
//! the container's `/sys/fs/cgroup` paths are its cgroup's files, its loopback
//! (`127.0.0.1:PORT`, `localhost:PORT`) is the pod's address, and the paths of its ConfigMap
//! volumes (the manifests' probe script at `/etc/readygap`) are those files written on this
//! machine, as inside a pod.
//!
//! Lifecycle, as a container runtime and the kubelet do it: stop sends SIGTERM, then SIGKILL
//! at the end of the grace period, then kills what is left in the cgroup (Ollama's runner
//! processes). When the kernel's OOM killer kills the main process (the cgroup's `oom_kill`
//! rose and the process died of SIGKILL that the engine did not send), the container is
//! OOMKilled (exit 137); when it kills only a runner process, the container lives on, as on a
//! node without `memory.oom.group` (cgroup v1).
//!
//! The same engine runs llama.cpp's `llama-server` instead (`server` is
//! [`Server::LlamaServer`]): its command line, listening and residency are
//! `super::llama_server`'s, everything else is shared.

use super::cgroup::MemoryCgroup;
use super::llama_server;
use super::volume::{Volumes, link_tree};
use super::{OllamaPeer, Server};
use crate::ground_truth::{GroundTruth, Transition};
use crate::runtime::{
    ExecChunk, ExecStream, MemorySnapshot, RealProcess, RuntimeEvent, RuntimeHandle,
};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

/// Kubernetes' default `terminationGracePeriodSeconds`.
const DEFAULT_GRACE: Duration = Duration::from_secs(30);
/// How much of a container's output is kept (the oldest bytes go first).
const LOG_CAP: usize = 4 << 20;
/// How often the engine reads `/api/ps` (the container's residency for the Summary API and
/// the kubelet's OOM report).
const PS_EVERY: Duration = Duration::from_millis(250);
/// Where the container's models live when its spec does not say (`$HOME/.ollama/models`
/// with the image's `HOME=/root`).
const DEFAULT_MODELS: &str = "/root/.ollama/models";
/// The image's PATH, after the peers' bin directory (where `ollama` is).
const IMAGE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The real engine of one lab: the peers, the lab's volumes and working directory.
#[derive(Debug)]
pub struct OllamaEngine {
    pub peer: OllamaPeer,
    pub volumes: Volumes,
    /// The lab's directory (volumes, containers' homes); removed with the engine.
    pub root: PathBuf,
    /// Unique per lab in this process (cgroup names).
    lab_id: String,
    containers: AtomicU64,
    http: reqwest::Client,
    /// The real server each container runs.
    pub server: Server,
}

impl Drop for OllamaEngine {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// What the kubelet hands the engine for one container start.
pub struct ContainerSpec<'a> {
    pub namespace: &'a str,
    pub pod_name: &'a str,
    pub pod_uid: &'a str,
    /// The pod object (its first container is the one started).
    pub pod: &'a Value,
    pub ip: Ipv4Addr,
    pub port: u16,
    /// Bytes, 0 = none.
    pub memory_limit: u64,
    /// Put the peers' models on a new emptyDir (the lab's first emptyDir pod had pulled them).
    pub seed_empty_dir: bool,
    pub ground_truth: GroundTruth,
}

static LABS: AtomicU64 = AtomicU64::new(0);

impl OllamaEngine {
    pub fn new(peer: OllamaPeer) -> Result<Self, String> {
        // Containers of a lab process that died without stopping them.
        super::cgroup::sweep_stale();
        let n = LABS.fetch_add(1, Ordering::SeqCst);
        let lab_id = format!("{}-{n}", std::process::id());
        let root = std::env::temp_dir().join(format!("readygap-engine-{lab_id}"));
        std::fs::create_dir_all(&root)
            .map_err(|e| format!("creating the engine's directory {}: {e}", root.display()))?;
        let http = reqwest::Client::builder()
            .no_proxy()
            .build()
            .map_err(|e| format!("building the engine's HTTP client: {e}"))?;
        Ok(Self {
            peer,
            volumes: Volumes::new(root.join("volumes")),
            root,
            lab_id,
            containers: AtomicU64::new(0),
            http,
            server: Server::Ollama,
        })
    }

    /// Where the container's models are on this machine: the volume mounted over the models
    /// path (a PVC's directory, the pod's emptyDir), seeded with the peers' models when the
    /// volume is new and should hold them; else a directory of this container alone.
    fn models_dir(
        &self,
        spec: &ContainerSpec<'_>,
        models_path: &str,
        own: &Path,
    ) -> std::io::Result<PathBuf> {
        let c = &spec.pod["spec"]["containers"][0];
        let mounts = c["volumeMounts"].as_array().cloned().unwrap_or_default();
        let mount = mounts
            .iter()
            .filter_map(|m| Some((m["name"].as_str()?, m["mountPath"].as_str()?)))
            .filter(|(_, p)| {
                let p = p.trim_end_matches('/');
                models_path == p || models_path.starts_with(&format!("{p}/"))
            })
            .max_by_key(|(_, p)| p.len());
        let volume = mount.and_then(|(name, path)| {
            let vols = spec.pod["spec"]["volumes"].as_array()?;
            let v = vols.iter().find(|v| v["name"] == name)?.clone();
            Some((name.to_string(), path.trim_end_matches('/').to_string(), v))
        });
        let Some((name, mount_path, v)) = volume else {
            let dir = own.join("models");
            std::fs::create_dir_all(&dir)?;
            return Ok(dir);
        };
        let rest = models_path[mount_path.len()..].trim_start_matches('/');
        let (root, fresh, seed) =
            if let Some(claim) = v["persistentVolumeClaim"]["claimName"].as_str() {
                let (d, fresh) = self.volumes.claim(spec.namespace, claim)?;
                (d, fresh, true)
            } else {
                let (d, fresh) = self.volumes.empty_dir(spec.pod_uid, &name)?;
                (d, fresh, spec.seed_empty_dir)
            };
        let dir = if rest.is_empty() {
            root
        } else {
            root.join(rest)
        };
        if fresh && seed {
            link_tree(&self.peer.models, &dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    /// Start the container's `ollama serve`. `config_map(name)` finds ConfigMaps of the pod's
    /// namespace (for `envFrom`).
    pub async fn start(
        self: &Arc<Self>,
        spec: ContainerSpec<'_>,
        config_map: impl Fn(&str) -> Option<Value>,
        events: UnboundedSender<RuntimeEvent>,
    ) -> std::io::Result<RuntimeHandle> {
        let n = self.containers.fetch_add(1, Ordering::SeqCst);
        let cname = format!("{}-{}-{n}", self.lab_id, spec.pod_name);
        let own = self.root.join("containers").join(&cname);
        let home = own.join("home");
        std::fs::create_dir_all(&home)?;
        let c = &spec.pod["spec"]["containers"][0];
        let mut env = container_env(c, &config_map);
        let llama = self.server == Server::LlamaServer;
        let models_path = if llama {
            llama_server::models_path(c)
        } else {
            env.iter()
                .find(|(k, _)| k == "OLLAMA_MODELS")
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| DEFAULT_MODELS.into())
        };
        let models = self.models_dir(&spec, models_path.trim_end_matches('/'), &own)?;
        let config_mounts = config_map_volumes(spec.pod, &own.join("configmaps"), &config_map)?;
        let bin_dir = self.peer.bin.parent().unwrap_or(Path::new("/"));
        let set = |env: &mut Vec<(String, String)>, k: &str, v: String| {
            env.retain(|(key, _)| key != k);
            env.push((k.to_string(), v));
        };
        // The container's view of its own env: the image's PATH and HOME, the pod's hostname.
        if !env.iter().any(|(k, _)| k == "PATH") {
            set(
                &mut env,
                "PATH",
                format!("{}:{IMAGE_PATH}", bin_dir.display()),
            );
        }
        set(&mut env, "HOME", home.display().to_string());
        set(&mut env, "HOSTNAME", spec.pod_name.to_string());
        let (serve, served) = if llama {
            let argv = llama_server::argv(
                &self.peer.bin,
                c,
                &spec.ip.to_string(),
                spec.port,
                models_path.trim_end_matches('/'),
                &models,
            );
            let local_model = argv
                .windows(2)
                .find(|w| w[0] == "-m" || w[0] == "--model")
                .map(|w| PathBuf::from(&w[1]));
            let served = llama_server::resident_after_health(200, c, local_model.as_deref());
            (argv, Some(served))
        } else {
            // 0.0.0.0 inside the pod is the pod's address here.
            set(
                &mut env,
                "OLLAMA_HOST",
                format!("{}:{}", spec.ip, spec.port),
            );
            set(&mut env, "OLLAMA_MODELS", models.display().to_string());
            (
                vec![self.peer.bin.display().to_string(), "serve".into()],
                None,
            )
        };
        let cgroup = MemoryCgroup::create(&cname, spec.memory_limit)?;
        let oom_before = cgroup.oom_kills();
        let argv = cgroup.wrap_argv(&serve);
        let mut cmd = tokio::process::Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .current_dir(&home)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = match cmd.spawn() {
            Ok(ch) => ch,
            Err(e) => {
                cgroup.remove(Duration::from_secs(1));
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("starting {}: {e}", self.peer.bin.display()),
                ));
            }
        };
        let pid = child.id().unwrap_or(0);
        let container = Arc::new(RealContainer {
            pod_name: spec.pod_name.to_string(),
            ip: spec.ip,
            port: spec.port,
            pid,
            cgroup,
            env,
            cwd: home,
            models,
            config_mounts,
            listening: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            exited: AtomicBool::new(false),
            oom_killed: AtomicBool::new(false),
            resident: Mutex::new(Vec::new()),
            log: Arc::new(Mutex::new(VecDeque::new())),
            lines: Arc::new(crate::runtime::request_log::ContainerLog::new()),
            running_execs: Arc::new(AtomicUsize::new(0)),
            cancel: CancellationToken::new(),
            done: tokio::sync::Notify::new(),
            exit_code: Mutex::new(None),
            http: self.http.clone(),
            served,
        });
        for out in [
            child
                .stdout
                .take()
                .map(|o| Box::new(o) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
            child
                .stderr
                .take()
                .map(|o| Box::new(o) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
        ]
        .into_iter()
        .flatten()
        {
            tokio::spawn(copy_log(
                out,
                container.log.clone(),
                container.lines.clone(),
            ));
        }
        tokio::spawn(wait_exit(
            container.clone(),
            child,
            oom_before,
            events.clone(),
        ));
        tokio::spawn(watch_listen(
            container.clone(),
            spec.ground_truth.clone(),
            events.clone(),
        ));
        tokio::spawn(watch_ps(container.clone(), events));
        Ok(RuntimeHandle::real(container))
    }
}

/// The ConfigMap volumes the container mounts, written under `dir` as the kubelet writes them
/// (pkg/volume/configmap/configmap.go, `MakePayload`: every key of `data` and `binaryData`,
/// or only `items` at their `path`s; file mode `items[].mode`, else `defaultMode`, else
/// 0644): (mount path, the directory here, or the one file for a `subPath` mount). A
/// ConfigMap that is missing leaves the mount out (the real kubelet would not start the
/// container; the lab's kubelet has already checked what it needs).
fn config_map_volumes(
    pod: &Value,
    dir: &Path,
    config_map: &impl Fn(&str) -> Option<Value>,
) -> std::io::Result<Vec<(String, PathBuf)>> {
    use base64::Engine;
    use std::os::unix::fs::PermissionsExt;
    let c = &pod["spec"]["containers"][0];
    let volumes = pod["spec"]["volumes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut out = Vec::new();
    for m in c["volumeMounts"].as_array().into_iter().flatten() {
        let (Some(name), Some(path)) = (m["name"].as_str(), m["mountPath"].as_str()) else {
            continue;
        };
        let Some(v) = volumes.iter().find(|v| v["name"] == name) else {
            continue;
        };
        let Some(cm_name) = v["configMap"]["name"].as_str() else {
            continue;
        };
        let Some(cm) = config_map(cm_name) else {
            continue;
        };
        let here = dir.join(name);
        if !here.exists() {
            std::fs::create_dir_all(&here)?;
            let mut files: Vec<(String, Vec<u8>)> = Vec::new();
            for (k, val) in cm["data"].as_object().into_iter().flatten() {
                files.push((k.clone(), val.as_str().unwrap_or("").as_bytes().to_vec()));
            }
            for (k, val) in cm["binaryData"].as_object().into_iter().flatten() {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(val.as_str().unwrap_or(""))
                    .unwrap_or_default();
                files.push((k.clone(), bytes));
            }
            let default_mode = v["configMap"]["defaultMode"].as_u64().unwrap_or(0o644) as u32;
            let items = v["configMap"]["items"].as_array();
            for (key, bytes) in files {
                let (rel, mode) = match items {
                    None => (key.clone(), default_mode),
                    Some(items) => match items.iter().find(|i| i["key"] == key.as_str()) {
                        Some(i) => (
                            i["path"].as_str().unwrap_or(&key).to_string(),
                            i["mode"].as_u64().map_or(default_mode, |m| m as u32),
                        ),
                        None => continue,
                    },
                };
                // A path that climbs out of the volume is refused by validation; never here.
                if rel.split('/').any(|p| p == ".." || p.is_empty()) {
                    continue;
                }
                let f = here.join(&rel);
                if let Some(parent) = f.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(&f, bytes)?;
                std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode))?;
            }
        }
        let path = path.trim_end_matches('/').to_string();
        match m["subPath"].as_str().filter(|s| !s.is_empty()) {
            Some(sub) => out.push((path, here.join(sub))),
            None => out.push((path, here)),
        }
    }
    Ok(out)
}

/// The container's env as the kubelet builds it: `envFrom` ConfigMaps (with their prefix),
/// then `env` values on top (`valueFrom` is left out: the lab has no Secrets or field refs).
fn container_env(c: &Value, config_map: &impl Fn(&str) -> Option<Value>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::new();
    let mut put = |k: String, v: String| {
        env.retain(|(key, _)| *key != k);
        env.push((k, v));
    };
    for src in c["envFrom"].as_array().into_iter().flatten() {
        let Some(name) = src["configMapRef"]["name"].as_str() else {
            continue;
        };
        let prefix = src["prefix"].as_str().unwrap_or("");
        if let Some(cm) = config_map(name)
            && let Some(data) = cm["data"].as_object()
        {
            for (k, v) in data {
                if let Some(v) = v.as_str() {
                    put(format!("{prefix}{k}"), v.to_string());
                }
            }
        }
    }
    for e in c["env"].as_array().into_iter().flatten() {
        if let (Some(k), Some(v)) = (e["name"].as_str(), e["value"].as_str()) {
            put(k.to_string(), v.to_string());
        }
    }
    env
}

/// Copy one output stream of the process into the byte tail (for error messages) and, line by
/// line, into the container log that `pods/log` serves, each line stamped when it was read (as
/// the kubelet's CRI log stamps a line when the runtime reads it from the pipe).
async fn copy_log(
    mut out: Box<dyn tokio::io::AsyncRead + Send + Unpin>,
    log: Arc<Mutex<VecDeque<u8>>>,
    lines: Arc<crate::runtime::request_log::ContainerLog>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    let mut partial: Vec<u8> = Vec::new();
    while let Ok(n) = out.read(&mut buf).await {
        if n == 0 {
            break;
        }
        {
            let mut l = lock(&log);
            l.extend(&buf[..n]);
            let over = l.len().saturating_sub(LOG_CAP);
            l.drain(..over);
        }
        partial.extend_from_slice(&buf[..n]);
        let now = chrono::Utc::now();
        while let Some(pos) = partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = partial.drain(..=pos).collect();
            let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
            lines.write(now, text.trim_end_matches('\r').to_string());
        }
        if partial.len() > LOG_CAP {
            partial.clear();
        }
    }
    if !partial.is_empty() {
        lines.write(
            chrono::Utc::now(),
            String::from_utf8_lossy(&partial).into_owned(),
        );
    }
}

/// Wait for the main process to end; tell the kubelet when the kernel OOM-killed it.
async fn wait_exit(
    c: Arc<RealContainer>,
    mut child: tokio::process::Child,
    oom_before: u64,
    events: UnboundedSender<RuntimeEvent>,
) {
    use std::os::unix::process::ExitStatusExt;
    let status = child.wait().await;
    let (code, signal) = match &status {
        Ok(s) => (s.code(), s.signal()),
        Err(_) => (None, None),
    };
    let exit_code = code.unwrap_or_else(|| 128 + signal.unwrap_or(9));
    *lock(&c.exit_code) = Some(exit_code);
    c.listening.store(false, Ordering::SeqCst);
    c.exited.store(true, Ordering::SeqCst);
    c.lines.close();
    c.cancel.cancel();
    c.done.notify_waiters();
    let oom_now = c.cgroup.oom_kills();
    if c.stopping.load(Ordering::SeqCst) {
        return;
    }
    if signal == Some(9) && oom_now > oom_before {
        c.oom_killed.store(true, Ordering::SeqCst);
        let resident = c.resident();
        c.cgroup.kill_all();
        let _ = events.send(RuntimeEvent::OomKilled {
            resident,
            limit: c.cgroup.limit,
        });
    } else {
        tracing::warn!(
            pod = %c.pod_name,
            "lab engine: {} exited with {exit_code} (log: {})",
            if c.served.is_some() { "llama-server" } else { "ollama serve" },
            c.log_tail(400)
        );
        c.cgroup.kill_all();
        let _ = events.send(RuntimeEvent::Exited { exit_code });
    }
}

/// Wait until the process answers HTTP (what the runtime's `Listening` means).
async fn watch_listen(
    c: Arc<RealContainer>,
    gt: GroundTruth,
    events: UnboundedSender<RuntimeEvent>,
) {
    // llama-server answers `/health` (503 while loading) as soon as it listens; `/` would
    // be its web UI.
    let llama = c.served.is_some();
    let url = if llama {
        format!("http://{}{}", c.addr(), llama_server::HEALTH)
    } else {
        format!("http://{}/", c.addr())
    };
    loop {
        if c.cancel.is_cancelled() {
            return;
        }
        let ok = matches!(
            c.http.get(&url).timeout(Duration::from_millis(500)).send().await,
            Ok(r) if r.status().is_success() || llama
        );
        if ok {
            c.listening.store(true, Ordering::SeqCst);
            gt.log(
                &c.pod_name,
                Transition::RuntimeListening,
                json!({"addr": c.addr().to_string(),
                       "engine": if llama { "llamacpp" } else { "ollama" }, "pid": c.pid}),
            );
            let _ = events.send(RuntimeEvent::Listening);
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            _ = c.cancel.cancelled() => return,
        }
    }
}

/// Follow `/api/ps`: the models resident now, with Ollama's own sizes (llama-server:
/// `/health`, its one model resident once it answers 200).
async fn watch_ps(c: Arc<RealContainer>, events: UnboundedSender<RuntimeEvent>) {
    let url = match c.served {
        Some(_) => format!("http://{}{}", c.addr(), llama_server::HEALTH),
        None => format!("http://{}/api/ps", c.addr()),
    };
    loop {
        tokio::select! {
            _ = tokio::time::sleep(PS_EVERY) => {}
            _ = c.cancel.cancelled() => return,
        }
        if !c.is_listening() {
            continue;
        }
        let Ok(r) = c
            .http
            .get(&url)
            .timeout(Duration::from_secs(2))
            .send()
            .await
        else {
            continue;
        };
        let now: Vec<(String, u64)> = match &c.served {
            Some(served) if r.status().as_u16() == 200 => served.clone(),
            Some(_) => Vec::new(),
            None => {
                let Ok(v) = r.json::<Value>().await else {
                    continue;
                };
                v["models"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|m| Some((m["name"].as_str()?.to_string(), m["size"].as_u64()?)))
                    .collect()
            }
        };
        let before = std::mem::replace(&mut *lock(&c.resident), now.clone());
        for (m, _) in &now {
            if !before.iter().any(|(b, _)| b == m) {
                let _ = events.send(RuntimeEvent::ModelResident { model: m.clone() });
            }
        }
        for (m, _) in before {
            if !now.iter().any(|(n, _)| *n == m) {
                let _ = events.send(RuntimeEvent::ModelUnloaded { model: m });
            }
        }
    }
}

/// One real container of the engine.
pub struct RealContainer {
    pod_name: String,
    ip: Ipv4Addr,
    port: u16,
    /// The main process (`ollama serve`).
    pid: u32,
    cgroup: MemoryCgroup,
    env: Vec<(String, String)>,
    cwd: PathBuf,
    /// The models directory on this machine.
    pub models: PathBuf,
    /// The container's ConfigMap volumes: (mount path in the container, directory here).
    config_mounts: Vec<(String, PathBuf)>,
    listening: AtomicBool,
    stopping: AtomicBool,
    exited: AtomicBool,
    oom_killed: AtomicBool,
    resident: Mutex<Vec<(String, u64)>>,
    log: Arc<Mutex<VecDeque<u8>>>,
    /// The same output, line by line with the instant each was read: what `pods/log` serves.
    lines: Arc<crate::runtime::request_log::ContainerLog>,
    running_execs: Arc<AtomicUsize>,
    /// Ends the watchers.
    cancel: CancellationToken,
    done: tokio::sync::Notify,
    exit_code: Mutex<Option<i32>>,
    http: reqwest::Client,
    /// llama-server's one model (name, file size), resident once `/health` answers 200;
    /// `None`: the container runs `ollama serve`.
    served: Option<Vec<(String, u64)>>,
}

/// Counts a running exec until dropped.
struct ExecGuard(Arc<AtomicUsize>);

impl Drop for ExecGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn signal(pid: u32, sig: &str) {
    let _ = std::process::Command::new("kill")
        .args(["-s", sig, &pid.to_string()])
        .stderr(std::process::Stdio::null())
        .status();
}

impl RealContainer {
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((self.ip, self.port))
    }

    /// The main process id on this machine.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The container's cgroup directory on this machine.
    pub fn cgroup_dir(&self) -> &Path {
        &self.cgroup.dir
    }

    pub fn is_listening(&self) -> bool {
        self.listening.load(Ordering::SeqCst)
    }

    pub fn oom_killed(&self) -> bool {
        self.oom_killed.load(Ordering::SeqCst)
    }

    /// The main process's exit code, once it ended.
    pub fn exit_code(&self) -> Option<i32> {
        *lock(&self.exit_code)
    }

    pub fn memory(&self) -> MemorySnapshot {
        self.cgroup.snapshot()
    }

    /// (oom_kill, failcnt) of the container's cgroup.
    pub fn oom_counters(&self) -> (u64, u64) {
        (self.cgroup.oom_kills(), self.cgroup.failcnt())
    }

    /// The models `/api/ps` listed last (name, size).
    pub fn resident(&self) -> Vec<(String, u64)> {
        lock(&self.resident).clone()
    }

    pub fn running_execs(&self) -> usize {
        self.running_execs.load(Ordering::SeqCst)
    }

    /// The container's log, line by line (what `pods/log` serves).
    pub fn lines(&self) -> Arc<crate::runtime::request_log::ContainerLog> {
        self.lines.clone()
    }

    /// Everything the container printed (stdout and stderr, in arrival order; the last
    /// 4 MiB).
    pub fn log_text(&self) -> String {
        let l = lock(&self.log);
        String::from_utf8_lossy(&l.iter().copied().collect::<Vec<u8>>()).into_owned()
    }

    fn log_tail(&self, n: usize) -> String {
        let t = self.log_text();
        let start = t.len().saturating_sub(n);
        t.get(start..).unwrap_or("").to_string()
    }

    /// An argument as the container sees it: its cgroup at `/sys/fs/cgroup`, its loopback the
    /// pod's address.
    fn container_view(&self, arg: &str) -> String {
        let a = self.cgroup.container_view(arg);
        let pod = format!("{}:{}", self.ip, self.port);
        let a = a
            .replace(&format!("127.0.0.1:{}", self.port), &pod)
            .replace(&format!("localhost:{}", self.port), &pod);
        for (mount, here) in &self.config_mounts {
            if a == *mount {
                return here.display().to_string();
            }
            if let Some(rest) = a.strip_prefix(&format!("{mount}/")) {
                return here.join(rest).display().to_string();
            }
        }
        a
    }

    /// Run `argv` on this machine inside the container's cgroup with its env.
    pub fn exec(&self, argv: Vec<String>) -> ExecStream {
        let (tx, stream) = ExecStream::channel();
        if self.exited.load(Ordering::SeqCst) || argv.is_empty() {
            tokio::spawn(async move {
                let _ = tx
                    .send(ExecChunk::Stderr(
                        b"error: container is not running\n".to_vec(),
                    ))
                    .await;
                let _ = tx.send(ExecChunk::Exit(126)).await;
            });
            return stream;
        }
        let argv: Vec<String> = argv.iter().map(|a| self.container_view(a)).collect();
        let wrapped = self.cgroup.wrap_argv(&argv);
        let mut cmd = tokio::process::Command::new(&wrapped[0]);
        cmd.args(&wrapped[1..])
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .current_dir(&self.cwd)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        self.running_execs.fetch_add(1, Ordering::SeqCst);
        let guard = ExecGuard(self.running_execs.clone());
        tokio::spawn(async move {
            let _guard = guard;
            let mut child = match cmd.spawn() {
                Ok(c) => c,
                Err(e) => {
                    let _ = tx
                        .send(ExecChunk::Stderr(format!("exec: {e}\n").into_bytes()))
                        .await;
                    let _ = tx.send(ExecChunk::Exit(126)).await;
                    return;
                }
            };
            let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
            let (mut ob, mut eb) = (vec![0u8; 8192], vec![0u8; 8192]);
            loop {
                tokio::select! {
                    n = async { match out.as_mut() { Some(o) => o.read(&mut ob).await, None => std::future::pending().await } } => {
                        match n {
                            Ok(n) if n > 0 => if tx.send(ExecChunk::Stdout(ob[..n].to_vec())).await.is_err() { return; },
                            _ => out = None,
                        }
                    }
                    n = async { match err.as_mut() { Some(e) => e.read(&mut eb).await, None => std::future::pending().await } } => {
                        match n {
                            Ok(n) if n > 0 => if tx.send(ExecChunk::Stderr(eb[..n].to_vec())).await.is_err() { return; },
                            _ => err = None,
                        }
                    }
                    _ = tx.closed() => return,
                }
                if out.is_none() && err.is_none() {
                    break;
                }
            }
            use std::os::unix::process::ExitStatusExt;
            let code = match child.wait().await {
                Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(9)),
                Err(_) => 126,
            };
            let _ = tx.send(ExecChunk::Exit(code)).await;
        });
        stream
    }

    /// SIGTERM, SIGKILL at `kill_at` (default: 30 s from now), then kill what is left in the
    /// cgroup and remove it.
    pub async fn stop(&self, kill_at: Option<Instant>) {
        self.stopping.store(true, Ordering::SeqCst);
        let kill_at = kill_at.unwrap_or_else(|| Instant::now() + DEFAULT_GRACE);
        if !self.exited.load(Ordering::SeqCst) {
            let done = self.done.notified();
            tokio::pin!(done);
            done.as_mut().enable();
            if !self.exited.load(Ordering::SeqCst) {
                signal(self.pid, "TERM");
                let in_time = tokio::select! {
                    _ = &mut done => true,
                    _ = tokio::time::sleep_until(kill_at.into()) => false,
                };
                if !in_time && !self.exited.load(Ordering::SeqCst) {
                    let done = self.done.notified();
                    tokio::pin!(done);
                    done.as_mut().enable();
                    signal(self.pid, "KILL");
                    if !self.exited.load(Ordering::SeqCst) {
                        let _ = tokio::time::timeout(Duration::from_secs(5), done).await;
                    }
                }
            }
        }
        self.listening.store(false, Ordering::SeqCst);
        self.cancel.cancel();
        let cg = MemoryCgroup {
            version: self.cgroup.version,
            dir: self.cgroup.dir.clone(),
            limit: self.cgroup.limit,
        };
        let _ = tokio::task::spawn_blocking(move || cg.remove(Duration::from_secs(5))).await;
    }
}

impl RealProcess for RealContainer {
    fn exec(&self, argv: Vec<String>) -> ExecStream {
        RealContainer::exec(self, argv)
    }
    fn stop(&self, kill_at: Option<Instant>) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(RealContainer::stop(self, kill_at))
    }
    fn lines(&self) -> Arc<crate::runtime::request_log::ContainerLog> {
        RealContainer::lines(self)
    }
    fn memory(&self) -> MemorySnapshot {
        RealContainer::memory(self)
    }
    fn is_listening(&self) -> bool {
        RealContainer::is_listening(self)
    }
    fn addr(&self) -> SocketAddr {
        RealContainer::addr(self)
    }
    fn resident(&self) -> Vec<(String, u64)> {
        RealContainer::resident(self)
    }
    fn running_execs(&self) -> usize {
        RealContainer::running_execs(self)
    }
    fn oom_killed(&self) -> bool {
        RealContainer::oom_killed(self)
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The real engine's container behind a runtime handle, if it is one.
pub trait AsReal {
    fn as_real(&self) -> Option<&RealContainer>;
}

impl AsReal for RuntimeHandle {
    fn as_real(&self) -> Option<&RealContainer> {
        self.as_real_process()
            .and_then(|p| p.as_any().downcast_ref::<RealContainer>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn config_map_volumes_are_written_as_the_kubelet_writes_them() {
        let pod = json!({"spec": {
            "containers": [{"volumeMounts": [
                {"name": "probe", "mountPath": "/etc/readygap/"},
                {"name": "picked", "mountPath": "/etc/picked"},
                {"name": "one", "mountPath": "/etc/one.sh", "subPath": "run.sh"},
                {"name": "models", "mountPath": "/root/.ollama"},
            ]}],
            "volumes": [
                {"name": "probe", "configMap": {"name": "ollama-probe"}},
                {"name": "picked", "configMap": {"name": "ollama-probe", "defaultMode": 0o755,
                    "items": [{"key": "ready-inference.sh", "path": "bin/ready"}]}},
                {"name": "one", "configMap": {"name": "scripts"}},
                {"name": "models", "persistentVolumeClaim": {"claimName": "m"}},
            ],
        }});
        let cms = |name: &str| match name {
            "ollama-probe" => Some(
                json!({"data": {"ready-inference.sh": "#!/bin/bash\nexit 0\n",
                "other": "x"}, "binaryData": {"blob": "AAEC"}}),
            ),
            "scripts" => Some(json!({"data": {"run.sh": "echo hi"}})),
            _ => None,
        };
        let d = tempfile::tempdir().unwrap();
        let mounts = config_map_volumes(&pod, d.path(), &cms).unwrap();
        let probe = d.path().join("probe");
        assert_eq!(
            mounts,
            vec![
                ("/etc/readygap".to_string(), probe.clone()),
                ("/etc/picked".to_string(), d.path().join("picked")),
                ("/etc/one.sh".to_string(), d.path().join("one/run.sh")),
            ]
        );
        let script = probe.join("ready-inference.sh");
        assert_eq!(
            std::fs::read_to_string(&script).unwrap(),
            "#!/bin/bash\nexit 0\n"
        );
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&script), 0o644);
        assert_eq!(std::fs::read(probe.join("blob")).unwrap(), [0, 1, 2]);
        // `items`: only the listed key, at its path, with the volume's defaultMode.
        let picked = d.path().join("picked");
        assert_eq!(mode(&picked.join("bin/ready")), 0o755);
        assert!(!picked.join("other").exists() && !picked.join("ready-inference.sh").exists());
    }
}
