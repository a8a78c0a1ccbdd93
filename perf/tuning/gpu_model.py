# SPDX-License-Identifier: Apache-2.0
"""Fits the GPU cost model of auto's rule (GpuRule's coefficient arrays) to measured runs.

For every shape and path (with its precision) the runs timed, the library's own terms
(Impl::gpu_terms, printed by `fused_linear_replay_rule --terms` with the rates of the device
the runs were made on) are fitted to the measured medians: per path and precision,
non-negative coefficients minimising the relative squared error (tuning.stats.fit).
tuning.rules writes them (4 significant digits) into GpuRule.hpp; this prints them with each
path's model error and how far the path the model picks is behind the best one meeting each
floor on the fitted runs. The held-out check is tuning.judge --replay-tool on runs the model
was not fitted on.

    PYTHONPATH=perf python3 -m tuning.gpu_model \\
        --replay-tool build/host/perf/fused_linear_replay_rule     # the runs of rules/gpu.json
    PYTHONPATH=perf python3 -m tuning.gpu_model --replay-tool ... --held-out RUN... \\
        [--memory-gbps 3352.3]     # the fitted model's error and choices on other runs, counted
                                   # with the rates of their device
"""
import argparse
import math
import sys

from . import data, replay_tool, spec
from .data import FLOORS, explicit_paths
from .stats import fit, percentile, predicted


def measured(rows):
    """{shape: {(path, precision): least median}} of the explicit paths of the rows."""
    out = {}
    for (shape, path, precision), ms in explicit_paths(rows).items():
        out.setdefault(shape, {})[(path, precision)] = ms
    return out


def terms(tool, facts, shapes):
    """{(shape, path, precision): [terms]} from the library (fused_linear_replay_rule --terms)."""
    return replay_tool.terms(tool, replay_tool.rate_options(facts), shapes, 3)


def timed(ds, run_ids, tool, facts, devices=None):
    """(times, terms) of runs of the dataset: measured() and the library's terms at the rates of
    each run's device (`devices`: {device name: rates}, else `facts`). A shape timed on a device
    named in `devices` is keyed "SHAPE@DEVICE", apart from the same shape on another device."""
    groups = {}
    for run_id in run_ids:
        device = ds.run(run_id)["device"]
        groups.setdefault(device if devices and device in devices else None, []).append(run_id)
    times, x = {}, {}
    for device, ids in groups.items():
        here = measured([r for run_id in ids for r in ds.rows(run_id)])
        if not here:
            continue
        here_x = terms(tool, devices[device] if device else facts, sorted(here))
        tag = (lambda s: s) if device is None else (lambda s, d=device: f"{s}@{d}")
        times.update({tag(s): t for s, t in here.items()})
        x.update({(tag(k[0]),) + k[1:]: v for k, v in here_x.items()})
    if not times:
        raise data.DataError(f"runs {', '.join(run_ids)}: no explicit GPU paths timed")
    return times, x


def fit_runs(ds, run_ids, tool, facts, models, devices=None):
    """(coefficients {(path, precision): [c]}, times, terms) fitted on runs of the dataset, for
    the models [(path, precision)], each run's terms at its device's rates (timed())."""
    times, x = timed(ds, run_ids, tool, facts, devices)
    coefficients = {}
    for model in models:
        samples = [
            (x[(s,) + model], t[model])
            for s, t in sorted(times.items())
            if model in t and (s,) + model in x
        ]
        if not samples:
            raise data.DataError(f"runs {', '.join(run_ids)}: {'/'.join(model)} never timed")
        coefficients[model] = fit(samples)
    return coefficients, times, x


def cases(coefficients, times, x):
    """(shape, floor, {path: (measured ms, predicted ms)}) per shape and floor (strict, 3xtf32),
    over the paths timed there that meet the floor and have a model."""
    for s, t in sorted(times.items()):
        for floor in ("strict", "3xtf32"):
            here = {
                k: (ms, predicted(coefficients[k], x[(s,) + k]))
                for k, ms in t.items()
                if k[1] in FLOORS[floor] and k in coefficients and (s,) + k in x
            }
            if here:
                yield s, floor, here


