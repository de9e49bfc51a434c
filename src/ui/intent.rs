//! Intents: what a key press asks for, as the pure key handler returns it. The dashboard
//! never acts itself: a session's action ([`Command`], the one action type from the key to
//! the runner, which decides its pod, model and whether read-only allows it) goes to the
//! runner; a replay's key ([`ReplayCommand`]) goes to the replay controller; `Quit` ends the
//! loop. Where nobody takes an intent (a replay has no runner), it is refused with a notice.

pub use readygap_core::replay::ReplayCommand;
pub use readygap_live::runner::Command;

/// Something the user asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Intent {
    /// An action of the live session, carried out by the runner.
    Session(Command),
    /// Move the replay's playhead or change its pace (sent to the replay controller).
    Replay(ReplayCommand),
    /// Leave the dashboard.
    Quit,
}

impl Intent {
    /// A short label for prompts and messages; `pod`: the focused pod as the screen shows it.
    pub fn label(&self, pod: Option<&str>) -> String {
        match self {
            Intent::Session(c) => c.label(pod),
            Intent::Replay(c) => format!("replay: {c:?}"),
            Intent::Quit => "quit".into(),
        }
    }
}
