//! `dbio man`: the manual page, rendered by clap_mangen from the same command definition as
//! `--help`, so the two never disagree. Printed on stdout, or written as dbio.1 plus one
//! `dbio-<command>.1` per command with `--out DIR`.

use std::path::Path;

use clap::CommandFactory;

use crate::Failure;
use crate::args::Cli;

fn render(cmd: clap::Command, title: &str) -> Result<Vec<u8>, Failure> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd)
        .title(title)
        .render(&mut out)
        .map_err(|e| Failure::new(1, format!("cannot render the manual page: {e}")))?;
    Ok(out)
}

pub fn man_cmd(out: Option<&Path>) -> Result<u8, Failure> {
    let root = Cli::command().name("dbio");
    let Some(dir) = out else {
        let page = render(root, "dbio")?;
        crate::term::print(&String::from_utf8_lossy(&page));
        return Ok(0);
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| Failure::new(2, format!("cannot create {}: {e}", dir.display())))?;
    dbio_core::output::write_atomic(&dir.join("dbio.1"), &render(root.clone(), "dbio")?)?;
    let mut written = 1;
    for sub in root.get_subcommands() {
        let name = format!("dbio-{}", sub.get_name());
        let page = render(
            sub.clone().bin_name(format!("dbio {}", sub.get_name())),
            &name,
        )?;
        dbio_core::output::write_atomic(&dir.join(format!("{name}.1")), &page)?;
        written += 1;
    }
    errln!("man: {written} pages written to {}", dir.display());
    Ok(0)
}
