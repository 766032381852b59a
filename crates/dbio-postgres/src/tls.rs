//! TLS on every connection, with libpq's `sslmode` semantics (libpq "SSL Support", table
//! "SSL Mode Descriptions"), over rustls: one client configuration per target, used by the
//! tokio-postgres connections (tokio-postgres-rustls) and by the measured sessions' blocking
//! connections (`wire`, rustls' `StreamOwned`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

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

/// The TLS part of a target, resolved from sslmode, sslrootcert, sslcert, sslkey, sslsni,
/// ssl_min/max_protocol_version and channel_binding.
#[derive(Clone)]
pub struct TlsSettings {
    pub mode: SslMode,
    pub roots: Option<RootCerts>,
    pub channel_binding: ChannelBindingMode,
    /// The rustls configuration for TLS attempts (None with sslmode=disable).
    pub config: Option<Arc<ClientConfig>>,
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
    pub sslcert: Option<String>,
    pub sslkey: Option<String>,
    pub sslcertmode: Option<String>,
    pub sslsni: Option<String>,
    pub min_version: Option<String>,
    pub max_version: Option<String>,
    pub channel_binding: Option<String>,
    /// Home of ~/.postgresql (libpq's default certificate folder).
    pub home: Option<PathBuf>,
}

impl TlsSettings {
    /// Resolves the request as libpq does: sslrootcert=system implies verify-full (and refuses
    /// a weaker explicit mode); sslmode=require with a root certificate file verifies the CA;
    /// the client certificate and key default to ~/.postgresql/postgresql.crt and .key when
    /// those exist.
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
                config: None,
            });
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let versions = protocol_versions(req)?;
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| PgError::Usage(format!("TLS protocol versions: {e}")))?;
        let verifier: Arc<dyn ServerCertVerifier> = match mode {
            SslMode::VerifyCa | SslMode::VerifyFull => {
                let store = load_roots(roots.as_ref(), mode)?;
                let webpki =
                    WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider.clone())
                        .build()
                        .map_err(|e| PgError::Usage(format!("root certificates: {e}")))?;
                Arc::new(Verifier {
                    webpki: Some(webpki),
                    check_name: mode == SslMode::VerifyFull,
                    provider: provider.clone(),
                })
            }
            _ => Arc::new(Verifier {
                webpki: None,
                check_name: false,
                provider: provider.clone(),
            }),
        };
        let builder = builder
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let cert_mode = req.sslcertmode.as_deref().unwrap_or("allow");
        let client_pair = match cert_mode {
            "disable" => None,
            "allow" | "require" => client_certificate(req, pg_dir.as_deref())?,
            other => {
                return Err(PgError::Usage(format!(
                    "invalid sslcertmode value: \"{other}\"; use disable, allow or require"
                )));
            }
        };
        if cert_mode == "require" && client_pair.is_none() {
            return Err(PgError::Usage(
                "sslcertmode=require, but no client certificate was found: name it with sslcert and sslkey".into(),
            ));
        }
        let mut config = match client_pair {
            Some((certs, key)) => builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| PgError::Usage(format!("client certificate: {e}")))?,
            None => builder.with_no_client_auth(),
        };
        config.enable_sni = match req.sslsni.as_deref() {
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
            roots,
            channel_binding,
            config: Some(Arc::new(config)),
        })
    }
}

fn protocol_versions(req: &TlsRequest) -> Result<Vec<&'static rustls::SupportedProtocolVersion>> {
    // rustls speaks TLS 1.2 and 1.3 only; libpq's default minimum is TLSv1.2.
    let rank = |v: &str, key: &str| -> Result<u8> {
        match v {
            "TLSv1" => Ok(0),
            "TLSv1.1" => Ok(1),
            "TLSv1.2" => Ok(2),
            "TLSv1.3" => Ok(3),
            _ => Err(PgError::Usage(format!(
                "invalid {key} value: \"{v}\"; use TLSv1.2 or TLSv1.3"
            ))),
        }
    };
    let min = match req.min_version.as_deref().filter(|v| !v.is_empty()) {
        Some(v) => rank(v, "ssl_min_protocol_version")?,
        None => 2,
    };
    let max = match req.max_version.as_deref().filter(|v| !v.is_empty()) {
        Some(v) => rank(v, "ssl_max_protocol_version")?,
        None => 3,
    };
    if max < 2 {
        return Err(PgError::Usage(
            "ssl_max_protocol_version below TLSv1.2 is not supported: dbio speaks TLS 1.2 and 1.3"
                .into(),
        ));
    }
    if min > max {
        return Err(PgError::Usage(
            "invalid SSL protocol version range: ssl_min_protocol_version is above ssl_max_protocol_version".into(),
        ));
    }
    let mut out = Vec::new();
    if min <= 2 {
        out.push(&rustls::version::TLS12);
    }
    if max >= 3 {
        out.push(&rustls::version::TLS13);
    }
    Ok(out)
}

