//! Cancel requests for a measured session's running statement.

use std::io::{Read, Write};
use std::time::Duration;

use bytes::BytesMut;
use postgres_protocol::message::frontend;

use crate::tls::Connector;

use super::stream::{Addr, Stream, handshake, ssl_request};
use crate::conn::{HostSpec, Keepalive};

/// Sends a cancel request for a connection's running statement, from any thread: to the
/// address the connection is connected to, over TLS when the connection uses TLS.
#[derive(Debug, Clone)]
pub struct CancelHandle {
    pub(super) addr: Addr,
    pub(super) pid: i32,
    pub(super) key: i32,
    pub(super) timeout: Duration,
    pub(super) keepalive: Keepalive,
    /// The TLS configuration and host of the connection, when it uses TLS.
    pub(super) tls: Option<(Connector, HostSpec)>,
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
