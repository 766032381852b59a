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

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, BytesMut};
use fallible_iterator::FallibleIterator;
use postgres_protocol::authentication::md5_hash;
use postgres_protocol::authentication::sasl::{
    ChannelBinding, SCRAM_SHA_256, SCRAM_SHA_256_PLUS, ScramSha256,
};
use postgres_protocol::message::backend::{ErrorResponseBody, Message};
use postgres_protocol::message::frontend;
use postgres_protocol::{IsNull, Oid};

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};

use crate::conn::{HostSpec, Keepalive, SessionAttrs, Target};
use crate::error::PgError;
use crate::sql;
use crate::tls::{
    ChannelBindingMode, Negotiated, SslMode, describe_handshake_error, server_end_point,
};

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

/// Where the server listens: the socket file, or the addresses of one host (hostaddr, else
/// the resolved name), tried in order.
#[derive(Debug, Clone)]
enum Addr {
    Tcp(Vec<SocketAddr>),
    Unix(PathBuf),
}

/// A TLS session over TCP, rustls' blocking stream.
type TlsStream = StreamOwned<ClientConnection, TcpStream>;

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    Tls(Box<TlsStream>),
}

impl Stream {
    /// Connects to the first address that answers; TCP sockets get TCP_NODELAY, keepalive
    /// and TCP_USER_TIMEOUT. The address that answered is returned with the stream (cancel
    /// requests go there).
    fn open(addr: &Addr, timeout: Duration, keepalive: &Keepalive) -> io::Result<(Stream, Addr)> {
        match addr {
            Addr::Unix(path) => UnixStream::connect(path).map(|s| (Stream::Unix(s), addr.clone())),
            Addr::Tcp(addrs) => {
                let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
                for a in addrs {
                    match TcpStream::connect_timeout(a, timeout) {
                        Ok(s) => {
                            s.set_nodelay(true)?;
                            set_keepalive(&s, keepalive)?;
                            return Ok((Stream::Tcp(s), Addr::Tcp(vec![*a])));
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
            Stream::Tls(s) => s.sock.set_read_timeout(t),
        }
    }

    fn is_tls(&self) -> bool {
        matches!(self, Stream::Tls(_))
    }
}

/// TCP keepalive (idle, interval, count) and TCP_USER_TIMEOUT, so that a session blocked on
/// a dead server or a partitioned network gets an error instead of waiting for ever.
fn set_keepalive(s: &TcpStream, k: &Keepalive) -> io::Result<()> {
    let sock = socket2::SockRef::from(s);
    if k.enabled {
        let params = socket2::TcpKeepalive::new()
            .with_time(k.idle)
            .with_interval(k.interval)
            .with_retries(k.count);
        sock.set_tcp_keepalive(&params)?;
    }
    if !k.user_timeout.is_zero() {
        sock.set_tcp_user_timeout(Some(k.user_timeout))?;
    }
    Ok(())
}

impl AsFd for Stream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Stream::Tcp(s) => s.as_fd(),
            Stream::Unix(s) => s.as_fd(),
            // Shutting the TCP socket down under TLS ends the session just the same.
            Stream::Tls(s) => s.sock.as_fd(),
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
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tls(s) => s.flush(),
            _ => Ok(()),
        }
    }
}

fn resolve(host: &HostSpec) -> io::Result<Addr> {
    if host.is_unix() {
        return Ok(Addr::Unix(
            PathBuf::from(&host.host).join(format!(".s.PGSQL.{}", host.port)),
        ));
    }
    if let Some(a) = host.hostaddr {
        return Ok(Addr::Tcp(vec![SocketAddr::new(a, host.port)]));
    }
    let addrs: Vec<SocketAddr> = (host.host.as_str(), host.port).to_socket_addrs()?.collect();
    Ok(Addr::Tcp(addrs))
}

/// The SSLRequest code (PostgreSQL protocol, "SSL Session Encryption").
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];

