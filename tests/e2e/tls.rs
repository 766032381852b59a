//! TLS on every connection: a server with ssl=on, a certificate the test makes (rcgen), and a
//! pg_hba.conf that lets dbio's role in only over `hostssl`; and a fake server without TLS
//! that records every byte it receives, to prove that no password is sent where TLS was
//! required.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dbio_tests::{
    Dbio, TestCluster, assert_exit, assert_idx_scans, assert_valid_result, idx_scans, num,
    read_result, stderr, stdout,
};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

const PASSWORD: &str = "Tls-Pass-7";
const SCALE: &str = "256blocks";

/// A CA and a server certificate for `localhost` and 127.0.0.1 signed by it, as PEM files
/// in `dir`: (ca.pem, server.crt, server.key).
fn make_certificates(dir: &Path, tag: &str) -> (PathBuf, PathBuf, PathBuf) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, format!("dbio test CA {tag}"));
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let server_key = KeyPair::generate().unwrap();
    let mut server_params =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    server_params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    let server_cert = server_params.signed_by(&server_key, &issuer).unwrap();
    let paths = (
        dir.join(format!("ca-{tag}.pem")),
        dir.join(format!("server-{tag}.crt")),
        dir.join(format!("server-{tag}.key")),
    );
    std::fs::write(&paths.0, ca_cert.pem()).unwrap();
    std::fs::write(&paths.1, server_cert.pem()).unwrap();
    std::fs::write(&paths.2, server_key.serialize_pem()).unwrap();
    (paths.0, paths.1, paths.2)
}

/// A scratch server with ssl=on and the test's certificate, where role `bench` (superuser,
/// SCRAM password) may connect over TCP only with TLS (`hostssl`); the test's own reads use
/// `postgres` over plaintext.
pub(crate) struct TlsServer {
    pub pg: TestCluster,
    pub ca: PathBuf,
    pub other_ca: PathBuf,
    _certs: tempfile::TempDir,
}

impl TlsServer {
    pub(crate) async fn start() -> TlsServer {
        let pg = TestCluster::start_with(16, None, &[]);
        let certs = tempfile::tempdir().unwrap();
        let (ca, server_crt, server_key) = make_certificates(certs.path(), "good");
        let (other_ca, _, _) = make_certificates(certs.path(), "other");
        let data = pg.cluster.data_dir().to_path_buf();
        let owner = std::fs::metadata(&data).unwrap();
        for (from, name) in [(&server_crt, "server.crt"), (&server_key, "server.key")] {
            let to = data.join(name);
            std::fs::copy(from, &to).unwrap();
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o600)).unwrap();
            std::os::unix::fs::chown(&to, Some(owner.uid()), Some(owner.gid())).unwrap();
        }
        std::fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\n\
             hostnossl all postgres 127.0.0.1/32 trust\n\
             hostssl all bench 127.0.0.1/32 scram-sha-256\n",
        )
        .unwrap();
        let c = pg.client().await;
        c.batch_execute(&format!(
            "CREATE ROLE bench LOGIN SUPERUSER PASSWORD '{PASSWORD}'"
        ))
        .await
        .unwrap();
        c.batch_execute("ALTER SYSTEM SET ssl = on").await.unwrap();
        c.query_one("SELECT pg_reload_conf()", &[]).await.unwrap();
        // The reload is asynchronous: wait until the server reads the new settings.
        for _ in 0..100 {
            let on: String = c.query_one("SHOW ssl", &[]).await.unwrap().get(0);
            if on == "on" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        TlsServer {
            pg,
            ca,
            other_ca,
            _certs: certs,
        }
    }

    pub(crate) fn dsn(&self, extra: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user=bench dbname=postgres password={PASSWORD} {extra}",
            self.pg.cluster.state.port
        )
    }
}

fn run_args(dsn: &str, out: &str, engine: &str) -> Dbio {
    Dbio::new("run")
        .dsn(dsn)
        .schemas(1)
        .scale(SCALE)
        .opt("--engine", engine)
        .readers(2)
        .writers(1)
        .run_time("1s")
        .out(out)
        .quiet()
}

