//! Open-loop arrivals: operations started at a rate (`run.rate: 5000/s`) whatever the
//! server's answers, instead of each session starting its next operation when the last one
//! returns (the closed loop). `run.arrival` spaces them evenly (`fixed`) or as a Poisson
//! process (`poisson`: exponential gaps, as pgbench -R, BenchBase and fio's
//! rate_process=poisson).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::units::UnitError;

/// Operations per second, written `5000/s`.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Rate(pub f64);

/// The fastest rate accepted: a billion operations a second is beyond any server.
pub const MAX_RATE_PER_S: f64 = 1e9;

const RATE_HELP: &str = "write operations per second with their unit, e.g. 5000/s";

impl Rate {
    pub fn parse(text: &str) -> Result<Rate, UnitError> {
        let t = text.trim();
        let bad = |why: String| UnitError(format!("rate `{text}`: {why}; {RATE_HELP}"));
        let number = t
            .strip_suffix("/s")
            .ok_or_else(|| bad("no `/s` unit".into()))?
            .trim();
        let v: f64 = number
            .parse()
            .map_err(|_| bad(format!("`{number}` is not a number")))?;
        if !(v.is_finite() && (1.0..=MAX_RATE_PER_S).contains(&v)) {
            return Err(bad(format!("must be from 1/s to {MAX_RATE_PER_S:e}/s")));
        }
        Ok(Rate(v))
    }

    pub fn per_s(self) -> f64 {
        self.0
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/s", self.0)
    }
}

impl std::str::FromStr for Rate {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        Rate::parse(s)
    }
}

impl Serialize for Rate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Rate::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// How the intended starts of an open-loop run are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Arrival {
    /// Evenly: one every 1/rate seconds.
    #[default]
    Fixed,
    /// A Poisson process: exponentially distributed gaps of mean 1/rate.
    Poisson,
}

impl Arrival {
    pub fn as_str(self) -> &'static str {
        match self {
            Arrival::Fixed => "fixed",
            Arrival::Poisson => "poisson",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_take_their_unit() {
        assert_eq!(Rate::parse("5000/s").unwrap(), Rate(5000.0));
        assert_eq!(Rate::parse(" 2.5 /s").unwrap().per_s(), 2.5);
        assert_eq!(Rate(400.0).to_string(), "400/s");
        for (text, why) in [
            ("5000", "no `/s`"),
            ("x/s", "not a number"),
            ("0/s", "from 1/s"),
            ("0.5/s", "from 1/s"),
            ("1e12/s", "from 1/s"),
            ("inf/s", "from 1/s"),
        ] {
            let e = Rate::parse(text).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains("5000/s"), "{text}: {e}");
        }
    }
}
