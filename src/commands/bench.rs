//! `readygap lab bench`: readygap's measuring error and cost against the published study's
//! method, on one lab with its ground-truth log.
//!
//! Every party is its own process, so each method's cost is its own: the lab is a child
//! `readygap lab serve`; readygap's N trials are a child `readygap run` against it (its
//! recording gives the marks and the EndpointSlice events it saw); the study's N trials are
//! a child `bash` running the study's loop (`data/published/SOURCE.md`: a fresh real
//! `kubectl` every 0.1 s for `containerStatuses[0].ready`, `kubectl exec ollama-client --
//! curl` every 0.1 s for `/api/tags` through the Service, a non-streaming generate, and
//! EndpointSlices sampled every 0.5 s with `kubectl get`). Each method's child is reaped
//! with `wait4`, whose rusage covers the child and every descendant it waited for (bash
//! waits for each kubectl, date and sleep): user + system CPU, and `ru_maxrss`, the peak
//! resident set of the largest single process of the tree. The curl inside the client pod
//! is the lab's (in the lab's process), so the baseline's cost leaves it out: the CPU ratio
//! is, if anything, in the baseline's favour.
//!
//! The arithmetic (pairing with the ground truth, statistics, JSON, table) is
//! `readygap_core::bench`.

use super::bench_truth;
use super::drop_caches::OutputFormat;
use crate::args::{name_of, one_of};
use color_eyre::eyre::{Result, WrapErr, eyre};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use readygap_core::bench::{
    BenchReport, Cost, EndpointChange, Endpoints, Instant, MethodResult, SliceUnion,
    endpoint_instants, match_instants, parse_endpoint_sample,
};
use readygap_core::event::{EventKind, Timestamp};
use readygap_core::state::State;
use readygap_lab::engine::EngineKind;
use readygap_lab::ground_truth::{GroundTruthEntry, Transition};
use readygap_live::sources::runtime::AccessMode;
use serde_json::json;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The command-line arguments of `readygap lab bench`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Trials per method (readygap's, then the study's loop).
    #[arg(long, default_value_t = 5)]
    pub trials: usize,
    /// Calibration profile of the lab (local-1b, local-3b, azure-1b, …).
    #[arg(long, default_value = "local-1b")]
    pub profile: String,
    /// What runs the lab's serving containers (simulated, or a real ollama / llama-server).
    #[arg(long, default_value = "simulated", value_parser = one_of(&EngineKind::NAMES))]
    pub engine: EngineKind,
    /// Divide every lab timing by this factor (the samplers' intervals stay the study's).
    #[arg(long, default_value_t = 1.0, value_parser = crate::args::speed)]
    pub speed: f64,
    /// Pause between trials (both methods).
    #[arg(long, default_value = "2s", value_parser = readygap_core::units::parse_duration_or_zero)]
    pub cooldown: Duration,
    /// Seed of the lab's random timings.
    #[arg(long, default_value_t = 20)]
    pub seed: u64,
    /// How readygap reaches the runtimes (`readygap run --access`): through the API server's
    /// pod proxy as from a laptop, or `direct` to the pod IPs as from inside the cluster.
    #[arg(long, default_value = "proxy", value_parser = one_of(&AccessMode::NAMES))]
    pub access: AccessMode,
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,
    /// Keep the working files here (the lab's ground truth `ground-truth.jsonl`, readygap's
    /// recording `readygap.jsonl`, the loop's `baseline.csv` and `endpoint-samples.txt`).
    #[arg(long)]
    pub keep: Option<PathBuf>,
    /// Instead of the accuracy bench, the scale bench: readygap watching the one `ollama`
    /// Deployment in a namespace with this many other pods (Deployments of 10 replicas).
    #[arg(long, value_name = "PODS")]
    pub scale: Option<usize>,
    /// How long the scale bench runs readygap.
    #[arg(long, default_value = "60s", value_parser = readygap_core::units::parse_duration)]
    pub duration: Duration,
    /// Where the accuracy bench's trials run: the embedded lab, judged by its ground-truth
    /// log, or a real cluster (`--kubeconfig`, `--namespace`, `--model`; an `ollama`
    /// Deployment and Service there, as `manifests/` make), judged by its API server's audit
    /// log (`--audit-log`) and the runtime's container log.
    #[arg(long, value_enum, default_value_t = BenchCluster::Lab)]
    pub cluster: BenchCluster,
    /// `--cluster real`: the kubeconfig of the cluster.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// `--cluster real`: the namespace of the `ollama` Deployment (its pods are deleted).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// `--cluster real`: the API server's JSON audit log (`--audit-log-path`), logging
    /// `pods/status` writes at Request level and EndpointSlice writes at RequestResponse
    /// (`scripts/cluster.sh`'s policy does).
    #[arg(long)]
    pub audit_log: Option<PathBuf>,
    /// The model to infer with (default: the profile's; `--cluster real`: required).
    #[arg(long)]
    pub model: Option<String>,
}

