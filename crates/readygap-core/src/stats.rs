//! Statistics over trials: n, failed, mean, median, p95, min, max and stddev per metric.
//!
//! Percentiles use linear interpolation between closest ranks (numpy's default, "type 7"),
//! and the standard deviation is the sample one (n − 1), as pandas reports it; with one value
//! it is 0. Each metric counts the trials where both of its marks exist; metrics that end at
//! T4 exist only for trials whose inference completed with `done: true`.

use super::timeline::{Metric, Trial};
use serde::Serialize;
use std::collections::BTreeMap;

/// The summary of one metric.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub median: f64,
    pub p95: f64,
    pub min: f64,
    pub max: f64,
    pub stddev: f64,
}

impl Summary {
    /// The summary of a set of values; `None` when empty.
    pub fn of(values: &[f64]) -> Option<Summary> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = if n > 1 {
            v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        Some(Summary {
            n,
            mean,
            median: percentile(&v, 50.0),
            p95: percentile(&v, 95.0),
            min: v[0],
            max: v[n - 1],
            stddev: var.sqrt(),
        })
    }
}

/// Linear-interpolated percentile of sorted values.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    if n == 1 {
        return sorted[0];
    }
    let rank = p / 100.0 * (n - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
}

/// Statistics of a set of trials.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrialStats {
    pub trials: usize,
    pub failed: usize,
    pub metrics: BTreeMap<&'static str, Summary>,
}

impl TrialStats {
    /// Summaries over finished trials (a running trial is not counted).
    pub fn of<'a>(trials: impl IntoIterator<Item = &'a Trial>) -> TrialStats {
        let trials: Vec<&Trial> = trials.into_iter().filter(|t| !t.is_running()).collect();
        let summary = |m: Metric| {
            let values: Vec<f64> = trials.iter().filter_map(|t| t.metric(m)).collect();
            Some((m.name(), Summary::of(&values)?))
        };
        TrialStats {
            trials: trials.len(),
            failed: trials.iter().filter(|t| !t.is_ok()).count(),
            metrics: Metric::ALL.into_iter().filter_map(summary).collect(),
        }
    }

    pub fn get(&self, m: Metric) -> Option<&Summary> {
        self.metrics.get(m.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_numpy_and_pandas_conventions() {
        // numpy.percentile([1,2,3,4,10], 95) == 8.8; pandas std == 3.5355339...
        let s = Summary::of(&[4.0, 1.0, 10.0, 3.0, 2.0]).unwrap();
        assert_eq!(s.n, 5);
        assert!((s.mean - 4.0).abs() < 1e-12);
        assert!((s.median - 3.0).abs() < 1e-12);
        assert!((s.p95 - 8.8).abs() < 1e-12);
        assert!((s.stddev - 3.535_533_905_932_738).abs() < 1e-12);
        assert_eq!((s.min, s.max), (1.0, 10.0));
    }

    #[test]
    fn single_value_and_empty() {
        let s = Summary::of(&[2.5]).unwrap();
        assert_eq!((s.median, s.p95, s.stddev), (2.5, 2.5, 0.0));
        assert!(Summary::of(&[]).is_none());
    }
}
