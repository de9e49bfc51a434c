//! Typed errors of node access: invalid names (refused before anything runs), ssh's own
//! failures sorted into the cases a user can act on, sudo, timeouts and remote failures.

use std::time::Duration;

/// Everything that can go wrong when reaching a node. Messages say what happened and what
/// to do about it; `target` is a short description such as `ssh root@10.0.0.5:22`.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("invalid node name {name:?}: {reason}")]
    InvalidNodeName { name: String, reason: String },
    #[error("invalid host {host:?}: {reason}")]
    InvalidHost { host: String, reason: String },
    #[error("invalid user {user:?}: {reason}")]
    InvalidUser { user: String, reason: String },
    #[error("invalid port {port:?}: expected a number from 1 to 65535")]
    InvalidPort { port: String },
    #[error(
        "invalid minikube profile {profile:?}: expected letters, digits, '.', '_' or '-', starting with a letter or digit"
    )]
    InvalidProfile { profile: String },
    #[error("invalid ssh option {option:?}: {reason}")]
    InvalidOption { option: String, reason: String },
    #[error("invalid jump host {jump:?}: {reason}")]
    InvalidJump { jump: String, reason: String },
    #[error("invalid access {spec:?}: {reason}")]
    InvalidAccess { spec: String, reason: String },
    #[error("invalid node configuration: {0}")]
    Config(String),
    #[error("the ssh control directory {path} is unusable: {reason}")]
    ControlDir { path: String, reason: String },
    #[error("could not start {program} for {target}: {source}{hint}")]
    Spawn {
        program: String,
        target: String,
        hint: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{target}: key refused (\"Permission denied\"): the server accepted none of our keys for this user; check the identity file, the agent and the node's authorized_keys. ssh said: {stderr}"
    )]
    KeyRefused { target: String, stderr: String },
    #[error(
        "{target}: host key unknown: the node's host key is not in known_hosts and ssh runs in batch mode; add it (ssh-keyscan, or one interactive ssh) or set host_key_policy = \"accept-new\". ssh said: {stderr}"
    )]
    HostKeyUnknown { target: String, stderr: String },
    #[error(
        "{target}: host key CHANGED: the key offered differs from the one in known_hosts (a reinstalled node, or a man in the middle); verify it, then remove the old entry with ssh-keygen -R. ssh said: {stderr}"
    )]
    HostKeyChanged { target: String, stderr: String },
    #[error("{target}: connection refused: nothing listens on that port (is sshd running?)")]
    ConnectionRefused { target: String },
    #[error("{target}: cannot resolve the host name. ssh said: {stderr}")]
    HostUnresolved { target: String, stderr: String },
    #[error("{target}: host unreachable. ssh said: {stderr}")]
    Unreachable { target: String, stderr: String },
    #[error(
        "{target}: timed out connecting (no answer within the connect timeout). ssh said: {stderr}"
    )]
    ConnectTimeout { target: String, stderr: String },
    #[error("{target}: timed out after {after:?}; the command was killed")]
    Timeout { target: String, after: Duration },
    #[error(
        "{target}: sudo needs a password; give the user passwordless sudo for `sh -c` (NOPASSWD) or connect as root"
    )]
    SudoNeedsPassword { target: String },
    #[error("{target}: sudo is not installed on the node; connect as root")]
    SudoMissing { target: String },
    #[error("{target}: node not found: {stderr}")]
    NodeNotFound { target: String, stderr: String },
    #[error(
        "{target}: writing /proc/sys/vm/drop_caches failed (not root, or /proc/sys is read-only): {stderr}"
    )]
    DropRefused { target: String, stderr: String },
    #[error("{target}: the command failed with {status}: {stderr}")]
    CommandFailed {
        target: String,
        status: String,
        stderr: String,
    },
    #[error("{target}: unexpected output: {detail}")]
    UnexpectedOutput { target: String, detail: String },
    #[error("{target}: {what} is not run by this library: {hint}")]
    Unsupported {
        target: String,
        what: String,
        hint: String,
    },
    #[error("{target}: {detail}")]
    Forbidden { target: String, detail: String },
    #[error("{target}: {detail}")]
    DebugPod { target: String, detail: String },
    #[error("{target}: i/o error: {source}")]
    Io {
        target: String,
        #[source]
        source: std::io::Error,
    },
}

impl NodeError {
    /// True for errors raised by validation, before any process was started.
    pub fn is_validation(&self) -> bool {
        matches!(
            self,
            Self::InvalidNodeName { .. }
                | Self::InvalidHost { .. }
                | Self::InvalidUser { .. }
                | Self::InvalidPort { .. }
                | Self::InvalidProfile { .. }
                | Self::InvalidOption { .. }
                | Self::InvalidJump { .. }
                | Self::InvalidAccess { .. }
                | Self::Config(_)
        )
    }
}
