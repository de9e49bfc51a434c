//! asciicast v2 export: a recording replayed offscreen through the dashboard's renderer,
//! frame by frame, written as an asciinema cast (a JSON header line, then `[time, "o", data]`
//! output events with the frames' terminal output, and `[time, "m", label]` markers at every
//! T0–T4 mark, labelled like `trial 2 T1 Ready`).
//!
//! Frames are ratatui buffers; each is written as the difference from the previous one
//! (cursor moves, SGR colour changes, text), so a cast stays small.

use crate::ui::panels::timeline::http_apart;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier};
use readygap_core::event::{Event, Timestamp};
use readygap_core::state::State;
use readygap_core::timeline::Trial;
use serde::Serialize;
use std::fmt::Write as _;

/// The header line of an asciicast v2 file.
#[derive(Debug, Clone, Serialize)]
pub struct CastHeader {
    pub version: u32,
    pub width: u16,
    pub height: u16,
    /// Unix time of the recording's start.
    pub timestamp: i64,
    /// Seconds.
    pub duration: f64,
    pub title: String,
    pub env: serde_json::Value,
}

/// Options of the export.
#[derive(Debug, Clone)]
pub struct CastOptions {
    pub width: u16,
    pub height: u16,
    /// Replay speed: 2.0 makes the cast twice as fast as the recording.
    pub speed: f64,
    /// Gaps longer than this (seconds, cast time) are shortened to it.
    pub idle_limit: Option<f64>,
    /// Frames per second of recording time at most.
    pub fps: f64,
    pub title: String,
}

impl Default for CastOptions {
    fn default() -> Self {
        CastOptions {
            width: 120,
            height: 36,
            speed: 1.0,
            idle_limit: Some(2.0),
            fps: 10.0,
            title: "readygap".into(),
        }
    }
}

