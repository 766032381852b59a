#!/usr/bin/env bash
# Baseline of the run engine's own cost: ops/s and dbio's CPU per 1,000 operations for 1, 2,
# 4 and 8 readers on a data set that fits in shared_buffers (no I/O: what is measured is the
# driver and the server's CPU). Prints a Markdown table for docs/BENCHMARKS.md.
# Usage: scripts/bench-baseline.sh [RUN_TIME] [WORK_UNIT]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_pg_server
run_time=${1:-15s}
work_unit=${2:-64}
cargo build --release -q -p dbio-cli
dbio=target/release/dbio
dir=$(mktemp -d /tmp/dbio-bench-XXXXXX)
chmod 755 "$dir"
pg=$dir/pg
# Stops exactly the server this script started (in $pg, not $dir), and deletes $dir (which
# mktemp made for this script) only once no server runs from it: a postmaster.pid left
# behind means a live data directory, which is kept and named instead.
cleanup() {
    if [ -e "$pg" ]; then
        "$dbio" scratch stop --dir "$pg" >/dev/null 2>&1 || true
    fi
    if [ -n "$(find "$dir" -name postmaster.pid -print -quit 2>/dev/null)" ]; then
        echo "bench-baseline: the scratch server in $pg is still running; stop it with: $dbio scratch stop --dir $pg, then remove $dir" >&2
        return
    fi
    rm -rf -- "$dir"
}
trap cleanup EXIT
"$dbio" scratch start --dir "$pg" --shared-buffers 512MB >/dev/null
dsn=$("$dbio" scratch status --dir "$pg" --dsn-only)
data=(--schemas 8 --scale 4096blocks)
$dbio setup --dsn "$dsn" "${data[@]}" -q >/dev/null
# One unmeasured pass so every block is in shared_buffers.
$dbio run --dsn "$dsn" "${data[@]}" --readers 8 --run-time 5s -q --out "$dir/warm" >/dev/null
echo "| readers | ops/s | read p50 µs | read p99 µs | dbio CPU ms / 1,000 ops | dbio CPU % of one core |"
echo "|---:|---:|---:|---:|---:|---:|"
for r in 1 2 4 8; do
    $dbio run --dsn "$dsn" "${data[@]}" --readers "$r" --work-unit "$work_unit" --run-time "$run_time" -q \
        --out "$dir/r$r" >/dev/null
    python3 - "$dir/r$r/result.json" "$r" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
c = r["client"]
cpu = c["cpu"]["user_s"] + c["cpu"]["system_s"]
secs = r["window"]["measured_s"]
print(f"| {sys.argv[2]} | {c['ops_per_s']:.0f} | {c['read']['latency_us']['p50']} | {c['read']['latency_us']['p99']} "
      f"| {c['cpu_ms_per_1000_ops']:.1f} | {100 * cpu / secs:.0f} |")
PY
done
