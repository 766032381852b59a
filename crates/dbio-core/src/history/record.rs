//! What the results store keeps of a run or a ramp: its identity (label, build tag, host,
//! server version and settings, data set, workload shape), its figures per step, and a
//! content hash of the whole document (so the same result is never added twice).

use std::collections::BTreeMap;

use chrono::{DateTime, SubsecRound, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::driver::RunStatus;
use crate::history::HistoryError;
use crate::result::{RESULT_FORMAT, RunResult};
use crate::summary::{RampResult, StepSummary, summarize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecordKind {
    /// A `dbio run` result.json.
    Run,
    /// A `dbio ramp` ramp.json.
    Ramp,
    /// A `dbio calibrate` calibrate.json: the raw device, the platform canary.
    Calibrate,
}

impl RecordKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RecordKind::Run => "run",
            RecordKind::Ramp => "ramp",
            RecordKind::Calibrate => "calibrate",
        }
    }

    pub fn parse(s: &str) -> Option<RecordKind> {
        match s {
            "run" => Some(RecordKind::Run),
            "ramp" => Some(RecordKind::Ramp),
            "calibrate" => Some(RecordKind::Calibrate),
            _ => None,
        }
    }
}

/// Who and what a run was. Runs of one series share `label` and `shape`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Identity {
    /// The run's or ramp's label; `unlabelled` when it had none.
    pub label: String,
    /// `label [shape hash]`: the runs that are comparable with each other.
    pub series: String,
    /// The workload shape and environment that must match for runs to be compared: engine,
    /// loop engine, window, work units, think time, hot spot, data set, server major version
    /// and the server settings dbio records. Not the host name or the target's address:
    /// CI runners and scratch clusters change those every night.
    pub shape: Value,
    /// Build id: `--tag`, else `$DBIO_TAG`, else `$GITHUB_SHA`.
    pub tag: Option<String>,
    /// Where the tag came from: `--tag`, `DBIO_TAG` or `GITHUB_SHA`.
    pub tag_source: Option<String>,
    /// Host that ran dbio.
    pub host: String,
    /// The target, redacted (never a password).
    pub target: String,
    pub server_version: String,
    pub server_version_num: i64,
    pub settings: BTreeMap<String, Option<String>>,
    /// The data set as result.json's environment.data_set.
    pub data_set: Value,
    pub dbio_version: String,
}

/// The figures of one step that history tracks, null where the run could not measure them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepFigures {
    /// `r4-w0` style.
    pub step: String,
    pub readers: u32,
    pub writers: u32,
    pub update_pct: u32,
    pub status: RunStatus,
    pub repeats: u32,
    pub elapsed_s: f64,
    pub db_read_iops: Option<f64>,
    pub db_write_iops: Option<f64>,
    pub device_read_iops: Option<f64>,
    pub client_ops_per_s: Option<f64>,
    pub client_read_p50_us: Option<f64>,
    pub client_read_p99_us: Option<f64>,
    pub db_avg_read_latency_us: Option<f64>,
    /// The device's average read time (iostat r_await) in µs; a calibration's mean small-I/O
    /// latency.
    #[serde(default)]
    pub device_read_latency_us: Option<f64>,
    /// Device reads / database reads (result.json device.physical_read_ratio; a ramp step:
    /// the mean over its repeats).
    #[serde(default)]
    pub physical_read_ratio: Option<f64>,
    /// The step's reads mostly did not reach storage: its physical-read ratio is under 0.5
    /// (the device's, or the backends' own `/proc/<pid>/io`), as the run's page-cache warning
    /// says. Null when the run could not tell (no device or host figures).
    #[serde(default)]
    pub cache_served: Option<bool>,
    /// An open loop's intended starts per second (the step's `rate_per_s`); null for a
    /// closed loop.
    #[serde(default)]
    pub rate_per_s: Option<u64>,
    /// False: the step's window opened without its steady-state rule holding (or its
    /// preconditioning ended at the cap); such a run stays out of the series' judgement.
    /// Null without a rule.
    #[serde(default)]
    pub steady: Option<bool>,
}

