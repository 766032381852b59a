//! Latency measurement. Two instruments:
//!
//! - an HDR histogram per session and operation kind (1 µs to 60 s, 3 significant digits:
//!   every recorded value is exact to within 0.1%), merged at the end; its percentiles are the
//!   run's client latency, and it is serialized (V2 + deflate, base64) into result.json so
//!   results can be merged and re-analysed;
//! - [`LogBuckets`], a lock-free log-scale counter array (8 buckets per power of two, so any
//!   value is within 12.5% of its bucket's bounds) that sessions add to and the coordinator
//!   drains every interval, for the time series and the live progress line.
//!
//! Beside them: the database's and the device's figures over a window (`dbstats`, `device`) and the significance tests compare uses (`significance`).

pub mod dbstats;
pub mod device;
pub mod significance;

use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use serde::{Deserialize, Serialize};

/// Highest latency the histograms hold, in µs (60 s); longer operations are recorded as 60 s.
pub const MAX_LATENCY_US: u64 = 60_000_000;

/// A new latency histogram in µs: 1 µs to 60 s, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    // The bounds are constants that satisfy the crate's preconditions (low >= 1,
    // high >= 2 * low, sigfig <= 5), so creation cannot fail.
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).unwrap_or_else(|_| unreachable_histogram())
}

/// What a session's histogram holds when it is made: 1 µs to 100 ms (32 KiB of u32 counts
/// where the 60 s layout takes 68 KiB); it grows on the first longer operation.
const SESSION_HIGH_US: u64 = 100_000;

/// The same layout with u32 counts, for per-session recording, made for values up to 100 ms
/// and grown, bucket by bucket, on the first longer one ([`record_session`]). Most sessions
/// never see one, and at a thousand sessions the untouched half of each histogram was the
/// larger part of dbio's memory and of what starting them cost (page faults; issue 34).
pub fn new_session_histogram() -> Histogram<u32> {
    let mut h = Histogram::new_with_bounds(1, SESSION_HIGH_US, 3)
        .unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|_| std::process::abort()));
    h.auto(true);
    h
}

/// Records `count` operations of `value_us` in a session's histogram: values below 1 µs count
/// as 1 µs and above [`MAX_LATENCY_US`] as 60 s, as in the run's histograms; the histogram
/// grows to hold a value above its range.
#[inline]
pub fn record_session(h: &mut Histogram<u32>, value_us: u64, count: u32) {
    let v = value_us.clamp(1, MAX_LATENCY_US);
    if h.record_n(v, count).is_err() {
        h.saturating_record_n(v, count);
    }
}

#[cold]
fn unreachable_histogram() -> Histogram<u64> {
    Histogram::new(3).unwrap_or_else(|_| std::process::abort())
}

/// Latency summary in µs, from an HDR histogram.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct LatencySummary {
    pub min: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
    pub mean: f64,
}

impl LatencySummary {
    pub fn from_histogram(h: &Histogram<u64>) -> Option<LatencySummary> {
        if h.is_empty() {
            return None;
        }
        Some(LatencySummary {
            min: h.min_nz(),
            p50: h.value_at_quantile(0.50),
            p90: h.value_at_quantile(0.90),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
            mean: h.mean(),
        })
    }
}

/// Histogram as base64 of the V2 + deflate encoding (HdrHistogram's interchange format).
pub fn encode_histogram(h: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    match V2DeflateSerializer::new().serialize(h, &mut bytes) {
        Ok(_) => base64::engine::general_purpose::STANDARD.encode(bytes),
        Err(_) => String::new(),
    }
}

/// Why a serialized histogram (result.json, a calibration) could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum HistogramError {
    #[error("histogram is not valid base64: {0}")]
    Base64(#[from] base64::DecodeError),
    #[error("histogram is not a valid HdrHistogram V2 encoding: {0:?}")]
    Encoding(hdrhistogram::serialization::DeserializeError),
}

/// The histogram [`encode_histogram`] wrote: base64 of its V2 (deflate) serialization.
pub fn decode_histogram(text: &str) -> Result<Histogram<u64>, HistogramError> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(text.trim())?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(HistogramError::Encoding)
}

const SUB_BUCKETS: u64 = 8;
const LINEAR_LIMIT: u64 = 16;
/// Buckets for values up to 2^40 µs; far beyond 60 s.
pub const LOG_BUCKETS: usize = 16 + 36 * 8;

/// Bucket of a value: exact below 16 µs, then 8 buckets per power of two.
pub fn log_bucket(value_us: u64) -> usize {
    if value_us < LINEAR_LIMIT {
        return value_us as usize;
    }
    let exp = 63 - value_us.leading_zeros() as u64; // >= 4
    let sub = (value_us >> (exp - 3)) & (SUB_BUCKETS - 1);
    let idx = LINEAR_LIMIT + (exp - 4) * SUB_BUCKETS + sub;
    (idx as usize).min(LOG_BUCKETS - 1)
}

