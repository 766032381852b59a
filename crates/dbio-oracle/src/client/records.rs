//! What commands read before they act: dbio's catalogs and marks (each schema user judged by
//! `mark::ownership`), the admin's privileges, the room a load needs, the connection limits,
//! the schema users' accounts, AWR and Statspack, and the reader's plan.

use std::collections::{BTreeMap, BTreeSet};

use dbio_core::config::Snapshots;
use dbio_core::dataset::DataSetPlan;
use dbio_core::discover::FoundDataSet;

use super::{Breaker, Conn, Result, ServerFacts, env};
use crate::checks::{self, LoadFacts, RecoveryArea, ResourceLimit, Space};
use crate::loader::{self, Judged};
use crate::mark::{self, CatalogRow, CatalogState, Ownership, TableRow, UserRow};
use crate::privileges::{self, Granted};
use crate::snapshots::{self, Choice, Edition, PackFacts};
use crate::sql;
use crate::{OracleError, plan};

/// The owners of dbio's catalogs the session can see, and whether the admin's own schema
/// holds one (Some(false): a table of that name dbio did not create).
pub(super) struct Catalogs {
    pub owners: Vec<String>,
    pub own: Option<bool>,
}

pub(super) fn catalogs(conn: &Conn, admin: &str) -> Result<Catalogs> {
    let rows = conn.query_all::<(String, Option<String>)>(
        None,
        &sql::catalogs(),
        "looking for dbio's catalogs (ALL_TABLES)",
    )?;
    let mut out = Catalogs {
        owners: Vec::new(),
        own: None,
    };
    for (owner, comment) in rows {
        let ours = mark::is_catalog_comment(comment.as_deref());
        if owner == admin {
            out.own = Some(ours);
        }
        if ours {
            out.owners.push(owner);
        }
    }
    Ok(out)
}

type RowTuple = (
    String,
    String,
    String,
    i64,
    String,
    Option<i64>,
    Option<String>,
    String,
);

fn catalog_row(owner: &str, t: RowTuple) -> Result<CatalogRow> {
    let (username, data_set_id, prefix, schema, state, user_id, password, created_at) = t;
    let state = CatalogState::parse(&state).ok_or_else(|| OracleError::Failed {
        context: format!("reading {owner}.DBIO_DATA_SETS"),
        message: format!(
            "the row of {username} has the state `{state}`, which this dbio does not know"
        ),
    })?;
    Ok(CatalogRow {
        owner: owner.to_string(),
        username,
        data_set_id,
        prefix,
        schema: u32::try_from(schema).unwrap_or(0),
        state,
        user_id,
        password,
        created_at,
    })
}

/// Every row of one prefix (exact) in the catalogs.
pub(super) fn rows_of_prefix(
    conn: &Conn,
    cats: &Catalogs,
    prefix: &str,
) -> Result<Vec<CatalogRow>> {
    let mut out = Vec::new();
    for owner in &cats.owners {
        for t in conn.query_all::<RowTuple>(
            None,
            &sql::catalog_rows(owner, Some(prefix)),
            &format!("reading {owner}.DBIO_DATA_SETS"),
        )? {
            out.push(catalog_row(owner, t)?);
        }
    }
    Ok(out)
}

/// The catalog row of one user (the first catalog that records it).
fn row_of(conn: &Conn, cats: &Catalogs, user: &str) -> Result<Option<CatalogRow>> {
    for owner in &cats.owners {
        if let Some(t) = conn.query_opt::<RowTuple>(
            None,
            &sql::catalog_row(owner, user),
            &format!("reading {owner}.DBIO_DATA_SETS"),
        )? {
            return Ok(Some(catalog_row(owner, t)?));
        }
    }
    Ok(None)
}