/// One recorded run or ramp, without its document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub kind: RecordKind,
    pub identity: Identity,
    /// `ok`, `failed` or `interrupted`; only `ok` runs (and `ok` steps) enter a series.
    pub status: RunStatus,
    pub started: DateTime<Utc>,
    pub finished: DateTime<Utc>,
    pub steps: Vec<StepFigures>,
    /// SHA-256 (hex) of the document's canonical JSON (keys sorted, no whitespace).
    pub content_sha256: String,
}

/// A run as the store returns it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredRun {
    pub id: i64,
    pub recorded_at: DateTime<Utc>,
    pub record: RunRecord,
}

impl StepFigures {
    /// A step's figures; `host_ratio` is the backends' own physical-read ratio
    /// (result.json host.physical_read_ratio) where the document has it.
    fn of(s: &StepSummary, host_ratio: Option<f64>) -> StepFigures {
        let mean = |v: &Option<crate::summary::Stat>| v.as_ref().map(|s| s.mean);
        // The same evidence as the run's warnings (the PostgreSQL collector's cache_warnings
        // and stats::dbstats::host_cache_warnings): a ratio under 0.5, or the warning itself in a ramp step.
        let ratios = [s.physical_read_ratio, host_ratio];
        let warned = s
            .warnings
            .iter()
            .any(|w| w.contains("page cache served the rest"));
        let cache_served = if warned
            || ratios
                .iter()
                .any(|r| r.is_some_and(|r| r < crate::stats::dbstats::MIN_PHYSICAL_RATIO))
        {
            Some(true)
        } else if ratios.iter().any(Option::is_some) {
            Some(false)
        } else {
            None
        };
        StepFigures {
            step: s.step.clone(),
            readers: s.key.readers,
            writers: s.key.writers,
            update_pct: s.key.update_pct,
            status: s.status,
            repeats: s.repeats,
            elapsed_s: s.elapsed_s,
            db_read_iops: mean(&s.db_read_iops),
            db_write_iops: mean(&s.db_write_iops),
            device_read_iops: mean(&s.device_read_iops),
            client_ops_per_s: Some(s.client_ops_per_s.mean),
            client_read_p50_us: mean(&s.client_read_p50_us),
            client_read_p99_us: mean(&s.client_read_p99_us),
            db_avg_read_latency_us: mean(&s.db_avg_read_latency_us),
            device_read_latency_us: None,
            physical_read_ratio: s.physical_read_ratio,
            cache_served,
            rate_per_s: s.key.rate_per_s,
            steady: s.steady,
        }
    }
}

/// The build id of a run being recorded: the flag, else `$DBIO_TAG`, else `$GITHUB_SHA`.
/// Returns (tag, where it came from).
pub fn resolve_tag(
    flag: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> Option<(String, String)> {
    if let Some(t) = flag.filter(|t| !t.is_empty()) {
        return Some((t.to_string(), "--tag".into()));
    }
    ["DBIO_TAG", "GITHUB_SHA"].iter().find_map(|name| {
        env(name)
            .filter(|v| !v.trim().is_empty())
            .map(|v| (v.trim().to_string(), name.to_string()))
    })
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The JSON of a value with object keys in sorted order at every level (serde_json may be
/// built to keep insertion order, so this does not rely on its map type).
fn canonical_json(v: &Value) -> String {
    fn write(v: &Value, o: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                o.push('{');
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        o.push(',');
                    }
                    o.push_str(&Value::String((*k).clone()).to_string());
                    o.push(':');
                    write(&m[*k], o);
                }
                o.push('}');
            }
            Value::Array(a) => {
                o.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        o.push(',');
                    }
                    write(x, o);
                }
                o.push(']');
            }
            other => o.push_str(&other.to_string()),
        }
    }
    let mut o = String::new();
    write(v, &mut o);
    o
}

