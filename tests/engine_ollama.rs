//! The lab with the real engine: each pod's serving container is a real `ollama serve`
//! (v0.12.6, built by scripts/peers.sh) with the real models (smollm2:135m, gemma3:270m), in
//! its own memory cgroup. These tests need the peers and root (cgroups): they are ignored by
//! a plain `cargo test` (visibly) and run by `.ci/run` after the peers script, with
//! `cargo test --test engine_ollama -- --ignored`; there a missing peer fails with the reason.

use readygap_lab::engine::EngineKind;
use readygap_lab::engine::ollama::AsReal;
use readygap_lab::engine::profiles::resolve;
use readygap_lab::kube::resources::PODS;
use readygap_lab::runtime::RuntimeHandle;
use readygap_lab::serve::{LabHandle, LabOptions, serve};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

const NEEDS: &str = "needs the real Ollama peers (scripts/peers.sh) and root for cgroups";

/// One lab at a time: pod IPs are a process-wide pool and two real Ollamas would share the
/// two cores.
static ONE_LAB: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn peers_or_fail() {
    let peer = readygap_lab::engine::OllamaPeer::from_env();
    if let Some(why) = peer.missing() {
        panic!("{NEEDS}: {why}");
    }
}

async fn real_lab(model: &str) -> LabHandle {
    peers_or_fail();
    let p = resolve(EngineKind::Ollama, "real-smollm2", Some(model)).expect("real profile");
    let mut o = LabOptions::new(p);
    o.engine = EngineKind::Ollama;
    let lab = serve(o).await.expect("lab with the real engine starts");
    lab.wait_ready(Duration::from_secs(120))
        .await
        .expect("the real pod becomes Ready");
    lab
}

/// The live (not terminating) serving pod: (name, IP, runtime handle).
fn serving_pod(lab: &LabHandle) -> Option<(String, String, Arc<RuntimeHandle>)> {
    let c = lab.cluster();
    let pods = c.store.list(PODS, Some(&lab.namespace)).0;
    pods.iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .find_map(|p| {
            let name = p["metadata"]["name"].as_str()?.to_string();
            let ip = p["status"]["podIP"].as_str()?.to_string();
            let rt = c.runtime_of(&lab.namespace, &name)?;
            rt.is_listening().then_some((name, ip, rt))
        })
}

async fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

