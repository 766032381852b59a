#!/usr/bin/env python3
"""dbio's nightly gate against Apache Otava 0.8.0 on the same series (scripts/bench-regression.sh
runs it; Otava comes from PyPI into a virtual environment there, never into the tests).

Series: 30 nights, one value per night, 1000 * (1 + CV * N(0,1)), CV 2/10/30%; noise only, or a
step of -5/-10/-20% from night 21 to night 30 (the regression lasts 10 nights). Both tools judge
every series every night on the values up to that night:

- dbio: `history_alarms --replay` (the same `check` as `dbio history check`, its defaults); a night
  is red when the check fails.
- Otava: `otava.analysis.compute_change_points` with `otava analyze`'s defaults (window 50,
  p <= 0.001, min magnitude 0); a night is red when Otava's newest change point is a drop, i.e.
  the series sits in a segment lower than the one before (Otava has no gate state; this is the
  most favourable reading: it stays red while the lower segment lasts).

Then `check` time: `dbio history check` on a SQLite store of 200 and 2,000 runs (one series,
documents made from a real run's result.json) against `otava analyze` on a CSV of the same
values.

Prints a Markdown table (and writes it to --out).
"""

import argparse
import copy
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

NIGHTS = 30
STEP_AT = 20
CVS = [0.02, 0.10, 0.30]
STEPS = [0.05, 0.10, 0.20]


def make_series(n, seed):
    rng = np.random.default_rng(seed)
    out = []
    for cv in CVS:
        for step in [None] + STEPS:
            for i in range(n):
                x = 1000.0 * (1.0 + cv * rng.standard_normal(NIGHTS))
                if step is not None:
                    x[STEP_AT:] *= 1.0 - step
                out.append({
                    "name": f"cv{cv}-step{step}-{i}",
                    "cv": cv,
                    "step": step,
                    "values": [float(v) for v in x],
                })
    return out


def dbio_nights(example, series, work):
    path = os.path.join(work, "series.json")
    with open(path, "w") as f:
        json.dump({"series": [{"name": s["name"], "values": s["values"]} for s in series]}, f)
    t = time.monotonic()
    out = subprocess.run([example, "--replay", path], check=True, capture_output=True, text=True)
    return json.loads(out.stdout), time.monotonic() - t


def otava_nights(series):
    from otava.analysis import compute_change_points

    red = {}
    t = time.monotonic()
    for s in series:
        nights = []
        for n in range(1, NIGHTS + 1):
            cps, _ = compute_change_points(s["values"][:n], window_len=50, max_pvalue=0.001,
                                           min_magnitude=0.0)
            nights.append(bool(cps) and cps[-1].stats.mean_2 < cps[-1].stats.mean_1)
        red[s["name"]] = nights
    return red, time.monotonic() - t


def summarise(series, red):
    """Per (cv, step): false alarms per 100 (noise), red nights of 10, first-night %, median
    nights to detect."""
    cells = {}
    for s in series:
        cells.setdefault((s["cv"], s["step"]), []).append(red[s["name"]])
    out = {}
    for (cv, step), rows in cells.items():
        if step is None:
            out[(cv, step)] = {"false_alarms": 100.0 * sum(any(r) for r in rows) / len(rows)}
            continue
        during = [r[STEP_AT:] for r in rows]
        firsts = [d.index(True) + 1 for d in during if True in d]
        out[(cv, step)] = {
            "red": statistics.mean(sum(d) for d in during),
            "first": 100.0 * sum(d[0] for d in during) / len(during),
            "detected": 100.0 * len(firsts) / len(during),
            "to_detect": statistics.median(firsts) if firsts else None,
        }
    return out


def template_docs(template, values, label, work):
    """result.json documents made from a real run's, one per value, a day apart."""
    with open(template) as f:
        base = json.load(f)
    paths = []
    os.makedirs(work, exist_ok=True)
    start = datetime.datetime(2026, 1, 1, 2, 0, tzinfo=datetime.timezone.utc)
    ops0 = base["client"]["ops_per_s"] or 1.0
    for i, v in enumerate(values):
        d = copy.deepcopy(base)
        d["label"] = label
        d["config"]["run"]["label"] = label
        t0 = start + datetime.timedelta(days=i)
        t1 = t0 + datetime.timedelta(seconds=base["window"]["measured_s"])
        d["window"]["start"] = t0.isoformat().replace("+00:00", "Z")
        d["window"]["end"] = t1.isoformat().replace("+00:00", "Z")
        scale = v / ops0
        d["client"]["ops_per_s"] = v
        if d.get("db"):
            d["db"]["read_iops"] = d["db"]["read_iops"] * scale
        d["status"] = "ok"
        p = os.path.join(work, f"{label}-{i:05d}.json")
        with open(p, "w") as f:
            json.dump(d, f)
        paths.append(p)
    return paths


