//! The node host feed end to end, through the real `readygap run --lab` binary and its
//! recording:
//! - with `--node-access ssh://root@127.0.0.1:PORT` against the REAL sshd of
//!   `.ci/sshd-setup.sh` (which runs on this machine, so the node's figures are this
//!   machine's): host samples of the lab's node every ≈2 s, the access announced, and ONE
//!   ssh login for the whole run (read from sshd's own log);
//! - with a closed port and with a key sshd refuses: the host feed's error is recorded and
//!   the trial still completes;
//! - without access: the lab's node is sampled through the kubelet Summary API.
//!
//! The ssh tests print "skipped" and pass without the sshd setup, unless CI is set.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use readygap_core::event::{Event, EventKind, HostSample, NodeAccessInfo};

/// One lab process at a time (pod IPs on loopback are a per-process pool, and two runs on
/// two cores would stretch each other's timings).
static ONE_LAB: std::sync::Mutex<()> = std::sync::Mutex::new(());

use crate::peers::{Sshd, sshd};

/// A short private runtime dir for ssh's ControlMaster sockets (so no master left by
/// another run is reused, and the socket path stays under the unix limit).
fn runtime_dir() -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("rg")
        .tempdir_in("/tmp")
        .expect("runtime dir");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
    d
}

/// `readygap run --lab local-1b --trials 1` with `extra` flags, recording to `rec`.
fn run_lab(extra: &[&str], rec: &Path, xdg: &Path) -> std::process::Output {
    run_lab_env(extra, rec, xdg, &[])
}

fn run_lab_env(
    extra: &[&str],
    rec: &Path,
    xdg: &Path,
    env: &[(&str, &Path)],
) -> std::process::Output {
    let _one = ONE_LAB.lock().unwrap_or_else(|e| e.into_inner());
    Command::new(env!("CARGO_BIN_EXE_readygap"))
        .args([
            "run",
            "--lab",
            "local-1b",
            "--lab-speed",
            "2",
            "--trials",
            "1",
            "--cooldown",
            "0s",
            "--no-memory",
            "--format",
            "json",
            "--record",
        ])
        .arg(rec)
        .args(extra)
        .env("XDG_RUNTIME_DIR", xdg)
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .output()
        .expect("readygap runs")
}

fn events(rec: &Path) -> Vec<Event> {
    readygap_core::record::jsonl::read(rec)
        .expect("the recording reads")
        .events
}

fn node_samples(evs: &[Event]) -> Vec<(&Event, &HostSample)> {
    evs.iter()
        .filter_map(|e| match &e.kind {
            EventKind::HostSample(h) if h.node.is_some() => Some((e, h)),
            _ => None,
        })
        .collect()
}

fn accesses(evs: &[Event]) -> Vec<&NodeAccessInfo> {
    evs.iter()
        .filter_map(|e| match &e.kind {
            EventKind::NodeAccess(a) => Some(a),
            _ => None,
        })
        .collect()
}

fn host_errors(evs: &[Event]) -> Vec<(String, String)> {
    evs.iter()
        .filter_map(|e| match &e.kind {
            EventKind::SourceError { feed, message } if feed.name().starts_with("host ") => {
                Some((feed.name(), message.clone()))
            }
            _ => None,
        })
        .collect()
}

fn trial_ok(out: &std::process::Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(v["files"][0]["trials"][0]["ok"], true, "{v}");
}

/// `MemTotal:` of this machine in bytes.
fn mem_total() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").expect("/proc/meminfo");
    let line = text
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .expect("MemTotal line");
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .expect("number")
        .parse()
        .expect("kB");
    kb * 1024
}

/// Lines of sshd's log after byte `from` containing every needle.
fn log_lines(sshd: &Sshd, from: usize, needles: &[&str]) -> Vec<String> {
    let bytes = std::fs::read(sshd.dir.join("sshd.log")).unwrap_or_default();
    String::from_utf8_lossy(bytes.get(from..).unwrap_or_default())
        .lines()
        .filter(|l| needles.iter().all(|n| l.contains(n)))
        .map(str::to_owned)
        .collect()
}

