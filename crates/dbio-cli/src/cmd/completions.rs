//! `dbio completions`: the shell completion script on stdout.

use crate::Failure;
use crate::args::Cli;

pub(super) fn completions_cmd(shell: clap_complete::Shell) -> Result<u8, Failure> {
    clap_complete::generate(
        shell,
        &mut <Cli as clap::CommandFactory>::command(),
        "dbio",
        &mut std::io::stdout(),
    );
    Ok(0)
}
