//! `report.txt`: the run's result as a person reads it. Every figure carries its unit and
//! comes from a field of result.json.
//!
//! Beside it: its "What limited this run" section (`limits`), SVG charts (`chart`), the ramp's
//! table, charts and HTML (`ramp`), compare's and regress's tables and verdicts (`compare`,
//! `regress`).

pub mod chart;
pub mod compare;
pub mod limits;
pub mod ramp;
pub mod regress;

use std::fmt::Write as _;

use crate::config::{Database, SessionLoop};
use crate::driver::RunStatus;
use crate::result::{OpMetrics, RunResult};
use crate::stats::dbstats::{MissingRight, WaitRow};
use crate::units::format_bytes;

pub fn render_text(r: &RunResult) -> String {
    let mut o = String::new();
    let status = match r.status {
        RunStatus::Ok => "ok",
        RunStatus::Failed => "FAILED",
        RunStatus::Interrupted => "INTERRUPTED",
    };
    let _ = writeln!(
        o,
        "dbio run{}  status {status}",
        r.label
            .as_deref()
            .map(|l| format!(" \"{l}\""))
            .unwrap_or_default()
    );
    if let Some(e) = &r.error {
        let _ = writeln!(o, "error: {e}");
    }
    if r.sessions_lost > 0 {
        let _ = writeln!(
            o,
            "lost      {} of {} session(s) did not answer and were cut off",
            r.sessions_lost,
            r.sessions.len()
        );
    }
    let env = &r.environment;
    let _ = writeln!(o, "target    {}", env.target);
    if let Some(server) = &env.pinned_server {
        let _ = writeln!(
            o,
            "          host list: every session and the collector used {server}"
        );
    }
    let _ = writeln!(
        o,
        "server    {} (dbio {} on {})",
        env.server_version, env.dbio_version, env.client_host
    );
    if r.targets.is_empty() {
        let _ = writeln!(o, "settings  {}", settings_line(env));
    } else {
        let _ = writeln!(
            o,
            "settings  per target (see Targets below: each server's own)"
        );
    }
    if let Some(t) = &env.session_tls {
        let line = match (&t.protocol, &t.cipher) {
            (Some(p), Some(c)) => format!(
                "{p} {c} ({} of {} sessions)",
                t.sessions_with_tls, t.sessions
            ),
            _ => format!("off: the {} sessions connected in plaintext", t.sessions),
        };
        let _ = writeln!(o, "tls       {line}");
    }
    let ds = &env.data_set;
    let _ = writeln!(
        o,
        "data set  {} schema(s) x {} blocks of {} B = {} of tables; sessions used {}",
        ds.schemas,
        ds.scale_blocks,
        ds.block_size,
        format_bytes(ds.table_bytes),
        ds.schemas_used.join(", ")
    );
    let w = &r.window;
    let _ = writeln!(
        o,
        "window    {} .. {} UTC, {:.3} s measured{} ({})",
        w.start.format("%Y-%m-%d %H:%M:%S%.3f"),
        w.end.format("%H:%M:%S%.3f"),
        w.measured_s,
        if w.warmup_s > 0.0 {
            format!(" after {:.1} s warm-up", w.warmup_s)
        } else {
            String::new()
        },
        match (w.run_time_s, w.work_loop) {
            (Some(t), _) => format!("run_time {t} s"),
            (_, Some(n)) => format!("work_loop {n} ops per session"),
            _ => w.mode.to_string(),
        }
    );
    if let Some(db_s) = w.db_window_s
        && (w.ops_past_window > 0 || db_s - w.measured_s > 0.05)
    {
        let _ = writeln!(
            o,
            "          {} operation(s) in flight at its end not counted (cancelled if still running \
             0.1 s later); \
             database counters cover {db_s:.3} s (until the last session stopped)",
            w.ops_past_window
        );
    }
    pacing_lines(&mut o, r);
    let run = &r.config.run;
    let readers = r
        .sessions
        .iter()
        .filter(|s| s.spec.name.starts_with("dbio-reader"))
        .count();
    let _ = writeln!(
        o,
        "workload  {readers} reader(s), {} writer(s); work_unit {} keys/read, update_work_unit {} keys/update, update_pct {}%, redo_stress {}",
        r.sessions.len() - readers,
        run.work_unit,
        run.update_work_unit,
        run.update_pct,
        run.redo_stress.as_str()
    );
    let _ = writeln!(
        o,
        "engine    {}",
        match run.engine {
            SessionLoop::Client =>
                "client: dbio's sessions send every operation and time its round trip",
            SessionLoop::Server => {
                "server: one procedure per session loops inside the database (SLOB/pgio style); no client round trips"
            }
        }
    );
    if let Some(rp) = env.read_path.as_ref().filter(|_| r.targets.is_empty()) {
        let _ = writeln!(o, "{}", read_path_text(r.engine, rp));
    }
    for t in &ds.tables {
        let _ = writeln!(
            o,
            "table     {}.cf1 in tablespace {}{}, {} blocks on disk",
            t.schema,
            t.tablespace,
            match &t.index_tablespace {
                Some(i) if *i != t.tablespace => format!(" (index in {i})"),
                _ => String::new(),
            },
            t.blocks
        );
    }
    if let Some(v) = &r.limiter {
        let _ = writeln!(o, "limited by {}", v.line);
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "{}",
        match run.engine {
            SessionLoop::Client if r.open_loop.is_some() =>
                "Client operations (latency of successful operations from their intended starts, µs; HDR histograms)",
            SessionLoop::Client =>
                "Client operations (latency of successful operations, µs; HDR histograms)",
            SessionLoop::Server => {
                "Operations inside the database (latency timed by the server's clock_timestamp(), µs: upper bounds of power-of-two buckets)"
            }
        }
    );
    let _ = writeln!(
        o,
        "{:<7} {:>10} {:>7} {:>11} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9}",
        "op", "count", "errors", "ops/s", "min", "p50", "p90", "p99", "p99.9", "max"
    );
    for (name, m) in [("read", &r.client.read), ("update", &r.client.update)] {
        if m.count + m.errors > 0 {
            let _ = writeln!(o, "{}", op_line(name, m));
        }
    }
    let _ = writeln!(
        o,
        "{:<7} {:>10} {:>7} {:>11.1}",
        "total", r.client.ops, r.client.errors, r.client.ops_per_s
    );
    if let (Some(cpu), Some(per)) = (&r.client.cpu, r.client.cpu_ms_per_1000_ops) {
        let _ = writeln!(
            o,
            "client CPU {:.2} s user + {:.2} s system = {per:.1} ms per 1,000 operations{}",
            cpu.user_s,
            cpu.system_s,
            r.client
                .max_rss_kib
                .map(|k| format!("; peak memory {:.1} MiB", k as f64 / 1024.0))
                .unwrap_or_default()
        );
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "Sessions");
    let _ = writeln!(
        o,
        "{:<18} {:<10} {:>9} {:>9} {:>7}  ended by",
        "session", "schema", "reads", "updates", "errors"
    );
    for s in &r.sessions {
        let _ = writeln!(
            o,
            "{:<18} {:<10} {:>9} {:>9} {:>7}  {}{}",
            s.spec.name,
            match s.spec.target {
                Some(t) => format!("{}@{}", s.spec.schema, t + 1),
                None => s.spec.schema.clone(),
            },
            s.ops[0],
            s.ops[1],
            s.errors[0] + s.errors[1],
            s.ended_by,
            s.first_error
                .as_ref()
                .map(|e| format!("; first error at {:.1} s: {}", e.at_s, e.message))
                .unwrap_or_default()
        );
    }
    db_sections(&mut o, r);
    limits::limits_section(
        &mut o,
        r.engine,
        r.limiter.as_ref(),
        r.limits.as_ref(),
        r.device.as_ref(),
        r.host.as_ref(),
    );
    targets_section(&mut o, r);
    if !r.missing_rights.is_empty() {
        let _ = writeln!(o);
        o.push_str(&render_missing_rights(&r.missing_rights));
    }
    if !r.warnings.is_empty() {
        let _ = writeln!(o);
        for w in &r.warnings {
            let _ = writeln!(o, "WARNING: {w}");
        }
    }
    o
}

