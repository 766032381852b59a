//! The data sets a target holds, as dbio's own marks describe them, and which one a command
//! takes. A DBA expects `dbio check` after `dbio setup --schemas 2 --scale 4000blocks` to find
//! those 2 schemas of 4000 blocks, as pgbench finds its scale from its tables: with no
//! `--schemas`/`--scale` (flag or file), they come from the marks of the prefix's data set;
//! an explicit value that disagrees is an error naming both values.

use std::fmt::Write as _;

use serde::Serialize;

use crate::Config;
use crate::ErrorKind;
use crate::backend::{BackendError, DataSet};
use crate::error::CoreError;
use crate::units::{SizeSpec, format_bytes};

/// Where a data set's schemas stand, over all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DataSetState {
    /// Every schema loaded and marked complete.
    Complete,
    /// At least one schema is still marked loading (a load failed or was interrupted): the
    /// next `dbio setup` finishes it.
    Loading,
    /// Fewer schemas carry the mark than the data set was built with (some were dropped).
    Partial,
}

impl DataSetState {
    pub fn as_str(self) -> &'static str {
        match self {
            DataSetState::Complete => "complete",
            DataSetState::Loading => "loading",
            DataSetState::Partial => "partial",
        }
    }
}

/// One data set on a target: what its marks say, and where its tables really are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FoundDataSet {
    pub prefix: String,
    /// The data set's id, shared by the marks of all its schemas.
    pub id: String,
    /// Schemas the data set was built with (the marks' count).
    pub schemas: u32,
    /// Schemas found carrying its mark.
    pub schemas_found: u32,
    pub scale_blocks: u64,
    pub block_size: u64,
    /// The tablespace the marks name (None: the database's default).
    pub tablespace: Option<String>,
    /// Where the tables are now, as the catalog says (a table can be moved after the load).
    pub tablespaces_now: Vec<String>,
    pub state: DataSetState,
    /// Heap + index bytes of the tables found, when they could be measured.
    pub bytes: Option<u64>,
    /// UTC time the data set was created (the marks' `created_at`).
    pub loaded_at: String,
    pub dbio_version: String,
}

/// What a command was told about the data set, and whether it was told at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataSetAsk {
    pub prefix: String,
    /// `(value, where it was given)`, e.g. `(4, "--schemas")`; None when neither a flag nor
    /// the config file sets it.
    pub schemas: Option<(u32, String)>,
    pub scale: Option<(SizeSpec, String)>,
}

/// The data set of `ask.prefix` among `found`, checked against what was asked. `Ok(None)`:
/// the target holds no data set of that prefix (the command then reports it as it always
/// did, and [`others_note`] names the ones it does hold).
pub fn pick<'a>(
    ask: &DataSetAsk,
    found: &'a [FoundDataSet],
) -> Result<Option<&'a FoundDataSet>, CoreError> {
    let of_prefix: Vec<&FoundDataSet> = found.iter().filter(|d| d.prefix == ask.prefix).collect();
    let d = match of_prefix.as_slice() {
        [] => return Ok(None),
        [one] => *one,
        several => {
            return Err(CoreError::invalid(
                "data.prefix",
                format!(
                    "the target holds {} data sets marked with prefix `{}` (ids {}); tear the stray one down \
                     (drop its schemas) before running against this prefix:\n{}",
                    several.len(),
                    ask.prefix,
                    several
                        .iter()
                        .map(|d| d.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                    render_list(found)
                ),
            ));
        }
    };
    // Fewer schemas than the data set has is a choice (run on a subset, as SLOB may); more
    // is a conflict: those schemas do not exist.
    if let Some((n, from)) = &ask.schemas
        && *n > d.schemas
    {
        return Err(CoreError::invalid(
            "data.schemas",
            format!(
                "{from} asks for {n} schema(s), but the data set of prefix `{}` on the target has {} (dbio's marks): \
                 {}{} does not exist; leave data.schemas out to use the data set's, or rebuild it with \
                 `dbio setup --force --schemas {n}`",
                d.prefix,
                d.schemas,
                d.prefix,
                d.schemas + 1
            ),
        ));
    }
    if let Some((scale, from)) = &ask.scale {
        let blocks = crate::dataset::scale_rows(*scale, d.block_size);
        if blocks != d.scale_blocks {
            return Err(CoreError::invalid(
                "data.scale",
                format!(
                    "{from} asks for {scale} ({blocks} blocks of {} bytes), but the data set of prefix `{}` on the target \
                     holds {} blocks per schema (dbio's marks); leave data.scale out to use the data set's, or rebuild it \
                     with `dbio setup --force --scale {scale}`",
                    d.block_size, d.prefix, d.scale_blocks
                ),
            ));
        }
    }
    Ok(Some(d))
}

