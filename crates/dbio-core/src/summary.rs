//! Steps: the unit that ramps, compare and regress work on. A step is one workload shape
//! (readers, writers, update_pct) run one or more times; its summary holds the mean, standard
//! deviation and coefficient of variation of each key figure across repeats, the samples the
//! significance tests need (per-interval throughput, the merged read-latency histogram), and
//! where each repeat's result.json is. A single run is a set of one step; a ramp is a set of
//! many, written as `ramp.json`.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::driver::RunStatus;
use crate::error::CoreError;
use crate::result::{Environment, RESULT_FORMAT, RunResult, printable};
use crate::shape::Shape;
use crate::stats::{decode_histogram, encode_histogram, new_histogram};

/// Mean, standard deviation (sample, n-1) and coefficient of variation of repeat values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    pub mean: f64,
    pub sd: f64,
    /// sd / mean; 0 for a single value.
    pub cv: f64,
    pub values: Vec<f64>,
}

impl Stat {
    pub fn of(values: Vec<f64>) -> Option<Stat> {
        if values.is_empty() {
            return None;
        }
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let sd = if values.len() > 1 {
            (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
        } else {
            0.0
        };
        Some(Stat {
            mean,
            sd,
            cv: if mean != 0.0 { sd / mean } else { 0.0 },
            values,
        })
    }
}

/// Identity of a step for matching across runs and ramps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct StepKey {
    pub readers: u32,
    pub writers: u32,
    pub update_pct: u32,
    /// An open loop's intended starts per second (`run.rate`, rounded); absent for a closed
    /// loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_s: Option<u64>,
}

impl StepKey {
    /// A closed-loop step.
    pub fn closed(readers: u32, writers: u32, update_pct: u32) -> StepKey {
        StepKey {
            readers,
            writers,
            update_pct,
            rate_per_s: None,
        }
    }
}

impl std::fmt::Display for StepKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "r{}-w{}", self.readers, self.writers)?;
        if self.update_pct > 0 {
            write!(f, "-u{}", self.update_pct)?;
        }
        if let Some(rate) = self.rate_per_s {
            write!(f, "-rate{rate}")?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepSummary {
    pub key: StepKey,
    /// `r4-w0` style label.
    pub step: String,
    pub repeats: u32,
    /// `ok` when every repeat was ok, else the first other status.
    pub status: RunStatus,
    pub elapsed_s: f64,
    pub client_ops_per_s: Stat,
    pub client_read_p50_us: Option<Stat>,
    pub client_read_p99_us: Option<Stat>,
    pub db_read_iops: Option<Stat>,
    pub db_write_iops: Option<Stat>,
    pub db_avg_read_latency_us: Option<Stat>,
    pub device_read_iops: Option<Stat>,
    pub physical_read_ratio: Option<f64>,
    /// The backends' own physical-read ratio (bytes they fetched from storage over bytes they
    /// read, `/proc/<pid>/io`; the lowest target's over several), mean over repeats: it tells a
    /// page-cache step where the device's figure is missing or shared.
    #[serde(default)]
    pub backends_physical_read_ratio: Option<f64>,
    /// Raw device IOPS at this step's load (from `--calibration`), and DB read IOPS over it.
    #[serde(default)]
    pub raw_device_iops: Option<f64>,
    #[serde(default)]
    pub db_to_raw_iops_ratio: Option<f64>,
    pub top_wait: Option<String>,
    /// The device the device figures are of and the path it holds (`vda at /srv/pg/data`).
    #[serde(default)]
    pub storage: Option<String>,
    /// Throughput of every full interval of every repeat (ops/s), for the throughput test.
    pub interval_ops_per_s: Vec<f64>,
    /// Read latency of all repeats merged (HDR V2 + deflate, base64, µs).
    pub read_histogram: String,
    /// result.json of each repeat, relative to the file that holds this summary.
    pub results: Vec<String>,
    pub warnings: Vec<String>,
    /// Operations of all repeats that had stalled when the window ended (running at least
    /// [`crate::result::STALL_S`]; cancelled, not counted): such a step is flagged and never a
    /// baseline.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stalled_ops: u32,
    /// A step over several targets: each target's figures across repeats (the step's own
    /// figures are the totals).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<TargetStep>,
    /// The device's average read wait, ms (across repeats).
    #[serde(default)]
    pub device_await_ms: Option<Stat>,
    /// The device's average queue (iostat aqu-sz).
    #[serde(default)]
    pub device_queue_depth: Option<Stat>,
    /// Reads in flight at the device by Little's law (reads/s x average read wait).
    #[serde(default)]
    pub device_reads_in_flight: Option<Stat>,
    /// Reads the sessions waited on by Little's law (database read requests/s x its timed
    /// read wait).
    #[serde(default)]
    pub db_reads_in_flight: Option<Stat>,
    /// What limited the step: the first repeat's verdict (the others' when they differ are
    /// in `warnings`), or the ramp's shape where it shows a cap the step could not see.
    #[serde(default)]
    pub limiter: Option<crate::limits::LimiterVerdict>,
    /// False when a repeat's window opened without its steady-state rule holding (or its
    /// preconditioning ended at the cap): "not steady"; absent without a rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady: Option<bool>,
}

/// One target's figures in a step over several, across its repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetStep {
    pub index: u32,
    pub target: String,
    pub readers: u32,
    pub writers: u32,
    pub client_ops_per_s: Option<Stat>,
    pub db_read_iops: Option<Stat>,
    pub db_avg_read_latency_us: Option<Stat>,
    pub device_read_iops: Option<Stat>,
}

