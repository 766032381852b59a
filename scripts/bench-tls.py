#!/usr/bin/env python3
"""dbio against pgbench, plaintext and TLS (docs/BENCHMARKS.md, "TLS"): the same read (work unit
1, one client) on a server with ssl=on, sslmode=disable and sslmode=require, runs interleaved,
medians. CPU is the whole process's user + system time (getrusage of the child) per operation.

    python3 scripts/bench-tls.py DBIO[,DBIO2...] DSN SCHEMA_BLOCKS [SECONDS] [REPEATS]

Several dbio binaries (comma-separated: two builds side by side) run interleaved with pgbench
and each other; one row per binary and sslmode.

DSN names a server with ssl=on holding `dbio setup --schemas 1 --scale SCHEMA_BLOCKS` blocks.
"""
import json, os, re, resource, statistics, subprocess, sys, tempfile, time

dbios, dsn, blocks = sys.argv[1].split(","), sys.argv[2], int(sys.argv[3])
seconds = int(sys.argv[4]) if len(sys.argv) > 4 else 5
repeats = int(sys.argv[5]) if len(sys.argv) > 5 else 3


def timed(cmd, env=None):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return out, cpu


work = tempfile.mkdtemp(prefix="dbio-bench-tls-")
script = os.path.join(work, "read.sql")
with open(script, "w") as f:
    f.write(f"\\set k random(1, {blocks})\nSELECT count(c2) FROM user1.cf1 WHERE custid BETWEEN :k AND :k;\n")

print("| dbio | sslmode | dbio ops/s | pgbench ops/s | ops/s ratio | dbio CPU µs/op | pgbench CPU µs/op | CPU ratio | dbio TLS |")
print("|---|---|---:|---:|---:|---:|---:|---:|---|")
for mode in ["disable", "require"]:
    d_ops = {d: [] for d in dbios}
    d_cpu = {d: [] for d in dbios}
    tls = {}
    p_ops, p_cpu = [], []
    for rep in range(repeats):
        tools = dbios + ["pgbench"]
        if rep % 2 == 1:
            tools.reverse()
        for tool in tools:
            if tool != "pgbench":
                out_dir = os.path.join(work, f"{mode}-{rep}-{dbios.index(tool)}")
                _, cpu = timed([tool, "run", "--dsn", f"{dsn} sslmode={mode}", "-q", "--out", out_dir,
                                "--schemas", "1", "--scale", f"{blocks}blocks", "--readers", "1",
                                "--work-unit", "1", "--run-time", f"{seconds}s"])
                with open(os.path.join(out_dir, "result.json")) as f:
                    res = json.load(f)
                d_ops[tool].append(res["client"]["ops_per_s"])
                d_cpu[tool].append(1e6 * cpu / res["client"]["ops"])
                t = res["environment"]["session_tls"]
                tls[tool] = f"{t['protocol']} {t['cipher']}" if t["used"] else "plaintext"
            else:
                env = dict(os.environ, PGSSLMODE=mode)
                out, cpu = timed(["pgbench", "-n", "-M", "prepared", "-c", "1", "-j", "1",
                                  "-T", str(seconds), "-f", script, dsn], env)
                n = int(re.search(r"number of transactions actually processed: (\d+)", out).group(1))
                p_ops.append(float(re.search(r"tps = ([\d.]+)", out).group(1)))
                p_cpu.append(1e6 * cpu / n)
    med = statistics.median
    for d in dbios:
        print(f"| {d} | {mode} | {med(d_ops[d]):.0f} | {med(p_ops):.0f} | {med(d_ops[d]) / med(p_ops):.2f} | "
              f"{med(d_cpu[d]):.1f} | {med(p_cpu):.1f} | {med(d_cpu[d]) / med(p_cpu):.2f} | {tls[d]} |", flush=True)
