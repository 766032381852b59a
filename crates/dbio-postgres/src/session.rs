//! A measured session: one connection for the whole run, owned by the session's thread, its
//! two statements prepared once, so each operation is exactly one round trip with nothing in
//! between (see `wire`). No pool in the measured path.

use dbio_core::driver::{Canceller, LoopCounts, LoopSession, OpError, Session};

use crate::conn::Target;
use crate::error::{PgError, Result};
use crate::sql;
use crate::tls::Negotiated;
/// The raw connection of a measured session, for tests of the protocol (TLS, cancel,
/// target_session_attrs) and the client-cost example; everything else opens `PgSession`.
pub use crate::wire::{
    CancelHandle, ConnectError, Executed, INT8, Param, ServerError, ShutdownHandle, TEXT, WireConn,
    WireError,
};
pub use crate::wire::{Step, StepResult};
use postgres_protocol::Oid;

/// How sessions are opened.
#[derive(Debug, Clone, Copy)]
pub struct SessionOptions {
    /// Updates set every filler column (redo stress heavy).
    pub heavy: bool,
    pub major: i32,
    pub statement_timeout: std::time::Duration,
    /// The plan steering of `run.read_path` (see `sql::read_path_settings`).
    pub read_path: dbio_core::config::ReadPath,
}

const READ: &str = "dbio_read";
const UPDATE: &str = "dbio_update";

pub struct PgSession {
    conn: WireConn,
    major: i32,
    /// The operation the event engine sent is an update (its rows are the tag's).
    sent_update: bool,
    /// track_io_timing is on in this session (dbio set it, or the server had it on).
    pub io_timing: bool,
}

impl PgSession {
    /// Connects as `application_name` and prepares the read and update of `schema`; blocks.
    /// Turns track_io_timing on for itself when the role may (superuser, or on 15+ GRANT SET
    /// ON PARAMETER); otherwise `io_timing` tells what the server setting is.
    pub fn open(
        target: &Target,
        application_name: &str,
        schema: &str,
        opts: &SessionOptions,
    ) -> Result<PgSession> {
        let (read, update) = (
            sql::read_range(schema),
            sql::update_range(schema, opts.heavy),
        );
        let statements: [(&str, &str, &[Oid]); 2] = [
            (READ, &read, &[INT8, INT8]),
            (UPDATE, &update, &[INT8, INT8, TEXT]),
        ];
        // Both prepares and the statistics flush go with the settings, in one round trip:
        // at a thousand sessions each round trip of their start costs the client a wake-up
        // per session (issue 34). The flush publishes the settings' and prepares'
        // transactions before the "before" snapshot, so the window's commits are the
        // operations'.
        let mut then = vec![Step::Prepare(&statements)];
        if opts.major >= 15 {
            then.push(Step::Simple(sql::FORCE_FLUSH));
        }
        let (conn, io_timing, answers) = connect(
            target,
            application_name,
            opts.statement_timeout,
            opts,
            &then,
        )?;
        if let Some(Err(e)) = answers.first() {
            return Err(failure(application_name)(
                format!("preparing the read and the update of {schema}"),
                WireError::Server(e.clone()),
            ));
        }
        Ok(PgSession {
            conn,
            major: opts.major,
            sent_update: false,
            io_timing,
        })
    }
}

impl PgSession {
    /// The TLS protocol and cipher of the session's connection; None in plaintext.
    pub fn tls(&self) -> Option<&Negotiated> {
        self.conn.tls()
    }

    /// The session's backend process id (pg_backend_pid()).
    pub fn backend_pid(&self) -> i32 {
        self.conn.backend_pid()
    }
}

impl PgLoopSession {
    /// The TLS protocol and cipher of the session's connection; None in plaintext.
    pub fn tls(&self) -> Option<&Negotiated> {
        self.conn.tls()
    }

    /// The session's backend process id (pg_backend_pid()).
    pub fn backend_pid(&self) -> i32 {
        self.conn.backend_pid()
    }
}

