//! Any text as a node name, host, user, port, `ssh://` URL or glob: no panic, and what the
//! validators accept is safe to put on a command line (no whitespace, no shell or option
//! syntax), which is the reason they exist.
#![no_main]
use libfuzzer_sys::fuzz_target;
use readygap_live::node::access::SshAccess;
use readygap_live::node::config::glob_match;
use readygap_live::node::validate::parse_port;
use readygap_live::node::{Host, NodeName, User};

fn safe(s: &str) {
    assert!(!s.is_empty());
    assert!(!s.starts_with('-'), "{s:?} could be read as an option");
    assert!(
        !s.chars()
            .any(|c| c.is_whitespace() || c.is_control() || "'\"`$;&|<>\\".contains(c)),
        "{s:?} holds shell syntax"
    );
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(n) = NodeName::new(&text) {
        safe(n.as_str());
    }
    if let Ok(h) = Host::new(&text) {
        safe(h.as_str());
    }
    if let Ok(u) = User::new(&text) {
        safe(u.as_str());
        let _ = SshAccess::parse_url(&text, &u);
    }
    let _ = parse_port(&text);
    let root = User::new("root").expect("root is a user");
    if let Ok(a) = SshAccess::parse_url(&text, &root) {
        let _ = format!("{a:?}");
    }
    if let Some((pattern, name)) = text.split_once('\u{0}') {
        let _ = glob_match(pattern, name);
    }
});
