//! What each session does next: the SLOB operation stream. Key choice is uniform over the
//! schema's keys, with an optional hot spot that every Nth operation goes to; the update mix
//! is exact (update_pct updates in every 100 operations, evenly spread); think time sleeps
//! before every Nth operation. Each session has its own PRNG seeded from the run's seed and
//! the session's index, so the same seed gives the same key sequence.

use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::config::{Config, RedoStress};
use crate::error::CoreError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpKind {
    Read,
    Update,
}

impl OpKind {
    pub const ALL: [OpKind; 2] = [OpKind::Read, OpKind::Update];

    pub fn index(self) -> usize {
        match self {
            OpKind::Read => 0,
            OpKind::Update => 1,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Update => "update",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionKind {
    /// Reads, mixing in updates at `update_pct`.
    Reader,
    /// Only updates (classic SLOB writer).
    Writer,
}

/// One operation: a key range `lo..=hi` and, optionally, a pause before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    pub kind: OpKind,
    pub lo: i64,
    pub hi: i64,
    pub think: Option<Duration>,
}

/// The workload parameters in blocks (= keys), resolved against the data set's block size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    pub scale_blocks: u64,
    pub work_unit: u64,
    pub update_work_unit: u64,
    pub update_pct: u32,
    /// Hot range as (first key, keys); `None` when off.
    pub hot_spot: Option<(u64, u64)>,
    pub hot_spot_frequency: u32,
    pub think_frequency: u32,
    pub think_min: Duration,
    pub think_max: Duration,
    pub redo_stress: RedoStress,
}

impl Workload {
    /// Resolves and checks the run section; errors name the key.
    pub fn from_config(c: &Config, block_size: u64) -> Result<Workload, CoreError> {
        let r = &c.run;
        let scale = crate::dataset::rows_per_schema(&c.data, block_size);
        let hot_size = r.hot_spot.size.to_blocks(block_size);
        let hot_offset = r.hot_spot.offset.to_blocks(block_size);
        let hot_spot = if r.hot_spot.frequency > 0 && hot_size > 0 {
            let widest = r.work_unit.max(r.update_work_unit);
            if hot_size < widest {
                return Err(CoreError::OutOfRange {
                    key: "run.hot_spot.size".into(),
                    value: format!("{hot_size} blocks"),
                    allowed: format!(
                        "at least run.work_unit / run.update_work_unit ({widest} blocks)"
                    ),
                });
            }
            if hot_offset + hot_size > scale {
                return Err(CoreError::OutOfRange {
                    key: "run.hot_spot.offset".into(),
                    value: format!("{hot_offset} blocks + size {hot_size} blocks"),
                    allowed: format!("offset + size <= data.scale ({scale} blocks)"),
                });
            }
            Some((hot_offset + 1, hot_size))
        } else {
            None
        };
        Ok(Workload {
            scale_blocks: scale,
            work_unit: r.work_unit,
            update_work_unit: r.update_work_unit,
            update_pct: r.update_pct,
            hot_spot,
            hot_spot_frequency: r.hot_spot.frequency,
            think_frequency: r.think_time.frequency,
            think_min: r.think_time.min.0,
            think_max: r.think_time.max.0,
            redo_stress: r.redo_stress,
        })
    }
}

/// Per-session PRNG seed: distinct for every session, fixed by the run seed.
pub fn session_seed(run_seed: u64, session_index: u32) -> u64 {
    // SplitMix64 finaliser over (seed, index): neighbouring indexes get unrelated seeds.
    let mut z = run_seed ^ (session_index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The operation stream of one session.
pub struct OpStream {
    rng: SmallRng,
    workload: Workload,
    kind: SessionKind,
    /// Operations handed out so far (1-based count of the next one minus one).
    issued: u64,
}

impl OpStream {
    pub fn new(workload: Workload, kind: SessionKind, seed: u64) -> Self {
        OpStream {
            rng: SmallRng::seed_from_u64(seed),
            workload,
            kind,
            issued: 0,
        }
    }

    /// Is the `n`th operation (1-based) an update? Writers always update; readers update
    /// exactly `update_pct` times in every 100 operations, spread evenly.
    fn is_update(&self, n: u64) -> bool {
        match self.kind {
            SessionKind::Writer => true,
            SessionKind::Reader => {
                let p = self.workload.update_pct as u64;
                (n * p) / 100 > ((n - 1) * p) / 100
            }
        }
    }

    pub fn next_op(&mut self) -> Op {
        self.issued += 1;
        let n = self.issued;
        let w = &self.workload;
        let kind = if self.is_update(n) {
            OpKind::Update
        } else {
            OpKind::Read
        };
        let width = match kind {
            OpKind::Read => w.work_unit,
            OpKind::Update => w.update_work_unit,
        };
        let (first, keys) = match w.hot_spot {
            Some(range)
                if w.hot_spot_frequency > 0 && n.is_multiple_of(w.hot_spot_frequency as u64) =>
            {
                range
            }
            _ => (1, w.scale_blocks),
        };
        // Start keys that keep the whole range inside [first, first + keys - 1].
        let starts = keys.saturating_sub(width) + 1;
        let lo = first + self.rng.random_range(0..starts);
        let think = if w.think_frequency > 0 && n.is_multiple_of(w.think_frequency as u64) {
            let (min, max) = (
                w.think_min.as_micros() as u64,
                w.think_max.as_micros() as u64,
            );
            Some(Duration::from_micros(if max > min {
                self.rng.random_range(min..=max)
            } else {
                min
            }))
        } else {
            None
        };
        Op {
            kind,
            lo: lo as i64,
            hi: (lo + width - 1) as i64,
            think,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload() -> Workload {
        Workload {
            scale_blocks: 10_000,
            work_unit: 64,
            update_work_unit: 8,
            update_pct: 0,
            hot_spot: None,
            hot_spot_frequency: 0,
            think_frequency: 0,
            think_min: Duration::ZERO,
            think_max: Duration::ZERO,
            redo_stress: RedoStress::Lite,
        }
    }

    fn keys(seed: u64, n: usize) -> Vec<i64> {
        let mut s = OpStream::new(workload(), SessionKind::Reader, seed);
        (0..n).map(|_| s.next_op().lo).collect()
    }

    #[test]
    fn same_seed_same_keys_other_seed_other_keys() {
        assert_eq!(keys(42, 1000), keys(42, 1000));
        assert_ne!(keys(42, 1000), keys(43, 1000));
        assert_ne!(session_seed(1, 0), session_seed(1, 1));
        assert_eq!(session_seed(7, 3), session_seed(7, 3));
    }

    #[test]
    fn ranges_stay_inside_the_table_and_cover_it() {
        let mut s = OpStream::new(workload(), SessionKind::Reader, 1);
        let (mut min, mut max) = (i64::MAX, i64::MIN);
        for _ in 0..100_000 {
            let op = s.next_op();
            assert_eq!(op.hi - op.lo + 1, 64);
            assert!(op.lo >= 1 && op.hi <= 10_000, "{op:?}");
            min = min.min(op.lo);
            max = max.max(op.hi);
        }
        assert_eq!((min, max), (1, 10_000), "uniform keys reach both ends");
    }

    #[test]
    fn update_pct_is_exact_per_hundred() {
        for pct in [0u32, 1, 10, 25, 50, 73, 100] {
            let w = Workload {
                update_pct: pct,
                ..workload()
            };
            let mut s = OpStream::new(w, SessionKind::Reader, 9);
            let updates = (0..1000)
                .filter(|_| s.next_op().kind == OpKind::Update)
                .count();
            assert_eq!(updates, pct as usize * 10, "pct {pct}");
        }
        let mut s = OpStream::new(workload(), SessionKind::Writer, 9);
        let op = s.next_op();
        assert_eq!((op.kind, op.hi - op.lo + 1), (OpKind::Update, 8));
    }

    #[test]
    fn hot_spot_gets_every_nth_operation() {
        let w = Workload {
            hot_spot: Some((2001, 1000)),
            hot_spot_frequency: 3,
            ..workload()
        };
        let mut s = OpStream::new(w, SessionKind::Reader, 5);
        for n in 1..=3000u64 {
            let op = s.next_op();
            if n % 3 == 0 {
                assert!(
                    op.lo >= 2001 && op.hi <= 3000,
                    "op {n} {op:?} outside the hot spot"
                );
            }
        }
    }

    #[test]
    fn think_time_every_nth_within_bounds() {
        let w = Workload {
            think_frequency: 4,
            think_min: Duration::from_millis(10),
            think_max: Duration::from_millis(20),
            ..workload()
        };
        let mut s = OpStream::new(w, SessionKind::Reader, 5);
        for n in 1..=400u64 {
            let op = s.next_op();
            match op.think {
                Some(t) => {
                    assert_eq!(n % 4, 0);
                    assert!(t >= Duration::from_millis(10) && t <= Duration::from_millis(20));
                }
                None => assert_ne!(n % 4, 0),
            }
        }
    }

    #[test]
    fn hot_spot_must_fit() {
        let mut c = Config::default();
        c.data.scale = crate::units::SizeSpec::Blocks(1000);
        c.run.hot_spot.frequency = 2;
        c.run.hot_spot.size = crate::units::SizeSpec::Blocks(500);
        c.run.hot_spot.offset = crate::units::SizeSpec::Blocks(600);
        let e = Workload::from_config(&c, 8192).unwrap_err().to_string();
        assert!(e.contains("run.hot_spot.offset"), "{e}");
        c.run.hot_spot.offset = crate::units::SizeSpec::Blocks(100);
        let w = Workload::from_config(&c, 8192).unwrap();
        assert_eq!(w.hot_spot, Some((101, 500)));
    }
}
