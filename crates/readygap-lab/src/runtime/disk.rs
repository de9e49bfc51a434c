//! What a lab runtime finds outside its own memory: the models on its volume (`ModelDisk`,
//! the PVC shared by the pods of a deployment, or a fresh emptyDir) and the page cache of
//! its node (`NodeCache`), which makes the next model load cold after `drop_caches`.

use crate::profile::ModelSpec;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// The models stored on a pod's volume.
#[derive(Debug, Default)]
pub struct ModelDisk {
    models: Mutex<Vec<(ModelSpec, DateTime<Utc>)>>,
}

impl ModelDisk {
    /// A volume holding these models (modified now).
    pub fn with_models(models: &[ModelSpec]) -> Self {
        let now = Utc::now();
        Self {
            models: Mutex::new(models.iter().map(|m| (m.clone(), now)).collect()),
        }
    }

    /// An empty volume (the emptyDir scenario).
    pub fn empty() -> Self {
        Self::default()
    }

    /// Store a model (replaces a model of the same name).
    pub fn pull(&self, spec: &ModelSpec) {
        if let Ok(mut models) = self.models.lock() {
            models.retain(|(m, _)| m.name != spec.name);
            models.push((spec.clone(), Utc::now()));
        }
    }

    /// The models on the volume.
    pub fn list(&self) -> Vec<ModelSpec> {
        self.entries().into_iter().map(|(m, _)| m).collect()
    }

    /// The models with the time each was stored.
    pub fn entries(&self) -> Vec<(ModelSpec, DateTime<Utc>)> {
        self.models.lock().map(|m| m.clone()).unwrap_or_default()
    }

    /// The model stored under `name` (a name without a tag means `:latest`).
    pub fn get(&self, name: &str) -> Option<(ModelSpec, DateTime<Utc>)> {
        let wanted = normalize_name(name);
        self.entries()
            .into_iter()
            .find(|(m, _)| normalize_name(&m.name) == wanted)
    }
}

/// `llama3.2` → `llama3.2:latest`; names with a tag are kept.
pub(crate) fn normalize_name(name: &str) -> String {
    let name = name.trim();
    let last = name.rsplit('/').next().unwrap_or(name);
    if last.contains(':') {
        name.to_string()
    } else {
        format!("{name}:latest")
    }
}

/// `Cached:` kB of the node after `echo 3 > /proc/sys/vm/drop_caches` (mean
/// `cached_kb_after_drop` of cache/cold-cache-recovery.csv).
const FLOOR_KB: u64 = 738_944;
/// Other droppable cache of a warm node: a typical warm `cached_kb_before` (2 930 000 kB,
/// cache/warm-cache-recovery.csv) minus the floor and the 3B model file (1 972 064 kB).
const OTHER_KB: u64 = 218_992;
/// MemTotal of the simulated node (a 32 GiB VM).
const MEM_TOTAL_KB: u64 = 32_863_436;

/// The page cache of one node: which model files are warm, and `Cached:` of /proc/meminfo.
#[derive(Debug)]
pub struct NodeCache {
    inner: Mutex<NodeCacheInner>,
}

#[derive(Debug)]
struct NodeCacheInner {
    /// Until the first drop, model files never seen are taken as warm (unless started cold).
    unseen_warm: bool,
    warm: BTreeMap<String, u64>,
    other_kb: u64,
    drops: u64,
}

impl NodeCache {
    /// A node whose cache is cold (every model load cold until it has been read once) or warm.
    pub fn new(start_cold: bool) -> Self {
        Self {
            inner: Mutex::new(NodeCacheInner {
                unseen_warm: !start_cold,
                warm: BTreeMap::new(),
                other_kb: if start_cold { 0 } else { OTHER_KB },
                drops: 0,
            }),
        }
    }

    /// `echo 3 > /proc/sys/vm/drop_caches`: every model file becomes cold. Returns `Cached:`
    /// in kB before and after.
    pub fn drop_caches(&self) -> (u64, u64) {
        let Ok(mut inner) = self.inner.lock() else {
            return (0, 0);
        };
        let before = inner.cached_kb();
        inner.unseen_warm = false;
        inner.warm.clear();
        inner.other_kb = 0;
        inner.drops += 1;
        (before, inner.cached_kb())
    }

    /// `Cached:` of the node's /proc/meminfo, in kB.
    pub fn cached_kb(&self) -> u64 {
        self.inner.lock().map(|i| i.cached_kb()).unwrap_or(FLOOR_KB)
    }

    /// `MemTotal:` of the node, in kB.
    pub fn mem_total_kb(&self) -> u64 {
        MEM_TOTAL_KB
    }

    /// How many times the caches were dropped.
    pub fn drops(&self) -> u64 {
        self.inner.lock().map(|i| i.drops).unwrap_or(0)
    }

    /// Whether reading this model's file would hit the page cache.
    pub fn is_warm(&self, model: &str) -> bool {
        self.inner
            .lock()
            .map(|i| i.warm.contains_key(model) || (i.unseen_warm && !i.warm.contains_key(model)))
            .unwrap_or(false)
    }

    /// The model's file was read: it is in the page cache now.
    pub fn mark_warm(&self, model: &str, disk_bytes: u64) {
        if let Ok(mut inner) = self.inner.lock() {
            inner
                .warm
                .insert(model.to_string(), disk_bytes.div_ceil(1024));
        }
    }
}

impl NodeCacheInner {
    fn cached_kb(&self) -> u64 {
        FLOOR_KB + self.other_kb + self.warm.values().sum::<u64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::Profile;

    #[test]
    fn disk_lists_pulls_and_resolves_names() {
        let p = Profile::named("azure-3b").expect("profile");
        let disk = ModelDisk::empty();
        assert!(disk.list().is_empty());
        assert!(disk.get("llama3.2:3b").is_none());
        disk.pull(&p.models[0]);
        disk.pull(&p.models[0]);
        assert_eq!(disk.list().len(), 1, "pulling again replaces");
        assert_eq!(disk.get("llama3.2:3b").expect("3b").0.name, "llama3.2:3b");
        assert!(disk.get("llama3.2").is_none(), "no :latest tag stored");
        let full = ModelDisk::with_models(&p.models);
        assert_eq!(full.list().len(), p.models.len());
    }

    #[test]
    fn drop_caches_makes_models_cold_until_read() {
        let cache = NodeCache::new(false);
        assert!(cache.is_warm("llama3.2:3b"));
        cache.mark_warm("llama3.2:3b", 2_019_393_189);
        let (before, after) = cache.drop_caches();
        assert!(before > after + 1_900_000, "{before} → {after}");
        assert_eq!(after, cache.cached_kb());
        assert!(!cache.is_warm("llama3.2:3b"));
        assert!(!cache.is_warm("llama3.2:1b"));
        cache.mark_warm("llama3.2:3b", 2_019_393_189);
        assert!(cache.is_warm("llama3.2:3b"));
        assert_eq!(cache.cached_kb(), after + 1_972_064);
        assert!(!NodeCache::new(true).is_warm("llama3.2:3b"));
    }
}
