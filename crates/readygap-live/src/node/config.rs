//! Per-node access configuration (`[nodes."PATTERN"]` tables of the TOML config) and the
//! guess readygap makes when a node has none.
//!
//! ```toml
//! [nodes."gpu-*"]            # a node name, or a glob with `*` and `?`
//! via = "ssh"                # ssh | ssh://USER@HOST:PORT | minikube | kind | local | debug-pod
//! user = "ubuntu"            # default: the current user
//! host = "10.0.0.7"          # default: the node's InternalIP
//! port = 22
//! identity = "~/.ssh/id_ed25519"
//! jump = "ops@bastion:22"
//! known_hosts = "~/.ssh/known_hosts_lab"
//! host_key_policy = "accept-new"   # default "strict"; "no" does not exist
//! options = ["Compression=yes"]
//!
//! [nodes."minikube*"]
//! via = "minikube"
//! profile = "minikube"
//! ```
//!
//! Which table applies: an exact node name wins; otherwise the matching pattern with the
//! most literal (non-wildcard) characters, ties broken by the alphabetically first pattern.
//! Missing fields are filled from the guess ([`guess_access`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use serde::{Deserialize, Serialize};

use super::NodeError;
use super::access::{DEFAULT_DEBUG_IMAGE, HostKeyPolicy, NodeAccess, SshAccess, current_user};
use super::validate::{Host, NodeName, User, check_jump, check_profile, check_ssh_option};

/// One `[nodes."PATTERN"]` table. Every field is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    pub via: Option<String>,
    pub user: Option<String>,
    pub host: Option<String>,
    pub port: Option<u16>,
    pub identity: Option<PathBuf>,
    pub jump: Option<String>,
    pub known_hosts: Option<PathBuf>,
    pub host_key_policy: Option<HostKeyPolicy>,
    #[serde(default)]
    pub options: Vec<String>,
    pub connect_timeout_secs: Option<u64>,
    /// Seconds a shared connection outlives its last use; 0 turns sharing off.
    pub control_persist_secs: Option<u64>,
    pub control_dir: Option<PathBuf>,
    /// minikube profile.
    pub profile: Option<String>,
    /// Debug pod image.
    pub image: Option<String>,
}

/// The `nodes` section: pattern → table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodesSection {
    #[serde(default)]
    pub nodes: BTreeMap<String, NodeConfig>,
}

impl NodesSection {
    /// Parses a TOML document holding `[nodes."…"]` tables (and nothing else).
    pub fn from_toml(text: &str) -> Result<Self, NodeError> {
        let section: Self = toml::from_str(text).map_err(|e| NodeError::Config(e.to_string()))?;
        for (pattern, config) in &section.nodes {
            config
                .check()
                .map_err(|e| NodeError::Config(format!("[nodes.{pattern:?}]: {e}")))?;
        }
        Ok(section)
    }

    /// The table that applies to `node` (its exact name, else the most specific matching
    /// pattern), with its pattern.
    pub fn lookup(&self, node: &str) -> Option<(&str, &NodeConfig)> {
        let by_pattern = || {
            self.nodes
                .iter()
                .filter(|(pattern, _)| glob_match(pattern, node))
                .max_by(|(a, _), (b, _)| literal_len(a).cmp(&literal_len(b)).then_with(|| b.cmp(a)))
        };
        let (k, v) = self.nodes.get_key_value(node).or_else(by_pattern)?;
        Some((k.as_str(), v))
    }

    /// The access for a node: its table over the guess, or the guess alone. The string says
    /// why (which table, or what the guess was based on).
    pub fn resolve(&self, facts: &NodeFacts) -> Result<(NodeAccess, String), NodeError> {
        let guessed = facts.guess();
        match self.lookup(&facts.name) {
            None => guessed,
            Some((pattern, config)) => {
                let access = config.to_access(facts, guessed.ok().map(|(a, _)| a))?;
                Ok((access, format!("configured by [nodes.{pattern:?}]")))
            }
        }
    }
}

