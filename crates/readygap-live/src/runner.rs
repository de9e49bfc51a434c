//! The trial runner's decisions as a pure state machine: `(state, input, now) → actions`.
//!
//! `trial_begin{cold}` → [cold step: unload the model, drop the node's page cache] → T0
//! delete (or rollout restart) → wait for the replacement's Ready (T1) → wait for the
//! runtime's answer (T2, unless `--infer-after ready`) → [models on disk, preload] → the
//! inference (T3) → its end (T4) → cooldown. A stage that does not finish in time ends the
//! trial with `trial_abort{reason}`; Ctrl-C ends it with `interrupted`. A replacement that
//! readygap did not start (someone's delete, a rollout, an OOM restart) is driven (or, when
//! readygap may not touch it, observed) to its end too.
//!
//! The machine decides from the one reduced [`State`] (the session's store) and never waits:
//! commands are taken at any time, so `i` pressed mid-trial is an inference at once and `d`
//! a delete at once. It reads no clock: `now` comes with every input. The async driver
//! ([`crate::trial::Runner`]) executes the [`Do`]s and feeds back what happened.
//! (Shape as kube-rs's `reconcile(obj, ctx) -> Action`: decide from state, return what to do.)

use crate::settings::{COOLDOWN, MemoryConfig, StageTimeouts};
use crate::sources::runtime::{PodRef, PollConfig};
use readygap_core::event::{Action, CacheDrop, EventKind, Outcome, PodView, Timestamp};
use readygap_core::focus;
use readygap_core::state::State;
use readygap_core::timeline::{FailureKind, INTERRUPTED, Trial};
use std::time::Duration;

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
    /// Limits of the stages: the session's, whole.
    #[serde(flatten)]
    pub timeouts: StageTimeouts,
    pub namespace: String,
    /// The memory feed (exec into each pod; off: no memory feed): the session's, whole.
    #[serde(flatten)]
    pub memory: MemoryConfig,
    pub container: Option<String>,
    /// The runtime's port in the pod (picks the serving container without `container`).
    pub runtime_port: u16,
    /// Load this model on the new pod just before T3 (announced as a note, not an inference
    /// of the trial): the published overlapping-residency case, a small model resident when
    /// the served one loads.
    pub preload_model: Option<String>,
    /// Send readygap's own inference (and preload) to replacements readygap did not start
    /// (`--probe-external`). Off: an external trial is only observed.
    pub probe_external: bool,
    /// `--read-only`: only GET requests, anywhere (no action, no inference).
    pub read_only: bool,
    /// The Service probed once the new pod is Ready, until the runtime answers through it
    /// (T2 "answers through the Service", the study's T2); `None`: not probed.
    pub service: Option<String>,
    #[serde(skip)]
    pub poll: PollConfig,
    /// The DCGM exporter, the preferred source of a GPU pod's memory (`--dcgm`).
    #[serde(skip)]
    pub dcgm: Option<crate::sources::gpu::Dcgm>,
}

/// `--probe-interval`'s default (written once, in [`crate::settings`]).
pub use crate::settings::PROBE_INTERVAL;

impl Default for TrialConfig {
    fn default() -> Self {
        Self {
            cold: false,
            replace_by: ReplaceBy::Delete,
            deployment: None,
            infer_after: InferAfter::Runtime,
            probe_interval: PROBE_INTERVAL,
            cooldown: COOLDOWN,
            timeouts: StageTimeouts::default(),
            namespace: "default".into(),
            memory: MemoryConfig::default(),
            container: None,
            runtime_port: crate::sources::runtime::RuntimeKind::Ollama.default_port(),
            preload_model: None,
            probe_external: false,
            read_only: false,
            service: None,
            poll: PollConfig::default(),
            dcgm: None,
        }
    }
}

/// What the session is asked to do: the one action type from a key to the runner (the
/// dashboard's keys name these; tests and the watcher send them too). It names the action,
/// not its target: the machine decides the pod (the focus rule, [`focus::live_pod`], for
/// every key alike), the model (the one chosen with `m`, else the session's), and whether
/// `--read-only` allows it, once; the executor carries out what it decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `t`/`c`: run one trial now on the focused pod (with the cold step when `cold`).
    Trial { cold: bool },
    /// `d`: delete the focused pod now, whatever the trial is doing (it opens a trial).
    Delete,
    /// `r`: rollout restart the target Deployment now.
    RolloutRestart,
    /// `i`: one inference to the focused pod, now.
    Infer,
    /// `u`: unload the model from the focused pod, now.
    Unload,
    /// `p`: the focus of trials, actions and the node feed (`None`: the rule's own choice).
    ChoosePod(Option<String>),
    /// `m`: the model of `i` and `u` from now on (`None`: the session's).
    ChooseModel(Option<String>),
    /// `R`: start a new recording, or stop the one being written. The driver's, not a
    /// decision.
    ToggleRecord,
    /// Start recording to this file (a new one; `None`: stop): the watcher's rotation. The
    /// driver's, not a decision.
    Record(Option<std::path::PathBuf>),
    /// `L`: follow the focused pod's container log for the Log view, or stop. The driver's,
    /// not a decision.
    Tail(bool),
}

impl Command {
    /// A short label for prompts and messages; `pod`: the focused pod, for the actions that
    /// go to it.
    pub fn label(&self, pod: Option<&str>) -> String {
        let pod = pod.unwrap_or("the focused pod");
        match self {
            Command::Trial { cold: false } => "run a full trial (replace the pod)".into(),
            Command::Trial { cold: true } => {
                "run a cold-cache trial (drop caches, replace the pod)".into()
            }
            Command::Delete => format!("delete pod {pod}"),
            Command::RolloutRestart => "rollout restart the target".into(),
            Command::Infer => "send an inference".into(),
            Command::Unload => "unload the model".into(),
            Command::ChoosePod(p) => format!("use pod {}", p.as_deref().unwrap_or("(focus)")),
            Command::ChooseModel(m) => {
                format!("use model {}", m.as_deref().unwrap_or("(session's)"))
            }
            Command::ToggleRecord => "toggle recording".into(),
            Command::Record(_) => "record".into(),
            Command::Tail(true) => "follow the focused pod's log".into(),
            Command::Tail(false) => "stop following the log".into(),
        }
    }
}

/// A task the driver ran for the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    /// The new pod's models on disk were listed (or the listing failed).
    Models,
    /// The preload request ended.
    Preload,
}

/// What the machine is told.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// The state changed (an event was applied).
    Changed,
    Command(Command),
    Finished(Task),
    /// Time passed (a deadline may have come).
    Tick,
    /// Ctrl-C, or the event stream closed: end the open trial as `interrupted` and stop.
    Interrupt,
    /// The commands closed: stop (the open trial stays as it is).
    Close,
}

