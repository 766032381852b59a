//! setup, check and teardown on the server. Each decides from the schemas' records
//! (`loader::decide_setup`, `loader::decide_teardown`) before it changes anything, checks the
//! admin's privileges first, and stops at an interrupt ([`Breaker`]): the statement in flight
//! is broken, and what is left is recorded so the next command resumes or drops it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use dbio_core::dataset::{
    CheckReport, DataSetPlan, LoadObserver, SchemaAction, SchemaCheck, SchemaOutcome,
};
use dbio_core::teardown::{ObjectNames, SchemaDrop, TeardownPlan, TeardownReport};

use super::records::{self, Catalogs};
use super::{Breaker, Conn, Result, ServerFacts, Timeouts, connect, env};
use crate::loader::{self, Action, Judged};
use crate::mark::{self, Identity, LoadState, Ownership, SchemaMark};
use crate::privileges::Command;
use crate::sql;
use crate::{ConnectString, OracleError, checks};

/// ORA-01920: the user name conflicts with another user or role name.
const NAME_TAKEN: &str = "ORA-01920";
/// ORA-00054: resource busy (the catalog is in use by another session).
const BUSY: &str = "ORA-00054";

/// Connects as the admin for a command, registered with the interrupt.
fn admin_conn(admin: &ConnectString, timeouts: &Timeouts, b: &Breaker) -> Result<Conn> {
    let c = connect(admin, None, timeouts)?;
    b.register(&c);
    Ok(c)
}

/// Creates the admin's catalog when it is missing; refuses a table of its name that dbio did
/// not create.
fn ensure_catalog(conn: &Conn, cats: &Catalogs, admin: &str, b: &Breaker) -> Result<()> {
    match cats.own {
        Some(true) => Ok(()),
        Some(false) => Err(OracleError::Usage(format!(
            "{admin}.{} exists and dbio did not create it (its comment is not dbio's catalog mark): rename it, \
             or run setup as another admin user",
            sql::CATALOG
        ))),
        None => {
            conn.execute(
                Some(b),
                &sql::create_catalog(admin),
                "creating dbio's catalog",
            )?;
            conn.execute(
                Some(b),
                &sql::comment_catalog(admin),
                "marking dbio's catalog",
            )
        }
    }
}

