//! Host memory and CPU samples: of this machine ([`LocalHostSampler`]: sysinfo plus
//! `/proc/meminfo` for the page-cache figures sysinfo lacks) and of a node
//! ([`RemoteHostSampler`]: one long-lived remote `while` loop streaming `/proc/meminfo`
//! and `/proc/stat` over a single ssh session, never a connection per sample), or of a node
//! reached through a debug pod ([`DebugPodHostSampler`]: the same loop in one long-lived
//! exec). [`run_node_sampler`] picks the right one for a [`NodeAccess`].
//!
//! Every sampler produces the core [`HostSample`] (the one host-sample type, recorded as
//! it is), stamped with the time it was observed; a figure the machine did not give (the
//! first sample's CPU share, a missing `MemAvailable:` or `Cached:` line) stays `None`.
//!
//! Parsing is done by pure functions ([`parse_meminfo`], [`parse_cpu_line`],
//! [`cpu_percent`], [`SampleStreamParser`]) that tests call on fixtures and real files.

use std::time::Duration;

use chrono::Utc;
use readygap_core::event::{Event, EventKind, HostSample, Source, Timestamp};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};

use crate::node::exec::{classify_failure, spawn_streaming};
use crate::node::{DebugPodSession, NodeAccess, NodeError, RemoteScript, Transport};

/// Parses `/proc/meminfo` text (lines `Key:   N kB`) into the memory figures of a sample
/// (in bytes; no CPU share, no node). Unknown keys are ignored; a known key with an
/// unreadable value is an error naming the line; `MemTotal` is required.
pub fn parse_meminfo(text: &str) -> Result<HostSample, String> {
    let mut m = HostSample::default();
    let mut total = None;
    for (n, line) in text.lines().enumerate() {
        let Some((key, rest)) = line.split_once(':') else {
            if line.trim().is_empty() {
                continue;
            }
            return Err(format!("line {}: no ':' in {line:?}", n + 1));
        };
        let slot = match key.trim() {
            "MemTotal" => &mut total,
            "MemFree" => &mut m.mem_free,
            "MemAvailable" => &mut m.mem_available,
            "Buffers" => &mut m.buffers,
            "Cached" => &mut m.cached,
            "Shmem" => &mut m.shmem,
            "SwapTotal" => &mut m.swap_total,
            "SwapFree" => &mut m.swap_free,
            _ => continue,
        };
        let kb = crate::node::drop_caches::parse_kb(rest)
            .ok_or_else(|| format!("line {}: cannot read {line:?}", n + 1))?;
        *slot = Some(kb.saturating_mul(1024));
    }
    m.mem_total = total.ok_or("no MemTotal line")?;
    Ok(m)
}

/// The aggregate `cpu` line of `/proc/stat`, in clock ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// Ticks not idle: user, nice, system, irq, softirq, steal.
    pub busy: u64,
    /// Ticks idle: idle and iowait.
    pub idle: u64,
}

/// Parses `cpu  user nice system idle iowait irq softirq steal [guest guest_nice]`.
/// Guest time is already counted in user and nice, so it is not added again.
pub fn parse_cpu_line(line: &str) -> Result<CpuTimes, String> {
    let mut fields = line.split_whitespace();
    if fields.next() != Some("cpu") {
        return Err(format!("not the aggregate cpu line: {line:?}"));
    }
    let values: Vec<u64> = fields
        .take(8)
        .map(|f| {
            f.parse::<u64>()
                .map_err(|_| format!("bad number {f:?} in {line:?}"))
        })
        .collect::<Result<_, _>>()?;
    if values.len() < 4 {
        return Err(format!("too few fields in {line:?}"));
    }
    let get = |i: usize| values.get(i).copied().unwrap_or(0);
    let idle = get(3).saturating_add(get(4));
    let busy = [0, 1, 2, 5, 6, 7]
        .iter()
        .fold(0u64, |acc, &i| acc.saturating_add(get(i)));
    Ok(CpuTimes { busy, idle })
}

