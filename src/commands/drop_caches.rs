//! `readygap drop-caches`: drop one node's page cache and print the outcome as a table or
//! as one JSON object. Exit status: 0 dropped, 2 ran but `Cached` did not fall enough,
//! 1 could not reach the node or was refused (bad name, ssh failure, sudo, timeout).

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use color_eyre::eyre::WrapErr;

use readygap_live::node::access::{DEFAULT_CONNECT_TIMEOUT, HostKeyPolicy, NodeAccess};
use readygap_live::node::config::{NodeFacts, NodesSection, access_from_via};
use readygap_live::node::debug_session::DebugPodSession;
use readygap_live::node::drop_caches::{
    DropCachesResult, DropThreshold, drop_caches, drop_caches_in_pod,
};
use readygap_live::node::validate::{NodeName, User, check_profile};
use readygap_live::node::{NodeError, access::current_user};

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Table,
    Json,
}

/// Arguments of `readygap drop-caches`.
#[derive(Debug, Clone, clap::Args)]
pub struct DropCachesArgs {
    /// Node name (reported in the result; the node to reach for minikube and kind).
    #[arg(long)]
    pub node: String,
    /// How to reach the node: ssh://USER@HOST:PORT, local, minikube, kind or debug-pod (a
    /// privileged pod created through the Kubernetes API). Without it the node is looked up
    /// in the cluster and the access is guessed.
    #[arg(long)]
    pub via: Option<String>,
    /// Image of the debug pod (with --via debug-pod; needs sh, grep, sync, sleep).
    #[arg(long)]
    pub image: Option<String>,
    /// Namespace of the debug pod (default: the context's namespace). It must allow
    /// privileged pods (Pod Security Admission level `privileged`).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context (default: the current context).
    #[arg(long)]
    pub context: Option<String>,
    /// Leave a debug pod this command created running (it ends by its own deadline).
    #[arg(long)]
    pub keep_pod: bool,
    /// ssh identity file (private key).
    #[arg(long)]
    pub identity: Option<PathBuf>,
    /// known_hosts file for ssh (default: ssh's own).
    #[arg(long)]
    pub known_hosts: Option<PathBuf>,
    /// Trust a host key seen for the first time (StrictHostKeyChecking=accept-new; a
    /// changed key is still refused).
    #[arg(long)]
    pub accept_new_host_key: bool,
    /// Do not keep the ssh connection open for later commands (ControlMaster off).
    #[arg(long)]
    pub no_connection_sharing: bool,
    /// minikube profile (with --via minikube).
    #[arg(long)]
    pub profile: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,
    /// Overall deadline (e.g. 30s, 500ms, 2m); the command is killed when it passes.
    #[arg(long, default_value = "60s", value_parser = readygap_core::units::parse_duration)]
    pub timeout: Duration,
    /// Count the drop as done when Cached fell by at least this many kB (default rule:
    /// fell by half, or ended below 64 MiB).
    #[arg(long)]
    pub min_drop_kb: Option<u64>,
}

/// Resolves the access for the arguments (without `--via`: from the cluster).
async fn access_for(args: &DropCachesArgs) -> Result<NodeAccess, NodeError> {
    let node = NodeName::new(&args.node)?;
    let mut access = match &args.via {
        Some(via) => {
            let user = current_user().unwrap_or(User::new("root")?);
            access_from_via(via, &node, &user)?
        }
        None => access_from_cluster(args, &node).await?,
    };
    match &mut access {
        NodeAccess::Ssh(ssh) => {
            ssh.identity = args.identity.clone().or(ssh.identity.take());
            ssh.known_hosts = args.known_hosts.clone().or(ssh.known_hosts.take());
            if args.accept_new_host_key {
                ssh.host_key_policy = HostKeyPolicy::AcceptNew;
            }
            if args.no_connection_sharing {
                ssh.control_persist = None;
            }
            ssh.connect_timeout = args
                .timeout
                .clamp(Duration::from_secs(1), DEFAULT_CONNECT_TIMEOUT);
        }
        NodeAccess::Minikube { profile, .. } => {
            if let Some(p) = &args.profile {
                check_profile(p)?;
                *profile = Some(p.clone());
            }
        }
        NodeAccess::DebugPod { image, .. } => {
            if let Some(i) = &args.image {
                if i.is_empty() || i.chars().any(|c| c.is_whitespace() || c.is_control()) {
                    return Err(NodeError::Config(format!("invalid image {i:?}")));
                }
                *image = i.clone();
            }
        }
        _ => {}
    }
    Ok(access)
}