/// The result says the sessions used TLS 1.3 with a cipher suite, and the report says so.
fn assert_sessions_used_tls(dir: &Path) {
    let r = read_result(dir);
    assert_valid_result(&r);
    assert_eq!(r["status"], "ok");
    let tls = &r["environment"]["session_tls"];
    assert_eq!(tls["used"], true, "{tls}");
    assert_eq!(tls["sessions"], 3, "{tls}");
    assert_eq!(tls["sessions_with_tls"], 3, "{tls}");
    assert_eq!(tls["protocol"], "TLSv1.3", "{tls}");
    assert!(tls["cipher"].as_str().unwrap().starts_with("TLS_"), "{tls}");
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(report.contains("tls       TLSv1.3 TLS_"), "{report}");
    let target = r["environment"]["target"].as_str().unwrap();
    assert!(!target.contains(PASSWORD), "{target}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_run_and_ramp_work_over_hostssl_only() {
    let server = TlsServer::start().await;
    let require = server.dsn("sslmode=require");
    assert_exit(
        &Dbio::new("setup")
            .dsn(&require)
            .schemas(1)
            .scale(SCALE)
            .quiet()
            .output(),
        0,
    );
    for engine in ["client", "server"] {
        let out = tempfile::tempdir().unwrap();
        let o = run_args(&require, out.path().to_str().unwrap(), engine).output();
        assert_exit(&o, 0);
        assert_sessions_used_tls(out.path());
    }
    // verify-full with the CA that signed the server's certificate, and SCRAM bound to the
    // TLS session (SCRAM-SHA-256-PLUS): required, so a connection without it would fail.
    let full = server.dsn(&format!(
        "sslmode=verify-full channel_binding=require sslrootcert={}",
        server.ca.display()
    ));
    let out = tempfile::tempdir().unwrap();
    let o = run_args(&full, out.path().to_str().unwrap(), "client").output();
    assert_exit(&o, 0);
    assert_sessions_used_tls(out.path());
    let recorded = read_result(out.path())["config"]["target"]["dsn"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(recorded.contains("sslmode=verify-full"), "{recorded}");
    assert!(!recorded.contains(PASSWORD), "{recorded}");

    let ramp_dir = tempfile::tempdir().unwrap();
    let ramp_out = ramp_dir.path().join("ramp");
    let o = Dbio::new("ramp")
        .dsn(&full)
        .schemas(1)
        .scale(SCALE)
        .readers("1,2")
        .writers(0)
        .run_time("1s")
        .out(&ramp_out)
        .output();
    assert_exit(&o, 0);
    assert!(ramp_out.join("report.html").is_file(), "{}", stdout(&o));

    // The server saw dbio's connections encrypted: its own view of the collector's.
    let c = server.pg.client().await;
    let plaintext_bench: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.usename = 'bench' AND NOT s.ssl",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(plaintext_bench, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_problems_and_plaintext_fail_with_exit_2_naming_them() {
    let server = TlsServer::start().await;
    // A CA that did not sign the server's certificate.
    let wrong_ca = server.dsn(&format!(
        "sslmode=verify-ca sslrootcert={}",
        server.other_ca.display()
    ));
    let o = Dbio::new("teardown").dsn(&wrong_ca).output();
    assert_exit(&o, 2);
    let e = stderr(&o);
    assert!(
        e.contains("certificate") && e.contains("not signed by a trusted CA"),
        "{e}"
    );
    assert!(!e.contains(PASSWORD), "{e}");

    // The right CA, but a host name the certificate was not issued for (hostaddr keeps the
    // connection on 127.0.0.1).
    let wrong_name = format!(
        "host=wrong.example hostaddr=127.0.0.1 port={} user=bench dbname=postgres password={PASSWORD} sslmode=verify-full sslrootcert={}",
        server.pg.cluster.state.port,
        server.ca.display()
    );
    let o = Dbio::new("teardown").dsn(&wrong_name).output();
    assert_exit(&o, 2);
    let e = stderr(&o);
    assert!(
        e.contains("certificate does not match host name \"wrong.example\""),
        "{e}"
    );
    // verify-ca does not check the name: the same connection works.
    let ca_only = wrong_name.replace("verify-full", "verify-ca");
    assert_exit(&Dbio::new("teardown").dsn(&ca_only).output(), 0);

    // Plaintext is refused by pg_hba.conf (hostssl only), and dbio says what to do.
    let o = Dbio::new("teardown")
        .dsn(server.dsn("sslmode=disable"))
        .output();
    assert_exit(&o, 2);
    let e = stderr(&o);
    assert!(
        e.contains("pg_hba.conf") && e.contains("no encryption"),
        "{e}"
    );
    assert!(e.contains("sslmode=require"), "{e}");
}

/// A server that declines TLS ('N' to the SSLRequest) and then asks for a cleartext
/// password, recording every byte each client sends.
struct NoTlsServer {
    port: u16,
    received: Arc<Mutex<Vec<u8>>>,
    connections: Arc<Mutex<u32>>,
}

impl NoTlsServer {
    fn start() -> NoTlsServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(Mutex::new(0));
        let (rec, count) = (received.clone(), connections.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut s) = stream else { return };
                *count.lock().unwrap() += 1;
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let mut buf = [0u8; 4096];
                let mut asked_ssl = false;
                let mut asked_password = false;
                loop {
                    let n = match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    rec.lock().unwrap().extend_from_slice(&buf[..n]);
                    if asked_password {
                        // The password message: end the conversation.
                        break;
                    }
                    if !asked_ssl {
                        asked_ssl = true;
                        let _ = s.write_all(b"N");
                    } else if !asked_password {
                        asked_password = true;
                        // AuthenticationCleartextPassword.
                        let _ = s.write_all(&[b'R', 0, 0, 0, 8, 0, 0, 0, 3]);
                    }
                }
            }
        });
        NoTlsServer {
            port,
            received,
            connections,
        }
    }
}

