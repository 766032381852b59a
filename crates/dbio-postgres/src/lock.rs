//! Exclusive use of a data set: PostgreSQL advisory locks keyed by the data set's id (from
//! dbio's marks, see `marker`), so a run is not measured while setup reloads or vacuums the
//! tables, teardown drops them, or another run drives the same tables (seen: two runs at once
//! both ended `ok`, the second counting the first's work as its own).
//!
//! - A run holds the data set's key **shared** on a connection of its own (`dbio-lock`) from
//!   before its preflight VACUUM until its result is written. Shared, so that the shards of
//!   one coordinated run (one run id, several dbio processes) pass each other; every run also
//!   holds a shared key derived from its run id, and a run that finds the data set held by a
//!   backend that does not hold its own run key is refused, naming that holder.
//! - Setup and teardown take the data set's key **exclusively** (try, never wait) on their
//!   admin connection, so they are refused while any run holds it, and a run is refused
//!   while they work.
//! - A run id belongs to one run: a run in one process holds its run key **exclusively**, so
//!   a second run given the same `--run-id` without `--shard` is refused (seen: two unrelated
//!   runs under one id ran at once, each counting the other's work); the shards of one run
//!   hold it shared, and each also holds its shard's own key exclusively, so one shard
//!   cannot run twice.
//! - The check-and-take of a run is serialized by a transaction-scoped admission key, so two
//!   runs starting at the same moment do not both see each other and both give up.
//!
//! The locks are session-level (pg_advisory_lock docs: held until released or the session
//! ends), so a dbio that dies releases them when its connection closes. They are per
//! database (pg_locks.database), as data sets are. Keys use the two-int4 form: pg_locks shows
//! them as classid (dbio's namespace) and objid (the key), objsubid 2.

use tokio_postgres::{Client, GenericClient};

use dbio_core::config::Shard;

use crate::conn::Target;
use crate::error::{PgError, Result};
use crate::marker::{self, Ownership};
use crate::sql;

/// dbio's advisory-lock namespaces (int4 "key1"): "db" and a number, unlikely to meet an
/// application's own keys.
const NS_DATA_SET: i32 = 0x6462_0001;
const NS_ADMISSION: i32 = 0x6462_0002;
const NS_RUN: i32 = 0x6462_0003;
const NS_SHARD: i32 = 0x6462_0004;

/// application_name of a run's lock connection: what a refused command names.
pub const LOCK_APPLICATION_NAME: &str = "dbio-lock";

/// The int4 key of a data set id or run id: FNV-1a (32-bit) of its text, kept non-negative
/// so pg_locks' objid (an oid) reads the same number. Stable across dbio versions and
/// processes (std's hashers are not), which the shards of one run need.
pub fn key_of(text: &str) -> i32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in text.bytes() {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    (h & 0x7fff_ffff) as i32
}

/// A fresh run id: 64 random bits from the OS-seeded keys of std's SipHash, in hex.
pub fn fresh_run_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    format!("{:016x}", h.finish())
}

/// Another backend holding a data set's key, as pg_locks and pg_stat_activity show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: i32,
    /// `ShareLock` (a run) or `ExclusiveLock` (setup, teardown).
    pub mode: String,
    pub granted: bool,
    pub application_name: Option<String>,
    pub client_addr: Option<String>,
    pub backend_start: Option<String>,
    pub user: Option<String>,
    /// It also holds the key of the run id asked about: a shard of the same run.
    pub same_run: bool,
}

impl Holder {
    /// `pid 1234 (application_name dbio-lock, user bob, client 10.0.0.5, connected since
    /// 2026-12-01 12:00:00 UTC)`; what this role may not see is said so.
    pub fn describe(&self) -> String {
        self.describe_as(if self.mode.contains("Exclusive") {
            "setup or teardown"
        } else {
            "a run"
        })
    }

    /// As [`Holder::describe`], for a key only runs take (a run id's, a shard's).
    pub fn describe_as(&self, what: &str) -> String {
        let hidden = "not visible to this role without pg_read_all_stats";
        format!(
            "pid {} ({what}: application_name {}, user {}, client {}, connected since {})",
            self.pid,
            self.application_name
                .as_deref()
                .filter(|a| !a.is_empty())
                .unwrap_or("(none)"),
            self.user.as_deref().unwrap_or(hidden),
            self.client_addr
                .as_deref()
                .unwrap_or("local socket, or not visible"),
            self.backend_start.as_deref().unwrap_or(hidden),
        )
    }
}

/// The data set ids in the marks of `names` (the schemas of the data set asked for), each once.
pub async fn data_set_ids(client: &Client, names: &[String]) -> Result<Vec<String>> {
    let mut ids: Vec<String> = marker::inspect_schemas(client, names)
        .await?
        .into_iter()
        .filter_map(|(name, own)| match own {
            Ownership::Dbio(m) if m.names(&name) => Some(m.id),
            _ => None,
        })
        .collect();
    ids.sort();
    ids.dedup();
    Ok(ids)
}