def timing(dbio, template, work, otava_bin):
    rng = np.random.default_rng(7)
    rows = []
    for n in [200, 2000]:
        x = 1000.0 * (1.0 + 0.10 * rng.standard_normal(n))
        x[n // 2:] *= 0.8
        store = os.path.join(work, f"h{n}.sqlite")
        docs = template_docs(template, x, f"t{n}", os.path.join(work, f"docs{n}"))
        for i in range(0, len(docs), 500):
            subprocess.run([dbio, "-q", "history", "add", "--store", store] + docs[i:i + 500],
                           check=True, capture_output=True)
        best = None
        for _ in range(3):
            t = time.monotonic()
            r = subprocess.run([dbio, "history", "check", "--store", store], capture_output=True,
                               text=True)
            dt = time.monotonic() - t
            if r.returncode not in (0, 1):
                sys.exit(f"dbio history check failed: {r.stderr}")
            best = dt if best is None else min(best, dt)
        csv = os.path.join(work, f"o{n}.csv")
        with open(csv, "w") as f:
            f.write("time,commit,ops\n")
            start = datetime.datetime(2026, 1, 1, 2, 0)
            for i, v in enumerate(x):
                f.write(f"{(start + datetime.timedelta(days=i)).strftime('%Y-%m-%d %H:%M:%S')},c{i},{v}\n")
        conf = os.path.join(work, f"o{n}.yaml")
        with open(conf, "w") as f:
            f.write(f"tests:\n  t{n}:\n    type: csv\n    file: {csv}\n    time_column: time\n"
                    f"    attributes: [commit]\n    metrics: [ops]\n")
        obest = None
        for _ in range(3):
            t = time.monotonic()
            r = subprocess.run([otava_bin, "analyze", f"t{n}", "--config-file", conf],
                               capture_output=True, text=True)
            dt = time.monotonic() - t
            if r.returncode != 0:
                sys.exit(f"otava analyze failed: {r.stdout}{r.stderr}")
            obest = dt if obest is None else min(obest, dt)
        rows.append((n, best, obest))
    return rows


def fmt(v, spec):
    return "never" if v is None else format(v, spec)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--example", required=True, help="target/release/examples/history_alarms")
    ap.add_argument("--dbio", required=True, help="target/release/dbio")
    ap.add_argument("--template", required=True, help="a real run's result.json")
    ap.add_argument("--otava", required=True, help="the venv's otava command")
    ap.add_argument("--series", type=int, default=100)
    ap.add_argument("--out", help="write the Markdown here too")
    ap.add_argument("--skip-timing", action="store_true", help="only the detection table")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="dbio-bench-regression-")
    series = make_series(a.series, 2026)
    d, dt_d = dbio_nights(a.example, series, work)
    o, dt_o = otava_nights(series)
    sd, so = summarise(series, d), summarise(series, o)
    lines = [
        f"{a.series} series per cell, 30 nights, step from night 21 to 30; dbio | Otava 0.8.0.",
        "",
        "| CV | false alarms per 100 noise-only series | step | nights red of 10 | red on the first night | detected by night 10 | nights to detect (median) |",
        "|---|---|---|---|---|---|---|",
    ]
    for cv in CVS:
        fa = f"{sd[(cv, None)]['false_alarms']:.0f} \\| {so[(cv, None)]['false_alarms']:.0f}"
        for k, step in enumerate(STEPS):
            x, y = sd[(cv, step)], so[(cv, step)]
            lines.append(
                f"| {100 * cv:.0f}% | {fa if k == 0 else ''} | -{100 * step:.0f}% "
                f"| {x['red']:.1f} \\| {y['red']:.1f} | {x['first']:.0f}% \\| {y['first']:.0f}% "
                f"| {x['detected']:.0f}% \\| {y['detected']:.0f}% "
                f"| {fmt(x['to_detect'], '.0f')} \\| {fmt(y['to_detect'], '.0f')} |")
    lines += ["", f"Replaying every night of {len(series)} series: dbio {dt_d:.1f} s, Otava (in-process API) {dt_o:.1f} s.", ""]
    lines += ["| runs in the series | `dbio history check` | `otava analyze` | ratio |", "|---|---|---|---|"]
    for n, tb, to in [] if a.skip_timing else timing(a.dbio, a.template, work, a.otava):
        lines.append(f"| {n} | {tb:.3f} s | {to:.2f} s | {to / tb:.0f}x |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
