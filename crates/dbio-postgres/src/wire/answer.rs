//! Reading the server's answers: the measured operation's Bind/Execute/Sync answer scanned in
//! place, and the general read up to ReadyForQuery.

use bytes::Buf;
use postgres_protocol::message::backend::Message;

use super::WireConn;
use super::error::{ServerError, WireError};

/// What an extended-protocol execution returned.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Executed {
    /// The row count of the command tag (`SELECT 1`, `UPDATE 64`).
    pub tag_rows: u64,
    /// The first column of the first row, when it is an 8-byte binary integer.
    pub first_int8: Option<i64>,
}

/// What has been read of an answer so far: the event engine reads it in several goes.
#[derive(Debug, Default)]
pub(super) struct Scan {
    out: Executed,
    error: Option<ServerError>,
}

impl WireConn {
    /// The answer to Bind/Execute/Sync, read in place: the messages of a normal answer
    /// (BindComplete, DataRow, CommandComplete, ReadyForQuery) are scanned in the buffer
    /// without being copied or checked as text; an error goes through the full parser.
    pub(super) fn answer(&mut self) -> Result<Executed, WireError> {
        self.scan = Scan::default();
        loop {
            if let Some(done) = self.scan_answer() {
                return done;
            }
            match self.fill() {
                Ok(()) => {}
                Err(WireError::Closed(None)) => {
                    return Err(WireError::Closed(self.scan.error.take()));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The answer as far as the socket has it, without blocking (the socket is
    /// non-blocking): Some once ReadyForQuery arrived, None when the socket has nothing
    /// more for now (read until it said so, as edge-triggered readiness requires). A
    /// request the socket had no room for is written first.
    pub fn poll_answer(&mut self) -> Result<Option<Executed>, WireError> {
        if !self.wbuf.is_empty() && !self.write_some()? {
            return Ok(None);
        }
        loop {
            if let Some(done) = self.scan_answer() {
                return done.map(Some);
            }
            match self.try_fill() {
                Ok(true) => {}
                Ok(false) => return Ok(None),
                Err(WireError::Closed(None)) => {
                    return Err(WireError::Closed(self.scan.error.take()));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Consumes the complete messages in the buffer; Some at ReadyForQuery (or a fatal
    /// error), None when the answer goes on past what has been read.
    fn scan_answer(&mut self) -> Option<Result<Executed, WireError>> {
        loop {
            if self.rbuf.len() < 5 {
                return None;
            }
            let len = u32::from_be_bytes([self.rbuf[1], self.rbuf[2], self.rbuf[3], self.rbuf[4]])
                as usize;
            if len < 4 {
                self.closed = true;
                return Some(Err(WireError::Protocol(format!("message length {len}"))));
            }
            if self.rbuf.len() <= len {
                return None;
            }
            let body = &self.rbuf[5..1 + len];
            match self.rbuf[0] {
                b'D' if self.scan.out.first_int8.is_none() => {
                    self.scan.out.first_int8 = first_int8(body)
                }
                b'C' => self.scan.out.tag_rows = tag_rows(body),
                b'Z' => {
                    self.rbuf.advance(1 + len);
                    let out = std::mem::take(&mut self.scan.out);
                    return Some(match self.scan.error.take() {
                        Some(e) => Err(WireError::Server(e)),
                        None => Ok(out),
                    });
                }
                b'E' => {
                    let Ok(Some(Message::ErrorResponse(body))) = Message::parse(&mut self.rbuf)
                    else {
                        self.closed = true;
                        return Some(Err(WireError::Protocol("unreadable error message".into())));
                    };
                    let e = ServerError::from_body(&body);
                    if e.ends_connection() {
                        self.closed = true;
                        return Some(Err(WireError::Closed(Some(e))));
                    }
                    self.scan.error.get_or_insert(e);
                    continue;
                }
                _ => {}
            }
            self.rbuf.advance(1 + len);
        }
    }

    /// Reads to ReadyForQuery; the first error, if any, is returned after it. A FATAL error
    /// followed by the end of the connection becomes `Closed` with the server's message.
    pub(super) fn finish(&mut self, mut on: impl FnMut(&Message)) -> Result<(), WireError> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