/// Where `readygap lab bench` runs its trials.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchCluster {
    /// The embedded lab (`readygap lab serve`), judged by its ground-truth log.
    Lab,
    /// A real cluster, judged by its API server's audit log and its container logs.
    Real,
}

impl BenchArgs {
    /// The settings both benches report.
    pub(super) fn settings(&self) -> BTreeMap<String, serde_json::Value> {
        BTreeMap::from([
            ("profile".to_string(), json!(self.profile)),
            ("speed".to_string(), json!(self.speed)),
            ("cooldown_s".to_string(), json!(self.cooldown.as_secs_f64())),
            ("seed".to_string(), json!(self.seed)),
        ])
    }
}

/// The study's loop (SOURCE.md), with its EndpointSlice sampler in the background.
const LOOP: &str = r#"
set -u
now_ms() { date +%s%3N; }
k() { "$KUBECTL" --kubeconfig "$KC" --cache-dir "$CACHE" -n "$NS" "$@"; }
sample_endpoints() {
  while [[ ! -e "$STOP" ]]; do
    TS=$(now_ms)
    if EPS=$(k get endpointslice -l kubernetes.io/service-name=ollama -o jsonpath='{range .items[*].endpoints[*]}{.targetRef.name} {.conditions.ready} {.conditions.serving} {.conditions.terminating};{end}' 2>/dev/null); then
      printf '%s\t%s\n' "$TS" "$EPS" >> "$SAMPLES"
    fi
    sleep 0.5
  done
}
sample_endpoints &
SAMPLER=$!
sleep 1
for run in $(seq 1 "$RUNS"); do
  OLD=$(k get pod -l app=ollama -o jsonpath='{.items[0].metadata.name}')
  T0=$(now_ms)
  k delete pod "$OLD" --wait=false >/dev/null
  while true; do
    NEW=$(k get pod -l app=ollama -o jsonpath='{.items[0].metadata.name}' 2>/dev/null || true)
    if [[ -n "$NEW" && "$NEW" != "$OLD" ]]; then
      READY=$(k get pod "$NEW" -o jsonpath='{.status.containerStatuses[0].ready}' 2>/dev/null || true)
      [[ "$READY" == "true" ]] && break
    fi
    sleep 0.1
  done
  T1=$(now_ms)
  while true; do
    HTTP=$(k exec ollama-client -- curl --connect-timeout 1 --max-time 2 -s -o /dev/null \
      -w "%{http_code}" http://ollama:11434/api/tags 2>/dev/null || true)
    [[ "$HTTP" == "200" ]] && break
    sleep 0.1
  done
  T2=$(now_ms)
  T3=$(now_ms)
  BODY=$(k exec ollama-client -- curl --max-time 600 -s http://ollama:11434/api/generate \
    -H "Content-Type: application/json" \
    -d "{\"model\":\"$MODEL\",\"prompt\":\"Reply with exactly: READY\",\"stream\":false}")
  RC=$?
  T4=$(now_ms)
  DONE=0
  if [[ "$RC" -eq 0 ]] && echo "$BODY" | grep -q '"done":true'; then DONE=1; fi
  echo "$run,$OLD,$NEW,$T0,$T1,$T2,$T3,$T4,$RC,$DONE" >> "$OUT"
  sleep "$COOLDOWN"
done
touch "$STOP"
wait "$SAMPLER"
"#;

/// The lab's process: stopped when the bench ends (early or not) as Ctrl-C stops it, so a
/// real engine's servers are shut down by the lab; killed if it does not end in 15 s.
pub(super) struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        interrupt(&mut self.0, Duration::from_secs(15));
    }
}