/// How the window was paced and opened: preconditioning, the wait for steady state, an
/// open loop's schedule and how far behind it the sessions were.
fn pacing_lines(o: &mut String, r: &RunResult) {
    for (name, s) in [("precond", &r.precondition), ("steady", &r.steady)] {
        let Some(s) = s else { continue };
        let what = match (name, s.steady) {
            ("precond", _) => "updates before the window",
            (_, true) => "the window opened",
            (_, false) => "the window opened at the cap",
        };
        let unit = if s.criterion.starts_with("lat_slope") {
            "µs"
        } else {
            "ops/s"
        };
        let _ = writeln!(
            o,
            "{name:<9} {what}: {}{}",
            s.describe(),
            s.mean
                .map(|m| format!("; mean {m:.1} {unit} over the last span"))
                .unwrap_or_default()
        );
    }
    if let Some(l) = &r.open_loop {
        let missed_pct = l.missed_starts as f64 / l.scheduled.max(1) as f64 * 100.0;
        let _ = writeln!(
            o,
            "open loop {}/s {}: {} intended starts in the window, {} started, {} missed ({missed_pct:.1}%); \
             latency counts from the intended starts",
            l.rate_per_s,
            l.arrival.as_str(),
            l.scheduled,
            l.started,
            l.missed_starts
        );
        if let Some(lag) = &l.lag_us {
            let _ = writeln!(
                o,
                "          lag behind the intended starts: p50 {} µs, p99 {} µs, max {} µs{}",
                lag.p50,
                lag.p99,
                lag.max,
                match (l.lag_first_quarter_us, l.lag_last_quarter_us) {
                    (Some(a), Some(b)) => format!(
                        "; mean {:.1} ms in the window's first quarter, {:.1} ms in its last",
                        a / 1000.0,
                        b / 1000.0
                    ),
                    _ => String::new(),
                }
            );
        }
    }
}