/// Each target's figures across the repeats of a step (empty for one target).
fn target_steps(results: &[RunResult]) -> Vec<TargetStep> {
    let Some(first) = results.first() else {
        return Vec::new();
    };
    first
        .targets
        .iter()
        .map(|t| {
            let i = t.index;
            let of = |f: &dyn Fn(&crate::result::TargetResult) -> Option<f64>| {
                Stat::of(
                    results
                        .iter()
                        .filter_map(|r| r.targets.iter().find(|x| x.index == i).and_then(f))
                        .collect(),
                )
            };
            TargetStep {
                index: i,
                target: t.target.clone(),
                readers: t.readers,
                writers: t.writers,
                client_ops_per_s: of(&|x| Some(x.ops_per_s)),
                db_read_iops: of(&|x| x.db.as_ref().map(|d| d.read_iops)),
                db_avg_read_latency_us: of(&|x| x.db.as_ref().and_then(|d| d.avg_read_latency_us)),
                device_read_iops: of(&|x| x.device.as_ref().map(|d| d.reads_per_s)),
            }
        })
        .collect()
}

fn key_of(r: &RunResult) -> StepKey {
    StepKey {
        readers: r.config.run.readers,
        writers: r.config.run.writers,
        update_pct: r.config.run.update_pct,
        rate_per_s: r.config.run.rate.map(|v| v.per_s().round() as u64),
    }
}