/// The kube client and namespace of the arguments (`--kubeconfig`, `--context`, `-n`).
async fn kube_client(args: &DropCachesArgs) -> Result<(kube::Client, String), NodeError> {
    let cluster = readygap_live::cluster::ClusterConfig {
        kubeconfig: args.kubeconfig.clone(),
        context: args.context.clone(),
        namespace: args.namespace.clone(),
        ..Default::default()
    };
    let (cfg, _) = readygap_live::cluster::config(&cluster)
        .await
        .map_err(|e| NodeError::Config(format!("no cluster: {e:#}")))?;
    let namespace = cfg.default_namespace.clone();
    let client = kube::Client::try_from(cfg)
        .map_err(|e| NodeError::Config(format!("building the Kubernetes client: {e}")))?;
    Ok((client, namespace))
}

async fn access_from_cluster(
    args: &DropCachesArgs,
    node: &NodeName,
) -> Result<NodeAccess, NodeError> {
    let lookup = async {
        let (client, _) = kube_client(args)
            .await
            .map_err(|e| format!("{e}; give --via"))?;
        let api: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
        api.get(node.as_str())
            .await
            .map_err(|e| format!("reading node {node}: {e}"))
    };
    let object = tokio::time::timeout(args.timeout, lookup)
        .await
        .map_err(|_| NodeError::Config(format!("looking up node {node} timed out; give --via")))?
        .map_err(NodeError::Config)?;
    let (access, reason) = NodesSection::default().resolve(&NodeFacts::from_node(&object))?;
    tracing::info!(%node, %reason, "guessed node access");
    Ok(access)
}

/// Drops the caches as the arguments say and returns the result (never fails: errors are
/// in the result).
pub async fn drop_caches_for_args(args: &DropCachesArgs) -> DropCachesResult {
    drop_with(args)
        .await
        .unwrap_or_else(|e| DropCachesResult::failed(&args.node, e.to_string()))
}

/// [`drop_caches_for_args`], with an error that kept the drop from running.
async fn drop_with(args: &DropCachesArgs) -> Result<DropCachesResult, NodeError> {
    let access = access_for(args).await?;
    let threshold = DropThreshold {
        min_drop_kb: args.min_drop_kb,
        ..DropThreshold::default()
    };
    if !matches!(access, NodeAccess::DebugPod { .. }) {
        return Ok(drop_caches(&args.node, &access, &threshold, args.timeout).await);
    }
    let (client, namespace) = kube_client(args).await?;
    let session = DebugPodSession::for_access(client, &namespace, &access)?;
    let mut result = drop_caches_in_pod(&args.node, &session, &threshold, args.timeout).await;
    if !args.keep_pod
        && let Err(e) = session.delete_if_created().await
    {
        // The drop itself is reported; a pod left behind ends by its own deadline.
        let note = format!("(the debug pod was not deleted: {e})");
        result.error = Some(match result.error.take() {
            Some(err) => format!("{err} {note}"),
            None => note,
        });
    }
    Ok(result)
}

/// The exit status for a result: 0 dropped, 2 ran but not enough, 1 failed.
pub fn exit_code(result: &DropCachesResult) -> i32 {
    if result.dropped {
        0
    } else if result.cached_kb_after.is_some() {
        2
    } else {
        1
    }
}

fn mib(kb: Option<u64>) -> String {
    kb.map_or_else(
        || "-".to_owned(),
        |kb| format!("{:.1} MiB", kb as f64 / 1024.0),
    )
}

/// The table shown for `--format table`.
pub fn render_table(results: &[DropCachesResult]) -> String {
    let rows: Vec<[String; 5]> = results
        .iter()
        .map(|r| {
            [
                r.node.clone(),
                mib(r.cached_kb_before),
                mib(r.cached_kb_after),
                if r.dropped { "yes" } else { "no" }.to_owned(),
                r.error.clone().unwrap_or_else(|| "-".to_owned()),
            ]
        })
        .collect();
    let header = ["NODE", "CACHED BEFORE", "CACHED AFTER", "DROPPED", "ERROR"];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row.iter()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    // Every cell padded to its column's width, two spaces apart; the line's end trimmed.
    let mut line = |cells: [&str; 5]| {
        let text: String = cells
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}  "))
            .collect();
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(header);
    for row in &rows {
        line(row.each_ref().map(String::as_str));
    }
    out
}

