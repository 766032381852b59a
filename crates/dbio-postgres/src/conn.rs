//! Where and how to connect, following libpq: a connection string (`dsn`), the PG*
//! environment variables, a service file entry, the password file, and libpq's defaults.
//! dbio's precedence is flag > environment > file > default, applied per keyword, so
//! `PGPORT=5433` overrides the port of the file's DSN but not the port of a `--dsn` flag; a
//! service's entries fill what no DSN sets and beat the environment, as in libpq.
//!
//! Every connection dbio opens goes through here: `Target::connect` for tokio-postgres
//! (preflight, loader, collector, sampler, admin) and `wire` for the measured sessions, with
//! the same host list, TLS, options, application_name and keepalive settings.

use std::io::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, RecyclingMethod};
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{Client, NoTls, Socket};

pub use crate::dsn::ConnParams;
use crate::dsn::{quote_value, service_params};
use crate::error::{PgError, Result, source_chain};
use crate::sql;
use crate::tls::{ChannelBindingMode, SslMode, TlsRequest, TlsSettings, describe_handshake_error};

/// One server of the host list: the name (or socket folder), the address to use instead of
/// resolving it (`hostaddr`), and the port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    /// Host name, IP address or Unix-socket folder; empty when only `hostaddr` is given.
    pub host: String,
    pub hostaddr: Option<IpAddr>,
    pub port: u16,
}

impl HostSpec {
    pub fn is_unix(&self) -> bool {
        self.hostaddr.is_none() && self.host.starts_with('/')
    }

    /// The name used for TLS verification and the password file: the host, else hostaddr.
    pub fn name(&self) -> String {
        match (&self.host, self.hostaddr) {
            (h, _) if !h.is_empty() => h.clone(),
            (_, Some(a)) => a.to_string(),
            _ => "localhost".into(),
        }
    }

    /// `host=... [hostaddr=...] port=...` for messages.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        if !self.host.is_empty() {
            out.push_str(&format!("host={} ", quote_value(&self.host)));
        }
        if let Some(a) = self.hostaddr {
            out.push_str(&format!("hostaddr={a} "));
        }
        out.push_str(&format!("port={}", self.port));
        out
    }
}

/// libpq's `target_session_attrs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionAttrs {
    Any,
    ReadWrite,
    ReadOnly,
    Primary,
    Standby,
    PreferStandby,
}

impl SessionAttrs {
    fn parse(v: &str) -> Result<SessionAttrs> {
        Ok(match v {
            "any" => SessionAttrs::Any,
            "read-write" => SessionAttrs::ReadWrite,
            "read-only" => SessionAttrs::ReadOnly,
            "primary" => SessionAttrs::Primary,
            "standby" => SessionAttrs::Standby,
            "prefer-standby" => SessionAttrs::PreferStandby,
            _ => {
                return Err(PgError::Usage(format!(
                    "invalid target_session_attrs value: \"{v}\"; use any, read-write, read-only, primary, standby or prefer-standby"
                )));
            }
        })
    }

    /// The passes over the host list: prefer-standby looks for a standby first, then takes
    /// any server (libpq's second pass).
    pub(crate) fn passes(self) -> &'static [SessionAttrs] {
        match self {
            SessionAttrs::PreferStandby => &[SessionAttrs::Standby, SessionAttrs::Any],
            SessionAttrs::Any => &[SessionAttrs::Any],
            SessionAttrs::ReadWrite => &[SessionAttrs::ReadWrite],
            SessionAttrs::ReadOnly => &[SessionAttrs::ReadOnly],
            SessionAttrs::Primary => &[SessionAttrs::Primary],
            SessionAttrs::Standby => &[SessionAttrs::Standby],
        }
    }

    /// Whether a server in this state fits; the reason when it does not.
    pub fn check(
        self,
        in_recovery: bool,
        read_only: bool,
    ) -> std::result::Result<(), AttrsMismatch> {
        match self {
            SessionAttrs::Any | SessionAttrs::PreferStandby => Ok(()),
            SessionAttrs::ReadWrite if read_only => Err(AttrsMismatch::ReadOnly),
            SessionAttrs::ReadOnly if !read_only => Err(AttrsMismatch::NotReadOnly),
            SessionAttrs::Primary if in_recovery => Err(AttrsMismatch::HotStandby),
            SessionAttrs::Standby if !in_recovery => Err(AttrsMismatch::NotHotStandby),
            _ => Ok(()),
        }
    }
}

/// Why a server does not fit target_session_attrs, in libpq's words (fe-connect.c).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AttrsMismatch {
    #[error("session is read-only")]
    ReadOnly,
    #[error("session is not read-only")]
    NotReadOnly,
    #[error("server is in hot standby mode")]
    HotStandby,
    #[error("server is not in hot standby mode")]
    NotHotStandby,
}

/// TCP keepalive and TCP_USER_TIMEOUT of every TCP connection. Where the DSN says nothing,
/// dbio's defaults detect a dead server or a partitioned network within about a minute
/// instead of the kernel's two hours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    pub enabled: bool,
    pub idle: Duration,
    pub interval: Duration,
    pub count: u32,
    /// Zero: the system default.
    pub user_timeout: Duration,
}

impl Default for Keepalive {
    fn default() -> Keepalive {
        Keepalive {
            enabled: true,
            idle: Duration::from_secs(30),
            interval: Duration::from_secs(10),
            count: 3,
            user_timeout: Duration::from_secs(60),
        }
    }
}

