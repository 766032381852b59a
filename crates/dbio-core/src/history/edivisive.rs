//! Change points in a series of runs: E-divisive means (Matteson & James, "A Nonparametric
//! Approach for Multiple Change Point Analysis of Multivariate Data", JASA 2014; used for
//! performance tests by MongoDB, Daly et al. ICPE 2020, and by Apache Otava / Hunter).
//!
//! - Divergence of a split at τ of the points x[0..κ]: Q̂ = τ(κ−τ)/κ · Ê, with
//!   Ê = 2·mean|X−Y| − mean|X−X'| − mean|Y−Y'| (α = 1, absolute distance).
//! - Significance of the best split: a permutation test (the points shuffled `permutations`
//!   times; p = (1 + #{max Q̂ of a shuffle ≥ observed}) / (1 + permutations)). It accounts for
//!   choosing the best of all splits, which a plain t-test on the chosen split does not, so a
//!   noise-only series has a change point with probability ≤ `alpha`. The shuffles come from
//!   a fixed seed: the same series always gives the same answer.
//! - Split recursively (hierarchical E-divisive) within windows of `window` runs that overlap
//!   by half (Otava's windowing: a long history does not hide a recent change), then every
//!   change point is re-validated against its neighbouring segments: Student's t-test with
//!   pooled variance at `alpha`, and a relative change of at least `min_magnitude`. The weakest
//!   failing one is dropped and the rest re-checked until all pass (Otava's weak/strong
//!   re-validation).

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Options {
    /// Runs per analysis window; windows overlap by half and the last ends at the newest run.
    pub window: usize,
    /// Largest p-value of a change point (the permutation test and the re-validating t-test).
    pub alpha: f64,
    /// Shuffles of the permutation test.
    pub permutations: usize,
    /// Smallest relative change of the mean a change point must have (0.05 = 5%).
    pub min_magnitude: f64,
    /// Fewest runs on each side of a split.
    pub min_segment: usize,
    /// Seed of the shuffles.
    pub seed: u64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            window: 30,
            alpha: 0.01,
            permutations: 199,
            min_magnitude: 0.05,
            min_segment: 1,
            seed: 1,
        }
    }
}

/// Mean, standard deviation and a 95% interval of the mean of the runs [start, end).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    pub start: usize,
    pub end: usize,
    pub mean: f64,
    pub sd: f64,
    /// 95% Student t interval of the mean; a segment of one run uses the standard deviation
    /// pooled with its neighbour, so it still has an interval.
    pub ci95: (f64, f64),
}

