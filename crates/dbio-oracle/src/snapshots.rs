//! Which repository takes snapshots around the window: AWR only where the Diagnostics Pack may
//! be used, else Statspack (SLOB's default since 2.4: "AWR needs a paid pack"), chosen from the
//! edition and CONTROL_MANAGEMENT_PACK_ACCESS before the run starts. The figures dbio prints
//! come from the V$ views either way; the repository adds its own snapshots and figures beside
//! result.json.
//!
//! Oracle Database Reference, CONTROL_MANAGEMENT_PACK_ACCESS: NONE | DIAGNOSTIC |
//! DIAGNOSTIC+TUNING; default DIAGNOSTIC+TUNING on Enterprise Edition (and Oracle Database
//! Free), NONE on all other editions. Oracle's licensing: the management packs can be bought
//! only with Enterprise Edition.

use dbio_core::config::Snapshots;

/// The edition, from the server's banner ("Oracle Database 19c Enterprise Edition Release
/// 19.0.0.0.0 - Production").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edition {
    Enterprise,
    Standard,
    Express,
    Personal,
    Free,
    Unknown,
}

impl Edition {
    pub fn from_banner(banner: &str) -> Edition {
        let b = banner.to_ascii_lowercase();
        if b.contains("enterprise edition") {
            Edition::Enterprise
        } else if b.contains("standard edition") {
            Edition::Standard
        } else if b.contains("express edition") {
            Edition::Express
        } else if b.contains("personal") {
            Edition::Personal
        } else if b.contains(" free") {
            Edition::Free
        } else {
            Edition::Unknown
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Edition::Enterprise => "Enterprise Edition",
            Edition::Standard => "Standard Edition",
            Edition::Express => "Express Edition",
            Edition::Personal => "Personal Edition",
            Edition::Free => "Oracle Database Free",
            Edition::Unknown => "an edition dbio does not know",
        }
    }
}

/// What the server says about AWR and Statspack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackFacts {
    pub edition: Edition,
    /// CONTROL_MANAGEMENT_PACK_ACCESS (None: the parameter could not be read).
    pub pack_access: Option<String>,
    /// PERFSTAT.STATSPACK is installed and the admin may execute it.
    pub statspack: bool,
    /// The admin may execute DBMS_WORKLOAD_REPOSITORY.
    pub awr_package: bool,
}

/// A repository dbio snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repository {
    Awr,
    Statspack,
}

/// The decision, and what the user should know of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub repository: Option<Repository>,
    /// Why what was asked for is not what is taken (a warning in the result).
    pub warnings: Vec<String>,
    /// What `auto` chose (a note).
    pub notes: Vec<String>,
}

/// Why AWR may not be used here, or None when it may.
pub fn awr_refusal(facts: &PackFacts) -> Option<String> {
    if matches!(
        facts.edition,
        Edition::Standard | Edition::Express | Edition::Personal
    ) {
        return Some(format!(
            "AWR is part of the Diagnostics Pack, which can be licensed only with Enterprise Edition; this is {} \
             (CONTROL_MANAGEMENT_PACK_ACCESS = {})",
            facts.edition.name(),
            facts.pack_access.as_deref().unwrap_or("unreadable")
        ));
    }
    match facts.pack_access.as_deref() {
        Some(v) if v.to_ascii_uppercase().contains("DIAGNOSTIC") => {}
        Some(v) => {
            return Some(format!(
                "CONTROL_MANAGEMENT_PACK_ACCESS = {v}: the Diagnostics Pack (AWR) is not enabled on this database; \
                 a DBA enables it, where it is licensed, with ALTER SYSTEM SET control_management_pack_access = 'DIAGNOSTIC+TUNING'"
            ));
        }
        None => {
            return Some(
                "CONTROL_MANAGEMENT_PACK_ACCESS could not be read (grant SELECT_CATALOG_ROLE), so dbio cannot tell \
                 whether the Diagnostics Pack (AWR) is enabled"
                    .into(),
            );
        }
    }
    (!facts.awr_package).then(|| {
        "the admin user may not execute DBMS_WORKLOAD_REPOSITORY (GRANT EXECUTE ON SYS.DBMS_WORKLOAD_REPOSITORY)"
            .to_string()
    })
}

const STATSPACK_INSTALL: &str = "install it as SYSDBA with @?/rdbms/admin/spcreate.sql and GRANT EXECUTE ON PERFSTAT.STATSPACK to the admin user";

