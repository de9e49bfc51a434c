//! Validation of every name that ends up in a command line: node names, hosts, users,
//! ports, minikube profiles and extra ssh options.
//!
//! Node names come from the Kubernetes API and hosts from node addresses, so they are
//! untrusted input. Commands are built as argv vectors from fixed templates (never a shell
//! string with interpolation), and on top of that each value is checked against a strict
//! grammar here, so a node called `a;rm -rf /` or a host called `-oProxyCommand=…` is
//! refused with a clear error before any process starts.

use std::fmt;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::NodeError;

/// The shared surface of the checked names below: built only through `new` (serde too, by
/// `TryFrom<String>`), read back with `as_str` (IPv6 hosts without brackets).
macro_rules! checked_name {
    ($($name:ident),*) => {$(
        impl TryFrom<String> for $name {
            type Error = NodeError;
            fn try_from(value: String) -> Result<Self, Self::Error> {
                Self::new(&value)
            }
        }

        impl $name {
            /// The checked text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }
    )*};
}

checked_name!(NodeName, Host, User);

/// A Kubernetes node name: an RFC 1123 DNS subdomain (lower-case alphanumerics, `-` and
/// `.`, at most 253 characters, each label 1–63 characters starting and ending with an
/// alphanumeric).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String")]
pub struct NodeName(String);

impl NodeName {
    /// Checks `name` and wraps it.
    pub fn new(name: &str) -> Result<Self, NodeError> {
        match dns_subdomain_problem(name) {
            None => Ok(Self(name.to_owned())),
            Some(reason) => Err(NodeError::InvalidNodeName {
                name: name.to_owned(),
                reason,
            }),
        }
    }
}

impl fmt::Display for NodeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why `name` is not an RFC 1123 DNS subdomain, or `None` when it is one.
fn dns_subdomain_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("it is empty".into());
    }
    if name.len() > 253 {
        return Some(format!(
            "it is {} characters long (at most 253)",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '.'))
    {
        return Some(format!(
            "it contains {c:?}; only lower-case letters, digits, '-' and '.' are allowed (RFC 1123)"
        ));
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Some("it has an empty label (leading, trailing or doubled '.')".into());
        }
        if label.len() > 63 {
            return Some(format!("label {label:?} is longer than 63 characters"));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Some(format!(
                "label {label:?} starts or ends with '-' (RFC 1123 labels start and end with a letter or digit)"
            ));
        }
    }
    None
}

/// A host to connect to: a DNS host name (letters, digits, `-`, `.`; RFC 1123 labels,
/// upper case allowed) or an IPv4/IPv6 literal. Never starts with `-`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String")]
pub struct Host(String);

impl Host {
    /// Checks `host` and wraps it. IPv6 literals may be given with or without brackets.
    pub fn new(host: &str) -> Result<Self, NodeError> {
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if bare.parse::<IpAddr>().is_ok() {
            return Ok(Self(bare.to_owned()));
        }
        let lower = bare.to_ascii_lowercase();
        match dns_subdomain_problem(&lower) {
            None => Ok(Self(bare.to_owned())),
            Some(reason) => Err(NodeError::InvalidHost {
                host: host.to_owned(),
                reason: format!("not an IP address, and not a host name: {reason}"),
            }),
        }
    }

    /// True for an IPv6 literal (needs brackets in `user@[host]:port` and known_hosts).
    pub fn is_ipv6(&self) -> bool {
        matches!(self.0.parse::<IpAddr>(), Ok(IpAddr::V6(_)))
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_ipv6() {
            write!(f, "[{}]", self.0)
        } else {
            f.write_str(&self.0)
        }
    }
}

/// A remote user name: `[a-z_][a-z0-9_-]*`, at most 32 characters (the portable subset that
/// `useradd` accepts).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String")]
pub struct User(String);

impl User {
    /// Checks `user` and wraps it.
    pub fn new(user: &str) -> Result<Self, NodeError> {
        let problem = if user.is_empty() {
            Some("it is empty".to_owned())
        } else if user.len() > 32 {
            Some("it is longer than 32 characters".to_owned())
        } else if !user
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        {
            Some("it must start with a lower-case letter or '_'".to_owned())
        } else {
            user.chars()
                .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_' || *c == '-'))
                .map(|c| format!("it contains {c:?}; allowed are [a-z_][a-z0-9_-]*"))
        };
        match problem {
            None => Ok(Self(user.to_owned())),
            Some(reason) => Err(NodeError::InvalidUser {
                user: user.to_owned(),
                reason,
            }),
        }
    }

    /// True for `root`, who needs no `sudo`.
    pub fn is_root(&self) -> bool {
        self.0 == "root"
    }
}