/// What the driver is asked to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Do {
    /// Carry out this action (its events report it); `ip`: the pod's address, for the
    /// actions that talk to its runtime.
    Act {
        id: u64,
        action: Action,
        ip: Option<String>,
    },
    /// Record this action as refused (requested, then finished with `why`): nothing is sent.
    Refuse {
        id: u64,
        action: Action,
        why: String,
    },
    /// Stamp this runner event now, apply and record it.
    Emit(EventKind),
    /// List the pod's models on disk (a `models_on_disk` event), then [`Task::Models`].
    ListModels(PodRef),
    /// Load `model` on the pod (a note says how it went), then [`Task::Preload`].
    Preload { pod: PodRef, model: String },
    /// The trial at this index ended (a progress line, a callback).
    Ended(usize),
    /// Nothing more to do: clean up (debug pods, feeds) and end.
    Finish,
}

/// Which trials to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// Trials on command (the dashboard).
    Serve,
    /// `n` trials readygap starts (`readygap run`), at most `n * 3 + 3` attempts.
    Trials {
        n: usize,
        done: usize,
        attempts: usize,
    },
}

/// Where a trial readygap drives is.
#[derive(Debug, Clone, PartialEq)]
enum Stage {
    /// T0 → T1.
    Ready,
    /// T1 → T2.
    Runtime,
    /// Waiting for the models on disk.
    Models,
    /// Waiting for the preload request.
    Preload,
    /// The preloaded model shows in `/api/ps` (bounded), so it is on record before T3.
    Resident(String),
    /// T3 → T4.
    Inference,
    /// A trial readygap may not touch: it ends by its marks or by its deadline.
    Observe,
}

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    Idle,
    /// Waiting for the focused pod to be Ready.
    Target {
        cold: bool,
        until: Timestamp,
    },
    /// The cold step's action `id` (unload, then drop caches) is running.
    Cold {
        victim: String,
        node: Option<String>,
        unloading: bool,
        id: u64,
    },
    /// The replacement request `id` is out; the trial opens at its T0.
    Replace {
        id: u64,
        until: Timestamp,
    },
    /// The trial at `index`; `own`: readygap started it (it counts in a run).
    Drive {
        index: usize,
        own: bool,
        stage: Stage,
        since: Timestamp,
    },
    Cooldown {
        until: Timestamp,
    },
    /// After the last trial: a late OOM reason, a restart's Killing Event and the memory
    /// after T4 (bounded).
    Settle {
        until: Timestamp,
    },
    Stopped,
}

/// How long a replacement request may take to reach T0.
const REPLACE_LIMIT: Duration = Duration::from_secs(60);
/// How long the preloaded model may take to show in `/api/ps`.
const RESIDENT_LIMIT: Duration = Duration::from_secs(10);
/// How long a failed inference waits for the OOM kill that may explain it.
const OOM_LIMIT: Duration = Duration::from_secs(3);

/// The runner's state machine.
pub struct Machine {
    pub cfg: TrialConfig,
    /// The session's model (the one inferred with unless `m` chose another) and the grace of
    /// readygap's deletes: the executor's settings, which the runner resolves actions with.
    pub defaults: ActionDefaults,
    plan: Plan,
    phase: Phase,
    chosen: Option<String>,
    model: Option<String>,
    ids: Box<dyn FnMut() -> u64 + Send>,
}

/// What an action's target and parameters default to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ActionDefaults {
    pub model: String,
    pub grace_seconds: Option<u32>,
}

fn after(t: Timestamp, d: Duration) -> Timestamp {
    t + chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

pub(crate) fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

fn note(text: String) -> Do {
    Do::Emit(EventKind::Note { text })
}

fn abort(reason: String) -> Do {
    Do::Emit(EventKind::TrialAbort { reason })
}

/// What a phase's handler did: moved the phase on (`Moved`: go on if it changed), moved it
/// on without the check (`Again`), or there is nothing to do until the next input (`Wait`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Moved,
    Again,
    Wait,
}

/// Where a trial stands in `timeline.trials` (its `index` counts from 1).
pub(crate) fn slot(t: &Trial) -> usize {
    (t.index as usize).saturating_sub(1)
}

/// How to reach a pod's runtime.
pub(crate) fn pod_ref(p: &PodView) -> PodRef {
    PodRef {
        name: p.name.clone(),
        ip: p.ip.clone(),
    }
}

/// The new pod of the trial at `index`, as its runtime is reached.
fn trial_pod(s: &State, index: usize) -> Option<PodRef> {
    let name = s.timeline.trials.get(index)?.new_pod.clone()?;
    let ip = s.pods.get(&name).and_then(|p| p.ip.clone());
    Some(PodRef { name, ip })
}

impl Machine {
    /// A machine serving commands; `ids` draws action ids (the executor's counter).
    pub fn new(cfg: TrialConfig, ids: Box<dyn FnMut() -> u64 + Send>) -> Self {
        Self {
            cfg,
            defaults: ActionDefaults::default(),
            plan: Plan::Serve,
            phase: Phase::Idle,
            chosen: None,
            model: None,
            ids,
        }
    }

    /// Run `n` trials from now on (then settle and finish).
    pub fn run_trials(&mut self, n: usize) {
        self.plan = Plan::Trials {
            n,
            done: 0,
            attempts: 0,
        };
    }

    /// The pod the user chose.
    pub fn chosen(&self) -> Option<&str> {
        self.chosen.as_deref()
    }

    pub fn is_stopped(&self) -> bool {
        self.phase == Phase::Stopped
    }

    /// Between trials: no trial driven, none being started, no cooldown.
    pub fn is_idle(&self) -> bool {
        self.phase == Phase::Idle
    }

    /// The next deadline: the driver sends [`Input::Tick`] then.
    pub fn wake(&self, s: &State) -> Option<Timestamp> {
        match &self.phase {
            Phase::Target { until, .. }
            | Phase::Replace { until, .. }
            | Phase::Cooldown { until }
            | Phase::Settle { until, .. } => Some(*until),
            Phase::Drive {
                index,
                stage,
                since,
                ..
            } => match stage {
                Stage::Ready => Some(after(*since, self.cfg.timeouts.ready)),
                Stage::Runtime => Some(after(*since, self.cfg.timeouts.runtime)),
                Stage::Resident(_) => Some(after(*since, RESIDENT_LIMIT)),
                Stage::Inference => Some(after(*since, self.cfg.timeouts.inference)),
                Stage::Observe => self.observe_deadline(s, *index).map(|(t, _)| t),
                Stage::Models | Stage::Preload => None,
            },
            Phase::Idle | Phase::Cold { .. } | Phase::Stopped => None,
        }
    }

