//! Where to connect, following libpq's habits: a DSN (key=value or URL), the PG* environment
//! variables and ~/.pgpass. dbio's precedence is flag > environment > file > default, applied
//! per connection parameter, so `PGPORT=5433` overrides the port of the file's DSN but not the
//! port of a `--dsn` flag.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use tokio_postgres::config::Host;
use tokio_postgres::{Client, NoTls};

use crate::error::{PgError, Result, source_chain};

/// One layer of connection parameters; `None` means "this layer does not say".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnParams {
    pub host: Option<String>,
    pub port: Option<u16>,
    pub user: Option<String>,
    pub password: Option<String>,
    pub dbname: Option<String>,
    pub passfile: Option<PathBuf>,
}

impl ConnParams {
    /// Parses a libpq-style DSN (`host=... port=...`) or a `postgresql://` URL.
    pub fn from_dsn(dsn: &str) -> Result<ConnParams> {
        let cfg = tokio_postgres::Config::from_str(dsn).map_err(|e| {
            PgError::Usage(format!(
                "the connection string is not valid ({}); write it as \"host=H port=P user=U dbname=D\" or postgresql://U@H:P/D",
                source_chain(&e)
            ))
        })?;
        let host = cfg.get_hosts().first().map(|h| match h {
            Host::Tcp(s) => s.clone(),
            Host::Unix(p) => p.display().to_string(),
        });
        Ok(ConnParams {
            host,
            port: cfg.get_ports().first().copied(),
            user: cfg.get_user().map(str::to_string),
            password: cfg
                .get_password()
                .map(|p| String::from_utf8_lossy(p).into_owned()),
            dbname: cfg.get_dbname().map(str::to_string),
            passfile: None,
        })
    }

    /// Reads PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE and PGPASSFILE through `get`.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<ConnParams> {
        let nonempty = |k: &str| get(k).filter(|v| !v.is_empty());
        let port = match nonempty("PGPORT") {
            Some(p) => Some(p.parse::<u16>().map_err(|_| {
                PgError::Usage(format!("PGPORT=`{p}` is not a port number (1-65535)"))
            })?),
            None => None,
        };
        Ok(ConnParams {
            host: nonempty("PGHOST"),
            port,
            user: nonempty("PGUSER"),
            password: nonempty("PGPASSWORD"),
            dbname: nonempty("PGDATABASE"),
            passfile: nonempty("PGPASSFILE").map(PathBuf::from),
        })
    }

    /// This layer, with every parameter that `higher` sets taken from `higher`.
    pub fn overlaid_by(self, higher: ConnParams) -> ConnParams {
        ConnParams {
            host: higher.host.or(self.host),
            port: higher.port.or(self.port),
            user: higher.user.or(self.user),
            password: higher.password.or(self.password),
            dbname: higher.dbname.or(self.dbname),
            passfile: higher.passfile.or(self.passfile),
        }
    }
}

