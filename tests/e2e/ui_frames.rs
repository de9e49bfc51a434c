//! Whole-frame snapshots of the dashboard (ratatui `TestBackend` + insta) at 80×24 and 160×48,
//! at four stages of a scenario built from events: before a trial, mid-load (model loading,
//! memory rising), after T4, after an OOM kill. Deterministic: every time comes from events.

use crate::ui_support::*;
use readygap::ui::theme::Theme;
use readygap::ui::view::ViewState;

fn snap(stage: &str, until_ms: i64) {
    let state = state_at(until_ms);
    let view = ViewState::default();
    let theme = Theme::default_theme();
    for (w, h) in [(80u16, 24u16), (160, 48)] {
        let t = frame(&state, &view, &theme, w, h);
        insta::assert_snapshot!(format!("{stage}_{w}x{h}"), t.backend());
    }
}

#[test]
fn before_trial() {
    snap("before_trial", BEFORE_TRIAL);
}

#[test]
fn mid_load() {
    snap("mid_load", MID_LOAD);
}

#[test]
fn after_t4() {
    snap("after_t4", AFTER_T4);
}

#[test]
fn after_oom_kill() {
    snap("after_oom", AFTER_OOM);
}
