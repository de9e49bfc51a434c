//! GPU memory of a pod that asks for a GPU: one long-lived exec in its serving container
//! runs `nvidia-smi`'s memory query every interval (the NVIDIA container runtime mounts
//! `nvidia-smi` into a GPU container), each answer a block ended by the memory stream's
//! marker, parsed by `readygap_core::gpu`. What cannot be read is said as a state
//! (`gpu_unavailable` with the reason), never as a zero: no `nvidia-smi` in the image, exec
//! forbidden, a driver that does not answer.
//!
//! Not read yet: the DCGM exporter's per-pod series and the runtimes' own figures (Ollama's
//! `size_vram` is on the Residency panel).

use super::memory::{BlockSplitter, MARKER};
use chrono::Utc;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams};
use readygap_core::event::{Event, EventKind, Source};
use readygap_core::gpu::{NVIDIA_SMI_QUERY, parse_nvidia_smi};
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Where the figures come from, as the screen says it.
pub const SOURCE: &str = "nvidia-smi in the container";

/// Whose GPU memory to read, and how often.
#[derive(Debug, Clone)]
pub struct GpuConfig {
    pub namespace: String,
    pub pod: String,
    pub container: Option<String>,
    pub interval: Duration,
}

/// The loop the exec runs: the query (its errors too), the marker, a pause.
pub fn script(interval: Duration) -> String {
    format!(
        "while :; do {} 2>&1; echo {MARKER}; sleep {}; done",
        NVIDIA_SMI_QUERY.join(" "),
        interval.as_secs_f64()
    )
}

/// Read the pod's GPU memory until cancelled, the exec ends, or `nvidia-smi` is not there.
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
    let unavailable = |why: String| EventKind::GpuUnavailable {
        pod: cfg.pod.clone(),
        why,
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
                    EventKind::GpuSample {
                        pod: cfg.pod.clone(),
                        source: SOURCE.into(),
                        gpus,
                    }
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
