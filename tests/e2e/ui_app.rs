//! The event loop end to end with a test backend: events reduced into the store (as the
//! runner reduces them) reach the screen, keys become the runner's commands (destructive ones after
//! `y`), a resize redraws at the new size, `q` ends the loop, and a closed feed is shown.
//! Waits poll the drawn screen with a bounded deadline.

use crate::ui_support::*;
use crossterm::event::{Event as TermEvent, KeyCode, KeyEvent, KeyModifiers};
use futures::channel::mpsc as fmpsc;
use ratatui::Terminal;
use ratatui::backend::{Backend, ClearType, TestBackend, WindowSize};
use ratatui::buffer::Cell;
use ratatui::layout::{Position, Size};
use readygap::ui::app::{Actions, Dashboard, DashboardOptions, run_loop};
use readygap::ui::intent::Command;
use readygap_live::store::Store;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// A `TestBackend` shared with the test, which reads the screen while the loop runs.
#[derive(Clone)]
struct Shared(Arc<Mutex<TestBackend>>);

impl Shared {
    fn with<T>(&self, f: impl FnOnce(&mut TestBackend) -> T) -> T {
        let mut b = self.0.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut b)
    }
    fn screen(&self) -> String {
        self.with(|b| text(b.buffer()))
    }
}

impl Backend for Shared {
    type Error = std::convert::Infallible;
    fn draw<'a, I: Iterator<Item = (u16, u16, &'a Cell)>>(
        &mut self,
        content: I,
    ) -> Result<(), Self::Error> {
        self.with(|b| b.draw(content))
    }
    fn hide_cursor(&mut self) -> Result<(), Self::Error> {
        self.with(|b| b.hide_cursor())
    }
    fn show_cursor(&mut self) -> Result<(), Self::Error> {
        self.with(|b| b.show_cursor())
    }
    fn get_cursor_position(&mut self) -> Result<Position, Self::Error> {
        self.with(|b| b.get_cursor_position())
    }
    fn set_cursor_position<P: Into<Position>>(&mut self, p: P) -> Result<(), Self::Error> {
        let p = p.into();
        self.with(|b| b.set_cursor_position(p))
    }
    fn clear(&mut self) -> Result<(), Self::Error> {
        self.with(|b| b.clear())
    }
    fn clear_region(&mut self, t: ClearType) -> Result<(), Self::Error> {
        self.with(|b| b.clear_region(t))
    }
    fn size(&self) -> Result<Size, Self::Error> {
        self.with(|b| b.size())
    }
    fn window_size(&mut self) -> Result<WindowSize, Self::Error> {
        self.with(|b| b.window_size())
    }
    fn flush(&mut self) -> Result<(), Self::Error> {
        self.with(Backend::flush)
    }
}

fn key(c: char) -> std::io::Result<TermEvent> {
    Ok(TermEvent::Key(KeyEvent::new(
        KeyCode::Char(c),
        KeyModifiers::NONE,
    )))
}

