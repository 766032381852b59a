//! A lean, blocking PostgreSQL connection for the measured sessions. Each session runs on its
//! own thread and owns its socket: an operation is one write (Bind, Execute, Sync, built into a
//! reused buffer) and, usually, one read of the whole answer, with no task hand-off, no
//! channel and no event loop between the timer and the socket. Everything else in dbio
//! (loader, collector, preflight) uses tokio-postgres.
//!
//! Scope: the extended query protocol for prepared statements, the simple query protocol for
//! settings, trust / password / md5 / SCRAM-SHA-256(-PLUS) authentication, TCP (plaintext or
//! TLS, by the target's sslmode) and Unix sockets, cancel requests. Host lists,
//! target_session_attrs, options and keepalives are the target's, as for every other
//! connection (see `conn`).

mod answer;
mod auth;
mod cancel;
mod error;
mod stream;

use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::time::Duration;

use bytes::{Buf, BufMut, BytesMut};
use fallible_iterator::FallibleIterator;
use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;
use postgres_protocol::{IsNull, Oid};

pub use answer::Executed;
use answer::Scan;
pub use cancel::CancelHandle;
pub use error::{ConnectError, ServerError, WireError};
pub use stream::ShutdownHandle;
use stream::{Stream, handshake, resolve, ssl_request};

use crate::conn::{HostSpec, SessionAttrs, Target};
use crate::error::PgError;
use crate::sql;
use crate::tls::{Connector, Negotiated, SslMode, server_end_point};

/// PostgreSQL type OIDs of the parameters dbio binds.
pub const INT8: Oid = 20;
pub const TEXT: Oid = 25;

/// A parameter of a prepared statement, sent in binary.
#[derive(Debug, Clone, Copy)]
pub enum Param<'a> {
    Int8(i64),
    Text(&'a str),
}

/// One request of a [`WireConn::pipeline`].
#[derive(Clone, Copy)]
pub enum Step<'a> {
    /// A simple query (its statements in one implicit transaction).
    Simple(&'a str),
    /// Named statements (name, SQL, parameter types): every Parse, then one Sync.
    Prepare(&'a [(&'a str, &'a str, &'a [Oid])]),
}

/// A pipeline step's answer: its first row, or the server's error.
pub type StepResult = Result<Option<Vec<Option<String>>>, ServerError>;

/// Keeps the columns of the first DataRow of an answer, as text (None for NULL).
fn keep_first_row(m: &Message, first: &mut Option<Vec<Option<String>>>) {
    if let Message::DataRow(row) = m
        && first.is_none()
    {
        let mut cols = Vec::new();
        let mut ranges = row.ranges();
        while let Ok(Some(r)) = ranges.next() {
            cols.push(r.map(|r| String::from_utf8_lossy(&row.buffer()[r]).into_owned()));
        }
        *first = Some(cols);
    }
}

pub struct WireConn {
    stream: Stream,
    rbuf: BytesMut,
    /// What one read() fills; the bytes are then appended to `rbuf`.
    scratch: Box<[u8]>,
    wbuf: BytesMut,
    cancel: CancelHandle,
    /// Set once the connection is known to be gone.
    closed: bool,
    /// The TLS protocol and cipher suite, when the connection uses TLS.
    tls: Option<Negotiated>,
    /// tls-server-end-point of the server's certificate, for SCRAM-SHA-256-PLUS.
    end_point: Option<Vec<u8>>,
    /// The answer being read (the event engine reads it in several goes).
    scan: Scan,
}

impl WireConn {
    /// Opens a measured session's connection as `conn::Target::connect` opens the others:
    /// the servers of the host list in order, each with the sslmode's attempts, until one
    /// fits target_session_attrs; blocks, each attempt within the connect timeout.
    pub fn open(target: &Target, application_name: &str) -> Result<WireConn, PgError> {
        let name = target.application_name(application_name);
        let mut failures = Vec::new();
        for attrs in target.session_attrs.passes() {
            for host in &target.hosts {
                let one = target.pinned_to(host);
                let mut conn = match WireConn::connect_host(&one, host, &name) {
                    Ok(c) => c,
                    Err(e) => {
                        failures.push((host.clone(), e.into_pg(&one)));
                        continue;
                    }
                };
                if *attrs != SessionAttrs::Any {
                    let fits = match conn.simple_row(sql::SESSION_STATE) {
                        Ok(Some(row)) if row.len() == 2 => attrs
                            .check(
                                row[0].as_deref() == Some("t"),
                                row[1].as_deref() == Some("on"),
                            )
                            .map_err(|m| m.to_string()),
                        Ok(_) => Err("the server did not say whether it is a standby".into()),
                        Err(e) => Err(e.to_string()),
                    };
                    if let Err(why) = fits {
                        failures.push((host.clone(), target.attrs_mismatch(host, why)));
                        continue;
                    }
                }
                return Ok(conn);
            }
        }
        Err(target.all_failed(failures))
    }