/// A resolved connection target: every parameter known, the password kept out of `Display`.
#[derive(Clone)]
pub struct Target {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub dbname: String,
    password: Option<String>,
    pub connect_timeout: Duration,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl Target {
    /// Merges the layers (file < environment < flag) and fills libpq's defaults: host
    /// `localhost`, port 5432, user `$USER`, database = user, password from the passfile.
    pub fn resolve(
        file_dsn: Option<&str>,
        env: ConnParams,
        flag_dsn: Option<&str>,
        connect_timeout: Duration,
    ) -> Result<Target> {
        let file = match file_dsn {
            Some(d) => ConnParams::from_dsn(d)?,
            None => ConnParams::default(),
        };
        let flag = match flag_dsn {
            Some(d) => ConnParams::from_dsn(d)?,
            None => ConnParams::default(),
        };
        let p = file.overlaid_by(env.clone()).overlaid_by(flag);
        let host = p.host.unwrap_or_else(|| "localhost".into());
        let port = p.port.unwrap_or(5432);
        let user = p
            .user
            .or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))
            .unwrap_or_else(|| "postgres".into());
        let dbname = p.dbname.unwrap_or_else(|| user.clone());
        let password = match p.password {
            Some(pw) => Some(pw),
            None => {
                let file = p.passfile.or_else(default_passfile);
                file.and_then(|f| passfile_lookup(&f, &host, port, &dbname, &user))
            }
        };
        Ok(Target {
            host,
            port,
            user,
            dbname,
            password,
            connect_timeout,
        })
    }

    /// A target from one DSN with nothing else (tests, scratch clusters).
    pub fn from_dsn(dsn: &str) -> Result<Target> {
        Target::resolve(
            None,
            ConnParams::default(),
            Some(dsn),
            Duration::from_secs(10),
        )
    }

    /// The target as `host=... port=... user=... dbname=...`, never with the password.
    pub fn redacted(&self) -> String {
        format!(
            "host={} port={} user={} dbname={}",
            self.host, self.port, self.user, self.dbname
        )
    }

    /// The password, when one was given or found in the passfile.
    pub fn password(&self) -> Option<&str> {
        self.password.as_deref()
    }

    pub fn with_dbname(&self, dbname: &str) -> Target {
        Target {
            dbname: dbname.to_string(),
            ..self.clone()
        }
    }

    /// True when the server runs on this host (a Unix socket or a loopback address), so
    /// /proc and the page cache of this host are the server's.
    pub fn is_local(&self) -> bool {
        if self.host.starts_with('/') || self.host == "localhost" {
            return true;
        }
        match self.host.parse::<IpAddr>() {
            Ok(ip) => ip.is_loopback(),
            Err(_) => hostname().is_some_and(|h| h == self.host),
        }
    }

    pub fn pg_config(&self, application_name: &str) -> tokio_postgres::Config {
        let mut cfg = tokio_postgres::Config::new();
        cfg.host(&self.host)
            .port(self.port)
            .user(&self.user)
            .dbname(&self.dbname)
            .application_name(application_name)
            .connect_timeout(self.connect_timeout);
        if let Some(pw) = &self.password {
            cfg.password(pw);
        }
        cfg
    }

    /// Opens one connection and spawns its driver task (preflight, loader, collector; the
    /// measured sessions use `wire`). Errors name the target and say what to check.
    pub async fn connect(&self, application_name: &str) -> Result<Client> {
        let cfg = self.pg_config(application_name);
        // The timeout also covers hosts that accept TCP but never answer.
        let attempt = tokio::time::timeout(
            self.connect_timeout + Duration::from_secs(1),
            cfg.connect(NoTls),
        )
        .await;
        let (client, connection) = match attempt {
            Err(_) => {
                return Err(PgError::Connect {
                    target: self.redacted(),
                    cause: format!("no answer within {} s", self.connect_timeout.as_secs()),
                    hint: "check the host and port, firewalls, and target.connect_timeout".into(),
                });
            }
            Ok(Err(e)) => return Err(self.connect_error(&e)),
            Ok(Ok(pair)) => pair,
        };
        tokio::spawn(connection);
        client
            .batch_execute(crate::sql::OWN_SETTINGS)
            .await
            .map_err(|e| {
                PgError::from_db("setting dbio's own statement_timeout and idle timeouts", &e)
            })?;
        Ok(client)
    }

    /// Waits until the server accepts a connection again (after a restart), trying every
    /// 200 ms for up to `timeout`; true when it does.
    pub async fn wait_ready(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if self.connect("dbio-wait").await.is_ok() {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn connect_error(&self, e: &tokio_postgres::Error) -> PgError {
        match e.as_db_error() {
            Some(db) => self.server_refused(db.code().code(), db.message()),
            None => self.unreachable(source_chain(e)),
        }
    }

    /// The server answered and refused the connection.
    pub(crate) fn server_refused(&self, code: &str, message: &str) -> PgError {
        PgError::Connect {
            target: self.redacted(),
            cause: format!("{message} (SQLSTATE {code})"),
            hint: crate::error::connect_hint(code, message, &self.user, &self.dbname),
        }
    }

    /// No server answered, or it asked for what dbio cannot give.
    pub(crate) fn unreachable(&self, cause: String) -> PgError {
        PgError::Connect {
            target: self.redacted(),
            hint: crate::error::unreachable_hint(&self.host, self.port, &self.user, &cause),
            cause,
        }
    }
}

fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
}

fn default_passfile() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| Path::new(&h).join(".pgpass"))
}

/// Looks a password up in a libpq password file (`host:port:database:user:password`, `*`
/// matches anything, `\` escapes `:` and `\`). A missing or unreadable file gives `None`.
pub fn passfile_lookup(
    path: &Path,
    host: &str,
    port: u16,
    dbname: &str,
    user: &str,
) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let port_text = port.to_string();
    // libpq matches a Unix-socket connection against "localhost" entries.
    let host = if host.starts_with('/') {
        "localhost"
    } else {
        host
    };
    for line in text.lines() {
        if line.trim_start().starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let fields = split_passfile_line(line);
        if fields.len() < 5 {
            continue;
        }
        let matches = |pattern: &str, value: &str| pattern == "*" || pattern == value;
        if matches(&fields[0], host)
            && matches(&fields[1], &port_text)
            && matches(&fields[2], dbname)
            && matches(&fields[3], user)
        {
            return Some(fields[4..].join(":"));
        }
    }
    None
}

fn split_passfile_line(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut current = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => current.extend(chars.next()),
            ':' => fields.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    fields.push(current);
    fields
}

/// Reads the PG* variables of this process.
pub fn env_params() -> Result<ConnParams> {
    ConnParams::from_env(|k| std::env::var(k).ok())
}

/// Test helper: environment from a map.
pub fn env_from_map(map: &HashMap<&str, &str>) -> Result<ConnParams> {
    ConnParams::from_env(|k| map.get(k).map(|v| v.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_beats_environment_beats_file() {
        let env =
            env_from_map(&HashMap::from([("PGPORT", "5433"), ("PGUSER", "envuser")])).unwrap();
        let t = Target::resolve(
            Some("host=filehost port=5000 user=fileuser dbname=filedb"),
            env.clone(),
            None,
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.user.as_str(), t.dbname.as_str()),
            ("filehost", 5433, "envuser", "filedb")
        );
        let t = Target::resolve(
            Some("host=filehost port=5000"),
            env,
            Some("port=6000 dbname=flagdb"),
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.user.as_str(), t.dbname.as_str()),
            ("filehost", 6000, "envuser", "flagdb")
        );
    }

    #[test]
    fn urls_are_accepted_and_passwords_never_shown() {
        let t = Target::from_dsn("postgresql://bench:s3cret@db.example:5444/slob").unwrap();
        assert_eq!(t.port, 5444);
        assert_eq!(t.dbname, "slob");
        let shown = format!("{t} {t:?} {}", t.redacted());
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("host=db.example"));
    }

    #[test]
    fn bad_dsn_and_bad_port_are_usage_errors() {
        let e = ConnParams::from_dsn("host=a port=notaport").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let e = env_from_map(&HashMap::from([("PGPORT", "99999")])).unwrap_err();
        assert!(e.to_string().contains("PGPORT"));
    }

    #[test]
    fn passfile_matches_with_wildcards_and_escapes() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("pgpass");
        std::fs::write(
            &f,
            "# comment\nother:5432:*:bench:wrong\n127.0.0.1:5432:*:bench:pa\\:ss\n*:*:*:*:fallback\n",
        )
        .unwrap();
        assert_eq!(
            passfile_lookup(&f, "127.0.0.1", 5432, "db", "bench").as_deref(),
            Some("pa:ss")
        );
        assert_eq!(
            passfile_lookup(&f, "x", 1, "db", "y").as_deref(),
            Some("fallback")
        );
        assert_eq!(
            passfile_lookup(&dir.path().join("none"), "x", 1, "d", "u"),
            None
        );
    }

    #[test]
    fn loopback_and_sockets_are_local() {
        for (dsn, local) in [
            ("host=127.0.0.1", true),
            ("host=localhost", true),
            ("host=/var/run/postgresql", true),
            ("host=192.0.2.10", false),
        ] {
            assert_eq!(Target::from_dsn(dsn).unwrap().is_local(), local, "{dsn}");
        }
    }
}
