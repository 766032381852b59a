//! `dbio capacity`'s keys: the latency target a step must meet (`capacity.slo: p99<=2ms`), the
//! figure the answer is given in, what the search varies and its bounds.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::arrival::Rate;
use crate::units::{UnitError, parse_duration};

/// Which latency statistic a target bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SloStat {
    /// A percentile of the client's read latency (HDR histogram): 50, 90, 95, 99, 99.9.
    Percentile(f64),
    /// The mean.
    Avg,
}

/// Whose latency a target bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SloSource {
    /// dbio's measured read operations (round trip; from the intended start under a rate).
    Client,
    /// The database's own average time of one block read (pg_stat_io / pg_statio with
    /// track_io_timing; V$ on Oracle): an average only, the counters have no distribution.
    Db,
}

/// A latency target: `p99<=2ms` (client read latency), `avg<=800us`, `db.avg<=5ms`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slo {
    pub source: SloSource,
    pub stat: SloStat,
    /// The bound, in µs (inclusive).
    pub max_us: f64,
}

const SLO_HELP: &str = "write STAT<=DURATION, e.g. p99<=2ms, p95<=500us, avg<=1ms (client read latency) \
                        or db.avg<=5ms (the database's own average block-read time)";

impl Slo {
    pub fn parse(text: &str) -> Result<Slo, UnitError> {
        let bad = |why: String| UnitError(format!("latency target `{text}`: {why}; {SLO_HELP}"));
        let (lhs, rhs) = text
            .trim()
            .split_once("<=")
            .ok_or_else(|| bad("no `<=`".into()))?;
        let lhs = lhs.trim();
        let (source, stat) = match lhs.split_once('.') {
            Some(("db", s)) => (SloSource::Db, s),
            Some(("client", s)) => (SloSource::Client, s),
            _ => (SloSource::Client, lhs),
        };
        let stat = match stat {
            "avg" | "mean" => SloStat::Avg,
            p => {
                let n = p.strip_prefix('p').ok_or_else(|| {
                    bad(format!(
                        "unknown statistic `{p}` (p50, p90, p95, p99, p99.9 or avg)"
                    ))
                })?;
                let q: f64 = n
                    .parse()
                    .map_err(|_| bad(format!("`{p}` is not a percentile")))?;
                if !(q > 0.0 && q < 100.0) {
                    return Err(bad(format!("percentile {q} is not between 0 and 100")));
                }
                SloStat::Percentile(q)
            }
        };
        if source == SloSource::Db && stat != SloStat::Avg {
            return Err(bad(
                "the database's counters give an average block-read time, not a distribution: use db.avg, \
                 or a client percentile (p99)"
                    .into(),
            ));
        }
        let d = parse_duration(rhs.trim()).map_err(|e| bad(e.to_string()))?;
        let max_us = d.as_secs_f64() * 1e6;
        if max_us < 1.0 {
            return Err(bad("the bound must be at least 1us".into()));
        }
        Ok(Slo {
            source,
            stat,
            max_us,
        })
    }

    /// `p99 client read latency`, for sentences.
    pub fn describe(&self) -> String {
        let stat = match self.stat {
            SloStat::Avg => "average".to_string(),
            SloStat::Percentile(q) => format!("p{}", fmt_pct(q)),
        };
        match self.source {
            SloSource::Client => format!("{stat} client read latency"),
            SloSource::Db => format!("{stat} DB block-read latency"),
        }
    }
}

fn fmt_pct(q: f64) -> String {
    let t = format!("{q}");
    t.trim_end_matches(".0").to_string()
}

/// A bound in µs as its shortest exact unit (`2ms`, `500us`, `1.5s`).
pub fn fmt_us(us: f64) -> String {
    if us >= 1e6 && (us / 1e6).fract() == 0.0 {
        format!("{}s", us / 1e6)
    } else if us >= 1e3 && (us / 1e3).fract() == 0.0 {
        format!("{}ms", us / 1e3)
    } else {
        format!("{}us", us)
    }
}

impl fmt::Display for Slo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.source == SloSource::Db {
            f.write_str("db.")?;
        }
        match self.stat {
            SloStat::Avg => f.write_str("avg")?,
            SloStat::Percentile(q) => write!(f, "p{}", fmt_pct(q))?,
        }
        write!(f, "<={}", fmt_us(self.max_us))
    }
}

impl std::str::FromStr for Slo {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        Slo::parse(s)
    }
}

impl Serialize for Slo {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Slo {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Slo::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// The figure a capacity answer is given in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CapacityMetric {
    /// The database's read requests per second that missed its buffer cache.
    #[default]
    DbReadIops,
    /// Reads per second of the device under the data (/proc/diskstats).
    DeviceIops,
    /// dbio's operations per second.
    Ops,
}

impl CapacityMetric {
    pub fn as_str(self) -> &'static str {
        match self {
            CapacityMetric::DbReadIops => "db_read_iops",
            CapacityMetric::DeviceIops => "device_iops",
            CapacityMetric::Ops => "ops",
        }
    }

