//! TLS on every connection the way libpq makes it (libpq "SSL Support"; fe-secure-openssl.c):
//! with the system's OpenSSL, libpq's own library, so a certificate setup that psql accepts is
//! accepted here and one it refuses is refused, for the same reason. One connector per target,
//! used by the tokio-postgres connections (postgres-openssl) and by the measured sessions'
//! blocking connections (`wire`, OpenSSL's `SslStream`).
//!
//! What libpq does and this follows: the chain is checked against sslrootcert only (the
//! system's roots only with sslrootcert=system), a self-signed certificate that is its own
//! sslrootcert included; sslcrl/sslcrldir (default ~/.postgresql/root.crl) turn on CRL checks
//! for the whole chain; the host name is matched by libpq's rules (subjectAltName of the host's
//! type first, the Common Name only when there is none, `*.` matching one label); the client
//! key is decrypted with sslpassword and never by a prompt.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use openssl::nid::Nid;
use openssl::pkey::PKey;
use openssl::ssl::{
    ConnectConfiguration, SslConnector, SslContext, SslContextBuilder, SslMethod, SslRef,
    SslVerifyMode, SslVersion,
};
use openssl::x509::store::{X509Lookup, X509StoreBuilder};
use openssl::x509::verify::X509VerifyFlags;
use openssl::x509::{X509, X509Ref, X509VerifyResult};

use crate::error::{PgError, Result};

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Plaintext only.
    Disable,
    /// Plaintext first; TLS (unverified) if the server refuses plaintext.
    Allow,
    /// TLS (unverified) if the server supports it, else plaintext. libpq's default.
    Prefer,
    /// TLS or fail; the certificate is not checked (unless a root certificate file exists:
    /// then as verify-ca, as libpq does).
    Require,
    /// TLS, the certificate signed by a trusted CA.
    VerifyCa,
    /// TLS, the certificate signed by a trusted CA and issued for the host name.
    VerifyFull,
}

impl SslMode {
    pub fn parse(v: &str) -> Result<SslMode> {
        Ok(match v {
            "disable" => SslMode::Disable,
            "allow" => SslMode::Allow,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => {
                return Err(PgError::Usage(format!(
                    "invalid sslmode value: \"{v}\"; use disable, allow, prefer, require, verify-ca or verify-full"
                )));
            }
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// The connection must be encrypted: a password is never sent otherwise.
    pub fn requires_tls(self) -> bool {
        matches!(
            self,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull
        )
    }
}

/// libpq's `channel_binding`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelBindingMode {
    Disable,
    Prefer,
    Require,
}

impl ChannelBindingMode {
    pub fn parse(v: &str) -> Result<ChannelBindingMode> {
        Ok(match v {
            "disable" => ChannelBindingMode::Disable,
            "prefer" => ChannelBindingMode::Prefer,
            "require" => ChannelBindingMode::Require,
            _ => {
                return Err(PgError::Usage(format!(
                    "invalid channel_binding value: \"{v}\"; use disable, prefer or require"
                )));
            }
        })
    }
}

/// Where trusted root certificates come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootCerts {
    File(PathBuf),
    /// `sslrootcert=system`: the platform's trusted roots.
    System,
}

/// The TLS part of a target, resolved from sslmode, sslrootcert, sslcrl, sslcrldir, sslcert,
/// sslkey, sslpassword, sslsni, ssl_min/max_protocol_version and channel_binding.
#[derive(Clone)]
pub struct TlsSettings {
    pub mode: SslMode,
    pub roots: Option<RootCerts>,
    pub channel_binding: ChannelBindingMode,
    /// The connector for TLS attempts (None with sslmode=disable).
    pub connector: Option<Connector>,
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSettings")
            .field("mode", &self.mode)
            .field("roots", &self.roots)
            .field("channel_binding", &self.channel_binding)
            .finish()
    }
}

/// What the DSN said about TLS, before files are read.
#[derive(Debug, Clone, Default)]
pub struct TlsRequest {
    pub sslmode: Option<String>,
    pub sslrootcert: Option<String>,
    pub sslcrl: Option<String>,
    pub sslcrldir: Option<String>,
    pub sslcert: Option<String>,
    pub sslkey: Option<String>,
    pub sslpassword: Option<String>,
    pub sslcertmode: Option<String>,
    pub sslsni: Option<String>,
    pub min_version: Option<String>,
    pub max_version: Option<String>,
    pub channel_binding: Option<String>,
    /// Home of ~/.postgresql (libpq's default certificate folder).
    pub home: Option<PathBuf>,
}

