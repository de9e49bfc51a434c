//! The Host panel: CPU, memory used, available and page cache of the machine readygap runs on
//! (`local`) and of the nodes, from the latest host samples; under each node, how it is
//! reached (the latest `node_access` event: target, where the choice came from, whether it
//! is sampled through it) and the latest error of its `host NODE` feed while it fails. A
//! figure the sample does not have (the first sample's CPU share, a missing
//! `MemAvailable:` or `Cached:`) shows as `—`, without a bar, never as 0.

use crate::ui::theme::Theme;
use crate::ui::view::ViewState;
use crate::ui::{panel, put_lines};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use readygap_core::state::State;
use readygap_core::units::Gib;

/// A text bar of `width` cells filled to `fraction`.
fn bar(fraction: f64, width: usize) -> (String, String) {
    let filled = ((fraction.clamp(0.0, 1.0)) * width as f64).round() as usize;
    ("█".repeat(filled), "░".repeat(width - filled))
}

pub fn render(state: &State, _view: &ViewState, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let Some(inner) = panel("Host", theme, area, buf) else {
        return;
    };
    let mut lines: Vec<Line> = Vec::new();
    let bar_w = (inner.width as usize).saturating_sub(14).min(24);
    // Nodes with samples or an access announcement; `None` (local) sorts first.
    let mut sections: Vec<Option<String>> = state.hosts.keys().cloned().collect();
    for node in state.node_access.keys() {
        if !state.hosts.contains_key(&Some(node.clone())) {
            sections.push(Some(node.clone()));
        }
    }
    sections.sort();
    for node in &sections {
        let sample = state.hosts.get(node).and_then(|s| s.last_value());
        let name = node.clone().unwrap_or_else(|| "local".into());
        lines.push(Line::styled(
            name,
            theme.accent().add_modifier(Modifier::BOLD),
        ));
        if let Some(node) = node {
            access_lines(state, node, theme, inner.width as usize, &mut lines);
        }
        let Some(h) = sample else {
            lines.push(Line::styled(" no samples yet", theme.muted()));
            continue;
        };
        sample_lines(h, theme, bar_w, &mut lines);
    }
    if lines.is_empty() {
        lines.push(Line::styled("no host samples yet", theme.muted()));
    }
    put_lines(buf, inner, &lines);
}

/// How a node is reached (muted, wrapped), and its feed's error while it fails.
fn access_lines(
    state: &State,
    node: &str,
    theme: &Theme,
    width: usize,
    lines: &mut Vec<Line<'static>>,
) {
    let mut wrapped = |text: &str, max, style| {
        lines.extend(
            crate::ui::wrap(text, width, max)
                .into_iter()
                .map(|l| Line::styled(l, style)),
        );
    };
    if let Some(a) = state.node_access.get(node) {
        let text = if a.sampling {
            format!("via {} · {}", a.target, a.origin)
        } else {
            format!("{} · {}", a.target, a.origin)
        };
        wrapped(&text, 4, theme.muted());
        if !a.sampling {
            let by = a.sampled_via.as_deref().unwrap_or("nothing");
            wrapped(&format!("samples: {by}"), 2, theme.muted());
        }
    }
    if let Some(f) = state.feeds.get(&readygap_core::event::host_feed(node))
        && !f.connected
    {
        wrapped(&format!("✗ {}", f.detail), 3, theme.error());
    }
}

/// An unknown figure.
const UNKNOWN: &str = "—";

/// CPU and memory bars and figures of one sample; an unknown share has no bar.
fn sample_lines(
    h: &readygap_core::event::HostSample,
    theme: &Theme,
    bar_w: usize,
    lines: &mut Vec<Line<'static>>,
) {
    let share = |label: &'static str, fraction: Option<f64>| {
        let mut spans = vec![Span::styled(label, theme.muted())];
        let Some(f) = fraction else {
            spans.push(Span::styled(UNKNOWN, theme.muted()));
            return Line::from(spans);
        };
        let level = match f {
            f if f >= 0.9 => theme.error(),
            f if f >= 0.75 => theme.warn(),
            _ => theme.ok(),
        };
        let (on, off) = bar(f, bar_w);
        spans.push(Span::styled(on, level));
        spans.push(Span::styled(off, theme.muted()));
        spans.push(Span::styled(format!(" {:.0}%", f * 100.0), theme.text()));
        Line::from(spans)
    };
    lines.push(share(" cpu ", h.cpu_percent.map(|c| f64::from(c) / 100.0)));
    let used = h.mem_available.map(|a| h.mem_total.saturating_sub(a));
    let frac = used.filter(|_| h.mem_total > 0);
    lines.push(share(" mem ", frac.map(|u| u as f64 / h.mem_total as f64)));
    let gib = |b: Option<u64>| b.map_or(UNKNOWN.to_owned(), |b| Gib(b).to_string());
    lines.push(Line::from(vec![
        Span::styled(" used ", theme.muted()),
        Span::styled(
            format!("{} / {}", gib(used), Gib(h.mem_total)),
            theme.text(),
        ),
    ]));
    // The Summary API has no page cache: usage − working set (inactive file) is shown as ≈.
    let approx = if h.cache_approx && h.cached.is_some() {
        "≈"
    } else {
        ""
    };
    lines.push(Line::from(vec![
        Span::styled(" avail ", theme.muted()),
        Span::styled(gib(h.mem_available), theme.text()),
        Span::styled("  cache ", theme.muted()),
        Span::styled(
            format!("{approx}{}", gib(h.cached)),
            Style::new().fg(theme.accent),
        ),
    ]));
}
