//! The arithmetic of `readygap lab bench`: how a method's instants compare with the lab's
//! ground truth (|error| median and p95, transitions missed), the endpoint transitions read
//! from a sequence of EndpointSlice states, and the JSON and table of the result.
//!
//! One rule says what an endpoint transition is ([`diff_endpoints`]); the lab uses it to
//! log its ground truth, and the bench uses it on what each method saw (readygap's watch
//! events, the study's 0.5 s `kubectl get` samples), so all three speak of the same things.
//! Errors are `measured − truth` in milliseconds; the statistics are of their absolute
//! values, with percentiles interpolated as in [`crate::stats`].

use crate::event::{EndpointSliceView, Timestamp};
use crate::stats::percentile;
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The conditions of one endpoint (EndpointSlice `endpoints[].conditions`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EndpointConditions {
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
}

/// The endpoints of a Service at one instant, by pod name.
pub type Endpoints = BTreeMap<String, EndpointConditions>;

/// A change of one pod's endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EndpointChange {
    /// The pod's address appeared in the Service's slices.
    Added,
    /// `ready` turned true (or the endpoint appeared ready).
    Ready,
    /// `ready` turned false.
    NotReady,
    /// `terminating` turned true (or the endpoint appeared terminating).
    Terminating,
    /// The pod's address left the slices.
    Removed,
}

impl EndpointChange {
    pub const ALL: [EndpointChange; 5] = [
        EndpointChange::Added,
        EndpointChange::Ready,
        EndpointChange::NotReady,
        EndpointChange::Terminating,
        EndpointChange::Removed,
    ];

    /// The name in the ground-truth log and in the bench's JSON.
    pub fn name(self) -> &'static str {
        match self {
            EndpointChange::Added => "endpoint_added",
            EndpointChange::Ready => "endpoint_ready",
            EndpointChange::NotReady => "endpoint_not_ready",
            EndpointChange::Terminating => "endpoint_terminating",
            EndpointChange::Removed => "endpoint_removed",
        }
    }
}

/// The endpoint transitions from `old` to `new`, in pod-name order (for one pod: added,
/// ready/not ready, terminating, removed).
pub fn diff_endpoints(old: &Endpoints, new: &Endpoints) -> Vec<(String, EndpointChange)> {
    let mut out = Vec::new();
    for (pod, n) in new {
        let before = old.get(pod);
        let o = before.copied().unwrap_or_default();
        let changes = [
            (before.is_none(), EndpointChange::Added),
            (n.ready && !o.ready, EndpointChange::Ready),
            (!n.ready && o.ready, EndpointChange::NotReady),
            (n.terminating && !o.terminating, EndpointChange::Terminating),
        ];
        let happened = changes.into_iter().filter(|(happened, _)| *happened);
        out.extend(happened.map(|(_, change)| (pod.clone(), change)));
    }
    for pod in old.keys() {
        if !new.contains_key(pod) {
            out.push((pod.clone(), EndpointChange::Removed));
        }
    }
    out
}

/// One instant a method (or the ground truth) gave to a named transition of a pod.
#[derive(Debug, Clone, PartialEq)]
pub struct Instant {
    pub pod: String,
    /// `t1`, `t2`, `t4` or an [`EndpointChange::name`].
    pub what: String,
    pub ts: Timestamp,
}

impl Instant {
    pub fn new(pod: &str, what: &str, ts: Timestamp) -> Self {
        Self {
            pod: pod.to_string(),
            what: what.to_string(),
            ts,
        }
    }
}

/// The endpoint transitions of a sequence of states: the first state is where observing
/// began (not a change), each later one is compared with the one before.
pub fn endpoint_instants(states: &[(Timestamp, Endpoints)]) -> Vec<Instant> {
    let mut out = Vec::new();
    for w in states.windows(2) {
        let ((_, old), (ts, new)) = (&w[0], &w[1]);
        for (pod, change) in diff_endpoints(old, new) {
            out.push(Instant::new(&pod, change.name(), *ts));
        }
    }
    out
}

