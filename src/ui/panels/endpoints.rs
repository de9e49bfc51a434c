//! The Endpoints panel: ready/serving/terminating endpoint counts of the target's
//! EndpointSlices over the last minutes of event time, one row of bars each; columns where no
//! endpoint was ready and none still served are highlighted (the service could not route),
//! and the current counts. Zero ready while a terminating endpoint still serves is its own
//! state: kube-proxy routes to that endpoint (KEP-1669), so it is said apart, not as a gap.
//! Under the bars, the latest probe through the Service (the study's T2).

use crate::ui::theme::Theme;
use crate::ui::view::ViewState;
use crate::ui::{fmt_age, fmt_secs, panel, put_line, secs};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use readygap_core::event::Timestamp;
use readygap_core::state::{EndpointCounts, State};

/// A bar row: its label, colour, and which count it shows.
type Row = (&'static str, Color, fn(&EndpointCounts) -> u32);

/// How much event time the panel shows.
pub const WINDOW_SECS: f64 = 600.0;
const LEVELS: [&str; 8] = ["▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"];

/// The counts in force at the end of each of `cols` equal columns over `[from, to]`; `None`
/// before the first point and during a gap.
pub fn columns(
    state: &State,
    from: Timestamp,
    to: Timestamp,
    cols: usize,
) -> Vec<Option<EndpointCounts>> {
    let span = secs(from, to).max(1e-3);
    let mut out = Vec::with_capacity(cols);
    let mut points = state.endpoints.points().peekable();
    let mut current: Option<EndpointCounts> = None;
    for c in 0..cols {
        let end = from
            + chrono::Duration::milliseconds(((c + 1) as f64 / cols as f64 * span * 1000.0) as i64);
        while let Some(p) = points.peek() {
            if p.ts > end {
                break;
            }
            current = p.value;
            points.next();
        }
        out.push(current);
    }
    out
}

/// The start of the current interval where `holds` held for every point.
fn since(state: &State, holds: impl Fn(&EndpointCounts) -> bool) -> Option<Timestamp> {
    let mut since = None;
    for p in state.endpoints.points() {
        match p.value {
            Some(c) if holds(&c) => {
                since.get_or_insert(p.ts);
            }
            Some(_) => since = None,
            None => {}
        }
    }
    since
}

pub fn render(state: &State, _view: &ViewState, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let Some(inner) = panel("Endpoints", theme, area, buf) else {
        return;
    };
    let (Some(now), Some(last)) = (state.now, state.endpoints.last_value().copied()) else {
        put_line(
            buf,
            inner,
            0,
            &Line::styled("no EndpointSlice seen yet", theme.muted()),
        );
        return;
    };
    let (r, s, t) = if inner.width >= 30 {
        ("ready", "serving", "term")
    } else {
        ("rdy", "srv", "term")
    };
    let counts = [
        (r, last.ready, theme.chart_ready),
        (s, last.serving, theme.chart_serving),
        (t, last.terminating, theme.chart_terminating),
    ];
    let mut head: Vec<Span> = counts
        .into_iter()
        .map(|(label, n, colour)| Span::styled(format!("{label} {n} "), Style::new().fg(colour)))
        .collect();
    head.push(Span::styled(format!("of {}", last.total), theme.muted()));
    put_line(buf, inner, 0, &Line::from(head));
    // While no endpoint is ready, say for how long on its own line; the bars move down.
    let mut top = 1u16;
    if last.terminating_fallback()
        && let Some(since) = since(state, EndpointCounts::terminating_fallback)
    {
        let text = format!(
            "0 ready: {} terminating still serving for {}",
            last.serving_terminating,
            fmt_secs(secs(since, now))
        );
        put_line(buf, inner, 1, &Line::styled(text, theme.warn()));
        top = 2;
    } else if last.ready == 0
        && let Some(since) = since(state, |c| c.ready == 0)
    {
        let text = format!("none ready for {}", fmt_secs(secs(since, now)));
        put_line(buf, inner, 1, &Line::styled(text, theme.error()));
        top = 2;
    }

    const LABEL: u16 = 6;
    if inner.width <= LABEL + 1 || inner.height <= top {
        return;
    }
    let first = state.endpoints.points().next().map(|p| p.ts).unwrap_or(now);
    let from = first.max(now - chrono::Duration::milliseconds((WINDOW_SECS * 1000.0) as i64));
    let cols = (inner.width - LABEL) as usize;
    let data = columns(state, from, now, cols);
    let max = data
        .iter()
        .flatten()
        .map(|c| c.total.max(c.ready).max(c.serving).max(c.terminating))
        .max()
        .unwrap_or(1)
        .max(1);
    let rows: [Row; 3] = [
        ("ready", theme.chart_ready, |c| c.ready),
        ("serve", theme.chart_serving, |c| c.serving),
        ("term", theme.chart_terminating, |c| c.terminating),
    ];
    for (i, (label, color, get)) in rows.iter().enumerate() {
        let y = top + i as u16;
        if y >= inner.height {
            break;
        }
        buf.set_string(inner.x, inner.y + y, format!("{label:<5}"), theme.muted());
        for (c, v) in data.iter().enumerate() {
            let Some(cell) = buf.cell_mut((inner.x + LABEL + c as u16, inner.y + y)) else {
                continue;
            };
            let Some(counts) = v else {
                cell.set_symbol(" ");
                continue;
            };
            let n = get(counts);
            let symbol = if n == 0 {
                " "
            } else {
                LEVELS[((n as usize * LEVELS.len()).div_ceil(max as usize)).clamp(1, 8) - 1]
            };
            let mut style = Style::new().fg(*color);
            if counts.ready == 0 && !counts.terminating_fallback() {
                style = style.bg(theme.gap_highlight);
            }
            cell.set_symbol(symbol).set_style(style);
        }
    }
    let axis_y = top + rows.len() as u16;
    if axis_y < inner.height {
        let row = Rect::new(inner.x + LABEL, inner.y + axis_y, inner.width - LABEL, 1);
        put_line(
            buf,
            row,
            0,
            &Line::styled(format!("-{}", fmt_age(secs(from, now))), theme.muted()),
        );
        if row.width > 10 {
            buf.set_string(row.x + row.width - 3, row.y, "now", theme.muted());
        }
    }
    if let Some(line) = service_line(state, now, theme) {
        put_line(buf, inner, axis_y + 1, &line);
    }
}

/// The latest probe through the Service (sent after a trial's T1 until it answers): its
/// Service and port, and the answer or why there was none.
pub fn service_line(state: &State, now: Timestamp, theme: &Theme) -> Option<Line<'static>> {
    let (ts, p) = state.service_probe.as_ref()?;
    let age = fmt_age(secs(*ts, now));
    let name = if p.port.is_empty() {
        p.service.clone()
    } else {
        format!("{}:{}", p.service, p.port)
    };
    let (text, style) = if p.ok {
        (
            format!(
                "via Service {name}: 200 in {:.0}ms, {age} ago",
                p.latency_ms
            ),
            theme.ok(),
        )
    } else {
        let why = p.error.as_deref().unwrap_or("no answer");
        (
            format!("via Service {name}: {why} ({age} ago)"),
            theme.warn(),
        )
    };
    Some(Line::styled(text, style))
}