fn load_roots(roots: Option<&RootCerts>, mode: SslMode) -> Result<RootCertStore> {
    let mut store = RootCertStore::empty();
    match roots {
        Some(RootCerts::System) => {
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                // A platform certificate rustls cannot parse is skipped, as libpq's OpenSSL
                // would skip it.
                let _ = store.add(cert);
            }
            if store.is_empty() {
                return Err(PgError::Usage(
                    "sslrootcert=system, but no trusted root certificate was found on this host (install ca-certificates, or name a file in sslrootcert)".into(),
                ));
            }
        }
        Some(RootCerts::File(path)) => {
            if !path.exists() {
                return Err(PgError::Usage(format!(
                    "root certificate file \"{}\" does not exist; either provide the file, use the system's trusted roots with sslrootcert=system, or change sslmode to disable server certificate verification (sslmode={} was asked)",
                    path.display(),
                    mode.as_str()
                )));
            }
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|it| it.collect::<std::result::Result<Vec<_>, _>>())
                .map_err(|e| {
                    PgError::Usage(format!(
                        "could not read root certificate file \"{}\": {e}",
                        path.display()
                    ))
                })?;
            for cert in certs {
                store.add(cert).map_err(|e| {
                    PgError::Usage(format!("root certificate file \"{}\": {e}", path.display()))
                })?;
            }
            if store.is_empty() {
                return Err(PgError::Usage(format!(
                    "root certificate file \"{}\" holds no certificate",
                    path.display()
                )));
            }
        }
        None => {
            return Err(PgError::Usage(format!(
                "sslmode={} needs trusted root certificates: name a file with sslrootcert (or PGSSLROOTCERT), or use sslrootcert=system",
                mode.as_str()
            )));
        }
    }
    Ok(store)
}

type ClientPair = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// The client certificate and key: sslcert/sslkey, else ~/.postgresql/postgresql.{crt,key}
/// when the certificate file exists (libpq sends none otherwise).
fn client_certificate(req: &TlsRequest, pg_dir: Option<&Path>) -> Result<Option<ClientPair>> {
    let cert_path = match req.sslcert.as_deref().filter(|v| !v.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => match pg_dir {
            Some(d) => d.join("postgresql.crt"),
            None => return Ok(None),
        },
    };
    if !cert_path.exists() {
        if req.sslcert.is_some() {
            return Err(PgError::Usage(format!(
                "certificate file \"{}\" (sslcert) does not exist",
                cert_path.display()
            )));
        }
        return Ok(None);
    }
    let key_path = match req.sslkey.as_deref().filter(|v| !v.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => match pg_dir {
            Some(d) => d.join("postgresql.key"),
            None => cert_path.with_extension("key"),
        },
    };
    let certs = CertificateDer::pem_file_iter(&cert_path)
        .and_then(|it| it.collect::<std::result::Result<Vec<_>, _>>())
        .map_err(|e| {
            PgError::Usage(format!(
                "could not read certificate file \"{}\": {e}",
                cert_path.display()
            ))
        })?;
    check_key_permissions(&key_path)?;
    let key = PrivateKeyDer::from_pem_file(&key_path).map_err(|e| {
        PgError::Usage(format!(
            "could not read private key file \"{}\": {e}",
            key_path.display()
        ))
    })?;
    Ok(Some((certs, key)))
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
    // Running as root, libpq applies the root rule to root-owned files only.
    if too_open {
        return Err(PgError::Usage(format!(
            "private key file \"{}\" has group or world access; file must have permissions u=rw (0600) or less if owned by the current user, or permissions u=rw,g=r (0640) or less if owned by root",
            path.display()
        )));
    }
    Ok(())
}