/// A Service's endpoints after each EndpointSlice event (applied or deleted, by slice
/// name), for [`endpoint_instants`]: the union of the slices' endpoints; endpoints without
/// a pod name are left out (nothing to compare them with).
#[derive(Debug, Default)]
pub struct SliceUnion {
    slices: BTreeMap<String, Endpoints>,
}

impl SliceUnion {
    /// Apply an added or changed slice; returns the union after it.
    pub fn apply(&mut self, slice: &EndpointSliceView) -> Endpoints {
        let eps = slice
            .endpoints
            .iter()
            .filter_map(|e| {
                let pod = e.pod.clone()?;
                Some((
                    pod,
                    EndpointConditions {
                        ready: e.ready,
                        serving: e.serving,
                        terminating: e.terminating,
                    },
                ))
            })
            .collect();
        self.slices.insert(slice.name.clone(), eps);
        self.union()
    }

    /// Remove a slice; returns the union after it.
    pub fn delete(&mut self, name: &str) -> Endpoints {
        self.slices.remove(name);
        self.union()
    }

    fn union(&self) -> Endpoints {
        self.slices
            .values()
            .flat_map(|s| s.iter().map(|(k, v)| (k.clone(), *v)))
            .collect()
    }
}

/// Parse one sample of the study's sampler: `POD READY SERVING TERMINATING;` repeated (a
/// `kubectl get endpointslice -o jsonpath` over `.items[*].endpoints[*]`). The error names the
/// malformed piece.
pub fn parse_endpoint_sample(text: &str) -> Result<Endpoints, String> {
    let mut out = Endpoints::new();
    for piece in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let f: Vec<&str> = piece.split_whitespace().collect();
        let b = |s: &str| match s {
            "true" => Ok(true),
            "false" | "" => Ok(false),
            other => Err(format!("{piece:?}: {other:?} is not true or false")),
        };
        let (pod, ready, serving, terminating) = match f.as_slice() {
            [pod, ready, serving, terminating] => (pod, ready, serving, *terminating),
            // jsonpath prints nothing for an absent condition: treat it as false.
            [pod, ready, serving] => (pod, ready, serving, ""),
            _ => return Err(format!("{piece:?}: expected POD READY SERVING TERMINATING")),
        };
        let conditions = EndpointConditions {
            ready: b(ready)?,
            serving: b(serving)?,
            terminating: b(terminating)?,
        };
        out.insert(pod.to_string(), conditions);
    }
    Ok(out)
}

/// Median and p95 of absolute errors (ms); `None` without any value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ErrorStats {
    pub n: usize,
    pub median: Option<f64>,
    pub p95: Option<f64>,
}

impl ErrorStats {
    /// The statistics of the absolute values of `errors`.
    pub fn of(errors: &[f64]) -> Self {
        let mut v: Vec<f64> = errors.iter().map(|e| e.abs()).collect();
        v.sort_by(f64::total_cmp);
        let p = |q| (!v.is_empty()).then(|| percentile(&v, q));
        Self {
            n: v.len(),
            median: p(50.0),
            p95: p(95.0),
        }
    }
}

/// A transition of the ground truth a method has no instant for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Missed {
    pub pod: String,
    pub transition: String,
    /// How long the state it entered lasted (until that pod's next transition in the
    /// ground truth); `None` when it lasted until the end of the log.
    pub lasted_ms: Option<f64>,
}

/// What one method's instants are worth against the ground truth.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Matched {
    /// Signed errors (measured − truth, ms) by transition name.
    pub errors: BTreeMap<String, Vec<f64>>,
    /// Ground-truth transitions compared.
    pub total: usize,
    pub missed: Vec<Missed>,
}

