//! The command line's session options (clap) and their conversion into the plain
//! configuration of `readygap-live` ([`SessionConfig`], [`RunConfig`]): the defaults shown
//! in `--help` are the configs' defaults (a test holds them together), and node access is
//! resolved here from `--node-access` or the config file's `[nodes]` tables.

use clap::builder::{PossibleValuesParser, TypedValueParser};
use readygap_core::units;
use readygap_lab::engine::EngineKind;
use readygap_lab::kube::shapes::Shape;
use readygap_live::cluster::ClusterConfig;
use readygap_live::node_host::AccessPolicy;
use readygap_live::run::{OutFormat, RunConfig, SessionConfig};
use readygap_live::settings::{
    COOLDOWN, MemoryConfig, PROBE_INTERVAL, StageTimeouts, duration_text,
};
use readygap_live::sources::runtime::{AccessMode, PollConfig, RuntimeKind};
use readygap_live::trial::{InferAfter, ReplaceBy};
use std::path::PathBuf;
use std::time::Duration;

/// A clap value parser for one of a domain enum's names (`NAMES` tables of the live crate).
pub fn one_of<T: Copy + Send + Sync + 'static>(
    names: &'static [(&'static str, T)],
) -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(names.iter().map(|(n, _)| *n)).map(move |s| {
        names
            .iter()
            .find(|(n, _)| *n == s)
            .map(|(_, v)| *v)
            .expect("clap checked the name")
    })
}

/// The command-line word of `value` in `names` (the table `one_of` parses with); `default`
/// when the table lacks it.
pub fn name_of<T: PartialEq>(
    names: &'static [(&'static str, T)],
    value: T,
    default: &'static str,
) -> &'static str {
    names
        .iter()
        .find(|(_, v)| *v == value)
        .map_or(default, |(n, _)| n)
}

/// A memory size for `--lab-memory-limit` (more than 0 bytes).
/// A size in bytes (`640Mi`, `1Gi`, a number), more than 0.
pub fn memory_size(text: &str) -> Result<u64, String> {
    units::parse_memory(text)
        .filter(|b| *b > 0)
        .ok_or_else(|| format!("not a size: {text:?} (e.g. 640Mi, 1Gi or a number of bytes)"))
}

/// A speed factor of the lab (`--speed`): a positive number.
pub fn speed(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0)
        .ok_or_else(|| format!("--speed must be a positive number, got {text}"))
}

/// Which cluster and which workload.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context (default: the current context).
    #[arg(long)]
    pub context: Option<String>,
    /// Namespace (default: the context's namespace, or `default`).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// The Deployment serving the model.
    #[arg(long, default_value = "ollama")]
    pub deployment: String,
    /// A label selector of the pods instead of the Deployment's selector.
    #[arg(long)]
    pub selector: Option<String>,
    /// The Service whose EndpointSlices are watched and through which T2 via Service is
    /// probed after Ready (default: the deployment's name).
    #[arg(long)]
    pub service: Option<String>,
}

/// Which runtime the pods serve and how readygap reaches it: shared by the sessions
/// (`readygap`, `readygap run`) and `readygap watch`.
#[derive(Debug, Clone, clap::Args)]
pub struct RuntimeArgs {
    /// How to reach each pod's runtime.
    #[arg(long, default_value = "proxy", value_parser = one_of(&AccessMode::NAMES))]
    pub access: AccessMode,
    /// URL template for `--access direct` ({pod_ip}, {pod}, {namespace}, {port}).
    #[arg(long, default_value = "http://{pod_ip}:{port}")]
    pub direct_url: String,
    /// The LLM runtime of the pods (default: guessed from the container image, else from
    /// the runtime's answers, else ollama).
    #[arg(long, value_parser = one_of(&RuntimeKind::NAMES))]
    pub runtime: Option<RuntimeKind>,
    /// The runtime's port in the pod (with another runtime than ollama, the default is that
    /// runtime's: llamacpp 8080, openai 8000, or the container's declared port).
    #[arg(long, default_value_t = readygap_live::sources::runtime::RuntimeKind::Ollama.default_port())]
    pub runtime_port: u16,
    /// Path probed for T2 (with another runtime than ollama, the default is `/health`).
    #[arg(long, default_value = "/api/tags")]
    pub probe_path: String,
}