/// An OpenSSL client context configured as libpq configures its own, and the per-connection
/// part (SNI, libpq's host name check).
///
/// The context is built on the first TLS handshake, not when the target is resolved:
/// OpenSSL's connector loads the system's whole root bundle as it is made (about 40 ms of
/// CPU here, half of what a one-session run cost beside its operations, issue 34), only for
/// dbio to replace it with what sslrootcert names; a target whose server declines TLS under
/// sslmode=prefer now never pays for it (a TLS run still does, once). Every file the DSN
/// names was read and checked when the target was resolved, so a bad one is still an error
/// before anything connects.
#[derive(Clone)]
pub struct Connector {
    ssl: Arc<OnceLock<SslConnector>>,
    recipe: Arc<Recipe>,
    /// verify-full: the certificate must be issued for the host name (libpq's rules).
    check_name: bool,
    /// Verify the chain (verify-ca, verify-full, require with a root certificate file).
    verify: bool,
    sni: bool,
}

/// What the context is made from (the TLS keywords, the sslmode after libpq's upgrades).
struct Recipe {
    req: TlsRequest,
    mode: SslMode,
    roots: Option<RootCerts>,
    pg_dir: Option<PathBuf>,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the recipe: it holds sslpassword.
        f.debug_struct("Connector")
            .field("built", &self.ssl.get().is_some())
            .field("check_name", &self.check_name)
            .field("verify", &self.verify)
            .field("sni", &self.sni)
            .finish()
    }
}

impl Connector {
    /// The OpenSSL connector, made on first use from the files resolve() already checked.
    fn ssl(&self) -> std::result::Result<&SslConnector, String> {
        if let Some(ssl) = self.ssl.get() {
            return Ok(ssl);
        }
        let r = &*self.recipe;
        let mut b = SslConnector::builder(SslMethod::tls_client())
            .map_err(|e| format!("cannot set up TLS: {}", openssl_reason(&e)))?;
        configure_context(
            &mut b,
            &r.req,
            r.mode,
            r.roots.as_ref(),
            r.pg_dir.as_deref(),
        )
        .map_err(|e| e.to_string())?;
        // Two threads may race to make it: one wins, the other's is dropped.
        let _ = self.ssl.set(b.build());
        self.ssl
            .get()
            .ok_or_else(|| "cannot set up TLS: the connector was not kept".to_string())
    }

    /// One connection's TLS session to `host` (the `host` keyword; an IP literal gets no SNI,
    /// as in libpq).
    pub fn configure(&self, host: &str) -> std::result::Result<ConnectConfiguration, String> {
        let mut ssl = self.ssl()?.configure().map_err(|e| e.to_string())?;
        apply(&mut ssl, host, self.check_name, self.verify, self.sni)?;
        Ok(ssl)
    }

    /// The same, for tokio-postgres: the connector is made only when a server accepts TLS
    /// (each connection is configured by [`apply`]).
    pub fn make_tls_connect(&self) -> LazyMakeTls {
        LazyMakeTls(self.clone())
    }

    /// postgres-openssl's connector over the made context.
    fn postgres_openssl(&self) -> std::result::Result<postgres_openssl::MakeTlsConnector, String> {
        let mut make = postgres_openssl::MakeTlsConnector::new(self.ssl()?.clone());
        let (check_name, verify, sni) = (self.check_name, self.verify, self.sni);
        make.set_callback(move |ssl, host| {
            apply(ssl, host, check_name, verify, sni).map_err(|_| openssl::error::ErrorStack::get())
        });
        Ok(make)
    }
}

/// tokio-postgres's TLS for a target: hands each connection a [`LazyTls`] that makes the
/// OpenSSL context only if the server says yes to TLS.
#[derive(Clone, Debug)]
pub struct LazyMakeTls(Connector);

/// What tokio-postgres hands a TLS connector: postgres-openssl's bounds on its socket.
pub trait TlsSocket:
    tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + std::fmt::Debug + Sync + Send + 'static
{
}

impl<S> TlsSocket for S where
    S: tokio::io::AsyncRead
        + tokio::io::AsyncWrite
        + Unpin
        + std::fmt::Debug
        + Sync
        + Send
        + 'static
{
}

/// One connection's TLS, made when the handshake starts.
pub struct LazyTls {
    connector: Connector,
    domain: String,
}

