//! Node access against a REAL OpenSSH server on 127.0.0.1 (started by
//! `bash .ci/sshd-setup.sh`, files in /tmp/readygap-ssh): dropping caches as root and
//! through sudo as a non-root user, the typed failures (key refused, unknown and changed
//! host keys, a closed port, a port that never answers, sudo needing a password), refusing
//! injected names before any process starts, ControlMaster connection reuse, and the
//! remote host sampler on one session.
//!
//! Without the setup the tests print "skipped" and pass, unless CI is set: then they fail.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use readygap_live::host::RemoteHostSampler;
use readygap_live::node::exec::run;
use readygap_live::node::{
    ControlOp, DropThreshold, Host, NodeAccess, NodeError, RemoteScript, SshAccess, User,
    drop_caches,
};

/// Drop tests read their own file and then drop the whole machine's cache: run them one
/// at a time so one test's drop does not empty the other's cache in between.
static DROP_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

use crate::peers::Sshd as Lab;

impl Lab {
    fn key(&self) -> PathBuf {
        self.dir.join("id_ed25519")
    }
    fn wrong_key(&self) -> PathBuf {
        self.dir.join("id_wrong")
    }
    fn known_hosts(&self) -> PathBuf {
        self.dir.join("known_hosts")
    }
    fn log(&self) -> PathBuf {
        self.dir.join("sshd.log")
    }

    /// ssh access to USER@127.0.0.1:PORT with the test key, the test known_hosts and a
    /// private control directory under `ctl`.
    fn access(&self, user: &str, ctl: &Path) -> SshAccess {
        let mut a = SshAccess::new(
            User::new(user).expect("user"),
            Host::new("127.0.0.1").expect("host"),
            self.port,
        );
        a.identity = Some(self.key());
        a.known_hosts = Some(self.known_hosts());
        a.control_dir = Some(ctl.join("ctl"));
        a.control_persist = Some(Duration::from_secs(30));
        a.connect_timeout = Duration::from_secs(20);
        a
    }
}

/// The test sshd (see [`crate::peers::sshd`]).
fn lab() -> Lab {
    crate::peers::sshd()
}

const TIMEOUT: Duration = Duration::from_secs(60);

/// Writes `mib` MiB of random bytes to a fresh file on disk, syncs it and reads it back,
/// so its pages are in the page cache.
fn cache_a_fresh_file(dir: &Path, mib: usize) -> PathBuf {
    let path = dir.join("cache-me.bin");
    let mut random = std::fs::File::open("/dev/urandom").expect("/dev/urandom");
    let mut out = std::fs::File::create(&path).expect("create");
    let mut buf = vec![0u8; 1 << 20];
    for _ in 0..mib {
        random.read_exact(&mut buf).expect("random");
        out.write_all(&buf).expect("write");
    }
    out.sync_all().expect("sync");
    drop(out);
    let mut read_back = Vec::with_capacity(mib << 20);
    std::fs::File::open(&path)
        .expect("open")
        .read_to_end(&mut read_back)
        .expect("read back");
    assert_eq!(read_back.len(), mib << 20);
    path
}

/// A directory on a real disk (not tmpfs, whose pages cannot be dropped).
fn disk_tempdir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir")
}

async fn close_master(access: &SshAccess) {
    if let Ok(cmd) = access.control_command(ControlOp::Exit) {
        let _ = run(&cmd, Duration::from_secs(10)).await;
    }
}

/// The current length of sshd's log, so a test reads only what came after.
fn log_offset(lab: &Lab) -> usize {
    std::fs::read(lab.log()).map(|b| b.len()).unwrap_or(0)
}

