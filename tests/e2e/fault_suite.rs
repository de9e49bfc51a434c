//! The fault suite: `readygap run` and the dashboard while the lab misbehaves. Each fault is
//! switched on at a chosen instant of a trial, found in the lab's ground truth (the delete
//! accepted = T0, the replacement created, …), and each test asserts what readygap must do:
//! the trial completes with marks that agree with the ground truth, or it ends with a stated
//! reason and the next one completes; and the recording (read back with the core's JSON-lines
//! reader) neither lost nor duplicated a pod transition the lab logged (see [`PodLedger`]).
//!
//! - API server restart mid-trial, watch connections dropped, 410 Gone (history expired and
//!   the watches dropped, so they resume from a resourceVersion that is too old and re-list);
//! - the runtime hangs (accepts, never answers), crashes mid-inference (the lab's
//!   `crash_mid_inference`: the process exits after the first token, the connection is reset,
//!   the kubelet restarts the container), exec is slow or hangs (the memory stream);
//! - SSH hangs: a peer on 127.0.0.1 that accepts and never sends its banner, as the cold
//!   step's `--node-access ssh://…`;
//! - the recording's disk fills up (a 64 KiB tmpfs, root only): the recording stops with a
//!   message, the run goes on, what was written reads back;
//! - SIGTERM, SIGHUP and SIGINT of `readygap run` (the trial ends cleanly, the recording is
//!   complete) and of the dashboard in tmux (alternate screen left, terminal cooked again,
//!   recording complete, the cold step's debug pod deleted);
//! - the terminal resized again and again while a trial runs (tmux `resize-window`).
//!
//! The lab runs at speed 4 (as the other `run` tests); every wait is on a condition with a
//! generous deadline, for a loaded 2-core machine.

use crate::ui_tmux::Tmux;
use clap::Parser;
use readygap::args::RunArgs;
use readygap::commands::run::run_with;
use readygap_core::event::{Event, EventKind};
use readygap_core::record::jsonl;
use readygap_core::state::State;
use readygap_core::timeline::Trial;
use readygap_lab::ground_truth::{GroundTruthEntry, Transition};
use readygap_lab::profile::Profile;
use readygap_lab::serve::{LabHandle, LabOptions, serve};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
struct Wrap {
    #[command(flatten)]
    args: RunArgs,
}

/// One lab at a time in this module (pod IPs on loopback are a process-wide pool).
static ONE_LAB: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const SPEED: f64 = 4.0;

async fn lab(seed: u64) -> LabHandle {
    let mut o = LabOptions::new(Profile::named("local-1b").unwrap());
    o.speed = SPEED;
    o.seed = seed;
    let lab = serve(o).await.unwrap();
    lab.wait_ready(Duration::from_secs(120)).await.unwrap();
    lab
}

/// `readygap run` on `lab`, recording to `rec`, with `extra` arguments.
fn args(lab: &LabHandle, rec: &Path, extra: &[&str]) -> RunArgs {
    let mut v = vec![
        "readygap",
        "--kubeconfig",
        lab.kubeconfig.to_str().unwrap(),
        "-n",
        &lab.namespace,
        "--model",
        "llama3.2:1b",
        "--record",
        rec.to_str().unwrap(),
    ];
    if !extra.contains(&"--cooldown") {
        v.extend(["--cooldown", "0s"]);
    }
    v.extend_from_slice(extra);
    Wrap::try_parse_from(v).unwrap().args
}

/// Run with a deadline: a run that hangs is a failure, not a stuck test binary.
async fn run(a: RunArgs) -> readygap_live::run::RunOutput {
    tokio::time::timeout(
        Duration::from_secs(300),
        run_with(a, CancellationToken::new()),
    )
    .await
    .expect("the run ended within 300 s")
    .expect("run")
}

