#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""auto of two builds of the perf program side by side: did a change move auto's times?

    python3 perf/ab_auto.py --old OLD/fused_linear_perf --new NEW/fused_linear_perf \\
        --out DIR [--precisions strict,3xtf32] [--rounds 2] [SHAPES... | default: the GPU sweep]

Per shape and precision, the two programs run `--algorithm auto` in alternating rounds (old new
new old ...: drift touches both alike), each round a fresh process with its own inputs; the
result is the median over rounds of each program's median, the path each ran, and
new / old - 1 (positive: the new build is slower). DIR gets ab_auto.json and ab_auto.csv.
"""
import argparse
import csv
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from compare import SWEEPS
from perf_common import shape_arg, parse_shape


def run(perf, shape, precision, reps, extra):
    M, K, N = parse_shape(shape)
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [str(perf), "--m", str(M), "--k", str(K), "--n", str(N), "--algorithm", "auto",
               "--precision", precision, "--reps", str(reps), "--json", f.name] + extra
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            return dict(error=(done.stderr or done.stdout).strip()[-300:])
        rows = [r for r in json.loads(Path(f.name).read_text())["results"]
                if r.get("median_ms") is not None]
    if not rows:
        return dict(error="no timed result")
    return dict(ms=rows[0]["median_ms"], ran=f"{rows[0]['algorithm_ran']}/"
                f"{rows[0]['precision_ran']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shapes", nargs="*", type=shape_arg)
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--new", type=Path, required=True)
    ap.add_argument("--precisions", default="strict,3xtf32")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--perf-args", default="")
    ap.add_argument("--out", type=Path, default=Path("ab_auto"))
    args = ap.parse_args()
    shapes = args.shapes or SWEEPS["gpu"]
    extra = args.perf_args.split()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    print(f"{'shape':18s} {'precision':9s} {'old ran':22s} {'old ms':>9s} {'new ran':22s} "
          f"{'new ms':>9s} {'new/old':>8s}")
    for shape in shapes:
        for precision in args.precisions.split(","):
            got = {"old": [], "new": []}
            for r in range(args.rounds):
                order = ("old", "new") if r % 2 == 0 else ("new", "old")
                for which in order:
                    got[which].append(run(getattr(args, which), shape, precision, args.reps,
                                          extra))
            row = dict(shape=shape, precision=precision)
            for which, results in got.items():
                ok = [g for g in results if "ms" in g]
                row[f"{which}_ran"] = ",".join(sorted({g["ran"] for g in ok})) or "-"
                row[f"{which}_ms"] = statistics.median(g["ms"] for g in ok) if ok else None
                row[f"{which}_error"] = next((g["error"] for g in results if "error" in g), "")
            row["new_vs_old"] = (row["new_ms"] / row["old_ms"] - 1
                                 if row["new_ms"] and row["old_ms"] else None)
            rows.append(row)
            ratio = f"{100 * row['new_vs_old']:+7.1f}%" if row["new_vs_old"] is not None else "-"
            print(f"{shape:18s} {precision:9s} {row['old_ran']:22s} {row['old_ms'] or 0:9.4f} "
                  f"{row['new_ran']:22s} {row['new_ms'] or 0:9.4f} {ratio:>8s} "
                  f"{row['old_error'] or row['new_error']}", flush=True)
    (args.out / "ab_auto.json").write_text(json.dumps(dict(argv=sys.argv[1:], rows=rows),
                                                      indent=1))
    with open(args.out / "ab_auto.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    same = [r for r in rows if r["new_vs_old"] is not None and r["old_ran"] == r["new_ran"]]
    if same:
        v = sorted(100 * r["new_vs_old"] for r in same)
        print(f"same path ({len(same)} cases): median {statistics.median(v):+.1f}%, "
              f"range {v[0]:+.1f}% .. {v[-1]:+.1f}%")
    moved = [r for r in rows if r["old_ran"] != r["new_ran"]]
    for r in moved:
        print(f"path changed: {r['shape']} {r['precision']}: {r['old_ran']} -> {r['new_ran']} "
              f"({100 * (r['new_vs_old'] or 0):+.1f}%)")


if __name__ == "__main__":
    main()
