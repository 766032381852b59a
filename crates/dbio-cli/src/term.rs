//! Everything dbio prints goes through here. Text from outside (a result file, a mark, a tag,
//! the server's messages) is escaped before it reaches a terminal ([`dbio_core::text`]), and
//! a closed pipe ends dbio quietly instead of with a panic: `dbio check | head -1` is a
//! normal way to read the first line. Rust ignores SIGPIPE, so a write to a pipe whose reader
//! left fails with EPIPE, and `println!` would panic on it.

use std::io::Write;

/// The exit status of a process ended by SIGPIPE in a shell (128 + 13): what `head` users
/// expect from a writer whose reader left.
pub(crate) const BROKEN_PIPE_EXIT: i32 = 141;

fn write_out(text: &str) {
    let mut out = std::io::stdout().lock();
    let written = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    if let Err(e) = written {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            // Every result file is written before anything is printed: nothing is lost.
            std::process::exit(BROKEN_PIPE_EXIT);
        }
        let _ = writeln!(
            std::io::stderr(),
            "dbio: error: cannot write to stdout: {e}"
        );
        std::process::exit(1);
    }
}

/// Text on stdout, as it is (no newline added); unsafe characters escaped, lines kept.
pub(crate) fn print(text: &str) {
    write_out(&dbio_core::text::printable_lines(text));
}

/// A JSON document on stdout; unsafe characters as JSON escapes (the same document).
pub(crate) fn print_json_text(text: &str) {
    write_out(&dbio_core::text::printable_json(text));
}

/// A message on stderr; a closed stderr is ignored (the work goes on, the files are written).
pub(crate) fn eprint(text: &str) {
    let _ = std::io::stderr()
        .lock()
        .write_all(dbio_core::text::printable_lines(text).as_bytes());
}

/// `println!` through [`print`].
macro_rules! outln {
    () => { $crate::term::print("\n") };
    ($($arg:tt)*) => { $crate::term::print(&format!("{}\n", format_args!($($arg)*))) };
}

/// `print!` through [`print`].
macro_rules! out {
    ($($arg:tt)*) => { $crate::term::print(&format!($($arg)*)) };
}

/// `eprintln!` through [`eprint`].
macro_rules! errln {
    ($($arg:tt)*) => { $crate::term::eprint(&format!("{}\n", format_args!($($arg)*))) };
}
