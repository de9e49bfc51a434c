//! `readygap watch`: the headless fleet watcher. Every replacement of every Deployment
//! matching `--selector` becomes an external trial measured passively
//! ([`readygap_live::fleet`]); the trials are exported on `--metrics-addr`:
//! - `GET /metrics`: OpenMetrics when the scraper asks for it (Prometheus does), else the
//!   Prometheus text format ([`readygap_core::fleet::exposition`]);
//! - `GET /healthz`: the process answers;
//! - `GET /readyz`: 200 once the Deployments and their pods were listed, else 503;
//! - `GET /trials`: every watched Deployment with the ring of its last trials, as JSON (the
//!   trials' marks and metrics, as `run --format json` prints them; none yet: `seen` 0).

use axum::Router;
use axum::extract::State as AxState;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use color_eyre::eyre::{Result, WrapErr};
use readygap_core::fleet::exposition::{self, negotiate};
use readygap_core::units;
use readygap_live::cluster::ClusterConfig;
use readygap_live::fleet::{Shared, WatchConfig};
use readygap_live::settings::{MemoryConfig, StageTimeouts, duration_text};
use readygap_live::sources::runtime::PollConfig;
use serde_json::json;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The command-line arguments of `readygap watch`.
#[derive(Debug, Clone, clap::Args)]
pub struct WatchArgs {
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context (default: the current context).
    #[arg(long)]
    pub context: Option<String>,
    /// Namespace (default: the context's namespace, or `default`).
    #[arg(short = 'n', long, conflicts_with = "all_namespaces")]
    pub namespace: Option<String>,
    /// Watch every namespace.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Label selector of the model Deployments.
    #[arg(short = 'l', long, default_value = "readygap.io/watch=true")]
    pub selector: String,
    /// Label selector of their pods (default: --selector, which the pod template then
    /// carries too).
    #[arg(long)]
    pub pod_selector: Option<String>,
    /// Where the metrics are served.
    #[arg(long, default_value = "0.0.0.0:9464")]
    pub metrics_addr: SocketAddr,
    #[command(flatten)]
    pub reach: crate::args::RuntimeArgs,
    /// Interval of the T2 probes of a replacement.
    #[arg(long, default_value = duration_text(WatchConfig::default().probe_interval), value_parser = units::parse_duration)]
    pub probe_interval: Duration,
    /// Limit of T0 → T1.
    #[arg(long, default_value = duration_text(WatchConfig::default().timeouts.ready), value_parser = units::parse_duration)]
    pub ready_timeout: Duration,
    /// Limit of T1 → T2.
    #[arg(long, default_value = duration_text(WatchConfig::default().timeouts.runtime), value_parser = units::parse_duration)]
    pub runtime_timeout: Duration,
    /// Limit of the first inference after T2 (someone else's, from the request log).
    #[arg(long, default_value = duration_text(WatchConfig::default().timeouts.inference), value_parser = units::parse_duration)]
    pub inference_timeout: Duration,
    /// Interval of the residency polls (`/api/ps`).
    #[arg(long, default_value = duration_text(WatchConfig::default().poll.residency), value_parser = units::parse_duration)]
    pub residency_interval: Duration,
    /// Interval of the models-on-disk polls (`/api/tags`).
    #[arg(long, default_value = duration_text(WatchConfig::default().poll.tags), value_parser = units::parse_duration)]
    pub tags_interval: Duration,
    /// Follow each pod's memory (exec into the container: needs `pods/exec`).
    #[arg(long)]
    pub memory: bool,
    /// The serving container (default: the one exposing the runtime port, else the first).
    #[arg(long)]
    pub container: Option<String>,
    /// Trials kept per Deployment (`/trials`).
    #[arg(long, default_value_t = 50)]
    pub ring: usize,
    /// At most this many series (namespace, deployment, model, runtime) in the metrics.
    #[arg(long, default_value_t = 2000)]
    pub max_series: usize,
    /// Rebuild each Deployment's store from its snapshot once this many trials ended
    /// (between trials; keeps memory flat).
    #[arg(long, default_value_t = 5)]
    pub compact_after: usize,
    /// Record each Deployment (JSON lines) under this directory:
    /// DIR/<namespace>/<deployment>/readygap-watch-…-NNNNNN.jsonl.
    #[arg(long)]
    pub record_dir: Option<PathBuf>,
    /// Start a new recording file at the end of a trial once the current one is this large.
    #[arg(long, default_value = "16Mi", value_parser = crate::args::memory_size)]
    pub record_max_size: u64,
    /// Recording files kept per Deployment (older ones are deleted).
    #[arg(long, default_value_t = 5)]
    pub record_keep: usize,
    /// Leave prompts and responses out of recordings.
    #[arg(long)]
    pub record_redact: bool,
}

impl WatchArgs {
    pub fn to_config(&self) -> WatchConfig {
        let defaults = WatchConfig::default();
        WatchConfig {
            cluster: ClusterConfig {
                kubeconfig: self.kubeconfig.clone(),
                context: self.context.clone(),
                namespace: self.namespace.clone(),
                ..ClusterConfig::default()
            },
            all_namespaces: self.all_namespaces,
            selector: self.selector.clone(),
            pod_selector: self.pod_selector.clone(),
            access: self.reach.access,
            direct_url: self.reach.direct_url.clone(),
            runtime: self.reach.runtime,
            runtime_port: self.reach.runtime_port,
            probe_path: self.reach.probe_path.clone(),
            probe_interval: self.probe_interval,
            timeouts: StageTimeouts {
                ready: self.ready_timeout,
                runtime: self.runtime_timeout,
                inference: self.inference_timeout,
                ..defaults.timeouts
            },
            poll: PollConfig {
                residency: self.residency_interval,
                tags: self.tags_interval,
                ..defaults.poll
            },
            memory: MemoryConfig {
                follow: self.memory,
                ..defaults.memory
            },
            container: self.container.clone(),
            ring: self.ring,
            max_series: self.max_series,
            compact_after: self.compact_after,
            record_dir: self.record_dir.clone(),
            record_max_bytes: self.record_max_size,
            record_keep: self.record_keep,
            record_redact: self.record_redact,
        }
    }
}

