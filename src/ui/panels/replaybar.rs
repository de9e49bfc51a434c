//! The replay bar: one line under the dashboard in a replay, drawn from the [`ReplayBar`] the
//! replay controller reports: playing/paused/end, position / duration as `mm:ss.t`, the speed,
//! then a track across the rest of the line with a tick for every T0–T4 mark (coloured like
//! the timeline's segments) and a cursor at the playhead.

use crate::ui::clip;
use crate::ui::theme::Theme;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
pub use readygap_core::replay::{ReplayBar, fmt_position};
use readygap_core::state::State;

/// The tick drawn for mark `which`.
pub const TICKS: [char; 5] = ['┃', '│', '│', '│', '│'];
/// The playhead.
pub const CURSOR: char = '◆';

/// The column (0..width) of an offset on a track `width` cells wide.
fn column(ms: i64, duration_ms: i64, width: u16) -> u16 {
    if width <= 1 || duration_ms <= 0 {
        return 0;
    }
    let f = ms.clamp(0, duration_ms) as f64 / duration_ms as f64;
    ((f * f64::from(width - 1)).round() as u16).min(width - 1)
}

pub fn render(_state: &State, bar: &ReplayBar, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let Some(area) = clip(area, buf) else { return };
    let (icon, word, style) = if bar.ended {
        ("■", "end", theme.muted())
    } else if bar.paused {
        ("‖", "paused", theme.warn().add_modifier(Modifier::BOLD))
    } else {
        ("▶", "playing", theme.ok())
    };
    let text = Line::from(vec![
        Span::styled(format!(" {icon} {word} "), style),
        Span::styled(fmt_position(bar.position_ms), theme.text()),
        Span::styled(" / ", theme.muted()),
        Span::styled(fmt_position(bar.duration_ms), theme.text()),
        Span::styled(format!("  {} ", bar.speed), theme.accent()),
    ]);
    let text_width = text.width() as u16;
    buf.set_line(area.x, area.y, &text, area.width);
    // The track: what is left, minus a margin on each side.
    let track_x = area.x + text_width.min(area.width) + 1;
    let right = area.x + area.width;
    if right <= track_x + 2 {
        return;
    }
    let width = right - track_x - 1;
    let cursor = column(bar.position_ms, bar.duration_ms, width);
    for c in 0..width {
        let (glyph, st) = if c < cursor {
            ('━', theme.accent())
        } else {
            ('─', theme.muted())
        };
        buf[(track_x + c, area.y)].set_char(glyph).set_style(st);
    }
    for &(ms, which) in bar.marks.iter() {
        let c = column(ms, bar.duration_ms, width);
        let k = usize::from(which.min(4));
        let colour = theme.segment(k.max(1));
        buf[(track_x + c, area.y)]
            .set_char(TICKS[k])
            .set_style(Style::new().fg(colour));
    }
    buf[(track_x + cursor, area.y)]
        .set_char(CURSOR)
        .set_style(theme.title());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn bar() -> ReplayBar {
        ReplayBar {
            position_ms: 90_500,
            duration_ms: 3_600_000,
            speed: "×100".into(),
            paused: true,
            ended: false,
            marks: Arc::from(vec![
                (60_000, 0),
                (62_000, 1),
                (1_800_000, 0),
                (1_900_000, 3),
                (3_600_000, 4),
            ]),
        }
    }

    fn row(buf: &Buffer) -> String {
        (0..buf.area.width)
            .map(|x| buf[(x, 0)].symbol().to_string())
            .collect()
    }

    #[test]
    fn positions_read_as_minutes_seconds_tenths() {
        assert_eq!(fmt_position(0), "00:00.0");
        assert_eq!(fmt_position(90_550), "01:30.5");
        assert_eq!(fmt_position(3_600_000), "60:00.0");
        assert_eq!(fmt_position(-5), "00:00.0");
    }

    #[test]
    fn shows_position_speed_state_and_a_tick_per_mark() {
        let theme = Theme::default_theme();
        let area = Rect::new(0, 0, 200, 1);
        let mut buf = Buffer::empty(area);
        let b = bar();
        render(&State::new(), &b, &theme, area, &mut buf);
        let line = row(&buf);
        assert!(line.contains("paused 01:30.5 / 60:00.0"), "{line}");
        assert!(line.contains("×100"), "{line}");
        // Marks 60 s and 62 s apart on a 1-hour track land in one column at this width; every
        // other mark has its own tick.
        let ticks = line.chars().filter(|c| TICKS.contains(c)).count();
        assert_eq!(ticks, 4, "{line}");
        assert_eq!(line.chars().filter(|c| *c == CURSOR).count(), 1, "{line}");
        // Ticks are coloured by the segment roles: T3 with the T2→T3 colour.
        let x3 = (0..200u16)
            .filter(|x| TICKS.contains(&buf[(*x, 0)].symbol().chars().next().unwrap_or(' ')))
            .nth(2)
            .expect("third tick");
        assert_eq!(buf[(x3, 0)].fg, theme.segment(3));
        // The last mark sits at the track's end; the cursor is before the middle tick.
        let cursor_x = line.chars().position(|c| c == CURSOR).expect("cursor");
        let mid_x = line.chars().position(|c| c == '┃').expect("T0 tick");
        assert!(cursor_x < mid_x, "{line}");
        assert_eq!(line.trim_end().chars().last(), Some('│'), "{line}");

        let mut playing = b.clone();
        playing.paused = false;
        playing.position_ms = 3_000_000;
        let mut buf2 = Buffer::empty(area);
        render(&State::new(), &playing, &theme, area, &mut buf2);
        let line2 = row(&buf2);
        assert!(line2.contains("playing 50:00.0"), "{line2}");
        let c2 = line2.chars().position(|c| c == CURSOR).expect("cursor");
        assert!(c2 > cursor_x + 100, "cursor moved right: {line2}");
    }

    #[test]
    fn survives_tiny_and_empty_areas() {
        let theme = Theme::default_theme();
        for (w, h) in [(0, 0), (1, 1), (0, 1), (1, 0), (5, 1), (40, 1)] {
            let area = Rect::new(0, 0, w, h);
            let mut buf = Buffer::empty(area);
            render(&State::new(), &bar(), &theme, area, &mut buf);
            let mut zero = bar();
            zero.duration_ms = 0;
            zero.marks = Arc::from(Vec::new());
            render(&State::new(), &zero, &theme, area, &mut buf);
        }
        // An area outside the buffer is clipped, not written.
        let mut buf = Buffer::empty(Rect::new(0, 0, 10, 1));
        render(
            &State::new(),
            &bar(),
            &theme,
            Rect::new(20, 5, 30, 1),
            &mut buf,
        );
        assert_eq!(row(&buf).trim(), "");
    }
}