/// Stops the ControlMaster a run left behind (ControlPersist) in `xdg`.
fn close_masters(xdg: &Path) {
    let Ok(dir) = std::fs::read_dir(xdg.join("readygap-ssh")) else {
        return;
    };
    for socket in dir.filter_map(Result::ok) {
        let _ = Command::new("ssh")
            .arg("-o")
            .arg(format!("ControlPath={}", socket.path().display()))
            .args(["-O", "exit", "127.0.0.1"])
            .output();
    }
}

#[ignore = "needs the test sshd on 127.0.0.1 (bash .ci/sshd-setup.sh)"]
#[test]
fn a_lab_run_samples_its_node_over_one_ssh_session() {
    let sshd = sshd();
    let tmp = tempfile::tempdir().expect("tmp");
    let xdg = runtime_dir();
    let rec = tmp.path().join("ssh.jsonl");
    let via = format!("ssh://root@127.0.0.1:{}", sshd.port);
    let key = sshd.dir.join("id_ed25519").display().to_string();
    let kh = sshd.dir.join("known_hosts").display().to_string();
    let from = std::fs::metadata(sshd.dir.join("sshd.log"))
        .map(|m| m.len() as usize)
        .unwrap_or(0);
    let out = run_lab(
        &[
            "--node-access",
            &via,
            "--node-identity",
            &key,
            "--node-known-hosts",
            &kh,
        ],
        &rec,
        xdg.path(),
    );
    close_masters(xdg.path());
    trial_ok(&out);
    let evs = events(&rec);

    // The access is announced for every node followed, as given on the command line.
    let acc = accesses(&evs);
    assert!(!acc.is_empty(), "a node_access event");
    for a in &acc {
        assert!(a.node.starts_with("lab-node-"), "{a:?}");
        assert_eq!(a.target, format!("ssh root@127.0.0.1:{}", sshd.port));
        assert_eq!(a.origin, "--node-access");
        assert!(a.sampling);
    }
    assert!(host_errors(&evs).is_empty(), "{:?}", host_errors(&evs));

    // Real figures of this machine (sshd runs here), at least two, ≈2 s apart per node.
    let samples = node_samples(&evs);
    assert!(samples.len() >= 2, "{} node samples", samples.len());
    let total = mem_total();
    for (_, h) in &samples {
        assert_eq!(h.mem_total, total, "MemTotal of this machine");
        let available = h.mem_available.expect("MemAvailable");
        assert!(available > 0 && available <= total, "{h:?}");
        assert!(h.cached.is_some_and(|c| c > 0 && c < total), "{h:?}");
        assert!(!h.cache_approx, "Cached: of /proc/meminfo is exact");
        assert!(h.connection.is_some(), "over ssh, $SSH_CONNECTION: {h:?}");
        assert!(
            h.cpu_percent.is_none_or(|c| (0.0..=100.0).contains(&c)),
            "{h:?}"
        );
    }
    // The first sample of a sampler has no CPU share (a gap, not 0 %); later ones do.
    assert_eq!(samples[0].1.cpu_percent, None, "{:?}", samples[0].1);
    assert!(samples.iter().any(|(_, h)| h.cpu_percent.is_some()));
    let mut gaps = Vec::new();
    for pair in samples.windows(2) {
        let ((a, ha), (b, hb)) = (pair[0], pair[1]);
        if ha.node == hb.node {
            gaps.push((b.ts - a.ts).num_milliseconds());
        }
    }
    assert!(!gaps.is_empty(), "two samples of one node");
    for g in &gaps {
        assert!(
            (1_000..=5_000).contains(g),
            "samples {g} ms apart: {gaps:?}"
        );
    }

    // One TCP connection carried every sampling session: the feed reports it, and sshd
    // logged exactly one public-key login for its client port. (Each node followed opens
    // one session on that connection; ControlMaster shares it.)
    let conns: Vec<String> = evs
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::SourceConnected { feed, detail } if feed.name().starts_with("host ") => {
                Some(detail.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        conns.len(),
        acc.len(),
        "one connect per node followed: {conns:?}"
    );
    let port_of = |d: &str| {
        d.split("(connection ")
            .nth(1)
            .and_then(|c| c.split_whitespace().nth(1))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("no connection in {d:?}"))
    };
    let client_port = port_of(&conns[0]);
    assert!(conns.iter().all(|c| port_of(c) == client_port), "{conns:?}");
    let needle = format!("port {client_port} ");
    let logins = log_lines(&sshd, from, &["Accepted publickey for root", &needle]);
    assert_eq!(logins.len(), 1, "one login for the whole run: {logins:?}");
    let sessions = log_lines(&sshd, from, &["Starting session", &needle]);
    assert_eq!(
        sessions.len(),
        acc.len(),
        "one session per node followed, not per sample: {sessions:?}"
    );
}

