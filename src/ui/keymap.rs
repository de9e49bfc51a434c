//! The keymap: which key runs which [`Command`], each entry with its description, so the help
//! screen and the footer hints are generated from it. Defaults are k9s-like; the config file's
//! `[keys]` table replaces the keys of named commands (`delete_pod = "x"` or
//! `quit = ["q", "ctrl-q"]`). Ctrl-C always quits and Esc always closes a dialog.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::collections::BTreeMap;
use std::fmt;

/// The commands, one table row each: `Variant "name in [keys]" default key, "footer hint"`,
/// then the help screen's description. Generates [`Command`] with its tables and the default
/// [`Keymap`] (in the rows' order).
macro_rules! commands {
    ($($command:ident $name:literal $key:expr, $hint:literal: $description:literal;)*) => {
        /// What a key does.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Command {
            $($command,)*
        }

        impl Command {
            pub const ALL: [Command; [$(Command::$command),*].len()] = [$(Command::$command),*];

            /// The name used in the config file's `[keys]` table.
            pub fn name(self) -> &'static str {
                match self {
                    $(Command::$command => $name,)*
                }
            }

            /// What it does, for the help screen.
            pub fn description(self) -> &'static str {
                match self {
                    $(Command::$command => $description,)*
                }
            }

            /// A one-word hint for the footer.
            pub fn hint(self) -> &'static str {
                match self {
                    $(Command::$command => $hint,)*
                }
            }
        }

        impl Default for Keymap {
            fn default() -> Self {
                let bindings = vec![$(Binding { key: $key, command: Command::$command }),*];
                Keymap { bindings }
            }
        }
    };
}

commands! {
    DeletePod "delete_pod" Key::char('d'), "delete":
        "delete the selected pod (starts a trial)";
    RolloutRestart "rollout_restart" Key::char('r'), "restart":
        "rollout restart the target (starts a trial)";
    ColdTrial "cold_trial" Key::char('c'), "cold":
        "cold-cache trial: drop the node's page cache, then replace";
    FullTrial "full_trial" Key::char('t'), "trial":
        "full trial: replace the pod, wait for Ready, probe, infer";
    InferNow "infer_now" Key::char('i'), "infer":
        "send one inference now";
    Unload "unload" Key::char('u'), "unload":
        "unload the model from memory";
    ToggleRecord "toggle_record" Key::char('R'), "rec":
        "start/stop recording";
    ChooseModel "choose_model" Key::char('m'), "model":
        "choose the model (from the models on disk)";
    ChoosePod "choose_pod" Key::char('p'), "pod":
        "choose the pod";
    NextTheme "next_theme" Key::char('T'), "theme":
        "next colour theme";
    ToggleLog "toggle_log" Key::char('l'), "log":
        "memory chart: log/linear scale";
    RuntimeLog "runtime_log" Key::char('L'), "logs":
        "the focused pod's runtime log, followed (the lines readygap marks highlighted)";
    Freeze "freeze" Key::char(' '), "freeze":
        "freeze/unfreeze the display (events keep coming)";
    Events "events" Key::char('e'), "events":
        "all Events of the target's pods, newest first (the ones that explain the trial are on screen)";
    Help "help" Key::char('?'), "help":
        "this help";
    Acknowledge "acknowledge" Key::char('a'), "ack":
        "acknowledge the OOM banner";
    PauseResume "pause_resume" Key::char(' '), "pause":
        "replay: pause/resume playback (at the end: play again)";
    PrevMark "prev_mark" Key::code(KeyCode::Left), "mark◂":
        "replay: previous T0–T4 mark";
    NextMark "next_mark" Key::code(KeyCode::Right), "mark▸":
        "replay: next T0–T4 mark";
    PrevTrial "prev_trial" Key::char('['), "trial◂":
        "replay: previous trial (its T0)";
    NextTrial "next_trial" Key::char(']'), "trial▸":
        "replay: next trial (its T0)";
    Faster "faster" Key::char('+'), "faster":
        "replay: speed ×2 (up to ×1024)";
    Slower "slower" Key::char('-'), "slower":
        "replay: speed ÷2 (down to ×1/64)";
    SeekStart "seek_start" Key::code(KeyCode::Home), "start":
        "replay: go to the start";
    SeekEnd "seek_end" Key::code(KeyCode::End), "end":
        "replay: go to the end";
    Quit "quit" Key::char('q'), "quit":
        "quit";
}

impl Command {
    pub fn from_name(name: &str) -> Option<Command> {
        Command::ALL.into_iter().find(|c| c.name() == name)
    }

    /// Only meaningful in a replay (the replay controller carries it out); in a replay these
    /// win over other commands bound to the same key (`space` pauses instead of freezing).
    pub fn is_replay(self) -> bool {
        matches!(
            self,
            Command::PauseResume
                | Command::PrevMark
                | Command::NextMark
                | Command::PrevTrial
                | Command::NextTrial
                | Command::Faster
                | Command::Slower
                | Command::SeekStart
                | Command::SeekEnd
        )
    }

