//! `GET pods/NAME/log`: the container's stdout as the kubelet serves it through the API
//! server (kubelet `pkg/kubelet/kuberuntime/logs/logs.go` ReadLogs): `timestamps=true`
//! prefixes each line with the instant it was written in RFC 3339 with nanoseconds and
//! trailing zeros trimmed (Go's `time.RFC3339Nano`), `sinceTime` skips lines written
//! before it, `tailLines` keeps the last N, `follow=true` streams new lines until the
//! container stops. A container that is not running answers 400 "waiting to start" like
//! the real API server.

use super::resources::PODS;
use super::responses::error;
use super::server::Api;
use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use futures::StreamExt;

/// Go's RFC3339Nano of a UTC instant: `2026-12-01T22:40:00.1234Z`.
pub fn rfc3339_nano(t: DateTime<Utc>) -> String {
    let base = t.format("%Y-%m-%dT%H:%M:%S").to_string();
    let frac = format!("{:09}", t.timestamp_subsec_nanos());
    let frac = frac.trim_end_matches('0');
    if frac.is_empty() {
        format!("{base}Z")
    } else {
        format!("{base}.{frac}Z")
    }
}

/// The options of a log request that the lab honours.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct LogOptions {
    pub follow: bool,
    pub timestamps: bool,
    pub since: Option<DateTime<Utc>>,
    pub tail: Option<usize>,
}

impl LogOptions {
    pub fn parse(pairs: &[(String, String)]) -> Result<Self, String> {
        let get = |k: &str| {
            pairs
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        let truthy = |k: &str| get(k).is_some_and(|v| v == "true" || v == "1");
        let since = match get("sinceTime") {
            Some(s) => Some(
                DateTime::parse_from_rfc3339(s)
                    .map_err(|e| format!("sinceTime {s:?}: {e}"))?
                    .with_timezone(&Utc),
            ),
            None => None,
        };
        let tail = match get("tailLines") {
            Some(n) => Some(
                n.parse::<i64>()
                    .map_err(|e| format!("tailLines {n:?}: {e}"))?
                    .max(0) as usize,
            ),
            None => None,
        };
        Ok(Self {
            follow: truthy("follow"),
            timestamps: truthy("timestamps"),
            since,
            tail,
        })
    }

    fn line(&self, at: DateTime<Utc>, text: &str) -> String {
        if self.timestamps {
            format!("{} {text}\n", rfc3339_nano(at))
        } else {
            format!("{text}\n")
        }
    }
}

pub fn logs(api: &Api, ns: &str, name: &str, pairs: &[(String, String)]) -> Response {
    let opts = match LogOptions::parse(pairs) {
        Ok(o) => o,
        Err(e) => return error(400, "BadRequest", &e),
    };
    let Some(pod) = api.cluster.store.get(PODS, ns, name) else {
        return error(404, "NotFound", &format!("pods \"{name}\" not found"));
    };
    let container = pod["spec"]["containers"][0]["name"]
        .as_str()
        .unwrap_or("ollama")
        .to_string();
    let runtime = api
        .cluster
        .with_pod(ns, name, |e| e.runtime.clone())
        .flatten();
    let Some(runtime) =
        runtime.filter(|_| !pod["status"]["containerStatuses"][0]["state"]["running"].is_null())
    else {
        return error(
            400,
            "BadRequest",
            &format!(
                "container \"{container}\" in pod \"{name}\" is waiting to start: ContainerCreating"
            ),
        );
    };
    let log = runtime.log();
    let (lines, _) = log.since(0);
    let mut kept: Vec<(DateTime<Utc>, String)> = lines
        .into_iter()
        .filter(|(at, _)| opts.since.is_none_or(|s| *at >= s))
        .collect();
    if let Some(n) = opts.tail {
        let skip = kept.len().saturating_sub(n);
        kept.drain(..skip);
    }
    let seen = log.since(0).0.len().max(kept.len());
    let first: String = kept.iter().map(|(at, l)| opts.line(*at, l)).collect();
    if !opts.follow {
        return (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/plain")],
            first,
        )
            .into_response();
    }
    // Follow: what is there, then each new line until the container stops.
    let stream = futures::stream::once(async move { Ok::<_, std::io::Error>(first) })
        .chain(futures::stream::unfold(
            (log, seen, opts),
            |(log, seen, opts)| async move {
                log.wait_past(seen).await;
                let (more, closed) = log.since(seen);
                if more.is_empty() && closed {
                    return None;
                }
                let text: String = more
                    .iter()
                    .filter(|(at, _)| opts.since.is_none_or(|s| *at >= s))
                    .map(|(at, l)| opts.line(*at, l))
                    .collect();
                Some((Ok(text), (log, seen + more.len(), opts)))
            },
        ))
        .filter(|r| std::future::ready(r.as_ref().map_or(true, |t| !t.is_empty())));
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/plain")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| error(500, "InternalError", "log stream"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_gos_rfc3339_nano() {
        let t: DateTime<Utc> = "2026-12-01T22:40:00.123400Z".parse().unwrap();
        assert_eq!(rfc3339_nano(t), "2026-12-01T22:40:00.1234Z");
        let t: DateTime<Utc> = "2026-12-01T22:40:00Z".parse().unwrap();
        assert_eq!(rfc3339_nano(t), "2026-12-01T22:40:00Z");
    }

    #[test]
    fn options_parse_and_bad_ones_are_errors() {
        let p = |v: &[(&str, &str)]| {
            LogOptions::parse(
                &v.iter()
                    .map(|(a, b)| (a.to_string(), b.to_string()))
                    .collect::<Vec<_>>(),
            )
        };
        let o = p(&[
            ("follow", "true"),
            ("timestamps", "true"),
            ("tailLines", "5"),
            ("sinceTime", "2026-12-01T22:40:00Z"),
        ])
        .unwrap();
        assert!(o.follow && o.timestamps);
        assert_eq!(o.tail, Some(5));
        assert!(o.since.is_some());
        assert!(p(&[("sinceTime", "yesterday")]).is_err());
        assert!(p(&[("tailLines", "x")]).is_err());
    }
}
