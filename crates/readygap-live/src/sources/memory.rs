//! Memory of the serving container: one long-lived exec per container streams its cgroup
//! files (v2 or v1) every interval, and pure parsers turn each block into a
//! [`MemorySample`]. Every exec names the serving container (see `container`). When exec is
//! forbidden (HTTP 403), refused for the container (400) or the image has no `sh`, the
//! kubelet Summary API through the node proxy is the fallback, for that same container,
//! and the feed says which source is in use and why; so it is when no cgroup memory file
//! can be read in the container.
//!
//! The stream: `sh -c 'while :; do head -n 200 F1 F2 F3 F4; echo @@readygap; sleep S; done'`.
//! With several files GNU `head` prints a `==> FILE <==` header before each, so a block
//! between two `@@readygap` lines holds the four files, named. An image with a shell but
//! without `head` or `sleep` (no coreutils; the detection asks `command -v`) gets the same
//! blocks from the shell's own builtins (`read`, `echo`, `[`: POSIX, in dash, bash and
//! busybox ash), one block per line readygap writes to the exec's stdin every interval,
//! since a POSIX shell has no builtin sleep.
//!
//! Working set = usage − inactive file cache (floored at 0), as the kubelet computes it.

use chrono::Utc;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams};
use readygap_core::event::{Event, EventKind, MemorySample, MemorySource, Source};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The line that ends each block of the stream.
pub const MARKER: &str = "@@readygap";

/// cgroup v2 files, in the order the stream prints them.
pub const V2_FILES: [&str; 4] = [
    "/sys/fs/cgroup/memory.current",
    "/sys/fs/cgroup/memory.max",
    "/sys/fs/cgroup/memory.events",
    "/sys/fs/cgroup/memory.stat",
];

/// cgroup v1 files, in the order the stream prints them.
pub const V1_FILES: [&str; 4] = [
    "/sys/fs/cgroup/memory/memory.usage_in_bytes",
    "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    "/sys/fs/cgroup/memory/memory.oom_control",
    "/sys/fs/cgroup/memory/memory.stat",
];

/// v1 reports "no limit" as a page-rounded `i64::MAX`; anything this large is no limit.
const V1_NO_LIMIT_ABOVE: u64 = 1 << 62;

/// Which cgroup hierarchy a container sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    V1,
    V2,
}

impl CgroupVersion {
    /// The four files streamed for this version.
    pub fn files(self) -> [&'static str; 4] {
        match self {
            CgroupVersion::V1 => V1_FILES,
            CgroupVersion::V2 => V2_FILES,
        }
    }

    pub fn source(self) -> MemorySource {
        match self {
            CgroupVersion::V1 => MemorySource::CgroupV1,
            CgroupVersion::V2 => MemorySource::CgroupV2,
        }
    }

    /// The files for a v1 hierarchy rooted elsewhere (`/sys/fs/cgroup/memory/SUBPATH`).
    pub fn v1_files_under(dir: &str) -> [String; 4] {
        ["usage_in_bytes", "limit_in_bytes", "oom_control", "stat"]
            .map(|f| format!("{}/memory.{f}", dir.trim_end_matches('/')))
    }
}

/// What one block of cgroup files says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CgroupReading {
    pub usage: u64,
    /// `None`: no limit.
    pub limit: Option<u64>,
    pub oom_kill: Option<u64>,
    pub inactive_file: Option<u64>,
}

impl CgroupReading {
    /// Usage minus inactive file cache, floored at 0.
    pub fn working_set(&self) -> Option<u64> {
        self.inactive_file.map(|i| self.usage.saturating_sub(i))
    }

    /// The sample for a pod.
    pub fn sample(&self, pod: &str, source: MemorySource) -> MemorySample {
        MemorySample {
            pod: pod.to_string(),
            current: self.usage,
            working_set: self.working_set(),
            limit: self.limit,
            oom_kill: self.oom_kill,
            source,
        }
    }
}

fn number(text: &str, what: &str) -> Result<u64, String> {
    let t = text.trim();
    t.parse::<u64>()
        .map_err(|_| format!("{what}: expected a number, got {t:?}"))
}

/// The value of `key` in a `key value` per line file (`memory.stat`, `memory.events`).
pub fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        (it.next() == Some(key))
            .then(|| it.next().and_then(|v| v.parse().ok()))
            .flatten()
    })
}