#[test]
fn sslmode_require_sends_no_password_to_a_server_without_tls() {
    let fake = NoTlsServer::start();
    let secret = "Never-Sent-42";
    let dsn = format!(
        "host=127.0.0.1 port={} user=bench dbname=postgres password={secret} sslmode=require",
        fake.port
    );
    // The tokio-postgres connections (every command's first connection).
    for args in [
        Dbio::new("teardown").dsn(&dsn),
        Dbio::new("check").dsn(&dsn),
    ] {
        let o = args.output();
        assert_exit(&o, 2);
        let e = stderr(&o);
        assert!(
            e.contains("server does not support SSL, but SSL was required"),
            "{e}"
        );
        assert!(e.contains("no password was sent"), "{e}");
    }
    // The measured sessions' own connections.
    let target = dbio_postgres::Target::from_dsn(&dsn).unwrap();
    let Err(e) = dbio_postgres::WireConn::open(&target, "dbio-reader-1") else {
        panic!("a session connected to a server without TLS under sslmode=require");
    };
    assert_eq!(dbio_cli::exit_code(e.kind()), 2);
    assert!(
        e.to_string()
            .contains("server does not support SSL, but SSL was required"),
        "{e}"
    );
    // Give the fake server a moment to record what it got.
    std::thread::sleep(Duration::from_millis(300));
    let got = fake.received.lock().unwrap().clone();
    let connections = *fake.connections.lock().unwrap();
    assert!(connections >= 3, "{connections} connections");
    assert!(
        !got.windows(secret.len()).any(|w| w == secret.as_bytes()),
        "the password reached the server: {got:?}"
    );
    // Each connection sent its SSLRequest and nothing else: no startup message.
    let ssl_request = [0u8, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];
    assert_eq!(
        got.len(),
        ssl_request.len() * connections as usize,
        "{got:?}"
    );
    assert!(got.chunks(8).all(|c| c == ssl_request), "{got:?}");

    // Under sslmode=prefer the same server gets the plaintext startup (libpq's fallback),
    // which shows the fake server would have recorded a password had it been sent.
    let prefer = dsn.replace("sslmode=require", "sslmode=prefer connect_timeout=2");
    let target = dbio_postgres::Target::from_dsn(&prefer).unwrap();
    let _ = dbio_postgres::WireConn::open(&target, "dbio-reader-1");
    std::thread::sleep(Duration::from_millis(300));
    let got = fake.received.lock().unwrap().clone();
    assert!(
        got.windows(secret.len()).any(|w| w == secret.as_bytes()),
        "the fake server did not record the prefer-mode password"
    );
}