async fn holders<C: GenericClient>(client: &C, id: &str, run_key: i32) -> Result<Vec<Holder>> {
    holders_of(client, NS_DATA_SET, key_of(id), run_key).await
}

/// The backends holding key (`ns`, `key`), each said to be of run `run_key` or not.
async fn holders_of<C: GenericClient>(
    client: &C,
    ns: i32,
    key: i32,
    run_key: i32,
) -> Result<Vec<Holder>> {
    let rows = client
        .query(sql::LOCK_HOLDERS, &[&ns, &key, &NS_RUN, &run_key])
        .await
        .map_err(|e| PgError::from_db("reading who holds the data set (pg_locks)", &e))?;
    rows.iter()
        .map(|r| {
            let col = |e: tokio_postgres::Error| {
                PgError::from_db("reading who holds the data set (pg_locks)", &e)
            };
            Ok(Holder {
                pid: r.try_get(0).map_err(col)?,
                mode: r.try_get(1).map_err(col)?,
                granted: r.try_get(2).map_err(col)?,
                application_name: r.try_get(3).map_err(col)?,
                client_addr: r.try_get(4).map_err(col)?,
                backend_start: r.try_get(5).map_err(col)?,
                user: r.try_get(6).map_err(col)?,
                same_run: r.try_get(7).map_err(col)?,
            })
        })
        .collect()
}

async fn bool_of(client: &Client, sql: &str, key1: i32, key2: i32, what: &str) -> Result<bool> {
    let row = client
        .query_one(sql, &[&key1, &key2])
        .await
        .map_err(|e| PgError::from_db(what, &e))?;
    row.try_get::<_, bool>(0)
        .map_err(|e| PgError::from_db(what, &e))
}

/// The refusal when `holders` stand in the way of `command`.
fn in_use(command: &str, holders: &[Holder], what_to_do: &str) -> PgError {
    let mut named: Vec<String> = holders.iter().map(Holder::describe).collect();
    if named.is_empty() {
        named.push("another session, which released it just now".into());
    }
    PgError::Refused {
        context: format!("{command}: the data set is in use"),
        message: format!(
            "held by {} (advisory lock, pg_locks); nothing was changed",
            named.join("; ")
        ),
        hint: Some(what_to_do.to_string()),
    }
}

/// Setup and teardown: takes every id's key exclusively on `client` (their admin
/// connection, which holds it until it closes), or refuses naming the holders. `command`
/// names the refused command (`setup`, `teardown`).
pub async fn exclusive(client: &Client, ids: &[String], command: &str) -> Result<()> {
    for id in ids {
        let got = bool_of(
            client,
            sql::TRY_LOCK_EXCLUSIVE,
            NS_DATA_SET,
            key_of(id),
            "taking the data set's lock",
        )
        .await?;
        if !got {
            let found = holders(client, id, -1).await?;
            return Err(in_use(
                command,
                &found,
                "wait for that run (or setup, teardown) to end, or stop it, then run this again",
            ));
        }
    }
    Ok(())
}

/// A run's hold on its data set: the lock connection stays open until this is dropped
/// (after the result is written), which releases the locks.
pub struct RunLock {
    client: Option<Client>,
}

impl RunLock {
    /// No lock (no marked data set to hold: preflight refuses the run anyway).
    fn none() -> RunLock {
        RunLock { client: None }
    }
}

/// Takes the data set of schemas `names` for a run of id `run_id` (a fresh id per run; the
/// shards of one coordinated run pass the same id and their `shard`): refused while setup or
/// teardown hold it, while a run of another id holds it, while another run in one process
/// holds this run id, or while this shard already runs, naming the holder.
pub async fn for_run(
    target: &Target,
    names: &[String],
    run_id: &str,
    shard: Option<Shard>,
) -> Result<RunLock> {
    let mut client = target.connect(LOCK_APPLICATION_NAME).await?;
    let ids = data_set_ids(&client, names).await?;
    if ids.is_empty() {
        return Ok(RunLock::none());
    }
    let run_key = key_of(run_id);
    let tx = client
        .transaction()
        .await
        .map_err(|e| PgError::from_db("taking the data set's lock", &e))?;
    for id in &ids {
        // One admission at a time per data set; released when the transaction ends.
        tx.query_one(sql::LOCK_XACT, &[&NS_ADMISSION, &key_of(id)])
            .await
            .map_err(|e| PgError::from_db("waiting for the data set's admission lock", &e))?;
    }
    if let Some(refused) = take_run_key(&tx, run_id, run_key, shard).await? {
        // Closing the connection releases whatever it took.
        drop(tx);
        drop(client);
        return Err(refused);
    }
    let mut refusal = None;
    for id in &ids {
        let row = tx
            .query_one(sql::TRY_LOCK_SHARED, &[&NS_DATA_SET, &key_of(id)])
            .await
            .map_err(|e| PgError::from_db("taking the data set's lock", &e))?;
        let got: bool = row
            .try_get(0)
            .map_err(|e| PgError::from_db("taking the data set's lock", &e))?;
        if !got {
            refusal = Some(holders(&tx, id, run_key).await?);
            break;
        }
        let others: Vec<Holder> = holders(&tx, id, run_key)
            .await?
            .into_iter()
            .filter(|h| h.granted && !h.same_run)
            .collect();
        if !others.is_empty() {
            refusal = Some(others);
            break;
        }
    }
    tx.commit()
        .await
        .map_err(|e| PgError::from_db("taking the data set's lock", &e))?;
    if let Some(found) = refusal {
        // The connection closes with this function, and its locks with it.
        drop(client);
        return Err(in_use(
            "run",
            &found,
            "another dbio run, setup or teardown works on this data set: wait for it to end, or run \
             against another data set (--prefix); the shards of one coordinated run share a run id and pass",
        ));
    }
    Ok(RunLock {
        client: Some(client),
    })
}