/// A run over several targets: a row per target and the totals, then each target's own
/// load profile, waits and I/O as its collector measured them.
fn targets_section(o: &mut String, r: &RunResult) {
    if r.targets.is_empty() {
        return;
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "Targets ({}; client figures are each target's sessions over the run's window, database figures its own collector's)",
        r.targets.len()
    );
    for t in &r.targets {
        let _ = writeln!(
            o,
            "  {}  {} ({})",
            t.index + 1,
            t.target,
            t.environment.server_version
        );
        if let Some(server) = &t.environment.pinned_server {
            let _ = writeln!(
                o,
                "     host list: its sessions and collector used {server}"
            );
        }
        let _ = writeln!(o, "     settings {}", settings_line(&t.environment));
        if let Some(rp) = &t.environment.read_path {
            let _ = writeln!(o, "     {}", read_path_text(r.engine, rp));
        }
    }
    let _ = writeln!(
        o,
        "{:<6} {:>7} {:>7} {:>10} {:>10} {:>8} {:>8} {:>11} {:>11} {:>10} {:>10}",
        "target",
        "readers",
        "writers",
        "reads",
        "reads/s",
        "p50 µs",
        "p99 µs",
        "DB reads/s",
        "DB read µs",
        "idx_scan",
        "device r/s"
    );
    let row = |name: String,
               readers: u32,
               writers: u32,
               read: &OpMetrics,
               db: Option<&crate::stats::dbstats::DbMetrics>,
               device: String| {
        let lat = |f: fn(&crate::stats::LatencySummary) -> u64| {
            read.latency_us
                .as_ref()
                .map(|l| f(l).to_string())
                .unwrap_or_else(|| "-".into())
        };
        format!(
            "{name:<6} {readers:>7} {writers:>7} {:>10} {:>10.1} {:>8} {:>8} {:>11} {:>11} {:>10} {:>10}",
            read.count,
            read.ops_per_s,
            lat(|l| l.p50),
            lat(|l| l.p99),
            db.map(|d| format!("{:.1}", d.read_iops))
                .unwrap_or_else(|| "-".into()),
            opt(db.and_then(|d| d.avg_read_latency_us), 1),
            db.map(|d| d.dbio_tables.idx_scan.to_string())
                .unwrap_or_else(|| "-".into()),
            device
        )
    };
    for t in &r.targets {
        let _ = writeln!(
            o,
            "{}",
            row(
                (t.index + 1).to_string(),
                t.readers,
                t.writers,
                &t.read,
                t.db.as_ref(),
                t.device
                    .as_ref()
                    .map(|d| format!("{:.1}", d.reads_per_s))
                    .unwrap_or_else(|| "-".into()),
            )
        );
    }
    let _ = writeln!(
        o,
        "{}",
        row(
            "total".into(),
            r.config.run.readers,
            r.config.run.writers,
            &r.client.read,
            r.db.as_ref(),
            "-".into(),
        )
    );
    let _ = writeln!(
        o,
        "  total: reads and reads/s summed, p50/p99 of all sessions' merged histogram (not an average of the targets'), \
         DB figures summed; device not summed (targets may share one)"
    );
    for t in &r.targets {
        let mut one = r.clone();
        one.db = t.db.clone();
        one.waits = t.waits.clone();
        one.device = t.device.clone();
        one.host = t.host.clone();
        one.environment = t.environment.clone();
        one.client.ops_per_s = t.ops_per_s;
        one.label = Some(format!(
            "{} target {}",
            r.label.as_deref().unwrap_or("run"),
            t.index + 1
        ));
        one.targets.clear();
        let _ = writeln!(o);
        let _ = writeln!(o, "Target {}: {}", t.index + 1, t.target);
        if let Some(v) = &t.limiter {
            let _ = writeln!(o, "limited by {}", v.line);
        }
        db_sections(o, &one);
        limits::limits_section(
            o,
            r.engine,
            t.limiter.as_ref(),
            t.limits.as_ref(),
            t.device.as_ref(),
            t.host.as_ref(),
        );
    }
}

/// The settings that matter, `name=value` each, as the server reported them.
fn settings_line(env: &crate::result::Environment) -> String {
    env.settings
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={v}")))
        .collect::<Vec<_>>()
        .join(" ")
}

fn op_line(name: &str, m: &OpMetrics) -> String {
    match &m.latency_us {
        Some(l) => format!(
            "{:<7} {:>10} {:>7} {:>11.1} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9}",
            name, m.count, m.errors, m.ops_per_s, l.min, l.p50, l.p90, l.p99, l.p999, l.max
        ),
        None => format!(
            "{:<7} {:>10} {:>7} {:>11.1}",
            name, m.count, m.errors, m.ops_per_s
        ),
    }
}

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map(|x| format!("{x:.prec$}"))
        .unwrap_or_else(|| "-".into())
}

