#!/usr/bin/env python3
"""dbio's benchmark harness: what the driver costs, measured against its peers.

Parts (all by default, or the ones named with --parts):
  driver  ops/s and client CPU per 1,000 operations, dbio against pgbench running the same SQL
          (custom script, -M prepared), on a data set that fits in shared_buffers;
  loader  MB/s of `dbio setup` against `pgbench -i` and a server-side INSERT ... SELECT
          generate_series load (pgio's method), for the same data volume;
  server  `dbio run --engine server` (the loop inside the database) against the client engine;
  scale   1 to 256 sessions: dbio's RSS and CPU, and the server's CPU, from /proc;
  cold    cold reads on PostgreSQL 17 with debug_io_direct=data against `dbio calibrate` (psync)
          at the same concurrency on the same file system;
  shards  one run's sessions driven by 1 to 4 shard processes (`run --shard I/N --start-at`,
          then `dbio merge`) against the same sessions in one process: ops/s and client CPU.

Runs of the tools being compared are interleaved (A B A B ...), each point is the median of
--repeats runs, and every comparison is a ratio of medians measured side by side in one go.
The tables, with the date, host, versions and exact commands, replace the part between the
`bench:begin` and `bench:end` markers of docs/BENCHMARKS.md (or go to --out).
"""

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DBIO = os.path.join(ROOT, "target", "release", "dbio")
BEGIN = "<!-- bench:begin -->"
END = "<!-- bench:end -->"


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Timed:
    """A finished command: its output, wall time and CPU (user + system of the process and
    all its threads, from wait4's rusage) and peak RSS."""

    def __init__(self, out, wall_s, cpu_s, user_s, sys_s, maxrss_kib):
        self.out, self.wall_s, self.cpu_s = out, wall_s, cpu_s
        self.user_s, self.sys_s, self.maxrss_kib = user_s, sys_s, maxrss_kib


def run(cmd, check=True, env=None):
    """Runs `cmd`; returns (stdout, stderr, wall seconds)."""
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, env=env)
    wall = time.monotonic() - t0
    if check and p.returncode != 0:
        sys.exit(f"command failed ({p.returncode}): {shlex.join(cmd)}\n{p.stderr.decode()}{p.stdout.decode()}")
    return p.stdout.decode(), p.stderr.decode(), wall


def run_timed(cmd, env=None):
    """Runs `cmd`, returning Timed with the child's own rusage."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    chunks = []
    # Reading to EOF first, then wait4, keeps the child's rusage for us.
    while True:
        b = p.stdout.read(65536)
        if not b:
            break
        chunks.append(b)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    out = b"".join(chunks).decode()
    if p.returncode != 0:
        sys.exit(f"command failed ({p.returncode}): {shlex.join(cmd)}\n{out}")
    return Timed(out, wall, ru.ru_utime + ru.ru_stime, ru.ru_utime, ru.ru_stime, ru.ru_maxrss)


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def spread(xs):
    return max(xs) / min(xs) if xs and min(xs) > 0 else float("nan")


def parse_dsn(dsn):
    return dict(kv.split("=", 1) for kv in dsn.split())


class Cluster:
    """A scratch PostgreSQL cluster started by `dbio scratch`."""

    def __init__(self, base, name, shared_buffers, pg_bin=None, sets=()):
        self.dir = os.path.join(base, name)
        cmd = [DBIO, "scratch", "start", "--dir", self.dir, "--shared-buffers", shared_buffers, "-q"]
        if pg_bin:
            cmd += ["--pg-bin", pg_bin]
        for s in sets:
            cmd += ["--set", s]
        run(cmd)
        self.dsn = run([DBIO, "scratch", "status", "--dir", self.dir, "--dsn-only"])[0].strip()
        self.pg_bin = pg_bin
        self.conn = parse_dsn(self.dsn)

    def libpq_args(self):
        c = self.conn
        return ["-h", c["host"], "-p", c["port"], "-U", c["user"]]

    def psql(self, sql):
        psql = os.path.join(self.pg_bin, "psql") if self.pg_bin and os.path.exists(os.path.join(self.pg_bin, "psql")) else "psql"
        out, _, _ = run([psql, *self.libpq_args(), "-d", self.conn["dbname"], "-XAtq", "-v", "ON_ERROR_STOP=1", "-c", sql])
        return out.strip()

    def postgres_pids(self):
        """The postmaster and its children."""
        with open(os.path.join(self.dir, "data", "postmaster.pid")) as f:
            pm = int(f.readline())
        pids = [pm]
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                    if int(fields[1]) == pm:
                        pids.append(int(d))
                except OSError:
                    pass
        return pids

    def stop(self):
        run([DBIO, "scratch", "stop", "--dir", self.dir], check=False)


def proc_cpu_s(pids):
    """utime + stime of these processes from /proc/<pid>/stat, in seconds."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total / tick


