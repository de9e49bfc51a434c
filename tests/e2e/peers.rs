//! The real peers some tests talk to: the test sshd of `.ci/sshd-setup.sh`, the OpenSSH
//! client, tmux, asciinema, kubectl, root with a writable `drop_caches`, sudo. A test that
//! needs one is `#[ignore = "needs …"]`, so `cargo test` lists it as ignored with the
//! reason; `.ci/run` installs the peers and runs these tests too (`--include-ignored`).
//! Asked for and absent, a peer is a panic that says how to install it, never a pass.

use std::path::PathBuf;
use std::process::Command;

/// The sshd started by `.ci/sshd-setup.sh` (its directory holds the keys and known_hosts).
pub struct Sshd {
    pub dir: PathBuf,
    pub port: u16,
}

fn missing(what: &str) -> ! {
    panic!("{what}: this peer test needs it (see .ci/run, which installs the test peers)");
}

/// The OpenSSH client.
pub fn ssh_client() {
    if Command::new("ssh").arg("-V").output().is_err() {
        missing("the OpenSSH client (ssh) is not installed");
    }
}

/// The test sshd on 127.0.0.1 (`READYGAP_SSH_DIR`, default /tmp/readygap-ssh).
pub fn sshd() -> Sshd {
    ssh_client();
    let dir = std::env::var_os("READYGAP_SSH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/readygap-ssh"));
    if !dir.join("ready").exists() {
        missing(&format!(
            "no sshd test setup in {} (run `bash .ci/sshd-setup.sh`)",
            dir.display()
        ));
    }
    let port = std::fs::read_to_string(dir.join("port"))
        .expect("port file")
        .trim()
        .parse()
        .expect("port number");
    // The setup may be from an earlier boot: check that sshd still listens.
    if std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        missing(&format!(
            "sshd on 127.0.0.1:{port} is not running (run `bash .ci/sshd-setup.sh`)"
        ));
    }
    Sshd { dir, port }
}

/// tmux.
pub fn tmux() {
    if !Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        missing("tmux is not installed (apt-get install -y tmux)");
    }
}

/// asciinema (PyPI `asciinema`).
pub fn asciinema() {
    if Command::new("asciinema").arg("--version").output().is_err() {
        missing("asciinema is not installed (python3 -m pip install asciinema)");
    }
}

/// The real kubectl (`READYGAP_KUBECTL`, else on PATH).
pub fn kubectl() -> PathBuf {
    readygap_lab::testkit::kubectl()
}

/// Whether this process may write /proc/sys/vm/drop_caches.
pub fn is_root() -> bool {
    std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/sys/vm/drop_caches")
        .is_ok()
}

/// Root with a writable /proc/sys/vm/drop_caches (CI runs as root).
pub fn root() {
    if !is_root() {
        missing("not root: /proc/sys/vm/drop_caches is not writable");
    }
}

/// Passwordless sudo.
pub fn sudo() {
    if !Command::new("sudo")
        .args(["-n", "true"])
        .status()
        .is_ok_and(|s| s.success())
    {
        missing("no passwordless sudo (installed by .ci/sshd-setup.sh)");
    }
}