/// Busy share in percent between two readings; `None` when no ticks passed or a counter
/// went backwards (a reboot).
pub fn cpu_percent(prev: CpuTimes, cur: CpuTimes) -> Option<f64> {
    let busy = cur.busy.checked_sub(prev.busy)?;
    let idle = cur.idle.checked_sub(prev.idle)?;
    let total = busy + idle;
    (total > 0).then(|| 100.0 * busy as f64 / total as f64)
}

/// A sample from parsed counters; `prev_cpu` gives the CPU share (`None` without it).
pub fn from_counters(
    meminfo: &HostSample,
    cpu: Option<CpuTimes>,
    prev_cpu: Option<CpuTimes>,
) -> HostSample {
    let percent = prev_cpu.zip(cpu).and_then(|(p, c)| cpu_percent(p, c));
    HostSample {
        cpu_percent: percent.map(|c| c as f32),
        ..meminfo.clone()
    }
}

/// Samples this machine: CPU and memory totals from sysinfo, page-cache figures from
/// `/proc/meminfo` (absent on systems without it).
pub struct LocalHostSampler {
    system: sysinfo::System,
    primed: bool,
}

impl LocalHostSampler {
    /// A sampler; the first sample has no CPU share (sysinfo needs two readings).
    pub fn new() -> Result<Self, String> {
        let system = sysinfo::System::new().map_err(|e| format!("sysinfo: {e:?}"))?;
        Ok(Self {
            system,
            primed: false,
        })
    }

    /// Takes one sample now: the event of this machine's figures (`node` `None`).
    pub fn sample(&mut self) -> Event {
        let at = Utc::now();
        self.system.refresh_cpu_usage();
        self.system.refresh_memory();
        let cpu_percent = self.primed.then(|| self.system.global_cpu_usage());
        self.primed = true;
        let meminfo = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|t| parse_meminfo(&t).ok())
            .unwrap_or_default();
        let sample = HostSample {
            cpu_percent,
            mem_total: self.system.total_memory(),
            mem_available: Some(self.system.available_memory()),
            ..meminfo
        };
        Event::new(at, Source::Host, EventKind::HostSample(sample))
    }
}

/// What one line of the remote sampler's stream completed.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamItem {
    /// `@conn …`: the remote `$SSH_CONNECTION` (client ip, client port, server ip, port);
    /// empty when not over ssh.
    Connection(String),
    /// `@sample … @end`: one block of counters.
    Sample {
        meminfo: HostSample,
        cpu: Option<CpuTimes>,
    },
}

/// Splits the remote sampler's output into items. Pure: feed it lines.
#[derive(Debug, Default)]
pub struct SampleStreamParser {
    block: Option<Vec<String>>,
}

impl SampleStreamParser {
    /// Consumes one line; returns an item when the line completes one. Lines outside a
    /// block other than `@conn` are ignored (login banners, shell noise).
    pub fn push_line(&mut self, line: &str) -> Result<Option<StreamItem>, String> {
        let line = line.trim_end_matches('\r');
        if let Some(conn) = line.strip_prefix("@conn") {
            return Ok(Some(StreamItem::Connection(conn.trim().to_owned())));
        }
        if line == "@sample" {
            if self.block.is_some() {
                return Err("@sample inside an unfinished block".into());
            }
            self.block = Some(Vec::new());
            return Ok(None);
        }
        if line == "@end" {
            let block = self.block.take().ok_or("@end without @sample")?;
            let mut meminfo_text = String::new();
            let mut cpu = None;
            for l in &block {
                if l.starts_with("cpu ") {
                    cpu = Some(parse_cpu_line(l)?);
                } else {
                    meminfo_text.push_str(l);
                    meminfo_text.push('\n');
                }
            }
            let meminfo = parse_meminfo(&meminfo_text)?;
            return Ok(Some(StreamItem::Sample { meminfo, cpu }));
        }
        if let Some(block) = &mut self.block {
            if block.len() >= 64 {
                return Err("block longer than 64 lines".into());
            }
            block.push(line.to_owned());
        }
        Ok(None)
    }
}

