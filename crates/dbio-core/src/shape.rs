//! What a run measures: the facts that must be equal before two runs' figures may be put side
//! by side. A run with `work_unit` 64 reads 64 blocks per operation and one with 1 reads one,
//! so their ops/s differ by design; a run on PostgreSQL 18 with `io_method=worker` reads
//! through read streams where 15 does not; a data set that fits in shared_buffers measures
//! memory. compare lists such differences before any number, and regress refuses them unless
//! the user names the ones to accept (issue: "compare and regress read status and shape").

use crate::config::Config;
use crate::result::Environment;

/// The names of the facts, in the order they are shown. `--accept-difference` takes these.
pub const FACTS: &[&str] = &[
    "database",
    "engine",
    "read_path",
    "arrival",
    "server_major",
    "block_size",
    "shared_buffers",
    "io_method",
    "debug_io_direct",
    "data_device",
    "schemas",
    "scale_blocks",
    "work_unit",
    "update_work_unit",
    "targets",
];

/// One run's (or ramp's) facts; a fact is `None` where the document does not know it, and an
/// unknown fact is never reported as a difference, but for the data device: a device that
/// was not measured (tmpfs, no rights) against a known one is one (seen: regress gated a
/// flash run against a baseline on disk, the tmpfs side's device unknown).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Shape {
    facts: Vec<(&'static str, Option<String>)>,
}

/// What a data device that was not measured is called in a difference.
pub const UNKNOWN_DEVICE: &str = "unknown (not measured: tmpfs, or no rights)";

/// A fact whose value differs between two inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    pub fact: &'static str,
    pub a: String,
    pub b: String,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} vs {}", self.fact, self.a, self.b)
    }
}

impl Shape {
    /// The facts of a run or a ramp from its config, its environment (when recorded) and the
    /// device its data was measured on (when known).
    pub fn of(config: &Config, env: Option<&Environment>, data_device: Option<&str>) -> Shape {
        let setting = |name: &str| {
            env.and_then(|e| e.settings.get(name).cloned().flatten())
                .filter(|v| !v.is_empty())
        };
        let value = |fact: &str| -> Option<String> {
            match fact {
                "database" => Some(format!("{:?}", config.engine).to_lowercase()),
                // Servers driven in one window (target.dsns): their reads are summed.
                "targets" => Some(config.targets_n().to_string()),
                "engine" => Some(format!("{:?}", config.run.engine).to_lowercase()),
                "read_path" => Some(config.run.read_path.as_str().to_string()),
                // A closed loop's latency is a session's round trip; an open loop's counts
                // from the intended start (its rate is the step's).
                "arrival" => Some(match config.run.rate {
                    Some(_) => format!("open ({})", config.run.arrival.as_str()),
                    None => "closed".into(),
                }),
                "server_major" => env.and_then(server_major),
                "block_size" => env
                    .map(|e| e.data_set.block_size)
                    .filter(|b| *b > 0)
                    .map(|b| b.to_string()),
                "shared_buffers" => setting("shared_buffers"),
                "io_method" => setting("io_method"),
                "debug_io_direct" => setting("debug_io_direct"),
                "data_device" => data_device.map(str::to_string),
                "schemas" => Some(
                    env.map(|e| e.data_set.schemas)
                        .filter(|s| *s > 0)
                        .unwrap_or(config.data.schemas)
                        .to_string(),
                ),
                "scale_blocks" => env
                    .map(|e| e.data_set.scale_blocks)
                    .filter(|s| *s > 0)
                    .map(|s| s.to_string()),
                "work_unit" => Some(config.run.work_unit.to_string()),
                "update_work_unit" => Some(config.run.update_work_unit.to_string()),
                _ => None,
            }
        };
        Shape {
            facts: FACTS.iter().map(|f| (*f, value(f))).collect(),
        }
    }

