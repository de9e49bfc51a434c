//! The Ollama adapter: probe (`GET /api/tags` by default), residency (`GET /api/ps`), models
//! on disk (`GET /api/tags`), streamed `POST /api/generate` (NDJSON chunks; the first chunk
//! with text, thinking or a tool call is the first token, the chunk with `done: true`
//! carries Ollama's durations in ns), and unload (`keep_alive: 0`). Parsing is in pure
//! functions over the JSON bodies.
//!
//! Thinking: since Ollama 0.12.4 a model that can think does so unless the request says
//! `"think": false` (server/routes.go GenerateHandler sets `req.Think` to true when absent);
//! its chunks carry `"thinking"` with an empty `"response"` (api/types.go
//! GenerateResponse.Thinking, ChatResponse.Message.Thinking / ToolCalls). `think` is sent only
//! when the user gave `--think`, so the default is the model's own behaviour.

use super::stream::{self, Fold, Lines, Progress, error_message};
use super::{Answer, PodRef, Reach, RuntimeAccess, RuntimeAdapter, RuntimeKind, get_json};
use futures::future::BoxFuture;
use readygap_core::event::{
    DiskModel, InferenceResult, ResidentModel, RuntimeDurations, RuntimeProbe,
};
use serde_json::Value;
use std::time::Duration;

/// The Ollama adapter over an access mode.
#[derive(Clone)]
pub struct Ollama {
    /// Probed for T2 at `/api/tags` by default, as in the study.
    pub reach: Reach,
    /// `think` of generate requests (`--think`); `None` leaves it out.
    pub think: Option<bool>,
}

impl Ollama {
    pub fn new(access: RuntimeAccess) -> Self {
        let reach = Reach::new(access, RuntimeKind::Ollama);
        Self { reach, think: None }
    }
}

fn parse_ts(v: &Value) -> Option<readygap_core::event::Timestamp> {
    v.as_str()
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&chrono::Utc))
}

/// The `models` of an answer of `route`: each one's name (`name`, else `model`), size and
/// JSON object.
fn models<'v>(v: &'v Value, route: &str) -> Result<Vec<(String, u64, &'v Value)>, String> {
    let models = v["models"]
        .as_array()
        .ok_or_else(|| format!("{route}: no \"models\" array"))?;
    Ok(models
        .iter()
        .map(|m| {
            let name = m["name"].as_str().or(m["model"].as_str());
            let size = m["size"].as_u64().unwrap_or(0);
            (name.unwrap_or_default().to_string(), size, m)
        })
        .collect())
}

/// Models of an `/api/ps` answer.
pub fn parse_ps(v: &Value) -> Result<Vec<ResidentModel>, String> {
    Ok(models(v, "/api/ps")?
        .into_iter()
        .map(|(name, size, m)| ResidentModel {
            name,
            size,
            size_vram: m["size_vram"].as_u64().unwrap_or(0),
            expires_at: parse_ts(&m["expires_at"]),
            ..Default::default()
        })
        .collect())
}

/// Models of an `/api/tags` answer.
pub fn parse_tags(v: &Value) -> Result<Vec<DiskModel>, String> {
    Ok(models(v, "/api/tags")?
        .into_iter()
        .map(|(name, size, _)| DiskModel { name, size })
        .collect())
}

/// Folds the NDJSON chunks of a streamed `/api/generate` (or `/api/chat`).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct GenerateStream {
    pub response: String,
    /// The model's thinking, apart from the answer.
    pub thinking: String,
    pub first_token_seen: bool,
    pub done: bool,
    pub error: Option<String>,
    pub durations: RuntimeDurations,
    lines: Lines,
}

impl Fold for GenerateStream {
    fn lines(&mut self) -> &mut Lines {
        &mut self.lines
    }
    fn fail(&mut self, e: String) {
        self.error.get_or_insert(e);
    }
    fn line(&mut self, line: &[u8]) -> Progress {
        let mut p = Progress::default();
        let line = line.trim_ascii();
        if line.is_empty() {
            return p;
        }
        let v: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => {
                self.fail(format!("invalid chunk: {e}"));
                return p;
            }
        };
        if let Some(e) = v["error"].as_str() {
            self.error = Some(e.to_string());
        }
        // `/api/generate` puts text in `response`, `/api/chat` in `message.content`.
        let msg = &v["message"];
        let text = v["response"].as_str().or(msg["content"].as_str());
        let thinking = v["thinking"].as_str().or(msg["thinking"].as_str());
        let tool_calls = v["tool_calls"]
            .as_array()
            .or(msg["tool_calls"].as_array())
            .is_some_and(|c| !c.is_empty());
        let token = text.is_some_and(|t| !t.is_empty())
            || thinking.is_some_and(|t| !t.is_empty())
            || tool_calls;
        if token && !self.first_token_seen {
            self.first_token_seen = true;
            p.first_token = true;
        }
        self.response.push_str(text.unwrap_or_default());
        self.thinking.push_str(thinking.unwrap_or_default());
        if v["done"].as_bool() == Some(true) && !self.done {
            self.done = true;
            p.done = true;
            self.durations = RuntimeDurations {
                total_ns: v["total_duration"].as_u64(),
                load_ns: v["load_duration"].as_u64(),
                prompt_eval_ns: v["prompt_eval_duration"].as_u64(),
                eval_ns: v["eval_duration"].as_u64(),
                ..Default::default()
            };
        }
        p
    }
    fn done(&self) -> bool {
        self.done
    }
    fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }
    fn answer(self) -> (String, RuntimeDurations) {
        (self.response, self.durations)
    }
    /// Ollama's `{"error": "…"}` (or the pod proxy's `Status` message).
    fn http_error(status: u16, body: &[u8]) -> String {
        error_message(body).unwrap_or_else(|| format!("HTTP {status}"))
    }
}

