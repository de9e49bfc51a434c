//! Scale on the real API server: the one `ollama` Deployment in a namespace with 5,000 other
//! pods that the scheduler cannot place (a nodeSelector no node has: they cost the API server
//! and etcd, not the kubelet), each with the real scheduler's `FailedScheduling` Event. The
//! dashboard's sources (`readygap run`, two trials) and `readygap watch` (one replacement by
//! someone else) each reach the API server through a TCP relay of their own that counts the
//! bytes (TLS records included), and end with their peak RSS and CPU from `wait4(2)`.
//!
//! Asserted against the audit log (every list and watch is recorded at Metadata level, its
//! query in `requestURI`): each list and watch readygap made is scoped to the target (a label
//! selector, a field selector on a name, or one named object), Nodes apart and the watcher's
//! EndpointSlices (one per Service: it finds a Deployment's Service from them); and what each
//! read in all is less than the namespace's pod Events alone, which one namespace-wide Event
//! watch would have listed first. The figures are printed for docs/benchmarks.md.

use crate::external::{Watch, audit_len, audit_log, user_request};
use crate::support::{Cluster, NS, Relay, cluster, repo, wait_until};
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const OTHERS: usize = 5_000;
const FILLER: &str = "readygap.io/bench=filler";

/// What a child cost (`wait4(2)`'s rusage, as `lab bench` reads it) over `wall_s`.
struct Cost {
    wall_s: f64,
    cpu_s: f64,
    peak_rss_mib: f64,
}

/// Wait for `child` (killed after 10 minutes): its exit code and its cost.
fn wait_cost(child: &mut Child, started: Instant, what: &str) -> (i32, Cost) {
    let (code, cost) =
        readygap::commands::bench::wait_with_cost(child, Duration::from_secs(600), what)
            .unwrap_or_else(|e| panic!("{e}"));
    let cost = Cost {
        wall_s: started.elapsed().as_secs_f64(),
        cpu_s: cost.cpu_s,
        peak_rss_mib: cost.peak_rss_mib,
    };
    (code, cost)
}

/// The 5,000 other pods: created at the start, deleted (one deletecollection) at the end.
struct Fillers<'a>(&'a Cluster);

impl Fillers<'_> {
    fn create<'a>(c: &'a Cluster, dir: &Path) -> Fillers<'a> {
        let f = Fillers(c);
        f.delete();
        // Eight kubectl processes side by side: one alone is held to its client rate limit.
        let files: Vec<_> = (0..8)
            .map(|part| {
                let items: Vec<Value> = (0..OTHERS)
                    .filter(|i| i % 8 == part)
                    .map(|i| {
                        serde_json::json!({
                            "apiVersion": "v1", "kind": "Pod",
                            "metadata": {"name": format!("filler-{i:04}"), "namespace": NS,
                                "labels": {"readygap.io/bench": "filler"}},
                            "spec": {"nodeSelector": {"readygap.io/nowhere": "true"},
                                "containers": [{"name": "c", "image": "busybox:1.36",
                                    "command": ["sleep", "infinity"]}]}
                        })
                    })
                    .collect();
                let path = dir.join(format!("filler-{part}.json"));
                let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
                std::fs::write(&path, list.to_string()).unwrap();
                path
            })
            .collect();
        let started = Instant::now();
        let children: Vec<Child> = files
            .iter()
            .map(|p| {
                c.kubectl()
                    .args(["create", "-o", "name", "-f"])
                    .arg(p)
                    .stdout(Stdio::null())
                    .spawn()
                    .expect("kubectl create")
            })
            .collect();
        for mut ch in children {
            assert!(ch.wait().unwrap().success(), "kubectl create of fillers");
        }
        eprintln!(
            "scale: {OTHERS} pods created in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        f
    }

    fn delete(&self) {
        // DELETE on the collection: one request (kubectl delete -l deletes one by one). A pod
        // no node was ever bound to is gone at once, but the API server deletes the
        // collection one pod at a time, bounded by its request timeout: on a busy machine a
        // run was left with 597 of 5,000 after one request and 300 s, so the request is sent
        // again until none is left.
        let path = format!(
            "/api/v1/namespaces/{NS}/pods?labelSelector={}",
            FILLER.replace('=', "%3D")
        );
        wait_until("the filler pods gone", Duration::from_secs(600), || {
            count(self.0, &["pods", "-l", FILLER]) == 0 || {
                let _ = self
                    .0
                    .kubectl()
                    .args(["delete", "--raw", &path])
                    .stdout(Stdio::null())
                    .status();
                count(self.0, &["pods", "-l", FILLER]) == 0
            }
        });
    }
}

