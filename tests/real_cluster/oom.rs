//! Overlapping residency on the real cluster (issue 32; the study's 1B-then-3B case): two real
//! models, smollm2:135m and gemma3:270m, under a container memory limit where each fits alone
//! and both do not. The limit is measured, not guessed: under a generous limit each model is
//! loaded alone and the container's anonymous memory (cgroup `total_rss`, what the kernel
//! cannot reclaim) is read; the limit is halfway between the larger one alone and both
//! together (seen here: idle ~8 MB, smollm2 ~250 MB, gemma3 ~540 MB, both ~780 MB, so
//! ~660 MB; `/api/ps` says 298,153,728 B and 470,458,880 B).
//!
//! What the real kernel and kubelet do (found here, cgroup v1): the kernel's memcg OOM killer
//! kills the largest process of the container, the runner loading gemma3 (`Memory cgroup out
//! of memory: Killed process … (ollama)` with `CONSTRAINT_MEMCG` in the kernel log); `ollama
//! serve`, the container's main process, lives on, so the kubelet reports nothing: no
//! `OOMKilled`, no exit 137, no restart, no Event. The cgroup's `oom_kill` counter rose and
//! Ollama answered 500 "llama runner process has terminated: signal: killed". readygap must
//! still name both models with their `/api/ps` sizes and the limit.

use crate::support::{Cluster, NS, cluster, own_trials, recorded, repo};
use readygap_core::event::EventKind;
use readygap_core::residency::VerdictKind;
use serde_json::Value;
use std::path::{Path, PathBuf};

const SMALL: &str = "smollm2:135m";
const LARGE: &str = "gemma3:270m";

/// The smollm2 overlay with a memory limit (and request) of `limit` bytes, both models on
/// the volume, and the study's shallow readiness probe (`GET /api/tags`): the shipped
/// inference-aware probe would load smollm2 itself every 5 s and decide what is resident.
fn overlay(dir: &Path, name: &str, limit: u64) -> PathBuf {
    crate::support::smollm2_overlay(
        dir,
        name,
        &format!(
            r#"patches:
  - target: {{group: apps, version: v1, kind: Deployment, name: ollama}}
    patch: |-
      - op: replace
        path: /spec/template/spec/containers/0/resources/limits/memory
        value: "{limit}"
      - op: replace
        path: /spec/template/spec/containers/0/resources/requests/memory
        value: "{limit}"
      - op: replace
        path: /spec/template/spec/containers/0/readinessProbe
        value:
          httpGet: {{path: /api/tags, port: http}}
          periodSeconds: 1
          timeoutSeconds: 1
          failureThreshold: 3
"#
        ),
    )
}

