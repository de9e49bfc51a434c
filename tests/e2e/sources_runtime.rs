//! The Ollama adapter: parsing of documented Ollama answers (`/api/ps`, `/api/tags`, the
//! NDJSON of a streamed `/api/generate`), then the adapter against the lab's runtime over
//! real HTTP in each access mode (pod proxy, port-forward, direct), with faults.

use readygap_lab::profile::Profile;
use readygap_lab::serve::{LabHandle, LabOptions, serve};
use readygap_live::sources::runtime::ollama::{GenerateStream, Ollama, parse_ps, parse_tags};
use readygap_live::sources::runtime::stream::Fold;
use readygap_live::sources::runtime::{AccessMode, PodRef, RuntimeAccess, RuntimeAdapter};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

#[test]
fn ps_and_tags_answers() {
    let ps: serde_json::Value = serde_json::from_str(
        r#"{"models":[{"name":"llama3.2:3b","model":"llama3.2:3b","size":3357369344,"digest":"a80c4f17acd5","details":{"format":"gguf","family":"llama","parameter_size":"3.2B","quantization_level":"Q4_K_M"},"expires_at":"2026-11-30T10:09:31.83753-07:00","size_vram":0,"context_length":4096}]}"#,
    )
    .unwrap();
    let m = parse_ps(&ps).unwrap();
    assert_eq!(m.len(), 1);
    assert_eq!(
        (m[0].name.as_str(), m[0].size, m[0].size_vram),
        ("llama3.2:3b", 3_357_369_344, 0)
    );
    assert_eq!(
        m[0].expires_at,
        Some("2026-11-30T17:09:31.837530Z".parse().unwrap()),
        "offsets become UTC"
    );
    assert!(
        parse_ps(&serde_json::json!({"models": []}))
            .unwrap()
            .is_empty()
    );
    assert!(parse_ps(&serde_json::json!({"error": "x"})).is_err());

    let tags: serde_json::Value = serde_json::from_str(
        r#"{"models":[{"name":"llama3.2:1b","model":"llama3.2:1b","modified_at":"2026-11-29T08:00:00Z","size":1321098329,"digest":"baf6a787fdff"},{"model":"llama3.2:3b","size":2019393189}]}"#,
    )
    .unwrap();
    let t = parse_tags(&tags).unwrap();
    assert_eq!(t.len(), 2);
    assert_eq!(
        (t[0].name.as_str(), t[0].size),
        ("llama3.2:1b", 1_321_098_329)
    );
    assert_eq!(t[1].name, "llama3.2:3b", "`model` when `name` is absent");
}

const STREAM: &str = concat!(
    r#"{"model":"llama3.2:1b","created_at":"2026-11-30T10:00:01.1Z","response":"","done":false}"#,
    "\n",
    r#"{"model":"llama3.2:1b","created_at":"2026-11-30T10:00:01.2Z","response":"READ","done":false}"#,
    "\n",
    r#"{"model":"llama3.2:1b","created_at":"2026-11-30T10:00:01.3Z","response":"Y","done":false}"#,
    "\n",
    r#"{"model":"llama3.2:1b","created_at":"2026-11-30T10:00:01.4Z","response":"","done":true,"done_reason":"stop","context":[1,2],"total_duration":5043500667,"load_duration":2587166583,"prompt_eval_count":31,"prompt_eval_duration":1979000000,"eval_count":3,"eval_duration":387000000}"#,
    "\n",
);

#[test]
fn a_generate_stream_split_anywhere() {
    for chunk in [1usize, 3, 17, 64, STREAM.len()] {
        let mut g = GenerateStream::default();
        let mut first_at = None;
        let mut done_at = None;
        for (i, piece) in STREAM.as_bytes().chunks(chunk).enumerate() {
            let p = g.push(piece);
            if p.first_token {
                assert!(first_at.is_none(), "first token reported once");
                first_at = Some(i);
            }
            if p.done {
                done_at = Some(i);
            }
        }
        g.finish();
        assert_eq!(g.response, "READY", "chunk {chunk}");
        assert!(g.done && g.error.is_none());
        assert!(first_at.unwrap() <= done_at.unwrap());
        assert_eq!(g.durations.total_ns, Some(5_043_500_667));
        assert_eq!(g.durations.load_ns, Some(2_587_166_583));
        assert_eq!(g.durations.prompt_eval_ns, Some(1_979_000_000));
        assert_eq!(g.durations.eval_ns, Some(387_000_000));
    }
    // An error chunk (as Ollama sends when the runner dies) and a stream cut short.
    let mut g = GenerateStream::default();
    g.push(b"{\"error\":\"llama runner process has terminated: signal: killed\"}\n");
    assert!(!g.done);
    assert!(g.error.as_deref().unwrap().contains("runner process"));
    let mut g = GenerateStream::default();
    g.push(&STREAM.as_bytes()[..150]);
    g.finish();
    assert!(!g.done, "no done: true");
}

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

