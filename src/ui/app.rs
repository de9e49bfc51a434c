//! The dashboard's event loop. Events arrive on a channel and go through `State::apply` (the UI
//! never invents facts); keys go through the pure [`update`](super::view::update) and become
//! [`Intent`]s sent on the `actions` channel. Input is never blocked by I/O: terminal input is
//! crossterm's `EventStream`, awaited with the feed in one `tokio::select!`. A frame is drawn
//! only when something changed (an event, a key, a resize), at most 30 times a second; with no
//! events the loop sleeps. The terminal (raw mode, alternate screen) is set up and restored,
//! on exit and on panic, by [`super::terminal`]; every frame is drawn through its
//! [`PanicRelease`](super::terminal::PanicRelease), so nothing is drawn after a panic.
//!
//! The feed is anything that yields [`Feed`] items: live sessions pass a channel of events
//! (each one a `Feed::Event`); a replay passes a channel of `Feed`, which can also replace the
//! whole state (a seek) and report the playhead for the replay bar.

use super::intent::Intent;
use super::keymap::Keymap;
use super::panels::replaybar::ReplayBar;
use super::terminal::PanicRelease;
use super::theme::{Theme, Themes};
use super::view::{ViewState, update};
use color_eyre::eyre::{Result, WrapErr, eyre};
use crossterm::event::Event as TermEvent;
use futures::{Stream, StreamExt};
use ratatui::Terminal;
use ratatui::backend::Backend;
use readygap_core::event::Event;
use readygap_core::state::{Severity, State};
use std::path::PathBuf;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// The shortest time between two frames (30 frames/s).
pub const FRAME: Duration = Duration::from_millis(33);
/// Events applied per wake-up before input and drawing get a turn.
const BATCH: usize = 4096;

/// What the dashboard receives.
#[derive(Debug, Clone)]
pub enum Feed {
    /// Apply one event.
    Event(Event),
    /// Replace the whole state (a replay seeked).
    Reset(Box<State>),
    /// Where the replay is (switches the dashboard to replay mode).
    Replay(ReplayBar),
    /// The recording now being written (`None`: not recording); the header shows it.
    Recording(Option<String>),
    /// Not connected to the cluster: the state to show (`None`: connected).
    Connection(Option<String>),
}

impl From<readygap_core::replay::Step> for Feed {
    fn from(step: readygap_core::replay::Step) -> Feed {
        use readygap_core::replay::Step;
        match step {
            Step::Event(ev) => Feed::Event(ev),
            Step::Reset(state) => Feed::Reset(state),
            Step::Bar(bar) => Feed::Replay(bar),
        }
    }
}

/// A source of [`Feed`] items: a channel of events or of `Feed`.
pub trait FeedSource {
    /// The next item; `None` once the source is closed.
    fn recv_feed(&mut self) -> impl Future<Output = Option<Feed>> + Send;
    /// The next item if one is ready.
    fn try_recv_feed(&mut self) -> Option<Feed>;
}

impl FeedSource for mpsc::Receiver<Event> {
    async fn recv_feed(&mut self) -> Option<Feed> {
        self.recv().await.map(Feed::Event)
    }
    fn try_recv_feed(&mut self) -> Option<Feed> {
        self.try_recv().ok().map(Feed::Event)
    }
}

/// A live session's feed: the event stream, plus control items (the recording indicator,
/// the connection state) that are not events and so are neither reduced nor recorded. Control items go first.
pub struct LiveFeed {
    pub events: mpsc::Receiver<Event>,
    pub control: mpsc::UnboundedReceiver<Feed>,
}

impl FeedSource for LiveFeed {
    async fn recv_feed(&mut self) -> Option<Feed> {
        tokio::select! {
            biased;
            Some(c) = self.control.recv() => Some(c),
            ev = self.events.recv() => ev.map(Feed::Event),
        }
    }
    fn try_recv_feed(&mut self) -> Option<Feed> {
        self.control
            .try_recv()
            .ok()
            .or_else(|| self.events.try_recv().ok().map(Feed::Event))
    }
}

impl FeedSource for mpsc::Receiver<Feed> {
    async fn recv_feed(&mut self) -> Option<Feed> {
        self.recv().await
    }
    fn try_recv_feed(&mut self) -> Option<Feed> {
        self.try_recv().ok()
    }
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
    /// The recording being written, if any.
    pub recording: Option<String>,
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
            recording: None,
            notices: Vec::new(),
        }
    }
}

/// Run the dashboard in the real terminal until `q`/Ctrl-C, or until SIGINT, SIGTERM or
/// SIGHUP (see [`crate::signals`]): each ends it as `q` does, so the terminal is restored and
/// the caller closes the session down (recording, feeds, debug pods).
pub async fn run_dashboard<F: FeedSource>(
    opts: DashboardOptions,
    feed: F,
    actions: Option<mpsc::Sender<Intent>>,
) -> Result<()> {
    let mut terminal = super::terminal::setup()?;
    let input = crossterm::event::EventStream::new();
    // The loop only stops at an await: never in the middle of a frame.
    let result = tokio::select! {
        r = run_loop(
            &mut terminal,
            input,
            opts,
            feed,
            actions,
            Some(&super::terminal::PANIC_RELEASE),
        ) => r,
        _ = crate::signals::quit() => Ok(()),
    };
    super::terminal::restore()?;
    result
}