/// `path` of the pod's Ollama through the API server's pod proxy: GET, or POST of `body`.
fn ollama(c: &Cluster, pod: &str, path: &str, body: Option<&Value>) -> Value {
    let url = format!("/api/v1/namespaces/{NS}/pods/{pod}:11434/proxy{path}");
    let out = match body {
        None => c.try_k(&["get", "--raw", &url]),
        Some(b) => {
            let f = tempfile::NamedTempFile::new().unwrap();
            std::fs::write(f.path(), b.to_string()).unwrap();
            c.try_k(&["create", "--raw", &url, "-f", &f.path().to_string_lossy()])
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&text).unwrap_or_else(|_| {
        serde_json::json!({ "error": format!("{}{}", text, String::from_utf8_lossy(&out.stderr)) })
    })
}

fn generate(c: &Cluster, pod: &str, model: &str, keep_alive: &str) -> Value {
    let body = serde_json::json!({
        "model": model, "prompt": "hi", "stream": false, "keep_alive": keep_alive,
        "options": {"num_predict": 1}
    });
    ollama(c, pod, "/api/generate", Some(&body))
}

/// Unload every model and wait until `/api/ps` is empty.
fn unload_all(c: &Cluster, pod: &str) {
    for m in [SMALL, LARGE] {
        let body = serde_json::json!({"model": m, "keep_alive": 0});
        ollama(c, pod, "/api/generate", Some(&body));
    }
    crate::support::wait_until(
        "an empty /api/ps",
        std::time::Duration::from_secs(30),
        || {
            ollama(c, pod, "/api/ps", None)["models"]
                .as_array()
                .is_some_and(|a| a.is_empty())
        },
    );
}

/// A line of the container's cgroup v1 memory files (read in the container, as readygap does).
fn cgroup(c: &Cluster, pod: &str, file: &str, key: &str) -> u64 {
    let text = c.kn(&[
        "exec",
        pod,
        "-c",
        "ollama",
        "--",
        "cat",
        &format!("/sys/fs/cgroup/memory/{file}"),
    ]);
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{key} in {file}: {text}"))
}

fn rss(c: &Cluster, pod: &str) -> u64 {
    cgroup(c, pod, "memory.stat", "total_rss ")
}

/// `readygap run` of one trial with `extra` arguments; the recording's events and its trial.
fn run(
    c: &Cluster,
    rec: &Path,
    extra: &[&str],
) -> (
    std::process::Output,
    Vec<readygap_core::event::Event>,
    readygap_core::timeline::Trial,
) {
    let mut args = vec!["--trials", "1", "--format", "json"];
    args.extend_from_slice(extra);
    let out = c.run(rec, &args);
    let trial = own_trials(rec)
        .into_iter()
        .next()
        .expect("readygap's trial");
    (out, recorded(rec), trial)
}

#[ignore = "needs the real cluster: scripts/cluster.sh up"]
#[test]
fn two_real_models_over_the_limit_are_killed_by_the_kernel_and_readygap_names_both() {
    let c = cluster();
    let dir = tempfile::tempdir().unwrap();

    // 1. Each model alone under a generous limit: its /api/ps size and anonymous memory.
    c.deploy(&overlay(dir.path(), "measure", 2 << 30));
    let pod = c.pod();
    unload_all(&c, &pod);
    let idle = rss(&c, &pod);
    let mut alone = Vec::new();
    for m in [SMALL, LARGE] {
        let g = generate(&c, &pod, m, "10m");
        assert_eq!(g["done"], true, "{m} alone under 2 GiB: {g}");
        let ps = ollama(&c, &pod, "/api/ps", None);
        let size = ps["models"][0]["size"].as_u64().expect("an /api/ps size");
        alone.push((m, size, rss(&c, &pod)));
        unload_all(&c, &pod);
    }
    let (a1, a2) = (alone[0].2, alone[1].2);
    let both = a1 + a2 - idle;
    // Halfway, rounded down to a MiB (a limit as a user writes one).
    let limit = ((a1.max(a2) + both) / 2) & !((1 << 20) - 1);
    eprintln!(
        "alone (model, /api/ps size, anon rss): {alone:?}; idle {idle}; both ~{both}; limit {limit}"
    );
    assert!(
        limit > a1.max(a2) + (32 << 20) && limit + (32 << 20) < both,
        "no room for a limit between {a1}/{a2} and {both}"
    );

    // 2. Under that limit: readygap's trial preloads smollm2, then infers with gemma3.
    c.deploy(&overlay(dir.path(), "limited", limit));
    let before_kmsg = kernel_log();
    let rec = dir.path().join("oom.jsonl");
    let (out, events, trial) = run(&c, &rec, &["--model", LARGE, "--preload-model", SMALL]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the trial fails: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let pod = trial.new_pod.clone().expect("the replacement pod");
    eprintln!("readygap's trial on {pod}: {:?}", trial.status);

    // The real components' own evidence: the kernel's memcg kill of a process in this pod's
    // cgroup, the cgroup's oom_kill counter, and the kubelet's view (nothing restarted).
    let uid = c.kn(&["get", "pod", &pod, "-o", "jsonpath={.metadata.uid}"]);
    let kmsg: Vec<String> = kernel_log()
        .into_iter()
        .filter(|l| !before_kmsg.contains(l))
        .collect();
    let memcg = kmsg
        .iter()
        .find(|l| l.contains("CONSTRAINT_MEMCG") && l.contains(&format!("pod{uid}")))
        .unwrap_or_else(|| panic!("no memcg OOM of pod {uid} in the kernel log: {kmsg:#?}"));
    let killed = kmsg
        .iter()
        .find(|l| l.contains("Memory cgroup out of memory: Killed process"))
        .expect("the kernel's kill line");
    let oom_kill = cgroup(&c, &pod, "memory.oom_control", "oom_kill ");
    let status = c.kn(&[
        "get",
        "pod",
        &pod,
        "-o",
        "jsonpath={.status.containerStatuses[0].restartCount} {.status.containerStatuses[0].lastState} {.status.containerStatuses[0].state}",
    ]);
    let kubelet_events = c.kn(&[
        "get",
        "events",
        "--field-selector",
        &format!("involvedObject.name={pod}"),
        "-o",
        "custom-columns=REASON:.reason,MESSAGE:.message",
    ]);
    eprintln!(
        "kernel: {memcg}\nkernel: {killed}\ncgroup oom_kill {oom_kill}\nkubectl: {pod} restartCount, lastState, state: {status}\nkubectl get events:\n{kubelet_events}"
    );
    assert!(oom_kill >= 1, "the cgroup's oom_kill counter rose");
    // cgroup v1: the runner was killed, `ollama serve` lives on; the kubelet saw no kill.
    assert!(status.starts_with("0 {} "), "{status}");
    assert!(status.contains("running"), "{status}");
    assert!(!kubelet_events.contains("OOM"), "{kubelet_events}");
    assert!(
        trial
            .reason()
            .is_some_and(|r| r.contains("runner_oom") || r.contains("overlapping_residency_oom")),
        "{:?}",
        trial.status
    );

    // readygap's verdict: both models, each with the size /api/ps gave, and the limit.
    let state = readygap_core::state::State::from_events(&events);
    let kill = state
        .oom
        .verdicts
        .iter()
        .find(|v| {
            v.pod == pod
                && matches!(
                    v.kind,
                    VerdictKind::RunnerOom | VerdictKind::OverlappingResidencyOom
                )
        })
        .unwrap_or_else(|| panic!("no kill verdict on {pod}: {:#?}", state.oom.verdicts));
    eprintln!(
        "readygap: {}: {} (models {:?}, limit {:?})",
        kill.kind.name(),
        kill.message,
        kill.models,
        kill.limit
    );
    let mut names: Vec<&str> = kill.models.iter().map(|(n, _)| n.as_str()).collect();
    names.sort();
    assert_eq!(names, [LARGE, SMALL], "{}", kill.message);
    assert_eq!(kill.limit, Some(limit), "{}", kill.message);
    for (name, size) in &kill.models {
        let measured = alone
            .iter()
            .find(|(m, _, _)| m == name)
            .expect("measured")
            .1;
        let read = events
            .iter()
            .rev()
            .filter_map(|e| match &e.kind {
                EventKind::Residency { models, .. } => models.iter().find(|m| &m.name == name),
                _ => None,
            })
            .map(|m| m.size)
            .next()
            .unwrap_or_else(|| panic!("{name} never in /api/ps"));
        assert_eq!(*size, read, "{name}: {}", kill.message);
        assert_eq!(*size, measured, "{name}: the /api/ps size measured alone");
    }
    assert!(kill.estimated.is_empty(), "{:?}", kill.estimated);

    // 3. The same load alone succeeds under the same limit.
    let rec = dir.path().join("alone.jsonl");
    let (out, _, trial) = run(&c, &rec, &["--model", LARGE]);
    assert!(
        out.status.success() && trial.is_ok(),
        "{LARGE} alone under {limit}: {:?}",
        trial.status
    );
    eprintln!("{LARGE} alone under {limit}: {:?}", trial.status);

    // Back to the shipped manifests for the tests that follow.
    c.deploy(&repo().join("manifests/overlays/smollm2"));
}

/// The kernel's log lines (`dmesg`; the tests run as root on the node).
fn kernel_log() -> std::collections::HashSet<String> {
    let out = std::process::Command::new("dmesg")
        .output()
        .expect("running dmesg");
    assert!(out.status.success(), "dmesg: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}
