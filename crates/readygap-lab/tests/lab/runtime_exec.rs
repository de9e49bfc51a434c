//! `kubectl exec` into a lab container: cgroup v1/v2 files agree with the runtime's memory,
//! the `ollama` CLI tables, and a streaming `while :` loop that ends when dropped.

use readygap_lab::runtime::{ExecChunk, ExecStream, RuntimeEvent};
use readygap_lab::testkit::runtime::*;
use serde_json::json;
use std::collections::HashMap;

fn argv(s: &[&str]) -> Vec<String> {
    s.iter().map(|a| a.to_string()).collect()
}

fn sh(script: &str) -> Vec<String> {
    argv(&["sh", "-c", script])
}

fn stat(text: &str) -> HashMap<String, u64> {
    text.lines()
        .filter_map(|l| l.split_once(' '))
        .filter_map(|(k, v)| v.trim().parse().ok().map(|v| (k.to_string(), v)))
        .collect()
}

async fn load(lab: &mut Lab, model: &str) {
    let r = client().post(lab.url("/api/generate"))
        .json(&json!({"model": model, "prompt": "Reply with exactly: READY", "stream": false, "keep_alive": "1h"}))
        .send().await.expect("generate");
    assert_eq!(r.status(), 200);
    lab.wait_event(|e| matches!(e, RuntimeEvent::ModelResident { .. }))
        .await;
}

#[tokio::test]
async fn cgroup_v2_files_agree_with_the_runtime() {
    let mut lab = start_listening(profile("azure-3b"), Options::default()).await;
    load(&mut lab, "llama3.2:3b").await;
    let mem = lab.handle.memory();
    let out = lab
        .handle
        .exec(argv(&[
            "cat",
            "/sys/fs/cgroup/memory.current",
            "/sys/fs/cgroup/memory.max",
        ]))
        .collect()
        .await;
    assert_eq!(out.code, Some(0));
    assert_eq!(
        out.stdout_text(),
        format!("{}\n{}\n", mem.current_bytes, 4u64 << 30)
    );
    let events = lab
        .handle
        .exec(argv(&["cat", "/sys/fs/cgroup/memory.events"]))
        .collect()
        .await
        .stdout_text();
    let keys: Vec<&str> = events.lines().filter_map(|l| l.split(' ').next()).collect();
    assert_eq!(
        keys,
        ["low", "high", "max", "oom", "oom_kill", "oom_group_kill"]
    );
    assert_eq!(stat(&events)["oom_kill"], 0);
    let s = stat(
        &lab.handle
            .exec(argv(&["cat", "/sys/fs/cgroup/memory.stat"]))
            .collect()
            .await
            .stdout_text(),
    );
    assert_eq!(s["anon"] + s["file"] + s["kernel"], mem.current_bytes);
    assert_eq!(s["active_file"] + s["inactive_file"], s["file"]);
    assert_eq!(
        mem.current_bytes - s["inactive_file"],
        mem.working_set_bytes
    );
    assert!(s["anon"] >= 2_640_238_592, "the 3B is resident: {s:?}");
    // v1 paths do not exist on a v2 pod.
    let v1 = lab
        .handle
        .exec(argv(&[
            "cat",
            "/sys/fs/cgroup/memory/memory.usage_in_bytes",
        ]))
        .collect()
        .await;
    assert_eq!(v1.code, Some(1));
    assert!(v1.stderr_text().contains("No such file or directory"));
    // The node's meminfo carries the page cache.
    let meminfo = lab
        .handle
        .exec(argv(&["head", "-n", "5", "/proc/meminfo"]))
        .collect()
        .await
        .stdout_text();
    assert_eq!(meminfo.lines().count(), 5);
    let cached = meminfo
        .lines()
        .find(|l| l.starts_with("Cached:"))
        .expect("Cached line");
    assert_eq!(
        cached,
        format!("Cached:         {:>8} kB", lab.spec.node_cache.cached_kb())
    );
    lab.handle.stop().await;
}

