//! The fleet watcher's measurements (`readygap watch`): every trial of every watched
//! Deployment goes into a bounded registry — per series (namespace, deployment, model,
//! runtime) the four recovery histograms, each interval as soon as its end mark is known
//! ([`FleetMetrics::observe_intervals`]), and once the trial ended, counters of trials,
//! failures and verdicts, the last trial's instant — and into a ring of the Deployment's
//! last trials. Nothing here
//! grows with time: the histograms have fixed buckets, the series are capped
//! ([`FleetMetrics::max_series`]), verdict labels come from closed lists, and each ring
//! keeps its last N trials.
//!
//! The exposition (OpenMetrics and the Prometheus text format) is [`exposition`]; the ring
//! is [`ring`]. Pure: the caller passes every instant in.

pub mod exposition;
pub mod ring;

use crate::timeline::{Metric, Trial};
use crate::verdict::ContractKind;
use std::collections::BTreeMap;

pub use ring::TrialRing;

/// Upper bounds of the histogram buckets, seconds (`+Inf` is implied). From a tenth of a
/// second (a warm runtime answering at once) to 20 minutes (a large model loading from a
/// network volume, the study's slowest case).
pub const BUCKETS: [f64; 20] = [
    0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0,
    180.0, 300.0, 600.0, 1200.0,
];

/// The four histograms: the metric of the timeline each one holds, and its name.
pub const HISTOGRAMS: [(Metric, &str, &str); 4] = [
    (
        Metric::K8sRecovery,
        "readygap_k8s_recovery_seconds",
        "Kubernetes recovery: T0 (replacement's first evidence) to T1 (the replacement pod Ready).",
    ),
    (
        Metric::RuntimeRecovery,
        "readygap_runtime_recovery_seconds",
        "Runtime recovery: T0 to T2 (the runtime answers HTTP, model ready where it tells).",
    ),
    (
        Metric::ReadyToInference,
        "readygap_ready_to_inference_seconds",
        "Ready to inference: T1 (pod Ready) to T4 (the first inference completed).",
    ),
    (
        Metric::FunctionalRecovery,
        "readygap_functional_recovery_seconds",
        "Functional recovery: T0 to T4 (the first inference completed).",
    ),
];

/// The labels of one series. Values come from the cluster (namespace, Deployment name), the
/// runtime's own answers (model) and the adapter (runtime): bounded by what is deployed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SeriesKey {
    pub namespace: String,
    pub deployment: String,
    pub model: String,
    pub runtime: String,
}

/// A histogram with the fixed [`BUCKETS`]: the count per bucket (not cumulative), the
/// overflow, the count and the sum.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Histogram {
    buckets: [u64; BUCKETS.len()],
    overflow: u64,
    pub count: u64,
    pub sum: f64,
}

impl Histogram {
    /// One observation (seconds). NaN or negative values are not observations.
    pub fn observe(&mut self, v: f64) -> bool {
        if !v.is_finite() || v < 0.0 {
            return false;
        }
        match BUCKETS.iter().position(|b| v <= *b) {
            Some(i) => self.buckets[i] += 1,
            None => self.overflow += 1,
        }
        self.count += 1;
        self.sum += v;
        true
    }

    /// Cumulative counts per upper bound, `+Inf` last (`f64::INFINITY`).
    pub fn cumulative(&self) -> Vec<(f64, u64)> {
        let bounds = BUCKETS.into_iter().chain([f64::INFINITY]);
        let counts = self.buckets.into_iter().chain([self.overflow]);
        bounds
            .zip(counts)
            .scan(0, |acc, (b, n)| {
                *acc += n;
                Some((b, *acc))
            })
            .collect()
    }
}

/// Everything measured of one series.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SeriesValues {
    /// In the order of [`HISTOGRAMS`].
    pub histograms: [Histogram; 4],
    pub trials: u64,
    pub failures: u64,
    /// By verdict name; names come from [`known_verdict`] only.
    pub verdicts: BTreeMap<&'static str, u64>,
    /// When the last trial ended (Unix seconds).
    pub last_trial: Option<f64>,
}

/// The verdict names a series may carry: the readiness-contract verdicts and the OOM
/// detector's kinds. Anything else is not a label value (bounded cardinality).
pub fn known_verdict(name: &str) -> Option<&'static str> {
    ContractKind::ALL
        .iter()
        .map(|k| k.name())
        .chain(crate::residency::VerdictKind::ALL.iter().map(|k| k.name()))
        .find(|k| *k == name)
}