/// Wait (≤ 120 s) until the lab's ground truth gives `f` an answer.
async fn truth<T>(lab: &LabHandle, what: &str, f: impl Fn(&[GroundTruthEntry]) -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(t) = f(&lab.ground_truth().entries()) {
            return t;
        }
        assert!(Instant::now() < deadline, "the lab never logged {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The `n`th (0-based) ground-truth entry of `which`.
fn nth(gt: &[GroundTruthEntry], which: Transition, n: usize) -> Option<GroundTruthEntry> {
    gt.iter().filter(|e| e.transition == which).nth(n).cloned()
}

/// The first entry of `which` for a pod other than those in `not`.
fn first_new(
    gt: &[GroundTruthEntry],
    which: Transition,
    not: &[String],
) -> Option<GroundTruthEntry> {
    gt.iter()
        .find(|e| e.transition == which && !not.contains(&e.pod))
        .cloned()
}

/// When the lab made the trial's replacement Ready (its first Ready after T0).
fn replacement_ready(t: &Trial, gt: &[GroundTruthEntry]) -> chrono::DateTime<chrono::Utc> {
    let pod = t.new_pod.as_deref().expect("the replacement");
    let t0 = t.marks.t0.expect("T0");
    gt.iter()
        .find(|e| e.pod == pod && e.transition == Transition::PodReady && e.ts >= t0)
        .expect("the replacement's Ready in the ground truth")
        .ts
}

fn ms(d: chrono::TimeDelta) -> i64 {
    d.num_milliseconds()
}

/// A finished trial's marks agree with the ground truth: T0 with the delete the lab
/// accepted, T1 with the replacement's Ready (late by at most `t1_late_ms`: the time a
/// broken watch needs to come back), T4 with the inference the runtime finished.
fn assert_marks(t: &Trial, gt: &[GroundTruthEntry], t1_late_ms: i64) {
    assert!(t.is_ok(), "trial #{}: {:?}", t.index, t.status);
    let m = &t.marks;
    let (t0, t1, t2, t3, t4) = (
        m.t0.unwrap(),
        m.t1.unwrap(),
        m.t2.unwrap(),
        m.t3.unwrap(),
        m.t4.unwrap(),
    );
    // T1 and T2 come in either order (a runtime may answer before its pod is Ready, and a
    // broken watch delays T1); T3 follows T2 (`--infer-after runtime`).
    assert!(
        t0 <= t1 && t0 <= t2 && t2 <= t3 && t3 < t4 && t1 < t4,
        "marks out of order: {m:?}"
    );
    let pod = t.new_pod.clone().expect("the replacement");
    // (An external trial's T0 is its first evidence, not a delete readygap sent.)
    if !t.external {
        let accepted = gt
            .iter()
            .filter(|e| e.transition == Transition::DeleteAccepted && e.ts >= t0)
            .map(|e| e.ts)
            .min()
            .expect("the delete in the ground truth");
        assert!(
            ms(accepted - t0).abs() < 1_000,
            "T0 {t0} vs delete accepted {accepted}"
        );
    }
    let ready = replacement_ready(t, gt);
    let late = ms(t1 - ready);
    assert!(
        (-5..=t1_late_ms).contains(&late),
        "trial #{}: T1 {late} ms after the pod turned Ready (bound {t1_late_ms} ms)",
        t.index
    );
    let done = gt
        .iter()
        .find(|e| e.pod == pod && e.transition == Transition::InferenceDone && e.ts >= t3)
        .expect("the inference in the ground truth")
        .ts;
    assert!(
        ms(t4 - done).abs() < 500,
        "trial #{}: T4 {t4} vs the runtime's done {done}",
        t.index
    );
}

/// The recording's pod history, folded the way the reducer folds it: a pod exists from its
/// first `pod_applied` until `pod_deleted` or a completed re-list that did not list it.
#[derive(Debug, Default, PartialEq)]
struct PodLedger {
    /// Per pod: times it appeared, turned Ready (false → true), went away.
    appeared: BTreeMap<String, usize>,
    ready: BTreeMap<String, usize>,
    gone: BTreeMap<String, usize>,
    /// Duplicates outside a re-list: the same pod at the same resourceVersion applied
    /// twice, a pod deleted that did not exist; and repeated ids of actions and inferences.
    duplicates: Vec<String>,
    resyncs: usize,
}

impl PodLedger {
    fn of(events: &[Event]) -> PodLedger {
        let mut l = PodLedger::default();
        let mut live: BTreeMap<String, bool> = BTreeMap::new();
        let mut versions: HashSet<(String, String)> = HashSet::new();
        let mut resync: Option<BTreeSet<String>> = None;
        let mut actions = HashSet::new();
        let mut inferences = HashSet::new();
        let mut done = HashSet::new();
        for ev in events {
            match &ev.kind {
                EventKind::ResyncStarted { resource } if resource == "pods" => {
                    resync = Some(BTreeSet::new());
                    l.resyncs += 1;
                }
                EventKind::ResyncDone { resource } if resource == "pods" => {
                    if let Some(seen) = resync.take() {
                        let vanished: Vec<String> = live
                            .keys()
                            .filter(|p| !seen.contains(*p))
                            .cloned()
                            .collect();
                        for p in vanished {
                            live.remove(&p);
                            *l.gone.entry(p).or_default() += 1;
                        }
                    }
                }
                EventKind::PodApplied(p) => {
                    if let Some(seen) = &mut resync {
                        seen.insert(p.name.clone());
                    }
                    let fresh = versions.insert((p.name.clone(), p.resource_version.clone()));
                    if !fresh && resync.is_none() {
                        l.duplicates.push(format!(
                            "{} at {} applied twice",
                            p.name, p.resource_version
                        ));
                    }
                    let was = live.insert(p.name.clone(), p.is_ready());
                    if was.is_none() {
                        *l.appeared.entry(p.name.clone()).or_default() += 1;
                    }
                    if p.is_ready() && was != Some(true) {
                        *l.ready.entry(p.name.clone()).or_default() += 1;
                    }
                }
                EventKind::PodDeleted(p) => {
                    if live.remove(&p.name).is_some() {
                        *l.gone.entry(p.name.clone()).or_default() += 1;
                    } else {
                        l.duplicates
                            .push(format!("{} deleted while not there", p.name));
                    }
                }
                EventKind::ActionRequested { id, .. } if !actions.insert(*id) => {
                    l.duplicates.push(format!("action {id} requested twice"));
                }
                EventKind::InferenceStarted { request_id, .. }
                    if !inferences.insert(*request_id) =>
                {
                    l.duplicates
                        .push(format!("inference {request_id} started twice"));
                }
                EventKind::InferenceDone(r) if !done.insert(r.request_id) => {
                    l.duplicates
                        .push(format!("inference {} done twice", r.request_id));
                }
                _ => {}
            }
        }
        l
    }
}

/// Read the recording back and check it against the ground truth: every pod the lab created,
/// made Ready and removed while the recording ran shows exactly as often (a transition in the
/// last 2 s may or may not have reached it), and nothing is there twice. Returns the events.
fn assert_no_loss(rec: &Path, gt: &[GroundTruthEntry]) -> Vec<Event> {
    let recording = jsonl::read(rec).expect("the recording reads back");
    assert!(
        recording.warnings.is_empty(),
        "a complete recording: {:?}",
        recording.warnings
    );
    let events = recording.events;
    let first = events.first().expect("events").ts;
    let last = events.last().unwrap().ts;
    let ledger = PodLedger::of(&events);
    assert!(ledger.duplicates.is_empty(), "{:?}", ledger.duplicates);
    let pods: BTreeSet<&str> = gt
        .iter()
        .filter(|e| e.pod.starts_with("ollama-"))
        .map(|e| e.pod.as_str())
        .collect();
    for pod in pods {
        let count = |which: Transition, until: chrono::DateTime<chrono::Utc>| {
            gt.iter()
                .filter(|e| e.pod == pod && e.transition == which && e.ts <= until)
                .count()
        };
        // Gone before the recording started: never in it.
        if count(Transition::PodGone, first) > 0 {
            continue;
        }
        let settled = last - chrono::TimeDelta::seconds(2);
        for (which, seen) in [
            (Transition::PodCreated, &ledger.appeared),
            (Transition::PodReady, &ledger.ready),
            (Transition::PodGone, &ledger.gone),
        ] {
            let (min, max) = (count(which, settled), count(which, last));
            let n = seen.get(pod).copied().unwrap_or(0);
            assert!(
                (min..=max).contains(&n),
                "{pod} {which:?}: {n} in the recording, {min}..={max} in the ground truth\n{ledger:?}"
            );
        }
    }
    events
}

/// `readygap run` (2 trials) with the API server restarted between T0 and T1 of each: the
/// watches come back, both trials complete with correct marks, nothing lost or doubled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_server_restart_mid_trial() {
    let _one = ONE_LAB.lock().await;
    let lab = lab(91).await;
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("restart.jsonl");
    let a = args(&lab, &rec, &["--trials", "2", "--no-memory"]);
    let (out, watches) = tokio::join!(run(a), async {
        let mut watches = Vec::new();
        for n in 0..2 {
            truth(&lab, "a trial's delete", |gt| {
                nth(gt, Transition::DeleteAccepted, n)
            })
            .await;
            watches.push(lab.watches_opened());
            lab.restart_api_server();
        }
        watches.push(lab.watches_opened());
        watches
    });
    let gt = lab.ground_truth().entries();
    assert_eq!(out.trials.len(), 2, "{:?}", out.trials);
    for t in &out.trials {
        // T1 cannot be seen before the server is back, and then the watch reconnects at the
        // end of its current backoff (kube-runtime watcher.rs `DefaultBackoff`: 800 ms
        // doubling, jittered up to twice that, reset by a success): after an outage of D the
        // wait is at most about 2·D + 1.6 s; 1 s more for a loaded machine.
        let t0 = t.marks.t0.unwrap();
        let ready = replacement_ready(t, &gt);
        let up = gt
            .iter()
            .find(|e| e.transition == Transition::ApiServerUp && e.ts >= t0)
            .expect("the server came back in the trial");
        let down_ms = up.detail["down_ms"].as_i64().expect("down_ms");
        let bound = ms(up.ts - ready).max(0) + 2 * down_ms + 2_600;
        eprintln!(
            "trial #{}: server down {down_ms} ms, back {} ms after Ready; T1 bound {bound} ms",
            t.index,
            ms(up.ts - ready)
        );
        assert_marks(t, &gt, bound);
    }
    let after = lab.watches_opened();
    assert!(
        after > watches[2] && watches[2] > watches[0],
        "the watches came back after each restart: {watches:?} then {after}"
    );
    assert_no_loss(&rec, &gt);
    lab.shutdown().await;
}

/// Every watch connection dropped at T0, when the replacement is created and when its
/// container starts: the watches resume, the trial completes, nothing lost or doubled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_connections_dropped_mid_trial() {
    let _one = ONE_LAB.lock().await;
    let lab = lab(92).await;
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("drops.jsonl");
    let old: Vec<String> = lab
        .ground_truth()
        .entries()
        .iter()
        .map(|e| e.pod.clone())
        .collect();
    let a = args(&lab, &rec, &["--trials", "1", "--no-memory"]);
    let before = lab.watches_opened();
    let (out, ()) = tokio::join!(run(a), async {
        truth(&lab, "the delete", |gt| {
            nth(gt, Transition::DeleteAccepted, 0)
        })
        .await;
        lab.drop_watches();
        truth(&lab, "the replacement", |gt| {
            first_new(gt, Transition::PodCreated, &old)
        })
        .await;
        lab.drop_watches();
        truth(&lab, "the replacement's container", |gt| {
            first_new(gt, Transition::ContainerStarted, &old)
        })
        .await;
        lab.drop_watches();
    });
    let gt = lab.ground_truth().entries();
    assert_marks(&out.trials[0], &gt, 6_000);
    assert!(
        lab.watches_opened() >= before + 3,
        "watches re-opened: {before} → {}",
        lab.watches_opened()
    );
    assert_no_loss(&rec, &gt);
    lab.shutdown().await;
}