/// Every data set dbio's catalogs (those the admin can see) record: their rows, the users
/// from ALL_USERS and the CF1 marks, three queries per catalog, judged together by
/// `mark::data_sets`. No catalog: no data set. Changes nothing.
pub fn data_sets(
    admin: &super::ConnectString,
    timeouts: &super::Timeouts,
    b: &Breaker,
) -> Result<Vec<FoundDataSet>> {
    let conn = super::connect(admin, None, timeouts)?;
    b.register(&conn);
    let me = conn.query_row::<String>(&sql::session_user(), "reading the session user")?;
    let cats = catalogs(&conn, &me)?;
    let (mut rows, mut users, mut tables) = (Vec::new(), Vec::new(), Vec::new());
    for owner in &cats.owners {
        for t in conn.query_all::<RowTuple>(
            Some(b),
            &sql::catalog_rows(owner, None),
            &format!("reading {owner}.DBIO_DATA_SETS"),
        )? {
            rows.push(catalog_row(owner, t)?);
        }
        users.extend(
            conn.query_all::<(String, i64, String)>(
                Some(b),
                &sql::catalog_users(owner),
                "looking up users (ALL_USERS)",
            )?
            .into_iter()
            .map(|(username, user_id, created)| UserRow {
                username,
                user_id,
                created,
            }),
        );
        tables.extend(
            conn.query_all::<(String, Option<String>, Option<String>)>(
                Some(b),
                &sql::catalog_tables(owner),
                "reading dbio's marks",
            )?
            .into_iter()
            .map(|(owner, tablespace, comment)| TableRow {
                owner,
                tablespace,
                comment,
            }),
        );
    }
    Ok(mark::data_sets(&rows, &users, &tables))
}

/// Judges one user as schema `schema` of `prefix` from its catalog row, ALL_USERS and its
/// CF1's mark; a user the records give to another prefix (`TS21` as schema 1 of `TS2`, asked
/// as schema 21 of `TS`) is disputed. `with_foreign`: also list what else it owns.
pub(super) fn judge(
    conn: &Conn,
    cats: &Catalogs,
    prefix: &str,
    user: &str,
    schema: u32,
    row: Option<CatalogRow>,
    with_foreign: bool,
) -> Result<Judged> {
    let row = match row {
        Some(r) => Some(r),
        None => row_of(conn, cats, user)?,
    };
    let found = conn
        .query_opt::<(String, i64, String)>(
            None,
            &sql::user_row(user),
            "looking up users (ALL_USERS)",
        )?
        .map(|(username, user_id, created)| UserRow {
            username,
            user_id,
            created,
        });
    let comment = match &found {
        Some(_) => conn
            .query_opt::<Option<String>>(None, &sql::table_mark(user), "reading dbio's marks")?
            .flatten(),
        None => None,
    };
    let mut own = mark::ownership(user, row.as_ref(), found.as_ref(), comment.as_deref());
    if let Ownership::Ours { row, .. } | Ownership::Stale(row) = &own
        && row.prefix != prefix.to_uppercase()
    {
        own = Ownership::Disputed(format!(
            "belongs to the dbio data set of prefix {} (its schema {}): choose another data.prefix",
            row.prefix, row.schema
        ));
    }
    let foreign = if with_foreign && found.is_some() {
        conn.query_all::<String>(
            None,
            &sql::foreign_objects(user),
            &format!("listing the objects of {user}"),
        )?
    } else {
        Vec::new()
    };
    Ok(Judged {
        user: user.to_string(),
        schema,
        own,
        foreign,
    })
}

/// Judges the users `<PREFIX>1..<PREFIX>N` of a plan.
pub(super) fn judge_plan(
    conn: &Conn,
    cats: &Catalogs,
    plan: &DataSetPlan,
    with_foreign: bool,
) -> Result<Vec<Judged>> {
    (1..=plan.schemas)
        .map(|n| {
            judge(
                conn,
                cats,
                &plan.prefix,
                &mark::user_name(&plan.prefix, n),
                n,
                None,
                with_foreign,
            )
        })
        .collect()
}

