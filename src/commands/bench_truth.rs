//! `readygap lab bench --cluster real`: the ground truth of a real cluster, from the real
//! components' own records, as the lab's ground-truth entries (so the same pairing and
//! statistics judge both benches).
//!
//! - **Ready (T1)**: the kubelet's write of the pod's status that sets the `Ready` condition
//!   `True`. The kubelet writes status as a strategic-merge patch of `pods/status` holding only
//!   what changed (kubernetes `pkg/kubelet/status/status_manager.go` `syncPod` →
//!   `pkg/util/pod/pod.go` `PatchPodStatus`), so the first patch of the new pod whose body
//!   has `{"type":"Ready","status":"True"}` is the write; its instant is the audit event's
//!   `stageTimestamp` at `ResponseComplete` (audit.k8s.io/v1 `Event`, one JSON line each in
//!   the API server's `--audit-log-path`; the policy must log `pods/status` writes at
//!   `Request` level, as `scripts/cluster.sh`'s does).
//! - **Endpoints**: the EndpointSlice controller's writes of the Service's slices (the policy
//!   logs them at `RequestResponse`: the stored slice, named even when it was created from
//!   `generateName`; a delete names its slice), replayed from the slices as they stood when
//!   the bench began through the union and diff that readygap's and the loop's views go
//!   through (`readygap_core::bench`).
//! - **T2 and T4**: the runtime's own lines in its container log, with the container
//!   runtime's timestamps (`kubectl logs --timestamps`: containerd's CRI plugin stamps each
//!   line as it reads it from the container's output): Ollama's `Listening on` (written once
//!   the listener is open, `server/routes.go` `Serve`) and gin's line of a generate answered
//!   200 from outside the pod (written when the handler has returned;
//!   `readygap_core::runtime_log`; the shipped readiness probe's generates come from
//!   127.0.0.1 and are not a trial's). A follower per pod keeps each log, since a replaced
//!   pod's log goes with it.
//!
//! The clocks: the API server's, the node's and the bench's must agree (one machine here).

use color_eyre::eyre::{Result, WrapErr, eyre};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use readygap_core::bench::{EndpointChange, Endpoints, SliceUnion, endpoint_instants};
use readygap_core::event::Timestamp;
use readygap_core::runtime_log::{LogMark, mark, parse_line};
use readygap_lab::ground_truth::{GroundTruthEntry, Transition};
use serde::Deserialize;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The API server's audit log from a point on: what was appended after [`AuditLog::from_end`].
pub struct AuditLog {
    path: PathBuf,
    start: u64,
    inode: u64,
}

impl AuditLog {
    /// Remember where the log ends now.
    pub fn from_end(path: &Path) -> Result<Self> {
        let md = std::fs::metadata(path)
            .wrap_err_with(|| format!("the audit log {}", path.display()))?;
        Ok(Self {
            path: path.to_path_buf(),
            start: md.len(),
            inode: md.ino(),
        })
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The complete lines appended since (a line still being written is left out), and the
    /// line number of the first.
    pub fn appended(&self) -> Result<(String, usize)> {
        let mut f = std::fs::File::open(&self.path)
            .wrap_err_with(|| format!("the audit log {}", self.path.display()))?;
        if f.metadata()?.ino() != self.inode {
            return Err(eyre!(
                "the audit log {} was rotated while the bench ran (raise --audit-log-maxsize)",
                self.path.display()
            ));
        }
        // The line number of the first new line, for errors that name it.
        let (mut before, mut buf) = (0, vec![0u8; 1 << 16]);
        let mut prefix = (&mut f).take(self.start);
        loop {
            let n = prefix.read(&mut buf)?;
            if n == 0 {
                break;
            }
            before += buf[..n].iter().filter(|b| **b == b'\n').count();
        }
        f.seek(SeekFrom::Start(self.start))?;
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes)?;
        let end = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        bytes.truncate(end);
        let text = String::from_utf8(bytes)
            .map_err(|e| eyre!("the audit log {}: not UTF-8: {e}", self.path.display()))?;
        Ok((text, before + 1))
    }
}