/// Highest value that falls into bucket `idx` (a conservative percentile estimate).
pub fn log_bucket_upper(idx: usize) -> u64 {
    let idx = idx as u64;
    if idx < LINEAR_LIMIT {
        return idx;
    }
    let exp = (idx - LINEAR_LIMIT) / SUB_BUCKETS + 4;
    let sub = (idx - LINEAR_LIMIT) % SUB_BUCKETS;
    ((SUB_BUCKETS + sub + 1) << (exp - 3)) - 1
}

/// Lock-free log-scale latency counters: sessions add, the coordinator drains.
pub struct LogBuckets {
    counts: Vec<AtomicU64>,
}

impl Default for LogBuckets {
    fn default() -> Self {
        LogBuckets {
            counts: (0..LOG_BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl LogBuckets {
    #[inline]
    pub fn record(&self, value_us: u64) {
        self.counts[log_bucket(value_us)].fetch_add(1, Ordering::Relaxed);
    }

    /// Moves every count into `into` and zeroes this one.
    pub fn drain_into(&self, into: &mut [u64]) {
        for (c, slot) in self.counts.iter().zip(into.iter_mut()) {
            let v = c.swap(0, Ordering::Relaxed);
            *slot += v;
        }
    }
}

/// Quantile of drained bucket counts, as the upper bound of the bucket that holds it.
pub fn bucket_quantile(counts: &[u64], q: f64) -> Option<u64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
    let mut seen = 0;
    for (i, c) in counts.iter().enumerate() {
        seen += c;
        if seen >= rank {
            return Some(log_bucket_upper(i));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_bound_their_values() {
        for v in [
            0u64, 1, 15, 16, 17, 100, 1000, 4095, 4096, 123_456, 60_000_000,
        ] {
            let b = log_bucket(v);
            assert!(log_bucket_upper(b) >= v, "value {v} bucket {b}");
            if v >= 16 {
                let upper = log_bucket_upper(b) as f64;
                assert!(upper <= v as f64 * 1.126, "bucket of {v} too wide: {upper}");
            }
            if b > 0 {
                assert!(
                    log_bucket_upper(b - 1) < v,
                    "value {v} belongs to a lower bucket"
                );
            }
        }
    }

    #[test]
    fn bucket_quantiles_are_within_an_eighth() {
        let b = LogBuckets::default();
        for v in 1..=1000u64 {
            b.record(v * 10);
        }
        let mut counts = vec![0u64; LOG_BUCKETS];
        b.drain_into(&mut counts);
        let p99 = bucket_quantile(&counts, 0.99).unwrap() as f64;
        assert!((9900.0..=9900.0 * 1.125).contains(&p99), "{p99}");
        let mut again = vec![0u64; LOG_BUCKETS];
        b.drain_into(&mut again);
        assert_eq!(again.iter().sum::<u64>(), 0, "drain zeroes");
        assert_eq!(bucket_quantile(&again, 0.5), None);
    }

    #[test]
    fn session_histograms_start_small_and_grow_to_sixty_seconds() {
        let mut h = new_session_histogram();
        let made = h.distinct_values();
        assert!(
            made * 2 < new_histogram().distinct_values(),
            "a new session histogram holds {made} counts"
        );
        for v in [0, 1, 90_000, 2_000_000, MAX_LATENCY_US * 10] {
            record_session(&mut h, v, 3);
        }
        assert!(h.distinct_values() > made, "it grew for 2 s and 60 s");
        assert_eq!(h.len(), 15);
        assert_eq!(h.min(), 1);
        assert_eq!(h.count_at(1), 6, "0 µs counts as 1 µs");
        assert!(h.equivalent(h.max(), MAX_LATENCY_US), "{}", h.max());
        assert!(h.equivalent(h.value_at_quantile(0.7), 2_000_000));
        // Merged into a run's histogram, every value lands where a 60 s histogram puts it.
        let mut run = new_histogram();
        for v in h.iter_recorded() {
            run.saturating_record_n(v.value_iterated_to(), v.count_at_value() as u64);
        }
        let mut direct = new_histogram();
        for v in [1, 1, 90_000, 2_000_000, MAX_LATENCY_US] {
            direct.saturating_record_n(v, 3);
        }
        for q in [0.1, 0.5, 0.7, 0.9, 1.0] {
            assert_eq!(
                run.value_at_quantile(q),
                direct.value_at_quantile(q),
                "q {q}"
            );
        }
    }

    #[test]
    fn histograms_summarise_and_round_trip() {
        let mut h = new_histogram();
        for v in 1..=10_000u64 {
            h.saturating_record(v);
        }
        h.saturating_record(MAX_LATENCY_US * 10);
        let s = LatencySummary::from_histogram(&h).unwrap();
        assert_eq!(s.min, 1);
        assert!((4995..=5005).contains(&s.p50), "{s:?}");
        assert!((9895..=9905).contains(&s.p99), "{s:?}");
        assert!(s.max >= MAX_LATENCY_US && s.max <= MAX_LATENCY_US + MAX_LATENCY_US / 1000);
        let back = decode_histogram(&encode_histogram(&h)).unwrap();
        assert_eq!(back.len(), h.len());
        assert_eq!(back.value_at_quantile(0.99), h.value_at_quantile(0.99));
        assert!(decode_histogram("not base64!").is_err());
        assert_eq!(LatencySummary::from_histogram(&new_histogram()), None);
    }
}