/// A resolved connection target: every parameter known, the password kept out of `Display`.
#[derive(Clone)]
pub struct Target {
    /// The servers to try, in order.
    pub hosts: Vec<HostSpec>,
    pub user: String,
    pub dbname: String,
    password: Option<String>,
    /// The password file to read, when it may be used.
    passfile: Option<PathBuf>,
    pub connect_timeout: Duration,
    /// `options`: command-line options sent to the server at connection start (every
    /// session, the measured ones included).
    pub options: Option<String>,
    /// `application_name`, put before dbio's own names: `myapp/dbio-reader-1`.
    pub application_prefix: Option<String>,
    pub keepalive: Keepalive,
    pub tls: TlsSettings,
    pub session_attrs: SessionAttrs,
    /// The keywords that are not resolved into fields, kept for the recorded DSN.
    recorded: ConnParams,
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

fn parse_seconds(keyword: &str, v: &str) -> Result<Duration> {
    v.trim()
        .parse::<u64>()
        .map(Duration::from_secs)
        .map_err(|_| {
            PgError::Usage(format!(
                "invalid integer value \"{v}\" for connection option \"{keyword}\" (seconds)"
            ))
        })
}

fn parse_millis(keyword: &str, v: &str) -> Result<Duration> {
    v.trim()
        .parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|_| {
            PgError::Usage(format!(
                "invalid integer value \"{v}\" for connection option \"{keyword}\" (milliseconds)"
            ))
        })
}

fn parse_bool01(keyword: &str, v: &str) -> Result<bool> {
    match v.trim() {
        "1" => Ok(true),
        "0" => Ok(false),
        _ => Err(PgError::Usage(format!(
            "invalid value \"{v}\" for connection option \"{keyword}\"; use 1 or 0"
        ))),
    }
}

/// Splits a comma-separated list as libpq does (host=a,b port=1,2).
fn split_list(v: &str) -> Vec<String> {
    v.split(',').map(|s| s.trim().to_string()).collect()
}

/// The keywords not recorded as given: the host list, port, user and database are written
/// from the resolved fields, a service's values are recorded in its place, and the password
/// never.
const RESOLVED_KEYWORDS: &[&str] = &[
    "host", "hostaddr", "port", "user", "dbname", "password", "service",
];

impl Target {
    /// Merges the layers (file < environment < flag, a service entry below the DSNs and
    /// above the environment) and fills libpq's defaults: host `localhost`, port 5432, user
    /// `$USER`, database = user, password from the passfile.
    pub fn resolve(
        file_dsn: Option<&str>,
        env: ConnParams,
        flag_dsn: Option<&str>,
        connect_timeout: Duration,
    ) -> Result<Target> {
        Target::resolve_with(file_dsn, env, flag_dsn, connect_timeout, |k| {
            std::env::var(k).ok()
        })
    }

