//! What the API server served, per client and request: for each (User-Agent, method, path,
//! query) the number of requests and the response bytes sent (a watch's bytes as its
//! stream delivers them). `GET /lab/requests` returns the tally, so a bench can say what
//! list/watch cost a client, and whether its requests were selector-scoped.

use axum::body::Body;
use axum::response::Response;
use futures::StreamExt;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// One kind of request.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct RequestKey {
    pub user_agent: String,
    pub method: String,
    pub path: String,
    pub query: String,
}

/// Requests and response bytes of one kind.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Tally {
    pub requests: u64,
    pub bytes: u64,
}

/// The tally of every request served.
#[derive(Default)]
pub struct Served(Arc<Mutex<BTreeMap<RequestKey, Tally>>>);

impl Served {
    /// Count one request, and the bytes of `resp`'s body as they are sent.
    pub fn count(&self, key: RequestKey, resp: Response) -> Response {
        let map = self.0.clone();
        lock(&map).entry(key.clone()).or_default().requests += 1;
        let (parts, body) = resp.into_parts();
        let stream = body.into_data_stream().inspect(move |chunk| {
            if let Ok(b) = chunk {
                lock(&map).entry(key.clone()).or_default().bytes += b.len() as u64;
            }
        });
        Response::from_parts(parts, Body::from_stream(stream))
    }

    /// The tally so far, as JSON rows.
    pub fn to_json(&self) -> serde_json::Value {
        let rows: Vec<serde_json::Value> = lock(&self.0)
            .iter()
            .map(|(k, t)| {
                serde_json::json!({
                    "user_agent": k.user_agent, "method": k.method, "path": k.path,
                    "query": k.query, "requests": t.requests, "bytes": t.bytes,
                })
            })
            .collect();
        serde_json::Value::Array(rows)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