/// The fields of an audit event the truth needs (audit.k8s.io/v1 `Event`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AuditEvent {
    verb: String,
    stage: String,
    stage_timestamp: Timestamp,
    #[serde(default)]
    object_ref: ObjectRef,
    response_status: Option<ResponseStatus>,
    request_object: Option<serde_json::Value>,
    response_object: Option<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ObjectRef {
    #[serde(default)]
    resource: String,
    #[serde(default)]
    subresource: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    name: String,
}

#[derive(Debug, Deserialize)]
struct ResponseStatus {
    #[serde(default)]
    code: u16,
}

impl AuditEvent {
    /// A completed write that succeeded, of `resource[/subresource]` in `namespace`.
    fn wrote(&self, namespace: &str, resource: &str, subresource: &str) -> bool {
        const WRITES: [&str; 4] = ["create", "update", "patch", "delete"];
        self.stage == "ResponseComplete"
            && WRITES.contains(&self.verb.as_str())
            && self.object_ref.namespace == namespace
            && self.object_ref.resource == resource
            && self.object_ref.subresource == subresource
            && self
                .response_status
                .as_ref()
                .is_some_and(|s| (200..300).contains(&s.code))
    }
}

/// Does this status write set the Ready condition true?
fn sets_ready(body: &serde_json::Value) -> bool {
    body.pointer("/status/conditions")
        .and_then(|c| c.as_array())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// A ground-truth entry of `pod` at `ts`.
fn entry(ts: Timestamp, pod: &str, transition: Transition) -> GroundTruthEntry {
    GroundTruthEntry {
        ts,
        pod: pod.to_string(),
        transition,
        detail: serde_json::Value::Null,
    }
}

/// The audit events of a stretch of the log, in the order their responses completed.
pub struct AuditRecords {
    file: PathBuf,
    events: Vec<AuditEvent>,
}

impl AuditRecords {
    /// Parse `text`, lines of the audit log `file` from line `first`.
    pub fn parse(text: &str, first: usize, file: &Path) -> Result<Self> {
        let mut events = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                serde_json::from_str(l)
                    .map_err(|e| eyre!("{}:{}: not an audit event: {e}", file.display(), first + i))
            })
            .collect::<Result<Vec<AuditEvent>>>()?;
        // The log is written in completion order, near enough; a replay needs it exactly.
        events.sort_by_key(|e| e.stage_timestamp);
        Ok(Self {
            file: file.to_path_buf(),
            events,
        })
    }

    /// Each pod of `namespace` turning Ready: the instant of each status write that set the
    /// condition.
    pub fn ready(&self, namespace: &str) -> Result<Vec<GroundTruthEntry>> {
        let writes: Vec<&AuditEvent> = self
            .events
            .iter()
            .filter(|e| e.wrote(namespace, "pods", "status"))
            .collect();
        if !writes.is_empty() && writes.iter().all(|e| e.request_object.is_none()) {
            return Err(eyre!(
                "{}: the pods/status writes have no requestObject: the audit policy must log \
             them at Request level",
                self.file.display()
            ));
        }
        let out: Vec<GroundTruthEntry> = writes
            .iter()
            .filter(|e| e.request_object.as_ref().is_some_and(sets_ready))
            .map(|e| entry(e.stage_timestamp, &e.object_ref.name, Transition::PodReady))
            .collect();
        Ok(out)
    }

    /// The endpoint transitions of `service`'s slices in `namespace` after `start`, when they
    /// stood as `slices`.
    pub fn endpoints(
        &self,
        (namespace, service): (&str, &str),
        slices: &[EndpointSlice],
        start: Timestamp,
    ) -> Result<Vec<GroundTruthEntry>> {
        let file = &self.file;
        let mut union = SliceUnion::default();
        let of_service = |s: &EndpointSlice| {
            s.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("kubernetes.io/service-name"))
                .is_some_and(|n| n == service)
        };
        let mut now = Endpoints::new();
        for s in slices.iter().filter(|s| of_service(s)) {
            now = union.apply(&readygap_live::sources::kube::endpoint_slice_view(s));
        }
        let mut known: BTreeSet<String> = slices
            .iter()
            .filter(|s| of_service(s))
            .filter_map(|s| s.metadata.name.clone())
            .collect();
        let mut states = vec![(start, now)];
        let mut out = Vec::new();
        for e in self
            .events
            .iter()
            .filter(|e| e.wrote(namespace, "endpointslices", "") && e.stage_timestamp > start)
        {
            if e.verb == "delete" {
                if known.remove(&e.object_ref.name) {
                    states.push((e.stage_timestamp, union.delete(&e.object_ref.name)));
                }
                continue;
            }
            let Some(body) = e.response_object.as_ref().or(e.request_object.as_ref()) else {
                return Err(eyre!(
                    "{}: an EndpointSlice {} without its object: the audit policy must log \
                 EndpointSlice writes at RequestResponse level",
                    file.display(),
                    e.verb
                ));
            };
            let slice: EndpointSlice =
                serde_json::from_value(body.clone()).wrap_err_with(|| {
                    format!("{}: the EndpointSlice of a {}", file.display(), e.verb)
                })?;
            if of_service(&slice) {
                known.extend(slice.metadata.name.clone());
                let view = readygap_live::sources::kube::endpoint_slice_view(&slice);
                states.push((e.stage_timestamp, union.apply(&view)));
            }
        }
        for i in endpoint_instants(&states) {
            if let Some(c) = EndpointChange::ALL.iter().find(|c| c.name() == i.what) {
                out.push(entry(i.ts, &i.pod, Transition::of_endpoint(*c)));
            }
        }
        Ok(out)
    }
}