/// The words the database sections put on an engine's figures, so that an Oracle result
/// never speaks of shared_buffers or WAL, nor a PostgreSQL one of redo.
struct Words {
    read_requests: &'static str,
    cache: &'static str,
    writes: &'static str,
    write_unit: &'static str,
    io_writes: &'static str,
    log: [&'static str; 3],
    db_time_source: &'static str,
    /// Checkpoints and autovacuum in the window (PostgreSQL's own maintenance).
    maintenance: bool,
    read_event: &'static str,
    /// The event line is the measured wait row of `read_event` (the database counts its
    /// waits), not the read requests.
    event_line_from_waits: bool,
    foreground: &'static str,
    background: &'static str,
}

fn words(engine: Database) -> Words {
    match engine {
        Database::Postgres => Words {
            read_requests: "/s (missed shared_buffers)",
            cache: "% (shared_buffers only)",
            writes: "Data-file writes",
            write_unit: "blocks/s",
            io_writes: "data-file writes/s",
            log: ["WAL", "WAL writes", "WAL syncs"],
            db_time_source: " (pg_stat_database.active_time)",
            maintenance: true,
            read_event: "IO:DataFileRead",
            event_line_from_waits: false,
            foreground: "dbio sessions",
            background: "Background events (server processes, sampled)",
        },
        Database::Oracle => Words {
            read_requests: "/s (data-file read requests, as SLOB's awr_info)",
            cache: "% (buffer cache only)",
            writes: "Data-file write requests",
            write_unit: "/s",
            io_writes: "data-file write requests/s",
            log: ["Redo", "Redo writes", "Log file syncs"],
            db_time_source: " (V$SYS_TIME_MODEL)",
            maintenance: false,
            read_event: "db file sequential read",
            event_line_from_waits: true,
            foreground: "foreground sessions",
            background: "Background events (background processes: all waits less foreground)",
        },
    }
}

fn db_sections(o: &mut String, r: &RunResult) {
    let words = words(r.engine);
    let _ = writeln!(o);
    let Some(db) = &r.db else {
        let _ = writeln!(
            o,
            "Database statistics: not collected for this run (see the warnings); the figures above are client measurements."
        );
        return;
    };
    let _ = writeln!(
        o,
        "Load profile (database counters over the {:.3} s window; source {}){}",
        db.seconds,
        db.source,
        if db.valid {
            ""
        } else {
            "  ** INVALID: see warnings **"
        }
    );
    let commits_unit = match (db.own_transactions, r.engine) {
        (Some(n), _) => {
            format!("/s (this database's, less dbio's own {n} collector and sampler transactions)")
        }
        (None, Database::Postgres) => {
            "/s (this database's, dbio's collector and sampler included)".to_string()
        }
        (None, Database::Oracle) => "/s".to_string(),
    };
    let rows: [(&str, String, &str); 11] = [
        (
            "DB read requests",
            format!("{:.1}", db.read_iops),
            words.read_requests,
        ),
        (
            "DB blocks read",
            format!("{:.1}", db.read_blocks_per_s),
            "/s",
        ),
        (
            "Avg read latency",
            opt(db.avg_read_latency_us, 1),
            "µs (database-timed)",
        ),
        ("Buffer hits", format!("{:.1}", db.buffer_hits_per_s), "/s"),
        (
            "Buffer hit ratio",
            opt(db.buffer_hit_ratio.map(|h| 100.0 * h), 2),
            words.cache,
        ),
        (
            words.writes,
            format!("{:.1}", db.write_iops),
            words.write_unit,
        ),
        (words.log[0], opt(db.wal_bytes_per_s, 0), "bytes/s"),
        (words.log[1], opt(db.wal_writes_per_s, 1), "/s"),
        (words.log[2], opt(db.wal_syncs_per_s, 1), "/s"),
        (
            "Commits",
            format!("{:.1}", db.commits_per_s),
            commits_unit.as_str(),
        ),
        (
            "Operations (client)",
            format!("{:.1}", r.client.ops_per_s),
            "/s",
        ),
    ];
    for (name, value, unit) in rows {
        let _ = writeln!(o, "  {name:<22} {value:>14} {unit}");
    }
    let _ = write!(
        o,
        "  {:<22} {:>14} s{}",
        "DB time",
        opt(db.db_time_s, 2),
        if db.db_time_s.is_some() {
            words.db_time_source
        } else {
            ""
        },
    );
    if words.maintenance {
        let _ = write!(
            o,
            "; checkpoints in window {}; autovacuum {} / autoanalyze {} on dbio's tables",
            db.checkpoints, db.autovacuum_runs, db.autoanalyze_runs
        );
    }
    let _ = writeln!(o);
    for (field, why) in &db.null_reasons {
        let _ = writeln!(o, "  {field} is null: {why}");
    }
    if let Some(calls) = db.counters.get("pgss.calls") {
        let c = |k: &str| db.counters.get(k).copied().unwrap_or(0.0);
        let _ = writeln!(
            o,
            "  pg_stat_statements: {calls:.0} calls of dbio's statements, {:.0} blocks read, {:.0} hit, {:.1} ms reading",
            c("pgss.shared_blks_read"),
            c("pgss.shared_blks_hit"),
            c("pgss.read_time")
        );
    }
    if let Some(w) = &r.waits {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "Top foreground events ({}; {} samples every {:.0} ms, {:.1} ms achieved; DB time {:.2} s {})",
            words.foreground,
            w.samples,
            w.period_ms,
            w.achieved_period_ms,
            w.db_time_s,
            w.db_time_source
        );
        wait_table(o, &w.foreground, true);
        for r in w.foreground.iter().filter(|r| r.note.is_some()) {
            let _ = writeln!(
                o,
                "  {}: {}{}",
                r.event,
                r.note.as_deref().unwrap_or(""),
                r.device_await_ms
                    .map(|a| format!(" (device read wait {a:.3} ms)"))
                    .unwrap_or_default()
            );
        }
        if !w.background.is_empty() {
            let _ = writeln!(o, "{}", words.background);
            wait_table(o, &w.background, false);
        }
        if !w.other_sessions.is_empty() {
            let _ = writeln!(
                o,
                "Other sessions active in this database (not dbio's; {} of the active session samples; % of dbio's DB time)",
                w.other_sessions_pct
                    .map(|p| format!("{p:.1}%"))
                    .unwrap_or_else(|| "-".into())
            );
            wait_table(o, &w.other_sessions, false);
        }
        if let Some(note) = &w.visibility_note {
            let _ = writeln!(o, "  note: {note}");
        }
        let _ = writeln!(
            o,
            "  waits and time without `est.` are the database's own counters; `est.` rows are samples x period"
        );
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "I/O");
    let _ = writeln!(
        o,
        "  database: {:.1} read requests/s, average {} µs; {:.1} {}",
        db.read_iops,
        opt(db.avg_read_latency_us, 1),
        db.write_iops,
        words.io_writes
    );
    match &r.device {
        Some(d) => {
            let _ = writeln!(
                o,
                "  device {} (under {}): {:.1} reads/s of {} KiB, average wait {} ms; {:.1} writes/s, average wait {} ms",
                d.device,
                d.path,
                d.reads_per_s,
                opt(d.read_kib_per_op, 1),
                opt(d.avg_read_wait_ms, 3),
                d.writes_per_s,
                opt(d.avg_write_wait_ms, 3)
            );
            let _ = writeln!(
                o,
                "  physical-read ratio (device reads / database reads): {}; cache control: {}",
                opt(d.physical_read_ratio, 2),
                d.cache_control
            );
            let _ = writeln!(
                o,
                "  device {}: {} MiB/s read, await {} ms, average queue depth (aqu-sz) {}; tables: {}; source: {}",
                d.major_minor.as_deref().unwrap_or("-"),
                opt(d.read_mib_per_s, 2),
                opt(d.await_ms, 3),
                opt(d.avg_queue_depth, 2),
                if d.tables.is_empty() {
                    "-".to_string()
                } else {
                    d.tables.join(", ")
                },
                d.source.as_deref().unwrap_or("this host's /proc/diskstats")
            );
        }
        None if !r.targets.is_empty() => {
            let _ = writeln!(
                o,
                "  device: per target (see Targets below: targets may share a device, so it is not summed)"
            );
        }
        None => {
            let _ = writeln!(o, "  device: not measured (see the warnings)");
        }
    }
    host_section(o, r);
    if let Some(c) = &r.calibration {
        let _ = writeln!(
            o,
            "  raw device (dbio calibrate, {}, level {}): {:.1} IOPS, mean {} µs, p99 {} µs; database/raw: IOPS {}, latency {}",
            c.file,
            c.level,
            c.raw_small_iops,
            opt(c.raw_mean_latency_us, 1),
            c.raw_p99_latency_us
                .map(|v| v.to_string())
                .unwrap_or_else(|| "-".into()),
            opt(c.iops_ratio, 2),
            opt(c.latency_ratio, 2)
        );
    }
    // Where the database counts the event's waits (Oracle's V$SYSTEM_EVENT), the line is
    // that row's; elsewhere the read requests and their average latency.
    let measured = r.waits.as_ref().and_then(|w| {
        w.foreground
            .iter()
            .find(|row| row.measured && row.event.rsplit(':').next() == Some(words.read_event))
    });
    let line = match (words.event_line_from_waits, measured) {
        (true, Some(row)) => db.io_event_line_of(row),
        _ => db.io_event_line(words.read_event),
    };
    if let Some(a) = &db.awr_info {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "awr_info (SLOB's misc/awr_info.sh columns: per second; DB CPU = DB CPU + background CPU; \
             PREADS/PWRITES data-file requests, READ/WRITE_MBS all files; latencies µs, 0 = no waits)"
        );
        let _ = writeln!(o, "{}", crate::stats::dbstats::AwrInfo::HEADER);
        let _ = writeln!(
            o,
            "{}",
            a.line(r.label.as_deref().unwrap_or("run"), r.sessions.len() as u32)
        );
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "Run | Event | Waits | Time(s) | Latency(µs) | IOPS");
    let _ = writeln!(
        o,
        "{} | {} | {} | {:.2} | {} | {:.1}",
        r.label.as_deref().unwrap_or("run"),
        line.event,
        line.waits,
        line.time_s,
        opt(line.latency_us, 1),
        line.iops
    );
}

