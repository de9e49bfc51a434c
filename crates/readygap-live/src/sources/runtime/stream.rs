//! A streamed generation read off the wire, the same for every adapter: the body cut into
//! lines (pieces split anywhere, a line bounded), what each piece revealed ([`Progress`]),
//! and [`post`], which sends the request and reads the answer to its end within a timeout,
//! calls back on the first token and stamps the end on the arrival of the last chunk (T4).
//! What the lines mean is each format's [`Fold`]: Ollama's NDJSON
//! ([`super::ollama::GenerateStream`]), server-sent events ([`super::sse::Completion`]).

use super::{HttpResponse, PodRef, Reach};
use chrono::Utc;
use futures::StreamExt;
use readygap_core::event::{InferenceResult, RuntimeDurations};

/// The longest line kept while waiting for its newline (Ollama's chunks and SSE lines are a
/// few hundred bytes; a whole non-streamed answer stays far below this).
pub const MAX_LINE: usize = 8 << 20;

/// How much of a failed answer's body is kept for its message.
const MAX_ERROR_BODY: usize = 64 << 10;

/// What one pushed piece of the stream revealed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// The first token arrived in this piece.
    pub first_token: bool,
    /// The answer's end arrived in this piece.
    pub done: bool,
}

impl std::ops::BitOrAssign for Progress {
    fn bitor_assign(&mut self, o: Progress) {
        self.first_token |= o.first_token;
        self.done |= o.done;
    }
}

/// Bytes kept until their line ends. Lines are cut at `\n` bytes and decoded whole: a `\n`
/// byte never occurs inside a multi-byte UTF-8 character, so a piece ending inside one
/// keeps it for the next piece.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Lines {
    partial: Vec<u8>,
}

impl Lines {
    /// Add a piece. A runtime that never ends a line (a broken proxy, a wrong port) must not
    /// grow the buffer without bound: an unended line longer than any real one is dropped
    /// with an error, and the lines after it are still read.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.partial.extend_from_slice(bytes);
        if self.partial.len() > MAX_LINE && !self.partial.contains(&b'\n') {
            self.partial = Vec::new();
            return Err(format!(
                "invalid stream: a line longer than {} MiB",
                MAX_LINE >> 20
            ));
        }
        Ok(())
    }

    /// The next whole line, with its `\n`.
    pub fn next_line(&mut self) -> Option<Vec<u8>> {
        let nl = self.partial.iter().position(|b| *b == b'\n')?;
        Some(self.partial.drain(..=nl).collect())
    }

    /// What is left: a last line without its newline.
    pub fn rest(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.partial)
    }

    /// The bytes the buffer holds room for.
    pub fn capacity(&self) -> usize {
        self.partial.capacity()
    }
}

/// The fold of one streamed answer in one format, line by line.
pub trait Fold: Default {
    /// The buffer of the line not yet ended.
    fn lines(&mut self) -> &mut Lines;
    /// Keep `e` as the answer's error, unless one came first.
    fn fail(&mut self, e: String);
    /// One line: with its `\n`, or the last one without.
    fn line(&mut self, line: &[u8]) -> Progress;
    /// Feed a piece of the body (pieces may split lines, and characters, anywhere).
    fn push(&mut self, bytes: &[u8]) -> Progress {
        let mut p = Progress::default();
        if let Err(e) = self.lines().push(bytes) {
            self.fail(e);
        }
        while let Some(line) = self.lines().next_line() {
            p |= self.line(&line);
        }
        p
    }
    /// The body ended: what is left in the buffers (a last line without its newline).
    fn finish(&mut self) -> Progress {
        let rest = self.lines().rest();
        self.line(&rest)
    }
    /// The answer's end was seen.
    fn done(&self) -> bool;
    /// The first error the answer carried.
    fn error(&self) -> Option<&str>;
    /// The text and the runtime's own figures.
    fn answer(self) -> (String, RuntimeDurations);
    /// The message of an answer that is not HTTP 200, from its body.
    fn http_error(status: u16, body: &[u8]) -> String;
}

