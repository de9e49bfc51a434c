//! The dashboard's event loop. The screen reduces nothing: it reads the session's one store
//! ([`Reader`]: the runner's state, or a replay's) when the store says something changed (a
//! payload-free notification, one slot: a stalled screen holds no queue of events), and
//! draws it. Keys go through the pure [`update`](super::view::update) and become [`Intent`]s
//! sent on the `actions` channel. Input is never blocked by I/O: terminal input is
//! crossterm's `EventStream`, awaited with the store's notification in one `tokio::select!`.
//! A frame is drawn only when something changed (the store, a key, a resize), at most 30
//! times a second; with nothing new the loop sleeps. The terminal (raw mode, alternate
//! screen) is set up and restored, on exit and on panic, by [`super::terminal`]; every frame
//! is drawn through its [`PanicRelease`](super::terminal::PanicRelease), so nothing is drawn
//! after a panic. Freeze keeps a copy of the state; the session's facts in the header (the
//! recording, the connection, a replay's playhead) stay live.

use super::intent::{Command, Intent, ReplayCommand};
use super::keymap::Keymap;
use super::terminal::PanicRelease;
use super::theme::{Theme, Themes};
use super::view::{ViewState, update};
use color_eyre::eyre::{Result, WrapErr, eyre};
use crossterm::event::Event as TermEvent;
use futures::{Stream, StreamExt};
use ratatui::Terminal;
use ratatui::backend::Backend;
use readygap_core::state::{Severity, State};
use readygap_live::store::{Published, Reader};
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// The shortest time between two frames (30 frames/s).
pub const FRAME: Duration = Duration::from_millis(33);

/// Who carries out the keys' intents: a live session's runner (its commands), a replay's
/// controller (its keys), or nobody (the others are refused with a notice).
#[derive(Debug, Clone, Default)]
pub enum Actions {
    #[default]
    None,
    Session(mpsc::Sender<Command>),
    Replay(mpsc::Sender<ReplayCommand>),
}

/// How the dashboard is set up.
#[derive(Debug, Clone)]
pub struct DashboardOptions {
    /// Destructive keys are disabled (and the footer/help say so).
    pub read_only: bool,
    /// The theme's name (a preset or a user theme).
    pub theme: String,
    /// Where user themes are (`~/.config/readygap/themes`); `None` = presets only.
    pub themes_dir: Option<PathBuf>,
    /// The keymap, with the config file's overrides applied.
    pub keymap: Keymap,
    /// Shown in the header (e.g. the replayed file).
    pub title: String,
    /// `live`, `replay`, `demo`.
    pub mode_label: String,
    /// Problems found while starting (config, recording warnings): the first is shown in the
    /// footer.
    pub notices: Vec<String>,
}

impl Default for DashboardOptions {
    fn default() -> Self {
        DashboardOptions {
            read_only: false,
            theme: "default".into(),
            themes_dir: None,
            keymap: Keymap::default(),
            title: String::new(),
            mode_label: "live".into(),
            notices: Vec::new(),
        }
    }
}

/// Run the dashboard in the real terminal until `q`/Ctrl-C, or until SIGINT, SIGTERM or
/// SIGHUP (see [`crate::signals`]): each ends it as `q` does, so the terminal is restored and
/// the caller closes the session down (recording, feeds, debug pods).
pub async fn run_dashboard(opts: DashboardOptions, store: Reader, actions: Actions) -> Result<()> {
    let mut terminal = super::terminal::setup()?;
    let input = crossterm::event::EventStream::new();
    // The loop only stops at an await: never in the middle of a frame.
    let result = tokio::select! {
        r = run_loop(
            &mut terminal,
            input,
            opts,
            store,
            actions,
            Some(&super::terminal::PANIC_RELEASE),
        ) => r,
        _ = crate::signals::quit() => Ok(()),
    };
    super::terminal::restore()?;
    result
}

/// The state the loop keeps between wake-ups: the view (UI-only), the theme, and a copy of
/// the state while frozen. The facts are the store's.
pub struct Dashboard {
    store: Reader,
    pub view: ViewState,
    pub theme: Theme,
    themes: Themes,
    /// The snapshot shown while frozen.
    frozen: Option<State>,
}

