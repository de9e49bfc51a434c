//! The Node feed: cluster-scoped, so optional (`manifests/rbac/cluster`). Without that
//! access the API server answers 403 to every list and watch, and kube's watcher would
//! retry for ever; instead the first 403 is said once ("node details are unavailable",
//! with the RBAC explanation) and the feed stops asking until the user asks again: a new
//! value on `retry` (the selected node changing, e.g. after `p`).

use super::watch::{adapt, api_error, watch_error_message};
use chrono::Utc;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use readygap_core::event::{Event, EventKind, Source};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// The feed name.
pub const FEED: &str = "nodes";

/// Whether a watcher error is the API server refusing access (HTTP 403).
fn is_forbidden(e: &watcher::Error) -> bool {
    matches!(api_error(e), Some(kube::Error::Api(s)) if s.code == 403 || s.reason == "Forbidden")
}

/// Watch Nodes until cancelled; after a 403, wait for `retry` to change (never, when None).
pub async fn run(
    client: kube::Client,
    tx: mpsc::Sender<Event>,
    cancel: CancellationToken,
    mut retry: Option<watch::Receiver<Option<String>>>,
) {
    loop {
        let refused: Arc<Mutex<Option<String>>> = Arc::default();
        let seen = refused.clone();
        let nodes: Api<Node> = Api::all(client.clone());
        let stream = watcher(nodes, watcher::Config::default())
            .default_backoff()
            .take_while(move |item| {
                let go_on = match item {
                    Err(e) if is_forbidden(e) => {
                        if let Ok(mut g) = seen.lock() {
                            *g = Some(watch_error_message(e, "nodes"));
                        }
                        false
                    }
                    _ => true,
                };
                futures::future::ready(go_on)
            });
        adapt(stream, FEED, |_: &Node| true, tx.clone(), cancel.clone()).await;
        let why = refused.lock().ok().and_then(|mut g| g.take());
        let Some(why) = why else {
            return; // cancelled, or the receiver is gone
        };
        // Said once about a refused Node watch.
        let message = format!(
            "node details are unavailable ({why}); readygap stops asking for nodes until the \
             selected node changes (p picks a pod)"
        );
        let (feed, now) = (FEED.into(), Utc::now());
        let ev = EventKind::SourceError { feed, message };
        if tx.send(Event::new(now, Source::Kube, ev)).await.is_err() {
            return;
        }
        let Some(rx) = retry.as_mut() else {
            cancel.cancelled().await;
            return;
        };
        tokio::select! {
            _ = cancel.cancelled() => return,
            changed = rx.changed() => if changed.is_err() { cancel.cancelled().await; return; },
        }
    }
}
