//! The socket under a measured session: TCP (keepalive, TCP_USER_TIMEOUT), Unix or TLS over
//! TCP (the SSLRequest and OpenSSL's handshake), and the handle that shuts it down from
//! another thread.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use openssl::ssl::{HandshakeError, SslStream};

use super::error::ConnectError;
use crate::conn::{HostSpec, Keepalive};
use crate::tls::{Connector, describe_handshake_error};

/// Where the server listens: the socket file, or the addresses of one host (hostaddr, else
/// the resolved name), tried in order.
#[derive(Debug, Clone)]
pub(super) enum Addr {
    Tcp(Vec<SocketAddr>),
    Unix(PathBuf),
}

/// A TLS session over TCP, OpenSSL's blocking stream.
pub(super) type TlsStream = SslStream<TcpStream>;

pub(super) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    Tls(Box<TlsStream>),
}

impl Stream {
    /// Connects to the first address that answers; TCP sockets get TCP_NODELAY, keepalive
    /// and TCP_USER_TIMEOUT. The address that answered is returned with the stream (cancel
    /// requests go there).
    pub(super) fn open(
        addr: &Addr,
        timeout: Duration,
        keepalive: &Keepalive,
    ) -> io::Result<(Stream, Addr)> {
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

    pub(super) fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(t),
            Stream::Unix(s) => s.set_read_timeout(t),
            Stream::Tls(s) => s.get_ref().set_read_timeout(t),
        }
    }

    pub(super) fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_nonblocking(on),
            Stream::Unix(s) => s.set_nonblocking(on),
            // OpenSSL over a non-blocking socket: a record not yet whole, or a write the
            // socket has no room for, comes back as WouldBlock (the connector's partial-write
            // and moving-buffer modes let the same rest be written again).
            Stream::Tls(s) => s.get_ref().set_nonblocking(on),
        }
    }

    pub(super) fn is_tls(&self) -> bool {
        matches!(self, Stream::Tls(_))
    }
}

/// TCP keepalive (idle, interval, count) and TCP_USER_TIMEOUT, so that a session blocked on
/// a dead server or a partitioned network gets an error instead of waiting for ever.
pub(super) fn set_keepalive(s: &TcpStream, k: &Keepalive) -> io::Result<()> {
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
            Stream::Tls(s) => s.get_ref().as_fd(),
        }
    }
}

/// Shuts a connection's socket down from another thread: a read blocked on a server that
/// stopped answering returns at once (end of file). It holds a duplicate of the socket, so
/// it never touches a descriptor number reused after the connection closed.
#[derive(Debug)]
pub struct ShutdownHandle(pub(super) OwnedFd);

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

pub(super) fn resolve(host: &HostSpec) -> io::Result<Addr> {
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
pub(super) fn ssl_request(sock: &mut TcpStream) -> Result<bool, ConnectError> {
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
pub(super) fn handshake(
    sock: TcpStream,
    connector: &Connector,
    host: &HostSpec,
) -> Result<TlsStream, ConnectError> {
    let name = host.host.clone();
    let shown = host.name();
    let ssl = connector
        .configure(if host.is_unix() { "" } else { &name })
        .map_err(|e| ConnectError::Tls(describe_handshake_error(&e, &shown)))?;
    ssl.connect(&name, sock).map_err(|e| {
        let text = match &e {
            HandshakeError::Failure(m) | HandshakeError::WouldBlock(m) => {
                let verify = m.ssl().verify_result();
                if verify.as_raw() == 0 {
                    m.error().to_string()
                } else {
                    format!("{}: {}", m.error(), verify.error_string())
                }
            }
            HandshakeError::SetupFailure(s) => s.to_string(),
        };
        ConnectError::Tls(describe_handshake_error(&text, &shown))
    })
}
