//! Panels one by one: every panel survives a zero-size and a 1×1 area (and the whole
//! dashboard every tiny terminal size); colour roles are checked by style assertions for two
//! themes; behaviours that are not visible in plain-text snapshots (gaps break the memory line,
//! the residency warning threshold, a running trial grows with `state.now`).

use crate::ui_support::*;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Color;
use readygap::ui;
use readygap::ui::panels::{
    dialog, endpoints, footer, header, host, log, memory, pods, residency, timeline,
};
use readygap::ui::theme::Theme;
use readygap::ui::view::{Dialog, ViewState};
use readygap_core::fixtures::*;
use readygap_core::state::State;

type Panel = fn(&State, &ViewState, &Theme, Rect, &mut Buffer);

const PANELS: [(&str, Panel); 11] = [
    ("header", header::render),
    ("pods", pods::render),
    ("timeline", timeline::render),
    ("residency", residency::render),
    ("memory", memory::render),
    ("endpoints", endpoints::render),
    ("host", host::render),
    ("log", log::render),
    ("footer", footer::render),
    ("dialog", dialog::render),
    ("dashboard", ui::render),
];

fn themes() -> [Theme; 2] {
    [
        Theme::default_theme(),
        Theme::builtin("high-contrast").expect("high-contrast theme"),
    ]
}

/// Where the first occurrence of `needle` starts in the buffer.
fn find(buf: &Buffer, needle: &str) -> Option<(u16, u16)> {
    let a = buf.area;
    let first = needle.chars().next()?.to_string();
    for y in a.top()..a.bottom() {
        for x in a.left()..a.right() {
            if buf[(x, y)].symbol() != first {
                continue;
            }
            let ok = (x..)
                .zip(needle.chars())
                .all(|(cx, ch)| cx < a.right() && buf[(cx, y)].symbol() == ch.to_string());
            if ok {
                return Some((x, y));
            }
        }
    }
    None
}

/// `panel` drawn alone over a `w`×`h` buffer with the default view and theme.
fn drawn(panel: Panel, state: &State, w: u16, h: u16) -> Buffer {
    let mut buf = Buffer::empty(Rect::new(0, 0, w, h));
    panel(
        state,
        &ViewState::default(),
        &Theme::default_theme(),
        buf.area,
        &mut buf,
    );
    buf
}

#[test]
fn every_panel_survives_zero_and_one_cell_areas() {
    let states = [State::new(), state_at(MID_LOAD), state_at(AFTER_OOM)];
    let view = ViewState {
        dialog: Some(Dialog::Help),
        log_scale: true,
        log_view: true,
        ..ViewState::default()
    };
    let theme = Theme::default_theme();
    for state in &states {
        for (name, render) in PANELS {
            // Zero-size areas, inside and at the edge of a buffer, and a zero-size buffer.
            let mut buf = Buffer::empty(Rect::new(0, 0, 10, 5));
            for area in [
                Rect::new(0, 0, 0, 0),
                Rect::new(3, 2, 0, 4),
                Rect::new(3, 2, 4, 0),
            ] {
                render(state, &view, &theme, area, &mut buf);
            }
            assert_eq!(
                buf,
                Buffer::empty(Rect::new(0, 0, 10, 5)),
                "{name} drew into a zero area"
            );
            let mut empty = Buffer::empty(Rect::ZERO);
            render(state, &view, &theme, Rect::new(0, 0, 5, 5), &mut empty);

            // A 1×1 area: the panel draws at most that cell.
            let mut buf = Buffer::empty(Rect::new(0, 0, 3, 3));
            render(state, &view, &theme, Rect::new(1, 1, 1, 1), &mut buf);
            for (x, y) in [
                (0, 0),
                (1, 0),
                (2, 0),
                (0, 1),
                (2, 1),
                (0, 2),
                (1, 2),
                (2, 2),
            ] {
                assert_eq!(
                    buf[(x, y)].symbol(),
                    " ",
                    "{name} drew outside its 1×1 area"
                );
            }
            // An area partly outside the buffer is clipped, not a panic.
            let mut buf = Buffer::empty(Rect::new(0, 0, 4, 4));
            render(state, &view, &theme, Rect::new(2, 2, 50, 50), &mut buf);
        }
    }
}

#[test]
fn whole_dashboard_survives_every_tiny_terminal() {
    let state = state_at(AFTER_OOM);
    let theme = Theme::default_theme();
    for (dialog, log_view) in [
        (None, false),
        (None, true),
        (Some(Dialog::Help), false),
        (Some(Dialog::Events), true),
    ] {
        let view = ViewState {
            dialog,
            log_view,
            ..ViewState::default()
        };
        for w in 0..24u16 {
            for h in 0..12u16 {
                let mut buf = Buffer::empty(Rect::new(0, 0, w, h));
                ui::render(&state, &view, &theme, buf.area, &mut buf);
            }
        }
    }
}

#[test]
fn oom_killed_state_uses_the_error_colour() {
    let state = state_at(AFTER_OOM);
    for theme in themes() {
        let t = frame(&state, &ViewState::default(), &theme, 160, 48);
        let buf = t.backend().buffer();
        let (x, y) = find(buf, "OOMKilled (137)").expect("OOMKilled shown");
        assert_eq!(buf[(x, y)].fg, theme.error, "theme {}", theme.name);
        // The footer's latest message is the OOM detector's verdict, in the error style too.
        let (x, y) = find(buf, "single_model_oom: llama3.2:3b").expect("OOM verdict in the footer");
        assert_eq!(y, 47);
        assert_eq!(buf[(x, y)].fg, theme.error);
        // A running pod's state is not in the error colour.
        let t = frame(&state_at(AFTER_T4), &ViewState::default(), &theme, 160, 48);
        let buf = t.backend().buffer();
        let (x, y) = find(buf, "Running  ").expect("running state");
        assert_ne!(buf[(x, y)].fg, theme.error);
    }
}