/// The shape of a run: what must be equal for two runs to be compared. `run_time` is the
/// step's (a ramp's `ramp.run_time` overrides `run.run_time`).
fn shape_of(
    config: &crate::Config,
    run_time: Option<String>,
    environment: Option<&crate::result::Environment>,
) -> Value {
    let r = &config.run;
    let json = |v: Result<Value, serde_json::Error>| v.unwrap_or(Value::Null);
    let window = if r.work_loop > 0 {
        format!("work_loop {}", r.work_loop)
    } else {
        format!(
            "run_time {}",
            run_time.unwrap_or_else(|| r.run_time.to_string())
        )
    };
    let mut shape = serde_json::json!({
        "engine": json(serde_json::to_value(config.engine)),
        "run_engine": json(serde_json::to_value(r.engine)),
        "window": window,
        "warmup": r.warmup.to_string(),
        "work_unit": r.work_unit,
        "update_work_unit": r.update_work_unit,
        "redo_stress": json(serde_json::to_value(r.redo_stress)),
        "hot_spot": json(serde_json::to_value(&r.hot_spot)),
        "think_time": json(serde_json::to_value(&r.think_time)),
        "hot_schema": r.hot_schema,
    });
    // An open loop's latency counts from the intended starts: another series than a
    // closed loop's (its rate is the step's). Absent for a closed loop, as before.
    if r.rate.is_some() {
        shape["arrival"] = json(serde_json::to_value(r.arrival));
    }
    if let Some(e) = environment {
        shape["data_set"] = serde_json::json!({
            "schemas": e.data_set.schemas,
            "scale_blocks": e.data_set.scale_blocks,
            "block_size": e.data_set.block_size,
        });
        shape["server_major"] = Value::from(e.server_version_num / 10_000);
        shape["settings"] = json(serde_json::to_value(&e.settings));
    }
    shape
}

fn doc_error(source: &str, message: impl Into<String>) -> HistoryError {
    HistoryError::Document {
        source_name: source.to_string(),
        message: message.into(),
    }
}

/// Reads a result.json or ramp.json document (`source` names it in errors) into the record
/// the store keeps. `tag` is the resolved build id and where it came from.
pub fn parse_document(
    text: &str,
    source: &str,
    tag: Option<(String, String)>,
) -> Result<RunRecord, HistoryError> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| doc_error(source, format!("not a dbio result (invalid JSON: {e})")))?;
    match value.get("format").and_then(Value::as_u64) {
        Some(f) if f > RESULT_FORMAT as u64 => {
            return Err(doc_error(
                source,
                format!(
                    "format {f} is newer than this dbio understands ({RESULT_FORMAT}); use a newer dbio"
                ),
            ));
        }
        None => {
            return Err(doc_error(
                source,
                "not a dbio result.json or ramp.json (no \"format\" field)",
            ));
        }
        _ => {}
    }
    let content_sha256 = sha256_hex(canonical_json(&value).as_bytes());
    if value.get("kind").and_then(Value::as_str) == Some("calibrate") {
        return parse_calibration(&value, source, tag, content_sha256);
    }
    let is_ramp = value.get("kind").and_then(Value::as_str) == Some("ramp");
    let (kind, status, started, finished, config, environment, label, steps) = if is_ramp {
        let ramp: RampResult = serde_json::from_value(value)
            .map_err(|e| doc_error(source, format!("not a valid dbio ramp: {e}")))?;
        let steps: Vec<StepFigures> = ramp
            .steps
            .iter()
            .map(|s| StepFigures::of(s, None))
            .collect();
        (
            RecordKind::Ramp,
            ramp.status,
            ramp.started,
            ramp.finished,
            ramp.config,
            ramp.environment,
            ramp.label,
            steps,
        )
    } else {
        let run: RunResult = serde_json::from_value(value)
            .map_err(|e| doc_error(source, format!("not a valid dbio result: {e}")))?;
        let host_ratio = run.host.as_ref().and_then(|h| h.physical_read_ratio);
        let device_latency = run
            .device
            .as_ref()
            .and_then(|d| d.avg_read_wait_ms)
            .map(|ms| ms * 1000.0);
        let steps: Vec<StepFigures> = summarize(std::slice::from_ref(&run), vec![])
            .map(|s| StepFigures {
                device_read_latency_us: device_latency,
                ..StepFigures::of(&s, host_ratio)
            })
            .into_iter()
            .collect();
        (
            RecordKind::Run,
            run.status,
            run.window.start,
            run.window.end,
            run.config,
            Some(run.environment),
            run.label,
            steps,
        )
    };
    if steps.is_empty() {
        return Err(doc_error(source, "the document holds no step to record"));
    }
    let run_time = is_ramp
        .then(|| config.ramp.run_time.map(|d| d.to_string()))
        .flatten();
    let shape = shape_of(&config, run_time, environment.as_ref());
    let label = label.unwrap_or_else(|| "unlabelled".into());
    let series = series_key(&label, &shape);
    let (tag, tag_source) = match tag {
        Some((t, s)) => (Some(t), Some(s)),
        None => (None, None),
    };
    let e = environment.as_ref();
    Ok(RunRecord {
        kind,
        identity: Identity {
            label,
            series,
            shape,
            tag,
            tag_source,
            host: e.map(|e| e.client_host.clone()).unwrap_or_default(),
            target: e.map(|e| e.target.clone()).unwrap_or_default(),
            server_version: e.map(|e| e.server_version.clone()).unwrap_or_default(),
            server_version_num: e.map(|e| e.server_version_num).unwrap_or_default(),
            settings: e.map(|e| e.settings.clone()).unwrap_or_default(),
            data_set: e
                .and_then(|e| serde_json::to_value(&e.data_set).ok())
                .unwrap_or(Value::Null),
            dbio_version: e
                .map(|e| e.dbio_version.clone())
                .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_string()),
        },
        status,
        // Stores keep microseconds (PostgreSQL's timestamptz), so the record does too.
        started: started.trunc_subsecs(6),
        finished: finished.trunc_subsecs(6),
        steps,
        content_sha256,
    })
}