impl<S> tokio_postgres::tls::MakeTlsConnect<S> for LazyMakeTls
where
    S: TlsSocket,
{
    type Stream = postgres_openssl::TlsStream<S>;
    type TlsConnect = LazyTls;
    type Error = std::convert::Infallible;

    fn make_tls_connect(&mut self, domain: &str) -> std::result::Result<LazyTls, Self::Error> {
        Ok(LazyTls {
            connector: self.0.clone(),
            domain: domain.to_string(),
        })
    }
}

impl<S> tokio_postgres::tls::TlsConnect<S> for LazyTls
where
    S: TlsSocket,
{
    type Stream = postgres_openssl::TlsStream<S>;
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future = std::pin::Pin<
        Box<
            dyn std::future::Future<Output = std::result::Result<Self::Stream, Self::Error>> + Send,
        >,
    >;

    fn connect(self, stream: S) -> Self::Future {
        let tls = self.connector.postgres_openssl().and_then(|mut make| {
            tokio_postgres::tls::MakeTlsConnect::<S>::make_tls_connect(&mut make, &self.domain)
                .map_err(|e| e.to_string())
        });
        match tls {
            Ok(tls) => tokio_postgres::tls::TlsConnect::connect(tls, stream),
            Err(e) => Box::pin(std::future::ready(Err(e.into()))),
        }
    }
}

/// Per connection: SNI (sslsni=1, not for an IP address), OpenSSL's own host check off, and
/// the chain check with libpq's host name rules at the leaf when verify-full asks for it.
fn apply(
    ssl: &mut ConnectConfiguration,
    host: &str,
    check_name: bool,
    verify: bool,
    sni: bool,
) -> std::result::Result<(), String> {
    ssl.set_use_server_name_indication(sni);
    ssl.set_verify_hostname(false);
    if check_name && host.is_empty() {
        return Err("host name must be specified for a verified SSL connection".into());
    }
    if !verify {
        ssl.set_verify(SslVerifyMode::NONE);
        return Ok(());
    }
    let host = host.to_string();
    ssl.set_verify_callback(SslVerifyMode::PEER, move |ok, ctx| {
        if !ok || !check_name || ctx.error_depth() != 0 {
            return ok;
        }
        match ctx.current_cert() {
            Some(cert) if name_matches(cert, &host) => true,
            _ => {
                // X509_V_ERR_HOSTNAME_MISMATCH: the handshake fails, naming it.
                // SAFETY: 62 is X509_V_ERR_HOSTNAME_MISMATCH, a valid verify result code.
                ctx.set_error(unsafe { X509VerifyResult::from_raw(62) });
                false
            }
        }
    });
    Ok(())
}

/// libpq's host name check (fe-secure-openssl.c, pgtls_verify_peer_name_matches_certificate_guts,
/// PostgreSQL 14+): every subjectAltName dNSName and iPAddress is compared with the host; the
/// Common Name only when no subjectAltName is of the host's type (IP address or DNS name).
pub fn name_matches(cert: &X509Ref, host: &str) -> bool {
    let host_ip: Option<std::net::IpAddr> = host.parse().ok();
    let mut check_cn = true;
    if let Some(sans) = cert.subject_alt_names() {
        for name in &sans {
            let dns = name.dnsname();
            let ip = name.ipaddress();
            if (host_ip.is_some() && ip.is_some()) || (host_ip.is_none() && dns.is_some()) {
                check_cn = false;
            }
            let hit = match (dns, ip) {
                (Some(d), _) => certificate_name_matches(d, host),
                (_, Some(raw)) => host_ip.is_some_and(|h| match h {
                    std::net::IpAddr::V4(v4) => raw == v4.octets(),
                    std::net::IpAddr::V6(v6) => raw == v6.octets(),
                }),
                _ => false,
            };
            if hit {
                return true;
            }
        }
    }
    check_cn
        && cert
            .subject_name()
            .entries_by_nid(Nid::COMMONNAME)
            .next()
            .and_then(|e| e.data().to_string().ok())
            .is_some_and(|cn| certificate_name_matches(&cn, host))
}

/// libpq's pq_verify_peer_name_matches_certificate_name: equal ignoring ASCII case, or a
/// `*.rest` pattern that matches exactly one leading label (wildcard_certificate_match).
fn certificate_name_matches(name: &str, host: &str) -> bool {
    if name.contains('\0') {
        return false;
    }
    if name.eq_ignore_ascii_case(host) {
        return true;
    }
    let Some(rest) = name.strip_prefix('*') else {
        return false;
    };
    if name.len() < 3 || !rest.starts_with('.') || name.len() > host.len() {
        return false;
    }
    let start = host.len() - rest.len();
    host.is_char_boundary(start)
        && host[start..].eq_ignore_ascii_case(rest)
        && !host[..start].contains('.')
        && start > 0
}