/// What the session may do (SESSION_PRIVS, SESSION_ROLES, WITH ADMIN OPTION, packages).
pub(super) fn granted(conn: &Conn) -> Result<Granted> {
    let set = |s: &sql::Stmt, what: &str| -> Result<BTreeSet<String>> {
        Ok(conn
            .query_all::<String>(None, s, what)?
            .into_iter()
            .collect())
    };
    let own = conn.query_opt::<(Option<String>, Option<String>, Option<i64>, Option<i64>)>(
        None,
        &sql::own_tablespaces(),
        "reading USER_USERS",
    )?;
    Ok(Granted {
        privileges: set(&sql::session_privs(), "reading SESSION_PRIVS")?,
        roles: set(&sql::session_roles(), "reading SESSION_ROLES")?,
        admin_option: set(&sql::admin_option_privs(), "reading USER_SYS_PRIVS")?,
        packages: set(&sql::packages(), "reading ALL_OBJECTS")?,
        default_tablespace: own.as_ref().and_then(|o| o.0.clone()),
        quota: own.and_then(|o| o.2.zip(o.3)),
    })
}

/// Refuses `command` when the admin lacks a privilege it needs, naming every GRANT.
pub(super) fn check_privileges(
    conn: &Conn,
    command: privileges::Command,
    name: &str,
    admin: &str,
) -> Result<()> {
    let missing = privileges::missing(command, &granted(conn)?, admin);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(OracleError::Usage(privileges::refusal(
            name, admin, &missing,
        )))
    }
}

/// The room a load needs, as the server sees it.
pub(super) fn load_facts(conn: &Conn, facts: &ServerFacts) -> Result<LoadFacts> {
    let (log_mode, force) =
        conn.query_row::<(String, String)>(&sql::log_mode(), "reading V$DATABASE")?;
    let (limit, used, reclaimable) =
        conn.query_row::<(i64, i64, i64)>(&sql::recovery_area(), "reading V$RECOVERY_FILE_DEST")?;
    let u = |v: i64| u64::try_from(v).unwrap_or(0);
    let own = conn.query_opt::<(Option<String>, Option<String>, Option<i64>, Option<i64>)>(
        None,
        &sql::own_tablespaces(),
        "reading USER_USERS",
    )?;
    let space = |s: &sql::Stmt, ts: &str, what: &str| -> Result<Space> {
        let (free, growth) = conn.query_row::<(i64, i64)>(s, what)?;
        Ok(Space {
            tablespace: ts.to_string(),
            free: u(free),
            growth: u(growth),
        })
    };
    let temp = match own.as_ref().and_then(|o| o.1.clone()) {
        Some(t) => Some(space(
            &sql::temp_space(&t),
            &t,
            "reading DBA_TEMP_FREE_SPACE",
        )?),
        None => None,
    };
    let ts = &facts.tablespace.name;
    let data = Some(space(&sql::data_space(ts), ts, "reading DBA_FREE_SPACE")?);
    Ok(LoadFacts {
        archivelog: log_mode == "ARCHIVELOG",
        force_logging: force == "YES",
        recovery_area: RecoveryArea {
            limit: u(limit),
            used: u(used),
            reclaimable: u(reclaimable),
        },
        temp,
        data,
    })
}

/// GV$RESOURCE_LIMIT's processes and sessions.
pub(super) fn resource_limits(conn: &Conn) -> Result<Vec<ResourceLimit>> {
    Ok(conn
        .query_all::<(u32, String, i64, String)>(
            None,
            &sql::resource_limits(),
            "reading GV$RESOURCE_LIMIT",
        )?
        .into_iter()
        .map(|(inst_id, resource, used, limit)| ResourceLimit {
            inst_id,
            resource,
            used: u64::try_from(used).unwrap_or(0),
            limit: ResourceLimit::parse_limit(&limit),
        })
        .collect())
}