/// Parse cgroup v2 files: `memory.current`, `memory.max` (`max` = no limit), `memory.events`
/// (`oom_kill`), `memory.stat` (`inactive_file`).
pub fn parse_v2(
    current: &str,
    max: &str,
    events: &str,
    stat: &str,
) -> Result<CgroupReading, String> {
    let usage = number(current, "memory.current")?;
    let limit = match max.trim() {
        "max" => None,
        other => Some(number(other, "memory.max")?),
    };
    Ok(CgroupReading {
        usage,
        limit,
        oom_kill: keyed(events, "oom_kill"),
        inactive_file: keyed(stat, "inactive_file"),
    })
}

/// Parse cgroup v1 files: `memory.usage_in_bytes`, `memory.limit_in_bytes` (a huge value is
/// no limit), `memory.oom_control` (`oom_kill`), `memory.stat` (`total_inactive_file`, else
/// `inactive_file`).
pub fn parse_v1(
    usage: &str,
    limit: &str,
    oom_control: &str,
    stat: &str,
) -> Result<CgroupReading, String> {
    let usage = number(usage, "memory.usage_in_bytes")?;
    let limit = number(limit, "memory.limit_in_bytes")?;
    Ok(CgroupReading {
        usage,
        limit: (limit < V1_NO_LIMIT_ABOVE).then_some(limit),
        oom_kill: keyed(oom_control, "oom_kill"),
        inactive_file: keyed(stat, "total_inactive_file").or_else(|| keyed(stat, "inactive_file")),
    })
}

/// Split `head` output of several files into (file, content) by its `==> FILE <==` headers.
pub fn split_head_output(block: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in block.lines() {
        if let Some(name) = line
            .strip_prefix("==> ")
            .and_then(|r| r.strip_suffix(" <=="))
        {
            if let Some((f, c)) = current.take() {
                out.insert(f, c);
            }
            current = Some((name.to_string(), String::new()));
        } else if let Some((_, c)) = current.as_mut() {
            c.push_str(line);
            c.push('\n');
        }
    }
    if let Some((f, c)) = current {
        out.insert(f, c);
    }
    out
}

/// Parse one block of the stream (the four files of `version`, with headers).
pub fn parse_block(version: CgroupVersion, block: &str) -> Result<CgroupReading, String> {
    let files = split_head_output(block);
    let names = version.files();
    let get = |i: usize| {
        files
            .iter()
            .find(|(k, _)| k.ends_with(names[i].rsplit('/').next().unwrap_or(names[i])))
            .map(|(_, v)| v.as_str())
            .ok_or_else(|| format!("{} missing from the block", names[i]))
    };
    match version {
        CgroupVersion::V2 => parse_v2(get(0)?, get(1)?, get(2)?, get(3)?),
        CgroupVersion::V1 => parse_v1(get(0)?, get(1)?, get(2)?, get(3)?),
    }
}

/// Cuts a byte stream into blocks ended by a [`MARKER`] line.
#[derive(Debug, Default)]
pub struct BlockSplitter {
    buf: String,
    pending: Vec<u8>,
}

impl BlockSplitter {
    /// Feed bytes; returns the complete blocks (without the marker line).
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.pending.extend_from_slice(bytes);
        // Keep an incomplete UTF-8 sequence at the end for the next chunk; invalid bytes
        // elsewhere are replaced.
        let consumed = match std::str::from_utf8(&self.pending) {
            Ok(_) => self.pending.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => self.pending.len(),
        };
        let text = String::from_utf8_lossy(&self.pending[..consumed]).into_owned();
        self.pending.drain(..consumed);
        self.buf.push_str(&text);
        let mut blocks = Vec::new();
        while let Some(pos) = find_marker_line(&self.buf) {
            blocks.push(self.buf[..pos].to_string());
            let rest_start = self.buf[pos..]
                .find('\n')
                .map(|n| pos + n + 1)
                .unwrap_or(self.buf.len());
            self.buf.drain(..rest_start);
        }
        // Bound the buffer if the marker never comes.
        if self.buf.len() > 1 << 20 {
            self.buf.clear();
        }
        blocks
    }
}

/// The start of the first complete marker line.
fn find_marker_line(buf: &str) -> Option<usize> {
    let mut start = 0;
    for line in buf.split_inclusive('\n') {
        if !line.ends_with('\n') {
            return None;
        }
        if line.trim_end() == MARKER {
            return Some(start);
        }
        start += line.len();
    }
    None
}

