//! TLS on every connection: a server with ssl=on, a certificate the test makes (rcgen), and a
//! pg_hba.conf that lets dbio's role in only over `hostssl`; and a fake server without TLS
//! that records every byte it receives, to prove that no password is sent where TLS was
//! required.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dbio_tests::{
    TestCluster, assert_exit, assert_valid_result, dbio, read_result, stderr, stdout,
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

fn run_args<'a>(dsn: &'a str, out: &'a str, engine: &'a str) -> Vec<&'a str> {
    vec![
        "run",
        "--dsn",
        dsn,
        "--schemas",
        "1",
        "--scale",
        SCALE,
        "--engine",
        engine,
        "--readers",
        "2",
        "--writers",
        "1",
        "--run-time",
        "1s",
        "--out",
        out,
        "-q",
    ]
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
        &dbio(&[
            "setup",
            "--dsn",
            &require,
            "--schemas",
            "1",
            "--scale",
            SCALE,
            "-q",
        ]),
        0,
    );
    for engine in ["client", "server"] {
        let out = tempfile::tempdir().unwrap();
        let o = dbio(&run_args(&require, out.path().to_str().unwrap(), engine));
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
    let o = dbio(&run_args(&full, out.path().to_str().unwrap(), "client"));
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
    let o = dbio(&[
        "ramp",
        "--dsn",
        &full,
        "--schemas",
        "1",
        "--scale",
        SCALE,
        "--readers",
        "1,2",
        "--writers",
        "0",
        "--run-time",
        "1s",
        "--out",
        ramp_out.to_str().unwrap(),
    ]);
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
    let o = dbio(&["teardown", "--dsn", &wrong_ca]);
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
    let o = dbio(&["teardown", "--dsn", &wrong_name]);
    assert_exit(&o, 2);
    let e = stderr(&o);
    assert!(
        e.contains("certificate does not match host name \"wrong.example\""),
        "{e}"
    );
    // verify-ca does not check the name: the same connection works.
    let ca_only = wrong_name.replace("verify-full", "verify-ca");
    assert_exit(&dbio(&["teardown", "--dsn", &ca_only]), 0);

    // Plaintext is refused by pg_hba.conf (hostssl only), and dbio says what to do.
    let o = dbio(&["teardown", "--dsn", &server.dsn("sslmode=disable")]);
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
        vec!["teardown", "--dsn", &dsn],
        vec!["check", "--dsn", &dsn],
    ] {
        let o = dbio(&args);
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
    let Err(e) = dbio_postgres::session::WireConn::open(&target, "dbio-reader-1") else {
        panic!("a session connected to a server without TLS under sslmode=require");
    };
    assert_eq!(e.exit_code(), 2);
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
    let _ = dbio_postgres::session::WireConn::open(&target, "dbio-reader-1");
    std::thread::sleep(Duration::from_millis(300));
    let got = fake.received.lock().unwrap().clone();
    assert!(
        got.windows(secret.len()).any(|w| w == secret.as_bytes()),
        "the fake server did not record the prefer-mode password"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_session_is_cancelled_over_tls_and_reports_its_cipher() {
    let server = TlsServer::start().await;
    let target = dbio_postgres::Target::from_dsn(&server.dsn(&format!(
        "sslmode=verify-full sslrootcert={}",
        server.ca.display()
    )))
    .unwrap();
    let mut conn = match dbio_postgres::session::WireConn::open(&target, "dbio-reader-1") {
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
