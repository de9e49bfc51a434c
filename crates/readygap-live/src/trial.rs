//! The trial runner's driver: a thin async loop around the pure state machine of
//! [`crate::runner`], used by hotkeys (`serve`) and by `readygap run` (`run_trials`).
//!
//! It owns the session's one store ([`crate::store::Store`]): every source sends into one
//! channel, the loop applies each event to its [`State`] (the state the dashboard reads and
//! the recording holds), writes it to the recording, passes it to the sink, keeps the
//! per-pod feeds (memory, residency, fast probes, request logs) in step with the pods,
//! publishes the focused node, and asks the machine what to do. It waits on events, commands, the machine's next deadline and the
//! tasks it started all at once, so a command is taken at any time, also mid-trial.

use crate::actions::Executor;
use crate::node_host::NodeSelection;
use crate::runner::{ActionDefaults, Do, Input, Machine, Task, pod_ref, slot};
pub use crate::runner::{Command, InferAfter, ReplaceBy, TrialConfig};
use crate::session::{RecordStatus, Recording, default_recording_path};
use crate::sources::logs::Lines;
use crate::sources::memory::{self, MemoryConfig};
use crate::sources::runtime::{PodRef, RuntimeAdapter};
use crate::store::{StateRef, Store};
use chrono::Utc;
use readygap_core::event::{Event, EventKind, PodView, Source};
use readygap_core::state::State;
use readygap_core::timeline::{Metric, Replacement, Trial};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Lines of a pod's log the Log view asks for first (the rest as they come).
const TAIL_FIRST: i64 = 300;

/// Per-pod background feeds (memory, residency/models, fast probes).
#[derive(Default)]
struct Followed {
    feeds: Option<CancellationToken>,
    probe: Option<CancellationToken>,
    /// The runtime's request log, followed for an observed trial (its index).
    log: Option<(u32, CancellationToken)>,
    /// The start-up lines of the container's log, followed while it runs (the restart
    /// count it was started at: a restarted container is followed again).
    startup: Option<(u32, CancellationToken)>,
    ip: Option<String>,
}

/// What a task the driver started hands back: its events, then the machine hears of it.
struct Finished {
    task: Task,
    events: Vec<Event>,
}

/// What [`Runner::on_open_trial`] calls with the open trial.
pub type OpenTrialHook = Box<dyn FnMut(&Trial) + Send>;

/// The runner: the session's store and the driver of the machine.
pub struct Runner {
    /// The one store: the runner is its only writer (the dashboard reads it).
    store: Store,
    machine: Machine,
    rx: mpsc::Receiver<Event>,
    tx: mpsc::Sender<Event>,
    exec: Executor,
    runtime: Arc<dyn RuntimeAdapter>,
    client: kube::Client,
    sink: Box<dyn FnMut(&Event) + Send>,
    cancel: CancellationToken,
    followed: BTreeMap<String, Followed>,
    stop_feeds: CancellationToken,
    tasks_tx: mpsc::Sender<Finished>,
    tasks: mpsc::Receiver<Finished>,
    selection: Option<NodeSelection>,
    recording: Recording,
    record_error: Option<String>,
    /// Compact the store once this many trials ended (`readygap watch`); `None`: never.
    compact_after: Option<usize>,
    /// The probe through the Service for the trial of this index, while it runs.
    service_probe: Option<(u32, CancellationToken)>,
    /// The Log view is on: the focused pod's log is followed.
    tail: bool,
    /// The log followed for the Log view: the pod, its restart count when started (a
    /// restarted container is followed again), and its follower.
    tailing: Option<(String, u32, CancellationToken)>,
    /// Sees the open trial after every step (see [`Runner::on_open_trial`]).
    on_open: Option<OpenTrialHook>,
    /// Sees each change of the recording (see [`Runner::on_recording`]).
    on_recording: Option<RecordingHook>,
    /// Where [`Command::ToggleRecord`] starts new recordings.
    recordings_dir: std::path::PathBuf,
}

/// What [`Runner::on_recording`] calls with each change of the recording.
pub type RecordingHook = Box<dyn FnMut(&RecordStatus) + Send>;

