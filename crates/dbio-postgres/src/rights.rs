//! Least privilege: which of dbio's figures the connected role cannot have, and the exact
//! GRANT for each. `dbio check` prints the list before a run; every run records it.
//! The minimal benchmark role is in docs/guide.md ("A benchmark role").

use dbio_core::stats::dbstats::MissingRight;
use tokio_postgres::Client;

use crate::error::{PgError, Result};
use crate::sql;

/// The role's rights, as the server reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoleRights {
    pub role: String,
    pub superuser: bool,
    pub read_all_stats: bool,
    pub read_all_settings: bool,
    pub read_server_files: bool,
    pub execute_read_file: bool,
    /// None before PostgreSQL 15 (CHECKPOINT is then superuser-only).
    pub checkpoint: Option<bool>,
    pub track_io_timing_on: bool,
    /// None before 15 (no GRANT SET ON PARAMETER).
    pub set_track_io_timing: Option<bool>,
}

impl RoleRights {
    pub async fn read(client: &Client, major: i32) -> Result<RoleRights> {
        let row = client
            .query_one(&sql::role_rights(major), &[])
            .await
            .map_err(|e| PgError::from_db("reading the role's rights", &e))?;
        let b = |i: usize| row.try_get::<_, Option<bool>>(i).ok().flatten();
        Ok(RoleRights {
            superuser: b(0).unwrap_or(false),
            read_all_stats: b(1).unwrap_or(false),
            read_all_settings: b(2).unwrap_or(false),
            read_server_files: b(3).unwrap_or(false),
            execute_read_file: b(4).unwrap_or(false),
            checkpoint: b(5),
            track_io_timing_on: b(6).unwrap_or(false),
            set_track_io_timing: b(7),
            role: row.try_get::<_, String>(8).unwrap_or_default(),
        })
    }

    /// The role may read server files through pg_read_file.
    pub fn reads_server_files(&self) -> bool {
        self.superuser || (self.read_server_files && self.execute_read_file)
    }

    /// Each figure missing for want of a right, with the GRANT that gives it.
    pub fn missing(&self) -> Vec<MissingRight> {
        if self.superuser {
            return Vec::new();
        }
        let role = quote_ident(&self.role);
        let mut out = Vec::new();
        if !self.read_all_stats {
            out.push(MissingRight {
                figures: "other roles' sessions and the server's processes in the wait samples (the background table, io workers, \
                          foreign activity on dbio's tables), and the free-connection check's view of them: the sampler sees only this role's sessions"
                    .into(),
                grant: format!("GRANT pg_read_all_stats TO {role};"),
            });
        }
        if !self.read_all_settings {
            out.push(MissingRight {
                figures: "the data directory's path: the device under the default tablespace, the local-server proof, setup's free-space check"
                    .into(),
                grant: format!("GRANT pg_read_all_settings TO {role};"),
            });
        }
        if !self.reads_server_files() {
            let mut grant = Vec::new();
            if !self.read_server_files {
                grant.push(format!("GRANT pg_read_server_files TO {role};"));
            }
            if !self.execute_read_file {
                grant.push(format!(
                    "GRANT EXECUTE ON FUNCTION pg_catalog.pg_read_file(text) TO {role};"
                ));
            }
            out.push(MissingRight {
                figures: "host figures read through the connection: the device under the tables (IOPS, MB/s, await, queue depth), \
                          the bytes dbio's backends read from storage (/proc/<pid>/io), the server's RAM and CPU"
                    .into(),
                grant: grant.join(" "),
            });
        }
        if self.checkpoint == Some(false) {
            out.push(MissingRight {
                figures: "the CHECKPOINT that ends setup and follows a run with writes (the next run then may see checkpoint writes)".into(),
                grant: format!("GRANT pg_checkpoint TO {role};"),
            });
        }
        if !self.track_io_timing_on && self.set_track_io_timing != Some(true) {
            let grant = if self.set_track_io_timing.is_some() {
                format!("GRANT SET ON PARAMETER track_io_timing TO {role};")
            } else {
                "ALTER SYSTEM SET track_io_timing = on; SELECT pg_reload_conf();".to_string()
            };
            out.push(MissingRight {
                figures: "the database's read latency and measured I/O waits (track_io_timing is off and the role may not turn it on)".into(),
                grant,
            });
        }
        out
    }
}

/// The figures `client`'s role cannot have, for `dbio check` and every run.
pub async fn missing_rights(client: &Client, major: i32) -> Result<Vec<MissingRight>> {
    Ok(RoleRights::read(client, major).await?.missing())
}

/// The same list for `dbio check`: its own connection to `target`.
pub async fn missing_rights_of(target: &crate::conn::Target) -> Result<Vec<MissingRight>> {
    let client = target.connect("dbio-check").await?;
    let info = crate::server::server_info(&client).await?;
    missing_rights(&client, info.major()).await
}

/// A role name as an SQL identifier: bare when it is lower-case letters, digits and `_`,
/// else double-quoted.
fn quote_ident(name: &str) -> String {
    let bare = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if bare {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_monitor_role_misses_only_the_host_figures() {
        let r = RoleRights {
            role: "bench".into(),
            read_all_stats: true,
            read_all_settings: true,
            checkpoint: Some(true),
            track_io_timing_on: true,
            set_track_io_timing: Some(false),
            ..RoleRights::default()
        };
        let m = r.missing();
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(
            m[0].grant,
            "GRANT pg_read_server_files TO bench; GRANT EXECUTE ON FUNCTION pg_catalog.pg_read_file(text) TO bench;"
        );
        let none = RoleRights {
            role: "Bench User".into(),
            ..RoleRights::default()
        };
        let grants: Vec<String> = none.missing().into_iter().map(|m| m.grant).collect();
        assert!(grants.contains(&"GRANT pg_read_all_stats TO \"Bench User\";".to_string()));
        assert!(
            grants
                .iter()
                .any(|g| g.contains("ALTER SYSTEM SET track_io_timing"))
        );
        let su = RoleRights {
            superuser: true,
            ..RoleRights::default()
        };
        assert!(su.missing().is_empty());
    }
}
