//! The trial runner: one state machine that drives recovery trials, used by hotkeys and by
//! `readygap run`:
//!
//! `trial_begin{cold}` → [cold step: unload the model, drop the node's page cache, check it
//! fell] → T0 delete (or rollout restart) → wait for the replacement's Ready (T1) while
//! probing candidate pods every 50 ms (T2) → send the inference (T3, after T2 or after T1) →
//! `done: true` (T4) → cooldown.
//!
//! The runner decides from the same [`State`] the dashboard and the recording show: it
//! applies every event it receives to its own `State` and watches `state.timeline`. A stage
//! that does not finish in time ends the trial with `trial_abort{reason}`; Ctrl-C ends it with
//! `interrupted`. A replacement someone else starts during the cooldown is an external trial
//! (the reducer opens it); the runner drives it to its end too, so it never mixes into the
//! next trial.

use crate::actions::{Executor, Request};
use crate::sources::memory::{self, MemoryConfig};
use crate::sources::runtime::{PodRef, PollConfig, RuntimeAdapter};
use chrono::Utc;
use readygap_core::event::{Event, EventKind, PodView, Source};
use readygap_core::state::State;
use readygap_core::timeline::{Marks, Metric, Replacement, Trial};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// When the T3 inference is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InferAfter {
    /// After the runtime answered (T2) and the pod is Ready (T1), as in the study.
    #[default]
    Runtime,
    /// As soon as the pod is Ready (T1).
    Ready,
}

/// How the runner replaces the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplaceBy {
    #[default]
    Delete,
    Restart,
}

impl InferAfter {
    /// The names on the command line.
    pub const NAMES: [(&'static str, InferAfter); 2] = [
        ("runtime", InferAfter::Runtime),
        ("ready", InferAfter::Ready),
    ];
}

impl ReplaceBy {
    /// The names on the command line.
    pub const NAMES: [(&'static str, ReplaceBy); 2] = [
        ("delete", ReplaceBy::Delete),
        ("restart", ReplaceBy::Restart),
    ];
}

/// Settings of the runner.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TrialConfig {
    pub cold: bool,
    pub replace_by: ReplaceBy,
    pub deployment: Option<String>,
    pub infer_after: InferAfter,
    pub probe_interval: Duration,
    pub cooldown: Duration,
    /// T0 → T1.
    pub ready_timeout: Duration,
    /// T1 → T2.
    pub runtime_timeout: Duration,
    /// T3 → T4.
    pub inference_timeout: Duration,
    /// Waiting for a pod to replace at the start of a trial.
    pub target_timeout: Duration,
    pub namespace: String,
    /// Follow each pod's memory through exec (else no memory feed).
    pub memory: bool,
    pub memory_interval: Duration,
    pub container: Option<String>,
    /// The runtime's port in the pod (picks the serving container without `container`).
    pub runtime_port: u16,
    /// Load this model on the new pod just before T3 (announced as a note, not an inference
    /// of the trial): the published overlapping-residency case, a small model resident when
    /// the served one loads.
    pub preload_model: Option<String>,
    /// Send readygap's own inference (and preload) to replacements readygap did not start
    /// (`--probe-external`). Off: an external trial is only observed (see [`Runner::observe`]).
    pub probe_external: bool,
    /// `--read-only`: only GET requests, anywhere (no action, no inference).
    pub read_only: bool,
    #[serde(skip)]
    pub poll: PollConfig,
}

impl Default for TrialConfig {
    fn default() -> Self {
        Self {
            cold: false,
            replace_by: ReplaceBy::Delete,
            deployment: None,
            infer_after: InferAfter::Runtime,
            probe_interval: Duration::from_millis(50),
            cooldown: Duration::from_secs(15),
            ready_timeout: Duration::from_secs(300),
            runtime_timeout: Duration::from_secs(300),
            inference_timeout: Duration::from_secs(600),
            target_timeout: Duration::from_secs(120),
            namespace: "default".into(),
            memory: true,
            memory_interval: Duration::from_millis(250),
            container: None,
            runtime_port: 11434,
            preload_model: None,
            probe_external: false,
            read_only: false,
            poll: PollConfig::default(),
        }
    }
}

/// What the dashboard asks of a serving runner ([`Runner::serve`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Run one trial now (with the cold step when `cold`).
    Trial { cold: bool },
    /// Run an action in the background.
    Act(Request),
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    Met,
    Timeout,
    Interrupted,
    /// Every sender is gone.
    Closed,
}

