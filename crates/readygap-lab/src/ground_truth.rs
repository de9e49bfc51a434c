//! Ground truth: a JSON-lines log, written by the lab on request, of the instant each
//! transition really happened (pod Ready set, runtime listening, model resident, inference
//! done, ...), so readygap's measuring error can be computed against it.
//!
//! One line per transition:
//! `{"ts":"2026-11-30T10:00:00.123456Z","pod":"ollama-7c9d-abcde","transition":"pod_ready","detail":{}}`

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The transitions the lab logs. Names are stable (snake_case in the log).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transition {
    /// A pod delete was accepted by the API server (deletionTimestamp set).
    DeleteAccepted,
    /// A pod object was created.
    PodCreated,
    /// The pod was bound to a node (PodScheduled=True).
    PodScheduled,
    /// The container was started (state running).
    ContainerStarted,
    /// The Ready condition of the pod turned true.
    PodReady,
    /// The runtime began answering HTTP.
    RuntimeListening,
    /// A model became resident in the runtime.
    ModelResident,
    /// A generate request was received by the runtime.
    InferenceReceived,
    /// A generate request finished with `done: true`.
    InferenceDone,
    /// The container was killed by the OOM killer.
    OomKilled,
    /// The container's main process exited by itself (a crash; `detail.exit_code`).
    ContainerExited,
    /// The kubelet killed the container after failed liveness probes.
    LivenessKilled,
    /// The kubelet killed the container after failed startup probes.
    StartupKilled,
    /// A resident model was unloaded to make room for another (Ollama ≥ 0.13).
    ModelEvicted,
    /// The pod object was removed.
    PodGone,
    /// The node's page cache was dropped.
    CachesDropped,
    /// The API server stopped serving (a restart: connections dropped, listener closed;
    /// `pod` is `kube-apiserver`).
    ApiServerDown,
    /// The API server listens again after a restart (`detail.down_ms`).
    ApiServerUp,
    /// The pod's address appeared in its Service's EndpointSlice (`pod` is the pod).
    EndpointAdded,
    /// The pod's endpoint turned `ready` (or appeared ready).
    EndpointReady,
    /// The pod's endpoint turned not `ready`.
    EndpointNotReady,
    /// The pod's endpoint turned `terminating` (or appeared terminating).
    EndpointTerminating,
    /// The pod's address left the EndpointSlice.
    EndpointRemoved,
}

impl Transition {
    /// The ground-truth line of an endpoint change (one rule: the core's
    /// [`readygap_core::bench::diff_endpoints`]).
    pub fn of_endpoint(change: readygap_core::bench::EndpointChange) -> Self {
        use readygap_core::bench::EndpointChange as C;
        match change {
            C::Added => Transition::EndpointAdded,
            C::Ready => Transition::EndpointReady,
            C::NotReady => Transition::EndpointNotReady,
            C::Terminating => Transition::EndpointTerminating,
            C::Removed => Transition::EndpointRemoved,
        }
    }
}

/// One line of the ground-truth log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroundTruthEntry {
    pub ts: DateTime<Utc>,
    pub pod: String,
    pub transition: Transition,
    #[serde(default)]
    pub detail: serde_json::Value,
}

/// A cloneable writer of the ground-truth log. Disabled (writes nothing) unless opened on a
/// file; entries are also kept in memory so in-process tests can read them.
#[derive(Clone, Default)]
pub struct GroundTruth {
    inner: Arc<Mutex<GroundTruthInner>>,
}

#[derive(Default)]
struct GroundTruthInner {
    file: Option<std::fs::File>,
    entries: Vec<GroundTruthEntry>,
}

impl GroundTruth {
    /// A log that keeps entries in memory only.
    pub fn in_memory() -> Self {
        Self::default()
    }

    /// A log that also appends every entry to `path` (one flushed line each).
    pub fn to_file(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        let gt = Self::default();
        gt.inner.lock().expect("ground truth lock").file = Some(file);
        Ok(gt)
    }

    /// Log a transition observed now.
    pub fn log(&self, pod: &str, transition: Transition, detail: serde_json::Value) {
        self.log_at(Utc::now(), pod, transition, detail);
    }

    /// Log a transition at a given instant.
    pub fn log_at(
        &self,
        ts: DateTime<Utc>,
        pod: &str,
        transition: Transition,
        detail: serde_json::Value,
    ) {
        self.log_at_then(ts, pod, transition, detail, || ());
    }

    /// Log a transition at `ts`, and run `then` between keeping the entry (readers see it at
    /// once) and writing its line to the file: a lab answer that is timed sends itself in
    /// `then`, so the file write (a syscall and a flush) never sits between the instant the
    /// lab logs and the bytes a client times.
    pub fn log_at_then(
        &self,
        ts: DateTime<Utc>,
        pod: &str,
        transition: Transition,
        detail: serde_json::Value,
        then: impl FnOnce(),
    ) {
        let entry = GroundTruthEntry {
            ts,
            pod: pod.to_string(),
            transition,
            detail,
        };
        let line = serde_json::to_string(&entry);
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        inner.entries.push(entry);
        then();
        if let Some(file) = inner.file.as_mut()
            && let Ok(line) = line
        {
            // Best effort: the ground truth must never take the lab down.
            let _ = writeln!(file, "{line}").and_then(|_| file.flush());
        }
    }

    /// A copy of every entry logged so far.
    pub fn entries(&self) -> Vec<GroundTruthEntry> {
        self.inner
            .lock()
            .map(|i| i.entries.clone())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timed_answer_is_sent_before_its_ground_truth_line_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gt.jsonl");
        let gt = GroundTruth::to_file(&path).unwrap();
        let mut file_during = None;
        gt.log_at_then(
            Utc::now(),
            "p",
            Transition::InferenceDone,
            serde_json::json!({}),
            || {
                file_during = Some(std::fs::read_to_string(&path).unwrap());
            },
        );
        assert_eq!(
            file_during.as_deref(),
            Some(""),
            "written before the answer"
        );
        let line = std::fs::read_to_string(&path).unwrap();
        let back: GroundTruthEntry = serde_json::from_str(line.trim()).unwrap();
        assert_eq!(
            (back.pod.as_str(), back.transition),
            ("p", Transition::InferenceDone)
        );
        assert_eq!(gt.entries().len(), 1);
    }
}