def choices(coefficients, times, x):
    """[(gap %, shape, floor, chosen, best)]: the model's pick against the best timed path
    meeting each floor, over the paths timed at that shape."""
    out = []
    for s, floor, here in cases(coefficients, times, x):
        pick = min(here, key=lambda k: here[k][1])
        best = min(here, key=lambda k: here[k][0])
        out.append((100 * (here[pick][0] / here[best][0] - 1), s, floor, pick, best))
    return out


def best_ratios(coefficients, times, x):
    """The best path's prediction over the least prediction, per case."""
    ratios = []
    for _, _, here in cases(coefficients, times, x):
        best = min(here, key=lambda k: here[k][0])
        least = min(p for _, p in here.values())
        if least > 0:
            ratios.append(here[best][1] / least)
    return ratios


def measure_within(coefficients, times, x, share=99, slack=1.1):
    """Planning::Measure's margin: the ratio best_ratios() stays under on `share`% of the fitted
    cases, times `slack`, rounded up to 0.01. Measure times only the candidates predicted
    within it."""
    ratios = best_ratios(coefficients, times, x)
    return math.ceil(round(100 * percentile(ratios, share) * slack, 6)) / 100


def report_lines(coefficients, times, x, margin, worst=8):
    lines = []
    for model, c in coefficients.items():
        errors = [
            abs(predicted(c, x[(s,) + model]) / t[model] - 1)
            for s, t in times.items()
            if model in t and (s,) + model in x
        ]
        if not errors:
            continue
        lines.append(f"{'/'.join(model)}: " + ", ".join(f"{v:.4g}" for v in c))
        lines.append(
            f"  model error median {100 * percentile(errors, 50):.1f}%, 90th "
            f"{100 * percentile(errors, 90):.1f}%, worst {100 * max(errors):.1f}% "
            f"({len(errors)} shapes)"
        )
    gaps = choices(coefficients, times, x)
    g = [v for v, *_ in gaps]
    lines.append(
        f"choice behind the best path meeting the floor: median {percentile(g, 50):.1f}%, "
        f"95th {percentile(g, 95):.1f}%, worst {max(g):.1f}%, within 10% "
        f"{100 * sum(v <= 10 for v in g) / len(g):.1f}%, within 25% "
        f"{100 * sum(v <= 25 for v in g) / len(g):.1f}% ({len(g)} cases)"
    )
    for v, s, floor, pick, best in sorted(gaps, reverse=True)[:worst]:
        lines.append(f"  {s} {floor}: {'/'.join(pick)} {v:+.1f}% (best {'/'.join(best)})")
    within = [r <= margin for r in best_ratios(coefficients, times, x)]
    lines.append(
        f"Planning::Measure times the candidates predicted within {margin}x of the "
        f"least: the best path among them in {100 * sum(within) / len(within):.1f}% "
        "of the cases"
    )
    return lines


def models_of(spec):
    return [(m["path"], m["precision"]) for m in spec["models"]]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="*", help="run ids (default: the fit runs of rules/gpu.json)")
    replay_tool.add_argument(p)
    data.add_argument(p)
    p.add_argument(
        "--held-out",
        nargs="+",
        metavar="RUN",
        default=None,
        help="judge the model fitted on `runs` on these runs instead",
    )
    for rate in ("multiprocessors", "fp32-gflops", "memory-gbps"):
        p.add_argument(
            f"--{rate}",
            type=float,
            default=None,
            help=f"the held-out runs' device's {rate.replace('-', ' ')} " "(default: the fit's)",
        )
    args = p.parse_args(argv)
    try:
        ds = data.Dataset(args.data)
        rule = spec.load(args.data / "rules" / "gpu.json")
        run_ids = args.runs or rule["fit"]["runs"]
        devices = rule["fit"].get("devices")
        c, times, x = fit_runs(
            ds, run_ids, args.replay_tool, rule["fit"]["facts"], models_of(rule), devices
        )
        margin = measure_within(c, times, x)
        if args.held_out:
            facts = dict(rule["fit"]["facts"])
            for key in ("multiprocessors", "fp32_gflops", "memory_gbps"):
                if getattr(args, key) is not None:
                    facts[key] = getattr(args, key)
            if any(getattr(args, key) is not None for key in facts):
                devices = None  # the rates given count for every held-out run
            times, x = timed(ds, args.held_out, args.replay_tool, facts, devices)
    except data.DataError as e:
        print(f"tuning.gpu_model: {e}", file=sys.stderr)
        return 1
    print("\n".join(report_lines(c, times, x, margin)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
