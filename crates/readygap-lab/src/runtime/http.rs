//! The runtime's HTTP API, shaped like Ollama's (docs/api.md; field names checked against the
//! official Python client `ollama` 0.6.3, `_types.py`): `/`, `/api/version`, `/api/tags`,
//! `/api/ps`, `/api/show`, `/api/generate` and `/api/chat` (streamed NDJSON or one JSON),
//! `/api/pull`.
//! Errors are `{"error": "..."}` like Ollama's. Faults (hang, HTTP 500) apply to every route;
//! a crash mid-inference ends the process after the first streamed token.
//!
//! Connections are accepted through [`KillableListener`]: when the container dies every open
//! connection fails at once (reset when OOM-killed), like a process that is gone.

use super::disk::normalize_name;
use super::format::rfc3339;
use super::listener::KillableListener;
use super::{AddrClaim, KeepAlive, RunError, Runtime};
use crate::ground_truth::{Due, Transition};
use crate::ollama_version::human_bytes2;
use crate::profile::ModelSpec;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::Utc;
use futures::StreamExt;
use serde_json::{Value, json};
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

type Rt = Arc<Runtime>;

/// Serve until the container stops.
pub(crate) async fn serve(runtime: Rt, listener: TcpListener, claim: AddrClaim) {
    let shutdown = runtime.shutdown.clone();
    let listener = KillableListener::new(listener, shutdown.clone(), runtime.killed.clone());
    let app = Router::new()
        .route("/", get(root).head(root))
        .route("/api/version", get(version))
        .route("/api/tags", get(tags))
        .route("/api/ps", get(ps))
        .route("/api/show", post(show))
        .route("/api/generate", post(generate))
        .route("/api/chat", post(chat))
        .route("/api/pull", post(pull))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            runtime.clone(),
            faults,
        ))
        .layer(axum::middleware::from_fn_with_state(
            runtime.clone(),
            super::request_log::log_request,
        ))
        .with_state(runtime.clone());
    let app = app.into_make_service_with_connect_info::<super::request_log::Peer>();
    let result = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await;
    if let Err(e) = result {
        tracing::warn!("lab runtime server ended: {e}");
    }
    // The listener is closed: the address is free for a restarted container.
    drop(claim);
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, axum::Json(json!({ "error": message.into() }))).into_response()
}

fn model_not_found(name: &str) -> Response {
    error(StatusCode::NOT_FOUND, format!("model '{name}' not found"))
}

const KILLED: &str = "llama runner process has terminated: signal: killed";

async fn faults(State(rt): State<Rt>, request: Request, next: Next) -> Response {
    if rt.spec.faults.hang() {
        // Accepted, never answered (until the container goes away).
        rt.shutdown.cancelled().await;
        return error(StatusCode::INTERNAL_SERVER_ERROR, "runtime stopped");
    }
    if rt.spec.faults.http_500() {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "lab fault: internal server error",
        );
    }
    next.run(request).await
}

async fn root() -> &'static str {
    "Ollama is running"
}

async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "404 page not found").into_response()
}

async fn version(State(rt): State<Rt>) -> Response {
    axum::Json(json!({ "version": rt.spec.profile.ollama_version })).into_response()
}

fn details(spec: &ModelSpec) -> Value {
    json!({
        "parent_model": "",
        "format": "gguf",
        "family": spec.family,
        "families": [spec.family],
        "parameter_size": spec.parameter_size,
        "quantization_level": spec.quantization_level,
    })
}

async fn tags(State(rt): State<Rt>) -> Response {
    let models: Vec<Value> = rt
        .spec
        .disk
        .entries()
        .into_iter()
        .map(|(m, modified)| {
            json!({
                "name": m.name,
                "model": m.name,
                "modified_at": rfc3339(modified),
                "size": m.disk_bytes,
                "digest": m.digest,
                "details": details(&m),
            })
        })
        .collect();
    axum::Json(json!({ "models": models })).into_response()
}