#[tokio::test]
async fn cgroup_v1_files_agree_with_the_runtime() {
    let mut p = profile("local-3b");
    p.cgroup_v1 = true;
    let mut lab = start_listening(p, Options::default()).await;
    load(&mut lab, "llama3.2:3b").await;
    let mem = lab.handle.memory();
    let usage = lab
        .handle
        .exec(argv(&[
            "cat",
            "/sys/fs/cgroup/memory/memory.usage_in_bytes",
        ]))
        .collect()
        .await;
    assert_eq!(
        usage.stdout_text().trim().parse::<u64>().ok(),
        Some(mem.current_bytes)
    );
    let limit = lab
        .handle
        .exec(argv(&[
            "cat",
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
        ]))
        .collect()
        .await;
    assert_eq!(limit.stdout_text(), format!("{}\n", 4u64 << 30));
    let oom = lab
        .handle
        .exec(argv(&["cat", "/sys/fs/cgroup/memory/memory.oom_control"]))
        .collect()
        .await
        .stdout_text();
    assert_eq!(oom, "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n");
    let s = stat(
        &lab.handle
            .exec(argv(&["cat", "/sys/fs/cgroup/memory/memory.stat"]))
            .collect()
            .await
            .stdout_text(),
    );
    assert_eq!(s["total_inactive_file"], s["inactive_file"]);
    assert_eq!(
        mem.current_bytes - s["total_inactive_file"],
        mem.working_set_bytes
    );
    assert!(s["rss"] >= 2_925_813_350 && s["cache"] > 0, "{s:?}");
    let v2 = lab
        .handle
        .exec(argv(&["test", "-e", "/sys/fs/cgroup/memory.current"]))
        .collect()
        .await;
    assert_eq!(v2.code, Some(1), "no v2 files on a v1 pod");
    // The fallback script a memory source would run picks v1 here.
    let out = lab.handle.exec(sh("cat /sys/fs/cgroup/memory.current 2>/dev/null || cat /sys/fs/cgroup/memory/memory.usage_in_bytes")).collect().await;
    assert_eq!(out.code, Some(0));
    assert_eq!(out.stderr, b"");
    assert_eq!(
        out.stdout_text().trim().parse::<u64>().ok(),
        Some(lab.handle.memory().current_bytes)
    );
    lab.handle.stop().await;
}

