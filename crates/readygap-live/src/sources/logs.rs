//! The runtime's request log: follows the serving container's log (`pods/log`,
//! `follow=true&timestamps=true&sinceTime=…`) and turns each request line into a
//! `request_logged` event stamped with the instant the kubelet says the line was written.
//! That is how readygap sees someone else's inference without sending one (an observed
//! trial's T3/T4). Parsing is pure ([`parse_line`]).
//!
//! Formats read:
//! - Ollama: gin's default logger (gin-gonic/gin `logger.go` `defaultLogFormatter`;
//!   ollama/ollama `server/routes.go` builds its router with `gin.Default()`):
//!   `[GIN] 2025/06/01 - 10:00:03 | 200 |  3.267612345s |  10.0.0.1 | POST  "/api/generate"`.
//!   The line is written when the handler returns, after the response: its instant is T4,
//!   T4 − latency (Go's `Duration.String`) is T3.
//! - llama.cpp server (ggml-org/llama.cpp `tools/server/server-http.cpp`,
//!   `log_server_request`, called after the response): `… request: POST /completion
//!   127.0.0.1 200` in older servers (info level), `… done request: POST …` at trace level
//!   in current ones, whose request logger is off unless enabled (verbose). The line has no
//!   latency: only T4.

use chrono::Utc;
use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::LogParams;
use readygap_core::event::{Event, EventKind, LoggedRequest, Source, Timestamp};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Go's `time.ParseDuration` for the forms `Duration.String` prints (`812ns`, `1.5µs`,
/// `3.2676ms`, `3.267612345s`, `1m2.5s`, `1h0m0s`), in milliseconds.
pub fn go_duration_ms(s: &str) -> Option<f64> {
    let s = s.trim();
    if s == "0" || s == "0s" {
        return Some(0.0);
    }
    let mut rest = s;
    let mut total = 0.0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return None;
        }
        let n: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let factor = match &rest[..unit_len] {
            "ns" => 1e-6,
            "us" | "µs" | "μs" => 1e-3,
            "ms" => 1.0,
            "s" => 1e3,
            "m" => 60e3,
            "h" => 3600e3,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += n * factor;
    }
    (!s.is_empty()).then_some(total)
}

/// Split `2026-12-01T22:40:00.1234Z rest` (the kubelet's `timestamps=true` prefix).
pub fn split_timestamp(line: &str) -> Option<(Timestamp, &str)> {
    let (ts, rest) = line.split_once(' ')?;
    let ts = chrono::DateTime::parse_from_rfc3339(ts)
        .ok()?
        .with_timezone(&chrono::Utc);
    Some((ts, rest))
}

/// One request line of `pod`'s runtime log (without the timestamp prefix), if it is one.
pub fn parse_line(pod: &str, text: &str) -> Option<LoggedRequest> {
    let text = text.trim_end();
    if let Some(gin) = text.strip_prefix("[GIN]") {
        let parts: Vec<&str> = gin.split('|').collect();
        if parts.len() < 5 {
            return None;
        }
        let status: u16 = parts[1].trim().parse().ok()?;
        let latency_ms = go_duration_ms(parts[2]);
        let client = Some(parts[3].trim().to_string()).filter(|c| !c.is_empty());
        let tail = parts[4..].join("|");
        let (method, path) = tail.trim().split_once(char::is_whitespace)?;
        let path = path.trim();
        let path = path
            .strip_prefix('"')
            .and_then(|p| p.strip_suffix('"'))
            .unwrap_or(path)
            .to_string();
        return Some(LoggedRequest {
            pod: pod.to_string(),
            method: method.to_string(),
            path,
            status,
            latency_ms,
            client,
        });
    }
    // llama.cpp: `... request: POST /completion 127.0.0.1 200`
    let (_, req) = text.split_once("request: ")?;
    let f: Vec<&str> = req.split_whitespace().collect();
    if f.len() < 4 || !f[0].chars().all(|c| c.is_ascii_uppercase()) {
        return None;
    }
    Some(LoggedRequest {
        pod: pod.to_string(),
        method: f[0].to_string(),
        path: f[1].to_string(),
        status: f[3].parse().ok()?,
        latency_ms: None,
        client: Some(f[2].to_string()),
    })
}

/// What to follow.
#[derive(Debug, Clone)]
pub struct LogFollow {
    pub namespace: String,
    pub pod: String,
    pub container: Option<String>,
    /// Lines written before this are skipped (the trial's T0).
    pub since: Timestamp,
}

