//! Connection strings as libpq reads them: `key=value` lists (values optionally single-quoted,
//! `\` escaping) and `postgresql://` URIs (percent-decoded, query parameters), the PG*
//! environment variables, service files (pg_service.conf), and the redacted DSN dbio records.
//! Every keyword of libpq (PostgreSQL 18, "Parameter Key Words") is known here: dbio honours
//! it, or refuses it by name. None is dropped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{PgError, Result};

/// What dbio does with a libpq keyword.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Support {
    Honoured,
    /// Refused by name, with the reason and what to do instead.
    Refused(&'static str),
}

use Support::{Honoured, Refused};

const NO_GSS: &str = "dbio's connections do not support GSSAPI or Kerberos; use password, md5, \
                      scram-sha-256, cert or trust authentication for dbio's role";

/// Every keyword of libpq's connection strings, with its environment variable.
const KEYWORDS: &[(&str, Option<&str>, Support)] = &[
    ("host", Some("PGHOST"), Honoured),
    ("hostaddr", Some("PGHOSTADDR"), Honoured),
    ("port", Some("PGPORT"), Honoured),
    ("dbname", Some("PGDATABASE"), Honoured),
    ("user", Some("PGUSER"), Honoured),
    ("password", Some("PGPASSWORD"), Honoured),
    ("passfile", Some("PGPASSFILE"), Honoured),
    ("channel_binding", Some("PGCHANNELBINDING"), Honoured),
    ("connect_timeout", Some("PGCONNECT_TIMEOUT"), Honoured),
    ("client_encoding", Some("PGCLIENTENCODING"), Honoured),
    ("options", Some("PGOPTIONS"), Honoured),
    ("application_name", Some("PGAPPNAME"), Honoured),
    ("fallback_application_name", None, Honoured),
    ("keepalives", None, Honoured),
    ("keepalives_idle", None, Honoured),
    ("keepalives_interval", None, Honoured),
    ("keepalives_count", None, Honoured),
    ("tcp_user_timeout", None, Honoured),
    ("sslmode", Some("PGSSLMODE"), Honoured),
    ("requiressl", Some("PGREQUIRESSL"), Honoured),
    ("sslcompression", Some("PGSSLCOMPRESSION"), Honoured),
    ("sslcert", Some("PGSSLCERT"), Honoured),
    ("sslkey", Some("PGSSLKEY"), Honoured),
    ("sslrootcert", Some("PGSSLROOTCERT"), Honoured),
    ("sslsni", Some("PGSSLSNI"), Honoured),
    ("sslcertmode", Some("PGSSLCERTMODE"), Honoured),
    ("sslpassword", None, Honoured),
    ("sslcrl", Some("PGSSLCRL"), Honoured),
    ("sslcrldir", Some("PGSSLCRLDIR"), Honoured),
    (
        "ssl_min_protocol_version",
        Some("PGSSLMINPROTOCOLVERSION"),
        Honoured,
    ),
    (
        "ssl_max_protocol_version",
        Some("PGSSLMAXPROTOCOLVERSION"),
        Honoured,
    ),
    ("sslnegotiation", Some("PGSSLNEGOTIATION"), Honoured),
    ("gssencmode", Some("PGGSSENCMODE"), Honoured),
    ("service", Some("PGSERVICE"), Honoured),
    (
        "target_session_attrs",
        Some("PGTARGETSESSIONATTRS"),
        Honoured,
    ),
    ("load_balance_hosts", Some("PGLOADBALANCEHOSTS"), Honoured),
    (
        "min_protocol_version",
        Some("PGMINPROTOCOLVERSION"),
        Honoured,
    ),
    (
        "max_protocol_version",
        Some("PGMAXPROTOCOLVERSION"),
        Honoured,
    ),
    (
        "sslkeylogfile",
        None,
        Refused("dbio does not write TLS key logs; remove sslkeylogfile"),
    ),
    (
        "requirepeer",
        Some("PGREQUIREPEER"),
        Refused(
            "dbio does not check the Unix-socket peer's user; remove requirepeer or connect over TCP",
        ),
    ),
    (
        "require_auth",
        Some("PGREQUIREAUTH"),
        Refused(
            "dbio does not restrict the server's authentication methods; remove require_auth (sslmode=verify-full and channel_binding=require protect the password)",
        ),
    ),
    (
        "replication",
        None,
        Refused("dbio needs a normal (non-replication) connection; remove replication"),
    ),
    ("krbsrvname", Some("PGKRBSRVNAME"), Refused(NO_GSS)),
    ("gsslib", Some("PGGSSLIB"), Refused(NO_GSS)),
    ("gssdelegation", Some("PGGSSDELEGATION"), Refused(NO_GSS)),
    (
        "oauth_issuer",
        None,
        Refused(
            "dbio does not support OAuth authentication; use a password or a client certificate",
        ),
    ),
    (
        "oauth_client_id",
        None,
        Refused(
            "dbio does not support OAuth authentication; use a password or a client certificate",
        ),
    ),
    (
        "oauth_client_secret",
        None,
        Refused(
            "dbio does not support OAuth authentication; use a password or a client certificate",
        ),
    ),
    (
        "oauth_scope",
        None,
        Refused(
            "dbio does not support OAuth authentication; use a password or a client certificate",
        ),
    ),
];