/// Summarises the repeats of one step; `paths` are their result.json paths as they should
/// be recorded.
pub fn summarize(results: &[RunResult], paths: Vec<String>) -> Option<StepSummary> {
    let first = results.first()?;
    let key = key_of(first);
    let collect =
        |f: &dyn Fn(&RunResult) -> Option<f64>| Stat::of(results.iter().filter_map(f).collect());
    let mut hist = new_histogram();
    let mut intervals = Vec::new();
    let mut warnings: Vec<(String, String, Vec<usize>)> = Vec::new();
    for (i, r) in results.iter().enumerate() {
        if let Ok(h) = decode_histogram(&r.client.read.histogram) {
            let _ = hist.add(&h);
        }
        let interval = r.config.run.interval.0.as_secs_f64();
        intervals.extend(
            r.timeseries
                .iter()
                .filter(|t| t.seconds >= 0.9 * interval)
                .map(|t| t.ops_per_s),
        );
        for w in &r.warnings {
            let key = warning_key(w);
            match warnings.iter_mut().find(|(k, _, _)| *k == key) {
                Some((_, _, repeats)) => repeats.push(i + 1),
                None => warnings.push((key, w.clone(), vec![i + 1])),
            }
        }
    }
    // Each warning once; the repeats it concerns are named when not all of them.
    let warnings: Vec<String> = warnings
        .into_iter()
        .map(|(_, w, repeats)| {
            if repeats.len() == results.len() {
                w
            } else {
                let list: Vec<String> = repeats.iter().map(|k| k.to_string()).collect();
                format!("(repeat {} of {}) {w}", list.join(", "), results.len())
            }
        })
        .collect();
    let mut warnings = warnings;
    let limiters: Vec<String> = results
        .iter()
        .filter_map(|r| r.limiter.as_ref())
        .map(|v| v.limiter.name(first.engine).to_string())
        .collect();
    if limiters.iter().any(|l| *l != limiters[0]) {
        warnings.push(format!(
            "the repeats were limited by different things ({}, in repeat order): their figures are not of one kind",
            limiters.join(", ")
        ));
    }
    let status = results
        .iter()
        .map(|r| r.status)
        .find(|s| *s != RunStatus::Ok)
        .unwrap_or(RunStatus::Ok);
    Some(StepSummary {
        key,
        step: key.to_string(),
        repeats: results.len() as u32,
        status,
        elapsed_s: results.iter().map(|r| r.window.measured_s).sum::<f64>() / results.len() as f64,
        client_ops_per_s: Stat::of(results.iter().map(|r| r.client.ops_per_s).collect())?,
        client_read_p50_us: collect(&|r| r.client.read.latency_us.map(|l| l.p50 as f64)),
        client_read_p99_us: collect(&|r| r.client.read.latency_us.map(|l| l.p99 as f64)),
        db_read_iops: collect(&|r| r.db.as_ref().map(|d| d.read_iops)),
        db_write_iops: collect(&|r| r.db.as_ref().map(|d| d.write_iops)),
        db_avg_read_latency_us: collect(&|r| r.db.as_ref().and_then(|d| d.avg_read_latency_us)),
        device_read_iops: collect(&|r| r.device.as_ref().map(|d| d.reads_per_s)),
        physical_read_ratio: collect(&|r| r.device.as_ref().and_then(|d| d.physical_read_ratio))
            .map(|s| s.mean),
        backends_physical_read_ratio: collect(&|r| {
            r.host
                .as_ref()
                .and_then(|h| h.physical_read_ratio)
                .or_else(|| {
                    r.targets
                        .iter()
                        .filter_map(|t| t.host.as_ref().and_then(|h| h.physical_read_ratio))
                        .reduce(f64::min)
                })
        })
        .map(|s| s.mean),
        raw_device_iops: first.calibration.as_ref().map(|c| c.raw_small_iops),
        db_to_raw_iops_ratio: collect(&|r| r.calibration.as_ref().and_then(|c| c.iops_ratio))
            .map(|s| s.mean),
        top_wait: first
            .waits
            .as_ref()
            .and_then(|w| w.foreground.first())
            .map(|w| w.event.clone()),
        storage: first
            .device
            .as_ref()
            .map(|d| format!("{} at {}", d.device, d.path)),
        interval_ops_per_s: intervals,
        read_histogram: encode_histogram(&hist),
        results: paths,
        warnings,
        stalled_ops: results
            .iter()
            .flat_map(|r| &r.sessions)
            .filter(|s| {
                s.in_flight_at_end_s
                    .is_some_and(|t| t >= crate::result::STALL_S)
            })
            .count() as u32,
        targets: target_steps(results),
        device_await_ms: collect(&|r| r.device.as_ref().and_then(|d| d.avg_read_wait_ms)),
        device_queue_depth: collect(&|r| r.device.as_ref().and_then(|d| d.avg_queue_depth)),
        device_reads_in_flight: collect(&|r| outstanding(r).and_then(|o| o.device_reads_in_flight)),
        db_reads_in_flight: collect(&|r| outstanding(r).and_then(|o| o.db_reads_in_flight)),
        limiter: first.limiter.clone(),
        steady: results
            .iter()
            .filter_map(RunResult::steady)
            .reduce(|a, b| a && b),
    })
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn outstanding(r: &RunResult) -> Option<&crate::limits::OutstandingIo> {
    r.limits.as_ref().and_then(|l| l.outstanding.as_ref())
}

/// A warning with its figures masked: the same caveat with other figures (per repeat, per
/// step) is the same warning, said once.
pub fn warning_key(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_number = false;
    for c in text.chars() {
        if c.is_ascii_digit() || (in_number && (c == '.' || c == ',')) {
            if !in_number {
                out.push('#');
            }
            in_number = true;
        } else {
            in_number = false;
            out.push(c);
        }
    }
    out
}

/// A step's warning without its "(repeat 1 of 2) " prefix: across steps, the steps matter
/// more than which of their repeats.
fn strip_repeat(w: &str) -> &str {
    match w.strip_prefix("(repeat ") {
        Some(rest) => rest.split_once(") ").map(|(_, t)| t).unwrap_or(w),
        None => w,
    }
}

/// Each distinct warning (figures aside) once, with the places it applies to, in first-seen
/// order; its text is the first occurrence's, marked when the others' figures differ.
pub fn group_warnings<'a>(
    items: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, String, Vec<String>, bool)> = Vec::new();
    for (place, w) in items {
        let w = strip_repeat(w);
        let key = warning_key(w);
        match out.iter_mut().find(|(k, ..)| *k == key) {
            Some((_, first, places, differs)) => {
                if !places.iter().any(|p| p == place) {
                    places.push(place.to_string());
                }
                *differs |= first != w;
            }
            None => out.push((key, w.to_string(), vec![place.to_string()], false)),
        }
    }
    out.into_iter()
        .map(|(_, w, places, differs)| {
            let text = if differs {
                format!(
                    "{w} [figures of {}; each run's own in its report.txt]",
                    places[0]
                )
            } else {
                w
            };
            (text, places)
        })
        .collect()
}