#[test]
fn timeline_segments_use_their_role_colours() {
    let state = state_at(AFTER_T4);
    let trial = state.timeline.current().expect("a trial");
    let segs = timeline::segments(trial, state.now);
    assert_eq!(
        segs.iter().map(|s| s.to_mark).collect::<Vec<_>>(),
        vec![1, 2, 3, 4]
    );
    assert!(segs.iter().all(|s| !s.growing));
    for theme in themes() {
        let area = Rect::new(0, 0, 62, 12);
        let mut buf = Buffer::empty(area);
        timeline::render(&state, &ViewState::default(), &theme, area, &mut buf);
        // Inner area starts at (1,1): title row, then the bar row.
        let bar_y = 2;
        let width = 60.0;
        let total = (segs[3].to - segs[0].from).num_milliseconds() as f64;
        for s in &segs {
            let a = (s.from - segs[0].from).num_milliseconds() as f64 / total * width;
            let b = (s.to - segs[0].from).num_milliseconds() as f64 / total * width;
            if b - a < 2.0 {
                continue; // too short to own a cell for sure (T2→T3 is 10 ms)
            }
            let mid = 1 + ((a + b) / 2.0) as u16;
            let cell = &buf[(mid, bar_y)];
            assert_eq!(cell.symbol(), timeline::BAR);
            assert_eq!(
                cell.fg,
                theme.segment(s.to_mark),
                "segment to T{}",
                s.to_mark
            );
        }
        // The T3→T4 segment's label is in its colour, and is the widest segment here.
        let (x, y) = find(&buf, "T3→T4 5.59s").expect("T3→T4 label");
        assert_eq!(buf[(x, y)].fg, theme.segment_t3_t4);
        let last = 60u16;
        assert_eq!(buf[(last, bar_y)].fg, theme.segment_t3_t4);
        assert_ne!(theme.segment_t3_t4, theme.segment_t0_t1);
    }
}

/// A trial whose runtime answered (503 "Loading model") 0.4 s before its model was ready
/// (llama-server): a full trial with the failing probe turned into an answered 503.
fn split_t2_state() -> State {
    let mut events = vec![applied(0, pod("ollama-a", "uid-a", Stage::Ready, 0))];
    events.extend(full_trial(
        10_000,
        1,
        ("ollama-a", "uid-a"),
        ("ollama-b", "uid-b"),
    ));
    let events: Vec<_> = events
        .into_iter()
        .map(|mut e| {
            if let readygap_core::event::EventKind::RuntimeProbe(p) = &mut e.kind
                && !p.ok
            {
                p.http_answered = true;
                p.status = Some(503);
            }
            e
        })
        .collect();
    State::from_events(&events)
}

#[test]
fn the_t2_http_mark_is_ticked_on_the_bar_with_its_lead() {
    let state = split_t2_state();
    assert_eq!(state.timeline.trials.len(), 1);
    let trial = state.timeline.current().expect("a trial");
    let (h, t2) = (trial.marks.t2_http.unwrap(), trial.marks.t2.unwrap());
    assert!(h < t2, "the fixture splits T2");
    let t0 = trial.marks.t0.unwrap();
    let end = trial.marks.t4.unwrap();
    for theme in themes() {
        let area = Rect::new(0, 0, 62, 12);
        let mut buf = Buffer::empty(area);
        timeline::render(&state, &ViewState::default(), &theme, area, &mut buf);
        let frac = (h - t0).num_milliseconds() as f64 / (end - t0).num_milliseconds() as f64;
        let x = 1 + (frac * 60.0).round() as u16;
        assert_eq!(
            buf[(x, 2)].symbol(),
            timeline::HTTP_TICK,
            "theme {}",
            theme.name
        );
        assert_eq!(
            (1..61)
                .filter(|x| buf[(*x, 2)].symbol() == timeline::HTTP_TICK)
                .count(),
            1
        );
        assert!(text(&buf).contains("(HTTP 0.40s before)"), "{}", text(&buf));
    }
    // One instant (Ollama): no tick, no lead.
    let state = state_at(AFTER_T4);
    let buf = drawn(timeline::render, &state, 62, 12);
    assert!(!text(&buf).contains(timeline::HTTP_TICK) && !text(&buf).contains("(HTTP"));
}

#[test]
fn running_trial_grows_with_state_now() {
    let early = state_at(T0 + 3_000);
    let later = state_at(MID_LOAD);
    let label = |s: &State| {
        let buf = drawn(timeline::render, s, 60, 8);
        text(&buf)
    };
    // At T0+3 s: T3 was at T0+2.41 s, so the growing segment is 0.59 s; at 15 s it is 2.59 s.
    assert!(label(&early).contains("T3→… 0.59s"), "{}", label(&early));
    assert!(label(&later).contains("T3→… 2.59s"), "{}", label(&later));
    let trial = later.timeline.current().expect("trial");
    let growing = timeline::segments(trial, later.now);
    assert!(
        growing
            .last()
            .is_some_and(|s| s.growing && s.to == later.now.unwrap_or_default())
    );
}

