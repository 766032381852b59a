#!/usr/bin/env bash
# dbio's nightly gate against Apache Otava 0.8.0, on the same synthetic series (detection,
# false alarms) and on the same store sizes (check time). Writes the table between the
# markers of docs/REGRESSION.md.
#
#   bash scripts/bench-regression.sh            (about 2 minutes after the builds)
#
# Otava comes from PyPI into a virtual environment under target/bench-regression/venv (never
# into the tests). The result.json template for the timing store comes from one real 1 s run
# on a scratch cluster started here and stopped at the end (or DBIO_TEMPLATE=result.json).
set -euo pipefail
cd "$(dirname "$0")/.."
work=target/bench-regression
mkdir -p "$work"

if [ ! -x "$work/venv/bin/otava" ]; then
    python3 -m venv "$work/venv"
    "$work/venv/bin/pip" install -q 'apache-otava==0.8.0'
fi

cargo build --release -p dbio-cli --bin dbio
cargo build --release -p dbio-core --example history_alarms
dbio=target/release/dbio

template=${DBIO_TEMPLATE:-}
if [ -z "$template" ]; then
    scratch="$work/scratch"
    rm -rf "$scratch" "$work/template"
    "$dbio" scratch start --dir "$scratch" >/dev/null
    trap '"$dbio" scratch stop --dir "$scratch" >/dev/null 2>&1 || true; rm -rf "$scratch"' EXIT
    eval "$("$dbio" scratch env --dir "$scratch")"
    "$dbio" -q setup --schemas 1 --scale 1000blocks
    "$dbio" -q run --run-time 1s --out "$work/template" >/dev/null
    template="$work/template/result.json"
fi

"$work/venv/bin/python" scripts/bench_regression.py \
    --example target/release/examples/history_alarms \
    --dbio "$dbio" --template "$template" --otava "$work/venv/bin/otava" \
    --out "$work/table.md"

python3 - "$work/table.md" <<'EOF'
import sys
table = open(sys.argv[1]).read()
path = "docs/REGRESSION.md"
doc = open(path).read()
start, end = "<!-- bench-regression:start -->", "<!-- bench-regression:end -->"
a, b = doc.index(start) + len(start), doc.index(end)
open(path, "w").write(doc[:a] + "\n" + table + doc[b:])
EOF
echo "bench-regression: docs/REGRESSION.md updated" >&2