/// SLOB's setup, schema by schema, `data.parallel` at a time on their own connections: per
/// schema the intent in the admin's catalog first, then the user with its default tablespace
/// and quota, CF1 one row per block, the keys loaded in random order on the server, I_CF1,
/// optimizer statistics and the mark. Before anything changes: the privileges, the schemas'
/// records (`loader::decide_setup`), the room for the load (FRA, TEMP, the tablespace) and
/// for the loaders' connections. `observer` hears of each schema as it is done; the outcome
/// of each, in schema order, is returned (a table's bytes are its blocks, one row per block;
/// index bytes are not measured here: 0).
pub fn setup(
    admin: &ConnectString,
    plan: &DataSetPlan,
    facts: &ServerFacts,
    force: bool,
    timeouts: &Timeouts,
    b: &Breaker,
    observer: &dyn LoadObserver,
) -> Result<Vec<SchemaOutcome>> {
    let prefix = mark::check_prefix(&plan.prefix, plan.schemas)?;
    let conn = admin_conn(admin, timeouts, b)?;
    let me = facts.admin.as_str();
    records::check_privileges(&conn, Command::Setup, "setup", me)?;
    let cats = records::catalogs(&conn, me)?;
    let judged = records::judge_plan(&conn, &cats, plan, true)?;
    // A schema another admin's catalog records is that admin's to change.
    for j in &judged {
        if let Ownership::Ours { row, .. } | Ownership::Stale(row) = &j.own
            && row.owner != me
        {
            return Err(OracleError::Usage(format!(
                "{} is recorded in {}.{}: run setup as {} (or tear it down as {})",
                j.user,
                row.owner,
                sql::CATALOG,
                row.owner,
                row.owner
            )));
        }
    }
    let decision = loader::decide_setup(
        plan,
        facts.tablespace.block_size,
        &judged,
        force,
        Identity::fresh,
    )?;
    let to_load = decision
        .actions
        .iter()
        .filter(|(_, a)| matches!(a, Action::Build | Action::CleanThenBuild | Action::Rebuild))
        .count() as u32;
    let users: Vec<String> = judged.iter().map(|j| j.user.clone()).collect();
    let given = env("DBIO_ORACLE_USER_PASSWORD");
    if let Some(p) = &given {
        mark::check_given_password(p, &users)?;
    }
    if to_load > 0 {
        let needs = checks::load_needs(
            to_load,
            plan.scale_blocks,
            facts.tablespace.block_size,
            plan.parallel,
        );
        for w in checks::load_space(&needs, &records::load_facts(&conn, facts)?)? {
            observer.note(&format!("warning: {w}"));
        }
        let loaders = plan.parallel.clamp(1, to_load);
        checks::room_for(
            &records::resource_limits(&conn)?,
            loaders,
            &format!("setup's {loaders} loader connection(s)"),
        )?;
        ensure_catalog(&conn, &cats, me, b)?;
    }
    let by_schema = |n: u32| judged.iter().find(|j| j.schema == n);
    let table_bytes = plan.scale_blocks * facts.tablespace.block_size;
    let outcome = |n: u32, action: SchemaAction, seconds: f64| SchemaOutcome {
        schema: mark::user_name(&prefix, n),
        action,
        rows: plan.scale_blocks,
        table_bytes,
        index_bytes: 0,
        seconds,
    };
    // Keep and Remark here; the loads on their own connections.
    let mut loads = Vec::new();
    let mut kept = Vec::new();
    for (n, action) in &decision.actions {
        let user = mark::user_name(&prefix, *n);
        match action {
            Action::Keep => observer.note(&format!(
                "{user}: kept (complete, {} blocks)",
                plan.scale_blocks
            )),
            Action::Remark(m) => {
                conn.execute_commit(
                    Some(b),
                    &sql::comment_table(&user, &m.to_comment()),
                    &format!("{user}: updating its mark"),
                )?;
                observer.note(&format!(
                    "{user}: kept (complete, {} blocks; its mark now counts {} schemas)",
                    plan.scale_blocks, plan.schemas
                ));
            }
            a => {
                loads.push((*n, a.clone(), by_schema(*n).cloned()));
                continue;
            }
        }
        kept.push(outcome(*n, SchemaAction::Kept, 0.0));
    }
    drop(conn);
    let next = AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::<(u32, OracleError)>::new());
    let loaded = std::sync::Mutex::new(Vec::<SchemaOutcome>::new());
    std::thread::scope(|scope| {
        for _ in 0..plan.parallel.clamp(1, (loads.len() as u32).max(1)) {
            scope.spawn(|| {
                let conn = match admin_conn(admin, timeouts, b) {
                    Ok(c) => c,
                    Err(e) => {
                        if let Ok(mut f) = failures.lock() {
                            f.push((0, e));
                        }
                        return;
                    }
                };
                loop {
                    let i = next.fetch_add(1, Ordering::AcqRel);
                    let Some((n, action, judged)) = loads.get(i) else {
                        break;
                    };
                    let failed = failures.lock().map(|f| !f.is_empty()).unwrap_or(true);
                    if failed || b.stopped().is_some() {
                        break;
                    }
                    let started = Instant::now();
                    observer.schema_started(&mark::user_name(&prefix, *n), plan.scale_blocks);
                    let schema = SchemaMark::new(
                        &decision.identity,
                        &prefix,
                        *n,
                        plan.schemas,
                        plan.scale_blocks,
                        facts.tablespace.block_size,
                        plan.tablespace.as_deref(),
                        plan.schema_seed(*n),
                        LoadState::Loading,
                    );
                    match build(
                        &conn,
                        b,
                        me,
                        plan,
                        facts,
                        &schema,
                        action,
                        judged.as_ref(),
                        given.as_deref(),
                    ) {
                        Ok(()) => {
                            let done =
                                outcome(*n, SchemaAction::Loaded, started.elapsed().as_secs_f64());
                            observer.schema_finished(&done.schema, &done);
                            if let Ok(mut l) = loaded.lock() {
                                l.push(done);
                            }
                        }
                        Err(e) => {
                            if let Ok(mut f) = failures.lock() {
                                f.push((*n, e));
                            }
                            break;
                        }
                    }
                }
            });
        }
    });
    let mut failures = failures.into_inner().unwrap_or_default();
    failures.sort_by_key(|(n, _)| *n);
    let Some((_, first)) = failures.into_iter().next() else {
        if let Some(by) = b.stopped() {
            return Err(interrupted(&by, me));
        }
        if given.is_none() && !loads.is_empty() {
            observer.note(&format!(
                "the schema users' passwords were generated (24 characters each) and are recorded where dbio reads \
                 them: SELECT username, password FROM {me}.{} WHERE prefix = '{prefix}' (set \
                 DBIO_ORACLE_USER_PASSWORD before setup to choose one instead)",
                sql::CATALOG
            ));
        }
        let mut outcomes = kept;
        outcomes.extend(loaded.into_inner().unwrap_or_default());
        outcomes.sort_by_key(|o| mark::schema_number(&prefix, &o.schema));
        return Ok(outcomes);
    };
    Err(match (b.stopped(), first) {
        (Some(by), _) | (None, OracleError::Interrupted(by)) => interrupted(&by, me),
        (None, e) => e,
    })
}

