//! Reaching a real cluster's API server as kubectl does: a KUBECONFIG list naming a missing
//! file skips it (client-go `tools/clientcmd/loader.go`), a kubeconfig `proxy-url` is used
//! (here a CONNECT proxy on loopback), `HTTPS_PROXY` with a matching `NO_PROXY` connects
//! directly, and an exec credential plugin's stderr goes to READYGAP_LOG, never to the
//! terminal.

use readygap_lab::profile::Profile;
use readygap_lab::serve::{LabHandle, LabOptions, serve};
use readygap_live::cluster::{ClusterConfig, config, connect};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn args(kubeconfig: std::ffi::OsString) -> ClusterConfig {
    ClusterConfig {
        kubeconfig: Some(kubeconfig.into()),
        context: None,
        namespace: None,
        deployment: "ollama".into(),
        selector: None,
        service: None,
    }
}

async fn lab(seed: u64) -> (LabHandle, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut o = LabOptions::new(Profile::named("local-1b").expect("profile"));
    o.speed = 10.0;
    o.seed = seed;
    o.kubeconfig_out = Some(dir.path().join("kubeconfig"));
    let lab = serve(o).await.expect("lab starts");
    (lab, dir)
}

fn admin_token(lab: &LabHandle) -> String {
    let kc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&lab.kubeconfig).unwrap()).unwrap();
    kc["users"][0]["user"]["token"].as_str().unwrap().to_owned()
}

/// A kubeconfig for `lab` with extra cluster lines (`proxy-url: …`) and a user block.
fn kubeconfig(lab: &LabHandle, path: &Path, cluster_extra: &str, user: &str) -> PathBuf {
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: lab\n  cluster:\n    server: {}\n{cluster_extra}contexts:\n- name: lab\n  context:\n    cluster: lab\n    user: u\n    namespace: {}\ncurrent-context: lab\nusers:\n- name: u\n  user:\n{user}",
        lab.api_url, lab.namespace
    );
    std::fs::write(path, text).unwrap();
    path.to_path_buf()
}

#[tokio::test]
async fn a_kubeconfig_list_skips_a_missing_file() {
    let (lab, dir) = lab(41).await;
    let missing = dir.path().join("missing.yaml");
    let list = std::env::join_paths([&missing, &lab.kubeconfig]).unwrap();
    let (cfg, ctx) = config(&args(list))
        .await
        .expect("the missing file is skipped");
    assert_eq!(ctx, "readygap-lab");
    assert_eq!(
        cfg.cluster_url.to_string().trim_end_matches('/'),
        lab.api_url
    );
    // Every file missing is still an error naming them.
    let none = std::env::join_paths([&missing, &dir.path().join("also-missing")]).unwrap();
    let err = config(&args(none)).await.expect_err("nothing to load");
    let msg = format!("{err:#}");
    assert!(
        msg.contains("missing.yaml") && msg.contains("also-missing"),
        "{msg}"
    );
    lab.shutdown().await;
}

/// A CONNECT proxy on loopback: records each CONNECT target, then pipes the bytes.
async fn connect_proxy() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if client.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let mut words = head.split_whitespace();
                let (Some("CONNECT"), Some(target)) = (words.next(), words.next()) else {
                    let _ = client
                        .write_all(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
                        .await;
                    return;
                };
                log.lock().unwrap().push(target.to_owned());
                // Loopback only.
                if !target.starts_with("127.") {
                    let _ = client.write_all(b"HTTP/1.1 403 Forbidden\r\n\r\n").await;
                    return;
                }
                let Ok(mut upstream) = tokio::net::TcpStream::connect(target).await else {
                    let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
                    return;
                };
                let _ = client
                    .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                    .await;
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            });
        }
    });
    (port, seen)
}

#[tokio::test]
async fn a_kubeconfig_proxy_url_is_used() {
    let (lab, dir) = lab(42).await;
    let (port, seen) = connect_proxy().await;
    let kc = kubeconfig(
        &lab,
        &dir.path().join("proxied"),
        &format!("    proxy-url: http://127.0.0.1:{port}\n"),
        &format!("    token: {}\n", admin_token(&lab)),
    );
    let target = connect(&args(kc.into()))
        .await
        .expect("connects through the proxy");
    assert_eq!(target.deployment.as_deref(), Some("ollama"));
    let lab_addr = lab.api_url.trim_start_matches("http://").to_owned();
    let targets = seen.lock().unwrap().clone();
    assert!(
        !targets.is_empty() && targets.iter().all(|t| *t == lab_addr),
        "CONNECT targets {targets:?}, lab at {lab_addr}"
    );
    lab.shutdown().await;
}

#[test]
fn https_proxy_with_a_matching_no_proxy_runs_against_the_lab() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_readygap"))
        .args([
            "run",
            "--lab",
            "local-1b",
            "--lab-speed",
            "10",
            "--trials",
            "1",
            "--no-memory",
            "--format",
            "json",
        ])
        .env("HTTPS_PROXY", "http://127.0.0.1:9")
        .env("NO_PROXY", "127.0.0.1")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("https_proxy")
        .env_remove("no_proxy")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("disabled feature"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("\"trials\""), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_plugins_stderr_goes_to_the_log() {
    use std::os::unix::fs::PermissionsExt;
    let (lab, dir) = lab(43).await;
    lab.wait_ready(Duration::from_secs(60)).await.unwrap();
    let plugin = dir.path().join("fake-credential-plugin");
    std::fs::write(
        &plugin,
        format!(
            "#!/bin/sh\necho 'PLUGIN-STDERR-MARK: opening a browser for login' >&2\nprintf '%s' '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{}\"}}}}'\n",
            admin_token(&lab)
        ),
    )
    .unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let kc = kubeconfig(
        &lab,
        &dir.path().join("exec"),
        "",
        &format!(
            "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {}\n      interactiveMode: IfAvailable\n",
            plugin.display()
        ),
    );
    let log = dir.path().join("readygap.log");
    let bin = env!("CARGO_BIN_EXE_readygap");
    let out = tokio::process::Command::new(bin)
        .args(["run", "--kubeconfig"])
        .arg(&kc)
        .args(["--model", "llama3.2:1b", "--trials", "1", "--no-memory"])
        .env("READYGAP_LOG", &log)
        .env_remove("KUBECONFIG")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        !stderr.contains("PLUGIN-STDERR-MARK"),
        "on the terminal: {stderr}"
    );
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(logged.contains("PLUGIN-STDERR-MARK"), "log: {logged}");
    lab.shutdown().await;
}