/// What a live session needs, shared by `readygap run` and the dashboard (`readygap`): the
/// cluster and target, the inference, the recording, how pods, runtimes and nodes are
/// reached, and the limits and intervals of the feeds.
#[derive(Debug, Clone, clap::Args)]
pub struct SessionArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// The model of the T3 inference (default: the lab profile's, else the first on disk).
    #[arg(long)]
    pub model: Option<String>,
    /// The prompt of the T3 inference.
    #[arg(long, default_value = readygap_live::actions::DEFAULT_PROMPT)]
    pub prompt: String,
    /// `think` of every inference (`true` or `false`); absent: the model's own default, as
    /// the user's clients see it (Ollama ≥ 0.12.4 thinks when the model can).
    #[arg(long, value_name = "true|false")]
    pub think: Option<bool>,
    /// Record the session (JSON lines) to this file.
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// Leave prompts and responses out of recordings (timings, statuses and Ollama's
    /// durations stay).
    #[arg(long)]
    pub record_redact: bool,
    /// Load this model on the new pod just before each trial's T3 inference (with
    /// `--model llama3.2:3b --preload-model llama3.2:1b` under 4 GiB: the published
    /// overlapping-residency OOM kill).
    #[arg(long)]
    pub preload_model: Option<String>,
    #[command(flatten)]
    pub reach: RuntimeArgs,
    /// Interval of the T2 probes.
    #[arg(long, default_value = duration_text(PROBE_INTERVAL), value_parser = units::parse_duration)]
    pub probe_interval: Duration,
    /// When the T3 inference is sent: after the runtime answered (as in the study) or at Ready.
    #[arg(long, default_value = "runtime", value_parser = one_of(&InferAfter::NAMES))]
    pub infer_after: InferAfter,
    /// Replace the pod by deleting it or by a rollout restart of the deployment.
    #[arg(long, default_value = "delete", value_parser = one_of(&ReplaceBy::NAMES))]
    pub replace: ReplaceBy,
    /// Grace period of the delete, in seconds (default: the pod's).
    #[arg(long)]
    pub grace: Option<u32>,
    /// How to reach nodes (host samples of the selected node, the cold step):
    /// ssh://USER@HOST:PORT, local, minikube, kind or debug-pod (a privileged pod in the
    /// target namespace, created through the API). Default: the config's `[nodes]` tables
    /// (in the lab: the lab's own node).
    #[arg(long)]
    pub node_access: Option<String>,
    /// ssh private key for `--node-access ssh://…`.
    #[arg(long, requires = "node_access")]
    pub node_identity: Option<PathBuf>,
    /// known_hosts file for `--node-access ssh://…`.
    #[arg(long, requires = "node_access")]
    pub node_known_hosts: Option<PathBuf>,
    /// Config file whose `[nodes]` tables apply (the dashboard's `--config`; `run --config`).
    #[arg(skip)]
    pub node_config: Option<PathBuf>,
    /// Limit of T0 → T1.
    #[arg(long, default_value = duration_text(StageTimeouts::default().ready), value_parser = units::parse_duration)]
    pub ready_timeout: Duration,
    /// Limit of T1 → T2.
    #[arg(long, default_value = duration_text(StageTimeouts::default().runtime), value_parser = units::parse_duration)]
    pub runtime_timeout: Duration,
    /// Limit of T3 → T4.
    #[arg(long, default_value = duration_text(StageTimeouts::default().inference), value_parser = units::parse_duration)]
    pub inference_timeout: Duration,
    /// Interval of the residency polls (`/api/ps`).
    #[arg(long, default_value = duration_text(PollConfig::default().residency), value_parser = units::parse_duration)]
    pub residency_interval: Duration,
    /// Interval of the models-on-disk polls (`/api/tags`).
    #[arg(long, default_value = duration_text(PollConfig::default().tags), value_parser = units::parse_duration)]
    pub tags_interval: Duration,
    /// Do not follow the container's memory.
    #[arg(long)]
    pub no_memory: bool,
    /// Interval of the memory samples.
    #[arg(long, default_value = duration_text(MemoryConfig::default().interval), value_parser = units::parse_duration)]
    pub memory_interval: Duration,
    /// The serving container (default: the one exposing --runtime-port, else the first).
    #[arg(long)]
    pub container: Option<String>,
    /// The DCGM exporter, the preferred source of a GPU pod's memory: a URL
    /// (`http://HOST:9400/metrics`) or `NAMESPACE/SERVICE:PORT` read through the API server's
    /// proxy (the GPU Operator's: `gpu-operator/nvidia-dcgm-exporter:9400`). Without it, or
    /// until it labels the pod, `nvidia-smi` in the container.
    #[arg(long, value_name = "URL|NS/SERVICE:PORT")]
    pub dcgm: Option<readygap_live::sources::gpu::Dcgm>,
    /// Send readygap's own T3 inference to replacements it did not start (someone's
    /// `kubectl delete`, a rollout, an OOM restart). Off by default: readygap only observes
    /// them (watches, GET probes, `/api/ps`, the runtime's request log), so it never loads
    /// the model before the experimenter's own request does.
    #[arg(long)]
    pub probe_external: bool,
    #[command(flatten)]
    pub verdicts: VerdictArgs,
}

