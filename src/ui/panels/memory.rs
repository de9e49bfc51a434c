//! The Memory panel: a chart of the focused pod's memory (usage and working set) over the last
//! minutes of event time, the limit as a horizontal line, the T0–T4 marks of the trials in the
//! window as vertical lines labelled on the time axis, and a linear/log y axis (`l`). A gap in
//! the series (the memory feed failed) breaks the line; it is never drawn as zero. For a pod
//! that asks for a GPU, its GPU memory (VRAM, which no cgroup counts) is drawn on the same
//! axis, with its source in the legend, or why it cannot be read.

use crate::ui::theme::Theme;
use crate::ui::view::ViewState;
use crate::ui::{fmt_age, panel, put_line, secs};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Chart, Dataset, GraphType, Widget};
use readygap_core::event::Timestamp;
use readygap_core::state::{MemoryView, State};

/// How much event time the chart shows.
pub const WINDOW_SECS: f64 = 600.0;

const GIB: f64 = (1u64 << 30) as f64;
const MIB: f64 = (1u64 << 20) as f64;

/// The y value of a byte count on the chosen scale (GiB, or log10 of MiB).
pub fn y_of(bytes: f64, log: bool) -> f64 {
    if log {
        (bytes / MIB).max(1.0).log10()
    } else {
        bytes / GIB
    }
}

/// A y-axis label for a y value.
fn y_label(y: f64, log: bool) -> String {
    let bytes = if log { 10f64.powf(y) * MIB } else { y * GIB };
    if bytes >= GIB {
        format!("{:.1}G", bytes / GIB)
    } else {
        format!("{:.0}M", bytes / MIB)
    }
}

/// Split a series into runs of (x, y) points separated by gaps.
pub fn runs(
    mem: &MemoryView,
    from: Timestamp,
    log: bool,
    value: impl Fn(&readygap_core::state::MemoryPoint) -> Option<u64>,
) -> Vec<Vec<(f64, f64)>> {
    let points: Vec<Option<(f64, f64)>> = mem
        .series
        .since(from)
        .map(|p| {
            let v = p.value.as_ref().and_then(&value)?;
            Some((secs(from, p.ts), y_of(v as f64, log)))
        })
        .collect();
    points
        .split(Option::is_none)
        .filter(|run| !run.is_empty())
        .map(|run| run.iter().flatten().copied().collect())
        .collect()
}

/// The pod whose memory is shown: the focused pod if it has samples, else the pod with the
/// newest sample.
pub fn chart_pod(state: &State, view: &ViewState) -> Option<String> {
    if let Some(p) = view.focus_pod(state)
        && state.memory.contains_key(&p)
    {
        return Some(p);
    }
    state
        .memory
        .iter()
        .max_by_key(|(_, m)| m.series.points().next_back().map(|p| p.ts))
        .map(|(k, _)| k.clone())
}

