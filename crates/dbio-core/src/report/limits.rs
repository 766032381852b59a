//! report.txt's "What limited this run" section: the verdict with its evidence, the cache
//! residency per relation (and what it says of the physical-read ratio), the cgroup I/O
//! caps, client and server CPU, and the outstanding I/O beside the sessions.

use std::fmt::Write as _;

use crate::config::Database;
use crate::limits::{CacheCounts, LimiterVerdict, Limits, RelationKind, Residency};
use crate::stats::dbstats::{DeviceMetrics, HostMetrics};

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map(|x| format!("{x:.prec$}"))
        .unwrap_or_else(|| "-".into())
}

/// The section, for a run's (or one target's) figures.
pub fn limits_section(
    o: &mut String,
    engine: Database,
    limiter: Option<&LimiterVerdict>,
    limits: Option<&Limits>,
    device: Option<&DeviceMetrics>,
    host: Option<&HostMetrics>,
) {
    if limiter.is_none() && limits.is_none() {
        return;
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "What limited this run");
    if let Some(v) = limiter {
        let _ = writeln!(o, "  limited by {}", v.line);
        for e in &v.evidence {
            let _ = writeln!(
                o,
                "    {}: {} {} ({})",
                e.figure,
                number(e.value),
                e.unit,
                e.source
            );
        }
        for m in &v.missing {
            let _ = writeln!(o, "    not measured: {m}");
        }
    }
    let Some(l) = limits else {
        return;
    };
    if let Some(r) = &l.residency {
        residency(o, engine, r, device, host);
    }
    if let Some(c) = &l.caps {
        let _ = writeln!(
            o,
            "  I/O caps: cgroup {} {} on device {} ({})",
            c.cgroup_version,
            c.cgroup,
            c.device.as_deref().unwrap_or("-"),
            c.source
        );
        if c.limits.is_empty() {
            let _ = writeln!(o, "    no I/O limit is set on it or its ancestors");
        }
        for lim in &c.limits {
            let value = if lim.kind.ends_with("bps") {
                format!("{:.1} MiB/s", lim.value as f64 / 1048576.0)
            } else {
                format!("{} IOPS", lim.value)
            };
            let _ = writeln!(
                o,
                "    {} {value} ({} of {})",
                lim.kind, lim.file, lim.cgroup
            );
        }
        let _ = writeln!(
            o,
            "    the cgroup's own I/O on the device: {} reads/s, {} writes/s; I/O pressure some {}%, full {}% of the window",
            opt(c.read_ios_per_s, 1),
            opt(c.write_ios_per_s, 1),
            opt(c.pressure_some_pct, 1),
            opt(c.pressure_full_pct, 1)
        );
        for n in &c.notes {
            let _ = writeln!(o, "    note: {n}");
        }
    }
    if let Some(c) = &l.client_cpu {
        let _ = writeln!(
            o,
            "  client CPU ({}): {} cores {:.1}% busy (per core {}); dbio itself {} cores",
            c.source,
            c.cores,
            c.busy_pct,
            per_core(&c.per_core_busy_pct),
            opt(c.dbio_cores, 2)
        );
    }
    if let Some(c) = &l.server_cpu {
        let _ = writeln!(
            o,
            "  server CPU ({}): {} cores {:.1}% busy (per core {}); the server's processes {} cores",
            c.source,
            c.cores,
            c.busy_pct,
            per_core(&c.per_core_busy_pct),
            opt(c.server_cores, 2)
        );
        for n in &c.notes {
            let _ = writeln!(o, "    note: {n}");
        }
    }
    if let Some(q) = &l.outstanding {
        let _ = writeln!(
            o,
            "  outstanding I/O for {} sessions: device queue (aqu-sz) {}, reads in flight at the device {} \
             (Little's law: reads/s x read wait), reads the sessions waited on {} (database read requests/s x timed wait){}",
            q.sessions,
            opt(q.device_queue_depth, 2),
            opt(q.device_reads_in_flight, 2),
            opt(q.db_reads_in_flight, 2),
            q.aio
                .as_ref()
                .map(|a| format!(
                    "; asynchronous I/O handles in flight ({}): mean {:.2}, max {} over {} samples",
                    a.source, a.mean_in_flight, a.max_in_flight, a.samples
                ))
                .unwrap_or_default()
        );
        for n in &q.notes {
            let _ = writeln!(o, "    note: {n}");
        }
    }
    for (part, why) in &l.null_reasons {
        let _ = writeln!(o, "  {part} is null: {why}");
    }
}

