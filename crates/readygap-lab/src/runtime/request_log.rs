//! The runtime container's log: what Ollama writes to stdout, so `kubectl logs` (the lab's
//! `pods/log`) shows it. Ollama's HTTP server is a gin engine with gin's default logger
//! (ollama/ollama `server/routes.go` GenerateRoutes builds it with `gin.Default()`), which
//! writes one line per request when the handler returns (gin-gonic/gin `logger.go`,
//! `defaultLogFormatter`, no colours when stdout is not a terminal):
//!
//! ```text
//! [GIN] 2006/01/02 - 15:04:05 | 200 |  3.267612345s |       127.0.0.1 | POST     "/api/generate"
//! ```
//!
//! `%3d` status, `%13v` latency (Go's `Duration.String`), `%15s` client IP, `%-7s` method,
//! `%#v` path (a quoted Go string). The line is stamped when it is written, i.e. when the
//! response ended: with `timestamps=true` the kubelet prefixes that instant (RFC 3339 with
//! nanoseconds), which is T4 of the request, and T4 − latency its start.

use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use chrono::{DateTime, Utc};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Lines with the instant each was written, and whether the container stopped.
type Lines = (Vec<(DateTime<Utc>, String)>, bool);

/// The lines a container wrote, with the instant of each, and a wake-up for followers.
#[derive(Default)]
pub struct ContainerLog {
    lines: Mutex<Lines>,
    grew: Notify,
}

impl ContainerLog {
    pub fn new() -> Self {
        Self::default()
    }

    /// Append one line (without its newline), stamped `at`.
    pub fn write(&self, at: DateTime<Utc>, line: String) {
        if let Ok(mut l) = self.lines.lock() {
            l.0.push((at, line));
        }
        self.grew.notify_waiters();
    }

    /// The container stopped: followers end after the last line.
    pub fn close(&self) {
        if let Ok(mut l) = self.lines.lock() {
            l.1 = true;
        }
        self.grew.notify_waiters();
    }

    /// Lines from index `from` on, and whether the log is closed.
    pub fn since(&self, from: usize) -> (Vec<(DateTime<Utc>, String)>, bool) {
        match self.lines.lock() {
            Ok(l) => (l.0.get(from..).unwrap_or(&[]).to_vec(), l.1),
            Err(_) => (Vec::new(), true),
        }
    }

    /// Wait until a line is written after index `seen` (or the log closes).
    pub async fn wait_past(&self, seen: usize) {
        loop {
            let notified = self.grew.notified();
            let (more, closed) = self.since(seen);
            if !more.is_empty() || closed {
                return;
            }
            notified.await;
        }
    }
}

/// The peer of a connection (the client IP gin logs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer(pub SocketAddr);

impl
    axum::extract::connect_info::Connected<
        axum::serve::IncomingStream<'_, super::listener::KillableListener>,
    > for Peer
{
    fn connect_info(s: axum::serve::IncomingStream<'_, super::listener::KillableListener>) -> Self {
        Peer(*s.remote_addr())
    }
}

/// Go's `time.Duration.String()`: `812ns`, `1.5µs`, `3.2676ms`, `3.267612345s`, `1m2.5s`.
pub fn go_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    let trim = |whole: u128, frac: u128, digits: usize, unit: &str| {
        let f = format!("{frac:0digits$}");
        let f = f.trim_end_matches('0');
        if f.is_empty() {
            format!("{whole}{unit}")
        } else {
            format!("{whole}.{f}{unit}")
        }
    };
    if ns == 0 {
        "0s".into()
    } else if ns < 1_000 {
        format!("{ns}ns")
    } else if ns < 1_000_000 {
        trim(ns / 1_000, ns % 1_000, 3, "µs")
    } else if ns < 1_000_000_000 {
        trim(ns / 1_000_000, ns % 1_000_000, 6, "ms")
    } else {
        let secs = ns / 1_000_000_000;
        let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
        let sec = trim(s, ns % 1_000_000_000, 9, "s");
        match (h, m) {
            (0, 0) => sec,
            (0, m) => format!("{m}m{sec}"),
            (h, m) => format!("{h}h{m}m{sec}"),
        }
    }
}

