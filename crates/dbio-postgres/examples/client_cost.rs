//! The measured read through two blocking clients, for the session-client decision
//! (docs/BENCHMARKS.md, "Session client"): dbio's own `wire` connection and the synchronous
//! `postgres` crate (rust-postgres, which drives tokio-postgres on the calling thread).
//! Each prepares the read session's SELECT once and executes it N times, keys in order over
//! the data set, work unit 1, one connection, like `dbio run --readers 1 --work-unit 1`.
//!
//! ```sh
//! cargo run --release -p dbio-postgres --example client_cost -- wire|postgres DSN SCHEMA SCALE N
//! ```
//!
//! Prints ops/s and the process CPU (user + system, getrusage) per operation. Under
//! `valgrind --tool=callgrind`, the instructions of N = 6000 minus N = 2000, divided by 4000,
//! are the client's instructions per operation.

use std::time::Instant;

use dbio_postgres::{INT8, Param, Target, WireConn, read_range};

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, client, dsn, schema, scale, n] = args.as_slice() else {
        return Err("usage: client_cost wire|postgres DSN SCHEMA SCALE N".into());
    };
    let scale: i64 = scale.parse()?;
    let n: i64 = n.parse()?;
    let select = read_range(schema);
    let started = Instant::now();
    let cpu0 = cpu_seconds();
    let mut rows = 0i64;
    match client.as_str() {
        "wire" => {
            let target = Target::from_dsn(dsn)?;
            let mut conn = WireConn::open(&target, "dbio-client-cost")?;
            conn.prepare("r", &select, &[INT8, INT8])
                .map_err(|e| e.to_string())?;
            for i in 0..n {
                let k = 1 + i % scale;
                let done = conn
                    .execute("r", &[Param::Int8(k), Param::Int8(k)])
                    .map_err(|e| e.to_string())?;
                rows += done.first_int8.unwrap_or(0);
            }
        }
        "postgres" => {
            let mut conn = postgres::Client::connect(dsn, postgres::NoTls)?;
            let stmt = conn.prepare_typed(
                &select,
                &[postgres::types::Type::INT8, postgres::types::Type::INT8],
            )?;
            for i in 0..n {
                let k = 1 + i % scale;
                let row = conn.query_one(&stmt, &[&k, &k])?;
                rows += row.get::<_, i64>(0);
            }
        }
        other => return Err(format!("unknown client {other}: wire or postgres").into()),
    }
    let wall = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    println!(
        "client={client} ops={n} rows={rows} ops_per_s={:.0} cpu_us_per_op={:.2}",
        n as f64 / wall,
        cpu * 1e6 / n as f64
    );
    Ok(())
}