/// The state the loop keeps between wake-ups.
pub struct Dashboard {
    pub state: State,
    pub view: ViewState,
    pub theme: Theme,
    themes: Themes,
    /// The snapshot shown while frozen.
    frozen: Option<State>,
}

impl Dashboard {
    pub fn new(opts: &DashboardOptions) -> Dashboard {
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
            recording: opts.recording.clone(),
            notice,
            ..ViewState::default()
        };
        Dashboard {
            state: State::new(),
            view,
            theme,
            themes,
            frozen: None,
        }
    }

    /// What is on screen: the frozen snapshot, or the live state.
    pub fn shown(&self) -> &State {
        self.frozen.as_ref().unwrap_or(&self.state)
    }

    /// Apply one event. Returns whether the display changed.
    pub fn apply(&mut self, ev: &Event) -> bool {
        self.state.apply(ev);
        self.frozen.is_none()
    }

    /// Take one feed item. Returns whether the display changed.
    pub fn feed(&mut self, item: Feed) -> bool {
        match item {
            Feed::Event(ev) => self.apply(&ev),
            Feed::Reset(state) => {
                self.state = *state;
                self.frozen.is_none()
            }
            Feed::Replay(bar) => {
                let changed = self.view.replay.as_ref() != Some(&bar);
                self.view.replay = Some(bar);
                changed
            }
            Feed::Recording(path) => {
                let changed = self.view.recording != path;
                self.view.recording = path;
                changed
            }
            Feed::Connection(state) => {
                let changed = self.view.connection != state;
                self.view.connection = state;
                changed
            }
        }
    }

    /// Handle one key; returns the intent to carry out.
    pub fn key(&mut self, key: crossterm::event::KeyEvent) -> Option<Intent> {
        let view = std::mem::take(&mut self.view);
        let (view, intent) = update(view, self.shown(), key);
        self.view = view;
        if self.view.frozen && self.frozen.is_none() {
            self.frozen = Some(self.state.clone());
        } else if !self.view.frozen {
            self.frozen = None;
        }
        if self.view.theme != self.theme.name {
            let (theme, problem) = self.themes.pick(&self.view.theme);
            self.theme = theme;
            if let Some(p) = problem {
                self.view.notice = Some((Severity::Error, p));
            }
        }
        intent
    }

    /// Draw one frame.
    pub fn draw<B: Backend>(&self, terminal: &mut Terminal<B>) -> Result<()>
    where
        B::Error: Send + Sync + 'static,
    {
        terminal
            .draw(|f| {
                let area = f.area();
                super::render(self.shown(), &self.view, &self.theme, area, f.buffer_mut())
            })
            .wrap_err("drawing the dashboard")?;
        Ok(())
    }
}

/// The loop, for any backend and input stream (tests use a `TestBackend` and a channel);
/// with `release`, every write to the terminal goes through it, and the loop ends with an
/// error once a panic released the terminal.
pub async fn run_loop<B, I, F>(
    terminal: &mut Terminal<B>,
    mut input: I,
    opts: DashboardOptions,
    mut feed: F,
    actions: Option<mpsc::Sender<Intent>>,
    release: Option<&PanicRelease>,
) -> Result<()>
where
    B: Backend,
    B::Error: Send + Sync + 'static,
    I: Stream<Item = std::io::Result<TermEvent>> + Unpin,
    F: FeedSource,
{
    let mut dash = Dashboard::new(&opts);
    let mut dirty = true;
    let mut last_draw: Option<Instant> = None;
    let mut feed_open = true;
    let mut input_open = true;
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
                        Some(intent) => send(&mut dash, actions.as_ref(), intent),
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
            item = feed.recv_feed(), if feed_open => match item {
                Some(item) => {
                    let mut changed = dash.feed(item);
                    for _ in 0..BATCH {
                        match feed.try_recv_feed() {
                            Some(item) => changed |= dash.feed(item),
                            None => break,
                        }
                    }
                    dirty |= changed;
                }
                None => {
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

/// Hand an intent to the executor, or say why it cannot be done.
fn send(dash: &mut Dashboard, actions: Option<&mpsc::Sender<Intent>>, intent: Intent) {
    // In a replay the actions channel goes to the replay controller: only replay intents.
    let in_replay = dash.view.replay.is_some();
    match actions.filter(|_| !in_replay || matches!(intent, Intent::Replay(_))) {
        Some(tx) => {
            if let Err(e) = tx.try_send(intent.clone()) {
                let why = match e {
                    mpsc::error::TrySendError::Full(_) => "busy",
                    mpsc::error::TrySendError::Closed(_) => "executor stopped",
                };
                dash.view.notice = Some((Severity::Error, format!("{}: {why}", intent.label())));
            }
        }
        // Choices and replay keys still change the view; nothing to say.
        // (a replay's Log view shows the lines the recording holds).
        None if matches!(
            intent,
            Intent::ChoosePod(_)
                | Intent::ChooseModel(_)
                | Intent::Replay(_)
                | Intent::FollowLog(_)
        ) => {}
        None => {
            let text = format!(
                "{}: not available in {}",
                intent.label(),
                dash.view.mode_label
            );
            dash.view.notice = Some((Severity::Warn, text));
        }
    }
}