fn interrupted(by: &str, admin: &str) -> OracleError {
    OracleError::Interrupted(format!(
        "setup stopped ({by}): the statement in flight was broken; every schema it had started is recorded in \
         {admin}.{} and marked loading, and the next `dbio setup` rebuilds those and keeps the complete ones \
         (`dbio teardown --yes` drops them all)",
        sql::CATALOG
    ))
}

/// One schema: cleans up what an earlier setup left, writes the intent, creates and loads.
#[allow(clippy::too_many_arguments)]
fn build(
    conn: &Conn,
    b: &Breaker,
    me: &str,
    plan: &DataSetPlan,
    facts: &ServerFacts,
    schema: &SchemaMark,
    action: &Action,
    judged: Option<&Judged>,
    given: Option<&str>,
) -> Result<()> {
    let user = mark::user_name(&schema.prefix, schema.schema);
    let ctx = |what: &str| format!("{user}: {what}");
    if *action == Action::Rebuild {
        let exists =
            judged.is_some_and(|j| !matches!(j.own, Ownership::Stale(_) | Ownership::Absent));
        if exists {
            conn.execute(
                Some(b),
                &sql::drop_user(&user),
                &ctx("dropping it to rebuild it"),
            )?;
        }
    }
    if matches!(action, Action::Rebuild | Action::CleanThenBuild) {
        conn.execute_commit(
            Some(b),
            &sql::forget_user(me, &user),
            &ctx("removing its old catalog row"),
        )?;
    }
    let generated = match given {
        Some(_) => None,
        None => Some(mark::generate_password()?),
    };
    let password = given
        .map(str::to_string)
        .or(generated.clone())
        .unwrap_or_default();
    // The intent first: if this process dies after CREATE USER, the user is still dbio's.
    conn.execute_commit(
        Some(b),
        &sql::record_intent(
            me,
            &user,
            &schema.id,
            &schema.prefix,
            schema.schema,
            generated.as_deref(),
        ),
        &ctx("recording it in dbio's catalog"),
    )?;
    let steps = loader::schema_steps(plan, schema, &password, &facts.tablespace);
    let (create, rest) = steps.split_first().ok_or_else(|| OracleError::Failed {
        context: ctx("setup"),
        message: "no steps".into(),
    })?;
    if let Err(e) = conn.execute(Some(b), &create.stmt, &ctx(create.what)) {
        if e.to_string().contains(NAME_TAKEN) {
            // Someone created the user meanwhile: not ours; the intent goes.
            let _ = conn.execute_commit(
                None,
                &sql::forget_user(me, &user),
                &ctx("removing the intent"),
            );
        }
        return Err(e);
    }
    conn.execute_commit(
        Some(b),
        &sql::record_created(me, &user),
        &ctx("recording its USER_ID"),
    )?;
    for step in rest {
        conn.execute_commit(Some(b), &step.stmt, &ctx(step.what))?;
    }
    Ok(())
}

