//! The dashboard: one file per panel, each `render(&State, &ViewState, &Theme, Rect, &mut
//! Buffer)` reading state only; [`render`] lays them out (side by side on a wide terminal,
//! stacked on 80×24) with a header, a footer (in a replay, the replay bar under it) and any
//! dialog on top. The event loop is in
//! [`app`]; key handling in [`view::update`].

pub mod app;
pub mod intent;
pub mod keymap;
pub mod panels;
pub mod terminal;
pub mod theme;
pub mod view;

use panels::{
    banner, dialog, endpoints, footer, header, host, log, memory, pods, replaybar, residency,
    timeline, verdicts,
};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Block, BorderType, Widget};
use readygap_core::event::Timestamp;
use readygap_core::state::State;
use theme::Theme;
use view::ViewState;

/// Terminals at least this wide get the side-by-side layout.
pub const WIDE: u16 = 120;

/// The rectangles of the panels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Areas {
    pub header: Rect,
    pub pods: Rect,
    pub timeline: Rect,
    pub residency: Rect,
    pub memory: Rect,
    pub endpoints: Rect,
    pub host: Rect,
    /// The Log view (`L`), empty while it is off.
    pub log: Rect,
    pub footer: Rect,
}

/// Where each panel goes in `area`.
pub fn layout(area: Rect) -> Areas {
    layout_with(area, 0, false)
}