impl Segment {
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChangePoint {
    /// Index of the first run of the new segment.
    pub index: usize,
    /// E-divisive divergence of the split where it was found.
    pub q_hat: f64,
    /// Permutation-test p-value where it was found.
    pub p_value: f64,
    /// Student's t-test (pooled variance) p-value of before against after.
    pub t_p_value: f64,
    pub before: Segment,
    pub after: Segment,
    /// (after − before) / before.
    pub change: f64,
    /// 95% interval of the change, relative to the mean before.
    pub change_ci95: (f64, f64),
}

/// The best split of x: the τ and κ that maximise Q̂ of X = x[0..τ) against Y = x[τ..κ),
/// over every τ and every κ (Matteson & James search κ too: with κ fixed at the end, a block
/// in the middle, such as an improvement that was reverted, is weighed against everything
/// after it and missed). O(n²): with row prefix sums of the distances, P[j][i] = Σ_{i' < i}
/// |x_i' − x_j|, moving κ right adds P[κ−1][τ] to the cross sum and P[κ−1][κ−1] − P[κ−1][τ]
/// to Y's own.
fn best_split(x: &[f64], min_seg: usize) -> Option<(usize, usize, f64)> {
    let n = x.len();
    let min_seg = min_seg.max(1);
    if n < 2 * min_seg {
        return None;
    }
    let w = n + 1;
    let mut p = vec![0.0f64; n * w];
    for j in 0..n {
        for i in 0..n {
            p[j * w + i + 1] = p[j * w + i] + (x[i] - x[j]).abs();
        }
    }
    let pairs = |c: f64| c * (c - 1.0) / 2.0;
    let mut within_x = 0.0;
    let mut best: Option<(usize, usize, f64)> = None;
    for tau in 1..n {
        // within[0..τ) gains the distances of x[τ−1] to the points before it.
        within_x += p[(tau - 1) * w + tau - 1];
        if tau < min_seg || n - tau < min_seg {
            continue;
        }
        let m = tau as f64;
        let wx = if tau > 1 { within_x / pairs(m) } else { 0.0 };
        let (mut cross, mut within_y) = (0.0, 0.0);
        for kappa in tau + 1..=n {
            let row = (kappa - 1) * w;
            cross += p[row + tau];
            within_y += p[row + kappa - 1] - p[row + tau];
            let k = (kappa - tau) as f64;
            if (kappa - tau) < min_seg {
                continue;
            }
            let wy = if kappa - tau > 1 {
                within_y / pairs(k)
            } else {
                0.0
            };
            let e = 2.0 * cross / (m * k) - wx - wy;
            let q = m * k / (m + k) * e;
            if best.is_none_or(|(_, _, b)| q > b) {
                best = Some((tau, kappa, q));
            }
        }
    }
    best
}

/// Permutation p-value of the best split's divergence `q` (stops early once it cannot be
/// significant at `alpha`).
fn permutation_p(x: &[f64], q: f64, o: &Options, rng: &mut SmallRng) -> f64 {
    let r = o.permutations.max(1);
    let give_up = (o.alpha * (r + 1) as f64).ceil() as usize;
    let mut perm = x.to_vec();
    let mut as_large = 0usize;
    for done in 1..=r {
        for i in (1..perm.len()).rev() {
            let j = rng.random_range(0..=i);
            perm.swap(i, j);
        }
        if best_split(&perm, o.min_segment).is_some_and(|(_, _, pq)| pq >= q * (1.0 - 1e-12)) {
            as_large += 1;
            if as_large >= give_up {
                return (as_large + 1) as f64 / (done + 1) as f64;
            }
        }
    }
    (as_large + 1) as f64 / (r + 1) as f64
}

/// Hierarchical E-divisive on x (whose first point is run `offset`): (index, Q̂, p).
fn split_recursive(
    x: &[f64],
    offset: usize,
    o: &Options,
    rng: &mut SmallRng,
    out: &mut Vec<(usize, f64, f64)>,
) {
    let Some((tau, kappa, q)) = best_split(x, o.min_segment) else {
        return;
    };
    if q <= 0.0 || !q.is_finite() {
        return;
    }
    let mut p = permutation_p(x, q, o, rng);
    if p > o.alpha {
        // Shuffles cannot reach alpha on a short segment (10 runs, 5 of them high: at least
        // 6 of the 252 orders hold a block as extreme). There Student's t on the split's two
        // sides decides, at a fiftieth of alpha.
        let t = compare(x, (0, tau), (tau, kappa)).t_p_value;
        if t > o.alpha / 50.0 {
            return;
        }
        p = t;
    }
    out.push((offset + tau, q, p));
    split_recursive(&x[..tau], offset, o, rng, out);
    split_recursive(&x[tau..], offset + tau, o, rng, out);
}

fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

fn sum_sq(x: &[f64], m: f64) -> f64 {
    x.iter().map(|v| (v - m).powi(2)).sum()
}

/// The statistics of a change at `index` between segments [start, index) and [index, end).
fn measure(
    x: &[f64],
    start: usize,
    index: usize,
    end: usize,
    q_hat: f64,
    p_value: f64,
) -> ChangePoint {
    let mut c = compare(x, (start, index), (index, end));
    c.q_hat = q_hat;
    c.p_value = p_value;
    c
}

/// Two segments of `x`, [a.0, a.1) before and [b.0, b.1) after (not necessarily adjacent):
/// means, spreads, 95% intervals and Student's t-test with pooled variance. The change point
/// is at `b.0`; q_hat and p_value are left 0 and 1 for the caller.
pub fn compare(x: &[f64], a: (usize, usize), b: (usize, usize)) -> ChangePoint {
    let (xa, xb) = (&x[a.0..a.1], &x[b.0..b.1]);
    let (ma, mb) = (mean(xa), mean(xb));
    let (sa, sb) = (sum_sq(xa, ma), sum_sq(xb, mb));
    let (na, nb) = (xa.len() as f64, xb.len() as f64);
    let df = na + nb - 2.0;
    let pooled_sd = if df > 0.0 {
        ((sa + sb) / df).sqrt()
    } else {
        0.0
    };
    let t_crit = if df > 0.0 {
        StudentsT::new(0.0, 1.0, df)
            .map(|t| t.inverse_cdf(0.975))
            .unwrap_or(f64::INFINITY)
    } else {
        f64::INFINITY
    };
    // A segment's own spread when it has one (Student t, n − 1 df); a single run borrows
    // the pooled one.
    let interval = |m: f64, s: f64, n: f64| {
        let h = if n > 1.0 {
            StudentsT::new(0.0, 1.0, n - 1.0)
                .map(|t| t.inverse_cdf(0.975) * (s / (n - 1.0)).sqrt() / n.sqrt())
                .unwrap_or(f64::INFINITY)
        } else {
            t_crit * pooled_sd / n.sqrt()
        };
        if h.is_finite() {
            (m - h, m + h)
        } else {
            (f64::NEG_INFINITY, f64::INFINITY)
        }
    };
    let se_diff = pooled_sd * (1.0 / na + 1.0 / nb).sqrt();
    let diff = mb - ma;
    let t_p_value = if df <= 0.0 {
        1.0
    } else if se_diff == 0.0 {
        if diff == 0.0 { 1.0 } else { 0.0 }
    } else {
        StudentsT::new(0.0, 1.0, df)
            .map(|t| (2.0 * (1.0 - t.cdf((diff / se_diff).abs()))).clamp(0.0, 1.0))
            .unwrap_or(1.0)
    };
    let rel = |v: f64| if ma != 0.0 { v / ma.abs() } else { f64::NAN };
    let h = t_crit * se_diff;
    let sd = |s: f64, n: f64| if n > 1.0 { (s / (n - 1.0)).sqrt() } else { 0.0 };
    ChangePoint {
        index: b.0,
        q_hat: 0.0,
        p_value: 1.0,
        t_p_value,
        before: Segment {
            start: a.0,
            end: a.1,
            mean: ma,
            sd: sd(sa, na),
            ci95: interval(ma, sa, na),
        },
        after: Segment {
            start: b.0,
            end: b.1,
            mean: mb,
            sd: sd(sb, nb),
            ci95: interval(mb, sb, nb),
        },
        change: rel(diff),
        change_ci95: if h.is_finite() {
            (rel(diff - h), rel(diff + h))
        } else {
            (f64::NEG_INFINITY, f64::INFINITY)
        },
    }
}

/// The first-night test: are the newest runs `x[at..]` worse than the `x[from..at]` before
/// them? One-sided Student t for the mean of k new runs against n earlier ones, with the
/// earlier runs' spread (a prediction interval: t = (m_new − m) / (s·√(1/k + 1/n)), n − 1
/// degrees of freedom). Unlike the permutation test it has no floor on a short series: one
/// new run of 17 can never be below p = 1/17 by shuffles, but it can be by this test.
/// Returns the one-sided p-value in the worse direction (`higher_is_better`: lower is worse).
pub fn newest_p(x: &[f64], from: usize, at: usize, higher_is_better: bool) -> Option<f64> {
    let (base, new) = (&x[from..at], &x[at..]);
    let n = base.len();
    if n < 3 || new.is_empty() {
        return None;
    }
    let m = mean(base);
    let s = (sum_sq(base, m) / (n - 1) as f64).sqrt();
    let d = mean(new) - m;
    let se = s * (1.0 / new.len() as f64 + 1.0 / n as f64).sqrt();
    let worse = if higher_is_better { -d } else { d };
    if se == 0.0 {
        return Some(if worse > 0.0 { 0.0 } else { 1.0 });
    }
    let t = StudentsT::new(0.0, 1.0, (n - 1) as f64).ok()?;
    Some(1.0 - t.cdf(worse / se))
}

/// The smallest step (relative to the mean) that the first-night test finds on its first
/// night 80% of the time, at a noise of `cv` (sd / mean) with `n` earlier runs:
/// (t(1 − α, n − 1) + z(0.8)) · cv · √(1 + 1/n). None below 3 runs (no spread to compare).
pub fn detectable_step(cv: f64, n: usize, alpha: f64) -> Option<f64> {
    if n < 3 || !cv.is_finite() {
        return None;
    }
    let t = StudentsT::new(0.0, 1.0, (n - 1) as f64).ok()?;
    Some((t.inverse_cdf(1.0 - alpha) + 0.8416) * cv * (1.0 + 1.0 / n as f64).sqrt())
}

/// The change points of `x` (oldest first), each with its neighbouring segments' means.
pub fn detect(x: &[f64], o: &Options) -> Vec<ChangePoint> {
    let n = x.len();
    if n < 2 {
        return vec![];
    }
    let window = o.window.max(4);
    let mut starts = Vec::new();
    if n <= window {
        starts.push(0);
    } else {
        let step = (window / 2).max(1);
        let mut s = 0;
        while s + window < n {
            starts.push(s);
            s += step;
        }
        starts.push(n - window);
    }
    let mut found: Vec<(usize, f64, f64)> = Vec::new();
    for s in starts {
        let end = (s + window).min(n);
        let mut rng = SmallRng::seed_from_u64(o.seed ^ ((s as u64) << 32) ^ end as u64);
        let mut here = Vec::new();
        split_recursive(&x[s..end], s, o, &mut rng, &mut here);
        for cp in here {
            match found.iter_mut().find(|f| f.0 == cp.0) {
                Some(f) if cp.2 < f.2 => *f = cp,
                Some(_) => {}
                None => found.push(cp),
            }
        }
    }
    found.sort_by_key(|f| f.0);
    // Re-validate against the neighbouring segments; drop the weakest failure and repeat.
    loop {
        let bounds: Vec<usize> = std::iter::once(0)
            .chain(found.iter().map(|f| f.0))
            .chain(std::iter::once(n))
            .collect();
        let points: Vec<ChangePoint> = found
            .iter()
            .enumerate()
            .map(|(i, f)| measure(x, bounds[i], f.0, bounds[i + 2], f.1, f.2))
            .collect();
        let weakest = points
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                !(c.t_p_value <= o.alpha && c.change.abs() >= o.min_magnitude) || c.change.is_nan()
            })
            .max_by(|a, b| {
                a.1.t_p_value
                    .total_cmp(&b.1.t_p_value)
                    .then(b.1.change.abs().total_cmp(&a.1.change.abs()))
            })
            .map(|(i, _)| i);
        match weakest {
            Some(i) => {
                found.remove(i);
            }
            None => return points,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixed, repeatable noise: a linear congruential generator mapped to [-1, 1).
    fn noise(n: usize, seed: u64) -> Vec<f64> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn q_hat_of_a_hand_computed_split() {
        // x = [0, 0, 10, 10]: at τ = 2 cross distances are all 10, within 0:
        // Ê = 2·10 − 0 − 0 = 20, Q̂ = 2·2/4 · 20 = 20. At τ = 1: cross mean = (0+10+10)/3,
        // within-Y = (10+10+0)/3, Ê = 40/3 − 0 − 20/3 = 20/3, Q̂ = 3/4 · 20/3 = 5.
        let (tau, _, q) = best_split(&[0.0, 0.0, 10.0, 10.0], 1).unwrap();
        assert_eq!(tau, 2);
        assert!((q - 20.0).abs() < 1e-9, "{q}");
        // x = [0, 10, 10, 10]: at τ = 1, Ê = 2·10 − 0 − 0 = 20 and Q̂ = 1·3/4 · 20 = 15; at
        // τ = 2 and 3 the cross and within means cancel (Ê = 0).
        let (tau, _, q) = best_split(&[0.0, 10.0, 10.0, 10.0], 1).unwrap();
        assert_eq!(tau, 1);
        assert!((q - 15.0).abs() < 1e-9, "{q}");
        assert!(best_split(&[1.0], 1).is_none());
    }

    #[test]
    fn a_step_is_found_where_it_starts_with_its_means() {
        let mut x: Vec<f64> = noise(20, 7).iter().map(|e| 1000.0 + 20.0 * e).collect();
        x.extend(noise(10, 8).iter().map(|e| 800.0 + 20.0 * e));
        let cps = detect(&x, &Options::default());
        assert_eq!(cps.len(), 1, "{cps:?}");
        let c = &cps[0];
        assert_eq!(c.index, 20);
        assert!(c.p_value <= 0.01 && c.t_p_value < 1e-6, "{c:?}");
        assert!((c.before.mean - 1000.0).abs() < 15.0, "{c:?}");
        assert!((c.after.mean - 800.0).abs() < 15.0, "{c:?}");
        assert!((c.change + 0.2).abs() < 0.03, "{c:?}");
        assert!(c.change_ci95.0 < c.change && c.change < c.change_ci95.1);
        assert!(c.before.ci95.0 < c.before.mean && c.before.mean < c.before.ci95.1);
        // The same series gives the same answer (seeded shuffles).
        assert_eq!(cps, detect(&x, &Options::default()));
    }

    #[test]
    fn noise_alone_has_no_change_point() {
        for seed in 0..20 {
            let x: Vec<f64> = noise(30, seed).iter().map(|e| 500.0 + 25.0 * e).collect();
            let cps = detect(&x, &Options::default());
            assert!(cps.len() <= 1, "seed {seed}: {cps:?}");
        }
        let flat = vec![42.0; 12];
        assert!(detect(&flat, &Options::default()).is_empty());
    }

    #[test]
    fn a_small_change_below_the_minimum_magnitude_is_dropped() {
        let mut x = vec![100.0; 15];
        x.extend(vec![102.0; 15]);
        assert!(detect(&x, &Options::default()).is_empty());
        let strict = Options {
            min_magnitude: 0.01,
            ..Options::default()
        };
        let cps = detect(&x, &strict);
        assert_eq!(cps.len(), 1);
        assert_eq!(cps[0].index, 15);
    }

    #[test]
    fn windows_find_a_recent_change_in_a_long_history() {
        let mut x: Vec<f64> = noise(90, 3).iter().map(|e| 200.0 + 4.0 * e).collect();
        x.extend(noise(4, 4).iter().map(|e| 400.0 + 4.0 * e));
        let cps = detect(&x, &Options::default());
        assert_eq!(cps.iter().map(|c| c.index).collect::<Vec<_>>(), vec![90]);
        assert!((cps[0].change - 1.0).abs() < 0.1, "{cps:?}");
        // Two changes, each found.
        let mut y = vec![10.0; 12];
        y.extend(vec![20.0; 12]);
        y.extend(vec![5.0; 12]);
        let idx: Vec<usize> = detect(&y, &Options::default())
            .iter()
            .map(|c| c.index)
            .collect();
        assert_eq!(idx, vec![12, 24]);
    }
}