impl fmt::Display for User {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Parses a TCP port (1–65535).
pub fn parse_port(text: &str) -> Result<u16, NodeError> {
    match text.parse::<u16>() {
        Ok(0) | Err(_) => Err(NodeError::InvalidPort {
            port: text.to_owned(),
        }),
        Ok(p) => Ok(p),
    }
}

/// Checks a minikube profile name (`[A-Za-z0-9][A-Za-z0-9._-]*`, at most 63 characters).
pub fn check_profile(profile: &str) -> Result<(), NodeError> {
    // (An empty name has no first character, so it is refused too.)
    let ok = profile.len() <= 63
        && profile
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && profile
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(NodeError::InvalidProfile {
            profile: profile.to_owned(),
        })
    }
}

/// ssh options that would let a config run arbitrary local commands or silently turn off
/// host key checking; they are refused in `options`.
const REFUSED_SSH_OPTIONS: &[&str] = &[
    "proxycommand",
    "localcommand",
    "permitlocalcommand",
    "knownhostscommand",
    "controlmaster",
    "controlpath",
    "controlpersist",
    "batchmode",
];

/// Checks one extra ssh option given as `Key=Value` and returns it unchanged.
///
/// Refused: anything not shaped `Key=Value` (key letters only, value without whitespace
/// or control characters), options that run local commands (`ProxyCommand`, `LocalCommand`,
/// `KnownHostsCommand`; use `jump` for bastions), the options readygap manages itself
/// (`ControlMaster`, `ControlPath`, `ControlPersist`, `BatchMode`), and
/// `StrictHostKeyChecking=no|off` (use `host_key_policy = "accept-new"` instead, which
/// still refuses a changed key).
pub fn check_ssh_option(option: &str) -> Result<String, NodeError> {
    let refuse = |reason: &str| {
        Err(NodeError::InvalidOption {
            option: option.to_owned(),
            reason: reason.to_owned(),
        })
    };
    let Some((key, value)) = option.split_once('=') else {
        return refuse("expected Key=Value");
    };
    if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric()) {
        return refuse("the key must be letters and digits only");
    }
    if value.is_empty() || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return refuse("the value must be non-empty without spaces or control characters");
    }
    let lower = key.to_ascii_lowercase();
    if REFUSED_SSH_OPTIONS.contains(&lower.as_str()) {
        return refuse("this option is managed by readygap or can run local commands");
    }
    if lower == "stricthostkeychecking"
        && matches!(value.to_ascii_lowercase().as_str(), "no" | "off")
    {
        return refuse(
            "host key checking is never turned off; set host_key_policy = \"accept-new\" to trust a first-seen key",
        );
    }
    Ok(option.to_owned())
}

/// Checks a jump host spec for `ssh -J`: comma-separated `[user@]host[:port]`.
pub fn check_jump(jump: &str) -> Result<String, NodeError> {
    let refuse = |reason: String| {
        Err(NodeError::InvalidJump {
            jump: jump.to_owned(),
            reason,
        })
    };
    if jump.is_empty() {
        return refuse("it is empty".into());
    }
    for hop in jump.split(',') {
        let (user, rest) = match hop.split_once('@') {
            Some((u, r)) => (Some(u), r),
            None => (None, hop),
        };
        if let Some(u) = user
            && let Err(e) = User::new(u)
        {
            return refuse(e.to_string());
        }
        let (host, port) = split_host_port(rest);
        if let Err(e) = Host::new(host) {
            return refuse(e.to_string());
        }
        if let Some(p) = port
            && parse_port(p).is_err()
        {
            return refuse(format!("bad port {p:?}"));
        }
    }
    Ok(jump.to_owned())
}

