//! The official Ollama Python client (`ollama` 0.6.3) against a lab runtime: lists, shows
//! residency, generates streamed and not, with no validation error from its pydantic models.
//! Needs `python3` with `pip install ollama==0.6.3`: skipped when missing, unless CI is set.

use readygap_lab::testkit::runtime::*;
use std::process::Command;

fn python_client_available() -> bool {
    Command::new("python3")
        .args([
            "-c",
            "import ollama, importlib.metadata as m; assert m.version('ollama') == '0.6.3'",
        ])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

#[ignore = "needs python3 with ollama==0.6.3 (python3 -m pip install ollama==0.6.3)"]
#[tokio::test]
async fn official_python_client_round_trip() {
    if !python_client_available() {
        readygap_lab::testkit::missing(
            "python3 with the official client ollama==0.6.3 (python3 -m pip install ollama==0.6.3)",
        );
    }
    let lab = start_listening(profile("azure-3b"), Options::default()).await;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/peers/ollama_client_check.py"
    );
    let base = lab.base.clone();
    let output = tokio::task::spawn_blocking(move || {
        Command::new("python3")
            .args([script, &base, "llama3.2:3b"])
            .env("NO_PROXY", "*")
            .env_remove("HTTP_PROXY")
            .env_remove("http_proxy")
            .env_remove("ALL_PROXY")
            .env_remove("all_proxy")
            .output()
    })
    .await
    .expect("join")
    .expect("run python3");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "python client failed ({:?}):\n{stdout}\n{stderr}",
        output.status.code()
    );
    let checks: Vec<&str> = stdout.lines().filter(|l| l.starts_with("CHECK ")).collect();
    let get = |name: &str| {
        checks
            .iter()
            .find_map(|l| l.strip_prefix(&format!("CHECK {name} ")))
            .unwrap_or_else(|| panic!("no {name} in:\n{stdout}"))
    };
    assert_eq!(get("list"), "llama3.2:3b,llama3.2:1b,llama3.1:8b");
    assert_eq!(get("generate"), "READY");
    assert_eq!(get("ps"), "llama3.2:3b");
    assert!(get("stream_chunks").parse::<u32>().is_ok_and(|n| n >= 2));
    assert_eq!(get("chat"), "READY");
    assert_eq!(get("show_family"), "llama");
    assert_eq!(get("missing_status"), "404");
    assert_eq!(get("unload_reason"), "unload");
    assert_eq!(get("ps_after_unload"), "0");
    assert_eq!(stdout.lines().last(), Some("OK"));
    // The runtime saw what the client did.
    assert!(lab.handle.resident().is_empty());
    lab.handle.stop().await;
}
