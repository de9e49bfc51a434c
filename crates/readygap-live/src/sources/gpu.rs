//! GPU memory of a pod that asks for a GPU, from the best source there is
//! (`readygap_core::gpu` names them in order and why):
//! - the DCGM exporter (`--dcgm`: a URL, or `NAMESPACE/SERVICE:PORT` read through the API
//!   server's service proxy, a GET), once it labels a series with the pod: the node's own
//!   counters, no exec in the container;
//! - until then, or without it, one long-lived exec in the serving container that runs
//!   `nvidia-smi`'s memory query every interval (the NVIDIA container runtime mounts
//!   `nvidia-smi` into a GPU container), each answer a block ended by the memory stream's
//!   marker;
//! - neither: the runtime's own figure (Ollama's `size_vram`, from the residency poll) is
//!   shown by the Memory panel, said as such.
//!
//! Each sample says its source and why the preferred ones are not used; what cannot be read
//! is said as a state (`gpu_unavailable` with the reasons), never as a zero: no
//! `nvidia-smi` in the image, exec forbidden, a driver that does not answer, an exporter
//! that is down or labels no pod.

use super::memory::{BlockSplitter, MARKER};
use chrono::Utc;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams};
use readygap_core::event::{Event, EventKind, Source};
use readygap_core::gpu::{GpuMemory, NVIDIA_SMI_QUERY, parse_dcgm, parse_nvidia_smi};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Where the figures come from, as the screen says it.
pub const SOURCE: &str = "nvidia-smi in the container";

/// Whose GPU memory to read, how often, and where the DCGM exporter is.
#[derive(Debug, Clone)]
pub struct GpuConfig {
    pub namespace: String,
    pub pod: String,
    pub container: Option<String>,
    pub interval: Duration,
    pub dcgm: Option<Dcgm>,
}

/// Where the DCGM exporter's `/metrics` are read (`--dcgm`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dcgm {
    /// A URL readygap reaches itself (`http://localhost:9400/metrics` behind a port-forward).
    Url(String),
    /// A Service, read through the API server's proxy
    /// (`/api/v1/namespaces/NS/services/NAME:PORT/proxy/metrics`: RBAC `get services/proxy`).
    Service {
        namespace: String,
        name: String,
        port: u16,
    },
}

impl std::str::FromStr for Dcgm {
    type Err = String;

    /// `http(s)://…` or `NAMESPACE/SERVICE:PORT` (the GPU Operator's is
    /// `gpu-operator/nvidia-dcgm-exporter:9400`).
    fn from_str(s: &str) -> Result<Self, String> {
        if s.starts_with("http://") || s.starts_with("https://") {
            return Ok(Dcgm::Url(s.to_string()));
        }
        let bad =
            || format!("--dcgm {s:?}: a URL (http://HOST:PORT/metrics) or NAMESPACE/SERVICE:PORT");
        let (namespace, rest) = s.split_once('/').ok_or_else(bad)?;
        let (name, port) = rest.split_once(':').ok_or_else(bad)?;
        let port = port.parse().map_err(|_| bad())?;
        if namespace.is_empty() || name.is_empty() {
            return Err(bad());
        }
        Ok(Dcgm::Service {
            namespace: namespace.into(),
            name: name.into(),
            port,
        })
    }
}

impl std::fmt::Display for Dcgm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dcgm::Url(u) => write!(f, "{u}"),
            Dcgm::Service {
                namespace,
                name,
                port,
            } => write!(f, "{namespace}/{name}:{port}"),
        }
    }
}

/// The loop the exec runs: the query (its errors too), the marker, a pause.
pub fn script(interval: Duration) -> String {
    format!(
        "while :; do {} 2>&1; echo {MARKER}; sleep {}; done",
        NVIDIA_SMI_QUERY.join(" "),
        interval.as_secs_f64()
    )
}

/// How long one scrape of the exporter may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

