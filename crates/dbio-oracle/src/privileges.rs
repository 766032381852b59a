//! What the admin user must be allowed to do, checked before a command changes anything: the
//! session's privileges (SESSION_PRIVS, with those of its enabled roles), its roles
//! (SESSION_ROLES), what it may grant on (WITH ADMIN OPTION) and the packages it may execute
//! (ALL_OBJECTS lists a package only to a user allowed to execute it). A missing one stops the
//! command before its first change, naming every GRANT that is missing, rather than failing
//! half-way with ORA-01031.

use std::collections::BTreeSet;

use crate::sql::ident;

/// What the session holds, as the dictionary says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Granted {
    /// SESSION_PRIVS.
    pub privileges: BTreeSet<String>,
    /// SESSION_ROLES.
    pub roles: BTreeSet<String>,
    /// System privileges held WITH ADMIN OPTION (USER_SYS_PRIVS, ROLE_SYS_PRIVS).
    pub admin_option: BTreeSet<String>,
    /// Executable packages, `OWNER.NAME`.
    pub packages: BTreeSet<String>,
    /// The admin's default tablespace (USER_USERS) and its quota there (USER_TS_QUOTAS:
    /// max bytes, -1 = unlimited, and bytes used; None = no quota row): dbio's catalog lives
    /// there.
    pub default_tablespace: Option<String>,
    pub quota: Option<(i64, i64)>,
}

/// Room for the catalog's rows: UNLIMITED TABLESPACE, an unlimited quota, or 1 MiB left.
fn catalog_room(g: &Granted) -> bool {
    g.privileges.contains("UNLIMITED TABLESPACE")
        || g.quota
            .is_some_and(|(max, used)| max == -1 || max.saturating_sub(used) >= 1 << 20)
}

/// The command the privileges are checked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Setup,
    Check,
    /// `statspack` / `awr`: the snapshots the run will take.
    Run {
        statspack: bool,
        awr: bool,
    },
    Teardown,
}

/// A missing privilege: what needs it, and the statement that gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    pub why: String,
    pub grant: String,
}

/// The privileges `command` needs that `granted` lacks, for the admin user `admin`.
pub fn missing(command: Command, granted: &Granted, admin: &str) -> Vec<Missing> {
    let user = ident(admin);
    let mut out = Vec::new();
    let has = |p: &str| granted.privileges.contains(p);
    let mut need = |ok: bool, why: &str, grant: String| {
        if !ok {
            out.push(Missing {
                why: why.to_string(),
                grant,
            });
        }
    };
    let sys = |p: &str| format!("GRANT {p} TO {user};");
    // Every command reads the dictionary and dbio's marks and statistics on other users'
    // tables (ALL_TAB_COMMENTS and ALL_TAB_STATISTICS show them only with a privilege).
    need(
        has("SELECT ANY DICTIONARY") || granted.roles.contains("SELECT_CATALOG_ROLE"),
        "the V$ views and DBA_ views dbio reads (tablespaces, users, parameters, the collector)",
        format!("GRANT SELECT_CATALOG_ROLE TO {user};"),
    );
    need(
        has("SELECT ANY TABLE"),
        "reading dbio's marks and statistics on the schema users' tables (and check's row counts)",
        sys("SELECT ANY TABLE"),
    );
    match command {
        Command::Setup => {
            for (p, why) in [
                ("CREATE USER", "creating the schema users"),
                ("DROP USER", "rebuilding an incomplete schema"),
                ("CREATE ANY TABLE", "creating CF1 in each schema"),
                ("CREATE ANY INDEX", "creating I_CF1 in each schema"),
                ("ALTER ANY TABLE", "MINIMIZE RECORDS_PER_BLOCK on CF1"),
                ("INSERT ANY TABLE", "loading CF1"),
                (
                    "DROP ANY TABLE",
                    "TRUNCATE of CF1's one-row template (one row per block)",
                ),
                ("COMMENT ANY TABLE", "writing dbio's mark on CF1"),
                (
                    "ANALYZE ANY",
                    "DBMS_STATS.GATHER_TABLE_STATS on the schemas",
                ),
                (
                    "CREATE TABLE",
                    "creating dbio's catalog (DBIO_DATA_SETS) in the admin's schema",
                ),
            ] {
                need(has(p), why, sys(p));
            }
            need(
                catalog_room(granted),
                "rows of dbio's catalog in the admin's default tablespace (ORA-01950 otherwise)",
                format!(
                    "ALTER USER {user} QUOTA 10M ON {};",
                    ident(granted.default_tablespace.as_deref().unwrap_or("USERS"))
                ),
            );
            need(
                has("GRANT ANY PRIVILEGE") || granted.admin_option.contains("CREATE SESSION"),
                "granting CREATE SESSION to each schema user",
                format!("GRANT CREATE SESSION TO {user} WITH ADMIN OPTION;"),
            );
            for pkg in ["SYS.DBMS_RANDOM", "SYS.DBMS_STATS"] {
                need(
                    granted.packages.contains(pkg),
                    "the load's random order and its optimizer statistics",
                    format!("GRANT EXECUTE ON {pkg} TO {user};"),
                );
            }
        }
        Command::Teardown => {
            need(
                has("DROP USER"),
                "dropping the schema users",
                sys("DROP USER"),
            );
            need(
                has("DROP ANY TABLE"),
                "dropping CF1 of a user who owns other objects too",
                sys("DROP ANY TABLE"),
            );
        }
        Command::Check => {}
        Command::Run { statspack, awr } => {
            if awr {
                need(
                    granted.packages.contains("SYS.DBMS_WORKLOAD_REPOSITORY"),
                    "AWR snapshots and the AWR report",
                    format!("GRANT EXECUTE ON SYS.DBMS_WORKLOAD_REPOSITORY TO {user};"),
                );
            }
            if statspack {
                need(
                    granted.packages.contains("PERFSTAT.STATSPACK"),
                    "Statspack snapshots",
                    format!("GRANT EXECUTE ON PERFSTAT.STATSPACK TO {user};"),
                );
            }
        }
    }
    out
}

