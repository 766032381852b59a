//! The SLOB data set, engine-neutral: which schemas, how many blocks each, whether the total is
//! big enough to make reads physical, and the loader's progress events and summary.

use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::DataConfig;
use crate::units::{SizeSpec, format_bytes};

/// Rows of each schema of `data` on a server whose blocks are `block_size` bytes: the one
/// place a scale becomes rows, for setup, check, list and run alike. One row per block, so a
/// scale in bytes is counted in the server's own blocks: `64MB` is 8192 rows with
/// PostgreSQL's default 8 kB blocks and 4096 on a server built with 16 kB ones.
pub fn rows_per_schema(data: &DataConfig, block_size: u64) -> u64 {
    scale_rows(data.scale, block_size)
}

/// Rows (blocks) a scale asked for means on a server of `block_size`-byte blocks; see
/// [`rows_per_schema`].
pub fn scale_rows(scale: SizeSpec, block_size: u64) -> u64 {
    scale.to_blocks(block_size)
}

/// What setup builds: `schemas` schemas of `scale_blocks` rows, one row per block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataSetPlan {
    pub prefix: String,
    pub schemas: u32,
    pub scale_blocks: u64,
    pub block_size: u64,
    pub tablespace: Option<String>,
    pub parallel: u32,
    pub seed: u64,
}

impl DataSetPlan {
    /// The plan of `data` in blocks of `block_size` bytes, the server's own (a command asks
    /// its backend with [`crate::backend::data_set_plan`]).
    pub fn new(data: &DataConfig, block_size: u64) -> Self {
        DataSetPlan {
            prefix: data.prefix.clone(),
            schemas: data.schemas,
            scale_blocks: rows_per_schema(data, block_size),
            block_size,
            tablespace: data.tablespace.clone(),
            parallel: data.parallel,
            seed: data.seed,
        }
    }

    /// Schema names `<prefix>1..<prefix>N`.
    pub fn schema_names(&self) -> Vec<String> {
        (1..=self.schemas)
            .map(|i| schema_name(&self.prefix, i))
            .collect()
    }

    /// Heap bytes of the whole data set (tables only; indexes add about 2%).
    pub fn table_bytes(&self) -> u64 {
        self.scale_blocks
            .saturating_mul(self.block_size)
            .saturating_mul(self.schemas as u64)
    }

    /// Seed of one schema's physical key order: distinct per schema, fixed by the plan's seed.
    pub fn schema_seed(&self, index: u32) -> u64 {
        self.seed
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(index as u64)
    }
}

pub fn schema_name(prefix: &str, index: u32) -> String {
    format!("{prefix}{index}")
}

/// The RAM the server's page cache may use: its host's (MemTotal), or the limit of its
/// memory cgroup when that is lower (a container's memory cap), which the kernel enforces on
/// the page cache the server's reads fill as on the rest of its memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerRam {
    pub bytes: u64,
    /// The database host's RAM (/proc/meminfo MemTotal).
    pub host_bytes: u64,
    /// The cgroup file `bytes` was read from, when the server's memory is capped below the
    /// host's RAM (memory.max on cgroup v2, memory.limit_in_bytes on v1).
    pub cgroup_file: Option<String>,
}

impl ServerRam {
    /// The host's RAM, capped at `cap` (bytes, file) when that is lower.
    pub fn new(host_bytes: u64, cap: Option<(u64, String)>) -> ServerRam {
        match cap {
            Some((bytes, file)) if bytes < host_bytes => ServerRam {
                bytes,
                host_bytes,
                cgroup_file: Some(file),
            },
            _ => ServerRam {
                bytes: host_bytes,
                host_bytes,
                cgroup_file: None,
            },
        }
    }

    /// "the database host's RAM (23.5 GiB)", or the cap and where it was read.
    pub fn describe(&self) -> String {
        match &self.cgroup_file {
            None => format!("the database host's RAM ({})", format_bytes(self.bytes)),
            Some(file) => format!(
                "the server's memory cap ({}, its cgroup's {file}; the host has {})",
                format_bytes(self.bytes),
                format_bytes(self.host_bytes)
            ),
        }
    }
}

/// Whether a data set of `data_bytes` will be read from storage, judged against the database
/// buffer cache and (when the database host's can be read) the RAM that the OS page cache can use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizingVerdict {
    pub data_bytes: u64,
    pub shared_buffers_bytes: u64,
    /// The RAM the server's page cache may use (its memory cap when capped), when known.
    pub host_ram_bytes: Option<u64>,
    /// Set when `host_ram_bytes` is the server's memory cgroup limit: the file it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ram_cgroup_file: Option<String>,
    pub warnings: Vec<String>,
}