/// 410 Gone: at T0 the lab forgets its change history and drops the watches, so they resume
/// from a resourceVersion that is too old; the watcher re-lists (a `resync_started` for pods
/// after T0), the trial completes, nothing lost or doubled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gone_410_relists_mid_trial() {
    let _one = ONE_LAB.lock().await;
    let lab = lab(93).await;
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("gone.jsonl");
    let a = args(&lab, &rec, &["--trials", "1", "--no-memory"]);
    let (out, ()) = tokio::join!(run(a), async {
        truth(&lab, "the delete", |gt| {
            nth(gt, Transition::DeleteAccepted, 0)
        })
        .await;
        lab.expire_resource_versions();
        lab.drop_watches();
    });
    let gt = lab.ground_truth().entries();
    let t = &out.trials[0];
    assert_marks(t, &gt, 6_000);
    let events = assert_no_loss(&rec, &gt);
    let t0 = t.marks.t0.unwrap();
    assert!(
        events.iter().any(|e| e.ts > t0
            && matches!(&e.kind, EventKind::ResyncStarted { resource } if resource == "pods")),
        "the pods were re-listed after the 410"
    );
    lab.shutdown().await;
}

/// The runtime hangs (accepts, never answers) from the moment the replacement is created:
/// trial 1 ends with a stated reason at the runtime timeout, and once the hang is cleared
/// trial 2 (a new pod) completes with correct marks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_hang_ends_the_trial_with_a_reason() {
    let _one = ONE_LAB.lock().await;
    let lab = lab(94).await;
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("hang.jsonl");
    let old: Vec<String> = lab
        .ground_truth()
        .entries()
        .iter()
        .map(|e| e.pod.clone())
        .collect();
    let a = args(
        &lab,
        &rec,
        &["--trials", "2", "--no-memory", "--runtime-timeout", "15s"],
    );
    let faults = lab.runtime_faults();
    let (out, ()) = tokio::join!(run(a), async {
        truth(&lab, "the replacement", |gt| {
            first_new(gt, Transition::PodCreated, &old)
        })
        .await;
        faults.set_hang(true);
        truth(&lab, "trial 2's delete", |gt| {
            nth(gt, Transition::DeleteAccepted, 1)
        })
        .await;
        faults.set_hang(false);
    });
    let gt = lab.ground_truth().entries();
    assert_eq!(out.trials.len(), 2, "{:?}", out.trials);
    let reason = out.trials[0].reason().expect("trial 1 failed").to_string();
    assert!(!reason.is_empty());
    assert!(
        out.trials[0].marks.t4.is_none(),
        "{:?}",
        out.trials[0].marks
    );
    assert_marks(&out.trials[1], &gt, 500);
    assert_no_loss(&rec, &gt);
    lab.shutdown().await;
}

