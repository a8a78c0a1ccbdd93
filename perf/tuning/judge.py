# SPDX-License-Identifier: Apache-2.0
"""The held-out study of auto's rule: how far auto is behind the best path, per set of shapes
(fit: what a rule may be fitted on; held-out: the rest; perf/data/splits.csv).

For every shape and precision floor of a run it takes the best explicit path whose precision
meets the floor (strict meets every floor, 3xtf32 meets tf32's; --same-precision: only the
floor's own) and reports the distribution of "behind the best" (100 (t / t_best - 1) %:
median, 95th percentile, worst, share within 10% and 25%) of

  estimate  auto as the library's rule chose (Planning::Estimate)
  measure   auto measured (Planning::Measure), where the run has it
  m-choice  the path measured plans chose, timed as that explicit path in the run
  replay    with --replay-tool: the path fused_linear_replay_rule says the rule as built now
            takes, timed as that explicit path (a rule change judged on stored runs before it
            reaches the machine); GPU runs are replayed with the rates of the device the GPU
            model was fitted on unless --replay-rates gives theirs

    PYTHONPATH=perf python3 -m tuning.judge h200-2026-12-04-random33
    PYTHONPATH=perf python3 -m tuning.judge host-2c-2026-12-05-random39 \\
        --replay-tool build/host/perf/fused_linear_replay_rule
"""
import argparse
import json
import sys
from pathlib import Path

from . import data, replay_tool
from .data import FLOORS, explicit_paths
from .stats import percentile

RULES = ("estimate", "measure", "m-choice", "replay")
SETS = ("fit", "held-out", "unlisted")


def replay(tool, shapes, host_threads=None, host_blas="generic", rates=()):
    """{(shape, floor): (algorithm, precision)} the rule takes, from fused_linear_replay_rule
    (a Hopper GPU's facts, with the tool's rate options `rates`, or a host's with
    host_threads)."""
    if host_threads is not None:
        options = replay_tool.host_options(host_blas, host_threads)
    else:
        options = list(rates)
    return replay_tool.choices(tool, options, shapes)


def cases(rows, split, replayed=None, same_precision=False):
    """One dict per (shape, floor) with an auto row: the best path and each rule's gap (%)."""
    paths = explicit_paths(rows)
    autos = {}
    for r in rows:
        if r["source"] == "ours" and r["path"] == "auto":
            autos[(r["shape"], r["precision"], r["planning"])] = r
    out = []
    for shape, floor in sorted({(s, f) for (s, f, _) in autos}):
        allowed = {floor} if same_precision else FLOORS[floor]
        here = {(a, q): ms for (s, a, q), ms in paths.items() if s == shape and q in allowed}
        if not here:
            continue
        best_path, best_ms = min(here.items(), key=lambda kv: kv[1])
        row = dict(
            shape=shape,
            floor=floor,
            set=split.get(shape, "unlisted"),
            best="/".join(best_path),
            best_ms=best_ms,
        )
        for planning in ("estimate", "measure"):
            a = autos.get((shape, floor, planning))
            if a is None:
                continue
            chosen = (a["ran"], a["precision_ran"])
            row[planning] = 100.0 * (a["median_ms"] / best_ms - 1.0)
            row[planning + "_ran"] = "/".join(chosen)
            if planning == "measure" and chosen in here:
                row["m-choice"] = 100.0 * (here[chosen] / best_ms - 1.0)
                row["m-choice_ran"] = "/".join(chosen)
        choice = (replayed or {}).get((shape, floor))
        if choice in here:
            row["replay"] = 100.0 * (here[choice] / best_ms - 1.0)
            row["replay_ran"] = "/".join(choice)
        out.append(row)
    return out


