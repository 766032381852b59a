//! `dbio setup`: builds the SLOB data set. Per schema: mark it `loading`, create the table and
//! binary-COPY the rows (keys in a random physical order) in one transaction with FREEZE,
//! build the index, `VACUUM (FREEZE, ANALYZE)`, mark it `complete`. Schemas load in parallel
//! on pooled connections; one CHECKPOINT ends the setup so a read-only run writes nothing.

use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use dbio_core::dataset::{
    DataSetPlan, LoadObserver, LoadSummary, SchemaAction, SchemaOutcome, host_ram_bytes,
    judge_size, secs,
};
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use futures_util::SinkExt;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use tokio::task::JoinSet;
use tokio_postgres::{Client, NoTls};

use crate::conn::Target;
use crate::copy;
use crate::error::{PgError, Result};
use crate::maintenance;
use crate::marker::{self, LoadState, Ownership, SchemaMark};
use crate::server::{ServerInfo, server_info};
use crate::sql;

/// Rows per COPY message: about 256 kB of row data.
const ROWS_PER_CHUNK: usize = 256;

pub struct SetupOptions {
    /// Rebuild dbio's complete schemas too.
    pub force: bool,
    /// collector.drop_caches is on: runs start with a cold page cache (changes the advice).
    pub drop_caches: bool,
}

/// What setup will do with one schema.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Decision {
    Load,
    Keep(SchemaMark),
}

pub async fn setup(
    target: &Target,
    plan_in: &DataSetPlan,
    opts: &SetupOptions,
    observer: Arc<dyn LoadObserver>,
) -> Result<LoadSummary> {
    let started = Instant::now();
    let admin = target.connect("dbio-setup").await?;
    let info = server_info(&admin).await?;
    let plan = DataSetPlan {
        block_size: info.block_size,
        scale_blocks: plan_in.scale_blocks,
        ..plan_in.clone()
    };
    if plan.scale_blocks < dbio_core::config::MIN_SCALE_BLOCKS {
        return Err(PgError::Usage(format!(
            "data.scale (--scale) is {} blocks; the minimum is {} blocks",
            plan.scale_blocks,
            dbio_core::config::MIN_SCALE_BLOCKS
        )));
    }
    if let Some(ts) = &plan.tablespace {
        check_tablespace(&admin, ts).await?;
    }
    let decisions = decide(&admin, &info, &plan, opts).await?;

    let to_load: Vec<(u32, String)> = decisions
        .iter()
        .enumerate()
        .filter(|(_, (_, d))| *d == Decision::Load)
        .map(|(i, (name, _))| (i as u32 + 1, name.clone()))
        .collect();
    let mut outcomes: Vec<SchemaOutcome> = Vec::new();
    let mut vacuumed_kept = false;
    for (name, d) in &decisions {
        if let Decision::Keep(_) = d {
            let (table_bytes, index_bytes) = relation_sizes(&admin, name).await?;
            observer.note(&format!(
                "{name}: already complete with {} blocks; kept (use --force to rebuild)",
                plan.scale_blocks
            ));
            if let Some(note) = maintenance::vacuum_if_changed(&admin, name).await? {
                observer.note(&note);
                vacuumed_kept = true;
            }
            outcomes.push(SchemaOutcome {
                schema: name.clone(),
                action: SchemaAction::Kept,
                rows: plan.scale_blocks,
                table_bytes,
                index_bytes,
                seconds: 0.0,
            });
        }
    }

    let loading = !to_load.is_empty();
    if loading {
        let pool = make_pool(target, plan.parallel as usize)?;
        let plan = Arc::new(plan.clone());
        let mut tasks = JoinSet::new();
        let mut pending = to_load.into_iter();
        // Keep `parallel` schemas in flight; the first failure stops the rest (their
        // transactions roll back and their schemas stay marked `loading`).
        loop {
            while tasks.len() < plan.parallel as usize {
                let Some((index, name)) = pending.next() else {
                    break;
                };
                let pool = pool.clone();
                let plan = Arc::clone(&plan);
                let observer = Arc::clone(&observer);
                tasks.spawn(async move {
                    let client = pool.get().await.map_err(|e| PgError::Failed {
                        context: format!("connecting to load {name}"),
                        message: e.to_string(),
                        hint: None,
                    })?;
                    load_schema(&client, &plan, index, &name, observer.as_ref()).await
                });
            }
            let Some(joined) = tasks.join_next().await else {
                break;
            };
            let outcome = joined.map_err(|e| PgError::Failed {
                context: "loading".into(),
                message: format!("a loader task ended abnormally: {e}"),
                hint: None,
            })??;
            observer.schema_finished(&outcome.schema, &outcome);
            outcomes.push(outcome);
        }
    }
    if (loading || vacuumed_kept)
        && let Some(note) = maintenance::checkpoint(&admin).await?
    {
        observer.note(&note);
    }

    outcomes.sort_by_key(|o| schema_index(&o.schema, &plan.prefix));
    let data_bytes = plan.table_bytes();
    // With O_DIRECT reads the page cache does not serve them: RAM does not matter.
    let ram = (target.is_local() && !info.direct_io)
        .then(host_ram_bytes)
        .flatten();
    Ok(LoadSummary {
        schemas: outcomes,
        seconds: secs(started.elapsed()),
        sizing: judge_size(data_bytes, info.shared_buffers_bytes, ram, opts.drop_caches),
    })
}