/// Reads below this multiple of shared_buffers are mostly buffer hits, not reads.
pub const MIN_BUFFER_MULTIPLE: u64 = 4;

/// Total RAM of this host from /proc/meminfo, if readable.
pub fn host_ram_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_meminfo_total(&text)
}

fn parse_meminfo_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// What `dbio setup` is asked beyond the data set itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SetupAsk {
    /// Rebuild dbio's complete schemas too.
    pub force: bool,
    /// Drop the user's objects that depend on a table setup rebuilds (without it they stop
    /// setup before anything changes); a backend that never drops them refuses it.
    pub drop_dependents: bool,
}

/// Progress of a load, reported by a backend's loader; the CLI draws bars from it.
pub trait LoadObserver: Send + Sync {
    /// A schema's load begins; `rows` rows of about `row_bytes` each will follow.
    fn schema_started(&self, schema: &str, rows: u64);
    /// `rows` more rows of `schema` reached the server.
    fn rows_loaded(&self, schema: &str, rows: u64);
    /// A phase after the copy (index build, vacuum) begins.
    fn schema_phase(&self, schema: &str, phase: &str);
    fn schema_finished(&self, schema: &str, outcome: &SchemaOutcome);
    /// A free-text note for the user (skips, warnings).
    fn note(&self, text: &str);
}

/// An observer that ignores everything (tests and quiet mode).
pub struct NoProgress;

impl LoadObserver for NoProgress {
    fn schema_started(&self, _: &str, _: u64) {}
    fn rows_loaded(&self, _: &str, _: u64) {}
    fn schema_phase(&self, _: &str, _: &str) {}
    fn schema_finished(&self, _: &str, _: &SchemaOutcome) {}
    fn note(&self, _: &str) {}
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SchemaAction {
    /// Loaded now.
    Loaded,
    /// Already complete with the requested scale; left as it was.
    Kept,
}

/// What setup did to one schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SchemaOutcome {
    pub schema: String,
    pub action: SchemaAction,
    pub rows: u64,
    pub table_bytes: u64,
    pub index_bytes: u64,
    /// Seconds spent on this schema (copy, index, vacuum); 0 when kept.
    pub seconds: f64,
}

/// Setup's summary: one line per schema and the totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadSummary {
    pub schemas: Vec<SchemaOutcome>,
    /// Wall-clock seconds of the whole setup, including the final checkpoint.
    pub seconds: f64,
    pub sizing: SizingVerdict,
}

impl LoadSummary {
    pub fn loaded_table_bytes(&self) -> u64 {
        self.schemas
            .iter()
            .filter(|s| s.action == SchemaAction::Loaded)
            .map(|s| s.table_bytes)
            .sum()
    }

    /// Heap MB/s of what was loaded now, over the whole setup's wall-clock time.
    pub fn mb_per_s(&self) -> f64 {
        if self.seconds <= 0.0 {
            return 0.0;
        }
        self.loaded_table_bytes() as f64 / (1 << 20) as f64 / self.seconds
    }

    pub fn render_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<16} {:>8} {:>12} {:>12} {:>10}  action",
            "schema", "rows", "table MiB", "index MiB", "seconds"
        );
        for s in &self.schemas {
            let _ = writeln!(
                out,
                "{:<16} {:>8} {:>12.1} {:>12.1} {:>10.1}  {}",
                s.schema,
                s.rows,
                s.table_bytes as f64 / (1 << 20) as f64,
                s.index_bytes as f64 / (1 << 20) as f64,
                s.seconds,
                match s.action {
                    SchemaAction::Loaded => "loaded",
                    SchemaAction::Kept => "kept (already complete)",
                }
            );
        }
        let rows: u64 = self.schemas.iter().map(|s| s.rows).sum();
        let table: u64 = self.schemas.iter().map(|s| s.table_bytes).sum();
        let index: u64 = self.schemas.iter().map(|s| s.index_bytes).sum();
        let _ = writeln!(
            out,
            "{:<16} {:>8} {:>12.1} {:>12.1} {:>10.1}",
            format!("total ({})", self.schemas.len()),
            rows,
            table as f64 / (1 << 20) as f64,
            index as f64 / (1 << 20) as f64,
            self.seconds
        );
        let loaded = self.loaded_table_bytes();
        if loaded > 0 {
            let _ = writeln!(
                out,
                "loaded {} of table data in {:.1} s: {:.1} MiB/s (heap bytes over wall-clock time, incl. index build, VACUUM and CHECKPOINT)",
                format_bytes(loaded),
                self.seconds,
                self.mb_per_s()
            );
        }
        for w in &self.sizing.warnings {
            let _ = writeln!(out, "WARNING: {w}");
        }
        out
    }
}

