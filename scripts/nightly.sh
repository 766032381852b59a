#!/usr/bin/env bash
# Nightly performance gate: `dbio nightly`, with this environment turned into its flags. It
# measures a PostgreSQL ($DBIO_DSN when set; else a container when podman or docker answers
# and holds the config's image; else a scratch cluster), runs `dbio setup`, the nightly ramp
# recorded in the results store, and `dbio history check`; keeps every night's results and
# exits with dbio's code (0 ok, 1 regression or failed ramp, 2 bad input or a server that
# did not start).
#
# Environment:
#   DBIO_DSN               measure this server instead of starting one
#   DBIO_NIGHTLY_CONFIG    config file (default configs/nightly.yaml)
#   DBIO_RESULTS           where nights are kept (default results/nightly)
#   DBIO_HISTORY_STORE     results store (default $DBIO_RESULTS/history.sqlite, or a
#                          postgresql://... URL); keep it between nights
#   DBIO_TAG               build id recorded with the night (default $GITHUB_SHA)
#   DBIO_BIN               the dbio binary to use (default: build target/release/dbio)
#   DBIO_NIGHTLY_MODE      force "container" or "scratch"
#   DBIO_CONTAINER_ENGINE  podman or docker (default: the first of them that answers)
#   DBIO_NIGHTLY_SCRATCH   the scratch cluster's folder (default .dbio/nightly-scratch)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

config=${DBIO_NIGHTLY_CONFIG:-configs/nightly.yaml}
if [ -n "${DBIO_BIN:-}" ]; then
    dbio=$DBIO_BIN
else
    ensure_rust
    cargo build --release -q -p dbio-cli
    dbio=target/release/dbio
fi

# The first engine that answers (docker's client alone, without a daemon, does not).
engine=${DBIO_CONTAINER_ENGINE:-}
if [ -z "$engine" ]; then
    for e in podman docker; do
        if command -v "$e" >/dev/null 2>&1 && "$e" info >/dev/null 2>&1; then
            engine=$e
            break
        fi
    done
fi

args=(nightly -c "$config" --results "${DBIO_RESULTS:-results/nightly}")
if [ -n "${DBIO_TAG:-}" ]; then
    args+=(--tag "$DBIO_TAG")
fi
mode=${DBIO_NIGHTLY_MODE:-}
if [ -n "${DBIO_DSN:-}" ]; then
    mode=dsn
elif [ -z "$mode" ]; then
    mode=scratch
    if [ -n "$engine" ]; then
        image=$("$dbio" config -c "$config" --get container.image)
        if "$engine" image inspect "$image" >/dev/null 2>&1; then
            mode=container
        else
            echo "nightly: $engine has no image $image (deploy/images.sh builds it): a scratch cluster instead" >&2
        fi
    fi
fi
case $mode in
    dsn) args+=(--dsn "$DBIO_DSN") ;;
    container)
        if [ -z "$engine" ]; then
            echo "nightly: neither podman nor docker answers (set DBIO_CONTAINER_ENGINE, or DBIO_NIGHTLY_MODE=scratch)" >&2
            exit 2
        fi
        args+=(--container "$engine")
        ;;
    scratch)
        ensure_pg_server
        dir=${DBIO_NIGHTLY_SCRATCH:-.dbio/nightly-scratch}
        # As root the server runs as `postgres`, which must reach the folder.
        if [ -z "${DBIO_NIGHTLY_SCRATCH:-}" ] && [ "$(id -u)" -eq 0 ] \
            && ! runuser -u postgres -- test -x "$PWD"; then
            dir=/tmp/dbio-nightly-scratch
        fi
        args+=(--scratch-dir "$dir")
        ;;
    *)
        echo "nightly: DBIO_NIGHTLY_MODE must be container or scratch, not '$mode'" >&2
        exit 2
        ;;
esac
exec "$dbio" "${args[@]}"