/// The repository to snapshot, from what was asked (collector.snapshots) and the server.
pub fn choose(asked: Snapshots, facts: &PackFacts) -> Choice {
    let mut c = Choice {
        repository: None,
        warnings: Vec::new(),
        notes: Vec::new(),
    };
    let awr_no = awr_refusal(facts);
    match asked {
        Snapshots::None => {}
        Snapshots::Awr => match (awr_no, facts.statspack) {
            (None, _) => c.repository = Some(Repository::Awr),
            (Some(why), true) => {
                c.warnings.push(format!(
                    "AWR refused: {why}; dbio takes Statspack snapshots instead (statspack.txt), as SLOB does by default"
                ));
                c.repository = Some(Repository::Statspack);
            }
            (Some(why), false) => c.warnings.push(format!(
                "AWR refused: {why}; Statspack is not installed either ({STATSPACK_INSTALL}), so no repository \
                 snapshots were taken; the figures come from the V$ views"
            )),
        },
        Snapshots::Statspack if facts.statspack => c.repository = Some(Repository::Statspack),
        Snapshots::Statspack => c.warnings.push(format!(
            "collector.snapshots: statspack, but PERFSTAT.STATSPACK is not installed or not executable by the admin user \
             ({STATSPACK_INSTALL}); no repository snapshots were taken"
        )),
        Snapshots::Auto => match (awr_no, facts.statspack) {
            (None, _) => {
                c.notes.push(
                    "collector.snapshots: auto took AWR (the Diagnostics Pack is enabled)".into(),
                );
                c.repository = Some(Repository::Awr);
            }
            (Some(why), true) => {
                c.notes
                    .push(format!("collector.snapshots: auto took Statspack ({why})"));
                c.repository = Some(Repository::Statspack);
            }
            (Some(why), false) => c.notes.push(format!(
                "collector.snapshots: auto took none ({why}; Statspack is not installed: {STATSPACK_INSTALL})"
            )),
        },
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(edition: Edition, access: &str, statspack: bool) -> PackFacts {
        PackFacts {
            edition,
            pack_access: Some(access.into()),
            statspack,
            awr_package: true,
        }
    }

    #[test]
    fn the_edition_comes_from_the_banner() {
        for (banner, e) in [
            (
                "Oracle Database 19c Enterprise Edition Release 19.0.0.0.0 - Production",
                Edition::Enterprise,
            ),
            (
                "Oracle Database 19c Standard Edition 2 Release 19.0.0.0.0 - Production",
                Edition::Standard,
            ),
            (
                "Oracle Database 21c Express Edition Release 21.0.0.0.0 - Production",
                Edition::Express,
            ),
            (
                "Oracle Database 23ai Free Release 23.0.0.0.0 - Develop, Learn, and Run for Free",
                Edition::Free,
            ),
            (
                "Oracle Database 11g Release 11.2.0.4.0 - 64bit Production",
                Edition::Unknown,
            ),
        ] {
            assert_eq!(Edition::from_banner(banner), e, "{banner}");
        }
    }

    // Regression: collector.awr never checked the edition or CONTROL_MANAGEMENT_PACK_ACCESS,
    // and Standard Edition got an empty AWR report without a warning.
    #[test]
    fn standard_edition_gets_statspack_and_the_reason() {
        let se = facts(Edition::Standard, "NONE", true);
        let c = choose(Snapshots::Awr, &se);
        assert_eq!(c.repository, Some(Repository::Statspack));
        let w = c.warnings.join(" ");
        assert!(
            w.contains("AWR refused")
                && w.contains("only with Enterprise Edition")
                && w.contains("Standard Edition")
                && w.contains("CONTROL_MANAGEMENT_PACK_ACCESS = NONE")
                && w.contains("Statspack snapshots instead"),
            "{w}"
        );
        // Even with the parameter set, Standard Edition cannot license the pack.
        let se_set = facts(Edition::Standard, "DIAGNOSTIC+TUNING", false);
        let c = choose(Snapshots::Awr, &se_set);
        assert_eq!(c.repository, None);
        assert!(c.warnings[0].contains("spcreate.sql"), "{:?}", c.warnings);
    }

    #[test]
    fn enterprise_edition_with_the_pack_off_is_refused_awr_by_the_parameter() {
        let ee_none = facts(Edition::Enterprise, "NONE", true);
        let c = choose(Snapshots::Awr, &ee_none);
        assert_eq!(c.repository, Some(Repository::Statspack));
        assert!(
            c.warnings[0].contains("CONTROL_MANAGEMENT_PACK_ACCESS = NONE")
                && c.warnings[0].contains("DIAGNOSTIC+TUNING"),
            "{:?}",
            c.warnings
        );
        for access in ["DIAGNOSTIC", "DIAGNOSTIC+TUNING", "diagnostic+tuning"] {
            let c = choose(Snapshots::Awr, &facts(Edition::Enterprise, access, false));
            assert_eq!(c.repository, Some(Repository::Awr), "{access}");
            assert!(c.warnings.is_empty());
        }
        let free = choose(
            Snapshots::Awr,
            &facts(Edition::Free, "DIAGNOSTIC+TUNING", false),
        );
        assert_eq!(free.repository, Some(Repository::Awr));
        let unreadable = PackFacts {
            pack_access: None,
            ..facts(Edition::Enterprise, "", true)
        };
        assert!(
            awr_refusal(&unreadable)
                .unwrap()
                .contains("could not be read")
        );
        let no_exec = PackFacts {
            awr_package: false,
            ..facts(Edition::Enterprise, "DIAGNOSTIC", true)
        };
        assert!(
            awr_refusal(&no_exec)
                .unwrap()
                .contains("DBMS_WORKLOAD_REPOSITORY")
        );
    }

    #[test]
    fn auto_and_statspack_and_none() {
        let ee = facts(Edition::Enterprise, "DIAGNOSTIC+TUNING", true);
        let se = facts(Edition::Standard, "NONE", true);
        let bare = facts(Edition::Standard, "NONE", false);
        assert_eq!(
            choose(Snapshots::Auto, &ee).repository,
            Some(Repository::Awr)
        );
        let auto_se = choose(Snapshots::Auto, &se);
        assert_eq!(auto_se.repository, Some(Repository::Statspack));
        assert!(auto_se.warnings.is_empty() && auto_se.notes[0].contains("auto took Statspack"));
        assert_eq!(choose(Snapshots::Auto, &bare).repository, None);
        assert_eq!(
            choose(Snapshots::Statspack, &ee).repository,
            Some(Repository::Statspack)
        );
        let missing = choose(Snapshots::Statspack, &bare);
        assert_eq!(missing.repository, None);
        assert!(missing.warnings[0].contains("not installed"));
        let none = choose(Snapshots::None, &ee);
        assert_eq!(
            none,
            Choice {
                repository: None,
                warnings: vec![],
                notes: vec![]
            }
        );
    }
}
