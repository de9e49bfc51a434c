//! The session's one store, as the screen reads it: the reduced [`State`] (the runner's own,
//! or a replay's) and the session's facts that are not events (the recording being written,
//! the connection state, a replay's playhead), behind one lock, with a payload-free
//! notification that something changed.
//!
//! One [`Store`] writes (the runner, or the replay controller); any number of [`Reader`]s read
//! (the dashboard). Writing never waits on a reader and never queues anything: the
//! notification is a `tokio::sync::watch` of `()`, one slot, so a screen that stalls misses
//! intermediate versions and reads the latest state when it wakes, and its memory does not
//! grow with the events it did not draw. The shape is kube-rs's reflector (one `Writer`,
//! cheap cloned `Store` readers over one `Arc<RwLock<…>>`:
//! `kube-runtime/src/reflector/store.rs`) with gitui's notification without payload, after
//! which the UI pulls from the store (`asyncgit/src/lib.rs`, `AsyncGitNotification`).

use readygap_core::event::Event;
use readygap_core::replay::ReplayBar;
use readygap_core::state::State;
use std::ops::Deref;
use std::path::PathBuf;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use tokio::sync::watch;

/// What the session publishes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Published {
    /// The one reduced state.
    pub state: State,
    /// The recording being written (`None`: not recording).
    pub recording: Option<PathBuf>,
    /// Not connected to the cluster (yet): what to say (`None`: connected).
    pub connection: Option<String>,
    /// In a replay: where the playhead is.
    pub replay: Option<ReplayBar>,
}

/// The writer: the only one that changes the published state. Dropping it ends the
/// readers' feed ([`Reader::changed`] returns false).
pub struct Store {
    shared: Arc<RwLock<Published>>,
    notify: watch::Sender<()>,
}

/// A reader of the published state (cheap to clone).
#[derive(Clone)]
pub struct Reader {
    shared: Arc<RwLock<Published>>,
    changed: watch::Receiver<()>,
}

/// The published state under the read lock, as a [`State`].
pub struct StateRef<'a>(RwLockReadGuard<'a, Published>);

impl Deref for StateRef<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.0.state
    }
}

impl Default for Store {
    fn default() -> Self {
        Self::new()
    }
}

impl Store {
    pub fn new() -> Self {
        let (notify, _) = watch::channel(());
        Self {
            shared: Arc::default(),
            notify,
        }
    }

    /// A new reader; it sees the current version as not yet read.
    pub fn reader(&self) -> Reader {
        let mut changed = self.notify.subscribe();
        changed.mark_changed();
        Reader {
            shared: self.shared.clone(),
            changed,
        }
    }

    /// The state, read.
    pub fn state(&self) -> StateRef<'_> {
        StateRef(read(&self.shared))
    }

    /// Change what is published, then notify.
    pub fn update<T>(&self, change: impl FnOnce(&mut Published) -> T) -> T {
        let out = change(&mut write(&self.shared));
        self.notify.send_replace(());
        out
    }

    /// Reduce one event into the state.
    pub fn apply(&self, ev: &Event) {
        self.update(|p| p.state.apply(ev));
    }

    /// Replace the whole state (a compaction, a replay's seek).
    pub fn reset(&self, state: State) {
        self.update(|p| p.state = state);
    }
}

impl Reader {
    /// Wait for the next change (and take it as seen); false once the writer is gone (the
    /// feed ended).
    pub async fn changed(&mut self) -> bool {
        self.changed.changed().await.is_ok()
    }

    /// Whether something changed since the last read.
    pub fn has_changed(&self) -> bool {
        self.changed.has_changed().unwrap_or(false)
    }

    /// The published state, read (the latest: a change after [`Reader::changed`] is read
    /// too, and notified again). Hold it only while drawing: the writer waits for it.
    pub fn read(&self) -> RwLockReadGuard<'_, Published> {
        read(&self.shared)
    }

    /// A copy of what is published now (the dashboard's freeze).
    pub fn snapshot(&self) -> Published {
        read(&self.shared).clone()
    }
}

// A panic while the lock was held leaves the last complete state (each change is one
// `State::apply` or an assignment): keep reading it rather than poisoning the screen.
fn read(lock: &RwLock<Published>) -> RwLockReadGuard<'_, Published> {
    lock.read().unwrap_or_else(|p| p.into_inner())
}

fn write(lock: &RwLock<Published>) -> RwLockWriteGuard<'_, Published> {
    lock.write().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use readygap_core::fixtures::{self as fx, Stage};

    fn pod(ms: i64, name: &str) -> Event {
        fx::applied(ms, fx::pod(name, &format!("uid-{name}"), Stage::Ready, ms))
    }

    /// A reader that does not read while many events are applied holds nothing for them:
    /// one pending notification, and the latest state when it reads.
    #[tokio::test]
    async fn a_stalled_reader_sees_the_latest_state_and_queues_nothing() {
        let store = Store::new();
        let mut reader = store.reader();
        assert!(
            reader.changed().await,
            "a new reader has the first version to read"
        );
        assert!(!reader.has_changed());
        for i in 0..10_000 {
            store.apply(&pod(i, &format!("p{}", i % 50)));
        }
        // The one slot says "changed" once, whatever the number of events.
        assert!(reader.has_changed());
        assert!(reader.changed().await);
        assert!(
            !reader.has_changed(),
            "one wake-up for them all: nothing more is pending"
        );
        assert_eq!(reader.read().state.pods.len(), 50);
        let (before, after) = (Arc::strong_count(&store.shared), reader.snapshot());
        assert_eq!(
            before, 2,
            "the store and one reader share one state, no copies"
        );
        assert_eq!(after.state, *store.state());
    }

    #[tokio::test]
    async fn dropping_the_store_ends_the_readers_feed() {
        let store = Store::new();
        let mut reader = store.reader();
        assert!(reader.changed().await);
        store.update(|p| p.recording = Some("r.jsonl".into()));
        drop(store);
        // The last change is still notified and read; then the feed has ended.
        assert!(reader.changed().await);
        assert_eq!(reader.read().recording, Some(PathBuf::from("r.jsonl")));
        assert!(!reader.changed().await);
    }
}
