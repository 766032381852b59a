//! `regress:` in the config: the thresholds a current run must meet against its baseline,
//! for every step and per step. Here, not in `regress`, so that the config depends on no
//! module that reads results (no import cycle config -> regress -> summary -> result).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A threshold in %, or `off`: that gate is not checked. On a shared, noisy system the client
/// p99 can move tenfold between identical runs, so a DBA may gate on throughput alone.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Threshold {
    Pct(f64),
    Off,
}

impl Threshold {
    pub fn pct(self) -> Option<f64> {
        match self {
            Threshold::Pct(v) => Some(v),
            Threshold::Off => None,
        }
    }
}

impl std::str::FromStr for Threshold {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("off") {
            return Ok(Threshold::Off);
        }
        t.trim_end_matches('%')
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .map(Threshold::Pct)
            .ok_or_else(|| format!("`{s}` is neither a percentage (e.g. 10) nor `off`"))
    }
}

impl std::fmt::Display for Threshold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Threshold::Pct(v) => write!(f, "{v}"),
            Threshold::Off => f.write_str("off"),
        }
    }
}

impl Serialize for Threshold {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Threshold::Pct(v) => s.serialize_f64(*v),
            Threshold::Off => s.serialize_str("off"),
        }
    }
}

impl<'de> Deserialize<'de> for Threshold {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Threshold;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a percentage (e.g. 10) or `off`")
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Threshold, E> {
                Ok(Threshold::Pct(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Threshold, E> {
                Ok(Threshold::Pct(v as f64))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Threshold, E> {
                Ok(Threshold::Pct(v as f64))
            }
            // YAML 1.1 reads a bare `off` (and `false`, `no`) as the boolean false.
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Threshold, E> {
                if v {
                    Err(E::custom("a threshold is a percentage (e.g. 10) or `off`"))
                } else {
                    Ok(Threshold::Off)
                }
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Threshold, E> {
                v.parse().map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Thresholds {
    /// Largest allowed drop of DB read IOPS and client ops/s, in %, or `off`.
    pub max_iops_drop_pct: Threshold,
    /// Largest allowed rise of DB read latency and client read p99, in %, or `off`.
    pub max_latency_rise_pct: Threshold,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            max_iops_drop_pct: Threshold::Pct(10.0),
            max_latency_rise_pct: Threshold::Pct(20.0),
        }
    }
}

/// `regress:` in the config: thresholds for every step, and per-step overrides by step label
/// (`r4-w0`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RegressConfig {
    pub max_iops_drop_pct: Threshold,
    pub max_latency_rise_pct: Threshold,
    pub steps: BTreeMap<String, Thresholds>,
}

impl Default for RegressConfig {
    fn default() -> Self {
        let t = Thresholds::default();
        RegressConfig {
            max_iops_drop_pct: t.max_iops_drop_pct,
            max_latency_rise_pct: t.max_latency_rise_pct,
            steps: BTreeMap::new(),
        }
    }
}

impl RegressConfig {
    /// The thresholds of a step: its override, or the general ones.
    pub fn for_step(&self, step: &str) -> Thresholds {
        self.steps.get(step).cloned().unwrap_or(Thresholds {
            max_iops_drop_pct: self.max_iops_drop_pct,
            max_latency_rise_pct: self.max_latency_rise_pct,
        })
    }
}