/// AWR's and Statspack's facts on this server.
pub fn pack_facts(conn: &Conn, banner: &str, granted: &Granted) -> Result<PackFacts> {
    let access = conn.query_opt::<Option<String>>(
        None,
        &sql::parameter("control_management_pack_access"),
        "reading CONTROL_MANAGEMENT_PACK_ACCESS",
    );
    Ok(PackFacts {
        edition: Edition::from_banner(banner),
        pack_access: access.ok().flatten().flatten(),
        statspack: granted.packages.contains("PERFSTAT.STATSPACK"),
        awr_package: granted.packages.contains("SYS.DBMS_WORKLOAD_REPOSITORY"),
    })
}

/// What a schema user logs on with: the password dbio generated (its catalog row), else
/// DBIO_ORACLE_USER_PASSWORD; and where it came from, for the messages.
#[derive(Clone)]
pub struct Password {
    pub secret: String,
    pub source: String,
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Password({})", self.source)
    }
}

fn password_of(row: &CatalogRow) -> Result<Password> {
    match (&row.password, env("DBIO_ORACLE_USER_PASSWORD")) {
        (Some(p), _) => Ok(Password {
            secret: p.clone(),
            source: format!("generated at setup, from {}.DBIO_DATA_SETS", row.owner),
        }),
        (None, Some(p)) => Ok(Password {
            secret: p,
            source: "DBIO_ORACLE_USER_PASSWORD".into(),
        }),
        (None, None) => Err(OracleError::Usage(format!(
            "{}'s password was given by DBIO_ORACLE_USER_PASSWORD at setup and is not set now: set it",
            row.username
        ))),
    }
}

/// Snapshot choice and the reader's plan, decided in the run's preflight.
#[derive(Debug, Clone)]
pub struct PackAndPlan {
    pub snapshots: Choice,
    /// The reader's plan as V$SQL_PLAN showed it (None: no readers).
    pub read_path: Option<plan::Verdict>,
}

/// What the run's preflight learned: the schemas' passwords, the snapshots, the plan, and
/// what to warn of.
#[derive(Debug, Clone)]
pub struct RunFacts {
    pub passwords: BTreeMap<String, Password>,
    pub checks: PackAndPlan,
    pub warnings: Vec<String>,
    pub notes: Vec<String>,
}

/// At most this many schemas' reader plans are checked before the window (each costs one
/// read of work_unit keys); every cursor the sessions ran is checked after it.
pub const PLAN_CHECKS: usize = 8;

/// run's preflight: every schema dbio's and complete at the planned scale, its optimizer
/// statistics agreeing, its account open; room for the sessions; the admin's privileges;
/// the snapshots to take; the reader's plan an index range scan. Reads only the dictionary
/// (and one read of work_unit keys per checked schema): no table scan just before the window.
#[allow(clippy::too_many_arguments)]
pub fn run_preflight(
    admin: &super::ConnectString,
    facts: &ServerFacts,
    plan: &DataSetPlan,
    reader_schemas: &[String],
    sessions: u32,
    work_unit: u64,
    asked: Snapshots,
    timeouts: &super::Timeouts,
) -> Result<RunFacts> {
    let conn = super::connect(admin, None, timeouts)?;
    let cats = catalogs(&conn, &facts.admin)?;
    let mut unfit = Vec::new();
    let mut warnings = Vec::new();
    let mut notes = Vec::new();
    let mut passwords = BTreeMap::new();
    for j in judge_plan(&conn, &cats, plan, false)? {
        let stats = conn.query_opt::<(Option<i64>, Option<i64>)>(
            None,
            &sql::table_stats(&j.user),
            &format!("{}: reading the optimizer statistics", j.user),
        )?;
        if let Some(why) = loader::preflight(&j.user, &j.own, stats, plan.scale_blocks) {
            unfit.push(why);
            continue;
        }
        if let Ownership::Ours { row, .. } = &j.own {
            match password_of(row) {
                Ok(p) => {
                    passwords.insert(j.user.clone(), p);
                }
                Err(e) => unfit.push(e.to_string()),
            }
        }
        if let Some(status) =
            conn.query_opt::<String>(None, &sql::account_status(&j.user), "reading DBA_USERS")?
        {
            match checks::account(&j.user, &status) {
                Ok(Some(w)) => warnings.push(w),
                Ok(None) => {}
                Err(why) => unfit.push(why),
            }
        }
    }
    if !unfit.is_empty() {
        return Err(OracleError::Usage(format!(
            "the data set is not fit to run against:\n  {}",
            unfit.join("\n  ")
        )));
    }
    // The run's sessions, the collector, its sampler and this preflight's own connection.
    checks::room_for(
        &resource_limits(&conn)?,
        sessions + 3,
        &format!("the run's {sessions} sessions and dbio's 3 own connections"),
    )?;
    let granted = granted(&conn)?;
    let pack = pack_facts(&conn, &facts.version, &granted)?;
    let choice = snapshots::choose(asked, &pack);
    let command = privileges::Command::Run {
        statspack: choice.repository == Some(snapshots::Repository::Statspack),
        awr: choice.repository == Some(snapshots::Repository::Awr),
    };
    let missing = privileges::missing(command, &granted, &facts.admin);
    if !missing.is_empty() {
        return Err(OracleError::Usage(privileges::refusal(
            "run",
            &facts.admin,
            &missing,
        )));
    }
    warnings.extend(choice.warnings.iter().cloned());
    notes.extend(choice.notes.iter().cloned());
    let mut read_path = None;
    for user in reader_schemas.iter().take(PLAN_CHECKS) {
        let v = reader_plan(&conn, user, work_unit)?;
        if v.batched {
            warnings.push(plan::batched_warning(user, &v));
        }
        read_path.get_or_insert(v);
    }
    Ok(RunFacts {
        passwords,
        checks: PackAndPlan {
            snapshots: choice,
            read_path,
        },
        warnings,
        notes,
    })
}