/// The sampling loop for `interval`, rounded to whole seconds (at least 1).
fn sample_script(interval: Duration) -> RemoteScript {
    let secs = u32::try_from(interval.as_secs().max(1)).unwrap_or(u32::MAX);
    RemoteScript::SampleHost {
        interval_secs: secs,
    }
}

/// How long one sample may take (the first includes connecting or starting the pod).
fn sample_timeout(interval: Duration) -> Duration {
    interval * 2 + Duration::from_secs(20)
}

/// Samples a node every `interval` through ONE long-lived remote process (a `while` loop)
/// whose output streams back over one ssh session (sharing the ControlMaster connection
/// when one runs). The process is killed when the sampler is dropped or stopped.
pub struct RemoteHostSampler {
    child: Child,
    reader: SampleReader<ChildStdout>,
    transport: Transport,
}

/// Reads the `@sample … @end` blocks of a sampling loop's output (ssh's stdout or a debug
/// pod's exec stream), each within `sample_timeout`, into [`HostSample`]s stamped when
/// their block ended.
struct SampleReader<R> {
    lines: Lines<BufReader<R>>,
    parser: SampleStreamParser,
    prev_cpu: Option<CpuTimes>,
    connection: Option<String>,
    target: String,
    sample_timeout: Duration,
}

impl<R: tokio::io::AsyncRead + Unpin> SampleReader<R> {
    fn new(stream: R, target: String, sample_timeout: Duration) -> Self {
        Self {
            lines: BufReader::new(stream).lines(),
            parser: SampleStreamParser::default(),
            prev_cpu: None,
            connection: None,
            target,
            sample_timeout,
        }
    }

    /// The next sample; `Ok(None)` when the stream ended (the caller knows why).
    async fn next(&mut self) -> Result<Option<(Timestamp, HostSample)>, NodeError> {
        let deadline = tokio::time::Instant::now() + self.sample_timeout;
        loop {
            let target = || self.target.clone();
            let line = tokio::time::timeout_at(deadline, self.lines.next_line())
                .await
                .map_err(|_| NodeError::Timeout {
                    target: target(),
                    after: self.sample_timeout,
                })?
                .map_err(|source| NodeError::Io {
                    target: target(),
                    source,
                })?;
            let Some(line) = line else { return Ok(None) };
            let item = self.parser.push_line(&line).map_err(|detail| {
                let target = target();
                NodeError::UnexpectedOutput { target, detail }
            })?;
            match item {
                None => {}
                Some(StreamItem::Connection(c)) => self.connection = Some(c),
                Some(StreamItem::Sample { meminfo, cpu }) => {
                    let sample = HostSample {
                        connection: self.connection.clone().filter(|c| !c.is_empty()),
                        ..from_counters(&meminfo, cpu, self.prev_cpu)
                    };
                    if cpu.is_some() {
                        self.prev_cpu = cpu;
                    }
                    return Ok(Some((Utc::now(), sample)));
                }
            }
        }
    }
}

impl RemoteHostSampler {
    /// Starts the remote loop. `interval` is rounded to whole seconds (at least 1). Each
    /// sample must arrive within `sample_timeout` (the first includes connecting), else
    /// [`Self::next_sample`] fails with a timeout.
    pub fn start(
        access: &NodeAccess,
        interval: Duration,
        sample_timeout: Duration,
    ) -> Result<Self, NodeError> {
        let cmd = access.command(sample_script(interval))?;
        let mut child = spawn_streaming(&cmd)?;
        let stdout = child.stdout.take().ok_or_else(|| NodeError::Io {
            target: cmd.target.clone(),
            source: std::io::Error::other("no stdout pipe"),
        })?;
        Ok(Self {
            child,
            reader: SampleReader::new(stdout, cmd.target, sample_timeout),
            transport: cmd.transport,
        })
    }

    /// The remote `$SSH_CONNECTION` once the stream reported it (`client_ip client_port
    /// server_ip server_port`).
    pub fn connection(&self) -> Option<&str> {
        self.reader.connection.as_deref()
    }