/// Environment variables libpq turns into session settings (sent as `-c` options).
const SETTING_VARIABLES: &[(&str, &str)] = &[
    ("PGDATESTYLE", "DateStyle"),
    ("PGTZ", "TimeZone"),
    ("PGGEQO", "geqo"),
];

fn support(keyword: &str) -> Option<Support> {
    KEYWORDS
        .iter()
        .find(|(k, _, _)| *k == keyword)
        .map(|(_, _, s)| *s)
}

/// One layer of connection parameters: keyword -> value, only the keywords this layer sets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnParams {
    values: BTreeMap<String, String>,
}

impl ConnParams {
    /// Parses a `key=value` connection string or a `postgresql://` (or `postgres://`) URI.
    /// An unknown keyword, or one dbio refuses, is a usage error naming it.
    pub fn from_dsn(dsn: &str) -> Result<ConnParams> {
        let trimmed = dsn.trim_start();
        let pairs = if trimmed.starts_with("postgresql://") || trimmed.starts_with("postgres://") {
            parse_uri(trimmed)?
        } else {
            parse_key_values(dsn)?
        };
        let mut params = ConnParams::default();
        for (k, v) in pairs {
            params.set(&k, v, "the connection string")?;
        }
        Ok(params)
    }

    /// Reads the PG* variables libpq reads, through `get`. An empty variable counts as unset.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<ConnParams> {
        let mut params = ConnParams::default();
        for (keyword, var, _) in KEYWORDS {
            let Some(var) = var else { continue };
            if let Some(v) = get(var).filter(|v| !v.is_empty()) {
                params.set(keyword, v, var)?;
            }
        }
        let mut settings = Vec::new();
        for (var, setting) in SETTING_VARIABLES {
            if let Some(v) = get(var).filter(|v| !v.is_empty()) {
                settings.push(format!("-c {setting}={}", escape_option(&v)));
            }
        }
        if !settings.is_empty() {
            let options = match params.get("options") {
                Some(o) => format!("{} {o}", settings.join(" ")),
                None => settings.join(" "),
            };
            params.values.insert("options".into(), options);
        }
        Ok(params)
    }

    fn set(&mut self, keyword: &str, value: String, source: &str) -> Result<()> {
        // URIs may spell sslmode=require as ssl=true (libpq's uri-regress).
        if keyword == "ssl" && source == "the connection string" {
            if value == "true" {
                self.values.insert("sslmode".into(), "require".into());
                return Ok(());
            }
            return Err(PgError::Usage(format!(
                "ssl={value} in the connection string: only ssl=true is known (it means sslmode=require)"
            )));
        }
        match support(keyword) {
            None => Err(PgError::Usage(format!(
                "unknown connection keyword `{keyword}` in {source}; the keywords are libpq's \
                 (see the \"Parameter Key Words\" section of the libpq documentation)"
            ))),
            Some(Refused(why)) => Err(PgError::Usage(format!(
                "connection keyword `{keyword}` in {source} is not supported: {why}"
            ))),
            Some(Honoured) => {
                if keyword == "port" {
                    let bad = value
                        .split(',')
                        .map(str::trim)
                        .find(|p| !p.is_empty() && p.parse::<u16>().map_or(true, |n| n == 0));
                    if let Some(p) = bad {
                        return Err(PgError::Usage(format!(
                            "invalid port number \"{p}\" in {source} (1-65535)"
                        )));
                    }
                }
                self.values.insert(keyword.to_string(), value);
                Ok(())
            }
        }
    }

    /// A layer of one keyword, already checked.
    pub(crate) fn single(keyword: &str, value: &str) -> ConnParams {
        let mut values = BTreeMap::new();
        values.insert(keyword.to_string(), value.to_string());
        ConnParams { values }
    }

    pub fn get(&self, keyword: &str) -> Option<&str> {
        self.values.get(keyword).map(String::as_str)
    }

    /// This layer, with every parameter that `higher` sets taken from `higher`.
    pub fn overlaid_by(mut self, higher: ConnParams) -> ConnParams {
        self.values.extend(higher.values);
        self
    }

    pub fn contains(&self, keyword: &str) -> bool {
        self.values.contains_key(keyword)
    }

    /// The parameters of this layer whose keywords `other` sets.
    pub fn only_keys_of(&self, other: &ConnParams) -> ConnParams {
        let mut values = self.values.clone();
        values.retain(|k, _| other.values.contains_key(k));
        ConnParams { values }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The layer as a connection string, values quoted by libpq's rules, without the
    /// password.
    pub fn redacted_dsn(&self) -> String {
        self.values
            .iter()
            // sslpassword unlocks the client key: as secret as the password.
            .filter(|(k, _)| k.as_str() != "password" && k.as_str() != "sslpassword")
            .map(|(k, v)| format!("{k}={}", quote_value(v)))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Quotes a connection-string value when libpq would need it: empty, or holding a space, a
/// quote or a backslash.
pub fn quote_value(v: &str) -> String {
    let plain = !v.is_empty()
        && !v
            .chars()
            .any(|c| c.is_whitespace() || c == '\'' || c == '\\' || c == '=');
    if plain {
        return v.to_string();
    }
    let mut out = String::with_capacity(v.len() + 2);
    out.push('\'');
    for c in v.chars() {
        if c == '\'' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('\'');
    out
}

/// Escapes a value inside `options` (`-c name=value`): spaces and backslashes are escaped
/// with a backslash, as the server splits options on unescaped spaces.
fn escape_option(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        if c == ' ' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `key = value key2='quoted \' value'` (libpq's conninfo_parse).
fn parse_key_values(dsn: &str) -> Result<Vec<(String, String)>> {
    let bad = |what: String| {
        PgError::Usage(format!(
            "the connection string is not valid: {what}; write it as \"host=H port=P user=U dbname=D\" or postgresql://U@H:P/D"
        ))
    };
    let mut out = Vec::new();
    let mut chars = dsn.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Ok(out);
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            key.push(c);
            chars.next();
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.next() != Some('=') {
            return Err(bad(format!("missing \"=\" after \"{key}\"")));
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut value = String::new();
        if chars.peek() == Some(&'\'') {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err(bad(format!("unterminated quoted value of \"{key}\""))),
                    Some('\\') => value.extend(chars.next()),
                    Some('\'') => break,
                    Some(c) => value.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                chars.next();
                if c == '\\' {
                    value.extend(chars.next());
                } else {
                    value.push(c);
                }
            }
        }
        out.push((key, value));
    }
}

/// `postgresql://[user[:password]@][host[:port][,...]][/dbname][?key=value&...]`
/// (libpq's conninfo_uri_parse): parts percent-decoded, IPv6 hosts in brackets.
fn parse_uri(uri: &str) -> Result<Vec<(String, String)>> {
    let bad = |what: &str| {
        PgError::Usage(format!(
            "the connection URI is not valid: {what}; write it as postgresql://user@host:port/dbname?key=value"
        ))
    };
    let rest = uri
        .strip_prefix("postgresql://")
        .or_else(|| uri.strip_prefix("postgres://"))
        .ok_or_else(|| bad("it must start with postgresql://"))?;
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let (authority, dbname) = match rest.split_once('/') {
        Some((a, d)) => (a, Some(d)),
        None => (rest, None),
    };
    let mut out = Vec::new();
    let hostspec = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => {
            let (user, password) = match userinfo.split_once(':') {
                Some((u, p)) => (u, Some(p)),
                None => (userinfo, None),
            };
            if !user.is_empty() {
                out.push(("user".into(), percent_decode(user).map_err(|e| bad(&e))?));
            }
            if let Some(p) = password {
                out.push(("password".into(), percent_decode(p).map_err(|e| bad(&e))?));
            }
            hosts
        }
        None => authority,
    };
    if !hostspec.is_empty() {
        let mut hosts = Vec::new();
        let mut ports = Vec::new();
        for part in hostspec.split(',') {
            let (host, port) = if let Some(v6) = part.strip_prefix('[') {
                let (h, after) = v6
                    .split_once(']')
                    .ok_or_else(|| bad("an IPv6 address is missing its \"]\""))?;
                (h, after.strip_prefix(':'))
            } else {
                match part.rsplit_once(':') {
                    Some((h, p)) => (h, Some(p)),
                    None => (part, None),
                }
            };
            hosts.push(percent_decode(host).map_err(|e| bad(&e))?);
            ports.push(port.unwrap_or("").to_string());
        }
        if hosts.iter().any(|h| !h.is_empty()) {
            out.push(("host".into(), hosts.join(",")));
        }
        if ports.iter().any(|p| !p.is_empty()) {
            out.push(("port".into(), ports.join(",")));
        }
    }
    if let Some(d) = dbname.filter(|d| !d.is_empty()) {
        out.push(("dbname".into(), percent_decode(d).map_err(|e| bad(&e))?));
    }
    for pair in query.into_iter().flat_map(|q| q.split('&')) {
        if pair.is_empty() {
            continue;
        }
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| bad(&format!("the parameter \"{pair}\" has no \"=\"")))?;
        let k = percent_decode(k).map_err(|e| bad(&e))?;
        let v = percent_decode(v).map_err(|e| bad(&e))?;
        out.push((k, v));
    }
    Ok(out)
}

fn percent_decode(s: &str) -> std::result::Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("invalid percent-encoded token in \"{s}\""))?;
            if hex == 0 {
                return Err(format!("forbidden %00 in \"{s}\""));
            }
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("\"{s}\" does not decode to UTF-8"))
}

