//! The LLM runtime of a pod: how readygap reaches it ([`RuntimeAccess`]: the API server's pod
//! proxy, a kube port-forward, or a direct URL), the [`RuntimeAdapter`] trait every runtime
//! implements (probe, residency, models on disk, streamed generate, unload), and the polling
//! feeds (residency every 250 ms, models on disk every few seconds).
//!
//! The adapters: [`ollama`], [`llamacpp`] (llama.cpp's `llama-server`, single-model and
//! router mode) and [`openai`] (any OpenAI-compatible server, e.g. vLLM); [`stream`] reads
//! a streamed answer for all of them (Ollama's NDJSON, or the server-sent events of the last
//! two, [`sse`]); [`RuntimeKind`] names them (`--runtime`) and guesses one from the
//! container image or the runtime's answers.

pub mod arrival;
pub mod choice;
pub mod llamacpp;
pub mod metrics;
pub mod ollama;
pub mod openai;
pub mod sse;
pub mod stream;

use chrono::Utc;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use http_body_util::BodyExt;
use hyper::body::Bytes;
use k8s_openapi::api::core::v1::Pod;
use readygap_core::event::{
    DiskModel, Event, EventKind, InferenceResult, ResidentModel, RuntimeMetrics, RuntimeProbe,
    ServiceProbe, Source,
};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How long a direct connection to a runtime may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

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

/// A Service the runtime is reached through: its name and the port given to the API server's
/// service proxy (the Service's port number).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceRef {
    pub name: String,
    pub port: String,
}

/// How a probe through a Service travels, as [`ServiceProbe::route`] says it.
pub const SERVICE_ROUTE: &str = "api-server service proxy";