/// Stop `child` with SIGINT, as Ctrl-C would; kill it if it has not ended after `grace`.
pub(super) fn interrupt(child: &mut Child, grace: Duration) {
    // SAFETY: kill(2) on our own child, not yet reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let deadline = std::time::Instant::now() + grace;
    while std::time::Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// `VmHWM` of `/proc/PID/status` (`self` or a pid), the process's peak resident set so far,
/// in KiB.
pub(super) fn vm_hwm_kib(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The largest `VmHWM` among `pid` and its descendants now (`/proc/PID/task/TID/children`).
fn tree_hwm_kib(pid: libc::pid_t) -> u64 {
    let (mut peak, mut todo) = (0, vec![pid]);
    while let Some(p) = todo.pop() {
        peak = peak.max(vm_hwm_kib(&p.to_string()).unwrap_or(0));
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            todo.extend(
                children
                    .split_whitespace()
                    .filter_map(|c| c.parse::<libc::pid_t>().ok()),
            );
        }
    }
    peak
}

/// Reap `child` with `wait4`, killing it after `timeout`: its exit code and the rusage of
/// it and every descendant it waited for (the real-cluster scale test's figures too).
///
/// The peak resident set: `ru_maxrss` is the largest of the tree's processes, but Linux
/// also counts the memory a process had *before* its `execve` (`fs/exec.c` `exec_mmap`
/// records the old mm's high-water mark), which for a child of this process is this
/// process's own (measured: `/bin/true` spawned from a 300 MiB Python reports 313 MiB). So
/// `ru_maxrss` counts only when it is above this process's own peak; the tree's own
/// `VmHWM`s, read every 20 ms while it runs, count always (a short-lived descendant's last
/// few milliseconds may be missed).
pub fn wait_with_cost(child: &mut Child, timeout: Duration, what: &str) -> Result<(i32, Cost)> {
    let pid = child.id() as libc::pid_t;
    // Dropped once the child is reaped (or the wait failed): the killer then stands down,
    // and the sampler of the child's own peak answers with what it read.
    let (done, reaped) = std::sync::mpsc::channel::<()>();
    let (peak_tx, peak_rx) = std::sync::mpsc::channel::<u64>();
    std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + timeout;
        let mut peak = 0;
        loop {
            // Read before reaping: once reaped the pid may be another process's.
            peak = peak.max(tree_hwm_kib(pid));
            match reaped.recv_timeout(Duration::from_millis(20)) {
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                _ => break,
            }
            if std::time::Instant::now() > deadline {
                // SAFETY: kill(2) with a pid we spawned and have not reaped yet.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                break;
            }
        }
        let _ = peak_tx.send(peak);
    });
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: wait4(2) on our own child with valid pointers to locals.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(eyre!("waiting for {what}: {e}"));
        }
    }
    drop(done);
    let sampled = peak_rx.recv().unwrap_or(0);
    // The child is reaped: a later try_wait or wait on it answers ECHILD, which the callers'
    // guards ignore.
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    // Linux reports ru_maxrss in KiB.
    let tree = ru.ru_maxrss.max(0) as u64;
    let own = vm_hwm_kib("self").unwrap_or(u64::MAX);
    let cost = Cost {
        cpu_s: secs(ru.ru_utime) + secs(ru.ru_stime),
        peak_rss_mib: if tree > own {
            tree.max(sampled)
        } else {
            sampled
        } as f64
            / 1024.0,
    };
    if !libc::WIFEXITED(status) {
        return Err(eyre!(
            "{what} was killed (signal {}; after {timeout:?} the bench kills it)",
            libc::WTERMSIG(status)
        ));
    }
    Ok((libc::WEXITSTATUS(status), cost))
}

