//! Is a difference real? Two tests, each named in the output:
//!
//! - throughput: Welch's t-test on per-interval throughput samples, with each side's sample
//!   size shrunk for lag-1 autocorrelation (n_eff = n (1 - r1) / (1 + r1)), because
//!   consecutive intervals of one run are not independent;
//! - latency: the Mann-Whitney U test (normal approximation with tie correction) on the two
//!   HDR latency distributions, bucket by bucket.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestOutcome {
    pub test: String,
    pub statistic: f64,
    pub p_value: f64,
}

fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

fn variance(x: &[f64], m: f64) -> f64 {
    x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (x.len() as f64 - 1.0)
}

/// Lag-1 autocorrelation, clamped to [0, 0.95] (negative values would inflate n).
fn lag1(x: &[f64], m: f64) -> f64 {
    let den: f64 = x.iter().map(|v| (v - m).powi(2)).sum();
    if den == 0.0 || x.len() < 3 {
        return 0.0;
    }
    let num: f64 = x.windows(2).map(|w| (w[0] - m) * (w[1] - m)).sum();
    (num / den).clamp(0.0, 0.95)
}

/// Two-sided Welch t-test; `None` with fewer than 2 samples on a side.
pub fn welch_t_test(a: &[f64], b: &[f64]) -> Option<TestOutcome> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (ma, mb) = (mean(a), mean(b));
    let (va, vb) = (variance(a, ma), variance(b, mb));
    let na = (a.len() as f64 * (1.0 - lag1(a, ma)) / (1.0 + lag1(a, ma))).max(2.0);
    let nb = (b.len() as f64 * (1.0 - lag1(b, mb)) / (1.0 + lag1(b, mb))).max(2.0);
    let se2 = va / na + vb / nb;
    let test =
        "Welch's t-test on per-interval throughput (autocorrelation-corrected n)".to_string();
    if se2 == 0.0 {
        let p = if ma == mb { 1.0 } else { 0.0 };
        return Some(TestOutcome {
            test,
            statistic: if ma == mb { 0.0 } else { f64::INFINITY },
            p_value: p,
        });
    }
    let t = (ma - mb) / se2.sqrt();
    let df = se2.powi(2) / ((va / na).powi(2) / (na - 1.0) + (vb / nb).powi(2) / (nb - 1.0));
    let dist = StudentsT::new(0.0, 1.0, df.max(1.0)).ok()?;
    Some(TestOutcome {
        test,
        statistic: t,
        p_value: (2.0 * (1.0 - dist.cdf(t.abs()))).clamp(0.0, 1.0),
    })
}

/// Two-sided Mann-Whitney U on two histograms with the same bucket layout.
pub fn mann_whitney(a: &Histogram<u64>, b: &Histogram<u64>) -> Option<TestOutcome> {
    let (na, nb) = (a.len() as f64, b.len() as f64);
    if na == 0.0 || nb == 0.0 {
        return None;
    }
    let mut values: Vec<(u64, f64, f64)> = Vec::new();
    for v in a.iter_recorded() {
        values.push((v.value_iterated_to(), v.count_at_value() as f64, 0.0));
    }
    for v in b.iter_recorded() {
        values.push((v.value_iterated_to(), 0.0, v.count_at_value() as f64));
    }
    values.sort_by_key(|v| v.0);
    let (mut rank, mut rank_sum_a, mut ties) = (0.0f64, 0.0f64, 0.0f64);
    let mut i = 0;
    while i < values.len() {
        let (value, mut ca, mut cb) = values[i];
        let mut j = i + 1;
        while j < values.len() && values[j].0 == value {
            ca += values[j].1;
            cb += values[j].2;
            j += 1;
        }
        let t = ca + cb;
        let average = rank + (t + 1.0) / 2.0;
        rank_sum_a += ca * average;
        ties += t.powi(3) - t;
        rank += t;
        i = j;
    }
    let n = na + nb;
    let u = rank_sum_a - na * (na + 1.0) / 2.0;
    let mu = na * nb / 2.0;
    let sigma2 = na * nb / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
    let test = "Mann-Whitney U on the HDR read-latency distributions".to_string();
    if sigma2 <= 0.0 {
        return Some(TestOutcome {
            test,
            statistic: 0.0,
            p_value: 1.0,
        });
    }
    let z = (u - mu) / sigma2.sqrt();
    let normal = Normal::new(0.0, 1.0).ok()?;
    Some(TestOutcome {
        test,
        statistic: z,
        p_value: (2.0 * (1.0 - normal.cdf(z.abs()))).clamp(0.0, 1.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::new_histogram;

    #[test]
    fn welch_sees_a_shift_and_not_noise() {
        let a: Vec<f64> = (0..30).map(|i| 1000.0 + (i % 5) as f64 * 10.0).collect();
        let b: Vec<f64> = a.iter().map(|v| v * 1.5).collect();
        assert!(welch_t_test(&a, &b).unwrap().p_value < 0.001);
        assert_eq!(welch_t_test(&a, &a).unwrap().p_value, 1.0);
        assert!(welch_t_test(&a[..1], &b).is_none());
    }

    #[test]
    fn autocorrelation_shrinks_the_evidence() {
        // A slow drift: strongly autocorrelated, so the effective n is small.
        let a: Vec<f64> = (0..40).map(|i| 1000.0 + i as f64).collect();
        let b: Vec<f64> = (0..40).map(|i| 1005.0 + i as f64).collect();
        let p = welch_t_test(&a, &b).unwrap().p_value;
        assert!(
            p > 0.05,
            "drifting series must not look significant: p = {p}"
        );
    }

    #[test]
    fn mann_whitney_on_histograms() {
        let mut a = new_histogram();
        let mut b = new_histogram();
        for v in 100..1100u64 {
            a.saturating_record(v);
            b.saturating_record(v + 200);
        }
        let same = mann_whitney(&a, &a).unwrap();
        assert!((same.p_value - 1.0).abs() < 1e-9 && same.statistic.abs() < 1e-9);
        assert!(mann_whitney(&a, &b).unwrap().p_value < 1e-6);
        assert!(mann_whitney(&a, &new_histogram()).is_none());
    }
}