/// The Service `name` of `namespace` and its port that leads to the runtime's `runtime_port`:
/// the port whose `targetPort` is that number (or whose `port` is, when `targetPort` is
/// unset: it then defaults to `port`), else the Service's only port. One read-only GET.
pub async fn service_ref(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    runtime_port: u16,
) -> Result<ServiceRef, String> {
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let api: kube::Api<Service> = kube::Api::namespaced(client.clone(), namespace);
    let svc = api
        .get(name)
        .await
        .map_err(|e| format!("service {namespace}/{name}: {e}"))?;
    let ports = svc.spec.and_then(|s| s.ports).unwrap_or_default();
    let leads = |p: &k8s_openapi::api::core::v1::ServicePort| match &p.target_port {
        Some(IntOrString::Int(t)) => *t == i32::from(runtime_port),
        Some(IntOrString::String(_)) => false,
        None => p.port == i32::from(runtime_port),
    };
    let port = match ports.iter().find(|p| leads(p)) {
        Some(p) => p.port,
        None if ports.len() == 1 => ports[0].port,
        None => {
            return Err(format!(
                "service {namespace}/{name} has no port whose targetPort is the runtime's {runtime_port} \
                 (ports: {})",
                ports
                    .iter()
                    .map(|p| p.port.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    };
    Ok(ServiceRef {
        name: name.to_string(),
        port: port.to_string(),
    })
}

/// A response whose body arrives as a stream.
pub struct HttpResponse {
    pub status: u16,
    pub body: BoxStream<'static, Result<Bytes, String>>,
    /// The kernel's receive time of the body's bytes, when the connection keeps it.
    pub arrival: Option<arrival::Arrival>,
}

impl HttpResponse {
    /// A response of the `http` crate; the errors of its body are said with their causes.
    pub fn from_http<B>(resp: http::Response<B>, arrival: Option<arrival::Arrival>) -> Self
    where
        B: hyper::body::Body<Data = Bytes> + Send + 'static,
        B::Error: std::error::Error,
    {
        Self {
            status: resp.status().as_u16(),
            body: resp
                .into_body()
                .into_data_stream()
                .map_err(|e| error_chain(&e))
                .boxed(),
            arrival,
        }
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
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .unwrap_or_default();
        if mode == AccessMode::Direct {
            arrival::keep_stamping();
        }
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

    /// POST a request whose answer's end is timed (a generate): in `direct` mode to an
    /// `http://` URL over a new connection whose reads keep the kernel's receive time
    /// ([`arrival`]); otherwise as [`Self::send`].
    pub async fn post_timed(
        &self,
        pod: &PodRef,
        path: &str,
        body: Vec<u8>,
    ) -> Result<HttpResponse, String> {
        let direct = (self.mode == AccessMode::Direct)
            .then(|| reqwest::Url::parse(&format!("{}{path}", self.direct_base(pod).ok()?)).ok())
            .flatten()
            .filter(|u| u.scheme() == "http");
        match direct {
            Some(url) => arrival::send(&url, http::Method::POST, Some(body), CONNECT_TIMEOUT).await,
            None => self.send(pod, http::Method::POST, path, Some(body)).await,
        }
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
                Ok(HttpResponse::from_http(
                    http::Response::<reqwest::Body>::from(resp),
                    None,
                ))
            }
            AccessMode::Proxy => {
                let uri = format!(
                    "/api/v1/namespaces/{}/pods/{}:{}/proxy{path}",
                    self.namespace, pod.name, self.port
                );
                self.through_api_server(method, &uri, body, &format!("pod proxy {}", pod.name))
                    .await
            }
            AccessMode::PortForward => {
                let api: kube::Api<Pod> =
                    kube::Api::namespaced(self.client.clone(), &self.namespace);
                let fail = |e: &dyn std::fmt::Display| format!("port-forward to {}: {e}", pod.name);
                let mut pf = api
                    .portforward(&pod.name, &[self.port])
                    .await
                    .map_err(|e| fail(&e))?;
                let stream = pf
                    .take_stream(self.port)
                    .ok_or_else(|| fail(&"no stream"))?;
                // The API server reports a refused connection on the error channel and
                // keeps the WebSocket open: watch it, or the request would hang.
                let pf_error = pf.take_error(self.port);
                let port = self.port;
                let exchange = async move {
                    let (mut sender, conn) =
                        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                            .await
                            .map_err(|e| fail(&e))?;
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
                    sender.send_request(req).await.map_err(|e| fail(&e))
                };
                let resp = match pf_error {
                    Some(err) => tokio::select! {
                        r = exchange => r?,
                        Some(e) = err => return Err(fail(&e)),
                    },
                    None => exchange.await?,
                };
                Ok(HttpResponse::from_http(resp, None))
            }
        }
    }

    /// `GET path` through the API server's service proxy
    /// (`/api/v1/namespaces/NS/services/NAME:PORT/proxy/…`), whatever the access mode: the API
    /// server sends it to a ready address of the Service's Endpoints, picked at random
    /// (kubernetes `pkg/registry/core/service/storage/storage.go` `ResourceLocation`), and
    /// answers 503 "no endpoints available" when there is none. The status and whole body.
    pub async fn fetch_service(
        &self,
        service: &ServiceRef,
        path: &str,
    ) -> Result<(u16, Vec<u8>), String> {
        let uri = format!(
            "/api/v1/namespaces/{}/services/{}:{}/proxy{path}",
            self.namespace, service.name, service.port
        );
        let what = format!("service proxy {}", service.name);
        let r = self
            .through_api_server(http::Method::GET, &uri, None, &what)
            .await?;
        whole(r).await
    }

    /// One request to an API server proxy path (`…/pods/NAME:PORT/proxy/…`,
    /// `…/services/NAME:PORT/proxy/…`); a failure to send it is said with `what`.
    async fn through_api_server(
        &self,
        method: http::Method,
        uri: &str,
        body: Option<Vec<u8>>,
        what: &str,
    ) -> Result<HttpResponse, String> {
        let req = http::Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", "application/json")
            .body(kube::client::Body::from(body.unwrap_or_default()))
            .map_err(|e| e.to_string())?;
        let resp = self
            .client
            .send(req)
            .await
            .map_err(|e| format!("{what}: {e}"))?;
        Ok(HttpResponse::from_http(resp, None))
    }

    /// Send one request and read its whole answer: the status and the body.
    pub async fn fetch(
        &self,
        pod: &PodRef,
        method: http::Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<(u16, Vec<u8>), String> {
        whole(self.send(pod, method, path, body).await?).await
    }
}

/// A response's status and its whole body.
async fn whole(mut r: HttpResponse) -> Result<(u16, Vec<u8>), String> {
    let mut out = Vec::new();
    while let Some(chunk) = r.body.next().await {
        out.extend_from_slice(&chunk?);
    }
    Ok((r.status, out))
}

/// What every adapter is given: the access to its runtime, the path probed for T2, and the
/// bounds of a probe and of one generate request.
#[derive(Clone)]
pub struct Reach {
    pub access: RuntimeAccess,
    pub probe_path: String,
    pub probe_timeout: Duration,
    pub generate_timeout: Duration,
}

impl Reach {
    /// The runtime's default probe path, probes bounded by 2 s, generates by 10 min.
    pub fn new(access: RuntimeAccess, kind: RuntimeKind) -> Self {
        Self {
            access,
            probe_path: kind.default_probe_path().into(),
            probe_timeout: Duration::from_secs(2),
            generate_timeout: Duration::from_secs(600),
        }
    }

    /// One probe: `GET probe_path`, the whole body read (so the probe measures a complete
    /// answer); `ok` is HTTP 200, `http_answered` any answer of the runtime itself
    /// ([`answered_by_runtime`]).
    pub async fn probe(&self, pod: &PodRef) -> RuntimeProbe {
        let timeout = self.probe_timeout;
        let fut = self
            .access
            .fetch(pod, http::Method::GET, &self.probe_path, None);
        let start = Instant::now();
        let res = tokio::time::timeout(timeout, fut).await;
        let latency_ms = start.elapsed().as_secs_f64() * 1000.0;
        let (ok, status, error, http_answered) = match res {
            Ok(Ok((200, _))) => (true, Some(200), None, true),
            Ok(Ok((s, body))) => {
                let error = format!("HTTP {s}: {}", head(&body, 120));
                (false, Some(s), Some(error), answered_by_runtime(s, &body))
            }
            Ok(Err(e)) => (false, None, Some(e), false),
            Err(_) => {
                let error = format!("no answer within {timeout:?}");
                (false, None, Some(error), false)
            }
        };
        RuntimeProbe {
            pod: pod.name.clone(),
            ok,
            status,
            latency_ms,
            error,
            http_answered,
        }
    }
}

impl Reach {
    /// One probe through the Service: `GET probe_path` through the API server's service
    /// proxy ([`RuntimeAccess::fetch_service`]), bounded as a pod probe; `ok` is HTTP 200.
    pub async fn probe_service(&self, service: &ServiceRef) -> ServiceProbe {
        let timeout = self.probe_timeout;
        let start = Instant::now();
        let res = tokio::time::timeout(
            timeout,
            self.access.fetch_service(service, &self.probe_path),
        )
        .await;
        let latency_ms = start.elapsed().as_secs_f64() * 1000.0;
        let (ok, status, error) = match res {
            Ok(Ok((200, _))) => (true, Some(200), None),
            Ok(Ok((s, body))) => (
                false,
                Some(s),
                Some(format!("HTTP {s}: {}", head(&body, 120))),
            ),
            Ok(Err(e)) => (false, None, Some(e)),
            Err(_) => (false, None, Some(format!("no answer within {timeout:?}"))),
        };
        ServiceProbe {
            service: service.name.clone(),
            port: service.port.clone(),
            route: SERVICE_ROUTE.to_string(),
            ok,
            status,
            latency_ms,
            error,
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

/// The answer of an adapter's request, or why there is none.
pub type Answer<'a, T> = BoxFuture<'a, Result<T, String>>;

/// What a runtime adapter can do with a pod's runtime.
pub trait RuntimeAdapter: Send + Sync {
    /// One probe (`GET` of the probe path); never fails, the error is in the result.
    fn probe<'a>(&'a self, pod: &'a PodRef) -> BoxFuture<'a, RuntimeProbe>;
    /// One probe of the same path through a Service ([`Reach::probe_service`]); `None` where
    /// the adapter reaches no API server (a test double).
    fn probe_service<'a>(
        &'a self,
        _service: &'a ServiceRef,
    ) -> BoxFuture<'a, Option<ServiceProbe>> {
        Box::pin(async { None })
    }
    /// The models resident in memory.
    fn residency<'a>(&'a self, pod: &'a PodRef) -> Answer<'a, Vec<ResidentModel>>;
    /// The models on disk.
    fn models_on_disk<'a>(&'a self, pod: &'a PodRef) -> Answer<'a, Vec<DiskModel>>;
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
    fn unload<'a>(&'a self, pod: &'a PodRef, model: &'a str) -> Answer<'a, ()>;
    /// The runtime's own load figures from `/metrics`; `Ok(None)` when it exports none
    /// (Ollama has no `/metrics`; llama-server only with `--metrics`).
    fn metrics<'a>(&'a self, _pod: &'a PodRef) -> Answer<'a, Option<RuntimeMetrics>> {
        Box::pin(async { Ok(None) })
    }
}

/// Returns once the runtime no longer lists `model` as resident (polled every `poll`), or
/// its residency fails (then nothing more can be learnt). Callers bound it with a timeout.
///
/// For after an unload, because the reply to an unload comes before the unload: Ollama's
/// `GenerateHandler` answers `done_reason: "unload"` right after `sched.expireRunner`
/// (server/routes.go), which only queues the runner; the scheduler loop then stops the
/// runner process, waits for it to exit (llm/llama_server.go `stopProcess`) and only then
/// deletes it from `loaded`, which is what `/api/ps` lists (server/sched.go). Until then the
/// runner maps the model file, and mapped pages are what a page-cache drop cannot free
/// (mm/truncate.c `invalidate_mapping_pages`): a cold step that dropped the cache on the
/// reply left the model cached and measured a warm load.
pub async fn until_not_resident(
    runtime: &dyn RuntimeAdapter,
    pod: &PodRef,
    model: &str,
    poll: Duration,
) {
    while let Ok(models) = runtime.residency(pod).await {
        if !models
            .iter()
            .any(|m| readygap_core::residency::same_model(&m.name, model))
        {
            return;
        }
        tokio::time::sleep(poll).await;
    }
}

/// `GET /metrics` and its figures: `Ok(None)` when the route is absent or refused (404,
/// llama-server's 501 without `--metrics`, 503 while loading), bounded by 5 s and 1 MiB.
pub(crate) async fn get_metrics(
    access: &RuntimeAccess,
    pod: &PodRef,
) -> Result<Option<RuntimeMetrics>, String> {
    const LIMIT: usize = 1 << 20;
    let fut = async {
        let mut r = access
            .send(pod, http::Method::GET, "/metrics", None)
            .await?;
        if r.status != 200 {
            return Ok(None);
        }
        let mut body = Vec::new();
        while let Some(chunk) = r.body.next().await {
            body.extend_from_slice(&chunk?);
            if body.len() > LIMIT {
                return Err(format!("/metrics: more than {LIMIT} bytes"));
            }
        }
        Ok(metrics::parse(&String::from_utf8_lossy(&body)))
    };
    tokio::time::timeout(Duration::from_secs(5), fut)
        .await
        .map_err(|_| "/metrics: no answer within 5 s".to_string())?
}

/// Polling intervals of the runtime feeds (their defaults: `--residency-interval`'s and
/// `--tags-interval`'s, written here only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    let ticker = |period| {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick
    };
    let mut res_tick = ticker(cfg.residency);
    let mut tag_tick = ticker(cfg.tags);
    let mut probe_tick = ticker(cfg.probe.unwrap_or(Duration::from_secs(3600)));
    // The runtime's /metrics, read as often as the models on disk but at least every second.
    let mut metrics_tick = ticker(cfg.tags.min(Duration::from_secs(1)));
    let mut last_res: Option<Vec<ResidentModel>> = None;
    let mut last_tags: Option<Vec<DiskModel>> = None;
    let mut last_metrics: Option<RuntimeMetrics> = None;
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
            _ = metrics_tick.tick() => {
                if let Ok(Ok(Some(metrics))) = tokio::time::timeout(Duration::from_secs(6), adapter.metrics(&pod)).await
                    && last_metrics.as_ref() != Some(&metrics)
                {
                    last_metrics = Some(metrics.clone());
                    if !emit(&tx, EventKind::RuntimeMetrics { pod: pod.name.clone(), metrics }).await { return; }
                }
            }
            _ = probe_tick.tick(), if cfg.probe.is_some() => {
                let p = adapter.probe(&pod).await;
                if !emit(&tx, EventKind::RuntimeProbe(p)).await { return; }
            }
        }
    }
}