#[test]
fn zero_ready_intervals_are_highlighted() {
    let state = state_at(AFTER_OOM);
    for theme in themes() {
        let area = Rect::new(0, 0, 40, 8);
        let mut buf = Buffer::empty(area);
        endpoints::render(&state, &ViewState::default(), &theme, area, &mut buf);
        // Head, the zero-ready line, then the ready bars (after the 6-cell label, from x = 7).
        let y = text(&buf)
            .lines()
            .position(|l| l.starts_with("│ready") && l.contains('█'))
            .expect("ready bar row") as u16;
        assert_eq!(
            y,
            3,
            "head, zero-ready line, then the bars:\n{}",
            text(&buf)
        );
        let last = 38;
        assert_eq!(
            buf[(last, y)].bg,
            theme.gap_highlight,
            "no endpoint ready at the end"
        );
        assert_eq!(buf[(7, y)].bg, Color::Reset, "ready at the start");
        assert_eq!(buf[(7, y)].fg, theme.chart_ready);
        let (x, y) = find(&buf, "none ready for 2.90s").expect("zero-ready line");
        assert_eq!(buf[(x, y)].fg, theme.error);
    }
}

#[test]
fn memory_gaps_break_the_line_instead_of_dropping_to_zero() {
    let state = state_at(AFTER_T4);
    let mem = state.memory.get("ollama-1").expect("memory of the new pod");
    let from = mem.series.points().next().map(|p| p.ts).expect("points");
    let runs = memory::runs(mem, from, false, |p| Some(p.current));
    assert_eq!(runs.len(), 2, "one gap splits the series into two runs");
    assert!(
        runs.iter().flatten().all(|(_, y)| *y > 0.1),
        "no zero points"
    );
    let total: usize = runs.iter().map(Vec::len).sum();
    assert_eq!(total, mem.series.len() - 1);
    // Log scale keeps the order of values.
    let log = memory::runs(mem, from, true, |p| Some(p.current));
    let ys: Vec<f64> = log[0].iter().map(|p| p.1).collect();
    assert!(
        ys.windows(2).all(|w| w[0] <= w[1]),
        "memory rises while loading"
    );
}

#[test]
fn log_toggle_changes_the_memory_axis() {
    let state = state_at(AFTER_T4);
    let render = |log: bool| {
        let view = ViewState {
            log_scale: log,
            ..ViewState::default()
        };
        let mut buf = Buffer::empty(Rect::new(0, 0, 70, 14));
        memory::render(&state, &view, &Theme::default_theme(), buf.area, &mut buf);
        text(&buf)
    };
    let (lin, log) = (render(false), render(true));
    assert!(lin.contains("2.2G") && !lin.contains(" log"), "{lin}");
    assert!(log.contains(" log") && log.contains("1M"), "{log}");
    // The trial's marks are on the time axis.
    for m in ["T0", "T1", "T4"] {
        assert!(lin.contains(m), "{m} missing:\n{lin}");
    }
}

#[test]
fn residency_warns_from_85_percent_of_the_limit() {
    let mut events = until(AFTER_T4);
    let render = |events: &[readygap_core::event::Event]| {
        let state = State::from_events(events);
        let buf = drawn(residency::render, &state, 60, 8);
        (text(&buf), buf)
    };
    // 3.7 GB of a 4 GiB limit = 86 %.
    let (t, buf) = render(&events);
    assert!(t.contains("86% of 4.00 GiB limit resident"), "{t}");
    let (x, y) = find(&buf, "⚠").expect("warning sign");
    assert_eq!(buf[(x, y)].fg, Theme::default_theme().warn);
    // 3.4 GB = 79 %: no warning.
    events.push(ev(
        AFTER_T4 + 1,
        readygap_core::event::Source::Runtime,
        readygap_core::event::EventKind::Residency {
            pod: "ollama-1".into(),
            models: vec![readygap_core::event::ResidentModel {
                name: "llama3.2:3b".into(),
                size: 3_400_000_000,
                size_vram: 0,
                expires_at: Some(at(AFTER_T4 + 61_000)),
                ..Default::default()
            }],
        },
    ));
    let (t, _) = render(&events);
    assert!(!t.contains("limit resident"), "{t}");
    assert!(
        t.contains("expires in 1m"),
        "expiry relative to state.now: {t}"
    );
}

#[test]
fn header_shows_session_trial_mode_and_recording() {
    let state = state_at(AFTER_T4);
    let view = ViewState {
        mode_label: "replay".into(),
        recording: Some("/tmp/r.jsonl".into()),
        frozen: true,
        ..ViewState::default()
    };
    let mut buf = Buffer::empty(Rect::new(0, 0, 160, 1));
    header::render(&state, &view, &Theme::default_theme(), buf.area, &mut buf);
    let t = text(&buf);
    for part in [
        "kind-lab",
        "llm",
        "deploy/ollama",
        "llama3.2:3b",
        "trial #1 ✓",
        "REPLAY",
        "FROZEN",
        "● REC /tmp/r.jsonl",
    ] {
        assert!(t.contains(part), "{part} missing: {t}");
    }
}