#[ignore = "needs the OpenSSH client (ssh)"]
#[test]
fn a_closed_port_is_a_recorded_host_feed_error_and_the_trial_completes() {
    // Needs only the ssh client, not the sshd setup.
    crate::peers::ssh_client();
    let tmp = tempfile::tempdir().expect("tmp");
    let xdg = runtime_dir();
    let rec = tmp.path().join("closed.jsonl");
    // Port 1 on loopback: nothing listens there (checked, so the test means what it says).
    assert!(std::net::TcpStream::connect(("127.0.0.1", 1)).is_err());
    let out = run_lab(
        &["--node-access", "ssh://root@127.0.0.1:1"],
        &rec,
        xdg.path(),
    );
    trial_ok(&out);
    let evs = events(&rec);
    let errors = host_errors(&evs);
    assert!(!errors.is_empty(), "a host feed error");
    for (feed, message) in &errors {
        assert!(feed.starts_with("host lab-node-"), "{feed}");
        assert!(
            message.contains("127.0.0.1:1") && message.to_lowercase().contains("refused"),
            "{message}"
        );
        assert!(message.contains("retrying"), "{message}");
    }
    assert!(node_samples(&evs).is_empty());
    assert!(
        accesses(&evs)
            .iter()
            .all(|a| a.target == "ssh root@127.0.0.1:1")
    );
}

#[ignore = "needs the test sshd on 127.0.0.1 (bash .ci/sshd-setup.sh)"]
#[test]
fn a_refused_key_is_a_recorded_host_feed_error_and_the_trial_completes() {
    let sshd = sshd();
    let tmp = tempfile::tempdir().expect("tmp");
    let xdg = runtime_dir();
    let rec = tmp.path().join("wrongkey.jsonl");
    let via = format!("ssh://root@127.0.0.1:{}", sshd.port);
    let key = sshd.dir.join("id_wrong").display().to_string();
    let kh = sshd.dir.join("known_hosts").display().to_string();
    let out = run_lab(
        &[
            "--node-access",
            &via,
            "--node-identity",
            &key,
            "--node-known-hosts",
            &kh,
        ],
        &rec,
        xdg.path(),
    );
    close_masters(xdg.path());
    trial_ok(&out);
    let evs = events(&rec);
    let errors = host_errors(&evs);
    assert!(!errors.is_empty(), "a host feed error");
    assert!(
        errors
            .iter()
            .all(|(_, m)| m.to_lowercase().contains("key") && m.contains("refused")),
        "{errors:?}"
    );
    assert!(node_samples(&evs).is_empty());
}

