//! Dialogs drawn over the panels: the help screen (generated from the keymap, then the latest
//! messages whole), the y/n
//! confirmation of a destructive intent, and the pod and model pickers.

use crate::ui::theme::Theme;
use crate::ui::view::{Dialog, ViewState};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Clear, Widget};
use readygap_core::state::State;

/// The help screen's lines.
pub fn help_lines(view: &ViewState, theme: &Theme) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    for e in view.keymap.help() {
        let disabled = e.writes && view.read_only;
        let replay_only = e.command.is_replay() && view.replay.is_none();
        let shadowed = view.replay.is_some() && view.keymap.shadowed_in_replay(e.command);
        let dim = disabled || replay_only || shadowed;
        let mut spans = vec![
            Span::styled(format!("{:>12}  ", e.keys), theme.accent()),
            Span::styled(
                e.description,
                if dim { theme.muted() } else { theme.text() },
            ),
        ];
        if disabled {
            spans.push(Span::styled("  (disabled: read-only)", theme.warn()));
        } else if replay_only {
            spans.push(Span::styled("  (in a replay)", theme.muted()));
        } else if shadowed {
            spans.push(Span::styled(
                "  (not in a replay: the key pauses)",
                theme.muted(),
            ));
        } else if e.destructive {
            spans.push(Span::styled("  (asks y/n)", theme.muted()));
        }
        lines.push(Line::from(spans));
    }
    lines.push(Line::from(vec![
        Span::styled(format!("{:>12}  ", "esc"), theme.accent()),
        Span::styled("close a dialog", theme.text()),
    ]));
    if view.read_only {
        lines.push(Line::styled(
            "read-only session: keys that send more than a GET are disabled",
            theme.warn(),
        ));
    }
    lines
}

/// The latest messages, newest first, each whole (word-wrapped to `width`): the footer has
/// room for one, cut when long.
pub fn message_lines(
    state: &State,
    view: &ViewState,
    theme: &Theme,
    width: usize,
) -> Vec<Line<'static>> {
    let notice = view.notice.iter().map(|(sev, text)| (*sev, text.as_str()));
    let kept = state
        .messages
        .iter()
        .rev()
        .map(|m| (m.severity, m.text.as_str()));
    let mut lines = Vec::new();
    for (sev, text) in notice.chain(kept).take(MESSAGES_IN_HELP) {
        for (i, l) in crate::ui::wrap(text, width.saturating_sub(2), 6)
            .into_iter()
            .enumerate()
        {
            let bullet = if i == 0 { "•" } else { " " };
            lines.push(Line::styled(
                format!("{bullet}{l}"),
                crate::ui::panels::footer::severity_style(theme, sev),
            ));
        }
    }
    lines
}

/// How many of the latest messages the help screen lists.
pub const MESSAGES_IN_HELP: usize = 5;

pub fn render(state: &State, view: &ViewState, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let Some(dialog) = &view.dialog else { return };
    let Some(area) = crate::ui::clip(area, buf) else {
        return;
    };
    let (title, lines): (&str, Vec<Line>) = match dialog {
        Dialog::Help => {
            let mut lines = help_lines(view, theme);
            let width = lines.iter().map(|l| l.width()).max().unwrap_or(60).max(60);
            let width = width.min(area.width.saturating_sub(5) as usize);
            let messages = message_lines(state, view, theme, width);
            if !messages.is_empty() {
                lines.push(Line::default());
                lines.push(Line::styled(
                    "latest messages, newest first:",
                    theme.muted(),
                ));
                lines.extend(messages);
            }
            ("Help", lines)
        }
        Dialog::Events => {
            let width = (area.width.saturating_sub(6) as usize).min(140);
            (
                "Events",
                crate::ui::panels::pods::all_event_lines(state, theme, width),
            )
        }
        Dialog::Confirm { intent } => (
            "Confirm",
            vec![
                Line::styled(
                    format!("{}?", intent.label(view.focus_pod(state).as_deref())),
                    theme.text(),
                ),
                Line::default(),
                Line::from(vec![
                    Span::styled("y", theme.accent().add_modifier(Modifier::BOLD)),
                    Span::styled(" yes   ", theme.text()),
                    Span::styled("n", theme.accent().add_modifier(Modifier::BOLD)),
                    Span::styled("/esc no", theme.text()),
                ]),
            ],
        ),
        Dialog::ChoosePod { items, index } => ("Choose pod", pick_lines(items, *index, theme)),
        Dialog::ChooseModel { items, index } => ("Choose model", pick_lines(items, *index, theme)),
    };
    let want_w = lines.iter().map(|l| l.width()).max().unwrap_or(10) as u16 + 4;
    let w = want_w.max(30).min(area.width);
    let h = (lines.len() as u16 + 2).min(area.height);
    let popup = Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    );
    Clear.render(popup, buf);
    buf.set_style(popup, theme.base());
    let block = Block::bordered()
        .border_type(BorderType::Double)
        .border_style(theme.accent())
        .title(Line::styled(format!(" {title} "), theme.title()));
    let inner = block.inner(popup);
    block.render(popup, buf);
    let text = Rect::new(
        inner.x + 1,
        inner.y,
        inner.width.saturating_sub(1),
        inner.height,
    );
    crate::ui::put_lines(buf, text, &lines);
}

fn pick_lines(items: &[String], index: usize, theme: &Theme) -> Vec<Line<'static>> {
    let mut lines: Vec<Line> = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            if i == index {
                Line::styled(
                    format!("› {item}"),
                    theme.accent().add_modifier(Modifier::REVERSED),
                )
            } else {
                Line::styled(format!("  {item}"), theme.text())
            }
        })
        .collect();
    lines.push(Line::styled(
        "↑/↓ move, enter choose, esc cancel",
        theme.muted(),
    ));
    lines
}