/// The refusal, naming every missing GRANT, to be run as a DBA.
pub fn refusal(command: &str, admin: &str, missing: &[Missing]) -> String {
    let mut grants: Vec<&str> = missing.iter().map(|m| m.grant.as_str()).collect();
    grants.dedup();
    let whys: Vec<String> = missing
        .iter()
        .map(|m| format!("{} ({})", m.grant.trim_end_matches(';'), m.why))
        .collect();
    format!(
        "{command}: {admin} lacks {} privilege(s), so nothing was changed; as a DBA run:\n  {}\n(needed for: {})",
        missing.len(),
        grants.join("\n  "),
        whys.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    /// What the DBA role gives (SESSION_PRIVS of a user granted DBA), in part.
    fn dba() -> Granted {
        Granted {
            privileges: set(&[
                "CREATE SESSION",
                "SELECT ANY DICTIONARY",
                "SELECT ANY TABLE",
                "CREATE USER",
                "DROP USER",
                "CREATE ANY TABLE",
                "CREATE ANY INDEX",
                "ALTER ANY TABLE",
                "INSERT ANY TABLE",
                "DROP ANY TABLE",
                "COMMENT ANY TABLE",
                "ANALYZE ANY",
                "CREATE TABLE",
                "GRANT ANY PRIVILEGE",
            ]),
            roles: set(&["DBA", "SELECT_CATALOG_ROLE"]),
            admin_option: BTreeSet::new(),
            default_tablespace: Some("SYSTEM".into()),
            quota: Some((-1, 0)),
            packages: set(&[
                "SYS.DBMS_RANDOM",
                "SYS.DBMS_STATS",
                "SYS.DBMS_WORKLOAD_REPOSITORY",
            ]),
        }
    }

    #[test]
    fn a_dba_may_do_everything_but_statspack_when_perfstat_granted_nothing() {
        for c in [
            Command::Setup,
            Command::Check,
            Command::Teardown,
            Command::Run {
                statspack: false,
                awr: true,
            },
        ] {
            assert!(missing(c, &dba(), "SYSTEM").is_empty(), "{c:?}");
        }
        let m = missing(
            Command::Run {
                statspack: true,
                awr: false,
            },
            &dba(),
            "SYSTEM",
        );
        assert_eq!(m.len(), 1);
        assert_eq!(
            m[0].grant,
            "GRANT EXECUTE ON PERFSTAT.STATSPACK TO \"SYSTEM\";"
        );
    }

    #[test]
    fn every_missing_grant_is_named_before_anything_changes() {
        let mut g = dba();
        g.privileges.remove("COMMENT ANY TABLE");
        g.privileges.remove("GRANT ANY PRIVILEGE");
        g.privileges.remove("SELECT ANY DICTIONARY");
        g.roles.remove("SELECT_CATALOG_ROLE");
        g.packages.remove("SYS.DBMS_RANDOM");
        let m = missing(Command::Setup, &g, "bench");
        let grants: Vec<&str> = m.iter().map(|m| m.grant.as_str()).collect();
        assert_eq!(
            grants,
            [
                "GRANT SELECT_CATALOG_ROLE TO \"BENCH\";",
                "GRANT COMMENT ANY TABLE TO \"BENCH\";",
                "GRANT CREATE SESSION TO \"BENCH\" WITH ADMIN OPTION;",
                "GRANT EXECUTE ON SYS.DBMS_RANDOM TO \"BENCH\";",
            ]
        );
        let text = refusal("setup", "BENCH", &m);
        assert!(
            text.starts_with("setup: BENCH lacks 4 privilege(s), so nothing was changed")
                && text.contains("\n  GRANT COMMENT ANY TABLE TO \"BENCH\";")
                && text.contains("writing dbio's mark on CF1"),
            "{text}"
        );
        // CREATE SESSION WITH ADMIN OPTION is as good as GRANT ANY PRIVILEGE.
        g.admin_option.insert("CREATE SESSION".into());
        assert!(
            !missing(Command::Setup, &g, "bench")
                .iter()
                .any(|m| m.grant.contains("WITH ADMIN OPTION"))
        );
        // Without room for the catalog's rows in its default tablespace, the quota is named.
        g.quota = Some((1 << 20, 1 << 20));
        let q = missing(Command::Setup, &g, "bench");
        assert!(
            q.iter()
                .any(|m| m.grant == "ALTER USER \"BENCH\" QUOTA 10M ON \"SYSTEM\";"),
            "{q:?}"
        );
        g.privileges.insert("UNLIMITED TABLESPACE".into());
        assert!(
            !missing(Command::Setup, &g, "bench")
                .iter()
                .any(|m| m.grant.contains("QUOTA"))
        );
        // Teardown needs no CREATE privileges.
        let t = missing(
            Command::Teardown,
            &Granted {
                privileges: set(&["SELECT ANY TABLE", "SELECT ANY DICTIONARY", "DROP USER"]),
                ..Granted::default()
            },
            "x",
        );
        assert_eq!(t.len(), 1, "{t:?}");
        assert!(t[0].grant.contains("DROP ANY TABLE"));
    }
}
