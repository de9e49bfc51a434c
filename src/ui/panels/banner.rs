//! The OOM banner: the newest OOM kill verdict that has not been acknowledged (`a`), drawn
//! across the bottom of the panels in the error colour, with its evidence (models, sizes, limit,
//! time). It stays until acknowledged.

use crate::ui::theme::Theme;
use crate::ui::view::ViewState;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Clear, Paragraph, Widget, Wrap};
use readygap_core::state::State;

/// Draw the banner when an unacknowledged kill verdict exists.
pub fn render(state: &State, view: &ViewState, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let area = area.intersection(buf.area);
    let Some(v) = state
        .oom
        .verdicts
        .iter()
        .skip(view.acknowledged)
        .rev()
        .find(|v| v.kind.is_kill())
    else {
        return;
    };
    // Above the footer line, 4 rows (border, two text lines, border), over the bottom of the
    // charts rather than over the pods and the timeline.
    if area.height < 8 || area.width < 20 {
        return;
    }
    let width = area.width.saturating_sub(4).min(140);
    let rect = Rect::new(
        area.x + (area.width - width) / 2,
        area.y + area.height - 5,
        width,
        4,
    );
    Clear.render(rect, buf);
    let block = Block::bordered()
        .border_type(BorderType::Thick)
        .border_style(theme.error())
        .title(Line::styled(
            format!(" ⚠ {} on {} ", v.kind.name(), v.pod),
            theme.error().add_modifier(Modifier::BOLD),
        ));
    let text = vec![
        Line::styled(v.message.clone(), theme.error()),
        Line::from(vec![
            Span::styled("a", theme.accent().add_modifier(Modifier::BOLD)),
            Span::styled(" acknowledge", theme.muted()),
        ]),
    ];
    Paragraph::new(text)
        .wrap(Wrap { trim: true })
        .block(block)
        .style(theme.base())
        .render(rect, buf);
}
