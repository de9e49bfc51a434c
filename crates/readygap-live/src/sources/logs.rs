//! The serving container's log (`pods/log`, `follow=true&timestamps=true`), followed by
//! [`tail`] three ways ([`Lines`]), each line stamped with the instant the kubelet says it
//! was written:
//! - for an observed trial, from its T0 (`sinceTime`): each request line becomes a
//!   `request_logged` event. That is how readygap sees someone else's inference without
//!   sending one (an observed trial's T3/T4).
//! - while the Log view is on (`L`): the last lines of the focused pod (`tailLines`) and
//!   every line after, each a `log_line` event; how the follower stands (following, ended
//!   with the container, cannot read and why) a `log_follow` event.
//! - for every running pod of the target, its start-up lines only (listening, model load
//!   begun and done, vLLM's phases), from its creation: the trial's secondary marks, the
//!   Timeline's ticks and the report's, whether or not the view is on (a few lines per
//!   container start); and the engine's GPU out-of-memory lines (`vram_overcommit`).
//!
//! What a line means is read in `readygap_core::runtime_log` (pure, with the formats).

use chrono::Utc;
use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::LogParams;
use readygap_core::event::{Event, EventKind, Source, Timestamp};
use readygap_core::runtime_log::{LogMark, mark};
pub use readygap_core::runtime_log::{go_duration_ms, parse_line};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Split `2026-12-01T22:40:00.1234Z rest` (the kubelet's `timestamps=true` prefix).
pub fn split_timestamp(line: &str) -> Option<(Timestamp, &str)> {
    let (ts, rest) = line.split_once(' ')?;
    let ts = chrono::DateTime::parse_from_rfc3339(ts)
        .ok()?
        .with_timezone(&chrono::Utc);
    Some((ts, rest))
}

/// Why the log of `pod` cannot be read, in the words of the request (RBAC names verb and
/// resource).
fn refusal(e: &kube::Error, namespace: &str, pod: &str) -> String {
    let req = crate::rbac::Request {
        verb: "get",
        group: "",
        resource: "pods/log",
        namespace: Some(namespace),
    };
    crate::rbac::explain_kube_error(e, &req).unwrap_or_else(|| format!("log of {pod}: {e}"))
}

/// Which lines of a container's log become events, and from where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lines {
    /// The Log view: the last N lines (`tailLines`), then every line, as `log_line`; how
    /// the follower stands is said (`log_follow`).
    Tail(i64),
    /// The start-up lines only (listening, model load begun and done) and GPU
    /// out-of-memory lines, as `log_line`, from this instant (`sinceTime`).
    StartupSince(Timestamp),
    /// The request lines only, as `request_logged`, from this instant (`sinceTime`): an
    /// observed trial's from its T0.
    RequestsSince(Timestamp),
}

/// A container log to follow.
#[derive(Debug, Clone)]
pub struct LogTail {
    pub namespace: String,
    pub pod: String,
    pub container: Option<String>,
    pub lines: Lines,
    /// Lines written at or before this are skipped: the store already holds them (the same
    /// pod followed again, after its container restarted or the view was turned off and on).
    pub after: Option<Timestamp>,
}

/// Follow one container's log until it ends (the container stopped), `cancel`, or an
/// error, sending its lines as [`Lines`] says.
pub async fn tail(
    client: kube::Client,
    t: LogTail,
    tx: mpsc::Sender<Event>,
    cancel: CancellationToken,
) {
    let api: kube::Api<Pod> = kube::Api::namespaced(client, &t.namespace);
    let mut lp = LogParams {
        container: t.container.clone(),
        follow: true,
        timestamps: true,
        ..LogParams::default()
    };
    let (view, since) = match t.lines {
        Lines::Tail(n) => {
            lp.tail_lines = Some(n);
            (true, None)
        }
        // sinceTime has whole seconds on the wire: ask from the second, skip before.
        Lines::StartupSince(since) | Lines::RequestsSince(since) => {
            lp.since_time = k8s_openapi::jiff::Timestamp::from_second(since.timestamp()).ok();
            (false, Some(since))
        }
    };
    // How the Log view's follower stands (the others say only that the log cannot be
    // read, once: no retry loop).
    let state = |error: Option<String>, following: bool| {
        let pod = t.pod.clone();
        let kind = match (view, error) {
            (true, error) => EventKind::LogFollow {
                pod,
                following,
                error,
            },
            (false, Some(message)) => EventKind::SourceError {
                feed: "logs".into(),
                message,
            },
            (false, None) => return None,
        };
        Some(Event::new(Utc::now(), Source::Log, kind))
    };
    let say = |ev: Option<Event>| {
        let tx = tx.clone();
        async move {
            match ev {
                Some(ev) => tx.send(ev).await.is_ok(),
                None => true,
            }
        }
    };
    let stream = tokio::select! {
        _ = cancel.cancelled() => return,
        s = api.log_stream(&t.pod, &lp) => s,
    };
    let stream = match stream {
        Ok(s) => s,
        Err(e) => {
            say(state(Some(refusal(&e, &t.namespace, &t.pod)), false)).await;
            return;
        }
    };
    if !say(state(None, true)).await {
        return;
    }
    let mut lines = std::pin::pin!(stream.lines());
    loop {
        let line = tokio::select! {
            _ = cancel.cancelled() => return,
            l = lines.next() => l,
        };
        let line = match line {
            Some(Ok(line)) => line,
            Some(Err(e)) => {
                say(state(Some(format!("log of {}: {e}", t.pod)), false)).await;
                return;
            }
            None => {
                say(state(None, false)).await;
                return;
            }
        };
        let Some((ts, text)) = split_timestamp(&line) else {
            continue;
        };
        if t.after.is_some_and(|after| ts <= after) || since.is_some_and(|s| ts < s) {
            continue;
        }
        let kind = match t.lines {
            Lines::Tail(_) => Some(text),
            Lines::StartupSince(_) => Some(text).filter(|l| {
                mark(l).is_some_and(|m| m.is_startup() || m == LogMark::GpuOutOfMemory)
            }),
            Lines::RequestsSince(_) => {
                if let Some(r) = parse_line(&t.pod, text) {
                    let ev = Event::new(ts, Source::Log, EventKind::RequestLogged(r));
                    if tx.send(ev).await.is_err() {
                        return;
                    }
                }
                None
            }
        };
        let Some(text) = kind else { continue };
        let (pod, text) = (t.pod.clone(), text.to_string());
        let ev = Event::new(ts, Source::Log, EventKind::LogLine { pod, text });
        if tx.send(ev).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubelet_prefix_is_split() {
        let (ts, rest) = split_timestamp("2026-12-01T22:40:00.1234Z [GIN] x").unwrap();
        assert_eq!(ts.timestamp_subsec_micros(), 123_400);
        assert_eq!(rest, "[GIN] x");
        assert!(split_timestamp("no timestamp").is_none());
    }
}