impl TlsSettings {
    /// Resolves the request as libpq does: sslrootcert=system implies verify-full (and refuses
    /// a weaker explicit mode); sslmode=require with a root certificate file verifies the CA;
    /// the client certificate and key default to ~/.postgresql/postgresql.crt and .key when
    /// those exist, the CRL to ~/.postgresql/root.crl.
    pub fn resolve(req: &TlsRequest) -> Result<TlsSettings> {
        let pg_dir = req.home.as_ref().map(|h| h.join(".postgresql"));
        let roots_named = req.sslrootcert.as_deref().filter(|v| !v.is_empty());
        let mut mode = match req.sslmode.as_deref() {
            Some(m) => SslMode::parse(m)?,
            None if roots_named == Some("system") => SslMode::VerifyFull,
            None => SslMode::Prefer,
        };
        let channel_binding = match req.channel_binding.as_deref() {
            Some(v) => ChannelBindingMode::parse(v)?,
            None => ChannelBindingMode::Prefer,
        };
        if channel_binding == ChannelBindingMode::Require && mode == SslMode::Disable {
            return Err(PgError::Usage(
                "channel_binding=require needs TLS, but sslmode is disable; use sslmode=require or stronger".into(),
            ));
        }
        let roots = match roots_named {
            Some("system") => {
                if mode != SslMode::VerifyFull && mode != SslMode::Disable {
                    return Err(PgError::Usage(format!(
                        "weak sslmode \"{}\" may not be used with sslrootcert=system (use \"verify-full\")",
                        mode.as_str()
                    )));
                }
                Some(RootCerts::System)
            }
            Some(path) => Some(RootCerts::File(PathBuf::from(path))),
            None => pg_dir
                .as_ref()
                .map(|d| d.join("root.crt"))
                .map(RootCerts::File),
        };
        // libpq: with sslmode=require, a root certificate file that exists makes it verify-ca.
        if mode == SslMode::Require
            && let Some(RootCerts::File(f)) = &roots
            && f.exists()
        {
            mode = SslMode::VerifyCa;
        }
        if mode == SslMode::Disable {
            return Ok(TlsSettings {
                mode,
                roots: None,
                channel_binding,
                connector: None,
            });
        }
        let usage = |what: &str, e: openssl::error::ErrorStack| {
            PgError::Usage(format!("{what}: {}", openssl_reason(&e)))
        };
        // Every file is read and checked now, on a context that does not load the system's
        // roots; the connector itself is made on the first handshake (`Connector::ssl`).
        let mut b = SslContext::builder(SslMethod::tls_client())
            .map_err(|e| usage("cannot set up TLS", e))?;
        let client = configure_context(&mut b, req, mode, roots.as_ref(), pg_dir.as_deref())?;
        let cert_mode = req.sslcertmode.as_deref().unwrap_or("allow");
        if cert_mode == "require" && !client {
            return Err(PgError::Usage(
                "sslcertmode=require, but no client certificate was found: name it with sslcert and sslkey".into(),
            ));
        }
        let sni = match req.sslsni.as_deref() {
            None | Some("1") => true,
            Some("0") => false,
            Some(v) => {
                return Err(PgError::Usage(format!(
                    "invalid sslsni value: \"{v}\"; use 1 or 0"
                )));
            }
        };
        Ok(TlsSettings {
            mode,
            roots: roots.clone(),
            channel_binding,
            connector: Some(Connector {
                ssl: Arc::new(OnceLock::new()),
                check_name: mode == SslMode::VerifyFull,
                verify: matches!(mode, SslMode::VerifyCa | SslMode::VerifyFull),
                sni,
                recipe: Arc::new(Recipe {
                    req: req.clone(),
                    mode,
                    roots,
                    pg_dir,
                }),
            }),
        })
    }
}

