//! The columns both stores read, turned back into the core's record model.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use dbio_core::driver::RunStatus;
use dbio_core::history::{HistoryError, Identity, RecordKind, RunRecord, StepFigures, StoredRun};

/// One row of `runs`, as read (JSON columns as text, times already parsed).
pub struct RunRow {
    pub run_id: i64,
    pub content_sha256: String,
    pub kind: String,
    pub label: String,
    pub series: String,
    pub shape: String,
    pub tag: Option<String>,
    pub tag_source: Option<String>,
    pub host: String,
    pub target: String,
    pub server_version: String,
    pub server_version_num: i64,
    pub settings: String,
    pub data_set: String,
    pub dbio_version: String,
    pub status: String,
    pub started: DateTime<Utc>,
    pub finished: DateTime<Utc>,
    pub recorded: DateTime<Utc>,
}

/// One row of `steps` with its run id.
pub struct StepRow {
    pub run_id: i64,
    pub figures: StepFigures,
}

pub fn status(s: &str, store: &str) -> Result<RunStatus, HistoryError> {
    serde_json::from_value(serde_json::Value::String(s.to_string()))
        .map_err(|_| HistoryError::store(store, format!("unknown run status `{s}` in the store")))
}

fn json<T: serde::de::DeserializeOwned>(
    text: &str,
    column: &str,
    store: &str,
) -> Result<T, HistoryError> {
    serde_json::from_str(text)
        .map_err(|e| HistoryError::store(store, format!("column {column} is not valid JSON: {e}")))
}

/// Joins runs and their steps (both ordered by run id) into stored runs.
pub fn assemble(
    runs: Vec<RunRow>,
    steps: Vec<StepRow>,
    store: &str,
) -> Result<Vec<StoredRun>, HistoryError> {
    let mut by_run: BTreeMap<i64, Vec<StepFigures>> = BTreeMap::new();
    for s in steps {
        by_run.entry(s.run_id).or_default().push(s.figures);
    }
    let mut out = Vec::with_capacity(runs.len());
    for r in runs {
        let kind = RecordKind::parse(&r.kind).ok_or_else(|| {
            HistoryError::store(store, format!("unknown record kind `{}`", r.kind))
        })?;
        out.push(StoredRun {
            id: r.run_id,
            recorded_at: r.recorded,
            record: RunRecord {
                kind,
                identity: Identity {
                    label: r.label,
                    series: r.series,
                    shape: json(&r.shape, "shape", store)?,
                    tag: r.tag,
                    tag_source: r.tag_source,
                    host: r.host,
                    target: r.target,
                    server_version: r.server_version,
                    server_version_num: r.server_version_num,
                    settings: json(&r.settings, "settings", store)?,
                    data_set: json(&r.data_set, "data_set", store)?,
                    dbio_version: r.dbio_version,
                },
                status: status(&r.status, store)?,
                started: r.started,
                finished: r.finished,
                steps: by_run.remove(&r.run_id).unwrap_or_default(),
                content_sha256: r.content_sha256,
            },
        });
    }
    out.sort_by(|a, b| {
        a.record
            .started
            .cmp(&b.record.started)
            .then(a.id.cmp(&b.id))
    });
    Ok(out)
}

/// The JSON columns of a record, as text.
pub fn json_text(v: &impl serde::Serialize) -> String {
    serde_json::to_string(v).expect("JSON values and string maps serialise")
}
