//! Steady state: the rule a window waits for before it opens (`run.steady`), and the one a
//! write workload's preconditioning runs until (`run.precondition`). Written as fio writes its
//! `steadystate` option: `iops_slope<=2%:10s` is "the least-squares slope of the per-interval
//! figure over the last 10 s, per second, at most 2% of the figure's mean over those 10 s".

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::units::{UnitError, format_duration, parse_duration};

/// The per-interval figure a steady-state rule watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SteadyMetric {
    /// Operations per second of each interval (each reads `work_unit` blocks, or updates
    /// `update_work_unit`): the I/O rate the sessions drive.
    IopsSlope,
    /// Mean latency of the operations of each interval (from the intended start under an
    /// open-loop rate).
    LatSlope,
}

impl SteadyMetric {
    pub fn as_str(self) -> &'static str {
        match self {
            SteadyMetric::IopsSlope => "iops_slope",
            SteadyMetric::LatSlope => "lat_slope",
        }
    }
}

/// `iops_slope<=2%:10s`: the window opens once the figure's least-squares slope over the
/// rolling span, per second, is at most `max_slope_pct` of its mean over the span (fio's
/// `steadystate=iops_slope:2%` with `ss_dur=10s`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SteadyRule {
    pub metric: SteadyMetric,
    /// Largest |slope| per second, in % of the span's mean.
    pub max_slope_pct: f64,
    /// The rolling span the slope is fitted over.
    pub span: Duration,
}

const STEADY_HELP: &str = "write METRIC<=PCT%:SPAN, e.g. iops_slope<=2%:10s or lat_slope<=5%:30s";

impl SteadyRule {
    pub fn parse(text: &str) -> Result<SteadyRule, UnitError> {
        let bad =
            |why: &str| UnitError(format!("steady-state rule `{text}`: {why}; {STEADY_HELP}"));
        let t = text.trim();
        let (metric, rest) = t
            .split_once("<=")
            .ok_or_else(|| bad("no `<=` between the metric and its bound"))?;
        let metric = match metric.trim() {
            "iops_slope" => SteadyMetric::IopsSlope,
            "lat_slope" => SteadyMetric::LatSlope,
            other => {
                return Err(bad(&format!(
                    "unknown metric `{other}` (iops_slope or lat_slope)"
                )));
            }
        };
        let (bound, span) = rest
            .split_once(':')
            .ok_or_else(|| bad("no `:SPAN` after the bound"))?;
        let pct = bound
            .trim()
            .strip_suffix('%')
            .ok_or_else(|| bad("the bound is a percentage of the mean, e.g. 2%"))?;
        let max_slope_pct: f64 = pct
            .trim()
            .parse()
            .map_err(|_| bad(&format!("`{pct}` is not a number")))?;
        if !(max_slope_pct.is_finite() && max_slope_pct > 0.0 && max_slope_pct <= 100.0) {
            return Err(bad("the bound must be above 0% and at most 100%"));
        }
        let span = parse_duration(span.trim()).map_err(|e| bad(&e))?;
        if span < Duration::from_secs(1) {
            return Err(bad("the span must be at least 1s"));
        }
        Ok(SteadyRule {
            metric,
            max_slope_pct,
            span,
        })
    }
}

impl fmt::Display for SteadyRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}<={}%:{}",
            self.metric.as_str(),
            self.max_slope_pct,
            format_duration(self.span)
        )
    }
}

impl std::str::FromStr for SteadyRule {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        SteadyRule::parse(s)
    }
}

impl Serialize for SteadyRule {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for SteadyRule {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        SteadyRule::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_and_print_back() {
        let r = SteadyRule::parse("iops_slope<=2%:10s").unwrap();
        assert_eq!(r.metric, SteadyMetric::IopsSlope);
        assert_eq!(r.max_slope_pct, 2.0);
        assert_eq!(r.span, Duration::from_secs(10));
        assert_eq!(r.to_string(), "iops_slope<=2%:10s");
        let r: SteadyRule = " lat_slope <= 0.5% : 1m ".parse().unwrap();
        assert_eq!(r.metric, SteadyMetric::LatSlope);
        assert_eq!(r.to_string(), "lat_slope<=0.5%:60s");
        assert_eq!(SteadyRule::parse(&r.to_string()).unwrap(), r);
    }

    #[test]
    fn bad_rules_say_how_to_write_one() {
        for (text, why) in [
            ("iops_slope:10s", "no `<=`"),
            ("iops<=2%:10s", "unknown metric `iops`"),
            ("iops_slope<=2%", "no `:SPAN`"),
            ("iops_slope<=2:10s", "a percentage"),
            ("iops_slope<=x%:10s", "not a number"),
            ("iops_slope<=0%:10s", "above 0%"),
            ("iops_slope<=2%:500ms", "at least 1s"),
            ("iops_slope<=2%:10", "no unit"),
        ] {
            let e = SteadyRule::parse(text).unwrap_err().to_string();
            assert!(
                e.contains(why) && e.contains("iops_slope<=2%:10s"),
                "{text}: {e}"
            );
        }
    }
}
