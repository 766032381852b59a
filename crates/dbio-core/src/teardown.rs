//! What `dbio teardown` finds and what it drops, engine-neutral: a backend answers with these
//! typed values ([`crate::backend::DataSet::teardown_plan`], [`crate::backend::DataSet::teardown`])
//! and the CLI renders them the same way whichever database it is. Teardown drops exactly one
//! data set's objects and never an object the user added: it names those instead.

use std::fmt::Write as _;

/// What a backend calls the data set's objects, for the lines that name them
/// (PostgreSQL: schema, `cf1`, `i_cf1`; Oracle: user, `CF1`, `I_CF1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectNames {
    /// The word for one of the data set's schemas (`schema`, `user`).
    pub schema: &'static str,
    pub table: &'static str,
    pub index: &'static str,
}

/// One schema of the data set, as teardown finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaDrop {
    pub schema: String,
    /// Whether the schema itself exists; false when only dbio's record of it is left (a
    /// setup stopped before creating it), and teardown removes that record.
    pub exists: bool,
    /// Whether the data set's table is there to drop.
    pub table: bool,
    /// The user's objects that depend on the data set's table: they stop the teardown before
    /// anything changes, unless the user asks for them to be dropped too.
    pub dependents: Vec<String>,
    /// Other objects in the schema that dbio did not create: the schema stays, without dbio's
    /// mark, once the data set's table is dropped.
    pub foreign_objects: Vec<String>,
}

/// What teardown would drop under a prefix (`dbio teardown` without `--yes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeardownPlan {
    pub names: ObjectNames,
    pub schemas: Vec<SchemaDrop>,
    /// Schemas named like the prefix's that teardown leaves, with why (an older dbio's mark,
    /// another role's or another data set's).
    pub left: Vec<(String, String)>,
}

/// What teardown did (`dbio teardown --yes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeardownReport {
    pub names: ObjectNames,
    /// Schemas dropped with everything in them (dbio's objects only).
    pub dropped: Vec<String>,
    /// Schemas whose table was dropped but which stay, without dbio's mark, because they hold
    /// the user's objects (named in `foreign_objects`).
    pub kept: Vec<SchemaDrop>,
    /// Schemas of which only dbio's record was left, that record removed.
    pub forgotten: Vec<String>,
    /// Schemas left alone, with why.
    pub left: Vec<(String, String)>,
    /// dbio's own bookkeeping object, dropped with the last data set it recorded (Oracle's
    /// catalog table).
    pub records_dropped: Option<String>,
}

/// `nothing to drop: ...`, the line both commands print when the prefix has no data set.
pub fn nothing_to_drop(prefix: &str, target: &str) -> String {
    format!("nothing to drop: no dbio data set of prefix `{prefix}` in {target}")
}

impl TeardownPlan {
    pub fn new(names: ObjectNames) -> TeardownPlan {
        TeardownPlan {
            names,
            schemas: Vec::new(),
            left: Vec::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.schemas.is_empty() && self.left.is_empty()
    }

    /// The listing of a non-empty plan, ending with how to go ahead; `drop_dependents`: the
    /// user asked for the objects depending on the tables to be dropped with them.
    pub fn render_text(&self, target: &str, prefix: &str, drop_dependents: bool) -> String {
        let ObjectNames {
            schema: noun,
            table,
            index,
        } = self.names;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "would drop from {target} (data set of prefix `{prefix}`):"
        );
        for d in &self.schemas {
            let s = &d.schema;
            let mut line = if !d.exists {
                format!("  dbio's record of {noun} {s} (a setup stopped before creating it)")
            } else if !d.table {
                format!("  {noun} {s} (its table {table} is already gone)")
            } else if d.foreign_objects.is_empty() {
                format!("  {noun} {s} (table {table}, index {index})")
            } else {
                format!("  table {s}.{table} and index {index}")
            };
            if d.exists && !d.foreign_objects.is_empty() {
                let _ = write!(
                    line,
                    "; {noun} {s} stays, without dbio's mark, because it holds objects dbio did not create: {}",
                    d.foreign_objects.join(", ")
                );
            }
            let _ = writeln!(out, "{line}");
            if !d.dependents.is_empty() {
                let _ = writeln!(
                    out,
                    "    depending on {s}.{table}, not dbio's: {} ({})",
                    d.dependents.join(", "),
                    if drop_dependents {
                        "dropped with it: --drop-dependents"
                    } else {
                        "teardown refuses while they exist; --drop-dependents drops them too"
                    }
                );
            }
        }
        for (s, why) in &self.left {
            let _ = writeln!(out, "  not {s}: {why}");
        }
        out.push_str("rerun with --yes to drop them\n");
        out
    }
}