#[tokio::test]
async fn ollama_cli_tables_and_shell_builtins() {
    let mut lab = start_listening(profile("azure-3b"), Options::default()).await;
    let ps = lab.handle.exec(argv(&["ollama", "ps"])).collect().await;
    assert_eq!(
        ps.stdout_text(),
        "NAME    ID    SIZE    PROCESSOR    CONTEXT    UNTIL \n"
    );
    load(&mut lab, "llama3.2:3b").await;
    let ps = lab
        .handle
        .exec(argv(&["ollama", "ps"]))
        .collect()
        .await
        .stdout_text();
    let lines: Vec<&str> = ps.lines().collect();
    assert!(
        lines[0]
            .starts_with("NAME           ID              SIZE      PROCESSOR    CONTEXT    UNTIL"),
        "{ps}"
    );
    let row: Vec<&str> = lines[1]
        .split("    ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    // keep_alive 1h at speed 50 = 72 s.
    assert_eq!(
        row,
        [
            "llama3.2:3b",
            "a80c4f17acd5",
            "2.6 GB",
            "100% CPU",
            "4096",
            "About a minute from now"
        ],
        "{ps}"
    );
    let list = lab
        .handle
        .exec(argv(&["ollama", "list"]))
        .collect()
        .await
        .stdout_text();
    assert!(
        list.starts_with("NAME           ID              SIZE      MODIFIED"),
        "{list}"
    );
    assert!(
        list.contains("llama3.1:8b    46e0c10c039e    4.9 GB    "),
        "{list}"
    );

    let unknown = lab
        .handle
        .exec(argv(&["curl", "localhost"]))
        .collect()
        .await;
    assert_eq!(
        (unknown.code, unknown.stderr_text()),
        (Some(127), "sh: curl: not found\n".to_string())
    );
    let missing = lab.handle.exec(argv(&["cat", "/nope"])).collect().await;
    assert_eq!(missing.code, Some(1));
    assert_eq!(
        missing.stderr_text(),
        "cat: /nope: No such file or directory\n"
    );
    let heads = lab
        .handle
        .exec(argv(&[
            "head",
            "-n",
            "1",
            "/sys/fs/cgroup/memory.max",
            "/etc/hostname",
        ]))
        .collect()
        .await;
    assert_eq!(
        heads.stdout_text(),
        format!(
            "==> /sys/fs/cgroup/memory.max <==\n{}\n\n==> /etc/hostname <==\n{}\n",
            4u64 << 30,
            lab.spec.pod_name
        )
    );
    let script = lab.handle.exec(sh("echo a; false && echo no; false || echo b; test -e /proc/meminfo && echo c; if [ -e /nope ]; then echo d; else echo e; fi; exit 3; echo never")).collect().await;
    assert_eq!(
        (script.stdout_text(), script.code),
        ("a\nb\nc\ne\n".to_string(), Some(3))
    );
    let date = lab.handle.exec(argv(&["date", "+%s"])).collect().await;
    let secs: i64 = date.stdout_text().trim().parse().expect("epoch seconds");
    assert!((secs - chrono::Utc::now().timestamp()).abs() < 60);
    let bad_date = lab.handle.exec(argv(&["date", "+%Q"])).collect().await;
    assert_eq!(bad_date.code, Some(1), "{}", bad_date.stderr_text());
    // Command substitution, quoted (one word) and unquoted (split into fields).
    let subst = lab
        .handle
        .exec(sh(
            "echo \"@@ $(cat /etc/hostname) $(date +%s)\"; echo $(echo a; echo b) $(true) c",
        ))
        .collect()
        .await;
    let out = subst.stdout_text();
    let mut lines = out.lines();
    let first: Vec<&str> = lines.next().expect("first line").split(' ').collect();
    assert_eq!(first[..2], ["@@", lab.spec.pod_name.as_str()], "{out}");
    assert!(first[2].parse::<i64>().is_ok(), "{out}");
    assert_eq!(lines.next(), Some("a b c"), "{out}");
    let syntax = lab.handle.exec(sh("while :; do echo")).collect().await;
    assert_eq!(syntax.code, Some(2));
    assert!(
        syntax.stderr_text().starts_with("sh: 1: "),
        "{}",
        syntax.stderr_text()
    );
    lab.handle.stop().await;
}

/// Samples of a streaming loop, split at `@@` lines.
async fn samples(stream: &mut ExecStream, n: usize) -> Vec<String> {
    let mut buf = String::new();
    loop {
        let parts: Vec<&str> = buf.split("@@\n").collect();
        if parts.len() > n {
            return parts[..n].iter().map(|s| s.to_string()).collect();
        }
        match tokio::time::timeout(DEADLINE, stream.recv()).await {
            Ok(Some(ExecChunk::Stdout(b))) => buf.push_str(&String::from_utf8_lossy(&b)),
            Ok(Some(other)) => panic!("loop ended early: {other:?} after {buf:?}"),
            Ok(None) => panic!("stream closed after {buf:?}"),
            Err(_) => panic!("no sample within {DEADLINE:?}"),
        }
    }
}

#[tokio::test]
async fn streaming_loop_samples_until_dropped() {
    let mut lab = start_listening(profile("azure-3b"), Options::default()).await;
    let mut stream = lab.handle.exec(sh(
        "while :; do head -n 50 /sys/fs/cgroup/memory.current /sys/fs/cgroup/memory.stat /sys/fs/cgroup/memory.events; echo @@; sleep 0.05; done",
    ));
    let first = samples(&mut stream, 3).await;
    for s in &first {
        assert!(
            s.starts_with("==> /sys/fs/cgroup/memory.current <==\n"),
            "{s}"
        );
        assert!(
            s.contains("\n\n==> /sys/fs/cgroup/memory.events <==\nlow 0\n"),
            "{s}"
        );
        assert!(s.ends_with("oom_kill 0\noom_group_kill 0\n"), "{s}");
    }
    assert_eq!(lab.handle.running_execs(), 1);
    // The samples follow the runtime: load a model while streaming and see it.
    load(&mut lab, "llama3.2:3b").await;
    let current = lab.handle.memory().current_bytes;
    let mut seen = false;
    for _ in 0..50 {
        let s = samples(&mut stream, 1).await.remove(0);
        if s.starts_with(&format!(
            "==> /sys/fs/cgroup/memory.current <==\n{current}\n"
        )) {
            seen = true;
            break;
        }
    }
    assert!(seen, "the loaded model never showed in the stream");
    drop(stream);
    wait_until("the loop to stop after the stream was dropped", || {
        lab.handle.running_execs() == 0
    })
    .await;
    lab.handle.stop().await;
}
