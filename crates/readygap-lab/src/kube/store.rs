//! The lab's object store: every object as JSON keyed by resource, namespace and name, one
//! global monotonic resourceVersion, and a bounded history of changes that watches replay.
//! Watches older than the history's start are answered with 410 Expired, as etcd compaction
//! makes the real API server do.

use super::resources::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::watch;

/// How many changes the history keeps by default.
pub const DEFAULT_HISTORY: usize = 20_000;

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

impl ChangeKind {
    /// The watch event type.
    pub fn as_str(&self) -> &'static str {
        match self {
            ChangeKind::Added => "ADDED",
            ChangeKind::Modified => "MODIFIED",
            ChangeKind::Deleted => "DELETED",
        }
    }
}

/// One change in the history.
#[derive(Debug, Clone)]
pub struct Change {
    pub rv: u64,
    pub resource: Resource,
    pub kind: ChangeKind,
    /// The object after the change (for a delete: the last state, with the delete's version).
    pub object: Arc<Value>,
    /// The object before the change (None for an add).
    pub prev: Option<Arc<Value>>,
}

/// Errors callers branch on (mapped to API Status codes).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StoreError {
    #[error("{kind} \"{name}\" not found")]
    NotFound { kind: String, name: String },
    #[error("{kind} \"{name}\" already exists")]
    AlreadyExists { kind: String, name: String },
    #[error("the object is invalid: {0}")]
    Invalid(String),
    #[error("too old resource version: {requested} ({oldest})")]
    Expired { requested: u64, oldest: u64 },
}

type Key = (String, String);

struct Inner {
    rv: u64,
    objects: HashMap<Resource, BTreeMap<Key, Arc<Value>>>,
    history: VecDeque<Change>,
    /// Watches must start at or after this version (changes up to it are forgotten).
    oldest: u64,
    capacity: usize,
    uid_counter: u64,
    /// The version of the last change of each resource type.
    last_change: HashMap<Resource, u64>,
}

/// The store; cheap to share behind an `Arc`.
pub struct Store {
    inner: Mutex<Inner>,
    rv_tx: watch::Sender<u64>,
}