/// Runs `user`'s reader statement once (keys 1..work_unit, as a session would) and judges
/// every cursor of it in V$SQL_PLAN.
fn reader_plan(conn: &Conn, user: &str, work_unit: u64) -> Result<plan::Verdict> {
    let read = sql::read_range(user);
    let hi = i64::try_from(work_unit).unwrap_or(i64::MAX).max(1);
    conn.call(
        None,
        |c| c.query_row_as_named::<i64>(&read.text, &[("lo", &1i64), ("hi", &hi)]),
        &format!("{user}: running the reader statement once for its plan"),
    )?;
    judge_cursors(conn, None, user)?.ok_or_else(|| {
        OracleError::Usage(format!(
            "{user}: the reader statement's plan is not in V$SQL_PLAN after it ran (grant SELECT_CATALOG_ROLE, \
             or check that the shared pool keeps it)"
        ))
    })
}

/// Judges every cursor of `user`'s reader statement in V$SQL_PLAN (`b`: the collector's
/// check after the window); Ok(None) when there is none. The first fit verdict is returned;
/// any unfit cursor is the refusal.
pub(super) fn judge_cursors(
    conn: &Conn,
    b: Option<&Breaker>,
    user: &str,
) -> Result<Option<plan::Verdict>> {
    type Row = (
        u32,
        String,
        u32,
        i64,
        String,
        u32,
        String,
        String,
        String,
        String,
    );
    let read = sql::read_range(user);
    let rows = conn.query_all::<Row>(b, &sql::sql_plan(&read.text), "reading V$SQL_PLAN")?;
    let rows: Vec<plan::PlanRow> = rows
        .into_iter()
        .map(
            |(
                inst_id,
                sql_id,
                child,
                plan_hash,
                parsing_schema,
                id,
                operation,
                options,
                owner,
                name,
            )| {
                plan::PlanRow {
                    inst_id,
                    sql_id,
                    child,
                    plan_hash,
                    parsing_schema,
                    id,
                    operation,
                    options,
                    owner,
                    name,
                }
            },
        )
        .collect();
    let mut first = None;
    for p in plan::plans(&rows) {
        let v = plan::judge(&p, user)?;
        first.get_or_insert(v);
    }
    Ok(first)
}
