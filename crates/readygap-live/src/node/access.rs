//! How readygap reaches a node's kernel ([`NodeAccess`]) and the fixed command templates
//! it runs there ([`RemoteScript`]), turned into argv vectors ([`NodeCommand`]).
//!
//! Nothing here starts a process: [`NodeAccess::command`] validates every value again and
//! builds the argv; [`super::exec`] runs it. Remote scripts are constants; the only values
//! placed into argv are validated names, a port, a timeout in seconds and paths given by
//! the user's own configuration, each as its own argv element. ssh joins its trailing
//! arguments into one string for the remote shell, so the remote command is passed as a
//! single constant string (`sh -c '<script>'` or `sudo -n sh -c '<script>'`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::NodeError;
use super::validate::{Host, NodeName, User, check_jump, check_profile, check_ssh_option};

/// Default ssh connect timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time a ControlMaster connection outlives its last session, so consecutive
/// trials reuse one connection.
pub const DEFAULT_CONTROL_PERSIST: Duration = Duration::from_secs(300);
/// Default image of a debug pod.
pub const DEFAULT_DEBUG_IMAGE: &str = "busybox:1.36";
/// Exit status the drop-caches script uses when writing `drop_caches` failed.
pub const DROP_REFUSED_STATUS: i32 = 97;

/// The `/proc/meminfo` keys, besides `Cached`, that the drop script reads before and after:
/// the parts of `Cached` no drop frees (`drop_caches::PageCache`).
pub(crate) const PINNED_KEYS: [&str; 4] = ["Shmem", "Mapped", "Dirty", "Writeback"];

/// What to do with a host key that is not in known_hosts yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostKeyPolicy {
    /// ssh's own default with `BatchMode=yes`: an unknown key is refused, a changed key is
    /// refused. readygap never passes `StrictHostKeyChecking=no`.
    #[default]
    Strict,
    /// `StrictHostKeyChecking=accept-new`: a first-seen key is added to known_hosts, a
    /// changed key is still refused. Only when configured explicitly.
    AcceptNew,
}

/// Connection to a node through the system OpenSSH client (so `~/.ssh/config`, agents and
/// jump hosts work as they do for the user).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SshAccess {
    pub user: User,
    pub host: Host,
    pub port: u16,
    /// `-i FILE` (with `IdentitiesOnly=yes`); `None` leaves the choice to ssh's config and agent.
    pub identity: Option<PathBuf>,
    /// `-J` jump host(s), `[user@]host[:port]` separated by commas.
    pub jump: Option<String>,
    /// `UserKnownHostsFile=`; `None` uses ssh's default.
    pub known_hosts: Option<PathBuf>,
    pub host_key_policy: HostKeyPolicy,
    /// Extra `-o Key=Value` options, screened by [`check_ssh_option`].
    pub options: Vec<String>,
    pub connect_timeout: Duration,
    /// Directory of ControlMaster sockets; `None` uses [`default_control_dir`].
    pub control_dir: Option<PathBuf>,
    /// ControlPersist; `None` turns connection sharing off.
    pub control_persist: Option<Duration>,
}