/// What the runner is built from: the event channel (every source sends to `tx`; the
/// runner reads `rx`), the executor, the runtime, the cluster client, its settings, the
/// sink that sees every event applied (the watcher's learner; the dashboard reads the store
/// instead), the recording it writes every
/// applied event to, and Ctrl-C.
pub struct RunnerParts {
    pub rx: mpsc::Receiver<Event>,
    pub tx: mpsc::Sender<Event>,
    pub exec: Executor,
    pub runtime: Arc<dyn RuntimeAdapter>,
    pub client: kube::Client,
    pub cfg: TrialConfig,
    pub sink: Box<dyn FnMut(&Event) + Send>,
    pub recording: Recording,
    pub cancel: CancellationToken,
}

impl Runner {
    pub fn new(p: RunnerParts) -> Self {
        let exec = p.exec.clone();
        let (tasks_tx, tasks) = mpsc::channel(16);
        let mut machine = Machine::new(p.cfg, Box::new(move || exec.next_id()));
        // The executor's settings are what the machine resolves actions with.
        machine.defaults = ActionDefaults {
            model: p.exec.model.clone(),
            grace_seconds: p.exec.default_grace,
        };
        Self {
            store: Store::new(),
            machine,
            rx: p.rx,
            tx: p.tx,
            exec: p.exec,
            runtime: p.runtime,
            client: p.client,
            sink: p.sink,
            cancel: p.cancel,
            followed: BTreeMap::new(),
            stop_feeds: CancellationToken::new(),
            tasks_tx,
            tasks,
            selection: None,
            recording: p.recording,
            record_error: None,
            compact_after: None,
            service_probe: None,
            tail: false,
            tailing: None,
            on_open: None,
            on_recording: None,
            recordings_dir: "recordings".into(),
        }
    }

    /// `hook` sees the open (running) trial after every step, so a mark is known to it as
    /// soon as the state has it: the watcher observes each interval when its end mark is
    /// known, not when the whole trial ends (issue 32).
    pub fn on_open_trial(&mut self, hook: OpenTrialHook) {
        self.on_open = Some(hook);
    }

    /// Keep the store bounded for a session that runs for weeks (`readygap watch`): between
    /// trials, once `trials` trials ended, the state is rebuilt from its own snapshot (the
    /// pods, slices, nodes, runtimes and latest samples a new recording starts with), which
    /// drops the ended trials, their actions and verdicts and the series' history. Whoever
    /// needs the trials keeps them from `on_trial` (the watcher's ring). The recording is not
    /// touched: it still holds every event.
    pub fn compact_after(&mut self, trials: usize) {
        self.compact_after = Some(trials.max(1));
    }

    fn compact(&mut self) {
        let Some(n) = self.compact_after else { return };
        let s = self.store.state();
        if !self.machine.is_idle()
            || s.timeline.open().is_some()
            || s.timeline.trials.len() < n
            || s.pods.values().any(|p| p.deletion_timestamp.is_some())
        {
            return;
        }
        let ts = s.now.unwrap_or_else(Utc::now);
        let snapshot = s.snapshot_events(ts);
        drop(s);
        self.store.reset(State::from_events(&snapshot));
    }

    /// Where `R` ([`Command::ToggleRecord`]) starts new recordings (default `recordings`).
    pub fn record_into(&mut self, dir: std::path::PathBuf) {
        self.recordings_dir = dir;
    }

    /// `hook` sees each change of the recording as it happens (`run` says a failure on
    /// stderr at once; the dashboard reads the recording from the store instead).
    pub fn on_recording(&mut self, hook: RecordingHook) {
        self.on_recording = Some(hook);
    }