/// Lines of sshd's log after `from` containing all of `needles`, once at least `min`
/// exist or the deadline passes.
async fn log_lines(lab: &Lab, from: usize, needles: &[&str], min: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let bytes = std::fs::read(lab.log()).unwrap_or_default();
        let text = String::from_utf8_lossy(bytes.get(from..).unwrap_or_default());
        let lines: Vec<String> = text
            .lines()
            .filter(|l| needles.iter().all(|n| l.contains(n)))
            .map(str::to_owned)
            .collect();
        if lines.len() >= min || Instant::now() > deadline {
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `$SSH_CONNECTION` as reported by the Whoami script: "ip port ip port".
fn conn_of(stdout: &str) -> String {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("@conn "))
        .expect("@conn line")
        .trim()
        .to_owned()
}

#[ignore = "needs the test sshd on 127.0.0.1 (bash .ci/sshd-setup.sh)"]
#[tokio::test]
async fn drops_caches_through_sshd_as_root() {
    let lab = lab();
    let _one_at_a_time = DROP_LOCK.lock().await;
    let disk = disk_tempdir();
    cache_a_fresh_file(disk.path(), 64);
    let ctl = tempfile::tempdir().expect("ctl");
    let ssh = lab.access("root", ctl.path());
    let access = NodeAccess::Ssh(ssh.clone());
    let threshold = DropThreshold {
        min_drop_kb: Some(32 * 1024),
        ..DropThreshold::default()
    };
    let result = drop_caches("test-node", &access, &threshold, TIMEOUT).await;
    close_master(&ssh).await;
    println!("{}", serde_json::to_string(&result).expect("json"));
    assert_eq!(result.error, None, "{result:?}");
    let before = result.cached_kb_before.expect("before");
    let after = result.cached_kb_after.expect("after");
    assert!(
        before >= after + 32 * 1024,
        "Cached should fall by at least half the 64 MiB file: {before} → {after} kB"
    );
    assert!(result.dropped);
    assert_eq!(result.node, "test-node");
}

#[tokio::test]
async fn drops_caches_locally_when_root() {
    let readable = std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/sys/vm/drop_caches")
        .is_ok();
    if !readable {
        if std::env::var_os("CI").is_some() {
            panic!("CI runs as root: /proc/sys/vm/drop_caches must be writable");
        }
        println!("skipped: /proc/sys/vm/drop_caches is not writable (not root)");
        return;
    }
    let _one_at_a_time = DROP_LOCK.lock().await;
    let disk = disk_tempdir();
    cache_a_fresh_file(disk.path(), 64);
    let result = drop_caches(
        "local",
        &NodeAccess::Local,
        &DropThreshold {
            min_drop_kb: Some(32 * 1024),
            ..DropThreshold::default()
        },
        TIMEOUT,
    )
    .await;
    assert_eq!(result.error, None, "{result:?}");
    let (before, after) = (
        result.cached_kb_before.expect("before"),
        result.cached_kb_after.expect("after"),
    );
    assert!(before >= after + 32 * 1024, "{before} → {after} kB");
    assert!(result.dropped);
}

#[ignore = "needs the test sshd on 127.0.0.1 (bash .ci/sshd-setup.sh)"]
#[tokio::test]
async fn a_wrong_key_is_reported_as_key_refused() {
    let lab = lab();
    let ctl = tempfile::tempdir().expect("ctl");
    let mut ssh = lab.access("root", ctl.path());
    ssh.identity = Some(lab.wrong_key());
    let access = NodeAccess::Ssh(ssh);
    let cmd = access.command(RemoteScript::Whoami).expect("command");
    let err = run(&cmd, TIMEOUT).await.expect_err("refused");
    assert!(matches!(err, NodeError::KeyRefused { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("key refused") && msg.contains("127.0.0.1:"),
        "{msg}"
    );
    // The same through drop_caches: no figures, the error in the result.
    let r = drop_caches("n", &access, &DropThreshold::default(), TIMEOUT).await;
    assert!(!r.dropped && r.cached_kb_before.is_none());
    assert!(
        r.error
            .as_deref()
            .is_some_and(|e| e.contains("key refused")),
        "{r:?}"
    );
}

#[ignore = "needs the test sshd on 127.0.0.1 (bash .ci/sshd-setup.sh)"]
#[tokio::test]
async fn unknown_and_changed_host_keys_are_refused() {
    let lab = lab();
    let tmp = tempfile::tempdir().expect("tmp");
    let empty = tmp.path().join("known_hosts_empty");
    std::fs::write(&empty, "").expect("write");
    let mut ssh = lab.access("root", tmp.path());
    ssh.known_hosts = Some(empty.clone());
    let cmd = NodeAccess::Ssh(ssh)
        .command(RemoteScript::Whoami)
        .expect("command");
    let err = run(&cmd, TIMEOUT).await.expect_err("unknown host key");
    assert!(matches!(err, NodeError::HostKeyUnknown { .. }), "{err}");
    assert!(err.to_string().contains("host key unknown"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&empty).expect("read"),
        "",
        "strict checking must not add the key"
    );

    // A known_hosts entry with another key for the same host: a changed key.
    let wrong_pub = std::fs::read_to_string(lab.dir.join("id_wrong.pub")).expect("pub");
    let mut fields = wrong_pub.split_whitespace();
    let (kind, key) = (fields.next().expect("type"), fields.next().expect("key"));
    let changed = tmp.path().join("known_hosts_changed");
    std::fs::write(&changed, format!("[127.0.0.1]:{} {kind} {key}\n", lab.port)).expect("write");
    let mut ssh = lab.access("root", tmp.path());
    ssh.known_hosts = Some(changed);
    let cmd = NodeAccess::Ssh(ssh)
        .command(RemoteScript::Whoami)
        .expect("command");
    let err = run(&cmd, TIMEOUT).await.expect_err("changed host key");
    assert!(matches!(err, NodeError::HostKeyChanged { .. }), "{err}");
}

#[ignore = "needs the test sshd on 127.0.0.1 (bash .ci/sshd-setup.sh)"]
#[tokio::test]
async fn accept_new_adds_an_unknown_key_when_configured() {
    let lab = lab();
    let tmp = tempfile::tempdir().expect("tmp");
    let kh = tmp.path().join("known_hosts_new");
    std::fs::write(&kh, "").expect("write");
    let mut ssh = lab.access("root", tmp.path());
    ssh.known_hosts = Some(kh.clone());
    ssh.host_key_policy = readygap_live::node::HostKeyPolicy::AcceptNew;
    ssh.control_persist = None;
    let cmd = NodeAccess::Ssh(ssh)
        .command(RemoteScript::Whoami)
        .expect("command");
    let out = run(&cmd, TIMEOUT).await.expect("accept-new connects");
    assert!(out.stdout.contains("@user root"), "{out:?}");
    // The server's host key was added (the host part may be hashed: HashKnownHosts).
    let added = std::fs::read_to_string(&kh).expect("read");
    let host_pub =
        std::fs::read_to_string(lab.dir.join("ssh_host_ed25519_key.pub")).expect("host key");
    let host_key = host_pub.split_whitespace().nth(1).expect("key");
    assert!(added.contains(host_key), "host key not added: {added:?}");
}

/// A TCP port that accepts and never says a word: counts connections accepted and
/// connections the peer closed, and holds them open.
struct SilentPort {
    port: u16,
    accepted: Arc<AtomicUsize>,
    closed: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

async fn silent_port() -> SilentPort {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let closed = Arc::new(AtomicUsize::new(0));
    let (a, c) = (accepted.clone(), closed.clone());
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            a.fetch_add(1, Ordering::SeqCst);
            let c = c.clone();
            tokio::spawn(async move {
                use tokio::io::AsyncReadExt;
                let mut buf = [0u8; 4096];
                // Read (and ignore) what the client sends until it closes.
                while let Ok(n) = stream.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                }
                c.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    SilentPort {
        port,
        accepted,
        closed,
        task,
    }
}

async fn wait_for(count: &AtomicUsize, at_least: usize, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if count.load(Ordering::SeqCst) >= at_least {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    count.load(Ordering::SeqCst) >= at_least
}

#[ignore = "needs the test sshd on 127.0.0.1 (bash .ci/sshd-setup.sh)"]
#[tokio::test]
async fn a_port_that_never_answers_times_out_and_the_child_is_killed() {
    let lab = lab();
    let silent = silent_port().await;
    let tmp = tempfile::tempdir().expect("tmp");
    let mut ssh = lab.access("root", tmp.path());
    ssh.port = silent.port;
    ssh.connect_timeout = Duration::from_secs(120); // so our own deadline fires first
    let cmd = NodeAccess::Ssh(ssh.clone())
        .command(RemoteScript::DropCaches)
        .expect("command");
    let deadline = Duration::from_secs(2);
    let start = Instant::now();
    let err = run(&cmd, deadline).await.expect_err("timeout");
    let took = start.elapsed();
    assert!(matches!(err, NodeError::Timeout { .. }), "{err}");
    assert!(
        took >= deadline && took < deadline + Duration::from_secs(10),
        "{took:?}"
    );
    assert_eq!(
        silent.accepted.load(Ordering::SeqCst),
        1,
        "ssh connected once"
    );
    // The killed ssh closes its end of the connection.
    assert!(
        wait_for(&silent.closed, 1, Duration::from_secs(10)).await,
        "the ssh child was not killed"
    );

    // ssh's own ConnectTimeout (banner exchange) is reported as a connect timeout.
    ssh.connect_timeout = Duration::from_secs(2);
    let cmd = NodeAccess::Ssh(ssh)
        .command(RemoteScript::Whoami)
        .expect("command");
    let start = Instant::now();
    let err = run(&cmd, Duration::from_secs(60))
        .await
        .expect_err("timeout");
    assert!(matches!(err, NodeError::ConnectTimeout { .. }), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "{:?}",
        start.elapsed()
    );
    silent.task.abort();
}

#[tokio::test]
#[ignore = "needs the OpenSSH client (ssh)"]
async fn a_closed_port_is_connection_refused() {
    crate::peers::ssh_client();
    // Bind and drop to find a free port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let mut ssh = SshAccess::new(
        User::new("root").expect("user"),
        Host::new("127.0.0.1").expect("host"),
        port,
    );
    ssh.control_persist = None;
    let cmd = NodeAccess::Ssh(ssh)
        .command(RemoteScript::Whoami)
        .expect("command");
    let err = run(&cmd, TIMEOUT).await.expect_err("refused");
    assert!(matches!(err, NodeError::ConnectionRefused { .. }), "{err}");
}

#[tokio::test]
async fn injected_names_are_refused_before_any_process_starts() {
    // A listener stands in for the node: if anything ran, it would see a connection.
    let silent = silent_port().await;
    let port = silent.port;
    let args = |node: &str, via: String| readygap::commands::drop_caches::DropCachesArgs {
        node: node.to_owned(),
        via: Some(via),
        identity: None,
        known_hosts: None,
        accept_new_host_key: false,
        no_connection_sharing: true,
        profile: None,
        format: readygap::commands::drop_caches::OutputFormat::Json,
        timeout: Duration::from_secs(5),
        min_drop_kb: None,
        image: None,
        namespace: None,
        kubeconfig: None,
        context: None,
        keep_pod: false,
    };
    let sentinel = tempfile::tempdir().expect("tmp");
    let marker = sentinel.path().join("ran");
    let evil_node = format!("a;touch {};rm -rf /", marker.display());
    for a in [
        args("a;rm -rf /", format!("ssh://root@127.0.0.1:{port}")),
        args(&evil_node, format!("ssh://root@127.0.0.1:{port}")),
        args(&evil_node, "kind".to_owned()),
        args(&evil_node, "minikube".to_owned()),
        args(&evil_node, "debug-pod".to_owned()),
        args("ok", "ssh://root@a;rm -rf /:22".to_owned()),
        args("ok", format!("ssh://root;id@127.0.0.1:{port}")),
        args("ok", "ssh://root@-oProxyCommand=touch:22".to_owned()),
    ] {
        let start = Instant::now();
        let r = readygap::commands::drop_caches::drop_caches_for_args(&a).await;
        let err = r.error.clone().expect("refused");
        assert!(
            err.starts_with("invalid node name")
                || err.starts_with("invalid host")
                || err.starts_with("invalid user"),
            "{a:?}: {err}"
        );
        assert!(!r.dropped && r.cached_kb_before.is_none());
        assert!(start.elapsed() < Duration::from_secs(2));
    }
    // Serde refuses too: a config or recording cannot smuggle a bad name in.
    let bad: Result<NodeAccess, _> = serde_json::from_str(r#"{"via":"kind","node":"a;rm -rf /"}"#);
    assert!(bad.is_err());
    // An ssh option that would run a local command is refused when building the argv.
    let mut ssh = SshAccess::new(
        User::new("root").expect("user"),
        Host::new("127.0.0.1").expect("host"),
        port,
    );
    ssh.options = vec![format!("ProxyCommand=touch {}", marker.display())];
    assert!(matches!(
        NodeAccess::Ssh(ssh).command(RemoteScript::DropCaches),
        Err(NodeError::InvalidOption { .. })
    ));
    assert!(!marker.exists(), "a command ran");
    assert_eq!(
        silent.accepted.load(Ordering::SeqCst),
        0,
        "something connected"
    );
    silent.task.abort();
}

#[ignore = "needs the test sshd on 127.0.0.1 (bash .ci/sshd-setup.sh)"]
#[tokio::test]
async fn sudo_needing_a_password_is_reported() {
    let lab = lab();
    let tmp = tempfile::tempdir().expect("tmp");
    let ssh = lab.access("rgtest", tmp.path());
    let access = NodeAccess::Ssh(ssh.clone());
    let cmd = access.command(RemoteScript::DropCaches).expect("command");
    let err = run(&cmd, TIMEOUT).await.expect_err("sudo refuses");
    close_master(&ssh).await;
    assert!(matches!(err, NodeError::SudoNeedsPassword { .. }), "{err}");
    assert!(err.to_string().contains("sudo needs a password"), "{err}");
}

#[ignore = "needs the test sshd on 127.0.0.1 (bash .ci/sshd-setup.sh)"]
#[tokio::test]
async fn a_non_root_user_drops_caches_through_passwordless_sudo() {
    let lab = lab();
    let _one_at_a_time = DROP_LOCK.lock().await;
    let disk = disk_tempdir();
    cache_a_fresh_file(disk.path(), 64);
    let tmp = tempfile::tempdir().expect("tmp");
    let ssh = lab.access("rgsudo", tmp.path());
    let access = NodeAccess::Ssh(ssh.clone());
    // The remote command goes through `sudo -n` for this user.
    let cmd = access.command(RemoteScript::DropCaches).expect("command");
    let remote = cmd
        .args
        .last()
        .expect("remote")
        .to_string_lossy()
        .into_owned();
    assert!(remote.starts_with("sudo -n sh -c '"), "{remote}");
    let threshold = DropThreshold {
        min_drop_kb: Some(32 * 1024),
        ..DropThreshold::default()
    };
    let result = drop_caches("sudo-node", &access, &threshold, TIMEOUT).await;
    close_master(&ssh).await;
    assert_eq!(result.error, None, "{result:?}");
    let (before, after) = (
        result.cached_kb_before.expect("before"),
        result.cached_kb_after.expect("after"),
    );
    assert!(before >= after + 32 * 1024, "{before} → {after} kB");
}

#[ignore = "needs the test sshd on 127.0.0.1 (bash .ci/sshd-setup.sh)"]
#[tokio::test]
async fn two_commands_share_one_control_master_connection() {
    let lab = lab();
    let tmp = tempfile::tempdir().expect("tmp");
    let ssh = lab.access("root", tmp.path());
    let access = NodeAccess::Ssh(ssh.clone());
    let cmd = access.command(RemoteScript::Whoami).expect("command");
    let from = log_offset(&lab);

    let first = run(&cmd, TIMEOUT).await.expect("first");
    let sockets: Vec<_> = std::fs::read_dir(tmp.path().join("ctl"))
        .expect("control dir")
        .filter_map(Result::ok)
        .filter(|e| {
            use std::os::unix::fs::FileTypeExt;
            e.file_type().map(|t| t.is_socket()).unwrap_or(false)
        })
        .collect();
    assert_eq!(sockets.len(), 1, "one control socket expected");
    let check = ssh.control_command(ControlOp::Check).expect("check");
    let checked = run(&check, TIMEOUT)
        .await
        .expect("ssh -O check: master running");
    assert!(checked.stderr.contains("Master running"), "{checked:?}");

    let second = run(&cmd, TIMEOUT).await.expect("second");
    let (c1, c2) = (conn_of(&first.stdout), conn_of(&second.stdout));
    assert_eq!(
        c1, c2,
        "both sessions must come over the same TCP connection"
    );
    let client_port = c1
        .split_whitespace()
        .nth(1)
        .expect("client port")
        .to_owned();
    let needle = format!("port {client_port} ");
    let sessions = log_lines(&lab, from, &["Starting session", &needle], 2).await;
    assert_eq!(
        sessions.len(),
        2,
        "two sessions on one connection: {sessions:?}"
    );
    let logins = log_lines(&lab, from, &["Accepted publickey", &needle], 1).await;
    assert_eq!(logins.len(), 1, "one authentication only: {logins:?}");

    close_master(&ssh).await;
    assert!(run(&check, TIMEOUT).await.is_err(), "master should be gone");
}

#[ignore = "needs the test sshd on 127.0.0.1 (bash .ci/sshd-setup.sh)"]
#[tokio::test]
async fn remote_sampler_streams_samples_over_one_session() {
    let lab = lab();
    let tmp = tempfile::tempdir().expect("tmp");
    let ssh = lab.access("root", tmp.path());
    let access = NodeAccess::Ssh(ssh.clone());
    let from = log_offset(&lab);
    let mut sampler =
        RemoteHostSampler::start(&access, Duration::from_secs(1), Duration::from_secs(30))
            .expect("start");
    let pid = sampler.process_id();
    let mut samples = Vec::new();
    for _ in 0..3 {
        samples.push(sampler.next_sample().await.expect("sample"));
        assert_eq!(
            sampler.process_id(),
            pid,
            "the same child process throughout"
        );
    }
    let conn = sampler.connection().expect("@conn").to_owned();
    sampler.stop().await;
    close_master(&ssh).await;

    for (_, s) in &samples {
        assert!(s.mem_total > 0);
        assert!(s.cached.is_some() && s.mem_available.is_some());
        assert_eq!(s.connection.as_deref(), Some(conn.as_str()));
    }
    assert_eq!(samples[0].1.cpu_percent, None);
    let cpu = samples[2]
        .1
        .cpu_percent
        .expect("cpu share from the second sample on");
    assert!((0.0..=100.0).contains(&cpu), "{cpu}");
    assert!(samples[0].0 < samples[2].0);
    // sshd saw one login and one session for the sampler's connection.
    let client_port = conn
        .split_whitespace()
        .nth(1)
        .expect("client port")
        .to_owned();
    let needle = format!("port {client_port} ");
    let sessions = log_lines(&lab, from, &["Starting session", &needle], 1).await;
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let logins = log_lines(&lab, from, &["Accepted publickey", &needle], 1).await;
    assert_eq!(logins.len(), 1, "{logins:?}");
}

#[ignore = "needs the test sshd on 127.0.0.1 (bash .ci/sshd-setup.sh)"]
#[tokio::test]
async fn remote_sampler_reports_a_refused_key() {
    let lab = lab();
    let tmp = tempfile::tempdir().expect("tmp");
    let mut ssh = lab.access("root", tmp.path());
    ssh.identity = Some(lab.wrong_key());
    let mut sampler = RemoteHostSampler::start(
        &NodeAccess::Ssh(ssh),
        Duration::from_secs(1),
        Duration::from_secs(30),
    )
    .expect("start");
    let err = sampler.next_sample().await.expect_err("refused");
    assert!(matches!(err, NodeError::KeyRefused { .. }), "{err}");
}

#[ignore = "needs the test sshd on 127.0.0.1 (bash .ci/sshd-setup.sh)"]
#[tokio::test]
async fn the_cli_drops_caches_over_ssh_and_reports_json() {
    let lab = lab();
    let _one_at_a_time = DROP_LOCK.lock().await;
    let disk = disk_tempdir();
    cache_a_fresh_file(disk.path(), 64);
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: readygap::commands::drop_caches::DropCachesArgs,
    }
    let port = lab.port.to_string();
    let via = format!("ssh://root@127.0.0.1:{port}");
    let identity = lab.key();
    let known_hosts = lab.known_hosts();
    let cli = Cli::try_parse_from([
        "drop-caches".as_ref(),
        "--node".as_ref(),
        "cli-node".as_ref(),
        "--via".as_ref(),
        via.as_ref(),
        "--identity".as_ref(),
        identity.as_os_str(),
        "--known-hosts".as_ref(),
        known_hosts.as_os_str(),
        "--no-connection-sharing".as_ref(),
        "--format".as_ref(),
        "json".as_ref(),
        "--timeout".as_ref(),
        "60s".as_ref(),
        "--min-drop-kb".as_ref(),
        "32768".as_ref(),
    ] as [&std::ffi::OsStr; 16])
    .expect("args");
    let result = readygap::commands::drop_caches::drop_caches_for_args(&cli.args).await;
    assert_eq!(result.error, None, "{result:?}");
    assert!(result.dropped);
    assert_eq!(readygap::commands::drop_caches::exit_code(&result), 0);
    let json: serde_json::Value = serde_json::to_value(&result).expect("json");
    let keys: Vec<&str> = json
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys.len(),
        5,
        "node, cached_kb_before, cached_kb_after, dropped, error: {keys:?}"
    );
    assert_eq!(json["node"], "cli-node");
    assert!(json["cached_kb_before"].as_u64().expect("before") >= 32 * 1024);
}

#[ignore = "needs the test sshd on 127.0.0.1 (bash .ci/sshd-setup.sh)"]
#[tokio::test]
async fn the_remote_sampling_task_streams_and_stops_on_cancel() {
    let lab = lab();
    let tmp = tempfile::tempdir().expect("tmp");
    let mut ssh = lab.access("root", tmp.path());
    ssh.control_persist = None;
    let mut sampler = Sampler::start(ssh, Duration::from_secs(1));
    for _ in 0..2 {
        let sample = sampler.next("a sample").await.expect("no error");
        assert!(sample.1.mem_total > 0);
    }
    sampler.stop().await;
}

#[ignore = "needs the test sshd on 127.0.0.1 (bash .ci/sshd-setup.sh)"]
#[tokio::test]
async fn the_remote_sampling_task_reports_errors_and_retries() {
    let lab = lab();
    let tmp = tempfile::tempdir().expect("tmp");
    let mut ssh = lab.access("root", tmp.path());
    ssh.identity = Some(lab.wrong_key());
    ssh.control_persist = None;
    let mut sampler = Sampler::start(ssh, Duration::from_millis(200));
    // Two errors: the task did not give up after the first one.
    for _ in 0..2 {
        let got = sampler.next("an error").await;
        assert!(matches!(got, Err(NodeError::KeyRefused { .. })), "{got:?}");
    }
    sampler.stop().await;
}

/// `host::run_remote_sampler` over ssh, every second, retrying after `retry`.
struct Sampler {
    rx: tokio::sync::mpsc::Receiver<readygap_live::host::SampleResult>,
    cancel: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    fn start(ssh: SshAccess, retry: Duration) -> Self {
        let (tx, rx) = tokio::sync::mpsc::channel(8);
        let cancel = tokio_util::sync::CancellationToken::new();
        let task = tokio::spawn(readygap_live::host::run_remote_sampler(
            NodeAccess::Ssh(ssh),
            Duration::from_secs(1),
            retry,
            tx,
            cancel.clone(),
        ));
        Sampler { rx, cancel, task }
    }

    /// The next sample (or error), within TIMEOUT.
    async fn next(&mut self, what: &str) -> readygap_live::host::SampleResult {
        tokio::time::timeout(TIMEOUT, self.rx.recv())
            .await
            .unwrap_or_else(|_| panic!("{what} in time"))
            .expect("channel open")
    }

    /// Cancel, and the task ends within 15 s.
    async fn stop(self) {
        self.cancel.cancel();
        tokio::time::timeout(Duration::from_secs(15), self.task)
            .await
            .expect("the task stops after cancel")
            .expect("join");
    }
}