/// The runtime's process crashes after the first token of the T3 inference (the lab's
/// `crash_mid_inference`): the stream is reset, the kubelet restarts the container. Trial 1
/// ends with the cause (the inference error, or the container restart when the kubelet's
/// report came first); the restart itself is measured as an external trial (with
/// `--probe-external`) when it came before readygap's next delete — or superseded by that
/// delete when the restarted container was not Ready yet —, and is not another
/// replacement when it came after; trial 2 completes with correct marks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_crash_mid_inference() {
    let _one = ONE_LAB.lock().await;
    let lab = lab(95).await;
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("crash.jsonl");
    let a = args(
        &lab,
        &rec,
        &["--trials", "2", "--no-memory", "--probe-external"],
    );
    let faults = lab.runtime_faults();
    let (out, ()) = tokio::join!(run(a), async {
        truth(&lab, "trial 1's delete", |gt| {
            nth(gt, Transition::DeleteAccepted, 0)
        })
        .await;
        faults.set_crash_mid_inference(true);
    });
    let gt = lab.ground_truth().entries();
    let exited = nth(&gt, Transition::ContainerExited, 0).expect("the runtime crashed");
    assert_eq!(exited.detail["exit_code"], 2);
    assert!(
        nth(&gt, Transition::ContainerExited, 1).is_none(),
        "one crash"
    );
    let own: Vec<&Trial> = out.trials.iter().filter(|t| !t.external).collect();
    assert_eq!(own.len(), 2, "{:?}", out.trials);
    let first = own[0];
    assert_eq!(first.new_pod.as_deref(), Some(exited.pod.as_str()));
    let reason = first.reason().expect("trial 1 failed");
    assert!(
        reason.contains("inference_error")
            || reason.contains("container restarted (Error, exit 2)"),
        "{reason}"
    );
    assert!(first.marks.t3.is_some() && first.marks.t4.is_none());
    for t in out.trials.iter().filter(|t| t.external) {
        assert!(t.trigger.contains("container restart"), "{}", t.trigger);
        // With no cooldown, trial 2's delete of the restarting pod may come before the
        // restarted container is Ready: the external trial is then superseded by that
        // delete (seen under load), which must name the pod that crashed.
        if let Some(r) = t
            .reason()
            .filter(|r| r.contains("superseded by a new replacement"))
        {
            assert!(r.contains(exited.pod.as_str()), "{r}");
            continue;
        }
        assert_eq!(t.new_pod.as_deref(), Some(exited.pod.as_str()));
        // T1: the restarted container's Ready, the pod's second in the ground truth.
        assert_marks(t, &gt, 500);
    }
    assert_marks(own[1], &gt, 500);
    assert_no_loss(&rec, &gt);
    lab.shutdown().await;
}