fn per_core(v: &[f64]) -> String {
    v.iter()
        .enumerate()
        .map(|(i, p)| format!("cpu{i} {p:.0}%"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn number(v: f64) -> String {
    if v.abs() >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// `n (p%)` of `blocks`, `-` when unknown.
fn count(n: Option<u64>, blocks: u64) -> String {
    match n {
        Some(n) if blocks > 0 => format!("{n} ({:.0}%)", 100.0 * n as f64 / blocks as f64),
        Some(n) => n.to_string(),
        None => "-".into(),
    }
}

fn before_after(a: Option<u64>, b: Option<u64>, blocks: u64) -> String {
    format!("{} -> {}", count(a, blocks), count(b, blocks))
}

fn residency(
    o: &mut String,
    engine: Database,
    r: &Residency,
    device: Option<&DeviceMetrics>,
    host: Option<&HostMetrics>,
) {
    let cache = match engine {
        Database::Postgres => "shared_buffers",
        Database::Oracle => "buffer cache",
    };
    let _ = writeln!(
        o,
        "  cache residency (blocks of {} B; before -> after the window; {cache}: {}; page cache: {}; both: {})",
        r.block_size,
        r.shared_buffers_source.as_deref().unwrap_or("not read"),
        r.page_cache_source.as_deref().unwrap_or("not read"),
        r.both_source.as_deref().unwrap_or("not read")
    );
    let _ = writeln!(
        o,
        "    {:<24} {:<6} {:>9}  {:<25} {:<25} {:<25}",
        "relation", "kind", "blocks", cache, "page cache", "both"
    );
    let line =
        |o: &mut String, name: &str, kind: &str, blocks: u64, b: &CacheCounts, a: &CacheCounts| {
            let _ = writeln!(
                o,
                "    {name:<24} {kind:<6} {blocks:>9}  {:<25} {:<25} {:<25}",
                before_after(b.shared_buffers_blocks, a.shared_buffers_blocks, blocks),
                before_after(b.page_cache_blocks, a.page_cache_blocks, blocks),
                before_after(b.both_blocks, a.both_blocks, blocks)
            );
        };
    for rel in &r.relations {
        line(
            o,
            &rel.relation,
            rel.kind.as_str(),
            rel.blocks,
            &rel.before,
            &rel.after,
        );
    }
    if r.relations.len() > 1 {
        for (name, kind) in [
            ("tables", Some(RelationKind::Table)),
            ("indexes", Some(RelationKind::Index)),
            ("all", None),
        ] {
            let t = r.totals(kind);
            line(o, name, "", t.blocks, &t.before, &t.after);
        }
    }
    // What the residency says of the physical-read ratio.
    let t = r.totals(None);
    let at = |c: &CacheCounts, e: Option<f64>| {
        format!(
            "{} of the data set's blocks in {cache}, {} in the page cache (a read that misses {cache} reaches the device with probability {})",
            t.pct(c.shared_buffers_blocks)
                .map(|p| format!("{p:.0}%"))
                .unwrap_or_else(|| "-".into()),
            t.pct(c.page_cache_blocks)
                .map(|p| format!("{p:.0}%"))
                .unwrap_or_else(|| "-".into()),
            opt(e, 2)
        )
    };
    let (start, end) = (
        r.expected_physical_ratio(),
        r.expected_physical_ratio_after(),
    );
    if start.is_some() || end.is_some() {
        let measured: Vec<String> = [
            device
                .and_then(|d| d.physical_read_ratio)
                .map(|v| format!("{v:.2} by the device's reads")),
            host.and_then(|h| h.physical_read_ratio)
                .map(|v| format!("{v:.2} by the backends' own counters")),
        ]
        .into_iter()
        .flatten()
        .collect();
        let _ = writeln!(
            o,
            "    physical-read ratio: at the window's start {}; at its end {}; measured {}",
            at(&t.before, start),
            at(&t.after, end),
            if measured.is_empty() {
                "nothing (no device or backend figures)".to_string()
            } else {
                measured.join(", ")
            }
        );
        let moved = t
            .pct(t.before.page_cache_blocks)
            .zip(t.pct(t.after.page_cache_blocks))
            .map(|(a, b)| b - a);
        match moved {
            Some(d) if d >= 20.0 => {
                let _ = writeln!(
                    o,
                    "    the page cache filled during the window (+{d:.0} points): the reads warmed it, so the ratio lies between the two"
                );
            }
            Some(d) if d <= -20.0 => {
                let _ = writeln!(
                    o,
                    "    the page cache emptied during the window ({d:.0} points): memory pressure, or a cache drop on the server's host"
                );
            }
            _ => {}
        }
    }
    for n in &r.notes {
        let _ = writeln!(o, "    note: {n}");
    }
}