impl Default for Store {
    fn default() -> Self {
        Self::new(DEFAULT_HISTORY)
    }
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Namespace and name of an object.
pub fn key_of(obj: &Value) -> (String, String) {
    (
        meta_str(obj, "namespace").to_string(),
        meta_str(obj, "name").to_string(),
    )
}

/// The resourceVersion of an object as a number (0 when absent).
pub fn rv_of(obj: &Value) -> u64 {
    meta_str(obj, "resourceVersion").parse().unwrap_or(0)
}

fn set_meta(obj: &mut Value, field: &str, v: Value) {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"][field] = v;
}

impl Store {
    /// A store keeping at most `capacity` changes of history.
    pub fn new(capacity: usize) -> Self {
        let (rv_tx, _) = watch::channel(1);
        Self {
            inner: Mutex::new(Inner {
                rv: 1,
                objects: HashMap::new(),
                history: VecDeque::new(),
                oldest: 1,
                capacity: capacity.max(1),
                uid_counter: 0,
                last_change: HashMap::new(),
            }),
            rv_tx,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A poisoned lock only means a panic elsewhere; the data is still consistent because
        // every mutation below completes before it can panic.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Subscribe to the current resourceVersion (changes whenever the store changes).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.rv_tx.subscribe()
    }

    /// The current resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    /// The version of the last change to objects of this resource type (0: none yet).
    pub fn last_change(&self, resource: Resource) -> u64 {
        self.lock().last_change.get(&resource).copied().unwrap_or(0)
    }

    /// The oldest resourceVersion a watch may start from.
    pub fn oldest_watchable(&self) -> u64 {
        self.lock().oldest
    }

    fn record(inner: &mut Inner, change: Change) {
        inner.last_change.insert(change.resource, change.rv);
        inner.history.push_back(change);
        while inner.history.len() > inner.capacity {
            if let Some(old) = inner.history.pop_front() {
                inner.oldest = old.rv;
            }
        }
    }

    fn notify(&self, rv: u64) {
        self.rv_tx.send_replace(rv);
    }

    fn new_uid(inner: &mut Inner) -> String {
        inner.uid_counter += 1;
        let n = inner.uid_counter;
        let salt = std::process::id() as u64;
        let a = (n.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt) & 0xFFFF_FFFF;
        format!(
            "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
            a,
            (n >> 16) & 0xFFFF,
            n & 0xFFF,
            (salt >> 3) & 0xFFF,
            n
        )
    }

    /// Create an object. Sets uid, creationTimestamp (if absent), resourceVersion.
    pub fn create(&self, resource: Resource, mut obj: Value) -> Result<Value, StoreError> {
        let (ns, name) = key_of(&obj);
        if name.is_empty() || !obj.is_object() {
            return Err(StoreError::Invalid("metadata.name is required".into()));
        }
        let mut inner = self.lock();
        let exists = inner
            .objects
            .get(&resource)
            .is_some_and(|m| m.contains_key(&(ns.clone(), name.clone())));
        if exists {
            return Err(StoreError::AlreadyExists {
                kind: resource.plural.to_string(),
                name,
            });
        }
        inner.rv += 1;
        let rv = inner.rv;
        if meta_str(&obj, "uid").is_empty() {
            let uid = Self::new_uid(&mut inner);
            set_meta(&mut obj, "uid", json!(uid));
        }
        if meta_str(&obj, "creationTimestamp").is_empty() {
            let ts = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string();
            set_meta(&mut obj, "creationTimestamp", json!(ts));
        }
        set_meta(&mut obj, "resourceVersion", json!(rv.to_string()));
        obj["apiVersion"] = json!(resource.api_version());
        obj["kind"] = json!(resource.kind);
        let arc = Arc::new(obj.clone());
        inner
            .objects
            .entry(resource)
            .or_default()
            .insert((ns, name), arc.clone());
        Self::record(
            &mut inner,
            Change {
                rv,
                resource,
                kind: ChangeKind::Added,
                object: arc,
                prev: None,
            },
        );
        drop(inner);
        self.notify(rv);
        Ok(obj)
    }

    /// Replace an object (no-op, returning the stored one, when nothing changed).
    pub fn update(&self, resource: Resource, obj: Value) -> Result<Value, StoreError> {
        let (ns, name) = key_of(&obj);
        self.mutate(resource, &ns, &name, |cur| {
            let keep = cur["metadata"].clone();
            *cur = obj;
            for f in ["uid", "creationTimestamp"] {
                if let Some(v) = keep.get(f) {
                    cur["metadata"][f] = v.clone();
                }
            }
            Ok(())
        })
    }

    /// Read-modify-write one object atomically. The closure gets the current object; if it
    /// leaves it unchanged, nothing is recorded.
    pub fn mutate(
        &self,
        resource: Resource,
        ns: &str,
        name: &str,
        f: impl FnOnce(&mut Value) -> Result<(), StoreError>,
    ) -> Result<Value, StoreError> {
        let mut inner = self.lock();
        let key = (ns.to_string(), name.to_string());
        let Some(cur) = inner
            .objects
            .get(&resource)
            .and_then(|m| m.get(&key))
            .cloned()
        else {
            return Err(StoreError::NotFound {
                kind: resource.plural.to_string(),
                name: name.to_string(),
            });
        };
        let mut next = (*cur).clone();
        f(&mut next)?;
        if !next.is_object() {
            return Err(StoreError::Invalid(
                "an object must be a JSON object".into(),
            ));
        }
        next["apiVersion"] = json!(resource.api_version());
        next["kind"] = json!(resource.kind);
        set_meta(&mut next, "name", json!(name));
        if resource.namespaced {
            set_meta(&mut next, "namespace", json!(ns));
        }
        set_meta(
            &mut next,
            "resourceVersion",
            cur["metadata"]["resourceVersion"].clone(),
        );
        if next == *cur {
            return Ok(next);
        }
        inner.rv += 1;
        let rv = inner.rv;
        set_meta(&mut next, "resourceVersion", json!(rv.to_string()));
        let arc = Arc::new(next);
        inner
            .objects
            .entry(resource)
            .or_default()
            .insert(key, arc.clone());
        Self::record(
            &mut inner,
            Change {
                rv,
                resource,
                kind: ChangeKind::Modified,
                object: arc.clone(),
                prev: Some(cur),
            },
        );
        drop(inner);
        // Watchers are woken before the caller's copy is made.
        self.notify(rv);
        Ok((*arc).clone())
    }

    /// Read-modify-write with a typed view of the object; returns the stored object.
    pub fn mutate_typed<T: DeserializeOwned + Serialize>(
        &self,
        resource: Resource,
        ns: &str,
        name: &str,
        f: impl FnOnce(&mut T),
    ) -> Result<Value, StoreError> {
        self.mutate(resource, ns, name, |cur| {
            let mut t = T::deserialize(&*cur).map_err(|e| StoreError::Invalid(e.to_string()))?;
            f(&mut t);
            let mut nv =
                serde_json::to_value(&t).map_err(|e| StoreError::Invalid(e.to_string()))?;
            nv["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"].clone();
            *cur = nv;
            Ok(())
        })
    }

    /// Remove an object; the DELETED change carries a new resourceVersion.
    pub fn delete(&self, resource: Resource, ns: &str, name: &str) -> Result<Value, StoreError> {
        let mut inner = self.lock();
        let key = (ns.to_string(), name.to_string());
        let Some(cur) = inner
            .objects
            .get_mut(&resource)
            .and_then(|m| m.remove(&key))
        else {
            return Err(StoreError::NotFound {
                kind: resource.plural.to_string(),
                name: name.to_string(),
            });
        };
        inner.rv += 1;
        let rv = inner.rv;
        let mut last = (*cur).clone();
        set_meta(&mut last, "resourceVersion", json!(rv.to_string()));
        let arc = Arc::new(last.clone());
        Self::record(
            &mut inner,
            Change {
                rv,
                resource,
                kind: ChangeKind::Deleted,
                object: arc,
                prev: Some(cur),
            },
        );
        drop(inner);
        self.notify(rv);
        Ok(last)
    }

    /// One object.
    pub fn get(&self, resource: Resource, ns: &str, name: &str) -> Option<Arc<Value>> {
        self.lock()
            .objects
            .get(&resource)
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
            .cloned()
    }

    /// One object, typed.
    pub fn get_typed<T: DeserializeOwned>(
        &self,
        resource: Resource,
        ns: &str,
        name: &str,
    ) -> Option<T> {
        self.get(resource, ns, name)
            .and_then(|v| serde_json::from_value((*v).clone()).ok())
    }

    /// All objects of a resource (in one namespace, or all when `ns` is None), sorted by
    /// namespace and name, with the store's resourceVersion at the time of the list.
    pub fn list(&self, resource: Resource, ns: Option<&str>) -> (Vec<Arc<Value>>, u64) {
        let inner = self.lock();
        let items = inner
            .objects
            .get(&resource)
            .map(|m| {
                m.iter()
                    .filter(|((ons, _), _)| ns.is_none_or(|n| n == ons))
                    .map(|(_, v)| v.clone())
                    .collect()
            })
            .unwrap_or_default();
        (items, inner.rv)
    }

    /// All objects of a resource, typed (objects that do not parse are skipped).
    pub fn list_typed<T: DeserializeOwned>(&self, resource: Resource, ns: Option<&str>) -> Vec<T> {
        self.list(resource, ns)
            .0
            .iter()
            .filter_map(|v| serde_json::from_value((**v).clone()).ok())
            .collect()
    }

    /// The changes after `rv`, or Expired when the history no longer reaches back that far.
    pub fn changes_since(&self, rv: u64) -> Result<Vec<Change>, StoreError> {
        let inner = self.lock();
        if rv < inner.oldest {
            return Err(StoreError::Expired {
                requested: rv,
                oldest: inner.oldest,
            });
        }
        let start = inner.history.partition_point(|c| c.rv <= rv);
        Ok(inner.history.range(start..).cloned().collect())
    }

    /// Every change still in the history (for tests and the ground truth).
    pub fn history(&self) -> Vec<Change> {
        self.lock().history.iter().cloned().collect()
    }

    /// Forget the history, as a compaction does: the resourceVersion moves on by one and any
    /// watch from a version before it (including every version handed out so far) gets 410
    /// Expired; a list made afterwards returns a version watches may start from.
    pub fn expire_history(&self) {
        let mut inner = self.lock();
        inner.rv += 1;
        inner.oldest = inner.rv;
        inner.history.clear();
        let rv = inner.rv;
        drop(inner);
        self.notify(rv);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::resources::PODS;

    fn pod(name: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "ns"}, "spec": {}})
    }