/// Checks the server's certificate as the sslmode asks: with `webpki`, the chain up to a
/// trusted root (and the host name when `check_name`); without, nothing but the handshake
/// signature, which proves the server holds the key of the certificate it showed.
#[derive(Debug)]
struct Verifier {
    webpki: Option<Arc<WebPkiServerVerifier>>,
    check_name: bool,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let Some(webpki) = &self.webpki else {
            return Ok(ServerCertVerified::assertion());
        };
        // webpki checks the chain before the name, so a name error means the chain is good.
        match webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.check_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// What went wrong in a handshake, in the words a DBA needs: which certificate check failed
/// and what to do.
pub fn describe_handshake_error(e: &str, host: &str) -> String {
    if e.contains("UnknownIssuer") || e.contains("unknown issuer") {
        "the server's certificate is not signed by a trusted CA (certificate verify failed: unknown issuer): check sslrootcert names the CA that signed the server's certificate".into()
    } else if e.contains("NotValidForName") || e.contains("not valid for name") {
        format!(
            "the server's certificate does not match host name \"{host}\" (certificate verify failed: name mismatch): connect with the name the certificate was issued for, or use sslmode=verify-ca"
        )
    } else if e.contains("Expired") || e.contains("expired") {
        "the server's certificate has expired (certificate verify failed)".into()
    } else if e.contains("NotValidYet") {
        "the server's certificate is not valid yet (certificate verify failed): check the clocks"
            .into()
    } else {
        format!("TLS handshake failed: {e}")
    }
}

/// The TLS server end point channel binding (RFC 5929 section 4.1): the hash of the server's
/// certificate, with the hash of its signature algorithm (SHA-256 for MD5 and SHA-1). None
/// for algorithms without a single hash (Ed25519, RSA-PSS), as libpq.
pub fn server_end_point(cert: &[u8]) -> Option<Vec<u8>> {
    use x509_cert::der::Decode;
    let parsed = x509_cert::Certificate::from_der(cert).ok()?;
    let oid = parsed.signature_algorithm.oid.to_string();
    let algorithm = match oid.as_str() {
        // md5WithRSA, sha1WithRSA, sha256WithRSA, ecdsa-with-SHA1, ecdsa-with-SHA256
        "1.2.840.113549.1.1.4"
        | "1.2.840.113549.1.1.5"
        | "1.2.840.113549.1.1.11"
        | "1.2.840.10045.4.1"
        | "1.2.840.10045.4.3.2" => &ring::digest::SHA256,
        // sha384WithRSA, ecdsa-with-SHA384
        "1.2.840.113549.1.1.12" | "1.2.840.10045.4.3.3" => &ring::digest::SHA384,
        // sha512WithRSA, ecdsa-with-SHA512
        "1.2.840.113549.1.1.13" | "1.2.840.10045.4.3.4" => &ring::digest::SHA512,
        _ => return None,
    };
    Some(ring::digest::digest(algorithm, cert).as_ref().to_vec())
}

/// The protocol and cipher suite a session negotiated, as recorded in the result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    pub protocol: String,
    pub cipher: String,
}

impl Negotiated {
    pub fn of(conn: &rustls::ClientConnection) -> Negotiated {
        let protocol = match conn.protocol_version() {
            Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3".to_string(),
            Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2".to_string(),
            Some(other) => format!("{other:?}"),
            None => "unknown".into(),
        };
        let cipher = conn
            .negotiated_cipher_suite()
            .and_then(|s| s.suite().as_str())
            .map(str::to_string)
            .unwrap_or_else(|| "unknown".into());
        Negotiated { protocol, cipher }
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
                .config
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
    fn protocol_ranges() {
        let mut r = req(Some("require"), None);
        r.max_version = Some("TLSv1.1".into());
        assert!(TlsSettings::resolve(&r).is_err());
        r.max_version = Some("TLSv1.2".into());
        r.min_version = Some("TLSv1.3".into());
        assert!(TlsSettings::resolve(&r).is_err());
        r.min_version = Some("TLSv1.2".into());
        assert!(TlsSettings::resolve(&r).is_ok());
    }
}
