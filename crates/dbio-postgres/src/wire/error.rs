//! The errors of a measured session's connection: what the server sent (`ServerError`), what
//! an operation met (`WireError`) and why a connection attempt failed (`ConnectError`).

use std::io;

use fallible_iterator::FallibleIterator;
use postgres_protocol::message::backend::ErrorResponseBody;

use crate::conn::Target;
use crate::error::PgError;

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
    pub(super) fn from_body(body: &ErrorResponseBody) -> ServerError {
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
    pub(super) fn into_pg(self, one: &Target) -> PgError {
        match self {
            ConnectError::Server(s) => {
                one.server_refused(&s.code, &s.message, s.detail(), s.hint())
            }
            ConnectError::Io(e)
                if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::TimedOut =>
            {
                one.no_answer()
            }
            other => one.unreachable(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, BytesMut};
    use postgres_protocol::message::backend::Message;

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
}