/// libpq's context settings: protocol versions, read-ahead, the roots and CRLs a verifying
/// mode trusts (only what sslrootcert names), the client certificate. True when a client
/// certificate was set.
fn configure_context(
    b: &mut SslContextBuilder,
    req: &TlsRequest,
    mode: SslMode,
    roots: Option<&RootCerts>,
    pg_dir: Option<&Path>,
) -> Result<bool> {
    let usage = |what: &str, e: openssl::error::ErrorStack| {
        PgError::Usage(format!("{what}: {}", openssl_reason(&e)))
    };
    let (min, max) = protocol_versions(req)?;
    b.set_min_proto_version(Some(min))
        .and_then(|()| b.set_max_proto_version(max))
        .map_err(|e| usage("TLS protocol versions", e))?;
    // One read per record instead of two (its 5-byte header, then its body): one
    // recv(2) fewer per answer on the measured sessions' hot path.
    b.set_read_ahead(true);
    let verify = matches!(mode, SslMode::VerifyCa | SslMode::VerifyFull);
    // Only what sslrootcert names is trusted (the connector's default system paths are
    // replaced), as libpq loads only that file.
    let mut store = X509StoreBuilder::new().map_err(|e| usage("cannot set up TLS", e))?;
    if verify {
        load_roots(&mut store, roots, mode)?;
        load_crls(&mut store, req, pg_dir)?;
    }
    b.set_cert_store(store.build());
    match req.sslcertmode.as_deref().unwrap_or("allow") {
        "disable" => Ok(false),
        "allow" | "require" => client_certificate(b, req, pg_dir),
        other => Err(PgError::Usage(format!(
            "invalid sslcertmode value: \"{other}\"; use disable, allow or require"
        ))),
    }
}

/// OpenSSL's reason for a failure, without its error-queue codes.
fn openssl_reason(e: &openssl::error::ErrorStack) -> String {
    let reasons: Vec<String> = e
        .errors()
        .iter()
        .map(|x| x.reason().unwrap_or("unknown error").to_string())
        .collect();
    if reasons.is_empty() {
        "no error reported".into()
    } else {
        reasons.join("; ")
    }
}

fn protocol_versions(req: &TlsRequest) -> Result<(SslVersion, Option<SslVersion>)> {
    let version = |v: &str, key: &str| -> Result<(u8, SslVersion)> {
        match v {
            "TLSv1" => Ok((0, SslVersion::TLS1)),
            "TLSv1.1" => Ok((1, SslVersion::TLS1_1)),
            "TLSv1.2" => Ok((2, SslVersion::TLS1_2)),
            "TLSv1.3" => Ok((3, SslVersion::TLS1_3)),
            _ => Err(PgError::Usage(format!(
                "invalid {key} value: \"{v}\"; use TLSv1, TLSv1.1, TLSv1.2 or TLSv1.3"
            ))),
        }
    };
    // libpq's default minimum is TLSv1.2, and no maximum.
    let min = match req.min_version.as_deref().filter(|v| !v.is_empty()) {
        Some(v) => version(v, "ssl_min_protocol_version")?,
        None => (2, SslVersion::TLS1_2),
    };
    let max = match req.max_version.as_deref().filter(|v| !v.is_empty()) {
        Some(v) => Some(version(v, "ssl_max_protocol_version")?),
        None => None,
    };
    if let Some((rank, _)) = max
        && rank < min.0
    {
        return Err(PgError::Usage(
            "invalid SSL protocol version range: ssl_min_protocol_version is above ssl_max_protocol_version".into(),
        ));
    }
    Ok((min.1, max.map(|m| m.1)))
}

fn load_roots(
    store: &mut X509StoreBuilder,
    roots: Option<&RootCerts>,
    mode: SslMode,
) -> Result<()> {
    match roots {
        Some(RootCerts::System) => store.set_default_paths().map_err(|e| {
            PgError::Usage(format!(
                "sslrootcert=system, but the system's trusted roots cannot be loaded ({}): install ca-certificates, or name a file in sslrootcert",
                openssl_reason(&e)
            ))
        }),
        Some(RootCerts::File(path)) => {
            if !path.exists() {
                return Err(PgError::Usage(format!(
                    "root certificate file \"{}\" does not exist; either provide the file, use the system's trusted roots with sslrootcert=system, or change sslmode to disable server certificate verification (sslmode={} was asked)",
                    path.display(),
                    mode.as_str()
                )));
            }
            let text = dbio_core::input::read_bounded(path, dbio_core::input::CONFIG_MAX_BYTES)
                .map_err(|e| {
                PgError::Usage(format!("could not read root certificate file \"{}\": {e}", path.display()))
            })?;
            let certs = X509::stack_from_pem(text.as_bytes()).map_err(|e| {
                PgError::Usage(format!(
                    "could not read root certificate file \"{}\": {}",
                    path.display(),
                    openssl_reason(&e)
                ))
            })?;
            if certs.is_empty() {
                return Err(PgError::Usage(format!(
                    "root certificate file \"{}\" holds no certificate",
                    path.display()
                )));
            }
            for c in certs {
                store.add_cert(c).map_err(|e| {
                    PgError::Usage(format!("root certificate file \"{}\": {}", path.display(), openssl_reason(&e)))
                })?;
            }
            Ok(())
        }
        None => Err(PgError::Usage(format!(
            "sslmode={} needs trusted root certificates: name a file with sslrootcert (or PGSSLROOTCERT), or use sslrootcert=system",
            mode.as_str()
        ))),
    }
}