/// The streaming shell script for a version and interval.
pub fn stream_script(version: CgroupVersion, interval: Duration) -> String {
    format!(
        "while :; do head -n 200 {}; echo {MARKER}; sleep {}; done",
        version.files().join(" "),
        interval.as_secs_f64()
    )
}

/// The same blocks as [`stream_script`] from the shell's builtins alone, one per line read
/// from stdin: for an image without `head` and `sleep`.
pub fn builtin_stream_script<S: AsRef<str>>(files: &[S]) -> String {
    let dumps: Vec<String> = files.iter().map(|f| format!("p {}", f.as_ref())).collect();
    format!(
        "p() {{ echo \"==> $1 <==\"; while IFS= read -r l || [ -n \"$l\" ]; do echo \"$l\"; done < \"$1\"; }}; while read -r _; do {}; echo {MARKER}; done",
        dumps.join("; ")
    )
}

/// The detection script, shell builtins only (`[`, `echo`, `command -v`): prints
/// `cgroup-v2` and/or `cgroup-v1` for the files that can be read, and `coreutils` when
/// `head` and `sleep` are there for the stream.
pub const DETECT_SCRIPT: &str = "if [ -r /sys/fs/cgroup/memory.current ]; then echo cgroup-v2; fi; if [ -r /sys/fs/cgroup/memory/memory.usage_in_bytes ]; then echo cgroup-v1; fi; if command -v head >/dev/null 2>&1 && command -v sleep >/dev/null 2>&1; then echo coreutils; fi; true";

/// What the detection script found in a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Detection {
    /// The hierarchy whose files can be read (v2 first), if any.
    pub version: Option<CgroupVersion>,
    /// `head` and `sleep` are there; else the stream uses the shell's builtins.
    pub coreutils: bool,
}

/// Reads the detection script's output.
pub fn detect(out: &str) -> Detection {
    let has = |w: &str| out.lines().any(|l| l.trim() == w);
    let version = if has("cgroup-v2") {
        Some(CgroupVersion::V2)
    } else if has("cgroup-v1") {
        Some(CgroupVersion::V1)
    } else {
        None
    };
    Detection {
        version,
        coreutils: has("coreutils"),
    }
}

/// The hierarchy the detection script's output names (see [`detect`]).
pub fn parse_detection(out: &str) -> Option<CgroupVersion> {
    detect(out).version
}

/// One container's memory in a kubelet Summary API document.
pub fn parse_summary(
    summary: &serde_json::Value,
    namespace: &str,
    pod: &str,
    container: &str,
) -> Option<(u64, Option<u64>)> {
    let p = summary["pods"].as_array()?.iter().find(|p| {
        p["podRef"]["name"] == pod
            && (p["podRef"]["namespace"] == namespace || namespace.is_empty())
    })?;
    let c = p["containers"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == container)?;
    let usage = c["memory"]["usageBytes"].as_u64()?;
    Some((usage, c["memory"]["workingSetBytes"].as_u64()))
}

/// What the memory feed of one pod needs.
#[derive(Debug, Clone)]
pub struct MemoryConfig {
    pub namespace: String,
    pub pod: String,
    /// The serving container; None: the one exposing `runtime_port`, else the first.
    pub container: Option<String>,
    /// The runtime's port in the pod (picks the serving container).
    pub runtime_port: u16,
    pub node: Option<String>,
    pub interval: Duration,
}

/// The feed name in `SourceConnected`/`SourceError`.
pub const FEED: &str = "memory";

async fn send(tx: &mpsc::Sender<Event>, kind: EventKind) -> bool {
    tx.send(Event::new(Utc::now(), Source::Memory, kind))
        .await
        .is_ok()
}

/// Say what the feed could not do.
async fn failed(tx: &mpsc::Sender<Event>, message: String) -> bool {
    let feed = FEED.into();
    send(tx, EventKind::SourceError { feed, message }).await
}

/// Say where the samples come from.
async fn connected(tx: &mpsc::Sender<Event>, detail: String) -> bool {
    let feed = FEED.into();
    send(tx, EventKind::SourceConnected { feed, detail }).await
}

/// An exec reading stdout only, in the serving container when it is known.
fn attach(cfg: &MemoryConfig) -> AttachParams {
    let ap = AttachParams::default()
        .stdout(true)
        .stderr(false)
        .stdin(false);
    match &cfg.container {
        Some(c) => ap.container(c.clone()),
        None => ap,
    }
}