async fn ps(State(rt): State<Rt>) -> Response {
    let context_length = rt.spec.profile.context_length;
    let models: Vec<Value> = rt
        .resident_models()
        .into_iter()
        .map(|r| {
            json!({
                "name": r.spec.name,
                "model": r.spec.name,
                "size": r.spec.resident_bytes,
                "digest": r.spec.digest,
                "details": details(&r.spec),
                "expires_at": rfc3339(r.expires_at),
                "size_vram": r.vram,
                "context_length": context_length,
            })
        })
        .collect();
    axum::Json(json!({ "models": models })).into_response()
}

/// A bad request, answered 400 with `{"error": ...}` as Ollama does.
struct BadRequest(String);

impl IntoResponse for BadRequest {
    fn into_response(self) -> Response {
        error(StatusCode::BAD_REQUEST, self.0)
    }
}

/// Parse a JSON object body.
fn parse_body(body: &Bytes) -> Result<Value, BadRequest> {
    if body.is_empty() {
        return Err(BadRequest("missing request body".into()));
    }
    let value: Value =
        serde_json::from_slice(body).map_err(|e| BadRequest(format!("invalid JSON: {e}")))?;
    if !value.is_object() {
        return Err(BadRequest("request body must be an object".into()));
    }
    Ok(value)
}

/// The `model` (or legacy `name`) field.
fn model_field(body: &Value) -> Result<String, BadRequest> {
    body.get("model")
        .or_else(|| body.get("name"))
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .map(str::to_string)
        .ok_or_else(|| BadRequest("model is required".into()))
}

async fn show(State(rt): State<Rt>, body: Bytes) -> Response {
    let body = match parse_body(&body) {
        Ok(b) => b,
        Err(r) => return r.into_response(),
    };
    let name = match model_field(&body) {
        Ok(n) => n,
        Err(r) => return r.into_response(),
    };
    let Some((spec, modified)) = rt.spec.disk.get(&name) else {
        return model_not_found(&name);
    };
    let parameter_count: u64 = match spec.parameter_size.trim_end_matches('B').parse::<f64>() {
        Ok(b) => (b * 1e9) as u64,
        Err(_) => 0,
    };
    axum::Json(json!({
        "license": "LLAMA 3.2 COMMUNITY LICENSE AGREEMENT (lab copy: text omitted)",
        "modelfile": format!(
            "# Modelfile generated by \"ollama show\"\nFROM /root/.ollama/models/blobs/sha256-{}\nTEMPLATE \"\"\"{{{{ .Prompt }}}}\"\"\"\nPARAMETER stop <|start_header_id|>\nPARAMETER stop <|end_header_id|>\nPARAMETER stop <|eot_id|>\n",
            spec.digest
        ),
        "parameters": "stop                           \"<|start_header_id|>\"\nstop                           \"<|end_header_id|>\"\nstop                           \"<|eot_id|>\"",
        "template": "<|start_header_id|>user<|end_header_id|>\n\n{{ .Prompt }}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
        "details": details(&spec),
        "model_info": model_info(&spec, parameter_count),
        // Ollama 0.12 lists every tensor (name, type, shape) without `verbose` too; the lab
        // lists the first two (checked against the real one in tests/engine_ollama.rs).
        "tensors": tensors(&spec),
        "capabilities": if spec.thinking { json!(["completion", "tools", "thinking"]) } else { json!(["completion", "tools"]) },
        "modified_at": rfc3339(modified),
    }))
    .into_response()
}

/// Llama 3.x hyperparameters by size label: (blocks, embedding, feed-forward, heads, KV heads,
/// rope dimensions), from the public GGUF metadata of llama3.2:1b, llama3.2:3b, llama3.1:8b.
fn llama_shape(parameter_size: &str) -> (u64, u64, u64, u64, u64, u64) {
    match parameter_size {
        "1.2B" => (16, 2048, 8192, 32, 8, 64),
        "8.0B" => (32, 4096, 14336, 32, 8, 128),
        _ => (28, 3072, 8192, 24, 8, 128),
    }
}

