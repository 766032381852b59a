//! `dbio compare`: runs or ramps side by side.

use std::path::Path;

use dbio_core::output;
use dbio_core::report::compare::compare;
use dbio_core::summary::read_step_set;

use super::print_json;
use crate::Failure;
use crate::args::CompareFormat;

pub(super) fn compare_cmd(
    inputs: &[std::path::PathBuf],
    format: CompareFormat,
    out: Option<&Path>,
) -> Result<u8, Failure> {
    let sets = inputs
        .iter()
        .map(|p| read_step_set(p))
        .collect::<Result<Vec<_>, _>>()?;
    let c = compare(&sets);
    if c.rows.is_empty() {
        return Err(Failure::new(
            2,
            format!(
                "nothing to compare: no step is in every input ({})",
                c.notes.join("; ")
            ),
        ));
    }
    let (text, csv, html) = (c.render_text(), c.render_csv(), c.render_html(&sets));
    if let Some(dir) = out {
        let inputs: Vec<_> = inputs
            .iter()
            .map(|p| dbio_core::summary::document_path(p))
            .collect();
        let outputs: Vec<_> = ["compare.txt", "compare.csv", "compare.html"]
            .map(|n| dir.join(n))
            .into();
        dbio_core::input::refuse_overwriting_inputs(&inputs, &outputs)?;
        std::fs::create_dir_all(dir)
            .map_err(|e| Failure::new(2, format!("cannot create {}: {e}", dir.display())))?;
        for (name, body) in [
            ("compare.txt", &text),
            ("compare.csv", &csv),
            ("compare.html", &html),
        ] {
            output::write_atomic(&dir.join(name), body.as_bytes())?;
        }
        errln!(
            "compare: compare.txt, compare.csv, compare.html written to {}",
            dir.display()
        );
    }
    match format {
        CompareFormat::Csv => out!("{csv}"),
        CompareFormat::Html => out!("{html}"),
        CompareFormat::Json => print_json(&c)?,
        CompareFormat::Text => out!("{text}"),
    }
    Ok(0)
}
