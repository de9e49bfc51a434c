//! The session's recording: the one recorder of `readygap run` and the dashboard. The
//! runner (which owns the session's one store) writes every event it applies, so the file
//! holds everything the screen shows: the feeds, the actions, the runner's notes ("no Ready
//! pod …", refusals), cluster errors and the recording's own status lines.
//!
//! Recording can be switched on and off while the session runs (`R` in the dashboard): each
//! start opens a new file, whose first events are a snapshot of the current state (session,
//! pods, EndpointSlices, nodes, runtimes, the latest memory and host samples), so the file
//! replays to the same screen on its own. Trials already under way when a recording starts
//! are not reconstructed in it (their T0 came before the file did).

use readygap_core::event::{Event, Timestamp};
use readygap_core::record::jsonl::{self, Header, Recorder};
use readygap_core::state::State;
use std::path::{Path, PathBuf};

/// What happened to the recording (the dashboard's header shows it; each one is also a
/// note in the event stream).
#[derive(Debug, Clone, PartialEq)]
pub enum RecordStatus {
    Recording(PathBuf),
    Stopped { path: PathBuf, events: u64 },
    Failed(String),
}

impl RecordStatus {
    /// The line shown and recorded.
    pub fn text(&self) -> String {
        match self {
            RecordStatus::Recording(p) => format!("recording to {}", p.display()),
            RecordStatus::Stopped { path, events } => {
                format!("recording stopped: {} ({events} events)", path.display())
            }
            RecordStatus::Failed(e) => format!("recording failed: {e}"),
        }
    }
}

/// The default path of a new recording: `recordings/readygap-<context>-<time>.jsonl`.
pub fn default_recording_path(dir: &Path, context: &str, at: Timestamp) -> PathBuf {
    let ctx = context.replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "_");
    dir.join(format!(
        "readygap-{}-{}.jsonl",
        if ctx.is_empty() { "session" } else { &ctx },
        at.format("%Y%m%dT%H%M%SZ")
    ))
}

/// The recorder of a session: off, or writing one file.
pub struct Recording {
    /// Header fields for new recordings (context, namespace, target, settings).
    pub header: Header,
    /// Leave prompts and responses out of recordings.
    pub redact: bool,
    file: Option<Recorder>,
}

impl Recording {
    /// Not recording yet.
    pub fn new(header: Header, redact: bool) -> Self {
        Self {
            header,
            redact,
            file: None,
        }
    }

    /// The file being written.
    pub fn path(&self) -> Option<&Path> {
        self.file.as_ref().map(|r| r.path())
    }

    /// Start the session's first file at `path` (an empty snapshot); the failure, if any.
    pub fn begin(&mut self, path: &Path) -> Result<(), String> {
        match self.start(&State::new(), path, chrono::Utc::now()).pop() {
            Some(RecordStatus::Failed(e)) => Err(e),
            _ => Ok(()),
        }
    }

    /// Start a new file at `path` (stopping the current one), starting with a snapshot of
    /// `state` stamped `ts`. Returns what happened, in order.
    pub fn start(&mut self, state: &State, path: &Path, ts: Timestamp) -> Vec<RecordStatus> {
        let mut out: Vec<RecordStatus> = self.stop().into_iter().collect();
        let mut header = self.header.clone();
        header.started = ts;
        if self.redact {
            jsonl::redact_header(&mut header);
        }
        let result = Recorder::create(path, &header).and_then(|mut r| {
            for ev in state.snapshot_events(ts) {
                r.write(&ev)?;
            }
            Ok(r)
        });
        out.push(match result {
            Ok(r) => {
                self.file = Some(r);
                RecordStatus::Recording(path.to_path_buf())
            }
            Err(e) => RecordStatus::Failed(format!("recording to {}: {e}", path.display())),
        });
        out
    }

    /// Stop the current file, if any.
    pub fn stop(&mut self) -> Option<RecordStatus> {
        self.file.take().map(|r| RecordStatus::Stopped {
            path: r.path().to_path_buf(),
            events: r.written(),
        })
    }

    /// Write one event (redacted when asked). A failed write stops the recording.
    pub fn write(&mut self, ev: &Event) -> Option<RecordStatus> {
        let r = self.file.as_mut()?;
        let ev = if self.redact {
            jsonl::redacted(ev)
        } else {
            std::borrow::Cow::Borrowed(ev)
        };
        let e = r.write(&ev).err()?;
        let status = RecordStatus::Failed(format!(
            "writing {}: {e}; recording stopped",
            r.path().display()
        ));
        self.file = None;
        Some(status)
    }
}