/// Thresholds of the readiness-contract verdicts; each flag wins over `[verdicts]` of the
/// config file, which wins over the default.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct VerdictArgs {
    /// `rollout_stalled` after a replacement is Pending this long with a scheduling failure
    /// [default: 15s].
    #[arg(long, value_name = "DURATION", value_parser = units::parse_duration_or_zero)]
    pub verdict_rollout_stall_after: Option<Duration>,
    /// No `shallow_readiness` for a Ready window shorter than this before the first answer
    /// [default: 500ms].
    #[arg(long, value_name = "DURATION", value_parser = units::parse_duration_or_zero)]
    pub verdict_shallow_min: Option<Duration>,
    /// Probe failures and a container restart this far apart are not the same kill
    /// (`liveness_killed_during_load`) [default: 120s].
    #[arg(long, value_name = "DURATION", value_parser = units::parse_duration_or_zero)]
    pub verdict_kill_window: Option<Duration>,
    /// A container at or under this much memory holds the runtime alone, no model
    /// (`model_not_resident`) [default: 128Mi].
    #[arg(long, value_name = "SIZE", value_parser = memory_size)]
    pub verdict_runtime_memory: Option<u64>,
    /// A model is resident at Ready when `/api/ps` showed it within this of Ready (raise it
    /// with a slower `--residency-interval`) [default: 300ms].
    #[arg(long, value_name = "DURATION", value_parser = units::parse_duration_or_zero)]
    pub verdict_resident_slack: Option<Duration>,
    /// A first inference whose load took less than this did not load the model
    /// [default: 250ms].
    #[arg(long, value_name = "DURATION", value_parser = units::parse_duration_or_zero)]
    pub verdict_no_load: Option<Duration>,
}