/// `/api/show`'s `model_info`: the GGUF metadata Ollama returns (arrays such as the tokens
/// are `null` without `verbose`, as in Ollama 0.12).
fn model_info(spec: &ModelSpec, parameter_count: u64) -> serde_json::Value {
    let (blocks, emb, ff, heads, kv, rope) = llama_shape(&spec.parameter_size);
    let size_label = spec
        .parameter_size
        .trim_end_matches(".0B")
        .replace(".2B", "B");
    let a = &spec.family;
    let mut m = json!({
        "general.architecture": a,
        "general.basename": spec.name.split(':').next().unwrap_or(&spec.name),
        "general.file_type": 15,
        "general.finetune": "Instruct",
        "general.languages": null,
        "general.license": "llama3.2",
        "general.parameter_count": parameter_count,
        "general.quantization_version": 2,
        "general.size_label": size_label,
        "general.type": "model",
        "tokenizer.ggml.bos_token_id": 128000,
        "tokenizer.ggml.eos_token_id": 128009,
        "tokenizer.ggml.merges": null,
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "llama-bpe",
        "tokenizer.ggml.token_type": null,
        "tokenizer.ggml.tokens": null,
    });
    let arch = [
        ("attention.head_count", json!(heads)),
        ("attention.head_count_kv", json!(kv)),
        ("attention.layer_norm_rms_epsilon", json!(1e-5)),
        ("block_count", json!(blocks)),
        ("context_length", json!(131072)),
        ("embedding_length", json!(emb)),
        ("feed_forward_length", json!(ff)),
        ("rope.dimension_count", json!(rope)),
        ("rope.freq_base", json!(500000)),
        ("vocab_size", json!(128256)),
    ];
    if let Some(obj) = m.as_object_mut() {
        for (k, v) in arch {
            obj.insert(format!("{a}.{k}"), v);
        }
    }
    m
}

/// The first tensors of the model as `/api/show` lists them.
fn tensors(spec: &ModelSpec) -> serde_json::Value {
    let (_, emb, ..) = llama_shape(&spec.parameter_size);
    json!([
        {"name": "rope_freqs.weight", "type": "F32", "shape": [64]},
        {"name": "token_embd.weight", "type": "Q6_K", "shape": [emb, 128256]},
    ])
}

async fn pull(State(rt): State<Rt>, body: Bytes) -> Response {
    let body = match parse_body(&body) {
        Ok(b) => b,
        Err(r) => return r.into_response(),
    };
    let name = match model_field(&body) {
        Ok(n) => n,
        Err(r) => return r.into_response(),
    };
    let wanted = normalize_name(&name);
    let Some(spec) = rt
        .spec
        .profile
        .models
        .iter()
        .find(|m| normalize_name(&m.name) == wanted)
    else {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "pull model manifest: file does not exist",
        );
    };
    rt.spec.disk.pull(spec);
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(true);
    if stream {
        let lines = [
            json!({"status": "pulling manifest"}),
            json!({"status": format!("pulling {}", spec.short_id()), "digest": format!("sha256:{}", spec.digest), "total": spec.disk_bytes, "completed": spec.disk_bytes}),
            json!({"status": "verifying sha256 digest"}),
            json!({"status": "writing manifest"}),
            json!({"status": "success"}),
        ];
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        ([(header::CONTENT_TYPE, "application/x-ndjson")], text).into_response()
    } else {
        axum::Json(json!({"status": "success"})).into_response()
    }
}

/// Ollama's `keep_alive`: a number of seconds or a Go duration string; negative = forever.
pub(crate) fn parse_keep_alive(value: Option<&Value>) -> Result<KeepAlive, String> {
    let seconds = match value {
        None | Some(Value::Null) => return Ok(KeepAlive::DEFAULT),
        Some(Value::Number(n)) => n.as_f64().unwrap_or(0.0),
        Some(Value::String(s)) => readygap_core::units::parse_go_duration(s)?,
        Some(other) => return Err(format!("invalid keep_alive: {other}")),
    };
    if seconds < 0.0 || !seconds.is_finite() || seconds > 1e12 {
        Ok(KeepAlive::Forever)
    } else {
        Ok(KeepAlive::For(Duration::from_secs_f64(seconds)))
    }
}

