# SPDX-License-Identifier: Apache-2.0
"""Fits the host cost model of auto's rule (HostRule::fused_ms, skinny_ms) to measured runs.

For every shape the runs timed with both host kernels, the library's own terms
(Impl::host_fused_terms, host_skinny_terms, printed by `fused_linear_replay_rule --host BLAS
--threads T --terms`) are fitted to the measured medians: per kernel, non-negative coefficients
minimising the relative squared error. tuning.rules writes the coefficients (4 significant
digits) into HostRule.hpp; this prints them with each kernel's model error and how far the
kernel the model picks is behind the faster one on the fitted runs. The held-out check is
tuning.judge --replay-tool on runs the model was not fitted on.

    PYTHONPATH=perf python3 -m tuning.host_model \\
        --replay-tool build/host/perf/fused_linear_replay_rule     # the runs of rules/host.json
"""
import argparse
import math
import sys

from . import data, replay_tool, spec
from .stats import fit, percentile, predicted

KERNELS = ("fused", "fused_skinny")


def measured(rows):
    """{shape: {algorithm: least median}} of the explicit strict paths of the rows."""
    out = {}
    for r in rows:
        if r["source"] == "ours" and r["precision"] == "strict" and r["path"] != "auto":
            t = out.setdefault(r["shape"], {})
            t[r["ran"]] = min(t.get(r["ran"], math.inf), r["median_ms"])
    return out


def terms(tool, blas, threads, shapes):
    """{(shape, algorithm): [terms]} from the library (fused_linear_replay_rule --terms)."""
    return replay_tool.terms(tool, replay_tool.host_options(blas, threads), shapes, 2)


def fit_kernels(times, x):
    """{kernel: coefficients} from {shape: {kernel: ms}} and {(shape, kernel): terms}."""
    return {k: fit([(x[(s, k)], t[k]) for s, t in times.items()]) for k in KERNELS}


def fit_runs(ds, run_ids, tool, threads, blas="generic"):
    """(coefficients, times, terms) of the model fitted on runs of the dataset."""
    rows = [r for run_id in run_ids for r in ds.rows(run_id)]
    times = {s: t for s, t in measured(rows).items() if all(k in t for k in KERNELS)}
    if not times:
        raise data.DataError(f"runs {', '.join(run_ids)}: none timed both host kernels")
    x = terms(tool, blas, threads, sorted(times))
    return fit_kernels(times, x), times, x


def report_lines(coefficients, times, x, worst=8):
    lines = []
    for k in KERNELS:
        c = coefficients[k]
        errors = [abs(predicted(c, x[(s, k)]) / t[k] - 1) for s, t in times.items()]
        lines.append(f"{k}: " + ", ".join(f"{v:.4g}" for v in c))
        lines.append(
            f"  model error median {100 * percentile(errors, 50):.1f}%, 90th "
            f"{100 * percentile(errors, 90):.1f}%, worst {100 * max(errors):.1f}% "
            f"({len(errors)} shapes)"
        )
    gaps = []
    for s, t in times.items():
        choice = min(KERNELS, key=lambda k: predicted(coefficients[k], x[(s, k)]))
        gaps.append((100 * (t[choice] / min(t[k] for k in KERNELS) - 1), s, choice))
    g = [v for v, _, _ in gaps]
    lines.append(
        f"choice behind the faster kernel: median {percentile(g, 50):.1f}%, 95th "
        f"{percentile(g, 95):.1f}%, worst {max(g):.1f}%, within 10% "
        f"{100 * sum(v <= 10 for v in g) / len(g):.0f}% ({len(g)} shapes)"
    )
    for v, s, choice in sorted(gaps, reverse=True)[:worst]:
        lines.append(f"  {s}: {choice} {v:+.1f}%")
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="*", help="run ids (default: the fit runs of rules/host.json)")
    replay_tool.add_argument(p)
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="the threads the runs used (default: rules/host.json's)",
    )
    data.add_argument(p)
    args = p.parse_args(argv)
    try:
        ds = data.Dataset(args.data)
        rule = spec.load(args.data / "rules" / "host.json")
        run_ids = args.runs or rule["fit"]["runs"]
        threads = args.threads or rule["fit"]["threads"]
        c, times, x = fit_runs(ds, run_ids, args.replay_tool, threads, rule["fit"]["blas"])
    except data.DataError as e:
        print(f"tuning.host_model: {e}", file=sys.stderr)
        return 1
    print("\n".join(report_lines(c, times, x)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
