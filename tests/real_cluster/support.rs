//! The real cluster the tests share: its kubeconfig and kubectl, the deployment under test,
//! and readygap and kubectl run against it as a user runs them.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The namespace and model of the shipped manifests' smollm2 overlay.
pub const NS: &str = "llm-recovery-lab";
pub const MODEL: &str = "smollm2:135m";
/// What every test here needs; the message a missing cluster fails with.
pub const NEEDS: &str = "needs the real cluster: scripts/cluster.sh up, then READYGAP_REAL_KUBECONFIG=<the path it prints>";

/// One test at a time: they share the cluster, its namespace and its one node's two cores.
static ONE: Mutex<()> = Mutex::new(());

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where `scripts/cluster.sh` keeps its build and state (`READYGAP_CLUSTER`, default
/// `~/.cache/readygap/cluster`).
pub fn cluster_dir() -> PathBuf {
    std::env::var_os("READYGAP_CLUSTER")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/readygap/cluster")
        })
}

pub struct Cluster {
    _one: MutexGuard<'static, ()>,
    pub kubeconfig: PathBuf,
    pub kubectl: PathBuf,
    /// HOME for kubectl and readygap: no user config is read.
    pub home: tempfile::TempDir,
}

/// The cluster, for this test alone; fails with the reason when it is not up.
pub fn cluster() -> Cluster {
    let one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let kubeconfig = std::env::var_os("READYGAP_REAL_KUBECONFIG")
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("{NEEDS}: READYGAP_REAL_KUBECONFIG is not set"));
    assert!(
        kubeconfig.is_file(),
        "{NEEDS}: {} is not a file",
        kubeconfig.display()
    );
    // The cluster's own kubectl (the same v1.34 as the server), else the one the tests use.
    let kubectl = [
        Some(cluster_dir().join("bin/kubectl")),
        std::env::var_os("READYGAP_KUBECTL").map(PathBuf::from),
    ]
    .into_iter()
    .flatten()
    .find(|p| p.is_file())
    .unwrap_or_else(|| PathBuf::from("kubectl"));
    let c = Cluster {
        _one: one,
        kubeconfig,
        kubectl,
        home: tempfile::tempdir().expect("tempdir"),
    };
    let ready = c.try_k(&["get", "--raw", "/readyz"]);
    assert!(
        ready.status.success(),
        "{NEEDS}: the API server does not answer /readyz: {}",
        String::from_utf8_lossy(&ready.stderr)
    );
    c
}

impl Cluster {
    /// kubectl with this cluster's kubeconfig and a private cache and HOME.
    pub fn kubectl(&self) -> Command {
        self.kubectl_at(&self.kubeconfig)
    }

    /// kubectl for the cluster of `kubeconfig` (another user, or the lab).
    pub fn kubectl_at(&self, kubeconfig: &Path) -> Command {
        let mut c = Command::new(&self.kubectl);
        c.arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--cache-dir")
            .arg(self.home.path().join("kube-cache"))
            .env("HOME", self.home.path())
            .env_remove("KUBECONFIG");
        c
    }

    pub fn try_k(&self, args: &[&str]) -> Output {
        self.kubectl().args(args).output().expect("running kubectl")
    }

    /// Deletes the test namespace and waits until it is gone; the models PersistentVolume
    /// its claim released (reclaim policy Retain) is made bindable again, as
    /// `scripts/cluster.sh pv` does, so the next apply's claim binds to it.
    pub fn delete_namespace(&self) {
        let _ = self.try_k(&["delete", "namespace", NS, "--wait=true", "--timeout=180s"]);
        let phase = self.k(&[
            "get",
            "pv",
            "ollama-models",
            "-o",
            "jsonpath={.status.phase}",
        ]);
        if phase == "Released" {
            self.k(&[
                "patch",
                "pv",
                "ollama-models",
                "--type",
                "json",
                "-p",
                r#"[{"op":"remove","path":"/spec/claimRef/uid"},{"op":"remove","path":"/spec/claimRef/resourceVersion"}]"#,
            ]);
        }
    }

    /// The API server's URL in the kubeconfig (`https://HOST:PORT`).
    pub fn server(&self) -> String {
        self.k(&[
            "config",
            "view",
            "--raw",
            "-o",
            "jsonpath={.clusters[0].cluster.server}",
        ])
    }