    /// Needs a connected cluster: refused while the dashboard waits for the API server.
    pub fn needs_cluster(self) -> bool {
        self.is_destructive()
            || matches!(
                self,
                Command::InferNow
                    | Command::ToggleRecord
                    | Command::ChooseModel
                    | Command::ChoosePod
            )
    }

    /// Sends more than a GET (a change, or an inference): refused when read-only, which
    /// sends only GETs anywhere.
    pub fn writes(self) -> bool {
        self.is_destructive() || self == Command::InferNow
    }

    /// Changes the cluster: asks for confirmation, refused when read-only.
    pub fn is_destructive(self) -> bool {
        matches!(
            self,
            Command::DeletePod
                | Command::RolloutRestart
                | Command::ColdTrial
                | Command::FullTrial
                | Command::Unload
        )
    }
}

/// A key with its modifiers (only Ctrl and Alt are significant; Shift is in the character).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    pub code: KeyCode,
    pub ctrl: bool,
    pub alt: bool,
}

impl Key {
    pub const fn char(c: char) -> Key {
        Key::code(KeyCode::Char(c))
    }

    pub const fn ctrl(c: char) -> Key {
        Key {
            ctrl: true,
            ..Key::char(c)
        }
    }

    pub const fn code(code: KeyCode) -> Key {
        Key {
            code,
            ctrl: false,
            alt: false,
        }
    }

    /// The key of a terminal key event.
    pub fn of(ev: &KeyEvent) -> Key {
        let code = match ev.code {
            // Some terminals report Ctrl-C as uppercase with Shift.
            KeyCode::Char(c) if ev.modifiers.contains(KeyModifiers::CONTROL) => {
                KeyCode::Char(c.to_ascii_lowercase())
            }
            c => c,
        };
        Key {
            code,
            ctrl: ev.modifiers.contains(KeyModifiers::CONTROL),
            alt: ev.modifiers.contains(KeyModifiers::ALT),
        }
    }

    /// Parse `d`, `R`, `?`, `space`, `esc`, `enter`, `tab`, `f5`, `ctrl-c`, `alt-x`.
    pub fn parse(s: &str) -> Result<Key, String> {
        let mut ctrl = false;
        let mut alt = false;
        let mut rest = s;
        loop {
            let lower = rest.to_ascii_lowercase();
            if lower.starts_with("ctrl-") || lower.starts_with("ctrl+") {
                ctrl = true;
                rest = &rest[5..];
            } else if lower.starts_with("alt-") || lower.starts_with("alt+") {
                alt = true;
                rest = &rest[4..];
            } else {
                break;
            }
        }
        let mut chars = rest.chars();
        let code = match (chars.next(), chars.next()) {
            (Some(c), None) => KeyCode::Char(if ctrl { c.to_ascii_lowercase() } else { c }),
            _ => match rest.to_ascii_lowercase().as_str() {
                "space" => KeyCode::Char(' '),
                "esc" | "escape" => KeyCode::Esc,
                "enter" | "return" => KeyCode::Enter,
                "tab" => KeyCode::Tab,
                "backspace" => KeyCode::Backspace,
                "up" => KeyCode::Up,
                "down" => KeyCode::Down,
                "left" => KeyCode::Left,
                "right" => KeyCode::Right,
                "home" => KeyCode::Home,
                "end" => KeyCode::End,
                f if f.starts_with('f')
                    && f[1..].parse::<u8>().is_ok_and(|n| (1..=12).contains(&n)) =>
                {
                    KeyCode::F(f[1..].parse().unwrap_or(1))
                }
                _ => return Err(format!("unknown key {s:?}")),
            },
        };
        Ok(Key { code, ctrl, alt })
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ctrl {
            f.write_str("ctrl-")?;
        }
        if self.alt {
            f.write_str("alt-")?;
        }
        match self.code {
            KeyCode::Char(' ') => f.write_str("space"),
            KeyCode::Char(c) => write!(f, "{c}"),
            KeyCode::Esc => f.write_str("esc"),
            KeyCode::Enter => f.write_str("enter"),
            KeyCode::Tab => f.write_str("tab"),
            KeyCode::Backspace => f.write_str("backspace"),
            KeyCode::Up => f.write_str("up"),
            KeyCode::Down => f.write_str("down"),
            KeyCode::Left => f.write_str("left"),
            KeyCode::Right => f.write_str("right"),
            KeyCode::Home => f.write_str("home"),
            KeyCode::End => f.write_str("end"),
            KeyCode::F(n) => write!(f, "f{n}"),
            other => write!(f, "{other:?}"),
        }
    }
}

/// One keymap entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub key: Key,
    pub command: Command,
}