/// One request line in gin's default format.
pub fn gin_line(
    at: DateTime<Utc>,
    status: u16,
    latency: Duration,
    client: &str,
    method: &str,
    path: &str,
) -> String {
    // gin truncates latencies above a minute to whole seconds.
    let latency = if latency > Duration::from_secs(60) {
        Duration::from_secs(latency.as_secs())
    } else {
        latency
    };
    format!(
        "[GIN] {} | {status:3} | {:>13} | {client:>15} | {method:<7} {path:?}",
        at.format("%Y/%m/%d - %H:%M:%S"),
        go_duration(latency),
    )
}

/// The middleware: one gin line per request, written when the response (a streamed body
/// too) has ended.
pub(crate) async fn log_request(
    State(rt): State<Arc<super::Runtime>>,
    request: Request,
    next: Next,
) -> Response {
    let start = Instant::now();
    let client = request
        .extensions()
        .get::<ConnectInfo<Peer>>()
        .map(|c| c.0.0.ip().to_string())
        .unwrap_or_default();
    let method = request.method().to_string();
    let path = match request.uri().query() {
        Some(q) => format!("{}?{q}", request.uri().path()),
        None => request.uri().path().to_string(),
    };
    let response = next.run(request).await;
    let status = response.status().as_u16();
    let log = rt.log.clone();
    let (parts, body) = response.into_parts();
    // The line is written when the body ends (gin's handler returns after writing it).
    let body = axum::body::Body::new(EndOfBody {
        inner: body,
        on_end: Some(Box::new(move || {
            let now = Utc::now();
            log.write(
                now,
                gin_line(now, status, start.elapsed(), &client, &method, &path),
            );
        })),
    });
    Response::from_parts(parts, body)
}

/// A body that calls `on_end` once, when it ends or is dropped.
struct EndOfBody {
    inner: axum::body::Body,
    on_end: Option<Box<dyn FnOnce() + Send>>,
}

impl hyper::body::Body for EndOfBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let r = hyper::body::Body::poll_frame(std::pin::Pin::new(&mut self.inner), cx);
        if matches!(
            r,
            std::task::Poll::Ready(None) | std::task::Poll::Ready(Some(Err(_)))
        ) && let Some(f) = self.on_end.take()
        {
            f();
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        hyper::body::Body::is_end_stream(&self.inner)
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::Body::size_hint(&self.inner)
    }
}

impl Drop for EndOfBody {
    fn drop(&mut self) {
        if let Some(f) = self.on_end.take() {
            f();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_like_go() {
        assert_eq!(go_duration(Duration::from_nanos(812)), "812ns");
        assert_eq!(go_duration(Duration::from_nanos(1_500)), "1.5µs");
        assert_eq!(go_duration(Duration::from_micros(32_676)), "32.676ms");
        assert_eq!(
            go_duration(Duration::from_nanos(3_267_612_345)),
            "3.267612345s"
        );
        assert_eq!(go_duration(Duration::from_secs(2)), "2s");
        assert_eq!(go_duration(Duration::from_millis(62_500)), "1m2.5s");
        assert_eq!(go_duration(Duration::ZERO), "0s");
    }

    #[test]
    fn a_line_is_gins() {
        let at = "2025-06-01T10:00:03Z".parse().unwrap();
        assert_eq!(
            gin_line(
                at,
                200,
                Duration::from_nanos(3_267_612_345),
                "10.0.0.1",
                "POST",
                "/api/generate"
            ),
            "[GIN] 2025/06/01 - 10:00:03 | 200 |  3.267612345s |        10.0.0.1 | POST    \"/api/generate\""
        );
    }
}