/// What readygap knows about a node from the Kubernetes API.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeFacts {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub provider_id: Option<String>,
    pub internal_ip: Option<String>,
}

impl NodeFacts {
    /// Takes name, labels, `spec.providerID` and the first InternalIP of a Node.
    pub fn from_node(node: &Node) -> Self {
        let internal_ip = node
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .and_then(|addrs| {
                addrs
                    .iter()
                    .find(|a| a.type_ == "InternalIP")
                    .map(|a| a.address.clone())
            });
        Self {
            name: node.metadata.name.clone().unwrap_or_default(),
            labels: node.metadata.labels.clone().unwrap_or_default(),
            provider_id: node.spec.as_ref().and_then(|s| s.provider_id.clone()),
            internal_ip,
        }
    }

    /// How to reach the node, guessed from these facts: see [`guess_access`].
    pub fn guess(&self) -> Result<(NodeAccess, String), NodeError> {
        let ip = self.internal_ip.as_deref();
        guess_access(&self.name, &self.labels, self.provider_id.as_deref(), ip)
    }
}

impl NodeConfig {
    /// Checks every field that can be checked without a node.
    pub fn check(&self) -> Result<(), NodeError> {
        // Each field given must pass its check, in this order.
        self.via.as_deref().map(parse_via).transpose()?;
        self.user.as_deref().map(User::new).transpose()?;
        self.host.as_deref().map(Host::new).transpose()?;
        if self.port == Some(0) {
            return Err(NodeError::InvalidPort { port: "0".into() });
        }
        self.jump.as_deref().map(check_jump).transpose()?;
        for o in &self.options {
            check_ssh_option(o)?;
        }
        self.profile.as_deref().map(check_profile).transpose()?;
        if let Some(image) = &self.image
            && (image.is_empty() || image.chars().any(|c| c.is_whitespace() || c.is_control()))
        {
            return Err(NodeError::Config(format!("invalid image {image:?}")));
        }
        Ok(())
    }

    /// Builds the access for `facts` from this table; `guess` fills what the table omits
    /// (and is the kind of access when `via` is absent).
    pub fn to_access(
        &self,
        facts: &NodeFacts,
        guess: Option<NodeAccess>,
    ) -> Result<NodeAccess, NodeError> {
        self.check()?;
        let node = NodeName::new(&facts.name)?;
        let via = match &self.via {
            Some(v) => parse_via(v)?,
            None => match &guess {
                Some(NodeAccess::Minikube { .. }) => Via::Minikube,
                Some(NodeAccess::Kind { .. }) => Via::Kind,
                Some(NodeAccess::Local) => Via::Local,
                Some(NodeAccess::DebugPod { .. }) => Via::DebugPod,
                Some(NodeAccess::Ssh(_)) | None => Via::Ssh(None),
            },
        };
        Ok(match via {
            Via::Minikube => NodeAccess::Minikube {
                profile: self.profile.clone().or_else(|| match &guess {
                    Some(NodeAccess::Minikube { profile, .. }) => profile.clone(),
                    _ => None,
                }),
                node,
            },
            Via::Kind => NodeAccess::Kind { node },
            Via::Local => NodeAccess::Local,
            Via::DebugPod => NodeAccess::DebugPod {
                node,
                image: self
                    .image
                    .clone()
                    .unwrap_or_else(|| DEFAULT_DEBUG_IMAGE.to_owned()),
            },
            Via::Ssh(url) => NodeAccess::Ssh(self.to_ssh(facts, url.map(|u| *u), guess)?),
        })
    }