/// Follow one container's log until it ends (the container stopped), `cancel`, or an
/// error (reported once as a `source_error` of the `logs` feed; no retry loop).
pub async fn follow(
    client: kube::Client,
    f: LogFollow,
    tx: mpsc::Sender<Event>,
    cancel: CancellationToken,
) {
    let api: kube::Api<Pod> = kube::Api::namespaced(client, &f.namespace);
    // sinceTime has whole seconds on the wire: ask from the second of T0.
    let since = k8s_openapi::jiff::Timestamp::from_second(f.since.timestamp()).ok();
    let lp = LogParams {
        container: f.container.clone(),
        follow: true,
        timestamps: true,
        since_time: since,
        ..LogParams::default()
    };
    let stream = tokio::select! {
        _ = cancel.cancelled() => return,
        s = api.log_stream(&f.pod, &lp) => s,
    };
    let stream = match stream {
        Ok(s) => s,
        Err(e) => {
            let message = crate::rbac::explain_kube_error(
                &e,
                &crate::rbac::Request {
                    verb: "get",
                    group: "",
                    resource: "pods/log",
                    namespace: Some(&f.namespace),
                },
            )
            .unwrap_or_else(|| format!("log of {}: {e}", f.pod));
            let feed = "logs".into();
            let ev = EventKind::SourceError { feed, message };
            let _ = tx.send(Event::new(Utc::now(), Source::Log, ev)).await;
            return;
        }
    };
    let mut lines = std::pin::pin!(stream.lines());
    loop {
        let line = tokio::select! {
            _ = cancel.cancelled() => return,
            l = lines.next() => l,
        };
        let Some(Ok(line)) = line else { return };
        let Some((ts, text)) = split_timestamp(&line) else {
            continue;
        };
        if ts < f.since {
            continue;
        }
        if let Some(r) = parse_line(&f.pod, text) {
            let ev = Event::new(ts, Source::Log, EventKind::RequestLogged(r));
            if tx.send(ev).await.is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse() {
        assert_eq!(go_duration_ms("3.2676s"), Some(3267.6));
        assert_eq!(go_duration_ms("  812µs"), Some(0.812));
        assert_eq!(go_duration_ms("1m2.5s"), Some(62_500.0));
        assert_eq!(go_duration_ms("15.2ms"), Some(15.2));
        assert_eq!(go_duration_ms("0s"), Some(0.0));
        assert_eq!(go_duration_ms("soon"), None);
        assert_eq!(go_duration_ms(""), None);
    }

    #[test]
    fn gin_lines_parse() {
        let r = parse_line(
            "p",
            "[GIN] 2025/06/01 - 10:00:03 | 200 |  3.2676s |        10.0.0.1 | POST     \"/api/generate\"",
        )
        .unwrap();
        assert_eq!(
            (r.method.as_str(), r.path.as_str(), r.status),
            ("POST", "/api/generate", 200)
        );
        assert_eq!(r.latency_ms, Some(3267.6));
        assert_eq!(r.client.as_deref(), Some("10.0.0.1"));
        assert!(r.is_inference());
        let r = parse_line(
            "p",
            "[GIN] 2025/06/01 - 10:00:03 | 500 |   1.1s | 127.0.0.1 | POST \"/api/chat\"",
        )
        .unwrap();
        assert_eq!(r.status, 500);
        let tags = parse_line(
            "p",
            "[GIN] 2025/06/01 - 10:00:03 | 200 | 512µs | 127.0.0.1 | GET \"/api/tags\"",
        )
        .unwrap();
        assert!(!tags.is_inference());
        assert!(parse_line("p", "time=2025 level=INFO msg=\"Listening\"").is_none());
        assert!(parse_line("p", "[GIN] garbage").is_none());
    }

    #[test]
    fn llama_cpp_lines_parse_without_latency() {
        let r = parse_line(
            "p",
            "srv  log_server_r: request: POST /completion 127.0.0.1 200",
        )
        .unwrap();
        assert_eq!(
            (r.method.as_str(), r.path.as_str(), r.status),
            ("POST", "/completion", 200)
        );
        assert_eq!(r.latency_ms, None);
        assert!(r.is_inference());
    }

    #[test]
    fn the_kubelet_prefix_is_split() {
        let (ts, rest) = split_timestamp("2026-12-01T22:40:00.1234Z [GIN] x").unwrap();
        assert_eq!(ts.timestamp_subsec_micros(), 123_400);
        assert_eq!(rest, "[GIN] x");
        assert!(split_timestamp("no timestamp").is_none());
    }
}
