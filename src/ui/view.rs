//! What the dashboard shows apart from the facts: UI-only toggles (theme, log/linear, freeze,
//! help, selection, dialogs) in [`ViewState`], and the pure key handler [`update`]:
//! `(ViewState, &State, key) → (ViewState, Option<Intent>)`. Nothing here does I/O; intents
//! that change the cluster are only returned, after a confirmation, and never when read-only.

use super::intent::{Command as Act, Intent, ReplayCommand};
use super::keymap::{Command, Key, Keymap};
use super::panels::replaybar::ReplayBar;
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind};
use readygap_core::state::{Severity, State};

/// A modal dialog over the panels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dialog {
    /// The keymap's help screen.
    Help,
    /// Every Event of the target's pods, whole.
    Events,
    /// `y` sends the intent, `n`/Esc cancels.
    Confirm { intent: Intent },
    /// Pick one item; Enter sends `ChoosePod`.
    ChoosePod { items: Vec<String>, index: usize },
    /// Pick one item; Enter sends `ChooseModel`.
    ChooseModel { items: Vec<String>, index: usize },
}

/// UI state that is not derived from events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewState {
    pub keymap: Keymap,
    /// Destructive commands are refused.
    pub read_only: bool,
    /// The theme in use and the names to cycle through with `T`.
    pub theme: String,
    pub theme_names: Vec<String>,
    /// The memory chart's y axis is logarithmic.
    pub log_scale: bool,
    /// The Log view is on: the focused pod's log takes the bottom row's right side.
    pub log_view: bool,
    /// The display shows a snapshot; events keep being applied underneath.
    pub frozen: bool,
    pub dialog: Option<Dialog>,
    /// The pod chosen with `p` (memory chart, deletes, inferences).
    pub selected_pod: Option<String>,
    /// The model chosen with `m`.
    pub selected_model: Option<String>,
    /// `live`, `replay`, `demo`...
    pub mode_label: String,
    /// A line under the header (e.g. the file being replayed).
    pub title: String,
    /// Where the recording is written, when recording.
    pub recording: Option<String>,
    /// Not connected to the cluster (yet): the state to show (the failed try, its reason,
    /// the next try). The header says it, and keys that need the cluster are refused.
    pub connection: Option<String>,
    /// A UI-local message (refused key, bad theme file); shown in the footer instead of the
    /// state's latest message until the next key.
    pub notice: Option<(Severity, String)>,
    /// The feed ended (a replay reached its end).
    pub feed_ended: bool,
    /// In a replay: the playhead as the replay controller last reported it. `Some` = replay
    /// mode (replay keys are looked up, `space` pauses instead of freezing).
    pub replay: Option<ReplayBar>,
    /// OOM verdicts acknowledged with `a` (the banner shows newer kills).
    pub acknowledged: usize,
    pub quit: bool,
}

impl Default for ViewState {
    fn default() -> Self {
        ViewState {
            keymap: Keymap::default(),
            read_only: false,
            theme: "default".into(),
            theme_names: vec!["default".into()],
            log_scale: false,
            log_view: false,
            frozen: false,
            dialog: None,
            selected_pod: None,
            selected_model: None,
            mode_label: "live".into(),
            title: String::new(),
            recording: None,
            connection: None,
            notice: None,
            feed_ended: false,
            replay: None,
            acknowledged: 0,
            quit: false,
        }
    }
}

impl ViewState {
    /// The pod the panels focus on: the one rule of [`readygap_core::focus::pod`] over the
    /// pod chosen with `p`, the rule by which the runner picks the pod `d`, `t`, `i` and `u`
    /// act on (the keys name no pod; the confirmation names the one on screen).
    pub fn focus_pod(&self, state: &State) -> Option<String> {
        readygap_core::focus::pod(state, self.selected_pod.as_deref())
    }
}