/// sslcrl (a PEM file) and sslcrldir (a folder prepared with `openssl rehash`), else
/// ~/.postgresql/root.crl: when one loads, every certificate of the chain must be on a CRL
/// that does not revoke it (X509_V_FLAG_CRL_CHECK | CRL_CHECK_ALL), as libpq sets; one that
/// does not load is passed over, as libpq passes it over.
fn load_crls(store: &mut X509StoreBuilder, req: &TlsRequest, pg_dir: Option<&Path>) -> Result<()> {
    let file = req
        .sslcrl
        .as_deref()
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let dir = req
        .sslcrldir
        .as_deref()
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let file = match (&file, &dir) {
        (None, None) => pg_dir.map(|d| d.join("root.crl")),
        _ => file,
    };
    let mut loaded = false;
    if let Some(f) = file.filter(|f| f.is_file())
        && let Ok(lookup) = store.add_lookup(X509Lookup::file())
    {
        loaded |= lookup
            .load_crl_file(&f, openssl::ssl::SslFiletype::PEM)
            .is_ok_and(|n| n > 0);
    }
    if let Some(d) = dir.filter(|d| d.is_dir())
        && let Some(d) = d.to_str()
        && let Ok(lookup) = store.add_lookup(X509Lookup::hash_dir())
    {
        loaded |= lookup.add_dir(d, openssl::ssl::SslFiletype::PEM).is_ok();
    }
    if loaded {
        store
            .set_flags(X509VerifyFlags::CRL_CHECK | X509VerifyFlags::CRL_CHECK_ALL)
            .map_err(|e| {
                PgError::Usage(format!(
                    "certificate revocation lists: {}",
                    openssl_reason(&e)
                ))
            })?;
    }
    Ok(())
}

/// The client certificate and key: sslcert/sslkey, else ~/.postgresql/postgresql.{crt,key}
/// when the certificate file exists (libpq sends none otherwise). An encrypted key is
/// decrypted with sslpassword; without it, the decryption fails as libpq's does (never a
/// prompt). True when a certificate was set.
fn client_certificate(
    b: &mut SslContextBuilder,
    req: &TlsRequest,
    pg_dir: Option<&Path>,
) -> Result<bool> {
    let cert_path = match req.sslcert.as_deref().filter(|v| !v.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => match pg_dir {
            Some(d) => d.join("postgresql.crt"),
            None => return Ok(false),
        },
    };
    if !cert_path.exists() {
        if req.sslcert.is_some() {
            return Err(PgError::Usage(format!(
                "certificate file \"{}\" (sslcert) does not exist",
                cert_path.display()
            )));
        }
        return Ok(false);
    }
    let key_path = match req.sslkey.as_deref().filter(|v| !v.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => match pg_dir {
            Some(d) => d.join("postgresql.key"),
            None => cert_path.with_extension("key"),
        },
    };
    b.set_certificate_chain_file(&cert_path).map_err(|e| {
        PgError::Usage(format!(
            "could not read certificate file \"{}\": {}",
            cert_path.display(),
            openssl_reason(&e)
        ))
    })?;
    check_key_permissions(&key_path)?;
    let pem = std::fs::read(&key_path).map_err(|e| {
        PgError::Usage(format!(
            "could not load private key file \"{}\": {e}",
            key_path.display()
        ))
    })?;
    let password = req.sslpassword.clone().unwrap_or_default();
    if password.contains('\0') {
        return Err(PgError::Usage("sslpassword holds a NUL character".into()));
    }
    // The passphrase is handed to OpenSSL as libpq's callback hands it (an empty one when
    // sslpassword is not set): OpenSSL never prompts. A DER key is read as libpq reads it.
    let key = PKey::private_key_from_pem_passphrase(&pem, password.as_bytes())
        .or_else(|e| PKey::private_key_from_der(&pem).map_err(|_| e))
        .map_err(|e| {
            PgError::Usage(format!(
                "could not load private key file \"{}\": {}{}",
                key_path.display(),
                openssl_reason(&e),
                if req.sslpassword.is_none() {
                    " (an encrypted key needs its passphrase in sslpassword)"
                } else {
                    ""
                }
            ))
        })?;
    b.set_private_key(&key)
        .and_then(|()| b.check_private_key())
        .map_err(|e| {
            PgError::Usage(format!(
                "certificate does not match private key file \"{}\": {}",
                key_path.display(),
                openssl_reason(&e)
            ))
        })?;
    Ok(true)
}