/// Per-pod background feeds (memory, residency/models, fast probes).
#[derive(Default)]
struct Followed {
    feeds: Option<CancellationToken>,
    probe: Option<CancellationToken>,
    /// The runtime's request log, followed for an observed trial (its index).
    log: Option<(u32, CancellationToken)>,
    ip: Option<String>,
}

/// The runner.
pub struct Runner {
    pub state: State,
    rx: mpsc::Receiver<Event>,
    tx: mpsc::Sender<Event>,
    exec: Executor,
    runtime: Arc<dyn RuntimeAdapter>,
    client: kube::Client,
    pub cfg: TrialConfig,
    sink: Box<dyn FnMut(&Event) + Send>,
    cancel: CancellationToken,
    followed: BTreeMap<String, Followed>,
    stop_feeds: CancellationToken,
}

impl Runner {
    /// A runner reading `rx` (every source sends there; `tx` is a sender of the same channel
    /// for the runner's own probes and actions). `sink` sees every event applied (recorder,
    /// progress, UI). `cancel` is Ctrl-C.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        rx: mpsc::Receiver<Event>,
        tx: mpsc::Sender<Event>,
        exec: Executor,
        runtime: Arc<dyn RuntimeAdapter>,
        client: kube::Client,
        cfg: TrialConfig,
        sink: Box<dyn FnMut(&Event) + Send>,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            state: State::new(),
            rx,
            tx,
            exec,
            runtime,
            client,
            cfg,
            sink,
            cancel,
            followed: BTreeMap::new(),
            stop_feeds: CancellationToken::new(),
        }
    }

    /// Apply an event the runner produced itself (stamped now) and pass it to the sink.
    fn inject(&mut self, kind: EventKind) {
        let ev = Event::new(Utc::now(), Source::Runner, kind);
        self.apply(ev);
    }

    fn apply(&mut self, ev: Event) {
        self.state.apply(&ev);
        (self.sink)(&ev);
        if matches!(
            ev.kind,
            EventKind::PodApplied(_) | EventKind::PodDeleted(_) | EventKind::ResyncDone { .. }
        ) || matches!(
            ev.kind,
            EventKind::ActionStarted { .. }
                | EventKind::TrialAbort { .. }
                | EventKind::InferenceDone(_)
                | EventKind::RequestLogged(_)
        ) || matches!(ev.kind, EventKind::RuntimeProbe(ref p) if p.ok)
        {
            self.follow();
        }
    }

    /// Apply events until `pred` holds, the deadline passes, Ctrl-C or the channel closes.
    pub async fn wait_until(
        &mut self,
        deadline: Option<Instant>,
        pred: impl Fn(&State) -> bool,
    ) -> Wait {
        loop {
            if pred(&self.state) {
                return Wait::Met;
            }
            let far = Instant::now() + Duration::from_secs(86_400 * 365);
            let ev = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => return Wait::Interrupted,
                ev = self.rx.recv() => ev,
                _ = tokio::time::sleep_until(deadline.unwrap_or(far)) => return Wait::Timeout,
            };
            match ev {
                Some(ev) => self.apply(ev),
                None => return Wait::Closed,
            }
        }
    }

    /// Apply events already queued (non-blocking).
    pub fn drain(&mut self) {
        while let Ok(ev) = self.rx.try_recv() {
            self.apply(ev);
        }
    }

    /// The pod to replace: a Ready pod not being deleted, else any pod not being deleted.
    pub fn pick_victim(state: &State) -> Option<&PodView> {
        let live = || {
            state
                .pods
                .values()
                .filter(|p| p.deletion_timestamp.is_none())
        };
        live().find(|p| p.is_ready()).or_else(|| live().next())
    }

    /// Candidate replacement pods of the open trial (the ones to probe fast).
    fn candidates(&self) -> Vec<PodRef> {
        let Some(t) = self.state.timeline.open() else {
            return Vec::new();
        };
        if t.marks.t2.is_some() {
            return Vec::new();
        }
        self.state
            .pods
            .values()
            .filter(|p| p.deletion_timestamp.is_none())
            .filter(|p| match &t.replacement {
                Replacement::Pods { uids, .. } => {
                    !uids.contains(&p.uid) && !t.present_at_t0.contains(&p.uid)
                }
                Replacement::Restart { uid, .. } => *uid == p.uid,
            })
            .filter(|p| t.new_pod.as_ref().is_none_or(|n| *n == p.name))
            .map(|p| PodRef {
                name: p.name.clone(),
                ip: p.ip.clone(),
            })
            .collect()
    }

    /// Start/stop the per-pod feeds and fast probes to match the state.
    fn follow(&mut self) {
        let pods: Vec<PodView> = self.state.pods.values().cloned().collect();
        let probe_now: Vec<String> = self.candidates().into_iter().map(|p| p.name).collect();
        // An observed trial's marks T3/T4 come from its candidates' request logs.
        let observed = self
            .open_index()
            .filter(|i| !self.may_touch(*i))
            .and_then(|i| self.trial(i))
            .filter(|t| t.marks.t4.is_none())
            .and_then(|t| Some((t.index, t.marks.t0?)));
        // Gone pods.
        let names: Vec<String> = self.followed.keys().cloned().collect();
        for n in names {
            if !self.state.pods.contains_key(&n)
                && let Some(f) = self.followed.remove(&n)
            {
                f.feeds
                    .iter()
                    .chain(f.probe.iter())
                    .chain(f.log.iter().map(|(_, c)| c))
                    .for_each(|c| c.cancel());
            }
        }
        for p in pods {
            let running = p.containers.iter().any(|c| {
                matches!(
                    c.state,
                    readygap_core::event::ContainerState::Running { .. }
                )
            });
            let entry = self.followed.entry(p.name.clone()).or_default();
            // An IP change (or a first IP) restarts the feeds.
            if entry.ip != p.ip {
                if let Some(c) = entry.feeds.take() {
                    c.cancel();
                }
                if let Some(c) = entry.probe.take() {
                    c.cancel();
                }
                entry.ip = p.ip.clone();
            }
            let pod_ref = PodRef {
                name: p.name.clone(),
                ip: p.ip.clone(),
            };
            if entry.feeds.is_none() && running && p.deletion_timestamp.is_none() {
                let token = self.stop_feeds.child_token();
                entry.feeds = Some(token.clone());
                tokio::spawn(crate::sources::runtime::poll_pod(
                    self.runtime.clone(),
                    pod_ref.clone(),
                    self.cfg.poll,
                    self.tx.clone(),
                    token.clone(),
                ));
                if self.cfg.memory {
                    let mc = MemoryConfig {
                        namespace: self.cfg.namespace.clone(),
                        pod: p.name.clone(),
                        container: self.cfg.container.clone(),
                        runtime_port: self.cfg.runtime_port,
                        node: p.node.clone(),
                        interval: self.cfg.memory_interval,
                    };
                    tokio::spawn(memory::run(self.client.clone(), mc, self.tx.clone(), token));
                }
            }
            if p.deletion_timestamp.is_some()
                && let Some(c) = entry.feeds.take()
            {
                c.cancel();
            }
            let want_log = observed.filter(|_| {
                running && p.deletion_timestamp.is_none() && probe_now.contains(&p.name)
                    || running
                        && self
                            .state
                            .timeline
                            .open()
                            .and_then(|t| t.new_pod.as_deref())
                            == Some(p.name.as_str())
            });
            match (&entry.log, want_log) {
                (Some((i, _)), Some((want, _))) if *i == want => {}
                (old, Some((index, since))) => {
                    if let Some((_, c)) = old {
                        c.cancel();
                    }
                    let token = self.stop_feeds.child_token();
                    entry.log = Some((index, token.clone()));
                    tokio::spawn(crate::sources::logs::follow(
                        self.client.clone(),
                        crate::sources::logs::LogFollow {
                            namespace: self.cfg.namespace.clone(),
                            pod: p.name.clone(),
                            container: self.cfg.container.clone(),
                            since,
                        },
                        self.tx.clone(),
                        token,
                    ));
                }
                (Some((_, c)), None) => {
                    c.cancel();
                    entry.log = None;
                }
                (None, None) => {}
            }
            let want_probe = probe_now.contains(&p.name);
            match (&entry.probe, want_probe) {
                (None, true) => {
                    let token = self.stop_feeds.child_token();
                    entry.probe = Some(token.clone());
                    tokio::spawn(fast_probe(
                        self.runtime.clone(),
                        pod_ref,
                        self.cfg.probe_interval,
                        self.tx.clone(),
                        token,
                    ));
                }
                (Some(c), false) => {
                    c.cancel();
                    entry.probe = None;
                }
                _ => {}
            }
        }
    }

    fn trial(&self, index: usize) -> Option<&Trial> {
        self.state.timeline.trials.get(index)
    }

    /// Abort the open trial (if it is `index`) with a reason.
    fn abort(&mut self, index: usize, reason: String) {
        if self.trial(index).is_some_and(|t| t.is_running()) {
            self.inject(EventKind::TrialAbort { reason });
        }
    }

    /// Wait until the trial at `index` has the mark `reached` or has ended, within `timeout`;
    /// on timeout abort it with the reason `timed_out(timeout as text)`. None: go on driving
    /// it; Some(r): stop driving, `drive` returns r.
    async fn wait_for_mark(
        &mut self,
        index: usize,
        reached: fn(&Marks) -> bool,
        timeout: Duration,
        timed_out: fn(&str) -> String,
    ) -> Option<bool> {
        let deadline = Instant::now() + timeout;
        match self
            .wait_until(Some(deadline), |s| {
                trial_ended(s, index)
                    || s.timeline
                        .trials
                        .get(index)
                        .is_some_and(|t| reached(&t.marks))
            })
            .await
        {
            Wait::Met => trial_ended(&self.state, index).then_some(true),
            Wait::Timeout => {
                self.abort(index, timed_out(&secs(timeout)));
                Some(true)
            }
            Wait::Interrupted | Wait::Closed => Some(self.interrupted(index)),
        }
    }

    /// Whether readygap may send its own POSTs (inference, preload) for the trial at
    /// `index`: its own trials, external ones only with `--probe-external`, never under
    /// `--read-only`.
    pub fn may_touch(&self, index: usize) -> bool {
        !self.cfg.read_only
            && self
                .trial(index)
                .is_some_and(|t| !t.external || self.cfg.probe_external)
    }

    /// How long an observed trial may stay open from now: T1 within `ready_timeout` of T0,
    /// then its end (T4 from the runtime's log) within the runtime and inference timeouts
    /// of T1. With the reason it ends with when that passes.
    fn observe_deadline(&self, index: usize) -> Option<(Instant, String)> {
        let t = self.trial(index)?;
        let (from, limit, why) = match t.marks.t1 {
            None => (
                t.marks.t0?,
                self.cfg.ready_timeout,
                "timeout: the replacement pod was not Ready within",
            ),
            Some(t1) => (
                t1,
                self.cfg.runtime_timeout + self.cfg.inference_timeout,
                "no inference observed (readygap sends none to a replacement it did not start \
                 without --probe-external) within",
            ),
        };
        let end = from + chrono::Duration::from_std(limit).ok()?;
        let left = (end - Utc::now()).to_std().unwrap_or(Duration::ZERO);
        Some((Instant::now() + left, format!("{why} {}", secs(limit))))
    }

    /// Follow a trial readygap must not touch (external, or `--read-only`) to its end,
    /// sending nothing to the runtime but the GETs of the feeds: its marks come from the
    /// watches, the GET probes, `/api/ps` and the runtime's request log.
    pub async fn observe(&mut self, index: usize) -> bool {
        loop {
            let Some((deadline, why)) = self.observe_deadline(index) else {
                return true;
            };
            let had_t1 = self.trial(index).is_some_and(|t| t.marks.t1.is_some());
            match self
                .wait_until(Some(deadline), move |s| {
                    trial_ended(s, index)
                        || s.timeline
                            .trials
                            .get(index)
                            .is_some_and(|t| t.marks.t1.is_some() != had_t1)
                })
                .await
            {
                Wait::Met if trial_ended(&self.state, index) => return true,
                Wait::Met => continue,
                Wait::Timeout => {
                    self.abort(index, why);
                    return true;
                }
                Wait::Interrupted | Wait::Closed => return self.interrupted(index),
            }
        }
    }

    /// Drive the trial at `index` from its T0 to its end. Returns false on Ctrl-C/close.
    pub async fn drive(&mut self, index: usize) -> bool {
        if !self.may_touch(index) {
            return self.observe(index).await;
        }
        // T1.
        if let Some(r) = self
            .wait_for_mark(
                index,
                |m| m.t1.is_some(),
                self.cfg.ready_timeout,
                |t| format!("timeout: the replacement pod was not Ready within {t}"),
            )
            .await
        {
            return r;
        }
        // T2 (and T1) before the inference, unless --infer-after ready.
        if self.cfg.infer_after == InferAfter::Runtime
            && let Some(r) = self
                .wait_for_mark(
                    index,
                    |m| m.t2.is_some(),
                    self.cfg.runtime_timeout,
                    |t| format!("timeout: the runtime did not answer within {t} after Ready"),
                )
                .await
        {
            return r;
        }
        // T3.
        let Some(pod) = self.trial(index).and_then(|t| t.new_pod.clone()) else {
            return true;
        };
        let ip = self.state.pods.get(&pod).and_then(|p| p.ip.clone());
        // The models on disk of the new pod, now that its runtime answers (their sizes tell
        // the OOM detector what loading the served model will take).
        if self
            .state
            .runtimes
            .get(&pod)
            .is_none_or(|r| r.on_disk.is_empty())
        {
            let pref = PodRef {
                name: pod.clone(),
                ip: ip.clone(),
            };
            if let Ok(models) = self.runtime.models_on_disk(&pref).await {
                let ev = Event::new(
                    Utc::now(),
                    Source::Runtime,
                    EventKind::ModelsOnDisk {
                        pod: pod.clone(),
                        models,
                    },
                );
                let _ = self.tx.send(ev).await;
            }
        }
        if let Some(model) = self.cfg.preload_model.clone() {
            let pref = PodRef {
                name: pod.clone(),
                ip: ip.clone(),
            };
            let note = |text: String| {
                Event::new(
                    chrono::Utc::now(),
                    readygap_core::event::Source::Runner,
                    readygap_core::event::EventKind::Note { text },
                )
            };
            let _ = self
                .tx
                .send(note(format!("preloading {model} on {pod} before T3")))
                .await;
            let r = self
                .runtime
                .generate(
                    &pref,
                    &model,
                    "Reply with exactly: READY",
                    0,
                    Box::new(|| {}),
                )
                .await;
            let text = if r.ok {
                format!("{model} loaded on {pod}")
            } else {
                format!("preloading {model} failed: {}", r.error.unwrap_or_default())
            };
            let _ = self.tx.send(note(text)).await;
            // T3 goes out once /api/ps shows the preloaded model (bounded), so what is
            // resident is on record before the served model loads.
            let (p, m) = (pod.clone(), model.clone());
            let _ = self
                .wait_until(Some(Instant::now() + Duration::from_secs(10)), move |st| {
                    st.runtimes
                        .get(&p)
                        .is_some_and(|r| r.resident.iter().any(|x| x.name == m))
                })
                .await;
        }
        self.exec.submit(Request::Infer {
            pod: PodRef { name: pod, ip },
            model: None,
        });
        // T4.
        let deadline = Instant::now() + self.cfg.inference_timeout;
        match self
            .wait_until(Some(deadline), move |s| trial_ended(s, index))
            .await
        {
            Wait::Met => true,
            Wait::Timeout => {
                self.abort(
                    index,
                    format!(
                        "timeout: the inference did not finish within {}",
                        secs(self.cfg.inference_timeout)
                    ),
                );
                true
            }
            Wait::Interrupted | Wait::Closed => self.interrupted(index),
        }
    }

    fn interrupted(&mut self, index: usize) -> bool {
        self.abort(index, "interrupted".into());
        false
    }

    /// One trial started by readygap. Returns the index of its trial (if T0 happened) and
    /// whether to go on.
    pub async fn one_trial(&mut self) -> (Option<usize>, bool) {
        // A pod to replace.
        let deadline = Instant::now() + self.cfg.target_timeout;
        match self
            .wait_until(Some(deadline), |s| {
                Self::pick_victim(s).is_some_and(|p| p.is_ready())
            })
            .await
        {
            Wait::Met => {}
            Wait::Timeout => {
                self.inject(EventKind::Note {
                    text: format!(
                        "no Ready pod of the target within {}",
                        secs(self.cfg.target_timeout)
                    ),
                });
                if Self::pick_victim(&self.state).is_none() {
                    return (None, true);
                }
            }
            Wait::Interrupted | Wait::Closed => return (None, false),
        }
        self.drain();
        let Some(victim) = Self::pick_victim(&self.state).cloned() else {
            return (None, true);
        };
        self.inject(EventKind::TrialBegin {
            cold: self.cfg.cold,
        });
        if self.cfg.cold {
            let pod = PodRef {
                name: victim.name.clone(),
                ip: victim.ip.clone(),
            };
            let _ = self.run_action(Request::Unload { pod, model: None }).await;
            match &victim.node {
                Some(node) => {
                    let _ = self
                        .run_action(Request::DropCaches { node: node.clone() })
                        .await;
                }
                None => self.inject(EventKind::CachesDropped(readygap_core::event::CacheDrop {
                    node: String::new(),
                    error: Some(format!("pod {} has no node", victim.name)),
                    ..Default::default()
                })),
            }
            if self.cancel.is_cancelled() {
                self.inject(EventKind::TrialAbort {
                    reason: "interrupted".into(),
                });
                return (None, false);
            }
        }
        let before = self.state.timeline.trials.len();
        if self.cfg.replace_by == ReplaceBy::Restart && self.cfg.deployment.is_none() {
            self.inject(EventKind::Note {
                text: "rollout restart needs a --deployment target; deleting the pod instead"
                    .into(),
            });
        }
        let req = match (self.cfg.replace_by, &self.cfg.deployment) {
            (ReplaceBy::Restart, Some(d)) => Request::RolloutRestart {
                deployment: d.clone(),
            },
            _ => Request::DeletePod {
                pod: victim.name.clone(),
                grace_seconds: None,
            },
        };
        let id = self.exec.submit(req);
        let deadline = Instant::now() + Duration::from_secs(60);
        match self
            .wait_until(Some(deadline), |s| {
                s.timeline.trials.len() > before
                    || s.actions.get(&id).is_some_and(|a| a.finished.is_some())
            })
            .await
        {
            Wait::Met if self.state.timeline.trials.len() == before => {
                // The request failed before it was sent (refused, --read-only).
                let why = match self
                    .state
                    .actions
                    .get(&id)
                    .and_then(|a| a.finished.as_ref())
                {
                    Some((_, readygap_core::event::Outcome::Error { message })) => message.clone(),
                    _ => "it did not start".into(),
                };
                self.inject(EventKind::TrialAbort {
                    reason: format!("the replacement request failed: {why}"),
                });
                return (None, true);
            }
            Wait::Met => {}
            Wait::Timeout => {
                self.inject(EventKind::TrialAbort {
                    reason: "timeout: the replacement request did not start".into(),
                });
                return (None, true);
            }
            Wait::Interrupted | Wait::Closed => {
                self.inject(EventKind::TrialAbort {
                    reason: "interrupted".into(),
                });
                return (None, false);
            }
        }
        let index = self.state.timeline.trials.len() - 1;
        let go_on = self.drive(index).await;
        (Some(index), go_on)
    }

    /// Run an action to its end while applying events (so the state sees its events).
    async fn run_action(&mut self, req: Request) -> Wait {
        let exec = self.exec.clone();
        let id = exec.next_id();
        tokio::spawn(async move {
            exec.execute(id, req).await;
        });
        self.wait_until(None, |s| {
            s.actions.get(&id).is_some_and(|a| a.finished.is_some())
        })
        .await
    }

    /// Cooldown: apply events for `cooldown`; an external trial opening meanwhile is driven to
    /// its end, then the cooldown starts again. Returns false on Ctrl-C/close.
    pub async fn cooldown(&mut self, on_trial: &mut (dyn FnMut(&Trial) + Send)) -> bool {
        loop {
            let deadline = Instant::now() + self.cfg.cooldown;
            match self
                .wait_until(Some(deadline), |s| s.timeline.open().is_some())
                .await
            {
                Wait::Timeout => return true,
                Wait::Interrupted | Wait::Closed => {
                    if let Some(i) = self.open_index() {
                        self.abort(i, "interrupted".into());
                    }
                    return false;
                }
                Wait::Met => {
                    let Some(i) = self.open_index() else { continue };
                    let go_on = self.drive(i).await;
                    if let Some(t) = self.trial(i).cloned() {
                        on_trial(&t);
                    }
                    if !go_on {
                        return false;
                    }
                }
            }
        }
    }

    fn open_index(&self) -> Option<usize> {
        self.state
            .timeline
            .open()
            .map(|t| (t.index as usize).saturating_sub(1))
    }

    /// Run `n` trials with cooldowns between (and after the last, so late external
    /// replacements are not lost). `on_trial` sees each finished trial, own or external.
    pub async fn run_trials(&mut self, n: usize, on_trial: &mut (dyn FnMut(&Trial) + Send)) {
        let mut done = 0;
        let mut attempts = 0;
        while done < n && attempts < n * 3 + 3 {
            attempts += 1;
            let (index, go_on) = self.one_trial().await;
            if let Some(i) = index {
                done += 1;
                if let Some(t) = self.trial(i).cloned() {
                    on_trial(&t);
                }
            }
            if !go_on {
                break;
            }
            if done < n && !self.cooldown(on_trial).await {
                break;
            }
        }
        // A failed inference may be explained by an OOM kill the watch reports a moment
        // later (the reducer then rewrites the reason): wait for it, bounded.
        if !self.cancel.is_cancelled()
            && let Some(i) = self.state.timeline.trials.len().checked_sub(1)
            && self
                .trial(i)
                .and_then(|t| t.reason())
                .is_some_and(|r| r.starts_with("inference_error"))
        {
            self.wait_until(Some(Instant::now() + Duration::from_secs(3)), |s| {
                s.timeline
                    .trials
                    .get(i)
                    .and_then(|t| t.reason())
                    .is_none_or(|r| r.starts_with("oom_killed"))
            })
            .await;
        }
        // Memory after T4 is the first sample after it: give the feed a moment (bounded).
        if self.cfg.memory && !self.cancel.is_cancelled() {
            let wait = (self.cfg.memory_interval * 4).max(Duration::from_secs(1));
            let last = self.state.timeline.trials.len().checked_sub(1);
            if let Some(i) = last.filter(|i| self.trial(*i).is_some_and(|t| t.is_ok())) {
                self.wait_until(Some(Instant::now() + wait), |s| {
                    s.timeline
                        .trials
                        .get(i)
                        .is_none_or(|t| t.memory_after.is_some())
                })
                .await;
            }
        }
        // Debug pods the cold steps created go now (left alone they end by their deadline).
        for e in self.exec.delete_debug_pods().await {
            tracing::warn!("{e}");
        }
        self.stop_feeds.cancel();
        self.drain();
    }

    /// The dashboard's loop: apply events, run the commands it receives (a trial on a
    /// hotkey, any other action in the background), and drive external trials (probe and
    /// infer) as they open. Ends when the command channel closes, the event channel closes
    /// or on `cancel`. `on_trial` sees each finished trial.
    pub async fn serve(
        &mut self,
        mut commands: mpsc::Receiver<Command>,
        on_trial: &mut (dyn FnMut(&Trial) + Send),
    ) {
        loop {
            // An observed trial (external, or --read-only) does not hold the keys: it ends
            // by its own marks or its deadline while commands are served.
            let observed = self
                .open_index()
                .filter(|i| !self.may_touch(*i))
                .and_then(|i| self.observe_deadline(i).map(|d| (i, d)));
            if observed.is_none()
                && let Some(i) = self.open_index()
            {
                let go_on = self.drive(i).await;
                if let Some(t) = self.trial(i).cloned() {
                    on_trial(&t);
                }
                if !go_on {
                    break;
                }
                continue;
            }
            let far = Instant::now() + Duration::from_secs(86_400 * 365);
            let deadline = observed.as_ref().map_or(far, |(_, (d, _))| *d);
            tokio::select! {
                biased;
                _ = self.cancel.cancelled() => {
                    if let Some((i, _)) = &observed {
                        self.abort(*i, "interrupted".into());
                    }
                    break;
                }
                _ = tokio::time::sleep_until(deadline) => {
                    if let Some((i, (_, why))) = &observed {
                        self.abort(*i, why.clone());
                    }
                }
                cmd = commands.recv() => match cmd {
                    None => break,
                    Some(Command::Trial { .. }) if self.cfg.read_only => {
                        self.inject(EventKind::Note {
                            text: "refused: --read-only starts no trial".into(),
                        });
                    }
                    Some(Command::Trial { cold }) => {
                        self.cfg.cold = cold;
                        let (index, go_on) = self.one_trial().await;
                        if let Some(t) = index.and_then(|i| self.trial(i)).cloned() {
                            on_trial(&t);
                        }
                        if !go_on {
                            break;
                        }
                    }
                    Some(Command::Act(req)) => {
                        self.exec.submit(req);
                    }
                },
                ev = self.rx.recv() => match ev {
                    Some(ev) => self.apply(ev),
                    None => break,
                },
            }
            if let Some((i, _)) = observed
                && trial_ended(&self.state, i)
                && let Some(t) = self.trial(i).cloned()
            {
                on_trial(&t);
            }
        }
        // As after `run_trials`: debug pods the cold steps created go when serving ends.
        for e in self.exec.delete_debug_pods().await {
            tracing::warn!("{e}");
        }
        self.stop_feeds.cancel();
    }

    /// Stop every per-pod feed.
    pub fn stop(&self) {
        self.stop_feeds.cancel();
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        self.stop_feeds.cancel();
    }
}