/// The ground truth in one pod's container log (`kubectl logs --timestamps`): the runtime
/// listening, and each inference answered 200.
pub fn log_truth(pod: &str, text: &str) -> Vec<GroundTruthEntry> {
    text.lines()
        .filter_map(|l| {
            let (ts, line) = l.split_once(' ')?;
            let ts = chrono::DateTime::parse_from_rfc3339(ts).ok()?.to_utc();
            let transition = match mark(line)? {
                LogMark::Listening => Transition::RuntimeListening,
                LogMark::Inference => {
                    let req = parse_line(pod, line)?;
                    // The shipped readiness probe infers from inside the pod (127.0.0.1):
                    // not a trial's inference.
                    if req.status != 200 || req.from_localhost() {
                        return None;
                    }
                    Transition::InferenceDone
                }
                _ => return None,
            };
            Some(entry(ts, pod, transition))
        })
        .collect()
}

/// Keeps the container log of every pod a selector matches while the bench runs: one
/// `kubectl get pods --watch` for the names, one `kubectl logs -f --timestamps` per pod
/// (again until its container has started), each log in `DIR/NAME.log`.
pub struct LogFollower {
    watch: Child,
    followers: Arc<Mutex<Vec<Child>>>,
    stopping: Arc<AtomicBool>,
    dir: PathBuf,
}

/// A configured kubectl command (the bench's).
type Kubectl = Arc<dyn Fn() -> Command + Send + Sync>;

impl LogFollower {
    /// Start following the pods of `selector`; `kubectl` makes a configured kubectl command.
    pub fn start(
        kubectl: impl Fn() -> Command + Send + Sync + 'static,
        selector: &str,
        dir: &Path,
    ) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        let mut watch = kubectl()
            .args(["get", "pods", "-l", selector, "--watch", "-o", "name"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .wrap_err("starting kubectl get pods --watch")?;
        let stdout = watch.stdout.take().ok_or_else(|| eyre!("no stdout"))?;
        let follower = Follower {
            kubectl: Arc::new(kubectl),
            dir: dir.to_path_buf(),
            children: Arc::default(),
            stopping: Arc::default(),
        };
        let (followers, stopping) = (follower.children.clone(), follower.stopping.clone());
        std::thread::spawn(move || {
            let mut seen = BTreeSet::new();
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let name = line.trim().trim_start_matches("pod/").to_string();
                if !name.is_empty() && seen.insert(name.clone()) {
                    let f = follower.clone();
                    std::thread::spawn(move || f.follow(&name));
                }
            }
        });
        Ok(Self {
            watch,
            followers,
            stopping,
            dir: dir.to_path_buf(),
        })
    }

