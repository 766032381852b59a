//! The operational checks a DBA would make before a load or a run, as rules on the rows the
//! dictionary returns, so each is unit-tested without a server: room for the load's redo in
//! the fast recovery area (ARCHIVELOG), for its sort in TEMP and for its blocks in the
//! tablespace; PROCESSES and SESSIONS against the sessions a run opens; the schema users'
//! account status; what a failed logon means; and the libaio package the Oracle client needs.

use dbio_core::dataset::SchemaCheck;
use dbio_core::units::format_bytes;

use crate::OracleError;
use crate::sql::{SORT_BYTES_PER_ROW, ident};

/// Free space of one tablespace: free bytes now and what its files may still grow by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Space {
    pub tablespace: String,
    pub free: u64,
    pub growth: u64,
}

impl Space {
    fn room(&self) -> u64 {
        self.free.saturating_add(self.growth)
    }
}

/// V$RECOVERY_FILE_DEST (bytes); `limit` 0 = no fast recovery area.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryArea {
    pub limit: u64,
    pub used: u64,
    pub reclaimable: u64,
}

/// What the server says about the room a load needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadFacts {
    /// V$DATABASE.LOG_MODE = ARCHIVELOG.
    pub archivelog: bool,
    /// V$DATABASE.FORCE_LOGGING = YES.
    pub force_logging: bool,
    pub recovery_area: RecoveryArea,
    /// The admin's temporary tablespace (the load's sort runs in the admin's session).
    pub temp: Option<Space>,
    /// The data set's tablespace.
    pub data: Option<Space>,
}

/// The room a load of `schemas` schemas of `rows` rows of `block_size` bytes needs, `parallel`
/// at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadNeeds {
    /// Table and index blocks of the schemas to load.
    pub data_bytes: u64,
    /// Redo of a logged direct-path load: every loaded block, and the index build.
    pub redo_bytes: u64,
    /// The key sorts running at once.
    pub temp_bytes: u64,
}

/// Bytes per row of I_CF1 (a NUMBER key, its rowid and the entry's overhead, PCTFREE 0).
const INDEX_BYTES_PER_ROW: u64 = 20;

pub fn load_needs(schemas: u32, rows: u64, block_size: u64, parallel: u32) -> LoadNeeds {
    let per_schema = rows
        .saturating_mul(block_size)
        .saturating_add(rows.saturating_mul(INDEX_BYTES_PER_ROW));
    let schemas = u64::from(schemas);
    LoadNeeds {
        data_bytes: per_schema.saturating_mul(schemas),
        redo_bytes: per_schema.saturating_mul(schemas),
        temp_bytes: rows
            .saturating_mul(SORT_BYTES_PER_ROW)
            .saturating_mul(u64::from(parallel.clamp(1, schemas.max(1) as u32))),
    }
}

