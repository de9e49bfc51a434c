//! Any text as a theme file or a config file: no panic, every error names the file (and the
//! key where one is at fault).
#![no_main]
use libfuzzer_sys::fuzz_target;
use readygap::ui::theme::Theme;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Err(e) = Theme::parse_over(&Theme::default_theme(), "fuzz", "fuzz.toml", &text) {
        assert!(e.to_string().contains("fuzz.toml"), "{e}");
    }
    if let Err(e) = readygap::config::parse(&text, "fuzz.toml") {
        assert!(e.to_string().contains("fuzz.toml"), "{e}");
    }
    if let Err(e) = readygap_live::node::NodesSection::from_toml(&text) {
        assert!(!e.to_string().is_empty());
    }
});