/// Poll `cond` on the screen until it holds or 20 s pass.
async fn wait_screen(b: &Shared, what: &str, cond: impl Fn(&str) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = b.screen();
        if cond(&s) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; screen:\n{s}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn recv<T>(rx: &mut mpsc::Receiver<T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .expect("intent within 20 s")
        .expect("channel open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_reach_the_screen_and_keys_become_intents() {
    let backend = Shared(Arc::new(Mutex::new(TestBackend::new(160, 48))));
    let store = Store::new();
    let feed_rx = store.reader();
    let (act_tx, mut act_rx) = mpsc::channel(8);
    let (key_tx, key_rx) = fmpsc::unbounded();
    let b = backend.clone();
    let task = tokio::spawn(async move {
        let mut term = Terminal::new(b).expect("terminal");
        run_loop(
            &mut term,
            key_rx,
            DashboardOptions::default(),
            feed_rx,
            Actions::Session(act_tx),
            None,
        )
        .await
    });
    wait_screen(&backend, "empty dashboard", |s| {
        s.contains("no pods seen yet")
    })
    .await;
    for ev in until(AFTER_T4) {
        store.apply(&ev);
    }
    wait_screen(&backend, "the finished trial", |s| {
        s.contains("T3→T4 5.59s") && s.contains("trial #1 ✓")
    })
    .await;

    key_tx.unbounded_send(key('i')).expect("keys");
    assert_eq!(recv(&mut act_rx).await, Command::Infer);
    key_tx.unbounded_send(key('d')).expect("keys");
    wait_screen(&backend, "confirmation", |s| {
        s.contains("delete pod ollama-1?")
    })
    .await;
    assert!(act_rx.try_recv().is_err(), "nothing sent before y");
    key_tx.unbounded_send(key('y')).expect("keys");
    // The key names the action; the runner picks the pod by the focus rule the dialog showed.
    assert_eq!(recv(&mut act_rx).await, Command::Delete);
    wait_screen(&backend, "dialog closed", |s| {
        !s.contains("delete pod ollama-1?")
    })
    .await;

    // Resize: the next frame has the new size and the narrow layout.
    backend.with(|b| b.resize(80, 24));
    key_tx
        .unbounded_send(Ok(TermEvent::Resize(80, 24)))
        .expect("keys");
    wait_screen(&backend, "80 columns", |s| {
        s.lines().count() == 24
            && s.lines().all(|l| l.chars().count() == 80)
            && s.contains("╭ Timeline")
    })
    .await;

    key_tx.unbounded_send(key('q')).expect("keys");
    let result = tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .expect("loop ends after q")
        .expect("no panic");
    assert!(result.is_ok(), "{result:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_feed_is_shown_and_actions_without_executor_are_refused() {
    let backend = Shared(Arc::new(Mutex::new(TestBackend::new(160, 48))));
    let store = Store::new();
    let feed_rx = store.reader();
    let (key_tx, key_rx) = fmpsc::unbounded();
    let b = backend.clone();
    let opts = DashboardOptions {
        read_only: true,
        mode_label: "replay".into(),
        ..DashboardOptions::default()
    };
    let task = tokio::spawn(async move {
        let mut term = Terminal::new(b).expect("terminal");
        run_loop(&mut term, key_rx, opts, feed_rx, Actions::None, None).await
    });
    for ev in until(MID_LOAD) {
        store.apply(&ev);
    }
    // The writer gone is the end of the feed.
    drop(store);
    wait_screen(&backend, "end of feed", |s| {
        s.contains("REPLAY (ended)") && s.contains("running 5.00s")
    })
    .await;
    key_tx.unbounded_send(key('R')).expect("keys");
    wait_screen(&backend, "refusal", |s| {
        s.contains("toggle recording: not available in replay")
    })
    .await;
    key_tx.unbounded_send(key('d')).expect("keys");
    wait_screen(&backend, "read-only notice", |s| {
        s.contains("read-only: `d` (delete) is disabled")
    })
    .await;
    // With both the feed and the input closed, the loop ends by itself.
    drop(key_tx);
    let result = tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .expect("loop ends when its inputs end")
        .expect("no panic");
    assert!(result.is_ok());
}

#[test]
fn frozen_display_keeps_a_snapshot_while_events_apply() {
    let store = Store::new();
    let mut dash = Dashboard::new(&DashboardOptions::default(), store.reader());
    let events = until(AFTER_T4);
    let (before, after) = events.split_at(events.len() / 2);
    for e in before {
        store.apply(e);
        assert!(dash.changed(), "live display changes");
    }
    let space = KeyEvent::new(KeyCode::Char(' '), KeyModifiers::NONE);
    assert_eq!(dash.key(space), None);
    assert!(dash.view.frozen);
    let snapshot = dash.shown();
    for e in after {
        store.apply(e);
        assert!(!dash.changed(), "frozen display does not change");
    }
    assert_eq!(dash.shown(), snapshot);
    assert_ne!(*store.state(), snapshot, "events were applied underneath");
    // The recording indicator is the store's, live while frozen.
    store.update(|p| p.recording = Some("r.jsonl".into()));
    assert!(
        dash.changed(),
        "the header's recording indicator changes while frozen"
    );
    assert_eq!(dash.view.recording.as_deref(), Some("r.jsonl"));
    assert_eq!(dash.shown(), snapshot);
    dash.key(space);
    assert_eq!(dash.shown(), *store.state());
    assert_eq!(*store.state(), state_at(AFTER_T4));
    // T switches the theme the loop draws with.
    let t = KeyEvent::new(KeyCode::Char('T'), KeyModifiers::NONE);
    dash.key(t);
    assert_eq!(dash.theme.name, "light");
}

fn code(c: KeyCode) -> std::io::Result<TermEvent> {
    Ok(TermEvent::Key(KeyEvent::new(c, KeyModifiers::NONE)))
}

/// A replay through the real controller task and the loop: the bar appears, `]` jumps to the
/// next trial's T0 (the header's trial number changes), space pauses (and does not freeze),
/// End shows the last trial finished, and other intents are refused in a replay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_controls_drive_the_dashboard() {
    use readygap::commands::replay::drive;
    use readygap_core::record::index::ReplayIndex;
    use readygap_core::replay::{ReplayOptions, Replayer, Speed, StartAt};
    let mut events = readygap_core::fixtures::session(2_000);
    let last_t4 = ReplayIndex::new(events.clone())
        .marks()
        .iter()
        .filter(|m| m.which == 4)
        .map(|m| m.at)
        .max()
        .expect("a finished trial");
    events.truncate(last_t4 + 5);
    let index = ReplayIndex::new(events);
    let trials = index.marks().iter().filter(|m| m.which == 0).count();
    // Slow enough that the playhead does not reach trial 2 by itself during the test.
    let opts = ReplayOptions {
        speed: Speed::Factor(1.0 / 64.0),
        from: Some(StartAt::Trial(1)),
        pause_at_marks: false,
    };
    let replayer = Replayer::new(index, &opts, std::time::Instant::now()).expect("replayer");
    let backend = Shared(Arc::new(Mutex::new(TestBackend::new(160, 48))));
    let store = Store::new();
    let feed_rx = store.reader();
    let (cmd_tx, cmd_rx) = mpsc::channel(64);
    let (key_tx, key_rx) = fmpsc::unbounded();
    let controller = tokio::spawn(drive(replayer, store, cmd_rx));
    let b = backend.clone();
    let dash_opts = DashboardOptions {
        read_only: true,
        mode_label: "replay".into(),
        ..DashboardOptions::default()
    };
    let task = tokio::spawn(async move {
        let mut term = Terminal::new(b).expect("terminal");
        run_loop(
            &mut term,
            key_rx,
            dash_opts,
            feed_rx,
            Actions::Replay(cmd_tx),
            None,
        )
        .await
    });
    wait_screen(&backend, "the replay bar at trial 1", |s| {
        s.contains("playing 00:00.0 /") && s.contains("×1/64") && s.contains("trial #1 running")
    })
    .await;
    key_tx.unbounded_send(key(']')).expect("keys");
    wait_screen(&backend, "trial 2", |s| s.contains("trial #2 running")).await;
    key_tx.unbounded_send(key(' ')).expect("keys");
    wait_screen(&backend, "paused", |s| s.contains("paused 00:30.")).await;
    assert!(!backend.screen().contains("FROZEN"));
    key_tx.unbounded_send(code(KeyCode::End)).expect("keys");
    let last = format!("trial #{trials} ✓");
    wait_screen(&backend, "the end", |s| {
        s.contains(&last) && s.contains("■ end")
    })
    .await;
    key_tx.unbounded_send(key('R')).expect("keys");
    wait_screen(&backend, "refusal", |s| {
        s.contains("toggle recording: not available in replay")
    })
    .await;
    key_tx.unbounded_send(code(KeyCode::Home)).expect("keys");
    wait_screen(&backend, "the start", |s| s.contains("no trial")).await;
    key_tx.unbounded_send(key('q')).expect("keys");
    let result = tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .expect("loop ends after q")
        .expect("no panic");
    assert!(result.is_ok(), "{result:?}");
    // The controller ends once the dashboard is gone.
    tokio::time::timeout(Duration::from_secs(20), controller)
        .await
        .expect("controller ends")
        .expect("no panic");
}
