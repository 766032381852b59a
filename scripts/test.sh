#!/usr/bin/env bash
# The README's test command: installs what the tests need (PostgreSQL server binaries), then
# runs the format check, clippy and every test. The end-to-end tests start their own scratch
# PostgreSQL clusters; nothing else needs to be running.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_rust
ensure_pg_server
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace
