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
          at the same concurrency on the same file system.

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

def part_driver(a, base, md):
    cores = os.cpu_count() or 1
    blocks = 32768
    cl = Cluster(base, "drv", "512MB")
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
                d_ops, d_cpu, p_ops, p_cpu = [], [], [], []
                for rep in range(a.repeats):
                    order = ["dbio", "pgbench"] if rep % 2 == 0 else ["pgbench", "dbio"]
                    for tool in order:
                        if tool == "dbio":
                            t, res = dbio_run(cl, os.path.join(base, f"drv-{wu}-{r}-{rep}"), d_cmd)
                            n = res["client"]["ops"]
                            d_ops.append(res["client"]["ops_per_s"])
                            d_cpu.append(1e6 * t.cpu_s / n)
                        else:
                            t = run_timed(p_cmd)
                            n = int(re.search(r"number of transactions actually processed: (\d+)", t.out).group(1))
                            tps = float(re.search(r"tps = ([\d.]+)", t.out).group(1))
                            p_ops.append(tps)
                            p_cpu.append(1e6 * t.cpu_s / n)
                row = (wu, r, med(d_ops), med(p_ops), med(d_ops) / med(p_ops),
                       med(d_cpu), med(p_cpu), med(d_cpu) / med(p_cpu), spread(d_ops), spread(p_ops))
                log("driver: wu %d readers %d: dbio %.0f ops/s %.1f ms/1000, pgbench %.0f ops/s %.1f ms/1000"
                    % (wu, r, row[2], row[5], row[3], row[6]))
                rows.append(row)
    finally:
        cl.stop()
    md.append("### Driver cost: dbio against pgbench (same SQL, same clients)\n")
    md.append(f"Data set: 1 schema x {blocks} blocks (256 MiB), shared_buffers = 512MB, warmed by an unmeasured "
              f"5 s run: every read is a buffer hit. {a.seconds} s per run, {a.repeats} runs per tool and point, "
              "interleaved (dbio, pgbench, pgbench, dbio, ...); medians. Client CPU is the whole process's "
              "user + system time (wait4's rusage: every thread, connecting included) divided by the operations "
              "it reports. Goals: ops/s ratio >= 1.10, CPU ratio <= 0.80.\n")
    for wu, (d_cmd, p_cmd) in cmds.items():
        md.append(f"work_unit {wu}: `dbio run --dsn DSN {' '.join(d_cmd)}` against "
                  f"`pgbench {' '.join(p_cmd[1:])}` with the script `read-wu{wu}.sql`:\n")
        md.append("```\n" + open(os.path.join(base, f"read-wu{wu}.sql")).read() + "```\n")
    md.append("| work_unit | clients | dbio ops/s | pgbench ops/s | ops/s ratio | dbio CPU ms / 1,000 ops "
              "| pgbench CPU ms / 1,000 ops | CPU ratio | dbio ops/s spread | pgbench ops/s spread |")
    md.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        md.append("| %d | %d | %.0f | %.0f | %.3f | %.1f | %.1f | %.3f | %.2f | %.2f |" % r)
    md.append("")
    return rows


PARTS = {"driver": part_driver}


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
    p.add_argument("--work-units", default="1,64", help="work units of the driver part")
    p.add_argument("--out", help="write the Markdown here instead of into docs/BENCHMARKS.md")
    p.add_argument("--keep", action="store_true", help="keep the scratch folder")
    a = p.parse_args()
    a.readers = [int(x) for x in a.readers.split(",")]
    a.work_units = [int(x) for x in a.work_units.split(",")]
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