#[test]
fn oom_banner_stays_until_acknowledged() {
    let state = state_at(AFTER_OOM);
    for theme in themes() {
        let t = frame(&state, &ViewState::default(), &theme, 160, 48);
        let buf = t.backend().buffer();
        let (x, y) = find(buf, "single_model_oom on").expect("the banner's title");
        assert_eq!(buf[(x, y)].fg, theme.error, "theme {}", theme.name);
        assert!(find(buf, "a acknowledge").is_some());
        // `a` acknowledges: the banner is gone, the verdict stays in the footer.
        let key = crossterm::event::KeyEvent::from(crossterm::event::KeyCode::Char('a'));
        let (view, intent) = readygap::ui::view::update(ViewState::default(), &state, key);
        assert_eq!(intent, None);
        let t = frame(&state, &view, &theme, 160, 48);
        let buf = t.backend().buffer();
        assert!(find(buf, "single_model_oom on").is_none());
        assert!(find(buf, "single_model_oom: llama3.2:3b").is_some());
    }
    // Before the kill there is no banner.
    let t = frame(
        &state_at(AFTER_T4),
        &ViewState::default(),
        &themes()[0],
        160,
        48,
    );
    assert!(find(t.backend().buffer(), "acknowledge").is_none());
}

/// The Host panel with this machine, a node sampled over ssh (its access line), and a node
/// only guessed, sampled from the Summary API (≈ cache), whose feed is failing.
#[test]
fn host_panel_shows_each_nodes_access_and_its_feeds_error() {
    use readygap_core::event::{EventKind, HostSample, NodeAccessInfo, Source};
    let sample = |ms: i64, node: Option<&str>, approx: bool| {
        ev(
            ms,
            Source::Host,
            EventKind::HostSample(HostSample {
                node: node.map(str::to_owned),
                cpu_percent: Some(25.0),
                mem_total: 32 << 30,
                mem_available: Some(24 << 30),
                cached: Some(3 << 30),
                cache_approx: approx,
                ..HostSample::default()
            }),
        )
    };
    let events = vec![
        sample(0, None, false),
        ev(
            1,
            Source::Host,
            EventKind::NodeAccess(NodeAccessInfo {
                node: "gpu-1".into(),
                target: "ssh root@10.0.0.5:22".into(),
                origin: "configured by [nodes.\"gpu-*\"]".into(),
                sampling: true,
                sampled_via: None,
            }),
        ),
        sample(2, Some("gpu-1"), false),
        ev(
            3,
            Source::Host,
            EventKind::NodeAccess(NodeAccessInfo {
                node: "cpu-1".into(),
                target: "ssh alice@10.0.0.9:22".into(),
                origin: "guessed from InternalIP 10.0.0.9, not sampled: set [nodes.\"cpu-1\"] to sample over it"
                    .into(),
                sampling: false,
                sampled_via: Some("kubelet Summary API (node proxy)".into()),
            }),
        ),
        sample(4, Some("cpu-1"), true),
        ev(
            5,
            Source::Host,
            EventKind::SourceError {
                feed: "host cpu-1".into(),
                message: "forbidden: nodes/proxy get".into(),
            },
        ),
    ];
    let state = State::from_events(&events);
    let theme = Theme::default_theme();
    let mut buf = Buffer::empty(Rect::new(0, 0, 40, 28));
    host::render(&state, &ViewState::default(), &theme, buf.area, &mut buf);
    insta::assert_snapshot!("host_panel_node_access", text(&buf));

    let (x, y) = find(&buf, "✗ forbidden").expect("the feed's error is shown");
    assert_eq!(buf[(x + 2, y)].fg, theme.error);
    let (x, y) = find(&buf, "via ssh root@10.0.0.5:22 ·").expect("the access line");
    assert_eq!(buf[(x, y)].fg, theme.muted);
    assert!(find(&buf, "≈3.0").is_some() || find(&buf, "≈3").is_some());

    // Narrow and tiny areas: wrapped text is clipped, never drawn outside the area.
    for (w, h) in [(1, 1), (3, 3), (12, 6), (20, 40)] {
        let mut buf = Buffer::empty(Rect::new(0, 0, 24, 44));
        host::render(
            &state,
            &ViewState::default(),
            &theme,
            Rect::new(1, 1, w, h),
            &mut buf,
        );
        for y in 0..44u16 {
            for x in 0..24u16 {
                let inside = (1..1 + w).contains(&x) && (1..1 + h).contains(&y);
                if !inside {
                    assert_eq!(buf[(x, y)].symbol(), " ", "{w}×{h} drew at {x},{y}");
                }
            }
        }
    }

    // The feed recovers: the error line goes.
    let mut events = events;
    events.push(ev(
        6,
        Source::Host,
        EventKind::SourceConnected {
            feed: "host cpu-1".into(),
            detail: "kubelet Summary API".into(),
        },
    ));
    let state = State::from_events(&events);
    let mut buf = Buffer::empty(Rect::new(0, 0, 40, 28));
    host::render(&state, &ViewState::default(), &theme, buf.area, &mut buf);
    assert!(find(&buf, "forbidden").is_none(), "{}", text(&buf));
}