impl Dashboard {
    pub fn new(opts: &DashboardOptions, store: Reader) -> Dashboard {
        let (themes, errors) = Themes::load(opts.themes_dir.as_deref());
        let (theme, unknown) = themes.pick(&opts.theme);
        let notice = errors
            .first()
            .map(|e| (Severity::Error, format!("{e}; using default")))
            .or(unknown.map(|u| (Severity::Error, u)))
            .or(opts.notices.first().map(|n| (Severity::Warn, n.clone())));
        let view = ViewState {
            keymap: opts.keymap.clone(),
            read_only: opts.read_only,
            theme: theme.name.clone(),
            theme_names: themes.names(),
            mode_label: opts.mode_label.clone(),
            title: opts.title.clone(),
            notice,
            ..ViewState::default()
        };
        Dashboard {
            store,
            view,
            theme,
            themes,
            frozen: None,
        }
    }

    /// A copy of what is on screen: the frozen snapshot, or the store's state.
    pub fn shown(&self) -> State {
        match &self.frozen {
            Some(s) => s.clone(),
            None => self.store.snapshot().state,
        }
    }

    /// The store published a change: take its session facts into the view. Returns whether
    /// the display changed (the state shows while not frozen; the facts always).
    pub fn changed(&mut self) -> bool {
        let facts = take_facts(&mut self.view, &self.store.read());
        facts || self.frozen.is_none()
    }

    /// Handle one key; returns the intent to carry out.
    pub fn key(&mut self, key: crossterm::event::KeyEvent) -> Option<Intent> {
        let published = self.store.read();
        take_facts(&mut self.view, &published);
        let view = std::mem::take(&mut self.view);
        let shown = self.frozen.as_ref().unwrap_or(&published.state);
        let (view, intent) = update(view, shown, key);
        self.view = view;
        if self.view.frozen && self.frozen.is_none() {
            self.frozen = Some(published.state.clone());
        } else if !self.view.frozen {
            self.frozen = None;
        }
        drop(published);
        if self.view.theme != self.theme.name {
            let (theme, problem) = self.themes.pick(&self.view.theme);
            self.theme = theme;
            if let Some(p) = problem {
                self.view.notice = Some((Severity::Error, p));
            }
        }
        intent
    }

    /// Draw one frame (under the store's read lock: the runner waits for it).
    pub fn draw<B: Backend>(&mut self, terminal: &mut Terminal<B>) -> Result<()>
    where
        B::Error: Send + Sync + 'static,
    {
        let published = self.store.read();
        take_facts(&mut self.view, &published);
        let shown = self.frozen.as_ref().unwrap_or(&published.state);
        terminal
            .draw(|f| {
                let area = f.area();
                super::render(shown, &self.view, &self.theme, area, f.buffer_mut())
            })
            .wrap_err("drawing the dashboard")?;
        Ok(())
    }
}

/// The recording, connection and replay playhead as published, into the view (the header
/// and the key handler read them there); whether they changed.
fn take_facts(view: &mut ViewState, p: &Published) -> bool {
    let recording = p.recording.as_ref().map(|r| r.display().to_string());
    let changed =
        view.recording != recording || view.connection != p.connection || view.replay != p.replay;
    if changed {
        view.recording = recording;
        view.connection = p.connection.clone();
        view.replay = p.replay.clone();
    }
    changed
}

/// For measuring a stalled screen (debug builds only): `READYGAP_TEST_STALL_UI_MS=N` makes
/// the loop stop for N ms after it sent its first intent (the key `t`'s trial), while the
/// session goes on; the loop then goes on as before.
fn stall_after_intent() -> Option<Duration> {
    if !cfg!(debug_assertions) {
        return None;
    }
    let ms = std::env::var("READYGAP_TEST_STALL_UI_MS").ok()?;
    ms.parse().ok().map(Duration::from_millis)
}