/// What a prompt is answered with (for the other dialects).
pub(crate) fn answer_text(prompt: &str) -> String {
    answer(prompt)
}

/// What a prompt is answered with: "Reply with exactly: X" answers X.
fn answer(prompt: &str) -> String {
    const MARK: &str = "reply with exactly:";
    let lower = prompt.to_ascii_lowercase();
    match lower.find(MARK) {
        Some(at) => prompt[at + MARK.len()..].trim().to_string(),
        None => "This is the readygap lab runtime: it reproduces Ollama's timings and does not run a model.".to_string(),
    }
}

/// The answer cut into tokens (a word with its leading space each).
fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, word) in text.split(' ').enumerate() {
        if i == 0 {
            out.push(word.to_string());
        } else {
            out.push(format!(" {word}"));
        }
    }
    out.retain(|t| !t.is_empty());
    out
}

/// A prompt's token count, as the llama 3.2 chat template would give it roughly.
fn prompt_tokens(prompt: &str) -> u64 {
    26 + (prompt.chars().count() as u64).div_ceil(4)
}

/// One line sent by a generation task.
enum Line {
    Chunk(Value),
    /// The answer's last line, and the ground truth it completes: logged by the body that
    /// sends the line, at the instant the connection takes it.
    Done(Value, Option<Due>),
    Failed(StatusCode, String),
}

/// Which endpoint a generation answers: they differ only in where the text goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    /// `/api/generate`: `"response": text`.
    Generate,
    /// `/api/chat`: `"message": {"role": "assistant", "content": text}`.
    Chat,
}

impl Api {
    fn with_text(self, mut value: Value, text: &str) -> Value {
        if let Some(obj) = value.as_object_mut() {
            match self {
                Api::Generate => {
                    obj.insert("response".into(), json!(text));
                }
                Api::Chat => {
                    obj.insert(
                        "message".into(),
                        json!({ "role": "assistant", "content": text }),
                    );
                }
            }
        }
        value
    }

    fn text_of(self, value: &Value) -> &str {
        match self {
            Api::Generate => value.get("response"),
            Api::Chat => value.get("message").and_then(|m| m.get("content")),
        }
        .and_then(Value::as_str)
        .unwrap_or("")
    }

    /// A thinking chunk: empty text, the thinking beside it (api/types.go
    /// GenerateResponse.Thinking; Message.Thinking for chat).
    fn thinking_line(self, model: &str, thinking: &str) -> Value {
        let mut value = self.line(model, "", json!({ "done": false }));
        match self {
            Api::Generate => value["thinking"] = json!(thinking),
            Api::Chat => value["message"]["thinking"] = json!(thinking),
        }
        value
    }

    fn thinking_of(self, value: &Value) -> &str {
        match self {
            Api::Generate => value.get("thinking"),
            Api::Chat => value.get("message").and_then(|m| m.get("thinking")),
        }
        .and_then(Value::as_str)
        .unwrap_or("")
    }

    /// A chunk of this endpoint: model, created_at, the text, then `fields`.
    fn line(self, model: &str, text: &str, fields: Value) -> Value {
        let mut value = self.with_text(json!({ "model": model, "created_at": created_at() }), text);
        if let (Some(obj), Value::Object(extra)) = (value.as_object_mut(), fields) {
            obj.extend(extra);
        }
        value
    }
}

struct Generation {
    api: Api,
    model: ModelSpec,
    /// What the model reads (every message's content for chat).
    prompt: String,
    /// What the answer is derived from (the prompt, or the last user message).
    question: String,
    keep_alive: KeepAlive,
    received: Instant,
    /// How the model's thinking is streamed.
    thinking: Thinking,
}

/// What a thinking-capable model does with its thinking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Thinking {
    /// Not a thinking model, or `"think": false`.
    None,
    /// `thinking` chunks before the answer (think true, or absent from 0.12.4 on).
    Separate,
    /// Before 0.12.4 without `think`: the `<think>` block is part of the response text.
    Inline,
}