/// The database host's own figures: what dbio's backends fetched from storage, the host's
/// memory and CPU, and where they were read.
fn host_section(o: &mut String, r: &RunResult) {
    if r.engine == Database::Oracle {
        return;
    }
    let Some(h) = &r.host else {
        let _ = writeln!(
            o,
            "  host: {}",
            if r.targets.is_empty() {
                "not measured (see the warnings and the missing rights)"
            } else {
                "per target (see Targets below: each target's collector measured its own host)"
            }
        );
        return;
    };
    let mib = |b: Option<u64>| opt(b.map(|b| b as f64 / 1048576.0), 1);
    let _ = writeln!(
        o,
        "  host ({}): dbio's backends read {} MiB from storage, io workers {} MiB ({} processes); {} physical blocks/s; \
         physical-read ratio (bytes the backends fetched from storage / bytes they read, /proc/<pid>/io read_bytes / rchar): {}",
        h.source,
        mib(h.session_read_bytes),
        mib(h.io_worker_read_bytes),
        h.backends_read,
        opt(h.physical_blocks_per_s, 1),
        opt(h.physical_read_ratio, 2)
    );
    if h.physical_read_ratio
        .is_some_and(|p| p < crate::stats::dbstats::MIN_PHYSICAL_RATIO)
    {
        let _ = writeln!(
            o,
            "  the page cache served most of the database's reads: they are memory reads, not storage I/O"
        );
    }
    let gib = |b: Option<u64>| opt(b.map(|b| b as f64 / 1073741824.0), 1);
    let cap = h
        .mem_limit_bytes
        .map(|b| {
            format!(
                " (the server's cgroup caps it at {} GiB)",
                opt(Some(b as f64 / 1073741824.0), 2)
            )
        })
        .unwrap_or_default();
    let _ = writeln!(
        o,
        "  host memory {} GiB{cap}, available {} GiB, page cache {} GiB; CPU user {}%, system {}%, iowait {}%, idle {}%",
        gib(h.mem_total_bytes),
        gib(h.mem_available_bytes),
        gib(h.page_cache_bytes),
        opt(h.cpu_user_pct, 1),
        opt(h.cpu_system_pct, 1),
        opt(h.cpu_iowait_pct, 1),
        opt(h.cpu_idle_pct, 1)
    );
    for n in &h.notes {
        let _ = writeln!(o, "  host note: {n}");
    }
}