impl VerdictArgs {
    /// The verdict thresholds in force: a `--verdict-*` flag over the file's `[verdicts]` over
    /// the default; `path` names the file in errors.
    pub fn thresholds(
        &self,
        file: &crate::config::ConfigFile,
        path: Option<&std::path::Path>,
    ) -> color_eyre::Result<readygap_core::verdict::VerdictThresholds> {
        use color_eyre::eyre::eyre;
        use readygap_core::verdict::VerdictThresholds;
        let name = path.map_or_else(|| "config".into(), |p| p.display().to_string());
        let v = file.verdicts.clone().unwrap_or_default();
        let mut t = VerdictThresholds::default();
        // `--verdict-FLAG`, else `[verdicts] KEY` of the file (read only then), else the
        // default already in `t.FIELD`.
        macro_rules! secs {
            ($flag:ident, $key:ident, $field:ident) => {
                if let Some(d) = self.$flag {
                    t.$field = d.as_secs_f64();
                } else if let Some(text) = &v.$key {
                    let d = units::parse_duration_or_zero(text).map_err(|e| {
                        eyre!("config {name}: [verdicts] {}: {e}", stringify!($key))
                    })?;
                    t.$field = d.as_secs_f64();
                }
            };
        }
        secs!(
            verdict_rollout_stall_after,
            rollout_stall_after,
            rollout_stall_after_s
        );
        secs!(verdict_shallow_min, shallow_min, shallow_min_s);
        secs!(verdict_kill_window, kill_window, kill_window_s);
        secs!(verdict_resident_slack, resident_slack, resident_slack_s);
        secs!(verdict_no_load, no_load, no_load_s);
        if let Some(b) = self.verdict_runtime_memory {
            t.runtime_only_bytes = b;
        } else if let Some(text) = &v.runtime_memory {
            t.runtime_only_bytes = units::parse_memory(text).ok_or_else(|| {
                eyre!(
                    "config {name}: [verdicts] runtime_memory: not a memory size: {text:?} \
                     (e.g. 128Mi, 1Gi or a number of bytes)"
                )
            })?;
        }
        t.check().map_err(|e| eyre!("config {name}: {e}"))?;
        Ok(t)
    }
}

/// Arguments of `readygap run`: a session, plus what only headless trials use (how many,
/// cold or warm, the pause between them, the output, and the in-process lab).
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub session: SessionArgs,
    /// How many trials readygap starts.
    #[arg(long, default_value_t = 5)]
    pub trials: usize,
    /// Cold trials: unload the model and drop the node's page cache before each T0.
    #[arg(long)]
    pub cold: bool,
    /// Pause between trials.
    #[arg(long, default_value = duration_text(COOLDOWN), value_parser = units::parse_duration_or_zero)]
    pub cooldown: Duration,
    /// Output format of the statistics on stdout.
    #[arg(long, default_value = "table", value_parser = one_of(&OutFormat::NAMES))]
    pub format: OutFormat,
    /// Write the trials in the study's CSV schema to this file.
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Start the built-in lab in-process with this profile (default local-3b) and run against it.
    #[arg(long, num_args = 0..=1, default_missing_value = "local-3b")]
    pub lab: Option<String>,
    /// Scenario of the built-in lab (baseline, http-readiness, inference-readiness, emptydir,
    /// overlap-oom, rollout, gpu, gpu-surge, gpu-shared, aggressive-liveness).
    #[arg(long, default_value = "baseline")]
    pub lab_scenario: readygap_lab::scenario::Scenario,
    /// The Ollama version the built-in lab imitates (0.12.x: a load that does not fit next to
    /// a resident model is OOM-killed; 0.13 and later on cgroup v2: the resident model is
    /// evicted, or the load refused). Default: the profile's.
    #[arg(long, value_name = "VERSION")]
    pub lab_ollama_version: Option<String>,
    /// Speed factor of the built-in lab.
    #[arg(long, default_value_t = 1.0)]
    pub lab_speed: f64,
    /// Memory limit of the built-in lab's serving container (a Kubernetes quantity such as
    /// `640Mi`, or bytes; default: the profile's). With `--engine ollama` it is the real
    /// cgroup's limit, so two models that do not fit together are OOM-killed by the kernel.
    #[arg(long, value_name = "SIZE", value_parser = memory_size, requires = "lab")]
    pub lab_memory_limit: Option<u64>,
    /// What runs the lab's serving containers: its simulated runtime, or a real `ollama
    /// serve` (`ollama`) or `llama-server` (`llamacpp`) per pod (peers from
    /// scripts/peers.sh; the lab's profile becomes `real-smollm2`, serving `--model` when
    /// given).
    #[arg(long, default_value = "simulated", value_parser = one_of(&EngineKind::NAMES), requires = "lab")]
    pub engine: EngineKind,
    /// The server the lab's simulated runtime imitates: Ollama, llama.cpp's llama-server
    /// (503 "Loading model" until loaded) or vLLM (connections refused until loaded).
    #[arg(long, default_value = "ollama", value_parser = one_of(&Shape::NAMES), requires = "lab")]
    pub lab_server: Shape,
}