/// The real kubectl with the lab's kubeconfig and a HOME of its own.
#[derive(Clone)]
pub(super) struct Kubectl {
    pub(super) bin: PathBuf,
    pub(super) kubeconfig: PathBuf,
    pub(super) home: PathBuf,
    pub(super) namespace: String,
}

impl Kubectl {
    pub(super) fn command(&self) -> Command {
        let mut c = Command::new(&self.bin);
        c.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.home.join("kube-cache"))
            .args(["-n", &self.namespace])
            .env("HOME", &self.home)
            .env_remove("KUBECONFIG");
        c
    }

    pub(super) fn get(&self, args: &[&str]) -> Result<String> {
        let out = self
            .command()
            .args(args)
            .output()
            .wrap_err_with(|| format!("running {} {args:?}", self.bin.display()))?;
        if !out.status.success() {
            return Err(eyre!(
                "kubectl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The command of a child `readygap run` of `exe` on the lab: `trials` trials `cooldown`
    /// apart, its JSON output in `DIR/readygap-run.json`, its log in `DIR/readygap-run.log`.
    pub(super) fn readygap_run(
        &self,
        exe: &Path,
        model: &str,
        trials: usize,
        cooldown: Duration,
        dir: &Path,
    ) -> Result<Command> {
        let mut run = Command::new(exe);
        run.arg("run")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["-n", &self.namespace, "--model", model])
            .args(["--trials", &trials.to_string()])
            .arg("--cooldown")
            .arg(format!("{}ms", cooldown.as_millis()))
            .args(["--format", "json"])
            .env("HOME", &self.home)
            .env_remove("KUBECONFIG")
            .stdout(std::fs::File::create(dir.join("readygap-run.json"))?)
            .stderr(std::fs::File::create(dir.join("readygap-run.log"))?);
        Ok(run)
    }

    /// Poll (0.2 s) until `f` holds, at most `timeout`.
    pub(super) fn wait_until(
        &self,
        what: &str,
        timeout: Duration,
        mut f: impl FnMut(&Self) -> bool,
    ) -> Result<()> {
        let deadline = std::time::Instant::now() + timeout;
        while !f(self) {
            if std::time::Instant::now() > deadline {
                return Err(eyre!("timed out after {timeout:?} waiting for {what}"));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(())
    }

    /// One Ready `ollama` pod, and the Service's endpoints exactly that pod, ready.
    pub(super) fn wait_steady(&self, timeout: Duration) -> Result<()> {
        self.wait_until("one Ready ollama pod and its endpoint", timeout, |k| {
            let eps = k
                .get(&[
                    "get",
                    "endpointslice",
                    "-l",
                    "kubernetes.io/service-name=ollama",
                    "-o",
                    "jsonpath={range .items[*].endpoints[*]}{.targetRef.name} {.conditions.ready} {.conditions.serving} {.conditions.terminating};{end}",
                ])
                .ok()
                .and_then(|t| parse_endpoint_sample(&t).ok());
            let pods = k
                .get(&["get", "pods", "-l", "app=ollama", "-o", "name"])
                .unwrap_or_default();
            eps.is_some_and(|e| e.len() == 1 && e.values().all(|c| c.ready && !c.terminating))
                && pods.lines().count() == 1
        })
    }
}

fn ts_of_ms(ms: i64) -> Result<Timestamp> {
    chrono::DateTime::from_timestamp_millis(ms).ok_or_else(|| eyre!("{ms}: not a time in ms"))
}

/// Read the lab's ground-truth log.
fn read_ground_truth(path: &Path) -> Result<Vec<GroundTruthEntry>> {
    let text = std::fs::read_to_string(path)
        .wrap_err_with(|| format!("reading the ground truth {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .wrap_err_with(|| format!("{}:{}: a ground-truth line", path.display(), i + 1))
        })
        .collect()
}

/// The ground truth's endpoint transitions in `[from, to]`, as instants.
fn endpoint_truth(gt: &[GroundTruthEntry], from: Timestamp, to: Timestamp) -> Vec<Instant> {
    gt.iter()
        .filter(|e| e.ts >= from && e.ts <= to)
        .filter_map(|e| {
            let c = EndpointChange::ALL
                .iter()
                .find(|c| Transition::of_endpoint(**c) == e.transition)?;
            Some(Instant::new(&e.pod, c.name(), e.ts))
        })
        .collect()
}

/// One trial's marks as a method measured them: (new pod, T0, T1, T2, T4).
struct Measured {
    pod: String,
    t0: Timestamp,
    t1: Option<Timestamp>,
    t2: Option<Timestamp>,
    t4: Option<Timestamp>,
}

/// T1, T2 and T4 of every trial against the ground truth of its new pod.
fn marks_against(trials: &[Measured], gt: &[GroundTruthEntry]) -> (Vec<Instant>, Vec<Instant>) {
    let mut truth = Vec::new();
    let mut measured = Vec::new();
    for t in trials {
        for (name, tr, m) in [
            ("t1", Transition::PodReady, t.t1),
            ("t2", Transition::RuntimeListening, t.t2),
            ("t4", Transition::InferenceDone, t.t4),
        ] {
            // The ground truth's first instant of `tr` for the pod at or after T0.
            let first = gt.iter().filter(|e| e.pod == t.pod && e.transition == tr);
            if let Some(ts) = first.map(|e| e.ts).filter(|ts| *ts >= t.t0).min() {
                truth.push(Instant::new(&t.pod, name, ts));
            }
            if let Some(m) = m {
                measured.push(Instant::new(&t.pod, name, m));
            }
        }
    }
    (truth, measured)
}

/// One method's result: its marks and the endpoint transitions it saw in its window, from
/// its first T0 (`window.0` when it has none) to `window.1`.
fn method_result(
    trials: &[Measured],
    endpoint_seen: &[Instant],
    gt: &[GroundTruthEntry],
    window: (Timestamp, Timestamp),
    cost: Cost,
) -> MethodResult {
    let from = trials.iter().map(|m| m.t0).min().unwrap_or(window.0);
    let window = (from, window.1);
    let (truth, measured) = marks_against(trials, gt);
    let all_endpoints = endpoint_truth(gt, window.0, Timestamp::MAX_UTC);
    let ep_truth = endpoint_truth(gt, window.0, window.1);
    let seen: Vec<Instant> = endpoint_seen
        .iter()
        .filter(|i| i.ts >= window.0)
        .cloned()
        .collect();
    MethodResult {
        trials: trials.len(),
        marks: match_instants(&truth, &measured, &[]),
        endpoints: match_instants(&ep_truth, &seen, &all_endpoints),
        cost: Some(cost),
    }
}

/// The name of `engine` on the command line.
pub(super) fn engine_name(engine: EngineKind) -> &'static str {
    name_of(&EngineKind::NAMES, engine, "simulated")
}

/// Start the lab (`readygap lab serve`) with the bench's settings, its kubeconfig
/// `DIR/kubeconfig` and ground truth `DIR/ground-truth.jsonl`: the lab's process, and the
/// real kubectl pointed at its namespace.
pub(super) fn start_lab(
    args: &BenchArgs,
    exe: &Path,
    dir: &Path,
    kubectl_bin: &Path,
) -> Result<(Guard, Kubectl)> {
    let home = dir.join("home");
    let (kc, gt_path) = (dir.join("kubeconfig"), dir.join("ground-truth.jsonl"));
    let engine = engine_name(args.engine);
    let lab_log = std::fs::File::create(dir.join("lab.log")).wrap_err("creating lab.log")?;
    let mut lab = Command::new(exe)
        .args([
            "lab",
            "serve",
            "--profile",
            &args.profile,
            "--engine",
            engine,
        ])
        .args([
            "--speed",
            &args.speed.to_string(),
            "--seed",
            &args.seed.to_string(),
        ])
        .args(["--port", "0"])
        .arg("--kubeconfig-out")
        .arg(&kc)
        .arg("--ground-truth")
        .arg(&gt_path)
        .env("HOME", &home)
        .stdout(Stdio::piped())
        .stderr(lab_log)
        .spawn()
        .wrap_err("starting `readygap lab serve`")?;
    let stdout = lab.stdout.take();
    let lab = Guard(lab);
    let mut line = String::new();
    if let Some(out) = stdout {
        BufReader::new(out)
            .read_line(&mut line)
            .wrap_err("reading the lab's announcement")?;
    }
    let announced: serde_json::Value = serde_json::from_str(&line)
        .wrap_err_with(|| format!("the lab's announcement {line:?} (see lab.log)"))?;
    let namespace = announced["namespace"]
        .as_str()
        .ok_or_else(|| eyre!("the lab's announcement has no namespace: {line}"))?
        .to_string();
    let k = Kubectl {
        bin: kubectl_bin.to_path_buf(),
        kubeconfig: kc,
        home,
        namespace,
    };
    Ok((lab, k))
}

/// Where the trials run and what judges them.
enum Site {
    /// The lab's process and its ground-truth log.
    Lab { _lab: Guard, ground_truth: PathBuf },
    /// A real cluster: its audit log from the bench's start, the pods' logs as followed,
    /// the Service's slices at the start.
    Real {
        audit: bench_truth::AuditLog,
        logs: bench_truth::LogFollower,
        slices: Vec<EndpointSlice>,
        start: Timestamp,
    },
}

impl Site {
    /// The ground truth of the whole bench (the lab's stops here).
    fn ground_truth(self, k: &Kubectl) -> Result<Vec<GroundTruthEntry>> {
        match self {
            Site::Lab { _lab, ground_truth } => {
                drop(_lab);
                read_ground_truth(&ground_truth)
            }
            Site::Real {
                audit,
                logs,
                slices,
                start,
            } => {
                let mut gt = Vec::new();
                for (pod, text) in logs.stop()? {
                    gt.extend(bench_truth::log_truth(&pod, &text));
                }
                let (text, first) = audit.appended()?;
                let records = bench_truth::AuditRecords::parse(&text, first, audit.path())?;
                gt.extend(records.ready(&k.namespace)?);
                gt.extend(records.endpoints((&k.namespace, "ollama"), &slices, start)?);
                Ok(gt)
            }
        }
    }
}

/// The real cluster of `--cluster real`: kubectl on it, and the truth's sources opened.
fn real_site(
    args: &BenchArgs,
    kubectl_bin: &Path,
    dir: &Path,
    steady: Duration,
) -> Result<(Kubectl, Site)> {
    let need = |what: &str, why: &str| eyre!("--cluster real needs {what}: {why}");
    let k = Kubectl {
        bin: kubectl_bin.to_path_buf(),
        kubeconfig: args
            .kubeconfig
            .clone()
            .ok_or_else(|| need("--kubeconfig (or KUBECONFIG)", "the cluster's kubeconfig"))?,
        home: dir.join("home"),
        namespace: args
            .namespace
            .clone()
            .ok_or_else(|| need("--namespace", "the namespace of the ollama Deployment"))?,
    };
    let path = args.audit_log.as_deref().ok_or_else(|| {
        need(
            "--audit-log",
            "the API server's JSON audit log, the ground truth of Ready and the endpoints",
        )
    })?;
    k.wait_steady(steady)?;
    let audit = bench_truth::AuditLog::from_end(path)?;
    let start = chrono::Utc::now();
    let list = k.get(&[
        "get",
        "endpointslice",
        "-l",
        "kubernetes.io/service-name=ollama",
        "-o",
        "json",
    ])?;
    let list: serde_json::Value =
        serde_json::from_str(&list).wrap_err("kubectl's list of EndpointSlices")?;
    let slices = serde_json::from_value(list["items"].clone())
        .wrap_err("kubectl's list of EndpointSlices")?;
    let kc = k.clone();
    let logs =
        bench_truth::LogFollower::start(move || kc.command(), "app=ollama", &dir.join("logs"))?;
    let site = Site::Real {
        audit,
        logs,
        slices,
        start,
    };
    Ok((k, site))
}

pub(super) fn bench_in(
    args: &BenchArgs,
    model: &str,
    kubectl_bin: &Path,
    dir: &Path,
) -> Result<BenchReport> {
    let exe = std::env::current_exe().wrap_err("finding the readygap binary")?;
    let steady = Duration::from_secs(120);
    let (k, site) = match args.cluster {
        BenchCluster::Lab => {
            let ground_truth = dir.join("ground-truth.jsonl");
            let _ = std::fs::remove_file(&ground_truth);
            let (lab, k) = start_lab(args, &exe, dir, kubectl_bin)?;
            k.wait_steady(steady)?;
            let site = Site::Lab {
                _lab: lab,
                ground_truth,
            };
            (k, site)
        }
        // Steady before it lists the slices the replay starts from.
        BenchCluster::Real => real_site(args, kubectl_bin, dir, steady)?,
    };
    let per_trial = Duration::from_secs(600) + args.cooldown;
    let timeout = per_trial * args.trials as u32 + Duration::from_secs(120);

    // readygap's trials: a child `readygap run`.
    let rec = dir.join("readygap.jsonl");
    let _ = std::fs::remove_file(&rec);
    let rg_from = chrono::Utc::now();
    let access = name_of(&AccessMode::NAMES, args.access, "proxy");
    let mut child = k
        .readygap_run(&exe, model, args.trials, args.cooldown, dir)?
        .args(["--access", access, "--record"])
        .arg(&rec)
        .spawn()
        .wrap_err("starting `readygap run`")?;
    let (code, rg_cost) = wait_with_cost(&mut child, timeout, "`readygap run`")?;
    let rg_to = chrono::Utc::now();
    let recording = readygap_core::record::jsonl::read(&rec).map_err(|e| {
        eyre!("readygap's recording (run exited {code}; see readygap-run.log): {e}")
    })?;
    let state = State::from_events(&recording.events);
    let rg_trials: Vec<Measured> = state
        .timeline
        .trials
        .iter()
        .filter(|t| !t.external)
        .filter_map(|t| {
            Some(Measured {
                pod: t.new_pod.clone()?,
                t0: t.marks.t0?,
                t1: t.marks.t1,
                t2: t.marks.t2,
                t4: t.marks.t4,
            })
        })
        .collect();
    if rg_trials.is_empty() {
        return Err(eyre!(
            "readygap's run measured no trial (exit {code}; see readygap-run.log)"
        ));
    }
    let mut union = SliceUnion::default();
    let mut states: Vec<(Timestamp, Endpoints)> = Vec::new();
    for e in &recording.events {
        match &e.kind {
            EventKind::EndpointSliceApplied(s) => states.push((e.ts, union.apply(s))),
            EventKind::EndpointSliceDeleted { name } => states.push((e.ts, union.delete(name))),
            _ => {}
        }
    }
    let rg_seen = endpoint_instants(&states);

    // The study's trials: the client pod (made here unless it is there: a real cluster's
    // keeps it), then a child bash running the loop.
    k.wait_steady(steady)?;
    let client_made = k
        .get(&[
            "get",
            "pod",
            "ollama-client",
            "--ignore-not-found",
            "-o",
            "name",
        ])?
        .trim()
        .is_empty();
    if client_made {
        k.get(&[
            "run",
            "ollama-client",
            "--image=curlimages/curl",
            "--",
            "sleep",
            "infinity",
        ])?;
    }
    k.wait_until("the client pod Running", steady, |k| {
        k.get(&[
            "get",
            "pod",
            "ollama-client",
            "-o",
            "jsonpath={.status.phase}",
        ])
        .is_ok_and(|p| p == "Running")
    })?;
    let (out, samples, stop) = (
        dir.join("baseline.csv"),
        dir.join("endpoint-samples.txt"),
        dir.join("baseline.stop"),
    );
    for p in [&out, &samples, &stop] {
        let _ = std::fs::remove_file(p);
    }
    let mut child = Command::new("bash")
        .args(["-c", LOOP])
        .env("KUBECTL", kubectl_bin)
        .env("KC", &k.kubeconfig)
        .env("CACHE", k.home.join("kube-cache"))
        .env("HOME", &k.home)
        .env("NS", &k.namespace)
        .env("RUNS", args.trials.to_string())
        .env("MODEL", model)
        .env("COOLDOWN", format!("{:.3}", args.cooldown.as_secs_f64()))
        .env("OUT", &out)
        .env("SAMPLES", &samples)
        .env("STOP", &stop)
        .env_remove("KUBECONFIG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("baseline.log"))?)
        .spawn()
        .wrap_err("starting bash for the study's loop")?;
    let (code, base_cost) = wait_with_cost(&mut child, timeout, "the study's loop")?;
    let base_to = chrono::Utc::now();
    if client_made && args.cluster == BenchCluster::Real {
        // Gone before the bench ends (`sleep` as PID 1 ignores SIGTERM: a second's grace).
        let _ = k.get(&[
            "delete",
            "pod",
            "ollama-client",
            "--grace-period=1",
            "--wait=true",
            "--timeout=60s",
        ]);
    }
    if code != 0 {
        return Err(eyre!("the study's loop exited {code} (see baseline.log)"));
    }
    let text = std::fs::read_to_string(&out).wrap_err("reading the loop's CSV")?;
    let mut base_trials = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let f: Vec<&str> = l.split(',').collect();
        let n = |j: usize| -> Result<Timestamp> {
            let v = f
                .get(j)
                .and_then(|v| v.parse::<i64>().ok())
                .ok_or_else(|| eyre!("baseline.csv:{}: field {j} of {l:?}", i + 1))?;
            ts_of_ms(v)
        };
        let done = f.get(9) == Some(&"1");
        base_trials.push(Measured {
            pod: f.get(2).unwrap_or(&"").to_string(),
            t0: n(3)?,
            t1: Some(n(4)?),
            t2: Some(n(5)?),
            t4: done.then(|| n(7)).transpose()?,
        });
    }
    let mut base_states = Vec::new();
    let sample_text = std::fs::read_to_string(&samples).unwrap_or_default();
    for (i, l) in sample_text.lines().enumerate() {
        let (ts, eps) = l.split_once('\t').unwrap_or((l, ""));
        let ts = ts
            .trim()
            .parse::<i64>()
            .map_err(|e| eyre!("endpoint-samples.txt:{}: {e}", i + 1))
            .and_then(ts_of_ms)?;
        let eps =
            parse_endpoint_sample(eps).map_err(|e| eyre!("endpoint-samples.txt:{}: {e}", i + 1))?;
        base_states.push((ts, eps));
    }
    let base_seen = endpoint_instants(&base_states);

    let gt = site.ground_truth(&k)?;
    let readygap = method_result(&rg_trials, &rg_seen, &gt, (rg_from, rg_to), rg_cost);
    let baseline = method_result(&base_trials, &base_seen, &gt, (rg_from, base_to), base_cost);
    let mut settings = match args.cluster {
        BenchCluster::Lab => {
            let mut s = args.settings();
            s.insert("engine".to_string(), json!(engine_name(args.engine)));
            s.insert("ground_truth".to_string(), json!("the lab's ground truth"));
            s
        }
        BenchCluster::Real => BTreeMap::from([
            ("cluster".to_string(), json!("real")),
            ("namespace".to_string(), json!(k.namespace)),
            ("model".to_string(), json!(model)),
            ("cooldown_s".to_string(), json!(args.cooldown.as_secs_f64())),
            (
                "ground_truth".to_string(),
                json!("the API server's audit log and the container log"),
            ),
        ]),
    };
    settings.insert("access".to_string(), json!(args.access));
    settings.insert("kubectl".to_string(), json!(kubectl_bin));
    Ok(BenchReport {
        trials: args.trials,
        readygap,
        baseline,
        settings,
    })
}