/// Whether a kube error is an HTTP 403.
pub fn is_forbidden(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 403,
        kube::Error::UpgradeConnection(u) => u.to_string().contains("403"),
        _ => e.to_string().contains("403"),
    }
}

async fn exec_collect(
    api: &Api<Pod>,
    cfg: &MemoryConfig,
    script: &str,
) -> Result<String, kube::Error> {
    let mut proc_ = api
        .exec(&cfg.pod, ["sh", "-c", script], &attach(cfg))
        .await?;
    let status = proc_.take_status();
    let mut out = String::new();
    if let Some(mut so) = proc_.stdout() {
        let _ = tokio::time::timeout(Duration::from_secs(10), so.read_to_string(&mut out)).await;
    }
    let status = match status {
        Some(s) => tokio::time::timeout(Duration::from_secs(10), s)
            .await
            .ok()
            .flatten(),
        None => None,
    };
    let _ = proc_.join().await;
    // The exec could not start the command (no `sh` in the image): the error channel says so.
    let failed = status
        .filter(|s| s.status.as_deref() == Some("Failure"))
        .and_then(|s| s.message)
        .filter(|m| super::container::no_shell(m));
    if let Some(message) = failed {
        return Err(kube::Error::Service(message.into()));
    }
    Ok(out)
}

/// The container to exec into: `--container`, else the pod's serving container (exposing
/// the runtime port, else the first). None when the pod cannot be read.
async fn resolve_container(api: &Api<Pod>, cfg: &MemoryConfig) -> Option<String> {
    if let Some(c) = &cfg.container {
        return Some(c.clone());
    }
    let pod = api.get(&cfg.pod).await.ok()?;
    super::container::serving_container(&pod, cfg.runtime_port)
}

/// Stream the container's memory until cancelled. Falls back to the Summary API on 403, on
/// a refused container (400) and on an image without `sh`.
pub async fn run(
    client: kube::Client,
    mut cfg: MemoryConfig,
    tx: mpsc::Sender<Event>,
    cancel: CancellationToken,
) {
    let api: Api<Pod> = Api::namespaced(client.clone(), &cfg.namespace);
    cfg.container = resolve_container(&api, &cfg).await;
    let mut failures = 0u32;
    loop {
        let result = tokio::select! {
            biased;
            _ = cancel.cancelled() => return,
            r = exec_stream(&api, &cfg, &tx, &cancel) => r,
        };
        let e = match result {
            Ok(()) => return,
            // No cgroup memory file readable in the container: that never gets better.
            Err(Stream::Unreadable(why)) => {
                summary_loop(client, cfg, tx, cancel, why).await;
                return;
            }
            Err(Stream::Kube(e)) => e,
        };
        // A 403, a refused container or an image without `sh` never gets better.
        let fallback = if is_forbidden(&e) {
            let request = crate::rbac::Request {
                verb: "create",
                group: "",
                resource: "pods/exec",
                namespace: Some(&cfg.namespace),
            };
            let why =
                crate::rbac::explain_kube_error(&e, &request).unwrap_or_else(|| e.to_string());
            Some(format!("exec forbidden: {why}"))
        } else {
            let container = cfg.container.as_deref().unwrap_or("(unnamed)");
            super::container::permanent_exec_failure(&e, &cfg.pod, container)
        };
        if let Some(why) = fallback {
            summary_loop(client, cfg, tx, cancel, why).await;
            return;
        }
        failures += 1;
        if !failed(&tx, format!("memory of {}: {e}", cfg.pod)).await {
            return;
        }
        let backoff = Duration::from_millis(500 * u64::from(failures.min(10)));
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(backoff) => {}
        }
    }
}

/// Why a stream ended.
#[derive(Debug)]
enum Stream {
    /// The exec failed or ended.
    Kube(kube::Error),
    /// The container has no readable cgroup memory file: the Summary API instead.
    Unreadable(String),
}

impl From<kube::Error> for Stream {
    fn from(e: kube::Error) -> Stream {
        Stream::Kube(e)
    }
}

fn stream_error(why: String) -> Stream {
    Stream::Kube(kube::Error::Service(why.into()))
}