/// Exec is slow (every command starts 300 ms late) in trial 1 and hangs (output delayed by an
/// hour) from trial 2's T0: the memory stream is late or absent (a gap), never stalls a
/// trial; both trials complete with correct marks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_hanging_exec() {
    let _one = ONE_LAB.lock().await;
    let lab = lab(96).await;
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("exec.jsonl");
    lab.runtime_faults().set_slow_exec_ms(300);
    // The cooldown keeps trial 1's replacement (and its slow memory stream) alive for a while.
    let a = args(&lab, &rec, &["--trials", "2", "--cooldown", "8s"]);
    let (out, ()) = tokio::join!(run(a), async {
        truth(&lab, "trial 2's delete", |gt| {
            nth(gt, Transition::DeleteAccepted, 1)
        })
        .await;
        lab.set_exec_delay(Duration::from_secs(3600));
    });
    let gt = lab.ground_truth().entries();
    assert_eq!(out.trials.len(), 2, "{:?}", out.trials);
    for t in &out.trials {
        assert_marks(t, &gt, 500);
    }
    let events = assert_no_loss(&rec, &gt);
    let sampled = |pod: &str| {
        events
            .iter()
            .filter(|e| matches!(&e.kind, EventKind::MemorySample(s) if s.pod == pod))
            .count()
    };
    let first_new = out.trials[0].new_pod.clone().unwrap();
    let second_new = out.trials[1].new_pod.clone().unwrap();
    let feed: Vec<_> = events
        .iter()
        .filter(|e| match &e.kind {
            EventKind::SourceError { feed, .. } | EventKind::SourceConnected { feed, .. } => {
                feed == "memory"
            }
            _ => false,
        })
        .map(|e| format!("{} {:?}", e.ts, e.kind))
        .collect();
    // Slow exec still streams (trial 1's replacement lives on through trial 2's T0); every
    // exec into trial 2's replacement hangs: no sample of it at all, a gap, not a number.
    assert!(
        sampled(&first_new) > 0,
        "slow exec still streams memory: {feed:#?}"
    );
    assert_eq!(sampled(&second_new), 0, "{feed:#?}");
    assert!(out.trials[1].memory_after.is_none());
    lab.shutdown().await;
}