/// `check`: every schema dbio's and complete, rows = keys = distinct blocks (one row per
/// block), by a full scan of each table (DBMS_ROWID); the report core renders for every
/// engine.
pub fn check(
    admin: &ConnectString,
    plan: &DataSetPlan,
    facts: &ServerFacts,
    timeouts: &Timeouts,
    b: &Breaker,
) -> Result<CheckReport> {
    let conn = admin_conn(admin, timeouts, b)?;
    records::check_privileges(&conn, Command::Check, "check", &facts.admin)?;
    let cats = records::catalogs(&conn, &facts.admin)?;
    let mut schemas = Vec::new();
    for j in records::judge_plan(&conn, &cats, plan, false)? {
        let user = &j.user;
        if let Some(why) = loader::records_problem(user, &j.own, plan.scale_blocks) {
            schemas.push(SchemaCheck {
                schema: user.clone(),
                facts: Vec::new(),
                problems: vec![
                    why.strip_prefix(&format!("{user}: "))
                        .unwrap_or(&why)
                        .to_string(),
                ],
            });
            continue;
        }
        let (rows, blocks, lo, hi) = conn
            .query_opt::<(i64, i64, Option<i64>, Option<i64>)>(
                Some(b),
                &sql::rows_and_blocks(user),
                &format!("{user}: counting rows and blocks"),
            )?
            .unwrap_or((0, 0, None, None));
        schemas.push(checks::judge_rows(
            user,
            plan.scale_blocks,
            checks::RowCounts {
                rows,
                blocks,
                lo,
                hi,
            },
        ));
    }
    Ok(CheckReport {
        schemas,
        missing_rights: Vec::new(),
    })
}

/// What teardown's lines call the data set's objects on Oracle.
pub const NAMES: ObjectNames = ObjectNames {
    schema: "user",
    table: "CF1",
    index: "I_CF1",
};

/// The users of one data set, as teardown judges them: those dbio's catalog (the admin's)
/// records under the prefix, by exact name, and users named like the prefix's schemas whose
/// CF1 claims dbio's mark without a row. Returns the session user, its catalogs and the
/// decision.
fn judge_teardown(
    conn: &Conn,
    prefix: &str,
    yes: bool,
    b: &Breaker,
) -> Result<(String, Catalogs, loader::TeardownPlan)> {
    let me = conn.query_row::<String>(&sql::session_user(), "reading the session user")?;
    if yes {
        records::check_privileges(conn, Command::Teardown, "teardown", &me)?;
    }
    let cats = records::catalogs(conn, &me)?;
    let mut judged = Vec::new();
    for row in records::rows_of_prefix(conn, &cats, prefix)? {
        let (user, n) = (row.username.clone(), row.schema);
        judged.push(records::judge(
            conn,
            &cats,
            prefix,
            &user,
            n,
            Some(row),
            true,
        )?);
    }
    // Users named <PREFIX><n> whose CF1 claims dbio's mark without a catalog row.
    for (owner, comment) in conn.query_all::<(String, Option<String>)>(
        Some(b),
        &sql::cf1_comments(),
        "reading CF1 comments",
    )? {
        let Some(n) = mark::schema_number(prefix, &owner) else {
            continue;
        };
        let claims_this_prefix = match mark::Mark::parse(comment.as_deref()) {
            mark::Mark::None => false,
            mark::Mark::Dbio(m) => m.prefix == prefix,
            mark::Mark::Legacy | mark::Mark::Unreadable(_) => true,
        };
        if !claims_this_prefix || judged.iter().any(|j| j.user == owner) {
            continue;
        }
        let j = records::judge(conn, &cats, prefix, &owner, n, None, false)?;
        // Recorded under another prefix (TS21 as schema 1 of TS2): another data set's.
        if matches!(&j.own, Ownership::Disputed(w) if w.starts_with("belongs to the dbio data set"))
        {
            continue;
        }
        judged.push(j);
    }
    judged.sort_by_key(|j| j.schema);
    let t = loader::decide_teardown(&judged, &me);
    Ok((me, cats, t))
}

