//! A lean, blocking PostgreSQL connection for the measured sessions. Each session runs on its
//! own thread and owns its socket: an operation is one write (Bind, Execute, Sync, built into a
//! reused buffer) and, usually, one read of the whole answer, with no task hand-off, no
//! channel and no event loop between the timer and the socket. Everything else in dbio
//! (loader, collector, preflight) uses tokio-postgres.
//!
//! Scope: the extended query protocol for prepared statements, the simple query protocol for
//! settings, trust / password / md5 / SCRAM-SHA-256 authentication, TCP and Unix sockets,
//! cancel requests. No TLS (dbio connects without it everywhere).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use bytes::{Buf, BufMut, BytesMut};
use fallible_iterator::FallibleIterator;
use postgres_protocol::authentication::md5_hash;
use postgres_protocol::authentication::sasl::{ChannelBinding, SCRAM_SHA_256, ScramSha256};
use postgres_protocol::message::backend::{ErrorResponseBody, Message};
use postgres_protocol::message::frontend;
use postgres_protocol::{IsNull, Oid};

use crate::conn::Target;

/// PostgreSQL type OIDs of the parameters dbio binds.
pub const INT8: Oid = 20;
pub const TEXT: Oid = 25;

/// An error the server sent: its severity, SQLSTATE, message and, where it gave them, its
/// DETAIL, HINT and the position in the statement (protocol "Error and Notice Message
/// Fields": V/S, C, M, D, H, P).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerError {
    pub severity: String,
    pub code: String,
    pub message: String,
    /// Boxed: most errors have none, and the error travels in every operation's Result.
    more: Option<Box<MoreFields>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct MoreFields {
    detail: Option<String>,
    hint: Option<String>,
    position: Option<u32>,
}

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::error::server_words(
            &self.message,
            &self.code,
            self.position(),
            self.detail(),
            self.hint(),
        ))
    }
}

impl ServerError {
    fn from_body(body: &ErrorResponseBody) -> ServerError {
        let mut e = ServerError::default();
        let mut fields = body.fields();
        while let Ok(Some(f)) = fields.next() {
            let v = String::from_utf8_lossy(f.value_bytes()).into_owned();
            match f.type_() {
                b'V' => e.severity = v,
                b'S' if e.severity.is_empty() => e.severity = v,
                b'C' => e.code = v,
                b'M' => e.message = v,
                b'D' => e.more_fields().detail = Some(v),
                b'H' => e.more_fields().hint = Some(v),
                b'P' => e.more_fields().position = v.parse().ok(),
                _ => {}
            }
        }
        e
    }

    fn more_fields(&mut self) -> &mut MoreFields {
        self.more.get_or_insert_with(Box::default)
    }

    /// The server's DETAIL, when it sent one.
    pub fn detail(&self) -> Option<&str> {
        self.more.as_ref()?.detail.as_deref()
    }

    /// The server's HINT, when it sent one.
    pub fn hint(&self) -> Option<&str> {
        self.more.as_ref()?.hint.as_deref()
    }

    /// 1-based character position in the statement text, when the server gave one.
    pub fn position(&self) -> Option<u32> {
        self.more.as_ref()?.position
    }

    /// FATAL or PANIC: the server ends the connection after sending it.
    pub fn ends_connection(&self) -> bool {
        self.severity == "FATAL" || self.severity == "PANIC"
    }
}

#[derive(Debug)]
pub enum WireError {
    /// The statement failed; the connection is still usable unless the error was FATAL.
    Server(ServerError),
    /// The connection is gone; with the server's last FATAL message when it sent one.
    Closed(Option<ServerError>),
    Io(io::Error),
    Protocol(String),
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::Server(e) => e.fmt(f),
            WireError::Closed(Some(e)) => write!(f, "connection closed by the server: {e}"),
            WireError::Closed(None) => f.write_str("connection closed by the server"),
            WireError::Io(e) => write!(f, "connection error: {e}"),
            WireError::Protocol(m) => write!(f, "protocol error: {m}"),
        }
    }
}