/// `readygap drop-caches`: prints the result to stdout and returns the exit status.
pub async fn drop_caches_cli(args: DropCachesArgs) -> color_eyre::Result<i32> {
    let result = drop_caches_for_args(&args).await;
    let text = match args.format {
        OutputFormat::Json => {
            serde_json::to_string(&result).wrap_err("encoding the result as JSON")? + "\n"
        }
        OutputFormat::Table => render_table(std::slice::from_ref(&result)),
    };
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .wrap_err("writing the result to stdout")?;
    Ok(exit_code(&result))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: DropCachesArgs,
    }

    fn parse(argv: &[&str]) -> Result<DropCachesArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("drop-caches").chain(argv.iter().copied()))
            .map(|c| c.args)
    }

    #[test]
    fn flags_parse() {
        let a = parse(&[
            "--node",
            "n1",
            "--via",
            "ssh://root@127.0.0.1:2222",
            "--identity",
            "/k",
            "--format",
            "json",
            "--timeout",
            "1500ms",
            "--min-drop-kb",
            "4096",
        ])
        .expect("args");
        assert_eq!(a.format, OutputFormat::Json);
        assert_eq!(a.timeout, Duration::from_millis(1500));
        assert_eq!(a.min_drop_kb, Some(4096));
        let a = parse(&["--node", "n1"]).expect("args");
        assert_eq!(a.timeout, Duration::from_secs(60));
        assert_eq!(a.format, OutputFormat::Table);
        assert!(parse(&["--node", "n", "--timeout", "-1s"]).is_err());
        assert!(parse(&["--node", "n", "--format", "xml"]).is_err());
    }

    #[tokio::test]
    async fn debug_pod_flags_make_a_debug_pod_access() {
        let a = parse(&[
            "--node",
            "worker-1",
            "--via",
            "debug-pod",
            "--image",
            "registry.local/busybox:1.36",
            "-n",
            "node-tools",
            "--keep-pod",
        ])
        .expect("args");
        assert_eq!(a.namespace.as_deref(), Some("node-tools"));
        assert!(a.keep_pod);
        match access_for(&a).await.expect("access") {
            NodeAccess::DebugPod { node, image } => {
                assert_eq!(node.as_str(), "worker-1");
                assert_eq!(image, "registry.local/busybox:1.36");
            }
            other => panic!("{other:?}"),
        }
        let a = parse(&["--node", "worker-1", "--via", "debug-pod"]).expect("args");
        assert!(matches!(
            access_for(&a).await.expect("access"),
            NodeAccess::DebugPod { image, .. } if image == readygap_live::node::access::DEFAULT_DEBUG_IMAGE
        ));
        let a = parse(&["--node", "w", "--via", "debug-pod", "--image", "a b"]).expect("args");
        let err = access_for(&a).await.expect_err("bad image").to_string();
        assert!(err.contains("invalid image"), "{err}");
    }

    #[tokio::test]
    async fn an_injected_node_name_is_refused_before_anything_runs() {
        let a = parse(&["--node", "a;rm -rf /", "--via", "local"]).expect("args");
        let r = drop_caches_for_args(&a).await;
        assert!(!r.dropped);
        assert_eq!(r.cached_kb_before, None);
        let err = r.error.expect("error");
        assert!(err.contains("invalid node name"), "{err}");
        assert_eq!(exit_code(&DropCachesResult::failed("x", err)), 1);
        let a = parse(&["--node", "n", "--via", "ssh://root@a;rm -rf /:22"]).expect("args");
        let err = drop_caches_for_args(&a).await.error.expect("error");
        assert!(err.contains("invalid host"), "{err}");
        let a = parse(&["--node", "n", "--via", "telnet"]).expect("args");
        let err = drop_caches_for_args(&a).await.error.expect("error");
        assert!(err.contains("expected ssh://"), "{err}");
    }

    #[test]
    fn table_and_exit_codes() {
        let ok = DropCachesResult {
            node: "node-a".into(),
            cached_kb_before: Some(2 * 1024 * 1024),
            cached_kb_after: Some(51_200),
            dropped: true,
            error: None,
        };
        let weak = DropCachesResult {
            dropped: false,
            cached_kb_after: Some(2 * 1024 * 1024 - 10),
            error: Some("fell by only 10 kB".into()),
            ..ok.clone()
        };
        let table = render_table(&[ok.clone(), weak.clone()]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("NODE    CACHED BEFORE"), "{table}");
        assert!(
            lines[1].contains("2048.0 MiB") && lines[1].contains("50.0 MiB"),
            "{table}"
        );
        assert!(
            lines[1].contains(" yes ") && lines[1].ends_with('-'),
            "{table}"
        );
        assert!(
            lines[2].contains(" no ") && lines[2].ends_with("fell by only 10 kB"),
            "{table}"
        );
        assert_eq!(exit_code(&ok), 0);
        assert_eq!(exit_code(&weak), 2);
    }
}
