//! The simulated runtime's HTTP API in the two other dialects, llama.cpp's `llama-server`
//! and vLLM's OpenAI server, with their readiness behaviour (see [`Dialect`]):
//!
//! - llama-server (ggml-org/llama.cpp tools/server/server-http.cpp): HTTP answers at once,
//!   and every route answers 503 `{"error":{"message":"Loading model","type":
//!   "unavailable_error","code":503}}` until the model is loaded; then `/health` answers
//!   200 `{"status":"ok"}`, `/models` and `/v1/models` list the model, `/completion` and
//!   `/v1/completions` stream SSE whose last chunk carries `timings` (float ms), `/v1/*`
//!   ending with `data: [DONE]`; `/metrics` (`llamacpp:*`).
//! - vLLM (vllm/entrypoints/openai/api_server.py): nothing listens until the weights are
//!   loaded (the runtime's boot loads first, see `super::boot`); then `/health` is 200 with
//!   an empty body, `/v1/models` has `max_model_len`, `/v1/completions` streams chunks
//!   without timings (usage in a chunk of its own when `stream_options.include_usage`),
//!   `/metrics` always (`vllm:num_requests_running`, …).
//!
//! Generation times are the profile's prompt-eval and eval stages, like the Ollama dialect.

use super::listener::KillableListener;
use super::{AddrClaim, Runtime};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use tokio::net::TcpListener;

type Rt = Arc<Runtime>;

/// Which server the simulated runtime imitates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    /// Ollama (`super::http`).
    #[default]
    Ollama,
    /// llama.cpp's `llama-server`.
    LlamaCpp,
    /// vLLM's OpenAI-compatible server.
    Vllm,
}

impl Dialect {
    /// The dialect of a container image (`ghcr.io/ggml-org/llama.cpp:server`,
    /// `vllm/vllm-openai:…`; anything else is Ollama).
    pub fn of_image(image: &str) -> Dialect {
        if image.contains("llama.cpp") {
            Dialect::LlamaCpp
        } else if image.contains("vllm") {
            Dialect::Vllm
        } else {
            Dialect::Ollama
        }
    }
}

/// Requests being generated (for `/metrics`).
static RUNNING: AtomicU64 = AtomicU64::new(0);

fn json_response(status: StatusCode, v: Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        v.to_string(),
    )
        .into_response()
}