async fn post(base: &str, path: &str, body: Value) -> (u16, Value) {
    let r = http()
        .post(format!("{base}{path}"))
        .json(&body)
        .timeout(Duration::from_secs(300))
        .send()
        .await
        .expect("request sent");
    let status = r.status().as_u16();
    let text = r.text().await.unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

async fn get(base: &str, path: &str) -> (u16, Value) {
    let r = http()
        .get(format!("{base}{path}"))
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .expect("request sent");
    let status = r.status().as_u16();
    let text = r.text().await.unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn pid_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Ollama peers (scripts/peers.sh) and root for cgroups"]
async fn a_lab_pod_is_a_real_ollama_in_its_own_cgroup() {
    let _one = ONE_LAB.lock().await;
    let lab = real_lab("smollm2:135m").await;
    let (pod, ip, rt) = wait_for("a listening pod", Duration::from_secs(60), || {
        serving_pod(&lab)
    })
    .await;
    let real = rt.as_real().expect("the real engine's container");
    let base = format!("http://{ip}:11434");
    // The real server, bound to the pod's address, with its version linked in.
    let (s, v) = get(&base, "/api/version").await;
    assert_eq!((s, v["version"].as_str()), (200, Some("0.12.6")), "{v}");
    assert!(rt.addr().to_string().starts_with(&ip));
    // Its cgroup: the container's limit, a small idle footprint.
    let idle = rt.memory();
    assert_eq!(idle.limit_bytes, 1 << 30);
    assert!(
        idle.current_bytes < 200 << 20,
        "idle {}",
        idle.current_bytes
    );
    // Exec runs the real command in the container: the cgroup file is the real one, the env
    // is the pod spec's.
    let out = rt
        .exec(vec![
            "cat".into(),
            "/sys/fs/cgroup/memory/memory.limit_in_bytes".into(),
        ])
        .collect()
        .await;
    let cg_limit = std::fs::read_to_string(real.cgroup_dir().join("memory.limit_in_bytes"))
        .unwrap_or_default();
    if real.cgroup_dir().join("memory.limit_in_bytes").exists() {
        assert_eq!(
            (out.code, out.stdout_text().trim()),
            (Some(0), cg_limit.trim())
        );
    }
    let env = rt
        .exec(vec![
            "sh".into(),
            "-c".into(),
            "echo $OLLAMA_KEEP_ALIVE $OLLAMA_HOST; cat /proc/self/cgroup".into(),
        ])
        .collect()
        .await;
    assert_eq!(env.code, Some(0), "{}", env.stderr_text());
    assert!(
        env.stdout_text().starts_with(&format!("24h {ip}:11434")),
        "{}",
        env.stdout_text()
    );
    let cg_name = real
        .cgroup_dir()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    assert!(
        env.stdout_text().contains(&cg_name),
        "exec ran outside the cgroup: {}",
        env.stdout_text()
    );
    // A real load: Ollama's own load_duration, memory rising in the real cgroup.
    let (s, g) = post(&base, "/api/generate", json!({"model": "smollm2:135m", "prompt": "Say hi", "stream": false, "options": {"num_predict": 4}})).await;
    assert_eq!(s, 200, "{g}");
    assert_eq!(g["done"], true);
    assert!(g["load_duration"].as_u64().unwrap_or(0) > 1_000_000, "{g}");
    let loaded = rt.memory();
    assert!(
        loaded.current_bytes > idle.current_bytes + (50 << 20),
        "memory.usage rose from {} to {}",
        idle.current_bytes,
        loaded.current_bytes
    );
    let resident = wait_for("/api/ps residency", Duration::from_secs(5), || {
        let r = rt.resident();
        (!r.is_empty()).then_some(r)
    })
    .await;
    assert_eq!(resident[0].0, "smollm2:135m");
    // The container log is the process's output.
    let log = real.log_text();
    assert!(log.contains("Listening on"), "{log}");
    // Delete: SIGTERM ends the process and its runner; the cgroup goes; the replacement
    // finds the models on the PVC.
    let pid = real.pid();
    let cgdir = real.cgroup_dir().to_path_buf();
    lab.cluster()
        .delete_pod(&lab.namespace, &pod, Some(30))
        .expect("delete accepted");
    // Its exit status is kept when the lab reaps it; a zombie is already not alive.
    let code = wait_for(
        "the old process to be reaped",
        Duration::from_secs(30),
        || real.exit_code(),
    )
    .await;
    assert!(!pid_alive(pid), "pid {pid} reaped but still running");
    assert_eq!(code, 0, "SIGTERM is a clean exit: {}", real.log_text());
    wait_for("the old cgroup to go", Duration::from_secs(10), || {
        (!cgdir.exists()).then_some(())
    })
    .await;
    let (_, ip2, _) = wait_for("the replacement pod", Duration::from_secs(90), || {
        serving_pod(&lab).filter(|(n, _, _)| *n != pod)
    })
    .await;
    let (s, tags) = get(&format!("http://{ip2}:11434"), "/api/tags").await;
    assert_eq!(s, 200);
    let names: Vec<&str> = tags["models"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["name"].as_str())
        .collect();
    assert!(
        names.contains(&"smollm2:135m") && names.contains(&"gemma3:270m"),
        "{names:?}"
    );
    lab.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Ollama peers (scripts/peers.sh) and root for cgroups"]
async fn run_lab_engine_ollama_completes_every_mark_with_real_load_and_memory() {
    use clap::Parser;
    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        args: readygap::args::RunArgs,
    }
    let _one = ONE_LAB.lock().await;
    peers_or_fail();
    let args = Wrap::try_parse_from([
        "readygap",
        "--lab",
        "--engine",
        "ollama",
        "--model",
        "smollm2:135m",
        "--trials",
        "2",
        "--cooldown",
        "1s",
        "--format",
        "json",
    ])
    .expect("arguments parse")
    .args;
    let out = tokio::time::timeout(
        Duration::from_secs(600),
        readygap::commands::run::run_with(args, tokio_util::sync::CancellationToken::new()),
    )
    .await
    .expect("two real trials end within 10 minutes")
    .expect("the run ends");
    assert_eq!(out.trials.len(), 2, "{}", out.stdout);
    for t in &out.trials {
        assert_eq!(t.status, readygap_core::timeline::TrialStatus::Ok, "{t:?}");
        let m = &t.marks;
        for (name, mark) in [
            ("t0", m.t0),
            ("t1", m.t1),
            ("t2", m.t2),
            ("t3", m.t3),
            ("t4", m.t4),
        ] {
            assert!(mark.is_some(), "trial {} lacks {name}: {t:?}", t.index);
        }
        // Ollama's own load_duration of a fresh process: the model really loaded.
        let load = t.durations.load_ns.expect("load_duration reported");
        assert!(load > 1_000_000, "load_duration {load} ns");
        // The memory sample after T4 is the real cgroup's: more than an idle server.
        let after = t.memory_after.expect("memory after T4");
        assert!(after > 60 << 20, "memory after T4 {after}");
        // The lab's Deployment has an HTTP readiness probe: the real server's endpoint was
        // traffic-eligible while the real model still loaded.
        assert!(
            t.verdicts.iter().any(|v| v == "shallow_readiness"),
            "trial {}: {:?}",
            t.index,
            t.verdicts
        );
    }
}

/// `readygap run` of 5 trials against the lab with the real engine (warm, or `--cold` with
/// the lab node reached as `local`): (the median of Ollama's own load_duration in seconds,
/// the cold steps' cache drops from the recording).
/// `/proc/vmstat`'s `pgpgin`: kB this machine has read from block devices so far.
fn pgpgin_kb() -> u64 {
    std::fs::read_to_string("/proc/vmstat")
        .expect("/proc/vmstat")
        .lines()
        .find_map(|l| l.strip_prefix("pgpgin ")?.trim().parse().ok())
        .expect("pgpgin in /proc/vmstat")
}

/// The size in kB of `model`'s weights file, from its manifest in the peers' models dir.
fn model_kb(model: &str) -> u64 {
    let (name, tag) = model.split_once(':').unwrap();
    let dir = std::env::var("READYGAP_OLLAMA_MODELS").expect("READYGAP_OLLAMA_MODELS");
    let path = format!("{dir}/manifests/registry.ollama.ai/library/{name}/{tag}");
    let manifest: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    manifest["layers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["mediaType"] == "application/vnd.ollama.image.model")
        .and_then(|l| l["size"].as_u64())
        .expect("a model layer")
        / 1024
}

/// 5 trials of the real engine (`--cold`: each after an unload and a page-cache drop): the
/// median `load_duration` in s, the drops, and the kB read from disk meanwhile.
fn real_trials(cold: bool) -> (f64, Vec<readygap_core::event::CacheDrop>, u64) {
    let read_before = pgpgin_kb();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("trials.jsonl");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_readygap"));
    cmd.args([
        "run",
        "--lab",
        "--engine",
        "ollama",
        "--model",
        "smollm2:135m",
    ])
    .args([
        "--trials",
        "5",
        "--cooldown",
        "1s",
        "--format",
        "json",
        "--record",
    ])
    .arg(&rec);
    if cold {
        cmd.args(["--cold", "--node-access", "local"]);
    }
    let out = cmd.output().expect("readygap run");
    assert!(
        out.status.success(),
        "5 real trials (cold {cold}): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).expect("the JSON report");
    let file = &report["files"][0];
    assert_eq!(file["trial_count"], 5, "{file}");
    let load = &file["metrics"]["load_duration"];
    assert_eq!(
        load["n"], 5,
        "every trial has Ollama's load_duration: {load}"
    );
    let drops = readygap_core::record::jsonl::read(&rec)
        .unwrap()
        .events
        .into_iter()
        .filter_map(|e| match e.kind {
            readygap_core::event::EventKind::CachesDropped(d) => Some(d),
            _ => None,
        })
        .collect();
    let read = pgpgin_kb() - read_before;
    (load["median"].as_f64().expect("a median"), drops, read)
}

/// The cold-cache trial for real: `run --cold --node-access local` unloads the model and drops
/// this machine's page cache (as root, /proc/sys/vm/drop_caches) before each T0; `Cached:`
/// falls, and each of the 5 cold loads reads the model's weights from disk again (the
/// machine's `pgpgin`), which the 5 warm ones do not (at most the first, if nothing had
/// cached the file). The load times are printed, not asserted: on this VM the disk reads the
/// 94 MiB of smollm2 in ~50 ms, within the noise of the runner's start (measured: warm
/// 0.785 s, cold 0.806 s medians; an earlier run 0.442 s and 0.684 s).
#[test]
#[ignore = "needs the real Ollama peers (scripts/peers.sh) and root for cgroups"]
fn a_real_cold_cache_trial_drops_the_page_cache_and_reads_the_model_from_disk() {
    let _one = ONE_LAB.blocking_lock();
    peers_or_fail();
    let model = model_kb("smollm2:135m");
    let (warm, none, warm_read) = real_trials(false);
    assert!(none.is_empty(), "warm trials drop nothing: {none:?}");
    let (cold, drops, cold_read) = real_trials(true);
    assert_eq!(drops.len(), 5, "one drop per cold trial: {drops:?}");
    for d in &drops {
        assert!(d.error.is_none() && d.dropped, "{d:?}");
        let (before, after) = (d.cached_kb_before.unwrap(), d.cached_kb_after.unwrap());
        assert!(after < before, "Cached: fell ({before} kB -> {after} kB)");
    }
    eprintln!(
        "load_duration medians: warm {warm:.3} s, cold {cold:.3} s; read from disk: warm \
         {warm_read} kB, cold {cold_read} kB (model {model} kB); Cached: {:?} kB",
        drops
            .iter()
            .map(|d| (d.cached_kb_before.unwrap(), d.cached_kb_after.unwrap()))
            .collect::<Vec<_>>()
    );
    assert!(
        cold_read >= 5 * model * 9 / 10,
        "each cold load reads the model ({model} kB) from disk: {cold_read} kB read in 5"
    );
    assert!(
        warm_read < 2 * model,
        "warm loads come from the page cache: {warm_read} kB read in 5 (model {model} kB)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Ollama peers (scripts/peers.sh) and root for cgroups"]
async fn the_official_python_client_and_the_real_cli_work_against_a_lab_pod() {
    let _one = ONE_LAB.lock().await;
    let lab = real_lab("smollm2:135m").await;
    let (_, ip, rt) = wait_for("a listening pod", Duration::from_secs(60), || {
        serving_pod(&lab)
    })
    .await;
    let host = format!("http://{ip}:11434");
    let script = r#"
import json, sys, ollama
c = ollama.Client(host=sys.argv[1])
r = c.generate(model="smollm2:135m", prompt="Say hi", options={"num_predict": 4}, keep_alive="10m")
ps = c.ps()
print(json.dumps({"done": r.done, "load": r.load_duration,
                  "ps": [[m.model, m.size] for m in ps.models],
                  "list": sorted(m.model for m in c.list().models)}))
"#;
    let py = tokio::process::Command::new("python3")
        .args(["-c", script, &host])
        .output()
        .await
        .expect("python3 runs");
    assert!(
        py.status.success(),
        "python client: {}",
        String::from_utf8_lossy(&py.stderr)
    );
    let v: Value = serde_json::from_slice(&py.stdout).expect("client output is JSON");
    assert_eq!(v["done"], true, "{v}");
    assert!(
        v["list"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m == "smollm2:135m"),
        "{v}"
    );
    let client_size = v["ps"][0][1]
        .as_u64()
        .expect("the client sees the model resident");
    // The real CLI against the pod prints the same residency the lab's handle reads.
    let bin = readygap_lab::engine::OllamaPeer::from_env().bin;
    let cli = tokio::process::Command::new(&bin)
        .arg("ps")
        .env("OLLAMA_HOST", format!("{ip}:11434"))
        .output()
        .await
        .expect("ollama ps runs");
    let text = String::from_utf8_lossy(&cli.stdout).to_string();
    assert!(
        cli.status.success() && text.contains("smollm2:135m"),
        "ollama ps: {text}"
    );
    let seen = wait_for("the handle's residency", Duration::from_secs(5), || {
        let r = rt.resident();
        (!r.is_empty()).then_some(r)
    })
    .await;
    assert_eq!(seen, vec![("smollm2:135m".to_string(), client_size)]);
    lab.shutdown().await;
}

/// The lab with the real engine under `limit` bytes.
async fn real_lab_with_limit(model: &str, limit: u64) -> LabHandle {
    peers_or_fail();
    let mut p = resolve(EngineKind::Ollama, "real-smollm2", Some(model)).expect("real profile");
    p.memory_limit_bytes = limit;
    let mut o = LabOptions::new(p);
    o.engine = EngineKind::Ollama;
    let lab = serve(o).await.expect("lab with the real engine starts");
    lab.wait_ready(Duration::from_secs(120))
        .await
        .expect("pod Ready");
    lab
}

/// Anonymous memory of the container's cgroup (what reclaim cannot give back).
fn anon(rt: &RuntimeHandle) -> u64 {
    rt.memory().anon_bytes
}

async fn load(base: &str, model: &str, keep_alive: &str) -> (u16, Value) {
    post(
        base,
        "/api/generate",
        json!({"model": model, "prompt": "Say hi", "stream": false, "keep_alive": keep_alive,
               "options": {"num_predict": 2}}),
    )
    .await
}

async fn unload_all(base: &str, rt: &RuntimeHandle) {
    for m in ["smollm2:135m", "gemma3:270m"] {
        let _ = post(base, "/api/generate", json!({"model": m, "keep_alive": 0})).await;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let (_, ps) = get(base, "/api/ps").await;
        if ps["models"].as_array().is_some_and(|a| a.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = rt;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Ollama peers (scripts/peers.sh) and root for cgroups"]
async fn overlapping_residency_is_killed_by_the_kernel_in_the_real_cgroup() {
    let _one = ONE_LAB.lock().await;
    // 1. Measure each model alone under a generous limit: /api/ps size and the cgroup's
    //    anonymous memory with the model resident.
    let lab = real_lab_with_limit("smollm2:135m", 2 << 30).await;
    let (_, ip, rt) = wait_for("a listening pod", Duration::from_secs(60), || {
        serving_pod(&lab)
    })
    .await;
    let base = format!("http://{ip}:11434");
    let idle = anon(&rt);
    let mut alone = Vec::new();
    for m in ["smollm2:135m", "gemma3:270m"] {
        let (s, g) = load(&base, m, "10m").await;
        assert_eq!(s, 200, "{m} alone under 2 GiB: {g}");
        let (_, ps) = get(&base, "/api/ps").await;
        let size = ps["models"][0]["size"].as_u64().expect("ps size");
        alone.push((m, size, anon(&rt)));
        unload_all(&base, &rt).await;
    }
    lab.shutdown().await;
    let (a1, a2) = (alone[0].2, alone[1].2);
    // 2. A limit where each alone fits and both do not: halfway between the larger one
    //    alone and both together (idle counted once).
    let both = a1 + a2 - idle;
    let limit = (a1.max(a2) + both) / 2;
    eprintln!("alone: {alone:?}; idle anon {idle}; both ~{both}; limit {limit}");
    assert!(
        limit > a1.max(a2) + (16 << 20) && limit + (16 << 20) < both,
        "no room for a limit between {a1}/{a2} and {both}"
    );
    // 3. Under that limit: smollm2 resident, then gemma3 loads: the kernel kills.
    let lab = real_lab_with_limit("smollm2:135m", limit).await;
    let (pod, ip, rt) = wait_for("a listening pod", Duration::from_secs(60), || {
        serving_pod(&lab)
    })
    .await;
    let real = rt.as_real().unwrap();
    let base = format!("http://{ip}:11434");
    let (oom0, fail0) = real.oom_counters();
    let (s, g) = load(&base, "smollm2:135m", "24h").await;
    assert_eq!(s, 200, "smollm2 alone fits under {limit}: {g}");
    let (s, g) = load(&base, "gemma3:270m", "24h").await;
    let (oom1, fail1) = real.oom_counters();
    eprintln!(
        "gemma3 after smollm2 under {limit}: {s} {g}; oom_kill {oom0}->{oom1}; failcnt {fail0}->{fail1}"
    );
    assert!(
        oom1 > oom0,
        "the cgroup's oom_kill rose ({oom0} -> {oom1}); answer {s} {g}"
    );
    assert!(fail1 > fail0, "failcnt rose");
    assert_ne!(s, 200, "the overlapping load cannot succeed: {g}");
    // On cgroup v1 (no memory.oom.group) the kernel killed a runner: the container lives on.
    let restarts =
        lab.cluster().store.get(PODS, &lab.namespace, &pod).unwrap()["status"]["containerStatuses"]
            [0]["restartCount"]
            .as_i64();
    let (_, ps) = get(&base, "/api/ps").await;
    eprintln!(
        "restartCount after the kill: {restarts:?}; main process alive: {}; /api/ps: {ps}",
        pid_alive(real.pid())
    );
    if real.cgroup_dir().join("memory.oom_control").exists() {
        // cgroup v1 has no memory.oom.group: the kernel killed one runner process, the
        // container (its `ollama serve`) lives on and was not restarted.
        assert!(
            pid_alive(real.pid()),
            "the main process survives a runner kill"
        );
        assert_eq!(restarts, Some(0));
        assert!(!real.oom_killed());
    }
    // 4. The same load alone succeeds under the same limit.
    unload_all(&base, &rt).await;
    let (s, g) = load(&base, "gemma3:270m", "24h").await;
    assert_eq!(s, 200, "gemma3 alone under {limit}: {g}");
    lab.shutdown().await;
}

/// The shape of a JSON value: field names and value types, recursively (arrays: the shape of
/// their first element), as `path: type` lines.
fn shape(v: &Value, path: &str, out: &mut Vec<String>) {
    let ty = match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    out.push(format!("{path}: {ty}"));
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                shape(x, &format!("{path}.{k}"), out);
            }
        }
        Value::Array(a) => {
            if let Some(x) = a.first() {
                shape(x, &format!("{path}[]"), out);
            }
        }
        _ => {}
    }
}

/// One step of the sequence: its label, status code and the shape of its body (the first
/// and last line of a stream).
type Step = (String, u16, Vec<String>);

async fn step(label: &str, r: reqwest::RequestBuilder) -> Step {
    let r = r
        .timeout(Duration::from_secs(300))
        .send()
        .await
        .expect("request sent");
    let status = r.status().as_u16();
    let text = r.text().await.unwrap_or_default();
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    match lines.as_slice() {
        [one] => match serde_json::from_str::<Value>(one) {
            Ok(v) => shape(&v, "", &mut out),
            Err(_) => out.push(format!("text: {one}")),
        },
        [first, .., last] => {
            for (which, l) in [("first", first), ("last", last)] {
                match serde_json::from_str::<Value>(l) {
                    Ok(v) => shape(&v, which, &mut out),
                    Err(_) => out.push(format!("{which}: not JSON")),
                }
            }
        }
        [] => out.push("empty".into()),
    }
    (label.to_string(), status, out)
}

/// The request sequence of the comparison, against one runtime at `base`.
async fn sequence(base: &str) -> Vec<Step> {
    let c = http();
    let body_of = |model: &str, stream: bool| json!({"model": model, "prompt": "Say hi", "stream": stream, "options": {"num_predict": 3}});
    let mut steps = vec![
        step("GET /", c.get(format!("{base}/"))).await,
        step("GET /api/version", c.get(format!("{base}/api/version"))).await,
        step("GET /api/tags", c.get(format!("{base}/api/tags"))).await,
        step("GET /api/ps before", c.get(format!("{base}/api/ps"))).await,
    ];
    // A load, with /api/ps asked while it runs.
    let load = tokio::spawn(step(
        "POST /api/generate (load, stream false)",
        c.post(format!("{base}/api/generate"))
            .json(&body_of("smollm2:135m", false)),
    ));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (label, status, during) =
        step("GET /api/ps during a load", c.get(format!("{base}/api/ps"))).await;
    // What /api/ps lists mid-load differs with timing; the status and top-level shape count.
    steps.push((
        label,
        status,
        during
            .into_iter()
            .filter(|l| l.starts_with(": ") || l.starts_with(".models:"))
            .collect(),
    ));
    steps.push(load.await.unwrap());
    steps.push(step("GET /api/ps after", c.get(format!("{base}/api/ps"))).await);
    steps.push(
        step(
            "POST /api/generate stream",
            c.post(format!("{base}/api/generate"))
                .json(&body_of("smollm2:135m", true)),
        )
        .await,
    );
    steps.push(
        step(
            "POST /api/chat",
            c.post(format!("{base}/api/chat")).json(&json!({"model": "smollm2:135m", "stream": false,
                "messages": [{"role": "user", "content": "Say hi"}], "options": {"num_predict": 3}})),
        )
        .await,
    );
    steps.push(
        step(
            "POST /api/show",
            c.post(format!("{base}/api/show"))
                .json(&json!({"model": "smollm2:135m"})),
        )
        .await,
    );
    steps.push(
        step(
            "POST /api/generate missing model",
            c.post(format!("{base}/api/generate"))
                .json(&body_of("nope:1b", false)),
        )
        .await,
    );
    steps.push(
        step(
            "POST /api/generate keep_alive 0 (unload)",
            c.post(format!("{base}/api/generate"))
                .json(&json!({"model": "smollm2:135m", "keep_alive": 0})),
        )
        .await,
    );
    // The reply comes before the unload (server/routes.go, server/sched.go): right after it,
    // ps still lists the model (measured on the real one: gone 68–82 ms after the reply).
    steps.push(
        step(
            "GET /api/ps right after the unload's reply",
            c.get(format!("{base}/api/ps")),
        )
        .await,
    );
    // A request while another model loads.
    let other = tokio::spawn(step(
        "POST /api/generate gemma3 (loading)",
        c.post(format!("{base}/api/generate"))
            .json(&body_of("gemma3:270m", false)),
    ));
    tokio::time::sleep(Duration::from_millis(100)).await;
    steps.push(
        step(
            "POST /api/generate smollm2 while gemma3 loads",
            c.post(format!("{base}/api/generate"))
                .json(&body_of("smollm2:135m", false)),
        )
        .await,
    );
    steps.push(other.await.unwrap());
    steps
}

/// Differences between the real Ollama and the simulation that are known and documented:
/// (step, shape line present on one side only).
const KNOWN: &[(&str, &str)] = &[
    // GGUF metadata keys that SmolLM2's file carries and the library's llama3.2 files (what
    // the simulation renders for every model) do not: `model_info` is the file's metadata.
    ("POST /api/show", ".model_info.general.organization: string"),
    (
        "POST /api/show",
        ".model_info.tokenizer.ggml.add_bos_token: bool",
    ),
    (
        "POST /api/show",
        ".model_info.tokenizer.ggml.add_space_prefix: bool",
    ),
    (
        "POST /api/show",
        ".model_info.tokenizer.ggml.padding_token_id: number",
    ),
    (
        "POST /api/show",
        ".model_info.tokenizer.ggml.unknown_token_id: number",
    ),
    // A library model has a license layer; a GGUF imported with `FROM ./file.gguf` (the
    // peers' models) has none, so real Ollama leaves `license` out.
    ("POST /api/show", ".license: string"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Ollama peers (scripts/peers.sh) and root for cgroups"]
async fn the_simulated_runtime_answers_like_the_real_ollama() {
    let _one = ONE_LAB.lock().await;
    let mut runs = Vec::new();
    for engine in [EngineKind::Ollama, EngineKind::Simulated] {
        peers_or_fail();
        let p = resolve(engine, "real-smollm2", None).expect("profile");
        let mut o = LabOptions::new(p);
        o.engine = engine;
        let lab = serve(o).await.expect("lab starts");
        lab.wait_ready(Duration::from_secs(120))
            .await
            .expect("ready");
        let (_, ip, _) = wait_for("a listening pod", Duration::from_secs(60), || {
            serving_pod(&lab)
        })
        .await;
        runs.push(sequence(&format!("http://{ip}:11434")).await);
        lab.shutdown().await;
    }
    let (real, sim) = (&runs[0], &runs[1]);
    let mut diffs = Vec::new();
    for ((label, rs, rshape), (_, ss, sshape)) in real.iter().zip(sim) {
        if rs != ss {
            diffs.push(format!("{label}: status real {rs}, simulated {ss}"));
        }
        for l in rshape.iter().filter(|l| !sshape.contains(l)) {
            if !KNOWN.iter().any(|(s, k)| s == label && k == l) {
                diffs.push(format!("{label}: real has `{l}`, the simulation not"));
            }
        }
        for l in sshape.iter().filter(|l| !rshape.contains(l)) {
            if !KNOWN.iter().any(|(s, k)| s == label && k == l) {
                diffs.push(format!(
                    "{label}: the simulation has `{l}`, real Ollama not"
                ));
            }
        }
    }
    assert!(
        diffs.is_empty(),
        "{} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}

/// The limit of the overlapping-residency case: halfway between gemma3:270m alone and both
/// models resident (measured on this machine's real cgroup: smollm2 247,279,616 B and gemma3
/// 547,553,280 B of anon memory alone, both ≈ 787,668,992 B; see
/// `overlapping_residency_is_killed_by_the_kernel_in_the_real_cgroup`).
const OVERLAP_LIMIT: u64 = 667_611_136;

#[test]
#[ignore = "needs the real Ollama peers (scripts/peers.sh) and root for cgroups"]
fn readygaps_verdict_on_the_real_kill_names_both_models_and_the_limit() {
    use readygap_core::event::EventKind;
    use readygap_core::residency::VerdictKind;
    let _one = ONE_LAB.blocking_lock();
    peers_or_fail();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("oom.jsonl");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_readygap"))
        .args([
            "run",
            "--lab",
            "--engine",
            "ollama",
            "--model",
            "gemma3:270m",
        ])
        .args(["--preload-model", "smollm2:135m", "--lab-memory-limit"])
        .arg(OVERLAP_LIMIT.to_string())
        .args([
            "--trials",
            "1",
            "--cooldown",
            "1s",
            "--format",
            "json",
            "--record",
        ])
        .arg(&rec)
        .output()
        .expect("readygap run");
    assert_eq!(
        out.status.code(),
        Some(1),
        "the trial fails: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recording = readygap_core::record::jsonl::read(&rec).unwrap();
    let state = readygap_core::state::State::from_events(&recording.events);
    // On cgroup v1 the kernel kills the largest process (Ollama's runner) and the container
    // lives; with v2's memory.oom.group the whole container dies.
    let kill = state
        .oom
        .verdicts
        .iter()
        .find(|v| {
            matches!(
                v.kind,
                VerdictKind::RunnerOom | VerdictKind::OverlappingResidencyOom
            )
        })
        .unwrap_or_else(|| panic!("no kill verdict: {:#?}", state.oom.verdicts));
    let mut names: Vec<&str> = kill.models.iter().map(|(n, _)| n.as_str()).collect();
    names.sort();
    assert_eq!(names, ["gemma3:270m", "smollm2:135m"], "{}", kill.message);
    assert_eq!(kill.limit, Some(OVERLAP_LIMIT), "{}", kill.message);
    // Each size is the real /api/ps size readygap read (Ollama 0.12.6 lists gemma3 while it
    // loads, so its size is known before the kill).
    for (name, size) in &kill.models {
        let ps_size = recording
            .events
            .iter()
            .rev()
            .filter_map(|e| match &e.kind {
                EventKind::Residency { models, .. } => models.iter().find(|m| &m.name == name),
                _ => None,
            })
            .map(|m| m.size)
            .next()
            .unwrap_or_else(|| panic!("{name} never in /api/ps"));
        assert_eq!(*size, ps_size, "{name}: {}", kill.message);
        assert!(ps_size > 100 << 20, "{name}: a real size {ps_size}");
    }
    eprintln!(
        "{:?}: {} (models {:?}, limit {OVERLAP_LIMIT} B)",
        kill.kind, kill.message, kill.models
    );
}

// ---- The real llama.cpp engine: each pod's serving container is a real llama-server. ----

const NEEDS_LLAMA: &str =
    "needs the real llama-server peer (scripts/peers.sh) and root for cgroups";

fn llama_peers_or_fail() {
    let peer = readygap_lab::engine::llama_peer_from_env();
    if let Some(why) = readygap_lab::engine::llama_peer_missing(&peer) {
        panic!("{NEEDS_LLAMA}: {why}");
    }
}

/// The events of a recording (JSON lines after the header).
fn recorded(path: &std::path::Path) -> Vec<readygap_core::event::Event> {
    std::fs::read_to_string(path)
        .expect("recording written")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// `readygap run --lab --engine llamacpp` with `extra` arguments: its output and recording.
async fn run_llamacpp(
    trials: &str,
    extra: &[&str],
) -> (
    readygap_live::run::RunOutput,
    Vec<readygap_core::event::Event>,
) {
    use clap::Parser;
    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        args: readygap::args::RunArgs,
    }
    llama_peers_or_fail();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("run.jsonl");
    let mut argv = vec![
        "readygap",
        "--lab",
        "--engine",
        "llamacpp",
        "--model",
        "gemma3:270m",
        "--trials",
        trials,
        "--cooldown",
        "1s",
        "--format",
        "json",
        "--record",
        rec.to_str().unwrap(),
    ];
    argv.extend_from_slice(extra);
    let args = Wrap::try_parse_from(argv).expect("arguments parse").args;
    let out = tokio::time::timeout(
        Duration::from_secs(900),
        readygap::commands::run::run_with(args, tokio_util::sync::CancellationToken::new()),
    )
    .await
    .expect("the real trials end within 15 minutes")
    .expect("the run ends");
    let events = recorded(&rec);
    (out, events)
}

/// What every llama-server trial must show: both T2 marks, HTTP strictly first, a real
/// completion with llama-server's timings, and the cgroup's memory rising while it loads.
fn check_llamacpp_trials(
    out: &readygap_live::run::RunOutput,
    events: &[readygap_core::event::Event],
    n: usize,
) {
    use readygap_core::event::EventKind;
    assert_eq!(out.trials.len(), n, "{}", out.stdout);
    for t in &out.trials {
        assert_eq!(t.status, readygap_core::timeline::TrialStatus::Ok, "{t:?}");
        let m = &t.marks;
        let (http, ready) = (
            m.t2_http.expect("T2 HTTP answers"),
            m.t2.expect("T2 model ready"),
        );
        assert!(
            http < ready,
            "trial {}: T2 HTTP {http} not before model ready {ready}",
            t.index
        );
        assert!(m.t4.is_some(), "{t:?}");
        let d = t.durations;
        assert!(
            d.eval_tokens.is_some_and(|n| n > 0),
            "timings in the stats: {d:?}"
        );
        assert!(d.eval_ns.is_some_and(|n| n > 0), "{d:?}");
        // The T3 inference's answer.
        let id = t.inference_request.expect("T3 request");
        let answer = events.iter().find_map(|e| match &e.kind {
            EventKind::InferenceDone(r) if r.request_id == id => r.response.clone(),
            _ => None,
        });
        assert!(
            answer.is_some_and(|a| !a.trim().is_empty()),
            "a real completion"
        );
        // The new pod's cgroup memory while the model loads: up from its lowest sample before
        // T2 to the first after it by more than 48 MiB (an idle llama-server is ~11 MiB;
        // measured ~97 MiB more with gemma3 270M Q4_K_M, whose 241 MiB file is mmapped).
        let pod = t.new_pod.clone().expect("new pod");
        let samples: Vec<(readygap_core::event::Timestamp, u64)> = events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::MemorySample(s) if s.pod == pod => Some((e.ts, s.current)),
                _ => None,
            })
            .collect();
        let before = samples
            .iter()
            .filter(|(ts, _)| *ts <= ready)
            .map(|(_, b)| *b);
        let low = before
            .clone()
            .min()
            .expect("a memory sample before model ready");
        let at_ready = samples
            .iter()
            .find(|(ts, _)| *ts >= ready)
            .map(|(_, b)| *b)
            .expect("a memory sample after model ready");
        assert!(
            at_ready > low + (48 << 20),
            "trial {}: memory {low} → {at_ready} while loading",
            t.index
        );
    }
    let stats: Value = serde_json::from_str(&out.stdout).expect("json output");
    let text = stats.to_string();
    for metric in [
        "http_to_model_ready",
        "runtime_http_answers",
        "eval_tokens_per_second",
    ] {
        assert!(text.contains(metric), "{metric} in the stats: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real llama-server peer (scripts/peers.sh) and root for cgroups"]
async fn run_lab_engine_llamacpp_splits_t2_with_real_timings_and_memory() {
    let _one = ONE_LAB.lock().await;
    let (out, events) = run_llamacpp("3", &[]).await;
    check_llamacpp_trials(&out, &events, 3);
    // The runtime was guessed from the pod's image and said so.
    let session = events.iter().find_map(|e| match &e.kind {
        readygap_core::event::EventKind::Session(s) => s.runtime.clone(),
        _ => None,
    });
    assert_eq!(
        session.as_deref(),
        Some("llamacpp (image ghcr.io/ggml-org/llama.cpp:server)")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real llama-server peer (scripts/peers.sh) and root for cgroups"]
async fn run_lab_engine_llamacpp_with_direct_access() {
    let _one = ONE_LAB.lock().await;
    let (out, events) = run_llamacpp("1", &["--access", "direct", "--runtime", "llamacpp"]).await;
    check_llamacpp_trials(&out, &events, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real llama-server peer (scripts/peers.sh) and root for cgroups"]
async fn run_lab_engine_llamacpp_with_the_openai_adapter() {
    let _one = ONE_LAB.lock().await;
    // llama-server spoken to as an OpenAI server: /health (503 while loading, so T2 still
    // splits), streamed /v1/completions with usage (and llama-server's timings), on the
    // container's port 8080 (not vLLM's 8000).
    let (out, _) = run_llamacpp("1", &["--runtime", "openai"]).await;
    assert_eq!(out.trials.len(), 1, "{}", out.stdout);
    let t = &out.trials[0];
    assert!(t.is_ok(), "{t:?}");
    assert!(t.marks.t2_http.unwrap() < t.marks.t2.unwrap(), "{t:?}");
    assert!(
        t.durations.eval_tokens.is_some_and(|n| n > 0),
        "{:?}",
        t.durations
    );
}

/// With the real engine an exec probe runs its own command in the container (pkg/probe/
/// exec/exec.go: exit 0 passes): a liveness command that exits 3 fails and the kubelet
/// restarts the container, though the readiness command beside it (`true`) passes. (The
/// engine used to run the readiness command for every exec probe, so this liveness passed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real Ollama peers (scripts/peers.sh) and root for cgroups"]
async fn an_exec_liveness_probe_runs_its_own_command_in_the_real_container() {
    use k8s_openapi::api::core::v1::Pod;
    use readygap_lab::ground_truth::Transition;
    let _one = ONE_LAB.lock().await;
    let lab = real_lab("smollm2:135m").await;
    let pods: kube::Api<Pod> =
        kube::Api::namespaced(readygap_lab::testkit::client(&lab).await, &lab.namespace);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "own-liveness", "labels": {"app": "probe-test"}},
        "spec": {"containers": [{
            "name": "ollama", "image": "ollama/ollama:0.12.6",
            "ports": [{"containerPort": 11434}],
            "readinessProbe": {"exec": {"command": ["sh", "-c", "true"]}, "periodSeconds": 1},
            "livenessProbe": {"exec": {"command": ["sh", "-c", "exit 3"]},
                              "periodSeconds": 1, "timeoutSeconds": 5, "failureThreshold": 2}
        }]}
    }))
    .unwrap();
    pods.create(&Default::default(), &pod).await.unwrap();
    let gt = lab.ground_truth();
    let at = |t: Transition| {
        gt.entries()
            .iter()
            .find(|e| e.pod == "own-liveness" && e.transition == t)
            .map(|e| e.ts)
    };
    let ready = wait_for(
        "the readiness command passes",
        Duration::from_secs(60),
        || at(Transition::PodReady),
    )
    .await;
    let killed = wait_for("the liveness kill", Duration::from_secs(60), || {
        at(Transition::LivenessKilled)
    })
    .await;
    eprintln!(
        "Ready at {ready}, killed by its own liveness command {} ms later",
        (killed - ready).num_milliseconds()
    );
    lab.shutdown().await;
}
