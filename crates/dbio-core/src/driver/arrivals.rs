//! Open-loop arrivals: one schedule of intended starts shared by every session. A free
//! session takes the next intended start, waits for it if it is ahead, and starts at once if
//! it is behind; latency then counts from the intended start, not from when a busy session
//! got round to it (coordinated omission: a closed loop's sessions simply wait when the
//! device saturates, and the latency of what completed stays flat). The schedule restarts
//! when the window opens, so no backlog of the warm-up enters it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use crate::config::Arrival;

/// An open loop's rate and spacing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArrivalPlan {
    pub rate_per_s: f64,
    pub arrival: Arrival,
    /// Seeds the Poisson gaps: the same seed gives the same schedule.
    pub seed: u64,
}

/// The intended start times, in seconds after the schedule's origin.
#[derive(Debug, Clone)]
pub struct Starts {
    plan: ArrivalPlan,
    rng: SmallRng,
    /// Starts handed out so far.
    k: u64,
    /// The next Poisson start.
    next_s: f64,
}

impl Starts {
    pub fn new(plan: ArrivalPlan) -> Starts {
        let mut s = Starts {
            plan,
            rng: SmallRng::seed_from_u64(plan.seed),
            k: 0,
            next_s: 0.0,
        };
        // A Poisson schedule's first start comes after its first gap.
        s.next_s = s.gap_s();
        s
    }

    /// An exponential gap of mean 1/rate, by inversion (u in (0, 1], so ln(u) is finite).
    fn gap_s(&mut self) -> f64 {
        let u: f64 = 1.0 - self.rng.random::<f64>();
        -u.ln() / self.plan.rate_per_s
    }
}

impl Iterator for Starts {
    type Item = f64;
    fn next(&mut self) -> Option<f64> {
        let k = self.k;
        self.k += 1;
        match self.plan.arrival {
            // k/rate, not a running sum: no rounding error accumulates over a long window.
            Arrival::Fixed => Some(k as f64 / self.plan.rate_per_s),
            Arrival::Poisson => {
                let at = self.next_s;
                self.next_s += self.gap_s();
                Some(at)
            }
        }
    }
}

/// The schedule the sessions share.
pub(super) struct Schedule {
    plan: ArrivalPlan,
    state: Mutex<(Instant, Starts, u64)>,
    /// Intended starts a session took but could not start before its phase ended.
    missed: AtomicU64,
}

impl Schedule {
    pub(super) fn new(plan: ArrivalPlan, origin: Instant) -> Schedule {
        Schedule {
            plan,
            state: Mutex::new((origin, Starts::new(plan), 0)),
            missed: AtomicU64::new(0),
        }
    }

    /// Starts the schedule again at `origin`: nothing owed from before it is kept.
    pub(super) fn restart(&self, origin: Instant) {
        if let Ok(mut s) = self.state.lock() {
            *s = (origin, Starts::new(self.plan), 0);
        }
        self.missed.store(0, Ordering::Relaxed);
    }

    /// The next intended start.
    pub(super) fn take(&self) -> Option<Instant> {
        let mut s = self.state.lock().ok()?;
        let at = s.1.next()?;
        s.2 += 1;
        Some(s.0 + Duration::from_secs_f64(at))
    }

    /// A taken start that could not begin before its phase ended.
    pub(super) fn missed_one(&self) {
        self.missed.fetch_add(1, Ordering::Relaxed);
    }

    /// (intended starts before `end`, of them not started): those no session took by then,
    /// and those taken too late to start.
    pub(super) fn count(&self, end: Instant) -> (u64, u64) {
        let Ok(s) = self.state.lock() else {
            return (0, 0);
        };
        let window_s = end.saturating_duration_since(s.0).as_secs_f64();
        let scheduled = due_before(self.plan, window_s);
        let untaken = scheduled.saturating_sub(s.2);
        (scheduled, untaken + self.missed.load(Ordering::Relaxed))
    }
}

/// Intended starts of `plan` in the first `window_s` seconds (the same sequence the sessions
/// were given: it depends on the seed only).
pub fn due_before(plan: ArrivalPlan, window_s: f64) -> u64 {
    match plan.arrival {
        // Starts at 0, 1/r, 2/r, ...: those below the window's end.
        Arrival::Fixed => (window_s * plan.rate_per_s - 1e-9).ceil().max(0.0) as u64,
        Arrival::Poisson => Starts::new(plan).take_while(|t| *t < window_s).count() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(rate: f64, arrival: Arrival) -> ArrivalPlan {
        ArrivalPlan {
            rate_per_s: rate,
            arrival,
            seed: 7,
        }
    }

    #[test]
    fn fixed_starts_are_evenly_spaced_from_the_origin() {
        let s: Vec<f64> = Starts::new(plan(4.0, Arrival::Fixed)).take(5).collect();
        assert_eq!(s, vec![0.0, 0.25, 0.5, 0.75, 1.0]);
        assert_eq!(due_before(plan(4.0, Arrival::Fixed), 1.0), 4);
        assert_eq!(due_before(plan(4.0, Arrival::Fixed), 1.01), 5);
        assert_eq!(due_before(plan(400.0, Arrival::Fixed), 6.0), 2400);
        assert_eq!(due_before(plan(4.0, Arrival::Fixed), 0.0), 0);
    }

    #[test]
    fn poisson_starts_have_the_rate_on_average_and_exponential_gaps() {
        let rate = 1000.0;
        let starts: Vec<f64> = Starts::new(plan(rate, Arrival::Poisson))
            .take_while(|t| *t < 100.0)
            .collect();
        // 100,000 expected; a Poisson count's sd is its square root (316).
        let n = starts.len() as f64;
        assert!((n - 100_000.0).abs() < 2000.0, "{n}");
        let gaps: Vec<f64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        // An exponential's sd equals its mean (a fixed schedule's is 0).
        assert!((mean - 1e-3).abs() < 2e-5, "{mean}");
        assert!(
            (var.sqrt() / mean - 1.0).abs() < 0.03,
            "cv {}",
            var.sqrt() / mean
        );
        assert!(gaps.iter().all(|g| *g > 0.0));
        // The same seed gives the same schedule, which `due_before` counts.
        assert_eq!(
            due_before(plan(rate, Arrival::Poisson), 100.0),
            starts.len() as u64
        );
    }

    #[test]
    fn the_schedule_counts_what_was_not_started() {
        let t0 = Instant::now();
        let s = Schedule::new(plan(100.0, Arrival::Fixed), t0);
        for k in 0..30 {
            assert_eq!(
                s.take().unwrap(),
                t0 + Duration::from_secs_f64(k as f64 / 100.0)
            );
        }
        s.missed_one();
        // In 1 s, 100 were due: 70 never taken, 1 taken too late.
        assert_eq!(s.count(t0 + Duration::from_secs(1)), (100, 71));
        let later = t0 + Duration::from_secs(5);
        s.restart(later);
        assert_eq!(s.take(), Some(later));
        assert_eq!(s.count(later + Duration::from_millis(500)), (50, 49));
    }
}
