//! The OpenAI-compatible adapter: vLLM (vllm-project/vllm vllm/entrypoints/openai/
//! api_server.py), or llama-server's `/v1` routes.
//!
//! - probe `GET /health`: vLLM builds its engine (weights, KV-cache profiling, graph
//!   capture) before it serves HTTP at all (`build_async_engine_client` runs before
//!   `serve_http` in api_server.py), so its port refuses connections until the model is
//!   loaded, then `/health` answers 200 with an empty body (503 once the engine is dead).
//!   There T2 "HTTP answers" = T2 "model ready". llama-server's `/health` 503 "Loading
//!   model" still splits them when this adapter talks to it.
//! - residency `GET /v1/models`: the served models (vLLM preallocates its memory: resident
//!   means up); the models on disk are not in the API (none are reported).
//! - generate `POST /v1/completions` streamed with `stream_options.include_usage` (SSE,
//!   [`super::sse`]): the first `choices[].text` is the first token, `data: [DONE]` the end,
//!   `usage` the token counts (vLLM has no timings; llama-server adds `timings`).
//! - unload: the API has none.

use super::sse::Completion;
use super::{Answer, PodRef, Reach, RuntimeAccess, RuntimeAdapter, RuntimeKind, get_json, stream};
use futures::future::BoxFuture;
use readygap_core::event::{
    DiskModel, InferenceResult, ResidentModel, RuntimeMetrics, RuntimeProbe,
};
use serde_json::Value;

/// The OpenAI-compatible adapter over an access mode.
#[derive(Clone)]
pub struct OpenAi {
    /// Probed for T2 at `/health` by default.
    pub reach: Reach,
    /// `max_tokens` of generate requests.
    pub max_tokens: u32,
}

impl OpenAi {
    pub fn new(access: RuntimeAccess) -> Self {
        Self::over(Reach::new(access, RuntimeKind::Openai))
    }

    /// The adapter over a reach, with the default `max_tokens`.
    pub fn over(reach: Reach) -> Self {
        Self {
            reach,
            max_tokens: 64,
        }
    }
}

/// The served models of a `/v1/models` answer (`data[].id`; vLLM adds `max_model_len`).
pub fn parse_v1_models(v: &Value) -> Result<Vec<ResidentModel>, String> {
    let data = v["data"]
        .as_array()
        .ok_or("/v1/models: no \"data\" array")?;
    Ok(data
        .iter()
        .filter_map(|m| m["id"].as_str())
        .map(|id| ResidentModel {
            name: id.to_string(),
            ..ResidentModel::default()
        })
        .collect())
}

/// The body of a streamed `/v1/completions`.
pub fn completions_body(model: &str, prompt: &str, max_tokens: u32) -> Vec<u8> {
    serde_json::json!({
        "model": model, "prompt": prompt, "max_tokens": max_tokens, "stream": true,
        "stream_options": {"include_usage": true},
    })
    .to_string()
    .into_bytes()
}

impl RuntimeAdapter for OpenAi {
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
        Box::pin(
            async move { parse_v1_models(&get_json(&self.reach.access, pod, "/v1/models").await?) },
        )
    }

    /// The OpenAI API has no list of the models on disk (`/v1/models` is what the server
    /// serves, once it does): unknown, never "none" (an empty list would read as the model
    /// missing after the replacement).
    fn models_on_disk<'a>(&'a self, _pod: &'a PodRef) -> Answer<'a, Vec<DiskModel>> {
        Box::pin(async { Err("the OpenAI API lists no models on disk".to_string()) })
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
            "/v1/completions",
            completions_body(model, prompt, self.max_tokens),
            request_id,
            first_token,
            "data: [DONE]",
        ))
    }

    fn metrics<'a>(&'a self, pod: &'a PodRef) -> Answer<'a, Option<RuntimeMetrics>> {
        Box::pin(super::get_metrics(&self.reach.access, pod))
    }

    fn unload<'a>(&'a self, _pod: &'a PodRef, model: &'a str) -> Answer<'a, ()> {
        Box::pin(async move {
            Err(format!(
                "unload {model}: the OpenAI API has no unload (restart the server)"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_models_of_the_real_llama_server() {
        let v: Value = serde_json::from_str(include_str!("captured/llama-v1models.json")).unwrap();
        let r = parse_v1_models(&v).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].name, "/models/gemma3.gguf");
        assert!(parse_v1_models(&serde_json::json!({"object": "list"})).is_err());
    }

    #[test]
    fn the_request_asks_for_usage() {
        let b: Value = serde_json::from_slice(&completions_body("m", "p", 8)).unwrap();
        assert_eq!(b["stream_options"]["include_usage"], true);
        assert_eq!(b["stream"], true);
    }
}