    /// Whether readygap may send its own POSTs (inference, preload) for the trial at
    /// `index`: its own trials, external ones only with `--probe-external`, never under
    /// `--read-only`.
    pub fn may_touch(&self, s: &State, index: usize) -> bool {
        !self.cfg.read_only
            && s.timeline
                .trials
                .get(index)
                .is_some_and(|t| !t.external || self.cfg.probe_external)
    }

    /// How long an observed trial may stay open: T1 within `ready_timeout` of T0, then its
    /// end (T4 from the runtime's log) within the runtime and inference timeouts of T1.
    /// With the reason it ends with when that passes.
    fn observe_deadline(&self, s: &State, index: usize) -> Option<(Timestamp, String)> {
        let t = s.timeline.trials.get(index)?;
        let (from, limit, why) = match t.marks.t1 {
            None => (
                t.marks.t0?,
                self.cfg.timeouts.ready,
                "timeout: the replacement pod was not Ready within",
            ),
            Some(t1) => (
                t1,
                self.cfg.timeouts.runtime + self.cfg.timeouts.inference,
                "no inference observed (readygap sends none to a replacement it did not start \
                 without --probe-external) within",
            ),
        };
        Some((after(from, limit), format!("{why} {}", secs(limit))))
    }

    /// One input: what to do now.
    pub fn on(&mut self, s: &State, input: Input, now: Timestamp) -> Vec<Do> {
        let mut out = Vec::new();
        if self.phase == Phase::Stopped {
            return out;
        }
        match input {
            Input::Command(c) => self.command(s, c, now, &mut out),
            Input::Interrupt => {
                self.interrupt(s, &mut out);
                return out;
            }
            Input::Close => {
                self.phase = Phase::Stopped;
                out.push(Do::Finish);
                return out;
            }
            Input::Finished(task) => self.finished(s, task, now, &mut out),
            Input::Changed | Input::Tick => {}
        }
        self.advance(s, now, &mut out);
        out
    }

    fn command(&mut self, s: &State, c: Command, now: Timestamp, out: &mut Vec<Do>) {
        match c {
            Command::ChoosePod(pod) => self.chosen = pod,
            Command::ChooseModel(model) => self.model = model,
            Command::ToggleRecord | Command::Record(_) | Command::Tail(_) => {}
            Command::Delete => self.on_focus(s, out, |m, p| m.delete(p.name.clone())),
            Command::RolloutRestart => match self.cfg.deployment.clone() {
                Some(deployment) => _ = self.act(Action::RolloutRestart { deployment }, None, out),
                None => out.push(note(
                    "refused: rollout restart needs a --deployment target".into(),
                )),
            },
            Command::Infer => self.on_focus(s, out, |m, p| {
                let model = m.model();
                (
                    Action::Infer {
                        pod: p.name.clone(),
                        model,
                    },
                    p.ip.clone(),
                )
            }),
            Command::Unload => self.on_focus(s, out, |m, p| {
                let model = m.model();
                (
                    Action::Unload {
                        pod: p.name.clone(),
                        model,
                    },
                    p.ip.clone(),
                )
            }),
            Command::Trial { .. } if self.cfg.read_only => {
                out.push(note("refused: --read-only starts no trial".into()));
            }
            Command::Trial { cold } => match (&self.phase, s.timeline.open()) {
                (Phase::Idle, None) => self.target(cold, now),
                (_, open) => out.push(note(format!(
                    "refused: a trial is under way{}; start the next one when it ended",
                    open.map(|t| format!(" (#{})", t.index)).unwrap_or_default()
                ))),
            },
        }
    }

    /// An action on the focused pod: the one focus rule for `d`, `t`, `i` and `u`.
    fn on_focus(
        &mut self,
        s: &State,
        out: &mut Vec<Do>,
        action: impl FnOnce(&Self, &PodView) -> (Action, Option<String>),
    ) {
        match focus::live_pod(s, self.chosen.as_deref()) {
            Some(p) => {
                let (action, ip) = action(self, p);
                self.act(action, ip, out);
            }
            None => out.push(note("no pod to send it to".into())),
        }
    }

    /// The model of `i` and `u`: the one chosen with `m`, else the session's.
    fn model(&self) -> String {
        self.model
            .clone()
            .unwrap_or_else(|| self.defaults.model.clone())
    }

    /// The delete of `pod`, with the session's grace.
    fn delete(&self, pod: String) -> (Action, Option<String>) {
        let grace_seconds = self.defaults.grace_seconds;
        (Action::DeletePod { pod, grace_seconds }, None)
    }

    fn target(&mut self, cold: bool, now: Timestamp) {
        if let Plan::Trials { attempts, .. } = &mut self.plan {
            *attempts += 1;
        }
        self.phase = Phase::Target {
            cold,
            until: after(now, self.cfg.timeouts.target),
        };
    }

    fn interrupt(&mut self, s: &State, out: &mut Vec<Do>) {
        let open = s.timeline.open().map(slot);
        let announced = matches!(self.phase, Phase::Cold { .. } | Phase::Replace { .. });
        if open.is_some() || announced {
            out.push(abort(INTERRUPTED.into()));
        }
        if let Some(i) = open {
            out.push(Do::Ended(i));
        }
        self.phase = Phase::Stopped;
        out.push(Do::Finish);
    }

    fn finished(&mut self, s: &State, task: Task, now: Timestamp, out: &mut Vec<Do>) {
        let Phase::Drive { index, stage, .. } = &self.phase else {
            return;
        };
        let index = *index;
        match (stage, task) {
            (Stage::Models, Task::Models) => self.after_models(s, index, now, out),
            (Stage::Preload, Task::Preload) => {
                let model = self.cfg.preload_model.clone().unwrap_or_default();
                self.stage(Stage::Resident(model), now);
            }
            _ => {}
        }
    }

    fn stage(&mut self, next: Stage, now: Timestamp) {
        if let Phase::Drive { stage, since, .. } = &mut self.phase {
            *stage = next;
            *since = now;
        }
    }

    /// Move on while the state allows it: each phase's handler moves the phase on or says
    /// to wait ([`Flow`]).
    fn advance(&mut self, s: &State, now: Timestamp, out: &mut Vec<Do>) {
        // Each pass changes the phase or returns; the bound only guards a mistake.
        for _ in 0..32 {
            let before = self.phase.clone();
            let flow = match self.phase.clone() {
                Phase::Stopped => Flow::Wait,
                Phase::Idle => self.idle(s, now),
                Phase::Target { cold, until } => self.target_phase(s, cold, until, now, out),
                Phase::Cold { .. } => self.cold_phase(s, now, out),
                Phase::Replace { id, until } => self.replace_phase(s, id, until, now, out),
                Phase::Drive { .. } => self.drive_phase(s, now, out),
                Phase::Cooldown { until } => self.cooldown(s, until, now),
                Phase::Settle { until } => self.settle(s, until, now, out),
            };
            match flow {
                Flow::Wait => return,
                Flow::Again => continue,
                Flow::Moved if self.phase == before => return,
                Flow::Moved => {}
            }
        }
    }

