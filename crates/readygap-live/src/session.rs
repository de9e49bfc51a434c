//! The session's event pump: every source sends its events into one channel; the pump keeps
//! a reducer of its own (for snapshots), writes each event to the recording when recording is
//! on, and forwards it to the consumer (the dashboard or the trial runner).
//!
//! Recording can be switched on and off while the session runs (`R` in the dashboard): each
//! start opens a new file, whose first events are a snapshot of the current state (session,
//! pods, EndpointSlices, nodes, runtimes, the latest memory and host samples), so the file
//! replays to the same screen on its own. Trials already under way when a recording starts
//! are not reconstructed in it (their T0 came before the file did).

use readygap_core::event::{Event, Timestamp};
use readygap_core::record::jsonl::{Header, Recorder};
use readygap_core::state::State;
use std::path::{Path, PathBuf};
use tokio::sync::{mpsc, oneshot};

/// Recording commands.
#[derive(Debug)]
pub enum RecordControl {
    /// Start a new recording at this path (replies with the result).
    Start {
        path: PathBuf,
        reply: Option<oneshot::Sender<Result<PathBuf, String>>>,
    },
    /// Stop the current recording, if any.
    Stop,
}

/// What the pump tells its owner about recording.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordStatus {
    Recording(PathBuf),
    Stopped { path: PathBuf, events: u64 },
    Failed(String),
}

/// The default path of a new recording: `recordings/readygap-<context>-<time>.jsonl`.
pub fn default_recording_path(dir: &Path, context: &str, at: Timestamp) -> PathBuf {
    let ctx: String = context
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    dir.join(format!(
        "readygap-{}-{}.jsonl",
        if ctx.is_empty() { "session" } else { &ctx },
        at.format("%Y%m%dT%H%M%SZ")
    ))
}

/// The pump. Ends when every sender of `input` is gone; the recording is closed then.
pub struct Pump {
    pub input: mpsc::Receiver<Event>,
    pub output: mpsc::Sender<Event>,
    pub control: mpsc::Receiver<RecordControl>,
    pub status: mpsc::UnboundedSender<RecordStatus>,
    /// Header fields for new recordings (context, namespace, target, settings).
    pub header: Header,
    /// Start recording at once to this path.
    pub record_to: Option<PathBuf>,
    /// Leave prompts and responses out of recordings.
    pub redact: bool,
}

impl Pump {
    pub async fn run(mut self) {
        let mut state = State::new();
        let mut recorder: Option<Recorder> = None;
        if let Some(path) = self.record_to.take() {
            recorder = self.start(&state, &path, chrono::Utc::now());
        }
        let mut control_open = true;
        loop {
            tokio::select! {
                ev = self.input.recv() => {
                    let Some(ev) = ev else { break };
                    state.apply(&ev);
                    let to_write = if self.redact {
                        readygap_core::record::jsonl::redacted(&ev)
                    } else {
                        std::borrow::Cow::Borrowed(&ev)
                    };
                    if let Some(r) = recorder.as_mut()
                        && let Err(e) = r.write(&to_write)
                    {
                        let _ = self.status.send(RecordStatus::Failed(format!(
                            "writing {}: {e}; recording stopped",
                            r.path().display()
                        )));
                        recorder = None;
                    }
                    if self.output.send(ev).await.is_err() {
                        break;
                    }
                }
                ctl = self.control.recv(), if control_open => match ctl {
                    None => control_open = false,
                    Some(RecordControl::Start { path, reply }) => {
                        if let Some(r) = recorder.take() {
                            let _ = self.status.send(RecordStatus::Stopped { path: r.path().to_path_buf(), events: r.written() });
                        }
                        let ts = state.now.unwrap_or_else(chrono::Utc::now);
                        recorder = self.start(&state, &path, ts);
                        if let Some(reply) = reply {
                            let _ = reply.send(match &recorder {
                                Some(r) => Ok(r.path().to_path_buf()),
                                None => Err(format!("could not record to {}", path.display())),
                            });
                        }
                    }
                    Some(RecordControl::Stop) => {
                        if let Some(r) = recorder.take() {
                            let _ = self.status.send(RecordStatus::Stopped { path: r.path().to_path_buf(), events: r.written() });
                        }
                    }
                },
            }
        }
        if let Some(r) = recorder.take() {
            let _ = self.status.send(RecordStatus::Stopped {
                path: r.path().to_path_buf(),
                events: r.written(),
            });
        }
    }

    fn start(&self, state: &State, path: &Path, ts: Timestamp) -> Option<Recorder> {
        let mut header = self.header.clone();
        header.started = ts;
        if self.redact {
            readygap_core::record::jsonl::redact_header(&mut header);
        }
        let result = Recorder::create(path, &header).and_then(|mut r| {
            for ev in state.snapshot_events(ts) {
                r.write(&ev)?;
            }
            Ok(r)
        });
        match result {
            Ok(r) => {
                let _ = self
                    .status
                    .send(RecordStatus::Recording(path.to_path_buf()));
                Some(r)
            }
            Err(e) => {
                let _ = self.status.send(RecordStatus::Failed(format!(
                    "recording to {}: {e}",
                    path.display()
                )));
                None
            }
        }
    }
}