/// The service file entry `name`: the user's file (PGSERVICEFILE, else ~/.pg_service.conf)
/// first, then the system's (PGSYSCONFDIR/pg_service.conf, else
/// /etc/postgresql-common/pg_service.conf, Debian's libpq default), as libpq searches them.
pub fn service_params(name: &str, get: impl Fn(&str) -> Option<String>) -> Result<ConnParams> {
    let user_file = get("PGSERVICEFILE")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| get("HOME").map(|h| Path::new(&h).join(".pg_service.conf")));
    let sys_file = match get("PGSYSCONFDIR").filter(|v| !v.is_empty()) {
        Some(d) => Path::new(&d).join("pg_service.conf"),
        None => PathBuf::from("/etc/postgresql-common/pg_service.conf"),
    };
    let mut searched = Vec::new();
    for file in user_file.into_iter().chain(std::iter::once(sys_file)) {
        let text = match std::fs::read_to_string(&file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                searched.push(file.display().to_string());
                continue;
            }
            Err(e) => {
                return Err(PgError::Usage(format!(
                    "service file \"{}\" cannot be read: {e}",
                    file.display()
                )));
            }
        };
        searched.push(file.display().to_string());
        if let Some(params) = parse_service_file(&text, name, &file)? {
            return Ok(params);
        }
    }
    Err(PgError::Usage(format!(
        "definition of service \"{name}\" not found (searched {}); add a [{name}] section to \
         ~/.pg_service.conf or the file named by PGSERVICEFILE",
        searched.join(", ")
    )))
}