    fn to_ssh(
        &self,
        facts: &NodeFacts,
        url: Option<SshAccess>,
        guess: Option<NodeAccess>,
    ) -> Result<SshAccess, NodeError> {
        let user = match (&self.user, &url) {
            (Some(u), _) => User::new(u)?,
            (None, Some(url)) => url.user.clone(),
            (None, None) => current_user().ok_or_else(|| {
                NodeError::Config("no user configured and the current user is unknown".into())
            })?,
        };
        let host = match (&self.host, &url, &guess, &facts.internal_ip) {
            (Some(h), _, _, _) => Host::new(h)?,
            (None, Some(url), _, _) => url.host.clone(),
            (None, None, Some(NodeAccess::Ssh(g)), _) => g.host.clone(),
            (None, None, _, Some(ip)) => Host::new(ip)?,
            (None, None, _, None) => Host::new(&facts.name)?,
        };
        let port = self.port.or(url.as_ref().map(|u| u.port)).unwrap_or(22);
        let mut ssh = SshAccess::new(user, host, port);
        ssh.identity = self.identity.as_deref().map(expand_tilde);
        ssh.jump = self.jump.clone();
        ssh.known_hosts = self.known_hosts.as_deref().map(expand_tilde);
        ssh.host_key_policy = self.host_key_policy.unwrap_or_default();
        ssh.options = self.options.clone();
        if let Some(secs) = self.connect_timeout_secs {
            ssh.connect_timeout = Duration::from_secs(secs.max(1));
        }
        if let Some(secs) = self.control_persist_secs {
            ssh.control_persist = (secs > 0).then(|| Duration::from_secs(secs));
        }
        ssh.control_dir = self.control_dir.as_deref().map(expand_tilde);
        Ok(ssh)
    }
}

enum Via {
    Ssh(Option<Box<SshAccess>>),
    Minikube,
    Kind,
    Local,
    DebugPod,
}

fn parse_via(via: &str) -> Result<Via, NodeError> {
    match via {
        "ssh" => Ok(Via::Ssh(None)),
        "minikube" => Ok(Via::Minikube),
        "kind" => Ok(Via::Kind),
        "local" => Ok(Via::Local),
        "debug-pod" => Ok(Via::DebugPod),
        url if url.starts_with("ssh://") => {
            // The user defaults to the current user unless the URL names one.
            let fallback = current_user().unwrap_or(User::new("root")?);
            let ssh = SshAccess::parse_url(url, &fallback)?;
            Ok(Via::Ssh(Some(Box::new(ssh))))
        }
        other => Err(NodeError::InvalidAccess {
            spec: other.to_owned(),
            reason: "expected ssh, ssh://USER@HOST:PORT, minikube, kind, local or debug-pod".into(),
        }),
    }
}

/// Parses a `--via` value (`ssh://USER@HOST:PORT`, `local`, `minikube`, `kind`, `debug-pod`
/// with the default image) for `node`.
pub fn access_from_via(
    via: &str,
    node: &NodeName,
    default_user: &User,
) -> Result<NodeAccess, NodeError> {
    match via {
        "local" => Ok(NodeAccess::Local),
        "minikube" => Ok(NodeAccess::Minikube {
            profile: None,
            node: node.clone(),
        }),
        "kind" => Ok(NodeAccess::Kind { node: node.clone() }),
        "debug-pod" => Ok(NodeAccess::DebugPod {
            node: node.clone(),
            image: DEFAULT_DEBUG_IMAGE.to_owned(),
        }),
        url if url.starts_with("ssh://") => {
            Ok(NodeAccess::Ssh(SshAccess::parse_url(url, default_user)?))
        }
        other => Err(NodeError::InvalidAccess {
            spec: other.to_owned(),
            reason: "expected ssh://USER@HOST:PORT, local, minikube, kind or debug-pod".into(),
        }),
    }
}