/// 40 TLS sessions on `auto`: the event engine drives them over non-blocking OpenSSL
/// streams (until now a TLS run fell back to a thread per session), and the server counts
/// one index scan per operation dbio counted, each session's own work included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_engine_drives_tls_sessions_and_the_server_counts_the_same() {
    let server = TlsServer::start().await;
    let full = server.dsn(&format!(
        "sslmode=verify-full channel_binding=require sslrootcert={}",
        server.ca.display()
    ));
    let setup = Dbio::new("setup")
        .dsn(&full)
        .schemas(2)
        .scale(SCALE)
        .quiet();
    assert_exit(&setup.output(), 0);
    let c = server.pg.client().await;
    let before = idx_scans(&c).await;
    let out = tempfile::tempdir().unwrap();
    let o = Dbio::new("run")
        .dsn(&full)
        .schemas(2)
        .scale(SCALE)
        .readers(36)
        .writers(4)
        .run_time("3s")
        .out(out.path())
        .quiet()
        .output();
    assert_exit(&o, 0);
    let after = idx_scans(&c).await;
    let r = read_result(out.path());
    assert_valid_result(&r);
    assert_eq!(r["status"], "ok", "{}", r["error"]);
    assert_eq!(r["client"]["session_engine"], "events", "{}", r["client"]);
    let tls = &r["environment"]["session_tls"];
    assert_eq!(tls["sessions"], 40, "{tls}");
    assert_eq!(tls["sessions_with_tls"], 40, "{tls}");
    assert_eq!(tls["protocol"], "TLSv1.3", "{tls}");
    assert_eq!(num(&r, &["client", "errors"]), 0.0);
    let reads = num(&r, &["client", "read", "count"]) as u64;
    let updates = num(&r, &["client", "update", "count"]) as u64;
    assert!(
        reads > 200 && updates > 20,
        "reads {reads}, updates {updates}"
    );
    assert_idx_scans(after - before, reads + updates);
    for s in r["sessions"].as_array().unwrap() {
        assert_eq!(s["ended_by"], "window", "{s}");
        let ops = s["ops"][0].as_u64().unwrap_or(0) + s["ops"][1].as_u64().unwrap_or(0);
        assert!(ops > 0, "a session did nothing: {s}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_session_is_cancelled_over_tls_and_reports_its_cipher() {
    let server = TlsServer::start().await;
    let target = dbio_postgres::Target::from_dsn(&server.dsn(&format!(
        "sslmode=verify-full sslrootcert={}",
        server.ca.display()
    )))
    .unwrap();
    let mut conn = match dbio_postgres::WireConn::open(&target, "dbio-reader-1") {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    let tls = conn.tls().expect("a TLS session").clone();
    assert_eq!(tls.protocol, "TLSv1.3");
    let cancel = conn.cancel_handle();
    let started = std::time::Instant::now();
    let e = tokio::task::spawn_blocking(move || {
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(500));
            cancel.cancel();
        });
        let e = conn.simple("SELECT pg_sleep(60)").unwrap_err();
        canceller.join().unwrap();
        e.to_string()
    })
    .await
    .unwrap();
    assert!(e.contains("57014"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(30));
}

/// A CA (certificate, and an issuer for more).
struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let pem = params.self_signed(&key).unwrap().pem();
        Ca {
            pem,
            issuer: Issuer::new(params, key),
        }
    }

    /// A leaf for `sans` (subjectAltName) with `cn` as Common Name, serial `serial`; `expired`
    /// sets its validity in 2020.
    fn leaf(&self, sans: &[&str], cn: &str, serial: u64, expired: bool) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut p =
            CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.serial_number = Some(serial.into());
        if expired {
            p.not_before = rcgen::date_time_ymd(2020, 1, 1);
            p.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        (
            p.signed_by(&key, &self.issuer).unwrap().pem(),
            key.serialize_pem(),
        )
    }

    /// A CRL of this CA revoking `serials`.
    fn crl(&self, serials: &[u64]) -> String {
        rcgen::CertificateRevocationListParams {
            this_update: rcgen::date_time_ymd(2020, 1, 1),
            next_update: rcgen::date_time_ymd(2040, 1, 1),
            crl_number: 1u64.into(),
            issuing_distribution_point: None,
            revoked_certs: serials
                .iter()
                .map(|s| rcgen::RevokedCertParams {
                    serial_number: (*s).into(),
                    revocation_time: rcgen::date_time_ymd(2020, 1, 1),
                    reason_code: Some(rcgen::RevocationReason::KeyCompromise),
                    invalidity_date: None,
                })
                .collect(),
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        }
        .signed_by(&self.issuer)
        .unwrap()
        .pem()
        .unwrap()
    }
}

