#!/usr/bin/env bash
# The README's quickstart: makes sure PostgreSQL server binaries exist, builds dbio in release
# mode and runs `dbio quickstart` against a throwaway local cluster that dbio starts itself.
# Extra arguments go to `dbio quickstart` (e.g. --keep to leave the server running).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_rust
ensure_pg_server
cargo build --release -p dbio-cli
dir=.dbio/quickstart
# As root the server runs as `postgres`, which must be able to reach the folder.
if [ "$(id -u)" -eq 0 ] && ! runuser -u postgres -- test -x "$PWD"; then
    dir=/tmp/dbio-quickstart
fi
exec target/release/dbio quickstart -c configs/quickstart.yaml --dir "$dir" "$@"