/// Figures missing for want of a right, each with its GRANT (for `dbio check` and every
/// run's report); empty when nothing is missing.
pub fn render_missing_rights(missing: &[MissingRight]) -> String {
    let mut o = String::new();
    if missing.is_empty() {
        return o;
    }
    let _ = writeln!(
        o,
        "Missing rights ({}): figures this role cannot have, and the GRANT for each",
        missing.len()
    );
    for m in missing {
        let _ = writeln!(o, "  - {}\n    {}", m.figures, m.grant);
    }
    o
}

/// `whole`: the rows are dbio's DB time, so what they leave out is said.
fn wait_table(o: &mut String, rows: &[WaitRow], whole: bool) {
    let _ = writeln!(
        o,
        "  {:<28} {:>12} {:>10} {:>14} {:>10}",
        "Event", "Waits", "Time(s)", "Avg wait(µs)", "% DB time"
    );
    for r in rows.iter().take(10) {
        let _ = writeln!(
            o,
            "  {:<28} {:>12} {:>10.2} {:>14} {:>10}",
            r.event,
            r.waits
                .map(|w| w.to_string())
                .unwrap_or_else(|| "est.".into()),
            r.time_s,
            opt(r.avg_us, 1),
            opt(r.pct_db_time, 1)
        );
    }
    if let Some(line) = db_time_rest(rows).filter(|_| whole) {
        let _ = writeln!(o, "  {line}");
    }
}

/// What the "% DB time" column leaves out, when its rows do not add up to the whole.
fn db_time_rest(rows: &[WaitRow]) -> Option<String> {
    let pcts: Vec<f64> = rows.iter().filter_map(|r| r.pct_db_time).collect();
    if pcts.is_empty() {
        return None;
    }
    let shown: f64 = rows.iter().take(10).filter_map(|r| r.pct_db_time).sum();
    let all: f64 = pcts.iter().sum();
    if all >= 99.5 && shown >= 99.5 {
        return None;
    }
    let mut parts = Vec::new();
    if shown + 0.05 < all {
        parts.push(format!(
            "{:.1}% in the {} rows not shown",
            all - shown,
            rows.len() - 10
        ));
    }
    if all < 99.5 {
        parts.push(format!(
            "{:.1}% not attributed to any event: DB time (pg_stat_database.active_time) counts every \
             session of the database, and statements shorter than the sample period can fall between samples",
            100.0 - all
        ));
    }
    Some(format!(
        "the rows above sum to {shown:.1}% of DB time; the rest: {}",
        parts.join("; ")
    ))
}