/// One GET of the exporter's `/metrics`.
async fn scrape(client: &kube::Client, http: &reqwest::Client, d: &Dcgm) -> Result<String, String> {
    match d {
        Dcgm::Url(u) => {
            let r = http
                .get(u)
                .timeout(SCRAPE_TIMEOUT)
                .send()
                .await
                .map_err(|e| e.to_string())?;
            let status = r.status();
            let text = r.text().await.map_err(|e| e.to_string())?;
            if !status.is_success() {
                return Err(format!(
                    "{status}: {}",
                    text.chars().take(200).collect::<String>()
                ));
            }
            Ok(text)
        }
        Dcgm::Service {
            namespace,
            name,
            port,
        } => {
            let path =
                format!("/api/v1/namespaces/{namespace}/services/{name}:{port}/proxy/metrics");
            let req = http::Request::get(&path)
                .body(Vec::new())
                .map_err(|e| e.to_string())?;
            match tokio::time::timeout(SCRAPE_TIMEOUT, client.request_text(req)).await {
                Err(_) => Err(format!("no answer within {} s", SCRAPE_TIMEOUT.as_secs())),
                Ok(Ok(t)) => Ok(t),
                Ok(Err(e)) => {
                    let request = crate::rbac::Request {
                        verb: "get",
                        group: "",
                        resource: "services/proxy",
                        namespace: Some(namespace),
                    };
                    Err(crate::rbac::explain_kube_error(&e, &request)
                        .unwrap_or_else(|| e.to_string()))
                }
            }
        }
    }
}

/// The pod's GPUs from one scrape: some, or why none.
async fn from_dcgm(
    client: &kube::Client,
    http: &reqwest::Client,
    d: &Dcgm,
    cfg: &GpuConfig,
) -> Result<Vec<GpuMemory>, String> {
    let text = scrape(client, http, d)
        .await
        .map_err(|e| format!("DCGM exporter {d}: {e}"))?;
    let s = parse_dcgm(&text, &cfg.namespace, &cfg.pod)
        .map_err(|e| format!("DCGM exporter {d}: {e}"))?;
    if s.gpus.is_empty() {
        return Err(if s.pods == 0 {
            format!("DCGM exporter {d}: labels no pod (its Kubernetes pod mapping is off)")
        } else {
            format!(
                "DCGM exporter {d}: no series of {} yet (it maps pods each collect interval)",
                cfg.pod
            )
        });
    }
    Ok(s.gpus)
}

/// Read the pod's GPU memory until cancelled: from the DCGM exporter once it has the pod,
/// from `nvidia-smi` until then (or without it), each sample with its source and why the
/// preferred one is not used.
pub async fn run(
    client: kube::Client,
    cfg: GpuConfig,
    tx: mpsc::Sender<Event>,
    cancel: CancellationToken,
) {
    let send = |kind: EventKind| {
        let tx = tx.clone();
        async move {
            tx.send(Event::new(Utc::now(), Source::Memory, kind))
                .await
                .is_ok()
        }
    };
    let pod = cfg.pod.clone();
    let (smi_tx, mut smi_rx) = mpsc::channel(4);
    let smi_cancel = cancel.child_token();
    tokio::spawn(nvidia_smi(
        client.clone(),
        cfg.clone(),
        smi_tx,
        smi_cancel.clone(),
    ));
    let http = reqwest::Client::new();
    // Why DCGM is not the source now (None: it is).
    let mut dcgm_why = match &cfg.dcgm {
        None => Some("DCGM exporter: not configured (--dcgm)".to_string()),
        Some(d) => Some(format!("DCGM exporter {d}: not read yet")),
    };
    let mut smi_why: Option<String> = None;
    let mut smi_open = true;
    let mut tick = tokio::time::interval(cfg.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tick.tick(), if cfg.dcgm.is_some() => {
                let d = cfg.dcgm.as_ref().expect("checked");
                match from_dcgm(&client, &http, d, &cfg).await {
                    Ok(gpus) => {
                        // DCGM has the pod: the exec in its container is not needed.
                        smi_cancel.cancel();
                        dcgm_why = None;
                        let kind = EventKind::GpuSample {
                            pod: pod.clone(),
                            source: format!("DCGM exporter {d}"),
                            gpus,
                            passed_over: Vec::new(),
                        };
                        if !send(kind).await {
                            return;
                        }
                    }
                    Err(why) if dcgm_why.as_deref() != Some(why.as_str()) => {
                        // Was the source, or nothing else reads: say it.
                        let say = dcgm_why.is_none() || (!smi_open || smi_why.is_some());
                        dcgm_why = Some(why.clone());
                        if say {
                            let why = [Some(why), smi_why.clone()].into_iter().flatten().collect::<Vec<_>>().join("; ");
                            if !send(EventKind::GpuUnavailable { pod: pod.clone(), why }).await {
                                return;
                            }
                        }
                    }
                    Err(_) => {}
                }
            }
            r = smi_rx.recv(), if smi_open => match r {
                Some(Ok(gpus)) => {
                    smi_why = None;
                    let Some(why) = dcgm_why.clone() else { continue };
                    let kind = EventKind::GpuSample {
                        pod: pod.clone(),
                        source: SOURCE.into(),
                        gpus,
                        passed_over: vec![why],
                    };
                    if !send(kind).await {
                        return;
                    }
                }
                Some(Err(why)) => {
                    smi_why = Some(why.clone());
                    if let Some(d) = dcgm_why.clone() {
                        let why = format!("{why}; {d}");
                        if !send(EventKind::GpuUnavailable { pod: pod.clone(), why }).await {
                            return;
                        }
                    }
                }
                None => {
                    smi_open = false;
                    if cfg.dcgm.is_none() {
                        return;
                    }
                }
            },
        }
    }
}