impl DataSetAsk {
    /// Both the schema count and the scale were given (flag or file): the marks only
    /// cross-check them.
    pub fn is_complete(&self) -> bool {
        self.schemas.is_some() && self.scale.is_some()
    }
}

/// Reads the data sets `backend`'s target holds and fills `config.data` from the one of
/// `ask.prefix` (schemas, scale, and the tablespace when none was given); an explicit value
/// that disagrees is an error naming both. With no data set of the prefix nothing changes.
/// Returns what the user should be told: the data sets the target does hold when the prefix
/// has none ([`others_note`]), or why they could not be read.
///
/// When the schemas and the scale were both given, the marks are a cross-check only: if the
/// target answered but its data sets could not be read, the command goes on with the values
/// as given, with a note; the run's preflight verifies the data set itself. An unreachable target, an interrupt and
/// a usage error (a refused logon or catalog, no client library) still stop it.
pub async fn discover<D: DataSet>(
    backend: &mut D,
    config: &mut Config,
    ask: &DataSetAsk,
) -> Result<Option<String>, BackendError> {
    let found = match backend.list().await {
        Ok(found) => found,
        // Only a target that answered and failed to read its marks lets an explicit command
        // go on, with a note. An unreachable target stops here, as it would stop the command
        // (waiting out a second connect timeout would only delay the same error), and so do
        // an interrupt and a usage error: a refused logon (a second one would count against
        // the account's failed-login limit), a role refused the catalog, no client library.
        Err(e) if ask.is_complete() && e.kind == ErrorKind::Failed => {
            return Ok(Some(format!(
                "dbio's data sets on the target could not be read ({}); taking {} and {} as given",
                e.message,
                ask.schemas.as_ref().map_or("", |(_, from)| from.as_str()),
                ask.scale.as_ref().map_or("", |(_, from)| from.as_str()),
            )));
        }
        Err(e) => return Err(e),
    };
    match pick(ask, &found)? {
        Some(d) => {
            if ask.schemas.is_none() {
                config.data.schemas = d.schemas;
            }
            if ask.scale.is_none() {
                config.data.scale = SizeSpec::Blocks(d.scale_blocks);
            }
            if config.data.tablespace.is_none() {
                config.data.tablespace = d.tablespace.clone();
            }
            config.validate()?;
            Ok(None)
        }
        None => Ok(others_note(&ask.prefix, &found)),
    }
}

/// A note naming the data sets the target does hold, when the prefix asked for has none.
pub fn others_note(prefix: &str, found: &[FoundDataSet]) -> Option<String> {
    if found.is_empty() || found.iter().any(|d| d.prefix == prefix) {
        return None;
    }
    Some(format!(
        "no dbio data set of prefix `{prefix}` on the target; it holds (choose one with --prefix):\n{}",
        render_list(found)
    ))
}