def summarize(case_rows):
    """{set: {rule: {n, median, p95, worst, within_10, within_25}}}"""
    report = {}
    for set_name in SETS:
        group = [r for r in case_rows if r["set"] == set_name]
        for rule in RULES:
            gaps = [r[rule] for r in group if rule in r]
            if gaps:
                report.setdefault(set_name, {})[rule] = dict(
                    n=len(gaps),
                    median=percentile(gaps, 50),
                    p95=percentile(gaps, 95),
                    worst=max(gaps),
                    within_10=sum(g <= 10 for g in gaps) / len(gaps),
                    within_25=sum(g <= 25 for g in gaps) / len(gaps),
                )
    return report


def study(ds, run_ids, replay_tool=None, same_precision=False, rates=()):
    """(cases, summary) of runs of the dataset, each shape in its seed's set."""
    all_cases = []
    for run_id in run_ids:
        rows = ds.rows(run_id)
        replayed = None
        if replay_tool:
            run = ds.run(run_id)
            host = run["threads"] if run["machine"] != "h200" else None
            replayed = replay(replay_tool, {r["shape"] for r in rows}, host, rates=rates)
        all_cases += cases(rows, ds.split(run_id), replayed, same_precision)
    return all_cases, summarize(all_cases)


def report_lines(case_rows, summary, worst=5):
    lines = []
    for set_name, rules in summary.items():
        group = [r for r in case_rows if r["set"] == set_name]
        lines.append(f"{set_name}: {len(group)} cases")
        lines.append(
            f"  {'rule':<9} {'n':>4} {'median':>8} {'95th':>8} {'worst':>8} "
            f"{'<=10%':>7} {'<=25%':>7}"
        )
        for rule, s in rules.items():
            lines.append(
                f"  {rule:<9} {s['n']:>4} {s['median']:>7.1f}% {s['p95']:>7.1f}% "
                f"{s['worst']:>7.1f}% {100 * s['within_10']:>6.0f}% "
                f"{100 * s['within_25']:>6.0f}%"
            )
        for rule in rules:
            for r in sorted((r for r in group if rule in r), key=lambda r: -r[rule])[:worst]:
                lines.append(
                    f"    {rule} worst: {r['shape']} {r['floor']}: {r[rule + '_ran']} "
                    f"{r[rule]:+.1f}% behind {r['best']} ({r['best_ms']:.4f} ms)"
                )
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(
        description="auto behind the best path, per set of shapes "
        "(python3 -m tuning.judge --help; see the module's docstring)"
    )
    p.add_argument("runs", nargs="+", help="run ids of perf/data/runs.csv")
    data.add_argument(p)
    replay_tool.add_argument(
        p, "fused_linear_replay_rule: judge the rule as built now too", required=False
    )
    p.add_argument(
        "--replay-rates",
        nargs=3,
        type=float,
        default=None,
        metavar=("MULTIPROCESSORS", "FP32_GFLOPS", "MEMORY_GBPS"),
        help="the GPU runs' device's rates, for the replay",
    )
    p.add_argument(
        "--same-precision", action="store_true", help="best path in the floor's own precision only"
    )
    p.add_argument("--worst", type=int, default=5, help="worst shapes listed per rule (5)")
    p.add_argument("--json", type=Path, default=None, help="also write cases and summary")
    args = p.parse_args(argv)
    try:
        ds = data.Dataset(args.data)
        rates = ()
        if args.replay_rates:
            rates = [
                a
                for name, v in zip(
                    ("--multiprocessors", "--fp32-gflops", "--memory-gbps"), args.replay_rates
                )
                for a in (name, str(v))
            ]
        case_rows, summary = study(ds, args.runs, args.replay_tool, args.same_precision, rates)
    except data.DataError as e:
        print(f"tuning.judge: {e}", file=sys.stderr)
        return 1
    print(f"{len(case_rows)} shape x floor cases from {', '.join(args.runs)}")
    print("\n".join(report_lines(case_rows, summary, args.worst)))
    if args.json:
        args.json.write_text(json.dumps(dict(cases=case_rows, summary=summary), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