    /// `resolve`, with the process environment (HOME, USER, PGSERVICEFILE, PGSYSCONFDIR) read
    /// through `get`.
    pub fn resolve_with(
        file_dsn: Option<&str>,
        env: ConnParams,
        flag_dsn: Option<&str>,
        connect_timeout: Duration,
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Target> {
        let file = match file_dsn {
            Some(d) => ConnParams::from_dsn(d)?,
            None => ConnParams::default(),
        };
        let flag = match flag_dsn {
            Some(d) => ConnParams::from_dsn(d)?,
            None => ConnParams::default(),
        };
        let in_dsn = file.clone().overlaid_by(flag.clone());
        let explicit = file.overlaid_by(env.clone()).overlaid_by(flag);
        // A service named in a DSN (or PGSERVICE) fills what the DSNs leave unset and beats
        // the environment for those keywords (libpq: conninfo > service > environment).
        let p = match explicit.get("service") {
            Some(name) => env
                .overlaid_by(service_params(name, &get)?)
                .overlaid_by(explicit.only_keys_of(&in_dsn)),
            None => explicit,
        };
        Target::from_params(p, connect_timeout, &get)
    }
}

impl Target {
    fn from_params(
        p: ConnParams,
        config_timeout: Duration,
        get: &impl Fn(&str) -> Option<String>,
    ) -> Result<Target> {
        let hosts = host_list(&p)?;
        let user = p
            .get("user")
            .map(str::to_string)
            .or_else(|| get("USER").filter(|u| !u.is_empty()))
            .unwrap_or_else(|| "postgres".into());
        let dbname = p
            .get("dbname")
            .filter(|d| !d.is_empty())
            .map(str::to_string)
            .unwrap_or_else(|| user.clone());
        let home = get("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
        let passfile = match p.get("passfile") {
            Some(f) => Some(PathBuf::from(f)),
            None => home.as_ref().map(|h| h.join(".pgpass")),
        };
        let passfile = passfile.filter(|f| passfile_usable(f));
        // libpq takes a zero or negative connect_timeout as "wait forever" and anything
        // below 2 s as 2 s; dbio keeps its own bound (target.connect_timeout) for "forever".
        let connect_timeout = match p.get("connect_timeout") {
            Some(v) => {
                let secs: i64 = v.trim().parse().map_err(|_| {
                    PgError::Usage(format!(
                        "invalid integer value \"{v}\" for connection option \"connect_timeout\""
                    ))
                })?;
                if secs <= 0 {
                    config_timeout
                } else {
                    Duration::from_secs(secs.max(2) as u64)
                }
            }
            None => config_timeout,
        };
        let defaults = Keepalive::default();
        let keepalive = Keepalive {
            enabled: match p.get("keepalives") {
                Some(v) => parse_bool01("keepalives", v)?,
                None => defaults.enabled,
            },
            idle: match p.get("keepalives_idle") {
                Some(v) => parse_seconds("keepalives_idle", v)?,
                None => defaults.idle,
            },
            interval: match p.get("keepalives_interval") {
                Some(v) => parse_seconds("keepalives_interval", v)?,
                None => defaults.interval,
            },
            count: match p.get("keepalives_count") {
                Some(v) => v.trim().parse().map_err(|_| {
                    PgError::Usage(format!(
                        "invalid integer value \"{v}\" for connection option \"keepalives_count\""
                    ))
                })?,
                None => defaults.count,
            },
            user_timeout: match p.get("tcp_user_timeout") {
                Some(v) => parse_millis("tcp_user_timeout", v)?,
                None => defaults.user_timeout,
            },
        };
        let sslmode = match p.get("requiressl") {
            // requiressl=1 is the old spelling of sslmode=require; sslmode wins when both.
            Some(v) if parse_bool01("requiressl", v)? && !p.contains("sslmode") => {
                Some("require".to_string())
            }
            _ => p.get("sslmode").map(str::to_string),
        };
        let tls = TlsSettings::resolve(&TlsRequest {
            sslmode,
            sslrootcert: p.get("sslrootcert").map(str::to_string),
            sslcrl: p.get("sslcrl").map(str::to_string),
            sslcrldir: p.get("sslcrldir").map(str::to_string),
            sslcert: p.get("sslcert").map(str::to_string),
            sslkey: p.get("sslkey").map(str::to_string),
            sslpassword: p.get("sslpassword").map(str::to_string),
            sslcertmode: p.get("sslcertmode").map(str::to_string),
            sslsni: p.get("sslsni").map(str::to_string),
            min_version: p.get("ssl_min_protocol_version").map(str::to_string),
            max_version: p.get("ssl_max_protocol_version").map(str::to_string),
            channel_binding: p.get("channel_binding").map(str::to_string),
            home,
        })?;
        check_fixed_choices(&p)?;
        // libpq checks the certificate against `host`, never `hostaddr`.
        if tls.mode == SslMode::VerifyFull
            && hosts.iter().any(|h| h.host.is_empty() && !h.is_unix())
        {
            return Err(PgError::Usage(
                "host name must be specified for a verified SSL connection: add host=NAME (the name the server's certificate was issued for) beside hostaddr, or use sslmode=verify-ca".into(),
            ));
        }
        let session_attrs = match p.get("target_session_attrs") {
            Some(v) => SessionAttrs::parse(v)?,
            None => SessionAttrs::Any,
        };
        let application_prefix = p
            .get("application_name")
            .or_else(|| p.get("fallback_application_name"))
            .filter(|v| !v.is_empty())
            .map(str::to_string);
        let options = p
            .get("options")
            .filter(|v| !v.trim().is_empty())
            .map(str::to_string);
        let mut recorded = ConnParams::default();
        for (k, v) in p.iter() {
            if !RESOLVED_KEYWORDS.contains(&k) {
                recorded = recorded.overlaid_by(ConnParams::single(k, v));
            }
        }
        Ok(Target {
            hosts,
            user,
            dbname,
            password: p.get("password").map(str::to_string),
            passfile,
            connect_timeout,
            options,
            application_prefix,
            keepalive,
            tls,
            session_attrs,
            recorded,
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

    /// The target as a connection string that libpq (and dbio) reads back: the resolved
    /// host list, port, user and database first, then every other keyword that was set,
    /// values quoted by libpq's rules, never the password.
    pub fn redacted(&self) -> String {
        let join = |f: &dyn Fn(&HostSpec) -> String| {
            self.hosts.iter().map(f).collect::<Vec<_>>().join(",")
        };
        let mut parts = Vec::new();
        if self.hosts.iter().any(|h| !h.host.is_empty()) {
            parts.push(format!("host={}", quote_value(&join(&|h| h.host.clone()))));
        }
        if self.hosts.iter().any(|h| h.hostaddr.is_some()) {
            parts.push(format!(
                "hostaddr={}",
                quote_value(&join(&|h| h
                    .hostaddr
                    .map(|a| a.to_string())
                    .unwrap_or_default()))
            ));
        }
        parts.push(format!("port={}", join(&|h| h.port.to_string())));
        parts.push(format!("user={}", quote_value(&self.user)));
        parts.push(format!("dbname={}", quote_value(&self.dbname)));
        let rest = self.recorded.redacted_dsn();
        if !rest.is_empty() {
            parts.push(rest);
        }
        parts.join(" ")
    }

    /// The password for this server: the DSN's or PGPASSWORD, else the password file's entry.
    pub fn password_for(&self, host: &HostSpec) -> Option<String> {
        if let Some(pw) = &self.password {
            return Some(pw.clone());
        }
        let file = self.passfile.as_ref()?;
        passfile_lookup(file, &host.name(), host.port, &self.dbname, &self.user)
    }

    /// This target with only `host` in its host list (what a connection settled on).
    pub fn pinned_to(&self, host: &HostSpec) -> Target {
        Target {
            hosts: vec![host.clone()],
            ..self.clone()
        }
    }

    /// The application_name a connection of dbio's named `own` reports:
    /// `application_name/own` when the DSN gives one, else `own`.
    pub fn application_name(&self, own: &str) -> String {
        match &self.application_prefix {
            Some(p) => format!("{p}/{own}"),
            None => own.to_string(),
        }
    }

    /// True when the server runs on this host (a Unix socket or a loopback address), so
    /// /proc and the page cache of this host are the server's. With a host list, the first.
    pub fn is_local(&self) -> bool {
        let Some(h) = self.hosts.first() else {
            return true;
        };
        if let Some(a) = h.hostaddr {
            return a.is_loopback();
        }
        if h.host.starts_with('/') || h.host == "localhost" {
            return true;
        }
        match h.host.parse::<IpAddr>() {
            Ok(ip) => ip.is_loopback(),
            Err(_) => hostname().is_some_and(|n| n == h.host),
        }
    }

    /// The tokio-postgres configuration of one server of the list, with `sslmode` given.
    fn pg_config(
        &self,
        host: &HostSpec,
        application_name: &str,
        ssl: SslMode,
    ) -> tokio_postgres::Config {
        use tokio_postgres::config::{ChannelBinding, SslMode as TpSsl};
        let mut cfg = tokio_postgres::Config::new();
        if !host.host.is_empty() {
            cfg.host(&host.host);
        } else if let Some(a) = host.hostaddr {
            cfg.host(a.to_string());
        }
        if let Some(a) = host.hostaddr {
            cfg.hostaddr(a);
        }
        cfg.port(host.port)
            .user(&self.user)
            .dbname(&self.dbname)
            .application_name(self.application_name(application_name))
            .connect_timeout(self.connect_timeout)
            .keepalives(self.keepalive.enabled)
            .keepalives_idle(self.keepalive.idle)
            .keepalives_interval(self.keepalive.interval)
            .keepalives_retries(self.keepalive.count);
        if !self.keepalive.user_timeout.is_zero() {
            cfg.tcp_user_timeout(self.keepalive.user_timeout);
        }
        if let Some(o) = &self.options {
            cfg.options(o);
        }
        cfg.ssl_mode(match ssl {
            SslMode::Disable | SslMode::Allow => TpSsl::Disable,
            SslMode::Prefer => TpSsl::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => TpSsl::Require,
        });
        cfg.channel_binding(match self.tls.channel_binding {
            ChannelBindingMode::Disable => ChannelBinding::Disable,
            ChannelBindingMode::Prefer => ChannelBinding::Prefer,
            ChannelBindingMode::Require => ChannelBinding::Require,
        });
        if let Some(pw) = self.password_for(host) {
            cfg.password(pw);
        }
        cfg
    }

    /// A connection pool manager for the first server of the list (the loader pins the
    /// target to the server its admin connection reached first).
    pub fn pool_manager(&self, application_name: &str) -> Result<Manager> {
        let host = self
            .hosts
            .first()
            .ok_or_else(|| PgError::Usage("the target names no host".into()))?;
        let mode = self.mode_for(host);
        let cfg = self.pg_config(host, application_name, mode);
        let mgr_config = ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        Ok(match (&self.tls.connector, mode) {
            (Some(tls), m) if m != SslMode::Disable && m != SslMode::Allow => {
                Manager::from_config(cfg, tls.make_tls_connect(), mgr_config)
            }
            _ => Manager::from_config(cfg, NoTls, mgr_config),
        })
    }

    /// The sslmode used for `host`: Unix sockets never use TLS (libpq: sslmode is ignored
    /// for Unix-domain sockets).
    pub fn mode_for(&self, host: &HostSpec) -> SslMode {
        if host.is_unix() {
            SslMode::Disable
        } else {
            self.tls.mode
        }
    }

    /// Opens one connection and spawns its driver task (preflight, loader, collector; the
    /// measured sessions use `wire`): the servers of the host list in order, each with the
    /// sslmode's attempts, until one fits target_session_attrs. Errors name the target and
    /// say what to check.
    pub async fn connect(&self, application_name: &str) -> Result<Client> {
        self.connect_pinned(application_name).await.map(|(c, _)| c)
    }

    /// `connect`, also returning the target pinned to the server that answered (and, for
    /// sslmode=allow, to the attempt that worked there).
    pub async fn connect_pinned(&self, application_name: &str) -> Result<(Client, Target)> {
        let mut failures: Vec<(HostSpec, PgError)> = Vec::new();
        for attrs in self.session_attrs.passes() {
            for host in &self.hosts {
                let (client, mode) = match self.connect_host(host, application_name).await {
                    Ok(pair) => pair,
                    Err(e) => {
                        failures.push((host.clone(), e));
                        continue;
                    }
                };
                if *attrs != SessionAttrs::Any {
                    let row = client.query_one(sql::SESSION_STATE, &[]).await;
                    let fits = match &row {
                        Ok(r) => match (r.try_get::<_, bool>(0), r.try_get::<_, String>(1)) {
                            (Ok(recovery), Ok(ro)) => {
                                attrs.check(recovery, ro == "on").map_err(|m| m.to_string())
                            }
                            _ => Err("cannot read the server's state".into()),
                        },
                        Err(e) => Err(source_chain(e)),
                    };
                    if let Err(why) = fits {
                        failures.push((host.clone(), self.attrs_mismatch(host, why)));
                        continue;
                    }
                }
                let mut pinned = self.pinned_to(host);
                pinned.tls.mode = mode;
                return Ok((client, pinned));
            }
        }
        Err(self.all_failed(failures))
    }

    /// A server that answered but does not fit target_session_attrs.
    pub(crate) fn attrs_mismatch(&self, host: &HostSpec, why: String) -> PgError {
        PgError::Connect {
            target: self.pinned_to(host).redacted(),
            cause: why,
            hint: format!(
                "target_session_attrs={} asks for another kind of server: list one that fits in host, or change target_session_attrs",
                self.recorded.get("target_session_attrs").unwrap_or("any")
            ),
        }
    }

    /// One error for a failed host list: the failure itself for one host, every host's
    /// reason for several.
    pub(crate) fn all_failed(&self, mut failures: Vec<(HostSpec, PgError)>) -> PgError {
        if failures.len() == 1 {
            return failures.remove(0).1;
        }
        let causes = failures
            .iter()
            .map(|(h, e)| match e {
                PgError::Connect { cause, .. } => format!("{}: {cause}", h.describe()),
                other => format!("{}: {other}", h.describe()),
            })
            .collect::<Vec<_>>()
            .join("; ");
        let hint = failures
            .iter()
            .rev()
            .find_map(|(_, e)| match e {
                PgError::Connect { hint, .. } if !hint.is_empty() => Some(hint.clone()),
                _ => None,
            })
            .unwrap_or_else(|| {
                format!(
                    "no server of the host list fits target_session_attrs={}",
                    self.recorded.get("target_session_attrs").unwrap_or("any")
                )
            });
        PgError::Connect {
            target: self.redacted(),
            cause: format!("every host failed: {causes}"),
            hint,
        }
    }

    /// The sslmode of the first attempt on `host` and, for sslmode=allow, of the second (TLS,
    /// when the server refused plaintext): Unix sockets and a target without TLS settings
    /// are plaintext only.
    fn attempts(&self, host: &HostSpec) -> (SslMode, Option<SslMode>) {
        match (self.mode_for(host), &self.tls.connector) {
            (SslMode::Disable, _) | (_, None) => (SslMode::Disable, None),
            (SslMode::Allow, Some(_)) => (SslMode::Disable, Some(SslMode::Require)),
            (mode, Some(_)) => (mode, None),
        }
    }

    /// The TLS connector an attempt in `mode` uses; None for plaintext.
    fn connector_for(&self, mode: SslMode) -> Option<&crate::tls::Connector> {
        match mode {
            SslMode::Disable | SslMode::Allow => None,
            _ => self.tls.connector.as_ref(),
        }
    }

    /// A failed attempt after which sslmode=allow tries TLS: the server answered and refused
    /// (pg_hba hostssl), as opposed to not answering at all.
    fn refused_plaintext(e: &PgError) -> bool {
        matches!(e, PgError::Connect { cause, .. } if cause.contains("SQLSTATE"))
    }

    /// One server, with the sslmode's attempts (allow: plaintext, then TLS; the others one
    /// attempt). The second value is the sslmode that worked (allow becomes disable or
    /// require).
    async fn connect_host(
        &self,
        host: &HostSpec,
        application_name: &str,
    ) -> Result<(Client, SslMode)> {
        let (first, retry) = self.attempts(host);
        let once = |mode: SslMode| async move {
            let cfg = self.pg_config(host, application_name, mode);
            match self.connector_for(mode) {
                Some(tls) => self.attempt(host, cfg, tls.make_tls_connect()).await,
                None => self.attempt(host, cfg, NoTls).await,
            }
        };
        match (once(first).await, retry) {
            (Err(e), Some(tls)) if Self::refused_plaintext(&e) => once(tls).await.map(|c| (c, tls)),
            (r, _) => r.map(|c| (c, first)),
        }
    }

    /// A blocking connection (the `postgres` crate) through the same host list, sslmode
    /// attempts, TLS, password file and errors as [`Target::connect`]: the results store's.
    /// Call it off the async runtime (a blocking thread).
    pub fn connect_blocking(&self, application_name: &str) -> Result<postgres::Client> {
        let mut failures: Vec<(HostSpec, PgError)> = Vec::new();
        for attrs in self.session_attrs.passes() {
            for host in &self.hosts {
                let one = self.pinned_to(host);
                let (first, retry) = self.attempts(host);
                let once = |mode: SslMode| {
                    let cfg = postgres::Config::from(self.pg_config(host, application_name, mode));
                    let connected = match self.connector_for(mode) {
                        Some(tls) => cfg.connect(tls.make_tls_connect()),
                        None => cfg.connect(NoTls),
                    };
                    connected.map_err(|e| one.connect_error(&e))
                };
                let connected = match (once(first), retry) {
                    (Err(e), Some(tls)) if Self::refused_plaintext(&e) => once(tls),
                    (r, _) => r,
                };
                let mut client = match connected {
                    Ok(c) => c,
                    Err(e) => {
                        failures.push((host.clone(), e));
                        continue;
                    }
                };
                if *attrs != SessionAttrs::Any {
                    let fits = match client.query_one(sql::SESSION_STATE, &[]) {
                        Ok(r) => match (r.try_get::<_, bool>(0), r.try_get::<_, String>(1)) {
                            (Ok(recovery), Ok(ro)) => {
                                attrs.check(recovery, ro == "on").map_err(|m| m.to_string())
                            }
                            _ => Err("cannot read the server's state".into()),
                        },
                        Err(e) => Err(source_chain(&e)),
                    };
                    if let Err(why) = fits {
                        failures.push((host.clone(), self.attrs_mismatch(host, why)));
                        continue;
                    }
                }
                client
                    .batch_execute(crate::sql::OWN_SETTINGS)
                    .map_err(|e| {
                        PgError::from_db(
                            "setting dbio's own statement_timeout and idle timeouts",
                            &e,
                        )
                    })?;
                return Ok(client);
            }
        }
        Err(self.all_failed(failures))
    }

    async fn attempt<T>(
        &self,
        host: &HostSpec,
        cfg: tokio_postgres::Config,
        tls: T,
    ) -> Result<Client>
    where
        T: MakeTlsConnect<Socket>,
        T::Stream: Send + 'static,
    {
        // The timeout also covers hosts that accept TCP but never answer.
        let attempt = tokio::time::timeout(
            self.connect_timeout + Duration::from_secs(1),
            cfg.connect(tls),
        )
        .await;
        let one = self.pinned_to(host);
        match attempt {
            Err(_) => Err(one.no_answer()),
            Ok(Err(e)) => Err(one.connect_error(&e)),
            Ok(Ok((client, connection))) => {
                tokio::spawn(connection);
                // A role's own statement_timeout or idle timeouts must not cancel dbio's
                // catalog work or close the collector's idle connection.
                client
                    .batch_execute(crate::sql::OWN_SETTINGS)
                    .await
                    .map_err(|e| {
                        PgError::from_db(
                            "setting dbio's own statement_timeout and idle timeouts",
                            &e,
                        )
                    })?;
                Ok(client)
            }
        }
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

    pub(crate) fn no_answer(&self) -> PgError {
        PgError::Connect {
            target: self.redacted(),
            cause: format!("no answer within {} s", self.connect_timeout.as_secs()),
            hint: "check the host and port, firewalls, and target.connect_timeout (or connect_timeout in the DSN)".into(),
        }
    }

    fn connect_error(&self, e: &tokio_postgres::Error) -> PgError {
        match e.as_db_error() {
            Some(db) => self.server_refused(db.code().code(), db.message(), db.detail(), db.hint()),
            None => self.unreachable(source_chain(e)),
        }
    }

    /// The server answered and refused the connection.
    /// The server's DETAIL and HINT are kept in the cause, as for any statement's error.
    pub(crate) fn server_refused(
        &self,
        code: &str,
        message: &str,
        detail: Option<&str>,
        server_hint: Option<&str>,
    ) -> PgError {
        let hint = match code {
            "28000" if message.contains("no encryption") => format!(
                "pg_hba.conf has no entry for a plaintext connection (it may accept only hostssl): connect with sslmode=require (or verify-full) instead of sslmode={}",
                self.tls.mode.as_str()
            ),
            _ => crate::error::connect_hint(code, message, &self.user, &self.dbname),
        };
        PgError::Connect {
            target: self.redacted(),
            cause: crate::error::server_words(message, code, None, detail, server_hint),
            hint,
        }
    }

    /// No server answered, or it asked for what dbio cannot give.
    pub(crate) fn unreachable(&self, cause: String) -> PgError {
        let first = self.hosts.first();
        let host = first.map(HostSpec::name).unwrap_or_default();
        let port = first.map(|h| h.port).unwrap_or(5432);
        let (cause, hint) = if cause.contains("server does not support TLS")
            || cause.contains("server does not support SSL")
        {
            (
                "server does not support SSL, but SSL was required".into(),
                format!(
                    "turn ssl on in the server's postgresql.conf, or use sslmode=prefer (or disable) instead of sslmode={}; no password was sent",
                    self.tls.mode.as_str()
                ),
            )
        } else if cause.contains("TLS") || cause.contains("certificate") || cause.contains("tls") {
            (
                describe_handshake_error(&cause, &host),
                format!(
                    "the server's certificate failed sslmode={} checks; no password was sent",
                    self.tls.mode.as_str()
                ),
            )
        } else if cause.contains("channel binding") {
            (
                cause,
                "channel_binding=require needs a TLS connection and SCRAM-SHA-256 authentication (pg_hba.conf scram-sha-256): set channel_binding=prefer to allow others".into(),
            )
        } else {
            let hint = crate::error::unreachable_hint(&host, port, &self.user, &cause);
            (cause, hint)
        };
        PgError::Connect {
            target: self.redacted(),
            hint,
            cause,
        }
    }
}

/// Keywords whose only supported values are libpq's defaults, checked so that another
/// value is refused by name rather than ignored.
fn check_fixed_choices(p: &ConnParams) -> Result<()> {
    let refuse = |k: &str, v: &str, why: &str| {
        Err(PgError::Usage(format!(
            "connection keyword `{k}={v}` is not supported: {why}"
        )))
    };
    if let Some(v) = p.get("client_encoding")
        && !matches!(v.to_ascii_uppercase().as_str(), "UTF8" | "UTF-8" | "AUTO")
    {
        return refuse(
            "client_encoding",
            v,
            "dbio's connections speak UTF8; remove it or use UTF8",
        );
    }
    if let Some(v) = p.get("gssencmode")
        && !matches!(v, "disable" | "prefer")
    {
        return refuse(
            "gssencmode",
            v,
            "dbio has no GSSAPI encryption; use TLS (sslmode) instead",
        );
    }
    if let Some(v) = p.get("sslnegotiation")
        && v != "postgres"
    {
        return refuse(
            "sslnegotiation",
            v,
            "dbio negotiates TLS the PostgreSQL way (an SSLRequest first); remove it or use postgres",
        );
    }
    if let Some(v) = p.get("sslcompression")
        && v != "0"
        && v != "1"
    {
        return refuse(
            "sslcompression",
            v,
            "use 0 or 1 (it has no effect since PostgreSQL 14, as in libpq)",
        );
    }
    for k in ["min_protocol_version", "max_protocol_version"] {
        if let Some(v) = p.get(k)
            && v != "3.0"
            && v != "latest"
        {
            return refuse(k, v, "dbio speaks protocol 3.0; remove it or use 3.0");
        }
    }
    if let Some(v) = p.get("load_balance_hosts") {
        match v {
            "disable" => {}
            "random" => {
                return refuse(
                    "load_balance_hosts",
                    v,
                    "dbio measures one server, and its collector must see the server its sessions use; list the hosts in the order to try (load_balance_hosts=disable)",
                );
            }
            _ => return refuse("load_balance_hosts", v, "use disable or random"),
        }
    }
    Ok(())
}

/// The host list: host and hostaddr lists of the same length (or one of them absent), and a
/// port list of that length or a single port for all; empty entries take the defaults.
fn host_list(p: &ConnParams) -> Result<Vec<HostSpec>> {
    let hosts = p.get("host").map(split_list);
    let addrs = p.get("hostaddr").map(split_list);
    let count = match (&hosts, &addrs) {
        (Some(h), Some(a)) if h.len() != a.len() => {
            return Err(PgError::Usage(format!(
                "could not match {} host names to {} hostaddr values",
                h.len(),
                a.len()
            )));
        }
        (Some(h), _) => h.len(),
        (None, Some(a)) => a.len(),
        (None, None) => 1,
    };
    let ports = match p.get("port") {
        Some(v) => split_list(v),
        None => vec![String::new()],
    };
    if ports.len() != 1 && ports.len() != count {
        return Err(PgError::Usage(format!(
            "could not match {} port numbers to {count} hosts",
            ports.len()
        )));
    }
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let hostaddr = match addrs.as_ref().map(|a| a[i].as_str()) {
            Some("") | None => None,
            Some(a) => Some(a.parse::<IpAddr>().map_err(|_| {
                PgError::Usage(format!(
                    "could not parse network address \"{a}\" (hostaddr takes an IP address; use host for names)"
                ))
            })?),
        };
        let mut host = hosts.as_ref().map(|h| h[i].clone()).unwrap_or_default();
        if host.is_empty() && hostaddr.is_none() {
            host = "localhost".into();
        }
        let port_text = if ports.len() == 1 {
            &ports[0]
        } else {
            &ports[i]
        };
        let port = if port_text.is_empty() {
            5432
        } else {
            port_text
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| {
                    PgError::Usage(format!("invalid port number: \"{port_text}\" (1-65535)"))
                })?
        };
        out.push(HostSpec {
            host,
            hostaddr,
            port,
        });
    }
    Ok(out)
}

/// libpq's check of the password file: a regular file, not readable by group or world
/// (else ignored with libpq's warning).
fn passfile_usable(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    if !meta.is_file() {
        return false;
    }
    if meta.mode() & 0o077 != 0 {
        // libpq's warning, word for word; a closed stderr is no reason to fail.
        let _ = writeln!(
            std::io::stderr(),
            "WARNING: password file \"{}\" has group or world access; permissions should be u=rw (0600) or less",
            dbio_core::text::printable(&path.display().to_string())
        );
        return false;
    }
    true
}

fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// The environment of a map.
    fn env_from_map(map: &HashMap<&str, &str>) -> Result<ConnParams> {
        ConnParams::from_env(|k| map.get(k).map(|v| v.to_string()))
    }

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
            (
                t.hosts[0].host.as_str(),
                t.hosts[0].port,
                t.user.as_str(),
                t.dbname.as_str()
            ),
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
            (
                t.hosts[0].host.as_str(),
                t.hosts[0].port,
                t.user.as_str(),
                t.dbname.as_str()
            ),
            ("filehost", 6000, "envuser", "flagdb")
        );
    }

