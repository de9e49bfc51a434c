//! A `kube::runtime::watcher` stream as readygap events: [`Watched`] says what an object
//! becomes (its impls are in `super::kube`), [`convert`] maps one raw watcher event one to
//! one (`Init` → `resync_started`, `InitApply`/`Apply` → applied, `InitDone` →
//! `resync_done`, `Delete` → deleted), [`adapt`] feeds a stream into the session's channel,
//! stamped when received, and [`watch_error_message`] explains a refused watch.

use chrono::Utc;
use futures::{Stream, StreamExt};
use kube::runtime::watcher;
use readygap_core::event::{Event, EventKind, Feed, Resource, Source};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How a watched kind becomes events.
pub trait Watched: Sized {
    /// The resource name in `resync_*` events.
    const RESOURCE: &'static str;
    fn applied(&self) -> Option<EventKind>;
    /// What a deletion becomes; by default nothing (Events and Nodes).
    fn deleted(&self) -> Option<EventKind> {
        None
    }
}

/// Turn one raw watcher event into event kinds.
pub fn convert<K: Watched>(ev: watcher::Event<K>) -> Vec<EventKind> {
    let resource = Resource::from(K::RESOURCE);
    match ev {
        watcher::Event::Init => vec![EventKind::ResyncStarted { resource }],
        watcher::Event::InitApply(o) | watcher::Event::Apply(o) => {
            o.applied().into_iter().collect()
        }
        watcher::Event::InitDone => vec![EventKind::ResyncDone { resource }],
        watcher::Event::Delete(o) => o.deleted().into_iter().collect(),
    }
}

/// Feed a watcher stream into the channel until it ends, the receiver is gone or `cancel`.
/// Each event is stamped when it is received. Errors become one `source_error` (repeated
/// errors are not repeated), and the first event after an error a `source_connected`.
/// `keep` filters objects (e.g. Events about the target's pods only).
pub async fn adapt<K, S>(
    stream: S,
    feed: &str,
    keep: impl Fn(&K) -> bool,
    tx: mpsc::Sender<Event>,
    cancel: CancellationToken,
) where
    K: Watched,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
{
    let mut stream = std::pin::pin!(stream);
    let mut connected = false;
    let mut errored = false;
    loop {
        let item = tokio::select! {
            _ = cancel.cancelled() => return,
            item = stream.next() => item,
        };
        let Some(item) = item else { return };
        let now = Utc::now();
        let mut kinds = Vec::new();
        match item {
            Ok(ev) => {
                if !connected {
                    connected = true;
                    errored = false;
                    kinds.push(EventKind::SourceConnected {
                        feed: Feed::from(feed),
                        detail: format!("watching {}", K::RESOURCE),
                    });
                }
                let wanted = match &ev {
                    watcher::Event::InitApply(o)
                    | watcher::Event::Apply(o)
                    | watcher::Event::Delete(o) => keep(o),
                    _ => true,
                };
                if wanted {
                    kinds.extend(convert(ev));
                }
            }
            Err(e) => {
                connected = false;
                if !errored {
                    errored = true;
                    kinds.push(EventKind::SourceError {
                        feed: Feed::from(feed),
                        message: watch_error_message(&e, K::RESOURCE),
                    });
                }
            }
        }
        for kind in kinds {
            if tx.send(Event::new(now, Source::Kube, kind)).await.is_err() {
                return;
            }
        }
    }
}

/// The API server's error behind a watch error, if it answered.
pub fn api_error(e: &watcher::Error) -> Option<&kube::Error> {
    match e {
        watcher::Error::InitialListFailed(k)
        | watcher::Error::WatchStartFailed(k)
        | watcher::Error::WatchFailed(k) => Some(k),
        _ => None,
    }
}

/// A readable message for a watch error, with an RBAC explanation for 403s.
pub fn watch_error_message(e: &watcher::Error, resource: &str) -> String {
    if let Some(k) = api_error(e) {
        let group = match resource {
            "endpointslices" => "discovery.k8s.io",
            "deployments" => "apps",
            _ => "",
        };
        if let Some(why) = crate::rbac::explain_kube_error(
            k,
            &crate::rbac::Request {
                verb: "watch",
                group,
                resource,
                namespace: None,
            },
        ) {
            return why;
        }
    }
    format!("watch of {resource}: {e}")
}
