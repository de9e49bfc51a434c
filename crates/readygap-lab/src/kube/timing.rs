//! Stage timings of the lab's kubelet, drawn by stratified sampling: each stage cycles
//! through blocks of ten strata of its truncated normal in a random order, so every draw
//! still follows the profile's distribution while the mean of any ten consecutive draws
//! (a ten-trial run, as published) stays close to the profile's mean. Independent draws
//! would make a ten-trial mean wander by sd/√10 (±14% for the 8B profile's pod recovery).

use crate::profile::{Stage, duration_from_ms};
use rand::RngExt;
use rand::rngs::StdRng;
use std::time::Duration;

/// Strata per block (one published run = 10 trials).
pub const STRATA: usize = 10;

/// The standard normal CDF (Abramowitz & Stegun 7.1.26 for erf, |error| < 1.5e-7).
pub fn normal_cdf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    if z >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

/// The standard normal quantile (Acklam's rational approximation, relative error < 1.2e-9).
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let p = p.clamp(1e-300, 1.0 - 1e-16);
    let low = 0.024_25;
    if p < low {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - low {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        let q = (-2.0 * (1.0 - p).ln()).sqrt();
        -(((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    }
}

/// The value of a stage's truncated normal at quantile `u` in [0, 1).
pub fn stage_quantile(stage: &Stage, u: f64) -> f64 {
    let lo = stage.min_ms.max(0.0);
    let hi = stage.max_ms.max(lo);
    if stage.sd_ms.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater)
        || hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater)
        || !stage.mean_ms.is_finite()
    {
        return stage.mean_ms.clamp(lo, hi);
    }
    let a = normal_cdf((lo - stage.mean_ms) / stage.sd_ms);
    let b = normal_cdf((hi - stage.mean_ms) / stage.sd_ms);
    let p = a + u.clamp(0.0, 1.0) * (b - a);
    (stage.mean_ms + stage.sd_ms * normal_quantile(p)).clamp(lo, hi)
}

/// Stratified draws for one stage.
#[derive(Debug, Default)]
pub struct Strata {
    order: Vec<usize>,
}

impl Strata {
    /// The next draw of `stage`, in milliseconds.
    pub fn draw_ms(&mut self, stage: &Stage, rng: &mut StdRng) -> f64 {
        if self.order.is_empty() {
            self.order = (0..STRATA).collect();
            // Fisher-Yates: a random order of the strata within the block.
            for i in (1..STRATA).rev() {
                let j = rng.random_range(0..=i);
                self.order.swap(i, j);
            }
        }
        let k = self.order.pop().unwrap_or(0);
        let u = (k as f64 + rng.random::<f64>()) / STRATA as f64;
        stage_quantile(stage, u)
    }

    /// The next draw as a duration (before the lab's speed factor).
    pub fn draw(&mut self, stage: &Stage, rng: &mut StdRng) -> Duration {
        duration_from_ms(self.draw_ms(stage, rng))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn normal_functions() {
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-7);
        assert!((normal_cdf(1.96) - 0.975).abs() < 1e-4);
        for p in [0.001, 0.02, 0.3, 0.5, 0.77, 0.99] {
            assert!((normal_cdf(normal_quantile(p)) - p).abs() < 1e-6, "{p}");
        }
    }

    #[test]
    fn every_block_of_ten_keeps_the_mean_and_the_bounds() {
        let stage = Stage::around(1860.6, 856.2);
        let mut rng = StdRng::seed_from_u64(1);
        let mut s = Strata::default();
        let blocks = 500;
        let mut means = Vec::new();
        for _ in 0..blocks {
            let draws: Vec<f64> = (0..STRATA).map(|_| s.draw_ms(&stage, &mut rng)).collect();
            assert!(
                draws
                    .iter()
                    .all(|d| *d >= stage.min_ms && *d <= stage.max_ms)
            );
            means.push(draws.iter().sum::<f64>() / STRATA as f64);
        }
        let grand = means.iter().sum::<f64>() / blocks as f64;
        let sd = (means.iter().map(|m| (m - grand).powi(2)).sum::<f64>() / blocks as f64).sqrt();
        // Independent draws: sd of a ten-draw mean ≈ 0.9 × 856 / √10 ≈ 240 ms.
        assert!(sd < 0.4 * 240.0, "sd of block means {sd}");
        assert!(
            means
                .iter()
                .all(|m| (m - stage.mean_ms).abs() / stage.mean_ms < 0.12),
            "{means:?}"
        );
        assert!((grand - stage.mean_ms).abs() < 20.0, "{grand}");
    }

    #[test]
    fn draws_follow_the_distribution() {
        // Over many blocks the sample sd matches the truncated normal (a spread, not a constant).
        let stage = Stage::around(1000.0, 200.0);
        let mut rng = StdRng::seed_from_u64(2);
        let mut s = Strata::default();
        let xs: Vec<f64> = (0..10_000).map(|_| s.draw_ms(&stage, &mut rng)).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64).sqrt();
        assert!((mean - 1000.0).abs() < 5.0, "{mean}");
        // ±2.5 sd truncation shrinks the sd by about 5%.
        assert!(sd > 175.0 && sd < 205.0, "{sd}");
        let fixed = Stage::fixed(42.0);
        assert_eq!(s.draw_ms(&fixed, &mut rng), 42.0);
    }
}
