//! `dbio merge`: several driver processes' results of one run (shards) combined into one
//! result, as if one process had driven every session.
//!
//! What is added exactly: operation, error and row counts, the HDR latency histograms
//! (decoded and added bucket by bucket, `Histogram::add`, so the merged percentiles are those
//! of the whole distribution, never an average of the shards' percentiles: fio's "All clients"
//! does the same with its log-linear buckets), the rates (each shard's count over its own
//! window; the windows agree within the skew), dbio's CPU, and the per-interval counts.
//! What is taken from one shard: the collector's figures (database, waits, device), which
//! measure the whole server whichever shard took them; several shards that each ran a collector
//! measured the same server over nearly the same window, so the first is kept and the choice
//! named. What cannot be had: a merged interval's p50/p99 (a result keeps each interval's
//! percentiles, not its histogram), written null with a warning.
//!
//! Shards of one run carry `shard: {run_id, index, count}` in their result.json, or at least
//! share `run.run_id` (`--run-id`, under which they hold one data set); results of
//! different runs (run ids), of different shapes ([`crate::shape`]) or workloads, or whose
//! windows do not overlap within the skew are refused, naming what differs. Results with no
//! run id at all may be merged too: nothing proves they are one run, and the merged result
//! says so in a warning.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::driver::{CpuUsage, IntervalRow, RunStatus};
use crate::result::{OpMetrics, RunResult};
use crate::shape::Shape;
use crate::stats::dbstats::{HostMetrics, SHARD_WAIT_NOTE, WaitProfile, WaitRow};
use crate::stats::{LatencySummary, decode_histogram, encode_histogram, new_histogram};
use crate::workload::SessionKind;

/// What a shard's result.json says of the run it belongs to. The run command writes it for
/// `--shard I/N`; every shard of one run carries the same `run_id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardInfo {
    /// Identifies the run across its shards (every shard is given the same one).
    pub run_id: String,
    /// 0-based shard number, below `count`.
    pub index: u32,
    /// Shards in the run.
    pub count: u32,
    /// The wall-clock instant the shards were told to start at, when they were.
    #[serde(default)]
    pub start_at: Option<DateTime<Utc>>,
}

/// How a merged result was made: its shards and how far apart their windows were.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergeInfo {
    /// The shards' common run id; null when they carried none.
    pub run_id: Option<String>,
    /// Largest distance allowed between two shards' window starts (or ends), s.
    pub max_skew_s: f64,
    /// Latest window start minus earliest, s.
    pub start_spread_s: f64,
    /// Latest window end minus earliest, s.
    pub end_spread_s: f64,
    /// Seconds during which every shard's window was open.
    pub overlap_s: f64,
    /// Position in `shards` of the shard whose collector figures (db, waits, device) were
    /// kept; null when no shard had them.
    pub collector_from: Option<usize>,
    pub shards: Vec<MergedShard>,
}

/// One input of a merge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MergedShard {
    /// The result.json it was read from.
    pub source: String,
    /// `shard.index` when it carried one.
    pub index: Option<u32>,
    pub client_host: String,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub measured_s: f64,
    pub ops: u64,
    /// Seconds after the earliest shard's window start that this one started.
    pub late_s: f64,
    /// Started later than [`late_threshold_s`] after the earliest: it missed the start.
    pub late: bool,
}

#[derive(Debug, Error)]
pub enum MergeError {
    #[error("merge needs at least two results; got {0}")]
    TooFew(usize),
    #[error("{} is given twice (the same file, a link or a hard link): each shard counts once", .0.display())]
    Duplicate(PathBuf),
    #[error(
        "{} and {} are one run's result given twice (the same run id, shard, client host and window start: a copy, or one changed): each shard counts once",
        a.display(),
        b.display()
    )]
    SameRun { a: PathBuf, b: PathBuf },
    #[error("result {}: {message}", path.display())]
    Unreadable { path: PathBuf, message: String },
    #[error("{} and {} are results of different runs: {detail}", a.display(), b.display())]
    DifferentRuns {
        a: PathBuf,
        b: PathBuf,
        detail: String,
    },
    #[error(
        "{} and {} measure different things ({differences}); only shards of one run are merged",
        a.display(),
        b.display()
    )]
    DifferentShape {
        a: PathBuf,
        b: PathBuf,
        differences: String,
    },
    #[error(
        "the windows do not overlap within {max_skew_s:.3} s: {windows}; start the shards together (run --start-at) or allow more with --max-skew"
    )]
    Windows { max_skew_s: f64, windows: String },
    #[error("{}: its histogram cannot be merged: {message}", path.display())]
    Histogram { path: PathBuf, message: String },
}

impl MergeError {
    /// Every merge refusal is about its inputs.
    pub fn kind(&self) -> crate::ErrorKind {
        crate::ErrorKind::Usage
    }
}

/// A shard that starts more than this after the earliest is flagged late: 2% of the window,
/// and at least 50 ms (below that, process start-up noise on one host).
pub fn late_threshold_s(window_s: f64) -> f64 {
    (0.02 * window_s).max(0.05)
}

/// The skew allowed when the user gives none: half the shortest shard's window, so every
/// accepted merge has shards that all ran together for at least half of it.
pub fn default_max_skew_s(results: &[RunResult]) -> f64 {
    results
        .iter()
        .map(|r| r.window.measured_s)
        .fold(f64::INFINITY, f64::min)
        / 2.0
}

