//! Steady state, judged interval by interval: the least-squares slope of a per-interval
//! figure over a rolling span, per second, as a percentage of its mean over that span (fio's
//! `steadystate=iops_slope:P%`, `ss_dur`). The window opens once it is within the bound; a
//! write workload's preconditioning ends the same way on its update rate.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::config::SteadyRule;

/// Judges one rule over the intervals pushed so far.
#[derive(Debug, Clone)]
pub struct SteadyJudge {
    rule: SteadyRule,
    /// Intervals needed to cover the span.
    needed: usize,
    /// (end of the interval in s, figure) of the intervals inside the span, oldest first.
    samples: VecDeque<(f64, f64)>,
}

impl SteadyJudge {
    /// A judge of `rule` over intervals of `interval_s` seconds.
    pub fn new(rule: SteadyRule, interval_s: f64) -> SteadyJudge {
        let needed = (rule.span.as_secs_f64() / interval_s.max(1e-3)).round() as usize;
        SteadyJudge {
            rule,
            needed: needed.max(3),
            samples: VecDeque::new(),
        }
    }

    /// Adds the figure of the interval that ended at `t_s`; the oldest ones leave the span.
    pub fn push(&mut self, t_s: f64, value: f64) {
        if !value.is_finite() {
            return;
        }
        self.samples.push_back((t_s, value));
        while self.samples.len() > self.needed {
            self.samples.pop_front();
        }
    }

    /// Forgets every interval (the figure was interrupted: a phase began).
    pub fn clear(&mut self) {
        self.samples.clear();
    }

    /// Mean of the figure over the span; None until the span is covered.
    pub fn mean(&self) -> Option<f64> {
        (self.samples.len() >= self.needed)
            .then(|| self.samples.iter().map(|s| s.1).sum::<f64>() / self.samples.len() as f64)
    }

    /// |least-squares slope| per second in % of the span's mean; None until the span is
    /// covered. A mean of zero (nothing completed) is never steady: infinite.
    pub fn slope_pct(&self) -> Option<f64> {
        let mean = self.mean()?;
        let n = self.samples.len() as f64;
        let t_mean = self.samples.iter().map(|s| s.0).sum::<f64>() / n;
        let (mut sxy, mut sxx) = (0.0, 0.0);
        for (t, v) in &self.samples {
            sxy += (t - t_mean) * (v - mean);
            sxx += (t - t_mean) * (t - t_mean);
        }
        if mean <= 0.0 || sxx <= 0.0 {
            return Some(f64::INFINITY);
        }
        Some((sxy / sxx).abs() / mean * 100.0)
    }

    /// The rule holds over the last span.
    pub fn steady(&self) -> bool {
        self.slope_pct()
            .is_some_and(|p| p <= self.rule.max_slope_pct)
    }

    pub fn rule(&self) -> SteadyRule {
        self.rule
    }
}

/// How a phase that waited for steady state ended, as result.json records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Steadiness {
    /// The rule, as written: `iops_slope<=2%:10s`.
    pub criterion: String,
    /// The rule held and ended the wait; false: `max_s` ran out first ("not steady").
    pub steady: bool,
    /// Seconds the wait took (from the end of the warm-up, or the start of preconditioning).
    pub after_s: f64,
    /// The slope over the last span when the wait ended (% of the mean per second); null when
    /// the wait ended before one span was covered.
    pub slope_pct: Option<f64>,
    /// The figure's mean over that span (operations/s for iops_slope, µs for lat_slope).
    pub mean: Option<f64>,
    /// The cap (`run.steady_max`), s.
    pub max_s: f64,
}

impl Steadiness {
    /// The outcome of `judge` after `after_s` of a wait capped at `max_s`.
    pub fn of(judge: &SteadyJudge, after_s: f64, max_s: f64) -> Steadiness {
        let slope = judge.slope_pct().filter(|p| p.is_finite());
        Steadiness {
            criterion: judge.rule().to_string(),
            steady: judge.steady(),
            after_s,
            slope_pct: slope,
            mean: judge.mean(),
            max_s,
        }
    }

