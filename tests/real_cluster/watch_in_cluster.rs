//! The fleet watcher in the cluster, as a user deploys it: readygap's image built from the
//! binary under test (`scripts/cluster.sh image-readygap`), the Prometheus Operator's
//! ServiceMonitor CRD installed as kube-prometheus-stack installs it (the prometheus-operator
//! Go module's `example/prometheus-operator-crd`, fetched by scripts/peers.sh), then
//! `kubectl apply -k manifests/watch` unchanged: the watcher runs as that Deployment under its
//! ServiceAccount and read-only ClusterRole. A real Prometheus (Debian's) scrapes it every
//! second through its Service's ClusterIP. The model Deployment carries the label the
//! manifests select (`readygap.io/watch=true`, on the Deployment and its pod template); a
//! script replaces its pod twice, each time with a user's request once it is Ready: each
//! replacement is counted once in what Prometheus stored, `histogram_quantile` answers the
//! median recovery, and each `k8s_recovery` is in a scrape within 5 s of its T1 (the
//! kubelet's status write that set Ready, in the audit log).

use crate::external::user_request;
use crate::support::{Cluster, NS, Reaped, cluster, repo, smollm2_overlay, wait_until};
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::Duration;

const WATCH_NS: &str = "readygap";

/// The series Prometheus answers to the instant query `q` (`data.result`), `None` when it
/// does not answer.
fn result(port: u16, q: &str) -> Option<Vec<Value>> {
    let out = Command::new("curl")
        .args(["-sf", "--noproxy", "*", "--max-time", "5", "-G"])
        .arg(format!("http://127.0.0.1:{port}/api/v1/query"))
        .args(["--data-urlencode", &format!("query={q}")])
        .output()
        .ok()?;
    let v: Value = serde_json::from_slice(&out.stdout).ok()?;
    v["data"]["result"].as_array().cloned()
}

/// What Prometheus answers to the instant query `q`: the sum of its samples, `None` when it
/// has none.
fn query(port: u16, q: &str) -> Option<f64> {
    let rows = result(port, q)?;
    if rows.is_empty() {
        return None;
    }
    rows.iter()
        .map(|r| r["value"][1].as_str()?.parse::<f64>().ok())
        .sum()
}

/// The raw samples of the range selector `q` (an instant query of `metric[range]`): each
/// scrape's time and value, in order.
fn scraped(port: u16, q: &str) -> Vec<(chrono::DateTime<chrono::Utc>, f64)> {
    let series = result(port, q).unwrap_or_else(|| panic!("{q}: Prometheus did not answer"));
    assert!(
        series.len() <= 1,
        "{q}: {} series, one expected: {series:?}",
        series.len()
    );
    let mut samples: Vec<_> = series
        .iter()
        .flat_map(|r| r["values"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| {
            let at = chrono::DateTime::from_timestamp_millis((p[0].as_f64()? * 1000.0) as i64)?;
            Some((at, p[1].as_str()?.parse().ok()?))
        })
        .collect();
    samples.sort_by_key(|(at, _)| *at);
    samples
}

/// Removes what the test installed, passed or failed.
struct Installed<'a>(&'a Cluster);

impl Drop for Installed<'_> {
    fn drop(&mut self) {
        let c = self.0;
        let _ = c.try_k(&[
            "delete",
            "-k",
            &repo().join("manifests/watch").to_string_lossy(),
            "--ignore-not-found",
            "--wait=true",
            "--timeout=120s",
        ]);
        let _ = c.try_k(&[
            "delete",
            "crd",
            "servicemonitors.monitoring.coreos.com",
            "--ignore-not-found",
        ]);
        // The model Deployment as the other tests expect it: without the watch label.
        let _ = c.try_k(&[
            "apply",
            "-k",
            &repo().join("manifests/overlays/smollm2").to_string_lossy(),
        ]);
    }
}