/// When a trial ended: its latest mark (T4, the failed inference's end, T3, T2, T1, T0).
pub fn trial_end(t: &Trial) -> Option<crate::event::Timestamp> {
    let m = &t.marks;
    [m.t0, m.t1, m.t2, m.t3, m.t4, t.inference_end]
        .into_iter()
        .flatten()
        .max()
}

/// The registry of the fleet: series by key, each Deployment's ring of trials.
#[derive(Debug, Clone, Default)]
pub struct FleetMetrics {
    series: BTreeMap<SeriesKey, SeriesValues>,
    rings: BTreeMap<(String, String), TrialRing>,
    /// At most this many series; trials of further series are counted in `dropped` only.
    pub max_series: usize,
    /// Trials per Deployment kept in its ring.
    pub ring_len: usize,
    /// Trials not kept in a series because `max_series` was reached.
    pub dropped: u64,
    /// Deployments being watched now (a gauge, set by the watcher).
    pub watched: u64,
    /// Per Deployment, its open trial (index and T0) and which of [`HISTOGRAMS`] it was
    /// observed in already: each interval once, as soon as its end mark is known.
    open: BTreeMap<(String, String), OpenTrial>,
}

/// A trial's identity (its index and T0: indices start over when the watcher's store is
/// rebuilt) and the histograms it went into.
type OpenTrial = ((u32, Option<crate::event::Timestamp>), [bool; 4]);

impl FleetMetrics {
    /// An empty registry.
    pub fn new(max_series: usize, ring_len: usize) -> Self {
        Self {
            max_series,
            ring_len,
            ..Self::default()
        }
    }

    /// The intervals of `t`, running or ended, whose end mark is known go into `key`'s
    /// histograms, each once: `readygap_k8s_recovery_seconds` as soon as T1 is known,
    /// whatever follows (a replacement no one sends traffic to ends only at the inference
    /// timeout). How many were observed now. A histogram never takes an observation back:
    /// an interval observed stays when its trial is later interrupted or its series' model
    /// label changes.
    pub fn observe_intervals(&mut self, key: &SeriesKey, t: &Trial) -> usize {
        let id = (t.index, t.marks.t0);
        let open = self
            .open
            .entry((key.namespace.clone(), key.deployment.clone()))
            .or_insert((id, [false; 4]));
        if open.0 != id {
            *open = (id, [false; 4]);
        }
        if !self.series.contains_key(key) && self.series.len() >= self.max_series {
            return 0;
        }
        let s = self.series.entry(key.clone()).or_default();
        let mut n = 0;
        for ((h, (metric, _, _)), done) in s.histograms.iter_mut().zip(HISTOGRAMS).zip(&mut open.1)
        {
            if !*done && let Some(v) = t.metric(metric) {
                *done = true;
                n += usize::from(h.observe(v));
            }
        }
        n
    }

    /// A finished trial of `key`'s Deployment: the intervals not observed yet, the counters,
    /// the ring. A running trial is not counted (false).
    pub fn observe(&mut self, key: &SeriesKey, t: &Trial) -> bool {
        if t.is_running() {
            return false;
        }
        let ring_len = self.ring_len;
        self.rings
            .entry((key.namespace.clone(), key.deployment.clone()))
            .or_insert_with(|| TrialRing::new(ring_len))
            .push(t.clone());
        if !self.series.contains_key(key) && self.series.len() >= self.max_series {
            self.dropped += 1;
            return true;
        }
        self.observe_intervals(key, t);
        self.open
            .remove(&(key.namespace.clone(), key.deployment.clone()));
        let s = self.series.entry(key.clone()).or_default();
        s.trials += 1;
        s.failures += u64::from(!t.is_ok());
        let oom = t.oom.as_ref().map(|v| v.kind.name());
        for name in t.verdicts.iter().map(|k| k.name()).chain(oom) {
            if let Some(k) = known_verdict(name) {
                *s.verdicts.entry(k).or_insert(0) += 1;
            }
        }
        if let Some(end) = trial_end(t) {
            let secs = end.timestamp_micros() as f64 / 1e6;
            s.last_trial = Some(s.last_trial.map_or(secs, |l| l.max(secs)));
        }
        true
    }

    /// Forget a Deployment's ring (it was deleted). Its series stay: counters never go back.
    pub fn forget(&mut self, namespace: &str, deployment: &str) {
        self.rings
            .remove(&(namespace.to_string(), deployment.to_string()));
    }

    /// The series, in label order.
    pub fn series(&self) -> impl Iterator<Item = (&SeriesKey, &SeriesValues)> {
        self.series.iter()
    }

    /// The rings, by (namespace, deployment).
    pub fn rings(&self) -> impl Iterator<Item = (&(String, String), &TrialRing)> {
        self.rings.iter()
    }
}