/// What a failed setup step of session `application_name` becomes.
fn failure(application_name: &str) -> impl Fn(String, WireError) -> PgError + '_ {
    move |what, e| PgError::Failed {
        context: format!("{application_name}: {what}"),
        message: e.to_string(),
        hint: None,
    }
}

/// Opens a session's connection with its settings: statement_timeout (always, so a role
/// default does not apply) and no idle timeouts, track_io_timing when the role may set it,
/// one generic plan; then runs `then`, all of it in one round trip after the logon. Returns
/// the connection, whether track_io_timing is on for it, and the answers of `then` (a
/// connection lost meanwhile is an error naming the whole setup).
fn connect(
    target: &Target,
    application_name: &str,
    statement_timeout: std::time::Duration,
    opts: &SessionOptions,
    then: &[Step<'_>],
) -> Result<(WireConn, bool, Vec<StepResult>)> {
    let mut conn = WireConn::open(target, application_name)?;
    let failed = failure(application_name);
    // The settings every session must have. One plan for the whole run, as SLOB's shared
    // cursor: custom plans would re-plan every call and, near the key range's ends, probe
    // the index from the planner (get_actual_variable_range), adding index scans that are
    // not the workload's. The read path is the one preflight verified the plan of (its
    // EXPLAIN ran under the same setting).
    let settings = format!(
        "{}; SET plan_cache_mode = force_generic_plan; {}",
        sql::session_settings(statement_timeout.as_millis(), opts.major),
        sql::read_path_settings(opts.read_path)
    );
    // track_io_timing apart: a role that may not set it must not lose the settings above
    // with it. What the session then has is read back either way.
    let mut steps = vec![
        Step::Simple(&settings),
        Step::Simple("SET track_io_timing = on"),
        Step::Simple("SELECT current_setting('track_io_timing')"),
    ];
    steps.extend(then.iter().copied());
    let mut answers = conn.pipeline(&steps).map_err(|e| {
        failed(
            "setting the session up (its settings, prepared statements and statistics flush)"
                .into(),
            e,
        )
    })?;
    if let Some(Err(e)) = answers.first() {
        return Err(failed(
            "setting statement_timeout, the idle timeouts, plan_cache_mode and the read path"
                .into(),
            WireError::Server(e.clone()),
        ));
    }
    let io_timing = matches!(
        answers.get(2),
        Some(Ok(Some(row))) if row.first().is_some_and(|v| v.as_deref() == Some("on"))
    );
    let then_answers = answers.split_off(answers.len().min(3));
    Ok((conn, io_timing, then_answers))
}

/// A session of `run.engine: server`: its loop is a procedure in its own pg_temp schema,
/// called once for the whole run (in slices where the server cannot notice a lost client).
pub struct PgLoopSession {
    conn: WireConn,
    call: LoopCall,
    major: i32,
    /// `Some(s)`: the loop runs in calls of at most `s` seconds.
    slice_s: Option<f64>,
    /// Set by the canceller, so no further slice starts.
    cancelled: std::sync::Arc<std::sync::atomic::AtomicBool>,
    pub io_timing: bool,
}

/// Without client_connection_check_interval (PostgreSQL 13, or a platform that refuses it) a
/// loop orphaned by dbio's death runs until its call ends: calls of this many seconds bound
/// the orphan, for one round trip per slice.
const LOOP_SLICE_S: f64 = 5.0;

/// What the loop is told to do.
#[derive(Debug, Clone)]
pub struct LoopCall {
    pub scale_blocks: u64,
    pub work_unit: u64,
    pub update_work_unit: u64,
    /// 100 for writers.
    pub update_pct: u32,
    /// The session's seed, from the run seed and its index.
    pub seed: u64,
    /// Written into updated rows, as the client engine writes the session's index.
    pub tag: String,
}

impl PgLoopSession {
    /// Connects and creates the loop procedure for `schema` in the session's pg_temp. The
    /// whole loop is one statement: statement_timeout is set to `run_time` plus a minute so a
    /// hung loop still ends, and not to target.statement_timeout, which is per operation.
    pub fn open(
        target: &Target,
        application_name: &str,
        schema: &str,
        opts: &SessionOptions,
        run_time: std::time::Duration,
        call: LoopCall,
    ) -> Result<PgLoopSession> {
        let limit = run_time + std::time::Duration::from_secs(60);
        let (mut conn, io_timing, _) = connect(target, application_name, limit, opts, &[])?;
        // A loop whose client is gone (dbio killed) would run to the end of its call: from
        // PostgreSQL 14 the server polls the socket during the call and ends it within a
        // second. On 13, or where the setting is refused (no POLLRDHUP), the loop runs in
        // slices instead.
        let checks_client = opts.major >= 14 && conn.simple(sql::CLIENT_CHECK_INTERVAL).is_ok();
        conn.simple(&sql::server_loop_procedure(schema, opts.heavy))
            .map_err(|e| {
                failure(application_name)(format!("creating the loop procedure for {schema}"), e)
            })?;
        flush_stats(&mut conn, opts.major);
        Ok(PgLoopSession {
            conn,
            call,
            major: opts.major,
            slice_s: (!checks_client).then_some(LOOP_SLICE_S),
            cancelled: Default::default(),
            io_timing,
        })
    }
}

/// Parses `{1,2,3}` (a bigint[] as text).
fn parse_buckets(text: Option<&str>) -> Vec<u64> {
    text.unwrap_or("")
        .trim_matches(|c| c == '{' || c == '}')
        .split(',')
        .filter_map(|v| v.trim().parse().ok())
        .collect()
}

impl PgLoopSession {
    /// One call of the loop for `seconds`; `slice` numbers the calls so each draws its own keys.
    fn call_loop(&mut self, seconds: f64, slice: u64) -> std::result::Result<LoopCounts, OpError> {
        let c = &self.call;
        let seed = c
            .seed
            .wrapping_add(slice.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        // setseed takes a value in [-1, 1].
        let seed = (seed >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
        let sql = sql::server_loop_call(
            seconds,
            c.scale_blocks,
            c.work_unit,
            c.update_work_unit,
            c.update_pct,
            seed,
            &c.tag,
        );
        let row = self
            .conn
            .simple_row(&sql)
            .map_err(op_error)?
            .ok_or_else(|| OpError {
                message: "the loop procedure returned no row".into(),
                fatal: true,
            })?;
        let num = |i: usize| -> u64 {
            row.get(i)
                .and_then(|v| v.as_deref())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        let text = |i: usize| row.get(i).and_then(|v| v.as_deref());
        Ok(LoopCounts {
            ops: [num(0), num(1)],
            rows: [num(2), num(3)],
            buckets: [parse_buckets(text(4)), parse_buckets(text(5))],
        })
    }
}

/// Adds one slice's counts to the run's.
fn add_counts(total: &mut LoopCounts, part: LoopCounts) {
    for k in 0..2 {
        total.ops[k] += part.ops[k];
        total.rows[k] += part.rows[k];
        let b = &mut total.buckets[k];
        if b.len() < part.buckets[k].len() {
            b.resize(part.buckets[k].len(), 0);
        }
        for (t, p) in b.iter_mut().zip(&part.buckets[k]) {
            *t += p;
        }
    }
}

impl LoopSession for PgLoopSession {
    fn run_loop(&mut self, seconds: f64) -> std::result::Result<LoopCounts, OpError> {
        let Some(slice_s) = self.slice_s else {
            return self.call_loop(seconds, 0);
        };
        let started = std::time::Instant::now();
        let mut total = LoopCounts::default();
        for slice in 0.. {
            // Stopped between two calls: as a cancelled call, the loop's counts are lost.
            if self.cancelled.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(OpError {
                    message: "the loop was cancelled".into(),
                    fatal: true,
                });
            }
            let left = seconds - started.elapsed().as_secs_f64();
            if left <= 0.0 {
                break;
            }
            let part = self.call_loop(left.min(slice_s), slice)?;
            add_counts(&mut total, part);
        }
        Ok(total)
    }

    fn canceller(&self) -> Canceller {
        let cancel = canceller(&self.conn);
        let cancelled = std::sync::Arc::clone(&self.cancelled);
        std::sync::Arc::new(move || {
            cancelled.store(true, std::sync::atomic::Ordering::SeqCst);
            cancel()
        })
    }

    fn closer(&self) -> Option<Canceller> {
        closer(&self.conn)
    }

    fn flush_stats(&mut self) {
        flush_stats(&mut self.conn, self.major);
    }
}

fn op_error(e: WireError) -> OpError {
    OpError {
        fatal: e.is_fatal(),
        message: e.to_string(),
    }
}

impl Session for PgSession {
    fn read(&mut self, lo: i64, hi: i64) -> std::result::Result<u64, OpError> {
        let done = self
            .conn
            .execute(READ, &[Param::Int8(lo), Param::Int8(hi)])
            .map_err(op_error)?;
        Ok(done.first_int8.unwrap_or(0).max(0) as u64)
    }

    fn update(&mut self, lo: i64, hi: i64, value: &str) -> std::result::Result<u64, OpError> {
        let done = self
            .conn
            .execute(
                UPDATE,
                &[Param::Int8(lo), Param::Int8(hi), Param::Text(value)],
            )
            .map_err(op_error)?;
        Ok(done.tag_rows)
    }

    fn flush_stats(&mut self) {
        flush_stats(&mut self.conn, self.major);
    }

    fn canceller(&self) -> Canceller {
        canceller(&self.conn)
    }

    fn closer(&self) -> Option<Canceller> {
        closer(&self.conn)
    }

    fn event_fd(&self) -> Option<std::os::fd::RawFd> {
        self.conn.event_fd()
    }

    fn set_nonblocking(&mut self, on: bool) -> std::result::Result<(), OpError> {
        self.conn.set_nonblocking(on).map_err(|e| OpError {
            message: format!("setting the socket non-blocking: {e}"),
            fatal: true,
        })
    }

    fn send(
        &mut self,
        lo: i64,
        hi: i64,
        value: Option<&str>,
    ) -> std::result::Result<bool, OpError> {
        self.sent_update = value.is_some();
        match value {
            None => self
                .conn
                .send_execute(READ, &[Param::Int8(lo), Param::Int8(hi)]),
            Some(v) => self
                .conn
                .send_execute(UPDATE, &[Param::Int8(lo), Param::Int8(hi), Param::Text(v)]),
        }
        .map_err(op_error)
    }

    fn poll_answer(&mut self) -> std::result::Result<Option<u64>, OpError> {
        let Some(done) = self.conn.poll_answer().map_err(op_error)? else {
            return Ok(None);
        };
        Ok(Some(if self.sent_update {
            done.tag_rows
        } else {
            done.first_int8.unwrap_or(0).max(0) as u64
        }))
    }
}

/// Sends a cancel request for the connection's running statement, from any thread.
fn canceller(conn: &WireConn) -> Canceller {
    let handle = conn.cancel_handle();
    std::sync::Arc::new(move || handle.cancel())
}

/// Shuts the connection's socket down from any thread (a server that stopped answering).
fn closer(conn: &WireConn) -> Option<Canceller> {
    let handle = conn.shutdown_handle().ok()?;
    Some(std::sync::Arc::new(move || handle.shutdown()))
}

/// 15+: pg_stat_force_next_flush() publishes this backend's pending statistics before the
/// call returns (pg-stats §4); 13/14 flush at disconnect, which the collector waits for.
fn flush_stats(conn: &mut WireConn, major: i32) {
    if major >= 15
        && let Err(WireError::Server(e)) = conn.simple(sql::FORCE_FLUSH)
        && e.code == QUERY_CANCELED
    {
        // A cancel meant for the session's last operation (the window's end) reached the
        // server as this statement ran: once more, or that operation's statistics would
        // miss the "after" snapshot.
        let _ = conn.simple(sql::FORCE_FLUSH);
    }
}

/// SQLSTATE of a statement cancelled by a cancel request (or a statement_timeout).
const QUERY_CANCELED: &str = "57014";