/// Reads and merges the results at `paths`; `max_skew_s` None takes [`default_max_skew_s`].
pub fn merge_files(paths: &[PathBuf], max_skew_s: Option<f64>) -> Result<RunResult, MergeError> {
    if paths.len() < 2 {
        return Err(MergeError::TooFew(paths.len()));
    }
    // One document once: not the same file under two names (a link, a hard link)...
    crate::input::refuse_same_file_twice(paths).map_err(|e| match e {
        crate::CoreError::Result { path, .. } => MergeError::Duplicate(path),
        other => MergeError::Unreadable {
            path: paths[0].clone(),
            message: other.to_string(),
        },
    })?;
    let results = paths
        .iter()
        .map(|p| {
            RunResult::read_json(p).map_err(|e| MergeError::Unreadable {
                path: p.clone(),
                message: match e {
                    crate::CoreError::Result { message, .. } => message,
                    other => other.to_string(),
                },
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    refuse_same_run_twice(paths, &results)?;
    merge(paths, results, max_skew_s)
}

/// ...nor one run's result twice: a copy (the same content), or the same run's document
/// under another name or changed (the same run id, shard, client host and window start).
fn refuse_same_run_twice(paths: &[PathBuf], results: &[RunResult]) -> Result<(), MergeError> {
    let key = |r: &RunResult| {
        (
            run_identity(r).map(str::to_string),
            r.shard.as_ref().map(|s| s.index),
            r.environment.client_host.clone(),
            r.window.start,
        )
    };
    for (i, (p, r)) in paths.iter().zip(results).enumerate() {
        if let Some(j) = results[..i].iter().position(|o| key(o) == key(r)) {
            return Err(MergeError::SameRun {
                a: paths[j].clone(),
                b: p.clone(),
            });
        }
    }
    Ok(())
}

/// Merges `results` (read from `paths`, same order).
pub fn merge(
    paths: &[PathBuf],
    results: Vec<RunResult>,
    max_skew_s: Option<f64>,
) -> Result<RunResult, MergeError> {
    if results.len() < 2 {
        return Err(MergeError::TooFew(results.len()));
    }
    check_one_run(paths, &results)?;
    let max_skew_s = max_skew_s.unwrap_or_else(|| default_max_skew_s(&results));
    let spans = check_windows(paths, &results, max_skew_s)?;

    let first = &results[0];
    let mut warnings = Vec::new();
    let run_id = run_identity(first).map(str::to_string);
    match &first.shard {
        Some(s) if (s.count as usize) != results.len() => warnings.push(format!(
            "{} of the run's {} shards were merged: the figures cover those shards' sessions only",
            results.len(),
            s.count
        )),
        Some(_) => {}
        None if run_id.is_none() => warnings.push(
            "the merged results carry no run id (neither --shard nor --run-id): nothing proves they are one run beyond their shapes and overlapping windows".into(),
        ),
        None => {}
    }

    // Exact sums of the client figures.
    let read = merge_ops(paths, &results, |r| &r.client.read)?;
    let update = merge_ops(paths, &results, |r| &r.client.update)?;
    let ops = read.count + update.count;
    let errors = read.errors + update.errors;
    let cpu = results
        .iter()
        .map(|r| r.client.cpu.clone())
        .collect::<Option<Vec<CpuUsage>>>()
        .map(|c| CpuUsage {
            user_s: c.iter().map(|c| c.user_s).sum(),
            system_s: c.iter().map(|c| c.system_s).sum(),
        });
    if cpu.is_none() && results.iter().any(|r| r.client.cpu.is_some()) {
        warnings.push(
            "client.cpu is null: not every shard measured its CPU, and a sum over some would understate it".into(),
        );
    }
    let cpu_ms = cpu
        .as_ref()
        .and_then(|c| (ops > 0).then(|| (c.user_s + c.system_s) * 1000.0 / (ops as f64 / 1000.0)));

    // Sessions: all of them. Shards that each numbered their sessions from 1 (plain runs)
    // are renumbered in shard order, as one process would have named them.
    let mut sessions = Vec::new();
    let mut names = BTreeSet::new();
    let clash = results
        .iter()
        .flat_map(|r| r.sessions.iter().map(|s| s.spec.name.clone()))
        .any(|n| !names.insert(n));
    let (mut nr, mut nw) = (0u32, 0u32);
    for r in &results {
        for s in &r.sessions {
            let mut s = s.clone();
            if clash {
                s.spec.index = nr + nw;
                s.spec.name = match s.spec.kind {
                    SessionKind::Reader => {
                        nr += 1;
                        format!("dbio-reader-{nr}")
                    }
                    SessionKind::Writer => {
                        nw += 1;
                        format!("dbio-writer-{nw}")
                    }
                };
            }
            sessions.push(s);
        }
    }
    if clash {
        warnings.push(
            "the shards numbered their sessions each from 1: they are renumbered in shard order (the first shard's first)".into(),
        );
    }
    let readers = sessions
        .iter()
        .filter(|s| s.spec.kind == SessionKind::Reader)
        .count() as u32;
    let writers = sessions.len() as u32 - readers;

    // The server's figures: from the first shard that has them (every shard may sample its
    // own sessions' waits; only the collecting one snapshots the server).
    let collects = |r: &RunResult| r.db.is_some() || r.device.is_some();
    let collector_from = results.iter().position(collects);
    let collectors = results.iter().filter(|r| collects(r)).count();
    if let Some(k) = collector_from
        && collectors > 1
    {
        warnings.push(format!(
            "{collectors} shards ran a collector; the database figures are {}'s (each measured the whole server over nearly the same window; they are not added)",
            paths[k].display()
        ));
    }
    let from = collector_from.map(|k| &results[k]);

    // Per-interval rows summed by position; their percentiles cannot be merged.
    let timeseries = merge_timeseries(&results);
    if !timeseries.is_empty() {
        warnings.push(
            "timeseries p50_us/p99_us are null in a merged result: a shard keeps each interval's percentiles, not its histogram; the window's percentiles (client.read.latency_us) are exact".into(),
        );
    }
    if results.iter().any(|r| r.calibration.is_some()) {
        warnings.push(
            "calibration is null: a shard compared the raw device at its own load, not the merged one".into(),
        );
    }

    // Late starters, and each shard's own warnings, named.
    let earliest = spans
        .iter()
        .map(|s| s.start)
        .min()
        .unwrap_or(first.window.start);
    let shortest = results
        .iter()
        .map(|r| r.window.measured_s)
        .fold(f64::INFINITY, f64::min);
    let mut shards = Vec::new();
    for (k, (r, p)) in results.iter().zip(paths).enumerate() {
        let late_s = seconds(r.window.start - earliest);
        let late = late_s > late_threshold_s(shortest);
        if late {
            warnings.push(format!(
                "shard {} ({}) started late: {late_s:.3} s after the first, so its sessions missed the first {late_s:.3} s of the window",
                k + 1,
                p.display()
            ));
        }
        for w in &r.warnings {
            warnings.push(format!("{}: {w}", p.display()));
        }
        shards.push(MergedShard {
            source: p.display().to_string(),
            index: r.shard.as_ref().map(|s| s.index),
            client_host: r.environment.client_host.clone(),
            start: r.window.start,
            end: r.window.end,
            measured_s: r.window.measured_s,
            ops: r.client.ops,
            late_s,
            late,
        });
    }

    let start = spans
        .iter()
        .map(|s| s.start)
        .min()
        .unwrap_or(first.window.start);
    let end = spans
        .iter()
        .map(|s| s.end)
        .max()
        .unwrap_or(first.window.end);
    let latest_start = spans.iter().map(|s| s.start).max().unwrap_or(start);
    let earliest_end = spans.iter().map(|s| s.end).min().unwrap_or(end);
    let info = MergeInfo {
        run_id,
        max_skew_s,
        start_spread_s: seconds(latest_start - start),
        end_spread_s: seconds(end - earliest_end),
        overlap_s: seconds(earliest_end - latest_start).max(0.0),
        collector_from,
        shards,
    };

    let mut config = first.config.clone();
    config.run.readers = readers;
    config.run.writers = writers;
    let mut environment = first.environment.clone();
    let hosts: BTreeSet<&str> = results
        .iter()
        .map(|r| r.environment.client_host.as_str())
        .collect();
    environment.client_host = hosts.into_iter().collect::<Vec<_>>().join(", ");
    let mut used: BTreeSet<String> = BTreeSet::new();
    for r in &results {
        used.extend(r.environment.data_set.schemas_used.iter().cloned());
    }
    environment.data_set.schemas_used = used.into_iter().collect();
    environment.session_tls = merge_tls(&results);
    if let Some(f) = from {
        // The collector's shard read the server's settings and data set at the window.
        environment.settings = f.environment.settings.clone();
    }

    let status = results
        .iter()
        .map(|r| r.status)
        .max_by_key(|s| match s {
            RunStatus::Ok => 0,
            RunStatus::Interrupted => 1,
            RunStatus::Failed => 2,
        })
        .unwrap_or(RunStatus::Ok);
    let error_texts: Vec<String> = results
        .iter()
        .zip(paths)
        .filter_map(|(r, p)| r.error.as_ref().map(|e| format!("{}: {e}", p.display())))
        .collect();

    let measured_s =
        results.iter().map(|r| r.window.measured_s).sum::<f64>() / results.len() as f64;
    let mut window = first.window.clone();
    window.start = start;
    window.end = end;
    // The shards' windows agree within the skew; the merged rates are the sums of theirs, and
    // this is the length they share on average.
    window.measured_s = measured_s;
    // The collector's shard's database interval; operations excluded at each shard's end add.
    window.db_window_s = from.and_then(|f| f.window.db_window_s);
    window.ops_past_window = results.iter().map(|r| r.window.ops_past_window).sum();
    window.warmup_s = results
        .iter()
        .map(|r| r.window.warmup_s)
        .fold(0.0, f64::max);

    // The waits and the backends' physical reads: each shard measured its own sessions,
    // and the merged figures are their sums (the server's measured rows and processes from
    // the collecting shard).
    let waits = merge_waits(&results, collector_from, &mut warnings);
    let block_size = first.environment.data_set.block_size;
    let host = merge_hosts(&results, collector_from, block_size, &mut warnings);
    let mut db = from.and_then(|f| f.db.clone());
    if let Some(db) = db.as_mut() {
        // The other shards' samplers committed their own transactions on the server too.
        let others: u64 = results
            .iter()
            .enumerate()
            .filter(|(k, _)| Some(*k) != collector_from)
            .filter_map(|(_, r)| r.waits.as_ref().map(|w| w.transactions))
            .sum();
        if others > 0 {
            db.exclude_own_transactions(others);
        }
        if let Some(t) = db.db_time_s {
            warnings.extend(crate::result::db_time_warning(
                t,
                sessions.len(),
                db.seconds,
            ));
        }
        warnings.extend(crate::stats::dbstats::host_cache_warnings(
            db,
            host.as_ref(),
        ));
    }

    let client = crate::result::ClientMetrics {
        ops,
        errors,
        ops_per_s: read.ops_per_s + update.ops_per_s,
        cpu,
        cpu_ms_per_1000_ops: cpu_ms,
        max_rss_kib: results.iter().filter_map(|r| r.client.max_rss_kib).max(),
        // The shards' engine when they all ran the same one.
        session_engine: results
            .first()
            .and_then(|r| r.client.session_engine.clone())
            .filter(|e| {
                results
                    .iter()
                    .all(|r| r.client.session_engine.as_ref() == Some(e))
            }),
        session_engine_why: None,
        read,
        update,
    };
    // The collecting shard's limiter figures; the client's CPU of the busiest shard's host
    // (each shard's client is its own), the outstanding I/O of all the shards' sessions.
    let busiest = results
        .iter()
        .filter_map(|r| r.limits.as_ref().and_then(|l| l.client_cpu.clone()))
        .max_by(|a, b| a.busy_pct.total_cmp(&b.busy_pct));
    let device = from.and_then(|f| f.device.clone());
    let limits = crate::limits::complete(
        from.and_then(|f| f.limits.clone()),
        busiest,
        sessions.len() as u32,
        device.as_ref(),
        db.as_ref(),
    );
    let mut merged = RunResult {
        format: crate::result::RESULT_FORMAT,
        status,
        error: (!error_texts.is_empty()).then(|| error_texts.join("; ")),
        label: first.label.clone(),
        engine: first.engine,
        config,
        environment,
        window,
        client,
        sessions,
        sessions_lost: results.iter().map(|r| r.sessions_lost).sum(),
        timeseries,
        db,
        waits,
        device,
        host,
        missing_rights: from.map(|f| f.missing_rights.clone()).unwrap_or_default(),
        limits: Some(limits),
        limiter: None,
        calibration: None,
        warnings,
        shard: None,
        merge: Some(info),
        targets: Vec::new(),
        // Shards are refused with run.steady, run.precondition and run.rate.
        steady: None,
        precondition: None,
        open_loop: None,
    };
    crate::limits::judge_result(&mut merged);
    Ok(merged)
}

fn seconds(d: chrono::TimeDelta) -> f64 {
    d.num_microseconds()
        .map(|us| us as f64 / 1e6)
        .unwrap_or(d.num_seconds() as f64)
}

/// Refuses results of different runs: run ids, shard numbering, targets, shapes, workloads.
fn check_one_run(paths: &[PathBuf], results: &[RunResult]) -> Result<(), MergeError> {
    let (p0, r0) = (&paths[0], &results[0]);
    let different = |p: &Path, detail: String| MergeError::DifferentRuns {
        a: p0.clone(),
        b: p.to_path_buf(),
        detail,
    };
    // The device is measured by the collecting shard only: not a shape fact between shards.
    let shape0 = Shape::of(&r0.config, Some(&r0.environment), None);
    let mut indices = BTreeSet::new();
    for (p, r) in paths.iter().zip(results) {
        if run_identity(r) != run_identity(r0) {
            let name = |id: Option<&str>| match id {
                Some(id) => format!("run id {id:?}"),
                None => "no run id".to_string(),
            };
            return Err(different(
                p,
                format!("{} vs {}", name(run_identity(r0)), name(run_identity(r))),
            ));
        }
        match (&r0.shard, &r.shard) {
            (Some(a), Some(b)) => {
                if a.count != b.count {
                    return Err(different(
                        p,
                        format!("shard count {} vs {}", a.count, b.count),
                    ));
                }
                if b.index >= b.count || !indices.insert(b.index) {
                    return Err(different(
                        p,
                        format!(
                            "shard {}/{} is given twice or is out of range",
                            b.index, b.count
                        ),
                    ));
                }
            }
            (None, None) => {}
            (a, b) => {
                let name = |s: &Option<ShardInfo>| match s {
                    Some(s) => format!("shard {}/{} of run {:?}", s.index, s.count, s.run_id),
                    None => "a plain run (no shard)".to_string(),
                };
                return Err(different(p, format!("{} vs {}", name(a), name(b))));
            }
        }
        if r.engine != r0.engine {
            return Err(different(
                p,
                format!("database {:?} vs {:?}", r0.engine, r.engine),
            ));
        }
        if r.environment.target != r0.environment.target {
            return Err(different(
                p,
                format!(
                    "target {} vs {}",
                    r0.environment.target, r.environment.target
                ),
            ));
        }
        let differences = shape0.differences(&Shape::of(&r.config, Some(&r.environment), None));
        let mut listed: Vec<String> = differences.iter().map(|d| d.to_string()).collect();
        listed.extend(workload_differences(r0, r));
        if !listed.is_empty() {
            return Err(MergeError::DifferentShape {
                a: p0.clone(),
                b: p.clone(),
                differences: listed.join(", "),
            });
        }
    }
    Ok(())
}

/// The id that names a result's run: its shard's, else the `run.run_id` it ran under
/// (`--run-id`, which the shards of one run share to hold one data set); None for a run that
/// was given none.
pub fn run_identity(r: &RunResult) -> Option<&str> {
    r.shard
        .as_ref()
        .map(|s| s.run_id.as_str())
        .or(r.config.run.run_id.as_deref())
}

/// The waits of the merged run: each shard sampled its own sessions, so the sampled rows and
/// the DB time (samples x each shard's own period) add; the database's measured rows (its
/// counters cover every shard's sessions) and the server's processes are the collecting
/// shard's. Null, with the reason, when a shard has no waits.
fn merge_waits(
    results: &[RunResult],
    from: Option<usize>,
    warnings: &mut Vec<String>,
) -> Option<WaitProfile> {
    let Some(profiles) = results
        .iter()
        .map(|r| r.waits.as_ref())
        .collect::<Option<Vec<&WaitProfile>>>()
    else {
        if results.iter().any(|r| r.waits.is_some()) {
            warnings.push(
                "waits are null: not every shard sampled its own sessions (results of an older dbio, whose other \
                 shards had no sampler, or a backend without one), and one shard's samples beside the database's \
                 counters of every shard's sessions would overstate the waits' share of DB time"
                    .into(),
            );
        }
        return None;
    };
    let base = profiles[from.unwrap_or(0)];
    let mut fg: Vec<WaitRow> = base
        .foreground
        .iter()
        .filter(|r| r.measured)
        .map(|r| WaitRow {
            samples: 0,
            note: r
                .note
                .as_deref()
                .map(strip_shard_note)
                .filter(|n| !n.is_empty())
                .map(str::to_string),
            ..r.clone()
        })
        .collect();
    for p in &profiles {
        for row in &p.foreground {
            match fg.iter_mut().find(|r| r.event == row.event) {
                Some(r) => {
                    r.samples += row.samples;
                    if !r.measured {
                        r.time_s += row.time_s;
                    }
                }
                None if !row.measured => fg.push(WaitRow {
                    pct_db_time: None,
                    ..row.clone()
                }),
                None => {}
            }
        }
    }
    let db_time_s: f64 = profiles.iter().map(|p| p.db_time_s).sum();
    for r in fg.iter_mut() {
        r.pct_db_time = (db_time_s > 0.0).then(|| 100.0 * r.time_s / db_time_s);
    }
    fg.sort_by(|a, b| b.time_s.total_cmp(&a.time_s));
    let samples: u64 = profiles.iter().map(|p| p.samples).sum();
    let mut background = base.background.clone();
    for r in background.iter_mut() {
        r.pct_db_time = (db_time_s > 0.0).then(|| 100.0 * r.time_s / db_time_s);
    }
    Some(WaitProfile {
        period_ms: base.period_ms,
        achieved_period_ms: profiles.iter().map(|p| p.achieved_period_ms).sum::<f64>()
            / profiles.len() as f64,
        samples,
        transactions: profiles.iter().map(|p| p.transactions).sum(),
        db_time_s,
        db_time_source: format!(
            "sampled: each shard's own sessions (by {}) x its own period, summed over {} shards",
            if base.sessions_by.is_empty() {
                "backend PID"
            } else {
                base.sessions_by.as_str()
            },
            profiles.len()
        ),
        foreground: fg,
        background,
        sessions_by: base.sessions_by.clone(),
        // Each shard's sampler saw the other shards' sessions as others: not merged.
        other_sessions: Vec::new(),
        other_sessions_pct: None,
        visibility_note: profiles.iter().find_map(|p| p.visibility_note.clone()),
    })
}

/// A measured wait row's note without what it says in a shard's own result.
fn strip_shard_note(note: &str) -> &str {
    match note.find(SHARD_WAIT_NOTE) {
        Some(i) => note[..i].trim_end_matches("; ").trim_end(),
        None => note,
    }
}

/// The backends' physical reads of the merged run: each shard's own sessions' bytes (from
/// storage and through the kernel) add; the io workers, the host's memory and CPU are the
/// collecting shard's. The session figures are null, with a note, unless every shard read
/// its backends.
fn merge_hosts(
    results: &[RunResult],
    from: Option<usize>,
    block_size: u64,
    warnings: &mut Vec<String>,
) -> Option<HostMetrics> {
    let base = from
        .and_then(|k| results[k].host.as_ref())
        .or_else(|| results.iter().find_map(|r| r.host.as_ref()))?;
    let mut h = base.clone();
    let per_shard: Option<Vec<(u64, u64, u32)>> = results
        .iter()
        .map(|r| {
            let h = r.host.as_ref()?;
            Some((
                h.session_read_bytes?,
                h.session_kernel_read_bytes?,
                h.backends_read,
            ))
        })
        .collect();
    h.notes
        .retain(|n| !n.starts_with("this shard's own sessions only"));
    match per_shard {
        Some(parts) => {
            h.session_read_bytes = Some(parts.iter().map(|p| p.0).sum());
            h.session_kernel_read_bytes = Some(parts.iter().map(|p| p.1).sum());
            // Each shard's own backends; the collecting shard's count includes the io workers.
            h.backends_read = results
                .iter()
                .filter_map(|r| r.host.as_ref().map(|h| h.backends_read))
                .sum();
            h.notes.push(format!(
                "dbio's backends: the sum of {} shards' own sessions",
                results.len()
            ));
        }
        None => {
            h.session_read_bytes = None;
            h.session_kernel_read_bytes = None;
            h.physical_blocks_per_s = None;
            h.physical_read_ratio = None;
            let note = "the backends' physical reads are null: not every shard read its own sessions' /proc/<pid>/io \
                        (see each shard's missing rights)";
            h.notes.push(note.to_string());
            warnings.push(note.to_string());
            return Some(h);
        }
    }
    h.derive_ratio(block_size);
    Some(h)
}

/// What the sessions did, beyond the shape: the mix, think time, hot spot, window kind.
fn workload_differences(a: &RunResult, b: &RunResult) -> Vec<String> {
    let (x, y) = (&a.config.run, &b.config.run);
    let mut o = Vec::new();
    if x.update_pct != y.update_pct {
        o.push(format!("update_pct {} vs {}", x.update_pct, y.update_pct));
    }
    for (name, va, vb) in [
        ("think_time", json(&x.think_time), json(&y.think_time)),
        ("hot_spot", json(&x.hot_spot), json(&y.hot_spot)),
        ("redo_stress", json(&x.redo_stress), json(&y.redo_stress)),
        ("run.engine", json(&x.engine), json(&y.engine)),
    ] {
        if va != vb {
            o.push(format!("{name} {va} vs {vb}"));
        }
    }
    if a.window.mode != b.window.mode {
        o.push(format!("window {} vs {}", a.window.mode, b.window.mode));
    }
    o
}

/// Compact JSON of a config section, to compare and name it.
fn json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

#[derive(Debug, Clone, Copy)]
struct Span {
    start: DateTime<Utc>,
    end: DateTime<Utc>,
}

/// Every start within `max_skew_s` of every other, every end too, and a common open time.
fn check_windows(
    paths: &[PathBuf],
    results: &[RunResult],
    max_skew_s: f64,
) -> Result<Vec<Span>, MergeError> {
    let spans: Vec<Span> = results
        .iter()
        .map(|r| Span {
            start: r.window.start,
            end: r.window.end,
        })
        .collect();
    let (Some(s0), Some(s1), Some(e0), Some(e1)) = (
        spans.iter().map(|s| s.start).min(),
        spans.iter().map(|s| s.start).max(),
        spans.iter().map(|s| s.end).min(),
        spans.iter().map(|s| s.end).max(),
    ) else {
        return Err(MergeError::TooFew(0));
    };
    let bad = seconds(s1 - s0) > max_skew_s || seconds(e1 - e0) > max_skew_s || s1 >= e0;
    if bad {
        let windows = paths
            .iter()
            .zip(&spans)
            .map(|(p, s)| {
                format!(
                    "{} {} .. {}",
                    p.display(),
                    s.start.format("%H:%M:%S%.3f"),
                    s.end.format("%H:%M:%S%.3f")
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        return Err(MergeError::Windows {
            max_skew_s,
            windows,
        });
    }
    Ok(spans)
}

/// Sums one operation kind: counts, errors, rows, rates; the histograms added exactly.
fn merge_ops(
    paths: &[PathBuf],
    results: &[RunResult],
    pick: impl Fn(&RunResult) -> &OpMetrics,
) -> Result<OpMetrics, MergeError> {
    let mut hist: Histogram<u64> = new_histogram();
    let mut o = OpMetrics {
        count: 0,
        errors: 0,
        ops_per_s: 0.0,
        rows: 0,
        latency_us: None,
        histogram: String::new(),
    };
    for (p, r) in paths.iter().zip(results) {
        let m = pick(r);
        o.count += m.count;
        o.errors += m.errors;
        o.rows += m.rows;
        o.ops_per_s += m.ops_per_s;
        if m.histogram.is_empty() {
            continue;
        }
        let h = decode_histogram(&m.histogram).map_err(|e| MergeError::Histogram {
            path: p.clone(),
            message: e.to_string(),
        })?;
        hist.add(&h).map_err(|e| MergeError::Histogram {
            path: p.clone(),
            message: format!("{e:?}"),
        })?;
    }
    o.latency_us = LatencySummary::from_histogram(&hist);
    o.histogram = encode_histogram(&hist);
    Ok(o)
}

/// Interval i of the merged run sums interval i of each shard (their windows start within the
/// skew of each other). The rows' percentiles are null (see the module docs).
fn merge_timeseries(results: &[RunResult]) -> Vec<IntervalRow> {
    let n = results
        .iter()
        .map(|r| r.timeseries.len())
        .max()
        .unwrap_or(0);
    (0..n)
        .map(|i| {
            let rows: Vec<&IntervalRow> =
                results.iter().filter_map(|r| r.timeseries.get(i)).collect();
            let seconds = rows.iter().map(|r| r.seconds).sum::<f64>() / rows.len().max(1) as f64;
            IntervalRow {
                t_s: rows.iter().map(|r| r.t_s).fold(0.0, f64::max),
                seconds,
                reads: rows.iter().map(|r| r.reads).sum(),
                updates: rows.iter().map(|r| r.updates).sum(),
                errors: rows.iter().map(|r| r.errors).sum(),
                ops_per_s: rows.iter().map(|r| r.ops_per_s).sum(),
                p50_us: None,
                p99_us: None,
                mean_us: None,
                lag_mean_us: None,
                lag_max_us: None,
            }
        })
        .collect()
}

fn merge_tls(results: &[RunResult]) -> Option<crate::result::SessionTls> {
    let all: Vec<&crate::result::SessionTls> = results
        .iter()
        .map(|r| r.environment.session_tls.as_ref())
        .collect::<Option<Vec<_>>>()?;
    let first = all.first()?;
    let same = |f: &dyn Fn(&crate::result::SessionTls) -> &Option<String>| {
        all.iter().all(|t| f(t) == f(first))
    };
    Some(crate::result::SessionTls {
        used: all.iter().all(|t| t.used),
        sessions: all.iter().map(|t| t.sessions).sum(),
        sessions_with_tls: all.iter().map(|t| t.sessions_with_tls).sum(),
        protocol: if same(&|t| &t.protocol) {
            first.protocol.clone()
        } else {
            None
        },
        cipher: if same(&|t| &t.cipher) {
            first.cipher.clone()
        } else {
            None
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::{DriveOutcome, WindowSpec};
    use crate::result::{DataSetInfo, Environment, RunContext};

    /// A result whose reads took `latencies_us`, over a window of 10 s starting `offset_ms`
    /// after a fixed instant.
    fn shard(latencies_us: &[u64], offset_ms: i64) -> RunResult {
        let mut read = new_histogram();
        for &v in latencies_us {
            read.record(v).unwrap();
        }
        let t0 = DateTime::parse_from_rfc3339("2026-12-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
            + chrono::TimeDelta::milliseconds(offset_ms);
        let ctx = RunContext {
            other_shards: false,
            config: crate::Config::default(),
            environment: Environment {
                dbio_version: "0".into(),
                client_host: "h".into(),
                target: "t".into(),
                pinned_server: None,
                session_tls: None,
                server_version: "17.0".into(),
                server_version_num: 170000,
                settings: Default::default(),
                data_set: DataSetInfo {
                    schemas: 1,
                    scale_blocks: 1000,
                    block_size: 8192,
                    table_bytes: 8192 * 1000,
                    schemas_used: vec!["user1".into()],
                    tables: vec![],
                },
                read_path: None,
            },
            warnings: vec![],
            db: None,
            waits: None,
            device: None,
            calibration: None,
        };
        let mut r = RunResult::build(
            ctx,
            WindowSpec::Time(std::time::Duration::from_secs(10)),
            DriveOutcome {
                status: RunStatus::Ok,
                error: None,
                start: t0,
                end: t0 + chrono::TimeDelta::seconds(10),
                measured_s: 10.0,
                db_window_s: 10.0,
                warmup_s: 0.0,
                sessions: vec![],
                histograms: [read, new_histogram()],
                by_target: vec![],
                timeseries: vec![],
                client_cpu: None,
                sessions_lost: 0,
                steady: None,
                precondition: None,
                open_loop: None,
                session_engine: None,
            },
        );
        // The driver counts sessions' operations; here the histogram is the truth (and a
        // window with operations is not the failed one `build` saw without sessions).
        r.status = RunStatus::Ok;
        r.error = None;
        r.client.read.count = latencies_us.len() as u64;
        r.client.ops = r.client.read.count;
        r.client.read.ops_per_s = r.client.read.count as f64 / 10.0;
        r.client.ops_per_s = r.client.read.ops_per_s;
        r
    }

    fn paths(n: usize) -> Vec<PathBuf> {
        (0..n)
            .map(|k| PathBuf::from(format!("s{k}.json")))
            .collect()
    }

    // The merged p99 of a fast shard and a slow one is the p99 of all their operations, far
    // from the average of the two shards' p99s.
    #[test]
    fn percentiles_come_from_the_added_histograms_not_an_average() {
        let fast: Vec<u64> = vec![100; 990];
        let slow: Vec<u64> = vec![10_000; 10];
        let m = merge(&paths(2), vec![shard(&fast, 0), shard(&slow, 5)], None).unwrap();
        let l = m.client.read.latency_us.unwrap();
        assert_eq!(m.client.read.count, 1000);
        assert_eq!(l.p50, 100);
        // 990 of 1000 at 100 µs: the 99th percentile is still 100 µs.
        assert_eq!(l.p99, 100);
        assert!(l.max >= 10_000 && l.max < 10_100);
        assert!((m.client.read.ops_per_s - 100.0).abs() < 1e-9);
        let info = m.merge.unwrap();
        assert!((info.start_spread_s - 0.005).abs() < 1e-9);
        assert!(!info.shards.iter().any(|s| s.late));
    }

    #[test]
    fn a_late_shard_is_flagged_and_windows_apart_are_refused() {
        let ops: Vec<u64> = vec![200; 100];
        let m = merge(&paths(2), vec![shard(&ops, 0), shard(&ops, 1500)], None).unwrap();
        let info = m.merge.unwrap();
        assert!(info.shards[1].late && !info.shards[0].late);
        assert!((info.overlap_s - 8.5).abs() < 1e-9);
        assert!(
            m.warnings
                .iter()
                .any(|w| w.contains("shard 2 (s1.json) started late"))
        );
        // 6 s apart is beyond half the 10 s window.
        let e = merge(&paths(2), vec![shard(&ops, 0), shard(&ops, 6000)], None).unwrap_err();
        assert!(matches!(e, MergeError::Windows { .. }), "{e}");
        assert!(
            e.to_string()
                .contains("s0.json 12:00:00.000 .. 12:00:10.000"),
            "{e}"
        );
    }

    fn row(event: &str, measured: bool, time_s: f64, samples: u64) -> WaitRow {
        WaitRow {
            event: event.into(),
            waits: measured.then_some(1000),
            time_s,
            avg_us: None,
            pct_db_time: None,
            measured,
            samples,
            note: measured.then(|| format!("read time; {SHARD_WAIT_NOTE}")),
            device_await_ms: None,
        }
    }

    fn sampled(db_time_s: f64, rows: Vec<WaitRow>, transactions: u64) -> WaitProfile {
        WaitProfile {
            period_ms: 100.0,
            achieved_period_ms: 100.0,
            samples: 30,
            transactions,
            db_time_s,
            db_time_source: "sampled".into(),
            foreground: rows,
            sessions_by: "backend PID".into(),
            ..WaitProfile::default()
        }
    }

    fn host(read: u64, rchar: u64) -> HostMetrics {
        HostMetrics {
            seconds: 10.0,
            session_read_bytes: Some(read),
            session_kernel_read_bytes: Some(rchar),
            backends_read: 2,
            ..HostMetrics::default()
        }
    }

    // Seen: the wait table copied from shard 0 (its 2 sessions' DB time under the database's
    // reads of all 6): IO:DataFileRead 299.3% of DB time; the physical-read ratio of one
    // shard's backends over the server's reads (0.33); shard 0's DB-time warning carried in.
    #[test]
    fn waits_and_backends_reads_are_summed_over_the_shards() {
        let ops: Vec<u64> = vec![200; 100];
        let mut shards: Vec<RunResult> = (0..3).map(|k| shard(&ops, k)).collect();
        shards[0].db = Some(crate::stats::dbstats::DbMetrics {
            seconds: 10.0,
            commits_per_s: 100.0,
            db_time_s: Some(29.0),
            ..Default::default()
        });
        // The database measured 15 s of reads for the three shards' sessions; each shard
        // sampled its own 10 s of DB time (5 s of it CPU).
        shards[0].waits = Some(sampled(
            10.0,
            vec![
                row("IO:DataFileRead", true, 15.0, 50),
                row("CPU", false, 5.0, 50),
            ],
            40,
        ));
        for r in &mut shards[1..] {
            r.waits = Some(sampled(
                10.0,
                vec![
                    row("IO:DataFileRead", false, 5.0, 50),
                    row("CPU", false, 5.0, 50),
                ],
                40,
            ));
        }
        for (k, r) in shards.iter_mut().enumerate() {
            r.host = Some(host(8192 * 900, 8192 * 1000));
            r.sessions = vec![serde_json::from_value(serde_json::json!({
                "spec": {"index": k, "name": format!("dbio-reader-{}", k + 1), "kind": "reader", "schema": "user1"},
                "start": null, "end": null, "ops": [100, 0], "errors": [0, 0], "rows": [0, 0],
                "first_error": null, "ended_by": "window"
            }))
            .unwrap()];
        }
        let m = merge(&paths(3), shards.clone(), None).unwrap();
        let w = m.waits.as_ref().unwrap();
        assert_eq!(w.db_time_s, 30.0);
        assert!(
            w.db_time_source.contains("summed over 3 shards"),
            "{}",
            w.db_time_source
        );
        let read = &w.foreground[0];
        assert_eq!(
            (read.event.as_str(), read.measured),
            ("IO:DataFileRead", true)
        );
        assert_eq!((read.time_s, read.samples), (15.0, 150));
        assert_eq!(read.pct_db_time, Some(50.0));
        assert_eq!(read.note.as_deref(), Some("read time"));
        let cpu = w.foreground.iter().find(|r| r.event == "CPU").unwrap();
        assert_eq!((cpu.time_s, cpu.pct_db_time), (15.0, Some(50.0)));
        let total: f64 = w.foreground.iter().filter_map(|r| r.pct_db_time).sum();
        assert!((total - 100.0).abs() < 1e-9, "{total}");
        assert_eq!(w.transactions, 120);
        let h = m.host.as_ref().unwrap();
        assert_eq!(h.session_read_bytes, Some(3 * 8192 * 900));
        assert_eq!(h.physical_read_ratio, Some(0.9));
        assert_eq!(h.backends_read, 6);
        // DB time 29 s is what 3 sessions can spend in 10 s: no warning (shard 0 alone, one
        // session, would have said so); the other shards' samplers' 80 transactions are left
        // out of the commits.
        assert!(
            !m.warnings.iter().any(|w| w.contains("exceeds what")),
            "{:?}",
            m.warnings
        );
        assert!(crate::result::db_time_warning(29.0, 1, 10.0).is_some());
        let db = m.db.as_ref().unwrap();
        assert_eq!(db.commits_per_s, 92.0);
        assert_eq!(db.own_transactions, Some(80));
        // A shard without waits: the merged waits are null, and say why.
        shards[2].waits = None;
        shards[2].host = None;
        let m = merge(&paths(3), shards, None).unwrap();
        assert!(m.waits.is_none());
        assert!(
            m.warnings.iter().any(|w| w.starts_with("waits are null")),
            "{:?}",
            m.warnings
        );
        assert!(m.host.as_ref().unwrap().physical_read_ratio.is_none());
    }

    #[test]
    fn shards_of_other_runs_or_shapes_are_refused() {
        let ops: Vec<u64> = vec![200; 10];
        let with = |run_id: &str, index: u32| {
            let mut r = shard(&ops, 0);
            r.shard = Some(ShardInfo {
                run_id: run_id.into(),
                index,
                count: 2,
                start_at: None,
            });
            r
        };
        let e = merge(&paths(2), vec![with("a", 0), with("b", 1)], None).unwrap_err();
        assert!(
            e.to_string().contains("run id \"a\" vs run id \"b\""),
            "{e}"
        );
        let e = merge(&paths(2), vec![with("a", 1), with("a", 1)], None).unwrap_err();
        assert!(e.to_string().contains("given twice"), "{e}");
        let ok = merge(&paths(2), vec![with("a", 0), with("a", 1)], None).unwrap();
        assert_eq!(ok.merge.unwrap().run_id.as_deref(), Some("a"));
        let mut other = shard(&ops, 0);
        other.config.run.work_unit = 8;
        let e = merge(&paths(2), vec![shard(&ops, 0), other], None).unwrap_err();
        assert!(e.to_string().contains("work_unit 64 vs 8"), "{e}");
        // Plain runs under different --run-id values are different runs.
        let (mut p, mut q) = (shard(&ops, 0), shard(&ops, 0));
        p.config.run.run_id = Some("r1".into());
        q.config.run.run_id = Some("r2".into());
        let e = merge(&paths(2), vec![p.clone(), q], None).unwrap_err();
        assert!(
            e.to_string().contains("run id \"r1\" vs run id \"r2\""),
            "{e}"
        );
        let m = merge(&paths(2), vec![p.clone(), p], None).unwrap();
        assert_eq!(m.merge.unwrap().run_id.as_deref(), Some("r1"));
        let e = merge(&paths(1), vec![shard(&ops, 0)], None).unwrap_err();
        assert!(matches!(e, MergeError::TooFew(1)));
    }
}
