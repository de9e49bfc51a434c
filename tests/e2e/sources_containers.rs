//! Pods with a sidecar and images without a shell: the lab refuses a container-less exec into
//! a multi-container pod as the API server does (`pkg/registry/core/pod/strategy.go`), and
//! readygap's memory feed names the serving container in its exec and in the Summary API
//! fallback, and turns an image without `sh` into a clear message and the fallback.

use readygap_core::event::{Event, EventKind, MemorySource};
use readygap_lab::kube::cluster::pod_ready;
use readygap_lab::kube::resources::{DEPLOYMENTS, PODS};
use readygap_lab::scenario::Scenario;
use readygap_lab::serve::LabHandle;
use readygap_lab::testkit::{client, start_lab, wait_for};
use readygap_live::sources::memory::{MemoryConfig, run};
use serde_json::json;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(90);

/// Rewrite the lab's deployment: the serving container is `server` (image `image`) with a
/// `readiness-helper` sidecar; returns the Ready pod of the new template.
async fn with_sidecar(lab: &LabHandle, image: &str) -> (String, String) {
    let store = lab.cluster().store.clone();
    store
        .mutate(DEPLOYMENTS, &lab.namespace, "ollama", |d| {
            let c = &mut d["spec"]["template"]["spec"]["containers"];
            c[0]["name"] = json!("server");
            c[0]["image"] = json!(image);
            let sidecar = json!({"name": "readiness-helper", "image": "busybox:1.36",
                                 "command": ["sleep", "infinity"]});
            c.as_array_mut().unwrap().push(sidecar);
            Ok(())
        })
        .unwrap();
    let ns = lab.namespace.clone();
    wait_for(WAIT, "a Ready pod with a sidecar", || {
        let found = store
            .list(PODS, Some(&ns))
            .0
            .iter()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null() && pod_ready(p))
            .filter(|p| {
                p["spec"]["containers"]
                    .as_array()
                    .is_some_and(|c| c.len() == 2)
            })
            .find_map(|p| {
                Some((
                    p["metadata"]["name"].as_str()?.to_owned(),
                    p["spec"]["nodeName"].as_str()?.to_owned(),
                ))
            });
        async move { found }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_less_exec_into_a_pod_with_a_sidecar_is_refused() {
    let (lab, _dir) = start_lab("local-1b", Scenario::Baseline, 10.0, 51).await;
    lab.wait_ready(WAIT).await.unwrap();
    let (pod, _) = with_sidecar(&lab, "ollama/ollama:0.6.8").await;
    let kc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&lab.kubeconfig).unwrap()).unwrap();
    let token = kc["users"][0]["user"]["token"].as_str().unwrap().to_owned();
    let upgrade = |query: &str| {
        reqwest::Client::builder()
            .no_proxy()
            .build()
            .unwrap()
            .get(format!(
                "{}/api/v1/namespaces/{}/pods/{pod}/exec?command=true&stdout=true{query}",
                lab.api_url, lab.namespace
            ))
            .bearer_auth(&token)
            .header("Connection", "Upgrade")
            .header("Upgrade", "websocket")
            .header("Sec-WebSocket-Version", "13")
            .header("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
            .header("Sec-WebSocket-Protocol", "v5.channel.k8s.io")
            .send()
    };
    let resp = upgrade("").await.unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let v: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(v["reason"], "BadRequest");
    assert_eq!(
        v["message"],
        format!(
            "a container name must be specified for pod {pod}, choose one of: [server readiness-helper]"
        )
    );
    let resp = upgrade("&container=nope").await.unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let v: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(
        v["message"],
        format!("container nope is not valid for pod {pod}")
    );
    let resp = upgrade("&container=server").await.unwrap();
    assert_eq!(resp.status().as_u16(), 101);
    lab.shutdown().await;
}

/// The first memory sample and the feed's connection detail and errors until then.
async fn first_sample(
    rx: &mut mpsc::Receiver<Event>,
) -> (Option<MemorySource>, Vec<String>, Vec<String>) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let (mut connected, mut errors) = (Vec::new(), Vec::new());
    while let Ok(Some(ev)) = tokio::time::timeout_at(deadline, rx.recv()).await {
        match ev.kind {
            EventKind::MemorySample(s) => return (Some(s.source), connected, errors),
            EventKind::SourceConnected { detail, .. } => connected.push(detail),
            EventKind::SourceError { message, .. } => errors.push(message),
            _ => {}
        }
    }
    (None, connected, errors)
}

async fn memory_feed(lab: &LabHandle, pod: &str, node: &str) -> mpsc::Receiver<Event> {
    let (tx, rx) = mpsc::channel(256);
    let cfg = MemoryConfig {
        namespace: lab.namespace.clone(),
        pod: pod.to_owned(),
        container: None,
        runtime_port: 11434,
        node: Some(node.to_owned()),
        interval: Duration::from_millis(100),
    };
    tokio::spawn(run(client(lab).await, cfg, tx, CancellationToken::new()));
    rx
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_exec_names_the_serving_container() {
    let (lab, _dir) = start_lab("local-1b", Scenario::Baseline, 10.0, 52).await;
    lab.wait_ready(WAIT).await.unwrap();
    let (pod, node) = with_sidecar(&lab, "ollama/ollama:0.6.8").await;
    let mut rx = memory_feed(&lab, &pod, &node).await;
    let (source, connected, errors) = first_sample(&mut rx).await;
    assert!(
        matches!(
            source,
            Some(MemorySource::CgroupV2 | MemorySource::CgroupV1)
        ),
        "{source:?}; connected {connected:?}; errors {errors:?}"
    );
    assert!(
        connected.iter().any(|d| d.contains("container server")),
        "{connected:?}"
    );
    lab.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_without_a_shell_switches_to_the_summary_api_of_the_serving_container() {
    let (lab, _dir) = start_lab("local-1b", Scenario::Baseline, 10.0, 53).await;
    lab.wait_ready(WAIT).await.unwrap();
    let (pod, node) = with_sidecar(&lab, "ollama/ollama:0.6.8-distroless").await;
    let mut rx = memory_feed(&lab, &pod, &node).await;
    let (source, connected, errors) = first_sample(&mut rx).await;
    assert_eq!(
        source,
        Some(MemorySource::SummaryApi),
        "connected {connected:?}; errors {errors:?}"
    );
    assert!(
        connected
            .iter()
            .any(|d| d.contains("summary API") && d.contains("no `sh`") && d.contains("server")),
        "{connected:?}"
    );
    lab.shutdown().await;
}