/// libpq's rule for the private key file: u=rw (0600) or less when the user owns it, u=rw,g=r
/// (0640) or less when root owns it.
fn check_key_permissions(path: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).map_err(|e| {
        PgError::Usage(format!(
            "certificate present, but not private key file \"{}\": {e}",
            path.display()
        ))
    })?;
    let mode = meta.mode();
    let too_open = if meta.uid() == 0 {
        mode & 0o137 != 0
    } else {
        mode & 0o077 != 0
    };
    if too_open {
        return Err(PgError::Usage(format!(
            "private key file \"{}\" has group or world access; file must have permissions u=rw (0600) or less if owned by the current user, or permissions u=rw,g=r (0640) or less if owned by root",
            path.display()
        )));
    }
    Ok(())
}

/// What went wrong in a handshake, in the words a DBA needs: which certificate check failed
/// (OpenSSL's verify result, as libpq reports it) and what to do.
pub fn describe_handshake_error(e: &str, host: &str) -> String {
    if e.contains("unable to get local issuer certificate")
        || e.contains("self-signed certificate")
        || e.contains("self signed certificate")
        || e.contains("unable to get issuer certificate")
        || e.contains("unable to verify the first certificate")
    {
        format!(
            "the server's certificate is not signed by a trusted CA (certificate verify failed: {}): check sslrootcert names the CA that signed the server's certificate",
            verify_reason(e)
        )
    } else if e.contains("hostname mismatch") {
        format!(
            "the server's certificate does not match host name \"{host}\" (certificate verify failed: name mismatch): connect with the name the certificate was issued for, or use sslmode=verify-ca"
        )
    } else if e.contains("host name must be specified") {
        "host name must be specified for a verified SSL connection: give host (hostaddr alone cannot be checked against the certificate), or use sslmode=verify-ca".into()
    } else if e.contains("certificate has expired") {
        "the server's certificate has expired (certificate verify failed)".into()
    } else if e.contains("certificate is not yet valid") {
        "the server's certificate is not valid yet (certificate verify failed): check the clocks"
            .into()
    } else if e.contains("certificate revoked") {
        "the server's certificate is revoked by the certificate revocation list (certificate verify failed: certificate revoked)".into()
    } else if e.contains("unable to get certificate CRL") {
        "no certificate revocation list covers the server's certificate chain (certificate verify failed: unable to get certificate CRL): name the CRL of each CA in sslcrl or sslcrldir".into()
    } else {
        format!("TLS handshake failed: {e}")
    }
}

/// The verify result inside an OpenSSL handshake error ("...: unable to get local issuer
/// certificate"), or the whole text.
fn verify_reason(e: &str) -> &str {
    e.rsplit(": ").next().unwrap_or(e)
}

/// The TLS server end point channel binding (RFC 5929 section 4.1): the hash of the server's
/// certificate, with the hash of its signature algorithm (SHA-256 for MD5 and SHA-1). None
/// for algorithms without a single hash (Ed25519, RSA-PSS), as libpq.
pub fn server_end_point(cert: &X509Ref) -> Option<Vec<u8>> {
    use openssl::hash::MessageDigest;
    let algorithms = cert
        .signature_algorithm()
        .object()
        .nid()
        .signature_algorithms()?;
    let md = match algorithms.digest {
        Nid::MD5 | Nid::SHA1 => MessageDigest::sha256(),
        nid => MessageDigest::from_nid(nid)?,
    };
    cert.digest(md).ok().map(|d| d.to_vec())
}

/// The protocol and cipher suite a session negotiated, as recorded in the result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    pub protocol: String,
    pub cipher: String,
}

