//! The dashboard on the real cluster, in a real terminal (tmux): started while its API server
//! cannot be reached, it keeps trying and starts its sources once the real kube-apiserver
//! answers (issue 31, defect 2: it used to stay empty for good).
//!
//! "Down" is the kubeconfig's address refusing connections: a loopback port nothing listens
//! on, later a plain TCP relay to the real API server (whose certificate names 127.0.0.1), so
//! readygap meets a refused connection and then the real server's TLS and answers, while the
//! cluster itself keeps running for the tests around this one.

use crate::support::{NS, cluster, repo, wait_until};
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// A tmux server of this test's own (its own socket), killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("running tmux (apt-get install -y tmux)")
    }

    fn capture(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "rg"]).stdout).into_owned()
    }

    /// Poll the pane until `cond` holds, for at most `secs`.
    fn wait(&self, what: &str, secs: u64, cond: impl Fn(&str) -> bool) -> String {
        let mut screen = String::new();
        wait_until(what, Duration::from_secs(secs), || {
            screen = self.capture();
            cond(&screen)
        });
        screen
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

/// Relay every connection accepted on `listener` to `to`, both ways, until the process ends.
fn relay(listener: TcpListener, to: String) {
    std::thread::spawn(move || {
        for inbound in listener.incoming().flatten() {
            let Ok(outbound) = TcpStream::connect(&to) else {
                continue;
            };
            for (mut from, mut into) in [
                (inbound.try_clone().unwrap(), outbound.try_clone().unwrap()),
                (outbound, inbound),
            ] {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut into);
                    let _ = into.shutdown(std::net::Shutdown::Write);
                });
            }
        }
    });
}

/// This kubeconfig with its server's address replaced by `server`.
fn kubeconfig_at(c: &crate::support::Cluster, server: &str, out: &Path) -> String {
    let real = c.k(&[
        "config",
        "view",
        "--raw",
        "-o",
        "jsonpath={.clusters[0].cluster.server}",
    ]);
    let mut text = String::new();
    std::fs::File::open(&c.kubeconfig)
        .and_then(|mut f| f.read_to_string(&mut text))
        .expect("reading the kubeconfig");
    assert!(text.contains(&real), "{real} in the kubeconfig");
    std::fs::write(out, text.replace(&real, server)).expect("writing the kubeconfig");
    real.trim_start_matches("https://").to_owned()
}

#[ignore = "needs the real cluster: scripts/cluster.sh up"]
#[test]
fn a_dashboard_started_while_the_api_server_is_unreachable_connects_when_it_answers() {
    let c = cluster();
    c.deploy(&repo().join("manifests/overlays/smollm2"));
    let pod = c.pod();
    let dir = tempfile::tempdir().unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let kubeconfig = dir.path().join("kubeconfig");
    let real = kubeconfig_at(&c, &format!("https://127.0.0.1:{port}"), &kubeconfig);

    let tmux = Tmux {
        socket: format!("readygap-real-connect-{}", std::process::id()),
    };
    let bin = env!("CARGO_BIN_EXE_readygap");
    let script = format!(
        "'{bin}' --kubeconfig '{}' -n {NS} --read-only; echo EXITED $?; sleep 60",
        kubeconfig.display()
    );
    let out = tmux.cmd(&[
        "new-session",
        "-d",
        "-s",
        "rg",
        "-x",
        "160",
        "-y",
        "48",
        "-e",
        &format!("HOME={}", c.home.path().display()),
        "-e",
        "TERM=xterm-256color",
        "sh",
        "-c",
        &script,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let screen = tmux.wait("two failed tries and this machine's memory", 60, |s| {
        s.contains("NOT CONNECTED: try 2 failed") && s.contains("avail")
    });
    eprintln!("while unreachable:\n{screen}");
    // The reason names the address tried; the footer says not connected.
    assert!(screen.contains(&format!("127.0.0.1:{port}")), "{screen}");
    assert!(screen.contains("not connected"), "{screen}");
    // Meanwhile the real API server is up: only readygap's way to it was closed.
    c.k(&["get", "--raw", "/readyz"]);

    let listener = TcpListener::bind(("127.0.0.1", port)).expect("binding the relay");
    relay(listener, real);
    let screen = tmux.wait("the real pod on screen, connected", 60, |s| {
        s.contains(&pod[..pod.len().min(30)]) && !s.contains("NOT CONNECTED")
    });
    eprintln!("connected:\n{screen}");
    // Read-only said in the header, no trial key offered; the failure is over in the footer.
    assert!(screen.contains("read-only: observing only"), "{screen}");
    assert!(!screen.contains("t: trial"), "{screen}");
    assert!(
        screen.contains("connected: the API server answered at try"),
        "{screen}"
    );
    tmux.wait("the EndpointSlice", 60, |s| {
        !s.contains("no EndpointSlice seen yet")
    });
    assert!(tmux.cmd(&["send-keys", "-t", "rg", "q"]).status.success());
    let screen = tmux.wait("the process to exit", 30, |s| s.contains("EXITED"));
    assert!(screen.contains("EXITED 0"), "{screen}");
}