/// Which runtime serves the pods (`--runtime`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RuntimeKind {
    #[default]
    Ollama,
    /// llama.cpp's `llama-server`.
    Llamacpp,
    /// An OpenAI-compatible server (vLLM, or llama-server's `/v1` routes).
    Openai,
}

impl RuntimeKind {
    /// The names on the command line, in the enum's order ([`Self::name`] indexes it).
    pub const NAMES: [(&'static str, RuntimeKind); 3] = [
        ("ollama", RuntimeKind::Ollama),
        ("llamacpp", RuntimeKind::Llamacpp),
        ("openai", RuntimeKind::Openai),
    ];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize].0
    }

    /// The runtime's usual port in a pod: the one place each is written.
    pub const fn default_port(self) -> u16 {
        match self {
            RuntimeKind::Ollama => 11434,
            RuntimeKind::Llamacpp => 8080,
            RuntimeKind::Openai => 8000,
        }
    }

    /// The path probed for T2 by default: Ollama's `/api/tags` (as in the study); `/health`
    /// for the others (llama-server: 503 while loading, 200 once loaded; vLLM: 200 once up).
    pub fn default_probe_path(self) -> &'static str {
        match self {
            RuntimeKind::Ollama => "/api/tags",
            RuntimeKind::Llamacpp | RuntimeKind::Openai => "/health",
        }
    }

    /// A guess from a container image reference (`ollama/ollama:0.12.6`,
    /// `ghcr.io/ggml-org/llama.cpp:server`, `vllm/vllm-openai:v0.10`).
    pub fn from_image(image: &str) -> Option<RuntimeKind> {
        let name = image
            .rsplit('/')
            .next()
            .unwrap_or(image)
            .to_ascii_lowercase();
        let repo = image.to_ascii_lowercase();
        if name.starts_with("ollama") {
            Some(RuntimeKind::Ollama)
        } else if repo.contains("llama.cpp")
            || repo.contains("llama-cpp")
            || name.starts_with("llama-server")
        {
            Some(RuntimeKind::Llamacpp)
        } else if repo.contains("vllm") || repo.contains("openai") {
            Some(RuntimeKind::Openai)
        } else {
            None
        }
    }

    /// A guess from the runtime's answers: Ollama answers `/api/version`; llama-server
    /// answers `/props` (with its `default_generation_settings`); an OpenAI server answers
    /// `/v1/models`. `None`: nothing answered yet.
    pub async fn from_answers(access: &RuntimeAccess, pod: &PodRef) -> Option<RuntimeKind> {
        let get = |path: &'static str| async move {
            let fut = access.fetch(pod, http::Method::GET, path, None);
            tokio::time::timeout(Duration::from_secs(3), fut)
                .await
                .ok()?
                .ok()
        };
        if let Some((200, b)) = get("/api/version").await
            && serde_json::from_slice::<serde_json::Value>(&b)
                .is_ok_and(|v| v["version"].is_string())
        {
            return Some(RuntimeKind::Ollama);
        }
        match get("/props").await {
            Some((200, b))
                if serde_json::from_slice::<serde_json::Value>(&b).is_ok_and(|v| {
                    v.get("default_generation_settings").is_some() || v.get("role").is_some()
                }) =>
            {
                return Some(RuntimeKind::Llamacpp);
            }
            // llama-server answers every route with this 503 while it loads.
            Some((503, b)) if llamacpp::is_loading_body(&b) => return Some(RuntimeKind::Llamacpp),
            _ => {}
        }
        match get("/v1/models").await {
            Some((200, _)) => Some(RuntimeKind::Openai),
            _ => None,
        }
    }
}