impl SshAccess {
    /// An ssh access with the defaults: strict host keys, 10 s connect timeout, connection
    /// sharing in the default control directory for 300 s.
    pub fn new(user: User, host: Host, port: u16) -> Self {
        Self {
            user,
            host,
            port,
            identity: None,
            jump: None,
            known_hosts: None,
            host_key_policy: HostKeyPolicy::Strict,
            options: Vec::new(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            control_dir: None,
            control_persist: Some(DEFAULT_CONTROL_PERSIST),
        }
    }

    /// Parses `ssh://USER@HOST:PORT` (user and port optional; the user defaults to
    /// `default_user`, the port to 22; IPv6 in brackets).
    pub fn parse_url(url: &str, default_user: &User) -> Result<Self, NodeError> {
        let invalid = |reason: &str| NodeError::InvalidAccess {
            spec: url.to_owned(),
            reason: reason.to_owned(),
        };
        let rest = url
            .strip_prefix("ssh://")
            .ok_or_else(|| invalid("expected ssh://USER@HOST:PORT"))?;
        // The authority ends at the first '/', '?' or '#'; it is checked first so that
        // a bad host is reported as such.
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (rest, tail) = rest.split_at(end);
        let (user, hostport) = match rest.rsplit_once('@') {
            Some((u, hp)) => (User::new(u)?, hp),
            None => (default_user.clone(), rest),
        };
        let (host, port) = super::validate::split_host_port(hostport);
        let port = match port {
            Some(p) => super::validate::parse_port(p)?,
            None => 22,
        };
        let host = Host::new(host)?;
        if !tail.is_empty() && tail != "/" {
            return Err(invalid("a path, query or fragment is not allowed"));
        }
        Ok(Self::new(user, host, port))
    }

    /// `user@host:port` for messages.
    pub fn target(&self) -> String {
        format!("ssh {}@{}:{}", self.user, self.host, self.port)
    }

    /// The control directory in use.
    pub fn effective_control_dir(&self) -> Option<PathBuf> {
        self.control_persist?;
        Some(self.control_dir.clone().unwrap_or_else(default_control_dir))
    }

    /// The ssh options shared by every command to this node (everything before the host).
    pub fn base_args(&self) -> Result<Vec<OsString>, NodeError> {
        let mut args: Vec<OsString> = Vec::new();
        let mut opt = |o: String| {
            args.push("-o".into());
            args.push(o.into());
        };
        opt("BatchMode=yes".into());
        opt(format!(
            "ConnectTimeout={}",
            self.connect_timeout.as_secs().max(1)
        ));
        opt("ServerAliveInterval=5".into());
        opt("ServerAliveCountMax=2".into());
        if let (Some(persist), Some(dir)) = (self.control_persist, self.effective_control_dir()) {
            check_control_dir_path(&dir)?;
            opt("ControlMaster=auto".into());
            opt(format!("ControlPath={}/%C", dir.display()));
            opt(format!("ControlPersist={}", persist.as_secs().max(1)));
        }
        if self.host_key_policy == HostKeyPolicy::AcceptNew {
            tracing::warn!(
                target_host = %self.host,
                "host_key_policy accept-new: a host key seen for the first time is trusted and recorded (a changed key is still refused)"
            );
            opt("StrictHostKeyChecking=accept-new".into());
        }
        if let Some(kh) = &self.known_hosts {
            opt(format!("UserKnownHostsFile={}", path_option_value(kh)?));
        }
        for o in &self.options {
            opt(check_ssh_option(o)?);
        }
        if let Some(identity) = &self.identity {
            args.extend([OsString::from("-i"), identity.into()]);
            args.extend([OsString::from("-o"), "IdentitiesOnly=yes".into()]);
        }
        if let Some(jump) = &self.jump {
            args.extend([OsString::from("-J"), check_jump(jump)?.into()]);
        }
        args.extend([OsString::from("-p"), self.port.to_string().into()]);
        let user = User::new(self.user.as_str())?;
        args.extend([OsString::from("-l"), user.as_str().into()]);
        Ok(args)
    }

    /// Full argv (without the program) running `remote` on the node.
    fn args_for(&self, remote: String) -> Result<Vec<OsString>, NodeError> {
        let mut args = self.base_args()?;
        let host = Host::new(self.host.as_str())?;
        args.extend([OsString::from("--"), host.as_str().into(), remote.into()]);
        Ok(args)
    }

    /// argv for the ControlMaster check (`ssh -O check`): succeeds while a master runs.
    pub fn control_command(&self, op: ControlOp) -> Result<NodeCommand, NodeError> {
        let mut args = self.base_args()?;
        let host = Host::new(self.host.as_str())?;
        args.extend([OsString::from("-O"), op.as_str().into()]);
        args.extend([OsString::from("--"), host.as_str().into()]);
        Ok(NodeCommand {
            program: "ssh".into(),
            args,
            target: self.target(),
            transport: Transport::Ssh,
            control_dir: self.effective_control_dir(),
        })
    }
}

/// ControlMaster operations (`ssh -O`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlOp {
    /// Is a master running?
    Check,
    /// Stop the master now.
    Exit,
}

impl ControlOp {
    fn as_str(self) -> &'static str {
        match self {
            Self::Check => "check",
            Self::Exit => "exit",
        }
    }
}

