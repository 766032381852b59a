//! Sizes and durations as users write them: `64MB`, `2GiB`, `8192blocks`, `30s`, `5m`.
//!
//! Size units follow PostgreSQL's own habit (`shared_buffers = 128MB` means 128 × 1024² bytes):
//! `kB`/`KiB`, `MB`/`MiB`, `GB`/`GiB` and `TB`/`TiB` are all powers of 1024. A bare number is
//! refused, because "4000" could mean bytes or blocks and the two differ by a factor of 8192.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A size as the user gave it: in bytes, or in database blocks whose byte size the server knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeSpec {
    Bytes(u64),
    Blocks(u64),
}

impl SizeSpec {
    /// Blocks of `block_size` bytes needed to hold this size (bytes are rounded up to a block).
    pub fn to_blocks(self, block_size: u64) -> u64 {
        match self {
            SizeSpec::Blocks(n) => n,
            SizeSpec::Bytes(b) => b.div_ceil(block_size.max(1)),
        }
    }

    pub fn to_bytes(self, block_size: u64) -> u64 {
        match self {
            SizeSpec::Blocks(n) => n.saturating_mul(block_size),
            SizeSpec::Bytes(b) => b,
        }
    }
}

impl fmt::Display for SizeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SizeSpec::Blocks(n) => write!(f, "{n}blocks"),
            SizeSpec::Bytes(b) => f.write_str(&format_bytes_exact(b)),
        }
    }
}

impl std::str::FromStr for SizeSpec {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        parse_size(s)
    }
}

const SIZE_HELP: &str = "write a number and a unit, e.g. 64MB, 2GiB or 8192blocks";

/// Parses `64MB`, `2 GiB`, `8192blocks`, `8192 blocks`, `512kB`.
/// Why a size or a duration could not be read, and how to write it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnitError(pub String);

/// The message reads as text (`.contains(...)`), as the `String` it replaces did.
impl std::ops::Deref for UnitError {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

pub fn parse_size(text: &str) -> Result<SizeSpec, UnitError> {
    size_of_text(text).map_err(UnitError)
}

fn size_of_text(text: &str) -> Result<SizeSpec, String> {
    let (number, unit) = split_number(text)?;
    let unit_lower = unit.to_ascii_lowercase();
    let factor: u64 = match unit_lower.as_str() {
        "" => return Err(format!("size `{text}` has no unit; {SIZE_HELP}")),
        "block" | "blocks" | "blk" | "blks" => {
            return whole(number, text).map(SizeSpec::Blocks);
        }
        "b" | "byte" | "bytes" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => {
            return Err(format!(
                "size `{text}` has an unknown unit `{unit}`; {SIZE_HELP}"
            ));
        }
    };
    let bytes = number * factor as f64;
    if !(bytes.is_finite() && bytes >= 0.0 && bytes < u64::MAX as f64) {
        return Err(format!("size `{text}` is out of range"));
    }
    Ok(SizeSpec::Bytes(bytes.round() as u64))
}

fn whole(number: f64, text: &str) -> Result<u64, String> {
    if number.fract() != 0.0 || number < 0.0 || number >= u64::MAX as f64 {
        return Err(format!("`{text}`: a block count must be a whole number"));
    }
    Ok(number as u64)
}

/// Splits "  64 MB " into (64.0, "MB"); the number may carry a decimal point.
fn split_number(text: &str) -> Result<(f64, &str), String> {
    let t = text.trim();
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(end);
    if num.is_empty() {
        return Err(format!("`{text}` does not start with a number"));
    }
    let number: f64 = num
        .replace('_', "")
        .parse()
        .map_err(|_| format!("`{text}` does not start with a valid number"))?;
    Ok((number, unit.trim()))
}

const DURATION_HELP: &str = "write a number and a unit, e.g. 500ms, 30s, 5m or 1h";

/// Parses `500ms`, `30s`, `5m`, `5min`, `1h`, and sums of them such as `1m30s`.
pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    duration_of_text(text).map_err(UnitError)
}