    /// One server, with the sslmode's attempts: disable (and Unix sockets) plaintext; allow
    /// plaintext, then TLS if the server refuses it; prefer TLS if the server agrees, else
    /// plaintext; require and verify-* TLS or nothing, so no password is ever sent in
    /// plaintext.
    fn connect_host(
        target: &Target,
        host: &HostSpec,
        application_name: &str,
    ) -> Result<WireConn, ConnectError> {
        let mode = target.mode_for(host);
        let tls = target.tls.connector.as_ref();
        match (mode, tls) {
            (SslMode::Disable, _) | (_, None) => {
                WireConn::connect_with(target, host, application_name, None)
            }
            (SslMode::Allow, Some(config)) => {
                match WireConn::connect_with(target, host, application_name, None) {
                    Err(ConnectError::Server(_)) => {
                        WireConn::connect_with(target, host, application_name, Some((config, true)))
                    }
                    other => other,
                }
            }
            (mode, Some(config)) => WireConn::connect_with(
                target,
                host,
                application_name,
                Some((config, mode.requires_tls())),
            ),
        }
    }

    /// Connects, negotiates TLS when `tls` is given (the flag: TLS is required), authenticates
    /// and waits for the server to be ready, all within the target's connect timeout.
    fn connect_with(
        target: &Target,
        host: &HostSpec,
        application_name: &str,
        tls: Option<(&Connector, bool)>,
    ) -> Result<WireConn, ConnectError> {
        let timeout = target.connect_timeout.max(Duration::from_millis(100));
        let addr = resolve(host)?;
        let (stream, connected) = Stream::open(&addr, timeout, &target.keepalive)?;
        stream.set_read_timeout(Some(timeout))?;
        let mut negotiated = None;
        let mut end_point = None;
        let mut cancel_tls = None;
        let stream = match (stream, tls) {
            (Stream::Tcp(mut sock), Some((config, required))) => {
                if ssl_request(&mut sock)? {
                    let s = handshake(sock, config, host)?;
                    negotiated = Some(Negotiated::of(s.ssl()));
                    end_point = s
                        .ssl()
                        .peer_certificate()
                        .and_then(|c| server_end_point(&c));
                    cancel_tls = Some((config.clone(), host.clone()));
                    Stream::Tls(Box::new(s))
                } else if required {
                    return Err(ConnectError::NoTls);
                } else {
                    Stream::Tcp(sock)
                }
            }
            (s, _) => s,
        };
        let mut conn = WireConn {
            stream,
            rbuf: BytesMut::with_capacity(8192),
            scratch: vec![0u8; 8192].into_boxed_slice(),
            wbuf: BytesMut::with_capacity(512),
            cancel: CancelHandle {
                addr: connected,
                pid: 0,
                key: 0,
                timeout,
                keepalive: target.keepalive,
                tls: cancel_tls,
            },
            closed: false,
            tls: negotiated,
            end_point,
            scan: Scan::default(),
        };
        let mut params = vec![
            ("user", target.user.as_str()),
            ("database", target.dbname.as_str()),
            ("application_name", application_name),
            ("client_encoding", "UTF8"),
        ];
        if let Some(o) = &target.options {
            params.push(("options", o.as_str()));
        }
        frontend::startup_message(params.iter().copied(), &mut conn.wbuf)?;
        conn.send()?;
        let password = target.password_for(host);
        conn.authenticate(target, password.as_deref())?;
        loop {
            match conn.recv()? {
                Message::BackendKeyData(k) => {
                    conn.cancel.pid = k.process_id();
                    conn.cancel.key = k.secret_key();
                }
                Message::ReadyForQuery(_) => break,
                Message::ErrorResponse(e) => {
                    return Err(ConnectError::Server(ServerError::from_body(&e)));
                }
                _ => {}
            }
        }
        conn.stream.set_read_timeout(None)?;
        Ok(conn)
    }

    /// The TLS protocol and cipher suite of this connection; None in plaintext.
    pub fn tls(&self) -> Option<&Negotiated> {
        self.tls.as_ref()
    }