/// How readygap reaches a node's kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "via", rename_all = "kebab-case")]
pub enum NodeAccess {
    /// The system OpenSSH client.
    Ssh(SshAccess),
    /// `minikube ssh [-p PROFILE] -n NODE -- COMMAND` (the `docker` user, with sudo).
    Minikube {
        profile: Option<String>,
        node: NodeName,
    },
    /// `docker exec NODE sh -c SCRIPT` (kind nodes are privileged containers as root;
    /// they share the host's kernel, so dropping caches drops the whole host's cache).
    Kind { node: NodeName },
    /// The node shares this machine's kernel: run locally (with `sudo -n` unless root).
    Local,
    /// A privileged pod on the node (hostPID, host /proc at `/host/proc`); creating it and
    /// exec-ing into it is done through the Kubernetes API, not by this module
    /// (see [`super::debug_session::DebugPodSession`]).
    DebugPod { node: NodeName, image: String },
}

/// Which program carries a command, for sorting its failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Ssh,
    Minikube,
    Docker,
    Local,
}

/// A fully built command: program and argv, never a shell string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeCommand {
    pub program: OsString,
    pub args: Vec<OsString>,
    /// Short description for messages, e.g. `ssh root@10.0.0.5:22`.
    pub target: String,
    pub transport: Transport,
    /// ControlMaster socket directory to prepare (private, 0700) before running.
    pub control_dir: Option<PathBuf>,
}

/// Where the kernel's `/proc` is seen by the remote script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcRoot {
    /// `/proc` (ssh, minikube, kind, local).
    Proc,
    /// `/host/proc` (the debug pod mounts the host's /proc there).
    HostProc,
}

/// The fixed scripts readygap runs on nodes. None of them contains a single quote, so
/// each can be wrapped as `sh -c '<script>'` unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteScript {
    /// `sync`, `Cached:` and its pinned part before, `echo 3 > drop_caches`, the same after
    /// (see `drop_caches`).
    DropCaches,
    /// A `while` loop printing memory and CPU counters every `interval_secs` seconds,
    /// framed by `@sample` / `@end` lines, after one `@conn $SSH_CONNECTION` line.
    SampleHost { interval_secs: u32 },
    /// `id -un` and `$SSH_CONNECTION`: checks access without touching anything.
    Whoami,
}

impl RemoteScript {
    /// The script text.
    pub fn text(self, proc_root: ProcRoot) -> String {
        let p = match proc_root {
            ProcRoot::Proc => "/proc",
            ProcRoot::HostProc => "/host/proc",
        };
        match self {
            Self::DropCaches => {
                let keys = format!("Cached|{}", PINNED_KEYS.join("|"));
                format!(
                    "sync; grep -E \"^({keys}):\" {p}/meminfo; echo 3 > {p}/sys/vm/drop_caches || exit {DROP_REFUSED_STATUS}; grep -E \"^({keys}):\" {p}/meminfo"
                )
            }
            Self::SampleHost { interval_secs } => format!(
                "echo \"@conn $SSH_CONNECTION\"; while :; do echo @sample; grep -E \"^(MemTotal|MemFree|MemAvailable|Buffers|Cached|Shmem|SwapTotal|SwapFree):\" {p}/meminfo; grep \"^cpu \" {p}/stat; echo @end; sleep {}; done",
                interval_secs.clamp(1, 3600)
            ),
            Self::Whoami => "echo \"@user $(id -un)\"; echo \"@conn $SSH_CONNECTION\"".to_owned(),
        }
    }

    /// True when the script must run as root.
    pub fn needs_root(self) -> bool {
        matches!(self, Self::DropCaches)
    }

    /// The single remote command string: `sh -c '<script>'`, or `sudo -n sh -c '<script>'`
    /// when the script needs root and the user is not root.
    pub fn remote_command(self, sudo: bool) -> String {
        let text = self.text(ProcRoot::Proc);
        if sudo && self.needs_root() {
            format!("sudo -n sh -c '{text}'")
        } else {
            format!("sh -c '{text}'")
        }
    }
}