/// What stops a load (`Err`, before anything is created) and what it should know (warnings).
pub fn load_space(needs: &LoadNeeds, f: &LoadFacts) -> Result<Vec<String>, OracleError> {
    let mut refuse = Vec::new();
    let mut warn = Vec::new();
    let fmt = format_bytes;
    if f.archivelog {
        let fra = f.recovery_area;
        if fra.limit > 0 {
            let free = fra
                .limit
                .saturating_sub(fra.used)
                .saturating_add(fra.reclaimable);
            if needs.redo_bytes > free {
                refuse.push(format!(
                    "the database is in ARCHIVELOG mode, so the load's redo (about {}: every block of a logged \
                     direct-path load) is archived into the fast recovery area, which has {} free (V$RECOVERY_FILE_DEST: \
                     limit {}, used {}, reclaimable {}); when it fills, the database stops (ORA-00257). Raise \
                     db_recovery_file_dest_size, back up and delete archived logs with RMAN, or load fewer or smaller schemas",
                    fmt(needs.redo_bytes),
                    fmt(free),
                    fmt(fra.limit),
                    fmt(fra.used),
                    fmt(fra.reclaimable)
                ));
            } else if needs.redo_bytes > free / 2 {
                warn.push(format!(
                    "the load's redo (about {}) will take more than half of the fast recovery area's {} free \
                     (ARCHIVELOG mode): back up and delete archived logs afterwards",
                    fmt(needs.redo_bytes),
                    fmt(free)
                ));
            }
        } else {
            warn.push(format!(
                "the database is in ARCHIVELOG mode without a fast recovery area: the load writes about {} of redo \
                 into the archive destinations (LOG_ARCHIVE_DEST_n), whose free space dbio cannot see; make sure it fits",
                fmt(needs.redo_bytes)
            ));
        }
    } else if f.force_logging {
        warn.push(format!(
            "FORCE LOGGING is on: the load writes about {} of redo (in NOARCHIVELOG mode it is not archived)",
            fmt(needs.redo_bytes)
        ));
    }
    if let Some(t) = &f.temp
        && needs.temp_bytes > t.room()
    {
        refuse.push(format!(
            "the load sorts its keys in the admin's temporary tablespace {}: about {} at data.parallel schemas at a \
             time, and {} has {} free and may grow by {} (DBA_TEMP_FREE_SPACE, DBA_TEMP_FILES): add a tempfile \
             (ALTER TABLESPACE {} ADD TEMPFILE ... SIZE ...) or lower data.parallel",
            t.tablespace,
            fmt(needs.temp_bytes),
            t.tablespace,
            fmt(t.free),
            fmt(t.growth),
            ident(&t.tablespace)
        ));
    }
    if let Some(d) = &f.data
        && needs.data_bytes > d.room()
    {
        refuse.push(format!(
            "the schemas to load need about {} in tablespace {}, which has {} free and may grow by {} \
             (DBA_FREE_SPACE, DBA_DATA_FILES): add or resize a datafile, or lower data.scale or data.schemas",
            fmt(needs.data_bytes),
            d.tablespace,
            fmt(d.free),
            fmt(d.growth)
        ));
    }
    if refuse.is_empty() {
        Ok(warn)
    } else {
        Err(OracleError::Usage(format!(
            "setup refused before creating anything:\n  {}",
            refuse.join("\n  ")
        )))
    }
}

/// One GV$RESOURCE_LIMIT row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceLimit {
    pub inst_id: u32,
    /// `processes` or `sessions`.
    pub resource: String,
    pub used: u64,
    /// None: UNLIMITED.
    pub limit: Option<u64>,
}

impl ResourceLimit {
    /// LIMIT_VALUE as GV$RESOURCE_LIMIT prints it (a number, or UNLIMITED).
    pub fn parse_limit(text: &str) -> Option<u64> {
        text.trim().parse().ok()
    }
}

/// Whether the instances have room for `needed` more connections (each a dedicated server
/// process and a session): the free room of every instance summed, per resource. `what` says
/// what opens them (`the run's 8 sessions and dbio's 3 own connections`).
pub fn room_for(limits: &[ResourceLimit], needed: u32, what: &str) -> Result<(), OracleError> {
    let mut short = Vec::new();
    for resource in ["processes", "sessions"] {
        let rows: Vec<&ResourceLimit> = limits.iter().filter(|r| r.resource == resource).collect();
        if rows.is_empty() || rows.iter().any(|r| r.limit.is_none()) {
            continue;
        }
        let free: u64 = rows
            .iter()
            .map(|r| r.limit.unwrap_or(0).saturating_sub(r.used))
            .sum();
        if free < u64::from(needed) {
            let each: Vec<String> = rows
                .iter()
                .map(|r| {
                    format!(
                        "instance {}: {} of {} in use",
                        r.inst_id,
                        r.used,
                        r.limit.unwrap_or(0)
                    )
                })
                .collect();
            short.push(format!(
                "{resource} has room for {free} more ({}), {what} need {needed}: raise it (ALTER SYSTEM SET {resource} = ... \
                 SCOPE = SPFILE, then restart the instance) or use fewer sessions",
                each.join("; ")
            ));
        }
    }
    if short.is_empty() {
        Ok(())
    } else {
        Err(OracleError::Usage(format!(
            "the database would refuse connections part-way (ORA-00020 / ORA-00018), so nothing was opened:\n  {}",
            short.join("\n  ")
        )))
    }
}