/// One line of the help screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelpEntry {
    pub keys: String,
    pub command: Command,
    pub description: &'static str,
    pub destructive: bool,
    /// Refused when read-only (see [`Command::writes`]).
    pub writes: bool,
}

/// A keymap problem in the config file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeymapError {
    #[error("[keys]: unknown command `{0}` (known: {1})")]
    UnknownCommand(String, String),
    #[error("[keys] {command}: {message}")]
    BadKey { command: String, message: String },
    #[error("[keys]: key {key} is bound to both `{first}` and `{second}`")]
    Conflict {
        key: String,
        first: String,
        second: String,
    },
}

/// Keys → commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keymap {
    bindings: Vec<Binding>,
}

impl Keymap {
    /// The defaults with the keys of some commands replaced: command name → keys.
    pub fn with_overrides(
        overrides: &BTreeMap<String, Vec<String>>,
    ) -> Result<Keymap, KeymapError> {
        let mut map = Keymap::default();
        let mut overridden = Vec::new();
        for (name, keys) in overrides {
            let command = Command::from_name(name).ok_or_else(|| {
                KeymapError::UnknownCommand(name.clone(), Command::ALL.map(|c| c.name()).join(", "))
            })?;
            let bad = |message: String| KeymapError::BadKey {
                command: name.clone(),
                message,
            };
            overridden.push(command);
            map.bindings.retain(|b| b.command != command);
            for k in keys {
                let key = Key::parse(k).map_err(bad)?;
                if key == Key::ctrl('c') && command != Command::Quit {
                    return Err(bad("ctrl-c is reserved for quit".into()));
                }
                if key.code == KeyCode::Esc {
                    return Err(bad("esc is reserved for closing dialogs".into()));
                }
                map.bindings.push(Binding { key, command });
            }
        }
        // A key taken by an overridden command is removed from a default command that kept it;
        // two overrides claiming one key is an error.
        let mut seen: BTreeMap<String, Command> = BTreeMap::new();
        for b in map
            .bindings
            .iter()
            .filter(|b| overridden.contains(&b.command))
        {
            if let Some(first) = seen.insert(b.key.to_string(), b.command)
                && first != b.command
            {
                return Err(KeymapError::Conflict {
                    key: b.key.to_string(),
                    first: first.name().into(),
                    second: b.command.name().into(),
                });
            }
        }
        map.bindings
            .retain(|b| overridden.contains(&b.command) || !seen.contains_key(&b.key.to_string()));
        // `Command`'s order is `Command::ALL`'s.
        map.bindings.sort_by_key(|b| b.command);
        Ok(map)
    }

    pub fn bindings(&self) -> &[Binding] {
        &self.bindings
    }

    /// The command of a key event outside a replay (Ctrl-C is always quit; replay commands
    /// are not looked up).
    pub fn lookup(&self, ev: &KeyEvent) -> Option<Command> {
        self.lookup_in(ev, false)
    }

    /// The command of a key event; in a replay, replay commands win over others bound to the
    /// same key, outside one they are skipped.
    pub fn lookup_in(&self, ev: &KeyEvent, replay: bool) -> Option<Command> {
        let key = Key::of(ev);
        if key == Key::ctrl('c') {
            return Some(Command::Quit);
        }
        let mut found = self
            .bindings
            .iter()
            .filter(|b| b.key == key && (replay || !b.command.is_replay()))
            .map(|b| b.command);
        found
            .clone()
            .find(|c| c.is_replay())
            .or_else(|| found.next())
    }

    /// Whether every key of a (non-replay) command is taken by a replay command, so the
    /// command has no key in a replay (`freeze` on `space` by default).
    pub fn shadowed_in_replay(&self, command: Command) -> bool {
        let mut keys = self
            .bindings
            .iter()
            .filter(|b| b.command == command)
            .peekable();
        !command.is_replay()
            && keys.peek().is_some()
            && keys.all(|b| {
                self.bindings
                    .iter()
                    .any(|o| o.key == b.key && o.command.is_replay())
            })
    }

    /// The keys of a command, joined with `/`.
    pub fn keys_of(&self, command: Command) -> String {
        let mut keys: Vec<String> = self
            .bindings
            .iter()
            .filter(|b| b.command == command)
            .map(|b| b.key.to_string())
            .collect();
        if command == Command::Quit {
            keys.push("ctrl-c".into());
        }
        keys.join("/")
    }

    /// The help screen's lines, one per command that has a key, in a fixed order.
    pub fn help(&self) -> Vec<HelpEntry> {
        Command::ALL
            .into_iter()
            .filter(|c| self.bindings.iter().any(|b| b.command == *c) || *c == Command::Quit)
            .map(|c| HelpEntry {
                keys: self.keys_of(c),
                command: c,
                description: c.description(),
                destructive: c.is_destructive(),
                writes: c.writes(),
            })
            .collect()
    }
}