impl NodeAccess {
    /// Short description for messages.
    pub fn target(&self) -> String {
        match self {
            Self::Ssh(s) => s.target(),
            Self::Minikube { profile, node } => match profile {
                Some(p) => format!("minikube -p {p} node {node}"),
                None => format!("minikube node {node}"),
            },
            Self::Kind { node } => format!("kind node {node}"),
            Self::Local => "local".to_owned(),
            Self::DebugPod { node, .. } => format!("debug pod on {node}"),
        }
    }

    /// Builds the argv running `script` on the node. Validates every value again, so a
    /// hand-built `NodeAccess` with a bad name is refused here, before any process starts.
    pub fn command(&self, script: RemoteScript) -> Result<NodeCommand, NodeError> {
        let text = || -> OsString { script.text(ProcRoot::Proc).into() };
        let (program, args, transport, control_dir) = match self {
            Self::Ssh(s) => {
                let remote = script.remote_command(!s.user.is_root());
                let dir = s.effective_control_dir();
                ("ssh", s.args_for(remote)?, Transport::Ssh, dir)
            }
            Self::Minikube { profile, node } => {
                let node = NodeName::new(node.as_str())?;
                let mut args: Vec<OsString> = vec!["ssh".into()];
                if let Some(p) = profile {
                    check_profile(p)?;
                    args.push("-p".into());
                    args.push(p.into());
                }
                args.push("-n".into());
                args.push(node.as_str().into());
                args.push("--".into());
                // minikube's user is `docker`, with passwordless sudo.
                args.push(script.remote_command(true).into());
                ("minikube", args, Transport::Minikube, None)
            }
            Self::Kind { node } => {
                let node = NodeName::new(node.as_str())?.as_str().into();
                let args = vec!["exec".into(), node, "sh".into(), "-c".into(), text()];
                ("docker", args, Transport::Docker, None)
            }
            Self::Local if script.needs_root() && !is_effective_root() => {
                let args = vec!["-n".into(), "sh".into(), "-c".into(), text()];
                ("sudo", args, Transport::Local, None)
            }
            Self::Local => ("sh", vec!["-c".into(), text()], Transport::Local, None),
            Self::DebugPod { node, .. } => {
                return Err(NodeError::Unsupported {
                    target: format!("debug pod on {node}"),
                    what: "exec into a debug pod".into(),
                    hint: "a debug pod is reached through the Kubernetes API: use DebugPodSession (drop_caches_via, run_node_sampler) with a kube client".into(),
                });
            }
        };
        Ok(NodeCommand {
            program: program.into(),
            args,
            target: self.target(),
            transport,
            control_dir,
        })
    }
}

/// The argv to exec inside a debug pod (host /proc mounted at `/host/proc`).
pub fn debug_pod_exec_argv(script: RemoteScript) -> Vec<String> {
    vec!["sh".into(), "-c".into(), script.text(ProcRoot::HostProc)]
}

/// The default directory for ControlMaster sockets: `$XDG_RUNTIME_DIR/readygap-ssh` when
/// that variable names an absolute path, else `/tmp/readygap-ctl-<uid>`. It is created
/// 0700 and checked to be ours before use (see [`super::exec::prepare_control_dir`]).
pub fn default_control_dir() -> PathBuf {
    let runtime = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
    if let Some(dir) = runtime.filter(|dir| dir.is_absolute()) {
        return dir.join("readygap-ssh");
    }
    let uid = effective_uid().map_or_else(|| "unknown".to_owned(), |u| u.to_string());
    PathBuf::from(format!("/tmp/readygap-ctl-{uid}"))
}

/// Unix socket paths are limited to 108 bytes; `%C` expands to 40 characters.
fn check_control_dir_path(dir: &Path) -> Result<(), NodeError> {
    let text = dir.to_string_lossy();
    let reason = if !dir.is_absolute() {
        "it must be an absolute path"
    } else if text.contains('%') || text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        "it must not contain '%', spaces or control characters"
    } else if text.len() + 1 + 40 >= 104 {
        "it is too long for a unix socket path (keep it under 60 characters)"
    } else {
        return Ok(());
    };
    Err(NodeError::ControlDir {
        path: text.into_owned(),
        reason: reason.to_owned(),
    })
}

