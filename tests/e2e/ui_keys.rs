//! Keys: the help screen is generated from the keymap and lists every binding; the config
//! file's `[keys]` overrides change bindings; read-only refuses destructive intents; a
//! destructive key asks for confirmation first. Key events are fed to the pure `update`.

use crate::ui_support::*;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use readygap::config;
use readygap::ui::intent::{Command as Act, Intent};
use readygap::ui::keymap::{Command, Key, Keymap};
use readygap::ui::theme::Theme;
use readygap::ui::view::{Dialog, ViewState, update};
use readygap_core::state::{Severity, State};
use std::collections::BTreeMap;
use std::path::PathBuf;

fn key(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
}

fn code(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

/// Feed keys one by one; returns the final view and every intent produced.
fn press(view: ViewState, state: &State, keys: &[KeyEvent]) -> (ViewState, Vec<Intent>) {
    let mut view = view;
    let mut out = Vec::new();
    for k in keys {
        let (v, intent) = update(view, state, *k);
        view = v;
        out.extend(intent);
    }
    (view, out)
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/config"
    ))
    .join(name)
}

#[test]
fn help_screen_lists_every_binding() {
    let keymap = Keymap::default();
    let view = ViewState {
        dialog: Some(Dialog::Help),
        ..ViewState::default()
    };
    let t = frame(&State::new(), &view, &Theme::default_theme(), 160, 48);
    let screen = text(t.backend().buffer());
    assert_eq!(keymap.bindings().len(), Command::ALL.len());
    for b in keymap.bindings() {
        let line = screen
            .lines()
            .find(|l| l.contains(b.command.description()))
            .unwrap_or_else(|| panic!("{:?} missing from help:\n{screen}", b.command));
        let before = &line[..line.find(b.command.description()).unwrap_or(0)];
        let inside = before.rsplit('║').next().unwrap_or_default();
        let keys: Vec<&str> = inside.trim().split('/').collect();
        assert!(
            keys.contains(&b.key.to_string().as_str()),
            "key {} of {:?}: {line}",
            b.key,
            b.command
        );
    }
    assert!(screen.contains("ctrl-c") && screen.contains("esc"));
    // The generated entries match the bindings one to one.
    let help = keymap.help();
    assert_eq!(help.len(), Command::ALL.len());
    assert!(
        help.iter()
            .all(|e| e.destructive == e.command.is_destructive())
    );
}

#[test]
fn config_fixture_overrides_a_binding() {
    let path = fixture("keys.toml");
    let (file, found) = config::load(Some(&path)).expect("config loads");
    assert_eq!(found.as_deref(), Some(path.as_path()));
    let cfg = config::resolve(&file, found.as_deref(), None, false).expect("resolves");
    assert_eq!(cfg.theme, "light");
    assert!(!cfg.read_only);
    let km = &cfg.keymap;
    assert_eq!(km.lookup(&key('x')), Some(Command::DeletePod));
    assert_eq!(km.lookup(&key('d')), None, "the default key is replaced");
    assert_eq!(km.lookup(&ctrl('q')), Some(Command::Quit));
    assert_eq!(km.lookup(&key('q')), Some(Command::Quit));
    assert_eq!(
        km.lookup(&ctrl('c')),
        Some(Command::Quit),
        "ctrl-c always quits"
    );
    assert_eq!(
        km.lookup(&key('r')),
        Some(Command::RolloutRestart),
        "others keep defaults"
    );
    // The help shows the new key.
    let help = km.help();
    let del = help
        .iter()
        .find(|e| e.command == Command::DeletePod)
        .expect("delete entry");
    assert_eq!(del.keys, "x");
    // And the pure update uses it: `x` asks to delete the pod.
    let view = ViewState {
        keymap: km.clone(),
        ..ViewState::default()
    };
    let state = state_at(AFTER_T4);
    let (view, intents) = press(view, &state, &[key('x')]);
    assert!(intents.is_empty());
    assert_eq!(
        view.dialog,
        Some(Dialog::Confirm {
            intent: Intent::Session(Act::Delete)
        })
    );
    // --theme and --read-only win over the file.
    let cfg = config::resolve(&file, None, Some("monochrome"), true).expect("resolves");
    assert_eq!((cfg.theme.as_str(), cfg.read_only), ("monochrome", true));
}

