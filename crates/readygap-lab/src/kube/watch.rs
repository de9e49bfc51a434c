//! Watch streams: JSON lines `{"type":…,"object":…}` from the store's history after a
//! resourceVersion (or after a synthetic list of ADDED events when no version is given),
//! filtered by namespace and selectors (an object leaving the selection is DELETED, one
//! entering it ADDED, as the API server's cacher does), with BOOKMARK events, a timeout,
//! 410 Expired as an ERROR event, and a fault switch that drops every stream.

use super::resources::Resource;
use super::selectors::{FieldSelector, LabelSelector};
use super::store::{ChangeKind, Store, StoreError};
use super::tables::{self, IncludeObject};
use axum::body::Bytes;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What a watch asked for.
pub struct WatchRequest {
    pub resource: Resource,
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    /// None or Some(0): start with the current state as ADDED events.
    pub resource_version: Option<u64>,
    pub timeout: Option<Duration>,
    pub bookmarks: bool,
    pub bookmark_interval: Duration,
    /// Some(include) when the client asked for Table objects.
    pub table: Option<IncludeObject>,
}

impl WatchRequest {
    fn selects(&self, obj: &Value) -> bool {
        let ns_ok = match &self.namespace {
            Some(ns) => obj["metadata"]["namespace"].as_str() == Some(ns.as_str()),
            None => true,
        };
        ns_ok && self.labels.matches(obj) && self.fields.matches(obj)
    }
}

/// A status object for an error event or response.
pub fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
}

fn line(req: &WatchRequest, ty: &str, obj: &Value) -> Bytes {
    let object = match req.table {
        Some(include) => tables::table(
            &req.resource,
            [obj],
            super::store::rv_of(obj),
            include,
            chrono::Utc::now(),
        ),
        None => obj.clone(),
    };
    let mut s = json!({"type": ty, "object": object}).to_string();
    s.push('\n');
    Bytes::from(s)
}

type Tx = mpsc::Sender<Result<Bytes, std::io::Error>>;

async fn send(tx: &Tx, b: Bytes) -> bool {
    tx.send(Ok(b)).await.is_ok()
}

/// Run a watch, writing lines into `tx` until the client goes away, the timeout passes,
/// the history expires, `drop` fires (the stream then ends with an error, as a dropped
/// connection does) or `shutdown` fires.
pub async fn run(
    store: Arc<Store>,
    req: WatchRequest,
    tx: Tx,
    drop: CancellationToken,
    shutdown: CancellationToken,
) {
    let mut rx = store.subscribe();
    let deadline = req
        .timeout
        .and_then(|t| tokio::time::Instant::now().checked_add(t));
    let mut last = match req.resource_version {
        Some(rv) if rv > 0 => rv,
        _ => {
            let (items, rv) = store.list(req.resource, req.namespace.as_deref());
            for o in items.iter().filter(|o| req.selects(o)) {
                if !send(&tx, line(&req, "ADDED", o)).await {
                    return;
                }
            }
            rv
        }
    };
    let mut bookmark = tokio::time::interval(req.bookmark_interval.max(Duration::from_millis(10)));
    bookmark.tick().await;
    loop {
        rx.borrow_and_update();
        match store.changes_since(last) {
            Err(StoreError::Expired { requested, oldest }) => {
                let msg = format!("too old resource version: {requested} ({oldest})");
                let _ = send(
                    &tx,
                    Bytes::from(format!(
                        "{}\n",
                        json!({"type": "ERROR", "object": status(410, "Expired", &msg)})
                    )),
                )
                .await;
                return;
            }
            Err(_) => return,
            Ok(changes) => {
                for c in changes {
                    last = c.rv;
                    if c.resource != req.resource {
                        continue;
                    }
                    let now = req.selects(&c.object);
                    let before = c.prev.as_ref().is_some_and(|p| req.selects(p));
                    let ty = match c.kind {
                        ChangeKind::Added if now => "ADDED",
                        ChangeKind::Modified if now && before => "MODIFIED",
                        ChangeKind::Modified if now => "ADDED",
                        ChangeKind::Modified if before => "DELETED",
                        ChangeKind::Deleted if now || before => "DELETED",
                        _ => continue,
                    };
                    if !send(&tx, line(&req, ty, &c.object)).await {
                        return;
                    }
                }
            }
        }
        let timeout = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = rx.changed() => if r.is_err() { return },
            _ = bookmark.tick(), if req.bookmarks && req.table.is_none() => {
                let obj = json!({"kind": req.resource.kind, "apiVersion": req.resource.api_version(),
                                 "metadata": {"resourceVersion": last.to_string()}});
                if !send(&tx, Bytes::from(format!("{}\n", json!({"type": "BOOKMARK", "object": obj})))).await {
                    return;
                }
            }
            _ = timeout => return,
            _ = drop.cancelled() => {
                let _ = tx.send(Err(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "lab fault: watch dropped"))).await;
                return;
            }
            _ = shutdown.cancelled() => return,
            _ = tx.closed() => return,
        }
    }
}
