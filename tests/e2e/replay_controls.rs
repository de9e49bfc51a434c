//! The replay controller without a terminal: every seek (marks, trials, start, end, `--from`)
//! shows exactly the state of a full replay up to the playhead; `+`/`-` change the computed
//! due times (no sleeping: the controller takes the wall clock as an argument);
//! `--pause-at-marks` stops at each mark; bad `--from` values are clear errors. Also the keys:
//! in a replay `space` pauses (it freezes outside one) and the replay keys become
//! `Intent::Replay`, listed in the help screen.

use clap::Parser;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use readygap::cli::{Cli, Command as CliCommand};
use readygap::ui::intent::{Intent, ReplayCommand};
use readygap::ui::panels::replaybar::ReplayBar;
use readygap::ui::view::{ViewState, update};
use readygap_core::event::Event;
use readygap_core::fixtures::*;
use readygap_core::record::index::{Mark, ReplayIndex};
use readygap_core::replay::Step;
use readygap_core::replay::{ReplayOptions, Replayer, Speed, StartAt};
use readygap_core::state::State;
use std::time::{Duration, Instant};

/// About 5 trials, 30 s apart, with 4 Hz samples, ending a few events after a T4.
fn events() -> Vec<Event> {
    let mut events = session(2_000);
    let last_t4 = ReplayIndex::new(events.clone())
        .marks()
        .iter()
        .filter(|m| m.which == 4)
        .map(|m| m.at)
        .max()
        .expect("a finished trial");
    events.truncate(last_t4 + 10);
    events
}

fn replayer(events: &[Event], opts: ReplayOptions, now: Instant) -> Replayer {
    Replayer::new(ReplayIndex::new(events.to_vec()), &opts, now).expect("replayer")
}

/// The state a seek sent to the dashboard.
fn reset(feeds: &[Step]) -> &State {
    feeds
        .iter()
        .find_map(|f| match f {
            Step::Reset(s) => Some(s.as_ref()),
            _ => None,
        })
        .expect("a seek replaces the state")
}

fn bar(feeds: &[Step]) -> &ReplayBar {
    feeds
        .iter()
        .rev()
        .find_map(|f| match f {
            Step::Bar(b) => Some(b),
            _ => None,
        })
        .expect("the bar is reported")
}

fn has_mark(state: &State, m: &Mark) -> bool {
    state
        .timeline
        .trials
        .iter()
        .find(|t| t.index == m.trial)
        .is_some_and(|t| {
            let k = &t.marks;
            [k.t0, k.t1, k.t2, k.t3, k.t4][m.which as usize].is_some()
        })
}

fn current_trial(state: &State) -> Option<u32> {
    state.timeline.current().map(|t| t.index)
}

#[test]
fn next_and_previous_mark_show_the_full_replay_up_to_the_marks_event() {
    let events = events();
    let now = Instant::now();
    let mut r = replayer(&events, ReplayOptions::default(), now);
    let marks = r.marks().to_vec();
    assert!(marks.len() >= 20, "{} marks", marks.len());
    let mut visited = Vec::new();
    for m in &marks {
        let feeds = r.command(ReplayCommand::NextMark, now);
        let shown = reset(&feeds);
        assert_eq!(r.position(), m.at);
        assert!(
            *shown == State::from_events(&events[..m.at]),
            "{}",
            m.label()
        );
        // The mark is there, and the event before it did not have it yet: it is the mark's
        // own event.
        assert!(has_mark(shown, m), "{}", m.label());
        assert!(
            !has_mark(&State::from_events(&events[..m.at - 1]), m),
            "{}",
            m.label()
        );
        assert_eq!(r.clock(), m.ts);
        assert_eq!(
            bar(&feeds).position_ms,
            (m.ts - events[0].ts).num_milliseconds()
        );
        visited.push((m.trial, m.which));
    }
    // T0..T4 of each trial, trial after trial.
    let expected: Vec<(u32, u8)> = (1..=visited.len() as u32 / 5)
        .flat_map(|t| (0..5).map(move |w| (t, w)))
        .collect();
    assert_eq!(visited[..expected.len()], expected[..]);
    // Past the last mark `→` stays put.
    let before = r.position();
    let feeds = r.command(ReplayCommand::NextMark, now);
    assert_eq!(r.position(), before);
    assert!(feeds.iter().all(|f| !matches!(f, Step::Reset(_))));

    // `←` walks back through the same marks.
    for m in marks.iter().rev().skip(1).take(7) {
        let feeds = r.command(ReplayCommand::PrevMark, now);
        assert_eq!(r.position(), m.at, "{}", m.label());
        assert!(
            *reset(&feeds) == r.index().state_after(m.at),
            "{}",
            m.label()
        );
    }
}

