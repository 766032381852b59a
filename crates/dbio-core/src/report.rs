//! `report.txt`: the run's result as a person reads it. Every figure carries its unit and
//! comes from a field of result.json.

use std::fmt::Write as _;

use crate::driver::RunStatus;
use crate::result::{OpMetrics, RunResult};
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
    let env = &r.environment;
    let _ = writeln!(o, "target    {}", env.target);
    let _ = writeln!(
        o,
        "server    {} (dbio {} on {})",
        env.server_version, env.dbio_version, env.client_host
    );
    let settings: Vec<String> = env
        .settings
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={v}")))
        .collect();
    let _ = writeln!(o, "settings  {}", settings.join(" "));
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
            _ => w.mode.clone(),
        }
    );
    let run = &r.config.run;
    let readers = r
        .sessions
        .iter()
        .filter(|s| s.spec.name.starts_with("dbio-reader"))
        .count();
    let _ = writeln!(
        o,
        "workload  {readers} reader(s), {} writer(s); work_unit {} keys/read, update_work_unit {} keys/update, update_pct {}%, redo_stress {:?}",
        r.sessions.len() - readers,
        run.work_unit,
        run.update_work_unit,
        run.update_pct,
        run.redo_stress
    );
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "Client operations (latency of successful operations, µs; HDR histograms)"
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
            "client CPU {:.2} s user + {:.2} s system = {per:.1} ms per 1,000 operations",
            cpu.user_s, cpu.system_s
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
            s.spec.schema,
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
    if r.db.is_none() {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "Database statistics: not collected in this version (client measurements only)."
        );
    }
    if !r.warnings.is_empty() {
        let _ = writeln!(o);
        for w in &r.warnings {
            let _ = writeln!(o, "WARNING: {w}");
        }
    }
    o
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
