//! The Log view (`L`): the tail of the followed pod's container log, newest at the bottom as
//! `tail -f` shows it, each line with its time from the latest trial's T0 (the Timeline's
//! clock) or, before any trial, the time of day. The lines readygap reads a mark from (the
//! server listening, a model load begun or done, an inference's request line) are
//! highlighted and named; other request lines (readygap's own polls of `/api/ps` among them)
//! are muted, so the start-up stands out. The title says how the log stands: followed, ended with the
//! container, or why it cannot be read.

use crate::ui::theme::Theme;
use crate::ui::view::ViewState;
use crate::ui::{ellipsize, fmt_secs, panel, put_line, secs};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use readygap_core::runtime_log::{Following, parse_line};
use readygap_core::state::State;

/// Whose log the panel shows: the pod followed last, else the focused pod (whose start-up
/// lines are read whether or not the view is on: a replay of a recording made without the
/// view shows those).
fn shown_pod(state: &State, view: &ViewState) -> Option<String> {
    match &state.log_tail.following {
        Some((pod, _)) => Some(pod.clone()),
        None => view.focus_pod(state),
    }
}

/// The panel's title: whose log and how it stands.
pub fn title(state: &State, view: &ViewState) -> String {
    let tail = &state.log_tail;
    match (&tail.following, shown_pod(state, view)) {
        (Some((pod, Following::Yes)), _) => format!("Log · {pod} · following"),
        (Some((pod, Following::Ended)), _) => {
            format!("Log · {pod} · ended (container stopped)")
        }
        (Some((pod, Following::Failed(why))), _) => format!("Log · {pod} · cannot read: {why}"),
        (None, Some(pod)) if !tail.of_pod(&pod).is_empty() => {
            format!("Log · {pod} · its start-up lines (the whole log once followed)")
        }
        (None, Some(pod)) => format!("Log · {pod} · waiting for its container to run"),
        (None, None) => "Log · no pod".into(),
    }
}

pub fn render(state: &State, view: &ViewState, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let title = ellipsize(&title(state, view), (area.width as usize).saturating_sub(4));
    let Some(inner) = panel(&title, theme, area, buf) else {
        return;
    };
    let tail = &state.log_tail;
    let Some(pod) = shown_pod(state, view) else {
        let text = " L again hides this view; the log is followed once a pod runs";
        put_line(buf, inner, 0, &Line::styled(text, theme.muted()));
        return;
    };
    let pod = &pod;
    let t0 = state.timeline.trials.last().and_then(|t| t.marks.t0);
    let rows = inner.height as usize;
    let lines = tail.of_pod(pod);
    let shown = &lines[lines.len().saturating_sub(rows)..];
    let width = inner.width as usize;
    for (y, l) in shown.iter().enumerate() {
        let when = match t0 {
            Some(t0) => format!(
                "{:>8} ",
                format!("+{}", fmt_secs(secs(t0, l.ts))).replace("+-", "-")
            ),
            None => {
                let local = l.ts.with_timezone(&chrono::Local);
                format!("{} ", local.format("%H:%M:%S%.3f"))
            }
        };
        let mut spans = vec![Span::styled(when.clone(), theme.muted())];
        let room = width.saturating_sub(when.chars().count());
        match l.mark {
            Some(m) => {
                let label = format!("▸ {} ", m.label());
                let text = ellipsize(
                    l.text.trim_end(),
                    room.saturating_sub(label.chars().count()),
                );
                let style = theme.accent().add_modifier(Modifier::BOLD);
                spans.push(Span::styled(label, style));
                spans.push(Span::styled(text, theme.accent()));
            }
            None => {
                let request = parse_line(pod, &l.text).is_some();
                let style = if request { theme.muted() } else { theme.text() };
                spans.push(Span::styled(ellipsize(l.text.trim_end(), room), style));
            }
        }
        put_line(buf, inner, y as u16, &Line::from(spans));
    }
    if shown.is_empty() {
        put_line(buf, inner, 0, &Line::styled(" no lines yet", theme.muted()));
    }
}