/// A sample without a CPU share (a sampler's first), `MemAvailable:` or `Cached:` shows
/// `—` for each, with no bar, never 0 %; the next sample's figures replace it.
#[test]
fn host_panel_shows_an_unknown_figure_as_a_dash_without_a_bar() {
    use readygap_core::event::{EventKind, HostSample, Source};
    let first = HostSample {
        mem_total: 32 << 30,
        ..HostSample::default()
    };
    let mut events = vec![ev(0, Source::Host, EventKind::HostSample(first.clone()))];
    let render = |events: &[readygap_core::event::Event]| {
        let mut buf = Buffer::empty(Rect::new(0, 0, 40, 8));
        let state = State::from_events(events);
        host::render(
            &state,
            &ViewState::default(),
            &Theme::default_theme(),
            buf.area,
            &mut buf,
        );
        text(&buf)
    };
    let screen = render(&events);
    let lines: Vec<&str> = screen.lines().collect();
    let line = |label: &str| {
        lines
            .iter()
            .find(|l| l.contains(label))
            .unwrap_or_else(|| panic!("no {label:?} line in\n{screen}"))
            .to_string()
    };
    for label in [" cpu ", " mem "] {
        let l = line(label);
        assert!(l.contains(&format!("{label}—")), "{l}");
        assert!(
            !l.contains('%') && !l.contains('█') && !l.contains('░'),
            "{l}"
        );
    }
    assert!(line(" used ").contains("— / 32.0"), "{screen}");
    let avail = line(" avail ");
    assert!(
        avail.contains("avail —") && avail.contains("cache —"),
        "{avail}"
    );
    assert!(
        !screen.contains("0%") && !screen.contains(" 0.0"),
        "{screen}"
    );

    // The second sample knows them: bars and figures, 0 % included when measured.
    events.push(ev(
        2_000,
        Source::Host,
        EventKind::HostSample(HostSample {
            cpu_percent: Some(0.0),
            mem_available: Some(24 << 30),
            cached: Some(3 << 30),
            ..first
        }),
    ));
    let screen = render(&events);
    assert!(!screen.contains('—'), "{screen}");
    assert!(
        screen.contains("░ 0%") && screen.contains("░ 25%"),
        "{screen}"
    );
}

/// The runtime's own `/metrics` figures follow its pod's line; a runtime that exports none
/// (Ollama) gets no such line.
#[test]
fn residency_shows_the_runtimes_metrics_line() {
    use readygap_core::event::{EventKind, RuntimeMetrics, Source};
    let mut events = until(AFTER_T4);
    let render = |events: &[readygap_core::event::Event]| {
        let state = State::from_events(events);
        let buf = drawn(residency::render, &state, 90, 10);
        text(&buf)
    };
    assert!(!render(&events).contains("/metrics:"));
    events.push(ev(
        AFTER_T4 + 1,
        Source::Runtime,
        EventKind::RuntimeMetrics {
            pod: "ollama-1".into(),
            metrics: RuntimeMetrics {
                running: Some(1.0),
                waiting: Some(2.0),
                kv_cache: Some(0.25),
                tokens_generated: Some(1234.0),
            },
        },
    ));
    let t = render(&events);
    assert!(
        t.contains("/metrics: running 1 · waiting 2 · KV cache 25% · 1234 tokens generated"),
        "{t}"
    );
    // It replays: the recording's snapshot keeps the last figures.
    let state = State::from_events(&events);
    let again = State::from_events(&state.snapshot_events(at(AFTER_T4 + 2)));
    assert_eq!(
        again.runtimes["ollama-1"]
            .metrics
            .as_ref()
            .map(|(_, m)| m.running),
        Some(Some(1.0))
    );
}

/// The line being measured is never hidden by what is drawn for reference: with the
/// contract's verdicts listed in the Memory panel, a usage of 0.26 GiB on a 4.4 GiB linear
/// axis (a 135M model under a 4 GiB limit, as on the real cluster) is still drawn in the
/// chart's lowest rows; the verdict lines take rows of their own under the marks axis.
#[test]
fn a_low_usage_line_is_drawn_under_the_verdicts() {
    let mut state = state_at(AFTER_T4);
    assert!(
        !state.contract.verdicts.is_empty(),
        "the fixture has verdicts"
    );
    let pod = ViewState::default()
        .focus_pod(&state)
        .expect("a focused pod");
    let now = (state.now.expect("now") - at(0)).num_milliseconds();
    for i in 1..=120 {
        state.apply(&memory(now + i * 500, &pod, 280_000_000));
    }
    let theme = Theme::default_theme();
    let area = Rect::new(0, 0, 160, 48);
    let mut buf = Buffer::empty(area);
    ui::render(&state, &ViewState::default(), &theme, area, &mut buf);
    let m = ui::layout(area).memory;
    let (_, verdict_row) = find(&buf, "▲ ").expect("a verdict listed");
    assert!(
        m.contains((m.x + 1, verdict_row).into()),
        "the verdicts are in the Memory panel"
    );
    // The rows of the chart's lower quarter, above its marks axis (the row ending in `now`).
    let row_text =
        |y: u16| -> String { (m.x..m.x + m.width).map(|x| buf[(x, y)].symbol()).collect() };
    let axis = (m.y..m.y + m.height)
        .find(|&y| row_text(y).trim_end_matches('│').ends_with("now"))
        .expect("the marks axis of the Memory panel");
    let chart_rows = axis - (m.y + 2);
    let low = axis.saturating_sub(chart_rows / 4)..axis;
    let usage_cells = low
        .clone()
        .flat_map(|y| (m.x + m.width / 2..m.x + m.width - 1).map(move |x| (x, y)))
        .filter(|&(x, y)| buf[(x, y)].fg == theme.chart_usage && buf[(x, y)].symbol() != " ")
        .count();
    assert!(
        usage_cells >= 10,
        "the usage line in rows {low:?} of the Memory panel: {usage_cells} cells\n{}",
        text(&buf)
    );
}