impl SessionArgs {
    /// The verdict thresholds in force: the flags over `[verdicts]` of the config file
    /// (`--config`, else the default file) over the defaults.
    pub fn verdict_thresholds(
        &self,
    ) -> color_eyre::Result<readygap_core::verdict::VerdictThresholds> {
        let (file, path) = crate::config::load(self.node_config.as_deref())?;
        self.verdicts.thresholds(&file, path.as_deref())
    }

    /// The DCGM exporter in force: `--dcgm`, else `[gpu] dcgm` of the config file (`--config`,
    /// else the default file), else none.
    pub fn dcgm_source(&self) -> color_eyre::Result<Option<readygap_live::sources::gpu::Dcgm>> {
        if self.dcgm.is_some() {
            return Ok(self.dcgm.clone());
        }
        let (file, path) = crate::config::load(self.node_config.as_deref())?;
        let name = path.map_or_else(|| "config".into(), |p| p.display().to_string());
        file.gpu
            .and_then(|g| g.dcgm)
            .map(|text| {
                text.parse()
                    .map_err(|e| color_eyre::eyre::eyre!("config {name}: [gpu] dcgm: {e}"))
            })
            .transpose()
    }

    /// The live session's configuration. `lab`: the session runs against the built-in lab
    /// (its nodes are reached through debug pods unless `--node-access` or an explicit
    /// config file says otherwise).
    pub fn to_config(&self, lab: bool) -> SessionConfig {
        let c = &self.cluster;
        SessionConfig {
            cluster: ClusterConfig {
                kubeconfig: c.kubeconfig.clone(),
                context: c.context.clone(),
                namespace: c.namespace.clone(),
                deployment: c.deployment.clone(),
                selector: c.selector.clone(),
                service: c.service.clone(),
            },
            model: self.model.clone(),
            prompt: self.prompt.clone(),
            record: self.record.clone(),
            record_redact: self.record_redact,
            preload_model: self.preload_model.clone(),
            access: self.reach.access,
            direct_url: self.reach.direct_url.clone(),
            runtime: self.reach.runtime,
            runtime_port: self.reach.runtime_port,
            probe_path: self.reach.probe_path.clone(),
            probe_interval: self.probe_interval,
            infer_after: self.infer_after,
            replace: self.replace,
            grace: self.grace,
            nodes: self.node_policy(lab),
            timeouts: StageTimeouts {
                ready: self.ready_timeout,
                runtime: self.runtime_timeout,
                inference: self.inference_timeout,
                ..StageTimeouts::default()
            },
            poll: PollConfig {
                residency: self.residency_interval,
                tags: self.tags_interval,
                ..PollConfig::default()
            },
            memory: MemoryConfig {
                follow: !self.no_memory,
                interval: self.memory_interval,
            },
            container: self.container.clone(),
            dcgm: self.dcgm.clone(),
            think: self.think,
            probe_external: self.probe_external,
            // `read_only` is the dashboard's (`--read-only`), `verdicts` the caller's.
            ..SessionConfig::default()
        }
    }

    /// Where node access comes from: `--node-access` (with its identity and known_hosts),
    /// in the lab (unless a config file was named explicitly) its nodes' debug pods, the
    /// access a user's cluster offers too; else the config file's `[nodes]` tables.
    pub fn node_policy(&self, lab: bool) -> AccessPolicy {
        if let Some(via) = &self.node_access {
            return AccessPolicy::Explicit {
                via: via.clone(),
                identity: self.node_identity.clone(),
                known_hosts: self.node_known_hosts.clone(),
                origin: "--node-access".into(),
            };
        }
        configured_nodes(self.node_config.as_deref(), lab)
    }
}

/// The node access of a `--read-only` session: nothing that creates a debug pod. The lab's
/// nodes are then sampled through the kubelet Summary API (GETs), as a cluster without
/// `[nodes]` tables is.
pub fn read_only_nodes(policy: AccessPolicy) -> AccessPolicy {
    match policy {
        AccessPolicy::Explicit { origin, .. } if origin == LAB_NODES => AccessPolicy::Config {
            section: Default::default(),
            lab: true,
        },
        // Why `--read-only` has no debug-pod access.
        AccessPolicy::Explicit { via, .. } if via == "debug-pod" => AccessPolicy::Unavailable(
            "--read-only: the debug pod would be created (a POST); use ssh or local access".into(),
        ),
        other => other,
    }
}