    /// `steady after 12.0 s (iops_slope<=2%:10s; slope 0.80%/s of the mean)`, or
    /// `NOT STEADY: iops_slope<=2%:10s did not hold within 300 s (...)`.
    pub fn describe(&self) -> String {
        if self.steady {
            format!(
                "steady after {:.1} s ({}; {})",
                self.after_s,
                self.criterion,
                self.slope_text()
            )
        } else {
            format!("NOT STEADY: {}", self.missed())
        }
    }

    /// `iops_slope<=2%:10s did not hold within 300 s (slope 3.10%/s of the mean at the end)`.
    pub fn missed(&self) -> String {
        format!(
            "{} did not hold within {:.0} s ({} at the end)",
            self.criterion,
            self.max_s,
            self.slope_text()
        )
    }

    fn slope_text(&self) -> String {
        self.slope_pct
            .map(|s| format!("slope {s:.2}%/s of the mean"))
            .unwrap_or_else(|| "no slope: nothing completed, or the span was never covered".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(text: &str) -> SteadyRule {
        SteadyRule::parse(text).unwrap()
    }

    #[test]
    fn a_flat_figure_is_steady_once_the_span_is_covered() {
        let mut j = SteadyJudge::new(rule("iops_slope<=2%:5s"), 1.0);
        for t in 1..=4 {
            j.push(t as f64, 400.0 + (t % 2) as f64);
            assert!(!j.steady(), "4 of 5 intervals do not cover the span");
            assert_eq!(j.slope_pct(), None);
        }
        j.push(5.0, 400.0);
        assert!(j.steady(), "{:?}", j.slope_pct());
        assert!(j.slope_pct().unwrap() < 0.1);
        assert!((j.mean().unwrap() - 400.4).abs() < 1e-9);
    }

    #[test]
    fn a_drift_is_not_steady_and_its_slope_is_per_second_of_the_mean() {
        // 400 -> 300 over 5 s: -25/s on a mean of 350 is 7.1%/s.
        let mut j = SteadyJudge::new(rule("iops_slope<=2%:5s"), 1.0);
        for (t, v) in [(1, 400.0), (2, 375.0), (3, 350.0), (4, 325.0), (5, 300.0)] {
            j.push(t as f64, v);
        }
        let pct = j.slope_pct().unwrap();
        assert!((pct - 25.0 / 350.0 * 100.0).abs() < 1e-9, "{pct}");
        assert!(!j.steady());
        // Half-second intervals: the slope is still per second.
        let mut j = SteadyJudge::new(rule("iops_slope<=10%:2s"), 0.5);
        for k in 1..=4 {
            j.push(k as f64 * 0.5, 100.0 + 5.0 * k as f64);
        }
        let pct = j.slope_pct().unwrap();
        assert!((pct - 10.0 / 112.5 * 100.0).abs() < 1e-9, "{pct}");
    }

    #[test]
    fn the_span_rolls_and_a_settled_figure_becomes_steady() {
        let mut j = SteadyJudge::new(rule("iops_slope<=2%:3s"), 1.0);
        // A step from 100 to 400, then flat: steady once the span holds only the new level.
        for (t, v) in [(1, 100.0), (2, 100.0), (3, 400.0), (4, 400.0)] {
            j.push(t as f64, v);
            assert!(!j.steady());
        }
        j.push(5.0, 400.0);
        assert!(j.steady());
        j.clear();
        assert!(!j.steady());
    }

    #[test]
    fn nothing_completing_is_never_steady() {
        let mut j = SteadyJudge::new(rule("iops_slope<=2%:3s"), 1.0);
        for t in 1..=3 {
            j.push(t as f64, 0.0);
        }
        assert_eq!(j.slope_pct(), Some(f64::INFINITY));
        assert!(!j.steady());
        let s = Steadiness::of(&j, 3.0, 60.0);
        assert!(!s.steady && s.slope_pct.is_none(), "{s:?}");
        assert!(s.describe().starts_with("NOT STEADY"), "{}", s.describe());
    }
}
