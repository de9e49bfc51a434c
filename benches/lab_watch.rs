//! The lab's API server under load: list latency and watch event delivery latency with 500
//! pods across 50 Deployments in one namespace, side by side with the single `ollama`
//! Deployment. Run: `cargo bench --bench lab_watch`.

use criterion::{Criterion, criterion_group, criterion_main};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use readygap_lab::kube::resources::PODS;
use readygap_lab::profile::Profile;
use readygap_lab::serve::{LabHandle, LabOptions, serve};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const NS: &str = "llm-recovery-lab";

struct Lab {
    handle: LabHandle,
    client: kube::Client,
    _dir: std::path::PathBuf,
}

async fn start(extra_deployments: usize, replicas: i32) -> Lab {
    let dir = std::env::temp_dir().join(format!(
        "readygap-bench-{}-{extra_deployments}",
        std::process::id()
    ));
    let mut o = LabOptions::new(Profile::named("local-1b").expect("profile"));
    o.speed = 100.0;
    o.kubeconfig_out = Some(dir.join("kubeconfig"));
    let handle = serve(o).await.expect("lab");
    let kc = kube::config::Kubeconfig::read_from(&handle.kubeconfig).expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("config");
    let client = kube::Client::try_from(cfg).expect("client");
    let deps: Api<Deployment> = Api::namespaced(client.clone(), NS);
    for i in 0..extra_deployments {
        let d: Deployment = serde_json::from_value(json!({
            "metadata": {"name": format!("load-{i:02}"), "labels": {"app": format!("load-{i:02}")}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": format!("load-{i:02}")}},
                     "template": {"metadata": {"labels": {"app": format!("load-{i:02}"), "tier": "load"}},
                                  "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}}}
        }))
        .expect("deployment");
        deps.create(&PostParams::default(), &d)
            .await
            .expect("create");
    }
    let want = 1 + extra_deployments * replicas as usize;
    let store = handle.cluster().store.clone();
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let running = store
            .list(PODS, Some(NS))
            .0
            .iter()
            .filter(|p| p["status"]["phase"] == "Running")
            .count();
        if running >= want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "only {running}/{want} pods running"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Lab {
        handle,
        client,
        _dir: dir,
    }
}

/// A value never used before by any iteration (so every mutation really changes the pod).
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Time from a store change to the watch client receiving it.
async fn watch_delivery(lab: &Lab, iters: u64) -> Duration {
    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), NS);
    let target = pods
        .list(&ListParams::default().labels("app=ollama"))
        .await
        .expect("list")
        .items[0]
        .metadata
        .name
        .clone()
        .expect("name");
    let rv = lab.handle.cluster().store.resource_version().to_string();
    let mut stream = pods
        .watch(&WatchParams::default().timeout(290), &rv)
        .await
        .expect("watch")
        .boxed();
    let store = lab.handle.cluster().store.clone();
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let i = NEXT.fetch_add(1, Ordering::Relaxed);
        let start = Instant::now();
        store
            .mutate(PODS, NS, &target, |o| {
                o["metadata"]["annotations"]["bench"] = json!(i.to_string());
                Ok(())
            })
            .expect("mutate");
        loop {
            match stream.next().await {
                Some(Ok(WatchEvent::Modified(p)))
                    if p.metadata.name.as_deref() == Some(&target) =>
                {
                    if p.metadata.annotations.as_ref().and_then(|a| a.get("bench"))
                        == Some(&i.to_string())
                    {
                        break;
                    }
                }
                Some(Ok(_)) => {}
                other => panic!("watch ended: {other:?}"),
            }
        }
        total += start.elapsed();
    }
    total
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let small = rt.block_on(start(0, 0));
    let large = rt.block_on(start(50, 10));
    let mut g = c.benchmark_group("lab_list_pods");
    for (label, lab) in [
        ("1_deployment", &small),
        ("50_deployments_500_pods", &large),
    ] {
        g.bench_function(label, |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let pods: Api<Pod> = Api::namespaced(lab.client.clone(), NS);
                    let start = Instant::now();
                    for _ in 0..iters {
                        let l = pods.list(&ListParams::default()).await.expect("list");
                        assert!(!l.items.is_empty());
                    }
                    start.elapsed()
                })
            })
        });
    }
    g.finish();
    let mut g = c.benchmark_group("lab_watch_delivery");
    for (label, lab) in [
        ("1_deployment", &small),
        ("50_deployments_500_pods", &large),
    ] {
        g.bench_function(label, |b| {
            b.iter_custom(|iters| rt.block_on(watch_delivery(lab, iters)))
        });
    }
    g.finish();
    rt.block_on(async {
        small.handle.shutdown().await;
        large.handle.shutdown().await;
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(5)).warm_up_time(Duration::from_secs(1));
    targets = bench
}
criterion_main!(benches);