    /// kubectl ARGS, which must succeed; its standard output.
    pub fn k(&self, args: &[&str]) -> String {
        let out = self.try_k(args);
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// kubectl in the test namespace.
    pub fn kn(&self, args: &[&str]) -> String {
        let mut all = vec!["-n", NS];
        all.extend_from_slice(args);
        self.k(&all)
    }

    /// `kubectl apply -k DIR`, then wait until the rollout is done and only its one pod is
    /// left, Ready.
    pub fn deploy(&self, kustomization: &Path) {
        self.k(&["apply", "-k", &kustomization.to_string_lossy()]);
        self.settle();
    }

    /// Wait until `deployment/ollama` has rolled out and exactly one of its pods exists,
    /// Ready (terminating pods gone), so that the next trial starts from one pod.
    pub fn settle(&self) {
        self.kn(&["rollout", "status", "deployment/ollama", "--timeout=300s"]);
        wait_until(
            "one Ready ollama pod and no other",
            Duration::from_secs(180),
            || {
                let out = self.kn(&[
                "get",
                "pods",
                "-l",
                "app=ollama",
                "-o",
                "jsonpath={range .items[*]}{.metadata.name} {.metadata.deletionTimestamp} {.status.containerStatuses[0].ready}{\"\\n\"}{end}",
            ]);
                let lines: Vec<&str> = out.lines().filter(|l| !l.trim().is_empty()).collect();
                lines.len() == 1
                    && lines[0].split_whitespace().count() == 2
                    && lines[0].ends_with("true")
            },
        );
    }

    /// The one Ready pod of `deployment/ollama`.
    pub fn pod(&self) -> String {
        self.kn(&[
            "get",
            "pods",
            "-l",
            "app=ollama",
            "-o",
            "jsonpath={.items[0].metadata.name}",
        ])
    }

    /// `readygap run -n NS --deployment ollama --record REC ARGS` against this cluster, as a
    /// user runs it; its stderr (the progress lines) printed.
    pub fn run(&self, rec: &Path, args: &[&str]) -> Output {
        self.run_at(&self.kubeconfig, rec, args)
    }

    /// [`Cluster::run`] against the cluster of `kubeconfig` (another user, or the lab).
    pub fn run_at(&self, kubeconfig: &Path, rec: &Path, args: &[&str]) -> Output {
        let rec = rec.to_string_lossy();
        let mut all = vec!["run", "-n", NS, "--deployment", "ollama", "--record", &rec];
        all.extend_from_slice(args);
        let out = self
            .readygap_at(kubeconfig, &all)
            .output()
            .expect("running readygap run");
        eprintln!(
            "readygap {all:?} ({}): {}\n--- stderr\n{}",
            kubeconfig.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// readygap ARGS against the cluster of `kubeconfig` (another user, or the lab): the
    /// binary under test, or `READYGAP_TEST_BIN` when set (the scale test's figures of a
    /// release build: `READYGAP_TEST_BIN=target/release/readygap`).
    pub fn readygap_at(&self, kubeconfig: &Path, args: &[&str]) -> Command {
        let bin = std::env::var_os("READYGAP_TEST_BIN")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_readygap").into());
        let mut c = Command::new(bin);
        c.args(args)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .env("HOME", self.home.path())
            .env_remove("KUBECONFIG");
        c
    }
}

/// readygap's own trials in the recording `rec` (not those it observed someone else start).
pub fn own_trials(rec: &Path) -> Vec<readygap_core::timeline::Trial> {
    readygap_core::report::load_trials(rec)
        .expect("the recording reads")
        .trials
        .into_iter()
        .filter(|t| !t.external)
        .collect()
}

/// The events of the recording `rec`.
pub fn recorded(rec: &Path) -> Vec<readygap_core::event::Event> {
    readygap_core::record::jsonl::read(rec)
        .expect("the recording reads")
        .events
}

pub fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The model sizes `ollama ps` prints (`134 MB`, `1.2 GB`, decimal units as Ollama's
/// `format.HumanBytes`), as bytes, by model name.
pub fn ollama_ps_sizes(table: &str) -> Vec<(String, f64, f64)> {
    let mut lines = table.lines();
    let header = lines.next().unwrap_or_default();
    let col = header.find("SIZE").expect("a SIZE column");
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let name = l.split_whitespace().next().unwrap_or_default().to_string();
            let mut rest = l[col..].split_whitespace();
            let value: f64 = rest
                .next()
                .and_then(|v| v.parse().ok())
                .expect("size value");
            let unit = match rest.next().unwrap_or_default() {
                "B" => 1.0,
                "KB" => 1e3,
                "MB" => 1e6,
                "GB" => 1e9,
                u => panic!("unit {u:?} in {l:?}"),
            };
            (name, value * unit, unit)
        })
        .collect()
}

/// A child process that is killed and reaped when the test ends, passed or failed (a failed
/// test must not leave a lab or a watcher running).
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// `to` as a path relative to the directory `from` (both absolute).
pub fn relative(from: &std::path::Path, to: &std::path::Path) -> std::path::PathBuf {
    use std::path::Component;
    let (from, to) = (
        std::fs::canonicalize(from).expect("from"),
        std::fs::canonicalize(to).expect("to"),
    );
    let (f, t): (Vec<Component>, Vec<Component>) =
        (from.components().collect(), to.components().collect());
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut out = std::path::PathBuf::new();
    for _ in common..f.len() {
        out.push("..");
    }
    for c in &t[common..] {
        out.push(c);
    }
    out
}

/// A readygap screen in a detached tmux session of this test's own server (its own socket),
/// killed when dropped.
pub struct Tmux {
    socket: String,
}

impl Tmux {
    /// Session `rg`, WIDTH×HEIGHT, running `script` under `sh` with HOME=`home`.
    pub fn start(name: &str, home: &Path, (width, height): (u16, u16), script: &str) -> Tmux {
        let t = Tmux {
            socket: format!("readygap-real-{name}-{}", std::process::id()),
        };
        let (w, h) = (width.to_string(), height.to_string());
        let home = format!("HOME={}", home.display());
        let out = t.cmd(&[
            "new-session",
            "-d",
            "-s",
            "rg",
            "-x",
            &w,
            "-y",
            &h,
            "-e",
            &home,
            "-e",
            "TERM=xterm-256color",
            "sh",
            "-c",
            script,
        ]);
        assert!(
            out.status.success(),
            "tmux new-session: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        t
    }

    pub fn cmd(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("running tmux (apt-get install -y tmux)")
    }

    /// The pane's text now.
    pub fn screen(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "rg"]).stdout).into_owned()
    }

