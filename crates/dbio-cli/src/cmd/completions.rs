//! `dbio completions`: the shell completion script on stdout.

use crate::Failure;
use crate::args::Cli;

pub(super) fn completions_cmd(shell: clap_complete::Shell) -> Result<u8, Failure> {
    // Into memory first: clap_complete panics on a failed write (a closed pipe).
    let mut script = Vec::new();
    clap_complete::generate(
        shell,
        &mut <Cli as clap::CommandFactory>::command(),
        "dbio",
        &mut script,
    );
    crate::term::print(&String::from_utf8_lossy(&script));
    Ok(0)
}
