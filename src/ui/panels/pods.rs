//! The Pods panel: name, phase, Ready condition with its age (relative to `state.now`), node,
//! restarts and the container state label; an OOM-killed pod's state is in the error style.
//! Under the pods, their Kubernetes Events as `kubectl describe` users read them (reason,
//! count, age, object, message; warnings in the warning colour), newest first, and first those
//! that explain the latest trial (a failed probe with its output, a kill, a pod that cannot
//! be scheduled), as many as fit; `e` shows them all, whole.

use crate::ui::theme::Theme;
use crate::ui::view::ViewState;
use crate::ui::{fmt_age, panel, secs};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Row, Table, Widget};
use readygap_core::event::{ContainerState, PodView, Timestamp};
use readygap_core::kube_events::{self, EventRow};
use readygap_core::state::State;

/// A compact container state label of a pod (its first container): `Running`,
/// `ContainerCreating`, `OOMKilled (137)`, or `Running, last OOMKilled` after an OOM restart.
pub fn state_label(pod: &PodView) -> String {
    let Some(c) = pod.containers.first() else {
        return "–".into();
    };
    let now = match &c.state {
        ContainerState::Unknown => "Unknown".to_string(),
        ContainerState::Waiting { reason } => reason.clone(),
        ContainerState::Running { .. } => "Running".to_string(),
        ContainerState::Terminated {
            reason, exit_code, ..
        } => format!("{reason} ({exit_code})"),
    };
    match &c.last_state {
        Some(last) if last.is_oom_killed() && !c.state.is_oom_killed() => {
            format!("{now}, last OOMKilled")
        }
        _ => now,
    }
}

/// The widest of `widths`, kept within `lo..=hi`.
fn widest(widths: impl Iterator<Item = usize>, lo: usize, hi: usize) -> u16 {
    widths.max().unwrap_or(lo).clamp(lo, hi) as u16
}

pub fn render(state: &State, view: &ViewState, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let Some(inner) = panel("Pods", theme, area, buf) else {
        return;
    };
    if state.pods.is_empty() {
        buf.set_line(
            inner.x,
            inner.y,
            &Line::styled("no pods seen yet", theme.muted()),
            inner.width,
        );
        return;
    }
    let phase = |p: &PodView| match p.deletion_timestamp {
        Some(_) => "Terminating".len(),
        None => p.phase.chars().count(),
    };
    let phase_w = widest(state.pods.values().map(phase), 5, 11);
    let name_w = widest(state.pods.keys().map(|n| n.chars().count()), 4, 40);
    let nodes = state.pods.values().filter_map(|p| p.node.as_ref());
    let node_w = widest(nodes.map(|n| n.chars().count()), 4, 24);
    // The node column only when the state label keeps 15 cells.
    let show_node = inner.width >= name_w + phase_w + 9 + node_w + 3 + 15 + 5;
    let mut widths = vec![
        Constraint::Length(name_w),
        Constraint::Length(phase_w),
        Constraint::Length(9),
        Constraint::Length(node_w),
        Constraint::Length(3),
        Constraint::Fill(1),
    ];
    let mut header = vec!["NAME", "PHASE", "READY", "NODE", "RST", "STATE"];
    if !show_node {
        widths.remove(3);
        header.remove(3);
    }
    let focus = view.focus_pod(state);
    let rows = state.pods.values().map(|p| {
        let phase = if p.deletion_timestamp.is_some() {
            Span::styled("Terminating", theme.warn())
        } else {
            let style = match p.phase.as_str() {
                "Running" => theme.ok(),
                "Pending" => theme.warn(),
                "Failed" | "Unknown" => theme.error(),
                _ => theme.text(),
            };
            Span::styled(p.phase.clone(), style)
        };
        let ready = match p.condition("Ready") {
            Some(c) => {
                let age = match (c.last_transition, state.now) {
                    (Some(t), Some(now)) => format!(" {}", fmt_age(secs(t, now))),
                    _ => String::new(),
                };
                let (word, style) = if c.status {
                    ("True", theme.ok())
                } else {
                    ("False", theme.warn())
                };
                Span::styled(format!("{word}{age}"), style)
            }
            None => Span::styled("–", theme.muted()),
        };
        let restarts = p.restarts();
        let label = state_label(p);
        let state_style = if p.oom_killed() {
            theme.error()
        } else if label.starts_with("Running") {
            theme.text()
        } else {
            theme.warn()
        };
        let name_style = if focus.as_deref() == Some(p.name.as_str()) {
            theme.accent().add_modifier(Modifier::BOLD)
        } else {
            theme.text()
        };
        let restarts_style = if restarts > 0 {
            theme.warn()
        } else {
            theme.text()
        };
        let node = p.node.clone().unwrap_or_else(|| "–".into());
        let mut cells = vec![
            Span::styled(p.name.clone(), name_style),
            phase,
            ready,
            Span::styled(node, theme.muted()),
            Span::styled(restarts.to_string(), restarts_style),
            Span::styled(label, state_style),
        ];
        if !show_node {
            cells.remove(3);
        }
        Row::new(cells)
    });
    let header = Row::new(header).style(theme.muted().add_modifier(Modifier::BOLD));
    let table_h = (1 + state.pods.len() as u16).min(inner.height);
    Table::new(rows, widths)
        .header(header)
        .column_spacing(1)
        .style(Style::new())
        .render(
            Rect {
                height: table_h,
                ..inner
            },
            buf,
        );
    let below = Rect {
        y: inner.y + table_h,
        height: inner.height - table_h,
        ..inner
    };
    events(state, theme, below, buf);
}