    /// Resize the window to WIDTH×HEIGHT (readygap redraws at the new size).
    pub fn resize(&self, (width, height): (u16, u16)) {
        let out = self.cmd(&[
            "resize-window",
            "-t",
            "rg",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
        ]);
        assert!(
            out.status.success(),
            "tmux resize-window: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Type `keys` (tmux key names) into the pane.
    pub fn keys(&self, keys: &str) {
        assert!(self.cmd(&["send-keys", "-t", "rg", keys]).status.success());
    }

    /// Poll the pane until `cond` holds, for at most `secs`; the screen that satisfied it.
    /// On a timeout the last screen is printed with the failure.
    pub fn wait(&self, what: &str, secs: u64, cond: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let screen = self.screen();
            if cond(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out after {secs} s waiting for {what}; the last screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

/// A test overlay `dir/name` over `manifests/overlays/smollm2` (kustomize takes the base as
/// a path relative to the kustomization), `rest` after its `resources` (patches, generators).
pub fn smollm2_overlay(dir: &Path, name: &str, rest: &str) -> PathBuf {
    let overlay = dir.join(name);
    std::fs::create_dir(&overlay).unwrap();
    let base = relative(&overlay, &repo().join("manifests/overlays/smollm2"));
    let head = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n";
    let text = format!("{head}  - {}\n{rest}", base.display());
    std::fs::write(overlay.join("kustomization.yaml"), text).unwrap();
    overlay
}

/// The shipped `overlays/http-readiness` patches (the study's shallow HTTP probe) over the
/// smollm2 overlay instead of llama3.2-3b, as `dir/overlay`.
pub fn http_readiness_overlay(dir: &Path) -> PathBuf {
    let shipped = std::fs::read_to_string(
        repo().join("manifests/overlays/http-readiness/kustomization.yaml"),
    )
    .expect("the http-readiness overlay");
    let patches = &shipped[shipped.find("patches:").expect("its patches")..];
    smollm2_overlay(dir, "overlay", &format!("{patches}\n"))
}

/// A TCP relay to the real API server (whose certificate names 127.0.0.1, so TLS passes
/// through), counting the bytes each way, until the process ends.
pub struct Relay {
    pub addr: String,
    /// Bytes from the API server to the client: what the client read.
    pub read: Arc<AtomicU64>,
    pub written: Arc<AtomicU64>,
}

fn copy_counting(mut from: TcpStream, mut into: TcpStream, n: Arc<AtomicU64>) {
    use std::io::{Read, Write};
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(k) => {
                n.fetch_add(k as u64, Ordering::Relaxed);
                if into.write_all(&buf[..k]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = into.shutdown(std::net::Shutdown::Write);
}

impl Relay {
    /// Relay every connection `listener` accepts to `to` (`HOST:PORT`).
    pub fn on(listener: TcpListener, to: String) -> Relay {
        let addr = listener
            .local_addr()
            .expect("the relay's address")
            .to_string();
        let (read, written) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (r, w) = (read.clone(), written.clone());
        std::thread::spawn(move || {
            for inbound in listener.incoming().flatten() {
                let Ok(outbound) = TcpStream::connect(&to) else {
                    continue;
                };
                let (i2, o2) = (inbound.try_clone().unwrap(), outbound.try_clone().unwrap());
                let (r, w) = (r.clone(), w.clone());
                std::thread::spawn(move || copy_counting(outbound, inbound, r));
                std::thread::spawn(move || copy_counting(i2, o2, w));
            }
        });
        Relay {
            addr,
            read,
            written,
        }
    }

    /// [`Relay::on`] a free loopback port.
    pub fn start(to: String) -> Relay {
        Relay::on(
            TcpListener::bind("127.0.0.1:0").expect("a loopback port"),
            to,
        )
    }

    pub fn read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }

    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }
}

/// This cluster's kubeconfig with its server's address replaced by `server`, written to `out`;
/// the real server's `HOST:PORT`.
pub fn kubeconfig_at(c: &Cluster, server: &str, out: &Path) -> String {
    let real = c.server();
    let text = std::fs::read_to_string(&c.kubeconfig).expect("reading the kubeconfig");
    assert!(text.contains(&real), "{real} in the kubeconfig");
    std::fs::write(out, text.replace(&real, server)).expect("writing the kubeconfig");
    real.trim_start_matches("https://").to_owned()
}