    /// The socket's keepalive idle time and TCP_USER_TIMEOUT, as the kernel holds them; None
    /// on a Unix socket.
    pub fn tcp_timeouts(&self) -> io::Result<Option<(Duration, Option<Duration>)>> {
        let tcp = match &self.stream {
            Stream::Tcp(s) => s,
            Stream::Tls(s) => s.get_ref(),
            Stream::Unix(_) => return Ok(None),
        };
        let sock = socket2::SockRef::from(tcp);
        Ok(Some((sock.tcp_keepalive_time()?, sock.tcp_user_timeout()?)))
    }

    /// The server process serving this connection (BackendKeyData): what the collector tells
    /// dbio's sessions apart by.
    pub fn backend_pid(&self) -> i32 {
        self.cancel.pid
    }

    pub fn cancel_handle(&self) -> CancelHandle {
        self.cancel.clone()
    }

    /// A handle that shuts this connection's socket down from another thread.
    pub fn shutdown_handle(&self) -> io::Result<ShutdownHandle> {
        self.stream.as_fd().try_clone_to_owned().map(ShutdownHandle)
    }

    fn send(&mut self) -> Result<(), WireError> {
        let r = self
            .stream
            .write_all(&self.wbuf)
            .and_then(|()| self.stream.flush());
        self.wbuf.clear();
        r.map_err(|e| self.io_error(e))
    }

    /// Marks the connection closed; a broken pipe or reset means the server went away.
    fn io_error(&mut self, e: io::Error) -> WireError {
        self.closed = true;
        match e.kind() {
            io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::UnexpectedEof => {
                // A FATAL message may be waiting in the buffer.
                match Message::parse(&mut self.rbuf) {
                    Ok(Some(Message::ErrorResponse(body))) => {
                        WireError::Closed(Some(ServerError::from_body(&body)))
                    }
                    _ => WireError::Closed(None),
                }
            }
            _ => WireError::Io(e),
        }
    }

    /// The next message from the server, reading as much as the socket has.
    fn recv(&mut self) -> Result<Message, WireError> {
        loop {
            match Message::parse(&mut self.rbuf) {
                Ok(Some(m)) => return Ok(m),
                Ok(None) => {}
                Err(e) => return Err(WireError::Protocol(e.to_string())),
            }
            self.fill()?;
        }
    }

    /// Writes what the non-blocking socket takes of `wbuf`; true once all of it is written.
    fn write_some(&mut self) -> Result<bool, WireError> {
        while !self.wbuf.is_empty() {
            match self.stream.write(&self.wbuf) {
                Ok(0) => return Err(self.io_error(io::ErrorKind::WriteZero.into())),
                Ok(n) => self.wbuf.advance(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.wbuf.clear();
                    return Err(self.io_error(e));
                }
            }
        }
        Ok(true)
    }

    /// Appends what the non-blocking socket has to `rbuf`: false when it had nothing.
    fn try_fill(&mut self) -> Result<bool, WireError> {
        loop {
            if self.closed {
                return Err(WireError::Closed(None));
            }
            match self.stream.read(&mut self.scratch[..]) {
                Ok(0) => {
                    self.closed = true;
                    return Err(WireError::Closed(None));
                }
                Ok(n) => {
                    self.rbuf.extend_from_slice(&self.scratch[..n]);
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io_error(e)),
            }
        }
    }