    #[test]
    fn versions_increase_and_history_replays_after_a_version() {
        let s = Store::new(100);
        let a = s.create(PODS, pod("a")).unwrap();
        let rv_a = rv_of(&a);
        s.mutate(PODS, "ns", "a", |o| {
            o["spec"]["nodeName"] = json!("n1");
            Ok(())
        })
        .unwrap();
        let d = s.delete(PODS, "ns", "a").unwrap();
        assert!(rv_of(&d) > rv_a);
        let after: Vec<_> = s
            .changes_since(rv_a)
            .unwrap()
            .iter()
            .map(|c| c.kind)
            .collect();
        assert_eq!(after, vec![ChangeKind::Modified, ChangeKind::Deleted]);
        assert_eq!(s.resource_version(), rv_of(&d));
    }

    #[test]
    fn unchanged_mutation_records_nothing() {
        let s = Store::new(100);
        s.create(PODS, pod("a")).unwrap();
        let rv = s.resource_version();
        s.mutate(PODS, "ns", "a", |_| Ok(())).unwrap();
        assert_eq!(s.resource_version(), rv);
        assert!(s.changes_since(rv).unwrap().is_empty());
    }

    #[test]
    fn bounded_history_expires_old_versions() {
        let s = Store::new(3);
        let first = s.create(PODS, pod("a")).unwrap();
        for i in 0..5 {
            s.create(PODS, pod(&format!("p{i}"))).unwrap();
        }
        assert!(matches!(
            s.changes_since(rv_of(&first)),
            Err(StoreError::Expired { .. })
        ));
        let now = s.resource_version();
        assert_eq!(s.changes_since(now - 2).unwrap().len(), 2);
        s.expire_history();
        assert!(s.changes_since(now).is_err());
        assert_eq!(s.resource_version(), now + 1);
        assert!(s.changes_since(now + 1).unwrap().is_empty());
    }

    #[test]
    fn duplicate_create_is_rejected() {
        let s = Store::new(10);
        s.create(PODS, pod("a")).unwrap();
        assert!(matches!(
            s.create(PODS, pod("a")),
            Err(StoreError::AlreadyExists { .. })
        ));
    }
}