fn ms_between(a: Timestamp, b: Timestamp) -> f64 {
    (b - a).num_microseconds().map_or_else(
        || (b - a).num_milliseconds() as f64,
        |us| us as f64 / 1000.0,
    )
}

/// Pair each ground-truth instant with the method's instant of the same pod and transition
/// (the n-th with the n-th, in time order); a truth instant without a partner is missed.
/// `truth` holds only the transitions this method should have seen. `lasted_ms` of a missed
/// one comes from `all_truth` (the pod's next transition of any kind named in it).
pub fn match_instants(truth: &[Instant], measured: &[Instant], all_truth: &[Instant]) -> Matched {
    let mut by_key: BTreeMap<(&str, &str), Vec<Timestamp>> = BTreeMap::new();
    for m in measured {
        by_key.entry((&m.pod, &m.what)).or_default().push(m.ts);
    }
    for v in by_key.values_mut() {
        v.sort();
    }
    let mut truth_sorted: Vec<&Instant> = truth.iter().collect();
    truth_sorted.sort_by_key(|i| i.ts);
    let mut used: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    let mut out = Matched {
        total: truth.len(),
        ..Matched::default()
    };
    for t in truth_sorted {
        let key = (t.pod.as_str(), t.what.as_str());
        let n = used.entry(key).or_default();
        match by_key.get(&key).and_then(|v| v.get(*n)) {
            Some(m) => {
                *n += 1;
                out.errors
                    .entry(t.what.clone())
                    .or_default()
                    .push(ms_between(t.ts, *m));
            }
            None => {
                let next = all_truth
                    .iter()
                    .filter(|o| o.pod == t.pod && o.ts > t.ts)
                    .map(|o| o.ts)
                    .min();
                out.missed.push(Missed {
                    pod: t.pod.clone(),
                    transition: t.what.clone(),
                    lasted_ms: next.map(|n| ms_between(t.ts, n)),
                });
            }
        }
    }
    out
}

/// CPU and memory of one method's process tree over its whole run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Cost {
    /// User + system CPU seconds of the tree (every process waited for).
    pub cpu_s: f64,
    /// The largest peak resident set of one process in the tree (`ru_maxrss`), MiB.
    pub peak_rss_mib: f64,
}

/// One method's side of the bench.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MethodResult {
    pub trials: usize,
    /// T1, T2 and T4 of each trial's new pod.
    pub marks: Matched,
    /// The endpoint transitions while the method's trials ran (its missed ones are the
    /// report's "missed by sampling").
    pub endpoints: Matched,
    pub cost: Option<Cost>,
}

impl MethodResult {
    fn errors(&self, what: &str) -> &[f64] {
        self.marks
            .errors
            .get(what)
            .or_else(|| self.endpoints.errors.get(what))
            .map_or(&[][..], Vec::as_slice)
    }
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchReport {
    pub trials: usize,
    pub readygap: MethodResult,
    pub baseline: MethodResult,
    /// What was run, for the reader (profile, engine, speed, machine).
    pub settings: BTreeMap<String, Value>,
}

/// The transitions reported, in order.
pub fn transition_names() -> Vec<&'static str> {
    let endpoints = EndpointChange::ALL.map(EndpointChange::name);
    ["t1", "t2", "t4"].into_iter().chain(endpoints).collect()
}

fn ratio(num: Option<f64>, den: Option<f64>) -> Option<f64> {
    match (num, den) {
        (Some(n), Some(d)) if d > 0.0 && n.is_finite() => Some(n / d),
        _ => None,
    }
}

fn stats_json(s: &ErrorStats) -> Value {
    json!({"median": s.median, "p95": s.p95, "n": s.n})
}

impl BenchReport {
    fn stats(&self, what: &str) -> (ErrorStats, ErrorStats) {
        let of = |m: &MethodResult| ErrorStats::of(m.errors(what));
        (of(&self.readygap), of(&self.baseline))
    }