    /// The socket the event engine waits on (under TLS, the TCP socket below it: an answer
    /// is read until it is whole or the socket has nothing more, so no decrypted byte waits
    /// in OpenSSL's buffer for a readiness edge that will not come).
    pub fn event_fd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        Some(self.stream.as_fd().as_raw_fd())
    }

    /// Switches the socket to non-blocking (`send_execute`, `poll_answer`) or back.
    pub fn set_nonblocking(&mut self, on: bool) -> io::Result<()> {
        self.stream.set_nonblocking(on)
    }

    /// Appends what the socket has (blocking until something arrives) to `rbuf`.
    fn fill(&mut self) -> Result<(), WireError> {
        loop {
            if self.closed {
                return Err(WireError::Closed(None));
            }
            let n = match self.stream.read(&mut self.scratch[..]) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.io_error(e)),
            };
            if n == 0 {
                self.closed = true;
                return Err(WireError::Closed(None));
            }
            self.rbuf.extend_from_slice(&self.scratch[..n]);
            return Ok(());
        }
    }

    /// Runs SQL with the simple query protocol; returns the first column of the first row
    /// as text, if there is one.
    pub fn simple(&mut self, sql: &str) -> Result<Option<String>, WireError> {
        Ok(self
            .simple_row(sql)?
            .and_then(|row| row.into_iter().next().flatten()))
    }

    /// Runs SQL with the simple query protocol; returns the first row's columns as text
    /// (None for NULL), if there is a row.
    pub fn simple_row(&mut self, sql: &str) -> Result<Option<Vec<Option<String>>>, WireError> {
        frontend::query(sql, &mut self.wbuf)?;
        self.send()?;
        let mut first: Option<Vec<Option<String>>> = None;
        self.finish(|m| keep_first_row(m, &mut first))?;
        Ok(first)
    }

    /// Sends every step in one write and reads their answers in order: one round trip for
    /// what would take one per step (issue 34: at 512 sessions each round trip of their
    /// start is a wake-up per session). Each step is answered up to its own ReadyForQuery, so
    /// a step that fails does not stop the ones after it (outside a transaction block). The
    /// outer error is a connection that can no longer be used; the inner ones are each step's
    /// own, with its first row's columns as text (None for NULL) when it returned one.
    pub fn pipeline(&mut self, steps: &[Step<'_>]) -> Result<Vec<StepResult>, WireError> {
        for step in steps {
            match step {
                Step::Simple(sql) => frontend::query(sql, &mut self.wbuf)?,
                Step::Prepare(statements) => {
                    for (name, sql, types) in statements.iter() {
                        frontend::parse(name, sql, types.iter().copied(), &mut self.wbuf)?;
                    }
                    frontend::sync(&mut self.wbuf);
                }
            }
        }
        self.send()?;
        let mut results = Vec::with_capacity(steps.len());
        for _ in steps {
            let mut first: Option<Vec<Option<String>>> = None;
            let done = self.finish(|m| keep_first_row(m, &mut first));
            results.push(match done {
                Ok(()) => Ok(first),
                Err(WireError::Server(e)) => Err(e),
                Err(e) => return Err(e),
            });
        }
        Ok(results)
    }

    /// Prepares a named statement with these parameter types.
    pub fn prepare(&mut self, name: &str, sql: &str, types: &[Oid]) -> Result<(), WireError> {
        self.prepare_all(&[(name, sql, types)])
    }

    /// Prepares named statements (name, SQL, parameter types) in one round trip: every
    /// Parse, then one Sync. The first error is returned: the statements before it stay
    /// prepared, the server skips those after it up to the Sync.
    pub fn prepare_all(&mut self, statements: &[(&str, &str, &[Oid])]) -> Result<(), WireError> {
        for (name, sql, types) in statements {
            frontend::parse(name, sql, types.iter().copied(), &mut self.wbuf)?;
        }
        frontend::sync(&mut self.wbuf);
        self.send()?;
        self.finish(|_| {})
    }

    /// Executes a prepared statement: Bind (binary parameters, binary results), Execute and
    /// Sync in one write, then the answer up to ReadyForQuery.
    pub fn execute(&mut self, name: &str, params: &[Param<'_>]) -> Result<Executed, WireError> {
        self.encode_execute(name, params)?;
        self.send()?;
        self.answer()
    }

    /// Sends what `execute` sends, on a non-blocking socket, without waiting for the answer
    /// (`poll_answer` reads it, and writes what the socket had no room for): true when the
    /// socket took the whole request.
    pub fn send_execute(&mut self, name: &str, params: &[Param<'_>]) -> Result<bool, WireError> {
        self.scan = Scan::default();
        self.encode_execute(name, params)?;
        self.write_some()
    }

    /// Bind (binary parameters, binary results), Execute and Sync into the write buffer.
    fn encode_execute(&mut self, name: &str, params: &[Param<'_>]) -> Result<(), WireError> {
        let bound = frontend::bind(
            "",
            name,
            std::iter::once(1i16),
            params.iter(),
            |p, buf| {
                match p {
                    Param::Int8(v) => buf.put_i64(*v),
                    Param::Text(s) => buf.put_slice(s.as_bytes()),
                }
                Ok(IsNull::No)
            },
            std::iter::once(1i16),
            &mut self.wbuf,
        );
        if bound.is_err() {
            self.wbuf.clear();
            return Err(WireError::Protocol(
                "a parameter could not be encoded".into(),
            ));
        }
        frontend::execute("", 0, &mut self.wbuf)?;
        frontend::sync(&mut self.wbuf);
        Ok(())
    }
}

impl Drop for WireConn {
    fn drop(&mut self) {
        if !self.closed {
            frontend::terminate(&mut self.wbuf);
            let _ = self.stream.write_all(&self.wbuf);
            if let Stream::Tls(s) = &mut self.stream {
                let _ = s.shutdown();
            }
        }
    }
}
