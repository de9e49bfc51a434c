//! kube-rs `watcher` over the lab: the event order a real API server gives, resuming after
//! dropped connections with no missed and no duplicated event, re-listing after 410 Expired.

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams};
use kube::runtime::watcher::{self, Event};
use readygap_lab::kube::resources::PODS;
use readygap_lab::kube::store::{ChangeKind, rv_of};
use readygap_lab::scenario::Scenario;
use readygap_lab::testkit::{client, start_lab, wait_for};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Init,
    InitApply(String),
    InitDone,
    Apply(String, u64),
    Delete(String, u64),
}

fn uid(p: &Pod) -> String {
    p.metadata.uid.clone().unwrap_or_default()
}

fn rv(p: &Pod) -> u64 {
    p.metadata
        .resource_version
        .as_deref()
        .unwrap_or("0")
        .parse()
        .unwrap()
}

/// Run a watcher in the background, recording what it yields.
fn record(api: Api<Pod>) -> (Arc<Mutex<Vec<Seen>>>, tokio::task::JoinHandle<()>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let task = tokio::spawn(async move {
        let cfg = watcher::Config::default();
        let mut stream = watcher::watcher(api, cfg).boxed();
        while let Some(ev) = stream.next().await {
            let item = match ev {
                Ok(Event::Init) => Seen::Init,
                Ok(Event::InitApply(p)) => Seen::InitApply(uid(&p)),
                Ok(Event::InitDone) => Seen::InitDone,
                Ok(Event::Apply(p)) => Seen::Apply(uid(&p), rv(&p)),
                Ok(Event::Delete(p)) => Seen::Delete(uid(&p), rv(&p)),
                Err(_) => {
                    // A dropped connection or 410: the watcher recovers by itself.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            s.lock().unwrap().push(item);
        }
    });
    (seen, task)
}

/// Drop every watch connection and wait until the watcher has opened a new one.
async fn drop_and_wait_for_reconnect(lab: &readygap_lab::serve::LabHandle) {
    let before = lab.watches_opened();
    lab.drop_watches();
    wait_for(
        Duration::from_secs(30),
        "the watcher to reconnect",
        || async { (lab.watches_opened() > before).then_some(()) },
    )
    .await;
}

fn snapshot(seen: &Arc<Mutex<Vec<Seen>>>) -> Vec<Seen> {
    seen.lock().unwrap().clone()
}

/// The pod changes of the store after `after_rv`, as (uid, rv, deleted).
fn store_changes(lab: &readygap_lab::serve::LabHandle, after_rv: u64) -> Vec<Seen> {
    lab.cluster()
        .store
        .history()
        .into_iter()
        .filter(|c| {
            c.resource == PODS
                && c.rv > after_rv
                && c.object["metadata"]["namespace"] == "llm-recovery-lab"
        })
        .map(|c| {
            let uid = c.object["metadata"]["uid"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if c.kind == ChangeKind::Deleted {
                Seen::Delete(uid, c.rv)
            } else {
                Seen::Apply(uid, c.rv)
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_sees_init_then_the_replacement_in_api_server_order() {
    let (lab, _dir) = start_lab("local-1b", Scenario::Baseline, 10.0, 1).await;
    lab.wait_ready(Duration::from_secs(60)).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client(&lab).await, &lab.namespace);
    let first = pods
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .remove(0);
    let (seen, task) = record(pods.clone());
    wait_for(Duration::from_secs(30), "InitDone", || async {
        snapshot(&seen).contains(&Seen::InitDone).then_some(())
    })
    .await;
    let init = snapshot(&seen);
    assert_eq!(
        init,
        vec![Seen::Init, Seen::InitApply(uid(&first)), Seen::InitDone]
    );
    let after = lab.cluster().store.resource_version();

    pods.delete(
        first.metadata.name.as_deref().unwrap(),
        &DeleteParams::default(),
    )
    .await
    .unwrap();
    wait_for(Duration::from_secs(60), "the old pod's Delete", || async {
        snapshot(&seen)
            .iter()
            .any(|s| matches!(s, Seen::Delete(u, _) if *u == uid(&first)))
            .then_some(())
    })
    .await;
    let events = snapshot(&seen)[3..].to_vec();
    // First the old pod turns terminating (an Apply), the replacement appears, the old pod is
    // deleted last (after its grace period).
    assert!(
        matches!(&events[0], Seen::Apply(u, _) if *u == uid(&first)),
        "{events:?}"
    );
    let new_uid = events.iter().find_map(|e| match e {
        Seen::Apply(u, _) if *u != uid(&first) => Some(u.clone()),
        _ => None,
    });
    assert!(new_uid.is_some(), "{events:?}");
    assert!(
        matches!(events.last(), Some(Seen::Delete(u, _)) if *u == uid(&first)),
        "{events:?}"
    );
    // Versions strictly increase, and match the store's history exactly.
    let rvs: Vec<u64> = events
        .iter()
        .map(|e| match e {
            Seen::Apply(_, r) | Seen::Delete(_, r) => *r,
            _ => 0,
        })
        .collect();
    assert!(rvs.windows(2).all(|w| w[0] < w[1]), "{rvs:?}");
    let last = *rvs.last().unwrap();
    let expected: Vec<Seen> = store_changes(&lab, after)
        .into_iter()
        .filter(|s| match s {
            Seen::Apply(_, r) | Seen::Delete(_, r) => *r <= last,
            _ => false,
        })
        .collect();
    assert_eq!(events, expected);
    task.abort();
    lab.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_resumes_after_dropped_connections_without_gaps_or_duplicates() {
    let (lab, _dir) = start_lab("local-1b", Scenario::Baseline, 10.0, 2).await;
    lab.wait_ready(Duration::from_secs(60)).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client(&lab).await, &lab.namespace);
    let (seen, task) = record(pods.clone());
    wait_for(Duration::from_secs(30), "InitDone", || async {
        snapshot(&seen).contains(&Seen::InitDone).then_some(())
    })
    .await;
    let after = lab.cluster().store.resource_version();
    let watches_before = lab.watches_opened();

    // Three replacements, with the watch connections dropped while they happen.
    for round in 0..3 {
        let current = pods.list(&Default::default()).await.unwrap();
        let victim = current
            .items
            .iter()
            .find(|p| p.metadata.deletion_timestamp.is_none())
            .unwrap();
        pods.delete(
            victim.metadata.name.as_deref().unwrap(),
            &DeleteParams::default(),
        )
        .await
        .unwrap();
        drop_and_wait_for_reconnect(&lab).await;
        let rv_now = lab.cluster().store.resource_version();
        wait_for(
            Duration::from_secs(30),
            "the watcher to catch up",
            || async {
                let n = snapshot(&seen)
                    .iter()
                    .filter_map(|s| match s {
                        Seen::Apply(_, r) | Seen::Delete(_, r) => Some(*r),
                        _ => None,
                    })
                    .max();
                (n >= Some(rv_now)).then_some(())
            },
        )
        .await;
        drop_and_wait_for_reconnect(&lab).await;
        lab.wait_ready(Duration::from_secs(60))
            .await
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
    }
    // Wait for every terminating pod to be gone, then compare with the store.
    let store = lab.cluster().store.clone();
    wait_for(Duration::from_secs(60), "terminating pods gone", || async {
        store
            .list(PODS, Some("llm-recovery-lab"))
            .0
            .iter()
            .all(|p| p["metadata"]["deletionTimestamp"].is_null())
            .then_some(())
    })
    .await;
    let final_rv = store
        .list(PODS, Some("llm-recovery-lab"))
        .0
        .iter()
        .map(|p| rv_of(p))
        .max()
        .unwrap();
    let expected = store_changes(&lab, after);
    let last_expected = match expected.last() {
        Some(Seen::Apply(_, r) | Seen::Delete(_, r)) => *r,
        _ => final_rv,
    };
    wait_for(Duration::from_secs(30), "all changes delivered", || async {
        snapshot(&seen)
            .iter()
            .any(|s| matches!(s, Seen::Apply(_, r) | Seen::Delete(_, r) if *r == last_expected))
            .then_some(())
    })
    .await;
    let got: Vec<Seen> = snapshot(&seen)
        .into_iter()
        .skip_while(|s| *s != Seen::InitDone)
        .skip(1)
        .collect();
    assert!(
        !got.contains(&Seen::Init),
        "a dropped connection must resume, not re-list: {got:?}"
    );
    assert!(
        lab.watches_opened() >= watches_before + 6,
        "every drop made the watcher reconnect"
    );
    assert!(
        got.iter().filter(|s| matches!(s, Seen::Delete(..))).count() >= 3,
        "{got:?}"
    );
    assert_eq!(got, expected, "watcher events vs the store's history");
    task.abort();
    lab.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_relists_after_410_expired() {
    let (lab, _dir) = start_lab("local-1b", Scenario::Baseline, 10.0, 3).await;
    lab.wait_ready(Duration::from_secs(60)).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client(&lab).await, &lab.namespace);
    let (seen, task) = record(pods.clone());
    wait_for(Duration::from_secs(30), "InitDone", || async {
        snapshot(&seen).contains(&Seen::InitDone).then_some(())
    })
    .await;
    // Something changes (so the watcher's version is old), history is compacted, connection drops.
    let name = pods.list(&Default::default()).await.unwrap().items[0]
        .metadata
        .name
        .clone()
        .unwrap();
    pods.delete(&name, &DeleteParams::default()).await.unwrap();
    wait_for(Duration::from_secs(30), "the terminating Apply", || async {
        snapshot(&seen)
            .iter()
            .any(|s| matches!(s, Seen::Apply(..)))
            .then_some(())
    })
    .await;
    lab.expire_resource_versions();
    lab.drop_watches();
    wait_for(
        Duration::from_secs(30),
        "a second Init (re-list)",
        || async {
            (snapshot(&seen).iter().filter(|s| **s == Seen::Init).count() >= 2).then_some(())
        },
    )
    .await;
    wait_for(Duration::from_secs(30), "a second InitDone", || async {
        (snapshot(&seen)
            .iter()
            .filter(|s| **s == Seen::InitDone)
            .count()
            >= 2)
            .then_some(())
    })
    .await;
    // The re-list holds what the store holds at that point.
    let all = snapshot(&seen);
    let second_init = all.iter().rposition(|s| *s == Seen::Init).unwrap();
    let relisted: Vec<&Seen> = all[second_init..]
        .iter()
        .take_while(|s| **s != Seen::InitDone)
        .filter(|s| matches!(s, Seen::InitApply(_)))
        .collect();
    assert!(!relisted.is_empty(), "{all:?}");
    task.abort();
    lab.shutdown().await;
}
