#!/usr/bin/env bash
# Client instructions per operation of the measured read (docs/BENCHMARKS.md, "The hot path,
# profiled"): callgrind totals of `dbio run --readers 1 --work-unit 1 --work-loop N` at
# N=6000 and N=2000; the difference / 4000 is what one operation costs the client.
#
#   bash scripts/bench-client-cost.sh DBIO_BINARY DSN REPEATS [RUN ARGS...]
#
# The target must hold a data set (dbio setup --schemas 1 --scale S; pass --schemas 1 --scale S
# as RUN ARGS). Prints one line per repeat. With CG_TOGGLE=SYMBOL (e.g.
# 'dbio_postgres::wire::WireConn::execute') only the instructions inside that function and its
# callees are counted: the protocol client alone, free of the collector's and sampler's timed
# work, which varies with how long the run takes under valgrind.
set -euo pipefail
bin=${1:?dbio binary}
dsn=${2:?dsn}
repeats=${3:-1}
shift 3 || shift $#
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

total() { # N -> total instructions of one run
  valgrind --tool=callgrind --callgrind-out-file="$out/cg.$1" ${CG_TOGGLE:+--toggle-collect="$CG_TOGGLE"} \
    "$bin" run --dsn "$dsn" --readers 1 --work-unit 1 --work-loop "$1" --out "$out/run.$1" -q "${@:2}" \
    >/dev/null 2>"$out/err.$1" || { cat "$out/err.$1" >&2; exit 1; }
  grep -h '^summary:' "$out"/cg."$1"* | awk '{s += $2} END {print s}'
  rm -f "$out"/cg."$1"*
}

for _ in $(seq "$repeats"); do
  a=$(total 2000 "$@")
  b=$(total 6000 "$@")
  echo "instructions_per_op=$(( (b - a) / 4000 )) (N=2000: $a, N=6000: $b)"
done