impl WireError {
    /// This session cannot go on: the connection is gone, or the server is ending it
    /// (SQLSTATE class 57P: admin shutdown, crash shutdown, cannot connect now).
    pub fn is_fatal(&self) -> bool {
        match self {
            WireError::Server(e) => e.ends_connection() || e.code.starts_with("57P"),
            _ => true,
        }
    }
}

impl From<io::Error> for WireError {
    fn from(e: io::Error) -> WireError {
        WireError::Io(e)
    }
}

/// Where the server listens.
#[derive(Debug, Clone)]
enum Addr {
    Tcp(Vec<SocketAddr>),
    Unix(PathBuf),
}

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    fn open(addr: &Addr, timeout: Duration) -> io::Result<Stream> {
        match addr {
            Addr::Unix(path) => UnixStream::connect(path).map(Stream::Unix),
            Addr::Tcp(addrs) => {
                let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
                for a in addrs {
                    match TcpStream::connect_timeout(a, timeout) {
                        Ok(s) => {
                            s.set_nodelay(true)?;
                            return Ok(Stream::Tcp(s));
                        }
                        Err(e) => last = e,
                    }
                }
                Err(last)
            }
        }
    }

    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(t),
            Stream::Unix(s) => s.set_read_timeout(t),
        }
    }
}

impl AsFd for Stream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Stream::Tcp(s) => s.as_fd(),
            Stream::Unix(s) => s.as_fd(),
        }
    }
}

/// Shuts a connection's socket down from another thread: a read blocked on a server that
/// stopped answering returns at once (end of file). It holds a duplicate of the socket, so
/// it never touches a descriptor number reused after the connection closed.
#[derive(Debug)]
pub struct ShutdownHandle(OwnedFd);

