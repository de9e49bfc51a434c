//! `readygap run` against the lab in the less common paths: exec refused (HTTP 403, as an
//! RBAC without `pods/exec` gives) falls back to the kubelet Summary API and says so; a cold
//! trial unloads the model and drops the node's page cache first; a rollout restart is a
//! trial too.
//!
//! The 403 comes from a small forwarding proxy on loopback in front of the lab that refuses
//! `pods/exec` exactly as the API server does and forwards every other request unchanged
//! (the lab itself has no switch to refuse exec).

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use clap::Parser;
use futures::TryStreamExt;
use readygap::args::RunArgs;
use readygap::commands::run::run_with;
use readygap_core::event::{EventKind, MemorySource};
use readygap_lab::ground_truth::Transition;
use readygap_lab::profile::Profile;
use readygap_lab::serve::{LabHandle, LabOptions, serve};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
struct Wrap {
    #[command(flatten)]
    args: RunArgs,
}

/// One lab at a time in this test binary (pod IPs on loopback are a process-wide pool, and a
/// lab shutting down must not overlap another's start).
static ONE_LAB: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn lab(speed: f64, seed: u64) -> LabHandle {
    let mut o = LabOptions::new(Profile::named("local-1b").unwrap());
    o.speed = speed;
    o.seed = seed;
    let lab = serve(o).await.unwrap();
    lab.wait_ready(Duration::from_secs(60)).await.unwrap();
    lab
}

struct Upstream {
    http: reqwest::Client,
    base: String,
}

async fn forward(State(up): State<Arc<Upstream>>, req: Request) -> Response {
    let path = req.uri().path().to_string();
    if path.ends_with("/exec") {
        let status = serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("pods \"{}\" is forbidden: User \"system:serviceaccount:llm-recovery-lab:readygap\" cannot create resource \"pods/exec\" in API group \"\" in the namespace \"llm-recovery-lab\"", path.rsplit('/').nth(1).unwrap_or("")),
            "reason": "Forbidden", "details": {"name": "x", "kind": "pods"}, "code": 403
        });
        return Response::builder()
            .status(403)
            .header("content-type", "application/json")
            .body(Body::from(status.to_string()))
            .unwrap();
    }
    let pq = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or(path);
    let method = req.method().clone();
    let headers = req.headers().clone();
    let body = axum::body::to_bytes(req.into_body(), 64 << 20)
        .await
        .unwrap_or_default();
    let mut r = up
        .http
        .request(method, format!("{}{pq}", up.base))
        .body(body);
    for h in ["content-type", "accept", "authorization"] {
        if let Some(v) = headers.get(h) {
            r = r.header(h, v);
        }
    }
    match r.send().await {
        Ok(resp) => {
            let mut b = Response::builder().status(resp.status().as_u16());
            if let Some(ct) = resp.headers().get("content-type") {
                b = b.header("content-type", ct);
            }
            b.body(Body::from_stream(
                resp.bytes_stream().map_err(std::io::Error::other),
            ))
            .unwrap()
        }
        Err(e) => Response::builder()
            .status(502)
            .body(Body::from(e.to_string()))
            .unwrap(),
    }
}