pub fn render(state: &State, view: &ViewState, theme: &Theme, area: Rect, buf: &mut Buffer) {
    // The verdicts' rows at the bottom are left to them: nothing drawn over the chart.
    let verdict_rows = super::verdicts::rows(state, area.intersection(buf.area));
    let Some(inner) = panel("Memory", theme, area, buf) else {
        return;
    };
    let (Some(pod), Some(now)) = (chart_pod(state, view), state.now) else {
        put_line(
            buf,
            inner,
            0,
            &Line::styled("no memory samples yet", theme.muted()),
        );
        return;
    };
    let Some(mem) = state.memory.get(&pod) else {
        return;
    };
    let log = view.log_scale;
    let first = mem.series.points().next().map(|p| p.ts).unwrap_or(now);
    let window_start = now - chrono::Duration::milliseconds((WINDOW_SECS * 1000.0) as i64);
    // The window starts at the first sample, or earlier at the current trial's T0, so the
    // trial's start is on the axis even when the new pod's samples begin later.
    let t0 = state.timeline.current().and_then(|t| t.marks.t0);
    let from = first.min(t0.unwrap_or(first)).max(window_start);
    let span = secs(from, now).max(1.0);

    // Legend line.
    let last = mem.series.last_value();
    let g = |b: u64| format!("{:.2}G", b as f64 / GIB);
    let mut legend = vec![
        Span::styled(format!("{pod} "), theme.accent()),
        Span::styled("usage ", Style::new().fg(theme.chart_usage)),
        Span::styled(
            last.map_or("–".into(), |p| g(p.current)) + " ",
            theme.text(),
        ),
        Span::styled("ws ", Style::new().fg(theme.chart_working_set)),
        Span::styled(
            last.and_then(|p| p.working_set).map_or("–".into(), g) + " ",
            theme.text(),
        ),
        Span::styled("limit ", Style::new().fg(theme.chart_limit)),
        Span::styled(mem.limit.map_or("none".into(), g), theme.text()),
    ];
    let gpu = state.gpu.get(&pod);
    match gpu.map(|v| (v.latest(), v)) {
        Some((Some(p), v)) => {
            let source = v.source.as_deref().unwrap_or("?");
            legend.push(Span::styled("  VRAM ", Style::new().fg(theme.accent)));
            legend.push(Span::styled(
                format!("{}/{} ({source})", g(p.used), g(p.total)),
                theme.text(),
            ));
            // Why a preferred source is not the one used.
            if !v.passed_over.is_empty() {
                legend.push(Span::styled(
                    format!(" [{}]", v.passed_over.join("; ")),
                    theme.muted(),
                ));
            }
        }
        Some((None, v)) => {
            let why = v.unavailable.as_deref().unwrap_or("no sample yet");
            // The runtime's own figure stands in, said as such (its models only, no total).
            if let Some(b) = v.runtime {
                legend.push(Span::styled("  VRAM ", Style::new().fg(theme.accent)));
                legend.push(Span::styled(
                    format!(
                        "{} (the runtime's /api/ps size_vram: its models only)",
                        g(b)
                    ),
                    theme.text(),
                ));
                legend.push(Span::styled(
                    format!(" [GPU not read: {why}]"),
                    theme.warn(),
                ));
            } else {
                legend.push(Span::styled(
                    format!("  VRAM not read: {why}"),
                    theme.warn(),
                ));
            }
        }
        None => {}
    }
    if log {
        legend.push(Span::styled("  log", theme.warn()));
    }
    if mem.oom_kill.is_some_and(|n| n > 0) {
        legend.push(Span::styled(
            format!("  OOM kills {}", mem.oom_kill.unwrap_or(0)),
            theme.error(),
        ));
    }
    put_line(buf, inner, 0, &Line::from(legend));
    let height = inner.height.saturating_sub(verdict_rows);
    if height < 3 {
        return;
    }
    let chart_area = Rect::new(inner.x, inner.y + 1, inner.width, height - 2);
    let axis_row = height - 1;

    let usage = runs(mem, from, log, |p| Some(p.current));
    let ws = runs(mem, from, log, |p| p.working_set);
    let peak = mem
        .series
        .since(from)
        .filter_map(|p| p.value.as_ref())
        .map(|p| p.current.max(p.working_set.unwrap_or(0)))
        .max()
        .unwrap_or(0);
    // VRAM on the same axis, in runs broken where it could not be read.
    let vram: Vec<Vec<(f64, f64)>> = gpu
        .map(|v| {
            let points: Vec<Option<(f64, f64)>> = v
                .series
                .since(from)
                .map(|p| {
                    let used = p.value.as_ref()?.used;
                    Some((secs(from, p.ts), y_of(used as f64, log)))
                })
                .collect();
            points
                .split(Option::is_none)
                .filter(|r| !r.is_empty())
                .map(|r| r.iter().flatten().copied().collect())
                .collect()
        })
        .unwrap_or_default();
    let vram_peak = gpu
        .into_iter()
        .flat_map(|v| v.series.since(from))
        .filter_map(|p| p.value.as_ref().map(|v| v.used))
        .max()
        .unwrap_or(0);
    let top_bytes = (peak.max(vram_peak).max(mem.limit.unwrap_or(0)) as f64 * 1.1).max(64.0 * MIB);
    let (y_min, y_max) = (0.0, y_of(top_bytes, log));
    let limit_line: Vec<(f64, f64)> = mem
        .limit
        .map(|l| vec![(0.0, y_of(l as f64, log)), (span, y_of(l as f64, log))])
        .unwrap_or_default();

    // Trial marks in the window: (x, mark number).
    let mut marks: Vec<(f64, usize)> = Vec::new();
    for t in &state.timeline.trials {
        let m = &t.marks;
        for (k, ts) in [m.t0, m.t1, m.t2, m.t3, m.t4].into_iter().enumerate() {
            if let Some(ts) = ts.filter(|ts| *ts >= from && *ts <= now) {
                marks.push((secs(from, ts), k));
            }
        }
    }
    // OOM kills of this pod: marked like a mark, in the error colour (k = 5).
    for v in state.oom.verdicts.iter().filter(|v| v.kind.is_kill()) {
        if v.pod == pod && v.ts >= from && v.ts <= now {
            marks.push((secs(from, v.ts), 5));
        }
    }
    let mark_lines: Vec<[(f64, f64); 2]> = marks
        .iter()
        .map(|(x, _)| [(*x, y_min), (*x, y_max)])
        .collect();

    let mark_colour = |k: usize| {
        if k == 5 {
            theme.error
        } else {
            theme.segment(k.max(1))
        }
    };
    let line = |colour, data| {
        Dataset::default()
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(Style::new().fg(colour))
            .data(data)
    };
    // Marks, then the limit, the working set and the usage on top.
    let mut datasets: Vec<Dataset> = marks
        .iter()
        .zip(&mark_lines)
        .map(|((_, k), l)| line(mark_colour(*k), l))
        .collect();
    if !limit_line.is_empty() {
        datasets.push(line(theme.chart_limit, &limit_line));
    }
    datasets.extend(ws.iter().map(|r| line(theme.chart_working_set, r)));
    datasets.extend(vram.iter().map(|r| line(theme.accent, r)));
    datasets.extend(usage.iter().map(|r| line(theme.chart_usage, r)));
    // Y labels are padded to one width so the graph's left edge is known for the mark labels.
    let labels: Vec<String> = [y_min, (y_min + y_max) / 2.0, y_max]
        .iter()
        .map(|y| y_label(*y, log))
        .collect();
    let label_w = labels.iter().map(|l| l.len()).max().unwrap_or(0);
    let labels: Vec<Line> = labels
        .into_iter()
        .map(|l| Line::styled(format!("{l:>label_w$}"), theme.muted()))
        .collect();
    let graph_x = chart_area.x + (label_w as u16).min(chart_area.width / 3) + 1;
    Chart::new(datasets)
        .x_axis(Axis::default().bounds([0.0, span]))
        .y_axis(
            Axis::default()
                .bounds([y_min, y_max])
                .labels(labels)
                .style(theme.border()),
        )
        .render(chart_area, buf);

    // The time axis: the window's start, "now", and the marks at their columns.
    let graph_w = (inner.x + inner.width).saturating_sub(graph_x);
    if graph_w < 2 {
        return;
    }
    let row = Rect::new(graph_x, inner.y + axis_row, graph_w, 1);
    let start_label = format!("-{}", fmt_age(span));
    let mark_cols: Vec<u16> = marks
        .iter()
        .map(|(x, _)| {
            (((x / span) * (graph_w - 1) as f64).round() as u16).min(graph_w.saturating_sub(2))
        })
        .collect();
    if mark_cols.iter().all(|c| *c as usize > start_label.len()) {
        put_line(buf, row, 0, &Line::styled(start_label, theme.muted()));
    }
    let now_label = "now";
    if graph_w as usize > now_label.len() + 6 && mark_cols.iter().all(|c| *c + 6 < graph_w) {
        buf.set_string(
            row.x + graph_w - now_label.len() as u16,
            row.y,
            now_label,
            theme.muted(),
        );
    }
    for ((_, k), col) in marks.iter().zip(mark_cols.iter().copied()) {
        let label = if *k == 5 {
            "OOM".to_string()
        } else {
            format!("T{k}")
        };
        buf.set_string(row.x + col, row.y, label, Style::new().fg(mark_colour(*k)));
    }
}
