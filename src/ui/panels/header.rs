//! The header line: session context (context, namespace, target, model from the session
//! event), the trial number, live/replay, frozen, the recording indicator, and the key hint or,
//! while the API server has not answered, the connection state in its place.

use crate::ui::clip;
use crate::ui::theme::Theme;
use crate::ui::view::ViewState;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use readygap_core::state::State;

pub fn render(state: &State, view: &ViewState, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let Some(area) = clip(area, buf) else { return };
    let s = &state.session;
    let sep = || Span::styled(" │ ", theme.muted());
    let mut spans = vec![Span::styled(" readygap", theme.title()), sep()];
    // Mode, trial and recording first: they must survive a narrow terminal.
    let (status, style) = match state.timeline.current() {
        Some(t) if t.is_running() => (format!("trial #{} running", t.index), theme.accent()),
        Some(t) if t.is_ok() => (format!("trial #{} ✓", t.index), theme.ok()),
        Some(t) => (format!("trial #{} ✗", t.index), theme.error()),
        None => ("no trial".into(), theme.muted()),
    };
    spans.extend([Span::styled(status, style), sep()]);
    let mut mode = view.mode_label.to_uppercase();
    if view.feed_ended {
        mode.push_str(" (ended)");
    }
    spans.push(Span::styled(
        mode,
        theme.accent().add_modifier(Modifier::BOLD),
    ));
    if view.frozen {
        spans.push(sep());
        spans.push(Span::styled(
            "FROZEN",
            theme.warn().add_modifier(Modifier::BOLD),
        ));
    }
    if let Some(path) = &view.recording {
        spans.push(sep());
        spans.push(Span::styled("● REC ", theme.error()));
        spans.push(Span::styled(path.clone(), theme.muted()));
    }
    let model = view.selected_model.as_deref().or(s.model.as_deref());
    let dash = |v: &str| if v.is_empty() { "–" } else { v }.to_string();
    let mut fields = vec![
        ("ctx ", dash(&s.context)),
        ("ns ", dash(&s.namespace)),
        ("target ", dash(&s.target)),
        ("model ", dash(model.unwrap_or(""))),
    ];
    if let Some(rt) = &s.runtime {
        // The name only: how it was chosen ("(image …)", "(answers …)") is in the Residency
        // panel, and the header keeps room for the hint.
        fields.push(("runtime ", rt.split(" (").next().unwrap_or(rt).to_string()));
    }
    for (label, value) in fields {
        spans.extend([
            sep(),
            Span::styled(label, theme.muted()),
            Span::styled(value, theme.text()),
        ]);
    }
    // Not connected: the state instead of the keys, which wait for the cluster.
    if let Some(c) = &view.connection {
        spans.push(sep());
        spans.push(Span::styled(
            format!("NOT CONNECTED: {c}"),
            theme.warn().add_modifier(Modifier::BOLD),
        ));
    } else if !view.title.is_empty() {
        spans.push(sep());
        spans.push(Span::styled(view.title.clone(), theme.muted()));
    }
    buf.set_line(area.x, area.y, &Line::from(spans), area.width);
}
