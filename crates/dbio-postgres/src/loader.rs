//! `dbio setup`: builds the SLOB data set. Per schema: mark it `loading`, create the table and
//! binary-COPY the rows (keys in a random physical order) in one transaction with FREEZE,
//! build the index, `VACUUM (FREEZE, ANALYZE)`, mark it `complete`. Schemas load in parallel
//! on pooled connections; one CHECKPOINT ends the setup so a read-only run writes nothing.

use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use dbio_core::dataset::{
    DataSetPlan, LoadObserver, LoadSummary, SchemaAction, SchemaOutcome, secs,
};
use dbio_core::key_order::KeyOrder;
use deadpool_postgres::{Hook, HookError, Pool};
use futures_util::SinkExt;
use tokio::task::JoinSet;
use tokio_postgres::Client;

use crate::conn::Target;
use crate::copy;
use crate::error::{PgError, Result};
use crate::maintenance;
use crate::marker::{self, Identity, LoadState, Ownership, SchemaMark, Table};
use crate::server::{ServerInfo, server_info};
use crate::sizing::judge_size;
use crate::{space, sql, teardown};

/// Rows per COPY message: about 256 kB of row data.
const ROWS_PER_CHUNK: usize = 256;

pub struct SetupOptions {
    /// Rebuild dbio's complete schemas too.
    pub force: bool,
    /// collector.drop_caches is on: runs start with a cold page cache (changes the advice).
    pub drop_caches: bool,
    /// Drop the user's objects that depend on a table dbio rebuilds (DROP TABLE ... CASCADE);
    /// without it such objects stop setup before anything changes.
    pub drop_dependents: bool,
}

/// What setup will do with one schema.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Decision {
    Load {
        /// The schema does not exist yet.
        create: bool,
        /// dbio's table to drop first, with its size in bytes.
        replace: Option<(u32, u64)>,
    },
    Keep(Box<SchemaMark>),
}