fn duration_of_text(text: &str) -> Result<Duration, String> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(format!("empty duration; {DURATION_HELP}"));
    }
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(end);
        let unit_end = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_end);
        let number: f64 = num.parse().map_err(|_| {
            format!("duration `{text}` is not a number and a unit; {DURATION_HELP}")
        })?;
        let seconds = match unit.trim() {
            "" => return Err(format!("duration `{text}` has no unit; {DURATION_HELP}")),
            "us" | "µs" => number / 1e6,
            "ms" => number / 1e3,
            "s" | "sec" | "secs" => number,
            "m" | "min" | "mins" => number * 60.0,
            "h" | "hr" | "hours" => number * 3600.0,
            other => {
                return Err(format!(
                    "duration `{text}` has an unknown unit `{other}`; {DURATION_HELP}"
                ));
            }
        };
        if !seconds.is_finite() || !(0.0..=1e9).contains(&seconds) {
            return Err(format!("duration `{text}` is out of range"));
        }
        total += Duration::from_secs_f64(seconds);
        rest = next.trim_start();
    }
    Ok(total)
}

/// `1536` -> "1.5 KiB"; for reports, not for round trips.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// The largest unit that represents `bytes` exactly, so that the text parses back to it.
fn format_bytes_exact(bytes: u64) -> String {
    for (shift, unit) in [(40, "TB"), (30, "GB"), (20, "MB"), (10, "kB")] {
        if bytes != 0 && bytes.is_multiple_of(1u64 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}B")
}

/// Duration as a unit string that parses back: `30s`, `1500ms`.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

impl Serialize for SizeSpec {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for SizeSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        parse_size(&text).map_err(serde::de::Error::custom)
    }
}

/// A duration that (de)serializes as a unit string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Dur(pub Duration);

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_duration(self.0))
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        parse_duration(&text)
            .map(Dur)
            .map_err(serde::de::Error::custom)
    }
}

impl std::str::FromStr for Dur {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        parse_duration(s).map(Dur)
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_duration(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_postgres_binary_units() {
        assert_eq!(parse_size("64MB"), Ok(SizeSpec::Bytes(64 << 20)));
        assert_eq!(parse_size("64MiB"), Ok(SizeSpec::Bytes(64 << 20)));
        assert_eq!(parse_size("2GiB"), Ok(SizeSpec::Bytes(2 << 30)));
        assert_eq!(parse_size(" 512kB "), Ok(SizeSpec::Bytes(512 << 10)));
        assert_eq!(parse_size("1.5GB"), Ok(SizeSpec::Bytes(3 << 29)));
        assert_eq!(parse_size("8192blocks"), Ok(SizeSpec::Blocks(8192)));
        assert_eq!(parse_size("8192 blocks"), Ok(SizeSpec::Blocks(8192)));
        assert_eq!(parse_size("10_000blocks"), Ok(SizeSpec::Blocks(10_000)));
    }

    #[test]
    fn bad_sizes_say_what_to_write() {
        let e = parse_size("4000").unwrap_err();
        assert!(e.contains("no unit") && e.contains("8192blocks"), "{e}");
        let e = parse_size("64XB").unwrap_err();
        assert!(e.contains("unknown unit `XB`"), "{e}");
        assert!(parse_size("MB").is_err());
        assert!(parse_size("1.5blocks").is_err());
        assert!(parse_size("").is_err());
    }

    #[test]
    fn blocks_and_bytes_convert_with_the_block_size() {
        assert_eq!(SizeSpec::Bytes(32 << 20).to_blocks(8192), 4096);
        assert_eq!(SizeSpec::Bytes(8193).to_blocks(8192), 2);
        assert_eq!(SizeSpec::Blocks(4000).to_bytes(8192), 4000 * 8192);
    }

    #[test]
    fn sizes_round_trip_through_text() {
        for s in [
            SizeSpec::Bytes(64 << 20),
            SizeSpec::Bytes(1000),
            SizeSpec::Blocks(7),
        ] {
            assert_eq!(parse_size(&s.to_string()), Ok(s));
        }
    }

    #[test]
    fn durations_take_units() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("5min"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("100ms"), Ok(Duration::from_millis(100)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("0.5s"), Ok(Duration::from_millis(500)));
        assert!(parse_duration("30").unwrap_err().contains("no unit"));
        assert!(
            parse_duration("3 fortnights")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(parse_duration("").is_err());
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format_duration(Duration::from_secs(30)), "30s");
    }

    #[test]
    fn bytes_format_for_people() {
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_bytes(32 << 20), "32.0 MiB");
    }
}