/// A running watcher: where its endpoints answer, what it measured, and its task.
pub struct Watching {
    pub addr: SocketAddr,
    pub shared: Arc<Shared>,
    /// Ends after `cancel` (or when the cluster cannot be reached at the start).
    pub task: tokio::task::JoinHandle<Result<()>>,
}

/// Start the watcher and its HTTP endpoints (tests cancel `cancel` as Ctrl-C would).
pub async fn start(args: &WatchArgs, cancel: CancellationToken) -> Result<Watching> {
    let cfg = args.to_config();
    let shared = Arc::new(Shared::new(&cfg));
    let listener = tokio::net::TcpListener::bind(args.metrics_addr)
        .await
        .wrap_err_with(|| format!("binding --metrics-addr {}", args.metrics_addr))?;
    let addr = listener
        .local_addr()
        .wrap_err("reading the metrics address")?;
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/trials", get(trials))
        .with_state(shared.clone());
    let server = tokio::spawn(
        axum::serve(listener, app)
            .with_graceful_shutdown(cancel.clone().cancelled_owned())
            .into_future(),
    );
    let s = shared.clone();
    let task = tokio::spawn(async move {
        let r = readygap_live::fleet::run(cfg, s, cancel.clone()).await;
        // The endpoints go with the watcher.
        cancel.cancel();
        let _ = server.await;
        r
    });
    Ok(Watching { addr, shared, task })
}

async fn metrics(AxState(s): AxState<Arc<Shared>>, headers: HeaderMap) -> Response {
    let format = negotiate(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
    let Ok(m) = s.metrics.lock() else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "metrics unavailable\n").into_response();
    };
    let body = exposition::encode(&m, format);
    ([(header::CONTENT_TYPE, format.content_type())], body).into_response()
}

async fn readyz(AxState(s): AxState<Arc<Shared>>) -> (StatusCode, &'static str) {
    if s.ready.load(Ordering::Relaxed) {
        (StatusCode::OK, "ready\n")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "listing the Deployments and their pods\n",
        )
    }
}

async fn trials(AxState(s): AxState<Arc<Shared>>) -> Response {
    let runtimes = s.runtimes.lock().map(|r| r.clone()).unwrap_or_default();
    let Ok(m) = s.metrics.lock() else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "trials unavailable\n").into_response();
    };
    // Every watched Deployment, those with no trial yet too (seen 0): a watcher that lists
    // nothing cannot be told from one that found nothing.
    let rings: std::collections::BTreeMap<_, _> = m.rings().collect();
    let keys: std::collections::BTreeSet<&(String, String)> =
        runtimes.keys().chain(rings.keys().copied()).collect();
    let deployments: Vec<serde_json::Value> = keys
        .into_iter()
        .map(|key| {
            let ring = rings.get(key);
            json!({
                "namespace": key.0,
                "deployment": key.1,
                "runtime": runtimes.get(key),
                "seen": ring.map_or(0, |r| r.seen),
                "trials": ring
                    .into_iter()
                    .flat_map(|r| r.iter())
                    .map(readygap_live::run::trial_json)
                    .collect::<Vec<_>>(),
            })
        })
        .collect();
    axum::Json(json!({ "deployments": deployments })).into_response()
}

/// `readygap watch` until Ctrl-C (or SIGTERM, as Kubernetes stops a pod, or SIGHUP: the
/// signals of [`crate::signals::quit`]).
pub async fn watch(args: WatchArgs) -> Result<i32> {
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        crate::signals::quit().await;
        c.cancel();
    });
    let w = start(&args, cancel).await?;
    eprintln!(
        "readygap watch: deployments {} in {}, metrics on http://{}/metrics",
        args.selector,
        if args.all_namespaces {
            "all namespaces"
        } else {
            args.namespace
                .as_deref()
                .unwrap_or("the context's namespace")
        },
        w.addr
    );
    w.task.await.wrap_err("the watcher stopped")??;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        args: WatchArgs,
    }

    #[test]
    fn the_defaults_in_help_are_the_watchers_defaults() {
        let args = Wrap::try_parse_from(["readygap"]).unwrap().args;
        let mut want = WatchConfig::default();
        // $KUBECONFIG, when the environment has one.
        want.cluster.kubeconfig = args.kubeconfig.clone();
        assert_eq!(args.to_config(), want);
        assert_eq!(args.metrics_addr, "0.0.0.0:9464".parse().unwrap());
    }

    #[test]
    fn one_namespace_or_all() {
        assert!(Wrap::try_parse_from(["readygap", "-n", "a", "-A"]).is_err());
        let a = Wrap::try_parse_from(["readygap", "-A", "-l", "team=llm"])
            .unwrap()
            .args;
        let c = a.to_config();
        assert!(c.all_namespaces);
        assert_eq!(c.selector, "team=llm");
        assert!(Wrap::try_parse_from(["readygap", "--record-max-size", "0"]).is_err());
    }
}