    /// The JSON of `--format json` (the shape of issue 20).
    pub fn to_json(&self) -> Value {
        let mut errors = serde_json::Map::new();
        for what in transition_names() {
            let (r, b) = self.stats(what);
            errors.insert(
                what.to_string(),
                json!({"readygap": stats_json(&r), "baseline": stats_json(&b),
                       "ratio": ratio(b.median, r.median)}),
            );
        }
        let missed = |m: &MethodResult| {
            json!({"missed": m.endpoints.missed.len(), "of": m.endpoints.total,
                   "list": m.endpoints.missed})
        };
        let cost = |f: fn(&Cost) -> f64, per_trial: bool| {
            let v = |m: &MethodResult| {
                m.cost.map(|c| {
                    if per_trial && m.trials > 0 {
                        f(&c) / m.trials as f64
                    } else {
                        f(&c)
                    }
                })
            };
            let (r, b) = (v(&self.readygap), v(&self.baseline));
            json!({"readygap": r, "baseline": b, "ratio": ratio(b, r)})
        };
        json!({
            "trials": self.trials,
            "error_ms": errors,
            "missed_transitions": {"readygap": missed(&self.readygap), "baseline": missed(&self.baseline)},
            "cpu_s_per_trial": cost(|c| c.cpu_s, true),
            "rss_mib": cost(|c| c.peak_rss_mib, false),
            "settings": self.settings,
        })
    }

    /// The table of `--format table`.
    pub fn to_table(&self) -> String {
        use std::fmt::Write;
        let f = |v: Option<f64>| v.map_or_else(|| "—".to_string(), |v| format!("{v:.1}"));
        let x = |v: Option<f64>| v.map_or_else(|| "—".to_string(), |v| format!("{v:.0}×"));
        let mut s = String::new();
        let _ = writeln!(
            s,
            "readygap lab bench: {} trials per method ({})",
            self.trials,
            self.settings
                .iter()
                .map(|(k, v)| format!("{k} {}", v.as_str().map_or(v.to_string(), String::from)))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let truth = self
            .settings
            .get("ground_truth")
            .and_then(Value::as_str)
            .unwrap_or("the lab's ground truth");
        let _ = writeln!(
            s,
            "\n|error| against {truth}, ms\n{:<22} {:>9} {:>9} {:>9} {:>9} {:>7}",
            "transition", "rg med", "rg p95", "base med", "base p95", "ratio"
        );
        for what in transition_names() {
            let (r, b) = self.stats(what);
            let _ = writeln!(
                s,
                "{:<22} {:>9} {:>9} {:>9} {:>9} {:>7}",
                what,
                f(r.median),
                f(r.p95),
                f(b.median),
                f(b.p95),
                x(ratio(b.median, r.median))
            );
        }
        let _ = writeln!(
            s,
            "\nendpoint transitions missed: readygap {} of {}, baseline {} of {}",
            self.readygap.endpoints.missed.len(),
            self.readygap.endpoints.total,
            self.baseline.endpoints.missed.len(),
            self.baseline.endpoints.total
        );
        let per = |m: &MethodResult| m.cost.map(|c| c.cpu_s / m.trials.max(1) as f64);
        let (rcpu, bcpu) = (per(&self.readygap), per(&self.baseline));
        let f3 = |v: Option<f64>| v.map_or("—".into(), |v| format!("{v:.3}"));
        let _ = writeln!(
            s,
            "CPU per trial: readygap {} s, baseline {} s ({})",
            f3(rcpu),
            f3(bcpu),
            x(ratio(bcpu, rcpu))
        );
        let rss = |m: &MethodResult| f(m.cost.map(|c| c.peak_rss_mib));
        let _ = writeln!(
            s,
            "peak RSS (largest process): readygap {} MiB, baseline {} MiB",
            rss(&self.readygap),
            rss(&self.baseline)
        );
        s
    }
}