#[test]
fn trial_keys_land_on_t0_of_the_previous_and_next_trial() {
    let events = events();
    let now = Instant::now();
    let mut r = replayer(&events, ReplayOptions::default(), now);
    let t0 = |n: u32| r.index().trial_start(n).cloned().expect("trial");
    let (t1, t2, t3) = (t0(1), t0(2), t0(3));

    let feeds = r.command(ReplayCommand::NextTrial, now);
    assert_eq!((r.position(), r.clock()), (t1.at, t1.ts));
    assert_eq!(current_trial(reset(&feeds)), Some(1));
    let feeds = r.command(ReplayCommand::NextTrial, now);
    assert_eq!((r.position(), r.clock()), (t2.at, t2.ts));
    assert_eq!(current_trial(reset(&feeds)), Some(2));
    assert!(*reset(&feeds) == State::from_events(&events[..t2.at]));
    r.command(ReplayCommand::NextTrial, now);
    assert_eq!(r.position(), t3.at);

    // `[` from a T0: the trial before.
    let feeds = r.command(ReplayCommand::PrevTrial, now);
    assert_eq!((r.position(), r.clock()), (t2.at, t2.ts));
    assert_eq!(current_trial(reset(&feeds)), Some(2));
    // `[` from inside trial 2 (two marks on): back to trial 2's own T0.
    r.command(ReplayCommand::NextMark, now);
    r.command(ReplayCommand::NextMark, now);
    assert!(r.position() > t2.at);
    r.command(ReplayCommand::PrevTrial, now);
    assert_eq!(r.position(), t2.at);
    r.command(ReplayCommand::PrevTrial, now);
    assert_eq!(r.position(), t1.at);
    // Before the first trial there is nothing: the playhead stays.
    r.command(ReplayCommand::PrevTrial, now);
    assert_eq!(r.position(), t1.at);
}

#[test]
fn home_and_end() {
    let events = events();
    let now = Instant::now();
    let mut r = replayer(
        &events,
        ReplayOptions {
            from: Some(StartAt::Trial(2)),
            ..Default::default()
        },
        now,
    );
    let feeds = r.command(ReplayCommand::End, now);
    assert_eq!(r.position(), events.len());
    assert!(*reset(&feeds) == State::from_events(&events));
    let last = r.marks().last().cloned().expect("marks");
    assert_eq!(last.which, 4, "the recording ends after a T4");
    assert!(has_mark(reset(&feeds), &last));
    assert!(r.ended() && bar(&feeds).ended);
    assert_eq!(bar(&feeds).position_ms, bar(&feeds).duration_ms);
    assert_eq!(r.next_due(), None, "nothing left to play");

    // Space at the end plays again from the start.
    let feeds = r.command(ReplayCommand::PauseResume, now);
    assert_eq!(r.position(), 0);
    assert!(!r.paused() && *reset(&feeds) == State::new());
    r.command(ReplayCommand::End, now);

    let feeds = r.command(ReplayCommand::Start, now);
    assert_eq!((r.position(), r.clock()), (0, events[0].ts));
    assert!(*reset(&feeds) == State::new());
    assert_eq!(bar(&feeds).position_ms, 0);
    assert!(!r.ended());
    assert_eq!(r.next_due(), Some(now), "the first event is due at once");
}