def dbio_run(cl, out, args):
    """One `dbio run`; returns (Timed, result.json)."""
    cmd = [DBIO, "run", "--dsn", cl.dsn, "-q", "--out", out, *args]
    t = run_timed(cmd)
    with open(os.path.join(out, "result.json")) as f:
        return t, json.load(f)


def pgbench_bin(cl):
    if cl.pg_bin and os.path.exists(os.path.join(cl.pg_bin, "pgbench")):
        return os.path.join(cl.pg_bin, "pgbench")
    return shutil.which("pgbench") or sys.exit("pgbench not found (Debian: apt-get install postgresql-contrib)")


# --------------------------------------------------------------------------------------------
# Part a: driver cost against pgbench
# --------------------------------------------------------------------------------------------

def connection_sets(n):
    """`dbio scratch start --set`s for n client sessions (and a few of dbio's own)."""
    return (f"max_connections={n + 40}",) if n + 40 > 100 else ()


def part_driver(a, base, md):
    cores = os.cpu_count() or 1
    blocks = 32768
    cl = Cluster(base, "drv", "512MB", sets=connection_sets(max(a.readers)))
    try:
        data = ["--schemas", "1", "--scale", f"{blocks}blocks"]
        log("driver: loading 1 x 256 MiB and warming shared_buffers")
        run([DBIO, "setup", "--dsn", cl.dsn, *data, "-q"])
        dbio_run(cl, os.path.join(base, "drv-warm"), [*data, "--readers", "2", "--run-time", "5s"])
        pgb = pgbench_bin(cl)
        rows = []
        cmds = {}
        for wu in a.work_units:
            script = os.path.join(base, f"read-wu{wu}.sql")
            with open(script, "w") as f:
                f.write(f"\\set k random(1, {blocks - wu + 1})\n"
                        f"SELECT count(c2) FROM user1.cf1 WHERE custid BETWEEN :k AND :k + {wu - 1};\n")
            for r in a.readers:
                d_cmd = [*data, "--readers", str(r), "--work-unit", str(wu), "--run-time", f"{a.seconds}s"]
                p_cmd = [pgb, *cl.libpq_args(), "-n", "-M", "prepared", "-c", str(r),
                         "-j", str(min(cores, r)), "-T", str(a.seconds), "-f", script, cl.conn["dbname"]]
                cmds[wu] = (d_cmd, p_cmd)
                tools = [f"dbio:{e}" for e in a.session_engines] + ["pgbench"]
                ops = {t: [] for t in tools}
                cpu = {t: [] for t in tools}
                used = {}
                load = os.getloadavg()[0]
                for rep in range(a.repeats):
                    order = tools if rep % 2 == 0 else tools[::-1]
                    for tool in order:
                        if tool.startswith("dbio:"):
                            engine = tool.split(":", 1)[1]
                            t, res = dbio_run(cl, os.path.join(base, f"drv-{wu}-{r}-{engine}-{rep}"),
                                              [*d_cmd, "--session-engine", engine])
                            n = res["client"]["ops"]
                            ops[tool].append(res["client"]["ops_per_s"])
                            cpu[tool].append(1e6 * t.cpu_s / n)
                            used[tool] = res["client"].get("session_engine", "?")
                        else:
                            t = run_timed(p_cmd)
                            n = int(re.search(r"number of transactions actually processed: (\d+)", t.out).group(1))
                            tps = float(re.search(r"tps = ([\d.]+)", t.out).group(1))
                            ops[tool].append(tps)
                            cpu[tool].append(1e6 * t.cpu_s / n)
                load = (load + os.getloadavg()[0]) / 2
                p_ops, p_cpu = med(ops["pgbench"]), med(cpu["pgbench"])
                for tool in tools[:-1]:
                    row = (wu, r, tool.split(":", 1)[1], used.get(tool, "?"), med(ops[tool]), p_ops,
                           med(ops[tool]) / p_ops, med(cpu[tool]), p_cpu, med(cpu[tool]) / p_cpu,
                           spread(ops[tool]), spread(ops["pgbench"]), load)
                    log("driver: wu %d readers %d engine %s (%s): dbio %.0f ops/s, pgbench %.0f ops/s (%.2fx); "
                        "dbio %.1f ms/1000, pgbench %.1f ms/1000 (%.2fx); load %.1f"
                        % (row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8], row[9], row[12]))
                    rows.append(row)
    finally:
        cl.stop()
    md.append("### Driver cost: dbio against pgbench (same SQL, same clients)\n")
    md.append(f"Data set: 1 schema x {blocks} blocks (256 MiB), shared_buffers = 512MB, warmed by an unmeasured "
              f"5 s run: every read is a buffer hit. {a.seconds} s per run, {a.repeats} runs per tool and point, "
              "interleaved (each session engine of dbio, then pgbench; reversed every other round); medians. "
              "Client CPU is the whole process's user + system time (wait4's rusage: every thread, connecting "
              "included) divided by the operations it reports. `engine` is `--session-engine`, `used` what the "
              "run recorded (`client.session_engine`); load is the host's 1-minute load average, the mean of its "
              "values before and after the point. Goals: ops/s ratio >= 1.10, CPU ratio <= 0.80.\n")
    for wu, (d_cmd, p_cmd) in cmds.items():
        md.append(f"work_unit {wu}: `dbio run --dsn DSN {' '.join(d_cmd)} --session-engine E` against "
                  f"`pgbench {' '.join(p_cmd[1:])}` with the script `read-wu{wu}.sql`:\n")
        md.append("```\n" + open(os.path.join(base, f"read-wu{wu}.sql")).read() + "```\n")
    md.append("| work_unit | clients | engine | used | dbio ops/s | pgbench ops/s | ops/s ratio | dbio CPU ms / 1,000 ops "
              "| pgbench CPU ms / 1,000 ops | CPU ratio | dbio ops/s spread | pgbench ops/s spread | load |")
    md.append("|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        md.append("| %d | %d | %s | %s | %.0f | %.0f | %.3f | %.1f | %.1f | %.3f | %.2f | %.2f | %.1f |" % r)
    md.append("")
    return rows


# --------------------------------------------------------------------------------------------
# Part b: loader against pgbench -i and a server-side generate_series load
# --------------------------------------------------------------------------------------------

GS_TABLE = """CREATE SCHEMA {s};
CREATE TABLE {s}.cf1 (custid bigint NOT NULL, c2 text NOT NULL, c3 text NOT NULL, c4 text NOT NULL,
  c5 text NOT NULL, c6 text NOT NULL, c7 text NOT NULL, c8 text NOT NULL, c9 text NOT NULL)
  WITH (fillfactor = 10);
INSERT INTO {s}.cf1 SELECT g, f, f, f, f, f, f, f, f
  FROM generate_series(1, {rows}) AS g, rpad('x', 120, 'x') AS f;
CREATE INDEX ON {s}.cf1 (custid);
VACUUM (FREEZE, ANALYZE) {s}.cf1;"""


def total_bytes(cl, where):
    return int(cl.psql(f"SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                       f"JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND {where}"))


def part_loader(a, base, md):
    schemas, blocks, parallel = 4, 32768, 2
    cl = Cluster(base, "load", "128MB")
    rows = []
    try:
        pgb = pgbench_bin(cl)
        # pgbench -i: ~13.4 MiB of tables and indexes per scale unit; pick the scale whose volume
        # is closest to dbio's (measured below, then reported as it came out).
        pgb_scale = max(1, round(schemas * blocks * 8192 * 1.03 / (13.4 * 2**20)))
        gs_sql = os.path.join(base, "gs-{}.sql")
        for i in range(schemas):
            with open(gs_sql.format(i + 1), "w") as f:
                f.write(GS_TABLE.format(s=f"gs{i + 1}", rows=blocks))
        psql = shutil.which("psql") or "psql"
        methods = {
            "dbio setup": ([DBIO, "setup", "--dsn", cl.dsn, "--schemas", str(schemas), "--scale", f"{blocks}blocks",
                            "--parallel", str(parallel), "--force", "-q"], "n.nspname LIKE 'user%'"),
            "pgbench -i": ([pgb, *cl.libpq_args(), "-i", "-q", "-s", str(pgb_scale), cl.conn["dbname"]],
                           "c.relname LIKE 'pgbench%'"),
            "INSERT ... generate_series": (None, "n.nspname LIKE 'gs%'"),
        }
        res = {m: ([], []) for m in methods}
        for rep in range(a.repeats):
            order = list(methods)[rep % 3:] + list(methods)[:rep % 3]
            for m in order:
                cmd, where = methods[m]
                # Start each load from the same state: nothing of the method's own left over, a checkpoint.
                cl.psql("DROP SCHEMA IF EXISTS gs1, gs2, gs3, gs4 CASCADE")
                cl.psql("DROP TABLE IF EXISTS pgbench_accounts, pgbench_branches, pgbench_tellers, pgbench_history")
                run([DBIO, "teardown", "--dsn", cl.dsn, "--yes", "-q"], check=False)
                cl.psql("CHECKPOINT")
                t0 = time.monotonic()
                if cmd:
                    run(cmd)
                else:
                    # pgio's way: the rows are made by the server; `parallel` psql sessions at a time.
                    procs = []
                    for chunk in range(parallel):
                        files = [gs_sql.format(i + 1) for i in range(schemas) if i % parallel == chunk]
                        args = [psql, *cl.libpq_args(), "-d", cl.conn["dbname"], "-Xq", "-v", "ON_ERROR_STOP=1"]
                        for f in files:
                            args += ["-f", f]
                        procs.append(subprocess.Popen(args, stdout=subprocess.DEVNULL))
                    if any(p.wait() != 0 for p in procs):
                        sys.exit("the generate_series load failed")
                cl.psql("CHECKPOINT")
                wall = time.monotonic() - t0
                size = total_bytes(cl, where)
                res[m][0].append(size / 2**20 / wall)
                res[m][1].append(size)
                log(f"loader: {m}: {size / 2**20:.0f} MiB in {wall:.2f} s")
        for m in methods:
            rows.append((m, med(res[m][1]) / 2**20, med(res[m][0]), spread(res[m][0])))
    finally:
        cl.stop()
    fastest_peer = max(r[2] for r in rows[1:])
    md.append("### Loader: MB/s for the same data volume\n")
    md.append(f"shared_buffers = 128MB. Each load starts from an empty database and a CHECKPOINT and ends with a "
              f"CHECKPOINT (inside the timed part, so what is timed is on disk); MiB is the tables' and indexes' "
              f"total size after the load (pg_total_relation_size); {a.repeats} runs per method, interleaved in "
              f"rotating order; medians. dbio: `dbio setup --schemas {schemas} --scale {blocks}blocks --parallel "
              f"{parallel} --force` (binary COPY FREEZE, keys shuffled, index after load, VACUUM (FREEZE, ANALYZE)). "
              f"pgbench: `pgbench -i -q -s {pgb_scale}` (client-side COPY, primary keys, VACUUM). generate_series: "
              f"the same table as dbio's, filled by `INSERT ... SELECT ... FROM generate_series` (keys in order), "
              f"index, VACUUM (FREEZE, ANALYZE), {parallel} psql sessions. Goal: dbio >= 1.0 x the faster peer.\n")
    md.append("| method | MiB loaded | MiB/s | MiB/s spread | dbio / this |")
    md.append("|---|---:|---:|---:|---:|")
    for m, mib, mbs, sp in rows:
        md.append(f"| {m} | {mib:.0f} | {mbs:.1f} | {sp:.2f} | {rows[0][2] / mbs:.3f} |")
    md.append(f"\ndbio / the faster peer: {rows[0][2] / fastest_peer:.3f}.\n")


# --------------------------------------------------------------------------------------------
# Part c: server-side engine against the client engine
# --------------------------------------------------------------------------------------------

def part_server(a, base, md):
    blocks = 32768
    cl = Cluster(base, "srv", "512MB")
    rows = []
    try:
        data = ["--schemas", "1", "--scale", f"{blocks}blocks"]
        run([DBIO, "setup", "--dsn", cl.dsn, *data, "-q"])
        dbio_run(cl, os.path.join(base, "srv-warm"), [*data, "--readers", "2", "--run-time", "5s"])
        for wu in a.work_units:
            for r in a.readers:
                res = {"client": [], "server": []}
                for rep in range(a.repeats):
                    order = ["client", "server"] if rep % 2 == 0 else ["server", "client"]
                    for eng in order:
                        _, out = dbio_run(cl, os.path.join(base, f"srv-{wu}-{r}-{eng}-{rep}"),
                                          [*data, "--engine", eng, "--readers", str(r), "--work-unit", str(wu),
                                           "--run-time", f"{a.seconds}s"])
                        res[eng].append(out["client"]["ops_per_s"])
                c, s_ = med(res["client"]), med(res["server"])
                log(f"server: wu {wu} readers {r}: client {c:.0f} ops/s, server {s_:.0f} ops/s")
                rows.append((wu, r, c, s_, c / s_, spread(res["client"]), spread(res["server"])))
    finally:
        cl.stop()
    md.append("### Server-side engine against the client engine\n")
    md.append(f"Same data set as the driver part (cached). `dbio run --engine client|server --readers N "
              f"--work-unit W --run-time {a.seconds}s`, {a.repeats} runs per engine, interleaved; medians. The "
              "server engine runs each session's loop in a PL/pgSQL procedure (SLOB/pgio style): its ops/s has no "
              "client round trip in it, so client / server is what the client's round trips cost in throughput "
              "on this host (client and server share its CPUs).\n")
    md.append("| work_unit | sessions | client engine ops/s | server engine ops/s | client / server | client spread | server spread |")
    md.append("|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        md.append("| %d | %d | %.0f | %.0f | %.3f | %.2f | %.2f |" % row)
    md.append("")


# --------------------------------------------------------------------------------------------
# Part d: 1 to 256 sessions
# --------------------------------------------------------------------------------------------

class ServerCpu:
    """CPU seconds of a cluster's processes over a command, polled from /proc (backends come
    and go with the sessions, so each is read while it lives)."""

    def __init__(self, cl):
        self.cl, self.seen, self.first = cl, {}, {}
        for pid in cl.postgres_pids():
            self.first[pid] = self.seen[pid] = proc_cpu_s([pid])

    def poll(self):
        for pid in self.cl.postgres_pids():
            v = proc_cpu_s([pid])
            if v or pid in self.seen:
                self.seen[pid] = max(v, self.seen.get(pid, 0))
            self.first.setdefault(pid, 0.0)

    def total(self):
        return sum(self.seen[p] - self.first.get(p, 0.0) for p in self.seen)


def part_scale(a, base, md):
    cl = Cluster(base, "scale", "512MB", sets=connection_sets(max(a.sessions)))
    rows = []
    try:
        data = ["--schemas", "4", "--scale", "8192blocks"]
        run([DBIO, "setup", "--dsn", cl.dsn, *data, "-q"])
        dbio_run(cl, os.path.join(base, "scale-warm"), [*data, "--readers", "4", "--run-time", "5s"])
        for engine in a.session_engines:
            for n in a.sessions:
                rss, dcpu, scpu, ops, cpu_op = [], [], [], [], []
                load = os.getloadavg()[0]
                used = "?"
                for rep in range(a.repeats):
                    out = os.path.join(base, f"scale-{engine}-{n}-{rep}")
                    cmd = [DBIO, "run", "--dsn", cl.dsn, "-q", "--out", out, *data, "--readers", str(n),
                           "--work-unit", "64", "--run-time", f"{a.seconds}s", "--session-engine", engine]
                    srv = ServerCpu(cl)
                    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                    while p.poll() is None:
                        srv.poll()
                        time.sleep(0.2)
                    if p.returncode != 0:
                        sys.exit(f"dbio run failed: {p.stderr.read().decode()}")
                    with open(os.path.join(out, "result.json")) as f:
                        r = json.load(f)
                    c = r["client"]
                    secs = r["window"]["measured_s"]
                    used = c.get("session_engine", "?")
                    rss.append(c["max_rss_kib"])
                    dcpu.append(100 * (c["cpu"]["user_s"] + c["cpu"]["system_s"]) / secs)
                    cpu_op.append(c["cpu_ms_per_1000_ops"] or float("nan"))
                    scpu.append(100 * srv.total() / max(secs, 1e-9))
                    ops.append(c["ops_per_s"])
                load = (load + os.getloadavg()[0]) / 2
                row = (engine, used, n, med(ops), med(rss), med(dcpu), med(cpu_op), med(scpu), load)
                log("scale: %s (%s) %d sessions: %.0f ops/s, RSS %d KiB, dbio %.0f%%, %.2f ms/1000, server %.0f%%, "
                    "load %.1f" % row)
                rows.append(row)
    finally:
        cl.stop()
    md.append(f"### Scale: {', '.join(map(str, a.sessions))} sessions\n")
    md.append(f"4 schemas x 8192 blocks (256 MiB, cached), work_unit 64, readers only, {a.seconds} s per run, "
              f"{a.repeats} runs per point, medians. RSS is dbio's peak (`client.max_rss_kib`); dbio CPU is its "
              "user + system time over the window (`client.cpu`) as a share of one core, and per 1,000 "
              "operations (`client.cpu_ms_per_1000_ops`); server CPU is the sum of "
              "the cluster's processes' utime + stime from /proc/<pid>/stat, polled every 0.2 s while they live "
              "(backends exit with their sessions), over the same window. `engine` is `--session-engine`, `used` "
              "what the run recorded; load is the host's 1-minute load average around the point. "
              f"Host: {os.cpu_count()} CPUs = {100 * (os.cpu_count() or 1)}% in all. Goal: <= 128 KiB RSS per "
              "session, and the server, not dbio, saturates first.\n")
    md.append("| engine | used | sessions | ops/s | dbio peak RSS KiB | RSS per session above one, KiB | dbio CPU % "
              "| dbio CPU ms / 1,000 ops | server CPU % | load |")
    md.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    base_rss = {}
    for engine, used, n, ops, rss, dc, cop, sc, load in rows:
        base_rss.setdefault(engine, (n, rss))
        n0, r0 = base_rss[engine]
        per = f"{(rss - r0) / (n - n0):.0f}" if n > n0 else "-"
        md.append(f"| {engine} | {used} | {n} | {ops:.0f} | {rss:.0f} | {per} | {dc:.0f} | {cop:.2f} | {sc:.0f} | {load:.1f} |")
    md.append("")


# --------------------------------------------------------------------------------------------
# Part e: cold reads on PostgreSQL 17 with debug_io_direct against dbio calibrate
# --------------------------------------------------------------------------------------------

def part_cold(a, base, md):
    pg17 = os.environ.get("DBIO_PG17_BIN")
    if not pg17 or not os.path.exists(os.path.join(pg17, "postgres")):
        sys.exit("the cold part needs PostgreSQL 17: run it through scripts/bench.sh, or set DBIO_PG17_BIN")
    cl = Cluster(base, "cold", "16MB", pg_bin=pg17, sets=["debug_io_direct=data"])
    calfile = os.path.join(base, "calibrate.dat")
    rows = []
    try:
        schemas, blocks = 4, 32768
        data = ["--schemas", str(schemas), "--scale", f"{blocks}blocks"]
        log("cold: loading 4 x 256 MiB on PostgreSQL 17 (debug_io_direct=data)")
        run([DBIO, "setup", "--dsn", cl.dsn, *data, "-q"])
        run([DBIO, "calibrate", "--path", calfile, "--create", "--size", "1GiB", "--levels", "1",
             "--duration", "1s", "-q", "--out", os.path.join(base, "cal-init")])
        combos = [("client", wu) for wu in a.cold_work_units]
        if 1 in a.cold_work_units:
            # The same point lookups looping inside the database: what the client's round trip costs.
            combos.insert(1, ("server", 1))
        for (eng, wu), n in [(c, n) for c in combos for n in a.cold_levels]:
            db, dev, per_op = [], [], []
            for rep in range(a.repeats):
                order = ["db", "dev"] if rep % 2 == 0 else ["dev", "db"]
                for what in order:
                    out = os.path.join(base, f"cold-{what}-{n}-{rep}")
                    if what == "db":
                        _, r = dbio_run(cl, out, [*data, "--engine", eng, "--readers", str(n), "--work-unit",
                                                  str(wu), "--run-time", f"{a.seconds}s"])
                        db.append(r["db"]["read_iops"])
                        per_op.append(r["db"]["read_iops"] / max(r["client"]["ops_per_s"], 1e-9))
                    else:
                        run([DBIO, "calibrate", "--path", calfile, "--engine", "psync", "--levels", str(n),
                             "--duration", f"{a.seconds}s", "-q", "--out", out])
                        with open(os.path.join(out, "calibrate.json")) as f:
                            dev.append(json.load(f)["points"][0]["small_iops"])
            row = (eng, wu, n, med(per_op), med(db), med(dev), med(db) / med(dev), spread(db), spread(dev))
            log("cold: %s engine, wu %d, %d sessions: %.1f reads/op, database %.0f read IOPS, device %.0f IOPS" % row[:6])
            rows.append(row)
    finally:
        cl.stop()
    md.append("### Cold reads against the device\n")
    md.append(f"PostgreSQL 17 (npm build) with `debug_io_direct=data` (no OS page cache) and shared_buffers = 16MB; "
              f"{schemas} schemas x {blocks} blocks (1 GiB): nearly every read of a heap block is a device read. "
              f"`dbio run --engine E --readers N --work-unit W --run-time {a.seconds}s` against `dbio calibrate --engine psync "
              f"--levels N --duration {a.seconds}s` on a 1 GiB file in the same file system; {a.repeats} runs each, "
              "interleaved; medians. Database read IOPS are `db.metrics.read_iops` (read requests that missed "
              "shared_buffers, from pg_stat_io / pg_stat_database). Goal: database / device >= 0.85.\n")
    md.append("| engine | work_unit | sessions = outstanding I/Os | database reads per operation | database read IOPS "
              "| device IOPS (calibrate) | database / device | database spread | device spread |")
    md.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        md.append("| %s | %d | %d | %.1f | %.0f | %.0f | %.3f | %.2f | %.2f |" % row)
    md.append("")


# --------------------------------------------------------------------------------------------
# Part f: shard processes against one process
# --------------------------------------------------------------------------------------------

def sharded_run(cl, base, tag, k, args, seconds):
    """One run of `args` driven by k shard processes released at one instant, merged;
    returns the merged result.json."""
    start = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=6)).strftime("%Y-%m-%dT%H:%M:%SZ")
    dirs = [os.path.join(base, f"{tag}-s{i}") for i in range(k)]
    procs = [subprocess.Popen([DBIO, "run", "--dsn", cl.dsn, "-q", "--out", d, *args, "--run-time", f"{seconds}s",
                               "--shard", f"{i}/{k}", "--run-id", tag, "--start-at", start],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for i, d in enumerate(dirs)]
    for p in procs:
        p.wait()
        if p.returncode != 0:
            sys.exit(f"dbio run --shard failed: {p.stderr.read().decode()}")
    if k == 1:
        merged = dirs[0]
    else:
        merged = os.path.join(base, f"{tag}-merged")
        run([DBIO, "merge", *dirs, "--out", merged, "-q"])
    with open(os.path.join(merged, "result.json")) as f:
        return json.load(f)


def part_shards(a, base, md):
    cl = Cluster(base, "shards", "512MB")
    n = a.shard_sessions
    data = ["--schemas", "4", "--scale", "8192blocks"]
    args = [*data, "--readers", str(n), "--work-unit", "64"]
    points = [0, 1, 2, 3, 4]
    got = {k: {"ops": [], "cpu": []} for k in points}
    try:
        run([DBIO, "setup", "--dsn", cl.dsn, *data, "-q"])
        dbio_run(cl, os.path.join(base, "shards-warm"), [*args, "--run-time", "5s"])
        for rep in range(a.repeats):
            for k in (points if rep % 2 == 0 else points[::-1]):
                tag = f"shards-{k}-{rep}"
                if k == 0:
                    _, r = dbio_run(cl, os.path.join(base, tag), [*args, "--run-time", f"{a.seconds}s"])
                else:
                    r = sharded_run(cl, base, tag, k, args, a.seconds)
                c = r["client"]
                got[k]["ops"].append(c["ops_per_s"])
                got[k]["cpu"].append(c["cpu_ms_per_1000_ops"])
                log(f"shards: {k or 'one'} process(es): {c['ops_per_s']:.0f} ops/s, {c['cpu_ms_per_1000_ops']:.1f} ms CPU per 1,000 ops")
    finally:
        cl.stop()
    one_ops, one_cpu = med(got[0]["ops"]), med(got[0]["cpu"])
    md.append("### Shard processes against one process\n")
    md.append(f"{n} reader sessions, 4 schemas x 8192 blocks (256 MiB, cached in shared_buffers 512MB), work_unit 64, "
              f"{a.seconds} s windows, {a.repeats} runs per point interleaved (0 1 2 3 4 4 3 2 1 0 ...), medians. "
              "One process: `dbio run --readers N`. k shards: k processes `dbio run --readers N --shard I/k --run-id ID "
              "--start-at T` released at one instant (6 s ahead), then `dbio merge` (one shard: its own result); ops/s is the merged result's "
              "(the shards' rates summed over their common window), client CPU the shards' user + system time summed "
              "(`client.cpu_ms_per_1000_ops`). Client and server share this host's CPUs, so the ratios, not the "
              "absolute rates, are the figures.\n")
    md.append("| processes | ops/s (median) | runs' range | ops/s vs one process | client CPU ms per 1,000 ops | runs' range | CPU vs one process |")
    md.append("|---|---:|---:|---:|---:|---:|---:|")
    for k in points:
        ops, cpu = med(got[k]["ops"]), med(got[k]["cpu"])
        name = "one process (no --shard)" if k == 0 else f"{k} shard process{'es' if k > 1 else ''}"
        md.append(f"| {name} | {ops:.0f} | {min(got[k]['ops']):.0f}-{max(got[k]['ops']):.0f} | {ops / one_ops:.2f} | "
                  f"{cpu:.1f} | {min(got[k]['cpu']):.1f}-{max(got[k]['cpu']):.1f} | {cpu / one_cpu:.2f} |")
    md.append("")


PARTS = {"driver": part_driver, "loader": part_loader, "server": part_server, "scale": part_scale,
         "cold": part_cold, "shards": part_shards}


def environment(a):
    pg = run(["bash", "-c", "ls /usr/lib/postgresql/*/bin/postgres | tail -1"], check=False)[0].strip()
    pgv = run([pg, "--version"], check=False)[0].strip() if pg else "?"
    pgb = shutil.which("pgbench")
    pgbv = run([pgb, "--version"], check=False)[0].strip() if pgb else "not found"
    dbv = run([DBIO, "--version"], check=False)[0].strip()
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    rev = run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], check=False)[0].strip()
    return (f"Date: {datetime.date.today().isoformat()}. Host: {os.cpu_count()} CPUs ({cpu}), {mem:.0f} GiB, "
            f"{platform.platform()}. {dbv} (commit {rev}, release build); {pgv}; {pgbv}; "
            f"python {platform.python_version()}.\n\nCommand: `{' '.join(['scripts/bench.sh'] + sys.argv[1:])}`\n")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--parts", default=",".join(PARTS), help="comma-separated: " + ",".join(PARTS))
    p.add_argument("--seconds", type=int, default=10, help="length of each measured run")
    p.add_argument("--repeats", type=int, default=3, help="runs per tool and point")
    p.add_argument("--readers", default="1,2,4,8", help="client counts of the driver and server parts")
    p.add_argument("--work-units", default="1,64", help="work units of the driver and server parts")
    p.add_argument("--session-engines", default="auto",
                   help="dbio's --session-engine values the driver and scale parts run (auto, threads, events)")
    p.add_argument("--sessions", default="1,4,16,64,256", help="session counts of the scale part")
    p.add_argument("--cold-levels", default="1,2,4,8,16", help="readers / outstanding I/Os of the cold part")
    p.add_argument("--cold-work-units", default="1,64", help="work units of the cold part")
    p.add_argument("--shard-sessions", type=int, default=4, help="reader sessions of the shards part")
    p.add_argument("--out", help="write the Markdown here instead of into docs/BENCHMARKS.md")
    p.add_argument("--keep", action="store_true", help="keep the scratch folder")
    a = p.parse_args()
    a.readers = [int(x) for x in a.readers.split(",")]
    a.work_units = [int(x) for x in a.work_units.split(",")]
    a.session_engines = [x for x in a.session_engines.split(",") if x]
    a.sessions = [int(x) for x in a.sessions.split(",")]
    a.cold_levels = [int(x) for x in a.cold_levels.split(",")]
    a.cold_work_units = [int(x) for x in a.cold_work_units.split(",")]
    parts = [x for x in a.parts.split(",") if x]
    for x in parts:
        if x not in PARTS:
            sys.exit(f"unknown part {x!r}; parts: {', '.join(PARTS)}")
    base = tempfile.mkdtemp(prefix="dbio-bench-", dir="/var/tmp")
    os.chmod(base, 0o755)
    md = ["## Harness results\n", environment(a)]
    try:
        for x in parts:
            PARTS[x](a, base, md)
    finally:
        if not a.keep:
            shutil.rmtree(base, ignore_errors=True)
        else:
            log(f"kept {base}")
    text = "\n".join(md)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
        log(f"wrote {a.out}")
        return
    path = os.path.join(ROOT, "docs", "BENCHMARKS.md")
    with open(path) as f:
        doc = f.read()
    if BEGIN in doc and END in doc:
        head, rest = doc.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        doc = f"{head}{BEGIN}\n{text}\n{END}{tail}"
    else:
        doc = f"{doc.rstrip()}\n\n{BEGIN}\n{text}\n{END}\n"
    with open(path, "w") as f:
        f.write(doc)
    log(f"updated {path}")


if __name__ == "__main__":
    main()
