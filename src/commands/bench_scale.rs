//! `readygap lab bench --scale PODS`: what readygap costs watching one Deployment in a
//! crowded namespace.
//!
//! The lab (a child `readygap lab serve`) gets, next to its `ollama` Deployment, PODS other
//! pods in Deployments of 10 replicas (plain `busybox` containers: cheap for the lab). Once
//! they are all Running, a child `readygap run` measures trials of the one `ollama`
//! Deployment for `--duration`; at its end the bench reads the child's peak resident set
//! (`/proc/PID/status` `VmHWM`) and CPU (`/proc/PID/stat` utime + stime), then stops it
//! (SIGINT). What list/watch cost it is the lab's own tally (`GET /lab/requests`: requests
//! and response bytes per User-Agent, path and query) taken before and after readygap ran;
//! no kubectl runs in between. Each list/watch is classed by how it is scoped:
//! `label` / `name` (only the watched Deployment's objects), `namespace` (a field selector
//! that still takes the whole namespace's objects of that kind, such as
//! `involvedObject.kind=Pod` for Events), or `none` (no selector at all).

use super::bench::{BenchArgs, Kubectl, start_lab};
use color_eyre::eyre::{Result, WrapErr, eyre};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// Replicas of each extra Deployment.
const PER_DEPLOYMENT: usize = 10;

/// How a list or watch request is scoped.
pub fn scope_of(path: &str, query: &str) -> &'static str {
    let pairs: Vec<(String, String)> = format!("/?{query}")
        .parse::<axum::http::Uri>()
        .ok()
        .and_then(|u| axum::extract::Query::<Vec<(String, String)>>::try_from_uri(&u).ok())
        .map(|q| q.0)
        .unwrap_or_default();
    let has = |k: &str| pairs.iter().any(|(n, v)| n == k && !v.is_empty());
    let fields = pairs
        .iter()
        .find(|(n, _)| n == "fieldSelector")
        .map(|(_, v)| v.as_str())
        .unwrap_or("");
    if has("labelSelector") {
        "label"
    } else if fields
        .split(',')
        .any(|f| f.starts_with("metadata.name=") || f.starts_with("involvedObject.name="))
    {
        "name"
    } else if !fields.is_empty() {
        "namespace"
    } else if is_collection(path) {
        "none"
    } else {
        "name"
    }
}

/// A path of a collection (`…/pods`), not of one object (`…/pods/NAME`) or subresource.
fn is_collection(path: &str) -> bool {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    // /api/v1/RES, /api/v1/namespaces/NS/RES, /apis/G/V/RES, /apis/G/V/namespaces/NS/RES.
    let rest = match segs.first() {
        Some(&"api") => &segs[segs.len().min(2)..],
        Some(&"apis") => &segs[segs.len().min(3)..],
        _ => return false,
    };
    matches!(rest, [_] | ["namespaces", _, _])
}

/// `path` with the name of a pod (`…/pods/NAME…`) written `{pod}`: one row for the same
/// request to each new pod of the trials.
pub fn pattern_of(path: &str) -> String {
    let mut segs: Vec<String> = path.split('/').map(str::to_string).collect();
    for i in 1..segs.len() {
        if segs[i - 1] == "pods" && i >= 3 && segs[i - 3] == "namespaces" {
            let port = segs[i].split_once(':').map(|(_, p)| format!(":{p}"));
            segs[i] = format!("{{pod}}{}", port.unwrap_or_default());
        }
    }
    segs.join("/")
}

/// One row of what the lab served readygap.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Served {
    pub method: String,
    pub path: String,
    pub query: String,
    pub requests: u64,
    pub bytes: u64,
    pub scope: &'static str,
}

/// The scale bench's result.
#[derive(Debug, Clone)]
pub struct ScaleReport {
    pub pods: usize,
    pub deployments: usize,
    pub duration_s: f64,
    pub peak_rss_mib: f64,
    pub cpu_s: f64,
    pub served: Vec<Served>,
    pub settings: BTreeMap<String, Value>,
}

impl ScaleReport {
    fn totals(&self) -> (u64, u64) {
        self.served
            .iter()
            .fold((0, 0), |(r, b), s| (r + s.requests, b + s.bytes))
    }

    fn cpu_s_per_min(&self) -> f64 {
        self.cpu_s / (self.duration_s / 60.0)
    }

    pub fn to_json(&self) -> Value {
        let (requests, bytes) = self.totals();
        json!({"scale": {
            "pods": self.pods,
            "deployments": self.deployments,
            "duration_s": self.duration_s,
            "rss_mib": {"peak": self.peak_rss_mib},
            "cpu_s": self.cpu_s,
            "cpu_s_per_min": self.cpu_s_per_min(),
            "api": {"requests": requests, "bytes": bytes, "by_request": self.served},
            "settings": self.settings,
        }})
    }