/// `nvidia-smi` in the container until cancelled or it cannot be read: each answer's GPUs,
/// or why not (`Err`; the reader ends after one that never gets better).
async fn nvidia_smi(
    client: kube::Client,
    cfg: GpuConfig,
    out: mpsc::Sender<Result<Vec<GpuMemory>, String>>,
    cancel: CancellationToken,
) {
    let unavailable = |why: String| Err::<Vec<GpuMemory>, String>(why);
    let send = |r: Result<Vec<GpuMemory>, String>| {
        let out = out.clone();
        async move { out.send(r).await.is_ok() }
    };
    let api: Api<Pod> = Api::namespaced(client, &cfg.namespace);
    let mut ap = AttachParams::default()
        .stdout(true)
        .stderr(false)
        .stdin(false);
    if let Some(c) = &cfg.container {
        ap = ap.container(c.clone());
    }
    let script = script(cfg.interval);
    let exec = tokio::select! {
        _ = cancel.cancelled() => return,
        e = api.exec(&cfg.pod, ["sh", "-c", script.as_str()], &ap) => e,
    };
    let mut proc_ = match exec {
        Ok(p) => p,
        Err(e) => {
            let why = if super::memory::is_forbidden(&e) {
                let request = crate::rbac::Request {
                    verb: "create",
                    group: "",
                    resource: "pods/exec",
                    namespace: Some(&cfg.namespace),
                };
                crate::rbac::explain_kube_error(&e, &request).unwrap_or_else(|| e.to_string())
            } else {
                format!("exec in {}: {e}", cfg.pod)
            };
            send(unavailable(format!("GPU memory not read: {why}"))).await;
            return;
        }
    };
    let Some(mut stdout) = proc_.stdout() else {
        return;
    };
    let mut splitter = BlockSplitter::default();
    let mut buf = vec![0u8; 8 * 1024];
    let mut last_error: Option<String> = None;
    loop {
        let n = tokio::select! {
            _ = cancel.cancelled() => { proc_.abort(); return; }
            n = stdout.read(&mut buf) => n.unwrap_or(0),
        };
        if n == 0 {
            send(unavailable(format!(
                "the nvidia-smi exec in {} ended",
                cfg.pod
            )))
            .await;
            return;
        }
        for block in splitter.push(&buf[..n]) {
            let kind = match parse_nvidia_smi(&block) {
                Ok(gpus) => {
                    last_error = None;
                    Ok(gpus)
                }
                // No nvidia-smi in the image: that never gets better.
                Err(_) if block.contains("not found") => {
                    let why = "nvidia-smi not found in the container (not mounted: no NVIDIA \
                               container runtime, or not a GPU container)";
                    send(unavailable(why.into())).await;
                    proc_.abort();
                    return;
                }
                Err(e) if last_error.as_deref() == Some(e.as_str()) => continue,
                Err(e) => {
                    last_error = Some(e.clone());
                    unavailable(e)
                }
            };
            if !send(kind).await {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dcgm_is_a_url_or_a_service_and_anything_else_says_both_forms() {
        assert_eq!(
            "http://127.0.0.1:9400/metrics".parse::<Dcgm>(),
            Ok(Dcgm::Url("http://127.0.0.1:9400/metrics".into()))
        );
        let s: Dcgm = "gpu-operator/nvidia-dcgm-exporter:9400".parse().unwrap();
        assert_eq!(
            s,
            Dcgm::Service {
                namespace: "gpu-operator".into(),
                name: "nvidia-dcgm-exporter".into(),
                port: 9400
            }
        );
        assert_eq!(s.to_string(), "gpu-operator/nvidia-dcgm-exporter:9400");
        for bad in [
            "nvidia-dcgm-exporter:9400",
            "gpu-operator/x",
            "a/b:port",
            "/b:1",
        ] {
            let e = bad.parse::<Dcgm>().unwrap_err();
            assert!(
                e.contains("NAMESPACE/SERVICE:PORT") && e.contains(bad),
                "{e}"
            );
        }
    }

    /// A DCGM exporter on loopback serving `body` with `status` at `/metrics`.
    async fn exporter(status: u16, body: &'static str) -> String {
        let app = axum::Router::new().route(
            "/metrics",
            axum::routing::get(move || async move {
                (axum::http::StatusCode::from_u16(status).unwrap(), body)
            }),
        );
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(l, app).await });
        format!("http://{addr}/metrics")
    }

    fn cfg() -> GpuConfig {
        GpuConfig {
            namespace: "llm".into(),
            pod: "vllm-a".into(),
            container: None,
            interval: Duration::from_secs(1),
            dcgm: None,
        }
    }

    /// The exporter read over HTTP (a GET): the pod's GPUs; an exporter that labels other
    /// pods, none, or answers an error: the reason, naming the exporter.
    #[tokio::test]
    async fn the_exporter_gives_the_pods_gpus_or_says_why_not() {
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap()))
                .unwrap();
        let http = reqwest::Client::new();
        const ONE: &str = "DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-a\",namespace=\"llm\",pod=\"vllm-a\"} 1024\n\
                           DCGM_FI_DEV_FB_FREE{gpu=\"0\",UUID=\"GPU-a\",namespace=\"llm\",pod=\"vllm-a\"} 3072\n";
        let d = Dcgm::Url(exporter(200, ONE).await);
        let gpus = from_dcgm(&client, &http, &d, &cfg()).await.unwrap();
        assert_eq!((gpus[0].used, gpus[0].total), (1 << 30, 4 << 30));
        let mut other = cfg();
        other.pod = "vllm-b".into();
        let e = from_dcgm(&client, &http, &d, &other).await.unwrap_err();
        assert!(e.contains("no series of vllm-b yet"), "{e}");
        let d = Dcgm::Url(
            exporter(
                200,
                "DCGM_FI_DEV_FB_USED{gpu=\"0\"} 5\nDCGM_FI_DEV_FB_FREE{gpu=\"0\"} 5\n",
            )
            .await,
        );
        let e = from_dcgm(&client, &http, &d, &cfg()).await.unwrap_err();
        assert!(e.contains("labels no pod"), "{e}");
        let d = Dcgm::Url(exporter(503, "down").await);
        let e = from_dcgm(&client, &http, &d, &cfg()).await.unwrap_err();
        assert!(e.contains("503") && e.contains(&d.to_string()), "{e}");
    }
}
