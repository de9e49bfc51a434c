//! The real `readygap run` binary: `--lab` in-process, JSON on stdout and a progress line
//! per trial on stderr; SIGINT (Ctrl-C) mid-trial ends it as `interrupted`, exits 130, and
//! still prints the statistics and writes the recording.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One lab process at a time: pod IPs on loopback are a per-process pool, so two labs in
/// two processes could pick the same address.
static ONE_LAB: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn readygap() -> Command {
    Command::new(env!("CARGO_BIN_EXE_readygap"))
}

#[test]
fn run_with_the_builtin_lab_prints_json() {
    let _one = ONE_LAB.lock().unwrap_or_else(|e| e.into_inner());
    let out = readygap()
        .args([
            "run",
            "--lab",
            "local-1b",
            "--lab-speed",
            "8",
            "--trials",
            "1",
            "--cooldown",
            "0s",
            "--format",
            "json",
            "--no-memory",
        ])
        .output()
        .expect("readygap runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert!(
        stderr.contains("trial 1/1:") && stderr.contains(" ok"),
        "{stderr}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let t = &v["files"][0]["trials"][0];
    assert_eq!(t["ok"], true, "{t}");
    assert!(
        t["metrics"]["functional_recovery"]
            .as_f64()
            .is_some_and(|s| s > 0.0)
    );
    assert!(t["marks"]["t4"].is_string());
}

#[test]
fn sigint_ends_the_trial_and_still_reports() {
    let _one = ONE_LAB.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("int.jsonl");
    let mut child = readygap()
        .args([
            "run",
            "--lab",
            "local-1b",
            "--lab-speed",
            "1",
            "--trials",
            "3",
            "--cooldown",
            "1s",
            "--no-memory",
            "--record",
        ])
        .arg(&rec)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("readygap starts");
    // Wait (bounded) until the first trial has started (T0 recorded), then interrupt.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(&rec).unwrap_or_default();
        if text.contains("\"action_started\"") {
            break;
        }
        assert!(Instant::now() < deadline, "no trial started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    if !kill.is_ok_and(|s| s.success()) {
        child.kill().ok();
        panic!("could not send SIGINT");
    }
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "ends promptly after SIGINT"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "stderr: {stderr}");
    assert!(stderr.contains("FAILED: interrupted"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("(1 trial, 1 failed)"), "{stdout}");
    let replayed = readygap_core::report::load_trials(&rec).unwrap();
    assert_eq!(replayed.trials.len(), 1);
    assert_eq!(replayed.trials[0].reason(), Some("interrupted"));
}

/// The dashboard (`readygap` without a subcommand) takes the session's options but not the
/// headless ones: `--trials` there is an error (it used to be accepted and ignored), while
/// `readygap run` lists and takes it.
#[test]
fn run_only_options_belong_to_run_not_to_the_dashboard() {
    let out = readygap()
        .args(["--trials", "3"])
        .output()
        .expect("readygap runs");
    assert_eq!(out.status.code(), Some(2), "a usage error");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unexpected argument '--trials'"),
        "{stderr}"
    );

    let help = |args: &[&str]| {
        let out = readygap().args(args).output().expect("readygap runs");
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let top = help(&["--help"]);
    let run = help(&["run", "--help"]);
    // An option is listed when a help line starts with it (`--lab [<LAB>]`, `--cold`).
    let lists = |help: &str, flag: &str| {
        help.lines()
            .any(|l| l.split_whitespace().next() == Some(flag))
    };
    for flag in [
        "--trials",
        "--cold",
        "--cooldown",
        "--csv",
        "--lab",
        "--lab-speed",
    ] {
        assert!(!lists(&top, flag), "`readygap --help` lists {flag}:\n{top}");
        assert!(lists(&run, flag), "`readygap run --help` lacks {flag}");
    }
    for flag in [
        "--node-access",
        "--record",
        "--model",
        "--read-only",
        "--config",
    ] {
        assert!(lists(&top, flag), "`readygap --help` lacks {flag}");
    }
}