    /// Nothing to do: follow an open trial, or pick the next target.
    fn idle(&mut self, s: &State, now: Timestamp) -> Flow {
        match (self.plan, s.timeline.open()) {
            (_, Some(t)) => self.drive(slot(t), false, s, now),
            (Plan::Trials { .. }, None) => self.target(self.cfg.cold, now),
            (Plan::Serve, None) => return Flow::Wait,
        }
        Flow::Moved
    }

    /// Wait for a Ready pod of the target, then begin the trial (its cold step first).
    fn target_phase(
        &mut self,
        s: &State,
        cold: bool,
        until: Timestamp,
        now: Timestamp,
        out: &mut Vec<Do>,
    ) -> Flow {
        let victim = focus::live_pod(s, self.chosen.as_deref());
        let ready = victim.is_some_and(|p| p.is_ready());
        if !ready && now < until {
            return Flow::Wait;
        }
        if !ready {
            let limit = secs(self.cfg.timeouts.target);
            out.push(note(format!("no Ready pod of the target within {limit}")));
        }
        match victim {
            None => self.next(None, now),
            Some(v) => {
                out.push(Do::Emit(EventKind::TrialBegin { cold }));
                if cold {
                    let unload = Action::Unload {
                        pod: v.name.clone(),
                        model: self.defaults.model.clone(),
                    };
                    let id = self.act(unload, v.ip.clone(), out);
                    self.phase = Phase::Cold {
                        victim: v.name.clone(),
                        node: v.node.clone(),
                        unloading: true,
                        id,
                    };
                } else {
                    self.replace(v.name.clone(), now, out);
                }
            }
        }
        Flow::Moved
    }

    /// The cold step: unload the model, then drop the node's page cache, then replace.
    fn cold_phase(&mut self, s: &State, now: Timestamp, out: &mut Vec<Do>) -> Flow {
        let Phase::Cold {
            victim,
            node,
            unloading,
            id,
        } = self.phase.clone()
        else {
            return Flow::Wait;
        };
        if !finished(s, id) {
            return Flow::Wait;
        }
        match (&node, unloading) {
            (Some(n), true) => {
                let drop = Action::DropCaches { node: n.clone() };
                let id = self.act(drop, None, out);
                self.phase = Phase::Cold {
                    victim,
                    node,
                    unloading: false,
                    id,
                };
            }
            (None, true) => {
                out.push(Do::Emit(EventKind::CachesDropped(CacheDrop {
                    node: String::new(),
                    error: Some(format!("pod {victim} has no node")),
                    ..Default::default()
                })));
                self.replace(victim, now, out);
            }
            (_, false) => self.replace(victim, now, out),
        }
        Flow::Moved
    }

    /// The replacement request is out: drive the trial it opened, as core mapped it (not
    /// an external one that opened while it was out: a container restart seen before the
    /// delete's T0 is superseded by it; taking it for ours ended a run with its last trial
    /// still running).
    fn replace_phase(
        &mut self,
        s: &State,
        id: u64,
        until: Timestamp,
        now: Timestamp,
        out: &mut Vec<Do>,
    ) -> Flow {
        if let Some(i) = s.timeline.trial_of_action(id).map(slot) {
            self.drive(i, true, s, now);
        } else if finished(s, id) {
            // The request failed before it was sent (refused, --read-only).
            let why = match s.actions.get(&id).and_then(|a| a.finished.as_ref()) {
                Some((_, Outcome::Error { message })) => message.clone(),
                _ => "it did not start".into(),
            };
            out.push(abort(format!("the replacement request failed: {why}")));
            self.next(None, now);
        } else if now >= until {
            out.push(abort(
                "timeout: the replacement request did not start".into(),
            ));
            self.next(None, now);
        } else {
            return Flow::Wait;
        }
        Flow::Moved
    }

    /// A running trial: its stage moves on, or the trial is aborted; an ended one moves
    /// the runner to what follows.
    fn drive_phase(&mut self, s: &State, now: Timestamp, out: &mut Vec<Do>) -> Flow {
        let Phase::Drive {
            index,
            own,
            stage,
            since,
        } = self.phase.clone()
        else {
            return Flow::Wait;
        };
        let Some(t) = s.timeline.trials.get(index) else {
            self.next(None, now);
            return Flow::Again;
        };
        if !t.is_running() {
            out.push(Do::Ended(index));
            self.next(Some((index, own)), now);
            return Flow::Again;
        }
        if let Some(why) = self.drive_stage(s, t, &stage, since, now, out) {
            if t.is_running() {
                out.push(abort(why));
            }
            // The abort's event ends the trial: the next input sees it.
            return Flow::Wait;
        }
        Flow::Moved
    }

    /// Between trials: an external trial that opens is followed; else the next target.
    fn cooldown(&mut self, s: &State, until: Timestamp, now: Timestamp) -> Flow {
        if let Some(t) = s.timeline.open() {
            self.drive(slot(t), false, s, now);
        } else if now >= until {
            self.target(self.cfg.cold, now);
        } else {
            return Flow::Wait;
        }
        Flow::Moved
    }

    /// After the last trial: wait (bounded) for what still explains it, then finish.
    fn settle(&mut self, s: &State, until: Timestamp, now: Timestamp, out: &mut Vec<Do>) -> Flow {
        // A failed inference may be explained by an OOM kill the watch reports
        // a moment later (the reducer then rewrites the reason); memory after
        // T4 is the first sample after it.
        let t = s.timeline.trials.last();
        let oom_pending = t.and_then(Trial::failure_kind) == Some(FailureKind::InferenceError);
        let memory_pending =
            self.cfg.memory.follow && t.is_some_and(|t| t.is_ok() && t.memory_after.is_none());
        // The kubelet posts a restart's Killing Event (which names the probe
        // that killed) apart from the pod's status: it may come after it, and
        // the verdicts take it in when it does.
        // (The restart may have opened an external trial after the run's own.)
        let own = s.timeline.trials.iter().rev().find(|t| !t.external);
        let killing_pending = own.is_some_and(|t| {
            t.failure_kind().is_some_and(FailureKind::is_restart)
                && !t.new_pod.iter().chain(t.observed.keys()).any(|p| {
                    let object = format!("pod/{p}");
                    s.kube_events
                        .iter()
                        .any(|(_, e)| e.reason == "Killing" && e.object == object)
                })
        });
        if (oom_pending || memory_pending || killing_pending) && now < until {
            return Flow::Wait;
        }
        self.phase = Phase::Stopped;
        out.push(Do::Finish);
        Flow::Wait
    }

