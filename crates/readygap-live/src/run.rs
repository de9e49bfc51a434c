//! A live session and `readygap run`'s headless trials: connects to the cluster, starts the
//! feeds, lets the trial runner drive `trials` trials, prints a progress line per trial on
//! stderr and returns the statistics (table, CSV, or JSON with every trial's marks),
//! optionally recording the session and exporting the trials in the study's CSV schema.
//! Cancelling ends the current trial cleanly and still reports and records what was
//! measured. Takes plain configuration ([`SessionConfig`], [`RunConfig`]); the command line
//! that fills them lives in the binary.

use crate::actions::{CacheDropper, Executor};
use crate::cluster::{self, ClusterConfig};
use crate::node_host::AccessPolicy;
use crate::session::{RecordStatus, Recording};
use crate::settings::{COOLDOWN, MemoryConfig, PROBE_INTERVAL, StageTimeouts};
use crate::sources::runtime::choice::{self, Ask, Choice};
use crate::sources::runtime::{AccessMode, PollConfig, RuntimeAccess, RuntimeAdapter, RuntimeKind};
use crate::trial::{InferAfter, ReplaceBy, Runner, RunnerParts, TrialConfig, progress_line};
use chrono::Utc;
use color_eyre::eyre::{Result, WrapErr, eyre};
use readygap_core::event::{Event, EventKind, SessionInfo, Source};
use readygap_core::record::{jsonl, labcsv};
use readygap_core::report::{self, FileReport, Format, Loaded, Report};
use readygap_core::timeline::Trial;
use readygap_core::verdict::VerdictThresholds;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What a live session needs, shared by `readygap run` and the dashboard (`readygap`): the
/// cluster and target, the inference, the recording, how pods, runtimes and nodes are
/// reached, and the limits and intervals of the feeds.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionConfig {
    pub cluster: ClusterConfig,
    /// The model of the T3 inference (default: the lab profile's, else the first on disk).
    pub model: Option<String>,
    /// The prompt of the T3 inference.
    pub prompt: String,
    /// `think` of every inference (`true` or `false`); absent: the model's own default, as
    /// the user's clients see it (Ollama ≥ 0.12.4 thinks when the model can).
    pub think: Option<bool>,
    /// Record the session (JSON lines) to this file.
    pub record: Option<PathBuf>,
    /// Leave prompts and responses out of recordings (timings, statuses and Ollama's
    /// durations stay).
    pub record_redact: bool,
    /// Load this model on the new pod just before each trial's T3 inference (with
    /// `--model llama3.2:3b --preload-model llama3.2:1b` under 4 GiB: the published
    /// overlapping-residency OOM kill).
    pub preload_model: Option<String>,
    /// How to reach each pod's runtime.
    pub access: AccessMode,
    /// URL template for `--access direct` ({pod_ip}, {pod}, {namespace}, {port}).
    pub direct_url: String,
    /// The runtime (`--runtime`); `None`: guessed from the pods' images or the answers.
    pub runtime: Option<RuntimeKind>,
    /// The runtime's port in the pod (Ollama's 11434 by default: another runtime then
    /// takes its own, see `sources::runtime::choice`).
    pub runtime_port: u16,
    /// Path probed for T2 (Ollama's `/api/tags` by default: another runtime then takes
    /// `/health`).
    pub probe_path: String,
    /// Interval of the T2 probes.
    pub probe_interval: Duration,
    /// When the T3 inference is sent: after the runtime answered (as in the study) or at Ready.
    pub infer_after: InferAfter,
    /// Replace the pod by deleting it or by a rollout restart of the deployment.
    pub replace: ReplaceBy,
    /// Grace period of the delete, in seconds (default: the pod's).
    pub grace: Option<u32>,
    /// How nodes are reached (host samples of the selected node, the cold step).
    pub nodes: AccessPolicy,
    /// Limits of the stages (T0 → T1, T1 → T2, T3 → T4), handed whole to the runner.
    pub timeouts: StageTimeouts,
    /// Intervals of the residency (`/api/ps`) and models-on-disk (`/api/tags`) polls,
    /// handed whole to the runner.
    pub poll: PollConfig,
    /// The memory feed (whether, how often), handed whole to the runner.
    pub memory: MemoryConfig,
    /// The serving container (default: the one exposing the runtime port, else the first).
    pub container: Option<String>,
    /// The DCGM exporter to read GPU memory from (`--dcgm`).
    pub dcgm: Option<crate::sources::gpu::Dcgm>,
    /// Send readygap's own T3 inference to replacements it did not start (someone's
    /// `kubectl delete`, a rollout, an OOM restart). Off by default: readygap only observes
    /// them (watches, GET probes, `/api/ps`, the runtime's request log), so it never loads
    /// the model before the experimenter's own request does.
    pub probe_external: bool,
    /// Only GET requests, anywhere (the dashboard's `--read-only`).
    pub read_only: bool,
    /// The verdicts' thresholds (`[verdicts]` of the config file, `--verdict-*` flags).
    pub verdicts: VerdictThresholds,
}