/// Detect the version and the tools, then stream. Returns Ok when the stream ended because
/// of cancel.
async fn exec_stream(
    api: &Api<Pod>,
    cfg: &MemoryConfig,
    tx: &mpsc::Sender<Event>,
    cancel: &CancellationToken,
) -> Result<(), Stream> {
    let detected = exec_collect(api, cfg, DETECT_SCRIPT).await?;
    let found = detect(&detected);
    let Some(version) = found.version else {
        return Err(Stream::Unreadable(format!(
            "no cgroup memory file readable in {} (neither {} nor {})",
            cfg.pod, V2_FILES[0], V1_FILES[0]
        )));
    };
    let (script, how) = if found.coreutils {
        (stream_script(version, cfg.interval), "")
    } else {
        (
            builtin_stream_script(&version.files()),
            " (sh builtins: no head/sleep in the image)",
        )
    };
    // Without `sleep`, readygap's own ticks on stdin pace the stream.
    let ap = attach(cfg).stdin(!found.coreutils);
    let mut proc_ = api
        .exec(&cfg.pod, ["sh", "-c", script.as_str()], &ap)
        .await?;
    let Some(mut stdout) = proc_.stdout() else {
        return Err(stream_error("the exec has no stdout".into()));
    };
    let mut stdin = proc_.stdin();
    let mut ticks = tokio::time::interval(cfg.interval.max(Duration::from_millis(50)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let v = if version == CgroupVersion::V2 {
        "v2"
    } else {
        "v1"
    };
    let container = cfg
        .container
        .as_deref()
        .map(|c| format!(" container {c}"))
        .unwrap_or_default();
    connected(
        tx,
        format!("cgroup {v} via exec in {}{container}{how}", cfg.pod),
    )
    .await;
    let mut splitter = BlockSplitter::default();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = tokio::select! {
            _ = cancel.cancelled() => { proc_.abort(); return Ok(()); }
            _ = ticks.tick(), if stdin.is_some() => {
                use tokio::io::AsyncWriteExt;
                if let Some(w) = stdin.as_mut() {
                    let wrote = w.write_all(b"\n").await.and(w.flush().await);
                    wrote.map_err(|e| kube::Error::Service(Box::new(e)))?;
                }
                continue;
            }
            n = stdout.read(&mut buf) => n.map_err(|e| kube::Error::Service(Box::new(e)))?,
        };
        if n == 0 {
            return Err(stream_error(format!(
                "the memory exec in {} ended",
                cfg.pod
            )));
        }
        for block in splitter.push(&buf[..n]) {
            match parse_block(version, &block) {
                Ok(r) => {
                    let sample = r.sample(&cfg.pod, version.source());
                    if !send(tx, EventKind::MemorySample(sample)).await {
                        return Ok(());
                    }
                }
                Err(e) => tracing::debug!("memory block of {}: {e}", cfg.pod),
            }
        }
    }
}

/// Poll the kubelet Summary API through the node proxy.
async fn summary_loop(
    client: kube::Client,
    cfg: MemoryConfig,
    tx: mpsc::Sender<Event>,
    cancel: CancellationToken,
    why: String,
) {
    let Some(node) = cfg.node.clone() else {
        let message = format!("{why}; and pod {} has no node for the Summary API", cfg.pod);
        failed(&tx, message).await;
        return;
    };
    // The serving container as the pod names it (not an assumed `ollama`).
    let api: Api<Pod> = Api::namespaced(client.clone(), &cfg.namespace);
    let container = resolve_container(&api, &cfg)
        .await
        .unwrap_or_else(|| "ollama".into());
    connected(&tx, format!("summary API ({why}), container {container}")).await;
    let mut tick = tokio::time::interval(cfg.interval.max(Duration::from_millis(250)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        let req = match http::Request::get(format!("/api/v1/nodes/{node}/proxy/stats/summary"))
            .body(Vec::new())
        {
            Ok(r) => r,
            Err(e) => {
                failed(&tx, e.to_string()).await;
                return;
            }
        };
        match client.request::<serde_json::Value>(req).await {
            Ok(v) => {
                failing = false;
                if let Some((usage, ws)) = parse_summary(&v, &cfg.namespace, &cfg.pod, &container) {
                    let s = MemorySample {
                        pod: cfg.pod.clone(),
                        current: usage,
                        working_set: ws,
                        source: MemorySource::SummaryApi,
                        // The Summary API gives no limit and no OOM kills.
                        ..MemorySample::default()
                    };
                    if !send(&tx, EventKind::MemorySample(s)).await {
                        return;
                    }
                }
            }
            Err(e) if !failing => {
                failing = true;
                failed(&tx, format!("summary API of {node}: {e}")).await;
            }
            Err(_) => {}
        }
    }
}
