//! The header line: session context (context, namespace, target, model from the session
//! event), the trial number, live/replay, frozen, and the recording indicator.

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
    let dash = |v: &str| {
        if v.is_empty() {
            "–".to_string()
        } else {
            v.to_string()
        }
    };
    let sep = || Span::styled(" │ ", theme.muted());
    let mut spans = vec![Span::styled(" readygap", theme.title()), sep()];
    // Mode, trial and recording first: they must survive a narrow terminal.
    match state.timeline.current() {
        Some(t) => {
            let status = if t.is_running() {
                Span::styled(format!("trial #{} running", t.index), theme.accent())
            } else if t.is_ok() {
                Span::styled(format!("trial #{} ✓", t.index), theme.ok())
            } else {
                Span::styled(format!("trial #{} ✗", t.index), theme.error())
            };
            spans.push(status);
        }
        None => spans.push(Span::styled("no trial", theme.muted())),
    }
    spans.push(sep());
    let mode = if view.feed_ended {
        format!("{} (ended)", view.mode_label.to_uppercase())
    } else {
        view.mode_label.to_uppercase()
    };
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
    spans.extend([
        sep(),
        Span::styled("ctx ", theme.muted()),
        Span::styled(dash(&s.context), theme.text()),
        sep(),
        Span::styled("ns ", theme.muted()),
        Span::styled(dash(&s.namespace), theme.text()),
        sep(),
        Span::styled("target ", theme.muted()),
        Span::styled(dash(&s.target), theme.text()),
        sep(),
        Span::styled("model ", theme.muted()),
        Span::styled(
            dash(
                view.selected_model
                    .as_deref()
                    .or(s.model.as_deref())
                    .unwrap_or(""),
            ),
            theme.text(),
        ),
    ]);
    if let Some(rt) = &s.runtime {
        // The name only: how it was chosen ("(image …)", "(answers …)") is in the Residency
        // panel, and the header keeps room for the hint.
        let name = rt.split(" (").next().unwrap_or(rt);
        spans.push(sep());
        spans.push(Span::styled("runtime ", theme.muted()));
        spans.push(Span::styled(name.to_string(), theme.text()));
    }
    if !view.title.is_empty() {
        spans.push(sep());
        spans.push(Span::styled(view.title.clone(), theme.muted()));
    }
    buf.set_line(area.x, area.y, &Line::from(spans), area.width);
}