    pub fn to_table(&self) -> String {
        let (requests, bytes) = self.totals();
        let mut t = format!(
            "readygap watching one Deployment; {} other pods in {} Deployments; {:.0} s\n\
             peak RSS      {:.1} MiB\n\
             CPU           {:.2} s ({:.2} s per minute)\n\
             API served    {} requests, {} bytes\n\n\
             {:<7} {:<10} {:>8} {:>11}  request\n",
            self.pods,
            self.deployments,
            self.duration_s,
            self.peak_rss_mib,
            self.cpu_s,
            self.cpu_s_per_min(),
            requests,
            bytes,
            "method",
            "scope",
            "requests",
            "bytes"
        );
        for s in &self.served {
            let q = if s.query.is_empty() { "" } else { "?" };
            t.push_str(&format!(
                "{:<7} {:<10} {:>8} {:>11}  {}{q}{}\n",
                s.method, s.scope, s.requests, s.bytes, s.path, s.query
            ));
        }
        t
    }
}

/// (user agent, method, path, query) → (requests, bytes).
type Tally = BTreeMap<(String, String, String, String), (u64, u64)>;

/// One row of the lab's `GET /lab/requests`.
#[derive(serde::Deserialize)]
struct Row {
    user_agent: String,
    method: String,
    path: String,
    query: String,
    requests: u64,
    bytes: u64,
}

/// The lab's tally of requests served.
fn tally(k: &Kubectl) -> Result<Tally> {
    let text = k.get(&["get", "--raw", "/lab/requests"])?;
    let rows: Vec<Row> = serde_json::from_str(&text)
        .wrap_err_with(|| format!("the lab's /lab/requests: {text:.200}"))?;
    Ok(rows
        .into_iter()
        .map(|r| {
            (
                (r.user_agent, r.method, r.path, r.query),
                (r.requests, r.bytes),
            )
        })
        .collect())
}

/// The extra Deployments, as a multi-document manifest for `kubectl create -f`.
fn manifest(pods: usize) -> (String, usize) {
    let n = pods.div_ceil(PER_DEPLOYMENT);
    let docs: Vec<String> = (0..n)
        .map(|i| {
            let replicas = PER_DEPLOYMENT.min(pods - i * PER_DEPLOYMENT);
            let name = format!("filler-{i:04}");
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "labels": {"readygap.io/bench": "filler"}},
                "spec": {
                    "replicas": replicas,
                    "selector": {"matchLabels": {"app": name}},
                    "template": {
                        "metadata": {"labels": {"app": name, "readygap.io/bench": "filler"}},
                        "spec": {"containers": [{
                            "name": "sleep", "image": "busybox:1.36",
                            "command": ["sleep", "infinity"]}]}
                    }
                }
            })
            .to_string()
        })
        .collect();
    (docs.join("\n---\n"), n)
}

/// `/proc/PID/status` `VmHWM` in MiB and `/proc/PID/stat` utime + stime in seconds.
fn proc_cost(pid: u32) -> Result<(f64, f64)> {
    let hwm_kib = super::bench::vm_hwm_kib(&pid.to_string())
        .ok_or_else(|| eyre!("/proc/{pid}/status: unreadable, or no VmHWM"))?
        as f64;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .wrap_err_with(|| format!("reading /proc/{pid}/stat"))?;
    // Fields after the command's closing parenthesis start at field 3 (state); utime and
    // stime are fields 14 and 15 (proc(5)).
    let after = stat
        .rsplit_once(')')
        .map(|(_, a)| a)
        .ok_or_else(|| eyre!("/proc/{pid}/stat: no command field"))?;
    let f: Vec<&str> = after.split_whitespace().collect();
    let tick = |i: usize| -> Result<f64> {
        f.get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| eyre!("/proc/{pid}/stat: field {} missing", i + 3))
    };
    // SAFETY: sysconf(3) reads a constant of the system.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok((hwm_kib / 1024.0, (tick(11)? + tick(12)?) / hz))
}