/// `dbio list`: one line per data set.
pub fn render_list(found: &[FoundDataSet]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  {:<12} {:>7} {:>14} {:<20} {:<9} {:>10}  {:<20} dbio",
        "prefix", "schemas", "scale", "tablespace", "state", "size", "loaded at"
    );
    for d in found {
        let schemas = if d.schemas_found == d.schemas {
            d.schemas.to_string()
        } else {
            format!("{}/{}", d.schemas_found, d.schemas)
        };
        let tablespace = if d.tablespaces_now.is_empty() {
            d.tablespace.clone().unwrap_or_else(|| "pg_default".into())
        } else {
            d.tablespaces_now.join(",")
        };
        let _ = writeln!(
            out,
            "  {:<12} {:>7} {:>14} {:<20} {:<9} {:>10}  {:<20} {}",
            d.prefix,
            schemas,
            format!("{} blocks", d.scale_blocks),
            tablespace,
            d.state.as_str(),
            d.bytes.map(format_bytes).unwrap_or_else(|| "-".into()),
            d.loaded_at,
            d.dbio_version
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::fake::FakeBackend;

    fn set(prefix: &str, schemas: u32, scale_blocks: u64) -> FoundDataSet {
        FoundDataSet {
            prefix: prefix.into(),
            id: format!("id-{prefix}"),
            schemas,
            schemas_found: schemas,
            scale_blocks,
            block_size: 8192,
            tablespace: None,
            tablespaces_now: vec!["pg_default".into()],
            state: DataSetState::Complete,
            bytes: Some(scale_blocks * 8192),
            loaded_at: "2026-01-01T00:00:00Z".into(),
            dbio_version: "0.1.0".into(),
        }
    }

    fn ask(prefix: &str) -> DataSetAsk {
        DataSetAsk {
            prefix: prefix.into(),
            schemas: None,
            scale: None,
        }
    }

    #[test]
    fn without_values_the_marks_decide() {
        let found = [set("user", 2, 4000), set("ts", 1, 100)];
        let d = pick(&ask("user"), &found).unwrap().unwrap();
        assert_eq!((d.schemas, d.scale_blocks), (2, 4000));
        assert!(pick(&ask("other"), &found).unwrap().is_none());
    }

    #[test]
    fn a_conflicting_scale_names_both_values() {
        let found = [set("user", 2, 4000)];
        let mut a = ask("user");
        a.scale = Some((SizeSpec::Blocks(8192), "--scale".into()));
        let e = pick(&a, &found).unwrap_err().to_string();
        assert!(
            e.contains("8192") && e.contains("4000") && e.contains("--scale"),
            "{e}"
        );
        // The same size in bytes is no conflict.
        a.scale = Some((SizeSpec::Bytes(4000 * 8192), "--scale".into()));
        assert!(pick(&a, &found).unwrap().is_some());
    }

    #[test]
    fn a_conflicting_schema_count_names_both_values() {
        let found = [set("user", 2, 4000)];
        let mut a = ask("user");
        a.schemas = Some((4, "data.schemas (file)".into()));
        let e = pick(&a, &found).unwrap_err().to_string();
        assert!(
            e.contains("4 schema") && e.contains("has 2") && e.contains("user3 does not exist"),
            "{e}"
        );
        // A subset is allowed.
        a.schemas = Some((1, "--schemas".into()));
        assert!(pick(&a, &found).unwrap().is_some());
    }

    /// Discovery as the CLI calls it for check, run, ramp and capacity, over the trait only.
    async fn discovered(
        fake: &mut FakeBackend,
        config: &mut Config,
        ask: &DataSetAsk,
    ) -> Result<Option<String>, BackendError> {
        discover(fake, config, ask).await
    }

    #[tokio::test]
    async fn discovery_fills_the_config_from_the_marks_through_the_data_set_trait() {
        let mut fake = FakeBackend::new();
        fake.marked = Ok(vec![
            FoundDataSet {
                tablespace: Some("fast".into()),
                ..set("user", 2, 4000)
            },
            set("ts", 1, 100),
        ]);
        let mut config = Config::default();
        let note = discovered(&mut fake, &mut config, &ask("user")).await;
        assert_eq!(note.expect("the marks were read"), None);
        assert_eq!(
            (
                config.data.schemas,
                config.data.scale,
                config.data.tablespace.as_deref()
            ),
            (2, SizeSpec::Blocks(4000), Some("fast"))
        );
        assert_eq!(fake.calls(), ["list"]);

        // What check then verifies is the data set the marks describe, in the server's blocks.
        let report = fake.check(&config).await.expect("check");
        assert_eq!(report.failed(), ["user1", "user2"]);
        assert_eq!(report.schemas[1].facts, ["rows 4000/4000"]);

        // A given tablespace stays; a given scale that disagrees names both values.
        let mut config = Config::default();
        config.data.tablespace = Some("slow".into());
        let mut a = ask("user");
        a.scale = Some((SizeSpec::Blocks(8192), "--scale".into()));
        let e = discovered(&mut fake, &mut config, &a)
            .await
            .expect_err("8192 blocks is not the data set's 4000");
        assert_eq!(e.kind, ErrorKind::Usage);
        assert!(
            e.message.contains("--scale asks for 8192") && e.message.contains("holds 4000"),
            "{}",
            e.message
        );
        assert_eq!(config.data.tablespace.as_deref(), Some("slow"));

        // No data set of the prefix: nothing changes, and the ones there are named.
        let mut config = Config::default();
        let note = discovered(&mut fake, &mut config, &ask("other"))
            .await
            .expect("the marks were read")
            .expect("a note naming the data sets");
        assert!(
            note.contains("no dbio data set of prefix `other`")
                && note.contains("  user ")
                && note.contains("  ts "),
            "{note}"
        );
        assert_eq!(config.data.schemas, Config::default().data.schemas);
    }

    // A backend whose marks could not be read (Oracle's list before it had a reader of its
    // catalog) made discovery fail every run, even one given --schemas and --scale.
    #[tokio::test]
    async fn marks_that_cannot_be_read_do_not_stop_a_run_given_schemas_and_scale() {
        let explicit = DataSetAsk {
            schemas: Some((3, "--schemas".into())),
            scale: Some((SizeSpec::Blocks(500), "--scale".into())),
            ..ask("user")
        };
        let given = |config: &mut Config| {
            config.data.schemas = 3;
            config.data.scale = SizeSpec::Blocks(500);
        };
        // The target answered but its marks could not be read: noted, values as given.
        let mut fake = FakeBackend::new();
        fake.marked = Err(ErrorKind::Failed);
        let mut config = Config::default();
        given(&mut config);
        let note = discovered(&mut fake, &mut config, &explicit)
            .await
            .expect("an explicit run goes on")
            .expect("a note saying why the marks were not used");
        assert_eq!(
            note,
            "dbio's data sets on the target could not be read (fake: the marks cannot be read); \
             taking --schemas and --scale as given"
        );
        assert_eq!(
            (
                config.data.schemas,
                config.data.scale,
                config.data.tablespace.clone()
            ),
            (3, SizeSpec::Blocks(500), None)
        );
        // Unreachable (the run would wait out a second connect timeout for the same error),
        // interrupted, or a usage error (a refused logon, a role refused the catalog, no
        // client library): it stops with that error, once.
        for kind in [
            ErrorKind::Unreachable,
            ErrorKind::Interrupted,
            ErrorKind::Usage,
        ] {
            fake.marked = Err(kind);
            let e = discovered(&mut fake, &mut config, &explicit)
                .await
                .expect_err("stopped");
            assert_eq!(e.kind, kind);
        }
        // Without both values the marks are needed: their error is the command's.
        for partial in [
            DataSetAsk {
                scale: None,
                ..explicit.clone()
            },
            ask("user"),
        ] {
            fake.marked = Err(ErrorKind::Failed);
            let e = discovered(&mut fake, &mut config, &partial)
                .await
                .expect_err("the marks are needed");
            assert_eq!(
                (e.kind, e.message.as_str()),
                (ErrorKind::Failed, "fake: the marks cannot be read")
            );
        }
    }

    #[test]
    fn the_others_are_named_when_the_prefix_has_none() {
        let found = [set("a", 1, 10), set("b", 2, 20)];
        let note = others_note("user", &found).unwrap();
        assert!(note.contains("  a ") && note.contains("  b "), "{note}");
        assert!(others_note("a", &found).is_none());
        assert!(others_note("user", &[]).is_none());
    }
}
