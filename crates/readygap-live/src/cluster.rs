//! Connecting to a cluster: the kube client from a kubeconfig, a context, KUBECONFIG or
//! the in-cluster service account, the namespace (`-n`), and the target workload
//! (`--deployment`, default `ollama`, or a `--selector`) with its Service.

use color_eyre::eyre::{Result, WrapErr, eyre};
use k8s_openapi::api::apps::v1::Deployment;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use std::path::PathBuf;
use std::time::Duration;

/// How long connecting may take before readygap says the API server is unreachable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(4);

/// Which cluster and which workload.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterConfig {
    /// Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context (default: the current context).
    pub context: Option<String>,
    /// Namespace (default: the context's namespace, or `default`).
    pub namespace: Option<String>,
    /// The Deployment serving the model.
    pub deployment: String,
    /// A label selector of the pods instead of the Deployment's selector.
    pub selector: Option<String>,
    /// The Service whose EndpointSlices are watched (default: the deployment's name).
    pub service: Option<String>,
}

impl Default for ClusterConfig {
    /// The current context's namespace and the `ollama` Deployment.
    fn default() -> Self {
        Self {
            kubeconfig: None,
            context: None,
            namespace: None,
            deployment: "ollama".into(),
            selector: None,
            service: None,
        }
    }
}

/// A connected cluster and resolved target.
#[derive(Clone)]
pub struct Target {
    pub client: Client,
    /// A client without kube's retry-on-503 layer, for the runtime through the pod proxy:
    /// a probe answered 503 (runtime not up yet) must fail at once, not be retried.
    pub runtime_client: Client,
    pub context: String,
    pub namespace: String,
    /// The Deployment, unless a selector was given.
    pub deployment: Option<String>,
    pub selector: String,
    pub service: String,
    pub api_url: String,
}

impl Target {
    /// A short label for headers (`deployment/ollama` or `selector app=x`).
    pub fn label(&self) -> String {
        match &self.deployment {
            Some(d) => format!("deployment/{d}"),
            None => format!("pods {}", self.selector),
        }
    }
}

/// What readygap's requests to the API server carry as `User-Agent` (as kubectl's carry
/// `kubectl/v1.34.1 …`): an administrator reading the audit log tells them apart.
pub const USER_AGENT: &str = concat!("readygap/", env!("CARGO_PKG_VERSION"));

/// Build the client configuration. KUBECONFIG lists, the proxy and exec credential
/// plugins are handled as kubectl handles them (see [`crate::kubeconfig`]).
pub async fn config(args: &ClusterConfig) -> Result<(Config, String)> {
    let opts = KubeConfigOptions {
        context: args.context.clone(),
        ..KubeConfigOptions::default()
    };
    let log = std::env::var_os("READYGAP_LOG").map(PathBuf::from);
    let (kc, from) = match &args.kubeconfig {
        Some(path) => (
            Some(crate::kubeconfig::read_list(path)?),
            path.display().to_string(),
        ),
        None => (Kubeconfig::read().ok(), "~/.kube/config".to_owned()),
    };
    let (mut cfg, context, kubeconfig_proxy) = match kc {
        Some(mut kc) => {
            crate::kubeconfig::quiet_exec_plugins(&mut kc, log.as_deref());
            let ctx = args
                .context
                .clone()
                .or_else(|| kc.current_context.clone())
                .unwrap_or_default();
            let proxy = crate::kubeconfig::cluster_proxy_url(&kc, args.context.as_deref());
            let cfg = Config::from_custom_kubeconfig(kc, &opts)
                .await
                .wrap_err_with(|| format!("loading kubeconfig {from}"))?;
            (cfg, ctx, proxy)
        }
        None => match Config::incluster() {
            Ok(cfg) => (cfg, "in-cluster".into(), None),
            Err(ic_err) => {
                let kc_err = Config::from_kubeconfig(&opts)
                    .await
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_else(|| "not found".into());
                return Err(eyre!(
                    "no cluster configuration: kubeconfig: {kc_err}; in-cluster: {ic_err}"
                ));
            }
        },
    };
    cfg.proxy_url =
        crate::kubeconfig::proxy_for(&cfg.cluster_url, kubeconfig_proxy.as_deref(), |k| {
            std::env::var(k).ok()
        })?;
    cfg.connect_timeout = Some(CONNECT_TIMEOUT);
    // kube-rs sends no User-Agent of its own: an audit log (and the lab's request tally)
    // would show readygap's requests as anonymous ones beside kubectl's and the components'.
    cfg.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(USER_AGENT),
    ));
    if let Some(ns) = &args.namespace {
        cfg.default_namespace = ns.clone();
    }
    Ok((cfg, context))
}

/// The two clients of a session — kube's default one, and one without its retry-on-503
/// layer for the runtime through the pod proxy (see `Target::runtime_client`) — once the API
/// server has answered (bounded by the connect timeout and a second).
pub async fn clients(cfg: Config) -> Result<(Client, Client)> {
    let api_url = cfg.cluster_url.to_string();
    let mut no_retry = cfg.clone();
    no_retry.default_retry = false;
    let client = Client::try_from(cfg).wrap_err("building the Kubernetes client")?;
    let runtime_client = Client::try_from(no_retry).wrap_err("building the Kubernetes client")?;
    let limit = CONNECT_TIMEOUT + Duration::from_secs(1);
    match tokio::time::timeout(limit, client.apiserver_version()).await {
        Ok(Ok(_)) => Ok((client, runtime_client)),
        Ok(Err(e)) => Err(eyre!(
            "the Kubernetes API server at {api_url} is unreachable: {}",
            crate::sources::runtime::error_chain(&e)
        )),
        Err(_) => Err(eyre!(
            "the Kubernetes API server at {api_url} did not answer within {limit:?}"
        )),
    }
}

/// Connect, check the API server answers (bounded), and resolve the target.
pub async fn connect(args: &ClusterConfig) -> Result<Target> {
    let (cfg, context) = config(args).await?;
    let api_url = cfg.cluster_url.to_string();
    let namespace = cfg.default_namespace.clone();
    let (client, runtime_client) = clients(cfg).await?;
    let (deployment, selector) = match &args.selector {
        Some(sel) => (None, sel.clone()),
        None => {
            let api: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
            let req = crate::rbac::Request::new("get", "apps", "deployments", Some(&namespace));
            let d = api.get(&args.deployment).await.map_err(|e| {
                let why =
                    crate::rbac::explain_kube_error(&e, &req).unwrap_or_else(|| e.to_string());
                eyre!("deployment {}/{}: {why}", namespace, args.deployment)
            })?;
            (Some(args.deployment.clone()), selector_of(&d)?)
        }
    };
    let service = args
        .service
        .clone()
        .or_else(|| deployment.clone())
        .unwrap_or_else(|| "ollama".into());
    Ok(Target {
        client,
        runtime_client,
        context,
        namespace,
        deployment,
        selector,
        service,
        api_url,
    })
}

/// The label selector (`k=v,k2=v2`) of a Deployment's `spec.selector.matchLabels`.
pub fn selector_of(d: &Deployment) -> Result<String> {
    let labels = d
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.as_ref())
        .filter(|l| !l.is_empty())
        .ok_or_else(|| {
            eyre!(
                "deployment {} has no matchLabels selector; pass --selector",
                d.metadata.name.as_deref().unwrap_or("?")
            )
        })?;
    Ok(selector_string(labels))
}

/// A label selector string (`k=v,k2=v2`) of `matchLabels`.
pub fn selector_string(labels: &std::collections::BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}
