//! Running a [`NodeCommand`]: a private ControlMaster directory, an overall deadline with
//! kill (a hang never blocks forever), and sorting of failures into [`NodeError`]s.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use super::NodeError;
use super::access::{DROP_REFUSED_STATUS, NodeCommand, Transport, effective_uid};

/// What a finished command printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutput {
    pub stdout: String,
    pub stderr: String,
}

/// Creates the ControlMaster directory (0700) if needed and checks it is a directory owned
/// by this user and closed to others; refuses it otherwise.
pub fn prepare_control_dir(dir: &Path) -> Result<(), NodeError> {
    let fail = |reason: String| NodeError::ControlDir {
        path: dir.display().to_string(),
        reason,
    };
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| fail(format!("cannot create it: {e}")))?;
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| fail(format!("cannot read it: {e}")))?;
    if !meta.is_dir() {
        return Err(fail("it is not a directory".into()));
    }
    if let Some(uid) = effective_uid()
        && meta.uid() != uid
    {
        return Err(fail(format!(
            "it belongs to uid {}, not to us (uid {uid})",
            meta.uid()
        )));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| fail(format!("cannot make it private (0700): {e}")))?;
    }
    Ok(())
}

fn spawn_error(cmd: &NodeCommand, source: std::io::Error) -> NodeError {
    let program = cmd.program.to_string_lossy().into_owned();
    let hint = if source.kind() == std::io::ErrorKind::NotFound {
        match cmd.transport {
            Transport::Ssh => {
                " (install the OpenSSH client: apt-get install openssh-client)".into()
            }
            Transport::Minikube => " (is minikube installed and on PATH?)".into(),
            Transport::Docker => " (is docker installed and on PATH?)".into(),
            Transport::Local => format!(" ({program} not found on PATH)"),
        }
    } else {
        String::new()
    };
    NodeError::Spawn {
        program,
        target: cmd.target.clone(),
        hint,
        source,
    }
}

/// Runs `cmd` to completion within `timeout` (the child is killed when the deadline
/// passes). A non-zero exit is sorted by [`classify_failure`].
pub async fn run(cmd: &NodeCommand, timeout: Duration) -> Result<CommandOutput, NodeError> {
    let child = spawn_streaming(cmd)?;
    // Dropping the future on timeout drops the child, and kill_on_drop kills it.
    let output = tokio::time::timeout(timeout, child.wait_with_output())
        .await
        .map_err(|_| NodeError::Timeout {
            target: cmd.target.clone(),
            after: timeout,
        })?
        .map_err(|source| NodeError::Io {
            target: cmd.target.clone(),
            source,
        })?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    if output.status.success() {
        Ok(CommandOutput { stdout, stderr })
    } else {
        Err(classify_failure(
            cmd.transport,
            &cmd.target,
            output.status.code(),
            &stderr,
        ))
    }
}