/// `POST body` to `path` and read the streamed answer as `F` within the reach's
/// `generate_timeout`; `first_token` is called when the first token arrives; `ends` names
/// what a complete answer ends with, for the messages ("done: true").
pub async fn post<F: Fold>(
    reach: &Reach,
    pod: &PodRef,
    path: &str,
    body: Vec<u8>,
    request_id: u64,
    first_token: Box<dyn FnOnce() + Send + '_>,
    ends: &str,
) -> InferenceResult {
    let timeout = reach.generate_timeout;
    let failed = |error: String| InferenceResult {
        request_id,
        ok: false,
        error: Some(error),
        ..InferenceResult::default()
    };
    let fut = async {
        match reach.access.post_timed(pod, path, body).await {
            Ok(resp) => read::<F>(resp, request_id, first_token, ends).await,
            Err(e) => failed(e),
        }
    };
    tokio::time::timeout(timeout, fut)
        .await
        .unwrap_or_else(|_| failed(format!("timeout: no {ends} within {timeout:?}")))
}

/// Read a streamed answer to its end: the first token calls `first_token`, the piece that
/// ends it is the end (T4, stamped when the piece arrived, before parsing), and the reader
/// stops there even if the body stays open.
pub async fn read<F: Fold>(
    mut resp: HttpResponse,
    request_id: u64,
    first_token: Box<dyn FnOnce() + Send + '_>,
    ends: &str,
) -> InferenceResult {
    let status = resp.status;
    let mut fold = F::default();
    let mut first = Some(first_token);
    let (mut transport_error, mut done_at, mut raw) = (None, None, Vec::new());
    while let Some(chunk) = resp.body.next().await {
        // The kernel's receive time when the connection keeps it, never after now.
        let now = Utc::now();
        let arrived = resp
            .arrival
            .as_ref()
            .and_then(super::arrival::Arrival::last)
            .map_or(now, |t| t.min(now));
        match chunk {
            Ok(b) if status != 200 => {
                let room = MAX_ERROR_BODY.saturating_sub(raw.len());
                raw.extend_from_slice(&b[..b.len().min(room)]);
            }
            Ok(b) => {
                if fold.push(&b).first_token
                    && let Some(f) = first.take()
                {
                    f();
                }
                if fold.done() {
                    done_at = Some(arrived);
                    break;
                }
            }
            Err(e) => {
                transport_error = Some(e);
                break;
            }
        }
    }
    if status == 200 && !fold.done() {
        fold.finish();
    }
    let ok = status == 200 && fold.done() && fold.error().is_none();
    let error = if ok {
        None
    } else if status != 200 {
        Some(F::http_error(status, &raw))
    } else {
        Some(
            fold.error()
                .map(str::to_string)
                .or(transport_error)
                .unwrap_or_else(|| format!("stream ended without {ends}")),
        )
    };
    let (text, durations) = fold.answer();
    InferenceResult {
        request_id,
        ok,
        http_status: Some(status),
        error,
        durations,
        response: Some(text),
        done_at,
    }
}

/// The message of an error body: OpenAI's shape (`{"error":{"message":…}}`, llama-server
/// and vLLM alike), Ollama's `{"error":"…"}`, or a plain `{"message":…}` (the API server's
/// `Status`).
pub fn error_message(body: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    v["error"]["message"]
        .as_str()
        .or(v["error"].as_str())
        .or(v["message"].as_str())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_that_never_ends_is_dropped_and_the_next_one_is_read() {
        let mut l = Lines::default();
        let junk = vec![b'x'; 1 << 20];
        for _ in 0..(MAX_LINE >> 20) {
            assert_eq!(l.push(&junk), Ok(()));
        }
        assert!(l.push(&junk).unwrap_err().contains("longer than 8 MiB"));
        assert!(l.capacity() < (1 << 20), "buffer kept: {}", l.capacity());
        l.push(b"ok\nrest").unwrap();
        assert_eq!(l.next_line().as_deref(), Some(&b"ok\n"[..]));
        assert_eq!(l.next_line(), None);
        assert_eq!(l.rest(), b"rest");
    }

    #[test]
    fn a_long_line_that_does_end_is_kept_whole() {
        let mut l = Lines::default();
        let mut line = vec![b'y'; MAX_LINE + 10];
        line.push(b'\n');
        assert_eq!(l.push(&line), Ok(()));
        assert_eq!(l.next_line().map(|v| v.len()), Some(MAX_LINE + 11));
    }
}