/// Arguments of `readygap run`: a session, plus what only headless trials use (how many,
/// cold or warm, the pause between them, the output, and the in-process lab).
#[derive(Debug, Clone, PartialEq)]
pub struct RunConfig {
    pub session: SessionConfig,
    /// How many trials readygap starts.
    pub trials: usize,
    /// Cold trials: unload the model and drop the node's page cache before each T0.
    pub cold: bool,
    /// Pause between trials.
    pub cooldown: Duration,
    /// Output format of the statistics on stdout.
    pub format: OutFormat,
    /// Write the trials in the study's CSV schema to this file.
    pub csv: Option<PathBuf>,
    /// More settings for the recording's header (the binary adds the lab it started).
    pub extra_settings: serde_json::Map<String, Value>,
    /// Sample the machine readygap runs on this often (the dashboard's Host panel).
    pub local_host: Option<Duration>,
}

/// Output formats of `run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutFormat {
    #[default]
    Table,
    Json,
    Csv,
}

impl OutFormat {
    /// The names on the command line.
    pub const NAMES: [(&'static str, OutFormat); 3] = [
        ("table", OutFormat::Table),
        ("json", OutFormat::Json),
        ("csv", OutFormat::Csv),
    ];
}

impl Default for SessionConfig {
    /// The defaults of `readygap run` and the dashboard.
    fn default() -> Self {
        Self {
            cluster: ClusterConfig::default(),
            model: None,
            prompt: crate::actions::DEFAULT_PROMPT.into(),
            record: None,
            record_redact: false,
            preload_model: None,
            access: AccessMode::Proxy,
            direct_url: "http://{pod_ip}:{port}".into(),
            runtime: None,
            runtime_port: RuntimeKind::Ollama.default_port(),
            probe_path: "/api/tags".into(),
            probe_interval: PROBE_INTERVAL,
            infer_after: InferAfter::Runtime,
            replace: ReplaceBy::Delete,
            grace: None,
            nodes: AccessPolicy::default(),
            timeouts: StageTimeouts::default(),
            poll: PollConfig::default(),
            memory: MemoryConfig::default(),
            container: None,
            dcgm: None,
            think: None,
            probe_external: false,
            read_only: false,
            verdicts: VerdictThresholds::default(),
        }
    }
}

impl Default for RunConfig {
    /// The defaults of `readygap run`.
    fn default() -> Self {
        Self {
            session: SessionConfig::default(),
            trials: 5,
            cold: false,
            cooldown: COOLDOWN,
            format: OutFormat::Table,
            csv: None,
            extra_settings: serde_json::Map::new(),
            local_host: None,
        }
    }
}

/// The JSON of one trial in `--format json`: core's trial document, the one `report
/// --format json` gives too.
pub use readygap_core::report::document::trial as trial_json;

/// The report with a `trials` array per file: core's report document, whose `trial_list`
/// (the trials' documents) becomes `trials`, the count `trial_count`.
pub fn report_json(report: &Report) -> Result<Value> {
    let mut v = serde_json::to_value(report)?;
    if let Some(files) = v["files"].as_array_mut() {
        for (f, fr) in files.iter_mut().zip(&report.files) {
            if let Some(o) = f.as_object_mut() {
                o.insert("trial_count".into(), json!(fr.trials));
                let list = o.remove("trial_list").unwrap_or(Value::Array(vec![]));
                o.insert("trials".into(), list);
            }
        }
    }
    Ok(v)
}

/// `readygap run` on a connected cluster: the trials, then the statistics. `cancel` ends
/// the current trial (Ctrl-C in the binary).
pub async fn run_trials(args: &RunConfig, cancel: CancellationToken) -> Result<RunOutput> {
    let Built {
        mut runner,
        tx,
        feeds,
        target,
        model,
        node_feed,
        runtime_label,
    } = build(args, cancel.clone(), "run").await?;
    eprintln!(
        "readygap run: {} trial(s) on {} in {}/{} ({}), model {model}, runtime {}, access {:?}",
        args.trials,
        target.label(),
        target.context,
        target.namespace,
        target.api_url,
        runtime_label,
        args.session.access
    );
    let n = args.trials;
    let mut own = 0;
    let mut on_trial = |t: &Trial| {
        if !t.external {
            own += 1;
        }
        eprintln!("{}", progress_line(t, Some((own, n))));
    };
    // A recording that fails (the disk is full) says so when it happens; the run goes on.
    runner.on_recording(Box::new(|st| {
        if matches!(st, RecordStatus::Failed(_)) {
            eprintln!("{}", st.text());
        }
    }));
    runner.run_trials(n, &mut on_trial).await;
    feeds.cancel();
    // The node feed stops its sampler (and deletes a debug pod it created) first.
    let _ = tokio::time::timeout(Duration::from_secs(15), node_feed).await;
    runner.stop();
    drop(tx);
    finish(args, &runner, &target, &cancel)
}

/// What a run produced.
pub struct RunOutput {
    pub stdout: String,
    pub trials: Vec<Trial>,
    pub code: i32,
    /// What went wrong beside the trials (a recording that stopped: disk full), also
    /// printed on stderr as `warning: …`.
    pub warnings: Vec<String>,
}

/// A connected session ready to run: the trial runner (which owns the event stream) and what
/// it needs. Used by `readygap run` and by the live dashboard.
pub struct Built {
    pub runner: Runner,
    pub tx: mpsc::Sender<Event>,
    pub feeds: CancellationToken,
    pub target: cluster::Target,
    pub model: String,
    /// The node host feed: ends after `feeds` is cancelled, once its sampler stopped (and
    /// deleted a debug pod it created). Await it before the process exits.
    pub node_feed: tokio::task::JoinHandle<()>,
    /// The runtime and how it was chosen (`llamacpp (--runtime)`).
    pub runtime_label: String,
}

/// Connect, start the feeds and build the runner. Every event the runner sees is written to
/// the recording (`--record`); the dashboard hands the runner its store
/// ([`Runner::adopt_store`]) to read what it publishes.
pub async fn build(args: &RunConfig, cancel: CancellationToken, mode: &str) -> Result<Built> {
    let target = cluster::connect(&args.session.cluster).await?;
    let (tx, rx) = mpsc::channel::<Event>(8192);
    let feeds = CancellationToken::new();

    let ask = Ask {
        given: args.session.runtime,
        client: &target.runtime_client,
        namespace: &target.namespace,
        selector: &target.selector,
        port: args.session.runtime_port,
        probe_path: &args.session.probe_path,
        access: args.session.access,
        direct_url: &args.session.direct_url,
    };
    let timeout = args.session.timeouts.inference;
    let (chosen, runtime) = runtime_of(ask, timeout, args.session.think).await;

    let model = match args.session.model.clone() {
        Some(m) => m,
        None => discover_model(&target, runtime.as_ref()).await?,
    };

    let mut settings = json!({
        "trials": args.trials, "cold": args.cold, "cooldown_s": args.cooldown.as_secs_f64(),
        "model": model, "prompt": args.session.prompt, "access": args.session.access,
        "runtime": chosen.kind.name(), "runtime_chosen_by": chosen.how, "runtime_port": chosen.port,
        "probe_path": chosen.probe_path, "probe_interval_ms": args.session.probe_interval.as_millis() as u64,
        "infer_after": args.session.infer_after, "replace": args.session.replace,
        "think": args.session.think, "probe_external": args.session.probe_external,
        "read_only": args.session.read_only, "mode": mode,
        "verdicts": args.session.verdicts,
    });
    if let Some(o) = settings.as_object_mut() {
        o.extend(args.extra_settings.clone());
    }
    // The session's one recorder: the runner writes every event it applies.
    let mut header = jsonl::Header::new(
        Utc::now(),
        &target.context,
        &target.namespace,
        &target.label(),
    );
    header.settings = settings;
    let mut recording = Recording::new(header, args.session.record_redact);
    if let Some(path) = &args.session.record {
        recording
            .begin(path)
            .map_err(|e| eyre!("creating the recording: {e}"))?;
    }
    let node_selection = crate::node_host::NodeSelection::new();

    tokio::spawn(crate::sources::kube::run(
        target.client.clone(),
        crate::sources::kube::KubeConfig {
            namespace: target.namespace.clone(),
            selector: target.selector.clone(),
            service: Some(target.service.clone()),
            deployment: target.deployment.clone(),
        },
        tx.clone(),
        feeds.clone(),
    ));
    // Nodes apart: a refused watch is said once and retried when the selected node changes.
    tokio::spawn(crate::sources::nodes::run(
        target.client.clone(),
        tx.clone(),
        feeds.clone(),
        Some(node_selection.subscribe()),
    ));

    let mut exec = Executor::new(
        target.client.clone(),
        &target.namespace,
        runtime.clone(),
        &model,
        tx.clone(),
    );
    exec.prompt = args.session.prompt.clone();
    exec.default_grace = args.session.grace;
    exec.timeouts.inference = args.session.timeouts.inference;
    let policy = args.session.nodes.clone();
    exec.dropper = match &policy {
        AccessPolicy::Explicit { .. } | AccessPolicy::Config { lab: true, .. } => {
            let policy = policy.clone();
            CacheDropper::Node {
                access: Arc::new(move |node: &str| policy_access(&policy, node)),
            }
        }
        AccessPolicy::Config { section, .. } => {
            node_access_from_config(&target, section.clone()).await
        }
        AccessPolicy::Unavailable(why) => CacheDropper::None(format!("no node access: {why}")),
    };
    if let Some(every) = args.local_host {
        tokio::spawn(crate::host::run_local_sampler(
            every,
            tx.clone(),
            feeds.clone(),
        ));
    }
    // The selected node's host metrics, every 2 s, and how it is reached.
    let node_feed = tokio::spawn(crate::node_host::run(
        policy,
        target.client.clone(),
        target.namespace.clone(),
        node_selection.subscribe(),
        tx.clone(),
        feeds.clone(),
    ));

    let cfg = TrialConfig {
        cold: args.cold,
        replace_by: args.session.replace,
        deployment: target.deployment.clone(),
        infer_after: args.session.infer_after,
        probe_interval: args.session.probe_interval,
        cooldown: args.cooldown,
        timeouts: args.session.timeouts,
        namespace: target.namespace.clone(),
        memory: args.session.memory,
        container: args.session.container.clone(),
        runtime_port: chosen.port,
        preload_model: args.session.preload_model.clone(),
        probe_external: args.session.probe_external,
        read_only: args.session.read_only,
        service: Some(target.service.clone()),
        dcgm: args.session.dcgm.clone(),
        poll: args.session.poll,
    };
    let mut runner = Runner::new(RunnerParts {
        rx,
        tx: tx.clone(),
        exec,
        runtime,
        client: target.client.clone(),
        cfg,
        sink: Box::new(|_: &Event| {}),
        recording,
        cancel: cancel.clone(),
    });
    runner.select_nodes(node_selection);
    let session_ev = session_event(SessionInfo {
        context: target.context.clone(),
        namespace: target.namespace.clone(),
        target: target.label(),
        model: Some(model.clone()),
        mode: mode.into(),
        runtime: Some(chosen.label()),
        verdicts: (args.session.verdicts != VerdictThresholds::default())
            .then(|| args.session.verdicts.clone()),
    });
    tx.send(session_ev).await.ok();
    Ok(Built {
        runner,
        tx,
        feeds,
        target,
        model,
        node_feed,
        runtime_label: chosen.label(),
    })
}

/// The runtime of the pods `ask` selects ([`choice::choose`]) and its adapter (inferences
/// bounded by `timeout`).
pub(crate) async fn runtime_of(
    ask: Ask<'_>,
    timeout: Duration,
    think: Option<bool>,
) -> (Choice, Arc<dyn RuntimeAdapter>) {
    let (access, client, namespace, url) = (ask.access, ask.client, ask.namespace, ask.direct_url);
    let chosen = choice::choose(ask).await;
    let access = RuntimeAccess::new(access, client.clone(), namespace, chosen.port, url);
    let runtime = choice::adapter(&chosen, access, timeout, think);
    (chosen, runtime)
}

/// The first event of a session.
pub(crate) fn session_event(info: SessionInfo) -> Event {
    Event::new(Utc::now(), Source::Session, EventKind::Session(info))
}

/// The access of `node` under an explicit policy (`--node-access`, or `--config` tables in
/// the lab, where a node no table matches has no access for the cold step).
fn policy_access(
    policy: &AccessPolicy,
    node: &str,
) -> std::result::Result<crate::node::NodeAccess, String> {
    match policy {
        AccessPolicy::Explicit {
            via,
            identity,
            known_hosts,
            ..
        } => AccessPolicy::explicit_access(via, identity.as_ref(), known_hosts.as_ref(), node),
        AccessPolicy::Config { section, .. } if section.lookup(node).is_none() => {
            Err(format!("no [nodes] table of the config matches {node}"))
        }
        AccessPolicy::Config { section, .. } => resolve(section, node, None),
        AccessPolicy::Unavailable(why) => Err(format!("no node access for {node}: {why}")),
    }
}

/// The statistics, CSV and exit code of a finished run.
fn finish(
    args: &RunConfig,
    runner: &Runner,
    target: &cluster::Target,
    cancel: &CancellationToken,
) -> Result<RunOutput> {
    let trials = runner.state().timeline.trials.clone();
    let warnings = Vec::from_iter(runner.record_error().map(|e| format!("recording: {e}")));
    // The table and CSV on stdout have no place for them: stderr, as `report --warnings`.
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    let label = args
        .session
        .record
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| format!("run {}/{}", target.namespace, target.label()));
    // The file as `report` gives it for the run's recording: its verdicts (OOM and
    // readiness contract) with their counts, what it says of how it was measured.
    let loaded = Loaded::of_state(&runner.state(), warnings.clone());
    let fr = FileReport::of_loaded(&label, loaded);
    let report = Report { files: vec![fr] };
    let stdout = match args.format {
        OutFormat::Json => serde_json::to_string_pretty(&report_json(&report)?)? + "\n",
        OutFormat::Table => report::render(&report, Format::Table)?,
        OutFormat::Csv => report::render(&report, Format::Csv)?,
    };
    if let Some(path) = &args.csv {
        let f =
            std::fs::File::create(path).wrap_err_with(|| format!("creating {}", path.display()))?;
        labcsv::export(&trials, f).wrap_err_with(|| format!("writing {}", path.display()))?;
    }
    let own_failed = trials.iter().any(|t| !t.is_ok());
    let code = if cancel.is_cancelled() {
        130
    } else if own_failed || trials.is_empty() {
        1
    } else {
        0
    };
    Ok(RunOutput {
        stdout,
        trials,
        code,
        warnings,
    })
}