fn schema_index(name: &str, prefix: &str) -> u32 {
    name.strip_prefix(prefix)
        .and_then(|n| n.parse().ok())
        .unwrap_or(u32::MAX)
}

async fn check_tablespace(client: &Client, ts: &str) -> Result<()> {
    let row = client
        .query_one(sql::TABLESPACE_USABLE, &[&ts])
        .await
        .map_err(|e| PgError::from_db(format!("reading tablespace {ts}"), &e))?;
    let (exists, usable): (bool, bool) = (row.get(0), row.get(1));
    if !exists {
        return Err(PgError::Usage(format!(
            "tablespace `{ts}` does not exist; create it first (CREATE TABLESPACE {} LOCATION '/path/on/the/device'), dbio never creates tablespaces",
            sql::quote_ident(ts)
        )));
    }
    if !usable {
        return Err(PgError::Usage(format!(
            "the role may not create objects in tablespace `{ts}`: GRANT CREATE ON TABLESPACE {} TO <role>",
            sql::quote_ident(ts)
        )));
    }
    Ok(())
}

/// Decides per schema; refuses before changing anything when a schema is in the way.
async fn decide(
    client: &Client,
    info: &ServerInfo,
    plan: &DataSetPlan,
    opts: &SetupOptions,
) -> Result<Vec<(String, Decision)>> {
    let names = plan.schema_names();
    let found = marker::inspect_schemas(client, &names).await?;
    let mut decisions = Vec::new();
    let mut foreign = Vec::new();
    let mut creates = false;
    for (name, own) in found {
        let d = match own {
            Ownership::Absent => {
                creates = true;
                Decision::Load
            }
            Ownership::Foreign => {
                foreign.push(name.clone());
                continue;
            }
            Ownership::Dbio(Some(mark)) if mark.state == LoadState::Complete && !opts.force => {
                if mark.scale_blocks != plan.scale_blocks {
                    return Err(PgError::Usage(format!(
                        "{name} is a complete dbio schema of {} blocks but {} blocks were asked for; \
                         rerun with --force to rebuild it, or set data.scale (--scale) to {}blocks",
                        mark.scale_blocks, plan.scale_blocks, mark.scale_blocks
                    )));
                }
                Decision::Keep(mark)
            }
            Ownership::Dbio(_) => {
                if marker::table_ownership(client, &name).await? == Some(false) {
                    return Err(PgError::Usage(format!(
                        "{name}.cf1 exists but dbio did not create it; dbio will not replace it. Drop it yourself or choose another data.prefix (--prefix)"
                    )));
                }
                Decision::Load
            }
        };
        decisions.push((name, d));
    }
    if !foreign.is_empty() {
        return Err(PgError::Usage(format!(
            "schema{} {} exist{} and dbio did not create {}; dbio never changes objects it did not create. \
             Choose another data.prefix (--prefix) or remove {} yourself",
            if foreign.len() > 1 { "s" } else { "" },
            foreign.join(", "),
            if foreign.len() > 1 { "" } else { "s" },
            if foreign.len() > 1 { "them" } else { "it" },
            if foreign.len() > 1 { "them" } else { "it" },
        )));
    }
    if creates && !info.can_create {
        return Err(PgError::Refused {
            context: format!("setup in database {}", info.database),
            message: format!("role `{}` may not create schemas here", info.user),
            hint: Some(format!(
                "GRANT CREATE ON DATABASE {} TO {}, or connect as a role that may",
                sql::quote_ident(&info.database),
                sql::quote_ident(&info.user)
            )),
        });
    }
    Ok(decisions)
}