/// Handle one key: the new view state, and the intent to send, if any. Pure.
pub fn update(mut view: ViewState, state: &State, key: KeyEvent) -> (ViewState, Option<Intent>) {
    if key.kind == KeyEventKind::Release {
        return (view, None);
    }
    view.notice = None;
    let command = view.keymap.lookup_in(&key, view.replay.is_some());

    // A dialog takes the keys first.
    if let Some(dialog) = view.dialog.take() {
        if Key::of(&key) == Key::ctrl('c') {
            // Ctrl-C quits even from a dialog.
            view.quit = true;
            return (view, Some(Intent::Quit));
        }
        return dialog_key(view, dialog, key);
    }

    let Some(command) = command else {
        return (view, None);
    };
    // Refused keys say why: not connected yet, or read-only.
    let key = || format!("`{}` ({})", view.keymap.keys_of(command), command.hint());
    let refused = if command.needs_cluster() && view.replay.is_none() && view.connection.is_some() {
        Some(format!(
            "not connected to the cluster yet: {} waits for it",
            key()
        ))
    } else if command.writes() && view.read_only {
        Some(format!("read-only: {} is disabled", key()))
    } else {
        None
    };
    if let Some(why) = refused {
        view.notice = Some((Severity::Warn, why));
        return (view, None);
    }
    let confirm = |act| {
        Some(Dialog::Confirm {
            intent: Intent::Session(act),
        })
    };
    // Replay commands are only looked up in a replay; they go to the replay controller.
    let in_replay = view.replay.is_some();
    let replay = |command| in_replay.then_some(Intent::Replay(command));
    let mut intent = None;
    match command {
        Command::Quit => {
            view.quit = true;
            intent = Some(Intent::Quit);
        }
        Command::DeletePod => match view.focus_pod(state) {
            Some(_) => view.dialog = confirm(Act::Delete),
            None => view.notice = Some((Severity::Warn, "no pod to delete".into())),
        },
        Command::RolloutRestart => view.dialog = confirm(Act::RolloutRestart),
        Command::ColdTrial => view.dialog = confirm(Act::Trial { cold: true }),
        Command::FullTrial => view.dialog = confirm(Act::Trial { cold: false }),
        Command::Unload => view.dialog = confirm(Act::Unload),
        Command::InferNow => intent = Some(Intent::Session(Act::Infer)),
        Command::ToggleRecord => intent = Some(Intent::Session(Act::ToggleRecord)),
        Command::ChoosePod => {
            let items: Vec<String> = state.pods.keys().cloned().collect();
            if items.is_empty() {
                view.notice = Some((Severity::Warn, "no pods yet".into()));
            } else {
                let index = view
                    .focus_pod(state)
                    .and_then(|p| items.iter().position(|i| *i == p))
                    .unwrap_or(0);
                view.dialog = Some(Dialog::ChoosePod { items, index });
            }
        }
        Command::ChooseModel => {
            let mut items: Vec<String> = state
                .runtimes
                .values()
                .flat_map(|r| r.on_disk.iter().map(|m| m.name.clone()))
                .collect();
            items.sort();
            items.dedup();
            if items.is_empty() {
                view.notice = Some((Severity::Warn, "no models on disk reported yet".into()));
            } else {
                let index = view
                    .selected_model
                    .as_ref()
                    .or(state.session.model.as_ref())
                    .and_then(|m| items.iter().position(|i| i == m))
                    .unwrap_or(0);
                view.dialog = Some(Dialog::ChooseModel { items, index });
            }
        }
        Command::NextTheme => {
            if !view.theme_names.is_empty() {
                let at = view
                    .theme_names
                    .iter()
                    .position(|n| *n == view.theme)
                    .map_or(0, |i| (i + 1) % view.theme_names.len());
                view.theme = view.theme_names[at].clone();
            }
        }
        Command::ToggleLog => view.log_scale = !view.log_scale,
        Command::RuntimeLog => {
            view.log_view = !view.log_view;
            intent = Some(Intent::Session(Act::Tail(view.log_view)));
        }
        Command::Freeze => view.frozen = !view.frozen,
        Command::Help => view.dialog = Some(Dialog::Help),
        Command::Events => view.dialog = Some(Dialog::Events),
        Command::Acknowledge => view.acknowledged = state.oom.verdicts.len(),
        Command::PauseResume => intent = replay(ReplayCommand::PauseResume),
        Command::PrevMark => intent = replay(ReplayCommand::PrevMark),
        Command::NextMark => intent = replay(ReplayCommand::NextMark),
        Command::PrevTrial => intent = replay(ReplayCommand::PrevTrial),
        Command::NextTrial => intent = replay(ReplayCommand::NextTrial),
        Command::Faster => intent = replay(ReplayCommand::Faster),
        Command::Slower => intent = replay(ReplayCommand::Slower),
        Command::SeekStart => intent = replay(ReplayCommand::Start),
        Command::SeekEnd => intent = replay(ReplayCommand::End),
    }
    (view, intent)
}

fn dialog_key(mut view: ViewState, dialog: Dialog, key: KeyEvent) -> (ViewState, Option<Intent>) {
    let code = key.code;
    let mut sent = None;
    match dialog {
        // Esc closes any dialog; any key closes help (`?` again too).
        _ if code == KeyCode::Esc => {}
        Dialog::Help | Dialog::Events => {}
        Dialog::Confirm { intent } => match code {
            KeyCode::Char('y' | 'Y') => sent = Some(intent),
            KeyCode::Char('n' | 'N') => {}
            _ => view.dialog = Some(Dialog::Confirm { intent }),
        },
        Dialog::ChoosePod { items, index } => match pick(code, &items, index) {
            Pick::Move(index) => view.dialog = Some(Dialog::ChoosePod { items, index }),
            Pick::Chosen(p) => {
                view.selected_pod = Some(p.clone());
                sent = Some(Intent::Session(Act::ChoosePod(Some(p))));
            }
        },
        Dialog::ChooseModel { items, index } => match pick(code, &items, index) {
            Pick::Move(index) => view.dialog = Some(Dialog::ChooseModel { items, index }),
            Pick::Chosen(m) => {
                view.selected_model = Some(m.clone());
                sent = Some(Intent::Session(Act::ChooseModel(Some(m))));
            }
        },
    }
    (view, sent)
}

enum Pick {
    Move(usize),
    Chosen(String),
}

fn pick(code: KeyCode, items: &[String], index: usize) -> Pick {
    let last = items.len().saturating_sub(1);
    match code {
        KeyCode::Up | KeyCode::Char('k') => Pick::Move(index.saturating_sub(1)),
        KeyCode::Down | KeyCode::Char('j') => Pick::Move((index + 1).min(last)),
        KeyCode::Enter => match items.get(index) {
            Some(i) => Pick::Chosen(i.clone()),
            None => Pick::Move(0),
        },
        _ => Pick::Move(index.min(last)),
    }
}
