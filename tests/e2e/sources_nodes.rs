//! The Node feed without cluster RBAC: an API server that refuses `list nodes` (403, the
//! real Status) is told once that node details are unavailable, and readygap stops asking
//! instead of retrying the watch for ever.

use axum::extract::Request;
use axum::response::IntoResponse;
use readygap_core::event::{Event, EventKind};
use readygap_live::sources::kube::{KubeConfig, run};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const SA: &str = "system:serviceaccount:llm-recovery-lab:readygap";

/// An API server on loopback that refuses everything as RBAC would, counting node requests.
async fn refusing_api() -> (String, Arc<AtomicUsize>) {
    let node_requests = Arc::new(AtomicUsize::new(0));
    let count = node_requests.clone();
    let app = axum::Router::new().fallback(move |req: Request| {
        let count = count.clone();
        async move {
            let path = req.uri().path().to_owned();
            let (resource, scope) = if path.starts_with("/api/v1/nodes") {
                count.fetch_add(1, Ordering::SeqCst);
                ("nodes", "at the cluster scope".to_owned())
            } else {
                let r = path.rsplit('/').next().unwrap_or_default().to_owned();
                (
                    if r == "pods" { "pods" } else { "events" },
                    "in the namespace \"llm-recovery-lab\"".to_owned(),
                )
            };
            let verb = if req.uri().query().unwrap_or_default().contains("watch=") {
                "watch"
            } else {
                "list"
            };
            let body = serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "reason": "Forbidden", "code": 403,
                "details": {"kind": resource},
                "message": format!("{resource} is forbidden: User \"{SA}\" cannot {verb} resource \"{resource}\" in API group \"\" {scope}")});
            (
                axum::http::StatusCode::FORBIDDEN,
                [("content-type", "application/json")],
                body.to_string(),
            )
                .into_response()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, app).await.ok();
    });
    (url, node_requests)
}

fn client(url: &str) -> kube::Client {
    let mut cfg = kube::Config::new(url.parse().unwrap());
    cfg.default_namespace = "llm-recovery-lab".into();
    kube::Client::try_from(cfg).unwrap()
}

/// The node feed's errors among the events received before `deadline`.
async fn node_errors_until(
    rx: &mut mpsc::Receiver<Event>,
    deadline: tokio::time::Instant,
    into: &mut Vec<String>,
) {
    while let Ok(Some(ev)) = tokio::time::timeout_at(deadline, rx.recv()).await {
        if let EventKind::SourceError { feed, message } = ev.kind
            && feed == "nodes"
        {
            into.push(message);
        }
    }
}

/// The first node feed error within `within`.
async fn first_node_error(rx: &mut mpsc::Receiver<Event>, within: Duration) -> Option<String> {
    let deadline = tokio::time::Instant::now() + within;
    while let Ok(Some(ev)) = tokio::time::timeout_at(deadline, rx.recv()).await {
        if let EventKind::SourceError { feed, message } = ev.kind
            && feed == "nodes"
        {
            return Some(message);
        }
    }
    None
}

#[tokio::test]
async fn a_refused_node_watch_is_said_once_and_not_retried() {
    let (url, node_requests) = refusing_api().await;
    let (tx, mut rx) = mpsc::channel(1024);
    let cancel = CancellationToken::new();
    tokio::spawn(run(
        client(&url),
        KubeConfig {
            namespace: "llm-recovery-lab".into(),
            selector: "app=ollama".into(),
            service: None,
            deployment: None,
        },
        tx.clone(),
        cancel.clone(),
    ));
    // The Node watch as `run` and the dashboard start it, without a node selection.
    tokio::spawn(readygap_live::sources::nodes::run(
        client(&url),
        tx,
        cancel.clone(),
        None,
    ));
    // The first refusal is reported.
    let first = first_node_error(&mut rx, Duration::from_secs(10))
        .await
        .expect("the refused node watch is reported");
    let mut errors = vec![first];
    assert!(
        errors[0].contains("node details are unavailable"),
        "{}",
        errors[0]
    );
    assert!(
        errors[0].contains("manifests/rbac/cluster"),
        "{}",
        errors[0]
    );
    // Then nothing: kube's watcher would retry after 0.8 s, 1.6 s, 3.2 s (its default
    // backoff); a window past the first two retries shows that readygap stopped asking.
    // (An absence can only be observed over a window.)
    node_errors_until(
        &mut rx,
        tokio::time::Instant::now() + Duration::from_secs(3),
        &mut errors,
    )
    .await;
    assert_eq!(
        node_requests.load(Ordering::SeqCst),
        1,
        "node requests after a 403"
    );
    assert_eq!(errors.len(), 1, "{errors:?}");
    cancel.cancel();
}

#[tokio::test]
async fn a_refused_node_watch_is_retried_when_the_selected_node_changes() {
    let (url, node_requests) = refusing_api().await;
    let (tx, mut rx) = mpsc::channel(1024);
    let cancel = CancellationToken::new();
    let (select, selected) = tokio::sync::watch::channel(None::<String>);
    tokio::spawn(readygap_live::sources::nodes::run(
        client(&url),
        tx,
        cancel.clone(),
        Some(selected),
    ));
    let first = first_node_error(&mut rx, Duration::from_secs(10)).await;
    assert!(first.is_some_and(|m| m.contains("node details are unavailable")));
    assert_eq!(node_requests.load(Ordering::SeqCst), 1);
    // The user picks another pod on another node: readygap asks once more, and says so once.
    select.send(Some("lab-node-2".into())).unwrap();
    let again = first_node_error(&mut rx, Duration::from_secs(10)).await;
    assert!(again.is_some_and(|m| m.contains("node details are unavailable")));
    assert_eq!(node_requests.load(Ordering::SeqCst), 2);
    cancel.cancel();
}