    /// The OS process id of the local ssh (or docker/minikube) child.
    pub fn process_id(&self) -> Option<u32> {
        self.child.id()
    }

    /// Waits for the next sample. After an error the sampler is finished: stop it and
    /// start a new one to continue.
    pub async fn next_sample(&mut self) -> SampleResult {
        match self.reader.next().await? {
            Some(sample) => Ok(sample),
            None => Err(self.ended().await),
        }
    }

    /// The stream ended: find out why from the exit status and stderr.
    async fn ended(&mut self) -> NodeError {
        let status = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
        let mut stderr = String::new();
        if let Some(mut pipe) = self.child.stderr.take() {
            let _ = tokio::time::timeout(Duration::from_secs(2), pipe.read_to_string(&mut stderr))
                .await;
        }
        match status {
            Ok(Ok(s)) if !s.success() => {
                classify_failure(self.transport, &self.reader.target, s.code(), &stderr)
            }
            _ => NodeError::UnexpectedOutput {
                target: self.reader.target.clone(),
                detail: format!("the sample stream ended; stderr: {}", stderr.trim()),
            },
        }
    }

    /// Kills the remote loop's local process and waits for it.
    pub async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
    }
}

/// What a sampling task sends: a sample (with no node name; the node feed names it) and
/// when it was observed, or an error after which it restarts.
pub type SampleResult = Result<(Timestamp, HostSample), NodeError>;

/// A sampler's stream of samples; after its first error it is finished.
trait SampleStream: Send {
    fn next_sample(&mut self) -> impl Future<Output = SampleResult> + Send;
    /// Ends the remote loop (and the local process that carries it).
    fn stop(self) -> impl Future<Output = ()> + Send;
}

impl SampleStream for RemoteHostSampler {
    fn next_sample(&mut self) -> impl Future<Output = SampleResult> + Send {
        RemoteHostSampler::next_sample(self)
    }
    fn stop(self) -> impl Future<Output = ()> + Send {
        RemoteHostSampler::stop(self)
    }
}

/// Starts a sampler with `start` and sends every sample and every error to `tx`; after an
/// error (connection lost, timeout, the stream ended) it waits `retry_after` and starts a
/// new one. A validation error is final. Ends when `cancel` fires or the receiver is gone;
/// the sampler is stopped then.
async fn keep_sampling<S, Fut>(
    mut start: impl FnMut() -> Fut + Send,
    retry_after: Duration,
    tx: tokio::sync::mpsc::Sender<SampleResult>,
    cancel: tokio_util::sync::CancellationToken,
) where
    S: SampleStream,
    Fut: Future<Output = Result<S, NodeError>> + Send,
{
    while !cancel.is_cancelled() {
        let started = tokio::select! {
            () = cancel.cancelled() => return,
            s = start() => s,
        };
        match started {
            Err(e) => {
                let fatal = e.is_validation();
                if tx.send(Err(e)).await.is_err() || fatal {
                    return;
                }
            }
            Ok(mut sampler) => loop {
                let next = tokio::select! {
                    () = cancel.cancelled() => {
                        sampler.stop().await;
                        return;
                    }
                    next = sampler.next_sample() => next,
                };
                let failed = next.is_err();
                if tx.send(next).await.is_err() {
                    sampler.stop().await;
                    return;
                }
                if failed {
                    sampler.stop().await;
                    break;
                }
            },
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(retry_after) => {}
        }
    }
}

/// Runs a [`RemoteHostSampler`] until `cancel` fires, sending every sample and every
/// error to `tx`. After an error (connection lost, timeout) it waits `retry_after` and
/// starts a new remote loop. Ends when `cancel` fires or the receiver is gone; the remote
/// loop's process is killed then.
pub async fn run_remote_sampler(
    access: NodeAccess,
    interval: Duration,
    retry_after: Duration,
    tx: tokio::sync::mpsc::Sender<SampleResult>,
    cancel: tokio_util::sync::CancellationToken,
) {
    let timeout = sample_timeout(interval);
    let start = || std::future::ready(RemoteHostSampler::start(&access, interval, timeout));
    keep_sampling(start, retry_after, tx, cancel).await;
}

