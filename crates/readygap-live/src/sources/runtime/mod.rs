//! The LLM runtime of a pod: how readygap reaches it ([`RuntimeAccess`]: the API server's pod
//! proxy, a kube port-forward, or a direct URL), the [`RuntimeAdapter`] trait every runtime
//! implements (probe, residency, models on disk, streamed generate, unload), and the polling
//! feeds (residency every 250 ms, models on disk every few seconds).
//!
//! Ollama is the first adapter ([`ollama`]).

pub mod ollama;

use chrono::Utc;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use http_body_util::BodyExt;
use hyper::body::Bytes;
use k8s_openapi::api::core::v1::Pod;
use readygap_core::event::{
    DiskModel, Event, EventKind, InferenceResult, ResidentModel, RuntimeProbe, Source,
};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How readygap reaches a pod's runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AccessMode {
    /// The API server's pod proxy (`/api/v1/namespaces/NS/pods/NAME:PORT/proxy/…`).
    #[default]
    Proxy,
    /// A port-forward to the pod through the API server.
    PortForward,
    /// Straight to a URL built from a template (`http://{pod_ip}:11434`).
    Direct,
}

impl AccessMode {
    /// The names on the command line.
    pub const NAMES: [(&'static str, AccessMode); 3] = [
        ("proxy", AccessMode::Proxy),
        ("port-forward", AccessMode::PortForward),
        ("direct", AccessMode::Direct),
    ];
}

/// A pod whose runtime is addressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub name: String,
    pub ip: Option<String>,
}

/// A response whose body arrives as a stream.
pub struct HttpResponse {
    pub status: u16,
    pub body: BoxStream<'static, Result<Bytes, String>>,
}

impl HttpResponse {
    /// The whole body.
    pub async fn bytes(mut self) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        while let Some(chunk) = self.body.next().await {
            out.extend_from_slice(&chunk?);
        }
        Ok(out)
    }
}

/// Reaching runtimes, in one of the three modes.
#[derive(Clone)]
pub struct RuntimeAccess {
    pub mode: AccessMode,
    pub client: kube::Client,
    pub namespace: String,
    pub port: u16,
    /// For `direct`: `{pod_ip}`, `{pod}`, `{namespace}` and `{port}` are replaced.
    pub direct_template: String,
    http: reqwest::Client,
}

impl RuntimeAccess {
    pub fn new(
        mode: AccessMode,
        client: kube::Client,
        namespace: &str,
        port: u16,
        direct_template: &str,
    ) -> Self {
        let http = reqwest::Client::builder()
            .no_proxy()
            .connect_timeout(Duration::from_secs(3))
            .build()
            .unwrap_or_default();
        Self {
            mode,
            client,
            namespace: namespace.to_string(),
            port,
            direct_template: direct_template.to_string(),
            http,
        }
    }

    /// The base URL of a pod in `direct` mode.
    pub fn direct_base(&self, pod: &PodRef) -> Result<String, String> {
        let ip = pod.ip.as_deref();
        if self.direct_template.contains("{pod_ip}") && ip.is_none() {
            return Err(format!("pod {} has no IP yet", pod.name));
        }
        Ok(self
            .direct_template
            .replace("{pod_ip}", ip.unwrap_or(""))
            .replace("{pod}", &pod.name)
            .replace("{namespace}", &self.namespace)
            .replace("{port}", &self.port.to_string())
            .trim_end_matches('/')
            .to_string())
    }