#[test]
fn bad_config_files_name_the_file_and_the_problem() {
    let path = fixture("bad_command.toml");
    let (file, found) = config::load(Some(&path)).expect("valid TOML");
    let err = config::resolve(&file, found.as_deref(), None, false).expect_err("unknown command");
    let msg = format!("{err:#}");
    assert!(
        msg.contains("bad_command.toml") && msg.contains("launch_rockets"),
        "{msg}"
    );

    let err = config::load(Some(&fixture("unknown_field.toml"))).expect_err("unknown field");
    let msg = format!("{err:#}");
    assert!(
        msg.contains("unknown_field.toml") && msg.contains("colour_scheme"),
        "{msg}"
    );

    let err = config::load(Some(&fixture("missing.toml"))).expect_err("--config must exist");
    assert!(format!("{err:#}").contains("missing.toml"));

    let bad_key = |k: &str| {
        let mut o = BTreeMap::new();
        o.insert("help".to_string(), vec![k.to_string()]);
        Keymap::with_overrides(&o)
    };
    assert!(bad_key("ctrl-c").is_err(), "ctrl-c is reserved");
    assert!(bad_key("esc").is_err(), "esc is reserved");
    assert!(bad_key("hyper-k").is_err());
    let mut both = BTreeMap::new();
    both.insert("help".to_string(), vec!["h".to_string()]);
    both.insert("quit".to_string(), vec!["h".to_string()]);
    assert!(
        Keymap::with_overrides(&both).is_err(),
        "one key, two commands"
    );
}

#[test]
fn keys_parse_and_print_back() {
    for s in [
        "d", "R", "?", "space", "esc", "enter", "ctrl-q", "alt-x", "f5", "up",
    ] {
        let k = Key::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        assert_eq!(k.to_string(), s);
    }
    assert_eq!(Key::parse("Ctrl+C"), Ok(Key::ctrl('c')));
}

/// Read-only sends only GETs: the destructive keys and `i` (an inference is a POST) are
/// refused with a notice; viewing and recording keys still work.
#[test]
fn read_only_refuses_destructive_intents() {
    let state = state_at(AFTER_T4);
    let destructive: Vec<char> = ['d', 'r', 'c', 't', 'u', 'i'].into();
    for c in destructive {
        let view = ViewState {
            read_only: true,
            ..ViewState::default()
        };
        assert!(
            Keymap::default()
                .lookup(&key(c))
                .is_some_and(Command::writes)
        );
        // Even answering "y" afterwards sends nothing.
        let (view, intents) = press(view, &state, &[key(c), key('y')]);
        assert!(intents.is_empty(), "{c}: {intents:?}");
        assert_eq!(view.dialog, None);
        let (v, _) = update(
            ViewState {
                read_only: true,
                ..ViewState::default()
            },
            &state,
            key(c),
        );
        let (sev, msg) = v.notice.expect("a notice");
        assert_eq!(sev, Severity::Warn);
        assert!(msg.contains("read-only"), "{msg}");
    }
    // Non-destructive keys still work when read-only.
    let view = ViewState {
        read_only: true,
        ..ViewState::default()
    };
    let (view, intents) = press(view, &state, &[key('l'), key('R'), key('L')]);
    assert_eq!(
        intents,
        vec![
            Intent::Session(Act::ToggleRecord),
            Intent::Session(Act::Tail(true))
        ]
    );
    assert!(view.log_scale && view.log_view);
    // `L` again: the log view off, and its follower stopped.
    let (off, intents) = press(view.clone(), &state, &[key('L')]);
    assert_eq!(intents, vec![Intent::Session(Act::Tail(false))]);
    assert!(!off.log_view);
    // And the footer says read-only, without the destructive hints.
    let t = frame(&state, &view, &Theme::default_theme(), 160, 48);
    let footer = text(t.backend().buffer())
        .lines()
        .last()
        .unwrap_or_default()
        .to_string();
    assert!(
        footer.contains("read-only") && !footer.contains("delete") && !footer.contains("infer"),
        "{footer}"
    );
}

