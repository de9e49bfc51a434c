//! The container's memory read on the real cluster from an image with a shell and no
//! coreutils (`scripts/cluster.sh`'s `localhost/readygap/shell-only:dash`: dash, its libc,
//! /pause; issue 31, defect 3: the reader needed `cat`, `head` and `sleep` and retried
//! forever). The real kubelet's exec, stdin included, through the real API server.

use crate::support::cluster;
use readygap_core::event::{EventKind, MemorySource};
use readygap_live::sources::memory::{MemoryConfig, run};
use std::time::Duration;

const NS: &str = "readygap-shell-only";
const LIMIT: u64 = 64 << 20;

#[ignore = "needs the real cluster: scripts/cluster.sh up"]
#[test]
fn memory_is_read_with_the_shells_builtins_in_an_image_without_coreutils() {
    let c = cluster();
    let _ = c.try_k(&["delete", "namespace", NS, "--wait=true", "--timeout=120s"]);
    c.k(&["create", "namespace", NS]);
    let pod = format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"shell-only","namespace":"{NS}"}},
        "spec":{{"terminationGracePeriodSeconds":0,"containers":[{{"name":"serve",
        "image":"localhost/readygap/shell-only:dash","imagePullPolicy":"IfNotPresent",
        "ports":[{{"containerPort":11434}}],
        "resources":{{"limits":{{"memory":"{LIMIT}","cpu":"100m"}}}}}}]}}}}"#
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pod.json");
    std::fs::write(&file, pod).unwrap();
    c.k(&["apply", "-f", &file.to_string_lossy()]);
    c.k(&[
        "-n",
        NS,
        "wait",
        "--for=condition=Ready",
        "pod/shell-only",
        "--timeout=120s",
    ]);
    // The image has a shell and no coreutils: `cat` is not found, `command -v head` fails.
    let cat = c.try_k(&["-n", NS, "exec", "shell-only", "--", "cat", "/etc/hostname"]);
    assert!(!cat.status.success(), "cat ran in the shell-only image");
    let which = c.k(&[
        "-n",
        NS,
        "exec",
        "shell-only",
        "--",
        "sh",
        "-c",
        "command -v head || echo no-head; command -v sleep || echo no-sleep",
    ]);
    assert_eq!(
        which.split_whitespace().collect::<Vec<_>>(),
        ["no-head", "no-sleep"]
    );
    let node = c.k(&[
        "-n",
        NS,
        "get",
        "pod",
        "shell-only",
        "-o",
        "jsonpath={.spec.nodeName}",
    ]);

    let rt = tokio::runtime::Runtime::new().unwrap();
    let events = rt.block_on(async {
        let args = readygap_live::cluster::ClusterConfig {
            kubeconfig: Some(c.kubeconfig.clone()),
            namespace: Some(NS.into()),
            ..Default::default()
        };
        let (cfg, _) = readygap_live::cluster::config(&args)
            .await
            .expect("kubeconfig");
        let client = kube::Client::try_from(cfg).expect("client");
        let (tx, mut rx) = tokio::sync::mpsc::channel(256);
        let cancel = tokio_util::sync::CancellationToken::new();
        let cfg = MemoryConfig {
            namespace: NS.into(),
            pod: "shell-only".into(),
            container: None,
            runtime_port: 11434,
            node: Some(node.clone()),
            interval: Duration::from_millis(250),
        };
        let feed = tokio::spawn(run(client, cfg, tx, cancel.clone()));
        let mut events = Vec::new();
        let samples = |evs: &[readygap_core::event::Event]| {
            evs.iter()
                .filter(|e| matches!(e.kind, EventKind::MemorySample(_)))
                .count()
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while samples(&events) < 8 {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(ev)) => events.push(ev),
                _ => break,
            }
        }
        cancel.cancel();
        let _ = feed.await;
        events
    });
    for e in &events {
        eprintln!("{:?}", e.kind);
    }
    let connected: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::SourceConnected { detail, .. } => Some(detail.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        connected,
        [
            "cgroup v1 via exec in shell-only container serve (sh builtins: no head/sleep in the image)"
        ],
        "{events:#?}"
    );
    let samples: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::MemorySample(s) => Some(s),
            _ => None,
        })
        .collect();
    assert!(samples.len() >= 8, "{} samples in 30 s", samples.len());
    for s in &samples {
        assert_eq!(s.source, MemorySource::CgroupV1);
        assert_eq!(s.limit, Some(LIMIT), "the container's own limit");
        assert!(s.current > 0 && s.current < LIMIT, "{s:?}");
        assert!(s.working_set.is_some(), "{s:?}");
    }
    // One block per tick of readygap's own (250 ms), printed for the note, not asserted:
    // the machine's load decides the exec's latency.
    let first = events
        .iter()
        .find(|e| matches!(e.kind, EventKind::MemorySample(_)));
    let last = events
        .iter()
        .rev()
        .find(|e| matches!(e.kind, EventKind::MemorySample(_)));
    let span = (last.unwrap().ts - first.unwrap().ts).num_milliseconds();
    let per = span as f64 / (samples.len() - 1) as f64;
    eprintln!("{} samples, {per:.0} ms apart", samples.len());
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.kind, EventKind::SourceError { .. })),
        "{events:#?}"
    );
    let _ = c.try_k(&["delete", "namespace", NS, "--wait=false"]);
}