/// Where each panel goes in `area`, the stacked layout's top row (Pods, Residency) at least
/// `top_rows` high (up to half the body): Events that explain a trial need the room on 80×24.
/// With the Log view on (`log`), the log takes the bottom row's Endpoints and Host (wide),
/// or the whole bottom row (stacked).
pub fn layout_with(area: Rect, top_rows: u16, log: bool) -> Areas {
    let [header, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(area);
    let percent = |p: [u16; 3]| p.map(Constraint::Percentage);
    let (pods, timeline, residency, bottom, split) = if area.width >= WIDE {
        let [top, bottom] = Layout::vertical([45, 55].map(Constraint::Percentage)).areas(body);
        let [pods, timeline, residency] = Layout::horizontal(percent([37, 38, 25])).areas(top);
        (pods, timeline, residency, bottom, [50, 25, 25])
    } else {
        let [mut top, mut timeline, mut bottom] =
            Layout::vertical(percent([28, 32, 40])).areas(body);
        let want = top_rows.min(body.height / 2);
        if want > top.height {
            let rest;
            [top, rest] =
                Layout::vertical([Constraint::Length(want), Constraint::Min(0)]).areas(body);
            [timeline, bottom] =
                Layout::vertical([Constraint::Ratio(32, 72), Constraint::Ratio(40, 72)])
                    .areas(rest);
        }
        let [pods, residency] = Layout::horizontal([62, 38].map(Constraint::Percentage)).areas(top);
        (pods, timeline, residency, bottom, [46, 28, 26])
    };
    let [memory, endpoints, host] = Layout::horizontal(percent(split)).areas(bottom);
    let none = Rect::default();
    let (memory, endpoints, host, log) = match log {
        false => (memory, endpoints, host, none),
        true if area.width >= WIDE => {
            let [memory, log] =
                Layout::horizontal([40, 60].map(Constraint::Percentage)).areas(bottom);
            (memory, none, none, log)
        }
        true => (none, none, none, bottom),
    };
    Areas {
        header,
        pods,
        timeline,
        residency,
        memory,
        endpoints,
        host,
        log,
        footer,
    }
}

/// Draw the whole dashboard into `buf`.
pub fn render(state: &State, view: &ViewState, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let Some(area) = clip(area, buf) else { return };
    buf.set_style(area, theme.base());
    // In a replay the bottom line is the replay bar.
    let (area, bar) = match &view.replay {
        Some(bar) if area.height >= 3 => {
            let [main, line] =
                Layout::vertical([Constraint::Min(0), Constraint::Length(1)]).areas(area);
            (main, Some((bar, line)))
        }
        _ => (area, None),
    };
    if let Some((bar, line)) = bar {
        replaybar::render(state, bar, theme, line, buf);
    }
    let a = layout_with(area, pods::wanted_height(state), view.log_view);
    header::render(state, view, theme, a.header, buf);
    pods::render(state, view, theme, a.pods, buf);
    timeline::render(state, view, theme, a.timeline, buf);
    residency::render(state, view, theme, a.residency, buf);
    memory::render(state, view, theme, a.memory, buf);
    verdicts::render(state, view, theme, a.memory, buf);
    endpoints::render(state, view, theme, a.endpoints, buf);
    host::render(state, view, theme, a.host, buf);
    if view.log_view {
        log::render(state, view, theme, a.log, buf);
    }
    footer::render(state, view, theme, a.footer, buf);
    banner::render(state, view, theme, area, buf);
    dialog::render(state, view, theme, area, buf);
}

/// A panel's frame with its title, in `area` clipped to the buffer; returns the inner area,
/// `None` (and nothing drawn inside) when the panel or its inside is empty.
pub(crate) fn panel(title: &str, theme: &Theme, area: Rect, buf: &mut Buffer) -> Option<Rect> {
    let area = clip(area, buf)?;
    let block = Block::bordered()
        .border_type(BorderType::Rounded)
        .border_style(theme.border())
        .title(Line::styled(format!(" {title} "), theme.title()));
    let inner = block.inner(area);
    block.render(area, buf);
    (!inner.is_empty()).then_some(inner)
}

/// `area` clipped to the buffer; `None` when nothing of it is left.
pub(crate) fn clip(area: Rect, buf: &Buffer) -> Option<Rect> {
    let area = area.intersection(buf.area);
    (!area.is_empty()).then_some(area)
}

/// Seconds between two instants (negative when `b` is before `a`).
pub(crate) fn secs(a: Timestamp, b: Timestamp) -> f64 {
    (b - a).num_milliseconds() as f64 / 1000.0
}

/// `1.69s`, `42.0s`, `3m05s`, `2h03m`.
pub(crate) fn fmt_secs(s: f64) -> String {
    if !s.is_finite() {
        return "–".into();
    }
    let neg = if s < 0.0 { "-" } else { "" };
    let a = s.abs();
    if a < 10.0 {
        format!("{neg}{a:.2}s")
    } else if a < 60.0 {
        format!("{neg}{a:.1}s")
    } else if a < 3600.0 {
        let m = (a / 60.0).floor();
        format!("{neg}{m:.0}m{:02.0}s", (a - m * 60.0).floor())
    } else {
        let h = (a / 3600.0).floor();
        format!("{neg}{h:.0}h{:02.0}m", ((a - h * 3600.0) / 60.0).floor())
    }
}

/// A short age: `5s`, `3m`, `2h`, `4d`.
pub(crate) fn fmt_age(s: f64) -> String {
    let s = s.max(0.0);
    if s < 60.0 {
        format!("{:.0}s", s.floor())
    } else if s < 3600.0 {
        format!("{:.0}m", (s / 60.0).floor())
    } else if s < 86400.0 {
        format!("{:.0}h", (s / 3600.0).floor())
    } else {
        format!("{:.0}d", (s / 86400.0).floor())
    }
}

/// Write a line into `area` at row `y` (relative), clipped; returns false when out of rows.
pub(crate) fn put_line(buf: &mut Buffer, area: Rect, y: u16, line: &Line) -> bool {
    if y >= area.height || area.width == 0 {
        return false;
    }
    buf.set_line(area.x, area.y + y, line, area.width);
    true
}

/// Write lines into `area` from its top row, as many as fit.
pub(crate) fn put_lines(buf: &mut Buffer, area: Rect, lines: &[Line]) {
    for (y, line) in lines.iter().enumerate() {
        if !put_line(buf, area, y as u16, line) {
            break;
        }
    }
}

/// Word-wraps `text` into at most `max` lines of `width` characters (each indented by one
/// space); the last line ends in `…` when text was left out.
pub(crate) fn wrap(text: &str, width: usize, max: usize) -> Vec<String> {
    let width = width.saturating_sub(1).max(8);
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    for word in text.split_whitespace() {
        let fits = cur.chars().count() + 1 + word.chars().count() <= width;
        if !cur.is_empty() && !fits {
            out.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    if out.len() > max {
        out.truncate(max);
        if let Some(last) = out.last_mut() {
            let keep: String = last.chars().take(width.saturating_sub(1)).collect();
            *last = format!("{keep}…");
        }
    }
    out.into_iter().map(|l| format!(" {l}")).collect()
}

/// `text` in at most `width` characters: whole when it fits, else cut with `…` at the end.
pub(crate) fn ellipsize(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let keep: String = text.chars().take(width.saturating_sub(1)).collect();
    format!("{keep}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_ages_read_well() {
        assert_eq!(fmt_secs(1.694), "1.69s");
        assert_eq!(fmt_secs(42.04), "42.0s");
        assert_eq!(fmt_secs(185.0), "3m05s");
        assert_eq!(fmt_secs(7380.0), "2h03m");
        assert_eq!(fmt_secs(-0.5), "-0.50s");
        assert_eq!(fmt_secs(f64::NAN), "–");
        assert_eq!(fmt_age(59.9), "59s");
        assert_eq!(fmt_age(61.0), "1m");
        assert_eq!(fmt_age(-3.0), "0s");
        assert_eq!(fmt_age(90_000.0), "1d");
    }

    #[test]
    fn layout_is_side_by_side_when_wide_and_stacked_when_narrow() {
        let wide = layout(Rect::new(0, 0, 160, 48));
        assert_eq!(wide.pods.y, wide.timeline.y);
        assert_eq!(wide.timeline.y, wide.residency.y);
        assert!(wide.memory.y > wide.pods.y);
        let narrow = layout(Rect::new(0, 0, 80, 24));
        assert!(narrow.timeline.y > narrow.pods.y);
        assert_eq!(narrow.timeline.width, 80);
        assert!(narrow.memory.y > narrow.timeline.y);
        // Nothing overlaps, and everything is inside the screen.
        for a in [wide, narrow] {
            let all = [
                a.header,
                a.pods,
                a.timeline,
                a.residency,
                a.memory,
                a.endpoints,
                a.host,
                a.footer,
            ];
            for (i, r) in all.iter().enumerate() {
                for s in &all[i + 1..] {
                    assert!(!r.intersects(*s), "{r:?} overlaps {s:?}");
                }
            }
        }
    }
}