    fn drive(&mut self, index: usize, own: bool, s: &State, now: Timestamp) {
        let stage = if self.may_touch(s, index) {
            Stage::Ready
        } else {
            Stage::Observe
        };
        self.phase = Phase::Drive {
            index,
            own,
            stage,
            since: now,
        };
    }

    fn replace(&mut self, victim: String, now: Timestamp, out: &mut Vec<Do>) {
        if self.cfg.replace_by == ReplaceBy::Restart && self.cfg.deployment.is_none() {
            out.push(note(
                "rollout restart needs a --deployment target; deleting the pod instead".into(),
            ));
        }
        let (action, ip) = match (self.cfg.replace_by, &self.cfg.deployment) {
            (ReplaceBy::Restart, Some(d)) => (
                Action::RolloutRestart {
                    deployment: d.clone(),
                },
                None,
            ),
            _ => self.delete(victim),
        };
        let id = self.act(action, ip, out);
        self.phase = Phase::Replace {
            id,
            until: after(now, REPLACE_LIMIT),
        };
    }

    /// The stage of a running trial: moves it on, or returns the reason to abort it.
    fn drive_stage(
        &mut self,
        s: &State,
        t: &Trial,
        stage: &Stage,
        since: Timestamp,
        now: Timestamp,
        out: &mut Vec<Do>,
    ) -> Option<String> {
        let index = slot(t);
        let late = |limit: Duration| now >= after(since, limit);
        match stage {
            Stage::Observe => {
                let (until, why) = self.observe_deadline(s, index)?;
                (now >= until).then_some(why)
            }
            Stage::Ready if t.marks.t1.is_some() => {
                if self.cfg.infer_after == InferAfter::Runtime {
                    self.stage(Stage::Runtime, now);
                } else {
                    self.prepare(s, t, now, out);
                }
                None
            }
            Stage::Ready => late(self.cfg.timeouts.ready).then(|| {
                format!(
                    "timeout: the replacement pod was not Ready within {}",
                    secs(self.cfg.timeouts.ready)
                )
            }),
            Stage::Runtime if t.marks.t2.is_some() => {
                self.prepare(s, t, now, out);
                None
            }
            Stage::Runtime => late(self.cfg.timeouts.runtime).then(|| {
                format!(
                    "timeout: the runtime did not answer within {} after Ready",
                    secs(self.cfg.timeouts.runtime)
                )
            }),
            Stage::Models | Stage::Preload => None,
            Stage::Resident(model) => {
                let pod = t.new_pod.as_deref().unwrap_or_default();
                let resident = s
                    .runtimes
                    .get(pod)
                    .is_some_and(|r| r.resident.iter().any(|x| x.name == *model));
                if resident || late(RESIDENT_LIMIT) {
                    self.infer(s, index, now, out);
                }
                None
            }
            Stage::Inference => late(self.cfg.timeouts.inference).then(|| {
                format!(
                    "timeout: the inference did not finish within {}",
                    secs(self.cfg.timeouts.inference)
                )
            }),
        }
    }

    /// Before T3: the new pod's models on disk (their sizes tell the OOM detector what
    /// loading the served model will take), then the preload, then the inference.
    fn prepare(&mut self, s: &State, t: &Trial, now: Timestamp, out: &mut Vec<Do>) {
        let Some(pod) = trial_pod(s, slot(t)) else {
            return;
        };
        if s.runtimes
            .get(&pod.name)
            .is_none_or(|r| r.on_disk.is_empty())
        {
            out.push(Do::ListModels(pod));
            self.stage(Stage::Models, now);
        } else {
            self.after_models(s, slot(t), now, out);
        }
    }

    fn after_models(&mut self, s: &State, index: usize, now: Timestamp, out: &mut Vec<Do>) {
        let Some(pod) = trial_pod(s, index) else {
            return;
        };
        match self.cfg.preload_model.clone() {
            Some(model) => {
                out.push(note(format!(
                    "preloading {model} on {} before T3",
                    pod.name
                )));
                out.push(Do::Preload { pod, model });
                self.stage(Stage::Preload, now);
            }
            None => self.infer(s, index, now, out),
        }
    }

    fn infer(&mut self, s: &State, index: usize, now: Timestamp, out: &mut Vec<Do>) {
        let Some(pod) = trial_pod(s, index) else {
            return;
        };
        let model = self.defaults.model.clone();
        let infer = Action::Infer {
            pod: pod.name,
            model,
        };
        self.act(infer, pod.ip, out);
        self.stage(Stage::Inference, now);
    }

    /// Ask the driver for an action; returns its id. Under `--read-only` (only GETs leave
    /// readygap) every action is refused here, the one place that decides it: the driver
    /// records the refusal and sends nothing.
    fn act(&mut self, action: Action, ip: Option<String>, out: &mut Vec<Do>) -> u64 {
        let id = (self.ids)();
        if self.cfg.read_only {
            let why = format!(
                "refused: --read-only sends only GET requests ({} is not one)",
                action.label()
            );
            out.push(Do::Refuse { id, action, why });
        } else {
            out.push(Do::Act { id, action, ip });
        }
        id
    }

    /// After a trial (`Some((index, own))`) or a failed attempt (`None`).
    fn next(&mut self, ended: Option<(usize, bool)>, now: Timestamp) {
        let Plan::Trials { n, done, attempts } = &mut self.plan else {
            self.phase = Phase::Idle;
            return;
        };
        let external = matches!(ended, Some((_, false)));
        if let Some((_, true)) = ended {
            *done += 1;
        }
        if external || (*done < *n && *attempts < *n * 3 + 3) {
            // After an external trial in the cooldown, the cooldown starts again.
            self.phase = Phase::Cooldown {
                until: after(now, self.cfg.cooldown),
            };
        } else {
            let memory = (self.cfg.memory.interval * 4).max(Duration::from_secs(1));
            self.phase = Phase::Settle {
                until: after(now, OOM_LIMIT.max(memory)),
            };
        }
    }
}

/// Whether action `id` has finished.
fn finished(s: &State, id: u64) -> bool {
    s.actions.get(&id).is_some_and(|a| a.finished.is_some())
}

#[cfg(test)]
mod tests {
    //! The machine against synthetic events: no tokio, no cluster, no clock.
    use super::*;
    use readygap_core::event::{Event, Source};
    use readygap_core::fixtures::{self as fx, Stage as PodStage};

    /// The driver's part, in miniature: apply what the machine emits, feed back `Changed`.
    struct Sim {
        s: State,
        m: Machine,
        now: i64,
    }

