#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fits the host cost model of auto's rule (Impl::AutoRule::host_fused_ms, host_skinny_ms) to
measured runs, and says how well its choice does on them.

For every shape the runs timed (perf/compare.py --device cpu output folders: ours_*.json), the
library's own terms (Impl::host_fused_terms, host_skinny_terms, printed by
`fused_linear_replay_rule --host ... --threads T --terms`) are fitted to the measured medians:
per kernel, non-negative coefficients minimising the relative squared error (the least squares
of perf/fit_rule.py). It prints the C++ arrays to paste into Dispatch.hpp, each kernel's model
error, and how far the kernel the model picks is behind the faster of the two and behind the best
path (the vendor paths included) on the fitted runs. The held-out check is fit_rule.py --replay
on runs the model was not fitted on. Standard library only.

    python3 perf/fit_host_model.py --replay-tool build/host/perf/fused_linear_replay_rule \\
        --threads 2 perf/results/host-2c-2026-12-05-{grid,random35,random37}
"""
import argparse
import math
import subprocess
import sys

from fit_rule import fit, load_runs, percentile

KERNELS = ("fused", "fused_skinny")


def measured(paths):
    """{shape: {algorithm: median ms}} for the explicit strict paths of the runs."""
    out = {}
    for (shape, precision), rows in load_runs(paths).items():
        if precision != "strict":
            continue
        for r in rows:
            if r.get("algorithm_requested") != "auto":
                t = out.setdefault(shape, {})
                a = r["algorithm_ran"]
                t[a] = min(t.get(a, math.inf), r["median_ms"])
    return out


def terms(tool, blas, threads, shapes):
    """{(shape, algorithm): [terms]} from the library (fused_linear_replay_rule --terms)."""
    text = subprocess.run([tool, "--host", blas, "--threads", str(threads), "--terms"],
                          input="\n".join(shapes) + "\n", capture_output=True, text=True,
                          check=True).stdout
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            shape, algorithm, *values = line.split()
            out[(shape, algorithm)] = [float(v) for v in values]
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("inputs", nargs="+", help="perf JSON files or folders of ours_*.json")
    p.add_argument("--replay-tool", required=True, help="the fused_linear_replay_rule program")
    p.add_argument("--threads", type=int, required=True, help="the threads the runs used")
    p.add_argument("--blas", default="generic", help="the host BLAS kind (terms do not use it)")
    p.add_argument("--worst", type=int, default=8, help="worst choices listed (8)")
    args = p.parse_args(argv)

    times = {s: t for s, t in measured(args.inputs).items() if all(k in t for k in KERNELS)}
    if not times:
        sys.exit("fit_host_model.py: no run timed both host kernels")
    x = terms(args.replay_tool, args.blas, args.threads, sorted(times))
    coefficients = {}

    def predicted(shape, k):
        return sum(a * b for a, b in zip(coefficients[k], x[(shape, k)]))

    for k in KERNELS:
        c = coefficients[k] = fit([(x[(s, k)], t[k]) for s, t in times.items()])
        errors = [abs(predicted(s, k) / t[k] - 1) for s, t in times.items()]
        name = "host_fused_ms" if k == "fused" else "host_skinny_ms"
        print(f"static constexpr double {name}[{len(c)}] = {{"
              + ", ".join(f"{v:.4g}" for v in c) + "};")
        print(f"//   {k}: model error median {100 * percentile(errors, 50):.1f}%, 90th "
              f"{100 * percentile(errors, 90):.1f}%, worst {100 * max(errors):.1f}% "
              f"({len(errors)} shapes)")

    rows = []
    for s, t in times.items():
        choice = min(KERNELS, key=lambda k: predicted(s, k))
        rows.append((100 * (t[choice] / min(t[k] for k in KERNELS) - 1),
                     100 * (t[choice] / min(t.values()) - 1), s, choice,
                     min(t, key=t.get)))
    for i, against in ((0, "the faster kernel"), (1, "the best path")):
        gaps = [r[i] for r in rows]
        print(f"choice behind {against}: median {percentile(gaps, 50):.1f}%, 95th "
              f"{percentile(gaps, 95):.1f}%, worst {max(gaps):.1f}%, within 10% "
              f"{100 * sum(g <= 10 for g in gaps) / len(gaps):.0f}%, within 25% "
              f"{100 * sum(g <= 25 for g in gaps) / len(gaps):.0f}% ({len(gaps)} shapes)")
    for r in sorted(rows, key=lambda r: -r[1])[:args.worst]:
        print(f"  {r[2]}: {r[3]} {r[1]:+.1f}% behind {r[4]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