#[test]
fn playing_delivers_what_is_due_and_speed_keys_change_the_pace() {
    let events = events();
    let start = events[0].ts;
    let now = Instant::now();
    let mut r = replayer(
        &events,
        ReplayOptions {
            speed: Speed::Factor(100.0),
            ..Default::default()
        },
        now,
    );
    r.begin();
    // One wall second at ×100: exactly the events of the first 100 recorded seconds.
    let feeds = r.advance(now + Duration::from_secs(1), usize::MAX);
    let sent = feeds.iter().filter(|f| matches!(f, Step::Event(_))).count();
    let due = events
        .iter()
        .take_while(|e| (e.ts - start).num_milliseconds() <= 100_000)
        .count();
    assert_eq!(sent, due);
    assert_eq!(r.position(), due);
    assert_eq!(bar(&feeds).position_ms, 100_000);
    assert_eq!(bar(&feeds).speed, "×100");
    // The next event is due when its offset from the playhead, ÷100, has passed.
    let t = now + Duration::from_secs(1);
    let next = events[r.position()].ts;
    let gap = Duration::from_micros((next - r.clock()).num_microseconds().expect("µs") as u64);
    let close = |a: Duration, b: Duration| a.abs_diff(b) <= Duration::from_micros(2);
    assert!(close(r.next_due().expect("due") - t, gap / 100));

    // `+` at t: the remaining wait halves; `-` twice: double the original.
    let far = events[r.position() + 200].ts;
    let wait = |r: &Replayer| r.due_of(far).saturating_duration_since(t);
    let at_100 = wait(&r);
    r.command(ReplayCommand::Faster, t);
    assert_eq!(r.speed(), 200.0);
    assert!(close(wait(&r), at_100 / 2), "{:?} vs {at_100:?}", wait(&r));
    r.command(ReplayCommand::Slower, t);
    r.command(ReplayCommand::Slower, t);
    assert_eq!(r.speed(), 50.0);
    assert!(close(wait(&r), at_100 * 2), "{:?} vs {at_100:?}", wait(&r));
    // Bounds: ×1024 and ×1/64.
    for _ in 0..20 {
        r.command(ReplayCommand::Faster, t);
    }
    assert_eq!(r.speed(), 1024.0);
    for _ in 0..30 {
        r.command(ReplayCommand::Slower, t);
    }
    assert_eq!(r.speed(), 1.0 / 64.0);
    assert_eq!(r.speed_label(), "×1/64");

    // Paused, nothing is due and time passing delivers nothing.
    let pos = r.position();
    r.command(ReplayCommand::PauseResume, t);
    assert!(r.paused() && r.next_due().is_none());
    let feeds = r.advance(t + Duration::from_secs(3600), usize::MAX);
    assert!(feeds.iter().all(|f| !matches!(f, Step::Event(_))));
    assert_eq!(r.position(), pos);
    // Resumed later, the pace restarts from the pause point, not from the wall clock.
    let later = t + Duration::from_secs(3600);
    r.command(ReplayCommand::PauseResume, later);
    assert!(!r.paused());
    let due = r.next_due().expect("due");
    assert!(due >= later, "no catching up after a pause");
}

#[test]
fn max_speed_and_slower_from_max() {
    let events = events();
    let now = Instant::now();
    let mut r = replayer(
        &events,
        ReplayOptions {
            speed: Speed::Max,
            ..Default::default()
        },
        now,
    );
    assert_eq!(r.speed_label(), "max");
    let feeds = r.advance(now, 100);
    assert_eq!(r.position(), 100, "batches are bounded");
    assert_eq!(feeds.len(), 101);
    r.advance(now, usize::MAX);
    assert!(r.ended());
    r.command(ReplayCommand::Slower, now);
    assert_eq!(r.speed(), 1024.0);
}