    impl Sim {
        fn new(cfg: TrialConfig) -> Self {
            let mut next = 0;
            let mut m = Machine::new(
                cfg,
                Box::new(move || {
                    next += 1;
                    next
                }),
            );
            m.defaults.model = "llama3.2:3b".into();
            let mut s = State::new();
            s.apply(&fx::applied(0, fx::pod("a", "uid-a", PodStage::Ready, 0)));
            let mut b = fx::pod("b", "uid-b", PodStage::Ready, 0);
            b.created = Some(fx::at(10));
            s.apply(&fx::applied(0, b));
            Self { s, m, now: 100 }
        }

        fn input(&mut self, input: Input) -> Vec<Do> {
            let mut all = Vec::new();
            let mut inputs = vec![input];
            while let Some(i) = inputs.pop() {
                for d in self.m.on(&self.s, i, fx::at(self.now)) {
                    if let Do::Emit(kind) = &d {
                        self.s
                            .apply(&Event::new(fx::at(self.now), Source::Runner, kind.clone()));
                        inputs.push(Input::Changed);
                    }
                    all.push(d);
                }
            }
            all
        }

        fn events(&mut self, evs: impl IntoIterator<Item = Event>) -> Vec<Do> {
            let mut all = Vec::new();
            for e in evs {
                self.now = self.now.max((e.ts - fx::at(0)).num_milliseconds());
                self.s.apply(&e);
                all.extend(self.input(Input::Changed));
            }
            all
        }

        fn at(&mut self, ms: i64) -> Vec<Do> {
            self.now = ms;
            self.input(Input::Tick)
        }
    }

    fn cfg() -> TrialConfig {
        TrialConfig {
            memory: MemoryConfig {
                follow: false,
                ..MemoryConfig::default()
            },
            ..TrialConfig::default()
        }
    }

    fn acts(dos: &[Do]) -> Vec<(u64, Action)> {
        dos.iter()
            .filter_map(|d| match d {
                Do::Act { id, action, .. } => Some((*id, action.clone())),
                _ => None,
            })
            .collect()
    }

    /// The pod addresses the actions go to.
    fn ips(dos: &[Do]) -> Vec<Option<String>> {
        dos.iter()
            .filter_map(|d| match d {
                Do::Act { ip, .. } => Some(ip.clone()),
                _ => None,
            })
            .collect()
    }

    fn infer(pod: &str) -> Action {
        Action::Infer {
            pod: pod.into(),
            model: "llama3.2:3b".into(),
        }
    }

    fn notes(dos: &[Do]) -> Vec<String> {
        dos.iter()
            .filter_map(|d| match d {
                Do::Emit(EventKind::Note { text }) => Some(text.clone()),
                Do::Emit(EventKind::TrialAbort { reason }) => Some(format!("abort: {reason}")),
                _ => None,
            })
            .collect()
    }

    fn delete(pod: &str) -> Action {
        Action::DeletePod {
            pod: pod.into(),
            grace_seconds: None,
        }
    }

    /// The executor's events for action `id` (requested + started) at `ms`.
    fn started(ms: i64, id: u64, action: &Action) -> [Event; 2] {
        fx::action(ms, id, action.clone())
    }

    /// The new pod `c` comes up: Ready at +1700 ms, the runtime answers at +2400 ms.
    fn replacement(t: i64) -> Vec<Event> {
        vec![
            fx::deleting(t + 20, fx::pod("a", "uid-a", PodStage::Ready, 0)),
            fx::applied(t + 40, fx::pod("c", "uid-c", PodStage::Pending, t + 40)),
            fx::applied(t + 1700, fx::pod("c", "uid-c", PodStage::Ready, t + 1690)),
            fx::probe(t + 2400, "c", true),
        ]
    }

    #[test]
    fn a_trial_replaces_the_focused_pod_and_goes_to_t4() {
        let mut sim = Sim::new(cfg());
        // `p` chose the older pod `a`: `t` replaces it, not the newest Ready one (`b`).
        assert!(
            sim.input(Input::Command(Command::ChoosePod(Some("a".into()))))
                .is_empty()
        );
        let dos = sim.input(Input::Command(Command::Trial { cold: false }));
        assert!(dos.contains(&Do::Emit(EventKind::TrialBegin { cold: false })));
        assert_eq!(acts(&dos), vec![(1, delete("a"))]);
        assert!(sim.events(started(200, 1, &delete("a"))).is_empty());
        assert!(sim.s.timeline.open().is_some(), "T0 opened the trial");
        // T1 and T2: the models on disk are listed first, then the inference goes out.
        let dos = sim.events(replacement(200));
        let c = PodRef {
            name: "c".into(),
            ip: Some("127.0.0.10".into()),
        };
        assert_eq!(dos, vec![Do::ListModels(c.clone())]);
        let dos = sim.input(Input::Finished(Task::Models));
        assert_eq!(acts(&dos), vec![(2, infer("c"))]);
        assert_eq!(ips(&dos), vec![c.ip]);
        let mut evs = started(2700, 2, &infer("c")).to_vec();
        evs.push(fx::infer_start(2710, 2, "c"));
        assert!(sim.events(evs).is_empty());
        let dos = sim.events([fx::infer_done(6000, 2, true)]);
        assert_eq!(dos, vec![Do::Ended(0)]);
        let t = &sim.s.timeline.trials[0];
        assert!(t.is_ok(), "{:?}", t.status);
        assert!(t.trigger.contains('a'), "{}", t.trigger);
        // Serving: idle again, a next `t` is taken (on the newest Ready pod, the choice
        // cleared).
        sim.input(Input::Command(Command::ChoosePod(None)));
        let dos = sim.input(Input::Command(Command::Trial { cold: false }));
        assert_eq!(acts(&dos), vec![(3, delete("b"))]);
    }

    #[test]
    fn without_a_choice_the_newest_ready_pod_is_replaced() {
        let mut sim = Sim::new(cfg());
        let dos = sim.input(Input::Command(Command::Trial { cold: false }));
        assert_eq!(acts(&dos), vec![(1, delete("b"))]);
    }

