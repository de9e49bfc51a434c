//! The footer line: key hints generated from the keymap (destructive ones hidden and
//! "read-only" said when read-only; those that need the cluster hidden while not connected),
//! then the latest message coloured by severity: a UI notice (refused key, bad theme file) if
//! there is one, else `State::last_message()`. The message has precedence over the hints; one
//! too long for the line is cut with `…` and shown whole on the help screen.

use crate::ui::keymap::{Command, HelpEntry};
use crate::ui::theme::Theme;
use crate::ui::view::ViewState;
use crate::ui::{clip, ellipsize};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use readygap_core::state::{Severity, State};

/// The style of a message of this severity.
pub fn severity_style(theme: &Theme, s: Severity) -> Style {
    match s {
        Severity::Info => theme.text(),
        Severity::Warn => theme.warn(),
        Severity::Error => theme.error(),
    }
}

pub fn render(state: &State, view: &ViewState, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let Some(area) = clip(area, buf) else { return };
    let mut spans = Vec::new();
    if view.read_only {
        spans.push(Span::styled("read-only ", theme.warn()));
    }
    let offline = view.connection.is_some() && view.replay.is_none();
    if offline {
        spans.push(Span::styled("not connected ", theme.warn()));
    }
    let hidden = |e: &HelpEntry| {
        (e.writes && view.read_only)
            || (e.command.needs_cluster() && offline)
            || (e.command.is_replay() && view.replay.is_none())
    };
    // The help key first: it stays when a long message leaves room for no other hint, and
    // the help screen shows that message whole.
    let mut entries: Vec<HelpEntry> = view
        .keymap
        .help()
        .into_iter()
        .filter(|e| !hidden(e))
        .collect();
    entries.sort_by_key(|e| e.command != Command::Help);
    let mut kept: usize = spans.iter().map(|s| s.width()).sum();
    for (i, entry) in entries.iter().enumerate() {
        let key = entry.keys.split('/').next().unwrap_or_default().to_string();
        spans.push(Span::styled(key, theme.accent()));
        spans.push(Span::styled(
            format!(" {} ", entry.command.hint()),
            theme.muted(),
        ));
        if i == 0 && entry.command == Command::Help {
            kept = spans.iter().map(|s| s.width()).sum();
        }
    }
    let latest = || state.last_message().map(|m| (m.severity, m.text.clone()));
    let message = view.notice.clone().or_else(latest);
    // The message goes on the right and comes first: the key hints give way to it, all but
    // the states said in front (read-only, not connected) and the help key; a message longer
    // than that ends in `…` and the help screen (`?`) shows it whole.
    let kept = kept as u16;
    let hint_width = match message {
        Some((sev, text)) => {
            let room = area.width.saturating_sub(kept).max(area.width / 2);
            let shown = ellipsize(&text, room.saturating_sub(1) as usize);
            let msg_width = (shown.chars().count() as u16 + 1).min(room);
            let x = area.x + area.width - msg_width;
            buf.set_line(
                x,
                area.y,
                &Line::from(Span::styled(
                    format!("{shown} "),
                    severity_style(theme, sev),
                )),
                msg_width,
            );
            area.width.saturating_sub(msg_width).saturating_sub(1)
        }
        None => area.width,
    };
    buf.set_line(area.x, area.y, &Line::from(spans), hint_width);
}
