//! Before a run: verify the data set is complete and the right size (the light part of
//! `check`: marks and catalog, no table scan), record the settings that matter, warn where
//! the numbers may mislead; then open every session, connected and prepared, before the
//! driver's clock starts.

use std::collections::{BTreeMap, BTreeSet};

use dbio_core::Config;
use dbio_core::config::RedoStress;
use dbio_core::dataset::{DataSetPlan, host_ram_bytes, judge_size};
use dbio_core::driver::SessionSpec;
use dbio_core::result::{DataSetInfo, Environment};
use tokio::task::JoinSet;
use tokio_postgres::Client;

use crate::conn::Target;
use crate::error::{PgError, Result};
use crate::marker::{self, LoadState, Ownership};
use crate::server::{ServerInfo, server_info};
use crate::session::PgSession;
use crate::sql;

/// What the run needs to know about the target before it starts.
pub struct Preflight {
    pub info: ServerInfo,
    pub environment: Environment,
    pub warnings: Vec<String>,
}

pub async fn preflight(
    target: &Target,
    config: &Config,
    specs: &[SessionSpec],
) -> Result<Preflight> {
    let client = target.connect("dbio-preflight").await?;
    let info = server_info(&client).await?;
    let plan = DataSetPlan::new(&config.data, info.block_size);
    let mut warnings = Vec::new();
    verify_data_set(&client, &plan, &mut warnings).await?;

    let free: i32 = client
        .query_one(sql::FREE_CONNECTIONS, &[])
        .await
        .map_err(|e| PgError::from_db("reading max_connections", &e))?
        .get(0);
    if specs.len() as i64 > free as i64 {
        return Err(PgError::Usage(format!(
            "run.readers + run.writers = {} sessions, but the server has {free} free connection slots; \
             raise max_connections on the server or run fewer sessions",
            specs.len()
        )));
    }

    let names: Vec<String> = sql::SETTING_NAMES.iter().map(|s| s.to_string()).collect();
    let settings: BTreeMap<String, Option<String>> = client
        .query(sql::SETTINGS, &[&names])
        .await
        .map_err(|e| PgError::from_db("reading the server's settings", &e))?
        .iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, Option<String>>(1)))
        .collect();
    if !info.track_io_timing {
        warnings.push(
            "track_io_timing is off: the database cannot time its reads; set track_io_timing = on"
                .into(),
        );
    }
    let ram = target.is_local().then(host_ram_bytes).flatten();
    warnings.extend(judge_size(plan.table_bytes(), info.shared_buffers_bytes, ram).warnings);

    let used: BTreeSet<&str> = specs.iter().map(|s| s.schema.as_str()).collect();
    let environment = Environment {
        dbio_version: env!("CARGO_PKG_VERSION").to_string(),
        client_host: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_default(),
        target: target.redacted(),
        server_version: info.version.clone(),
        server_version_num: info.version_num as i64,
        settings,
        data_set: DataSetInfo {
            schemas: plan.schemas,
            scale_blocks: plan.scale_blocks,
            block_size: plan.block_size,
            table_bytes: plan.table_bytes(),
            schemas_used: used.into_iter().map(str::to_string).collect(),
        },
    };
    Ok(Preflight {
        info,
        environment,
        warnings,
    })
}

/// Refuses a data set that `check` would reject on its marks or catalog; a usage error
/// (exit 2) naming the schema and the key to change.
async fn verify_data_set(
    client: &Client,
    plan: &DataSetPlan,
    warnings: &mut Vec<String>,
) -> Result<()> {
    let names = plan.schema_names();
    for (name, own) in marker::inspect_schemas(client, &names).await? {
        let problem = match own {
            Ownership::Absent => Some(format!(
                "schema {name} does not exist (data.schemas = {}, data.prefix = {}): run `dbio setup` with the same data settings",
                plan.schemas, plan.prefix
            )),
            Ownership::Foreign => Some(format!(
                "schema {name} was not created by dbio; choose another data.prefix"
            )),
            Ownership::Dbio(None) => Some(format!(
                "schema {name} has an unreadable dbio mark: rerun `dbio setup`"
            )),
            Ownership::Dbio(Some(m)) if m.state != LoadState::Complete => Some(format!(
                "schema {name}: load incomplete (interrupted or failed): rerun `dbio setup`"
            )),
            Ownership::Dbio(Some(m)) if m.scale_blocks != plan.scale_blocks => Some(format!(
                "data.scale = {} blocks but schema {name} holds {} blocks: set data.scale (--scale) to {}blocks, or rebuild with `dbio setup --force`",
                plan.scale_blocks, m.scale_blocks, m.scale_blocks
            )),
            Ownership::Dbio(Some(_)) => None,
        };
        if let Some(p) = problem {
            return Err(PgError::Usage(format!(
                "the data set is not fit to run against: {p}"
            )));
        }
        let state = client
            .query_opt(sql::TABLE_STATE, &[&name])
            .await
            .map_err(|e| {
                PgError::from_db(format!("reading the catalog state of {name}.cf1"), &e)
            })?;
        let Some(state) = state else {
            return Err(PgError::Usage(format!(
                "the data set is not fit to run against: {name}.cf1 is missing: rerun `dbio setup --force`"
            )));
        };
        let (pages, all_visible, index_valid, dead): (i64, i64, bool, i64) =
            (state.get(0), state.get(1), state.get(3), state.get(4));
        if !index_valid {
            return Err(PgError::Usage(format!(
                "the data set is not fit to run against: index {name}.{} is missing or invalid: rerun `dbio setup --force`",
                sql::INDEX
            )));
        }
        if all_visible < pages || dead > 0 {
            warnings.push(format!(
                "{name}.cf1 changed since its last VACUUM ({all_visible} of {pages} pages all-visible, {dead} dead rows): \
                 reads may write (hint bits, pruning) and autovacuum may run inside the window; \
                 VACUUM (FREEZE, ANALYZE) {}.cf1 before a read-only run",
                sql::quote_ident(&name)
            ));
        }
    }
    Ok(())
}

/// Connects and prepares every session, all at once; the first failure stops the rest.
pub async fn open_sessions(
    target: &Target,
    specs: &[SessionSpec],
    redo_stress: RedoStress,
) -> Result<Vec<(SessionSpec, PgSession)>> {
    let heavy = redo_stress == RedoStress::Heavy;
    let mut tasks = JoinSet::new();
    for spec in specs {
        let target = target.clone();
        let spec = spec.clone();
        tasks.spawn(async move {
            let s = PgSession::open(&target, &spec.name, &spec.schema, heavy).await?;
            Ok::<_, PgError>((spec, s))
        });
    }
    let mut out = Vec::with_capacity(specs.len());
    while let Some(joined) = tasks.join_next().await {
        let opened = joined.map_err(|e| PgError::Failed {
            context: "opening sessions".into(),
            message: format!("a session task ended abnormally: {e}"),
            hint: None,
        })??;
        out.push(opened);
    }
    out.sort_by_key(|(s, _)| s.index);
    Ok(out)
}