/// A peer on 127.0.0.1 that accepts TCP connections and never says anything: the cold step
/// through `--node-access ssh://root@127.0.0.1:PORT` fails within ssh's connect timeout with
/// the reason, and the trial still runs to T4.
#[ignore = "needs the OpenSSH client (apt-get install -y openssh-client)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssh_hang_fails_the_cold_step_with_a_reason() {
    crate::peers::ssh_client();
    let _one = ONE_LAB.lock().await;
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    // Accept and hold every connection, never write (an sshd that hangs before its banner).
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in silent.incoming().flatten() {
            held.push(c);
        }
    });
    let lab = lab(97).await;
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("ssh.jsonl");
    let url = format!("ssh://root@127.0.0.1:{port}");
    let a = args(
        &lab,
        &rec,
        &[
            "--trials",
            "1",
            "--cold",
            "--no-memory",
            "--node-access",
            &url,
        ],
    );
    let started = Instant::now();
    let out = run(a).await;
    let gt = lab.ground_truth().entries();
    let t = &out.trials[0];
    let cold = t.cold.clone().expect("the cold step is recorded");
    assert!(!cold.dropped, "{cold:?}");
    let error = cold
        .error
        .clone()
        .expect("the cold step says why it failed");
    assert!(
        error.contains("timed out") || error.contains("timeout"),
        "{error}"
    );
    assert_marks(t, &gt, 500);
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "the hang cost {:?}",
        started.elapsed()
    );
    assert_no_loss(&rec, &gt);
    lab.shutdown().await;
}

/// A tmpfs mounted for one test, unmounted when dropped.
struct Tmpfs(std::path::PathBuf);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// The recording's disk fills up mid-trial (a 64 KiB tmpfs, most of it taken by a filler
/// file): the recording stops and the run says why, the trial still completes with correct
/// marks, and everything written before reads back (at most a torn last line, a warning).
#[ignore = "needs root to mount a 64 KiB tmpfs (CI runs as root)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disk_full_stops_the_recording_and_the_run_goes_on() {
    let _one = ONE_LAB.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(&mnt)
        .status()
        .expect("running mount");
    assert!(st.success(), "mount -t tmpfs (needs root)");
    let _mounted = Tmpfs(mnt.clone());
    // Leave about 12 KiB: the session's first events fit, the trial's do not.
    std::fs::write(mnt.join("filler"), vec![0u8; 52 << 10]).unwrap();
    let lab = lab(98).await;
    let rec = mnt.join("full.jsonl");
    let a = args(&lab, &rec, &["--trials", "1"]);
    let out = run(a).await;
    let gt = lab.ground_truth().entries();
    assert_marks(&out.trials[0], &gt, 500);
    assert!(
        out.warnings
            .iter()
            .any(|w| w.starts_with("recording:") && w.contains("No space left on device")),
        "the run says the recording stopped: {:?}",
        out.warnings
    );
    let back = jsonl::read(&rec).expect("what was written reads back");
    assert!(
        back.warnings.len() <= 1 && back.warnings.iter().all(|w| w.contains("torn last line")),
        "{:?}",
        back.warnings
    );
    assert!(
        back.events
            .iter()
            .any(|e| matches!(e.kind, EventKind::Session(_))),
        "the session's first events were kept"
    );
    // The file stopped growing when the disk filled: the trial's end is not in it.
    let state = State::from_events(&back.events);
    assert!(
        state.timeline.trials.iter().all(|t| t.marks.t4.is_none()),
        "the recording stopped before T4"
    );
    lab.shutdown().await;
}

/// Wait (≤ `secs`) for a child to exit.
fn wait_exit(child: &mut std::process::Child, secs: u64) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the process did not exit within {secs} s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn signal(pid: u32, sig: &str) {
    let st = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .expect("running kill");
    assert!(st.success(), "kill -{sig} {pid}");
}