/// DBA_USERS.ACCOUNT_STATUS of a schema user: Err when no logon can succeed, with the fix.
pub fn account(user: &str, status: &str) -> Result<Option<String>, String> {
    let s = status.trim().to_ascii_uppercase();
    if s == "OPEN" {
        return Ok(None);
    }
    if s.contains("GRACE") && !s.contains("LOCKED") {
        return Ok(Some(format!(
            "{user}'s password is in its grace period ({status}): it expires soon; set a new one with \
             ALTER USER {} IDENTIFIED BY ... (and DBIO_ORACLE_USER_PASSWORD), or rebuild with `dbio setup --force`",
            ident(user)
        )));
    }
    let mut fix = Vec::new();
    if s.contains("LOCKED") {
        fix.push(format!("ALTER USER {} ACCOUNT UNLOCK;", ident(user)));
    }
    if s.contains("EXPIRED") {
        fix.push(format!(
            "ALTER USER {} IDENTIFIED BY <its password>; (the password dbio generated is in the admin's DBIO_DATA_SETS)",
            ident(user)
        ));
    }
    if fix.is_empty() {
        fix.push("check the account with a DBA".into());
    }
    Err(format!(
        "{user} cannot log on: its account is {status} (DBA_USERS.ACCOUNT_STATUS); as a DBA run {}",
        fix.join(" then ")
    ))
}

/// What a failed logon of a schema user means. The probe logs on once before any session, so
/// a wrong password costs one failed attempt, never FAILED_LOGIN_ATTEMPTS of them (10 by
/// default, then ORA-28000 locks the account for everyone).
pub fn logon_failure(user: &str, password_source: &str, message: &str) -> OracleError {
    let m = if message.contains("ORA-01017") {
        format!(
            "{user} could not log on: the password dbio used ({password_source}) is wrong (ORA-01017). Only this one \
             logon was tried, so the account is not locked by dbio; set DBIO_ORACLE_USER_PASSWORD to the right one, or \
             rebuild the data set with `dbio setup --force`"
        )
    } else if message.contains("ORA-28000") {
        format!(
            "{user}'s account is locked (ORA-28000, e.g. after too many failed logons): as a DBA run ALTER USER {} \
             ACCOUNT UNLOCK",
            ident(user)
        )
    } else if message.contains("ORA-28001") {
        format!(
            "{user}'s password has expired (ORA-28001): as a DBA run ALTER USER {} IDENTIFIED BY <its password>, or \
             rebuild with `dbio setup --force`",
            ident(user)
        )
    } else {
        return OracleError::connect_failed(&format!("logging on as {user}"), message.to_string());
    };
    OracleError::Usage(format!("{m}. Details: {message}"))
}

/// What to install for libaio, which Oracle Instant Client loads (libaio.so.1): on Ubuntu
/// 24.04+ and Debian 13+ the package is libaio1t64 and the library libaio.so.1t64, so a link
/// is needed too. `os_release` is /etc/os-release.
pub fn libaio_hint(os_release: Option<&str>) -> String {
    let field = |key: &str| -> Option<String> {
        os_release?.lines().find_map(|l| {
            l.strip_prefix(key)
                .and_then(|v| v.strip_prefix('='))
                .map(|v| v.trim().trim_matches('"').to_ascii_lowercase())
        })
    };
    let id = field("ID").unwrap_or_default();
    let like = field("ID_LIKE").unwrap_or_default();
    let version = field("VERSION_ID").unwrap_or_default();
    let codename = field("VERSION_CODENAME").unwrap_or_default();
    let major_minor = |v: &str| -> (u32, u32) {
        let mut it = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        (it.next().unwrap_or(0), it.next().unwrap_or(0))
    };
    let t64 = "apt-get install libaio1t64, then ln -s /usr/lib/x86_64-linux-gnu/libaio.so.1t64 \
               /usr/lib/x86_64-linux-gnu/libaio.so.1 (the package was renamed; Instant Client looks for libaio.so.1)";
    match id.as_str() {
        "ubuntu" if major_minor(&version) >= (24, 4) => format!("on Ubuntu {version}: {t64}"),
        "ubuntu" => format!("on Ubuntu {version}: apt-get install libaio1"),
        "debian"
            if major_minor(&version).0 >= 13
                || (version.is_empty()
                    && ["trixie", "forky", "sid"].contains(&codename.as_str())) =>
        {
            format!(
                "on Debian {}: {t64}",
                if version.is_empty() {
                    &codename
                } else {
                    &version
                }
            )
        }
        "debian" => format!("on Debian {version}: apt-get install libaio1"),
        _ if like.contains("rhel")
            || like.contains("fedora")
            || ["ol", "rhel", "fedora", "centos", "rocky", "almalinux"].contains(&id.as_str()) =>
        {
            "dnf install libaio".into()
        }
        _ if like.contains("suse") || id.contains("suse") => "zypper install libaio1".into(),
        _ => format!(
            "install libaio: apt-get install libaio1 (on Ubuntu 24.04+ and Debian 13+: {t64}), or dnf install libaio"
        ),
    }
}

