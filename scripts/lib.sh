# Shared helpers for dbio's scripts; source it, do not run it.

# Makes sure PostgreSQL server binaries (initdb, pg_ctl, postgres) exist, installing Debian's
# postgresql package when we are root and they are missing.
ensure_pg_server() {
    if [ -n "${DBIO_PG_BIN:-}" ] && [ -x "$DBIO_PG_BIN/initdb" ]; then
        return 0
    fi
    if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1; then
        return 0
    fi
    if [ "$(id -u)" -ne 0 ]; then
        echo "PostgreSQL server binaries are missing; install them (Debian/Ubuntu: sudo apt-get install postgresql) or set DBIO_PG_BIN" >&2
        return 2
    fi
    echo "installing PostgreSQL server binaries (apt-get install postgresql)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq postgresql >/dev/null
}

# Makes sure cargo, rustfmt and clippy are there.
ensure_rust() {
    if ! command -v cargo >/dev/null 2>&1; then
        echo "cargo is missing: install Rust from https://rustup.rs" >&2
        return 2
    fi
    if command -v rustup >/dev/null 2>&1; then
        cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt
        cargo clippy --version >/dev/null 2>&1 || rustup component add clippy
    fi
}