/// `ramp.json`: a ramp's steps, self-contained (compare and regress need nothing else).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RampResult {
    pub format: u32,
    /// Always "ramp"; tells it apart from a run's result.json.
    pub kind: String,
    pub label: Option<String>,
    pub status: RunStatus,
    pub started: DateTime<Utc>,
    pub finished: DateTime<Utc>,
    /// The ramp's base config (each step overrides readers, writers, update_pct).
    pub config: Config,
    /// The first step's environment.
    pub environment: Option<Environment>,
    pub steps: Vec<StepSummary>,
    pub warnings: Vec<String>,
    /// `dbio capacity`: the answer its search found, the bracketing steps and every window
    /// in the order it ran; absent for a ramp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<crate::capacity::CapacityResult>,
}

/// What compare and regress read: a run or a ramp, as steps.
#[derive(Debug, Clone)]
pub struct StepSet {
    pub label: String,
    pub path: PathBuf,
    pub steps: Vec<StepSummary>,
    /// The run's or ramp's status: a failed or interrupted one never passes regress.
    pub status: RunStatus,
    /// What it measured (work_unit, server version, ...), for the comparability check.
    pub shape: Shape,
}

/// A result.json or ramp.json path as given, or the one a folder holds (its ramp.json when it
/// has one, else its result.json).
pub fn document_path(path: &Path) -> PathBuf {
    if path.is_dir() {
        if path.join("ramp.json").is_file() {
            path.join("ramp.json")
        } else {
            path.join("result.json")
        }
    } else {
        path.to_path_buf()
    }
}