impl Negotiated {
    pub fn of(ssl: &SslRef) -> Negotiated {
        Negotiated {
            protocol: ssl.version_str().to_string(),
            // The IANA name (TLS_AES_256_GCM_SHA384), as pg_stat_ssl's OpenSSL names differ.
            cipher: ssl
                .current_cipher()
                .map(|c| c.standard_name().unwrap_or(c.name()).to_string())
                .unwrap_or_else(|| "unknown".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(mode: Option<&str>, root: Option<&str>) -> TlsRequest {
        TlsRequest {
            sslmode: mode.map(str::to_string),
            sslrootcert: root.map(str::to_string),
            ..TlsRequest::default()
        }
    }

    #[test]
    fn modes_follow_libpq() {
        assert_eq!(
            TlsSettings::resolve(&req(None, None)).unwrap().mode,
            SslMode::Prefer
        );
        assert!(
            TlsSettings::resolve(&req(Some("disable"), None))
                .unwrap()
                .connector
                .is_none()
        );
        // sslrootcert=system implies verify-full and refuses weaker modes.
        let e = TlsSettings::resolve(&req(Some("require"), Some("system")))
            .err()
            .unwrap();
        assert!(e.to_string().contains("verify-full"), "{e}");
        assert!(SslMode::parse("verify-fullish").is_err());
        // verify-ca with a missing root file names the file.
        let e = TlsSettings::resolve(&req(Some("verify-ca"), Some("/nonexistent/root.crt")))
            .err()
            .unwrap();
        assert!(e.to_string().contains("/nonexistent/root.crt"), "{e}");
    }

    #[test]
    fn require_with_a_root_file_verifies_the_ca() {
        let dir = tempfile::tempdir().unwrap();
        let pg = dir.path().join(".postgresql");
        std::fs::create_dir(&pg).unwrap();
        // A file that is present decides the mode before it is read.
        std::fs::write(pg.join("root.crt"), "not a certificate").unwrap();
        let mut r = req(Some("require"), None);
        r.home = Some(dir.path().to_path_buf());
        let e = TlsSettings::resolve(&r).err().unwrap();
        assert!(e.to_string().contains("root.crt"), "{e}");
        std::fs::remove_file(pg.join("root.crt")).unwrap();
        assert_eq!(TlsSettings::resolve(&r).unwrap().mode, SslMode::Require);
    }

    #[test]
    fn the_connector_is_made_on_the_first_handshake_and_shared_by_its_clones() {
        // Resolving checks the files but does not load OpenSSL's root bundle: a run whose
        // server declines TLS under sslmode=prefer never pays for it (issue 34).
        let settings = TlsSettings::resolve(&req(None, None)).unwrap();
        let connector = settings.connector.expect("prefer may use TLS");
        let clone = connector.clone();
        assert!(connector.ssl.get().is_none(), "made before any handshake");
        let ssl = connector.configure("db.example.com").expect("configured");
        drop(ssl);
        assert!(connector.ssl.get().is_some(), "made by the first handshake");
        assert!(clone.ssl.get().is_some(), "one connector for every clone");
        // The recipe holds sslpassword: Debug never prints it.
        let mut r = req(Some("require"), None);
        r.sslpassword = Some("s3cret".into());
        let c = TlsSettings::resolve(&r).unwrap().connector.unwrap();
        assert!(!format!("{c:?}").contains("s3cret"));
    }

    #[test]
    fn protocol_ranges() {
        let mut r = req(Some("require"), None);
        r.max_version = Some("TLSv1.1".into());
        assert!(
            TlsSettings::resolve(&r).is_err(),
            "below the default minimum"
        );
        r.max_version = Some("TLSv1.2".into());
        r.min_version = Some("TLSv1.3".into());
        assert!(TlsSettings::resolve(&r).is_err());
        r.min_version = Some("TLSv1.2".into());
        assert!(TlsSettings::resolve(&r).is_ok());
    }

    #[test]
    fn host_names_match_by_libpq_rules() {
        for (pattern, host, hit) in [
            ("db.example.com", "DB.example.com", true),
            ("*.example.com", "db.example.com", true),
            ("*.example.com", "a.db.example.com", false),
            ("*.example.com", "example.com", false),
            ("*.example.com", ".example.com", false),
            ("db*.example.com", "db1.example.com", false),
            ("*", "localhost", false),
        ] {
            assert_eq!(
                certificate_name_matches(pattern, host),
                hit,
                "{pattern} vs {host}"
            );
        }
    }
}