/// A cast built in memory.
#[derive(Debug, Clone)]
pub struct Cast {
    pub header: CastHeader,
    /// `(time, code, data)` with non-decreasing time.
    pub events: Vec<(f64, &'static str, String)>,
}

impl Cast {
    /// The file's text: the header line, then one JSON array per line.
    pub fn to_text(&self) -> String {
        let mut out = serde_json::to_string(&self.header).unwrap_or_default();
        out.push('\n');
        for (t, code, data) in &self.events {
            let line = serde_json::json!([(t * 1e6).round() / 1e6, code, data]);
            out.push_str(&line.to_string());
            out.push('\n');
        }
        out
    }
}

/// The labels of each mark of a trial, for markers. T2 "HTTP answers" has its own marker
/// where the runtime tells it apart from "model ready" (llama-server's 503 "Loading model"
/// before `/health` 200); where they are one instant (Ollama, vLLM) T2 is one marker.
fn marks_of(t: &Trial) -> [(Option<Timestamp>, &'static str); 6] {
    let m = &t.marks;
    [
        (m.t0, "T0 replacement requested"),
        (m.t1, "T1 Ready"),
        (http_apart(t), "T2 HTTP answers"),
        (m.t2, "T2 runtime answers"),
        (m.t3, "T3 inference sent"),
        (m.t4, "T4 inference done"),
    ]
}

/// Replay `events` offscreen with `render` and build the cast.
pub fn export(
    events: &[Event],
    opts: &CastOptions,
    mut render: impl FnMut(&State, Rect, &mut Buffer),
) -> Cast {
    let area = Rect::new(0, 0, opts.width, opts.height);
    let start = events.first().map(|e| e.ts);
    let speed = if opts.speed > 0.0 { opts.speed } else { 1.0 };
    let frame_gap = 1.0 / opts.fps.max(0.1);
    let mut state = State::new();
    let mut prev = Buffer::empty(area);
    let mut out = vec![(0.0, "o", "\x1b[?25l\x1b[2J".to_string())];
    // Cast time runs with the recording (÷ speed) but long idle stretches are cut.
    let mut clock = CastClock::new(opts.idle_limit);
    let mut last_frame_at: Option<f64> = None;
    let mut marked = std::collections::BTreeSet::new();

    let rel = |ts: Timestamp| -> f64 {
        start.map_or(0.0, |s| {
            (ts - s).num_microseconds().unwrap_or(0) as f64 / 1e6 / speed
        })
    };

    for (i, ev) in events.iter().enumerate() {
        state.apply(ev);
        let t = rel(ev.ts);
        // Markers for marks reached by this event.
        for trial in &state.timeline.trials {
            for (ts, label) in marks_of(trial) {
                if let Some(ts) = ts
                    && marked.insert((trial.index, label))
                {
                    let at = clock.map(rel(ts).max(0.0));
                    out.push((at, "m", format!("trial {} {label}", trial.index)));
                }
            }
        }
        let next_t = events.get(i + 1).map(|e| rel(e.ts));
        let due = last_frame_at.is_none_or(|l| t - l >= frame_gap);
        let last_before_gap = next_t.is_none_or(|n| n - t >= frame_gap);
        if due || last_before_gap {
            let mut buf = Buffer::empty(area);
            render(&state, area, &mut buf);
            let data = diff(&prev, &buf);
            if !data.is_empty() {
                out.push((clock.map(t), "o", data));
            }
            prev = buf;
            last_frame_at = Some(t);
        }
    }
    let end = out.last().map_or(0.0, |e| e.0);
    out.push((end, "o", "\x1b[0m\x1b[?25h".to_string()));
    // Markers were placed at their mark times, which may precede the frame that showed them.
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    Cast {
        header: CastHeader {
            version: 2,
            width: opts.width,
            height: opts.height,
            timestamp: start.map_or(0, |s| s.timestamp()),
            duration: (end * 1e6).round() / 1e6,
            title: opts.title.clone(),
            env: serde_json::json!({"TERM": "xterm-256color", "SHELL": "/bin/sh"}),
        },
        events: out,
    }
}

/// Maps recording time to cast time, shortening gaps longer than the idle limit.
struct CastClock {
    limit: Option<f64>,
    last_in: f64,
    last_out: f64,
}

impl CastClock {
    fn new(limit: Option<f64>) -> Self {
        CastClock {
            limit,
            last_in: 0.0,
            last_out: 0.0,
        }
    }

    fn map(&mut self, t: f64) -> f64 {
        if t <= self.last_in {
            // Earlier than the newest mapped time (a mark stamped before its frame): keep
            // the same offset, never going below zero.
            return (self.last_out - (self.last_in - t)).max(0.0);
        }
        let gap = t - self.last_in;
        let gap = self.limit.map_or(gap, |l| gap.min(l));
        self.last_in = t;
        self.last_out += gap;
        self.last_out
    }
}

fn sgr_color(c: Color, fg: bool) -> String {
    let base = if fg { 30 } else { 40 };
    match c {
        Color::Reset => format!("{}", if fg { 39 } else { 49 }),
        Color::Black => format!("{base}"),
        Color::Red => format!("{}", base + 1),
        Color::Green => format!("{}", base + 2),
        Color::Yellow => format!("{}", base + 3),
        Color::Blue => format!("{}", base + 4),
        Color::Magenta => format!("{}", base + 5),
        Color::Cyan => format!("{}", base + 6),
        Color::Gray => format!("{}", base + 7),
        Color::DarkGray => format!("{}", base + 60),
        Color::LightRed => format!("{}", base + 61),
        Color::LightGreen => format!("{}", base + 62),
        Color::LightYellow => format!("{}", base + 63),
        Color::LightBlue => format!("{}", base + 64),
        Color::LightMagenta => format!("{}", base + 65),
        Color::LightCyan => format!("{}", base + 66),
        Color::White => format!("{}", base + 67),
        Color::Indexed(i) => format!("{};5;{i}", if fg { 38 } else { 48 }),
        Color::Rgb(r, g, b) => format!("{};2;{r};{g};{b}", if fg { 38 } else { 48 }),
    }
}

fn sgr(fg: Color, bg: Color, m: Modifier) -> String {
    let mut s = String::from("\x1b[0");
    let codes = [
        (Modifier::BOLD, ";1"),
        (Modifier::DIM, ";2"),
        (Modifier::ITALIC, ";3"),
        (Modifier::UNDERLINED, ";4"),
        (Modifier::REVERSED, ";7"),
    ];
    for (_, code) in codes.into_iter().filter(|(flag, _)| m.contains(*flag)) {
        s.push_str(code);
    }
    let _ = write!(s, ";{};{}m", sgr_color(fg, true), sgr_color(bg, false));
    s
}

/// Terminal output that turns `prev` into `cur` (same size): cursor moves and changed cells.
pub fn diff(prev: &Buffer, cur: &Buffer) -> String {
    let mut out = String::new();
    let mut style: Option<(Color, Color, Modifier)> = None;
    let mut cursor: Option<(u16, u16)> = None;
    for (x, y, cell) in prev.diff(cur) {
        if cursor != Some((x, y)) {
            let _ = write!(out, "\x1b[{};{}H", y + 1, x + 1);
        }
        let st = (cell.fg, cell.bg, cell.modifier);
        if style != Some(st) {
            out.push_str(&sgr(st.0, st.1, st.2));
            style = Some(st);
        }
        let sym = cell.symbol();
        out.push_str(if sym.is_empty() { " " } else { sym });
        let w = unicode_width::UnicodeWidthStr::width(sym).max(1) as u16;
        cursor = Some((x + w, y));
    }
    if !out.is_empty() {
        out.push_str("\x1b[0m");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::style::Style;
    use readygap_core::event::{EventKind, Source};

    #[test]
    fn diff_writes_only_changed_cells_with_colours() {
        let area = Rect::new(0, 0, 10, 2);
        let a = Buffer::empty(area);
        let mut b = Buffer::empty(area);
        b.set_string(2, 1, "ok", Style::default().fg(Color::Green));
        let d = diff(&a, &b);
        assert!(d.starts_with("\x1b[2;3H"), "{d:?}");
        assert!(d.contains(";32;49mok"), "{d:?}");
        assert_eq!(diff(&b, &b), "");
    }

    #[test]
    fn idle_gaps_are_cut_and_time_never_goes_back() {
        let mut c = CastClock::new(Some(2.0));
        assert_eq!(c.map(1.0), 1.0);
        assert_eq!(c.map(11.0), 3.0);
        assert_eq!(c.map(11.5), 3.5);
        assert_eq!(c.map(10.0), 2.0);
        assert_eq!(c.map(0.0), 0.0);
    }

    fn markers(events: &[Event]) -> Vec<String> {
        let cast = export(events, &CastOptions::default(), |_, _, _| {});
        cast.events
            .into_iter()
            .filter(|e| e.1 == "m")
            .map(|e| e.2)
            .collect()
    }

    #[test]
    fn t2_http_has_its_marker_where_the_runtime_tells_it_apart() {
        use readygap_core::fixtures::{Stage, applied, full_trial, pod};
        let mut trial = vec![applied(0, pod("ollama-a", "uid-a", Stage::Ready, 0))];
        trial.extend(full_trial(
            10_000,
            1,
            ("ollama-a", "uid-a"),
            ("ollama-b", "uid-b"),
        ));
        // Ollama: HTTP answers and model ready are one instant, one T2 marker.
        let one = markers(&trial);
        assert!(!one.iter().any(|m| m.contains("HTTP")), "{one:?}");
        assert_eq!(one.len(), 5, "{one:?}");
        // llama-server: its 503 "Loading model" answered 0.4 s before the model was ready.
        let split: Vec<Event> = trial
            .into_iter()
            .map(|mut e| {
                if let EventKind::RuntimeProbe(p) = &mut e.kind
                    && !p.ok
                {
                    p.http_answered = true;
                    p.status = Some(503);
                }
                e
            })
            .collect();
        let m = markers(&split);
        assert_eq!(
            m,
            [
                "trial 1 T0 replacement requested",
                "trial 1 T1 Ready",
                "trial 1 T2 HTTP answers",
                "trial 1 T2 runtime answers",
                "trial 1 T3 inference sent",
                "trial 1 T4 inference done",
            ]
        );
    }

    #[test]
    fn export_has_header_frames_and_sorted_times() {
        let t0 = chrono::DateTime::from_timestamp_millis(1_800_000_000_000).unwrap();
        let events: Vec<Event> = (0..20)
            .map(|i| {
                Event::new(
                    t0 + chrono::Duration::milliseconds(i * 300),
                    Source::Session,
                    EventKind::Note {
                        text: format!("n{i}"),
                    },
                )
            })
            .collect();
        let cast = export(&events, &CastOptions::default(), |s, area, buf| {
            let text = format!("{}", s.events_applied);
            buf.set_string(area.x, area.y, text, Style::default());
        });
        assert_eq!(cast.header.version, 2);
        assert!(cast.events.windows(2).all(|w| w[0].0 <= w[1].0));
        assert!(cast.events.iter().any(|e| e.2.contains("20")));
        assert!(
            (cast.header.duration - 5.7).abs() < 1e-9,
            "{}",
            cast.header.duration
        );
    }
}