    /// The session's state (under the store's read lock: do not hold it across an await).
    pub fn state(&self) -> StateRef<'_> {
        self.store.state()
    }

    /// Reduce into `store` from now on (the dashboard's, which already holds what was seen
    /// before the cluster answered), and publish there.
    pub fn adopt_store(&mut self, store: Store) {
        store.update(|p| p.recording = self.recording.path().map(|p| p.to_path_buf()));
        self.store = store;
    }

    /// The first recording failure, if any.
    pub fn record_error(&self) -> Option<&str> {
        self.record_error.as_deref()
    }

    /// A change of the recording: published (the dashboard's header), and a note in the
    /// stream.
    fn recording_changed(&mut self, st: RecordStatus) {
        if let RecordStatus::Failed(e) = &st {
            self.record_error.get_or_insert_with(|| e.clone());
        }
        let text = st.text();
        let now = self.recording.path().map(|p| p.to_path_buf());
        self.store.update(|p| p.recording = now);
        if let Some(hook) = &mut self.on_recording {
            hook(&st);
        }
        let note = Event::new(Utc::now(), Source::Session, EventKind::Note { text });
        self.apply(note);
    }

    fn record(&mut self, path: Option<std::path::PathBuf>) {
        let changes = match path {
            Some(path) => {
                let s = self.store.state();
                let ts = s.now.unwrap_or_else(Utc::now);
                self.recording.start(&s, &path, ts)
            }
            None => self.recording.stop().into_iter().collect(),
        };
        for st in changes {
            self.recording_changed(st);
        }
    }

    /// Publish the focused pod's node here (the node host feed follows it).
    pub fn select_nodes(&mut self, selection: NodeSelection) {
        self.selection = Some(selection);
        self.publish_node();
    }

    fn publish_node(&self) {
        if let Some(sel) = &self.selection {
            sel.set(readygap_core::focus::node(
                &self.store.state(),
                self.machine.chosen(),
            ));
        }
    }

    fn apply(&mut self, mut ev: Event) {
        // Reduce the instant the recording will hold, so its replay is this state exactly.
        ev.ts = readygap_core::event::recorded_instant(ev.ts);
        self.store.apply(&ev);
        if let Some(st) = self.recording.write(&ev) {
            self.recording_changed(st);
        }
        (self.sink)(&ev);
        let pods = matches!(
            ev.kind,
            EventKind::PodApplied(_) | EventKind::PodDeleted(_) | EventKind::ResyncDone { .. }
        );
        if pods {
            self.publish_node();
        }
        if pods
            || matches!(
                ev.kind,
                EventKind::ActionStarted { .. }
                    | EventKind::TrialAbort { .. }
                    | EventKind::InferenceDone(_)
                    | EventKind::RequestLogged(_)
            )
            || matches!(ev.kind, EventKind::RuntimeProbe(ref p) if p.ok)
        {
            self.follow();
        }
    }

    /// Apply events already queued (non-blocking).
    pub fn drain(&mut self) {
        while let Ok(ev) = self.rx.try_recv() {
            self.apply(ev);
        }
    }

    /// Give the machine one input and carry out what it asks, feeding back the events it
    /// emitted. Returns false once the machine has finished.
    fn step(&mut self, input: Input, on_trial: &mut (dyn FnMut(&Trial) + Send)) -> bool {
        let mut inputs = std::collections::VecDeque::from([input]);
        let mut finish = false;
        while let Some(input) = inputs.pop_front() {
            if let Input::Command(Command::Record(path)) = input {
                self.record(path);
                continue;
            }
            if let Input::Command(Command::ToggleRecord) = input {
                let path = match self.recording.path() {
                    Some(_) => None,
                    None => {
                        let context = &self.recording.header.context;
                        let dir = &self.recordings_dir;
                        Some(default_recording_path(dir, context, Utc::now()))
                    }
                };
                self.record(path);
                continue;
            }
            if let Input::Command(Command::Tail(on)) = input {
                self.tail = on;
                self.follow();
                continue;
            }
            let choose = matches!(input, Input::Command(Command::ChoosePod(_)));
            // (the read lock ends before the actions: `apply` writes)
            let dos = self.machine.on(&self.store.state(), input, Utc::now());
            for d in dos {
                match d {
                    Do::Act { id, action, ip } => self.exec.spawn(id, action, ip),
                    Do::Refuse { id, action, why } => {
                        let exec = self.exec.clone();
                        tokio::spawn(async move { exec.refuse(id, action, why).await });
                    }
                    Do::Emit(kind) => {
                        self.apply(Event::new(Utc::now(), Source::Runner, kind));
                        inputs.push_back(Input::Changed);
                    }
                    Do::ListModels(pod) => {
                        let runtime = self.runtime.clone();
                        self.task(Task::Models, async move {
                            let models = runtime.models_on_disk(&pod).await.ok()?;
                            let pod = pod.name;
                            Some((Source::Runtime, EventKind::ModelsOnDisk { pod, models }))
                        });
                    }
                    Do::Preload { pod, model } => {
                        let runtime = self.runtime.clone();
                        self.task(Task::Preload, async move {
                            let prompt = crate::actions::DEFAULT_PROMPT;
                            let r = runtime
                                .generate(&pod, &model, prompt, 0, Box::new(|| {}))
                                .await;
                            let text = if r.ok {
                                format!("{model} loaded on {}", pod.name)
                            } else {
                                let why = r.error.unwrap_or_default();
                                format!("preloading {model} failed: {why}")
                            };
                            Some((Source::Runner, EventKind::Note { text }))
                        });
                    }
                    Do::Ended(i) => {
                        if let Some(t) = self.store.state().timeline.trials.get(i) {
                            on_trial(t);
                        }
                    }
                    Do::Finish => finish = true,
                }
            }
            if choose {
                self.publish_node();
                self.follow_tail();
            }
        }
        if let Some(hook) = &mut self.on_open
            && let Some(t) = self.store.state().timeline.trials.last()
            && t.is_running()
        {
            hook(t);
        }
        !finish
    }

    /// Run `task` in the background; its event (stamped when it ends) comes back with
    /// [`Input::Finished`].
    fn task(
        &self,
        task: Task,
        run: impl Future<Output = Option<(Source, EventKind)>> + Send + 'static,
    ) {
        let done = self.tasks_tx.clone();
        tokio::spawn(async move {
            let events = run
                .await
                .map(|(source, kind)| Event::new(Utc::now(), source, kind));
            let events = events.into_iter().collect();
            let _ = done.send(Finished { task, events }).await;
        });
    }

    /// The loop: events, commands (when serving), finished tasks, the machine's deadline
    /// and Ctrl-C, whichever comes first, until the machine has finished.
    async fn run(
        &mut self,
        mut commands: Option<mpsc::Receiver<Command>>,
        on_trial: &mut (dyn FnMut(&Trial) + Send),
    ) {
        let mut go_on = self.step(Input::Changed, on_trial);
        while go_on {
            let wait = self
                .machine
                .wake(&self.store.state())
                .map(|t| (t - Utc::now()).to_std().unwrap_or(Duration::ZERO))
                .unwrap_or(Duration::from_secs(86_400 * 365));
            let input = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => Input::Interrupt,
                done = self.tasks.recv() => {
                    let Some(done) = done else { continue };
                    for ev in done.events {
                        self.apply(ev);
                    }
                    Input::Finished(done.task)
                }
                cmd = next_command(&mut commands) => match cmd {
                    Some(c) => Input::Command(c),
                    None => Input::Close,
                },
                ev = self.rx.recv() => match ev {
                    Some(ev) => {
                        self.apply(ev);
                        Input::Changed
                    }
                    None => Input::Interrupt,
                },
                _ = tokio::time::sleep(wait) => Input::Tick,
            };
            go_on = self.step(input, on_trial);
            self.compact();
        }
        // Debug pods the cold steps created go now (left alone they end by their deadline).
        for e in self.exec.delete_debug_pods().await {
            tracing::warn!("{e}");
        }
        self.stop_feeds.cancel();
        self.drain();
        self.record(None);
    }

    /// Run `n` trials with cooldowns between, driving external replacements that open in
    /// a cooldown too. `on_trial` sees each finished trial, own or external.
    pub async fn run_trials(&mut self, n: usize, on_trial: &mut (dyn FnMut(&Trial) + Send)) {
        self.machine.run_trials(n);
        self.run(None, on_trial).await;
    }

    /// The dashboard's loop: apply events, take commands at any time (a trial on a hotkey,
    /// an action at once, also while a trial runs), and drive external trials (probe and
    /// infer) as they open. Ends when the command channel closes, the event channel closes
    /// or on `cancel`. `on_trial` sees each finished trial.
    pub async fn serve(
        &mut self,
        commands: mpsc::Receiver<Command>,
        on_trial: &mut (dyn FnMut(&Trial) + Send),
    ) {
        self.run(Some(commands), on_trial).await;
    }

    /// Stop every per-pod feed.
    pub fn stop(&self) {
        self.stop_feeds.cancel();
    }

    /// Candidate replacement pods of the open trial (the ones to probe fast).
    fn candidates(&self) -> Vec<PodRef> {
        let s = self.store.state();
        let Some(t) = s.timeline.open() else {
            return Vec::new();
        };
        if t.marks.t2.is_some() {
            return Vec::new();
        }
        s.pods
            .values()
            .filter(|p| p.deletion_timestamp.is_none())
            .filter(|p| match &t.replacement {
                Replacement::Pods { uids, .. } => {
                    !uids.contains(&p.uid) && !t.present_at_t0.contains(&p.uid)
                }
                Replacement::Restart { uid, .. } => *uid == p.uid,
            })
            .filter(|p| t.new_pod.as_ref().is_none_or(|n| *n == p.name))
            .map(pod_ref)
            .collect()
    }

    /// Start/stop the per-pod feeds and fast probes to match the state.
    fn follow(&mut self) {
        let probe_now: Vec<String> = self.candidates().into_iter().map(|p| p.name).collect();
        let s = self.store.state();
        let pods: Vec<PodView> = s.pods.values().cloned().collect();
        // An observed trial's marks T3/T4 come from its candidates' request logs.
        let observed = s
            .timeline
            .open()
            .filter(|t| !self.machine.may_touch(&s, slot(t)))
            .filter(|t| t.marks.t4.is_none())
            .and_then(|t| Some((t.index, t.marks.t0?)));
        let new_pod = s.timeline.open().and_then(|t| t.new_pod.clone());
        // Gone pods.
        self.followed.retain(|n, f| {
            let here = s.pods.contains_key(n);
            if !here {
                f.feeds
                    .iter()
                    .chain(f.probe.iter())
                    .chain(f.log.iter().map(|(_, c)| c))
                    .chain(f.startup.iter().map(|(_, c)| c))
                    .for_each(|c| c.cancel());
            }
            here
        });
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
                [entry.feeds.take(), entry.probe.take()]
                    .into_iter()
                    .flatten()
                    .for_each(|c| c.cancel());
                entry.ip = p.ip.clone();
            }
            let target = pod_ref(&p);
            if entry.feeds.is_none() && running && p.deletion_timestamp.is_none() {
                let token = self.stop_feeds.child_token();
                entry.feeds = Some(token.clone());
                tokio::spawn(crate::sources::runtime::poll_pod(
                    self.runtime.clone(),
                    target.clone(),
                    self.machine.cfg.poll,
                    self.tx.clone(),
                    token.clone(),
                ));
                if self.machine.cfg.memory.follow {
                    let mc = MemoryConfig {
                        namespace: self.machine.cfg.namespace.clone(),
                        pod: p.name.clone(),
                        container: self.machine.cfg.container.clone(),
                        runtime_port: self.machine.cfg.runtime_port,
                        node: p.node.clone(),
                        interval: self.machine.cfg.memory.interval,
                    };
                    tokio::spawn(memory::run(
                        self.client.clone(),
                        mc,
                        self.tx.clone(),
                        token.clone(),
                    ));
                }
                // VRAM, which no cgroup counts, of a pod that asks for a GPU.
                if self.machine.cfg.memory.follow && p.spec().is_some_and(|s| s.gpus > 0) {
                    let gc = crate::sources::gpu::GpuConfig {
                        namespace: self.machine.cfg.namespace.clone(),
                        pod: p.name.clone(),
                        container: self.machine.cfg.container.clone(),
                        interval: self.machine.cfg.memory.interval.max(Duration::from_secs(1)),
                        dcgm: self.machine.cfg.dcgm.clone(),
                    };
                    tokio::spawn(crate::sources::gpu::run(
                        self.client.clone(),
                        gc,
                        self.tx.clone(),
                        token,
                    ));
                }
            }
            if p.deletion_timestamp.is_some()
                && let Some(c) = entry.feeds.take()
            {
                c.cancel();
            }
            // The start-up lines of each run of the container (a deleted pod's last lines
            // are not start-up lines).
            let restarts = p.restarts();
            let want_startup = running && p.deletion_timestamp.is_none();
            if let Some((_, c)) = entry
                .startup
                .take_if(|(r, _)| !want_startup || *r != restarts)
            {
                c.cancel();
            }
            if want_startup && entry.startup.is_none() {
                let token = self.stop_feeds.child_token();
                let since = p.created.unwrap_or_else(Utc::now);
                let t = crate::sources::logs::LogTail {
                    namespace: self.machine.cfg.namespace.clone(),
                    after: s.log_tail.last_of(&p.name),
                    pod: p.name.clone(),
                    container: self.machine.cfg.container.clone(),
                    lines: Lines::StartupSince(since),
                };
                let (client, tx) = (self.client.clone(), self.tx.clone());
                tokio::spawn(crate::sources::logs::tail(client, t, tx, token.clone()));
                entry.startup = Some((restarts, token));
            }
            let want_log = observed.filter(|_| {
                let candidate = p.deletion_timestamp.is_none() && probe_now.contains(&p.name);
                running && (candidate || new_pod.as_deref() == Some(p.name.as_str()))
            });
            // A log followed for another trial (or for none now) stops.
            let same = matches!((&entry.log, want_log), (Some((i, _)), Some((w, _))) if *i == w);
            if let Some((_, c)) = entry.log.take_if(|_| !same) {
                c.cancel();
            }
            if let (None, Some((index, since))) = (&entry.log, want_log) {
                let token = self.stop_feeds.child_token();
                entry.log = Some((index, token.clone()));
                tokio::spawn(crate::sources::logs::tail(
                    self.client.clone(),
                    crate::sources::logs::LogTail {
                        namespace: self.machine.cfg.namespace.clone(),
                        pod: p.name.clone(),
                        container: self.machine.cfg.container.clone(),
                        lines: Lines::RequestsSince(since),
                        after: None,
                    },
                    self.tx.clone(),
                    token,
                ));
            }
            let want_probe = probe_now.contains(&p.name);
            if let Some(c) = entry.probe.take_if(|_| !want_probe) {
                c.cancel();
            }
            if want_probe && entry.probe.is_none() {
                let token = self.stop_feeds.child_token();
                entry.probe = Some(token.clone());
                tokio::spawn(fast_probe(
                    self.runtime.clone(),
                    target,
                    self.machine.cfg.probe_interval,
                    self.tx.clone(),
                    token,
                ));
            }
        }
        drop(s);
        self.follow_service();
        self.follow_tail();
    }

    /// While the Log view is on, follow the focused pod's container log once it runs (again
    /// after a restart, skipping the lines already held); another pod focused, or the view
    /// off, stops it.
    fn follow_tail(&mut self) {
        let want = self
            .tail
            .then(|| {
                let s = self.store.state();
                let p = readygap_core::focus::live_pod(&s, self.machine.chosen())?;
                Some(p.clone())
            })
            .flatten()
            .filter(|p| {
                p.containers.iter().any(|c| {
                    matches!(
                        c.state,
                        readygap_core::event::ContainerState::Running { .. }
                    )
                })
            })
            .map(|p| (p.name.clone(), p.restarts()));
        let same = matches!((&self.tailing, &want), (Some((p, r, _)), Some((wp, wr))) if p == wp && r == wr);
        if same {
            return;
        }
        if let Some((_, _, c)) = self.tailing.take() {
            c.cancel();
        }
        if let Some((pod, restarts)) = want {
            let token = self.stop_feeds.child_token();
            let t = crate::sources::logs::LogTail {
                namespace: self.machine.cfg.namespace.clone(),
                after: self.store.state().log_tail.last_of(&pod),
                pod: pod.clone(),
                container: self.machine.cfg.container.clone(),
                lines: Lines::Tail(TAIL_FIRST),
            };
            let (client, tx) = (self.client.clone(), self.tx.clone());
            tokio::spawn(crate::sources::logs::tail(client, t, tx, token.clone()));
            self.tailing = Some((pod, restarts, token));
        }
    }

    /// The study's T2: once the latest trial has T1 and no answer through the Service yet,
    /// probe through the Service until it answers (one probe task per trial; a new trial
    /// ends the previous one's).
    fn follow_service(&mut self) {
        let Some(service) = self.machine.cfg.service.clone() else {
            return;
        };
        let s = self.store.state();
        let Some(trial) = s.timeline.current() else {
            return;
        };
        let index = trial.index;
        if let Some((i, token)) = &self.service_probe
            && *i != index
        {
            token.cancel();
            self.service_probe = None;
        }
        let due = trial.marks.t1.is_some() && trial.marks.t2_service.is_none();
        if !due || self.service_probe.is_some() {
            return;
        }
        let token = self.stop_feeds.child_token();
        self.service_probe = Some((index, token.clone()));
        tokio::spawn(service_probe(
            self.runtime.clone(),
            self.client.clone(),
            ServiceProbeSettings {
                namespace: self.machine.cfg.namespace.clone(),
                service,
                runtime_port: self.machine.cfg.runtime_port,
                interval: self.machine.cfg.probe_interval,
                limit: self.machine.cfg.timeouts.runtime,
            },
            self.tx.clone(),
            token,
        ));
    }
}