/// The thinking the lab's thinking model streams before its answer.
fn thought(question: &str) -> String {
    let q: String = question.chars().take(60).collect();
    format!("Okay, the user asks: \"{q}\". I should answer exactly what is asked.")
}

fn created_at() -> String {
    rfc3339(Utc::now())
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

async fn generate(State(rt): State<Rt>, body: Bytes) -> Response {
    serve_generation(rt, Api::Generate, body).await
}

async fn chat(State(rt): State<Rt>, body: Bytes) -> Response {
    serve_generation(rt, Api::Chat, body).await
}

async fn serve_generation(rt: Rt, api: Api, body: Bytes) -> Response {
    let received = Instant::now();
    rt.spec.ground_truth.log(
        &rt.spec.pod_name,
        Transition::InferenceReceived,
        json!({ "bytes": body.len(), "api": format!("{api:?}").to_lowercase() }),
    );
    let body = match parse_body(&body) {
        Ok(b) => b,
        Err(r) => return r.into_response(),
    };
    let name = match model_field(&body) {
        Ok(n) => n,
        Err(r) => return r.into_response(),
    };
    let keep_alive = match parse_keep_alive(body.get("keep_alive")) {
        Ok(k) => k,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let Some((model, _)) = rt.spec.disk.get(&name) else {
        return model_not_found(&name);
    };
    let (prompt, question) = match api {
        Api::Generate => {
            let p = body
                .get("prompt")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            (p.clone(), p)
        }
        Api::Chat => {
            let messages: &[Value] = match body.get("messages") {
                None | Some(Value::Null) => &[],
                Some(Value::Array(m)) => m,
                Some(_) => {
                    return error(StatusCode::BAD_REQUEST, "messages must be an array");
                }
            };
            let content = |m: &Value| {
                m.get("content")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            let all: Vec<String> = messages.iter().map(content).collect();
            let last_user = messages
                .iter()
                .rev()
                .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
                .map(content)
                .unwrap_or_default();
            (all.join("\n"), last_user)
        }
    };
    // `think` (server/routes.go GenerateHandler/ChatHandler): a string only for harmony
    // models, true for a model without the capability is a 400, absent means true from
    // 0.12.4 on for a model that can think.
    let version = crate::ollama_version::OllamaVersion::parse(&rt.spec.profile.ollama_version)
        .unwrap_or(crate::ollama_version::OllamaVersion(0, 12, 6));
    let thinking = match body.get("think") {
        Some(Value::String(v)) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("think value {v:?} is not supported for this model"),
            );
        }
        Some(Value::Bool(true)) if !model.thinking => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("{name:?} does not support thinking"),
            );
        }
        Some(Value::Bool(true)) => Thinking::Separate,
        Some(Value::Bool(false)) => Thinking::None,
        _ if !model.thinking => Thinking::None,
        _ if version.thinks_by_default() => Thinking::Separate,
        _ => Thinking::Inline,
    };
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(true);
    let generation = Generation {
        api,
        model,
        prompt,
        question,
        keep_alive,
        received,
        thinking,
    };
    let (tx, rx) = futures::channel::mpsc::unbounded::<Line>();
    // The work runs in its own task so residency bookkeeping completes even if the client
    // goes away.
    tokio::spawn(run_generation(rt.clone(), generation, tx));
    if stream {
        // Each line is written as the connection task takes it from the channel, as Ollama's
        // `streamResponse` writes each value it receives from the generating goroutine
        // (server/routes.go: `val, ok := <-ch` … `w.Write(bts)`): the answer's truth is
        // stamped there, just before its bytes go to the socket.
        let body = Body::from_stream(rx.map(|line| {
            let (value, due) = match line {
                Line::Chunk(v) => (v, None),
                Line::Done(v, due) => (v, due),
                Line::Failed(_, message) => (json!({ "error": message }), None),
            };
            let bytes = format!("{value}\n");
            if let Some(due) = due {
                due.now();
            }
            Ok::<_, io::Error>(bytes)
        }));
        ([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response()
    } else {
        let mut rx = rx;
        let mut text = String::new();
        let mut thinking = String::new();
        while let Some(line) = rx.next().await {
            match line {
                Line::Chunk(v) => {
                    text.push_str(api.text_of(&v));
                    thinking.push_str(api.thinking_of(&v));
                }
                Line::Done(v, due) => {
                    text.push_str(api.text_of(&v));
                    let mut v = api.with_text(v, &text);
                    if !thinking.is_empty() {
                        match api {
                            Api::Generate => v["thinking"] = json!(thinking),
                            Api::Chat => v["message"]["thinking"] = json!(thinking),
                        }
                    }
                    // Built first: the truth is the instant the handler hands it over.
                    let response = axum::Json(v).into_response();
                    if let Some(due) = due {
                        due.now();
                    }
                    return response;
                }
                Line::Failed(status, message) => return error(status, message),
            }
        }
        error(StatusCode::INTERNAL_SERVER_ERROR, KILLED)
    }
}

/// How long a runner told to unload takes to exit after the reply (a killed process that
/// mapped a model file: tens of milliseconds). Not scaled by the lab's speed: it models the
/// order of reply and unload, which a client must not confuse at any speed.
const RUNNER_EXIT: Duration = Duration::from_millis(100);

async fn run_generation(rt: Rt, g: Generation, tx: futures::channel::mpsc::UnboundedSender<Line>) {
    let name = g.model.name.clone();
    let api = g.api;
    let fail = |e: RunError| {
        let message = match e {
            RunError::Killed => KILLED.to_string(),
            RunError::Stopped => "runtime stopped".to_string(),
            // llm/server.go (Ollama ≥ 0.13), figures as format.HumanBytes2 prints them.
            RunError::InsufficientMemory {
                required,
                available,
            } => format!(
                "model requires more system memory ({}) than is available ({})",
                human_bytes2(required),
                human_bytes2(available)
            ),
        };
        Line::Failed(StatusCode::INTERNAL_SERVER_ERROR, message)
    };
    // Transport time outside Ollama (port-forward, proxies), calibrated per profile.
    let overhead = rt.sample(&rt.spec.profile.request_overhead);
    if let Err(e) = rt.sleep_alive(overhead).await {
        let _ = tx.unbounded_send(fail(e));
        return;
    }
    let start = Instant::now();

    if g.prompt.is_empty() && g.keep_alive == KeepAlive::For(Duration::ZERO) {
        // The reply comes first, the unload after it, as in Ollama: `GenerateHandler` answers
        // right after `sched.expireRunner` (server/routes.go), and the scheduler removes the
        // model from `loaded` (what `/api/ps` lists) only once the runner process has exited
        // (server/sched.go, llm/llama_server.go `stopProcess`).
        let done = json!({ "done": true, "done_reason": "unload" });
        let _ = tx.unbounded_send(Line::Done(api.line(&name, "", done), None));
        // The handler has returned: the response (streamed or not) ends here.
        drop(tx);
        if rt.sleep_alive(RUNNER_EXIT).await.is_ok() {
            rt.unload(&name);
        }
        return;
    }

    let load = match rt.acquire(&g.model, g.keep_alive).await {
        Ok(d) => d,
        Err(e) => {
            let _ = tx.unbounded_send(fail(e));
            return;
        }
    };
    if g.prompt.is_empty() {
        rt.release(&name, g.keep_alive);
        let done = json!({ "done": true, "done_reason": "load" });
        let _ = tx.unbounded_send(Line::Done(api.line(&name, "", done), None));
        return;
    }

    let result = async {
        let prompt_start = Instant::now();
        rt.sleep_alive(rt.sample(&g.model.prompt_eval)).await?;
        let prompt_eval = prompt_start.elapsed();

        let eval_start = Instant::now();
        let mut text = answer(&g.question);
        let mut think_toks = Vec::new();
        match g.thinking {
            Thinking::None => {}
            Thinking::Separate => think_toks = tokens(&thought(&g.question)),
            Thinking::Inline => {
                text = format!("<think>\n{}\n</think>\n\n{text}", thought(&g.question))
            }
        }
        let toks = tokens(&text);
        let eval_total = rt.sample(&g.model.eval);
        let step = eval_total / ((toks.len() + think_toks.len()) as u32 + 1);
        // Thinking first, then the answer (as Ollama's parsers split the model's output).
        for tok in &think_toks {
            let _ = tx.unbounded_send(Line::Chunk(api.thinking_line(&name, tok)));
            rt.sleep_alive(step).await?;
        }
        for (i, tok) in toks.iter().enumerate() {
            let chunk = api.line(&name, tok, json!({ "done": false }));
            let _ = tx.unbounded_send(Line::Chunk(chunk));
            if i == 0 && rt.spec.faults.take_crash_mid_inference() {
                // Lab fault: the process dies mid-stream (see `RuntimeFaults`).
                rt.crash(2);
            }
            rt.sleep_alive(step).await?;
        }
        rt.sleep_alive(step).await?;
        Ok::<_, RunError>((
            prompt_eval,
            eval_start.elapsed(),
            (toks.len() + think_toks.len()) as u64 + 1,
        ))
    }
    .await;
    rt.release(&name, g.keep_alive);
    let (prompt_eval, eval, eval_count) = match result {
        Ok(r) => r,
        Err(e) => {
            let _ = tx.unbounded_send(fail(e));
            return;
        }
    };
    let prompt_eval_count = prompt_tokens(&g.prompt);
    let total = start.elapsed();
    let mut done = json!({
        "done": true,
        "done_reason": "stop",
        "total_duration": ns(total),
        "load_duration": ns(load),
        "prompt_eval_count": prompt_eval_count,
        "prompt_eval_duration": ns(prompt_eval),
        "eval_count": eval_count,
        "eval_duration": ns(eval),
    });
    if api == Api::Generate
        && let Some(obj) = done.as_object_mut()
    {
        // Token ids of the conversation, which /api/generate returns (deprecated upstream).
        let context: Vec<u64> = (0..prompt_eval_count + eval_count)
            .map(|i| 128_000 + (i * 7919) % 1000)
            .collect();
        obj.insert("context".into(), json!(context));
    }
    let line = api.line(&name, "", done);
    let due = rt.spec.ground_truth.due(
        &rt.spec.pod_name,
        Transition::InferenceDone,
        json!({
            "model": name,
            "total_ms": total.as_secs_f64() * 1000.0,
            "load_ms": load.as_secs_f64() * 1000.0,
            "wall_ms": g.received.elapsed().as_secs_f64() * 1000.0,
        }),
    );
    let _ = tx.unbounded_send(Line::Done(line, Some(due)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_alive_accepts_numbers_strings_and_negative_forever() {
        assert_eq!(parse_keep_alive(None), Ok(KeepAlive::DEFAULT));
        assert_eq!(
            parse_keep_alive(Some(&json!(0))),
            Ok(KeepAlive::For(Duration::ZERO))
        );
        assert_eq!(
            parse_keep_alive(Some(&json!("10m"))),
            Ok(KeepAlive::For(Duration::from_secs(600)))
        );
        assert_eq!(parse_keep_alive(Some(&json!(-1))), Ok(KeepAlive::Forever));
        assert_eq!(
            parse_keep_alive(Some(&json!("-1m"))),
            Ok(KeepAlive::Forever)
        );
        assert!(parse_keep_alive(Some(&json!([1]))).is_err());
    }

    proptest::proptest! {
        #[test]
        fn durations_and_prompts_never_panic(text in "\\PC{0,40}") {
            let _ = readygap_core::units::parse_go_duration(&text);
            let _ = parse_keep_alive(Some(&json!(text)));
            let _ = tokens(&answer(&text));
            let _ = prompt_tokens(&text);
        }
    }

    #[test]
    fn ready_prompt_answers_ready() {
        assert_eq!(answer("Reply with exactly: READY"), "READY");
        assert_eq!(tokens("READY"), vec!["READY"]);
        assert_eq!(tokens("a b"), vec!["a", " b"]);
        assert!(answer("hello").contains("lab runtime"));
    }
}