/// The runtime answered on the new pod's address 100 ms before the pod turned Ready (what the
/// inference-aware readiness probe causes every time): the bar runs T0→T2→T1→T3→T4 on one
/// time axis, its segments add up to the trial's span, and the labels name the marks in
/// that order.
#[test]
fn a_t2_before_t1_is_drawn_in_its_real_order() {
    let mut events = vec![applied(0, pod("ollama-a", "uid-a", Stage::Ready, 0))];
    events.extend(
        full_trial(10_000, 1, ("ollama-a", "uid-a"), ("ollama-b", "uid-b"))
            .into_iter()
            .filter_map(|mut e| match &e.kind {
                readygap_core::event::EventKind::RuntimeProbe(p) if !p.ok => None,
                readygap_core::event::EventKind::RuntimeProbe(_) => {
                    e.ts = at(11_600);
                    Some(e)
                }
                _ => Some(e),
            }),
    );
    events.sort_by_key(|e| e.ts);
    let state = State::from_events(&events);
    let trial = state.timeline.current().expect("a trial");
    let m = &trial.marks;
    assert!(m.t2.unwrap() < m.t1.unwrap(), "{m:?}");
    let segs = timeline::segments(trial, state.now);
    let order: Vec<(usize, usize)> = segs.iter().map(|s| (s.from_mark, s.to_mark)).collect();
    assert_eq!(order, [(0, 2), (2, 1), (1, 3), (3, 4)]);
    let sum: i64 = segs
        .iter()
        .map(|s| (s.to - s.from).num_milliseconds())
        .sum();
    assert_eq!(sum, (m.t4.unwrap() - m.t0.unwrap()).num_milliseconds());
    let mut buf = Buffer::empty(Rect::new(0, 0, 80, 12));
    let theme = Theme::default_theme();
    timeline::render(&state, &ViewState::default(), &theme, buf.area, &mut buf);
    let shown = text(&buf);
    assert!(
        shown.contains("T0→T2 1.60s T2→T1 0.10s T1→T3 0.71s T3→T4 5.59s"),
        "{shown}"
    );
    // The bar is drawn left to right in that order: T2's colour before T1's.
    let first = |c| (1..79).find(|&x| buf[(x, 2)].fg == c);
    assert!(first(theme.segment(2)) < first(theme.segment(3)), "{shown}");
}

/// A message the user must read is never lost to the width: at 200 columns a 170-character
/// message (an RBAC hint is that long) takes the footer whole, the key hints giving way; one
/// longer than the line ends in `…`, and the help screen shows it whole, wrapped.
#[test]
fn a_long_footer_message_is_whole_or_cut_visibly_and_whole_in_the_help() {
    use readygap_core::state::{Message, Severity};
    let long: String = "the watch of endpointslices was refused (403): it lets readygap see which \
        pods the Service sends traffic to; grant list and watch on discovery.k8s.io \
        endpointslices in namespace llm"
        .into();
    assert!(long.chars().count() > 160, "{}", long.chars().count());
    let mut state = state_at(AFTER_T4);
    let ts = state.now.unwrap();
    let say = |state: &mut State, text: &str| {
        state.messages.push_back(Message {
            ts,
            severity: Severity::Warn,
            text: text.to_string(),
        })
    };
    say(&mut state, &long);
    let footer_text = |state: &State, width: u16| {
        let buf = drawn(footer::render, state, width, 1);
        text(&buf)
    };
    let t = footer_text(&state, 200);
    assert!(t.contains(&long), "{t}");
    assert!(!t.contains('…'), "{t}");

    let longer = format!("{long}; and then some more words until the footer ends at the tail");
    say(&mut state, &longer);
    let t = footer_text(&state, 200);
    assert!(t.contains('…'), "cut visibly: {t}");
    assert!(!t.contains("at the tail"), "{t}");
    let view = ViewState {
        dialog: Some(Dialog::Help),
        ..ViewState::default()
    };
    let mut buf = Buffer::empty(Rect::new(0, 0, 200, 60));
    dialog::render(&state, &view, &Theme::default_theme(), buf.area, &mut buf);
    let help = text(&buf);
    assert!(help.contains("latest messages, newest first:"), "{help}");
    // Newest first, both whole: the tail of the newer one, then the older one's.
    let tail = help
        .find("at the tail")
        .expect("the whole message in the help");
    let older = help.rfind("namespace llm").expect("the older message");
    assert!(tail < older, "{help}");
}

/// The Residency panel's first line says what the runtime's API can tell; at 80 columns the
/// llama-server's sentence is wrapped, not cut: its last words are on screen.
#[test]
fn residency_says_what_the_api_tells_whole_at_80_columns() {
    let mut state = state_at(AFTER_T4);
    state.session.runtime = Some("llamacpp (--runtime)".into());
    let buf = drawn(residency::render, &state, 80, 14);
    let t = text(&buf);
    assert!(
        residency::can_tell("llamacpp").chars().count() > 80,
        "the sentence needs wrapping at this width"
    );
    assert!(t.contains("llamacpp (--runtime): /health"), "{t}");
    assert!(t.contains("no expiry") && t.contains("VRAM,"), "{t}");
    assert!(t.contains("ollama-1"), "the pod's lines still follow: {t}");
}