/// Splits `host:port`, `[v6]:port`, `[v6]`, `v6` or `host` into host and optional port.
pub(crate) fn split_host_port(text: &str) -> (&str, Option<&str>) {
    if let Some(rest) = text.strip_prefix('[')
        && let Some((host, after)) = rest.split_once(']')
    {
        return (host, after.strip_prefix(':'));
    }
    match text.rsplit_once(':') {
        // More than one ':' without brackets: a bare IPv6 literal.
        Some((host, _)) if host.contains(':') => (text, None),
        Some((host, port)) => (host, Some(port)),
        None => (text, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names_follow_rfc1123() {
        for ok in [
            "minikube",
            "minikube-m02",
            "ip-10-0-0-1.ec2.internal",
            "a",
            "0",
        ] {
            assert!(NodeName::new(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "a;rm -rf /",
            "$(reboot)",
            "Node",
            "-n",
            "a..b",
            "a.",
            "a b",
            "a\nb",
            "`id`",
        ] {
            let err = NodeName::new(bad).expect_err(bad).to_string();
            assert!(err.contains("invalid node name"), "{bad}: {err}");
        }
        let long = "a".repeat(64);
        assert!(NodeName::new(&long).is_err());
        let long_total = vec!["a".repeat(63); 5].join(".");
        assert!(NodeName::new(&long_total).is_err());
    }

    #[test]
    fn injection_names_explain_the_character() {
        let err = NodeName::new("a;rm -rf /")
            .expect_err("refused")
            .to_string();
        assert!(err.contains("';'"), "{err}");
    }

    #[test]
    fn hosts_are_names_or_ip_literals() {
        for ok in [
            "127.0.0.1",
            "::1",
            "[::1]",
            "fe80::1",
            "Node-1.Example.com",
            "localhost",
        ] {
            assert!(Host::new(ok).is_ok(), "{ok}");
        }
        for bad in [
            "a;rm -rf /",
            "-oProxyCommand=x",
            "",
            "host name",
            "h/x",
            "a@b",
            "[::1",
        ] {
            assert!(Host::new(bad).is_err(), "{bad}");
        }
        assert_eq!(Host::new("[::1]").expect("v6").as_str(), "::1");
        assert_eq!(Host::new("::1").expect("v6").to_string(), "[::1]");
    }

    #[test]
    fn users_and_ports() {
        for ok in ["root", "ubuntu", "_svc", "ec2-user", "a1"] {
            assert!(User::new(ok).is_ok(), "{ok}");
        }
        for bad in ["", "Root", "1abc", "a;b", "-oX", "a b", &"a".repeat(33)] {
            assert!(User::new(bad).is_err(), "{bad}");
        }
        assert!(User::new("root").expect("root").is_root());
        assert_eq!(parse_port("2222").expect("port"), 2222);
        for bad in ["0", "65536", "-1", "22;x", ""] {
            assert!(parse_port(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ssh_options_are_screened() {
        assert!(check_ssh_option("UserKnownHostsFile=/tmp/kh").is_ok());
        assert!(check_ssh_option("StrictHostKeyChecking=accept-new").is_ok());
        for bad in [
            "StrictHostKeyChecking=no",
            "stricthostkeychecking=OFF",
            "ProxyCommand=nc",
            "LocalCommand=x",
            "ControlPath=/tmp/x",
            "Foo",
            "Foo=a b",
            "=x",
            "Fo-o=x",
        ] {
            assert!(check_ssh_option(bad).is_err(), "{bad}");
        }
        let err = check_ssh_option("StrictHostKeyChecking=no")
            .expect_err("refused")
            .to_string();
        assert!(err.contains("accept-new"), "{err}");
    }

    #[test]
    fn jump_hosts_and_host_ports() {
        assert!(check_jump("bastion").is_ok());
        assert!(check_jump("ops@bastion.example.com:2200,root@10.0.0.1").is_ok());
        assert!(check_jump("a;b").is_err());
        assert!(check_jump("x@y:0").is_err());
        assert_eq!(split_host_port("h:22"), ("h", Some("22")));
        assert_eq!(split_host_port("[::1]:22"), ("::1", Some("22")));
        assert_eq!(split_host_port("::1"), ("::1", None));
        assert_eq!(split_host_port("h"), ("h", None));
    }

    #[test]
    fn profiles() {
        assert!(check_profile("minikube").is_ok());
        assert!(check_profile("My_Profile.2").is_ok());
        assert!(check_profile("-p").is_err());
        assert!(check_profile("a;b").is_err());
    }

    proptest::proptest! {
        #[test]
        fn accepted_values_never_carry_shell_or_option_syntax(
            text in "[a-z0-9._:;$ -]{1,24}|\\PC{0,80}"
        ) {
            // Whatever the input, validation returns (never panics), and what it accepts
            // cannot start an option or carry shell syntax.
            let shell = |s: &str| s.chars().any(|c| " \t\n;&|$`'\"\\<>(){}*?!#~%".contains(c));
            if let Ok(n) = NodeName::new(&text) {
                proptest::prop_assert!(!shell(n.as_str()) && !n.as_str().starts_with('-'));
            }
            if let Ok(h) = Host::new(&text) {
                proptest::prop_assert!(!shell(h.as_str()) && !h.as_str().starts_with('-'));
            }
            if let Ok(u) = User::new(&text) {
                proptest::prop_assert!(!shell(u.as_str()) && !u.as_str().starts_with('-'));
            }
            let _ = check_jump(&text);
            let _ = check_ssh_option(&text);
            let _ = split_host_port(&text);
        }
    }
}