async fn client(lab: &LabHandle) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(&lab.kubeconfig).unwrap();
    let mut cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    cfg.default_retry = false;
    kube::Client::try_from(cfg).unwrap()
}

async fn serving_pod(lab: &LabHandle, client: &kube::Client) -> PodRef {
    let api: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(client.clone(), &lab.namespace);
    let pods = api.list(&Default::default()).await.unwrap();
    let p = readygap_live::sources::kube::pod_view(&pods.items[0]);
    PodRef {
        name: p.name,
        ip: p.ip,
    }
}

/// Probe until the runtime answers (bounded), as the runner does.
async fn until_up(o: &Ollama, pod: &PodRef) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let p = o.probe(pod).await;
        if p.ok {
            assert_eq!(p.status, Some(200));
            assert!(p.latency_ms >= 0.0);
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "runtime never answered: {:?}",
            p.error
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn adapter_in_mode(mode: AccessMode, seed: u64) {
    let lab = lab(seed).await;
    let client = client(&lab).await;
    let pod = serving_pod(&lab, &client).await;
    let o = Ollama::new(RuntimeAccess::new(
        mode,
        client,
        &lab.namespace,
        11434,
        "http://{pod_ip}:{port}",
    ));
    until_up(&o, &pod).await;
    let disk = o.models_on_disk(&pod).await.unwrap();
    assert!(disk.iter().any(|m| m.name == "llama3.2:1b"), "{disk:?}");
    let first = Arc::new(AtomicBool::new(false));
    let f = first.clone();
    let r = o
        .generate(
            &pod,
            "llama3.2:1b",
            "Reply with exactly: READY",
            7,
            Box::new(move || f.store(true, Ordering::SeqCst)),
        )
        .await;
    assert!(r.ok, "{mode:?}: {r:?}");
    assert_eq!((r.request_id, r.http_status), (7, Some(200)));
    assert!(first.load(Ordering::SeqCst), "first-token callback ran");
    assert!(r.durations.total_ns.unwrap() > 0 && r.durations.load_ns.is_some());
    assert!(!r.response.unwrap_or_default().is_empty());
    let resident = o.residency(&pod).await.unwrap();
    assert_eq!(resident.len(), 1, "{resident:?}");
    o.unload(&pod, "llama3.2:1b").await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !o.residency(&pod).await.unwrap().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "model still resident after keep_alive 0"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Faults: HTTP 500 is a failed probe and a failed inference with its status.
    lab.runtime_faults().set_http_500(true);
    let p = o.probe(&pod).await;
    assert!(!p.ok && p.status == Some(500), "{p:?}");
    let r = o
        .generate(&pod, "llama3.2:1b", "x", 8, Box::new(|| {}))
        .await;
    assert!(!r.ok && r.http_status == Some(500), "{r:?}");
    lab.runtime_faults().set_http_500(false);
    // A hanging runtime: the probe gives up after its timeout, with the reason.
    lab.runtime_faults().set_hang(true);
    let mut short = o.clone();
    short.reach.probe_timeout = Duration::from_millis(300);
    let p = short.probe(&pod).await;
    assert!(
        !p.ok && p.error.as_deref().unwrap_or("").contains("no answer"),
        "{p:?}"
    );
    lab.runtime_faults().set_hang(false);
    lab.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ollama_through_the_pod_proxy() {
    let _one = ONE_LAB.lock().await;
    adapter_in_mode(AccessMode::Proxy, 61).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ollama_through_port_forward() {
    let _one = ONE_LAB.lock().await;
    adapter_in_mode(AccessMode::PortForward, 62).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ollama_direct() {
    let _one = ONE_LAB.lock().await;
    adapter_in_mode(AccessMode::Direct, 63).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_of_a_pod_without_ip_fails_fast_in_direct_mode() {
    let _one = ONE_LAB.lock().await;
    let lab = lab(64).await;
    let o = Ollama::new(RuntimeAccess::new(
        AccessMode::Direct,
        client(&lab).await,
        &lab.namespace,
        11434,
        "http://{pod_ip}:{port}",
    ));
    let p = o
        .probe(&PodRef {
            name: "pending".into(),
            ip: None,
        })
        .await;
    assert!(
        !p.ok && p.error.as_deref().unwrap().contains("no IP"),
        "{p:?}"
    );
    lab.shutdown().await;
}