/// One schema's table as counted by a full scan: rows, distinct blocks (DBMS_ROWID) and
/// the lowest and highest key (None on an empty table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowCounts {
    pub rows: i64,
    pub blocks: i64,
    pub lo: Option<i64>,
    pub hi: Option<i64>,
}

/// `check`'s verdict on `user`'s table against `scale_blocks` keys: one row per block for
/// every key 1..=scale_blocks.
pub fn judge_rows(user: &str, scale_blocks: u64, n: RowCounts) -> SchemaCheck {
    let want = scale_blocks as i64;
    let mut c = SchemaCheck {
        schema: user.to_string(),
        facts: Vec::new(),
        problems: Vec::new(),
    };
    if n.rows == want {
        c.facts.push(format!("rows {}/{want}", n.rows));
    } else {
        c.problems.push(format!("rows {}, expected {want}", n.rows));
    }
    if n.blocks == n.rows {
        c.facts
            .push(format!("blocks {} (one row per block)", n.blocks));
    } else {
        c.problems.push(format!(
            "{} rows in {} blocks: not one row per block",
            n.rows, n.blocks
        ));
    }
    match (n.lo, n.hi) {
        (Some(1), Some(hi)) if hi == want => c.facts.push(format!("keys 1..{want}")),
        (lo, hi) => c.problems.push(format!(
            "keys {}..{}, expected 1..{want}",
            lo.unwrap_or(0),
            hi.unwrap_or(0)
        )),
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_passes_check_only_with_one_row_per_block_for_every_key() {
        let ok = judge_rows(
            "USER1",
            4096,
            RowCounts {
                rows: 4096,
                blocks: 4096,
                lo: Some(1),
                hi: Some(4096),
            },
        );
        assert!(ok.ok(), "{:?}", ok.problems);
        assert_eq!(
            ok.facts,
            [
                "rows 4096/4096",
                "blocks 4096 (one row per block)",
                "keys 1..4096"
            ]
        );
        // Loaded for 8 kB blocks into a 16 kB tablespace's plan: twice the rows.
        let wrong = judge_rows(
            "USER2",
            4096,
            RowCounts {
                rows: 8192,
                blocks: 4096,
                lo: Some(1),
                hi: Some(8192),
            },
        );
        assert_eq!(
            wrong.problems,
            [
                "rows 8192, expected 4096",
                "8192 rows in 4096 blocks: not one row per block",
                "keys 1..8192, expected 1..4096"
            ]
        );
        let empty = judge_rows(
            "USER3",
            64,
            RowCounts {
                rows: 0,
                blocks: 0,
                lo: None,
                hi: None,
            },
        );
        assert_eq!(
            empty.problems,
            ["rows 0, expected 64", "keys 0..0, expected 1..64"]
        );
    }

    const GIB: u64 = 1 << 30;

    fn facts(archivelog: bool, fra_free: u64, temp: u64, data: u64) -> LoadFacts {
        LoadFacts {
            archivelog,
            force_logging: false,
            recovery_area: RecoveryArea {
                limit: 100 * GIB,
                used: 100 * GIB - fra_free,
                reclaimable: 0,
            },
            temp: Some(Space {
                tablespace: "TEMP".into(),
                free: temp,
                growth: 0,
            }),
            data: Some(Space {
                tablespace: "SLOB".into(),
                free: data,
                growth: 0,
            }),
        }
    }

    #[test]
    fn the_loads_needs_follow_the_plan() {
        // 4 schemas of 1,000,000 8 kB blocks, 2 at a time.
        let n = load_needs(4, 1_000_000, 8192, 2);
        assert_eq!(n.data_bytes, 4 * (8_192_000_000 + 20_000_000));
        assert_eq!(n.redo_bytes, n.data_bytes);
        assert_eq!(n.temp_bytes, 2 * 64_000_000);
        // data.parallel above the schema count sorts no more at once.
        assert_eq!(load_needs(1, 1000, 8192, 8).temp_bytes, 64_000);
    }

    // Regression: the LOGGING direct-path load filled the FRA in ARCHIVELOG mode unchecked.
    #[test]
    fn archivelog_without_room_in_the_fra_is_refused() {
        let n = load_needs(4, 1_000_000, 8192, 2); // ~30.6 GiB of redo
        let e = load_space(&n, &facts(true, 20 * GIB, 100 * GIB, 100 * GIB)).unwrap_err();
        assert_eq!(e.kind(), dbio_core::ErrorKind::Usage);
        let m = e.to_string();
        assert!(
            m.contains("ARCHIVELOG")
                && m.contains("ORA-00257")
                && m.contains("db_recovery_file_dest_size")
                && m.contains("20.0 GiB free"),
            "{m}"
        );
        // Reclaimable space counts; half-full draws a warning only.
        let mut f = facts(true, 20 * GIB, 100 * GIB, 100 * GIB);
        f.recovery_area.reclaimable = 30 * GIB;
        let w = load_space(&n, &f).unwrap();
        assert!(w[0].contains("more than half"), "{w:?}");
        // NOARCHIVELOG: nothing archived, no FRA check.
        assert!(
            load_space(&n, &facts(false, 0, 100 * GIB, 100 * GIB))
                .unwrap()
                .is_empty()
        );
        // ARCHIVELOG with archive destinations dbio cannot see: a warning with the estimate.
        let mut no_fra = facts(true, 0, 100 * GIB, 100 * GIB);
        no_fra.recovery_area.limit = 0;
        let w = load_space(&n, &no_fra).unwrap();
        assert!(w[0].contains("LOG_ARCHIVE_DEST_n"), "{w:?}");
    }

    #[test]
    fn temp_and_tablespace_room_are_checked() {
        let n = load_needs(2, 10_000_000, 8192, 2); // sorts 2 x 640 MB
        let e = load_space(&n, &facts(false, 0, GIB, 1000 * GIB))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("temporary tablespace TEMP")
                && e.contains("ADD TEMPFILE")
                && e.contains("data.parallel"),
            "{e}"
        );
        let mut grows = facts(false, 0, GIB, 1000 * GIB);
        if let Some(t) = grows.temp.as_mut() {
            t.growth = 4 * GIB;
        }
        assert!(load_space(&n, &grows).is_ok(), "autoextend counts");
        let e = load_space(&n, &facts(false, 0, 100 * GIB, 10 * GIB))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("tablespace SLOB") && e.contains("datafile"),
            "{e}"
        );
    }

    fn limit(inst: u32, resource: &str, used: u64, limit: &str) -> ResourceLimit {
        ResourceLimit {
            inst_id: inst,
            resource: resource.into(),
            used,
            limit: ResourceLimit::parse_limit(limit),
        }
    }

    // Regression: sessions were not checked against PROCESSES/SESSIONS and failed part-way.
    #[test]
    fn processes_and_sessions_must_have_room() {
        let one = [
            limit(1, "processes", 280, "  300"),
            limit(1, "sessions", 300, "472"),
        ];
        assert!(room_for(&one, 20, "x").is_ok());
        let e = room_for(
            &one,
            24,
            "the run's 21 sessions and dbio's 3 own connections",
        )
        .unwrap_err();
        assert_eq!(e.kind(), dbio_core::ErrorKind::Usage);
        let m = e.to_string();
        assert!(
            m.contains("processes has room for 20 more (instance 1: 280 of 300 in use)")
                && m.contains("need 24")
                && m.contains("ALTER SYSTEM SET processes"),
            "{m}"
        );
        assert!(!m.contains("sessions has room"), "{m}");
        // RAC: the instances' room adds up; UNLIMITED is no limit.
        let rac = [
            limit(1, "processes", 290, "300"),
            limit(2, "processes", 290, "300"),
        ];
        assert!(room_for(&rac, 20, "x").is_ok());
        assert!(room_for(&rac, 21, "x").is_err());
        assert!(room_for(&[limit(1, "sessions", 10, "UNLIMITED")], 5000, "x").is_ok());
    }

    #[test]
    fn account_status_decides_before_any_logon() {
        assert_eq!(account("USER1", "OPEN"), Ok(None));
        assert!(
            account("USER1", "EXPIRED(GRACE)")
                .unwrap()
                .unwrap()
                .contains("grace")
        );
        let e = account("USER1", "LOCKED(TIMED)").unwrap_err();
        assert!(e.contains("ALTER USER \"USER1\" ACCOUNT UNLOCK"), "{e}");
        let e = account("USER1", "EXPIRED & LOCKED").unwrap_err();
        assert!(e.contains("UNLOCK") && e.contains("IDENTIFIED BY"), "{e}");
    }

    // Regression: a wrong password made every session log on at once; after 10 failures the
    // accounts locked (ORA-28000).
    #[test]
    fn a_wrong_password_is_one_failed_logon_and_a_clear_error() {
        let e = logon_failure(
            "USER1",
            "generated at setup, from SYSTEM.DBIO_DATA_SETS",
            "ORA-01017: invalid username/password; logon denied",
        );
        assert_eq!(e.kind(), dbio_core::ErrorKind::Usage);
        let m = e.to_string();
        assert!(
            m.contains("Only this one logon was tried") && m.contains("DBIO_ORACLE_USER_PASSWORD"),
            "{m}"
        );
        assert!(
            logon_failure("USER1", "x", "ORA-28000: the account is locked")
                .to_string()
                .contains("ACCOUNT UNLOCK")
        );
        assert_eq!(
            logon_failure("USER1", "x", "ORA-12541: TNS:no listener").kind(),
            dbio_core::ErrorKind::Unreachable,
            "unreachable"
        );
    }

    // Regression: the hint said libaio1, which does not exist on Ubuntu 24.04 and Debian 13.
    #[test]
    fn the_libaio_hint_knows_the_t64_rename() {
        let noble = "PRETTY_NAME=\"Ubuntu 24.04.1 LTS\"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID=\"24.04\"\nVERSION_CODENAME=noble\n";
        let h = libaio_hint(Some(noble));
        assert!(
            h.contains("libaio1t64") && h.contains("libaio.so.1t64") && h.contains("ln -s"),
            "{h}"
        );
        let jammy = "ID=ubuntu\nVERSION_ID=\"22.04\"\n";
        assert_eq!(
            libaio_hint(Some(jammy)),
            "on Ubuntu 22.04: apt-get install libaio1"
        );
        assert!(libaio_hint(Some("ID=debian\nVERSION_ID=\"13\"\n")).contains("libaio1t64"));
        assert!(libaio_hint(Some("ID=debian\nVERSION_CODENAME=trixie\n")).contains("libaio1t64"));
        assert_eq!(
            libaio_hint(Some("ID=debian\nVERSION_ID=\"12\"\n")),
            "on Debian 12: apt-get install libaio1"
        );
        assert_eq!(
            libaio_hint(Some("ID=\"ol\"\nID_LIKE=\"fedora\"\nVERSION_ID=\"9.4\"\n")),
            "dnf install libaio"
        );
        let unknown = libaio_hint(None);
        assert!(
            unknown.contains("libaio1") && unknown.contains("libaio1t64"),
            "{unknown}"
        );
    }
}