/// The one-line summary of a run (the awr_info habit), as (column, value) pairs: what
/// `dbio report --format csv` prints and a ramp's table is made of.
pub fn summary_row(r: &RunResult) -> Vec<(&'static str, String)> {
    let f1 = |v: Option<f64>| v.map(|x| format!("{x:.1}")).unwrap_or_default();
    let int = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
    let readers = r
        .sessions
        .iter()
        .filter(|s| s.spec.name.starts_with("dbio-reader"))
        .count();
    let lat = r.client.read.latency_us.as_ref();
    let top_wait = r
        .waits
        .as_ref()
        .and_then(|w| w.foreground.first())
        .map(|w| w.event.clone())
        .unwrap_or_default();
    vec![
        ("label", r.label.clone().unwrap_or_default()),
        ("status", r.status.as_str().to_string()),
        ("start_utc", r.window.start.to_rfc3339()),
        ("readers", readers.to_string()),
        ("writers", (r.sessions.len() - readers).to_string()),
        ("elapsed_s", format!("{:.3}", r.window.measured_s)),
        ("client_ops_per_s", format!("{:.1}", r.client.ops_per_s)),
        ("client_read_p50_us", int(lat.map(|l| l.p50))),
        ("client_read_p99_us", int(lat.map(|l| l.p99))),
        ("db_read_iops", f1(r.db.as_ref().map(|d| d.read_iops))),
        ("db_write_iops", f1(r.db.as_ref().map(|d| d.write_iops))),
        (
            "db_avg_read_latency_us",
            f1(r.db.as_ref().and_then(|d| d.avg_read_latency_us)),
        ),
        (
            "device_read_iops",
            f1(r.device.as_ref().map(|d| d.reads_per_s)),
        ),
        (
            "physical_read_ratio",
            r.device
                .as_ref()
                .and_then(|d| d.physical_read_ratio)
                .map(|x| format!("{x:.2}"))
                .unwrap_or_default(),
        ),
        ("top_wait", top_wait),
        (
            "limited_by",
            r.limiter
                .as_ref()
                .map(|v| v.limiter.name(r.engine).to_string())
                .unwrap_or_default(),
        ),
        ("warnings", r.warnings.len().to_string()),
    ]
}

/// A CSV field, quoted when it holds a comma, quote or line break (RFC 4180).
pub fn csv_field(v: &str) -> String {
    if v.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v.to_string()
    }
}

/// Header and one row.
pub fn render_csv(r: &RunResult) -> String {
    let row = summary_row(r);
    let header: Vec<&str> = row.iter().map(|(k, _)| *k).collect();
    let values: Vec<String> = row.iter().map(|(_, v)| csv_field(v)).collect();
    format!("{}\n{}\n", header.join(","), values.join(","))
}

/// `read path index: Aggregate > Index Scan using i_cf1 on cf1; io_method worker,
/// effective_io_concurrency 16, io_combine_limit 128kB`; a setting the server lacks says from
/// which PostgreSQL version it exists.
/// The read path's line for an engine: PostgreSQL's with its I/O settings, Oracle's with the
/// plan's source.
fn read_path_text(engine: Database, rp: &crate::result::ReadPathInfo) -> String {
    match engine {
        Database::Oracle => format!(
            "read path {}: {} (from {}, verified)",
            rp.path.as_str(),
            rp.plan,
            rp.source
        ),
        Database::Postgres => read_path_line(rp),
    }
}

