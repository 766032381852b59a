#!/usr/bin/env bash
# dbio calibrate against fio on the same file, block size, engine and outstanding I/Os
# (O_DIRECT, random 8 KiB reads; psync: N jobs of depth 1, io_uring: one job of depth N). Per level the two tools run alternately REPS times (dbio, fio, dbio,
# fio, ...); the table gives the medians, their ratio, and fio's own spread across its
# repeats (max/min), which is the device's noise that any comparison lives within.
# Usage: scripts/bench-calibrate.sh [FILE] [SECONDS] [LEVELS] [REPS] [psync|io_uring]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
file=${1:-/var/tmp/dbio-bench/calibrate.dat}
secs=${2:-5}
levels=${3:-1,2,4,8,16}
reps=${4:-3}
engine=${5:-psync}
if [ "$engine" = io_uring ]; then fio_jobs() { echo "--numjobs=1 --iodepth=$1"; }; else fio_jobs() { echo "--numjobs=$1 --iodepth=1"; }; fi
command -v fio >/dev/null || { echo "fio is missing: apt-get install fio" >&2; exit 2; }
ensure_rust
cargo build --release -q -p dbio-cli
dbio=target/release/dbio
mkdir -p "$(dirname "$file")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ ! -f "$file" ]; then
    $dbio calibrate --path "$file" --create --size 1GB --levels 1 --duration 1s --out "$work/init" -q >/dev/null
fi
echo "| level | dbio IOPS | fio IOPS | IOPS ratio | fio IOPS spread | dbio p99 µs | fio p99 µs | p99 ratio | fio p99 spread |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for level in ${levels//,/ }; do
    for rep in $(seq 1 "$reps"); do
        $dbio calibrate --path "$file" --engine "$engine" --levels "$level" --duration "${secs}s" \
            --out "$work/d$level-$rep" -q >/dev/null
        # shellcheck disable=SC2046
        fio --name=cal --filename="$file" --direct=1 --ioengine="$engine" --rw=randread --bs=8k $(fio_jobs "$level") \
            --group_reporting --time_based --runtime="$secs" --size=1G --output-format=json >"$work/f$level-$rep.json"
    done
    python3 - "$work" "$level" "$reps" <<'PY'
import json, statistics, sys
work, level, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
d = [json.load(open(f"{work}/d{level}-{r}/calibrate.json"))["points"][0] for r in range(1, reps + 1)]
f = [json.load(open(f"{work}/f{level}-{r}.json"))["jobs"][0]["read"] for r in range(1, reps + 1)]
di = statistics.median(p["small_iops"] for p in d)
fi_all = [x["iops"] for x in f]
fi = statistics.median(fi_all)
dp = statistics.median(p["small_latency_us"]["p99"] for p in d)
fp_all = [x["clat_ns"]["percentile"]["99.000000"] / 1000.0 for x in f]
fp = statistics.median(fp_all)
print(f"| {level} | {di:.0f} | {fi:.0f} | {di / fi:.3f} | {max(fi_all) / min(fi_all):.2f} | {dp:.0f} | {fp:.0f} | {dp / fp:.3f} | {max(fp_all) / min(fp_all):.2f} |")
PY
done