/// `readygap lab bench --scale PODS`: the scale bench in `dir`.
pub fn scale_in(
    args: &BenchArgs,
    pods: usize,
    model: &str,
    kubectl_bin: &Path,
    dir: &Path,
) -> Result<ScaleReport> {
    if pods == 0 {
        return Err(eyre!("--scale must be at least 1 pod"));
    }
    if args.duration.is_zero() {
        return Err(eyre!("--duration must be more than 0 s"));
    }
    let exe = std::env::current_exe().wrap_err("finding the readygap binary")?;
    let (lab, k) = start_lab(args, &exe, dir, kubectl_bin)?;
    let steady = Duration::from_secs(120);
    k.wait_steady(steady)?;
    let (text, deployments) = manifest(pods);
    let file = dir.join("filler.yaml");
    std::fs::write(&file, text).wrap_err("writing filler.yaml")?;
    k.get(&["create", "-f", &file.to_string_lossy()])?;
    let running = |k: &Kubectl| {
        k.get(&[
            "get",
            "pods",
            "-l",
            "readygap.io/bench=filler",
            "-o",
            "jsonpath={range .items[*]}{.status.phase}{\"\\n\"}{end}",
        ])
        .map(|t| t.lines().filter(|l| *l == "Running").count())
        .unwrap_or(0)
    };
    k.wait_until(
        &format!("{pods} filler pods Running"),
        Duration::from_secs(120) + Duration::from_millis(200 * pods as u64),
        |k| running(k) == pods,
    )?;
    k.wait_steady(steady)?;

    let before = tally(&k)?;
    let started = Instant::now();
    let mut child = k
        .readygap_run(&exe, model, 1_000_000, args.cooldown, dir)?
        .spawn()
        .wrap_err("starting `readygap run`")?;
    // The measuring window is a fixed time by design (CPU per minute); readygap ending
    // early is a failure of the bench.
    while started.elapsed() < args.duration {
        if let Some(st) = child.try_wait()? {
            return Err(eyre!(
                "`readygap run` ended after {:?} ({st}; see readygap-run.log)",
                started.elapsed()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (peak_rss_mib, cpu_s) = proc_cost(child.id())?;
    let duration_s = started.elapsed().as_secs_f64();
    super::bench::interrupt(&mut child, Duration::from_secs(20));
    let after = tally(&k)?;
    drop(lab);

    let mut rows: BTreeMap<(String, String, String), (u64, u64)> = BTreeMap::new();
    for (key, (r, b)) in after {
        let (r0, b0) = before.get(&key).copied().unwrap_or((0, 0));
        let (ua, method, path, query) = key;
        if ua.starts_with("kubectl") || (r, b) == (r0, b0) {
            continue;
        }
        let row = rows.entry((method, pattern_of(&path), query)).or_default();
        row.0 += r - r0;
        row.1 += b - b0;
    }
    let mut served: Vec<Served> = rows
        .into_iter()
        .map(|((method, path, query), (requests, bytes))| Served {
            scope: scope_of(&path, &query),
            method,
            path,
            query,
            requests,
            bytes,
        })
        .collect();
    served.sort_by_key(|s| std::cmp::Reverse(s.bytes));
    Ok(ScaleReport {
        pods,
        deployments,
        duration_s,
        peak_rss_mib,
        cpu_s,
        served,
        settings: args.settings(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_classed_by_their_scope() {
        let ns = "/api/v1/namespaces/lab/pods";
        assert_eq!(
            scope_of(ns, "labelSelector=app%3Dollama&watch=true"),
            "label"
        );
        assert_eq!(
            scope_of(
                "/api/v1/namespaces/lab/events",
                "fieldSelector=involvedObject.kind%3DPod"
            ),
            "namespace"
        );
        assert_eq!(
            scope_of("/api/v1/nodes", "fieldSelector=metadata.name%3Dn1"),
            "name"
        );
        assert_eq!(scope_of("/api/v1/nodes", "watch=true"), "none");
        assert_eq!(scope_of(ns, ""), "none");
        assert_eq!(
            scope_of("/apis/apps/v1/namespaces/lab/deployments/ollama", ""),
            "name"
        );
        assert_eq!(
            scope_of("/api/v1/namespaces/lab/pods/p/proxy/api/tags", ""),
            "name"
        );
    }

    #[test]
    fn the_manifest_holds_every_pod_in_deployments_of_ten() {
        let (text, n) = manifest(25);
        assert_eq!(n, 3);
        let replicas: Vec<u64> = text
            .split("\n---\n")
            .map(|d| {
                serde_json::from_str::<Value>(d).expect("json")["spec"]["replicas"]
                    .as_u64()
                    .expect("n")
            })
            .collect();
        assert_eq!(replicas, vec![10, 10, 5]);
    }

    #[test]
    fn pod_names_become_one_pattern() {
        assert_eq!(
            pattern_of("/api/v1/namespaces/lab/pods/ollama-1:11434/proxy/api/tags"),
            "/api/v1/namespaces/lab/pods/{pod}:11434/proxy/api/tags"
        );
        assert_eq!(
            pattern_of("/api/v1/namespaces/lab/pods/ollama-1/exec"),
            "/api/v1/namespaces/lab/pods/{pod}/exec"
        );
        assert_eq!(
            pattern_of("/api/v1/namespaces/lab/pods"),
            "/api/v1/namespaces/lab/pods"
        );
    }
}