    /// The facts known on both sides whose values differ, in `FACTS` order.
    pub fn differences(&self, other: &Shape) -> Vec<Difference> {
        self.facts
            .iter()
            .zip(&other.facts)
            .filter_map(|((fact, a), (_, b))| match (a, b) {
                (Some(a), Some(b)) if a != b => Some(Difference {
                    fact,
                    a: a.clone(),
                    b: b.clone(),
                }),
                (Some(_), None) | (None, Some(_)) if *fact == "data_device" => Some(Difference {
                    fact,
                    a: a.clone().unwrap_or_else(|| UNKNOWN_DEVICE.into()),
                    b: b.clone().unwrap_or_else(|| UNKNOWN_DEVICE.into()),
                }),
                _ => None,
            })
            .collect()
    }
}

/// PostgreSQL's major from server_version_num (150004 -> 15; before 10: 90624 -> 9.6); for
/// other databases the first part of the version text.
fn server_major(env: &Environment) -> Option<String> {
    let n = env.server_version_num;
    if n >= 100_000 {
        return Some((n / 10_000).to_string());
    }
    if n > 0 {
        return Some(format!("{}.{}", n / 10_000, (n / 100) % 100));
    }
    env.server_version
        .split(['.', ' '])
        .find(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        .map(str::to_string)
}

/// Checks user-given `--accept-difference` names against `FACTS`.
pub fn check_fact_names(names: &[String]) -> Result<(), crate::CoreError> {
    match names.iter().find(|n| !FACTS.contains(&n.as_str())) {
        Some(bad) => Err(crate::CoreError::invalid(
            "--accept-difference",
            format!(
                "`{bad}` is not a fact that can differ; use one of: {}",
                FACTS.join(", ")
            ),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::DataSetInfo;
    use std::collections::BTreeMap;

    fn env(version_num: i64, shared_buffers: &str) -> Environment {
        Environment {
            dbio_version: "0".into(),
            client_host: "h".into(),
            target: "host=h".into(),
            pinned_server: None,
            server_version: "x".into(),
            server_version_num: version_num,
            session_tls: Default::default(),
            settings: BTreeMap::from([
                (
                    "shared_buffers".to_string(),
                    Some(shared_buffers.to_string()),
                ),
                ("io_method".to_string(), None),
            ]),
            data_set: DataSetInfo {
                schemas: 2,
                scale_blocks: 1000,
                block_size: 8192,
                table_bytes: 0,
                schemas_used: vec![],
                tables: vec![],
            },
            read_path: None,
        }
    }

    #[test]
    fn like_with_like_has_no_difference() {
        let c = Config::default();
        let a = Shape::of(&c, Some(&env(150004, "16MB")), Some("vda"));
        assert!(a.differences(&a.clone()).is_empty());
    }

    #[test]
    fn work_unit_version_and_buffers_are_named_in_order() {
        let mut c = Config::default();
        let a = Shape::of(&c, Some(&env(150004, "16MB")), None);
        c.run.work_unit = 1;
        let b = Shape::of(&c, Some(&env(170002, "128MB")), Some("vdb"));
        let d: Vec<String> = a.differences(&b).iter().map(|d| d.to_string()).collect();
        assert_eq!(
            d,
            [
                "server_major 15 vs 17",
                "shared_buffers 16MB vs 128MB",
                "data_device unknown (not measured: tmpfs, or no rights) vs vdb",
                "work_unit 64 vs 1"
            ],
            "a device unknown on one side (tmpfs) against a known one is a difference"
        );
        // Unknown on both sides says nothing.
        let c = Shape::of(&Config::default(), Some(&env(150004, "16MB")), None);
        assert!(a.differences(&c).is_empty());
    }

    #[test]
    fn fact_names_are_checked() {
        assert!(check_fact_names(&["work_unit".into()]).is_ok());
        let e = check_fact_names(&["workunit".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("work_unit"), "{e}");
    }

    #[test]
    fn majors_old_and_new() {
        let mut e = env(90624, "1");
        assert_eq!(server_major(&e).as_deref(), Some("9.6"));
        e.server_version_num = 0;
        e.server_version = "Oracle Database 19c Enterprise Edition Release 19.0.0.0.0".into();
        assert_eq!(server_major(&e).as_deref(), Some("19"));
    }
}
