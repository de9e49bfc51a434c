//! The lab's API server over real HTTP: selectors, tables, watch semantics (bookmarks,
//! timeouts, 410), PATCH flavours, the scale subresource, graceful deletion, exec and
//! port-forward with kube-rs, the proxies, the admin endpoints and the ground truth.

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams, DeleteParams, Patch, PatchParams};
use readygap_lab::ground_truth::Transition;
use readygap_lab::scenario::Scenario;
use readygap_lab::serve::LabHandle;
use readygap_lab::testkit::{client, start_lab, wait_for};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NS: &str = "llm-recovery-lab";

/// A client with the lab kubeconfig's token (the lab answers 401 without it).
fn http() -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {}", readygap_lab::kube::authz::ADMIN_TOKEN)
            .parse()
            .unwrap(),
    );
    reqwest::Client::builder()
        .no_proxy()
        .default_headers(headers)
        .build()
        .unwrap()
}

/// The status code of a request.
async fn status_of(request: reqwest::RequestBuilder) -> u16 {
    request.send().await.unwrap().status().as_u16()
}

/// POST a fault switch to the lab's admin endpoint; the status code.
async fn lab_faults(lab: &LabHandle, body: &Value) -> u16 {
    status_of(
        http()
            .post(format!("{}/lab/faults", lab.api_url))
            .json(body),
    )
    .await
}

async fn get_json(lab: &LabHandle, path: &str) -> (u16, Value) {
    let r = http()
        .get(format!("{}{path}", lab.api_url))
        .send()
        .await
        .unwrap();
    let code = r.status().as_u16();
    (code, r.json().await.unwrap_or(Value::Null))
}

