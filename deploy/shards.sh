#!/usr/bin/env bash
# One dbio run driven by N processes, then merged: the plain-shell form of the Kubernetes
# Indexed Job in deploy/k8s/. Here the processes run on this host; to spread them over
# hosts, put `ssh HOST_i` in front of each (the same start instant is given to all, and each
# process checks its clock against the server's before it starts).
#
# Usage: deploy/shards.sh N OUT_DIR [dbio run options...]
#   deploy/shards.sh 3 results/sharded -c my.yaml --readers 24 --run-time 60s
# Environment: DBIO (the dbio binary, default `dbio`), DBIO_START_DELAY (seconds until the
# shared start, default 15: time for every process to connect and open its sessions),
# DBIO_RUN_ID (the run id every shard is given; default a new one).
set -euo pipefail
if [ $# -lt 2 ]; then
    echo "usage: $0 N OUT_DIR [dbio run options...]" >&2
    exit 2
fi
n=$1
out=$2
shift 2
case $n in
    '' | *[!0-9]* | 0 | 1)
        echo "$0: N must be a whole number of at least 2 (shards to merge), not '$n'" >&2
        exit 2
        ;;
esac
dbio=${DBIO:-dbio}
start_at=$(date -u -d "+${DBIO_START_DELAY:-15} seconds" +%Y-%m-%dT%H:%M:%SZ)
# One id for every shard: they hold the data set together under it, and merge checks it.
run_id=${DBIO_RUN_ID:-shards-$(date -u +%Y%m%dT%H%M%SZ)-$$}
mkdir -p -- "$out"
pids=()
for ((i = 0; i < n; i++)); do
    "$dbio" run "$@" --shard "$i/$n" --start-at "$start_at" --run-id "$run_id" --out "$out/shard-$i" -q &
    pids+=($!)
done
failed=0
for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then
        echo "$0: shard $i failed; $out/shard-$i says why" >&2
        failed=1
    fi
done
if [ "$failed" -ne 0 ]; then
    exit 1
fi
shards=()
for ((i = 0; i < n; i++)); do
    shards+=("$out/shard-$i/result.json")
done
"$dbio" merge "${shards[@]}" --out "$out/merged"