/// A path as an `-o Key=Value` value: no whitespace, control characters or `%`.
fn path_option_value(path: &Path) -> Result<String, NodeError> {
    let text = path.to_string_lossy().into_owned();
    if text.is_empty()
        || text
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '%')
    {
        return Err(NodeError::InvalidOption {
            option: format!("UserKnownHostsFile={text}"),
            reason: "the path must be non-empty without spaces, '%' or control characters".into(),
        });
    }
    Ok(text)
}

/// This process's effective uid (owner of `/proc/self`), if it can be read.
pub fn effective_uid() -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").ok().map(|m| m.uid())
}

/// True when this process runs as root.
pub fn is_effective_root() -> bool {
    effective_uid() == Some(0)
}

/// The current user's name for ssh: `$USER`, else `$LOGNAME`, else `root` when running
/// as uid 0. `None` when none of these gives a valid name.
pub fn current_user() -> Option<User> {
    ["USER", "LOGNAME"]
        .into_iter()
        .find_map(|var| User::new(&std::env::var(var).ok()?).ok())
        .or_else(|| User::new("root").ok().filter(|_| is_effective_root()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ssh(user: &str) -> SshAccess {
        let mut s = SshAccess::new(
            User::new(user).expect("user"),
            Host::new("10.0.0.5").expect("host"),
            2222,
        );
        s.control_dir = Some(PathBuf::from("/run/user/1000/readygap-ssh"));
        s
    }

    fn strings(args: &[OsString]) -> Vec<String> {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn scripts_have_no_single_quotes() {
        for s in [
            RemoteScript::DropCaches,
            RemoteScript::SampleHost { interval_secs: 2 },
            RemoteScript::Whoami,
        ] {
            for root in [ProcRoot::Proc, ProcRoot::HostProc] {
                assert!(!s.text(root).contains('\''), "{s:?}");
            }
        }
    }

    #[test]
    fn ssh_argv_for_root_has_no_sudo_and_the_fixed_options() {
        let cmd = NodeAccess::Ssh(ssh("root"))
            .command(RemoteScript::DropCaches)
            .expect("command");
        assert_eq!(cmd.program, "ssh");
        let args = strings(&cmd.args);
        for want in [
            "BatchMode=yes",
            "ConnectTimeout=10",
            "ServerAliveInterval=5",
            "ServerAliveCountMax=2",
            "ControlMaster=auto",
            "ControlPath=/run/user/1000/readygap-ssh/%C",
            "ControlPersist=300",
        ] {
            assert!(
                args.contains(&want.to_owned()),
                "{want} missing in {args:?}"
            );
        }
        assert!(!args.iter().any(|a| a.contains("StrictHostKeyChecking")));
        let n = args.len();
        assert_eq!(&args[n - 3..n - 1], ["--", "10.0.0.5"]);
        assert_eq!(
            args[n - 1],
            "sh -c 'sync; grep -E \"^(Cached|Shmem|Mapped|Dirty|Writeback):\" /proc/meminfo; echo 3 > /proc/sys/vm/drop_caches || exit 97; grep -E \"^(Cached|Shmem|Mapped|Dirty|Writeback):\" /proc/meminfo'"
        );
        let p = args.iter().position(|a| a == "-p").expect("-p");
        assert_eq!(args[p + 1], "2222");
        let l = args.iter().position(|a| a == "-l").expect("-l");
        assert_eq!(args[l + 1], "root");
    }

    #[test]
    fn ssh_non_root_uses_sudo_only_for_root_scripts() {
        let access = NodeAccess::Ssh(ssh("ubuntu"));
        let drop = access.command(RemoteScript::DropCaches).expect("command");
        let last = drop
            .args
            .last()
            .expect("remote")
            .to_string_lossy()
            .into_owned();
        assert!(last.starts_with("sudo -n sh -c 'sync;"), "{last}");
        let sample = access
            .command(RemoteScript::SampleHost { interval_secs: 2 })
            .expect("command");
        let last = sample
            .args
            .last()
            .expect("remote")
            .to_string_lossy()
            .into_owned();
        assert!(last.starts_with("sh -c 'echo"), "{last}");
    }

    #[test]
    fn accept_new_identity_jump_and_known_hosts() {
        let mut s = ssh("root");
        s.host_key_policy = HostKeyPolicy::AcceptNew;
        s.identity = Some(PathBuf::from("/keys/id"));
        s.jump = Some("ops@bastion:2200".into());
        s.known_hosts = Some(PathBuf::from("/tmp/kh"));
        s.control_persist = None;
        let args = strings(&s.base_args().expect("args"));
        assert!(args.contains(&"StrictHostKeyChecking=accept-new".to_owned()));
        assert!(args.contains(&"UserKnownHostsFile=/tmp/kh".to_owned()));
        assert!(args.windows(2).any(|w| w == ["-i", "/keys/id"]));
        assert!(args.windows(2).any(|w| w == ["-J", "ops@bastion:2200"]));
        assert!(!args.iter().any(|a| a.starts_with("Control")));
    }

    #[test]
    fn bad_values_in_a_hand_built_access_are_refused_when_building() {
        let mut s = ssh("root");
        s.options = vec!["StrictHostKeyChecking=no".into()];
        assert!(matches!(
            NodeAccess::Ssh(s).command(RemoteScript::DropCaches),
            Err(NodeError::InvalidOption { .. })
        ));
        let mut s = ssh("root");
        s.jump = Some("a;b".into());
        assert!(NodeAccess::Ssh(s).command(RemoteScript::Whoami).is_err());
        let mut s = ssh("root");
        s.control_dir = Some(PathBuf::from(format!("/{}", "x".repeat(80))));
        assert!(matches!(
            NodeAccess::Ssh(s).command(RemoteScript::Whoami),
            Err(NodeError::ControlDir { .. })
        ));
        let m = NodeAccess::Minikube {
            profile: Some("-x;y".into()),
            node: NodeName::new("m").expect("node"),
        };
        assert!(matches!(
            m.command(RemoteScript::DropCaches),
            Err(NodeError::InvalidProfile { .. })
        ));
    }

    #[test]
    fn minikube_kind_local_argv() {
        let m = NodeAccess::Minikube {
            profile: Some("dev".into()),
            node: NodeName::new("dev-m02").expect("node"),
        }
        .command(RemoteScript::DropCaches)
        .expect("command");
        assert_eq!(m.program, "minikube");
        let args = strings(&m.args);
        assert_eq!(&args[..6], ["ssh", "-p", "dev", "-n", "dev-m02", "--"]);
        assert!(args[6].starts_with("sudo -n sh -c '"));
        let k = NodeAccess::Kind {
            node: NodeName::new("kind-worker").expect("node"),
        }
        .command(RemoteScript::DropCaches)
        .expect("command");
        assert_eq!(k.program, "docker");
        assert_eq!(&strings(&k.args)[..4], ["exec", "kind-worker", "sh", "-c"]);
        let l = NodeAccess::Local
            .command(RemoteScript::Whoami)
            .expect("command");
        assert_eq!(l.program, "sh");
    }

    #[test]
    fn parse_ssh_urls() {
        let me = User::new("me").expect("user");
        let s = SshAccess::parse_url("ssh://root@127.0.0.1:2222", &me).expect("url");
        assert_eq!(
            (s.user.as_str(), s.host.as_str(), s.port),
            ("root", "127.0.0.1", 2222)
        );
        let s = SshAccess::parse_url("ssh://node-1", &me).expect("url");
        assert_eq!((s.user.as_str(), s.port), ("me", 22));
        let s = SshAccess::parse_url("ssh://u@[::1]:22/", &me).expect("url");
        assert_eq!(s.host.as_str(), "::1");
        for bad in [
            "ssh://root@a;rm -rf /:22",
            "http://x",
            "ssh://x/y",
            "ssh://x:0",
            "ssh://Root@x",
            "ssh://-oProxyCommand=x",
        ] {
            assert!(SshAccess::parse_url(bad, &me).is_err(), "{bad}");
        }
    }

    #[test]
    fn debug_pod_argv_uses_host_proc() {
        let argv = debug_pod_exec_argv(RemoteScript::DropCaches);
        assert!(argv[2].contains("/host/proc/sys/vm/drop_caches"));
        assert!(
            NodeAccess::DebugPod {
                node: NodeName::new("n").expect("node"),
                image: DEFAULT_DEBUG_IMAGE.into()
            }
            .command(RemoteScript::DropCaches)
            .is_err()
        );
    }
}