/// Starts `cmd` (its control directory prepared first) with stdout and stderr piped, for
/// streaming (the remote host sampler) or for [`run`]. The child is killed when dropped.
pub fn spawn_streaming(cmd: &NodeCommand) -> Result<tokio::process::Child, NodeError> {
    if let Some(dir) = &cmd.control_dir {
        prepare_control_dir(dir)?;
    }
    tracing::debug!(target = %cmd.target, program = ?cmd.program, args = ?cmd.args, "running node command");
    let mut command = tokio::process::Command::new(&cmd.program);
    command
        .args(&cmd.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command.spawn().map_err(|e| spawn_error(cmd, e))
}

/// Lines of ssh's stderr worth showing (drops the "Warning: Permanently added" chatter).
fn useful_stderr(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("Warning: Permanently added"))
        .collect();
    let mut text = lines.join(" | ");
    if text.len() > 600 {
        let mut cut = 600;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// Builds an error from the target and the useful part of stderr.
type MakeError = fn(String, String) -> NodeError;

/// Sorts a failed command into a [`NodeError`] from its exit code and stderr. Pure, so it
/// is tested on the messages OpenSSH, sudo, docker and minikube really print.
pub fn classify_failure(
    transport: Transport,
    target: &str,
    code: Option<i32>,
    stderr: &str,
) -> NodeError {
    let text = useful_stderr(stderr);
    let has = |needle: &str| stderr.contains(needle);
    let ssh = transport == Transport::Ssh && code == Some(255);
    // minikube: "Node m05 was not found", "Profile \"x\" not found", "profile … does not exist".
    let minikube_missing = has("was not found")
        || ((has("Profile") || has("profile")) && (has("not found") || has("not exist")));
    // The first case that holds names the error (given the target and the useful stderr).
    let cases: [(bool, MakeError); 12] = [
        // sudo's complaints, whichever transport carried them.
        (
            has("sudo: a password is required")
                || has("sudo: a terminal is required")
                || has("is not in the sudoers file")
                || has("sudo: no tty present"),
            |target, _| NodeError::SudoNeedsPassword { target },
        ),
        (
            (has("sudo: not found") || has("sudo: command not found"))
                || (has("sudo") && code == Some(127)),
            |target, _| NodeError::SudoMissing { target },
        ),
        (
            ssh && (has("REMOTE HOST IDENTIFICATION HAS CHANGED")
                || has("has changed and you have requested strict checking")),
            |target, stderr| NodeError::HostKeyChanged { target, stderr },
        ),
        (
            ssh && (has("Host key verification failed") || (has("host key") && has("is known"))),
            |target, stderr| NodeError::HostKeyUnknown { target, stderr },
        ),
        (
            ssh && (has("Permission denied (") || has("Too many authentication failures")),
            |target, stderr| NodeError::KeyRefused { target, stderr },
        ),
        (ssh && has("Connection refused"), |target, _| {
            NodeError::ConnectionRefused { target }
        }),
        (
            ssh && has("Could not resolve hostname"),
            |target, stderr| NodeError::HostUnresolved { target, stderr },
        ),
        (ssh && has("timed out"), |target, stderr| {
            NodeError::ConnectTimeout { target, stderr }
        }),
        (
            ssh && (has("No route to host") || has("Network is unreachable")),
            |target, stderr| NodeError::Unreachable { target, stderr },
        ),
        (
            transport == Transport::Docker && (has("No such container") || has("is not running")),
            |target, stderr| NodeError::NodeNotFound { target, stderr },
        ),
        (
            transport == Transport::Minikube && minikube_missing,
            |target, stderr| NodeError::NodeNotFound { target, stderr },
        ),
        (code == Some(DROP_REFUSED_STATUS), |target, stderr| {
            NodeError::DropRefused { target, stderr }
        }),
    ];
    let target = target.to_owned();
    if let Some((_, error)) = cases.into_iter().find(|(holds, _)| *holds) {
        return error(target, text);
    }
    let status = match code {
        Some(c) => format!("exit status {c}"),
        None => "a signal".to_owned(),
    };
    NodeError::CommandFailed {
        target,
        status,
        stderr: if text.is_empty() {
            "(no stderr)".into()
        } else {
            text
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "ssh root@127.0.0.1:2222";

    fn ssh(stderr: &str) -> NodeError {
        classify_failure(Transport::Ssh, T, Some(255), stderr)
    }

    #[test]
    fn openssh_messages_are_sorted() {
        assert!(matches!(
            ssh("root@127.0.0.1: Permission denied (publickey).\n"),
            NodeError::KeyRefused { .. }
        ));
        assert!(matches!(
            ssh("Host key verification failed.\n"),
            NodeError::HostKeyUnknown { .. }
        ));
        assert!(matches!(
            ssh(
                "No ED25519 host key is known for [127.0.0.1]:2222 and you have requested strict checking.\nHost key verification failed.\n"
            ),
            NodeError::HostKeyUnknown { .. }
        ));
        assert!(matches!(
            ssh(
                "@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\nHost key for [127.0.0.1]:2222 has changed and you have requested strict checking.\nHost key verification failed.\n"
            ),
            NodeError::HostKeyChanged { .. }
        ));
        assert!(matches!(
            ssh("ssh: connect to host 127.0.0.1 port 2299: Connection refused\n"),
            NodeError::ConnectionRefused { .. }
        ));
        assert!(matches!(
            ssh(
                "Connection timed out during banner exchange\nConnection to 127.0.0.1 port 2298 timed out\n"
            ),
            NodeError::ConnectTimeout { .. }
        ));
        assert!(matches!(
            ssh("ssh: Could not resolve hostname nope: Name or service not known\n"),
            NodeError::HostUnresolved { .. }
        ));
        assert!(matches!(
            ssh("ssh: connect to host 10.9.9.9 port 22: No route to host\n"),
            NodeError::Unreachable { .. }
        ));
    }

    #[test]
    fn sudo_and_remote_failures() {
        for code in [Some(1), Some(255)] {
            assert!(matches!(
                classify_failure(Transport::Ssh, T, code, "sudo: a password is required\n"),
                NodeError::SudoNeedsPassword { .. }
            ));
        }
        assert!(matches!(
            classify_failure(Transport::Ssh, T, Some(127), "sh: 1: sudo: not found\n"),
            NodeError::SudoMissing { .. }
        ));
        assert!(matches!(
            classify_failure(
                Transport::Local,
                "local",
                Some(97),
                "sh: 1: cannot create /proc/sys/vm/drop_caches: Read-only file system\n"
            ),
            NodeError::DropRefused { .. }
        ));
        let e = classify_failure(Transport::Ssh, T, Some(2), "grep: /proc/meminfo: nope\n");
        let msg = e.to_string();
        assert!(matches!(e, NodeError::CommandFailed { .. }));
        assert!(
            msg.contains("exit status 2") && msg.contains("grep: /proc/meminfo"),
            "{msg}"
        );
        assert!(matches!(
            classify_failure(
                Transport::Minikube,
                "minikube node m05",
                Some(80),
                "X Exiting due to GUEST_NODE_RETRIEVE: Node m05 was not found\n"
            ),
            NodeError::NodeNotFound { .. }
        ));
        // A remote "not found" is the command's failure, not a missing node.
        assert!(matches!(
            classify_failure(
                Transport::Minikube,
                "minikube node m",
                Some(2),
                "grep: /proc/x: not found\n"
            ),
            NodeError::CommandFailed { .. }
        ));
        assert!(matches!(
            classify_failure(
                Transport::Docker,
                "kind node x",
                Some(1),
                "Error response from daemon: No such container: x\n"
            ),
            NodeError::NodeNotFound { .. }
        ));
    }

    #[test]
    fn messages_say_what_to_do() {
        let msg = ssh("root@127.0.0.1: Permission denied (publickey).\n").to_string();
        assert!(msg.contains("key refused") && msg.contains(T), "{msg}");
        let msg = ssh("Host key verification failed.\n").to_string();
        assert!(
            msg.contains("host key unknown") && msg.contains("accept-new"),
            "{msg}"
        );
    }

    #[test]
    fn long_stderr_is_cut_on_a_char_boundary() {
        let long = "é".repeat(1000);
        let text = useful_stderr(&long);
        assert!(text.len() <= 604 && text.ends_with('…'));
        assert_eq!(
            useful_stderr(
                "Warning: Permanently added 'x' (ED25519) to the list of known hosts.\nreal\n"
            ),
            "real"
        );
    }

    #[test]
    fn control_dir_is_private() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("ctl");
        prepare_control_dir(&dir).expect("create");
        let mode = std::fs::metadata(&dir).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        prepare_control_dir(&dir).expect("tighten");
        let mode = std::fs::metadata(&dir).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let file = tmp.path().join("file");
        std::fs::write(&file, "x").expect("write");
        assert!(matches!(
            prepare_control_dir(&file),
            Err(NodeError::ControlDir { .. })
        ));
    }

    #[tokio::test]
    async fn a_hanging_local_command_is_killed_at_the_deadline() {
        let cmd = NodeCommand {
            program: "sleep".into(),
            args: vec!["30".into()],
            target: "local".into(),
            transport: Transport::Local,
            control_dir: None,
        };
        let start = std::time::Instant::now();
        let err = run(&cmd, Duration::from_millis(300))
            .await
            .expect_err("timeout");
        assert!(matches!(err, NodeError::Timeout { .. }), "{err}");
        assert!(start.elapsed() < Duration::from_secs(10));
    }

    #[tokio::test]
    async fn a_missing_program_is_a_spawn_error_with_a_hint() {
        let cmd = NodeCommand {
            program: "readygap-no-such-program".into(),
            args: vec![],
            target: "local".into(),
            transport: Transport::Local,
            control_dir: None,
        };
        let err = run(&cmd, Duration::from_secs(5)).await.expect_err("spawn");
        assert!(matches!(err, NodeError::Spawn { .. }), "{err}");
        assert!(err.to_string().contains("not found on PATH"), "{err}");
    }
}