/// Whether an HTTP answer came from the runtime itself, not from the API server's pod proxy
/// (whose errors, such as 503 "error trying to reach service", are a `kind: Status` object).
pub fn answered_by_runtime(status: u16, body: &[u8]) -> bool {
    status == 200
        || !serde_json::from_slice::<serde_json::Value>(body)
            .is_ok_and(|v| v["kind"] == "Status" && v["apiVersion"] == "v1")
}

/// `GET path` as JSON (HTTP 200 only), bounded by 5 s.
pub(crate) async fn get_json(
    access: &RuntimeAccess,
    pod: &PodRef,
    path: &str,
) -> Result<serde_json::Value, String> {
    let fut = access.fetch(pod, http::Method::GET, path, None);
    let (status, body) = tokio::time::timeout(Duration::from_secs(5), fut)
        .await
        .map_err(|_| format!("{path}: no answer within 5 s"))??;
    if status != 200 {
        return Err(format!("{path}: HTTP {status}: {}", head(&body, 200)));
    }
    serde_json::from_slice(&body).map_err(|e| format!("{path}: invalid JSON: {e}"))
}

/// The first `n` characters of a body, as text.
pub(crate) fn head(body: &[u8], n: usize) -> String {
    String::from_utf8_lossy(body).chars().take(n).collect()
}