/// Start the refusing proxy in front of `lab`; returns a kubeconfig path pointing at it.
async fn refusing_proxy(lab: &LabHandle, dir: &std::path::Path) -> std::path::PathBuf {
    let up = Arc::new(Upstream {
        http: reqwest::Client::builder().no_proxy().build().unwrap(),
        base: lab.api_url.clone(),
    });
    let app = axum::Router::new().fallback(forward).with_state(up);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.ok();
    });
    let text = std::fs::read_to_string(&lab.kubeconfig)
        .unwrap()
        .replace(&lab.api_url, &format!("http://{addr}"));
    assert!(
        text.contains(&format!("http://{addr}")),
        "the lab kubeconfig names its URL"
    );
    let path = dir.join("kubeconfig");
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_forbidden_falls_back_to_the_summary_api_and_says_so() {
    let _one = ONE_LAB.lock().await;
    let lab = lab(4.0, 71).await;
    let dir = tempfile::tempdir().unwrap();
    let kc = refusing_proxy(&lab, dir.path()).await;
    let rec = dir.path().join("r.jsonl");
    let a = Wrap::try_parse_from([
        "readygap",
        "--kubeconfig",
        kc.to_str().unwrap(),
        "-n",
        &lab.namespace,
        "--trials",
        "1",
        "--cooldown",
        "1s",
        "--record",
        rec.to_str().unwrap(),
        "--model",
        "llama3.2:1b",
    ])
    .unwrap()
    .args;
    let out = run_with(a, CancellationToken::new()).await.expect("run");
    assert!(out.trials[0].is_ok(), "{:?}", out.trials[0].status);
    let events = readygap_core::record::jsonl::read(&rec).unwrap().events;
    let detail = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::SourceConnected { feed, detail } if feed == "memory" => Some(detail.clone()),
            _ => None,
        })
        .expect("the memory feed says which source it uses");
    assert!(
        detail.starts_with("summary API (exec forbidden:"),
        "{detail}"
    );
    assert!(
        detail.contains("pods/exec"),
        "the refusal is explained: {detail}"
    );
    let samples: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::MemorySample(s) => Some(s.clone()),
            _ => None,
        })
        .collect();
    assert!(!samples.is_empty());
    assert!(samples.iter().all(|s| s.source == MemorySource::SummaryApi));
    assert!(
        samples
            .iter()
            .any(|s| s.current > 0 && s.working_set.is_some())
    );
    // The trial still measures memory after T4 from the fallback.
    assert!(out.trials[0].memory_after.is_some_and(|m| m > 0));
    lab.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_trial_unloads_and_drops_the_page_cache_before_t0() {
    let _one = ONE_LAB.lock().await;
    let lab = lab(4.0, 72).await;
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("cold.jsonl");
    let a = Wrap::try_parse_from([
        "readygap",
        "--kubeconfig",
        lab.kubeconfig.to_str().unwrap(),
        "-n",
        &lab.namespace,
        "--trials",
        "1",
        "--cold",
        "--cooldown",
        "0s",
        "--record",
        rec.to_str().unwrap(),
        "--no-memory",
        "--model",
        "llama3.2:1b",
    ])
    .unwrap()
    .args;
    // Without --lab or --node-access, the runner guesses how to reach the node (ssh to its
    // InternalIP, nothing listens there): the cold step is recorded as failed, with why.
    let out = run_with(a.clone(), CancellationToken::new())
        .await
        .expect("run");
    let cold = out.trials[0]
        .cold
        .clone()
        .expect("the cold step is recorded");
    assert!(
        !cold.dropped
            && cold.error.as_deref().is_some_and(|e| {
                e.contains("--node-access") || e.contains("connection refused")
            }),
        "{cold:?}"
    );
    lab.shutdown().await;

    // With --lab the lab's drop-caches endpoint is used. The first cold step comes before
    // any inference warmed the model's pages; the second one follows a trial that did.
    let mut a = a;
    a.lab = Some("local-1b".into());
    a.lab_speed = 4.0;
    a.trials = 2;
    a.session.cluster.kubeconfig = None;
    a.session.cluster.namespace = None;
    let out = run_with(a, CancellationToken::new())
        .await
        .expect("run with --lab");
    assert_eq!(out.trials.len(), 2);
    for t in &out.trials {
        assert!(t.is_ok(), "{:?}", t.status);
        let cold = t.cold.clone().expect("cold step");
        assert!(
            cold.cached_kb_after.unwrap() < cold.cached_kb_before.unwrap(),
            "{cold:?}"
        );
    }
    let second = out.trials[1].cold.clone().unwrap();
    assert!(
        second.dropped,
        "after a warm trial the cache falls by more than half: {second:?}"
    );
    let events = readygap_core::record::jsonl::read(&rec).unwrap().events;
    let pos = |f: &dyn Fn(&EventKind) -> bool| events.iter().position(|e| f(&e.kind)).unwrap();
    let unload = pos(&|k| {
        matches!(
            k,
            EventKind::ActionRequested {
                action: readygap_core::event::Action::Unload { .. },
                ..
            }
        )
    });
    let dropped = pos(&|k| matches!(k, EventKind::CachesDropped(_)));
    let delete = pos(&|k| {
        matches!(
            k,
            EventKind::ActionRequested {
                action: readygap_core::event::Action::DeletePod { .. },
                ..
            }
        )
    });
    assert!(
        unload < dropped && dropped < delete,
        "unload {unload}, drop {dropped}, delete {delete}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_restart_is_a_trial() {
    let _one = ONE_LAB.lock().await;
    use k8s_openapi::api::apps::v1::Deployment;
    let lab = lab(4.0, 73).await;
    let a = Wrap::try_parse_from([
        "readygap",
        "--kubeconfig",
        lab.kubeconfig.to_str().unwrap(),
        "-n",
        &lab.namespace,
        "--trials",
        "1",
        "--replace",
        "restart",
        "--cooldown",
        "0s",
        "--no-memory",
        "--model",
        "llama3.2:1b",
    ])
    .unwrap()
    .args;
    let out = run_with(a, CancellationToken::new()).await.expect("run");
    let t = &out.trials[0];
    assert!(t.is_ok(), "{:?}", t.status);
    assert_eq!(t.trigger, "rollout restart ollama");
    let gt = lab.ground_truth().entries();
    let ready = gt
        .iter()
        .find(|e| Some(&e.pod) == t.new_pod.as_ref() && e.transition == Transition::PodReady)
        .expect("new pod ready in truth");
    let err = (t.marks.t1.unwrap() - ready.ts).num_milliseconds().abs();
    assert!(err < 100, "T1 off by {err} ms");
    let kc = kube::config::Kubeconfig::read_from(&lab.kubeconfig).unwrap();
    let client = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap(),
    )
    .unwrap();
    let d: Deployment = kube::Api::namespaced(client, &lab.namespace)
        .get("ollama")
        .await
        .unwrap();
    let ann = d
        .spec
        .unwrap()
        .template
        .metadata
        .unwrap()
        .annotations
        .unwrap();
    assert!(
        ann.contains_key("kubectl.kubernetes.io/restartedAt"),
        "{ann:?}"
    );
    lab.shutdown().await;
}
