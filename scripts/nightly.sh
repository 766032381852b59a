#!/usr/bin/env bash
# Nightly performance gate: a PostgreSQL to measure ($DBIO_DSN when set; otherwise a
# container when docker or podman can run one; otherwise a scratch cluster), then
# `dbio setup`, the nightly ramp recorded in the results store (`ramp --record`), and
# `dbio history check`: change points over the series' history from the 8th night, the
# single-baseline regress against the first night before that. Keeps every run's results;
# exits with the check's code (0 ok, 1 regression or failed ramp, 2 bad input).
#
# Environment:
#   DBIO_DSN             measure this server instead of starting one
#   DBIO_NIGHTLY_CONFIG  config file (default configs/nightly.yaml)
#   DBIO_RESULTS         where runs are kept (default results/nightly)
#   DBIO_HISTORY_STORE   results store (default $DBIO_RESULTS/history.sqlite, or a
#                        postgresql://... URL); keep it between nights
#   DBIO_TAG             build id recorded with the night (default $GITHUB_SHA)
#   DBIO_BIN             the dbio binary to use (default: build target/release/dbio)
#   DBIO_NIGHTLY_MODE    force "container" or "scratch"
#   DBIO_PG_MEMORY       container mode: the server container's memory cap (default 256m)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

config=${DBIO_NIGHTLY_CONFIG:-configs/nightly.yaml}
results=${DBIO_RESULTS:-results/nightly}
store=${DBIO_HISTORY_STORE:-$results/history.sqlite}
if [ -n "${DBIO_BIN:-}" ]; then
    dbio=$DBIO_BIN
else
    ensure_rust
    cargo build --release -q -p dbio-cli
    dbio=target/release/dbio
fi
setting() { "$dbio" config -c "$config" --get "$1"; }

container_engine() {
    for engine in docker podman; do
        if command -v "$engine" >/dev/null 2>&1 && "$engine" info >/dev/null 2>&1; then
            echo "$engine"
            return 0
        fi
    done
    return 1
}

mode=${DBIO_NIGHTLY_MODE:-}
if [ -n "${DBIO_DSN:-}" ]; then
    mode=dsn
elif [ -z "$mode" ]; then
    if container_engine >/dev/null; then mode=container; else mode=scratch; fi
fi

cleanup() { :; }
trap 'cleanup' EXIT
case $mode in
    dsn)
        dsn=$DBIO_DSN
        echo "nightly: measuring \$DBIO_DSN" >&2
        ;;
    container)
        engine=$(container_engine) || { echo "nightly: no working docker or podman" >&2; exit 2; }
        export DBIO_PG_IMAGE DBIO_PG_PORT DBIO_PG_SHARED_BUFFERS DBIO_PG_ARGS DBIO_PG_PASSWORD DBIO_PG_MEMORY
        DBIO_PG_MEMORY=${DBIO_PG_MEMORY:-256m}
        DBIO_PG_IMAGE=$(setting container.image)
        DBIO_PG_PORT=$(setting container.port)
        DBIO_PG_SHARED_BUFFERS=$(setting container.shared_buffers)
        DBIO_PG_ARGS=$(setting container.settings | sed 's/[{}"]//g; s/:/=/g; s/,/ -c /g; s/^./-c &/')
        DBIO_PG_PASSWORD=${DBIO_PG_PASSWORD:-dbio-nightly}
        echo "nightly: starting $DBIO_PG_IMAGE with $engine compose on 127.0.0.1:$DBIO_PG_PORT" >&2
        "$engine" compose -f compose.nightly.yaml -p dbio-nightly up -d
        cleanup() { "$engine" compose -f compose.nightly.yaml -p dbio-nightly down -v >/dev/null 2>&1 || true; }
        export PGPASSWORD=$DBIO_PG_PASSWORD
        dsn="host=127.0.0.1 port=$DBIO_PG_PORT user=postgres dbname=postgres"
        for _ in $(seq 1 60); do
            code=0
            "$dbio" check --dsn "$dsn" --connect-timeout 2s >/dev/null 2>&1 || code=$?
            [ "$code" -ne 2 ] && break
            sleep 1
        done
        ;;
    scratch)
        ensure_pg_server
        dir=${DBIO_NIGHTLY_SCRATCH:-.dbio/nightly-scratch}
        if [ "$(id -u)" -eq 0 ] && ! runuser -u postgres -- test -x "$PWD"; then
            dir=/tmp/dbio-nightly-scratch
        fi
        echo "nightly: starting a scratch cluster in $dir" >&2
        "$dbio" scratch start --dir "$dir" --shared-buffers "$(setting container.shared_buffers)" >&2
        cleanup() { "$dbio" scratch stop --dir "$dir" >/dev/null 2>&1 || true; }
        dsn=$("$dbio" scratch status --dir "$dir" --dsn-only)
        ;;
    *)
        echo "nightly: DBIO_NIGHTLY_MODE must be container or scratch" >&2
        exit 2
        ;;
esac

stamp=$(date -u +%Y%m%dT%H%M%SZ)
out=$results/$stamp
"$dbio" setup -c "$config" --dsn "$dsn" -q
ramp_code=0
"$dbio" ramp -c "$config" --dsn "$dsn" --out "$out" -q --record --store "$store" || ramp_code=$?
if [ ! -f "$out/ramp.json" ]; then
    echo "nightly: the ramp wrote no ramp.json (exit $ramp_code)" >&2
    exit "$ramp_code"
fi
code=0
"$dbio" history check -c "$config" --store "$store" --label "$(setting run.label)" \
    --junit "$out/junit.xml" || code=$?
echo "nightly: results in $out, recorded in $store (history check exit $code)" >&2
if [ "$ramp_code" -ne 0 ] && [ "$code" -eq 0 ]; then
    exit "$ramp_code"
fi
exit "$code"