fn make_pool(target: &Target, size: usize) -> Result<Pool> {
    let mgr = Manager::from_config(
        target.pg_config("dbio-loader"),
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(mgr)
        .max_size(size.max(1))
        .build()
        .map_err(|e| PgError::Failed {
            context: "creating the loader's connection pool".into(),
            message: e.to_string(),
            hint: None,
        })
}

async fn load_schema(
    client: &Client,
    plan: &DataSetPlan,
    index: u32,
    name: &str,
    observer: &dyn LoadObserver,
) -> Result<SchemaOutcome> {
    let started = Instant::now();
    let ctx = |what: &str| format!("{what} {name}");
    let loading = SchemaMark::new(
        LoadState::Loading,
        plan.scale_blocks,
        plan.block_size,
        plan.seed,
    );
    let exists = !matches!(
        marker::inspect_schemas(client, &[name.to_string()])
            .await?
            .first(),
        Some((_, Ownership::Absent)) | None
    );
    // Schema and mark in one transaction: there is never an unmarked dbio schema.
    let mut create = String::from("BEGIN;\n");
    if !exists {
        create.push_str(&sql::create_schema(name));
        create.push_str(";\n");
    }
    create.push_str(&sql::comment_schema(name, &loading.to_comment()));
    create.push_str(";\nCOMMIT;");
    client
        .batch_execute(&create)
        .await
        .map_err(|e| PgError::from_db(ctx("creating schema"), &e))?;

    observer.schema_started(name, plan.scale_blocks);
    // The table is created (or replaced) and filled in one transaction so COPY FREEZE applies
    // and an interrupted load leaves no half-filled table behind.
    let mut begin = String::from("BEGIN;\n");
    if marker::table_ownership(client, name).await? == Some(true) {
        begin.push_str(&sql::drop_table(name));
        begin.push_str(";\n");
    }
    begin.push_str(&sql::create_table(name, plan.tablespace.as_deref()));
    begin.push_str(";\n");
    begin.push_str(&sql::comment_table(name));
    begin.push(';');
    client
        .batch_execute(&begin)
        .await
        .map_err(|e| PgError::from_db(ctx("creating the table of"), &e))?;
    copy_rows(client, plan, index, name, observer).await?;
    client
        .batch_execute("COMMIT")
        .await
        .map_err(|e| PgError::from_db(ctx("committing the load of"), &e))?;

    observer.schema_phase(name, "index");
    let index_sql = format!(
        "BEGIN;\n{};\n{};\nCOMMIT;",
        sql::create_index(name, plan.tablespace.as_deref()),
        sql::comment_index(name)
    );
    client
        .batch_execute(&index_sql)
        .await
        .map_err(|e| PgError::from_db(ctx("building the index of"), &e))?;

    observer.schema_phase(name, "vacuum");
    client
        .batch_execute(&sql::vacuum_freeze_analyze(name))
        .await
        .map_err(|e| PgError::from_db(ctx("vacuuming"), &e))?;

    let complete = SchemaMark::new(
        LoadState::Complete,
        plan.scale_blocks,
        plan.block_size,
        plan.seed,
    );
    marker::set_schema_mark(client, name, &complete).await?;
    let (table_bytes, index_bytes) = relation_sizes(client, name).await?;
    Ok(SchemaOutcome {
        schema: name.to_string(),
        action: SchemaAction::Loaded,
        rows: plan.scale_blocks,
        table_bytes,
        index_bytes,
        seconds: secs(started.elapsed()),
    })
}

/// Streams `scale_blocks` rows with keys 1..=N in a random order fixed by the schema's seed.
async fn copy_rows(
    client: &Client,
    plan: &DataSetPlan,
    index: u32,
    name: &str,
    observer: &dyn LoadObserver,
) -> Result<()> {
    let seed = plan.schema_seed(index);
    let mut keys: Vec<u64> = (1..=plan.scale_blocks).collect();
    keys.shuffle(&mut SmallRng::seed_from_u64(seed));

    let sink = client
        .copy_in::<_, Bytes>(&sql::copy_in(name))
        .await
        .map_err(|e| PgError::from_db(format!("starting COPY into {name}"), &e))?;
    futures_util::pin_mut!(sink);
    let mut filler_state = seed | 1;
    let mut fields = vec![[0u8; sql::FILLER_LEN]; sql::FILLER_COLUMNS];
    let row_bytes = 2 + 12 + sql::FILLER_COLUMNS * (4 + sql::FILLER_LEN);
    let mut buf = BytesMut::with_capacity(ROWS_PER_CHUNK * row_bytes + 32);
    copy::write_header(&mut buf);
    for chunk in keys.chunks(ROWS_PER_CHUNK) {
        for &key in chunk {
            for f in fields.iter_mut() {
                copy::fill_text(&mut filler_state, f);
            }
            let refs: Vec<&[u8]> = fields.iter().map(|f| &f[..]).collect();
            copy::write_row(&mut buf, key as i64, &refs);
        }
        sink.send(buf.split().freeze())
            .await
            .map_err(|e| PgError::from_db(format!("loading {name}"), &e))?;
        observer.rows_loaded(name, chunk.len() as u64);
    }
    copy::write_trailer(&mut buf);
    sink.send(buf.split().freeze())
        .await
        .map_err(|e| PgError::from_db(format!("loading {name}"), &e))?;
    let rows = sink
        .finish()
        .await
        .map_err(|e| PgError::from_db(format!("finishing the load of {name}"), &e))?;
    if rows != plan.scale_blocks {
        return Err(PgError::Failed {
            context: format!("loading {name}"),
            message: format!(
                "the server stored {rows} rows, {} were sent",
                plan.scale_blocks
            ),
            hint: None,
        });
    }
    Ok(())
}

async fn relation_sizes(client: &Client, name: &str) -> Result<(u64, u64)> {
    let row = client
        .query_one(&sql::relation_sizes(name), &[])
        .await
        .map_err(|e| PgError::from_db(format!("reading the size of {name}"), &e))?;
    Ok((row.get::<_, i64>(0) as u64, row.get::<_, i64>(1) as u64))
}