impl Drop for Fillers<'_> {
    fn drop(&mut self) {
        self.delete();
    }
}

/// How many objects `kubectl get ARGS -o name` lists in the namespace (paged at 500).
fn count(c: &Cluster, args: &[&str]) -> usize {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend(["-o", "name", "--chunk-size=500"]);
    c.kn(&all).lines().filter(|l| !l.is_empty()).count()
}

/// The audit log's list and watch records of readygap's User-Agent written after byte `from`,
/// at their end (ResponseComplete), as (verb, requestURI).
fn readygap_reads(from: u64) -> Vec<(String, String)> {
    let text = std::fs::read(audit_log()).expect("the audit log");
    let ua = readygap_live::cluster::USER_AGENT;
    String::from_utf8_lossy(&text[from as usize..])
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| {
            (e["verb"] == "list" || e["verb"] == "watch")
                && e["userAgent"].as_str().is_some_and(|u| u.starts_with(ua))
                && e["stage"] != "RequestReceived"
        })
        .map(|e| {
            (
                e["verb"].as_str().unwrap_or("").to_owned(),
                e["requestURI"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// Each list or watch is scoped to the target, Nodes and the resources `unscoped` names
/// apart; the reads, printed, as (verb, path, scope) once each.
fn assert_scoped(what: &str, reads: &[(String, String)], unscoped: &[&str]) {
    let mut seen = std::collections::BTreeSet::new();
    for (verb, uri) in reads {
        let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
        let scope = readygap::commands::bench_scale::scope_of(path, query);
        let pattern = readygap::commands::bench_scale::pattern_of(path);
        if seen.insert((verb.clone(), pattern.clone(), scope)) {
            eprintln!("scale: {what}: {verb} {pattern} ?{query} -> {scope}");
        }
        let nodes = path == "/api/v1/nodes";
        let allowed = unscoped.iter().any(|r| path.ends_with(&format!("/{r}")));
        assert!(
            nodes || allowed || scope == "label" || scope == "name",
            "{what}: {verb} {uri} reads more than the target ({scope})"
        );
    }
    assert!(
        reads
            .iter()
            .any(|(v, u)| v == "watch" && u.contains("/pods?")),
        "{what}: no pod watch in the audit log: {reads:?}"
    );
}

fn report(what: &str, relay: &Relay, cost: &Cost, events_list: u64) {
    let read = relay.read();
    eprintln!(
        "scale: {what} with {OTHERS} other pods: read {read} B (written {} B) over {:.1} s; \
         peak RSS {:.1} MiB; CPU {:.2} s ({:.2} s per minute); the namespace's pod Events \
         list alone: {events_list} B",
        relay.written(),
        cost.wall_s,
        cost.peak_rss_mib,
        cost.cpu_s,
        cost.cpu_s * 60.0 / cost.wall_s
    );
    assert!(
        read < events_list,
        "{what} read {read} B: more than the namespace's pod Events ({events_list} B)"
    );
}

#[ignore = "needs the real cluster: scripts/cluster.sh up"]
#[test]
fn five_thousand_other_pods_cost_neither_the_dashboard_nor_the_watcher_what_they_do_not_show() {
    let c = cluster();
    c.deploy(&repo().join("manifests/overlays/smollm2"));
    crate::study::client_pod(&c);
    let dir = tempfile::tempdir().unwrap();
    let fillers = Fillers::create(&c, dir.path());
    // The scheduler has tried each and said why: a FailedScheduling Event about each of
    // these pods (by uid: an earlier run's pods of the same names left theirs for an hour).
    let uids = |args: &[&str], path: &str| -> std::collections::BTreeSet<String> {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        let jsonpath = format!("jsonpath={{range .items[*]}}{{{path}}}{{\"\\n\"}}{{end}}");
        all.extend(["--chunk-size=500", "-o", &jsonpath]);
        c.kn(&all).lines().map(str::to_owned).collect()
    };
    let pods = uids(&["pods", "-l", FILLER], ".metadata.uid");
    assert_eq!(pods.len(), OTHERS);
    let started = Instant::now();
    wait_until(
        "a FailedScheduling Event about every filler pod",
        Duration::from_secs(600),
        || {
            let said = uids(
                &["events", "--field-selector", "reason=FailedScheduling"],
                ".involvedObject.uid",
            );
            pods.iter().all(|u| said.contains(u))
        },
    );
    eprintln!(
        "scale: {OTHERS} FailedScheduling Events {:.1} s after the pods",
        started.elapsed().as_secs_f64()
    );
    // What one namespace-wide watch of the pod Events would list first (JSON, as readygap
    // reads; one response, unpaged, as a watcher's first list of them would add up to).
    let events_list = c
        .kn(&[
            "get",
            "--raw",
            &format!("/api/v1/namespaces/{NS}/events?fieldSelector=involvedObject.kind%3DPod"),
        ])
        .len() as u64;

    let kubeconfig_via = |relay: &Relay, name: &str| {
        let path = dir.path().join(name);
        crate::support::kubeconfig_at(&c, &format!("https://{}", relay.addr), &path);
        path
    };
    let to = c.server().trim_start_matches("https://").to_owned();

    // The dashboard's sources, headless: two trials.
    let relay = Relay::start(to.clone());
    let kc = kubeconfig_via(&relay, "run.kubeconfig");
    let rec = dir.path().join("run.jsonl");
    let from = audit_len();
    let t = Instant::now();
    let mut run = c
        .readygap_at(
            &kc,
            &[
                "run",
                "-n",
                NS,
                "--deployment",
                "ollama",
                "--trials",
                "2",
                "--cooldown",
                "2s",
                "--record",
                &rec.to_string_lossy(),
            ],
        )
        .stdout(Stdio::null())
        .spawn()
        .expect("readygap run");
    let (status, cost) = wait_cost(&mut run, t, "readygap run");
    assert_eq!(status, 0, "readygap run's exit status");
    let trials = crate::support::own_trials(&rec);
    assert_eq!(trials.len(), 2, "two trials recorded");
    assert!(
        trials.iter().all(|t| t.marks.t4.is_some()),
        "both reached T4"
    );
    assert_scoped("run", &readygap_reads(from), &[]);
    report("readygap run (2 trials)", &relay, &cost, events_list);

    // The fleet watcher: one replacement by someone else, counted once.
    let relay = Relay::start(to);
    let kc = kubeconfig_via(&relay, "watch.kubeconfig");
    let from = audit_len();
    let t = Instant::now();
    let watch = Watch::start_at(&c, &kc, &dir.path().join("watch"));
    let pod = c.pod();
    c.kn(&["delete", "pod", &pod, "--wait=false"]);
    c.settle();
    user_request(&c);
    wait_until("the watcher's trial", Duration::from_secs(180), || {
        watch.seen() >= 1
    });
    assert_eq!(watch.seen(), 1, "one replacement, one trial");
    let (status, cost) = watch.stop_with_cost(t);
    assert_eq!(status, 0, "readygap watch's exit status");
    // The watcher finds each Deployment's Service from the EndpointSlices that name its pods:
    // it watches the namespace's slices (one per Service; the other pods have none).
    assert_scoped("watch", &readygap_reads(from), &["endpointslices"]);
    report("readygap watch (1 replacement)", &relay, &cost, events_list);
    drop(fillers);
}

impl Watch {
    /// Stop the watcher (SIGINT) and wait for it: its exit status and cost.
    fn stop_with_cost(mut self, started: Instant) -> (i32, Cost) {
        let child = self.child();
        // What its resident set is made of just before it stops: a debug build's is mostly
        // its own binary's pages (RssFile).
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
        let rss: Vec<&str> = status
            .lines()
            .filter(|l| {
                ["VmHWM", "RssAnon", "RssFile"]
                    .iter()
                    .any(|k| l.starts_with(k))
            })
            .collect();
        eprintln!("scale: readygap watch before it stops: {}", rss.join(", "));
        let _ = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status();
        wait_cost(child, started, "readygap watch")
    }
}