/// The body of a streamed generate request; `think` only when given (absent: the model's
/// own behaviour, as the user's clients see it).
pub fn generate_body(model: &str, prompt: &str, think: Option<bool>) -> Vec<u8> {
    let mut body = serde_json::json!({"model": model, "prompt": prompt, "stream": true});
    if let Some(t) = think {
        body["think"] = Value::Bool(t);
    }
    body.to_string().into_bytes()
}

/// The body of an unload request.
pub fn unload_body(model: &str) -> Vec<u8> {
    serde_json::json!({"model": model, "keep_alive": 0})
        .to_string()
        .into_bytes()
}

impl RuntimeAdapter for Ollama {
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
        Box::pin(async move { parse_ps(&get_json(&self.reach.access, pod, "/api/ps").await?) })
    }

    fn models_on_disk<'a>(&'a self, pod: &'a PodRef) -> Answer<'a, Vec<DiskModel>> {
        Box::pin(async move { parse_tags(&get_json(&self.reach.access, pod, "/api/tags").await?) })
    }

    fn generate<'a>(
        &'a self,
        pod: &'a PodRef,
        model: &'a str,
        prompt: &'a str,
        request_id: u64,
        first_token: Box<dyn FnOnce() + Send + 'a>,
    ) -> BoxFuture<'a, InferenceResult> {
        Box::pin(stream::post::<GenerateStream>(
            &self.reach,
            pod,
            "/api/generate",
            generate_body(model, prompt, self.think),
            request_id,
            first_token,
            "done: true",
        ))
    }

    fn unload<'a>(&'a self, pod: &'a PodRef, model: &'a str) -> Answer<'a, ()> {
        Box::pin(async move {
            let body = Some(unload_body(model));
            let access = &self.reach.access;
            let fut = access.fetch(pod, http::Method::POST, "/api/generate", body);
            match tokio::time::timeout(Duration::from_secs(30), fut).await {
                Err(_) => Err(format!("unload {model}: no answer within 30 s")),
                Ok(Ok((200, _))) => Ok(()),
                Ok(Ok((status, body))) => Err(format!(
                    "unload {model}: HTTP {status}: {}",
                    super::head(&body, 200)
                )),
                Ok(Err(e)) => Err(e),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sources::runtime::HttpResponse;
    use chrono::Utc;
    use futures::StreamExt;

    /// T4 is the arrival of the chunk that ends the answer, stamped before it is parsed: here
    /// one chunk carries the first token and `done`, and the stamp precedes the first-token
    /// callback that parsing it runs.
    #[tokio::test]
    async fn the_end_of_an_answer_is_stamped_when_its_chunk_arrives() {
        let sent = std::sync::Arc::new(std::sync::Mutex::new(None));
        let s2 = sent.clone();
        let chunk = br#"{"model":"m","response":"hi","done":true,"total_duration":5}"#.to_vec();
        let body = futures::stream::once(async move {
            *s2.lock().unwrap() = Some(Utc::now());
            Ok(hyper::body::Bytes::from([chunk, b"\n".to_vec()].concat()))
        })
        .chain(futures::stream::pending());
        let resp = HttpResponse {
            status: 200,
            body: Box::pin(body),
            arrival: None,
        };
        let parsed = std::sync::Arc::new(std::sync::Mutex::new(None));
        let p2 = parsed.clone();
        // The stream never ends after `done`: the reader must stop at `done`.
        let r = tokio::time::timeout(
            Duration::from_secs(10),
            stream::read::<GenerateStream>(
                resp,
                1,
                Box::new(move || *p2.lock().unwrap() = Some(Utc::now())),
                "done: true",
            ),
        )
        .await
        .expect("the reader stops at done: true");
        assert!(r.ok, "{r:?}");
        let (sent, done, parsed) = (
            sent.lock().unwrap().unwrap(),
            r.done_at.expect("stamped"),
            parsed.lock().unwrap().expect("first token seen"),
        );
        assert!(sent <= done && done <= parsed, "{sent} {done} {parsed}");
    }

    #[test]
    fn a_stream_that_never_ends_a_line_is_an_error_and_its_buffer_is_dropped() {
        let mut s = GenerateStream::default();
        let junk = vec![b'x'; 1 << 20];
        for _ in 0..(stream::MAX_LINE >> 20) {
            s.push(&junk);
            assert!(s.error.is_none());
        }
        s.push(&junk);
        assert!(
            s.lines.capacity() < (1 << 20),
            "buffer kept: {}",
            s.lines.capacity()
        );
        assert!(s.error.as_deref().unwrap().contains("longer than 8 MiB"));
        // The stream goes on: a later whole line is still read.
        let p = s.push(b"{\"response\":\"hi\",\"done\":true}\n");
        assert!(p.first_token && p.done);
        assert_eq!(s.response, "hi");
    }

    #[test]
    fn a_long_line_that_does_end_is_read() {
        let mut s = GenerateStream::default();
        let text = "y".repeat(stream::MAX_LINE + 10);
        let line = format!("{{\"response\":\"{text}\"}}\n");
        let p = s.push(line.as_bytes());
        assert!(p.first_token);
        assert_eq!(s.response.len(), text.len());
        assert!(s.error.is_none());
    }
}
