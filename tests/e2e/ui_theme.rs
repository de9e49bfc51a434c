//! Themes: every shipped theme parses and names every role it sets; a bad theme file is an
//! error naming the file and the key, and the dashboard falls back to the default and says so
//! in the footer; a user theme inherits the roles it leaves out.

use crate::ui_support::*;
use ratatui::style::Color;
use readygap::ui::app::{Dashboard, DashboardOptions};
use readygap::ui::theme::{BUILTIN, ROLES, Theme, ThemeError, Themes, parse_color};
use std::path::Path;

fn fixtures() -> &'static Path {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/themes"
    ))
}

#[test]
fn every_shipped_theme_parses_and_the_default_defines_every_role() {
    let names: Vec<&str> = BUILTIN.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        [
            "default",
            "light",
            "solarized-dark",
            "high-contrast",
            "monochrome"
        ]
    );
    let default = Theme::default_theme();
    for (name, text) in BUILTIN {
        let t = Theme::parse_over(&default, name, name, text)
            .unwrap_or_else(|e| panic!("shipped theme {name}: {e}"));
        assert_eq!(t.name, *name);
        assert_eq!(Theme::builtin(name), Some(t));
    }
    // The default file sets every role (the others may inherit).
    let table: toml::Table = BUILTIN[0].1.parse().expect("default theme is TOML");
    let mut keys: Vec<&str> = table.keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut roles = ROLES.to_vec();
    roles.sort_unstable();
    assert_eq!(keys, roles);
    // Themes differ where it matters.
    let light = Theme::builtin("light").expect("light");
    assert_ne!(light.background, default.background);
    assert_eq!(Themes::builtin().names().len(), BUILTIN.len());
}

#[test]
fn colours_are_named_hex_or_indexed() {
    assert_eq!(parse_color("red"), Some(Color::Red));
    assert_eq!(parse_color("lightgreen"), Some(Color::LightGreen));
    assert_eq!(parse_color("#0a0B0c"), Some(Color::Rgb(10, 11, 12)));
    assert_eq!(parse_color("201"), Some(Color::Indexed(201)));
    for bad in ["", "#12345", "#1234567", "#gg0000", "blurple", "256"] {
        assert_eq!(parse_color(bad), None, "{bad:?}");
    }
}

#[test]
fn unknown_key_names_the_file_and_the_key() {
    let path = fixtures().join("bad_key.toml");
    let err = Theme::load_file(&path).expect_err("unknown key");
    assert!(matches!(&err, ThemeError::UnknownKey { key, .. } if key == "segment_t9_t10"));
    let msg = err.to_string();
    assert!(
        msg.contains("bad_key.toml") && msg.contains("segment_t9_t10"),
        "{msg}"
    );
}

#[test]
fn bad_colour_names_the_file_and_the_key() {
    let path = fixtures().join("bad_colour.toml");
    let err = Theme::load_file(&path).expect_err("bad colour");
    let msg = err.to_string();
    assert!(
        msg.contains("bad_colour.toml") && msg.contains("`error`") && msg.contains("#12345"),
        "{msg}"
    );
    let err = Theme::parse_over(&Theme::default_theme(), "x", "x.toml", "ok = 3")
        .expect_err("not a string");
    assert!(err.to_string().contains("`ok`"), "{err}");
    let err =
        Theme::parse_over(&Theme::default_theme(), "x", "x.toml", "ok = ").expect_err("syntax");
    assert!(err.to_string().contains("x.toml"), "{err}");
}

#[test]
fn user_theme_inherits_missing_roles_from_the_default() {
    let t = Theme::load_file(&fixtures().join("partial.toml")).expect("partial theme");
    let d = Theme::default_theme();
    assert_eq!(t.name, "partial");
    assert_eq!(t.error, Color::Rgb(255, 0, 255));
    assert_eq!(t.segment_t3_t4, Color::Indexed(201));
    for role in ROLES
        .iter()
        .filter(|r| !["error", "segment_t3_t4"].contains(r))
    {
        assert_eq!(t.role(role), d.role(role), "{role} inherited");
    }
}

#[test]
fn theme_folder_loads_good_files_and_reports_bad_ones() {
    let (themes, errors) = Themes::load(Some(fixtures()));
    assert!(themes.get("partial").is_some());
    assert!(themes.get("bad_key").is_none());
    let files: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(files[0].contains("bad_colour.toml") && files[1].contains("bad_key.toml"));
    // User themes come after the presets in the `T` cycle.
    assert_eq!(themes.names().last().map(String::as_str), Some("partial"));
    let (picked, problem) = themes.pick("nope");
    assert_eq!(picked, Theme::default_theme());
    assert!(problem.is_some_and(|p| p.contains("nope")));
    // A missing folder is no error.
    let (_, errors) = Themes::load(Some(&fixtures().join("missing")));
    assert!(errors.is_empty());
}

#[test]
fn bad_theme_file_falls_back_to_default_with_a_footer_message() {
    let opts = DashboardOptions {
        theme: "bad_key".into(),
        themes_dir: Some(fixtures().to_path_buf()),
        ..DashboardOptions::default()
    };
    let dash = Dashboard::new(&opts, readygap_live::store::Store::new().reader());
    assert_eq!(dash.theme, Theme::default_theme());
    let t = frame(&state_at(AFTER_T4), &dash.view, &dash.theme, 160, 48);
    let footer = text(t.backend().buffer())
        .lines()
        .last()
        .unwrap_or_default()
        .to_string();
    assert!(
        footer.contains("bad_colour.toml"),
        "first bad file named in the footer: {footer}"
    );
    let buf = t.backend().buffer();
    let x = footer.chars().position(|c| c == '`').unwrap_or(0) as u16;
    assert_eq!(buf[(x, 47)].fg, Theme::default_theme().error);
}

#[test]
fn user_theme_is_selectable_by_name() {
    let opts = DashboardOptions {
        theme: "partial".into(),
        themes_dir: Some(fixtures().to_path_buf()),
        ..DashboardOptions::default()
    };
    let dash = Dashboard::new(&opts, readygap_live::store::Store::new().reader());
    assert_eq!(dash.theme.name, "partial");
    assert_eq!(dash.theme.error, Color::Rgb(255, 0, 255));
}
