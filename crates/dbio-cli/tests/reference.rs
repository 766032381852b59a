//! docs/reference/ against the command line itself: every option and argument of every command
//! is on its command's page, and every option a page names exists. The pages' wording is
//! written for readers; their names must not drift from the binary's.

use std::collections::BTreeSet;
use std::path::PathBuf;

use clap::CommandFactory;
use dbio_cli::Cli;

fn reference_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/reference")
}

/// How a page spells an argument in its table's first column: `--long`, `-s, --long` or
/// `NAME` (a positional argument; `NAME...` when it repeats).
fn spellings(a: &clap::Arg) -> Vec<String> {
    if let Some(long) = a.get_long() {
        let mut v = vec![format!("`--{long}")];
        if let Some(short) = a.get_short() {
            v.push(format!("`-{short}, --{long}"));
        }
        v
    } else {
        let name = a
            .get_value_names()
            .and_then(|n| n.first())
            .map(|n| n.to_string())
            .unwrap_or_else(|| a.get_id().to_string().to_uppercase());
        vec![format!("`{name}")]
    }
}

/// Every visible argument of `cmd` and of its subcommands, with the command path it is from.
fn arguments(cmd: &clap::Command, path: &str, out: &mut Vec<(String, Vec<String>)>) {
    for a in cmd.get_arguments() {
        let id = a.get_id().as_str();
        if a.is_hide_set() || id == "help" || id == "version" || id == "quiet" {
            continue;
        }
        out.push((path.to_string(), spellings(a)));
    }
    for sub in cmd.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        arguments(sub, &format!("{path} {}", sub.get_name()), out);
    }
}

/// The long options a page's tables name: `--name` at the start of a row's first cell.
fn named_options(page: &str) -> BTreeSet<String> {
    page.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|cell| {
            let cell = cell.split('`').next()?;
            let long = cell.split(", ").last()?;
            let name = long.strip_prefix("--")?.split([' ', '[', '=']).next()?;
            Some(name.to_string())
        })
        .collect()
}

#[test]
fn every_option_of_every_command_is_on_its_reference_page_and_no_page_names_one_that_is_gone() {
    let cli = Cli::command();
    let mut missing = Vec::new();
    let mut unknown = Vec::new();
    for cmd in cli.get_subcommands() {
        if cmd.is_hide_set() || cmd.get_name() == "help" {
            continue;
        }
        let file = reference_dir().join(format!("{}.md", cmd.get_name()));
        let Ok(page) = std::fs::read_to_string(&file) else {
            missing.push(format!("{}: no page {}", cmd.get_name(), file.display()));
            continue;
        };
        let mut args = Vec::new();
        arguments(cmd, cmd.get_name(), &mut args);
        let mut longs = BTreeSet::new();
        for (path, spelled) in &args {
            if !spelled.iter().any(|s| page.contains(s.as_str())) {
                missing.push(format!(
                    "dbio {path}: {} not in {}",
                    spelled[0],
                    file.display()
                ));
            }
            for s in spelled {
                if let Some(l) = s.rsplit("--").next().filter(|_| s.contains("--")) {
                    longs.insert(l.to_string());
                }
            }
        }
        for name in named_options(&page) {
            if !longs.contains(&name) {
                unknown.push(format!("{}: --{name} is not an option", file.display()));
            }
        }
    }
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "docs/reference has drifted from the command line:\n{}\n{}",
        missing.join("\n"),
        unknown.join("\n")
    );
}