/// Samples a node reached through a debug pod: ONE long-lived exec of the
/// [`RemoteScript::SampleHost`] loop in the pod (created or reused by
/// [`DebugPodSession`]), its stdout parsed by [`SampleStreamParser`] as the ssh stream is.
pub struct DebugPodHostSampler<'a> {
    session: &'a DebugPodSession,
    /// `None` once the stream ended and [`DebugPodSession::ended`] took the exec.
    process: Option<kube::api::AttachedProcess>,
    reader: SampleReader<tokio::io::ReadHalf<tokio::io::SimplexStream>>,
}

impl<'a> DebugPodHostSampler<'a> {
    /// Makes sure the pod runs and starts the loop (both within `sample_timeout`); each
    /// later sample must arrive within `sample_timeout` too.
    pub async fn start(
        session: &'a DebugPodSession,
        interval: Duration,
        sample_timeout: Duration,
    ) -> Result<Self, NodeError> {
        let script = sample_script(interval);
        let mut process = session.spawn(script, sample_timeout).await?;
        let stdout = process.stdout().ok_or_else(|| NodeError::Io {
            target: session.target(),
            source: std::io::Error::other("the exec has no stdout"),
        })?;
        Ok(Self {
            session,
            process: Some(process),
            reader: SampleReader::new(stdout, session.target(), sample_timeout),
        })
    }
}

impl SampleStream for DebugPodHostSampler<'_> {
    /// When the stream ended, the error says why (the exec's exit status and stderr).
    async fn next_sample(&mut self) -> SampleResult {
        match self.reader.next().await? {
            Some(sample) => Ok(sample),
            None => Err(match self.process.take() {
                Some(process) => self.session.ended(process).await,
                None => NodeError::UnexpectedOutput {
                    target: self.reader.target.clone(),
                    detail: "the sample stream ended".into(),
                },
            }),
        }
    }

    /// Ends the exec (the loop in the pod stops when its output has no reader).
    async fn stop(self) {
        if let Some(process) = self.process {
            process.abort();
        }
    }
}

/// Samples a node by whichever access reaches it: a [`NodeAccess::DebugPod`] through the
/// Kubernetes API with `kube` (the client and the namespace of the pod: one long-lived exec
/// in one pod at a time, a new one reusing the pod after an error and `retry_after`), every
/// other kind through [`run_remote_sampler`]. A debug-pod access without `kube` sends one
/// error and ends. Ends when `cancel` fires or the receiver is gone.
pub async fn run_node_sampler(
    access: NodeAccess,
    kube: Option<(kube::Client, String)>,
    interval: Duration,
    retry_after: Duration,
    tx: tokio::sync::mpsc::Sender<SampleResult>,
    cancel: tokio_util::sync::CancellationToken,
) {
    if !matches!(access, NodeAccess::DebugPod { .. }) {
        return run_remote_sampler(access, interval, retry_after, tx, cancel).await;
    }
    let session = match kube {
        Some((client, namespace)) => DebugPodSession::for_access(client, &namespace, &access),
        None => Err(NodeError::Unsupported {
            target: access.target(),
            what: "sampling through a debug pod".into(),
            hint: "it needs a Kubernetes client and namespace".into(),
        }),
    };
    let session = match session {
        Ok(session) => session,
        Err(e) => {
            let _ = tx.send(Err(e)).await;
            return;
        }
    };
    let timeout = sample_timeout(interval);
    let start = || DebugPodHostSampler::start(&session, interval, timeout);
    keep_sampling(start, retry_after, tx, cancel).await;
    // A privileged pod this sampler created does not outlive the session (a pod it found
    // running belongs to someone else and is left alone).
    let _ = tokio::time::timeout(Duration::from_secs(10), session.delete_if_created()).await;
}