    #[test]
    fn urls_are_accepted_and_passwords_never_shown() {
        let t = Target::from_dsn("postgresql://bench:s3cret@db.example:5444/slob").unwrap();
        assert_eq!(t.hosts[0].port, 5444);
        assert_eq!(t.dbname, "slob");
        let shown = format!("{t} {t:?} {}", t.redacted());
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("host=db.example"));
    }

    #[test]
    fn bad_dsn_and_bad_port_are_usage_errors() {
        let e = ConnParams::from_dsn("host=a port=notaport").unwrap_err();
        assert_eq!(e.kind(), dbio_core::ErrorKind::Usage);
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
    fn host_and_port_lists_pair_up() {
        let t = Target::from_dsn("host=a,b,/tmp port=1,2,3 sslmode=disable").unwrap();
        let got: Vec<_> = t.hosts.iter().map(|h| (h.host.as_str(), h.port)).collect();
        assert_eq!(got, [("a", 1), ("b", 2), ("/tmp", 3)]);
        assert!(t.hosts[2].is_unix());
        let t = Target::from_dsn("host=a,b port=7").unwrap();
        assert!(t.hosts.iter().all(|h| h.port == 7));
        let t = Target::from_dsn("hostaddr=127.0.0.2 host=db.example").unwrap();
        assert_eq!(t.hosts[0].hostaddr, Some("127.0.0.2".parse().unwrap()));
        assert_eq!(t.hosts[0].name(), "db.example");
        assert!(Target::from_dsn("host=a,b port=1,2,3").is_err());
        assert!(Target::from_dsn("host=a,b hostaddr=127.0.0.1").is_err());
        assert!(Target::from_dsn("hostaddr=db.example").is_err());
    }

    #[test]
    fn recorded_target_is_a_valid_redacted_dsn() {
        let t = Target::from_dsn(
            "host=h1,h2 port=5,6 user='we ird' password=s3cret application_name='my app' options='-c work_mem=8MB' sslmode=disable target_session_attrs=read-write",
        )
        .unwrap();
        let shown = t.redacted();
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(
            shown.starts_with("host=h1,h2 port=5,6 user='we ird' dbname='we ird'"),
            "{shown}"
        );
        let back = Target::from_dsn(&shown).unwrap();
        assert_eq!(back.redacted(), shown);
        assert_eq!(back.options.as_deref(), Some("-c work_mem=8MB"));
        assert_eq!(
            back.application_name("dbio-reader-1"),
            "my app/dbio-reader-1"
        );
        assert_eq!(back.session_attrs, SessionAttrs::ReadWrite);
    }

    #[test]
    fn keywords_are_checked_when_resolved() {
        for (dsn, named) in [
            ("keepalives=2", "keepalives"),
            ("keepalives_idle=soon", "keepalives_idle"),
            ("tcp_user_timeout=-1", "tcp_user_timeout"),
            ("target_session_attrs=secondary", "target_session_attrs"),
            ("sslmode=verify", "sslmode"),
            ("channel_binding=always", "channel_binding"),
            ("load_balance_hosts=random", "load_balance_hosts"),
            ("client_encoding=LATIN1", "client_encoding"),
            ("gssencmode=require", "gssencmode"),
            ("connect_timeout=ten", "connect_timeout"),
        ] {
            let e = Target::from_dsn(dsn).unwrap_err();
            assert_eq!(e.kind(), dbio_core::ErrorKind::Usage, "{dsn}");
            assert!(e.to_string().contains(named), "{dsn}: {e}");
        }
        let t = Target::from_dsn(
            "keepalives_idle=5 keepalives_interval=2 keepalives_count=4 tcp_user_timeout=1500 connect_timeout=1",
        )
        .unwrap();
        assert_eq!(t.keepalive.idle, Duration::from_secs(5));
        assert_eq!(t.keepalive.interval, Duration::from_secs(2));
        assert_eq!(t.keepalive.count, 4);
        assert_eq!(t.keepalive.user_timeout, Duration::from_millis(1500));
        // libpq: a connect_timeout below 2 s is 2 s.
        assert_eq!(t.connect_timeout, Duration::from_secs(2));
    }

    #[test]
    fn session_attrs_follow_libpq() {
        assert!(SessionAttrs::ReadWrite.check(false, true).is_err());
        assert!(SessionAttrs::ReadOnly.check(false, true).is_ok());
        assert!(SessionAttrs::Primary.check(true, true).is_err());
        assert!(SessionAttrs::Standby.check(true, true).is_ok());
        assert_eq!(
            SessionAttrs::ReadWrite.check(false, true),
            Err(AttrsMismatch::ReadOnly)
        );
        assert_eq!(
            SessionAttrs::Standby
                .check(false, false)
                .map_err(|m| m.to_string()),
            Err("server is not in hot standby mode".to_string())
        );
        assert_eq!(
            SessionAttrs::PreferStandby.passes(),
            [SessionAttrs::Standby, SessionAttrs::Any]
        );
    }

    #[test]
    fn a_service_fills_what_the_dsn_leaves_and_beats_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("services");
        std::fs::write(&file, "[bench]\nhost=svchost\nport=6000\ndbname=svcdb\n").unwrap();
        let env =
            env_from_map(&HashMap::from([("PGPORT", "5433"), ("PGUSER", "envuser")])).unwrap();
        let f = file.display().to_string();
        let get = |k: &str| (k == "PGSERVICEFILE").then(|| f.clone());
        let t = Target::resolve_with(
            None,
            env,
            Some("service=bench dbname=flagdb"),
            Duration::from_secs(5),
            get,
        )
        .unwrap();
        assert_eq!(t.hosts[0].host, "svchost");
        assert_eq!(t.hosts[0].port, 6000, "the service beats PGPORT");
        assert_eq!(t.dbname, "flagdb", "the DSN beats the service");
        assert_eq!(t.user, "envuser", "the environment fills the rest");
    }

    #[test]
    fn a_group_readable_password_file_is_ignored() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("pgpass");
        std::fs::write(&f, "*:*:*:*:from-file\n").unwrap();
        let dsn = format!("host=h user=u passfile={}", f.display());
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        let t = Target::from_dsn(&dsn).unwrap();
        assert_eq!(t.password_for(&t.hosts[0]).as_deref(), Some("from-file"));
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        let t = Target::from_dsn(&dsn).unwrap();
        assert_eq!(t.password_for(&t.hosts[0]), None);
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
