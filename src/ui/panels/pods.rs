//! The Pods panel: name, phase, Ready condition with its age (relative to `state.now`), node,
//! restarts and the container state label; an OOM-killed pod's state is in the error style.

use crate::ui::theme::Theme;
use crate::ui::view::ViewState;
use crate::ui::{fmt_age, panel, secs};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Row, Table, Widget};
use readygap_core::event::{ContainerState, PodView};
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
    Table::new(rows, widths)
        .header(header)
        .column_spacing(1)
        .style(Style::new())
        .render(inner, buf);
}