/// Takes the run id's key: exclusively for a run in one process, shared by the shards of one
/// run, each of which also takes its own shard's key exclusively. The refusal, naming the
/// holder, when another run has them.
async fn take_run_key<C: GenericClient>(
    tx: &C,
    run_id: &str,
    run_key: i32,
    shard: Option<Shard>,
) -> Result<Option<PgError>> {
    let what = "taking the run id's lock";
    let try_lock = |sql: &'static str, ns: i32, key: i32| async move {
        let row = tx
            .query_one(sql, &[&ns, &key])
            .await
            .map_err(|e| PgError::from_db(what, &e))?;
        row.try_get::<_, bool>(0)
            .map_err(|e| PgError::from_db(what, &e))
    };
    let refused = |holders: Vec<Holder>, message: String, hint: &str| {
        let mut named: Vec<String> = holders.iter().map(|h| h.describe_as("a run")).collect();
        if named.is_empty() {
            named.push("another session, which released it just now".into());
        }
        PgError::Refused {
            context: "run: the run id is in use".to_string(),
            message: format!(
                "{message}: held by {}; nothing was changed",
                named.join("; ")
            ),
            hint: Some(hint.to_string()),
        }
    };
    match shard {
        None => {
            if try_lock(sql::TRY_LOCK_EXCLUSIVE, NS_RUN, run_key).await? {
                return Ok(None);
            }
            let found = holders_of(tx, NS_RUN, run_key, run_key).await?;
            Ok(Some(refused(
                found,
                format!("another run holds run id {run_id:?}"),
                "a run id belongs to one run: give this run another --run-id (or none); the processes of one \
                 coordinated run pass --shard I/N as well as the same --run-id",
            )))
        }
        Some(s) => {
            if !try_lock(sql::TRY_LOCK_SHARED, NS_RUN, run_key).await? {
                let found = holders_of(tx, NS_RUN, run_key, run_key).await?;
                return Ok(Some(refused(
                    found,
                    format!("a run in one process (no --shard) holds run id {run_id:?}"),
                    "give the shards of this run another --run-id",
                )));
            }
            let shard_key = key_of(&format!("{run_id}/{}", s.index));
            if try_lock(sql::TRY_LOCK_EXCLUSIVE, NS_SHARD, shard_key).await? {
                return Ok(None);
            }
            let found = holders_of(tx, NS_SHARD, shard_key, run_key).await?;
            Ok(Some(refused(
                found,
                format!(
                    "shard {}/{} of run {run_id:?} is already running",
                    s.index, s.count
                ),
                "each shard of a run runs once: give every process its own --shard index",
            )))
        }
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Dropping the client closes the connection; the server releases session locks
        // when the backend exits.
        self.client.take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_stable_and_non_negative() {
        // FNV-1a 32 of "" is 0x811c9dc5; the sign bit is cleared.
        assert_eq!(key_of(""), 0x011c_9dc5);
        assert_eq!(key_of("a"), (0xe40c_292c_u32 & 0x7fff_ffff) as i32);
        assert_eq!(key_of("abc"), key_of("abc"));
        assert_ne!(key_of("abc"), key_of("abd"));
        for id in ["0123456789abcdef0123456789abcdef", "x", "run-7"] {
            assert!(key_of(id) >= 0);
        }
    }

    #[test]
    fn a_holder_is_named_with_what_can_be_seen() {
        let h = Holder {
            pid: 4242,
            mode: "ShareLock".into(),
            granted: true,
            application_name: Some("dbio-lock".into()),
            client_addr: Some("10.0.0.5".into()),
            backend_start: Some("2026-12-01 12:00:00 UTC".into()),
            user: Some("bob".into()),
            same_run: false,
        };
        let d = h.describe();
        assert!(
            d.starts_with("pid 4242 (a run: application_name dbio-lock"),
            "{d}"
        );
        assert!(
            d.contains("10.0.0.5") && d.contains("2026-12-01 12:00:00 UTC"),
            "{d}"
        );
        let hidden = Holder {
            mode: "ExclusiveLock".into(),
            backend_start: None,
            user: None,
            ..h
        };
        let d = hidden.describe();
        assert!(
            d.contains("setup or teardown") && d.contains("pg_read_all_stats"),
            "{d}"
        );
    }
}