#[cfg(test)]
mod kind_tests {
    use super::*;

    #[test]
    fn images_name_their_runtime() {
        assert_eq!(
            RuntimeKind::from_image("ollama/ollama:0.12.6"),
            Some(RuntimeKind::Ollama)
        );
        assert_eq!(
            RuntimeKind::from_image("ghcr.io/ggml-org/llama.cpp:server"),
            Some(RuntimeKind::Llamacpp)
        );
        assert_eq!(
            RuntimeKind::from_image("vllm/vllm-openai:v0.10.1"),
            Some(RuntimeKind::Openai)
        );
        assert_eq!(RuntimeKind::from_image("nginx:1.27"), None);
    }

    /// `name` indexes `NAMES` by the enum's order: a reordered table or enum fails here.
    #[test]
    fn each_kind_is_named_by_its_own_row() {
        for (name, kind) in RuntimeKind::NAMES {
            assert_eq!(kind.name(), name);
        }
        assert_eq!(
            serde_json::to_value(RuntimeKind::Llamacpp).unwrap(),
            "llamacpp"
        );
    }

    /// A runtime that lists `model` resident for its first `listed` residency calls, as
    /// Ollama's `/api/ps` does while the runner it was told to unload is still exiting.
    struct Exiting {
        listed: usize,
        calls: std::sync::atomic::AtomicUsize,
        fail_after: Option<usize>,
    }