// Seen: PostgreSQL's documented self-signed recipe (a certificate used as its own
// sslrootcert) worked in psql with verify-full and was refused by dbio
// ("CaUsedAsEndEntity"); a certificate with the host in its CN only was refused where libpq
// matches the CN; sslcrl and sslpassword were refused by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_outcomes_match_psql_row_by_row() {
    // Debian's psql (libpq of PostgreSQL 15 over the system's OpenSSL), as scripts/test.sh
    // installs it.
    let psql = PathBuf::from("/usr/lib/postgresql/15/bin/psql");
    assert!(
        psql.is_file(),
        "this test needs Debian's psql at {}",
        psql.display()
    );
    let pg = TestCluster::start_with(16, None, &[]);
    let data = pg.cluster.data_dir().to_path_buf();
    let owner = std::fs::metadata(&data).unwrap();
    let files = tempfile::tempdir().unwrap();
    let put = |name: &str, text: &str, server: bool| -> PathBuf {
        let path = if server {
            data.join(name)
        } else {
            files.path().join(name)
        };
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        if server {
            std::os::unix::fs::chown(&path, Some(owner.uid()), Some(owner.gid())).unwrap();
        }
        path
    };
    let ca = Ca::new("dbio parity CA");
    let ca_file = put("ca.pem", &ca.pem, false);
    put("server-ca.pem", &ca.pem, true);
    // The client's certificate (the server asks for one: clientcert=verify-ca) and its key,
    // plain and encrypted with a passphrase.
    let (client_crt, client_key) = ca.leaf(&[], "bench", 7, false);
    let client_crt = put("client.crt", &client_crt, false);
    let client_key_file = put("client.key", &client_key, false);
    let encrypted = files.path().join("client-enc.key");
    let o = Command::new("openssl")
        .args(["pkey", "-aes256", "-passout", "pass:Key-Pass-3", "-in"])
        .arg(&client_key_file)
        .arg("-out")
        .arg(&encrypted)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::set_permissions(&encrypted, std::fs::Permissions::from_mode(0o600)).unwrap();

    std::fs::write(
        data.join("pg_hba.conf"),
        "local all all trust\n\
         hostssl all bench 127.0.0.1/32 scram-sha-256 clientcert=verify-ca\n",
    )
    .unwrap();
    let c = pg.client().await;
    for sql in [
        format!("CREATE ROLE bench LOGIN PASSWORD '{PASSWORD}'"),
        "ALTER SYSTEM SET ssl_ca_file = 'server-ca.pem'".into(),
        "ALTER SYSTEM SET ssl = on".into(),
    ] {
        c.batch_execute(&sql).await.unwrap();
    }

    let self_signed = {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, "localhost");
        (p.self_signed(&key).unwrap().pem(), key.serialize_pem())
    };
    let self_signed_file = put("self-signed.pem", &self_signed.0, false);
    let good = ca.leaf(&["localhost"], "localhost", 11, false);
    let revoking = put("revoking.crl", &ca.crl(&[11]), false);
    let clean = put("clean.crl", &ca.crl(&[99]), false);
    let enc = encrypted.display().to_string();
    let key = client_key_file.display().to_string();
    // name, server certificate and key, host, sslrootcert, extra keywords, client key.
    type Row<'a> = (
        &'a str,
        (String, String),
        &'a str,
        &'a Path,
        String,
        &'a str,
    );
    let rows: Vec<Row> = vec![
        (
            "CA + leaf",
            good.clone(),
            "localhost",
            &ca_file,
            String::new(),
            &key,
        ),
        (
            "self-signed as its own root",
            self_signed.clone(),
            "localhost",
            &self_signed_file,
            String::new(),
            &key,
        ),
        (
            "CN only",
            ca.leaf(&[], "localhost", 12, false),
            "localhost",
            &ca_file,
            String::new(),
            &key,
        ),
        (
            "SAN only",
            ca.leaf(&["localhost"], "not-the-host", 13, false),
            "localhost",
            &ca_file,
            String::new(),
            &key,
        ),
        (
            "wrong host",
            good.clone(),
            "wrong.example",
            &ca_file,
            String::new(),
            &key,
        ),
        (
            "expired",
            ca.leaf(&["localhost"], "localhost", 14, true),
            "localhost",
            &ca_file,
            String::new(),
            &key,
        ),
        (
            "CRL revokes it",
            good.clone(),
            "localhost",
            &ca_file,
            format!("sslcrl={}", revoking.display()),
            &key,
        ),
        (
            "CRL does not",
            good.clone(),
            "localhost",
            &ca_file,
            format!("sslcrl={}", clean.display()),
            &key,
        ),
        (
            "encrypted key, sslpassword",
            good.clone(),
            "localhost",
            &ca_file,
            "sslpassword=Key-Pass-3".into(),
            &enc,
        ),
        (
            "encrypted key, wrong sslpassword",
            good.clone(),
            "localhost",
            &ca_file,
            "sslpassword=nope".into(),
            &enc,
        ),
    ];
    let mut table = Vec::new();
    for (i, (name, (crt, key_pem), host, root, extra, client_key)) in rows.iter().enumerate() {
        put(&format!("s{i}.crt"), crt, true);
        put(&format!("s{i}.key"), key_pem, true);
        for sql in [
            format!("ALTER SYSTEM SET ssl_cert_file = 's{i}.crt'"),
            format!("ALTER SYSTEM SET ssl_key_file = 's{i}.key'"),
            "SELECT pg_reload_conf()".into(),
        ] {
            c.batch_execute(&sql).await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let dsn = format!(
            "host={host} hostaddr=127.0.0.1 port={} user=bench dbname=postgres password={PASSWORD} \
             sslmode=verify-full sslrootcert={} sslcert={} sslkey={client_key} {extra}",
            pg.cluster.state.port,
            root.display(),
            client_crt.display()
        );
        let home = files.path().to_str().unwrap();
        let by_psql = Command::new(&psql)
            .args([dsn.as_str(), "-Atc", "SELECT 1"])
            .env("HOME", home)
            .env("PGPASSFILE", "/nonexistent")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let by_dbio = Dbio::new("teardown").dsn(&dsn).env("HOME", home).output();
        let session = dbio_postgres::Target::from_dsn(&dsn)
            .and_then(|t| dbio_postgres::WireConn::open(&t, "dbio-reader-1"));
        let outcome = (
            by_psql.status.success(),
            by_dbio.status.success(),
            session.is_ok(),
        );
        table.push(format!(
            "{name:34} psql {:5} dbio {:5} session {:5} | {} | {}",
            outcome.0,
            outcome.1,
            outcome.2,
            String::from_utf8_lossy(&by_psql.stderr).trim(),
            stderr(&by_dbio)
                .lines()
                .find(|l| l.starts_with("dbio: error"))
                .unwrap_or("")
        ));
        assert!(
            outcome.0 == outcome.1 && outcome.1 == outcome.2,
            "row {name}: psql, dbio and a session disagree\n{}",
            table.join("\n")
        );
    }
    eprintln!("{}", table.join("\n"));
    // dbio names the check that failed.
    for (row, reason) in [
        ("wrong host", "does not match host name \"wrong.example\""),
        ("expired", "has expired"),
        ("CRL revokes it", "revoked"),
        ("encrypted key, wrong", "bad decrypt"),
    ] {
        let line = table.iter().find(|l| l.starts_with(row)).unwrap();
        assert!(line.contains(reason), "{line}");
    }
    // The table is not trivial: some rows connect, some are refused.
    assert!(
        table.iter().any(|r| r.contains("psql true"))
            && table.iter().any(|r| r.contains("psql false"))
    );
}