    /// Stop following; each pod's log as read.
    pub fn stop(mut self) -> Result<Vec<(String, String)>> {
        self.stopping.store(true, Ordering::SeqCst);
        let _ = self.watch.kill();
        let _ = self.watch.wait();
        for c in self
            .followers
            .lock()
            .map_err(|_| eyre!("poisoned"))?
            .iter_mut()
        {
            let _ = c.kill();
            let _ = c.wait();
        }
        let mut out = Vec::new();
        for e in std::fs::read_dir(&self.dir)? {
            let p = e?.path();
            if let Some(pod) = p.file_stem().and_then(|s| s.to_str())
                && p.extension().is_some_and(|x| x == "log")
            {
                out.push((pod.to_string(), std::fs::read_to_string(&p)?));
            }
        }
        Ok(out)
    }
}

/// What each pod's follower shares.
#[derive(Clone)]
struct Follower {
    kubectl: Kubectl,
    dir: PathBuf,
    children: Arc<Mutex<Vec<Child>>>,
    stopping: Arc<AtomicBool>,
}

impl Follower {
    /// Follow one pod's log into `DIR/POD.log`: `kubectl logs -f` refuses a container not
    /// yet started, so try again every 200 ms until one has run, the pod is gone, the bench
    /// stops, or 10 minutes have passed.
    fn follow(&self, pod: &str) {
        let (path, err) = (
            self.dir.join(format!("{pod}.log")),
            self.dir.join(format!("{pod}.err")),
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(600);
        while std::time::Instant::now() < deadline && !self.stopping.load(Ordering::SeqCst) {
            let (Ok(out), Ok(errors)) = (std::fs::File::create(&path), std::fs::File::create(&err))
            else {
                return;
            };
            let Ok(child) = (self.kubectl)()
                .args(["logs", "-f", "--timestamps", &format!("pod/{pod}")])
                .stdout(out)
                .stderr(errors)
                .spawn()
            else {
                return;
            };
            let i = {
                let Ok(mut list) = self.children.lock() else {
                    return;
                };
                list.push(child);
                list.len() - 1
            };
            // Wait for this try to end (the container stopped, or it had not started).
            loop {
                let Ok(mut list) = self.children.lock() else {
                    return;
                };
                if !matches!(list[i].try_wait(), Ok(None)) {
                    break;
                }
                drop(list);
                std::thread::sleep(Duration::from_millis(200));
            }
            let said = std::fs::read_to_string(&err).unwrap_or_default();
            if std::fs::metadata(&path).is_ok_and(|m| m.len() > 0)
                || said.contains("NotFound")
                || said.contains("not found")
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("a time")
    }

    #[test]
    fn the_runtimes_lines_are_its_listening_and_its_answered_generates_from_outside() {
        let log = "\
2026-12-07T19:01:02.100000000Z time=2026-12-07T19:01:02.099Z level=INFO source=routes.go:1539 msg=\"Listening on [::]:11434 (version 0.12.6)\"
2026-12-07T19:01:02.200000000Z [GIN] 2026/12/07 - 19:01:02 | 200 |      41.2µs |     10.254.1.1 | GET      \"/\"
2026-12-07T19:01:04.100000000Z [GIN] 2026/12/07 - 19:01:04 | 200 |  1.077487749s |       127.0.0.1 | POST     \"/api/generate\"
2026-12-07T19:01:05.300000000Z [GIN] 2026/12/07 - 19:01:05 | 500 |  1.0s |     10.254.1.1 | POST     \"/api/generate\"
2026-12-07T19:01:07.456789000Z [GIN] 2026/12/07 - 19:01:07 | 200 |  2.104s |     10.254.1.1 | POST     \"/api/generate\"
not a stamped line
";
        let t = log_truth("ollama-a", log);
        let got: Vec<_> = t.iter().map(|e| (e.transition, e.ts)).collect();
        assert_eq!(
            got,
            vec![
                (Transition::RuntimeListening, ts("2026-12-07T19:01:02.100Z")),
                (Transition::InferenceDone, ts("2026-12-07T19:01:07.456789Z")),
            ]
        );
        assert!(t.iter().all(|e| e.pod == "ollama-a"));
    }

    /// One audit line in the shape the real API server writes (v1.34; trimmed from
    /// `scripts/cluster.sh`'s audit log: user, sourceIPs, annotations, managedFields left out).
    /// A pod's `status` subresource, or (no subresource) an EndpointSlice.
    fn audit(verb: &str, name: &str, sub: &str, code: u16, body: &str, at: &str) -> String {
        let (resource, group) = if sub.is_empty() {
            ("endpointslices", r#","apiGroup":"discovery.k8s.io""#)
        } else {
            ("pods", "")
        };
        let sub = if sub.is_empty() {
            String::new()
        } else {
            format!(r#","subresource":"{sub}""#)
        };
        format!(
            r#"{{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Request","auditID":"4c99cec7","stage":"ResponseComplete","requestURI":"/x","verb":"{verb}","userAgent":"kubelet/v1.34.4 (linux/amd64) kubernetes/$Format","objectRef":{{"resource":"{resource}","namespace":"llm-recovery-lab","name":"{name}","apiVersion":"v1"{group}{sub}}},"responseStatus":{{"metadata":{{}},"code":{code}}}{body},"requestReceivedTimestamp":"{at}","stageTimestamp":"{at}"}}"#
        )
    }

    fn conditions(ready: &str) -> String {
        format!(
            r#","requestObject":{{"metadata":{{"uid":"3449298a"}},"status":{{"$setElementOrder/conditions":[{{"type":"Ready"}},{{"type":"ContainersReady"}}],"conditions":[{{"lastProbeTime":null,"lastTransitionTime":"2026-12-07T19:22:00Z","status":"{ready}","type":"Ready"}},{{"lastProbeTime":null,"lastTransitionTime":"2026-12-07T19:22:00Z","status":"{ready}","type":"ContainersReady"}}],"containerStatuses":[{{"name":"ollama","ready":{}}}]}}}}"#,
            ready == "True"
        )
    }

    fn slice_body(endpoints: &[(&str, bool, bool, bool)]) -> String {
        let eps: Vec<String> = endpoints
            .iter()
            .map(|(pod, ready, serving, terminating)| {
                format!(
                    r#"{{"addresses":["10.244.0.3"],"conditions":{{"ready":{ready},"serving":{serving},"terminating":{terminating}}},"targetRef":{{"kind":"Pod","namespace":"llm-recovery-lab","name":"{pod}","uid":"3449298a"}},"nodeName":"readygap-node"}}"#
                )
            })
            .collect();
        let slice = format!(
            r#"{{"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1","metadata":{{"name":"ollama-zvqjc","generateName":"ollama-","namespace":"llm-recovery-lab","labels":{{"app":"ollama","endpointslice.kubernetes.io/managed-by":"endpointslice-controller.k8s.io","kubernetes.io/service-name":"ollama"}}}},"addressType":"IPv4","endpoints":[{}],"ports":[{{"name":"http","protocol":"TCP","port":11434}}]}}"#,
            eps.join(",")
        );
        format!(r#","requestObject":{slice},"responseObject":{slice}"#)
    }

    #[test]
    fn ready_is_the_first_status_write_that_sets_the_condition() {
        let lines = [
            audit(
                "patch",
                "ollama-55ff-a",
                "status",
                200,
                &conditions("False"),
                "2026-12-07T19:21:46.407726Z",
            ),
            audit(
                "patch",
                "ollama-55ff-a",
                "status",
                409,
                &conditions("True"),
                "2026-12-07T19:22:00.100000Z",
            ),
            audit(
                "patch",
                "ollama-55ff-a",
                "status",
                200,
                &conditions("True"),
                "2026-12-07T19:22:00.260580Z",
            ),
            audit(
                "get",
                "ollama-55ff-a",
                "status",
                200,
                "",
                "2026-12-07T19:22:01Z",
            ),
            audit(
                "patch",
                "ollama-55ff-b",
                "status",
                200,
                &conditions("True"),
                "2026-12-07T19:23:00Z",
            ),
        ]
        .join("\n");
        let file = Path::new("audit.log");
        let ready = |text: &str, first, ns| AuditRecords::parse(text, first, file)?.ready(ns);
        let t = ready(&lines, 1, "llm-recovery-lab").expect("the lines read");
        let got: Vec<_> = t
            .iter()
            .map(|e| (e.pod.as_str(), e.transition, e.ts))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "ollama-55ff-a",
                    Transition::PodReady,
                    ts("2026-12-07T19:22:00.260580Z")
                ),
                (
                    "ollama-55ff-b",
                    Transition::PodReady,
                    ts("2026-12-07T19:23:00Z")
                ),
            ]
        );
        assert!(ready(&lines, 1, "other").expect("read").is_empty());

        // A policy at Metadata level logs no bodies: said, not taken for "never Ready".
        let bodiless = audit(
            "patch",
            "ollama-55ff-a",
            "status",
            200,
            "",
            "2026-12-07T19:22:00Z",
        );
        let e = ready(&bodiless, 1, "llm-recovery-lab").expect_err("no bodies");
        assert!(e.to_string().contains("Request level"), "{e}");
        // A malformed line is named by file and line.
        let text = format!("{bodiless}\n{{\"kind\":\"Event\",");
        let e = ready(&text, 41, "llm-recovery-lab").expect_err("malformed");
        assert!(e.to_string().starts_with("audit.log:42: "), "{e}");
    }

    #[test]
    fn the_endpoint_transitions_are_the_controllers_writes_replayed_from_the_start() {
        let (old, new) = ("ollama-55ff-old", "ollama-55ff-new");
        let start_slice: EndpointSlice = {
            let body = slice_body(&[(old, true, true, false)]);
            let v: serde_json::Value =
                serde_json::from_str(&format!("{{{}}}", &body[1..])).expect("json");
            serde_json::from_value(v["responseObject"].clone()).expect("a slice")
        };
        let lines = [
            // Before the start: already in the listed slice.
            audit(
                "update",
                "ollama-zvqjc",
                "",
                200,
                &slice_body(&[(old, true, true, false)]),
                "2026-12-07T19:30:00Z",
            ),
            audit(
                "update",
                "ollama-zvqjc",
                "",
                200,
                &slice_body(&[(old, false, true, true), (new, false, false, false)]),
                "2026-12-07T19:31:00.100Z",
            ),
            // A conflict changed nothing.
            audit(
                "update",
                "ollama-zvqjc",
                "",
                409,
                &slice_body(&[]),
                "2026-12-07T19:31:00.150Z",
            ),
            audit(
                "update",
                "ollama-zvqjc",
                "",
                200,
                &slice_body(&[(new, false, false, false)]),
                "2026-12-07T19:31:00.200Z",
            ),
            audit(
                "update",
                "ollama-zvqjc",
                "",
                200,
                &slice_body(&[(new, true, true, false)]),
                "2026-12-07T19:31:04.300Z",
            ),
            audit("list", "", "", 200, "", "2026-12-07T19:31:05Z"),
        ]
        .join("\n");
        let records = AuditRecords::parse(&lines, 1, Path::new("audit.log")).expect("read");
        let start = ts("2026-12-07T19:31:00Z");
        let t = records
            .endpoints(("llm-recovery-lab", "ollama"), &[start_slice], start)
            .expect("the slices read");
        let got: Vec<_> = t
            .iter()
            .map(|e| (e.pod.as_str(), e.transition, e.ts))
            .collect();
        let at = ts;
        assert_eq!(
            got,
            vec![
                (
                    new,
                    Transition::EndpointAdded,
                    at("2026-12-07T19:31:00.100Z")
                ),
                (
                    old,
                    Transition::EndpointNotReady,
                    at("2026-12-07T19:31:00.100Z")
                ),
                (
                    old,
                    Transition::EndpointTerminating,
                    at("2026-12-07T19:31:00.100Z")
                ),
                (
                    old,
                    Transition::EndpointRemoved,
                    at("2026-12-07T19:31:00.200Z")
                ),
                (
                    new,
                    Transition::EndpointReady,
                    at("2026-12-07T19:31:04.300Z")
                ),
            ]
        );
        // Another Service's slices are not this one's.
        let other = records
            .endpoints(("llm-recovery-lab", "vllm"), &[], start)
            .expect("read");
        assert!(other.is_empty(), "{other:?}");
    }
}