pub async fn setup(
    target: &Target,
    plan: &DataSetPlan,
    opts: &SetupOptions,
    observer: Arc<dyn LoadObserver>,
) -> Result<LoadSummary> {
    let started = Instant::now();
    // The loader's pool goes to the server the admin connection settled on.
    let (admin, pinned) = target.connect_pinned("dbio-setup").await?;
    let target = &pinned;
    let info = server_info(&admin).await?;
    crate::server::same_blocks(plan, &info)?;
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
    // Everything that can refuse runs before the first change: ownership, the user's objects
    // on dbio's tables, free space, privileges.
    let (identity, decisions) = decide(&admin, &info, plan, opts, observer.as_ref()).await?;
    let loads = decisions
        .iter()
        .filter(|(_, d)| matches!(d, Decision::Load { .. }))
        .count();
    if loads > 0 {
        check_slots(&admin, (plan.parallel as usize).min(loads)).await?;
    }
    // No run may measure the tables while setup vacuums or rebuilds them; held on the admin
    // connection until setup ends.
    crate::lock::exclusive(&admin, std::slice::from_ref(&identity.id), "setup").await?;
    let (heap, freed) = decisions
        .iter()
        .fold((0u64, 0u64), |(heap, freed), (_, d)| match d {
            Decision::Load { replace, .. } => (
                heap.saturating_add(plan.scale_blocks.saturating_mul(plan.block_size)),
                freed + replace.map_or(0, |(_, bytes)| bytes),
            ),
            Decision::Keep(_) => (heap, freed),
        });
    let need = space::SpaceNeed::new(heap, freed, space::max_wal_bytes(&admin).await?);
    if let Some(note) = space::check(&admin, target, plan.tablespace.as_deref(), &need).await? {
        observer.note(&note);
    }

    let to_load: Vec<(u32, String, Decision)> = decisions
        .iter()
        .enumerate()
        .filter(|(_, (_, d))| matches!(d, Decision::Load { .. }))
        .map(|(i, (name, d))| (i as u32 + 1, name.clone(), d.clone()))
        .collect();
    let mut outcomes: Vec<SchemaOutcome> = Vec::new();
    let mut vacuumed_kept = false;
    for (i, (name, d)) in decisions.iter().enumerate() {
        if let Decision::Keep(mark) = d {
            let wanted = plan_mark(plan, &identity, i as u32 + 1, LoadState::Complete);
            if mark.id != wanted.id || mark.schemas != wanted.schemas {
                // The data set grew or merged schemas of an earlier setup: one identity for all.
                remark(
                    &admin,
                    name,
                    &SchemaMark {
                        at: mark.at.clone(),
                        ..wanted
                    },
                )
                .await?;
            }
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
        let identity = Arc::new(identity);
        let cascade = opts.drop_dependents;
        let mut tasks = JoinSet::new();
        let mut pending = to_load.into_iter();
        // Keep `parallel` schemas in flight; the first failure stops the rest (their
        // transactions roll back and their schemas stay marked `loading`).
        loop {
            while tasks.len() < plan.parallel as usize {
                let Some((index, name, decision)) = pending.next() else {
                    break;
                };
                let pool = pool.clone();
                let plan = Arc::clone(&plan);
                let identity = Arc::clone(&identity);
                let observer = Arc::clone(&observer);
                tasks.spawn(async move {
                    let client = pool.get().await.map_err(|e| PgError::Failed {
                        context: format!("connecting to load {name}"),
                        message: e.to_string(),
                        hint: None,
                    })?;
                    let job = LoadJob {
                        plan: &plan,
                        identity: &identity,
                        index,
                        name: &name,
                        decision: &decision,
                        cascade,
                    };
                    load_schema(&client, &job, observer.as_ref()).await
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
    // With O_DIRECT reads the page cache does not serve them: RAM does not matter. The RAM
    // is the database host's (its /proc, or this host's when the server is proven local),
    // or the server's memory cgroup limit when lower.
    let ram = if info.direct_io {
        None
    } else {
        crate::host::database_host_ram(&admin).await
    };
    Ok(LoadSummary {
        schemas: outcomes,
        seconds: secs(started.elapsed()),
        sizing: judge_size(
            data_bytes,
            info.shared_buffers_bytes,
            ram.as_ref(),
            opts.drop_caches,
        ),
    })
}

fn schema_index(name: &str, prefix: &str) -> u32 {
    name.strip_prefix(prefix)
        .and_then(|n| n.parse().ok())
        .unwrap_or(u32::MAX)
}

/// The mark of schema `index` of this plan's data set.
fn plan_mark(plan: &DataSetPlan, identity: &Identity, index: u32, state: LoadState) -> SchemaMark {
    SchemaMark::new(
        identity,
        &plan.prefix,
        index,
        plan.schemas,
        plan.scale_blocks,
        plan.block_size,
        plan.tablespace.as_deref(),
        plan.seed,
        state,
    )
}

/// Rewrites a kept schema's marks (schema, table, index) with the data set's identity, in one
/// transaction.
async fn remark(client: &Client, name: &str, mark: &SchemaMark) -> Result<()> {
    let sql = format!(
        "BEGIN;\n{};\n{};\n{};\nCOMMIT;",
        sql::comment_schema(name, &mark.to_comment()),
        sql::comment_table(name, &marker::object_comment(&mark.id, "table")),
        sql::comment_index(name, &marker::object_comment(&mark.id, "index")),
    );
    client
        .batch_execute(&sql)
        .await
        .map_err(|e| PgError::from_db(format!("marking schema {name}"), &e))
}

async fn check_tablespace(client: &Client, ts: &str) -> Result<()> {
    let row = client
        .query_one(sql::TABLESPACE_USABLE, &[&ts])
        .await
        .map_err(|e| PgError::from_db(format!("reading tablespace {ts}"), &e))?;
    let what = format!("tablespace {ts}");
    let (exists, usable): (bool, bool) =
        (marker::col(&row, 0, &what)?, marker::col(&row, 1, &what)?);
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

/// Decides per schema and picks the data set's identity (the one its existing schemas carry,
/// or a fresh one); refuses before changing anything when a schema or an object of the user's
/// is in the way.
async fn decide(
    client: &Client,
    info: &ServerInfo,
    plan: &DataSetPlan,
    opts: &SetupOptions,
    observer: &dyn LoadObserver,
) -> Result<(Identity, Vec<(String, Decision)>)> {
    let names = plan.schema_names();
    let found = marker::inspect_schemas(client, &names).await?;
    let identity = found
        .iter()
        .find_map(|(name, own)| match own {
            Ownership::Dbio(m) if m.prefix == plan.prefix && m.names(name) => Some(Identity {
                id: m.id.clone(),
                created_at: m.created_at.clone(),
                // Trusted marks carry their schema's owner (marker::trust).
                owner: m.owner.clone().unwrap_or_else(|| info.user.clone()),
            }),
            _ => None,
        })
        .unwrap_or_else(|| Identity::fresh(&info.user));
    let mut decisions = Vec::new();
    let mut foreign = Vec::new();
    let mut blocked = Vec::new();
    let mut creates = false;
    for (name, own) in found {
        // The id whose marks the schema's table must carry: `None` for a legacy schema.
        let table_id: Option<String> = match &own {
            Ownership::Absent => {
                creates = true;
                decisions.push((
                    name,
                    Decision::Load {
                        create: true,
                        replace: None,
                    },
                ));
                continue;
            }
            Ownership::Foreign => {
                foreign.push(name.clone());
                continue;
            }
            Ownership::Forged(why) => {
                return Err(PgError::Usage(format!(
                    "schema {name}: {why}; choose another data.prefix (--prefix)"
                )));
            }
            Ownership::Unreadable(why) => {
                return Err(PgError::Usage(format!(
                    "schema {name} carries a dbio mark this dbio cannot read ({why}); dbio leaves it alone. \
                     Use the dbio version that made it, drop it yourself, or choose another data.prefix (--prefix)"
                )));
            }
            Ownership::Legacy if !opts.force => {
                return Err(PgError::Usage(format!(
                    "schema {name} carries the mark of an older dbio (before data set ids): rebuild it with \
                     `dbio setup --force` (same --prefix, --schemas and --scale)"
                )));
            }
            Ownership::Legacy => None,
            Ownership::Dbio(m) if !(m.prefix == plan.prefix && m.names(&name)) => {
                return Err(PgError::Usage(format!(
                    "schema {name} belongs to the dbio data set of prefix `{}` (its schema {}), not to prefix `{}`; \
                     choose another data.prefix (--prefix), or tear that data set down with `dbio teardown --prefix {}`",
                    m.prefix, m.schema, plan.prefix, m.prefix
                )));
            }
            Ownership::Dbio(m) => Some(m.id.clone()),
        };
        let table = marker::table(client, &name, table_id.as_deref()).await?;
        if table == Table::Foreign {
            return Err(PgError::Usage(format!(
                "{name}.cf1 exists but dbio did not create it; dbio will not replace it. Drop it yourself or choose another data.prefix (--prefix)"
            )));
        }
        if let Ownership::Dbio(mark) = &own
            && mark.state == LoadState::Complete
            && !opts.force
        {
            if mark.scale_blocks != plan.scale_blocks {
                return Err(PgError::Usage(format!(
                    "{name} is a complete dbio schema of {} blocks but {} blocks were asked for; \
                     rerun with --force to rebuild it, or set data.scale (--scale) to {}blocks",
                    mark.scale_blocks, plan.scale_blocks, mark.scale_blocks
                )));
            }
            if table != Table::Missing {
                decisions.push((name, Decision::Keep(mark.clone())));
                continue;
            }
            observer.note(&format!(
                "{name}: marked complete but its table cf1 is missing (dropped outside dbio); rebuilding it"
            ));
        }
        let replace = match table {
            Table::Ours(oid) => {
                let deps = marker::dependents(client, &name, oid, table_id.as_deref()).await?;
                if !deps.is_empty() && !opts.drop_dependents {
                    blocked.push(format!("{name}.cf1: {}", deps.join(", ")));
                }
                let bytes: i64 = client
                    .query_one(sql::TOTAL_RELATION_SIZE, &[&oid])
                    .await
                    .map_err(|e| PgError::from_db(format!("reading the size of {name}.cf1"), &e))
                    .and_then(|r| marker::col(&r, 0, &format!("the size of {name}.cf1")))?;
                Some((oid, bytes.max(0) as u64))
            }
            _ => None,
        };
        decisions.push((
            name,
            Decision::Load {
                create: false,
                replace,
            },
        ));
    }
    if !foreign.is_empty() {
        return Err(PgError::Usage(format!(
            "schema{} {} exist{} and dbio did not create {} (or a teardown kept {} unmarked because it holds the user's objects); \
             dbio never changes objects it did not create. Choose another data.prefix (--prefix), or move the objects \
             and drop {} yourself (DROP SCHEMA ...)",
            if foreign.len() > 1 { "s" } else { "" },
            foreign.join(", "),
            if foreign.len() > 1 { "" } else { "s" },
            if foreign.len() > 1 { "them" } else { "it" },
            if foreign.len() > 1 { "them" } else { "it" },
            if foreign.len() > 1 {
                "the schemas"
            } else {
                "the schema"
            },
        )));
    }
    if !blocked.is_empty() {
        return Err(teardown::dependents_error(&blocked, "setup --force"));
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
    Ok((identity, decisions))
}

/// Refuses, before any loader connects, a `--parallel` the server has no connection slots for:
/// a loader that cannot connect would leave its schema marked `loading` and the others half
/// done ("...: db error").
async fn check_slots(client: &Client, loaders: usize) -> Result<()> {
    let row = client
        .query_one(sql::CONNECTION_SLOTS, &[])
        .await
        .map_err(|e| PgError::from_db("reading the server's connection slots", &e))?;
    let what = "the server's connection slots";
    let get = |i: usize| marker::col::<i32>(&row, i, what).map(i64::from);
    let (max, su_reserved, reserved, used) = (get(0)?, get(1)?, get(2)?, get(3)?);
    let superuser: bool = marker::col(&row, 8, what)?;
    let mut limits = vec![(
        max - used - if superuser { 0 } else { su_reserved + reserved },
        format!(
            "max_connections is {max}, {used} in use{}",
            if superuser {
                String::new()
            } else {
                format!(
                    ", {} reserved for superusers and reserved_connections",
                    su_reserved + reserved
                )
            }
        ),
        "raise max_connections (a restart)".to_string(),
    )];
    for (limit, used, whose) in [
        (get(4)?, get(5)?, "the role's"),
        (get(6)?, get(7)?, "the database's"),
    ] {
        if limit >= 0 {
            limits.push((
                limit - used,
                format!("{whose} CONNECTION LIMIT is {limit}, {used} in use"),
                format!("raise {whose} CONNECTION LIMIT"),
            ));
        }
    }
    if let Some((free, why, fix)) = limits.into_iter().min_by_key(|(free, _, _)| *free)
        && (free.max(0) as usize) < loaders
    {
        return Err(PgError::Usage(format!(
            "setup would open {loaders} loader connections (data.parallel, --parallel), but the server has {} free ({why});              nothing was created: lower --parallel to {} or less, or {fix}",
            free.max(0),
            free.max(1)
        )));
    }
    Ok(())
}

fn make_pool(target: &Target, size: usize) -> Result<Pool> {
    let mgr = target.pool_manager("dbio-loader")?;
    Pool::builder(mgr)
        .max_size(size.max(1))
        .post_create(Hook::async_fn(|client, _| {
            Box::pin(async move {
                client
                    .batch_execute(sql::OWN_SETTINGS)
                    .await
                    .map_err(HookError::Backend)
            })
        }))
        .build()
        .map_err(|e| PgError::Failed {
            context: "creating the loader's connection pool".into(),
            message: e.to_string(),
            hint: None,
        })
}

/// One schema to load.
struct LoadJob<'a> {
    plan: &'a DataSetPlan,
    identity: &'a Identity,
    /// Schema number, 1-based.
    index: u32,
    name: &'a str,
    decision: &'a Decision,
    /// DROP TABLE ... CASCADE (the user asked for dependents to go).
    cascade: bool,
}

async fn load_schema(
    client: &Client,
    job: &LoadJob<'_>,
    observer: &dyn LoadObserver,
) -> Result<SchemaOutcome> {
    let started = Instant::now();
    let (plan, name) = (job.plan, job.name);
    let ctx = |what: &str| format!("{what} {name}");
    let loading = plan_mark(plan, job.identity, job.index, LoadState::Loading);
    let Decision::Load { create, replace } = job.decision else {
        return Err(PgError::Failed {
            context: ctx("loading"),
            message: "asked to load a schema that is kept".into(),
            hint: None,
        });
    };
    // Old table, schema and mark in one transaction: a failure leaves the marks as they were,
    // and there is never an unmarked dbio schema.
    let mut begin = String::from("BEGIN;\n");
    if *create {
        begin.push_str(&sql::create_schema(name, &job.identity.owner));
        begin.push_str(";\n");
    }
    if replace.is_some() {
        begin.push_str(&sql::drop_table(name, job.cascade));
        begin.push_str(";\n");
    }
    begin.push_str(&sql::comment_schema(name, &loading.to_comment()));
    begin.push_str(";\nCOMMIT;");
    client
        .batch_execute(&begin)
        .await
        .map_err(|e| PgError::from_db(ctx("preparing schema"), &e))?;

    observer.schema_started(name, plan.scale_blocks);
    // The table is created and filled in one transaction so COPY FREEZE applies and an
    // interrupted load leaves no half-filled table behind.
    let create_table = format!(
        "BEGIN;\n{};\n{};",
        sql::create_table(name, plan.tablespace.as_deref()),
        sql::comment_table(name, &marker::object_comment(&loading.id, "table"))
    );
    client
        .batch_execute(&create_table)
        .await
        .map_err(|e| PgError::from_db(ctx("creating the table of"), &e))?;
    copy_rows(client, plan, job.index, name, observer).await?;
    client
        .batch_execute("COMMIT")
        .await
        .map_err(|e| PgError::from_db(ctx("committing the load of"), &e))?;

    observer.schema_phase(name, "index");
    let index_sql = format!(
        "BEGIN;\n{};\n{};\nCOMMIT;",
        sql::create_index(name, plan.tablespace.as_deref()),
        sql::comment_index(name, &marker::object_comment(&loading.id, "index"))
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

    marker::set_schema_mark(client, name, &loading.with_state(LoadState::Complete)).await?;
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

/// Streams `scale_blocks` rows with keys 1..=N in a random order fixed by the schema's seed,
/// computed key by key ([`KeyOrder`]): memory stays constant whatever the scale.
async fn copy_rows(
    client: &Client,
    plan: &DataSetPlan,
    index: u32,
    name: &str,
    observer: &dyn LoadObserver,
) -> Result<()> {
    let seed = plan.schema_seed(index);
    let order = KeyOrder::new(plan.scale_blocks, seed);
    let mut keys = order.iter().peekable();

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
    while keys.peek().is_some() {
        let mut rows = 0u64;
        for key in keys.by_ref().take(ROWS_PER_CHUNK) {
            for f in fields.iter_mut() {
                copy::fill_text(&mut filler_state, f);
            }
            let refs: Vec<&[u8]> = fields.iter().map(|f| &f[..]).collect();
            copy::write_row(&mut buf, key as i64, &refs);
            rows += 1;
        }
        sink.send(buf.split().freeze())
            .await
            .map_err(|e| PgError::from_db(format!("loading {name}"), &e))?;
        observer.rows_loaded(name, rows);
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
    let what = format!("the size of {name}");
    Ok((
        marker::col::<i64>(&row, 0, &what)?.max(0) as u64,
        marker::col::<i64>(&row, 1, &what)?.max(0) as u64,
    ))
}