    /// `d`, `t`, `i` and `u` go to the same pod: the focus rule over the choice of `p`, decided
    /// by the machine (the key names no pod).
    #[test]
    fn d_t_i_and_u_pick_the_pod_by_the_one_focus_rule() {
        let unload = |pod: &str| Action::Unload {
            pod: pod.into(),
            model: "llama3.2:3b".into(),
        };
        for (choice, pod) in [(None, "b"), (Some("a"), "a")] {
            let mut sim = Sim::new(cfg());
            sim.input(Input::Command(Command::ChoosePod(choice.map(Into::into))));
            let d = sim.input(Input::Command(Command::Delete));
            let i = sim.input(Input::Command(Command::Infer));
            let u = sim.input(Input::Command(Command::Unload));
            let t = sim.input(Input::Command(Command::Trial { cold: false }));
            assert_eq!(acts(&d), vec![(1, delete(pod))], "d with {choice:?}");
            assert_eq!(acts(&i), vec![(2, infer(pod))], "i with {choice:?}");
            assert_eq!(acts(&u), vec![(3, unload(pod))], "u with {choice:?}");
            assert_eq!(acts(&t), vec![(4, delete(pod))], "t with {choice:?}");
        }
        // `m` changes the model of `i` (and `u`), not the trial's.
        let mut sim = Sim::new(cfg());
        sim.input(Input::Command(Command::ChooseModel(Some(
            "qwen2.5:0.5b".into(),
        ))));
        let i = sim.input(Input::Command(Command::Infer));
        let want = Action::Infer {
            pod: "b".into(),
            model: "qwen2.5:0.5b".into(),
        };
        assert_eq!(acts(&i), vec![(1, want)]);
    }

    /// `--read-only`: the machine refuses every action itself, once, and says why; nothing is
    /// handed to the executor to send, and no trial starts.
    #[test]
    fn read_only_is_decided_once_by_the_machine() {
        let mut sim = Sim::new(TrialConfig {
            read_only: true,
            deployment: Some("ollama".into()),
            ..cfg()
        });
        for c in [
            Command::Delete,
            Command::Infer,
            Command::Unload,
            Command::RolloutRestart,
        ] {
            let dos = sim.input(Input::Command(c.clone()));
            assert!(acts(&dos).is_empty(), "{c:?} sent: {dos:?}");
            match &dos[..] {
                [Do::Refuse { why, action, .. }] => assert_eq!(
                    *why,
                    format!(
                        "refused: --read-only sends only GET requests ({} is not one)",
                        action.label()
                    )
                ),
                other => panic!("{c:?}: {other:?}"),
            }
        }
        let dos = sim.input(Input::Command(Command::Trial { cold: true }));
        assert_eq!(notes(&dos), vec!["refused: --read-only starts no trial"]);
        assert!(sim.m.is_idle());
        // Without --read-only the same commands are carried out.
        let mut sim = Sim::new(TrialConfig {
            deployment: Some("ollama".into()),
            ..cfg()
        });
        let dos = sim.input(Input::Command(Command::RolloutRestart));
        let restart = Action::RolloutRestart {
            deployment: "ollama".into(),
        };
        assert_eq!(acts(&dos), vec![(1, restart)]);
    }

    #[test]
    fn commands_are_taken_at_once_while_a_trial_runs() {
        let mut sim = Sim::new(cfg());
        sim.input(Input::Command(Command::Trial { cold: false }));
        sim.events(started(200, 1, &delete("b")));
        sim.events([fx::deleting(220, fx::pod("b", "uid-b", PodStage::Ready, 0))]);
        assert!(sim.s.timeline.open().is_some_and(|t| t.marks.t1.is_none()));
        // `i` mid-trial: an inference to the focused pod, now (not after T4).
        let dos = sim.input(Input::Command(Command::Infer));
        assert_eq!(acts(&dos), vec![(2, infer("a"))]);
        assert_eq!(ips(&dos), vec![Some("127.0.0.10".into())]);
        // `d` (confirmed) mid-trial: the delete of the focused pod, now.
        let dos = sim.input(Input::Command(Command::Delete));
        assert_eq!(acts(&dos), vec![(3, delete("a"))]);
        // A second trial is refused, with a reason on screen and in the recording.
        let dos = sim.input(Input::Command(Command::Trial { cold: false }));
        assert!(acts(&dos).is_empty());
        assert!(
            notes(&dos)[0].starts_with("refused: a trial is under way (#1)"),
            "{dos:?}"
        );
    }

    #[test]
    fn a_stage_that_takes_too_long_aborts_the_trial() {
        let mut sim = Sim::new(TrialConfig {
            timeouts: StageTimeouts {
                ready: Duration::from_secs(5),
                ..StageTimeouts::default()
            },
            ..cfg()
        });
        sim.input(Input::Command(Command::Trial { cold: false }));
        sim.events(started(200, 1, &delete("b")));
        assert_eq!(
            sim.m.wake(&sim.s),
            Some(fx::at(5_200)),
            "T0 + ready_timeout"
        );
        assert!(sim.at(5_199).is_empty());
        let dos = sim.at(5_200);
        assert_eq!(
            notes(&dos),
            vec!["abort: timeout: the replacement pod was not Ready within 5.0 s"]
        );
        assert!(dos.contains(&Do::Ended(0)), "{dos:?}");
        assert!(sim.s.timeline.open().is_none());
    }

    #[test]
    fn an_interrupt_ends_the_open_trial_and_the_machine() {
        let mut sim = Sim::new(cfg());
        sim.input(Input::Command(Command::Trial { cold: false }));
        sim.events(started(200, 1, &delete("b")));
        let dos = sim.input(Input::Interrupt);
        assert_eq!(notes(&dos), vec!["abort: interrupted"]);
        assert_eq!(dos.last(), Some(&Do::Finish));
        assert!(sim.m.is_stopped());
        assert!(sim.input(Input::Command(Command::Infer)).is_empty());
    }

    #[test]
    fn a_failed_replacement_request_ends_the_attempt() {
        let mut sim = Sim::new(TrialConfig {
            read_only: false,
            ..cfg()
        });
        sim.input(Input::Command(Command::Trial { cold: false }));
        let finished = fx::ev(
            150,
            Source::Action,
            EventKind::ActionFinished {
                id: 1,
                outcome: Outcome::Error {
                    message: "forbidden".into(),
                },
            },
        );
        let mut evs = fx::action(
            150,
            1,
            readygap_core::event::Action::RolloutRestart {
                deployment: "x".into(),
            },
        )
        .to_vec();
        evs.truncate(1);
        evs.push(finished);
        let dos = sim.events(evs);
        assert_eq!(
            notes(&dos),
            vec!["abort: the replacement request failed: forbidden"]
        );
        // Idle again.
        let dos = sim.input(Input::Command(Command::Trial { cold: false }));
        assert_eq!(acts(&dos).len(), 1);
    }