/// What `teardown` would drop of the data set of `prefix`: a user dbio created (CF1, I_CF1),
/// only CF1 of a user who owns other objects, the rows of intents whose user never came to
/// be; users it leaves, with why. Changes nothing.
pub fn teardown_plan(
    admin: &ConnectString,
    prefix: &str,
    timeouts: &Timeouts,
    b: &Breaker,
) -> Result<TeardownPlan> {
    let prefix = mark::check_prefix(prefix, 1)?;
    let conn = admin_conn(admin, timeouts, b)?;
    let (_, _, t) = judge_teardown(&conn, &prefix, false, b)?;
    let mut plan = TeardownPlan::new(NAMES);
    plan.schemas = t
        .drop
        .into_iter()
        .map(|(row, foreign)| SchemaDrop {
            schema: row.username,
            exists: true,
            table: true,
            dependents: Vec::new(),
            foreign_objects: foreign,
        })
        .chain(t.stale.into_iter().map(|row| SchemaDrop {
            schema: row.username,
            exists: false,
            table: false,
            dependents: Vec::new(),
            foreign_objects: Vec::new(),
        }))
        .collect();
    plan.left = t.untouched;
    Ok(plan)
}

/// Drops one data set (see [`teardown_plan`]): a user dbio created with everything in it;
/// only CF1 of a user who owns other objects (the user stays, its row goes); the rows of
/// intents whose user never came to be. Users named like the prefix's schemas that the
/// records do not back, or another admin's, are named and left. The catalog goes with the
/// last data set it records.
pub fn teardown(
    admin: &ConnectString,
    prefix: &str,
    timeouts: &Timeouts,
    b: &Breaker,
) -> Result<TeardownReport> {
    let prefix = mark::check_prefix(prefix, 1)?;
    let conn = admin_conn(admin, timeouts, b)?;
    let (me, cats, t) = judge_teardown(&conn, &prefix, true, b)?;
    let mut report = TeardownReport::new(NAMES);
    report.left = t.untouched;
    if t.drop.is_empty() && t.stale.is_empty() {
        return Ok(report);
    }
    for (row, foreign) in t.drop {
        let user = &row.username;
        if foreign.is_empty() {
            conn.execute(Some(b), &sql::drop_user(user), &format!("dropping {user}"))?;
            conn.execute_commit(
                Some(b),
                &sql::forget_user(&me, user),
                &format!("removing {user}'s catalog row"),
            )?;
            report.dropped.push(row.username);
        } else {
            let dropped = conn.execute(
                Some(b),
                &sql::drop_table(user),
                &format!("dropping {user}.CF1"),
            );
            match dropped {
                Ok(()) => {}
                // ORA-00942: CF1 is already gone (the setup stopped before it).
                Err(e) if e.to_string().contains("ORA-00942") => {}
                Err(e) => return Err(e),
            }
            conn.execute_commit(
                Some(b),
                &sql::forget_user(&me, user),
                &format!("removing {user}'s catalog row"),
            )?;
            report.kept.push(SchemaDrop {
                schema: row.username,
                exists: true,
                table: true,
                dependents: Vec::new(),
                foreign_objects: foreign,
            });
        }
    }
    for row in t.stale {
        conn.execute_commit(
            Some(b),
            &sql::forget_user(&me, &row.username),
            &format!("removing {}'s catalog row", row.username),
        )?;
        report.forgotten.push(row.username);
    }
    // The catalog goes with the last data set it records.
    if cats.own == Some(true)
        && conn.query_row::<i64>(&sql::catalog_count(&me), "counting dbio's catalog")? == 0
    {
        match conn.execute(
            Some(b),
            &sql::drop_catalog(&me),
            "dropping dbio's empty catalog",
        ) {
            Ok(()) => report.records_dropped = Some(format!("{me}.{}", sql::CATALOG)),
            Err(e) if e.to_string().contains(BUSY) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(report)
}
