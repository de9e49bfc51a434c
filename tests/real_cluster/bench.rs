//! `readygap lab bench --cluster real`: readygap's trials and the study's kubectl-and-curl
//! loop's on the real cluster, each judged by the real components' own records (the API
//! server's audit log for Ready and the endpoints, the container log for T2/T4).
//!
//! Checked: every trial of each method is paired with its truth (T1, T2, T4 of each new pod
//! found in the records), readygap's watch missed no endpoint transition the audit log
//! holds, and readygap measures closer to the truth than the loop (the direction, not a
//! figure); the figures are printed.

use crate::external::audit_log;
use crate::support::{MODEL, NS, cluster, repo};
use std::process::Command;

#[ignore = "needs the real cluster: scripts/cluster.sh up"]
#[test]
fn the_bench_judges_readygap_and_the_studys_loop_by_the_clusters_own_records() {
    let c = cluster();
    c.deploy(&repo().join("manifests/overlays/smollm2"));
    let keep = c.home.path().join("bench");
    let out = Command::new(env!("CARGO_BIN_EXE_readygap"))
        .args(["lab", "bench", "--cluster", "real", "--kubeconfig"])
        .arg(&c.kubeconfig)
        .args(["-n", NS, "--model", MODEL, "--audit-log"])
        .arg(audit_log())
        .args(["--trials", "2", "--cooldown", "1s", "--format", "json"])
        .arg("--keep")
        .arg(&keep)
        .env("READYGAP_KUBECTL", &c.kubectl)
        .env("HOME", c.home.path())
        .env_remove("KUBECONFIG")
        .output()
        .expect("readygap lab bench --cluster real");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "lab bench --cluster real failed: {}\n{stdout}\nreadygap-run.log:\n{}\nbaseline.log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(keep.join("readygap-run.log")).unwrap_or_default(),
        std::fs::read_to_string(keep.join("baseline.log")).unwrap_or_default(),
    );
    eprintln!("{stdout}");
    let j: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(j["trials"], 2);
    assert_eq!(j["settings"]["cluster"], "real", "{}", j["settings"]);

    // Each trial's marks paired with the records of its new pod, for both methods.
    for what in ["t1", "t2", "t4"] {
        let e = &j["error_ms"][what];
        for m in ["readygap", "baseline"] {
            assert_eq!(
                e[m]["n"], 2,
                "{what}.{m}: not every trial has its truth: {e}"
            );
        }
        let (r, b) = (
            e["readygap"]["median"].as_f64().expect("readygap's median"),
            e["baseline"]["median"].as_f64().expect("the loop's median"),
        );
        assert!(r < b, "{what}: readygap {r} ms vs the loop's {b} ms");
    }
    // The endpoint transitions of two replacements (each: the old endpoint terminating and
    // removed, the new one added and ready), every one seen by readygap's watch.
    let missed = &j["missed_transitions"]["readygap"];
    assert!(missed["of"].as_u64().unwrap_or(0) >= 8, "{missed}");
    assert_eq!(missed["missed"], 0, "a watch sees every write: {missed}");
    for key in ["cpu_s_per_trial", "rss_mib"] {
        for m in ["readygap", "baseline"] {
            assert!(
                j[key][m].as_f64().is_some_and(|v| v > 0.0),
                "{key}.{m}: {}",
                j[key]
            );
        }
    }
    // The pods' logs the truth came from: two new pods per method, each listening.
    let logs = std::fs::read_dir(keep.join("logs")).expect("the followed logs");
    let listening = logs
        .filter_map(Result::ok)
        .filter(|e| {
            std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains("msg=\"Listening on"))
        })
        .count();
    assert!(
        listening >= 4,
        "{listening} pods' logs hold Ollama's Listening line"
    );
}