/// Asks the server for TLS on a fresh TCP socket: Ok(true) when it agreed ('S'), Ok(false)
/// when it declined ('N').
fn ssl_request(sock: &mut TcpStream) -> Result<bool, ConnectError> {
    sock.write_all(&SSL_REQUEST)?;
    let mut answer = [0u8; 1];
    sock.read_exact(&mut answer)?;
    match answer[0] {
        b'S' => Ok(true),
        b'N' => Ok(false),
        // An ErrorResponse: a server older than 7.0 or not PostgreSQL.
        b'E' => Err(ConnectError::Protocol(
            "the server answered the SSL request with an error (is it PostgreSQL?)".into(),
        )),
        other => Err(ConnectError::Protocol(format!(
            "the server answered the SSL request with byte {other:#04x} (is it PostgreSQL?)"
        ))),
    }
}

/// The TLS handshake on a socket the server agreed to encrypt; errors say which check of
/// the server's certificate failed.
fn handshake(
    mut sock: TcpStream,
    config: &Arc<ClientConfig>,
    host: &HostSpec,
) -> Result<TlsStream, ConnectError> {
    let name = host.name();
    let server_name = ServerName::try_from(name.clone()).map_err(|e| {
        ConnectError::Tls(format!("\"{name}\" is not a valid TLS server name: {e}"))
    })?;
    let mut conn = ClientConnection::new(config.clone(), server_name)
        .map_err(|e| ConnectError::Tls(e.to_string()))?;
    while conn.is_handshaking() {
        if let Err(e) = conn.complete_io(&mut sock) {
            let text = match e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            {
                Some(tls) => format!("{tls:?}: {tls}"),
                None => e.to_string(),
            };
            return Err(ConnectError::Tls(describe_handshake_error(&text, &name)));
        }
    }
    Ok(StreamOwned::new(conn, sock))
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

/// Sends a cancel request for a connection's running statement, from any thread: to the
/// address the connection is connected to, over TLS when the connection uses TLS.
#[derive(Debug, Clone)]
pub struct CancelHandle {
    addr: Addr,
    pid: i32,
    key: i32,
    timeout: Duration,
    keepalive: Keepalive,
    /// The TLS configuration and host of the connection, when it uses TLS.
    tls: Option<(Arc<ClientConfig>, HostSpec)>,
}

impl CancelHandle {
    /// Best effort: the server does not say whether the cancel hit.
    pub fn cancel(&self) {
        let Ok((stream, _)) = Stream::open(&self.addr, self.timeout, &self.keepalive) else {
            return;
        };
        let _ = stream.set_read_timeout(Some(self.timeout));
        let mut stream = match (stream, &self.tls) {
            (Stream::Tcp(mut sock), Some((config, host))) => {
                if !matches!(ssl_request(&mut sock), Ok(true)) {
                    return;
                }
                match handshake(sock, config, host) {
                    Ok(s) => Stream::Tls(Box::new(s)),
                    Err(_) => return,
                }
            }
            (s, _) => s,
        };
        let mut buf = BytesMut::with_capacity(16);
        frontend::cancel_request(self.pid, self.key, &mut buf);
        let _ = stream.write_all(&buf);
        let _ = stream.flush();
        // The server closes the connection once it has read the request.
        let _ = stream.read(&mut [0u8; 1]);
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
}

/// The reason a connection attempt failed, before it becomes a user-facing error.
#[derive(Debug)]
pub enum ConnectError {
    Io(io::Error),
    Server(ServerError),
    PasswordMissing,
    /// sslmode asks for TLS and the server declined the SSLRequest.
    NoTls,
    /// The TLS handshake failed (the certificate checks, mostly).
    Tls(String),
    Unsupported(String),
    Protocol(String),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::Io(e) => e.fmt(f),
            ConnectError::Server(e) => e.fmt(f),
            ConnectError::PasswordMissing => f.write_str("password missing"),
            ConnectError::NoTls => f.write_str("server does not support SSL, but SSL was required"),
            ConnectError::Tls(m) | ConnectError::Unsupported(m) | ConnectError::Protocol(m) => {
                f.write_str(m)
            }
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

impl ConnectError {
    /// The user-facing error for a failed attempt at `one` (a target pinned to one host).
    fn into_pg(self, one: &Target) -> PgError {
        match self {
            ConnectError::Server(s) => one.server_refused(&s.code, &s.message),
            ConnectError::Io(e)
                if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::TimedOut =>
            {
                one.no_answer()
            }
            other => one.unreachable(other.to_string()),
        }
    }
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
                        Ok(Some(row)) if row.len() == 2 => attrs.check(
                            row[0].as_deref() == Some("t"),
                            row[1].as_deref() == Some("on"),
                        ),
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
        let tls = target.tls.config.as_ref();
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
        tls: Option<(&Arc<ClientConfig>, bool)>,
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
                    negotiated = Some(Negotiated::of(&s.conn));
                    end_point = s
                        .conn
                        .peer_certificates()
                        .and_then(|c| c.first())
                        .and_then(|c| server_end_point(c.as_ref()));
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
            Stream::Tls(s) => &s.sock,
            Stream::Unix(_) => return Ok(None),
        };
        let sock = socket2::SockRef::from(tcp);
        Ok(Some((sock.tcp_keepalive_time()?, sock.tcp_user_timeout()?)))
    }

    fn authenticate(
        &mut self,
        target: &Target,
        password: Option<&str>,
    ) -> Result<(), ConnectError> {
        // Never a password in plaintext where TLS was asked for (the connection could not
        // get here without TLS then; this keeps it so).
        if target.tls.mode.requires_tls()
            && !self.stream.is_tls()
            && !matches!(self.stream, Stream::Unix(_))
        {
            return Err(ConnectError::NoTls);
        }
        let binding = target.tls.channel_binding;
        let password = || {
            password
                .map(str::as_bytes)
                .ok_or(ConnectError::PasswordMissing)
        };
        let unbound = || {
            ConnectError::Unsupported(
                "channel binding required, but server authenticated client without channel binding (channel_binding=require)".into(),
            )
        };
        let mut bound = false;
        loop {
            match self.recv()? {
                Message::AuthenticationOk => {
                    if binding == ChannelBindingMode::Require && !bound {
                        return Err(unbound());
                    }
                    return Ok(());
                }
                Message::AuthenticationCleartextPassword => {
                    if binding == ChannelBindingMode::Require {
                        return Err(unbound());
                    }
                    frontend::password_message(password()?, &mut self.wbuf)?;
                    self.send()?;
                }
                Message::AuthenticationMd5Password(body) => {
                    if binding == ChannelBindingMode::Require {
                        return Err(unbound());
                    }
                    let hashed = md5_hash(target.user.as_bytes(), password()?, body.salt());
                    frontend::password_message(hashed.as_bytes(), &mut self.wbuf)?;
                    self.send()?;
                }
                Message::AuthenticationSasl(body) => {
                    let mut mechanisms = body.mechanisms();
                    let (mut scram, mut plus) = (false, false);
                    while let Some(m) = mechanisms
                        .next()
                        .map_err(|e| ConnectError::Protocol(e.to_string()))?
                    {
                        scram |= m == SCRAM_SHA_256;
                        plus |= m == SCRAM_SHA_256_PLUS;
                    }
                    // SCRAM-SHA-256-PLUS binds the authentication to this TLS session
                    // (tls-server-end-point, RFC 5929), where the server offers it.
                    let end_point = self
                        .end_point
                        .clone()
                        .filter(|_| binding != ChannelBindingMode::Disable);
                    let (mechanism, channel) = match end_point {
                        Some(ep) if plus => (SCRAM_SHA_256_PLUS, ChannelBinding::tls_server_end_point(ep)),
                        _ if binding == ChannelBindingMode::Require => return Err(ConnectError::Unsupported(
                            "channel binding is required, but the server did not offer SCRAM-SHA-256-PLUS over this connection (channel_binding=require)".into(),
                        )),
                        Some(_) if scram => (SCRAM_SHA_256, ChannelBinding::unrequested()),
                        _ if scram => (SCRAM_SHA_256, ChannelBinding::unsupported()),
                        _ => return Err(ConnectError::Unsupported(
                            "the server offers no SASL mechanism dbio supports (SCRAM-SHA-256)".into(),
                        )),
                    };
                    bound = mechanism == SCRAM_SHA_256_PLUS;
                    let mut sasl = ScramSha256::new(password()?, channel);
                    frontend::sasl_initial_response(mechanism, sasl.message(), &mut self.wbuf)?;
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
            if let Stream::Tls(s) = &mut self.stream {
                s.conn.send_close_notify();
                let _ = s.flush();
            }
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