/// The trial at `index` is over (or does not exist).
fn trial_ended(s: &State, index: usize) -> bool {
    s.timeline.trials.get(index).is_none_or(|t| !t.is_running())
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// Probe a pod every `interval` until cancelled (or the receiver is gone).
async fn fast_probe(
    runtime: Arc<dyn RuntimeAdapter>,
    pod: PodRef,
    interval: Duration,
    tx: mpsc::Sender<Event>,
    cancel: CancellationToken,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tick.tick() => {}
        }
        let p = tokio::select! {
            _ = cancel.cancelled() => return,
            p = runtime.probe(&pod) => p,
        };
        let ok = p.ok;
        if tx
            .send(Event::new(
                Utc::now(),
                Source::Runtime,
                EventKind::RuntimeProbe(p),
            ))
            .await
            .is_err()
            || ok
        {
            return;
        }
    }
}

/// One progress line for a finished trial; `of` is (this own trial's ordinal, total).
pub fn progress_line(t: &Trial, of: Option<(usize, usize)>) -> String {
    let f = |m: Metric| {
        t.metric(m)
            .map(|v| format!("{v:.2} s"))
            .unwrap_or_else(|| "-".into())
    };
    let who = if t.external {
        "external trial"
    } else {
        "trial"
    };
    let count = match of {
        Some((k, n)) if !t.external => format!(" {k}/{n}"),
        _ => format!(" #{}", t.index),
    };
    let status = match t.reason() {
        Some(r) => format!("FAILED: {r}"),
        None if t.is_ok() => "ok".into(),
        None => "running".into(),
    };
    let mut line = format!(
        "{who}{count}: k8s {} · runtime {} · functional {} · ready→inference {} · {status}",
        f(Metric::K8sRecovery),
        f(Metric::RuntimeRecovery),
        f(Metric::FunctionalRecovery),
        f(Metric::ReadyToInference)
    );
    if let Some(c) = &t.condition {
        line.push_str(&format!(" · {c}"));
    }
    if !t.verdicts.is_empty() {
        line.push_str(&format!(" · {}", t.verdicts.join(", ")));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use readygap_core::event::{ContainerState, ContainerView, PodCondition};

    fn pod(name: &str, ready: bool, deleting: bool) -> PodView {
        PodView {
            name: name.into(),
            uid: format!("uid-{name}"),
            conditions: vec![PodCondition {
                type_: "Ready".into(),
                status: ready,
                ..Default::default()
            }],
            containers: vec![ContainerView {
                name: "ollama".into(),
                state: ContainerState::Running { started_at: None },
                ..Default::default()
            }],
            deletion_timestamp: deleting.then(Utc::now),
            ..Default::default()
        }
    }

    #[test]
    fn the_victim_is_a_ready_pod_that_is_not_being_deleted() {
        let mut s = State::new();
        assert!(Runner::pick_victim(&s).is_none());
        s.pods.insert("a".into(), pod("a", true, true));
        assert!(
            Runner::pick_victim(&s).is_none(),
            "a terminating pod is no victim"
        );
        s.pods.insert("b".into(), pod("b", false, false));
        assert_eq!(
            Runner::pick_victim(&s).unwrap().name,
            "b",
            "else any live pod"
        );
        s.pods.insert("c".into(), pod("c", true, false));
        assert_eq!(Runner::pick_victim(&s).unwrap().name, "c", "Ready first");
    }
}
