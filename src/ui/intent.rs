//! Intents: what a key press asks readygap to do. The dashboard never acts itself; it sends
//! these on the `actions` channel and the executor (live sources, trial runner) carries them
//! out, reporting back as events. In read-only sessions there is no executor; in a replay the
//! replay controller takes the [`Intent::Replay`] ones and the others are refused.

/// Something the user asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Intent {
    /// Delete this pod (starts a trial).
    DeletePod { pod: String },
    /// `kubectl rollout restart` of the target (starts a trial).
    RolloutRestart,
    /// A full trial with a cold page cache first (drop caches on the node, then replace).
    ColdTrial,
    /// A full trial: replace the pod, wait for Ready, probe, infer.
    FullTrial,
    /// Send one inference now (to the chosen pod and model).
    InferNow,
    /// Unload the chosen model (`keep_alive: 0`).
    Unload,
    /// Start or stop writing a recording.
    ToggleRecord,
    /// Use this model for inferences from now on.
    ChooseModel(String),
    /// Use this pod for inferences and the memory chart from now on.
    ChoosePod(String),
    /// Follow the focused pod's container log for the Log view (`L`), or stop.
    FollowLog(bool),
    /// Move the replay's playhead or change its pace (sent to the replay controller).
    Replay(ReplayCommand),
    /// Leave the dashboard.
    Quit,
}

pub use readygap_core::replay::ReplayCommand;

impl Intent {
    /// A short label for prompts and messages.
    pub fn label(&self) -> String {
        match self {
            Intent::DeletePod { pod } => format!("delete pod {pod}"),
            Intent::RolloutRestart => "rollout restart the target".into(),
            Intent::ColdTrial => "run a cold-cache trial (drop caches, replace the pod)".into(),
            Intent::FullTrial => "run a full trial (replace the pod)".into(),
            Intent::InferNow => "send an inference".into(),
            Intent::Unload => "unload the model".into(),
            Intent::ToggleRecord => "toggle recording".into(),
            Intent::ChooseModel(m) => format!("use model {m}"),
            Intent::ChoosePod(p) => format!("use pod {p}"),
            Intent::FollowLog(true) => "follow the focused pod's log".into(),
            Intent::FollowLog(false) => "stop following the log".into(),
            Intent::Replay(c) => format!("replay: {c:?}"),
            Intent::Quit => "quit".into(),
        }
    }
}
