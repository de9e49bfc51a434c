//! The published study's own procedure on the real cluster, unchanged
//! (`tests/fixtures/study-loop.sh`, the loop the lab's study test runs: `kubectl delete
//! --wait=false`, a 0.1 s `kubectl get` loop, `kubectl exec ollama-client -- curl
//! http://ollama:11434/…` through Service DNS), with the dashboard watching in `--read-only`.
//!
//! Checked: the loop's own figures are intact (every generate done, the real
//! `load_duration`); readygap observed each replacement once, and took T3/T4 from the real
//! container log, as the loop's request from the client pod: inside the loop's T3–T4 bracket.

use crate::support::{Cluster, MODEL, NS, Tmux, cluster, repo, wait_until};
use std::process::{Command, Stdio};
use std::time::Duration;

const LOOP: &str = include_str!("../fixtures/study-loop.sh");
const RUNS: usize = 3;

/// The client pod of the study (`kubectl run ollama-client --image=curlimages/curl -- sleep
/// infinity`), with the locally built curl image's tag.
pub fn client_pod(c: &Cluster) -> String {
    let image = std::env::var("READYGAP_CURL_IMAGE").unwrap_or_else(|_| CURL_IMAGE.into());
    let exists = c
        .try_k(&["-n", NS, "get", "pod", "ollama-client"])
        .status
        .success();
    if !exists {
        c.kn(&[
            "run",
            "ollama-client",
            &format!("--image={image}"),
            "--image-pull-policy=IfNotPresent",
            "--",
            "sleep",
            "infinity",
        ]);
    }
    c.kn(&[
        "wait",
        "--for=condition=Ready",
        "pod/ollama-client",
        "--timeout=120s",
    ]);
    c.kn(&[
        "get",
        "pod",
        "ollama-client",
        "-o",
        "jsonpath={.status.podIP}",
    ])
}

/// The image `scripts/cluster.sh` builds from Debian's curl for the client pod.
pub const CURL_IMAGE: &str = "curlimages/curl:7.88.1";

#[derive(Debug)]
struct Run {
    new: String,
    t: [i64; 5],
    done: bool,
    load_ns: u64,
}

#[ignore = "needs the real cluster: scripts/cluster.sh up"]
#[test]
fn the_studys_loop_runs_unchanged_with_the_dashboard_watching() {
    let c = cluster();
    c.deploy(&repo().join("manifests/overlays/smollm2"));
    let client_ip = client_pod(&c);
    let d = c.home.path();
    let rec = d.join("watched.jsonl");

    let script = format!(
        "'{bin}' --kubeconfig '{kc}' -n {NS} --read-only --record '{rec}'; echo EXITED $?; sleep 60",
        bin = env!("CARGO_BIN_EXE_readygap"),
        kc = c.kubeconfig.display(),
        rec = rec.display()
    );
    let tmux = Tmux::start("study", d, (200, 55), &script);
    let first = c.pod();
    wait_until(
        "the dashboard showing the pod",
        Duration::from_secs(60),
        || {
            let s = tmux.screen();
            s.contains("Pods") && s.contains(first.as_str())
        },
    );

    let (out, logs) = (d.join("loop.csv"), d.join("logs.txt"));
    let mut script = Command::new("bash")
        .args(["-c", LOOP])
        .env("KUBECTL", &c.kubectl)
        .env("KC", &c.kubeconfig)
        .env("CACHE", d.join("cache"))
        .env("HOME", d)
        .env("NS", NS)
        .env("RUNS", RUNS.to_string())
        .env("MODEL", MODEL)
        .env("OUT", &out)
        .env("LOGS", &logs)
        .env_remove("KUBECONFIG")
        .stdout(Stdio::null())
        .spawn()
        .expect("bash");
    let st = script.wait().expect("the loop");
    assert!(st.success(), "the study's loop failed: {st}");
    let runs: Vec<Run> = std::fs::read_to_string(&out)
        .expect("the loop's CSV")
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let n = |i: usize| f[i].parse::<i64>().unwrap_or_else(|e| panic!("{l}: {e}"));
            Run {
                new: f[2].into(),
                t: [n(3), n(4), n(5), n(6), n(7)],
                done: f[8] == "0" && f[9] == "1",
                load_ns: n(10) as u64,
            }
        })
        .collect();
    assert_eq!(runs.len(), RUNS, "{runs:?}");
    for r in &runs {
        eprintln!(
            "loop: {} T0→T1 {} ms, T1→T2 {} ms, T3→T4 {} ms, load_duration {:.1} ms",
            r.new,
            r.t[1] - r.t[0],
            r.t[2] - r.t[1],
            r.t[4] - r.t[3],
            r.load_ns as f64 / 1e6
        );
        assert!(r.done, "the loop's generate failed: {r:?}");
        assert!(
            r.load_ns > 0,
            "no load_duration in the loop's answer: {r:?}"
        );
    }

    // readygap ends each observed trial at the client's request line; wait for the last one.
    let last = runs.last().map(|r| r.new.clone()).unwrap_or_default();
    wait_until(
        "readygap's record of the last client request",
        Duration::from_secs(30),
        || {
            std::fs::read_to_string(&rec).is_ok_and(|text| {
                text.lines().any(|l| {
                    l.contains("request_logged")
                        && l.contains(last.as_str())
                        && l.contains("/api/generate")
                        && l.contains(client_ip.as_str())
                })
            })
        },
    );
    tmux.cmd(&["send-keys", "-t", "rg", "q"]);
    wait_until("the dashboard to exit", Duration::from_secs(30), || {
        tmux.screen().contains("EXITED 0")
    });

    let loaded = readygap_core::report::load_trials(&rec).expect("the recording reads");
    for r in &runs {
        let mine: Vec<_> = loaded
            .trials
            .iter()
            .filter(|t| t.new_pod.as_deref() == Some(r.new.as_str()))
            .collect();
        assert_eq!(
            mine.len(),
            1,
            "{}: observed {} times: {mine:#?}",
            r.new,
            mine.len()
        );
        let t = mine[0];
        assert!(t.external, "readygap sent nothing (read-only): {t:?}");
        assert_eq!(t.inference_source.map(|s| s.name()), Some("log"), "{t:?}");
        let ms = |ts: Option<chrono::DateTime<chrono::Utc>>| ts.map(|x| x.timestamp_millis());
        let (t3, t4) = (ms(t.marks.t3).expect("T3"), ms(t.marks.t4).expect("T4"));
        let t1 = ms(t.marks.t1).expect("T1");
        eprintln!(
            "readygap: {} T3 {:+} ms, T4 {:+} ms from the loop's T3/T4; T1 {:+} ms from the loop's T1",
            r.new,
            t3 - r.t[3],
            t4 - r.t[4],
            t1 - r.t[1]
        );
        // The loop stamps around `kubectl exec`, so its bracket holds the request's own.
        assert!(
            r.t[3] <= t3 && t4 <= r.t[4] && t3 <= t4,
            "{}: readygap T3/T4 {t3}/{t4} outside the loop's {}/{}: not the client's request",
            r.new,
            r.t[3],
            r.t[4]
        );
        assert!(t1 <= t4, "{}: T4 before T1", r.new);
    }
}