/// Reads a run's result.json or a ramp's ramp.json (a folder holding either works too).
pub fn read_step_set(path: &Path) -> Result<StepSet, CoreError> {
    let file = document_path(path);
    let bad = |message: String| CoreError::Result {
        path: file.clone(),
        message,
    };
    let text = crate::input::read_bounded(&file, crate::input::DOCUMENT_MAX_BYTES)
        .map_err(|e| bad(e.to_string()))?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| bad(format!("not a dbio result (invalid JSON: {e})")))?;
    if value.get("kind").and_then(|k| k.as_str()) == Some("ramp") {
        match value.get("format").and_then(|f| f.as_u64()) {
            Some(f) if f > RESULT_FORMAT as u64 => {
                return Err(bad(format!(
                    "ramp format {f} is newer than this dbio understands ({RESULT_FORMAT}); use a newer dbio"
                )));
            }
            Some(0) => return Err(bad("ramp format 0 is not a dbio format (1 and up)".into())),
            None => return Err(bad("not a dbio ramp (no \"format\" field)".into())),
            _ => {}
        }
        let mut ramp: RampResult = serde_json::from_value(value)
            .map_err(|e| bad(format!("not a valid dbio ramp: {e}")))?;
        if ramp.steps.is_empty() {
            return Err(bad("the ramp holds no steps".into()));
        }
        for step in &mut ramp.steps {
            step.check_sane()
                .map_err(|m| bad(format!("step {}: {m}", step.step)))?;
            step.warnings = step.warnings.iter().map(|w| printable(w)).collect();
            step.top_wait = step.top_wait.as_deref().map(printable);
            step.step = printable(&step.step);
        }
        // The device is in the steps' own results; a ramp folder that was moved without them
        // simply leaves it unknown.
        let device = ramp
            .steps
            .first()
            .and_then(|s| s.results.first())
            .and_then(|r| {
                let dir = file.parent().unwrap_or(Path::new("."));
                RunResult::read_json(&dir.join(r)).ok()
            })
            .and_then(|r| r.device.map(|d| d.device));
        return Ok(StepSet {
            label: ramp
                .label
                .as_deref()
                .map(printable)
                .unwrap_or_else(|| file.display().to_string()),
            shape: Shape::of(&ramp.config, ramp.environment.as_ref(), device.as_deref()),
            status: ramp.status,
            path: file,
            steps: ramp.steps,
        });
    }
    let run = RunResult::read_json(&file)?;
    let label = run
        .label
        .clone()
        .unwrap_or_else(|| file.display().to_string());
    let step = summarize(std::slice::from_ref(&run), vec![file.display().to_string()])
        .ok_or_else(|| bad("the result holds no operations to summarise".into()))?;
    Ok(StepSet {
        label,
        shape: Shape::of(
            &run.config,
            Some(&run.environment),
            run.device.as_ref().map(|d| d.device.as_str()),
        ),
        status: run.status,
        path: file,
        steps: vec![step],
    })
}

impl StepSummary {
    /// Refuses figures no real run produces: negative or non-finite rates, no elapsed time,
    /// an undecodable histogram (which would otherwise show as "no reads").
    fn check_sane(&self) -> Result<(), String> {
        if !(self.elapsed_s.is_finite() && self.elapsed_s > 0.0) {
            return Err(format!(
                "elapsed_s = {} (a window must be above 0 s)",
                self.elapsed_s
            ));
        }
        let stats = [
            ("client_ops_per_s", Some(&self.client_ops_per_s)),
            ("client_read_p50_us", self.client_read_p50_us.as_ref()),
            ("client_read_p99_us", self.client_read_p99_us.as_ref()),
            ("db_read_iops", self.db_read_iops.as_ref()),
            ("db_write_iops", self.db_write_iops.as_ref()),
            (
                "db_avg_read_latency_us",
                self.db_avg_read_latency_us.as_ref(),
            ),
            ("device_read_iops", self.device_read_iops.as_ref()),
        ];
        for (name, stat) in stats {
            if let Some(bad) = stat
                .into_iter()
                .flat_map(|s| s.values.iter().chain([&s.mean]))
                .find(|v| !(v.is_finite() && **v >= 0.0))
            {
                return Err(format!(
                    "{name} holds {bad}; rates and latencies are never negative"
                ));
            }
        }
        if let Some(bad) = self
            .interval_ops_per_s
            .iter()
            .find(|v| !(v.is_finite() && **v >= 0.0))
        {
            return Err(format!("interval_ops_per_s holds {bad}"));
        }
        if !self.read_histogram.is_empty() {
            decode_histogram(&self.read_histogram)
                .map_err(|e| format!("read_histogram cannot be decoded ({e})"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_of_repeats() {
        let s = Stat::of(vec![10.0, 12.0, 14.0]).unwrap();
        assert_eq!(s.mean, 12.0);
        assert_eq!(s.sd, 2.0);
        assert!((s.cv - 2.0 / 12.0).abs() < 1e-12);
        let one = Stat::of(vec![5.0]).unwrap();
        assert_eq!((one.sd, one.cv), (0.0, 0.0));
        assert!(Stat::of(vec![]).is_none());
    }

    #[test]
    fn step_labels() {
        let k = StepKey::closed(4, 1, 0);
        assert_eq!(k.to_string(), "r4-w1");
        let k = StepKey {
            update_pct: 20,
            ..k
        };
        assert_eq!(k.to_string(), "r4-w1-u20");
        let k = StepKey {
            rate_per_s: Some(500),
            ..k
        };
        assert_eq!(k.to_string(), "r4-w1-u20-rate500");
    }
}