// Seen: the PostgreSQL results store ignored PGSSLMODE=require and verify-full and sent the
// password in cleartext (its connection used NoTls).
#[test]
fn the_results_store_under_sslmode_require_sends_no_password_to_a_server_without_tls() {
    let fake = NoTlsServer::start();
    let secret = "Store-Secret-8";
    let url = format!(
        "postgresql://bench:{secret}@127.0.0.1:{}/postgres",
        fake.port
    );
    for (store, env) in [
        (format!("{url}?sslmode=require"), vec![]),
        (url.clone(), vec![("PGSSLMODE", "require")]),
        (
            format!("{url}?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem"),
            vec![],
        ),
    ] {
        let o = env
            .iter()
            .fold(Dbio::new("history list").store(&store), |cmd, (k, v)| {
                cmd.env(k, v)
            })
            .output();
        assert_exit(&o, 2);
        let e = stderr(&o);
        assert!(!e.contains(secret), "{e}");
        assert!(
            e.contains("server does not support SSL, but SSL was required")
                || e.contains("root certificate file \"/nonexistent/ca.pem\" does not exist"),
            "{e}"
        );
    }
    std::thread::sleep(Duration::from_millis(300));
    let got = fake.received.lock().unwrap().clone();
    assert!(
        !got.windows(secret.len()).any(|w| w == secret.as_bytes()),
        "the password reached the server: {got:?}"
    );
    let ssl_request = [0u8, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];
    let connections = *fake.connections.lock().unwrap();
    assert_eq!(
        connections, 2,
        "verify-full with a missing root file never connects"
    );
    assert_eq!(
        got,
        ssl_request.repeat(2),
        "an SSL request and nothing else"
    );
}