/// The Event rows of the state, the explaining ones of the latest trial first (while a
/// trial runs, of the one before it too: the evidence of a trial that just failed stays).
fn event_rows(state: &State) -> Vec<EventRow> {
    let trials = &state.timeline.trials;
    let since = match trials.last() {
        Some(t) if t.is_running() && trials.len() >= 2 => trials[trials.len() - 2].marks.t0,
        Some(t) => t.marks.t0,
        None => None,
    };
    kube_events::rows(&state.kube_events, since)
}

/// The head of one Event row: age, reason (bold where it explains the trial), count and,
/// `with_object`, the object; its message follows on the line or under it.
fn event_head(
    r: &EventRow,
    now: Option<Timestamp>,
    theme: &Theme,
    with_object: bool,
) -> Line<'static> {
    let age = now.map_or_else(String::new, |n| fmt_age(secs(r.last, n)));
    let mut reason_style = if r.warning {
        theme.warn()
    } else {
        theme.text()
    };
    if r.explains {
        reason_style = reason_style.add_modifier(Modifier::BOLD);
    }
    let count = if r.count > 1 {
        format!(" ×{}", r.count)
    } else {
        String::new()
    };
    let object = match r.object.split_once('/') {
        _ if !with_object => String::new(),
        Some((_, n)) => format!("{n} "),
        None => format!("{} ", r.object),
    };
    Line::from(vec![
        Span::styled(format!("{age:>3} "), theme.muted()),
        Span::styled(r.reason.clone(), reason_style),
        Span::styled(count, theme.warn()),
        Span::styled(format!(" {object}"), theme.muted()),
    ])
}

/// Lines an explaining Event may take: its head, then its message wrapped.
const EXPLAINED_LINES: usize = 3;

/// The height the Pods panel wants: its borders, the table, and the Events' title and
/// [`EXPLAINED_LINES`] for each of the (at most two) Events that explain the latest trial.
pub fn wanted_height(state: &State) -> u16 {
    let explaining = event_rows(state)
        .iter()
        .filter(|r| r.explains)
        .count()
        .min(2);
    let title = u16::from(explaining > 0);
    2 + 1 + state.pods.len() as u16 + title + (EXPLAINED_LINES * explaining) as u16
}

/// The Events under the pods, as many as fit in `area` under a title line; an explaining
/// Event's message continues on a second line where the rows allow.
fn events(state: &State, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let rows = event_rows(state);
    if area.height == 0 || rows.is_empty() {
        return;
    }
    let warnings = rows.iter().filter(|r| r.warning).count();
    let mut lines = Vec::new();
    // With two rows or fewer, the most telling Events go there, without a title.
    if area.height >= 3 {
        lines.push(Line::from(vec![
            Span::styled("Events", theme.muted().add_modifier(Modifier::BOLD)),
            Span::styled(
                format!(" {} · {warnings} warning(s) · e: all", rows.len()),
                theme.muted(),
            ),
        ]));
    }
    let width = area.width as usize;
    // The object only where the Events are about more than one (else it is the pod above).
    let objects: std::collections::BTreeSet<&String> = rows.iter().map(|r| &r.object).collect();
    let explaining = rows.iter().filter(|r| r.explains).count();
    let room = area.height as usize;
    for (i, r) in rows.iter().enumerate() {
        let mut line = event_head(r, state.now, theme, objects.len() > 1);
        let fits = width.saturating_sub(line.width());
        // An explaining Event's message goes on up to EXPLAINED_LINES lines, the first ones
        // first, while the rows still hold one line for each explaining Event after it; the
        // others take one line, cut.
        let after = explaining.saturating_sub(i + 1);
        let wrapped = r.explains && lines.len() + EXPLAINED_LINES + after <= room;
        if wrapped && r.message.chars().count() > fits {
            lines.push(line);
            for l in crate::ui::wrap(&r.message, width.saturating_sub(3), EXPLAINED_LINES - 1) {
                lines.push(Line::styled(format!("   {l}"), theme.text()));
            }
        } else {
            let message = crate::ui::ellipsize(&r.message, fits);
            line.spans.push(Span::styled(message, theme.text()));
            lines.push(line);
        }
    }
    crate::ui::put_lines(buf, area, &lines);
}

/// Every Event row, the message wrapped to `width` under its row (the `e` dialog).
pub fn all_event_lines(state: &State, theme: &Theme, width: usize) -> Vec<Line<'static>> {
    let rows = event_rows(state);
    if rows.is_empty() {
        return vec![Line::styled(
            "no Events of the target's pods yet",
            theme.muted(),
        )];
    }
    let mut lines = Vec::new();
    for r in &rows {
        lines.push(event_head(r, state.now, theme, true));
        for l in crate::ui::wrap(&r.message, width.saturating_sub(4), 12) {
            lines.push(Line::styled(format!("    {l}"), theme.text()));
        }
    }
    lines
}
