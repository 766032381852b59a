//! PostgreSQL's binary COPY format, written straight into a buffer: a fixed header, per row a
//! field count and length-prefixed fields, and a trailer (docs: "COPY", "Binary Format").
//! Encoding rows ourselves avoids a trait-object call per field on the loader's hot path.

use bytes::{BufMut, BytesMut};

const SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\0";

pub fn write_header(buf: &mut BytesMut) {
    buf.put_slice(SIGNATURE);
    buf.put_i32(0); // flags: no OIDs
    buf.put_i32(0); // header extension length
}

/// One row: a bigint key followed by text fields.
pub fn write_row(buf: &mut BytesMut, key: i64, texts: &[&[u8]]) {
    buf.put_i16(1 + texts.len() as i16);
    buf.put_i32(8);
    buf.put_i64(key);
    for t in texts {
        buf.put_i32(t.len() as i32);
        buf.put_slice(t);
    }
}

pub fn write_trailer(buf: &mut BytesMut) {
    buf.put_i16(-1);
}

/// Fills `out` with printable characters from a xorshift64* stream: cheap, not compressible
/// or deduplicable by storage the way SLOB's constant 'X' filler is.
pub fn fill_text(state: &mut u64, out: &mut [u8]) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut chunk = out.chunks_mut(10);
    for part in &mut chunk {
        *state ^= *state >> 12;
        *state ^= *state << 25;
        *state ^= *state >> 27;
        let mut r = state.wrapping_mul(0x2545_F491_4F6C_DD1D);
        for b in part.iter_mut() {
            *b = ALPHABET[(r & 63) as usize];
            r >>= 6;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_layout_matches_the_binary_format() {
        let mut b = BytesMut::new();
        write_header(&mut b);
        write_row(&mut b, 7, &[b"ab"]);
        write_trailer(&mut b);
        let mut expect = Vec::new();
        expect.extend_from_slice(SIGNATURE);
        expect.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]);
        expect.extend_from_slice(&[0, 2]); // two fields
        expect.extend_from_slice(&[0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 7]);
        expect.extend_from_slice(&[0, 0, 0, 2, b'a', b'b']);
        expect.extend_from_slice(&[0xff, 0xff]);
        assert_eq!(&b[..], &expect[..]);
    }

    #[test]
    fn filler_is_printable_and_varies() {
        let mut s = 0x1234_5678_9abc_def1;
        let mut a = [0u8; 120];
        let mut b = [0u8; 120];
        fill_text(&mut s, &mut a);
        fill_text(&mut s, &mut b);
        assert!(a.iter().all(|c| c.is_ascii_graphic()));
        assert_ne!(a, b);
    }
}