#[test]
fn pause_at_marks_stops_at_every_mark() {
    let events = events();
    let now = Instant::now();
    let mut r = replayer(
        &events,
        ReplayOptions {
            speed: Speed::Max,
            pause_at_marks: true,
            ..Default::default()
        },
        now,
    );
    let marks = r.marks().to_vec();
    let mut state = State::new();
    for f in r.begin() {
        if let Step::Reset(s) = f {
            state = *s;
        }
    }
    for m in &marks {
        // Everything is due at once at max speed: only the mark stops the playhead.
        for f in r.advance(now, usize::MAX) {
            if let Step::Event(ev) = f {
                state.apply(&ev);
            }
        }
        assert!(r.paused(), "stopped at {}", m.label());
        assert_eq!(r.position(), m.at, "{}", m.label());
        assert!(has_mark(&state, m) && state == r.index().state_after(m.at));
        assert!(r.next_due().is_none());
        r.command(ReplayCommand::PauseResume, now);
    }
    for f in r.advance(now, usize::MAX) {
        if let Step::Event(ev) = f {
            state.apply(&ev);
        }
    }
    assert!(r.ended() && !r.paused());
    assert!(state == State::from_events(&events), "the whole recording");
}

#[test]
fn from_trial_offset_and_time() {
    let events = events();
    let start = events[0].ts;
    let now = Instant::now();
    let mut r = replayer(
        &events,
        ReplayOptions {
            from: Some("t0:2".parse().expect("t0:2")),
            ..Default::default()
        },
        now,
    );
    let t2 = r.index().trial_start(2).cloned().expect("trial 2");
    assert_eq!((r.position(), r.clock()), (t2.at, t2.ts));
    let feeds = r.begin();
    assert_eq!(current_trial(reset(&feeds)), Some(2));
    assert!(has_mark(reset(&feeds), &t2));

    let r = replayer(
        &events,
        ReplayOptions {
            from: Some("1m30s".parse().expect("1m30s")),
            ..Default::default()
        },
        now,
    );
    assert_eq!(r.clock(), start + chrono::Duration::seconds(90));
    assert_eq!(r.position(), r.index().position_at(r.clock()));
    assert!(events[r.position() - 1].ts <= r.clock() && events[r.position()].ts > r.clock());

    let at = (start + chrono::Duration::milliseconds(45_500)).to_rfc3339();
    let from: StartAt = at.parse().expect("rfc 3339");
    let r = replayer(
        &events,
        ReplayOptions {
            from: Some(from),
            ..Default::default()
        },
        now,
    );
    assert_eq!(r.clock(), start + chrono::Duration::milliseconds(45_500));

    assert_eq!("trial:3".parse(), Ok(StartAt::Trial(3)));
    assert_eq!("90s".parse(), Ok(StartAt::Offset(90_000)));
    assert_eq!("1h2m3.5s".parse(), Ok(StartAt::Offset(3_723_500)));
    assert_eq!("500ms".parse(), Ok(StartAt::Offset(500)));
    let cli = Cli::try_parse_from([
        "readygap",
        "replay",
        "r.jsonl",
        "--from",
        "t0:2",
        "--pause-at-marks",
    ])
    .expect("parses");
    match cli.command.expect("a subcommand") {
        CliCommand::Replay(r) => {
            assert_eq!(r.from, Some(StartAt::Trial(2)));
            assert!(r.pause_at_marks);
        }
        other => panic!("parsed as {other:?}"),
    }
}