/// Where and how often [`service_probe`] probes, and for how long at most.
struct ServiceProbeSettings {
    namespace: String,
    service: String,
    runtime_port: u16,
    interval: Duration,
    limit: Duration,
}

/// Probe the runtime through the Service every `interval` until it answers 200 (each probe an
/// event), the API server refuses the route (401/403: said once, in the event), `limit`
/// passes, or cancelled. A Service that cannot be resolved is said in one failed probe.
async fn service_probe(
    runtime: Arc<dyn RuntimeAdapter>,
    client: kube::Client,
    s: ServiceProbeSettings,
    tx: mpsc::Sender<Event>,
    cancel: CancellationToken,
) {
    let send = |p: readygap_core::event::ServiceProbe| {
        let tx = tx.clone();
        async move {
            tx.send(Event::new(
                Utc::now(),
                Source::Runtime,
                EventKind::ServiceProbe(p),
            ))
            .await
            .is_ok()
        }
    };
    let resolved = tokio::select! {
        _ = cancel.cancelled() => return,
        r = crate::sources::runtime::service_ref(&client, &s.namespace, &s.service, s.runtime_port) => r,
    };
    let svc = match resolved {
        Ok(svc) => svc,
        Err(error) => {
            send(readygap_core::event::ServiceProbe {
                service: s.service.clone(),
                route: crate::sources::runtime::SERVICE_ROUTE.into(),
                error: Some(error),
                ..Default::default()
            })
            .await;
            return;
        }
    };
    let deadline = tokio::time::Instant::now() + s.limit;
    let mut tick = tokio::time::interval(s.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep_until(deadline) => return,
            _ = tick.tick() => {}
        }
        let p = tokio::select! {
            _ = cancel.cancelled() => return,
            p = runtime.probe_service(&svc) => p,
        };
        let Some(p) = p else { return };
        let end = p.ok || matches!(p.status, Some(401 | 403));
        if !send(p).await || end {
            return;
        }
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        self.stop_feeds.cancel();
    }
}

/// The next command, or never when there is no command channel.
async fn next_command(c: &mut Option<mpsc::Receiver<Command>>) -> Option<Command> {
    match c {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
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
        let ev = Event::new(Utc::now(), Source::Runtime, EventKind::RuntimeProbe(p));
        if tx.send(ev).await.is_err() || ok {
            return;
        }
    }
}

/// One progress line for a finished trial; `of` is (this own trial's ordinal, total).
pub fn progress_line(t: &Trial, of: Option<(usize, usize)>) -> String {
    let f = |m: Metric| {
        t.metric(m)
            .map_or_else(|| "-".into(), |v| format!("{v:.2} s"))
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
        let names: Vec<&str> = t.verdicts.iter().map(|k| k.name()).collect();
        line.push_str(&format!(" · {}", names.join(", ")));
    }
    line
}