/// Where the lab's node access comes from, as the Host panel and recordings show it.
pub const LAB_NODES: &str = "lab: a debug pod on the node";

/// Node access without `--node-access`: in the lab (unless a config file was named
/// explicitly) its nodes' debug pods; else the `[nodes]` tables of the config file
/// (`config`, or the default one).
pub fn configured_nodes(config: Option<&std::path::Path>, lab: bool) -> AccessPolicy {
    // The lab's nodes are fake: the user's own ~/.config tables never apply to them.
    if lab && config.is_none() {
        return AccessPolicy::Explicit {
            via: "debug-pod".into(),
            identity: None,
            known_hosts: None,
            origin: LAB_NODES.into(),
        };
    }
    match crate::config::load(config).and_then(|(f, _)| crate::config::nodes_section(&f)) {
        Ok(section) => AccessPolicy::Config { section, lab },
        Err(e) => AccessPolicy::Unavailable(format!("{e:#}")),
    }
}

impl RunArgs {
    /// The run's configuration (the lab fields are the binary's: it starts the lab).
    pub fn to_config(&self) -> RunConfig {
        use serde_json::json;
        let extra = [
            ("lab", json!(self.lab)),
            ("lab_speed", json!(self.lab_speed)),
            ("lab_memory_limit", json!(self.lab_memory_limit)),
            ("lab_ollama_version", json!(self.lab_ollama_version)),
        ];
        RunConfig {
            session: self.session.to_config(self.lab.is_some()),
            trials: self.trials,
            cold: self.cold,
            cooldown: self.cooldown,
            format: self.format,
            csv: self.csv.clone(),
            extra_settings: extra.into_iter().map(|(k, v)| (k.into(), v)).collect(),
            local_host: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        run: RunArgs,
    }

    #[test]
    fn the_help_defaults_are_the_configs_defaults() {
        let args = Wrap::parse_from(["readygap"]).run;
        let mut cfg = args.to_config();
        let want = RunConfig::default();
        // Without a config file the (empty) `[nodes]` tables of the user apply.
        cfg.session.nodes = want.session.nodes.clone();
        cfg.extra_settings = want.extra_settings.clone();
        assert_eq!(cfg, want);
    }

    #[test]
    fn the_lab_memory_limit_is_a_quantity_of_the_lab() {
        let args = Wrap::parse_from(["readygap", "--lab", "--lab-memory-limit", "640Mi"]).run;
        assert_eq!(args.lab_memory_limit, Some(640 << 20));
        let args = Wrap::parse_from(["readygap", "--lab", "--lab-memory-limit", "667611136"]).run;
        assert_eq!(args.lab_memory_limit, Some(667_611_136));
        for bad in [
            &["--lab", "--lab-memory-limit", "0"][..],
            &["--lab", "--lab-memory-limit", "lots"],
            &["--lab-memory-limit", "1Gi"],
        ] {
            let mut argv = vec!["readygap"];
            argv.extend_from_slice(bad);
            assert!(
                Wrap::try_parse_from(&argv).is_err(),
                "{bad:?} must be refused"
            );
        }
        let e = Wrap::try_parse_from(["readygap", "--lab", "--lab-memory-limit", "lots"])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("not a size: \"lots\""), "{e}");
    }

    #[test]
    fn the_lab_is_reached_through_debug_pods() {
        let args = Wrap::parse_from(["readygap", "--lab"]).run;
        assert_eq!(
            args.to_config().session.nodes,
            AccessPolicy::Explicit {
                via: "debug-pod".into(),
                identity: None,
                known_hosts: None,
                origin: LAB_NODES.into(),
            }
        );
        let args = Wrap::parse_from(["readygap", "--lab", "--node-access", "local"]).run;
        assert!(matches!(
            args.to_config().session.nodes,
            AccessPolicy::Explicit { via, .. } if via == "local"
        ));
    }
}