/// The Events that explain a trial are on the main screen without a key press (issue 34):
/// during a trial, the kubelet's `Unhealthy` with the probe's output (×3, warning colour)
/// comes before a newer `Pulled`, at 160×48 and at 80×24, and is ticked `!` on the Timeline's
/// bar; `e` shows every Event whole.
#[test]
fn events_that_explain_the_trial_are_on_screen_and_e_shows_them_whole() {
    use readygap_core::event::{EventKind, KubeEventView, Source};
    let failed = "Liveness probe failed: curl: (7) Failed to connect to localhost port 11434 \
        after 0 ms: Couldn't connect to server";
    let kube = |ms: i64, name: &str, reason: &str, ty: &str, message: &str, count| {
        ev(
            ms,
            Source::Kube,
            EventKind::KubeEvent(KubeEventView {
                object: "pod/ollama-1".into(),
                reason: reason.into(),
                message: message.into(),
                type_: ty.into(),
                name: name.into(),
                count: Some(count),
                time: Some(at(ms)),
            }),
        )
    };
    let mut events = until(MID_LOAD);
    events.push(kube(T0 + 900, "e1", "Unhealthy", "Warning", failed, 1));
    events.push(kube(T0 + 1900, "e1", "Unhealthy", "Warning", failed, 2));
    events.push(kube(T0 + 2900, "e1", "Unhealthy", "Warning", failed, 3));
    events.push(kube(
        T0 + 3000,
        "e2",
        "Pulled",
        "Normal",
        "Container image already present on machine",
        1,
    ));
    let state = State::from_events(&events);
    let theme = Theme::default_theme();
    for (w, h) in [(160, 48), (80, 24)] {
        let mut buf = Buffer::empty(Rect::new(0, 0, w, h));
        ui::render(&state, &ViewState::default(), &theme, buf.area, &mut buf);
        let t = text(&buf);
        let (x, y) = find(&buf, "Unhealthy ×3").unwrap_or_else(|| panic!("{w}×{h}:\n{t}"));
        assert_eq!(
            buf[(x, y)].fg,
            theme.warn().fg.unwrap(),
            "{w}×{h}: warning colour"
        );
        assert!(t.contains("Liveness probe failed"), "{w}×{h}:\n{t}");
        if let Some((_, py)) = find(&buf, "Pulled") {
            assert!(py > y, "{w}×{h}: the explaining Event first:\n{t}");
        }
        // Ticked on the Timeline's bar where it happened, in the warning colour.
        let (bx, by) = find(&buf, timeline::EVENT_TICK).unwrap_or_else(|| panic!("{w}×{h}:\n{t}"));
        assert_eq!(buf[(bx, by)].fg, theme.warn().fg.unwrap());
        assert!(
            find(&buf, "T0→").is_some_and(|(_, ly)| ly == by + 1),
            "the tick is on the bar, above its labels:\n{t}"
        );
    }
    // `e`: all of them, the probe's whole output wrapped.
    let view = ViewState {
        dialog: Some(Dialog::Events),
        ..ViewState::default()
    };
    let mut buf = Buffer::empty(Rect::new(0, 0, 80, 24));
    ui::render(&state, &view, &theme, buf.area, &mut buf);
    let t = text(&buf);
    assert!(t.contains("Couldn't connect to server"), "{t}");
    assert!(t.contains("Container image already present"), "{t}");
}

/// The Log view (`L`): the followed pod's lines, newest at the bottom, timed from the trial's
/// T0, the lines readygap marks highlighted and named; the new pod's start-up lines ticked
/// on the Timeline's bar; a log that cannot be read says why in the title. At 160×48 the log
/// takes Endpoints' and Host's place, at 80×24 the whole bottom row.
#[test]
fn the_log_view_shows_the_followed_pods_lines_with_its_marks() {
    use readygap_core::event::{EventKind, Source};
    let line = |ms: i64, text: &str| {
        ev(
            ms,
            Source::Log,
            EventKind::LogLine {
                pod: "ollama-1".into(),
                text: text.into(),
            },
        )
    };
    let mut events = until(MID_LOAD);
    events.push(ev(
        T0 + 1_000,
        Source::Log,
        EventKind::LogFollow {
            pod: "ollama-1".into(),
            following: true,
            error: None,
        },
    ));
    events.push(line(
        T0 + 1_100,
        r#"time=2026-12-07T01:58:48.936Z level=INFO source=routes.go:1564 msg="Listening on [::]:11434 (version 0.12.6)""#,
    ));
    events.push(line(
        T0 + 1_200,
        r#"[GIN] 2026/12/07 - 01:58:49 | 200 |    1.005396ms |       127.0.0.1 | GET      "/api/tags""#,
    ));
    events.push(line(
        T0 + 2_000,
        r#"time=2026-12-07T01:58:49.463Z level=INFO source=server.go:400 msg="starting runner" cmd="/usr/bin/ollama runner""#,
    ));
    events.push(line(
        T0 + 2_100,
        "llama_model_loader: - type  f32:   61 tensors",
    ));
    let state = State::from_events(&events);
    assert_eq!(
        state.timeline.current().and_then(|t| t.new_pod.as_deref()),
        Some("ollama-1")
    );
    let theme = Theme::default_theme();
    let on = ViewState {
        log_view: true,
        ..ViewState::default()
    };
    for (w, h) in [(160, 48), (80, 24)] {
        let mut buf = Buffer::empty(Rect::new(0, 0, w, h));
        ui::render(&state, &on, &theme, buf.area, &mut buf);
        let t = text(&buf);
        assert!(t.contains("Log · ollama-1 · following"), "{w}×{h}:\n{t}");
        assert!(!t.contains("Endpoints"), "the log takes its place:\n{t}");
        let (lx, ly) = find(&buf, "▸ listening").unwrap_or_else(|| panic!("{w}×{h}:\n{t}"));
        assert_eq!(
            buf[(lx, ly)].fg,
            theme.accent().fg.unwrap(),
            "{w}×{h}: highlighted"
        );
        let (_, ry) = find(&buf, "▸ model load").unwrap_or_else(|| panic!("{w}×{h}:\n{t}"));
        let (_, ty) = find(&buf, "llama_model_loader").unwrap_or_else(|| panic!("{w}×{h}:\n{t}"));
        assert!(
            ly < ry && ry < ty,
            "oldest first, newest at the bottom:\n{t}"
        );
        assert!(t.contains("+1.10s"), "timed from T0:\n{t}");
        let (gx, gy) = find(&buf, "[GIN]").unwrap_or_else(|| panic!("{w}×{h}:\n{t}"));
        assert_eq!(
            buf[(gx, gy)].fg,
            theme.muted().fg.unwrap(),
            "a poll is muted"
        );
        assert!(
            !t.lines().nth(gy as usize).unwrap().contains('▸'),
            "a GET marks nothing:\n{t}"
        );
        // The new pod's start-up lines ticked on the bar, above its labels.
        let (_, by) = find(&buf, timeline::LOG_TICK).unwrap_or_else(|| panic!("{w}×{h}:\n{t}"));
        assert!(
            find(&buf, "T0→").is_some_and(|(_, y)| y == by + 1),
            "the tick is on the bar:\n{t}"
        );
    }
    // Off: no Log panel, no tick (the lines stay in the state).
    let mut buf = Buffer::empty(Rect::new(0, 0, 160, 48));
    ui::render(&state, &ViewState::default(), &theme, buf.area, &mut buf);
    assert!(find(&buf, "Log · ").is_none() && find(&buf, "Endpoints").is_some());
    // Without the view's follower (a replay of a recording made with the view off), the
    // focused pod's start-up lines, read regardless, and the title says so.
    let startup_only: Vec<_> = events
        .iter()
        .filter(|e| match &e.kind {
            EventKind::LogFollow { .. } => false,
            EventKind::LogLine { text, .. } => readygap_core::runtime_log::mark(text).is_some(),
            _ => true,
        })
        .cloned()
        .collect();
    let state = State::from_events(&startup_only);
    let mut buf = Buffer::empty(Rect::new(0, 0, 160, 48));
    ui::render(&state, &on, &theme, buf.area, &mut buf);
    let t = text(&buf);
    assert!(t.contains("Log · ollama-1 · its start-up lines"), "{t}");
    assert!(
        find(&buf, "▸ model load").is_some() && find(&buf, "[GIN]").is_none(),
        "{t}"
    );
    // A log that cannot be read says why.
    events.push(ev(
        T0 + 3_000,
        Source::Log,
        EventKind::LogFollow {
            pod: "ollama-1".into(),
            following: false,
            error: Some("forbidden: get pods/log in llm-recovery-lab".into()),
        },
    ));
    let state = State::from_events(&events);
    let mut buf = Buffer::empty(Rect::new(0, 0, 160, 48));
    ui::render(&state, &on, &theme, buf.area, &mut buf);
    let t = text(&buf);
    assert!(
        t.contains("cannot read: forbidden: get pods/log"),
        "the reason in the title:\n{t}"
    );
}