fn parse_service_file(text: &str, name: &str, file: &Path) -> Result<Option<ConnParams>> {
    let mut in_section = false;
    let mut found = None::<ConnParams>;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(section) = line.strip_prefix('[') {
            if found.is_some() && in_section {
                break;
            }
            in_section = section.strip_suffix(']').map(str::trim) == Some(name);
            if in_section {
                found = Some(ConnParams::default());
            }
            continue;
        }
        if !in_section {
            continue;
        }
        let (k, v) = line.split_once('=').ok_or_else(|| {
            PgError::Usage(format!(
                "syntax error in service file \"{}\", line {}",
                file.display(),
                n + 1
            ))
        })?;
        let source = format!("service \"{name}\" of {}", file.display());
        let key = k.trim();
        if key == "service" {
            return Err(PgError::Usage(format!(
                "nested service specifications are not supported ({source}, line {})",
                n + 1
            )));
        }
        if let Some(p) = found.as_mut() {
            p.set(key, v.trim().to_string(), &source)?;
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_values_with_quotes_and_escapes() {
        let p = ConnParams::from_dsn(
            "host = db1 user='we ird' password='it\\'s' options='-c work_mem=8MB' dbname=a\\ b",
        )
        .unwrap();
        assert_eq!(p.get("host"), Some("db1"));
        assert_eq!(p.get("user"), Some("we ird"));
        assert_eq!(p.get("password"), Some("it's"));
        assert_eq!(p.get("options"), Some("-c work_mem=8MB"));
        assert_eq!(p.get("dbname"), Some("a b"));
        assert!(ConnParams::from_dsn("host='open").is_err());
        assert!(ConnParams::from_dsn("host").is_err());
    }

    #[test]
    fn uris_are_percent_decoded_with_host_lists_and_parameters() {
        let p = ConnParams::from_dsn(
            "postgresql://b%40nch:p%3Ass@h1:5433,[::1]:5434,h3/my%20db?sslmode=verify-full&application_name=nightly",
        )
        .unwrap();
        assert_eq!(p.get("user"), Some("b@nch"));
        assert_eq!(p.get("password"), Some("p:ss"));
        assert_eq!(p.get("host"), Some("h1,::1,h3"));
        assert_eq!(p.get("port"), Some("5433,5434,"));
        assert_eq!(p.get("dbname"), Some("my db"));
        assert_eq!(p.get("sslmode"), Some("verify-full"));
        let p = ConnParams::from_dsn("postgresql://%2Fvar%2Frun%2Fpostgresql/db").unwrap();
        assert_eq!(p.get("host"), Some("/var/run/postgresql"));
        let p = ConnParams::from_dsn("postgres://h/db?ssl=true").unwrap();
        assert_eq!(p.get("sslmode"), Some("require"));
        assert!(ConnParams::from_dsn("postgresql://h/db?bogus=1").is_err());
    }

    #[test]
    fn unknown_and_refused_keywords_are_named() {
        let e = ConnParams::from_dsn("host=h sslmod=require").unwrap_err();
        assert!(e.to_string().contains("`sslmod`"), "{e}");
        assert_eq!(e.kind(), dbio_core::ErrorKind::Usage);
        let e = ConnParams::from_dsn("host=h krbsrvname=postgres").unwrap_err();
        assert!(e.to_string().contains("`krbsrvname`"), "{e}");
        assert!(e.to_string().contains("GSSAPI"), "{e}");
        let env = ConnParams::from_env(|k| (k == "PGREQUIREPEER").then(|| "x".into()));
        assert!(env.unwrap_err().to_string().contains("PGREQUIREPEER"));
    }

    #[test]
    fn setting_variables_become_options() {
        let p = ConnParams::from_env(|k| match k {
            "PGTZ" => Some("Europe/Paris".into()),
            "PGOPTIONS" => Some("-c work_mem=4MB".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(
            p.get("options"),
            Some("-c TimeZone=Europe/Paris -c work_mem=4MB")
        );
    }

    #[test]
    fn redacted_dsn_reads_back_the_same() {
        let p = ConnParams::from_dsn(
            "host=h1,h2 user='we ird' password=secret options='-c a=b' application_name=x\\'y",
        )
        .unwrap();
        let shown = p.redacted_dsn();
        assert!(!shown.contains("secret"), "{shown}");
        let back = ConnParams::from_dsn(&shown).unwrap();
        assert_eq!(back.get("user"), Some("we ird"));
        assert_eq!(back.get("options"), Some("-c a=b"));
        assert_eq!(back.get("application_name"), Some("x'y"));
        assert_eq!(back.get("host"), Some("h1,h2"));
        assert_eq!(back.get("password"), None);
    }

    #[test]
    fn service_files_user_first_then_system() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user.conf");
        let sys = dir.path().join("sys");
        std::fs::create_dir(&sys).unwrap();
        std::fs::write(
            &user,
            "# mine\n[bench]\nhost=h1\nport=5433\n[other]\nhost=nothere\n",
        )
        .unwrap();
        std::fs::write(sys.join("pg_service.conf"), "[sysonly]\ndbname=s\n").unwrap();
        let get = |k: &str| match k {
            "PGSERVICEFILE" => Some(user.display().to_string()),
            "PGSYSCONFDIR" => Some(sys.display().to_string()),
            _ => None,
        };
        let p = service_params("bench", get).unwrap();
        assert_eq!((p.get("host"), p.get("port")), (Some("h1"), Some("5433")));
        let p = service_params("sysonly", get).unwrap();
        assert_eq!(p.get("dbname"), Some("s"));
        let e = service_params("missing", get).unwrap_err();
        assert!(e.to_string().contains("\"missing\" not found"), "{e}");
    }
}