#[test]
fn bad_from_is_a_clear_error() {
    for bad in [
        "",
        "soon",
        "90x",
        "1s1m",
        "t0:0",
        "trial:two",
        "-5s",
        "2026-13-01T00:00:00Z",
    ] {
        let err = bad.parse::<StartAt>().expect_err(bad);
        assert!(err.contains("--from"), "{bad:?}: {err}");
        assert!(
            err.contains("t0:N") || err.contains("numbered from 1"),
            "{bad:?}: {err}"
        );
    }
    let err = Cli::try_parse_from(["readygap", "replay", "r.jsonl", "--from", "soon"])
        .expect_err("bad --from")
        .to_string();
    assert!(err.contains("RFC 3339") && err.contains("t0:N"), "{err}");

    let events = events();
    let trials = ReplayIndex::new(events.clone())
        .marks()
        .iter()
        .filter(|m| m.which == 0)
        .count();
    let now = Instant::now();
    let new = |from| {
        Replayer::new(
            ReplayIndex::new(events.clone()),
            &ReplayOptions {
                from: Some(from),
                ..Default::default()
            },
            now,
        )
        .err()
        .map(|e| format!("{e:#}"))
        .expect("an error")
    };
    let e = new(StartAt::Trial(99));
    assert!(e.contains(&format!("trials 1 to {trials}")), "{e}");
    let e = new(StartAt::Offset(10 * 3_600_000));
    assert!(e.contains("beyond the end"), "{e}");
    let e = new(StartAt::Time(events[0].ts - chrono::Duration::seconds(1)));
    assert!(e.contains("outside the recording"), "{e}");

    // Through `replay::run`: the error names the file and the trial.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("short.jsonl");
    let mut rec = readygap_core::record::jsonl::Recorder::create(
        &path,
        &readygap_core::record::jsonl::Header::new(at(0), "kind-lab", "llm", "deploy/ollama"),
    )
    .expect("recording");
    for ev in &events {
        rec.write(ev).expect("write");
    }
    drop(rec);
    let err = readygap::commands::replay::run(
        &path,
        &ReplayOptions {
            from: Some(StartAt::Trial(99)),
            ..Default::default()
        },
        Default::default(),
    )
    .expect_err("no trial 99");
    let msg = format!("{err:#}");
    assert!(
        msg.contains("short.jsonl") && msg.contains("trial 99"),
        "{msg}"
    );
}