/// A GPU pod's VRAM on the Memory panel: its figures and source in the legend, drawn on the
/// chart; when it cannot be read, the reason in the warning colour, never a zero.
#[test]
fn the_memory_panel_shows_a_gpu_pods_vram_and_why_it_is_not_read() {
    use readygap_core::event::{EventKind, Source};
    use readygap_core::gpu::GpuMemory;
    let mut events = until(MID_LOAD);
    let pod = "ollama-1".to_string();
    for (ms, used) in [(T0 + 2_000, 0u64), (T0 + 3_000, 3 << 30)] {
        events.push(ev(
            ms,
            Source::Memory,
            EventKind::GpuSample {
                pod: pod.clone(),
                source: "nvidia-smi in the container".into(),
                gpus: vec![GpuMemory {
                    index: 0,
                    uuid: "GPU-1".into(),
                    used,
                    total: 24 << 30,
                }],
                passed_over: vec!["DCGM exporter: not configured (--dcgm)".into()],
            },
        ));
    }
    let state = State::from_events(&events);
    let theme = Theme::default_theme();
    let buf = drawn(memory::render, &state, 120, 20);
    let t = text(&buf);
    assert!(
        t.contains("VRAM 3.00G/24.00G (nvidia-smi in the container)"),
        "{t}"
    );
    let buf = drawn(memory::render, &state, 200, 20);
    let t = text(&buf);
    assert!(
        t.contains("[DCGM exporter: not configured (--dcgm)]"),
        "why the preferred source is not used:\n{t}"
    );
    events.push(ev(
        T0 + 4_000,
        Source::Memory,
        EventKind::GpuUnavailable {
            pod,
            why: "nvidia-smi line 1: memory.used is [N/A]".into(),
        },
    ));
    let state = State::from_events(&events);
    let buf = drawn(memory::render, &state, 160, 20);
    let t = text(&buf);
    let (x, y) = find(&buf, "VRAM not read: nvidia-smi line 1").unwrap_or_else(|| panic!("{t}"));
    assert_eq!(buf[(x + 2, y)].fg, theme.warn().fg.unwrap());
    // No GPU source, but the runtime says what its models hold in VRAM: that figure, said
    // as the runtime's, with why the GPU is not read.
    events.push(ev(
        T0 + 5_000,
        Source::Runtime,
        EventKind::Residency {
            pod: "ollama-1".into(),
            models: vec![readygap_core::event::ResidentModel {
                name: "llama3.2:1b".into(),
                size: 3 << 30,
                size_vram: 2 << 30,
                ..Default::default()
            }],
        },
    ));
    let state = State::from_events(&events);
    let buf = drawn(memory::render, &state, 200, 20);
    let t = text(&buf);
    assert!(
        t.contains("VRAM 2.00G (the runtime's /api/ps size_vram: its models only)")
            && t.contains("[GPU not read: nvidia-smi line 1"),
        "{t}"
    );
}