#[ignore = "needs the real cluster: scripts/cluster.sh up"]
#[test]
fn the_watcher_deployed_from_the_manifests_counts_each_replacement_once_in_prometheus() {
    let c = cluster();
    let crd = std::env::var("READYGAP_SERVICEMONITOR_CRD").unwrap_or_else(|_| {
        panic!(
            "{}: READYGAP_SERVICEMONITOR_CRD is not set (scripts/peers.sh fetches the \
             Prometheus Operator's CRD; source its peers.env)",
            crate::support::NEEDS
        )
    });
    let image = Command::new("bash")
        .arg(repo().join("scripts/cluster.sh"))
        .args(["image-readygap", env!("CARGO_BIN_EXE_readygap")])
        .output()
        .expect("scripts/cluster.sh image-readygap");
    assert!(
        image.status.success(),
        "image-readygap: {}{}",
        String::from_utf8_lossy(&image.stdout),
        String::from_utf8_lossy(&image.stderr)
    );
    let _installed = Installed(&c);
    let watch_dir = repo().join("manifests/watch");
    let watch_dir = watch_dir.to_string_lossy();
    // Without the Operator's CRD, kubectl refuses the ServiceMonitor and applies the rest (as
    // the README says).
    let bare = c.try_k(&["apply", "-k", &watch_dir]);
    let said = String::from_utf8_lossy(&bare.stderr);
    assert!(
        !bare.status.success() && said.contains("ServiceMonitor"),
        "{said}"
    );
    c.k(&["-n", WATCH_NS, "get", "deployment/readygap-watch"]);
    c.k(&["apply", "--server-side", "-f", &crd]);
    c.k(&[
        "wait",
        "--for=condition=Established",
        "crd/servicemonitors.monitoring.coreos.com",
        "--timeout=60s",
    ]);
    // The model Deployment, labelled as manifests/watch selects.
    let dir = tempfile::tempdir().unwrap();
    let labelled = smollm2_overlay(
        dir.path(),
        "watched",
        "labels:\n  - pairs:\n      readygap.io/watch: \"true\"\n    includeTemplates: true\n",
    );
    c.deploy(&labelled);
    crate::study::client_pod(&c);
    // The shipped manifests, unchanged, now whole.
    c.k(&["apply", "-k", &watch_dir]);
    c.k(&["-n", WATCH_NS, "get", "servicemonitor/readygap-watch"]);
    c.k(&[
        "-n",
        WATCH_NS,
        "rollout",
        "status",
        "deployment/readygap-watch",
        "--timeout=180s",
    ]);
    let sa = c.k(&[
        "-n",
        WATCH_NS,
        "get",
        "pods",
        "-l",
        "app=readygap-watch",
        "-o",
        "jsonpath={.items[0].spec.serviceAccountName}",
    ]);
    assert_eq!(sa, "readygap-watch");
    let cluster_ip = c.k(&[
        "-n",
        WATCH_NS,
        "get",
        "service",
        "readygap-watch",
        "-o",
        "jsonpath={.spec.clusterIP}",
    ]);

    // Debian's Prometheus on a free loopback port, scraping the Service every second.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let cfg = dir.path().join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: readygap\n    static_configs:\n      - targets: ['{cluster_ip}:9464']\n"
        ),
    )
    .unwrap();
    let _prometheus = Reaped(
        Command::new("prometheus")
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus (apt-get install prometheus)"),
    );
    wait_until(
        "Prometheus scraping the watcher through its Service",
        Duration::from_secs(60),
        || query(port, r#"readygap_watched_deployments{job="readygap"}"#) == Some(1.0),
    );

    let of_ollama = |metric: &str| {
        query(
            port,
            &format!(r#"sum({metric}{{namespace="{NS}",deployment="ollama"}})"#),
        )
        .unwrap_or(0.0)
    };
    let mut new_pods = Vec::new();
    for n in 1..=2 {
        let pod = c.pod();
        c.kn(&["delete", "pod", &pod, "--wait=false"]);
        c.settle();
        new_pods.push(c.pod());
        wait_until(
            "the replacement's k8s_recovery in Prometheus",
            Duration::from_secs(30),
            || of_ollama("readygap_k8s_recovery_seconds_count") >= n as f64,
        );
        user_request(&c);
        wait_until(
            "the replacement's trial in Prometheus",
            Duration::from_secs(180),
            || of_ollama("readygap_trials_total") >= n as f64,
        );
    }
    // Two scrapes more (each stores one `up` sample): nothing is counted twice.
    let scrapes = || query(port, r#"count_over_time(up{job="readygap"}[1h])"#);
    let before = scrapes().unwrap_or(0.0);
    wait_until("two more scrapes", Duration::from_secs(30), || {
        scrapes().is_some_and(|n| n >= before + 2.0)
    });
    assert_eq!(of_ollama("readygap_trials_total"), 2.0);
    assert_eq!(of_ollama("readygap_k8s_recovery_seconds_count"), 2.0);
    assert_eq!(of_ollama("readygap_ready_to_inference_seconds_count"), 2.0);
    let recovery = of_ollama("readygap_k8s_recovery_seconds_sum");
    eprintln!("in-cluster watcher via Prometheus: 2 trials, k8s_recovery sum {recovery:.3} s");
    assert!(recovery > 0.0 && recovery < 120.0, "{recovery}");
    // What a dashboard asks: the median recovery, from the stored buckets.
    let median = query(
        port,
        &format!(
            r#"histogram_quantile(0.5, sum by (le) (readygap_k8s_recovery_seconds_bucket{{namespace="{NS}",deployment="ollama"}}))"#
        ),
    )
    .expect("histogram_quantile answers");
    eprintln!(
        "in-cluster watcher via Prometheus: histogram_quantile(0.5, k8s_recovery) = {median:.3} s"
    );
    assert!(
        median > 0.0 && median <= recovery,
        "{median} of a sum {recovery}"
    );
    // How late a dashboard sees each recovery: from T1 (the kubelet's status write that set
    // Ready, in the audit log) to the first scrape whose count holds it.
    let audit = crate::external::audit_log();
    let text = std::fs::read_to_string(&audit).expect("the audit log");
    let ready = readygap::commands::bench_truth::AuditRecords::parse(&text, 1, &audit)
        .and_then(|r| r.ready(NS))
        .expect("the audit log's status writes");
    let samples = scraped(
        port,
        &format!(
            r#"readygap_k8s_recovery_seconds_count{{namespace="{NS}",deployment="ollama"}}[1h]"#
        ),
    );
    for (n, pod) in new_pods.iter().enumerate() {
        let t1 = ready
            .iter()
            .find(|e| &e.pod == pod)
            .unwrap_or_else(|| panic!("{pod}: no status write set Ready in the audit log"))
            .ts;
        let (at, _) = samples
            .iter()
            .find(|(_, v)| *v >= (n + 1) as f64)
            .unwrap_or_else(|| panic!("no scrape counts {} recoveries: {samples:?}", n + 1));
        let late = (*at - t1).num_milliseconds();
        eprintln!("in-cluster watcher: {pod} Ready at {t1}, first scraped with it {late} ms later");
        assert!(
            late > 0 && late < 5_000,
            "{pod}: k8s_recovery scraped {late} ms after T1 (scrapes every 1 s)"
        );
    }
    // Read-only and enough: the watcher's log holds no refusal.
    let log = c.k(&["-n", WATCH_NS, "logs", "deployment/readygap-watch"]);
    assert!(!log.contains("forbidden"), "{log}");
}
