//! The readiness-contract verdicts on screen: the newest verdicts (`shallow_readiness`,
//! `traffic_gap`, ...) as lines at the bottom of the Memory panel (under its marks axis, in
//! rows the chart leaves free: see [`rows`], so no line being measured is hidden), each with its measured
//! figure, and the newest one's advice under them. Broken contracts in the warning colour,
//! `readiness_covers_inference` in the ok colour. Nothing is drawn before the first verdict.

use crate::ui::put_line;
use crate::ui::theme::Theme;
use crate::ui::view::ViewState;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Widget};
use readygap_core::state::State;

/// How many verdicts are listed.
pub const SHOWN: usize = 2;

/// The rows the verdicts take at the bottom inside `area` (a bordered panel's outer area):
/// the newest verdicts and one line of advice, when the panel is tall enough to keep its
/// chart readable (14 rows; the footer shows the newest anyway), else 0. The Memory panel
/// leaves them free.
pub fn rows(state: &State, area: Rect) -> u16 {
    let n = state.contract.verdicts.len().min(SHOWN) as u16;
    if n == 0 || area.width < 12 || area.height < 14 {
        0
    } else {
        n + 1
    }
}

/// Draw in the bottom rows inside `area` that [`rows`] reserves.
pub fn render(state: &State, _view: &ViewState, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let area = area.intersection(buf.area);
    let verdicts = &state.contract.verdicts;
    let rows = rows(state, area);
    if rows == 0 {
        return;
    }
    let newest: Vec<_> = verdicts.iter().rev().take(SHOWN).collect();
    let inner = Rect::new(
        area.x + 1,
        // Under the chart and its T0–T4 marks axis, above the border.
        area.y + area.height - 1 - rows,
        area.width - 2,
        rows,
    );
    Clear.render(inner, buf);
    buf.set_style(inner, theme.base());
    for (i, v) in newest.iter().rev().enumerate() {
        let style = if v.kind.is_problem() {
            theme.warn()
        } else {
            theme.ok()
        };
        let line = Line::from(vec![
            Span::styled(
                format!("{} ", if v.kind.is_problem() { "▲" } else { "✓" }),
                style,
            ),
            Span::styled(v.kind.name(), style.add_modifier(Modifier::BOLD)),
            Span::styled(format!(" {}", v.message), theme.text()),
        ]);
        put_line(buf, inner, i as u16, &line);
    }
    if let Some(v) = verdicts.last() {
        let line = Line::from(vec![
            Span::styled("  → ", theme.accent()),
            Span::styled(v.advice.clone(), theme.muted()),
        ]);
        put_line(buf, inner, rows - 1, &line);
    }
}
