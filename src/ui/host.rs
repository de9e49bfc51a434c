//! The Host panel: CPU, memory used, available and page cache of the machine readygap runs on
//! (`local`) and of the nodes, from the latest host samples.

use super::theme::Theme;
use super::view::ViewState;
use super::{gib, panel, put_line};
use crate::core::state::State;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

/// A text bar of `width` cells filled to `fraction`.
fn bar(fraction: f64, width: usize) -> (String, String) {
    let filled = ((fraction.clamp(0.0, 1.0)) * width as f64).round() as usize;
    ("█".repeat(filled), "░".repeat(width - filled))
}

pub fn render(state: &State, _view: &ViewState, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let area = area.intersection(buf.area);
    if area.is_empty() {
        return;
    }
    let inner = panel("Host", theme, area, buf);
    if inner.is_empty() {
        return;
    }
    let mut lines: Vec<Line> = Vec::new();
    let bar_w = (inner.width as usize).saturating_sub(14).min(24);
    for (node, series) in &state.hosts {
        let Some(h) = series.last_value() else {
            continue;
        };
        let name = node.clone().unwrap_or_else(|| "local".into());
        lines.push(Line::styled(
            name,
            theme.accent().add_modifier(Modifier::BOLD),
        ));
        let level = |f: f64| {
            if f >= 0.9 {
                theme.error()
            } else if f >= 0.75 {
                theme.warn()
            } else {
                theme.ok()
            }
        };
        let cpu = f64::from(h.cpu_percent) / 100.0;
        let (on, off) = bar(cpu, bar_w);
        lines.push(Line::from(vec![
            Span::styled(" cpu ", theme.muted()),
            Span::styled(on, level(cpu)),
            Span::styled(off, theme.muted()),
            Span::styled(format!(" {:.0}%", h.cpu_percent), theme.text()),
        ]));
        let used = h.mem_total.saturating_sub(h.mem_available);
        let frac = if h.mem_total > 0 {
            used as f64 / h.mem_total as f64
        } else {
            0.0
        };
        let (on, off) = bar(frac, bar_w);
        lines.push(Line::from(vec![
            Span::styled(" mem ", theme.muted()),
            Span::styled(on, level(frac)),
            Span::styled(off, theme.muted()),
            Span::styled(format!(" {:.0}%", frac * 100.0), theme.text()),
        ]));
        lines.push(Line::from(vec![
            Span::styled(" used ", theme.muted()),
            Span::styled(
                format!("{} / {}", gib(used), gib(h.mem_total)),
                theme.text(),
            ),
        ]));
        lines.push(Line::from(vec![
            Span::styled(" avail ", theme.muted()),
            Span::styled(gib(h.mem_available), theme.text()),
            Span::styled("  cache ", theme.muted()),
            Span::styled(gib(h.cached), Style::new().fg(theme.accent)),
        ]));
    }
    if lines.is_empty() {
        lines.push(Line::styled("no host samples yet", theme.muted()));
    }
    for (y, line) in lines.iter().enumerate() {
        if !put_line(buf, inner, y as u16, line) {
            break;
        }
    }
}
