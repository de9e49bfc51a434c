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
    /// Lines of kept entries not in the file yet (see [`GroundTruth::log_at`]).
    unwritten: String,
}

impl GroundTruthInner {
    fn keep(&mut self, entry: GroundTruthEntry) {
        if self.file.is_some()
            && let Ok(line) = serde_json::to_string(&entry)
        {
            self.unwritten.push_str(&line);
            self.unwritten.push('\n');
        }
        self.entries.push(entry);
    }

    /// One write of every unwritten line, in the order kept. Best effort: the ground truth
    /// must never take the lab down.
    fn write(&mut self) {
        if let Some(file) = self.file.as_mut()
            && !self.unwritten.is_empty()
        {
            let _ = file.write_all(self.unwritten.as_bytes());
        }
        self.unwritten.clear();
    }
}

impl GroundTruth {
    /// A log that keeps entries in memory only.
    pub fn in_memory() -> Self {
        Self::default()
    }

    /// A log that also appends every entry to `path` (one line each).
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

    /// Log a transition at a given instant: kept at once (in-process readers see it), and
    /// its line written after the caller's task (in a runtime) or at once (outside one).
    pub fn log_at(
        &self,
        ts: DateTime<Utc>,
        pod: &str,
        transition: Transition,
        detail: serde_json::Value,
    ) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.keep(GroundTruthEntry {
                ts,
                pod: pod.to_string(),
                transition,
                detail,
            });
        }
        // In the lab's runtime the line is written by a task that runs after the caller's,
        // so no file write sits between the instant logged and what the caller does next
        // (a kubelet's status update, the bytes of an answer); elsewhere at once.
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn({
                let gt = self.clone();
                async move { gt.flush() }
            })),
            Err(_) => self.flush(),
        }
    }

    /// Write the lines of entries kept but not written yet (the lab's shutdown calls it).
    pub fn flush(&self) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.write();
        }
    }

    /// A transition whose instant comes later: [`Due::now`] logs it.
    pub fn due(&self, pod: &str, transition: Transition, detail: serde_json::Value) -> Due {
        Due {
            gt: self.clone(),
            pod: pod.to_string(),
            transition,
            detail,
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

/// A transition to log when it happens: a timed answer's last line carries it to the body
/// that sends the line, which logs it as the connection takes the line. Dropped unlogged
/// (the client went away before the line was taken), it logs nothing: no answer left.
pub struct Due {
    gt: GroundTruth,
    pod: String,
    transition: Transition,
    detail: serde_json::Value,
}

impl Due {
    /// Log it, stamped now, with no syscall between the stamp and the caller's send (see
    /// [`GroundTruth::log_at`]: in the lab the line is written after the connection task
    /// has sent the bytes).
    pub fn now(self) {
        self.gt
            .log_at(Utc::now(), &self.pod, self.transition, self.detail);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn a_timed_answer_is_kept_at_once_and_written_after_the_task_that_sends_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gt.jsonl");
        let gt = GroundTruth::to_file(&path).unwrap();
        gt.due("p", Transition::InferenceDone, serde_json::json!({}))
            .now();
        assert_eq!(gt.entries().len(), 1, "kept at once");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "",
            "written before the sending task yielded"
        );
        // The current task goes to the back of the queue: the writing task runs first.
        tokio::task::yield_now().await;
        let text = std::fs::read_to_string(&path).unwrap();
        let back: GroundTruthEntry = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(
            (back.pod.as_str(), back.transition),
            ("p", Transition::InferenceDone)
        );
        assert_eq!(back.ts, gt.entries()[0].ts);
    }

    #[test]
    fn lines_reach_the_file_in_the_order_kept_outside_a_runtime_too() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gt.jsonl");
        let gt = GroundTruth::to_file(&path).unwrap();
        gt.due("a", Transition::InferenceDone, serde_json::json!({}))
            .now();
        gt.log("b", Transition::InferenceDone, serde_json::json!({}));
        let pods: Vec<String> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<GroundTruthEntry>(l).unwrap().pod)
            .collect();
        assert_eq!(pods, ["a", "b"]);
    }
}
