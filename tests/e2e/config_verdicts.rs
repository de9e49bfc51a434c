//! The verdict thresholds a user sets: `[verdicts]` of the config file and the `--verdict-*`
//! flags (a flag wins over the file, the file over the default), bad values refused with
//! the file and key named, and the thresholds in force in the recorded `session` event.

use clap::Parser;
use readygap::args::VerdictArgs;
use readygap_core::verdict::VerdictThresholds;
use std::path::Path;
use std::time::Duration;

#[test]
fn the_file_sets_thresholds_and_a_flag_wins() {
    let text = r#"
[verdicts]
rollout_stall_after = "30s"
shallow_min = "2s"
runtime_memory = "256Mi"
"#;
    let file = readygap::config::parse(text, "cfg.toml").unwrap();
    let path = Path::new("cfg.toml");
    let t = VerdictArgs::default()
        .thresholds(&file, Some(path))
        .unwrap();
    assert_eq!(
        t,
        VerdictThresholds {
            rollout_stall_after_s: 30.0,
            shallow_min_s: 2.0,
            runtime_only_bytes: 256 << 20,
            ..VerdictThresholds::default()
        }
    );
    let flags = VerdictArgs {
        verdict_rollout_stall_after: Some(Duration::from_secs(45)),
        verdict_kill_window: Some(Duration::from_secs(600)),
        ..VerdictArgs::default()
    };
    let t = flags.thresholds(&file, Some(path)).unwrap();
    assert_eq!(t.rollout_stall_after_s, 45.0, "the flag wins");
    assert_eq!(t.kill_window_s, 600.0);
    assert_eq!(t.shallow_min_s, 2.0, "the file's where no flag");
    // No file, no flags: the documented defaults.
    let none = readygap::config::ConfigFile::default();
    let t = VerdictArgs::default().thresholds(&none, None).unwrap();
    assert_eq!(t, VerdictThresholds::default());
    assert_eq!(t.rollout_stall_after_s, 15.0);
    assert_eq!(t.runtime_only_bytes, 128 << 20);
}

#[test]
fn bad_thresholds_name_the_file_and_the_key() {
    let bad = readygap::config::parse("[verdicts]\nkill_window = \"soon\"\n", "bad.toml").unwrap();
    let err = VerdictArgs::default()
        .thresholds(&bad, Some(Path::new("bad.toml")))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("bad.toml") && err.contains("[verdicts] kill_window"),
        "{err}"
    );
    let bad = readygap::config::parse("[verdicts]\nruntime_memory = \"lots\"\n", "m.toml").unwrap();
    let err = VerdictArgs::default()
        .thresholds(&bad, Some(Path::new("m.toml")))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("m.toml") && err.contains("runtime_memory"),
        "{err}"
    );
    let err = readygap::config::parse("[verdicts]\nstall = \"3s\"\n", "u.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("u.toml") && err.contains("stall"), "{err}");
}

#[test]
fn the_flags_parse_on_run() {
    let cli = readygap::cli::Cli::try_parse_from([
        "readygap",
        "run",
        "--verdict-rollout-stall-after",
        "40s",
        "--verdict-runtime-memory",
        "64Mi",
    ])
    .unwrap();
    let Some(readygap::cli::Command::Run(cmd)) = cli.command else {
        panic!("run");
    };
    let v = &cmd.run.session.verdicts;
    assert_eq!(v.verdict_rollout_stall_after, Some(Duration::from_secs(40)));
    assert_eq!(v.verdict_runtime_memory, Some(64 << 20));
    assert!(
        readygap::cli::Cli::try_parse_from(["readygap", "run", "--verdict-kill-window", "x"])
            .is_err()
    );
}

/// `[gpu] dcgm` of the config file names the DCGM exporter; `--dcgm` wins; a value that is
/// neither a URL nor NAMESPACE/SERVICE:PORT is refused naming the file and the key.
#[test]
fn the_dcgm_exporter_comes_from_the_flag_else_the_config_file() {
    use readygap_live::sources::gpu::Dcgm;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        "[gpu]\ndcgm = \"gpu-operator/nvidia-dcgm-exporter:9400\"\n",
    )
    .unwrap();
    let session = |extra: &[&str]| {
        let mut v = vec!["readygap", "run"];
        v.extend_from_slice(extra);
        let cli = readygap::cli::Cli::try_parse_from(v).unwrap();
        let Some(readygap::cli::Command::Run(cmd)) = cli.command else {
            panic!("run");
        };
        let mut s = cmd.run.session;
        s.node_config = Some(cfg.clone());
        s
    };
    assert_eq!(
        session(&[]).dcgm_source().unwrap(),
        Some(Dcgm::Service {
            namespace: "gpu-operator".into(),
            name: "nvidia-dcgm-exporter".into(),
            port: 9400
        })
    );
    assert_eq!(
        session(&["--dcgm", "http://127.0.0.1:9400/metrics"])
            .dcgm_source()
            .unwrap(),
        Some(Dcgm::Url("http://127.0.0.1:9400/metrics".into()))
    );
    std::fs::write(&cfg, "[gpu]\ndcgm = \"nvidia-dcgm-exporter\"\n").unwrap();
    let err = session(&[]).dcgm_source().unwrap_err().to_string();
    assert!(
        err.contains("config.toml") && err.contains("[gpu] dcgm"),
        "{err}"
    );
    assert!(readygap::cli::Cli::try_parse_from(["readygap", "run", "--dcgm", "x"]).is_err());
}