fn read_path_line(rp: &crate::result::ReadPathInfo) -> String {
    let v = |s: &Option<String>, since: &str| {
        s.clone()
            .unwrap_or_else(|| format!("none on this server ({since})"))
    };
    format!(
        "read path {}: {} (generic plan, verified); io_method {}, effective_io_concurrency {}, io_combine_limit {}{}",
        rp.path.as_str(),
        rp.plan,
        v(&rp.io_method, "PostgreSQL 18+"),
        v(&rp.effective_io_concurrency, "not readable"),
        v(&rp.io_combine_limit, "PostgreSQL 17+"),
        rp.index_prefetch
            .as_ref()
            .map(|p| format!(", enable_indexscan_prefetch {p}"))
            .unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_read_path_line_names_the_plan_and_what_the_server_lacks() {
        let rp = crate::result::ReadPathInfo {
            path: crate::config::ReadPath::Bitmap,
            plan: "Aggregate > Bitmap Heap Scan on cf1 > Bitmap Index Scan using i_cf1".into(),
            scan: "Bitmap Heap Scan".into(),
            source: "EXPLAIN EXECUTE".into(),
            io_method: None,
            effective_io_concurrency: Some("16".into()),
            io_combine_limit: Some("128kB".into()),
            index_prefetch: None,
        };
        assert_eq!(
            read_path_line(&rp),
            "read path bitmap: Aggregate > Bitmap Heap Scan on cf1 > Bitmap Index Scan using i_cf1 (generic plan, verified); \
             io_method none on this server (PostgreSQL 18+), effective_io_concurrency 16, io_combine_limit 128kB"
        );
    }

    fn result(engine: Database) -> RunResult {
        let config = crate::config::Config {
            engine,
            ..Default::default()
        };
        let db = crate::stats::dbstats::DbMetrics {
            seconds: 10.0,
            read_iops: 100.0,
            write_iops: 5.0,
            db_time_s: Some(12.0),
            valid: true,
            ..Default::default()
        };
        let ctx = crate::result::RunContext {
            other_shards: false,
            config,
            environment: crate::result::Environment {
                dbio_version: "0".into(),
                client_host: "h".into(),
                target: "t".into(),
                pinned_server: None,
                session_tls: None,
                server_version: "v".into(),
                server_version_num: 0,
                settings: Default::default(),
                data_set: crate::result::DataSetInfo {
                    schemas: 1,
                    scale_blocks: 1,
                    block_size: 8192,
                    table_bytes: 8192,
                    schemas_used: vec![],
                    tables: vec![],
                },
                read_path: None,
            },
            warnings: vec![],
            db: Some(db),
            waits: Some(crate::stats::dbstats::WaitProfile::default()),
            device: None,
            calibration: None,
        };
        let now = chrono::Utc::now();
        let outcome = crate::driver::DriveOutcome {
            status: RunStatus::Ok,
            error: None,
            start: now,
            end: now,
            measured_s: 10.0,
            db_window_s: 10.0,
            warmup_s: 0.0,
            sessions: vec![],
            histograms: [crate::stats::new_histogram(), crate::stats::new_histogram()],
            by_target: vec![],
            timeseries: vec![],
            client_cpu: None,
            sessions_lost: 0,
            steady: None,
            precondition: None,
            open_loop: None,
            session_engine: None,
        };
        RunResult::build(
            ctx,
            crate::driver::WindowSpec::Time(std::time::Duration::from_secs(10)),
            outcome,
        )
    }

    // Regression: report.txt spoke of shared_buffers, WAL and blocks/s for Oracle results,
    // whose writes are requests and whose log is redo.
    #[test]
    fn oracle_results_use_oracle_words() {
        let text = render_text(&result(Database::Oracle));
        for pg in [
            "shared_buffers",
            "WAL",
            "blocks/s",
            "pg_stat",
            "autovacuum",
            "IO:DataFileRead",
        ] {
            assert!(!text.contains(pg), "{pg} in an Oracle report:\n{text}");
        }
        for word in [
            "Data-file write requests",
            "Redo writes",
            "Log file syncs",
            "buffer cache only",
            "V$SYS_TIME_MODEL",
            "db file sequential read",
        ] {
            assert!(text.contains(word), "{word} missing:\n{text}");
        }
        let pg = render_text(&result(Database::Postgres));
        for word in [
            "missed shared_buffers",
            "WAL syncs",
            "blocks/s",
            "autovacuum",
            "IO:DataFileRead",
        ] {
            assert!(pg.contains(word), "{word} missing:\n{pg}");
        }
    }

    #[test]
    fn csv_fields_are_quoted_when_needed() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }

    // Regression: the Oracle event line labelled the read requests as 'db file sequential
    // read' waits: 12,000,000 requests / 4,800 s shown where the event counted 9,000,000
    // waits / 3,600 s (the rest were 'db file parallel read').
    #[test]
    fn the_oracle_event_line_is_the_events_own_waits() {
        let mut r = result(Database::Oracle);
        if let Some(db) = r.db.as_mut() {
            db.seconds = 300.0;
            db.read_iops = 40_000.0;
            db.avg_read_latency_us = Some(400.0);
            db.awr_info = Some(crate::stats::dbstats::AwrInfo {
                elapsed_s: 300.0,
                db_cpu_per_s: Some(1.25),
                db_time_per_s: 20.0,
                executes_per_s: 40_000.0,
                lio_per_s: 41_000.0,
                preads_per_s: 40_000.0,
                read_mib_per_s: 312.5,
                pwrites_per_s: 0.0,
                write_mib_per_s: 0.0,
                redo_mib_per_s: 0.0,
                dfsr_lat_us: Some(400.0),
                dpr_lat_us: None,
                dfpr_lat_us: Some(1_500.0),
                dfpw_lat_us: None,
                lfpw_lat_us: None,
                top_wait: Some("db file sequential read 9000000 3600 0 60.0 User I/O".into()),
            });
        }
        if let Some(w) = r.waits.as_mut() {
            w.foreground.push(WaitRow {
                event: "User I/O:db file sequential read".into(),
                waits: Some(9_000_000),
                time_s: 3_600.0,
                avg_us: Some(400.0),
                pct_db_time: Some(60.0),
                measured: true,
                samples: 0,
                note: None,
                device_await_ms: None,
            });
        }
        let text = render_text(&r);
        assert!(
            text.contains("run | db file sequential read | 9000000 | 3600.00 | 400.0 | 40000.0"),
            "{text}"
        );
        assert!(!text.contains("12000000"), "{text}");
        assert!(
            text.contains(crate::stats::dbstats::AwrInfo::HEADER)
                && text.contains("run|0|300|1.2|20.0|40000|41000|40000|312.5|0|0|0.0|400|0|1500|0|0|db file sequential read"),
            "{text}"
        );
        // PostgreSQL's line stays its read requests (its waits are sampled, not counted).
        let pg = render_text(&result(Database::Postgres));
        assert!(pg.contains("run | IO:DataFileRead | 1000 |"), "{pg}");
    }
}