    /// A container restarts while readygap's delete is out (the fault suite's crash mid
    /// inference, with no cooldown): the restart opens an external trial before the delete's
    /// T0 supersedes it. The run drives the trial its delete opened, not the external one.
    #[test]
    fn an_external_trial_opened_while_the_delete_is_out_is_not_ours() {
        let mut sim = Sim::new(TrialConfig {
            infer_after: InferAfter::Ready,
            ..cfg()
        });
        sim.m.run_trials(1);
        let dos = sim.input(Input::Changed);
        assert_eq!(acts(&dos), vec![(1, delete("b"))]);
        // `b`'s container restarts before the delete is seen.
        let mut restarted = fx::pod("b", "uid-b", PodStage::Ready, 0);
        restarted.created = Some(fx::at(10));
        restarted.containers[0].restart_count += 1;
        restarted.containers[0].ready = false;
        restarted.containers[0].last_state =
            Some(readygap_core::event::ContainerState::Terminated {
                reason: "Error".into(),
                exit_code: 2,
                finished_at: Some(fx::at(140)),
            });
        if let Some(c) = restarted.conditions.iter_mut().find(|c| c.type_ == "Ready") {
            c.status = false;
        }
        sim.events([fx::applied(150, restarted)]);
        assert!(
            sim.s.timeline.trials.first().is_some_and(|t| t.external),
            "{:?}",
            sim.s.timeline.trials
        );
        // The delete's T0 supersedes the external trial and opens readygap's.
        sim.events(started(200, 1, &delete("b")));
        let ours = sim.s.timeline.trials.last().unwrap();
        assert!(
            !ours.external && ours.is_running(),
            "{:?}",
            sim.s.timeline.trials
        );
        assert!(!sim.m.is_stopped(), "the run waits for its own trial");
        // It goes on to T4 and ends that trial, then the run settles.
        let dos = sim.events([fx::applied(
            1900,
            fx::pod("c", "uid-c", PodStage::Ready, 1900),
        )]);
        assert!(matches!(dos[..], [Do::ListModels(_)]), "{dos:?}");
        let dos = sim.input(Input::Finished(Task::Models));
        let (id, infer) = acts(&dos)[0].clone();
        let mut evs = started(2000, id, &infer).to_vec();
        evs.push(fx::infer_start(2000, id, "c"));
        evs.push(fx::infer_done(3000, id, true));
        let dos = sim.events(evs);
        let last = sim.s.timeline.trials.len() - 1;
        assert_eq!(
            dos,
            vec![Do::Ended(last), Do::Finish],
            "ends after its own trial"
        );
        assert!(sim.s.timeline.trials[last].is_ok());
    }

    #[test]
    fn a_run_has_cooldowns_between_its_trials_then_finishes() {
        let mut sim = Sim::new(TrialConfig {
            cooldown: Duration::from_secs(2),
            infer_after: InferAfter::Ready,
            ..cfg()
        });
        sim.m.run_trials(2);
        let dos = sim.input(Input::Changed);
        assert_eq!(acts(&dos), vec![(1, delete("b"))]);
        sim.events(started(200, 1, &delete("b")));
        let dos = sim.events([fx::applied(
            1900,
            fx::pod("c", "uid-c", PodStage::Ready, 1900),
        )]);
        assert!(matches!(dos[..], [Do::ListModels(_)]), "{dos:?}");
        let dos = sim.input(Input::Finished(Task::Models));
        let (id, infer) = acts(&dos)[0].clone();
        let mut evs = started(2000, id, &infer).to_vec();
        evs.push(fx::infer_start(2000, id, "c"));
        evs.push(fx::infer_done(3000, id, true));
        let dos = sim.events(evs);
        assert_eq!(dos, vec![Do::Ended(0)]);
        // The cooldown: nothing until it passed.
        assert_eq!(sim.m.wake(&sim.s), Some(fx::at(5_000)));
        assert!(sim.at(4_999).is_empty());
        let dos = sim.at(5_000);
        assert!(
            dos.contains(&Do::Emit(EventKind::TrialBegin { cold: false })),
            "{dos:?}"
        );
        // The second trial fails at its inference; the run settles, then finishes.
        let victim = match &acts(&dos)[0].1 {
            Action::DeletePod { pod, .. } => pod.clone(),
            other => panic!("{other:?}"),
        };
        let del = acts(&dos)[0].0;
        sim.events(started(5_100, del, &delete(&victim)));
        let dos = sim.events([fx::applied(
            6_000,
            fx::pod("d", "uid-d", PodStage::Ready, 6_000),
        )]);
        assert!(matches!(dos[..], [Do::ListModels(_)]), "{dos:?}");
        let dos = sim.input(Input::Finished(Task::Models));
        let (id, infer) = acts(&dos)[0].clone();
        let mut evs = started(6_100, id, &infer).to_vec();
        evs.push(fx::infer_start(6_100, id, "d"));
        evs.push(fx::infer_done(7_000, id, false));
        let dos = sim.events(evs);
        assert_eq!(dos, vec![Do::Ended(1)]);
        assert!(
            !sim.m.is_stopped(),
            "waits (bounded) for an OOM kill to explain it"
        );
        let dos = sim.at(10_000);
        assert_eq!(dos, vec![Do::Finish]);
    }

    /// A last trial lost to a container restart: the run waits (bounded) for the Killing
    /// Event the kubelet posts apart from the pod's status, and finishes when it comes.
    #[test]
    fn a_run_lost_to_a_restart_waits_for_the_killing_event() {
        let mut sim = Sim::new(TrialConfig {
            infer_after: InferAfter::Ready,
            ..cfg()
        });
        sim.m.run_trials(1);
        let dos = sim.input(Input::Changed);
        assert_eq!(acts(&dos), vec![(1, delete("b"))]);
        sim.events(started(200, 1, &delete("b")));
        let mut c = fx::pod("c", "uid-c", PodStage::Started, 1000);
        sim.events([fx::applied(1000, c.clone())]);
        c.containers[0].restart_count = 1;
        c.containers[0].last_state = Some(readygap_core::event::ContainerState::Terminated {
            reason: "Completed".into(),
            exit_code: 0,
            finished_at: Some(fx::at(1500)),
        });
        let dos = sim.events([fx::applied(1500, c)]);
        assert_eq!(dos, vec![Do::Ended(0)], "{:?}", sim.s.timeline.trials);
        assert!(
            sim.s.timeline.trials[0]
                .reason()
                .is_some_and(|r| r.starts_with("container restarted")),
            "{:?}",
            sim.s.timeline.trials[0]
        );
        assert!(sim.at(1_600).is_empty(), "no Killing Event yet");
        assert!(!sim.m.is_stopped());
        let killing = fx::ev(
            1_700,
            readygap_core::event::Source::Kube,
            EventKind::KubeEvent(readygap_core::event::KubeEventView {
                object: "pod/c".into(),
                reason: "Killing".into(),
                message: "Container ollama failed liveness probe, will be restarted".into(),
                type_: "Normal".into(),
                time: Some(fx::at(1_000)),
                ..Default::default()
            }),
        );
        assert_eq!(sim.events([killing]), vec![Do::Finish]);
    }
}
