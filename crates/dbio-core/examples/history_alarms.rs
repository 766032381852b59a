//! The nightly gate replayed on synthetic series: each series is fed one run per night and
//! `dbio history check` (the same `check` the CLI runs, with the CLI's defaults) judges it
//! every night. A night is red when the check fails.
//!
//! cargo run --release -p dbio-core --example history_alarms -- [CV] [SERIES]
//!   Noise-only series of 30 nights and series with a step at night 21 (lasting to night
//!   30) of -5%, -10%, -20%, Gaussian noise of CV (default 0.10), SERIES of each (100):
//!   prints false alarms (noise-only series red on any night), nights red during the step,
//!   nights to detect.
//!
//! cargo run --release -p dbio-core --example history_alarms -- --replay FILE
//!   FILE is JSON `{"series": [{"name": "...", "values": [..]}, ...]}`, higher is better;
//!   prints `{"name": [red on night 1, night 2, ...], ...}`: the input of
//!   scripts/bench_regression.py, which gives Apache Otava the same values.
//!
//! GATE, ALPHA (change-point alpha), MINMAG (fraction) and WINDOW in the environment override
//! the defaults, to measure other settings; WHY=1 prints every red night's verdict on stderr.

use std::collections::BTreeMap;

use chrono::DateTime;
use dbio_core::driver::RunStatus;
use dbio_core::history::StepFigures;
use dbio_core::history::check::{CheckOptions, Metric, Series, SeriesKind, SeriesRun, check};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

const NIGHTS: usize = 30;
const STEP_AT: usize = 20;

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
                device_read_latency_us: None,
                physical_read_ratio: None,
                cache_served: None,
                rate_per_s: None,
                steady: None,
            },
            server_version: "17.0".into(),
            settings: BTreeMap::new(),
            dbio_version: "0".into(),
        })
        .collect();
    Series {
        series: "synthetic".into(),
        label: "synthetic".into(),
        kind: SeriesKind::Database,
        step: "r1-w0".into(),
        runs,
    }
}

/// Red on each night: the check over the runs up to that night fails.
fn nights(values: &[f64], o: &CheckOptions) -> Vec<bool> {
    (1..=values.len())
        .map(|n| {
            let c = check(&[series(&values[..n])], o, &[]);
            if std::env::var("WHY").is_ok() {
                for m in c.iter().flat_map(|c| c.metrics.iter()).filter(|m| m.gates) {
                    eprintln!(
                        "night {n}: {:?} {:?} since {:?} change {:?}",
                        m.state,
                        m.test,
                        m.since.as_ref().map(|r| r.run),
                        m.change
                    );
                }
            }
            c.iter().any(|c| c.gates)
        })
        .collect()
}

fn replay(path: &str, o: &CheckOptions) {
    let text = std::fs::read_to_string(path).expect("the replay file");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let mut out = serde_json::Map::new();
    for s in doc["series"].as_array().expect("series[]") {
        let name = s["name"].as_str().expect("name").to_string();
        let values: Vec<f64> = s["values"]
            .as_array()
            .expect("values[]")
            .iter()
            .map(|v| v.as_f64().expect("numbers"))
            .collect();
        out.insert(name, serde_json::json!(nights(&values, o)));
    }
    println!("{}", serde_json::Value::Object(out));
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mut o = CheckOptions {
        metrics: vec![Metric::ClientOpsPerS],
        ..CheckOptions::default()
    };
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<f64>().ok());
    if let Some(v) = env("ALPHA") {
        o.cpd.alpha = v;
    }
    if let Some(v) = env("GATE") {
        o.alpha = v;
    }
    if let Some(v) = env("MINMAG") {
        o.cpd.min_magnitude = v;
    }
    if let Some(v) = env("WINDOW") {
        o.cpd.window = v as usize;
    }
    if args.get(1).map(String::as_str) == Some("--replay") {
        replay(args.get(2).expect("--replay FILE"), &o);
        return;
    }
    let cv: f64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(0.10);
    let n: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(100);
    let mut rng = SmallRng::seed_from_u64(2026);
    let noise = |rng: &mut SmallRng| -> Vec<f64> {
        (0..NIGHTS)
            .map(|_| 1000.0 * (1.0 + cv * normal(rng)))
            .collect()
    };
    let mut false_alarms = 0;
    let mut red_nights = 0;
    for _ in 0..n {
        let red = nights(&noise(&mut rng), &o);
        false_alarms += red.iter().any(|r| *r) as usize;
        red_nights += red.iter().filter(|r| **r).count();
    }
    println!(
        "cv {:.0}%: noise only, {n} series of {NIGHTS} nights: {false_alarms} with a false alarm ({red_nights} red nights)",
        100.0 * cv
    );
    println!(
        "step   red nights of 10 (mean)   first night   detected by night 10   nights to detect (median)"
    );
    for step in [0.05, 0.10, 0.20] {
        let (mut red, mut first, mut detected) = (0usize, 0usize, 0usize);
        let mut to_detect = Vec::new();
        for _ in 0..n {
            let mut x = noise(&mut rng);
            for v in &mut x[STEP_AT..] {
                *v *= 1.0 - step;
            }
            let r = nights(&x, &o);
            let during = &r[STEP_AT..];
            red += during.iter().filter(|b| **b).count();
            first += during[0] as usize;
            if let Some(k) = during.iter().position(|b| *b) {
                detected += 1;
                to_detect.push(k + 1);
            }
        }
        to_detect.sort_unstable();
        println!(
            "-{:>2.0}%   {:>22.1}   {:>10.0}%   {:>19.0}%   {}",
            100.0 * step,
            red as f64 / n as f64,
            100.0 * first as f64 / n as f64,
            100.0 * detected as f64 / n as f64,
            to_detect
                .get(to_detect.len() / 2)
                .map(|k| k.to_string())
                .unwrap_or_else(|| "never".into())
        );
    }
}