/// The first model on disk of a Ready pod of the target (waits, bounded, for a runtime
/// that answers: Ready does not mean the runtime is up).
async fn discover_model(target: &cluster::Target, runtime: &dyn RuntimeAdapter) -> Result<String> {
    let api: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(target.client.clone(), &target.namespace);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let mut last = String::from("no Ready pod");
    loop {
        let pods = api
            .list(&kube::api::ListParams::default().labels(&target.selector))
            .await
            .wrap_err("listing the target's pods")?;
        for p in pods
            .items
            .iter()
            .map(crate::sources::kube::pod_view)
            .filter(|p| p.is_ready())
        {
            let r = crate::runner::pod_ref(&p);
            // A resident model is the one being served; else the first on disk.
            if let Ok(resident) = runtime.residency(&r).await
                && let Some(m) = resident.first()
            {
                return Ok(m.name.clone());
            }
            match runtime.models_on_disk(&r).await {
                Ok(models) => match models.first() {
                    Some(m) => return Ok(m.name.clone()),
                    None => last = format!("no model on disk in {}", p.name),
                },
                Err(e) => last = e,
            }
        }
        if tokio::time::Instant::now() > deadline {
            return Err(eyre!(
                "no model found on the target's runtime ({last}); pass --model"
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The cold step's node access from the config file's `[nodes."PATTERN"]` tables over a
/// guess from each node's labels, providerID and InternalIP (listed once now). The
/// selected node's access is announced by the node host feed ([`crate::node_host`]).
async fn node_access_from_config(
    target: &cluster::Target,
    section: crate::node::NodesSection,
) -> CacheDropper {
    use crate::node::config::NodeFacts;
    let api: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(target.client.clone());
    let facts: std::collections::BTreeMap<String, NodeFacts> =
        match api.list(&Default::default()).await {
            Ok(list) => list
                .items
                .iter()
                .map(NodeFacts::from_node)
                .map(|f| (f.name.clone(), f))
                .collect(),
            Err(e) => {
                let req = crate::rbac::Request::new("list", "", "nodes", None);
                let why =
                    crate::rbac::explain_kube_error(&e, &req).unwrap_or_else(|| e.to_string());
                return CacheDropper::None(format!(
                    "no node access: listing nodes failed ({why}); pass --node-access"
                ));
            }
        };
    CacheDropper::Node {
        access: Arc::new(move |node: &str| resolve(&section, node, facts.get(node).cloned())),
    }
}

/// The access the `[nodes]` tables give `node`, from its `facts` (else its name alone).
fn resolve(
    section: &crate::node::NodesSection,
    node: &str,
    facts: Option<crate::node::NodeFacts>,
) -> std::result::Result<crate::node::NodeAccess, String> {
    let facts = facts.unwrap_or_else(|| crate::node::NodeFacts {
        name: node.to_string(),
        ..Default::default()
    });
    section
        .resolve(&facts)
        .map(|(a, _)| a)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use readygap_core::event::{Event, EventKind, Source, Timestamp};
    use readygap_core::state::State;

    fn at(ms: i64) -> Timestamp {
        chrono::DateTime::from_timestamp_millis(1_800_000_000_000 + ms).unwrap()
    }

    #[test]
    fn a_failed_trial_has_null_marks_and_its_reason() {
        let evs = [
            Event::new(at(0), Source::Runner, EventKind::TrialBegin { cold: false }),
            Event::new(
                at(1),
                Source::Action,
                EventKind::ActionRequested {
                    id: 1,
                    action: readygap_core::event::Action::DeletePod {
                        pod: "p".into(),
                        grace_seconds: None,
                    },
                },
            ),
            Event::new(at(2), Source::Action, EventKind::ActionStarted { id: 1 }),
            Event::new(
                at(5_000),
                Source::Runner,
                EventKind::TrialAbort {
                    reason: "timeout: x".into(),
                },
            ),
        ];
        let s = State::from_events(&evs);
        let t = &s.timeline.trials[0];
        let v = trial_json(t);
        assert_eq!(v["index"], 1);
        assert_eq!(v["ok"], false);
        assert_eq!(v["reason"], "timeout: x");
        assert_eq!(v["cold"], false);
        assert_eq!(v["marks"]["t0"], "2027-01-15T08:00:00.002Z");
        assert!(v["marks"]["t1"].is_null() && v["marks"]["t4"].is_null());
        assert!(v["metrics"]["k8s_recovery"].is_null());

        let r = Report {
            files: vec![FileReport::from_trials("x", vec![t.clone()], vec![])],
        };
        let j = report_json(&r).unwrap();
        assert_eq!(j["files"][0]["trial_count"], 1);
        assert_eq!(j["files"][0]["failed"], 1);
        assert_eq!(j["files"][0]["trials"][0]["reason"], "timeout: x");
    }
}