    /// With its unit, for tables and charts.
    pub fn label(self) -> &'static str {
        match self {
            CapacityMetric::DbReadIops => "DB read IOPS (requests/s)",
            CapacityMetric::DeviceIops => "device read IOPS (reads/s)",
            CapacityMetric::Ops => "client operations/s",
        }
    }
}

/// What a capacity search varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SearchOver {
    /// The reader sessions (closed loop, or each at `run.rate` shared).
    #[default]
    Sessions,
    /// The open-loop arrival rate, over a fixed pool of `run.readers` sessions.
    Rate,
}

impl SearchOver {
    pub fn as_str(self) -> &'static str {
        match self {
            SearchOver::Sessions => "sessions",
            SearchOver::Rate => "rate",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CapacityConfig {
    /// The latency target every step is judged against (`--slo`); required by `dbio capacity`.
    pub slo: Option<Slo>,
    /// The figure the answer is given in.
    pub metric: CapacityMetric,
    /// What the search varies: `sessions` (readers) or `rate` (open-loop arrivals).
    pub search: SearchOver,
    /// Readers of the first step of a session search; it doubles from there.
    pub start_sessions: u32,
    /// The most readers a session search tries.
    pub max_sessions: u32,
    /// The first rate of a rate search; default `run.rate`, else 100/s.
    pub start_rate: Option<Rate>,
    /// The highest rate a rate search tries.
    pub max_rate: Rate,
    /// Runs at the answer in all (the search's own included): their spread is the answer's
    /// interval. 1: none beyond the search.
    pub repeat: u32,
    /// Bisection stops when the figure at the bracket's two ends differs by at most this
    /// share (%) of the lower one: a finer search could not raise the answer by more.
    pub resolution_pct: f64,
}

impl Default for CapacityConfig {
    fn default() -> Self {
        CapacityConfig {
            slo: None,
            metric: CapacityMetric::DbReadIops,
            search: SearchOver::Sessions,
            start_sessions: 1,
            max_sessions: 256,
            start_rate: None,
            max_rate: Rate(1e6),
            repeat: 3,
            resolution_pct: 5.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_and_print_back() {
        let s = Slo::parse("p99<=2ms").unwrap();
        assert_eq!(
            (s.source, s.stat, s.max_us),
            (SloSource::Client, SloStat::Percentile(99.0), 2000.0)
        );
        assert_eq!(s.to_string(), "p99<=2ms");
        assert_eq!(s.describe(), "p99 client read latency");
        let s = Slo::parse("p99.9 <= 1.5s").unwrap();
        assert_eq!(s.stat, SloStat::Percentile(99.9));
        assert_eq!(s.to_string(), "p99.9<=1500ms");
        let s = Slo::parse("client.p95<=500us").unwrap();
        assert_eq!(s.to_string(), "p95<=500us");
        let s = Slo::parse("avg<=800us").unwrap();
        assert_eq!((s.stat, s.max_us), (SloStat::Avg, 800.0));
        let s = Slo::parse("db.avg<=5ms").unwrap();
        assert_eq!((s.source, s.stat), (SloSource::Db, SloStat::Avg));
        assert_eq!(s.to_string(), "db.avg<=5ms");
        assert_eq!(s.describe(), "average DB block-read latency");
        for t in [
            "p99<=2ms",
            "p95<=500us",
            "db.avg<=5ms",
            "avg<=1s",
            "p99.9<=1500ms",
        ] {
            assert_eq!(Slo::parse(t).unwrap().to_string(), t);
        }
    }

    #[test]
    fn bad_targets_say_why_and_how() {
        for (text, why) in [
            ("p99 2ms", "no `<=`"),
            ("q99<=2ms", "unknown statistic"),
            ("px<=2ms", "not a percentile"),
            ("p100<=2ms", "between 0 and 100"),
            ("db.p99<=2ms", "an average block-read time"),
            ("p99<=2", "no unit"),
            ("p99<=0ms", "at least 1us"),
        ] {
            let e = Slo::parse(text).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains("p99<=2ms"), "{text}: {e}");
        }
    }

    #[test]
    fn the_section_reads_from_yaml() {
        let c: CapacityConfig = serde_saphyr::from_str(
            "slo: p99<=50ms\nmetric: device_iops\nsearch: rate\nstart_rate: 200/s\nrepeat: 2\n",
        )
        .unwrap();
        assert_eq!(c.slo.map(|s| s.to_string()).as_deref(), Some("p99<=50ms"));
        assert_eq!(c.metric, CapacityMetric::DeviceIops);
        assert_eq!(c.search, SearchOver::Rate);
        assert_eq!(c.start_rate, Some(Rate(200.0)));
        assert_eq!(c.max_sessions, 256);
        assert!(serde_saphyr::from_str::<CapacityConfig>("slo: p99<2ms\n").is_err());
    }
}
