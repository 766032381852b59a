#!/bin/sh
# PID 1 of dbio's PostgreSQL image. With `postgres [ARG...]` as the command: on first start
# initdb into $PGDATA (superuser `postgres`, password $POSTGRES_PASSWORD for TCP connections,
# scram-sha-256), then exec the server as the postgres user with ARG... as they came, one
# argument each. setpriv, not runuser: the server stays PID 1 and gets the engine's stop
# signal itself. Any other command runs as given.
set -eu
if [ "${1:-}" != postgres ]; then
    exec "$@"
fi
shift
# `postgres --version` and the like start no server: no cluster is made for them.
for arg in "$@"; do
    case $arg in
        -V | --version | '-?' | --help) exec postgres "$@" ;;
    esac
done
PGDATA=${PGDATA:-/var/lib/postgresql/data}
export PGDATA
if [ "$(id -u)" = 0 ]; then
    mkdir -p "$PGDATA" /run/postgresql
    chown postgres:postgres "$PGDATA" /run/postgresql
    chmod 700 "$PGDATA"
    # Word-split on purpose below (fixed words); the server's own arguments stay "$@".
    as_postgres="setpriv --reuid=postgres --regid=postgres --init-groups"
else
    as_postgres=
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    if [ -z "${POSTGRES_PASSWORD:-}" ]; then
        echo "dbio-postgres: POSTGRES_PASSWORD is empty: give the superuser's password (-e POSTGRES_PASSWORD=...)" >&2
        exit 1
    fi
    pwfile=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
    [ -z "$as_postgres" ] || chown postgres "$pwfile"
    # initdb's progress (stdout) is left out of the log; its errors (stderr) stay.
    $as_postgres initdb --username=postgres --pwfile="$pwfile" --auth-local=trust \
        --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >/dev/null
    rm -f "$pwfile"
    echo "dbio-postgres: a new cluster in $PGDATA (initdb)" >&2
fi
exec $as_postgres postgres "$@"
