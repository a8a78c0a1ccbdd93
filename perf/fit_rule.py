#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The held-out study of auto's rule: how far auto is behind the best path on
random shapes, on the shapes a model was fitted on and on the held-out rest.

Reads the perf program's JSON outputs (ours_<shape>[_<precision>].json, as perf/compare.py
leaves them in its --out folder; runs with --planning both also carry auto measured) and the
split written by perf/random_shapes.py --json. For every shape and precision floor it takes the
best explicit path whose precision meets the floor (strict meets every floor, 3xtf32 meets
tf32's; --same-precision: only the floor's own, as compare.py's summary does) and reports, per
set (fit, held-out):

  estimate  auto as the library's rule chose (Planning::Estimate)
  measure   auto measured (Planning::Measure), where the runs have it
  m-choice  the path measured plans chose, timed as that explicit path in the runs (as replay
            does for the rule: a 3xtf32 floor's strict choice is timed in another process than
            its auto run, and at ~0.02 ms the same kernel timed in two processes differs by up to
            40%)
  replay    with --replay FILE: the path perf/replay_rule.cpp says the library's rule (as
            built now) takes, timed as that explicit path in the runs (a rule change judged on
            stored runs before it reaches a GPU)
  model     a smooth alternative rule: per path, a time model t = c0 + c1 FLOP + c2 bytes fitted
            (non-negative, least relative squared error) on the fit shapes; on every shape the
            path with the least predicted time among those that ran there

the distribution of "behind the best" (100 (t / t_best - 1) %): median, 95th percentile, worst,
and the share within 10% and 25%, with the worst shapes. Standard library only.

    python3 perf/random_shapes.py --seed 21 --json perf/results/random-shapes-21.json
    python3 perf/compare.py --tf32 --planning both --no-peers --out perf_results/random-21 \\
        $(python3 perf/random_shapes.py --seed 21)
    python3 perf/fit_rule.py --shapes perf/results/random-shapes-21.json perf_results/random-21
"""
import argparse
import itertools
import json
import math
import sys
from pathlib import Path

from perf_common import parse_shape

FLOORS = {"strict": {"strict"}, "3xtf32": {"strict", "3xtf32"},
          "tf32": {"strict", "3xtf32", "tf32"}}


def load_runs(paths):
    """{(shape, run precision): [result rows]} from perf JSON files or folders of them."""
    files = []
    for p in paths:
        p = Path(p)
        files += sorted(p.glob("ours_*.json")) if p.is_dir() else [p]
    runs = {}
    for f in files:
        data = json.loads(f.read_text())
        config = data.get("config", {})
        shape = config.get("shape")
        rows = [r for r in data.get("results", []) if not r.get("refused")
                and r.get("median_ms") is not None]
        runs.setdefault((shape, config.get("precision", "strict")), []).extend(rows)
    return runs


def features(shape):
    M, K, N = parse_shape(shape)
    return [1.0, 2.0 * M * N * K, 4.0 * (M * K + N * K + N + M * N)]


def solve(a, b):
    """Gaussian elimination with partial pivoting; None when singular."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        pivot = max(range(c, n), key=lambda r: abs(m[r][c]))
        if abs(m[pivot][c]) < 1e-300:
            return None
        m[c], m[pivot] = m[pivot], m[c]
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] for i in range(n)]


def fit(samples):
    """Non-negative c minimising sum ((c . x) / t - 1)^2 over (x, t): every subset of the
    coefficients solved by least squares (columns scaled), the best feasible one kept."""
    if not samples:
        return None
    k = len(samples[0][0])
    scale = [max(abs(x[j]) / t for x, t in samples) or 1.0 for j in range(k)]
    rows = [[x[j] / t / scale[j] for j in range(k)] for x, t in samples]
    best, best_err = None, math.inf
    for size in range(1, k + 1):
        for subset in itertools.combinations(range(k), size):
            a = [[sum(r[i] * r[j] for r in rows) for j in subset] for i in subset]
            b = [sum(r[i] for r in rows) for i in subset]
            sol = solve(a, b)
            if sol is None or min(sol) < 0:
                continue
            c = [0.0] * k
            for i, v in zip(subset, sol):
                c[i] = v / scale[i]
            err = sum((sum(cj * xj for cj, xj in zip(c, x)) / t - 1) ** 2 for x, t in samples)
            if err < best_err:
                best, best_err = c, err
    return best


def percentile(values, q):
    """Nearest-rank percentile of a non-empty list."""
    s = sorted(values)
    return s[max(0, min(len(s) - 1, math.ceil(q / 100.0 * len(s)) - 1))]