impl ShutdownHandle {
    pub fn shutdown(&self) {
        // SAFETY: shutdown(2) on a descriptor this handle owns; it only changes the socket's
        // state, and an error (already disconnected) is of no consequence.
        unsafe {
            libc::shutdown(self.0.as_raw_fd(), libc::SHUT_RDWR);
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn resolve(target: &Target) -> io::Result<Addr> {
    if target.host.starts_with('/') {
        return Ok(Addr::Unix(
            PathBuf::from(&target.host).join(format!(".s.PGSQL.{}", target.port)),
        ));
    }
    let addrs: Vec<SocketAddr> = (target.host.as_str(), target.port)
        .to_socket_addrs()?
        .collect();
    Ok(Addr::Tcp(addrs))
}

/// What an extended-protocol execution returned.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Executed {
    /// The row count of the command tag (`SELECT 1`, `UPDATE 64`).
    pub tag_rows: u64,
    /// The first column of the first row, when it is an 8-byte binary integer.
    pub first_int8: Option<i64>,
}

/// A parameter of a prepared statement, sent in binary.
#[derive(Debug, Clone, Copy)]
pub enum Param<'a> {
    Int8(i64),
    Text(&'a str),
}

/// Sends a cancel request for a connection's running statement, from any thread.
#[derive(Debug, Clone)]
pub struct CancelHandle {
    addr: Addr,
    pid: i32,
    key: i32,
    timeout: Duration,
}

impl CancelHandle {
    /// Best effort: the server does not say whether the cancel hit.
    pub fn cancel(&self) {
        if let Ok(mut s) = Stream::open(&self.addr, self.timeout) {
            let mut buf = BytesMut::with_capacity(16);
            frontend::cancel_request(self.pid, self.key, &mut buf);
            let _ = s.write_all(&buf);
            // The server closes the connection once it has read the request.
            let _ = s.set_read_timeout(Some(self.timeout));
            let _ = s.read(&mut [0u8; 1]);
        }
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
}

/// The reason a connection attempt failed, before it becomes a user-facing error.
#[derive(Debug)]
pub enum ConnectError {
    Io(io::Error),
    Server(ServerError),
    PasswordMissing,
    Unsupported(String),
    Protocol(String),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::Io(e) => e.fmt(f),
            ConnectError::Server(e) => e.fmt(f),
            ConnectError::PasswordMissing => f.write_str("password missing"),
            ConnectError::Unsupported(m) | ConnectError::Protocol(m) => f.write_str(m),
        }
    }
}

impl From<io::Error> for ConnectError {
    fn from(e: io::Error) -> ConnectError {
        ConnectError::Io(e)
    }
}

impl From<WireError> for ConnectError {
    fn from(e: WireError) -> ConnectError {
        match e {
            WireError::Server(s) | WireError::Closed(Some(s)) => ConnectError::Server(s),
            WireError::Closed(None) => {
                ConnectError::Protocol("the server closed the connection".into())
            }
            WireError::Io(e) => ConnectError::Io(e),
            WireError::Protocol(m) => ConnectError::Protocol(m),
        }
    }
}

impl WireConn {
    /// Connects, authenticates and waits for the server to be ready, all within the target's
    /// connect timeout.
    pub fn connect(target: &Target, application_name: &str) -> Result<WireConn, ConnectError> {
        let timeout = target.connect_timeout.max(Duration::from_millis(100));
        let addr = resolve(target)?;
        let stream = Stream::open(&addr, timeout)?;
        stream.set_read_timeout(Some(timeout))?;
        let mut conn = WireConn {
            stream,
            rbuf: BytesMut::with_capacity(8192),
            scratch: vec![0u8; 8192].into_boxed_slice(),
            wbuf: BytesMut::with_capacity(512),
            cancel: CancelHandle {
                addr,
                pid: 0,
                key: 0,
                timeout,
            },
            closed: false,
        };
        let params = [
            ("user", target.user.as_str()),
            ("database", target.dbname.as_str()),
            ("application_name", application_name),
            ("client_encoding", "UTF8"),
        ];
        frontend::startup_message(params.iter().copied(), &mut conn.wbuf)?;
        conn.send()?;
        conn.authenticate(target)?;
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

    fn authenticate(&mut self, target: &Target) -> Result<(), ConnectError> {
        let password = || {
            target
                .password()
                .map(str::as_bytes)
                .ok_or(ConnectError::PasswordMissing)
        };
        loop {
            match self.recv()? {
                Message::AuthenticationOk => return Ok(()),
                Message::AuthenticationCleartextPassword => {
                    frontend::password_message(password()?, &mut self.wbuf)?;
                    self.send()?;
                }
                Message::AuthenticationMd5Password(body) => {
                    let hashed = md5_hash(target.user.as_bytes(), password()?, body.salt());
                    frontend::password_message(hashed.as_bytes(), &mut self.wbuf)?;
                    self.send()?;
                }
                Message::AuthenticationSasl(body) => {
                    let mut mechanisms = body.mechanisms();
                    let mut scram = false;
                    while let Some(m) = mechanisms
                        .next()
                        .map_err(|e| ConnectError::Protocol(e.to_string()))?
                    {
                        scram |= m == SCRAM_SHA_256;
                    }
                    if !scram {
                        return Err(ConnectError::Unsupported(
                            "the server offers no SASL mechanism dbio supports (SCRAM-SHA-256)"
                                .into(),
                        ));
                    }
                    let mut sasl = ScramSha256::new(password()?, ChannelBinding::unsupported());
                    frontend::sasl_initial_response(SCRAM_SHA_256, sasl.message(), &mut self.wbuf)?;
                    self.send()?;
                    match self.recv()? {
                        Message::AuthenticationSaslContinue(b) => sasl.update(b.data())?,
                        Message::ErrorResponse(e) => {
                            return Err(ConnectError::Server(ServerError::from_body(&e)));
                        }
                        _ => return Err(ConnectError::Protocol("unexpected SASL message".into())),
                    }
                    frontend::sasl_response(sasl.message(), &mut self.wbuf)?;
                    self.send()?;
                    match self.recv()? {
                        Message::AuthenticationSaslFinal(b) => sasl.finish(b.data())?,
                        Message::ErrorResponse(e) => {
                            return Err(ConnectError::Server(ServerError::from_body(&e)));
                        }
                        _ => return Err(ConnectError::Protocol("unexpected SASL message".into())),
                    }
                }
                Message::ErrorResponse(e) => {
                    return Err(ConnectError::Server(ServerError::from_body(&e)));
                }
                _ => {
                    return Err(ConnectError::Unsupported(
                        "the server asks for an authentication method dbio's sessions do not \
                         support (GSSAPI, SSPI or Kerberos); use trust, password, md5 or \
                         scram-sha-256 in pg_hba.conf"
                            .into(),
                    ));
                }
            }
        }
    }

    pub fn cancel_handle(&self) -> CancelHandle {
        self.cancel.clone()
    }

    /// A handle that shuts this connection's socket down from another thread.
    pub fn shutdown_handle(&self) -> io::Result<ShutdownHandle> {
        self.stream.as_fd().try_clone_to_owned().map(ShutdownHandle)
    }

    fn send(&mut self) -> Result<(), WireError> {
        let r = self.stream.write_all(&self.wbuf);
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

    /// The answer to Bind/Execute/Sync, read in place: the messages of a normal answer
    /// (BindComplete, DataRow, CommandComplete, ReadyForQuery) are scanned in the buffer
    /// without being copied or checked as text; an error goes through the full parser.
    fn answer(&mut self) -> Result<Executed, WireError> {
        let mut out = Executed::default();
        let mut error: Option<ServerError> = None;
        loop {
            if self.rbuf.len() >= 5 {
                let len =
                    u32::from_be_bytes([self.rbuf[1], self.rbuf[2], self.rbuf[3], self.rbuf[4]])
                        as usize;
                if len < 4 {
                    self.closed = true;
                    return Err(WireError::Protocol(format!("message length {len}")));
                }
                if self.rbuf.len() > len {
                    let body = &self.rbuf[5..1 + len];
                    match self.rbuf[0] {
                        b'D' if out.first_int8.is_none() => out.first_int8 = first_int8(body),
                        b'C' => out.tag_rows = tag_rows(body),
                        b'Z' => {
                            self.rbuf.advance(1 + len);
                            return match error {
                                Some(e) => Err(WireError::Server(e)),
                                None => Ok(out),
                            };
                        }
                        b'E' => {
                            let Ok(Some(Message::ErrorResponse(body))) =
                                Message::parse(&mut self.rbuf)
                            else {
                                self.closed = true;
                                return Err(WireError::Protocol("unreadable error message".into()));
                            };
                            let e = ServerError::from_body(&body);
                            if e.ends_connection() {
                                self.closed = true;
                                return Err(WireError::Closed(Some(e)));
                            }
                            error.get_or_insert(e);
                            continue;
                        }
                        _ => {}
                    }
                    self.rbuf.advance(1 + len);
                    continue;
                }
            }
            match self.fill() {
                Ok(()) => {}
                Err(WireError::Closed(None)) => return Err(WireError::Closed(error)),
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads to ReadyForQuery; the first error, if any, is returned after it. A FATAL error
    /// followed by the end of the connection becomes `Closed` with the server's message.
    fn finish(&mut self, mut on: impl FnMut(&Message)) -> Result<(), WireError> {
        let mut error: Option<ServerError> = None;
        loop {
            let m = match self.recv() {
                Ok(m) => m,
                Err(WireError::Closed(None)) => return Err(WireError::Closed(error)),
                Err(e) => return Err(e),
            };
            match &m {
                Message::ReadyForQuery(_) => {
                    return match error {
                        Some(e) => Err(WireError::Server(e)),
                        None => Ok(()),
                    };
                }
                Message::ErrorResponse(body) => {
                    let e = ServerError::from_body(body);
                    if e.ends_connection() {
                        self.closed = true;
                        return Err(WireError::Closed(Some(e)));
                    }
                    error.get_or_insert(e);
                }
                _ => on(&m),
            }
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
        self.finish(|m| {
            if let Message::DataRow(row) = m
                && first.is_none()
            {
                let mut cols = Vec::new();
                let mut ranges = row.ranges();
                while let Ok(Some(r)) = ranges.next() {
                    cols.push(r.map(|r| String::from_utf8_lossy(&row.buffer()[r]).into_owned()));
                }
                first = Some(cols);
            }
        })?;
        Ok(first)
    }

    /// Prepares a named statement with these parameter types.
    pub fn prepare(&mut self, name: &str, sql: &str, types: &[Oid]) -> Result<(), WireError> {
        frontend::parse(name, sql, types.iter().copied(), &mut self.wbuf)?;
        frontend::sync(&mut self.wbuf);
        self.send()?;
        self.finish(|_| {})
    }

    /// Executes a prepared statement: Bind (binary parameters, binary results), Execute and
    /// Sync in one write, then the answer up to ReadyForQuery.
    pub fn execute(&mut self, name: &str, params: &[Param<'_>]) -> Result<Executed, WireError> {
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
        self.send()?;
        self.answer()
    }
}

/// The first column of a DataRow body when it is 8 bytes (a binary int8).
fn first_int8(body: &[u8]) -> Option<i64> {
    let cols = i16::from_be_bytes([*body.first()?, *body.get(1)?]);
    let len = i32::from_be_bytes(body.get(2..6)?.try_into().ok()?);
    if cols < 1 || len != 8 {
        return None;
    }
    Some(i64::from_be_bytes(body.get(6..14)?.try_into().ok()?))
}

/// The row count at the end of a CommandComplete tag (`UPDATE 64\0`, `SELECT 1\0`).
fn tag_rows(body: &[u8]) -> u64 {
    let tag = body.strip_suffix(&[0]).unwrap_or(body);
    let digits = tag.rsplit(|&b| b == b' ').next().unwrap_or(&[]);
    digits
        .iter()
        .try_fold(0u64, |n, &d| {
            d.is_ascii_digit()
                .then(|| n.saturating_mul(10).saturating_add(u64::from(d - b'0')))
        })
        .unwrap_or(0)
}

impl Drop for WireConn {
    fn drop(&mut self) {
        if !self.closed {
            frontend::terminate(&mut self.wbuf);
            let _ = self.stream.write_all(&self.wbuf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Session errors kept severity, SQLSTATE and message but lost DETAIL and HINT.
    #[test]
    fn server_errors_keep_detail_hint_and_position() {
        let mut fields = Vec::new();
        for (t, v) in [
            (b'S', "ERROR"),
            (b'V', "ERROR"),
            (b'C', "P0001"),
            (b'M', "boom"),
            (b'D', "row 7"),
            (b'H', "fix the trigger"),
            (b'P', "12"),
        ] {
            fields.push(t);
            fields.extend_from_slice(v.as_bytes());
            fields.push(0);
        }
        fields.push(0);
        let mut buf = BytesMut::new();
        buf.put_u8(b'E');
        buf.put_u32(4 + fields.len() as u32);
        buf.put_slice(&fields);
        let Ok(Some(Message::ErrorResponse(body))) = Message::parse(&mut buf) else {
            panic!("an ErrorResponse");
        };
        let e = ServerError::from_body(&body);
        assert_eq!((e.code.as_str(), e.message.as_str()), ("P0001", "boom"));
        assert_eq!(
            (e.detail(), e.hint(), e.position()),
            (Some("row 7"), Some("fix the trigger"), Some(12))
        );
        assert_eq!(
            e.to_string(),
            "boom (SQLSTATE P0001, at character 12); DETAIL: row 7; HINT: fix the trigger"
        );
    }

    #[test]
    fn answers_are_read_in_place() {
        // DataRow: 1 column of 8 bytes holding 64.
        let mut row = vec![0, 1, 0, 0, 0, 8];
        row.extend_from_slice(&64i64.to_be_bytes());
        assert_eq!(first_int8(&row), Some(64));
        assert_eq!(first_int8(&[0, 1, 255, 255, 255, 255]), None, "NULL");
        assert_eq!(first_int8(&[0, 1, 0, 0]), None, "truncated");
        assert_eq!(tag_rows(b"UPDATE 64\0"), 64);
        assert_eq!(tag_rows(b"SELECT 1\0"), 1);
        assert_eq!(tag_rows(b"INSERT 0 12\0"), 12);
        assert_eq!(tag_rows(b"SET\0"), 0);
    }
}
