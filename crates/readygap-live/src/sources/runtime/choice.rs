//! Which runtime adapter a session uses: `--runtime` when given, else a guess from the
//! target pods' container images (`ollama/ollama`, `…/llama.cpp:server`, `vllm/vllm-openai`),
//! else from the runtime's answers ([`RuntimeKind::from_answers`]), else Ollama. The port and
//! the probe path follow the runtime unless the user set them (`runtime_port` /
//! `probe_path` other than Ollama's defaults); a guessed runtime takes the serving
//! container's declared `containerPort`. How it was chosen is said on screen and recorded.

use super::llamacpp::LlamaCpp;
use super::ollama::Ollama;
use super::openai::OpenAi;
use super::{AccessMode, PodRef, Reach, RuntimeAccess, RuntimeAdapter, RuntimeKind};
use k8s_openapi::api::core::v1::Pod;
use std::sync::Arc;
use std::time::Duration;

/// Ollama's port and probe path: the defaults of `--runtime-port` / `--probe-path`.
const OLLAMA_PORT: u16 = RuntimeKind::Ollama.default_port();
const OLLAMA_PROBE: &str = "/api/tags";

/// The runtime chosen for a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub kind: RuntimeKind,
    pub port: u16,
    pub probe_path: String,
    /// `--runtime`, `image …`, `answers`, `default`.
    pub how: String,
}

impl Choice {
    /// `llamacpp (--runtime)`: the header's text.
    pub fn label(&self) -> String {
        format!("{} ({})", self.kind.name(), self.how)
    }
}

/// What [`choose`] needs to know of the session.
pub struct Ask<'a> {
    pub given: Option<RuntimeKind>,
    pub client: &'a kube::Client,
    pub namespace: &'a str,
    pub selector: &'a str,
    pub port: u16,
    pub probe_path: &'a str,
    pub access: AccessMode,
    pub direct_url: &'a str,
}

fn settle(kind: RuntimeKind, how: String, ask: &Ask<'_>, declared: Option<u16>) -> Choice {
    let port = if ask.port != OLLAMA_PORT || kind == RuntimeKind::Ollama {
        ask.port
    } else {
        declared.unwrap_or(kind.default_port())
    };
    let probe_path = if ask.probe_path != OLLAMA_PROBE {
        ask.probe_path.to_string()
    } else {
        kind.default_probe_path().to_string()
    };
    Choice {
        kind,
        port,
        probe_path,
        how,
    }
}

/// The port the serving container declares for `kind`: a container of that runtime's
/// image, else of any runtime's image (llama-server spoken to as an OpenAI server), else
/// any container's.
fn declared_port(images: &[(String, Option<u16>)], kind: RuntimeKind) -> Option<u16> {
    images
        .iter()
        .find(|(i, p)| RuntimeKind::from_image(i) == Some(kind) && p.is_some())
        .or_else(|| {
            images
                .iter()
                .find(|(i, p)| RuntimeKind::from_image(i).is_some() && p.is_some())
        })
        .or_else(|| images.iter().find(|(_, p)| p.is_some()))
        .and_then(|(_, p)| *p)
}

/// Choose the runtime (bounded: the guesses take a few seconds at most).
pub async fn choose(ask: Ask<'_>) -> Choice {
    let api: kube::Api<Pod> = kube::Api::namespaced(ask.client.clone(), ask.namespace);
    let pods = tokio::time::timeout(
        Duration::from_secs(5),
        api.list(&kube::api::ListParams::default().labels(ask.selector)),
    )
    .await
    .ok()
    .and_then(Result::ok)
    .map(|l| l.items)
    .unwrap_or_default();
    // The serving container's image and its first declared port.
    let images: Vec<(String, Option<u16>)> = pods
        .iter()
        .filter_map(|p| p.spec.as_ref())
        .flat_map(|s| s.containers.iter())
        .map(|c| {
            let port = c
                .ports
                .iter()
                .flatten()
                .next()
                .and_then(|p| u16::try_from(p.container_port).ok());
            (c.image.clone().unwrap_or_default(), port)
        })
        .collect();
    if let Some(kind) = ask.given {
        let declared = declared_port(&images, kind);
        return settle(kind, "--runtime".into(), &ask, declared);
    }
    if let Some((kind, image, port)) = images
        .iter()
        .find_map(|(i, p)| RuntimeKind::from_image(i).map(|k| (k, i, *p)))
    {
        return settle(kind, format!("image {image}"), &ask, port);
    }
    // Ask the first pod with an IP, on each runtime's usual port when the user gave none.
    let ports: Vec<u16> = if ask.port != OLLAMA_PORT {
        vec![ask.port]
    } else {
        RuntimeKind::NAMES
            .iter()
            .map(|(_, k)| k.default_port())
            .collect()
    };
    if let Some(p) = pods.iter().find(|p| {
        p.status.as_ref().and_then(|s| s.pod_ip.as_ref()).is_some()
            && p.metadata.deletion_timestamp.is_none()
    }) {
        let pod = PodRef {
            name: p.metadata.name.clone().unwrap_or_default(),
            ip: p.status.as_ref().and_then(|s| s.pod_ip.clone()),
        };
        for port in &ports {
            let access = RuntimeAccess::new(
                ask.access,
                ask.client.clone(),
                ask.namespace,
                *port,
                ask.direct_url,
            );
            if let Some(kind) = RuntimeKind::from_answers(&access, &pod).await {
                return settle(kind, "answers".into(), &ask, Some(*port));
            }
        }
    }
    settle(RuntimeKind::Ollama, "default".into(), &ask, None)
}

/// The adapter of a chosen runtime.
pub fn adapter(
    choice: &Choice,
    access: RuntimeAccess,
    generate_timeout: Duration,
    think: Option<bool>,
) -> Arc<dyn RuntimeAdapter> {
    let reach = Reach {
        probe_path: choice.probe_path.clone(),
        generate_timeout,
        ..Reach::new(access, choice.kind)
    };
    match choice.kind {
        RuntimeKind::Ollama => Arc::new(Ollama { reach, think }),
        RuntimeKind::Llamacpp => Arc::new(LlamaCpp::over(reach)),
        RuntimeKind::Openai => Arc::new(OpenAi::over(reach)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_runtime_takes_the_serving_containers_port() {
        let llama = vec![
            ("busybox:1.36".to_string(), Some(9999)),
            ("ghcr.io/ggml-org/llama.cpp:server".to_string(), Some(8080)),
        ];
        assert_eq!(declared_port(&llama, RuntimeKind::Llamacpp), Some(8080));
        // llama-server spoken to as an OpenAI server: still its port, not vLLM's 8000.
        assert_eq!(declared_port(&llama, RuntimeKind::Openai), Some(8080));
        let plain = vec![("my/server:1".to_string(), Some(7000))];
        assert_eq!(declared_port(&plain, RuntimeKind::Openai), Some(7000));
        assert_eq!(declared_port(&[], RuntimeKind::Openai), None);
    }
}