def main(argv=None):
    p = argparse.ArgumentParser(description="auto behind the best path, fit and held-out "
                                "shapes (see the top of this file)")
    p.add_argument("inputs", nargs="+", help="perf JSON files or folders of ours_*.json")
    p.add_argument("--shapes", required=True, help="the split: random_shapes.py --json output")
    p.add_argument("--same-precision", action="store_true",
                   help="best path in the floor's own precision only (as compare.py)")
    p.add_argument("--worst", type=int, default=5, help="worst shapes listed per set (5)")
    p.add_argument("--json", default=None, help="also write the report as JSON")
    p.add_argument("--replay", default=None,
                   help="fused_linear_replay_rule's output: the rule's choice per shape and floor")
    args = p.parse_args(argv)

    split = {s["shape"]: s["split"] for s in json.loads(Path(args.shapes).read_text())["shapes"]}
    runs = load_runs(args.inputs)
    # Explicit paths per (shape, precision ran): the best median of any run of that shape.
    paths = {}
    autos = {}
    for (shape, run_precision), rows in runs.items():
        for r in rows:
            planning = r.get("planning") or "estimate"
            if r.get("algorithm_requested") == "auto":
                autos[(shape, run_precision, planning)] = r
                continue
            key = (shape, r.get("algorithm_ran"), r.get("precision_ran"))
            paths[key] = min(paths.get(key, math.inf), r["median_ms"])

    # The model, per path, on the fit shapes.
    samples = {}
    for (shape, algorithm, precision), ms in paths.items():
        if split.get(shape) == "fit":
            samples.setdefault((algorithm, precision), []).append((features(shape), ms))
    models = {path: fit(s) for path, s in samples.items()}

    def predicted(shape, path):
        c = models.get(path)
        return None if c is None else sum(a * b for a, b in zip(c, features(shape)))

    replayed = {}
    if args.replay:
        for line in Path(args.replay).read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                shape, floor, algorithm, precision = line.split()
                replayed[(shape, floor)] = (algorithm, precision)

    report = {}
    cases = sorted({(shape, floor) for (shape, floor, _) in autos})
    rows = []
    for shape, floor in cases:
        allowed = {floor} if args.same_precision else FLOORS[floor]
        here = {(a, q): ms for (s, a, q), ms in paths.items() if s == shape and q in allowed}
        if not here:
            continue
        best_path, best_ms = min(here.items(), key=lambda kv: kv[1])
        row = dict(shape=shape, floor=floor, split=split.get(shape, "unlisted"),
                   best="/".join(best_path), best_ms=best_ms)
        for planning in ("estimate", "measure"):
            a = autos.get((shape, floor, planning))
            if a is not None:
                row[planning] = 100.0 * (a["median_ms"] / best_ms - 1.0)
                row[planning + "_ran"] = f"{a.get('algorithm_ran')}/{a.get('precision_ran')}"
                chosen = (a.get("algorithm_ran"), a.get("precision_ran"))
                if planning == "measure" and chosen in here:
                    row["m-choice"] = 100.0 * (here[chosen] / best_ms - 1.0)
                    row["m-choice_ran"] = "/".join(chosen)
        choice = replayed.get((shape, floor))
        if choice in here:
            row["replay"] = 100.0 * (here[choice] / best_ms - 1.0)
            row["replay_ran"] = "/".join(choice)
        guesses = [(predicted(shape, path), path) for path in here]
        guesses = [g for g in guesses if g[0] is not None]
        if guesses:
            _, path = min(guesses)
            row["model"] = 100.0 * (here[path] / best_ms - 1.0)
            row["model_ran"] = "/".join(path)
        rows.append(row)

    print(f"{len(rows)} shape x floor cases from {len(runs)} perf runs; models for "
          f"{len(models)} paths fitted on the fit shapes")
    for set_name in ("fit", "held-out", "unlisted"):
        group = [r for r in rows if r["split"] == set_name]
        if not group:
            continue
        report[set_name] = {}
        print(f"\n{set_name}: {len(group)} cases")
        print(f"  {'rule':<9} {'n':>4} {'median':>8} {'95th':>8} {'worst':>8} {'<=10%':>7} "
              f"{'<=25%':>7}")
        for rule in ("estimate", "measure", "m-choice", "replay", "model"):
            gaps = [r[rule] for r in group if rule in r]
            if not gaps:
                continue
            stats = dict(n=len(gaps), median=percentile(gaps, 50), p95=percentile(gaps, 95),
                         worst=max(gaps),
                         within_10=sum(g <= 10 for g in gaps) / len(gaps),
                         within_25=sum(g <= 25 for g in gaps) / len(gaps))
            report[set_name][rule] = stats
            print(f"  {rule:<9} {stats['n']:>4} {stats['median']:>7.1f}% {stats['p95']:>7.1f}% "
                  f"{stats['worst']:>7.1f}% {100 * stats['within_10']:>6.0f}% "
                  f"{100 * stats['within_25']:>6.0f}%")
        for rule in ("estimate", "measure", "m-choice", "replay"):
            worst = sorted((r for r in group if rule in r), key=lambda r: -r[rule])[:args.worst]
            for r in worst:
                print(f"    {rule} worst: {r['shape']} {r['floor']}: {r[rule + '_ran']} "
                      f"{r[rule]:+.1f}% behind {r['best']} ({r['best_ms']:.4f} ms)")
    if args.json:
        Path(args.json).write_text(json.dumps(dict(cases=rows, summary=report,
                                                   models={"/".join(k): v for k, v in
                                                           models.items()}), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