#[test]
fn destructive_keys_need_confirmation() {
    let state = state_at(AFTER_T4);
    let cases = [
        ('d', Intent::Session(Act::Delete)),
        ('r', Intent::Session(Act::RolloutRestart)),
        ('c', Intent::Session(Act::Trial { cold: true })),
        ('t', Intent::Session(Act::Trial { cold: false })),
        ('u', Intent::Session(Act::Unload)),
    ];
    for (c, intent) in cases {
        let (view, intents) = press(ViewState::default(), &state, &[key(c)]);
        assert!(intents.is_empty(), "{c} sent before confirming");
        assert_eq!(
            view.dialog,
            Some(Dialog::Confirm {
                intent: intent.clone()
            })
        );
        // Other keys leave the question open; y sends.
        let (view, intents) = press(view, &state, &[key('z'), key('q')]);
        assert!(
            intents.is_empty() && view.dialog.is_some(),
            "{c}: q answers nothing"
        );
        let (view, intents) = press(view, &state, &[key('y')]);
        assert_eq!(intents, vec![intent.clone()]);
        assert_eq!(view.dialog, None);
        // n and Esc cancel.
        for cancel in [key('n'), code(KeyCode::Esc)] {
            let (view, intents) = press(ViewState::default(), &state, &[key(c), cancel]);
            assert!(intents.is_empty() && view.dialog.is_none());
        }
    }
    // With no pod, `d` says so instead of asking.
    let (view, intents) = press(ViewState::default(), &State::new(), &[key('d')]);
    assert!(intents.is_empty() && view.dialog.is_none() && view.notice.is_some());
}

#[test]
fn pickers_quit_and_ui_toggles() {
    let state = state_at(AFTER_T4);
    // p: pick a pod (only ollama-1 is left) → ChoosePod and the selection.
    let (view, intents) = press(
        ViewState::default(),
        &state,
        &[key('p'), code(KeyCode::Down), code(KeyCode::Enter)],
    );
    assert_eq!(
        intents,
        vec![Intent::Session(Act::ChoosePod(Some("ollama-1".into())))]
    );
    assert_eq!(view.selected_pod.as_deref(), Some("ollama-1"));
    // m: models on disk, sorted; the session's model is preselected; j moves down.
    let (view, intents) = press(ViewState::default(), &state, &[key('m')]);
    assert!(intents.is_empty());
    assert_eq!(
        view.dialog,
        Some(Dialog::ChooseModel {
            items: vec!["llama3.2:3b".into(), "qwen2.5:0.5b".into()],
            index: 0
        })
    );
    let (view, intents) = press(view, &state, &[key('j'), code(KeyCode::Enter)]);
    assert_eq!(
        intents,
        vec![Intent::Session(Act::ChooseModel(Some(
            "qwen2.5:0.5b".into()
        )))]
    );
    assert_eq!(view.selected_model.as_deref(), Some("qwen2.5:0.5b"));
    // T cycles themes, space freezes, ? opens help and any key closes it.
    let view = ViewState {
        theme_names: vec!["default".into(), "light".into()],
        ..ViewState::default()
    };
    let (view, _) = press(view, &state, &[key('T')]);
    assert_eq!(view.theme, "light");
    let (view, _) = press(view, &state, &[key('T'), key(' ')]);
    assert_eq!(view.theme, "default");
    assert!(view.frozen);
    let (view, _) = press(view, &state, &[key('?')]);
    assert_eq!(view.dialog, Some(Dialog::Help));
    let (view, intents) = press(view, &state, &[key('q')]);
    assert!(
        intents.is_empty() && view.dialog.is_none() && !view.quit,
        "q closes help first"
    );
    // Ctrl-C quits even from a dialog; q quits otherwise.
    let (view, intents) = press(view, &state, &[key('t'), ctrl('c')]);
    assert_eq!(intents, vec![Intent::Quit]);
    assert!(view.quit);
    let (_, intents) = press(ViewState::default(), &state, &[key('q')]);
    assert_eq!(intents, vec![Intent::Quit]);
}