/// `check`'s verdict on one schema: what was measured and every mismatch found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SchemaCheck {
    pub schema: String,
    /// What was verified, for the one-line report ("rows 4000/4000, blocks 4000, ...").
    pub facts: Vec<String>,
    /// Mismatches; empty means the schema is fit to run against.
    pub problems: Vec<String>,
}

impl SchemaCheck {
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckReport {
    pub schemas: Vec<SchemaCheck>,
    /// What a run as this role will lack, and the GRANT for each (the run's own list);
    /// empty where the backend does not tell.
    #[serde(default)]
    pub missing_rights: Vec<crate::stats::dbstats::MissingRight>,
}

impl CheckReport {
    pub fn ok(&self) -> bool {
        self.schemas.iter().all(SchemaCheck::ok)
    }

    pub fn failed(&self) -> Vec<&str> {
        self.schemas
            .iter()
            .filter(|s| !s.ok())
            .map(|s| s.schema.as_str())
            .collect()
    }

    /// One line per schema: `user1  ok    rows 4000/4000, ...` or `user2  FAIL  <problems>`.
    pub fn render_text(&self) -> String {
        let width = self
            .schemas
            .iter()
            .map(|s| s.schema.len())
            .max()
            .unwrap_or(6)
            .max(6);
        let mut out = String::new();
        for s in &self.schemas {
            if s.ok() {
                let _ = writeln!(out, "{:<width$}  ok    {}", s.schema, s.facts.join(", "));
            } else {
                let _ = writeln!(out, "{:<width$}  FAIL  {}", s.schema, s.problems.join("; "));
            }
        }
        let failed = self.failed();
        if failed.is_empty() {
            let _ = writeln!(
                out,
                "check passed: {} schema(s) fit to run against",
                self.schemas.len()
            );
        } else {
            let _ = writeln!(out, "check FAILED for {}", failed.join(", "));
        }
        out.push_str(&crate::report::render_missing_rights(&self.missing_rights));
        out
    }
}

/// A duration in seconds with millisecond precision, for summaries.
pub fn secs(d: Duration) -> f64 {
    (d.as_millis() as f64) / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_names_and_sizes() {
        let data = DataConfig {
            schemas: 2,
            scale: SizeSpec::Bytes(32 << 20),
            ..DataConfig::default()
        };
        let plan = DataSetPlan::new(&data, 8192);
        assert_eq!(plan.schema_names(), vec!["user1", "user2"]);
        assert_eq!(plan.scale_blocks, 4096);
        assert_eq!(plan.table_bytes(), 64 << 20);
        assert_ne!(plan.schema_seed(1), plan.schema_seed(2));
    }

    #[test]
    fn meminfo_is_parsed() {
        let text = "MemTotal:       24603648 kB\nMemFree:        1 kB\n";
        assert_eq!(parse_meminfo_total(text), Some(24603648 * 1024));
        assert_eq!(parse_meminfo_total("nothing"), None);
    }

    #[test]
    fn summary_counts_only_loaded_bytes() {
        let s = LoadSummary {
            schemas: vec![
                SchemaOutcome {
                    schema: "user1".into(),
                    action: SchemaAction::Loaded,
                    rows: 4000,
                    table_bytes: 10 << 20,
                    index_bytes: 1 << 20,
                    seconds: 1.0,
                },
                SchemaOutcome {
                    schema: "user2".into(),
                    action: SchemaAction::Kept,
                    rows: 4000,
                    table_bytes: 10 << 20,
                    index_bytes: 1 << 20,
                    seconds: 0.0,
                },
            ],
            seconds: 2.0,
            sizing: SizingVerdict {
                data_bytes: 20 << 20,
                shared_buffers_bytes: 16 << 20,
                host_ram_bytes: None,
                ram_cgroup_file: None,
                warnings: vec!["the data set (20.0 MiB) is smaller than the buffer cache".into()],
            },
        };
        assert_eq!(s.loaded_table_bytes(), 10 << 20);
        assert!((s.mb_per_s() - 5.0).abs() < 1e-9);
        let text = s.render_text();
        assert!(text.contains("kept (already complete)"));
        assert!(text.contains("5.0 MiB/s"));
        assert!(text.contains("WARNING"));
    }
}