fn loading() -> Response {
    json_response(
        StatusCode::SERVICE_UNAVAILABLE,
        json!({"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}}),
    )
}

fn error(status: StatusCode, message: &str, ty: &str) -> Response {
    json_response(
        status,
        json!({"error": {"message": message, "type": ty, "code": status.as_u16()}}),
    )
}

/// The served model is resident (loaded).
fn ready(rt: &Rt) -> bool {
    rt.resident_models()
        .iter()
        .any(|r| r.spec.name == rt.spec.profile.model)
}

/// Serve until the container stops.
pub(crate) async fn serve(runtime: Rt, listener: TcpListener, claim: AddrClaim, dialect: Dialect) {
    let shutdown = runtime.shutdown.clone();
    let listener = KillableListener::new(listener, shutdown.clone(), runtime.killed.clone());
    let mut app = Router::new()
        .route("/health", get(health))
        .route("/v1/models", get(models))
        .route("/v1/completions", post(v1_completions))
        .route("/metrics", get(metrics));
    if dialect == Dialect::LlamaCpp {
        app = app
            .route("/models", get(models))
            .route("/completion", post(completion));
    }
    let app = app
        .fallback(|| async { error(StatusCode::NOT_FOUND, "File Not Found", "not_found_error") })
        .layer(axum::middleware::from_fn_with_state(
            runtime.clone(),
            super::request_log::log_request,
        ))
        .with_state((runtime.clone(), dialect));
    let app = app.into_make_service_with_connect_info::<super::request_log::Peer>();
    let result = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await;
    if let Err(e) = result {
        tracing::warn!("lab runtime server ended: {e}");
    }
    drop(claim);
}

type St = State<(Rt, Dialect)>;

async fn health(State((rt, d)): St) -> Response {
    match d {
        Dialect::LlamaCpp if !ready(&rt) => loading(),
        Dialect::LlamaCpp => json_response(StatusCode::OK, json!({"status": "ok"})),
        _ => StatusCode::OK.into_response(),
    }
}

async fn models(State((rt, d)): St) -> Response {
    if d == Dialect::LlamaCpp && !ready(&rt) {
        return loading();
    }
    let model = &rt.spec.profile.model;
    let entry = match d {
        Dialect::Vllm => json!({"id": model, "object": "model", "created": 0, "owned_by": "vllm",
                                "root": model, "parent": null, "max_model_len": 2048}),
        _ => json!({"id": model, "object": "model", "created": 0, "owned_by": "llamacpp",
                    "meta": {"size": rt.spec.profile.served_model().map(|m| m.disk_bytes).unwrap_or(0),
                             "n_ctx": 2048}}),
    };
    json_response(StatusCode::OK, json!({"object": "list", "data": [entry]}))
}

async fn metrics(State((rt, d)): St) -> Response {
    let running = RUNNING.load(Ordering::SeqCst);
    let body = match d {
        Dialect::LlamaCpp if !ready(&rt) => return loading(),
        Dialect::LlamaCpp => format!(
            "# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing {running}\n"
        ),
        _ => format!(
            "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{model_name=\"{m}\"}} {running}\n\
             # TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{model_name=\"{m}\"}} 0\n\
             # TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{{model_name=\"{m}\"}} 0.0\n",
            m = rt.spec.profile.model
        ),
    };
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        body,
    )
        .into_response()
}

/// The words of the answer, each a token.
fn answer_tokens(prompt: &str, max: usize) -> Vec<String> {
    let text = super::http::answer_text(prompt);
    text.split_inclusive(' ')
        .map(str::to_string)
        .take(max.max(1))
        .collect()
}

fn sse(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

/// One streamed generation: (is it the native route, the request body).
async fn generate(rt: Rt, d: Dialect, native: bool, body: Bytes) -> Response {
    if d == Dialect::LlamaCpp && !ready(&rt) {
        return loading();
    }
    let req: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                &e.to_string(),
                "invalid_request_error",
            );
        }
    };
    let prompt = req["prompt"].as_str().unwrap_or_default().to_string();
    let max = req["n_predict"]
        .as_i64()
        .or(req["max_tokens"].as_i64())
        .filter(|n| *n > 0)
        .unwrap_or(16) as usize;
    let usage = req["stream_options"]["include_usage"].as_bool() == Some(true);
    let Some(spec) = rt.spec.profile.served_model().cloned() else {
        return error(StatusCode::NOT_FOUND, "model not found", "not_found_error");
    };
    let tokens = answer_tokens(&prompt, max);
    let prompt_n = prompt.split_whitespace().count().max(1) as u64;
    let (tx, rx) = futures::channel::mpsc::unbounded::<Result<Bytes, std::io::Error>>();
    let rt2 = rt.clone();
    let task = tokio::spawn(async move {
        RUNNING.fetch_add(1, Ordering::SeqCst);
        let t0 = Instant::now();
        let prompt_d = rt2.sample(&spec.prompt_eval);
        if rt2.sleep_alive(prompt_d).await.is_err() {
            RUNNING.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        let prompt_ms = t0.elapsed().as_secs_f64() * 1000.0;
        let per = rt2.sample(&spec.eval) / tokens.len().max(1) as u32;
        let t1 = Instant::now();
        let model = rt2.spec.profile.model.clone();
        for t in &tokens {
            if rt2.sleep_alive(per).await.is_err() {
                RUNNING.fetch_sub(1, Ordering::SeqCst);
                return;
            }
            let chunk = if native {
                json!({"index": 0, "content": t, "stop": false})
            } else {
                json!({"choices": [{"text": t, "index": 0, "logprobs": null, "finish_reason": null}],
                       "model": model, "object": "text_completion"})
            };
            let _ = tx.unbounded_send(Ok(sse(&chunk)));
        }
        let predicted_ms = t1.elapsed().as_secs_f64() * 1000.0;
        let n = tokens.len() as u64;
        let timings = json!({"prompt_n": prompt_n, "prompt_ms": prompt_ms,
                             "predicted_n": n, "predicted_ms": predicted_ms});
        let usage_v = json!({"prompt_tokens": prompt_n, "completion_tokens": n, "total_tokens": prompt_n + n});
        let mut last = Vec::new();
        match (native, d) {
            (true, _) => last.push(
                json!({"index": 0, "content": "", "stop": true, "model": model,
                                          "tokens_predicted": n, "tokens_evaluated": prompt_n,
                                          "timings": timings}),
            ),
            (false, Dialect::LlamaCpp) => {
                let mut c = json!({"choices": [{"text": "", "index": 0, "logprobs": null, "finish_reason": "length"}],
                                   "model": model, "object": "text_completion", "timings": timings});
                if usage {
                    c["usage"] = usage_v;
                }
                last.push(c);
            }
            (false, _) => {
                last.push(json!({"choices": [{"text": "", "index": 0, "logprobs": null, "finish_reason": "length"}],
                                 "model": model, "object": "text_completion"}));
                if usage {
                    last.push(json!({"choices": [], "model": model, "object": "text_completion", "usage": usage_v}));
                }
            }
        }
        for c in last {
            let _ = tx.unbounded_send(Ok(sse(&c)));
        }
        if !native {
            let _ = tx.unbounded_send(Ok(Bytes::from_static(b"data: [DONE]\n\n")));
        }
        RUNNING.fetch_sub(1, Ordering::SeqCst);
    });
    rt.track_task(task);
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(rx))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

async fn completion(State((rt, d)): St, body: Bytes) -> Response {
    generate(rt, d, true, body).await
}

async fn v1_completions(State((rt, d)): St, body: Bytes) -> Response {
    generate(rt, d, false, body).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_pick_the_dialect() {
        assert_eq!(
            Dialect::of_image("ghcr.io/ggml-org/llama.cpp:server"),
            Dialect::LlamaCpp
        );
        assert_eq!(Dialect::of_image("vllm/vllm-openai:v0.10.1"), Dialect::Vllm);
        assert_eq!(Dialect::of_image("ollama/ollama:0.6.8"), Dialect::Ollama);
    }
}
