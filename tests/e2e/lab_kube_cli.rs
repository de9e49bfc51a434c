//! The real `readygap lab serve` binary: prints one JSON line with the API URL, kubeconfig
//! and namespace, serves the API there, and rejects bad arguments with a clear message.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn lab_serve_prints_one_json_line_and_serves() {
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kc");
    let gt = dir.path().join("gt.jsonl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_readygap"))
        .args([
            "lab",
            "serve",
            "--profile",
            "local-1b",
            "--speed",
            "20",
            "--seed",
            "5",
            "--port",
            "0",
        ])
        .arg("--kubeconfig-out")
        .arg(&kc)
        .arg("--ground-truth")
        .arg(&gt)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
    assert_eq!(v["namespace"], "llm-recovery-lab");
    assert_eq!(v["kubeconfig"], kc.to_str().unwrap());
    let url = v["api_url"].as_str().unwrap().to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let kubeconfig: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&kc).unwrap()).unwrap();
    assert_eq!(kubeconfig["clusters"][0]["cluster"]["server"], url.as_str());
    assert_eq!(kubeconfig["current-context"], "readygap-lab");

    let rt = tokio::runtime::Runtime::new().unwrap();
    let pods = rt.block_on(async {
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let v: serde_json::Value = http
                .get(format!("{url}/api/v1/namespaces/llm-recovery-lab/pods"))
                .bearer_auth(readygap_lab::kube::authz::ADMIN_TOKEN)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let ready = v["items"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["status"]["containerStatuses"][0]["ready"] == true);
            if ready {
                break v;
            }
            assert!(tokio::time::Instant::now() < deadline, "no ready pod: {v}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    assert_eq!(pods["items"].as_array().unwrap().len(), 1);
    // The ground-truth file got the pod's transitions.
    let text = std::fs::read_to_string(&gt).unwrap();
    assert!(text.lines().any(|l| l.contains("\"pod_ready\"")), "{text}");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn lab_serve_rejects_unknown_profiles_and_scenarios() {
    for (args, want) in [
        (vec!["--profile", "nope"], "unknown profile"),
        (vec!["--scenario", "nope"], "unknown scenario"),
        (vec!["--speed", "0"], "--speed must be a positive number"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_readygap"))
            .args(["lab", "serve", "--port", "0"])
            .args(&args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}
