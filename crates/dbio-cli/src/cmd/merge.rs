//! `dbio merge RESULT... --out DIR`: the shards of one run (several `dbio run` processes)
//! combined into one result.json and report.txt that report, compare, regress and history
//! take as any run. The arithmetic is core's (`dbio_core::merge`).

use std::path::PathBuf;

use clap::Args;
use dbio_core::merge::{MergeError, merge_files};
use dbio_core::units::Dur;
use dbio_core::{input, output, report};

use crate::Failure;

#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The shards' result.json files (or their result folders), two or more.
    #[arg(value_name = "RESULT", required = true, num_args = 2..)]
    pub inputs: Vec<PathBuf>,
    /// Result folder for the merged result.json and report.txt, new or empty (default
    /// results/<UTC timestamp>-merge/).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Write into a result folder that already holds files, replacing those of the same name.
    #[arg(long)]
    pub overwrite: bool,
    /// Largest distance allowed between two shards' window starts (or ends); beyond it the
    /// merge is refused (default: half the shortest shard's window).
    #[arg(long, value_name = "DUR")]
    pub max_skew: Option<Dur>,
}

impl From<MergeError> for Failure {
    fn from(e: MergeError) -> Self {
        Failure::of(e.kind(), e.to_string())
    }
}

pub fn merge_cmd(a: MergeArgs, quiet: bool) -> Result<u8, Failure> {
    let inputs: Vec<PathBuf> = a
        .inputs
        .iter()
        .map(|p| {
            if p.is_dir() {
                p.join("result.json")
            } else {
                p.clone()
            }
        })
        .collect();
    let merged = merge_files(&inputs, a.max_skew.map(|d| d.0.as_secs_f64()))?;
    if let Some(out) = &a.out {
        // `merge A B --out A --overwrite` would replace input A with the merge.
        let outputs = ["result.json", "report.txt"].map(|n| out.join(n));
        input::refuse_overwriting_inputs(&inputs, &outputs)?;
    }
    let dir = output::result_dir(a.out.as_deref(), "merge", a.overwrite)?;
    let text = report::render_text(&merged);
    let json = serde_json::to_string_pretty(&merged).map_err(|e| Failure::new(1, e.to_string()))?;
    super::write_results(
        &dir,
        &[
            ("result.json", json.as_bytes()),
            ("report.txt", text.as_bytes()),
        ],
    )?;
    if !quiet {
        if let Some(m) = &merged.merge {
            let late = m.shards.iter().filter(|s| s.late).count();
            errln!(
                "merge: {} shards, {} operations, windows within {:.3} s of each other (open together {:.3} s){}",
                m.shards.len(),
                merged.client.ops,
                m.start_spread_s.max(m.end_spread_s),
                m.overlap_s,
                if late > 0 {
                    format!("; {late} started late (see the warnings)")
                } else {
                    String::new()
                }
            );
        }
        errln!(
            "results: {}/result.json, {}/report.txt",
            dir.display(),
            dir.display()
        );
    }
    Ok(0)
}