    /// Send one request to the pod's runtime. `path` starts with `/`.
    pub async fn send(
        &self,
        pod: &PodRef,
        method: http::Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<HttpResponse, String> {
        match self.mode {
            AccessMode::Direct => {
                let url = format!("{}{path}", self.direct_base(pod)?);
                let mut req = self.http.request(method, &url);
                if let Some(b) = body {
                    req = req.header("content-type", "application/json").body(b);
                }
                let resp = req
                    .send()
                    .await
                    .map_err(|e| format!("{url}: {}", error_chain(&e)))?;
                let status = resp.status().as_u16();
                let body = resp.bytes_stream().map_err(|e| error_chain(&e)).boxed();
                Ok(HttpResponse { status, body })
            }
            AccessMode::Proxy => {
                let uri = format!(
                    "/api/v1/namespaces/{}/pods/{}:{}/proxy{path}",
                    self.namespace, pod.name, self.port
                );
                let req = http::Request::builder()
                    .method(method)
                    .uri(&uri)
                    .header("content-type", "application/json")
                    .body(kube::client::Body::from(body.unwrap_or_default()))
                    .map_err(|e| e.to_string())?;
                let resp = self
                    .client
                    .send(req)
                    .await
                    .map_err(|e| format!("pod proxy {}: {e}", pod.name))?;
                let status = resp.status().as_u16();
                let body = resp
                    .into_body()
                    .into_data_stream()
                    .map_err(|e| e.to_string())
                    .boxed();
                Ok(HttpResponse { status, body })
            }
            AccessMode::PortForward => {
                let api: kube::Api<Pod> =
                    kube::Api::namespaced(self.client.clone(), &self.namespace);
                let mut pf = api
                    .portforward(&pod.name, &[self.port])
                    .await
                    .map_err(|e| format!("port-forward to {}: {e}", pod.name))?;
                let stream = pf
                    .take_stream(self.port)
                    .ok_or_else(|| format!("port-forward to {}: no stream", pod.name))?;
                // The API server reports a refused connection on the error channel and
                // keeps the WebSocket open: watch it, or the request would hang.
                let pf_error = pf.take_error(self.port);
                let port = self.port;
                let name = pod.name.clone();
                let exchange = async move {
                    let (mut sender, conn) =
                        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                            .await
                            .map_err(|e| format!("port-forward to {name}: {e}"))?;
                    tokio::spawn(async move {
                        let _ = conn.await;
                        pf.abort();
                    });
                    let req = http::Request::builder()
                        .method(method)
                        .uri(path)
                        .header("host", format!("localhost:{port}"))
                        .header("content-type", "application/json")
                        .body(http_body_util::Full::new(Bytes::from(
                            body.unwrap_or_default(),
                        )))
                        .map_err(|e| e.to_string())?;
                    sender
                        .send_request(req)
                        .await
                        .map_err(|e| format!("port-forward to {name}: {e}"))
                };
                let resp = match pf_error {
                    Some(err) => tokio::select! {
                        r = exchange => r?,
                        Some(e) = err => return Err(format!("port-forward to {}: {e}", pod.name)),
                    },
                    None => exchange.await?,
                };
                let status = resp.status().as_u16();
                let body = resp
                    .into_body()
                    .into_data_stream()
                    .map_err(|e| e.to_string())
                    .boxed();
                Ok(HttpResponse { status, body })
            }
        }
    }
}

/// An error with its causes (reqwest hides the interesting part in `source`).
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// What a runtime adapter can do with a pod's runtime.
pub trait RuntimeAdapter: Send + Sync {
    /// One probe (`GET` of the probe path); never fails, the error is in the result.
    fn probe<'a>(&'a self, pod: &'a PodRef) -> BoxFuture<'a, RuntimeProbe>;
    /// The models resident in memory.
    fn residency<'a>(
        &'a self,
        pod: &'a PodRef,
    ) -> BoxFuture<'a, Result<Vec<ResidentModel>, String>>;
    /// The models on disk.
    fn models_on_disk<'a>(
        &'a self,
        pod: &'a PodRef,
    ) -> BoxFuture<'a, Result<Vec<DiskModel>, String>>;
    /// Run one generation, streamed; `first_token` is called when the first token arrives.
    /// `request_id` is copied into the result.
    fn generate<'a>(
        &'a self,
        pod: &'a PodRef,
        model: &'a str,
        prompt: &'a str,
        request_id: u64,
        first_token: Box<dyn FnOnce() + Send + 'a>,
    ) -> BoxFuture<'a, InferenceResult>;
    /// Unload a model from memory.
    fn unload<'a>(&'a self, pod: &'a PodRef, model: &'a str) -> BoxFuture<'a, Result<(), String>>;
}

/// Polling intervals of the runtime feeds.
#[derive(Debug, Clone, Copy)]
pub struct PollConfig {
    pub residency: Duration,
    pub tags: Duration,
    pub probe: Option<Duration>,
}

impl Default for PollConfig {
    fn default() -> Self {
        Self {
            residency: Duration::from_millis(250),
            tags: Duration::from_secs(5),
            probe: None,
        }
    }
}

async fn emit(tx: &mpsc::Sender<Event>, kind: EventKind) -> bool {
    tx.send(Event::new(Utc::now(), Source::Runtime, kind))
        .await
        .is_ok()
}

/// Poll one pod's runtime (residency, models on disk, optionally probes) until cancelled.
/// Residency and models are only emitted when they change (or after an error).
pub async fn poll_pod(
    adapter: std::sync::Arc<dyn RuntimeAdapter>,
    pod: PodRef,
    cfg: PollConfig,
    tx: mpsc::Sender<Event>,
    cancel: CancellationToken,
) {
    let mut res_tick = tokio::time::interval(cfg.residency);
    res_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut tag_tick = tokio::time::interval(cfg.tags);
    tag_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut probe_tick = tokio::time::interval(cfg.probe.unwrap_or(Duration::from_secs(3600)));
    probe_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_res: Option<Vec<ResidentModel>> = None;
    let mut last_tags: Option<Vec<DiskModel>> = None;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = res_tick.tick() => {
                if let Ok(Ok(models)) = tokio::time::timeout(Duration::from_secs(5), adapter.residency(&pod)).await
                    && last_res.as_ref() != Some(&models)
                {
                    last_res = Some(models.clone());
                    if !emit(&tx, EventKind::Residency { pod: pod.name.clone(), models }).await { return; }
                }
            }
            _ = tag_tick.tick() => {
                if let Ok(Ok(models)) = tokio::time::timeout(Duration::from_secs(5), adapter.models_on_disk(&pod)).await
                    && last_tags.as_ref() != Some(&models)
                {
                    last_tags = Some(models.clone());
                    if !emit(&tx, EventKind::ModelsOnDisk { pod: pod.name.clone(), models }).await { return; }
                }
            }
            _ = probe_tick.tick(), if cfg.probe.is_some() => {
                let p = adapter.probe(&pod).await;
                if !emit(&tx, EventKind::RuntimeProbe(p)).await { return; }
            }
        }
    }
}

/// Time a future, for probe latency.
pub(crate) async fn timed<T>(f: impl std::future::Future<Output = T>) -> (T, f64) {
    let start = Instant::now();
    let out = f.await;
    (out, start.elapsed().as_secs_f64() * 1000.0)
}