/// Wait (≤ 120 s) until the recording at `path` holds an event matching `f`.
fn wait_recorded(path: &Path, what: &str, f: impl Fn(&EventKind) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok(r) = jsonl::read(path)
            && r.events.iter().any(|e| f(&e.kind))
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the recording never showed {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// SIGTERM, SIGHUP and SIGINT of `readygap run --lab` while trial 1 runs (between T3 and
/// T4): the run says which signal, ends the trial and exits by itself (not killed by the
/// signal), with statistics on stdout and a complete recording where trial 1 is closed.
#[test]
fn run_ends_cleanly_on_sigterm_sighup_sigint() {
    for sig in ["TERM", "HUP", "INT"] {
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("sig.jsonl");
        let child = Command::new(env!("CARGO_BIN_EXE_readygap"))
            .args([
                "run",
                "--lab",
                "local-1b",
                "--lab-speed",
                "4",
                "--trials",
                "3",
                "--cooldown",
                "0s",
                "--no-memory",
                "--record",
            ])
            .arg(&rec)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let mut child = child;
        wait_recorded(&rec, "T3", |k| {
            matches!(k, EventKind::InferenceStarted { .. })
        });
        signal(pid, sig);
        let status = wait_exit(&mut child, 60);
        let mut stdout = String::new();
        let mut stderr = String::new();
        use std::io::Read;
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        assert!(
            status.code().is_some(),
            "SIG{sig}: exited by itself, not killed by the signal: {status:?}\n{stderr}"
        );
        assert!(
            stderr.contains(&format!("interrupted (SIG{sig})")),
            "SIG{sig}: {stderr}"
        );
        assert!(!stdout.is_empty(), "SIG{sig}: statistics printed");
        let bytes = std::fs::read(&rec).unwrap();
        assert_eq!(
            bytes.last(),
            Some(&b'\n'),
            "SIG{sig}: the last line is whole"
        );
        let back = jsonl::read(&rec).unwrap();
        assert!(back.warnings.is_empty(), "{:?}", back.warnings);
        let state = State::from_events(&back.events);
        let t = &state.timeline.trials[0];
        assert!(
            !t.is_running(),
            "SIG{sig}: trial 1 was ended, not left open: {:?}",
            t.status
        );
        assert_eq!(
            state.timeline.trials.iter().filter(|t| !t.external).count(),
            1,
            "SIG{sig}: no trial after the signal"
        );
    }
}

/// The real dashboard (`readygap` on the lab, `--node-access debug-pod`) in tmux, a cold
/// trial running (its debug pod on the node), then SIGTERM, SIGHUP or SIGINT: the process
/// exits 0, the alternate screen is left and the terminal is cooked again, the recording is
/// complete and the debug pod was deleted.
#[ignore = "needs tmux (apt-get install -y tmux)"]
#[test]
fn dashboard_quits_cleanly_on_sigterm_sighup_sigint() {
    crate::peers::tmux();
    let rt = tokio::runtime::Runtime::new().unwrap();
    for sig in ["TERM", "HUP", "INT"] {
        let _one = ONE_LAB.blocking_lock();
        let lab = rt.block_on(lab(99));
        let cluster = lab.cluster();
        let debug_pods = || -> Vec<(String, bool)> {
            cluster
                .store
                .list(readygap_lab::kube::resources::PODS, None)
                .0
                .into_iter()
                .filter_map(|p| {
                    let name = p["metadata"]["name"].as_str()?.to_string();
                    name.starts_with(readygap_live::node::debug_pod::DEBUG_POD_PREFIX)
                        .then(|| (name, p["metadata"]["deletionTimestamp"].is_null()))
                })
                .collect()
        };
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("dash.jsonl");
        let pidfile = dir.path().join("pid");
        let tmux = Tmux {
            socket: format!("readygap-sig{sig}-{}", std::process::id()),
        };
        let bin = env!("CARGO_BIN_EXE_readygap");
        // The inner shell writes its pid and becomes readygap (exec): that pid gets the signal.
        let script = format!(
            "sh -c 'echo $$ > {pid}; exec {bin} --kubeconfig {kc} -n {ns} --node-access debug-pod --record {rec} --recordings-dir {dir}'; echo EXITED $?; stty -a | tr ' ' '\\n' | grep -x -- '-\\?icanon'; sleep 60",
            pid = pidfile.display(),
            kc = lab.kubeconfig.display(),
            ns = lab.namespace,
            rec = rec.display(),
            dir = dir.path().display(),
        );
        tmux.start(&dir.path().join("config"), &script);
        tmux.wait("a Ready pod", |s| {
            s.contains("╭ Pods") && s.contains("Running True")
        });
        tmux.cmd(&["send-keys", "-t", "rg", "c"]);
        tmux.wait("the confirmation", |s| s.contains("Confirm"));
        tmux.cmd(&["send-keys", "-t", "rg", "y"]);
        let deadline = Instant::now() + Duration::from_secs(120);
        while !debug_pods().iter().any(|(_, live)| *live) {
            assert!(
                Instant::now() < deadline,
                "SIG{sig}: no debug pod; pane:\n{}",
                tmux.capture()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        tmux.wait("trial #1 running", |s| s.contains("trial #1"));
        let pid: u32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        signal(pid, sig);
        let screen = tmux.wait("the process to exit and stty to answer", |s| {
            s.contains("EXITED") && s.lines().any(|l| l.trim().ends_with("icanon"))
        });
        assert!(screen.contains("EXITED 0"), "SIG{sig}: {screen}");
        assert!(
            !screen.contains("╭ Pods"),
            "SIG{sig}: alternate screen left: {screen}"
        );
        assert!(
            screen.lines().any(|l| l.trim() == "icanon"),
            "SIG{sig}: terminal still raw: {screen}"
        );
        let left: Vec<_> = debug_pods().into_iter().filter(|(_, live)| *live).collect();
        assert!(left.is_empty(), "SIG{sig}: debug pods left: {left:?}");
        let bytes = std::fs::read(&rec).unwrap();
        assert_eq!(
            bytes.last(),
            Some(&b'\n'),
            "SIG{sig}: the last line is whole"
        );
        let back = jsonl::read(&rec).unwrap();
        assert!(back.warnings.is_empty(), "{:?}", back.warnings);
        assert!(
            back.events
                .iter()
                .any(|e| matches!(e.kind, EventKind::TrialBegin { cold: true })),
            "SIG{sig}: the cold trial is in the recording"
        );
        drop(tmux);
        rt.block_on(lab.shutdown());
    }
}

/// `readygap demo` in tmux, a trial started with `t`, and the window resized to four sizes
/// again and again until the trial reached T4: after every resize the dashboard redraws at
/// the new width (its frame fills the new width), and the trial's T4 shows at the end.
#[ignore = "needs tmux (apt-get install -y tmux)"]
#[test]
fn resized_repeatedly_during_a_trial() {
    crate::peers::tmux();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("resize.jsonl");
    let tmux = Tmux {
        socket: format!("readygap-resize-{}", std::process::id()),
    };
    let bin = env!("CARGO_BIN_EXE_readygap");
    let script = format!(
        "'{bin}' demo --speed 2 --profile local-1b --record '{}' --recordings-dir '{}'; echo EXITED $?; sleep 60",
        rec.display(),
        dir.path().display()
    );
    tmux.start(&dir.path().join("config"), &script);
    tmux.wait("a Ready pod", |s| {
        s.contains("╭ Pods") && s.contains("Running True")
    });
    tmux.cmd(&["send-keys", "-t", "rg", "t"]);
    tmux.wait("the confirmation", |s| s.contains("Confirm"));
    tmux.cmd(&["send-keys", "-t", "rg", "y"]);
    tmux.wait("trial #1 running", |s| s.contains("trial #1 running"));
    let width = |s: &str| s.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    let sizes = [(100, 30), (200, 60), (120, 36), (160, 48)];
    let mut rounds = 0;
    loop {
        for (w, h) in sizes {
            tmux.resize(w, h);
            tmux.wait(&format!("a frame {w} wide"), |s| {
                s.contains("╭ Pods")
                    && width(s) == usize::from(w)
                    && s.lines().count() <= usize::from(h)
            });
        }
        rounds += 1;
        if tmux.capture().contains("T3→T4 ") {
            break;
        }
        assert!(rounds < 200, "the trial never reached T4 while resizing");
    }
    assert!(rounds >= 1);
    tmux.cmd(&["send-keys", "-t", "rg", "q"]);
    let screen = tmux.wait("the process to exit", |s| s.contains("EXITED"));
    assert!(screen.contains("EXITED 0"), "{screen}");
    let back = jsonl::read(&rec).unwrap();
    assert!(back.warnings.is_empty(), "{:?}", back.warnings);
    let state = State::from_events(&back.events);
    assert!(
        state.timeline.trials.first().is_some_and(|t| t.is_ok()),
        "the trial completed: {:?}",
        state.timeline.trials.first().map(|t| &t.status)
    );
}
