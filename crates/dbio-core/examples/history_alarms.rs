//! How often `dbio history check` raises a false alarm on noise alone, and how often it finds
//! a real step, on synthetic series. Each series is 30 runs of one figure (client ops/s) with
//! Gaussian noise of the given coefficient of variation; a "step" series has its newest k runs
//! lowered by 10% or 20%. Every series goes through the same `check` the CLI runs, with the
//! CLI's defaults (E-divisive, 199 shuffles, p <= 0.01, min magnitude 5%, window 30, newest 5).
//!
//! cargo run --release -p dbio-core --example history_alarms -- [CV] [SERIES]
//! (defaults: CV 0.05, 1000 series)

use chrono::DateTime;
use dbio_core::driver::RunStatus;
use dbio_core::history::StepFigures;
use dbio_core::history::check::{CheckOptions, Metric, Series, SeriesRun, check};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

const RUNS: usize = 30;

/// A standard normal deviate (Box-Muller).
fn normal(rng: &mut SmallRng) -> f64 {
    let u1: f64 = rng.random_range(f64::EPSILON..1.0);
    let u2: f64 = rng.random_range(0.0..1.0);
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

fn series(values: &[f64]) -> Series {
    let runs = values
        .iter()
        .enumerate()
        .map(|(i, v)| SeriesRun {
            run_id: i as i64 + 1,
            label: "synthetic".into(),
            tag: None,
            started: DateTime::from_timestamp(1_700_000_000 + i as i64 * 86_400, 0)
                .expect("a valid time"),
            status: RunStatus::Ok,
            figures: StepFigures {
                step: "r1-w0".into(),
                readers: 1,
                writers: 0,
                update_pct: 0,
                status: RunStatus::Ok,
                repeats: 1,
                elapsed_s: 1.0,
                db_read_iops: None,
                db_write_iops: None,
                device_read_iops: None,
                client_ops_per_s: Some(*v),
                client_read_p50_us: None,
                client_read_p99_us: None,
                db_avg_read_latency_us: None,
            },
        })
        .collect();
    Series {
        series: "synthetic".into(),
        label: "synthetic".into(),
        step: "r1-w0".into(),
        runs,
    }
}

/// (alarmed, alarm names the first shifted run).
fn judge(values: &[f64], first_shifted: Option<usize>, o: &CheckOptions) -> (bool, bool) {
    let c = check(&[series(values)], o);
    let row = &c[0].rows[0];
    let exact = match first_shifted {
        Some(i) => row
            .run
            .as_ref()
            .is_some_and(|r| r.starts_with(&format!("#{} ", i + 1))),
        None => false,
    };
    (row.regressed, row.regressed && exact)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let cv: f64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(0.05);
    let n: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let o = CheckOptions {
        metrics: vec![Metric::ClientOpsPerS],
        ..CheckOptions::default()
    };
    let mut rng = SmallRng::seed_from_u64(2026);
    let noise = |rng: &mut SmallRng| -> Vec<f64> {
        (0..RUNS)
            .map(|_| 1000.0 * (1.0 + cv * normal(rng)))
            .collect()
    };
    let mut false_alarms = 0;
    for _ in 0..n {
        if judge(&noise(&mut rng), None, &o).0 {
            false_alarms += 1;
        }
    }
    println!(
        "noise only: {n} series of {RUNS} runs, cv {:.1}%: {false_alarms} false alarm(s) = {:.2}%",
        100.0 * cv,
        100.0 * false_alarms as f64 / n as f64
    );
    println!("step   newest runs shifted   detected   naming the first shifted run");
    for step in [0.10, 0.20] {
        for k in [1, 2, 3, 5] {
            let (mut found, mut exact) = (0, 0);
            for _ in 0..n {
                let mut x = noise(&mut rng);
                for v in &mut x[RUNS - k..] {
                    *v *= 1.0 - step;
                }
                let (a, e) = judge(&x, Some(RUNS - k), &o);
                found += a as usize;
                exact += e as usize;
            }
            println!(
                "-{:.0}%   {k:>19}   {:>7.1}%   {:>7.1}%",
                100.0 * step,
                100.0 * found as f64 / n as f64,
                100.0 * exact as f64 / n as f64
            );
        }
    }
}