/// Guesses how to reach a node from what the Kubernetes API says about it:
/// - label `minikube.k8s.io/name` → `minikube ssh` with that profile;
/// - `spec.providerID` starting with `kind://` → `docker exec` into the node container;
/// - node `docker-desktop` → a debug pod (its VM has no ssh);
/// - otherwise ssh to the InternalIP (or the node name when it has none) as the current
///   user on port 22.
///
/// `internal_ip` is needed for the last case. Fails when the node name or address is
/// invalid, or when no current user is known.
pub fn guess_access(
    node_name: &str,
    labels: &BTreeMap<String, String>,
    provider_id: Option<&str>,
    internal_ip: Option<&str>,
) -> Result<(NodeAccess, String), NodeError> {
    let node = NodeName::new(node_name)?;
    if let Some(profile) = labels.get("minikube.k8s.io/name") {
        check_profile(profile)?;
        return Ok((
            NodeAccess::Minikube {
                profile: Some(profile.clone()),
                node,
            },
            format!("label minikube.k8s.io/name={profile}: minikube ssh"),
        ));
    }
    if let Some(id) = provider_id.filter(|id| id.starts_with("kind://")) {
        return Ok((
            NodeAccess::Kind { node },
            format!("providerID {id}: docker exec into the kind node container"),
        ));
    }
    if node_name == "docker-desktop" {
        return Ok((
            NodeAccess::DebugPod {
                node,
                image: DEFAULT_DEBUG_IMAGE.to_owned(),
            },
            "docker-desktop runs its node in a VM without ssh: a privileged debug pod".into(),
        ));
    }
    let user = current_user().ok_or_else(|| {
        NodeError::Config("cannot tell the current user ($USER unset); configure user".into())
    })?;
    let (host, from) = match internal_ip {
        Some(ip) => (Host::new(ip)?, format!("InternalIP {ip}")),
        None => (
            Host::new(node_name)?,
            "no InternalIP, so the node name as host".to_owned(),
        ),
    };
    let reason = format!("no minikube/kind/docker-desktop marks: ssh {user}@{host}:22 ({from})");
    Ok((NodeAccess::Ssh(SshAccess::new(user, host, 22)), reason))
}

/// Glob matching with `*` (any run of characters) and `?` (one character).
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

fn literal_len(pattern: &str) -> usize {
    pattern.chars().filter(|c| *c != '*' && *c != '?').count()
}

