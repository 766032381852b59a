//! [`Dbio`]: one `dbio ...` invocation, built up option by option, so a test names what it
//! changes and leaves the binary's path and the child's environment to one place.

use std::ffi::{OsStr, OsString};
use std::fmt::Display;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

/// The libpq variables (and dbio's own server-binaries variable) a developer's shell may set;
/// every `dbio` a test starts has them removed, so the test sees only what it passes.
const CLEARED_ENV: &[&str] = &[
    "PGHOST",
    "PGHOSTADDR",
    "PGPORT",
    "PGUSER",
    "PGPASSWORD",
    "PGDATABASE",
    "PGPASSFILE",
    "PGSSLMODE",
    "PGSSLROOTCERT",
    "PGSSLCERT",
    "PGSSLKEY",
    "PGSERVICE",
    "PGSERVICEFILE",
    "PGOPTIONS",
    "PGAPPNAME",
    "PGTARGETSESSIONATTRS",
    "PGCHANNELBINDING",
    "PGCONNECT_TIMEOUT",
    "DBIO_PG_BIN",
];

/// A `dbio` command line: the subcommand's words, then options and arguments in the order they
/// are added (so positional arguments and `--` keep their place), and the variables the test
/// sets.
///
/// Every process it starts has the inherited `PG*` variables (see `CLEARED_ENV`) removed and
/// `PGPASSFILE` pointed at a file that does not exist, so a developer's `PGHOST`, `PGPASSWORD`
/// or `~/.pgpass` cannot leak into a test; [`Dbio::env`] sets one back on purpose. Its child
/// also starts with SIGINT, SIGTERM and SIGHUP at their default dispositions, as under a
/// terminal: the tests that signal dbio model a user at a terminal, and under `nohup` (SIGHUP
/// ignored) or in a script's background job (SIGINT ignored) the child would otherwise inherit
/// the ignored signals, and rightly ignore them.
#[derive(Debug, Clone)]
#[must_use = "a Dbio does nothing until .output(), .spawn() or .command()"]
pub struct Dbio {
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
}

impl Dbio {
    /// `dbio <subcommand>`, its words split on whitespace: `"history list"` is two. Positional
    /// values (a series, a run id, a file) go in `.arg`, so `--dsn` added by
    /// `TestCluster::dbio` lands after the subcommand, not among them.
    pub fn new(subcommand: &str) -> Dbio {
        Dbio {
            args: subcommand.split_whitespace().map(OsString::from).collect(),
            env: Vec::new(),
        }
    }

    /// `name value`, e.g. `.opt("--engine", "server")`.
    pub fn opt(mut self, name: &str, value: impl AsRef<OsStr>) -> Dbio {
        self.args.push(name.into());
        self.args.push(value.as_ref().to_owned());
        self
    }

    /// One argument as is: a flag (`--force`), a positional argument, or `--`.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Dbio {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Arguments as they are, in order.
    pub fn args<I, S>(mut self, args: I) -> Dbio
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Sets a variable in the child's environment, after the `PG*` ones are cleared.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Dbio {
        self.env
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    pub fn dsn(self, dsn: impl AsRef<OsStr>) -> Dbio {
        self.opt("--dsn", dsn)
    }

    /// `-c FILE`, the configuration file.
    pub fn config(self, path: impl AsRef<Path>) -> Dbio {
        self.opt("-c", path.as_ref())
    }

    pub fn schemas(self, n: impl Display) -> Dbio {
        self.opt("--schemas", n.to_string())
    }

    /// `--scale`, with its unit (`"1000blocks"`, `"64MB"`).
    pub fn scale(self, scale: &str) -> Dbio {
        self.opt("--scale", scale)
    }

    pub fn readers(self, n: impl Display) -> Dbio {
        self.opt("--readers", n.to_string())
    }

    pub fn writers(self, n: impl Display) -> Dbio {
        self.opt("--writers", n.to_string())
    }

    /// `--run-time`, with its unit (`"2s"`).
    pub fn run_time(self, time: &str) -> Dbio {
        self.opt("--run-time", time)
    }

    /// `--out DIR`, the result folder.
    pub fn out(self, dir: impl AsRef<Path>) -> Dbio {
        self.opt("--out", dir.as_ref())
    }

    /// `--store FILE`, the history store.
    pub fn store(self, path: impl AsRef<Path>) -> Dbio {
        self.opt("--store", path.as_ref())
    }

    /// `-q`.
    pub fn quiet(self) -> Dbio {
        self.arg("-q")
    }

    /// The `std::process::Command`, for a test that sets more on it (stdin, a working folder).
    pub fn command(&self) -> Command {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(crate::dbio_bin());
        cmd.args(&self.args);
        for k in CLEARED_ENV {
            cmd.env_remove(k);
        }
        // No ~/.pgpass of the machine may leak into a test.
        cmd.env("PGPASSFILE", "/nonexistent/dbio-test-pgpass");
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        // SAFETY: signal(2) between fork and exec is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                    libc::signal(s, libc::SIG_DFL);
                }
                Ok(())
            });
        }
        cmd
    }

    /// Runs dbio to its end; its exit status and both streams.
    pub fn output(&self) -> Output {
        self.command()
            .output()
            .unwrap_or_else(|e| panic!("dbio {:?} did not start: {e}", self.args))
    }

    /// Starts dbio with stdout and stderr piped (stdin inherited), for a test that acts on it
    /// while it runs.
    pub fn spawn(&self) -> Child {
        self.command()
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("dbio {:?} did not start: {e}", self.args))
    }
}