/// Samples this machine every `interval` until `cancel` fires or the receiver is gone.
pub async fn run_local_sampler(
    interval: Duration,
    tx: tokio::sync::mpsc::Sender<Event>,
    cancel: tokio_util::sync::CancellationToken,
) -> Result<(), String> {
    let mut sampler = LocalHostSampler::new()?;
    let mut ticks = tokio::time::interval(interval.max(sysinfo::MINIMUM_CPU_UPDATE_INTERVAL));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = cancel.cancelled() => return Ok(()),
            _ = ticks.tick() => {}
        }
        if tx.send(sampler.sample()).await.is_err() {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEMINFO: &str = "MemTotal:       24684084 kB
MemFree:        20864444 kB
MemAvailable:   23577540 kB
Buffers:           22708 kB
Cached:          1735500 kB
SwapCached:            0 kB
Active:          1105876 kB
Shmem:              8872 kB
SwapTotal:             0 kB
SwapFree:              0 kB
HugePages_Total:       0
Hugepagesize:       2048 kB
";

    #[test]
    fn meminfo_fixture() {
        let m = parse_meminfo(MEMINFO).expect("parse");
        assert_eq!(m.mem_total, 24_684_084 * 1024);
        assert_eq!(m.mem_available, Some(23_577_540 * 1024));
        assert_eq!(m.cached, Some(1_735_500 * 1024));
        assert_eq!(m.shmem, Some(8872 * 1024));
        assert_eq!(m.swap_total, Some(0));
    }

    #[test]
    fn meminfo_errors_name_the_line() {
        assert!(parse_meminfo("").is_err());
        let err = parse_meminfo("MemTotal: 10 kB\nCached: lots kB\n").expect_err("bad");
        assert!(err.contains("line 2"), "{err}");
        assert!(parse_meminfo("garbage\n").is_err());
    }

    #[test]
    fn real_proc_meminfo_parses() {
        let Ok(text) = std::fs::read_to_string("/proc/meminfo") else {
            println!("skipped: no /proc/meminfo on this system");
            return;
        };
        let m = parse_meminfo(&text).expect("real meminfo");
        let total = m.mem_total;
        assert!(total > 0);
        assert!(m.mem_available.expect("available") <= total);
        assert!(m.cached.expect("cached") <= total);
    }

    #[test]
    fn cpu_lines_and_percent() {
        let a = parse_cpu_line("cpu  100 0 100 700 100 0 0 0 0 0").expect("a");
        assert_eq!(
            a,
            CpuTimes {
                busy: 200,
                idle: 800
            }
        );
        let b = parse_cpu_line("cpu  200 0 200 1300 100 0 0 0 0 0").expect("b");
        assert_eq!(cpu_percent(a, b), Some(25.0));
        assert_eq!(cpu_percent(a, a), None);
        assert_eq!(cpu_percent(b, a), None);
        assert!(parse_cpu_line("cpu0 1 2 3 4").is_err());
        assert!(parse_cpu_line("cpu 1 2").is_err());
        assert!(parse_cpu_line("cpu 1 x 3 4").is_err());
        // Old kernels print only four fields.
        assert_eq!(
            parse_cpu_line("cpu 1 2 3 4").expect("short"),
            CpuTimes { busy: 6, idle: 4 }
        );
    }

    #[test]
    fn real_proc_stat_parses() {
        let Ok(text) = std::fs::read_to_string("/proc/stat") else {
            println!("skipped: no /proc/stat on this system");
            return;
        };
        let line = text.lines().next().expect("first line");
        let t = parse_cpu_line(line).expect("real cpu line");
        assert!(t.busy + t.idle > 0);
    }

    #[test]
    fn stream_parser_yields_connection_and_samples() {
        let mut p = SampleStreamParser::default();
        let mut items = Vec::new();
        let stream = "Welcome banner\n@conn 127.0.0.1 5000 127.0.0.1 2222\n@sample\nMemTotal: 1000 kB\nMemAvailable: 600 kB\nCached: 300 kB\ncpu  10 0 10 80 0 0 0 0 0 0\n@end\n@sample\nMemTotal: 1000 kB\nCached: 100 kB\ncpu  20 0 20 160 0 0 0 0 0 0\n@end\n";
        for line in stream.lines() {
            if let Some(item) = p.push_line(line).expect("line") {
                items.push(item);
            }
        }
        assert_eq!(items.len(), 3);
        assert_eq!(
            items[0],
            StreamItem::Connection("127.0.0.1 5000 127.0.0.1 2222".into())
        );
        let StreamItem::Sample { meminfo, cpu } = &items[2] else {
            panic!("expected a sample");
        };
        assert_eq!(meminfo.cached, Some(100 * 1024));
        let StreamItem::Sample { cpu: first, .. } = &items[1] else {
            panic!("expected a sample");
        };
        let s = from_counters(meminfo, *cpu, *first);
        assert_eq!(s.cpu_percent, Some(20.0));
        assert_eq!(s.mem_total, 1000 * 1024);
        // The second block has no MemAvailable line: a gap, not 0.
        assert_eq!((s.mem_available, s.cached), (None, Some(100 * 1024)));
        assert_eq!(from_counters(meminfo, *cpu, None).cpu_percent, None);
    }

    #[test]
    fn stream_parser_rejects_broken_framing() {
        let mut p = SampleStreamParser::default();
        assert!(p.push_line("@end").is_err());
        p.push_line("@sample").expect("open");
        assert!(p.push_line("@sample").is_err());
        let mut p = SampleStreamParser::default();
        p.push_line("@sample").expect("open");
        p.push_line("Cached: 1 kB").expect("line");
        // No MemTotal in the block.
        assert!(p.push_line("@end").is_err());
    }

    fn host_sample(e: Event) -> HostSample {
        match e.kind {
            EventKind::HostSample(h) => h,
            other => panic!("host sample expected, got {other:?}"),
        }
    }

    #[test]
    fn local_sampler_reports_this_machine() {
        let mut s = LocalHostSampler::new().expect("sysinfo");
        let first = host_sample(s.sample());
        assert_eq!(first.node, None);
        assert_eq!(first.cpu_percent, None);
        assert!(first.mem_total > 0);
        assert!(first.mem_available.expect("available") <= first.mem_total);
        if std::path::Path::new("/proc/meminfo").exists() {
            assert!(first.cached.is_some());
        }
        std::thread::sleep(sysinfo::MINIMUM_CPU_UPDATE_INTERVAL);
        let second = host_sample(s.sample());
        let cpu = second.cpu_percent.expect("cpu share on the second sample");
        assert!((0.0..=100.0).contains(&cpu), "{cpu}");
    }

    #[tokio::test]
    async fn local_runner_sends_samples_and_stops_on_cancel() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(8);
        let cancel = tokio_util::sync::CancellationToken::new();
        let task = tokio::spawn(run_local_sampler(
            Duration::from_millis(250),
            tx,
            cancel.clone(),
        ));
        let deadline = Duration::from_secs(20);
        let first = tokio::time::timeout(deadline, rx.recv())
            .await
            .expect("in time");
        let second = tokio::time::timeout(deadline, rx.recv())
            .await
            .expect("in time");
        let (first, second) = (first.expect("sample"), second.expect("sample"));
        assert!(first.ts <= second.ts);
        assert!(host_sample(second).cpu_percent.is_some());
        cancel.cancel();
        let ended = tokio::time::timeout(deadline, task).await.expect("stops");
        assert_eq!(ended.expect("join"), Ok(()));
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(lines in proptest::collection::vec("\\PC{0,40}|@sample|@end|@conn x|cpu  1 2 3 4|MemTotal: 5 kB", 0..40)) {
            let mut p = SampleStreamParser::default();
            for l in &lines {
                let _ = p.push_line(l);
                let _ = parse_cpu_line(l);
            }
            let _ = parse_meminfo(&lines.join("\n"));
        }
    }
}