/// `--node-access debug-pod`: the node is sampled inside a privileged pod created through
/// the API (one long-lived exec of the sampling loop), reading the node's own
/// `/proc/meminfo`, so its page cache is exact (not the Summary API's ≈ figure).
#[test]
fn a_debug_pod_access_samples_the_node_inside_the_pod() {
    let tmp = tempfile::tempdir().expect("tmp");
    let xdg = runtime_dir();
    let rec = tmp.path().join("debug-pod.jsonl");
    let out = run_lab(&["--node-access", "debug-pod"], &rec, xdg.path());
    trial_ok(&out);
    let evs = events(&rec);
    assert!(host_errors(&evs).is_empty(), "{:?}", host_errors(&evs));
    let acc = accesses(&evs);
    assert!(!acc.is_empty());
    for a in &acc {
        assert!(a.target.starts_with("debug pod on lab-node-"), "{a:?}");
        assert_eq!(a.origin, "--node-access");
        assert!(a.sampling && a.sampled_via.is_none(), "{a:?}");
    }
    let samples = node_samples(&evs);
    assert!(samples.len() >= 2, "{} samples", samples.len());
    for (_, h) in &samples {
        assert!(!h.cache_approx, "read from the node's /proc/meminfo: {h:?}");
        assert!(h.cached.is_some_and(|c| c > 0), "{h:?}");
        assert!(h.mem_available.is_some_and(|a| a < h.mem_total), "{h:?}");
    }
}

#[test]
fn without_access_the_lab_node_is_sampled_through_a_debug_pod() {
    let tmp = tempfile::tempdir().expect("tmp");
    let xdg = runtime_dir();
    let rec = tmp.path().join("summary.jsonl");
    // The user's own config names an ssh access for every node: the lab never uses it
    // unless --config is given (its nodes are fake).
    let home = tempfile::tempdir().expect("config home");
    std::fs::create_dir_all(home.path().join("readygap")).expect("mkdir");
    std::fs::write(
        home.path().join("readygap/config.toml"),
        "[nodes.\"*\"]\nvia = \"ssh://root@127.0.0.1:1\"\n",
    )
    .expect("config");
    let started = Instant::now();
    let out = run_lab_env(&[], &rec, xdg.path(), &[("XDG_CONFIG_HOME", home.path())]);
    trial_ok(&out);
    let evs = events(&rec);
    let acc = accesses(&evs);
    assert!(!acc.is_empty());
    for a in &acc {
        // The access a user's cluster offers too: a privileged debug pod on the node.
        assert!(a.target.contains("debug pod"), "{a:?}");
        assert_eq!(a.origin, readygap::args::LAB_NODES);
        assert!(a.sampling);
    }
    let samples = node_samples(&evs);
    assert!(
        samples.len() >= 2,
        "{} samples in {:?}",
        samples.len(),
        started.elapsed()
    );
    for (_, h) in &samples {
        // Read from the lab node's /proc/meminfo (its page cache model starts warm above
        // the post-drop floor, 738 944 kB), not estimated.
        assert!(!h.cache_approx, "{h:?}");
        assert!(h.cached.is_some_and(|c| c >= 738_944 * 1024), "{h:?}");
        assert!(h.mem_available.is_some_and(|a| a < h.mem_total), "{h:?}");
    }
    assert!(host_errors(&evs).is_empty(), "{:?}", host_errors(&evs));
}

#[ignore = "needs the test sshd on 127.0.0.1 (bash .ci/sshd-setup.sh)"]
#[test]
fn in_the_lab_an_explicit_config_file_gives_the_node_access() {
    let sshd = sshd();
    let tmp = tempfile::tempdir().expect("tmp");
    let xdg = runtime_dir();
    let rec = tmp.path().join("config.jsonl");
    let config = tmp.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[nodes.\"lab-node-*\"]\nvia = \"ssh://root@127.0.0.1:{}\"\nidentity = \"{}\"\nknown_hosts = \"{}\"\n",
            sshd.port,
            sshd.dir.join("id_ed25519").display(),
            sshd.dir.join("known_hosts").display()
        ),
    )
    .expect("config");
    let config_arg = config.display().to_string();
    let out = run_lab(&["--config", &config_arg], &rec, xdg.path());
    close_masters(xdg.path());
    trial_ok(&out);
    let evs = events(&rec);
    let acc = accesses(&evs);
    assert!(!acc.is_empty());
    for a in &acc {
        assert_eq!(a.origin, "configured by [nodes.\"lab-node-*\"]");
        assert_eq!(a.target, format!("ssh root@127.0.0.1:{}", sshd.port));
        assert!(a.sampling);
    }
    let samples = node_samples(&evs);
    assert!(!samples.is_empty());
    assert!(samples.iter().all(|(_, h)| h.mem_total == mem_total()));
    assert!(host_errors(&evs).is_empty(), "{:?}", host_errors(&evs));
}