impl TeardownReport {
    pub fn new(names: ObjectNames) -> TeardownReport {
        TeardownReport {
            names,
            dropped: Vec::new(),
            kept: Vec::new(),
            forgotten: Vec::new(),
            left: Vec::new(),
            records_dropped: None,
        }
    }

    /// Whether teardown found nothing of the prefix's.
    pub fn is_empty(&self) -> bool {
        self.dropped.is_empty()
            && self.kept.is_empty()
            && self.forgotten.is_empty()
            && self.left.is_empty()
    }

    /// A line per schema: dropped, kept (and why), its record removed, or left (and why).
    pub fn render_text(&self, target: &str, prefix: &str) -> String {
        let ObjectNames {
            schema: noun,
            table,
            ..
        } = self.names;
        let mut out = String::new();
        for s in &self.dropped {
            let _ = writeln!(out, "dropped {noun} {s}");
        }
        for k in &self.kept {
            let s = &k.schema;
            let _ = writeln!(
                out,
                "dropped {s}.{table}; kept {noun} {s} without dbio's mark: it holds objects dbio did not create ({})",
                k.foreign_objects.join(", ")
            );
        }
        for s in &self.forgotten {
            let _ = writeln!(
                out,
                "removed dbio's record of {noun} {s} (a setup stopped before creating it)"
            );
        }
        for (s, why) in &self.left {
            let _ = writeln!(out, "left {s}: {why}");
        }
        if let Some(r) = &self.records_dropped {
            let _ = writeln!(out, "dropped {r} (no data set left in it)");
        }
        if self.is_empty() {
            let _ = writeln!(out, "{}", nothing_to_drop(prefix, target));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PG: ObjectNames = ObjectNames {
        schema: "schema",
        table: "cf1",
        index: "i_cf1",
    };

    fn schema(name: &str) -> SchemaDrop {
        SchemaDrop {
            schema: name.into(),
            exists: true,
            table: true,
            dependents: Vec::new(),
            foreign_objects: Vec::new(),
        }
    }

    // The PostgreSQL wording the e2e tests and users' scripts read, line for line.
    #[test]
    fn a_plan_names_each_schema_what_stays_and_what_depends_on_it() {
        let mut plan = TeardownPlan::new(PG);
        plan.schemas.push(schema("user1"));
        plan.schemas.push(SchemaDrop {
            foreign_objects: vec!["table user2.mine".into()],
            dependents: vec!["index user2.my_idx".into()],
            ..schema("user2")
        });
        plan.schemas.push(SchemaDrop {
            table: false,
            ..schema("user3")
        });
        plan.left
            .push(("user4".into(), "owned by role `bob`".into()));
        assert!(!plan.is_empty());
        assert_eq!(
            plan.render_text("db@host", "user", false),
            "would drop from db@host (data set of prefix `user`):\n\
             \x20 schema user1 (table cf1, index i_cf1)\n\
             \x20 table user2.cf1 and index i_cf1; schema user2 stays, without dbio's mark, because it holds objects dbio did not create: table user2.mine\n\
             \x20   depending on user2.cf1, not dbio's: index user2.my_idx (teardown refuses while they exist; --drop-dependents drops them too)\n\
             \x20 schema user3 (its table cf1 is already gone)\n\
             \x20 not user4: owned by role `bob`\n\
             rerun with --yes to drop them\n"
        );
        assert!(
            plan.render_text("db@host", "user", true)
                .contains("(dropped with it: --drop-dependents)")
        );
    }

    #[test]
    fn a_report_says_what_went_what_stayed_and_nothing_when_empty() {
        let oracle = ObjectNames {
            schema: "user",
            table: "CF1",
            index: "I_CF1",
        };
        let mut report = TeardownReport::new(oracle);
        assert!(report.is_empty());
        assert_eq!(
            report.render_text("system@//db/PDB1", "ts"),
            "nothing to drop: no dbio data set of prefix `ts` in system@//db/PDB1\n"
        );
        report.dropped.push("TS1".into());
        report.kept.push(SchemaDrop {
            foreign_objects: vec!["TABLE T".into()],
            ..schema("TS2")
        });
        report.forgotten.push("TS3".into());
        report.records_dropped = Some("SYSTEM.DBIO_DATA_SETS".into());
        assert_eq!(
            report.render_text("system@//db/PDB1", "ts"),
            "dropped user TS1\n\
             dropped TS2.CF1; kept user TS2 without dbio's mark: it holds objects dbio did not create (TABLE T)\n\
             removed dbio's record of user TS3 (a setup stopped before creating it)\n\
             dropped SYSTEM.DBIO_DATA_SETS (no data set left in it)\n"
        );
    }
}