/// The label of every calibration's series: the platform canary.
pub const PLATFORM_LABEL: &str = "platform";

/// What of a shape splits series: the workload and the data set. The server's major version
/// and settings are kept in the shape (and shown) but are events on a series, not a new one
/// (an upgrade with a drop must be compared, not hidden in a new flat series).
pub fn series_key(label: &str, shape: &Value) -> String {
    let mut comparable = shape.clone();
    if let Value::Object(m) = &mut comparable {
        m.remove("server_major");
        m.remove("settings");
    }
    format!(
        "{label} [{}]",
        &sha256_hex(canonical_json(&comparable).as_bytes())[..8]
    )
}

/// A calibrate.json (read as JSON: dbio-calibrate's model depends on core, not the other
/// way): one step per load level, `q<level>`, with the small I/Os' IOPS and mean latency as
/// the device's figures.
fn parse_calibration(
    value: &Value,
    source: &str,
    tag: Option<(String, String)>,
    content_sha256: String,
) -> Result<RunRecord, HistoryError> {
    let text = |k: &str| value.get(k).and_then(Value::as_str).map(str::to_string);
    let time = |k: &str| {
        text(k)
            .and_then(|t| DateTime::parse_from_rfc3339(&t).ok())
            .map(|t| t.with_timezone(&Utc).trunc_subsecs(6))
    };
    let (Some(started), Some(finished)) = (time("started"), time("finished")) else {
        return Err(doc_error(
            source,
            "this calibrate.json has no start and end time (written by an older dbio): run `dbio calibrate` again to record the device",
        ));
    };
    let seconds = value
        .get("seconds_per_point")
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    let write_pct = value.get("write_pct").and_then(Value::as_u64).unwrap_or(0) as u32;
    let points = value
        .get("points")
        .and_then(Value::as_array)
        .ok_or_else(|| doc_error(source, "not a valid dbio calibrate.json: no points"))?;
    let mut steps = Vec::with_capacity(points.len());
    for p in points {
        let level = p.get("level").and_then(Value::as_u64).ok_or_else(|| {
            doc_error(
                source,
                "not a valid dbio calibrate.json: a point has no level",
            )
        })? as u32;
        let iops = p.get("small_iops").and_then(Value::as_f64);
        let mean_us = p
            .get("small_latency_us")
            .and_then(|l| l.get("mean"))
            .and_then(Value::as_f64);
        steps.push(StepFigures {
            step: format!("q{level}"),
            readers: level,
            writers: 0,
            update_pct: write_pct,
            status: RunStatus::Ok,
            repeats: 1,
            elapsed_s: seconds,
            db_read_iops: None,
            db_write_iops: None,
            device_read_iops: iops,
            client_ops_per_s: None,
            client_read_p50_us: None,
            client_read_p99_us: None,
            db_avg_read_latency_us: None,
            device_read_latency_us: mean_us,
            physical_read_ratio: None,
            cache_served: Some(false),
            rate_per_s: None,
            steady: None,
        });
    }
    if steps.is_empty() {
        return Err(doc_error(
            source,
            "the calibration holds no load level to record",
        ));
    }
    let pick = |k: &str| value.get(k).cloned().unwrap_or(Value::Null);
    let shape = serde_json::json!({
        "kind": "calibrate",
        "path": pick("path"),
        "device_kind": pick("device_kind"),
        "size_bytes": pick("size_bytes"),
        "block_bytes": pick("block_bytes"),
        "large_bytes": pick("large_bytes"),
        "engine": pick("engine"),
        "direct_io": pick("direct_io"),
        "write_pct": pick("write_pct"),
        "seconds_per_point": pick("seconds_per_point"),
    });
    let (tag, tag_source) = match tag {
        Some((t, s)) => (Some(t), Some(s)),
        None => (None, None),
    };
    Ok(RunRecord {
        kind: RecordKind::Calibrate,
        identity: Identity {
            label: PLATFORM_LABEL.into(),
            series: series_key(PLATFORM_LABEL, &shape),
            shape,
            tag,
            tag_source,
            host: text("host").unwrap_or_default(),
            target: text("path").unwrap_or_default(),
            server_version: String::new(),
            server_version_num: 0,
            settings: BTreeMap::new(),
            data_set: Value::Null,
            dbio_version: text("dbio_version")
                .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_string()),
        },
        status: RunStatus::Ok,
        started,
        finished,
        steps,
        content_sha256,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_ignores_key_order_and_whitespace() {
        let a: Value = serde_json::from_str(r#"{"b": 1, "a": {"y": [1, 2], "x": null}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":{"x":null,"y":[1,2]},"b":1}"#).unwrap();
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(canonical_json(&a), r#"{"a":{"x":null,"y":[1,2]},"b":1}"#);
        let c: Value = serde_json::from_str(r#"{"a":{"x":null,"y":[2,1]},"b":1}"#).unwrap();
        assert_ne!(
            sha256_hex(canonical_json(&a).as_bytes()),
            sha256_hex(canonical_json(&c).as_bytes())
        );
    }

    #[test]
    fn the_tag_comes_from_the_flag_then_dbio_tag_then_github_sha() {
        let env = |k: &str| match k {
            "DBIO_TAG" => Some("v1.2".to_string()),
            "GITHUB_SHA" => Some("abc123".to_string()),
            _ => None,
        };
        assert_eq!(
            resolve_tag(Some("mine"), env),
            Some(("mine".into(), "--tag".into()))
        );
        assert_eq!(
            resolve_tag(None, env),
            Some(("v1.2".into(), "DBIO_TAG".into()))
        );
        let ci = |k: &str| (k == "GITHUB_SHA").then(|| "abc123".to_string());
        assert_eq!(
            resolve_tag(None, ci),
            Some(("abc123".into(), "GITHUB_SHA".into()))
        );
        assert_eq!(resolve_tag(None, |_| None), None);
    }

    #[test]
    fn a_document_that_is_no_result_is_refused() {
        let e = parse_document("{\"x\": 1}", "a.json", None).unwrap_err();
        assert!(e.to_string().contains("no \"format\" field"), "{e}");
        let e = parse_document("{\"format\": 99}", "a.json", None).unwrap_err();
        assert!(e.to_string().contains("newer"), "{e}");
        let e = parse_document("not json", "a.json", None).unwrap_err();
        assert!(e.to_string().contains("invalid JSON"), "{e}");
    }
}