fn expand_tilde(path: &Path) -> PathBuf {
    if let Ok(rest) = path.strip_prefix("~")
        && let Some(home) = std::env::var_os("HOME")
    {
        return PathBuf::from(home).join(rest);
    }
    path.to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(name: &str, ip: Option<&str>) -> NodeFacts {
        NodeFacts {
            name: name.into(),
            internal_ip: ip.map(str::to_owned),
            ..NodeFacts::default()
        }
    }

    #[test]
    fn globs() {
        assert!(glob_match("gpu-*", "gpu-1"));
        assert!(glob_match("*", "x"));
        assert!(glob_match("n?de", "node"));
        assert!(glob_match("a*b*c", "aXXbYYc"));
        assert!(!glob_match("a*b*c", "aXXbYY"));
        assert!(!glob_match("gpu-*", "cpu-1"));
        assert!(glob_match("exact", "exact"));
        assert!(!glob_match("exact", "exactly"));
    }

    #[test]
    fn exact_then_most_specific_pattern_wins() {
        let section = NodesSection::from_toml(
            r#"
            [nodes."*"]
            via = "ssh"
            user = "ubuntu"
            [nodes."gpu-*"]
            via = "ssh"
            user = "admin"
            port = 2200
            [nodes."gpu-7"]
            via = "local"
            "#,
        )
        .expect("config");
        assert_eq!(section.lookup("gpu-7").map(|(p, _)| p), Some("gpu-7"));
        assert_eq!(section.lookup("gpu-1").map(|(p, _)| p), Some("gpu-*"));
        assert_eq!(section.lookup("cpu-1").map(|(p, _)| p), Some("*"));
        let (access, why) = section
            .resolve(&facts("gpu-1", Some("10.1.2.3")))
            .expect("access");
        assert!(why.contains("gpu-*"), "{why}");
        let NodeAccess::Ssh(ssh) = access else {
            panic!("expected ssh, got {access:?}");
        };
        assert_eq!(
            (ssh.user.as_str(), ssh.host.as_str(), ssh.port),
            ("admin", "10.1.2.3", 2200)
        );
        let (access, _) = section.resolve(&facts("gpu-7", None)).expect("access");
        assert_eq!(access, NodeAccess::Local);
    }

    #[test]
    fn ssh_url_and_options_from_config() {
        let section = NodesSection::from_toml(
            r#"
            [nodes."n1"]
            via = "ssh://root@127.0.0.1:2222"
            identity = "/keys/id"
            known_hosts = "/keys/kh"
            host_key_policy = "accept-new"
            control_persist_secs = 0
            options = ["Compression=yes"]
            "#,
        )
        .expect("config");
        let (access, _) = section
            .resolve(&facts("n1", Some("10.0.0.1")))
            .expect("access");
        let NodeAccess::Ssh(ssh) = access else {
            panic!("expected ssh");
        };
        assert_eq!((ssh.host.as_str(), ssh.port), ("127.0.0.1", 2222));
        assert_eq!(ssh.host_key_policy, HostKeyPolicy::AcceptNew);
        assert_eq!(ssh.control_persist, None);
        assert_eq!(ssh.identity, Some(PathBuf::from("/keys/id")));
    }

    #[test]
    fn invalid_configs_say_what_is_wrong() {
        for (text, needle) in [
            ("[nodes.\"x\"]\nvia = \"telnet\"", "expected ssh"),
            ("[nodes.\"x\"]\nuser = \"Root\"", "invalid user"),
            ("[nodes.\"x\"]\nhost = \"a;b\"", "invalid host"),
            (
                "[nodes.\"x\"]\noptions = [\"StrictHostKeyChecking=no\"]",
                "accept-new",
            ),
            ("[nodes.\"x\"]\nhost_key_policy = \"no\"", "unknown variant"),
            ("[nodes.\"x\"]\nfoo = 1", "unknown field"),
            ("[nodes.\"x\"]\nport = 70000", "port"),
        ] {
            let err = NodesSection::from_toml(text).expect_err(text).to_string();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn guesses() {
        let mut labels = BTreeMap::new();
        labels.insert("minikube.k8s.io/name".to_owned(), "dev".to_owned());
        let (a, why) = guess_access("dev-m02", &labels, None, Some("192.168.49.3")).expect("guess");
        assert_eq!(
            a,
            NodeAccess::Minikube {
                profile: Some("dev".into()),
                node: NodeName::new("dev-m02").expect("name")
            }
        );
        assert!(why.contains("minikube"));
        let (a, _) = guess_access(
            "kind-worker",
            &BTreeMap::new(),
            Some("kind://docker/kind/kind-worker"),
            None,
        )
        .expect("guess");
        assert!(matches!(a, NodeAccess::Kind { .. }));
        let (a, _) = guess_access("docker-desktop", &BTreeMap::new(), None, None).expect("guess");
        assert!(matches!(a, NodeAccess::DebugPod { .. }));
        let (a, why) = guess_access(
            "ip-10-0-0-1",
            &BTreeMap::new(),
            Some("aws:///x"),
            Some("10.0.0.1"),
        )
        .expect("guess");
        let NodeAccess::Ssh(ssh) = a else {
            panic!("expected ssh");
        };
        assert_eq!((ssh.host.as_str(), ssh.port), ("10.0.0.1", 22));
        assert!(why.contains("InternalIP 10.0.0.1"), "{why}");
        assert!(guess_access("a;rm -rf /", &BTreeMap::new(), None, None).is_err());
        assert!(guess_access("ok", &BTreeMap::new(), None, Some("1.2.3.4;x")).is_err());
    }

    #[test]
    fn facts_from_a_node_object() {
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "kind-worker", "labels": {"kubernetes.io/hostname": "kind-worker"}},
            "spec": {"providerID": "kind://docker/kind/kind-worker"},
            "status": {"addresses": [
                {"type": "Hostname", "address": "kind-worker"},
                {"type": "InternalIP", "address": "172.18.0.3"}
            ]}
        }))
        .expect("node");
        let f = NodeFacts::from_node(&node);
        assert_eq!(f.internal_ip.as_deref(), Some("172.18.0.3"));
        assert_eq!(
            f.provider_id.as_deref(),
            Some("kind://docker/kind/kind-worker")
        );
        let (a, _) = NodesSection::default().resolve(&f).expect("access");
        assert!(matches!(a, NodeAccess::Kind { .. }));
    }
}