async fn pod_names(lab: &LabHandle, query: &str) -> Vec<String> {
    let (code, v) = get_json(lab, &format!("/api/v1/namespaces/{NS}/pods?{query}")).await;
    assert_eq!(code, 200, "{v}");
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

async fn ready_lab(scenario: Scenario, profile: &str, seed: u64) -> (LabHandle, tempfile::TempDir) {
    let (lab, dir) = start_lab(profile, scenario, 10.0, seed).await;
    lab.wait_ready(Duration::from_secs(60)).await.unwrap();
    (lab, dir)
}

/// Read watch lines until `n` lines or the stream ends (bounded).
async fn watch_lines(resp: reqwest::Response, n: usize, within: Duration) -> (Vec<Value>, bool) {
    let mut stream = resp.bytes_stream();
    let mut buf = Vec::new();
    let mut lines = Vec::new();
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(Ok(chunk))) => {
                buf.extend_from_slice(&chunk);
                while let Some(i) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=i).collect();
                    lines.push(serde_json::from_slice(&line).unwrap());
                    if lines.len() >= n {
                        return (lines, false);
                    }
                }
            }
            Ok(Some(Err(_))) | Ok(None) => return (lines, true),
            Err(_) => return (lines, false),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_selectors_tables_and_watch_semantics() {
    let (lab, _dir) = ready_lab(Scenario::Baseline, "local-1b", 11).await;
    let (code, v) = get_json(&lab, "/version").await;
    assert_eq!((code, v["major"].as_str()), (200, Some("1")));
    let (_, apis) = get_json(&lab, "/apis").await;
    let groups: Vec<&str> = apis["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        groups,
        [
            "apps",
            "batch",
            "discovery.k8s.io",
            "events.k8s.io",
            "rbac.authorization.k8s.io",
            "authorization.k8s.io"
        ]
    );

    let pod = pod_names(&lab, "").await.pop().unwrap();
    for (sel, n) in [
        ("app=ollama", 1),
        ("app!=ollama", 0),
        ("app in (ollama,other)", 1),
        ("app notin (ollama)", 0),
        ("pod-template-hash", 1),
        ("!pod-template-hash", 0),
    ] {
        let q = format!("labelSelector={}", urlencode(sel));
        assert_eq!(pod_names(&lab, &q).await.len(), n, "{sel}");
    }
    for (sel, n) in [
        (format!("metadata.name={pod}"), 1),
        ("metadata.name=nope".to_string(), 0),
        ("spec.nodeName=lab-node-1".to_string(), 1),
        ("spec.nodeName=lab-node-2".to_string(), 0),
        ("status.phase=Running".to_string(), 1),
        ("status.phase!=Running".to_string(), 0),
        (format!("metadata.namespace={NS}"), 1),
    ] {
        assert_eq!(
            pod_names(&lab, &format!("fieldSelector={}", urlencode(&sel)))
                .await
                .len(),
            n,
            "{sel}"
        );
    }
    let (code, err) = get_json(
        &lab,
        &format!(
            "/api/v1/namespaces/{NS}/pods?labelSelector={}",
            urlencode("app in ollama")
        ),
    )
    .await;
    assert_eq!(
        (code, err["kind"].as_str(), err["code"].as_u64()),
        (400, Some("Status"), Some(400))
    );
    let (_, all) = get_json(&lab, "/api/v1/pods").await;
    assert_eq!(all["items"].as_array().unwrap().len(), 1);
    assert_eq!(all["kind"], "PodList");

    // Events about the pod, in both APIs.
    let (_, evs) = get_json(
        &lab,
        &format!(
            "/api/v1/namespaces/{NS}/events?fieldSelector={}",
            urlencode(&format!("involvedObject.name={pod}"))
        ),
    )
    .await;
    let reasons: Vec<&str> = evs["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["reason"].as_str().unwrap())
        .collect();
    for r in ["Scheduled", "Pulled", "Created", "Started"] {
        assert!(reasons.contains(&r), "{reasons:?}");
    }
    assert!(
        evs["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["involvedObject"]["name"] == pod.as_str())
    );
    let (_, new_evs) = get_json(
        &lab,
        &format!("/apis/events.k8s.io/v1/namespaces/{NS}/events"),
    )
    .await;
    assert!(
        new_evs["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["regarding"]["name"] == pod.as_str() && e["reason"] == "Started")
    );

    // Server-side tables.
    let t: Value = http()
        .get(format!(
            "{}/apis/apps/v1/namespaces/{NS}/deployments",
            lab.api_url
        ))
        .header(
            "Accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(t["kind"], "Table");
    assert_eq!(t["rows"][0]["cells"][0], "ollama");
    assert_eq!(t["rows"][0]["cells"][1], "1/1");

    // Watch: bookmarks, then the stream ends at timeoutSeconds.
    let (_, list) = get_json(&lab, &format!("/api/v1/namespaces/{NS}/pods")).await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let started = std::time::Instant::now();
    let resp = http()
        .get(format!("{}/api/v1/namespaces/{NS}/pods?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=2", lab.api_url))
        .send().await.unwrap();
    let (lines, ended) = watch_lines(resp, 1000, Duration::from_secs(20)).await;
    assert!(ended, "the watch must end after timeoutSeconds");
    assert!(
        started.elapsed() >= Duration::from_millis(1900),
        "{:?}",
        started.elapsed()
    );
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "BOOKMARK" && l["object"]["kind"] == "Pod"),
        "{lines:?}"
    );

    // Watch without a version: the current state as ADDED first.
    let resp = http()
        .get(format!(
            "{}/api/v1/namespaces/{NS}/pods?watch=true",
            lab.api_url
        ))
        .send()
        .await
        .unwrap();
    let (lines, _) = watch_lines(resp, 1, Duration::from_secs(10)).await;
    assert_eq!(lines[0]["type"], "ADDED");
    assert_eq!(lines[0]["object"]["metadata"]["name"], pod.as_str());

    // After compaction, a watch from the old version gets an ERROR event with 410 Expired.
    lab.expire_resource_versions();
    let resp = http()
        .get(format!(
            "{}/api/v1/namespaces/{NS}/pods?watch=1&resourceVersion={rv}",
            lab.api_url
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let (lines, _) = watch_lines(resp, 1, Duration::from_secs(10)).await;
    assert_eq!(lines[0]["type"], "ERROR");
    assert_eq!(lines[0]["object"]["code"], 410);
    assert_eq!(lines[0]["object"]["reason"], "Expired");
    lab.shutdown().await;
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patches_scale_and_graceful_deletion() {
    let (lab, _dir) = ready_lab(Scenario::Baseline, "local-1b", 12).await;
    let c = client(&lab).await;
    let deps: Api<Deployment> = Api::namespaced(c.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(c.clone(), NS);

    let d = deps
        .patch(
            "ollama",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"tier": "llm"}}})),
        )
        .await
        .unwrap();
    assert_eq!(d.metadata.labels.unwrap()["tier"], "llm");
    let gen_before = d.metadata.generation.unwrap();
    let d = deps
        .patch(
            "ollama",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(
                    json!([{"op": "add", "path": "/spec/minReadySeconds", "value": 0}]),
                )
                .unwrap(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(d.spec.unwrap().min_ready_seconds, Some(0));
    assert!(
        d.metadata.generation.unwrap() > gen_before,
        "a spec change bumps the generation"
    );
    assert_eq!(
        status_of(
            http()
                .patch(format!(
                    "{}/apis/apps/v1/namespaces/{NS}/deployments/ollama",
                    lab.api_url
                ))
                .header("Content-Type", "application/apply-patch+yaml")
                .body("{}")
        )
        .await,
        415
    );

    // Scale subresource: GET, PUT, PATCH.
    let (code, scale) = get_json(
        &lab,
        &format!("/apis/apps/v1/namespaces/{NS}/deployments/ollama/scale"),
    )
    .await;
    assert_eq!(
        (
            code,
            scale["kind"].as_str(),
            scale["spec"]["replicas"].as_i64()
        ),
        (200, Some("Scale"), Some(1))
    );
    assert_eq!(scale["status"]["selector"], "app=ollama");
    let mut put = scale.clone();
    put["spec"]["replicas"] = json!(2);
    assert_eq!(
        status_of(
            http()
                .put(format!(
                    "{}/apis/apps/v1/namespaces/{NS}/deployments/ollama/scale",
                    lab.api_url
                ))
                .json(&put)
        )
        .await,
        200
    );
    lab.wait_ready(Duration::from_secs(60)).await.unwrap();
    assert_eq!(pod_names(&lab, "").await.len(), 2);
    assert_eq!(
        status_of(
            http()
                .patch(format!(
                    "{}/apis/apps/v1/namespaces/{NS}/deployments/ollama/scale",
                    lab.api_url
                ))
                .header("Content-Type", "application/merge-patch+json")
                .body(r#"{"spec":{"replicas":1}}"#)
        )
        .await,
        200
    );
    wait_for(Duration::from_secs(60), "one live pod", || async {
        let live = pods
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .count();
        (live == 1).then_some(())
    })
    .await;

    // Graceful delete (DeleteOptions body): terminating first, gone after the scaled grace.
    let victim = pods
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|p| p.metadata.deletion_timestamp.is_none())
        .unwrap();
    let name = victim.metadata.name.clone().unwrap();
    let deleted = pods
        .delete(
            &name,
            &DeleteParams {
                grace_period_seconds: Some(5),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let terminating = deleted
        .left()
        .expect("a graceful delete returns the object");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(5));
    wait_for(
        Duration::from_secs(30),
        "the pod object removed",
        || async { pods.get_opt(&name).await.unwrap().is_none().then_some(()) },
    )
    .await;
    // Forced delete: gone at once.
    lab.wait_ready(Duration::from_secs(60)).await.unwrap();
    let victim = pods
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|p| p.metadata.deletion_timestamp.is_none())
        .unwrap();
    let name2 = victim.metadata.name.clone().unwrap();
    assert_eq!(
        status_of(http().delete(format!(
            "{}/api/v1/namespaces/{NS}/pods/{name2}?gracePeriodSeconds=0",
            lab.api_url
        )))
        .await,
        200
    );
    assert!(pods.get_opt(&name2).await.unwrap().is_none());
    assert_eq!(
        status_of(http().delete(format!(
            "{}/api/v1/namespaces/{NS}/pods/{name2}",
            lab.api_url
        )))
        .await,
        404
    );

    // The ground truth has each transition of the replacement, with the object's timestamps.
    lab.wait_ready(Duration::from_secs(60)).await.unwrap();
    let newest = pods
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|p| p.metadata.deletion_timestamp.is_none())
        .unwrap();
    let new_name = newest.metadata.name.clone().unwrap();
    let gt = lab.ground_truth().entries();
    let of = |pod: &str, t: Transition| {
        gt.iter()
            .find(|e| e.pod == pod && e.transition == t)
            .map(|e| e.ts)
    };
    assert!(
        of(&name, Transition::DeleteAccepted).is_some() && of(&name, Transition::PodGone).is_some()
    );
    assert!(of(&name, Transition::DeleteAccepted) < of(&name, Transition::PodGone));
    let created = of(&new_name, Transition::PodCreated).unwrap();
    let scheduled = of(&new_name, Transition::PodScheduled).unwrap();
    let started = of(&new_name, Transition::ContainerStarted).unwrap();
    let ready = of(&new_name, Transition::PodReady).unwrap();
    assert!(created <= scheduled && scheduled <= started && started <= ready);
    let conds = newest.status.unwrap().conditions.unwrap();
    let sched_cond = conds.iter().find(|c| c.type_ == "PodScheduled").unwrap();
    let cond_secs = sched_cond
        .last_transition_time
        .as_ref()
        .unwrap()
        .0
        .as_second();
    assert_eq!(
        cond_secs,
        scheduled.timestamp(),
        "condition time == ground-truth time (to the second)"
    );
    lab.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_portforward_proxies_and_admin_endpoints() {
    let (lab, _dir) = ready_lab(Scenario::Baseline, "local-1b", 13).await;
    let c = client(&lab).await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), NS);
    let pod = pod_names(&lab, "").await.pop().unwrap();
    // The runtime listens a little after the container starts.
    wait_for(Duration::from_secs(30), "the runtime to listen", || async {
        let r = http()
            .get(format!(
                "{}/api/v1/namespaces/{NS}/pods/{pod}:11434/proxy/api/tags",
                lab.api_url
            ))
            .send()
            .await
            .ok()?;
        (r.status().as_u16() == 200).then_some(())
    })
    .await;

    // kube-rs exec over WebSocket.
    let mut proc = pods
        .exec(
            &pod,
            ["cat", "/sys/fs/cgroup/memory.current"],
            &AttachParams::default().stderr(true),
        )
        .await
        .unwrap();
    let mut out = String::new();
    proc.stdout()
        .unwrap()
        .read_to_string(&mut out)
        .await
        .unwrap();
    let status = proc.take_status().unwrap().await.unwrap();
    assert_eq!(status.status.as_deref(), Some("Success"));
    assert!(out.trim().parse::<u64>().unwrap() > 0, "{out:?}");
    let mut proc = pods
        .exec(
            &pod,
            ["cat", "/nope"],
            &AttachParams::default().stderr(true),
        )
        .await
        .unwrap();
    let status = proc.take_status().unwrap().await.unwrap();
    assert_eq!(status.status.as_deref(), Some("Failure"));
    assert_eq!(status.reason.as_deref(), Some("NonZeroExitCode"));
    let code = &status.details.unwrap().causes.unwrap()[0];
    assert_eq!(code.reason.as_deref(), Some("ExitCode"));
    assert_ne!(code.message.as_deref(), Some("0"));
    assert!(
        pods.exec("no-such-pod", ["true"], &AttachParams::default())
            .await
            .is_err()
    );

    // Port-forward to the runtime.
    let mut pf = pods.portforward(&pod, &[11434]).await.unwrap();
    let mut s = pf.take_stream(11434).unwrap();
    s.write_all(b"GET /api/version HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut resp = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut resp))
        .await
        .unwrap()
        .unwrap();
    let resp = String::from_utf8_lossy(&resp);
    assert!(
        resp.starts_with("HTTP/1.1 200") && resp.contains("\"version\""),
        "{resp}"
    );
    drop(s);

    // Proxies: pod, service, node stats.
    let (code, tags) = get_json(
        &lab,
        &format!("/api/v1/namespaces/{NS}/pods/{pod}:11434/proxy/api/tags"),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(tags["models"][0]["name"], "llama3.2:1b");
    let (code, v) = get_json(
        &lab,
        &format!("/api/v1/namespaces/{NS}/services/ollama:11434/proxy/api/version"),
    )
    .await;
    assert_eq!(code, 200);
    assert!(v["version"].is_string());
    let (code, summary) = get_json(&lab, "/api/v1/nodes/lab-node-1/proxy/stats/summary").await;
    assert_eq!(code, 200);
    let p = summary["pods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["podRef"]["name"] == pod.as_str())
        .unwrap();
    let ws = p["containers"][0]["memory"]["workingSetBytes"]
        .as_u64()
        .unwrap();
    let rt = lab.cluster().runtime_of(NS, &pod).unwrap().memory();
    assert!(
        ws > 0 && ws.abs_diff(rt.working_set_bytes) < 64 << 20,
        "summary {ws} vs runtime {}",
        rt.working_set_bytes
    );
    // The node's memory holds the lab's page cache model (usage − working set = Cached:),
    // and dropping the node's caches lowers it.
    let node_cache = |s: &serde_json::Value| {
        let m = &s["node"]["memory"];
        let usage = m["usageBytes"].as_u64().unwrap();
        let ws = m["workingSetBytes"].as_u64().unwrap();
        assert!(m["availableBytes"].as_u64().unwrap() < 32 << 30);
        usage - ws
    };
    let before = node_cache(&summary);
    let cache = lab.cluster().node_caches["lab-node-1"].clone();
    assert_eq!(before, cache.cached_kb() * 1024);
    let r = http()
        .post(format!("{}/lab/nodes/lab-node-1/drop-caches", lab.api_url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let (_, after) = get_json(&lab, "/api/v1/nodes/lab-node-1/proxy/stats/summary").await;
    let after = node_cache(&after);
    assert!(
        after + (100 << 20) < before,
        "the drop lowers the node's usage: {before} → {after}"
    );

    // Runtime faults through the admin endpoint.
    let tags = format!("/api/v1/namespaces/{NS}/pods/{pod}/proxy/api/tags");
    assert_eq!(
        lab_faults(&lab, &json!({"runtime": {"http_500": true}})).await,
        200
    );
    let (code, _) = get_json(&lab, &tags).await;
    assert_eq!(code, 500);
    assert_eq!(
        lab_faults(&lab, &json!({"runtime": {"http_500": false}})).await,
        200
    );
    let (code, _) = get_json(&lab, &tags).await;
    assert_eq!(code, 200);
    assert_eq!(
        lab_faults(&lab, &json!({"runtime": {"bogus": true}})).await,
        400
    );

    // Drop caches on a node.
    let r: Value = http()
        .post(format!("{}/lab/nodes/lab-node-1/drop-caches", lab.api_url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        r["cached_kb_before"].as_u64().unwrap() >= r["cached_kb_after"].as_u64().unwrap(),
        "{r}"
    );
    assert!(
        lab.ground_truth()
            .entries()
            .iter()
            .any(|e| e.transition == Transition::CachesDropped && e.pod == "lab-node-1")
    );
    assert_eq!(
        status_of(http().post(format!("{}/lab/nodes/nope/drop-caches", lab.api_url))).await,
        404
    );
    lab.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_server_restart_rebinds_the_same_port_and_watchers_recover() {
    let (lab, _dir) = ready_lab(Scenario::Baseline, "local-1b", 14).await;
    let resp = http()
        .get(format!(
            "{}/api/v1/namespaces/{NS}/pods?watch=1",
            lab.api_url
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(
        lab_faults(&lab, &json!({"restart_api_server": true})).await,
        200
    );
    // The open watch is cut.
    let (_, ended) = watch_lines(resp, 1000, Duration::from_secs(20)).await;
    assert!(ended, "the restart must cut open watches");
    // The same URL answers again.
    wait_for(
        Duration::from_secs(20),
        "the API server back on the same port",
        || async {
            let r = http()
                .get(format!("{}/version", lab.api_url))
                .send()
                .await
                .ok()?;
            (r.status().as_u16() == 200).then_some(())
        },
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(client(&lab).await, NS);
    assert_eq!(pods.list(&Default::default()).await.unwrap().items.len(), 1);
    lab.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emptydir_replacements_start_without_models() {
    let (lab, _dir) = ready_lab(Scenario::Emptydir, "local-1b", 15).await;
    let first = pod_names(&lab, "").await.pop().unwrap();
    let tags = |pod: String| {
        let url = format!(
            "{}/api/v1/namespaces/{NS}/pods/{pod}:11434/proxy/api/tags",
            lab.api_url
        );
        async move {
            let r = http().get(url).send().await.ok()?;
            if r.status().as_u16() != 200 {
                return None;
            }
            r.json::<Value>()
                .await
                .ok()
                .map(|v| v["models"].as_array().map(Vec::len).unwrap_or(0))
        }
    };
    let n = wait_for(Duration::from_secs(30), "first pod's tags", || {
        tags(first.clone())
    })
    .await;
    assert!(n >= 1, "the first pod had its models pulled");
    assert_eq!(
        status_of(http().delete(format!(
            "{}/api/v1/namespaces/{NS}/pods/{first}",
            lab.api_url
        )))
        .await,
        200
    );
    let second = wait_for(Duration::from_secs(30), "a replacement", || async {
        pod_names(&lab, "").await.into_iter().find(|p| *p != first)
    })
    .await;
    let n = wait_for(Duration::from_secs(30), "replacement's tags", || {
        tags(second.clone())
    })
    .await;
    assert_eq!(n, 0, "models on an emptyDir die with the pod");
    lab.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_readiness_waits_for_the_runtime() {
    let (lab, _dir) = ready_lab(Scenario::HttpReadiness, "local-1b", 16).await;
    let pod = pod_names(&lab, "").await.pop().unwrap();
    let gt = lab.ground_truth().entries();
    let at = |t: Transition| {
        gt.iter()
            .find(|e| e.pod == pod && e.transition == t)
            .map(|e| e.ts)
            .unwrap()
    };
    assert!(at(Transition::RuntimeListening) <= at(Transition::PodReady));
    assert!(at(Transition::ContainerStarted) < at(Transition::PodReady));
    let (_, d) = get_json(
        &lab,
        &format!("/apis/apps/v1/namespaces/{NS}/deployments/ollama"),
    )
    .await;
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["path"],
        "/api/tags"
    );
    lab.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlap_oom_restarts_the_container() {
    let (lab, _dir) = ready_lab(Scenario::OverlapOom, "local-3b", 17).await;
    let pods: Api<Pod> = Api::namespaced(client(&lab).await, NS);
    let pod = pod_names(&lab, "").await.pop().unwrap();
    let gen_url = format!(
        "{}/api/v1/namespaces/{NS}/pods/{pod}:11434/proxy/api/generate",
        lab.api_url
    );
    let generate = |model: &'static str| {
        let url = gen_url.clone();
        async move {
            http().post(url).json(&json!({"model": model, "prompt": "Reply with exactly: READY", "stream": false, "keep_alive": "1h"}))
                .timeout(Duration::from_secs(60)).send().await
        }
    };
    wait_for(Duration::from_secs(30), "the 1B inference", || async {
        let r = generate("llama3.2:1b").await.ok()?;
        (r.status().as_u16() == 200).then_some(())
    })
    .await;
    let _ = generate("llama3.2:3b").await; // the container dies under it
    let p = wait_for(
        Duration::from_secs(60),
        "restartCount 1 with OOMKilled",
        || async {
            let p = pods.get(&pod).await.ok()?;
            let cs = p.status.clone()?.container_statuses?.into_iter().next()?;
            (cs.restart_count == 1).then_some(cs)
        },
    )
    .await;
    let term = p.last_state.unwrap().terminated.unwrap();
    assert_eq!(term.reason.as_deref(), Some("OOMKilled"));
    assert_eq!(term.exit_code, 137);
    wait_for(
        Duration::from_secs(60),
        "ready again after the restart",
        || async {
            let p = pods.get(&pod).await.ok()?;
            let cs = p.status?.container_statuses?.into_iter().next()?;
            (cs.ready && cs.state?.running.is_some()).then_some(())
        },
    )
    .await;
    let (_, evs) = get_json(&lab, "/api/v1/events").await;
    let evs = evs["items"].as_array().unwrap();
    assert!(
        evs.iter()
            .any(|e| e["reason"] == "SystemOOM" && e["involvedObject"]["kind"] == "Node")
    );
    assert!(
        evs.iter()
            .any(|e| e["reason"] == "BackOff" && e["involvedObject"]["name"] == pod.as_str())
    );
    lab.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollout_scenario_surges_without_a_traffic_gap() {
    let (lab, _dir) = start_lab("local-1b", Scenario::Rollout, 10.0, 18).await;
    lab.wait_ready(Duration::from_secs(120)).await.unwrap();
    let old = pod_names(&lab, "").await.pop().unwrap();
    // Watch the EndpointSlice through the rollout.
    let (_, list) = get_json(
        &lab,
        &format!("/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices"),
    )
    .await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let resp = http().get(format!("{}/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices?watch=1&resourceVersion={rv}&labelSelector=kubernetes.io%2Fservice-name%3Dollama", lab.api_url)).send().await.unwrap();
    // Read the slice's events until it holds only a ready endpoint of a new pod (the old
    // one removed), so the lab is not shut down while that last event is still in flight.
    let old_name = old.clone();
    let watch = tokio::spawn(async move {
        let mut stream = resp.bytes_stream();
        let mut buf = Vec::new();
        let mut events: Vec<Value> = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        while let Ok(Some(Ok(chunk))) = tokio::time::timeout_at(deadline, stream.next()).await {
            buf.extend_from_slice(&chunk);
            while let Some(i) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=i).collect();
                let e: Value = serde_json::from_slice(&line).unwrap();
                let eps = e["object"]["endpoints"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let done = eps.len() == 1
                    && eps[0]["conditions"]["ready"] == true
                    && eps[0]["targetRef"]["name"] != old_name.as_str();
                events.push(e);
                if done {
                    return events;
                }
            }
        }
        events
    });
    let deps: Api<Deployment> = Api::namespaced(client(&lab).await, NS);
    deps.patch("ollama", &PatchParams::default(), &Patch::Strategic(json!({"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "now"}}}}}))).await.unwrap();
    wait_for(
        Duration::from_secs(120),
        "only the new pod left",
        || async {
            let names = pod_names(&lab, "").await;
            (names.len() == 1 && names[0] != old).then_some(())
        },
    )
    .await;
    let events = watch.await.unwrap();
    lab.shutdown().await;
    assert!(events.len() >= 3, "{events:?}");
    let mut saw_two = false;
    for e in &events {
        let eps = e["object"]["endpoints"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let serving = eps
            .iter()
            .filter(|x| x["conditions"]["ready"] == true)
            .count();
        assert!(serving >= 1, "a moment with no ready endpoint: {e}");
        saw_two |= eps.len() == 2;
    }
    assert!(
        saw_two,
        "with maxSurge 1 both pods are endpoints at some point"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selector_watches_see_objects_enter_and_leave_the_selection() {
    let (lab, _dir) = ready_lab(Scenario::Baseline, "local-1b", 19).await;
    let pod = pod_names(&lab, "").await.pop().unwrap();
    let (_, list) = get_json(
        &lab,
        &format!("/api/v1/namespaces/{NS}/pods?labelSelector=canary%3Dyes"),
    )
    .await;
    assert!(list["items"].as_array().unwrap().is_empty());
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let resp = http()
        .get(format!("{}/api/v1/namespaces/{NS}/pods?watch=1&resourceVersion={rv}&labelSelector=canary%3Dyes", lab.api_url))
        .send()
        .await
        .unwrap();
    let reader = tokio::spawn(watch_lines(resp, 2, Duration::from_secs(30)));
    let patch = |v: Value| {
        http()
            .patch(format!("{}/api/v1/namespaces/{NS}/pods/{pod}", lab.api_url))
            .header("Content-Type", "application/merge-patch+json")
            .body(v.to_string())
            .send()
    };
    assert_eq!(
        patch(json!({"metadata": {"labels": {"canary": "yes"}}}))
            .await
            .unwrap()
            .status()
            .as_u16(),
        200
    );
    assert_eq!(
        patch(json!({"metadata": {"labels": {"canary": null}}}))
            .await
            .unwrap()
            .status()
            .as_u16(),
        200
    );
    let (lines, _) = reader.await.unwrap();
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["ADDED", "DELETED"], "{lines:?}");
    assert_eq!(lines[0]["object"]["metadata"]["labels"]["canary"], "yes");
    // The pod itself still exists: it only left the selection.
    assert_eq!(pod_names(&lab, "").await, [pod]);
    lab.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_runtime_fails_the_http_probe_and_recovers() {
    let (lab, _dir) = ready_lab(Scenario::HttpReadiness, "local-1b", 20).await;
    let pods: Api<Pod> = Api::namespaced(client(&lab).await, NS);
    let pod = pod_names(&lab, "").await.pop().unwrap();
    let ready = |want: bool| {
        let pods = pods.clone();
        let pod = pod.clone();
        async move {
            let p = pods.get(&pod).await.ok()?;
            let cs = p.status?.container_statuses?.into_iter().next()?;
            (cs.ready == want).then_some(())
        }
    };
    lab.runtime_faults().set_hang(true);
    // Three failed probes (1 s period / speed 10, 1 s timeout floor 200 ms) turn the pod NotReady.
    wait_for(
        Duration::from_secs(60),
        "NotReady under a hanging runtime",
        || ready(false),
    )
    .await;
    let (_, eps) = get_json(
        &lab,
        &format!("/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices"),
    )
    .await;
    assert_eq!(
        eps["items"][0]["endpoints"][0]["conditions"]["ready"],
        false
    );
    let (_, evs) = get_json(
        &lab,
        &format!("/api/v1/namespaces/{NS}/events?fieldSelector=reason%3DUnhealthy"),
    )
    .await;
    assert!(!evs["items"].as_array().unwrap().is_empty());
    lab.runtime_faults().set_hang(false);
    wait_for(Duration::from_secs(60), "Ready again", || ready(true)).await;
    lab.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absurd_inputs_do_not_take_the_lab_down() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = readygap_lab::serve::LabOptions::new(
        readygap_lab::profile::Profile::named("local-1b").unwrap(),
    );
    o.speed = f64::MIN_POSITIVE;
    o.bookmark_interval = Duration::ZERO;
    o.kubeconfig_out = Some(dir.path().join("kc"));
    let lab = readygap_lab::serve::serve(o).await.unwrap();
    // The pod waits "forever" to be scheduled; the API still answers everything.
    let pod = wait_for(Duration::from_secs(30), "the pod object", || async {
        pod_names(&lab, "").await.pop()
    })
    .await;
    let resp = http()
        .get(format!("{}/api/v1/namespaces/{NS}/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=18446744073709551615", lab.api_url))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let (lines, _) = watch_lines(resp, 2, Duration::from_secs(10)).await;
    assert_eq!(lines[0]["type"], "ADDED");
    for (method, path, body) in [
        (
            "DELETE",
            format!("/api/v1/namespaces/{NS}/pods/{pod}?gracePeriodSeconds=9223372036854775807"),
            "",
        ),
        (
            "PATCH",
            format!("/apis/apps/v1/namespaces/{NS}/deployments/ollama"),
            "not json",
        ),
        (
            "POST",
            format!("/api/v1/namespaces/{NS}/pods"),
            "{\"metadata\": 5}",
        ),
        (
            "GET",
            format!("/api/v1/namespaces/{NS}/pods?watch=1&resourceVersion=abc"),
            "",
        ),
        ("GET", "/api/v1/namespaces/x/widgets".to_string(), ""),
        ("POST", "/lab/faults".to_string(), "[]"),
    ] {
        let r = http()
            .request(method.parse().unwrap(), format!("{}{path}", lab.api_url))
            .header(
                "Content-Type",
                if method == "PATCH" {
                    "application/merge-patch+json"
                } else {
                    "application/json"
                },
            )
            .body(body)
            .send()
            .await
            .unwrap();
        let code = r.status().as_u16();
        assert!(code < 500, "{method} {path}: {code}");
    }
    let (code, _) = get_json(&lab, "/version").await;
    assert_eq!(code, 200);
    lab.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_objects_are_rejected_not_fatal() {
    let (lab, _dir) = start_lab("local-1b", Scenario::Baseline, 10.0, 21).await;
    let cases = [
        (
            "POST",
            format!("/apis/apps/v1/namespaces/{NS}/deployments"),
            "application/json",
            r#"{"metadata": {"name": "x"}, "spec": 5}"#,
        ),
        (
            "POST",
            format!("/apis/apps/v1/namespaces/{NS}/deployments"),
            "application/json",
            r#"{"metadata": {"name": "y"}, "spec": {"template": "z"}}"#,
        ),
        (
            "POST",
            format!("/api/v1/namespaces/{NS}/services"),
            "application/json",
            r#"[1, 2]"#,
        ),
        (
            "PATCH",
            format!("/apis/apps/v1/namespaces/{NS}/deployments/ollama"),
            "application/json-patch+json",
            r#"[{"op": "replace", "path": "", "value": 7}]"#,
        ),
        (
            "PATCH",
            format!("/apis/apps/v1/namespaces/{NS}/deployments/ollama"),
            "application/merge-patch+json",
            r#"{"metadata": 3}"#,
        ),
        (
            "PATCH",
            format!("/apis/apps/v1/namespaces/{NS}/deployments/ollama"),
            "application/merge-patch+json",
            r#"{"spec": {"replicas": "many"}}"#,
        ),
        (
            "PUT",
            format!("/api/v1/namespaces/{NS}/services/ollama"),
            "application/json",
            r#""a string""#,
        ),
        (
            "PUT",
            format!("/apis/apps/v1/namespaces/{NS}/deployments/ollama/scale"),
            "application/json",
            r#"{"spec": {"replicas": -1}}"#,
        ),
    ];
    for (method, path, ct, body) in cases {
        let r = http()
            .request(method.parse().unwrap(), format!("{}{path}", lab.api_url))
            .header("Content-Type", ct)
            .body(body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} {path} {body}: {e}"));
        let code = r.status().as_u16();
        let v: Value = r.json().await.unwrap();
        assert!(
            (400..500).contains(&code),
            "{method} {path} {body}: {code} {v}"
        );
        assert_eq!(v["kind"], "Status", "{v}");
    }
    // Nothing changed.
    let (_, d) = get_json(
        &lab,
        &format!("/apis/apps/v1/namespaces/{NS}/deployments/ollama"),
    )
    .await;
    assert_eq!(d["spec"]["replicas"], 1);
    lab.shutdown().await;
}

/// A Service with `publishNotReadyAddresses`: the lab's EndpointSlice controller marks every
/// endpoint ready and only `serving` follows the pod's Ready (k8s.io/endpointslice utils.go
/// podToEndpoint: ready = PublishNotReadyAddresses || (serving && !terminating)).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_not_ready_addresses_marks_not_ready_endpoints_ready_but_not_serving() {
    use k8s_openapi::api::core::v1::Service;
    let (lab, _dir) = ready_lab(Scenario::HttpReadiness, "local-1b", 21).await;
    let services: Api<Service> = Api::namespaced(client(&lab).await, NS);
    services
        .patch(
            "ollama",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"publishNotReadyAddresses": true}})),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client(&lab).await, NS);
    let old = pod_names(&lab, "").await.pop().unwrap();
    pods.delete(&old, &DeleteParams::default()).await.unwrap();
    // The replacement, before its probe passes: published ready, not serving.
    let lab_ref = &lab;
    let old_ref = &old;
    let cond = wait_for(
        Duration::from_secs(60),
        "a ready, not serving endpoint",
        || async move {
            let (_, eps) = get_json(
                lab_ref,
                &format!("/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices"),
            )
            .await;
            eps["items"][0]["endpoints"]
                .as_array()?
                .iter()
                .find(|e| {
                    e["targetRef"]["name"] != old_ref.as_str()
                        && e["conditions"]["serving"] == false
                })
                .map(|e| e["conditions"].clone())
        },
    )
    .await;
    assert_eq!(cond["ready"], true, "{cond}");
    assert_eq!(cond["terminating"], false, "{cond}");
    lab.shutdown().await;
}

/// Issue 15: a deleted pod's containers stop as on a real node. The Ollama runtime handles
/// SIGTERM and exits within its shutdown time (0.5–1 s), so the pod leaves the API long
/// before its 30 s grace period; a sidecar whose PID 1 is `sh -c` ignores SIGTERM and holds
/// its pod until the grace period ends (the published readiness manifests: ~30 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_pods_leave_when_their_containers_stop_and_a_shell_sidecar_holds_them() {
    // Speed 10: the 30 s grace is 3 s, the runtime's shutdown 50–100 ms.
    let (lab, _dir) = ready_lab(Scenario::Baseline, "local-1b", 91).await;
    let c = client(&lab).await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), NS);
    let gt = lab.ground_truth();
    let span = |name: &str| {
        let e = gt.entries();
        let at = |t: Transition| {
            e.iter()
                .find(|x| x.pod == name && x.transition == t)
                .map(|x| x.ts)
        };
        at(Transition::DeleteAccepted)
            .zip(at(Transition::PodGone))
            .map(|(a, b)| b - a)
    };
    let name = pods.list(&Default::default()).await.unwrap().items[0]
        .metadata
        .name
        .clone()
        .unwrap();
    pods.delete(&name, &DeleteParams::default()).await.unwrap();
    let gone = wait_for(Duration::from_secs(20), "the deleted pod leaves", || {
        let name = name.clone();
        let span = &span;
        async move { span(&name) }
    })
    .await;
    assert!(
        gone.num_milliseconds() < 1_000,
        "gone {} ms after the delete, not after the 3 s (scaled) grace",
        gone.num_milliseconds()
    );

    // A pod with a `sh -c` sidecar: held for the whole grace period.
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "with-sidecar", "labels": {"app": "sidecar-test"}},
        "spec": {
            "terminationGracePeriodSeconds": 20,
            "containers": [
                {"name": "ollama", "image": "ollama/ollama:0.6.8"},
                {"name": "probe", "image": "curlimages/curl:8.10.1",
                 "command": ["sh", "-c", "while true; do sleep 1; done"]}
            ]
        }
    }))
    .unwrap();
    pods.create(&Default::default(), &pod).await.unwrap();
    wait_for(Duration::from_secs(30), "the sidecar pod runs", || {
        let pods = pods.clone();
        async move {
            let p = pods.get("with-sidecar").await.ok()?;
            let s = p.status?.container_statuses?;
            s.first()?.state.as_ref()?.running.as_ref().map(|_| ())
        }
    })
    .await;
    pods.delete("with-sidecar", &DeleteParams::default())
        .await
        .unwrap();
    let held = wait_for(
        Duration::from_secs(20),
        "the sidecar pod leaves",
        || async { span("with-sidecar") },
    )
    .await;
    assert!(
        held.num_milliseconds() >= 1_950,
        "held {} ms: the 2 s (scaled) grace period",
        held.num_milliseconds()
    );
    lab.shutdown().await;
}
