//! `dbio teardown`: list, then drop, one data set.

use dbio_core::Config;
use dbio_core::config::Database;
use dbio_postgres::{Target, teardown, teardown_plan};

use super::{load_config, resolve};
use crate::Failure;
use crate::args::{CommonArgs, DataArgs};

pub(super) async fn teardown_cmd(
    common: &CommonArgs,
    prefix: Option<String>,
    yes: bool,
    drop_dependents: bool,
) -> Result<u8, Failure> {
    let data = DataArgs {
        prefix,
        ..DataArgs::default()
    };
    let config = load_config(common, &data)?;
    if config.engine == Database::Oracle {
        refuse_drop_dependents_on_oracle(drop_dependents)?;
        let admin = crate::oracle::admin_target(&config, common.one_dsn())?;
        return crate::oracle::teardown(&config, admin, yes).await;
    }
    let target = resolve(&config, common)?;
    teardown_target(&config, &target, yes, drop_dependents).await
}

async fn teardown_target(
    config: &Config,
    target: &Target,
    yes: bool,
    drop_dependents: bool,
) -> Result<u8, Failure> {
    let prefix = &config.data.prefix;
    if !yes {
        let plan = teardown_plan(target, prefix).await?;
        if plan.is_empty() {
            outln!("nothing to drop: no dbio data set of prefix `{prefix}` in {target}");
            if let Some(note) = super::discover::others_on(target, prefix).await {
                outln!("{note}");
            }
            return Ok(0);
        }
        outln!("would drop from {target} (data set of prefix `{prefix}`):");
        for d in &plan.schemas {
            let mut line = if !d.table {
                format!("  schema {} (its table cf1 is already gone)", d.schema)
            } else if d.foreign_objects.is_empty() {
                format!("  schema {} (table cf1, index i_cf1)", d.schema)
            } else {
                format!("  table {}.cf1 and index i_cf1", d.schema)
            };
            if !d.foreign_objects.is_empty() {
                line.push_str(&format!(
                    "; schema {} stays, without dbio's mark, because it holds objects dbio did not create: {}",
                    d.schema,
                    d.foreign_objects.join(", ")
                ));
            }
            outln!("{line}");
            if !d.dependents.is_empty() {
                outln!(
                    "    depending on {}.cf1, not dbio's: {} ({})",
                    d.schema,
                    d.dependents.join(", "),
                    if drop_dependents {
                        "dropped with it: --drop-dependents"
                    } else {
                        "teardown refuses while they exist; --drop-dependents drops them too"
                    }
                );
            }
        }
        for s in &plan.legacy {
            outln!("  not {s}: {}", legacy_note());
        }
        for (s, why) in &plan.forged {
            outln!("  not {s}: {why}");
        }
        outln!("rerun with --yes to drop them");
        return Ok(1);
    }
    let outcome = teardown(target, prefix, drop_dependents).await?;
    for s in &outcome.dropped {
        outln!("dropped schema {s}");
    }
    for k in &outcome.kept {
        outln!(
            "dropped {}.cf1; kept schema {} without dbio's mark: it holds objects dbio did not create ({})",
            k.schema,
            k.schema,
            k.foreign_objects.join(", ")
        );
    }
    for s in &outcome.legacy {
        outln!("left {s}: {}", legacy_note());
    }
    for (s, why) in &outcome.forged {
        outln!("left {s}: {why}");
    }
    if outcome.dropped.is_empty()
        && outcome.kept.is_empty()
        && outcome.legacy.is_empty()
        && outcome.forged.is_empty()
    {
        outln!("nothing to drop: no dbio data set of prefix `{prefix}` in {target}");
    }
    Ok(0)
}

/// The Oracle backend never drops objects of the user's: the flag would be a silent no-op.
pub(super) fn refuse_drop_dependents_on_oracle(drop_dependents: bool) -> Result<(), Failure> {
    if drop_dependents {
        return Err(Failure::new(
            2,
            "--drop-dependents is for PostgreSQL only; with engine: oracle drop your objects on dbio's tables yourself",
        ));
    }
    Ok(())
}

fn legacy_note() -> &'static str {
    "it carries the mark of an older dbio, which does not say which data set (prefix) it belongs to; \
     rebuild it with `dbio setup --force` (same --prefix and --schemas) and tear it down then, or drop it yourself"
}