/// The loop, for any backend and input stream (tests use a `TestBackend` and a channel);
/// with `release`, every write to the terminal goes through it, and the loop ends with an
/// error once a panic released the terminal. It ends when the input ends and the store's
/// writer is gone, or on `q`.
pub async fn run_loop<B, I>(
    terminal: &mut Terminal<B>,
    mut input: I,
    opts: DashboardOptions,
    store: Reader,
    actions: Actions,
    release: Option<&PanicRelease>,
) -> Result<()>
where
    B: Backend,
    B::Error: Send + Sync + 'static,
    I: Stream<Item = std::io::Result<TermEvent>> + Unpin,
{
    let mut notified = store.clone();
    let mut dash = Dashboard::new(&opts, store);
    let mut dirty = true;
    let mut last_draw: Option<Instant> = None;
    let mut feed_open = true;
    let mut input_open = true;
    let mut stall = stall_after_intent();
    loop {
        if dash.view.quit {
            return Ok(());
        }
        let due = dirty.then(|| last_draw.map_or_else(Instant::now, |t| t + FRAME));
        if let Some(due) = due
            && due <= Instant::now()
        {
            write(release, || dash.draw(terminal))??;
            dirty = false;
            last_draw = Some(Instant::now());
            continue;
        }
        let sleep_to = due.unwrap_or_else(Instant::now);
        tokio::select! {
            biased;
            key = input.next(), if input_open => match key {
                Some(Ok(TermEvent::Key(k))) => {
                    let intent = dash.key(k);
                    dirty = true;
                    match intent {
                        Some(Intent::Quit) => return Ok(()),
                        Some(intent) => {
                            send(&mut dash, &actions, intent);
                            if let Some(d) = stall.take() {
                                tokio::time::sleep(d).await;
                            }
                        }
                        None => {}
                    }
                }
                Some(Ok(TermEvent::Resize(..))) => {
                    write(release, || terminal.autoresize())?.wrap_err("resizing")?;
                    dirty = true;
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e).wrap_err("reading terminal input"),
                None => input_open = false,
            },
            open = notified.changed(), if feed_open => {
                if open {
                    dirty |= dash.changed();
                } else {
                    feed_open = false;
                    dash.view.feed_ended = true;
                    dirty = true;
                }
            },
            _ = tokio::time::sleep_until(sleep_to), if due.is_some() => {}
            else => return Ok(()),
        }
    }
}

/// Write to the terminal, through `release` when given: an error once a panic gave the
/// terminal back.
fn write<T>(release: Option<&PanicRelease>, write: impl FnOnce() -> T) -> Result<T> {
    match release {
        Some(r) => r
            .write(write)
            .ok_or_else(|| eyre!("a panic gave the terminal back")),
        None => Ok(write()),
    }
}

/// Hand an intent to whoever carries it out, or say why it cannot be done.
fn send(dash: &mut Dashboard, actions: &Actions, intent: Intent) {
    let label = intent.label(None);
    let sent = match (actions, intent) {
        (Actions::Session(tx), Intent::Session(c)) => tx.try_send(c).map_err(busy),
        (Actions::Replay(tx), Intent::Replay(c)) => tx.try_send(c).map_err(busy),
        // Choices and replay keys still change the view; nothing to say.
        // (a replay's Log view shows the lines the recording holds).
        (
            _,
            Intent::Replay(_)
            | Intent::Session(Command::ChoosePod(_) | Command::ChooseModel(_) | Command::Tail(_)),
        ) => Ok(()),
        (_, _) => {
            let text = format!("{label}: not available in {}", dash.view.mode_label);
            dash.view.notice = Some((Severity::Warn, text));
            Ok(())
        }
    };
    if let Err(why) = sent {
        dash.view.notice = Some((Severity::Error, format!("{label}: {why}")));
    }
}

/// Why a bounded channel did not take an intent.
fn busy<T>(e: mpsc::error::TrySendError<T>) -> &'static str {
    match e {
        mpsc::error::TrySendError::Full(_) => "busy",
        mpsc::error::TrySendError::Closed(_) => "executor stopped",
    }
}