/// The feed itself against an in-process lab (real HTTP, the real kube client): it follows
/// the selection from one node to the other, announcing each, and the first node's sampler
/// stops when the second starts.
#[test]
fn the_feed_follows_the_selected_node_and_stops_the_old_sampler() {
    let _one = ONE_LAB.lock().unwrap_or_else(|e| e.into_inner());
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(follow_two_nodes());
}

async fn follow_two_nodes() {
    use readygap_live::node_host::{AccessPolicy, NodeSelection};
    use std::time::Duration;
    let p = readygap_lab::profile::Profile::named("local-1b").expect("profile");
    let lab = readygap_lab::serve::serve(readygap_lab::serve::LabOptions::new(p))
        .await
        .expect("lab");
    lab.wait_ready(Duration::from_secs(120))
        .await
        .expect("ready");
    let kc = kube::config::Kubeconfig::read_from(&lab.kubeconfig).expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    let client = kube::Client::try_from(cfg).expect("client");

    let selection = NodeSelection::new();
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let cancel = tokio_util::sync::CancellationToken::new();
    // No `[nodes]` table matches the lab's nodes: the kubelet Summary API samples them.
    let feed = tokio::spawn(readygap_live::node_host::run(
        AccessPolicy::Config {
            section: readygap_live::node::NodesSection::default(),
            lab: true,
        },
        client,
        "llm-recovery-lab".into(),
        selection.subscribe(),
        tx,
        cancel.clone(),
    ));
    // Reads events until `n` samples of `node` arrived (bounded); returns every event.
    async fn until_samples(
        rx: &mut tokio::sync::mpsc::Receiver<Event>,
        node: &str,
        n: usize,
    ) -> Vec<Event> {
        let mut seen = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        let count = |seen: &[Event]| {
            seen.iter()
                .filter(|e| matches!(&e.kind, EventKind::HostSample(h) if h.node.as_deref() == Some(node)))
                .count()
        };
        while count(&seen) < n {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(e)) => seen.push(e),
                other => panic!("waiting for {n} samples of {node}: {other:?} after {seen:?}"),
            }
        }
        seen
    }

    selection.set(Some("lab-node-1".into()));
    let first = until_samples(&mut rx, "lab-node-1", 2).await;
    assert!(
        matches!(&first[0].kind, EventKind::NodeAccess(a) if a.node == "lab-node-1"),
        "{:?}",
        first[0]
    );
    selection.set(Some("lab-node-2".into()));
    let second = until_samples(&mut rx, "lab-node-2", 2).await;
    let switch = second
        .iter()
        .position(|e| matches!(&e.kind, EventKind::NodeAccess(a) if a.node == "lab-node-2"))
        .expect("the second node is announced");
    // After the announcement of lab-node-2, nothing more of lab-node-1.
    assert!(
        second[switch..].iter().all(|e| match &e.kind {
            EventKind::HostSample(h) => h.node.as_deref() == Some("lab-node-2"),
            _ => true,
        }),
        "{second:?}"
    );
    for e in first.iter().chain(&second) {
        if let EventKind::HostSample(h) = &e.kind {
            assert_eq!(h.mem_total, 32 << 30);
            assert!(h.cache_approx);
        }
    }
    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(20), feed)
        .await
        .expect("the feed stops on cancel")
        .expect("join");
    lab.shutdown().await;
}