    fn exiting(listed: usize, fail_after: Option<usize>) -> Exiting {
        Exiting {
            listed,
            calls: Default::default(),
            fail_after,
        }
    }

    impl RuntimeAdapter for Exiting {
        fn probe<'a>(&'a self, _: &'a PodRef) -> BoxFuture<'a, RuntimeProbe> {
            Box::pin(async { RuntimeProbe::default() })
        }
        fn residency<'a>(
            &'a self,
            _: &'a PodRef,
        ) -> BoxFuture<'a, Result<Vec<ResidentModel>, String>> {
            let n = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async move {
                if self.fail_after.is_some_and(|f| n >= f) {
                    return Err("connection refused".into());
                }
                let mut models = vec![ResidentModel {
                    name: "other:1b".into(),
                    size: 1,
                    size_vram: 0,
                    expires_at: None,
                    status: None,
                }];
                if n < self.listed {
                    models.push(ResidentModel {
                        name: "smollm2:135m".into(),
                        ..models[0].clone()
                    });
                }
                Ok(models)
            })
        }
        fn models_on_disk<'a>(
            &'a self,
            _: &'a PodRef,
        ) -> BoxFuture<'a, Result<Vec<DiskModel>, String>> {
            Box::pin(async { Ok(vec![]) })
        }
        fn generate<'a>(
            &'a self,
            _: &'a PodRef,
            _: &'a str,
            _: &'a str,
            request_id: u64,
            _: Box<dyn FnOnce() + Send + 'a>,
        ) -> BoxFuture<'a, InferenceResult> {
            Box::pin(async move {
                InferenceResult {
                    request_id,
                    ..InferenceResult::default()
                }
            })
        }
        fn unload<'a>(&'a self, _: &'a PodRef, _: &'a str) -> BoxFuture<'a, Result<(), String>> {
            Box::pin(async { Ok(()) })
        }
    }

    #[tokio::test]
    async fn an_unload_is_done_when_the_model_leaves_residency() {
        let pod = PodRef {
            name: "ollama-0".into(),
            ip: None,
        };
        let poll = Duration::from_millis(1);
        let slow = exiting(3, None);
        until_not_resident(&slow, &pod, "smollm2:135m", poll).await;
        // Three answers still list it, the fourth does not; another model stays resident.
        assert_eq!(slow.calls.into_inner(), 4);

        // `smollm2` without a tag is `smollm2:latest`, another model: not waited for.
        let other = exiting(3, None);
        until_not_resident(&other, &pod, "smollm2", poll).await;
        assert_eq!(other.calls.into_inner(), 1);

        // A runtime that stops answering ends the wait.
        let gone = exiting(usize::MAX, Some(2));
        until_not_resident(&gone, &pod, "smollm2:135m", poll).await;
        assert_eq!(gone.calls.into_inner(), 3);
    }

    #[test]
    fn the_api_servers_own_errors_are_not_the_runtimes() {
        let apiserver = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"error trying to reach service: dial tcp 10.0.0.5:8080: connect: connection refused","reason":"ServiceUnavailable","code":503}"#;
        assert!(!answered_by_runtime(503, apiserver));
        let loading = include_bytes!("captured/llama-health-loading.json");
        assert!(answered_by_runtime(503, loading));
        assert!(answered_by_runtime(200, b""));
    }
}