fn k(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

#[test]
fn replay_keys_become_replay_intents_only_in_a_replay() {
    let state = State::new();
    let live = ViewState::default();
    // Outside a replay: space freezes, the replay keys do nothing.
    let (v, intent) = update(live.clone(), &state, k(KeyCode::Char(' ')));
    assert!(v.frozen && intent.is_none());
    for code in [KeyCode::Right, KeyCode::Char(']'), KeyCode::End] {
        let (_, intent) = update(live.clone(), &state, k(code));
        assert_eq!(intent, None, "{code:?}");
    }
    // In a replay: each key asks the controller.
    let replay = ViewState {
        replay: Some(ReplayBar::default()),
        read_only: true,
        ..ViewState::default()
    };
    for (code, cmd) in [
        (KeyCode::Char(' '), ReplayCommand::PauseResume),
        (KeyCode::Left, ReplayCommand::PrevMark),
        (KeyCode::Right, ReplayCommand::NextMark),
        (KeyCode::Char('['), ReplayCommand::PrevTrial),
        (KeyCode::Char(']'), ReplayCommand::NextTrial),
        (KeyCode::Char('+'), ReplayCommand::Faster),
        (KeyCode::Char('-'), ReplayCommand::Slower),
        (KeyCode::Home, ReplayCommand::Start),
        (KeyCode::End, ReplayCommand::End),
    ] {
        let (v, intent) = update(replay.clone(), &state, k(code));
        assert_eq!(intent, Some(Intent::Replay(cmd)), "{code:?}");
        assert!(!v.frozen, "{code:?} does not freeze");
    }
    // The help screen lists them with their descriptions.
    let help = replay.keymap.help();
    for (keys, words) in [
        ("space", "pause/resume"),
        ("left", "previous T0–T4 mark"),
        ("]", "next trial"),
        ("+", "speed ×2"),
        ("home", "start"),
        ("end", "end"),
    ] {
        assert!(
            help.iter()
                .any(|e| e.keys.split('/').any(|k| k == keys) && e.description.contains(words)),
            "{keys}: {words}"
        );
    }
}

#[test]
fn replay_keys_can_be_rebound_and_the_help_says_what_a_replay_shadows() {
    use readygap::ui::keymap::{Command, Key, Keymap};
    use readygap::ui::panels::dialog::help_lines;
    use readygap::ui::theme::Theme;
    for name in ["home", "end", "left", "right"] {
        let key = Key::parse(name).expect(name);
        assert_eq!(key.to_string(), name);
    }
    let state = State::new();
    let replay = |keymap: Keymap| ViewState {
        keymap,
        replay: Some(ReplayBar::default()),
        ..ViewState::default()
    };
    // Defaults: freeze has no key left in a replay, and the help says so.
    let view = replay(Keymap::default());
    assert!(view.keymap.shadowed_in_replay(Command::Freeze));
    assert!(!view.keymap.shadowed_in_replay(Command::Help));
    let help: Vec<String> = help_lines(&view, &Theme::default_theme())
        .iter()
        .map(|l| l.to_string())
        .collect();
    let freeze = help
        .iter()
        .find(|l| l.contains(Command::Freeze.description()))
        .expect("freeze line");
    assert!(freeze.contains("not in a replay"), "{freeze}");
    // Outside a replay the replay lines say where they work.
    let live_help: Vec<String> = help_lines(&ViewState::default(), &Theme::default_theme())
        .iter()
        .map(|l| l.to_string())
        .collect();
    assert!(
        live_help
            .iter()
            .any(|l| l.contains("next trial") && l.contains("(in a replay)"))
    );

    // `pause_resume = "p"`: space freezes again in a replay, `p` pauses.
    let overrides = [("pause_resume".to_string(), vec!["p".to_string()])]
        .into_iter()
        .collect();
    let view = replay(Keymap::with_overrides(&overrides).expect("keymap"));
    assert!(!view.keymap.shadowed_in_replay(Command::Freeze));
    let (v, intent) = update(view.clone(), &state, k(KeyCode::Char(' ')));
    assert!(v.frozen && intent.is_none());
    let (_, intent) = update(view, &state, k(KeyCode::Char('p')));
    assert_eq!(intent, Some(Intent::Replay(ReplayCommand::PauseResume)));
}

mod stream {
    //! Whatever the keys and however time passes, the dashboard fed by the controller (events
    //! applied, resets replacing the state) shows exactly a full replay up to the playhead.
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Step {
        Key(ReplayCommand),
        /// Let this many wall milliseconds pass, then deliver what is due (at most `max`).
        Wait(u64, usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            prop::sample::select(vec![
                ReplayCommand::PauseResume,
                ReplayCommand::PrevMark,
                ReplayCommand::NextMark,
                ReplayCommand::PrevTrial,
                ReplayCommand::NextTrial,
                ReplayCommand::Faster,
                ReplayCommand::Slower,
                ReplayCommand::Start,
                ReplayCommand::End,
            ])
            .prop_map(Step::Key),
            (0u64..5_000, 1usize..400).prop_map(|(ms, max)| Step::Wait(ms, max)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn fed_state_is_the_full_replay_up_to_the_playhead(
            steps in prop::collection::vec(step(), 1..40),
            pause_at_marks: bool,
            speed in prop::sample::select(vec![1.0, 10.0, 1000.0]),
        ) {
            let events = events();
            let mut now = Instant::now();
            let mut r = replayer(
                &events,
                ReplayOptions {
                    speed: Speed::Factor(speed),
                    pause_at_marks,
                    ..Default::default()
                },
                now,
            );
            let mut shown = State::new();
            let apply = |feeds: Vec<readygap_core::replay::Step>, shown: &mut State| {
                use readygap_core::replay::Step as Out;
                for f in feeds {
                    match f {
                        Out::Event(ev) => shown.apply(&ev),
                        Out::Reset(s) => *shown = *s,
                        Out::Bar(_) => {}
                    }
                }
            };
            apply(r.begin(), &mut shown);
            let mut last_clock = r.clock();
            for s in steps {
                // A seek, or space at the end (plays again from the start).
                let seek = match s {
                    Step::Key(ReplayCommand::Faster | ReplayCommand::Slower) => false,
                    Step::Key(ReplayCommand::PauseResume) => r.ended(),
                    Step::Key(_) => true,
                    Step::Wait(..) => false,
                };
                match s {
                    Step::Key(c) => apply(r.command(c, now), &mut shown),
                    Step::Wait(ms, max) => {
                        now += Duration::from_millis(ms);
                        apply(r.advance(now, max), &mut shown);
                    }
                }
                prop_assert!(shown == State::from_events(&events[..r.position()]));
                // Playing never moves the clock backwards; only seeks (and replay) do.
                if !seek {
                    prop_assert!(r.clock() >= last_clock);
                }
                last_clock = r.clock();
            }
        }
    }
}
