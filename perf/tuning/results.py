# SPDX-License-Identifier: Apache-2.0
"""Writes perf/RESULTS.md from the dataset (perf/data/): per machine, its canonical sweep (the
reference shape and the KernelBench shapes first), its KernelBench-style evaluation, then the
held-out studies of auto's rule (tuning.judge), per run and set of shapes.

    PYTHONPATH=perf python3 -m tuning.results             # rewrite perf/RESULTS.md
    PYTHONPATH=perf python3 -m tuning.results --check     # exit 1 (with a diff) if it is stale
    PYTHONPATH=perf python3 -m tuning.results --plots DIR # also draw each sweep (matplotlib)
"""
import argparse
import difflib
import sys
from pathlib import Path

from . import data, judge
from .names import REFERENCE_PEER

RESULTS_MD = data.DATA.parent / "RESULTS.md"
# The reference shape (KernelBench's seed problem) and KernelBench's earlier problem.
FIRST_SHAPES = ("1024x8192x8192", "128x1024x512")
NAMES = {
    "h100": "NVIDIA H100 (80 GB HBM3)",
    "h200": "NVIDIA H200",
    "host-2c": "Host: AMD EPYC, 2 cores",
    "host-xeon-2c": "Host: Intel Xeon, 2 cores",
}


# The section the design notes link to (docs/design/dispatch.md).
HELD_OUT_HEADING = "Held-out results"


def pct(v):
    return "-" if v is None else f"{v:+.1f}%"


def ms(v):
    return "-" if v is None else f"{v:.4f}"


def ratio(a, b):
    return "-" if not a or not b else f"{a / b:.2f}"


def latest(runs, purpose):
    chosen = [r for r in runs if r["purpose"] == purpose]
    return max(chosen, key=lambda r: (r["date"], r["run_id"]), default=None)


def run_line(run):
    commit = f"`{run['commit']}`" + (" (uncommitted changes)" if run["dirty"] == "true" else "")
    threads = f", {run['threads']} threads" if run["threads"] else ""
    return (
        f"Run `{run['run_id']}` ({run['date']}, {run['device']}{threads}, Kokkos "
        f"{run['kokkos']}, library {commit})."
    )


def sweep_lines(ds, run):
    rows = ds.rows(run["run_id"])
    order = list(dict.fromkeys(r["shape"] for r in rows))
    order = [s for s in FIRST_SHAPES if s in order] + [s for s in order if s not in FIRST_SHAPES]
    eager = {r["shape"]: r["median_ms"] for r in rows if r["path"] == REFERENCE_PEER}
    autos = {
        (r["shape"], r["precision"]): r
        for r in rows
        if r["source"] == "ours" and r["path"] == "auto" and r["planning"] == "estimate"
    }
    cases = {(c["shape"], c["floor"]): c for c in judge.cases(rows, {})}
    lines = [
        run_line(run),
        "",
        "| shape | floor | auto ran | auto ms | best path | best ms | auto vs best | " "× eager |",
        "|---|---|---|---:|---|---:|---:|---:|",
    ]
    for shape in order:
        for floor in data.PRECISIONS:
            a, c = autos.get((shape, floor)), cases.get((shape, floor))
            if a is None or c is None:
                continue
            lines.append(
                f"| {shape} | {floor} | {a['ran']}/{a['precision_ran']} | "
                f"{ms(a['median_ms'])} | {c['best']} | {ms(c['best_ms'])} | "
                f"{pct(c.get('estimate'))} | "
                f"{ratio(eager.get(shape), a['median_ms'])} |"
            )
    return lines


def kernelbench_lines(ds, run):
    rows = [r for r in ds.kernelbench() if r["run_id"] == run["run_id"]]
    lines = [
        run_line(run) + " Mean of the timed calls; × eager: eager PyTorch's mean over "
        "the row's.",
        "",
    ]
    eager = {
        (r["problem"], r["M"], r["K"], r["N"]): r["mean_ms"]
        for r in rows
        if r["impl"] == "Model eager"
    }
    lines += [
        "| problem | shape | implementation | precision | ran | correct | mean ms | " "× eager |",
        "|---|---|---|---|---|---|---:|---:|",
    ]
    key = {f: i for i, f in enumerate(FIRST_SHAPES)}
    rows.sort(key=lambda r: key.get(data.shape_name(r), len(key)))
    for r in rows:
        e = eager.get((r["problem"], r["M"], r["K"], r["N"]))
        lines.append(
            f"| {r['problem']} | {data.shape_name(r)} | {r['impl']} | "
            f"{r['precision']} | {r['ran'] or '-'} | {r['correct'] or '-'} | "
            f"{ms(r['mean_ms'])} | {ratio(e, r['mean_ms'])} |"
        )
    return lines


def latest_training(ds, runs):
    """Per pass (backward, step) and set of shapes, the latest training run that timed it, in
    the order of their first runs: [(run, passes)]."""
    chosen = {}
    shape_sets = []
    for r in sorted(runs, key=lambda r: (r["date"], r["run_id"])):
        shapes = frozenset(x["shape"] for x in ds.training(r["run_id"]))
        if r["purpose"] == "training" and shapes and shapes not in shape_sets:
            shape_sets.append(shapes)
    for shapes in shape_sets:
        for pass_ in data.PASSES:
            timed = [
                r
                for r in runs
                if frozenset(x["shape"] for x in ds.training(r["run_id"])) == shapes
                and any(x["pass"] == pass_ for x in ds.training(r["run_id"]))
            ]
            run = latest(timed, "training")
            if run:
                chosen.setdefault(run["run_id"], (run, []))[1].append(pass_)
    return list(chosen.values())


def training_lines(ds, run, passes=data.PASSES):
    """The backward and training-step run: per shape, pass and precision, our auto (the perf
    program), fused_linear's module and eager PyTorch fp32's same pass, with the ratios."""
    rows = [r for r in ds.training(run["run_id"]) if r["pass"] in passes]
    order = list(dict.fromkeys(r["shape"] for r in rows))
    order = [s for s in FIRST_SHAPES if s in order] + [s for s in order if s not in FIRST_SHAPES]
    eager = {(r["shape"], r["pass"]): r["median_ms"] for r in rows if r["path"] == REFERENCE_PEER}
    ours = {
        (r["shape"], r["pass"], r["precision"]): r
        for r in rows
        if r["source"] == "ours" and r["path"] == "auto"
    }
    module = {(r["shape"], r["pass"], r["precision"]): r for r in rows if r["source"] == "module"}
    lines = [
        run_line(run) + " Medians; × eager: eager PyTorch fp32's same pass over the row's.",
        "",
        "| shape | pass | precision | auto ran | auto ms | module ms | eager ms | auto × eager "
        "| module × eager |",
        "|---|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for shape in order:
        for pass_ in data.PASSES:
            e = eager.get((shape, pass_))
            for precision in data.PRECISIONS:
                a = ours.get((shape, pass_, precision))
                m = module.get((shape, pass_, precision))
                if a is None and m is None:
                    continue
                a_ms = a and a["median_ms"]
                m_ms = m and m["median_ms"]
                lines.append(
                    f"| {shape} | {pass_} | {precision} | {(a and a['ran']) or '-'} | {ms(a_ms)} "
                    f"| {ms(m_ms)} | {ms(e)} | {ratio(e, a_ms)} | {ratio(e, m_ms)} |"
                )
    return lines


def study_lines(ds, runs):
    lines = [
        "| seed | run | library | purpose | set | cases | estimate ≤10% | ≤25% | worst | "
        "measure ≤10% | ≤25% | worst |",
        "|---|---|---|---|---|---:|---:|---:|---:|---:|" "---:|---:|",
    ]
    for run in sorted(runs, key=lambda r: (int(r["seed"]), r["date"], r["run_id"])):
        cases, summary = judge.study(ds, [run["run_id"]])
        for set_name, rules in summary.items():
            cells = []
            for rule in ("estimate", "measure"):
                s = rules.get(rule)
                cells += (
                    ["-"] * 3
                    if s is None
                    else [
                        f"{100 * s['within_10']:.0f}%",
                        f"{100 * s['within_25']:.0f}%",
                        pct(s["worst"]),
                    ]
                )
            n = sum(1 for c in cases if c["set"] == set_name)
            lines.append(
                f"| {run['seed']} | `{run['run_id']}` | `{run['commit']}` | "
                f"{run['purpose']} | {set_name} | {n} | " + " | ".join(cells) + " |"
            )
    return lines


def share(s):
    """A rule's summary as "within 10% / within 25% / worst"."""
    if s is None:
        return "-"
    return f"{100 * s['within_10']:.0f}% / {100 * s['within_25']:.0f}% / {pct(s['worst'])}"


def held_out_lines(ds, runs):
    """Per held-out run, its shapes of the held-out set (no rule fitted on them): auto as the
    library of the run chose (estimate) and measured (measure)."""
    lines = [
        "| seed | machine | run | commit of the run | cases | estimate | measure |",
        "|---:|---|---|---|---:|---|---|",
    ]
    order = sorted(runs, key=lambda r: (NAMES.get(r["machine"], r["machine"]), int(r["seed"])))
    for run in order:
        cases, summary = judge.study(ds, [run["run_id"]])
        rules = summary.get("held-out")
        if rules is None:
            continue
        n = sum(1 for c in cases if c["set"] == "held-out")
        lines.append(
            f"| {run['seed']} | {NAMES.get(run['machine'], run['machine'])} | "
            f"`{run['run_id']}` | `{run['commit']}` | {n} | {share(rules.get('estimate'))} | "
            f"{share(rules.get('measure'))} |"
        )
    return lines


def render(ds):
    runs = list(ds.runs.values())
    out = [
        "# Results",
        "",
        "<!-- Generated by `PYTHONPATH=perf python3 -m tuning.results` from perf/data/; edit "
        "the data or the generator, not this file. -->",
        "",
        "Every number below comes from the dataset in [`data/`](data/) (its schema: "
        "[`data/README.md`](data/README.md)); `--check` fails when this page is stale. "
        "What the kernels do: [docs/design/](../docs/design/); how runs are timed: "
        "[docs/measurement.md](../docs/measurement.md).",
        "",
        "- Our paths are timed by the perf program through `perf/compare.py`, beside "
        "PyTorch (`perf/torch_peers.py`) in the same job; a row gives the median of "
        "random-order rounds. **× eager**: eager PyTorch fp32's median over auto's (above 1: "
        "faster).",
        "- **floor**: the precision asked; the best path is the fastest explicit path whose "
        "precision meets it (strict meets every floor). **auto vs best**: how far auto "
        "(Planning::Estimate) is behind it (positive: slower).",
        "- Backward and training step: `perf/compare.py --pass backward|step` times the "
        "perf program's gradient (`--pass`) beside eager PyTorch's layer and fused_linear's "
        "module in the same job (`data/training.csv`).",
        "- Held-out studies: seeded random shapes (`python3 -m tuning.shapes`) in the fit set "
        "(what a rule may be fitted on) or the held-out set (`data/splits.csv`); "
        "`python3 -m tuning.judge RUN` prints each case and the worst.",
        "",
    ]
    machines = sorted({r["machine"] for r in runs})
    for machine in machines:
        mine = [r for r in runs if r["machine"] == machine]
        out += [f"## {NAMES.get(machine, machine)}", ""]
        sweep = latest(mine, "sweep")
        if sweep:
            out += ["### Sweep", ""] + sweep_lines(ds, sweep) + [""]
        kb = latest(mine, "kernelbench")
        if kb:
            out += ["### KernelBench-style evaluation", ""] + kernelbench_lines(ds, kb) + [""]
        training = latest_training(ds, mine)
        if training:
            out += ["### Backward and training step", ""]
            for run, passes in training:
                out += training_lines(ds, run, passes) + [""]
        elif sweep or kb:
            out += [
                "### Backward and training step",
                "",
                "No backward or training-step run of this machine in the dataset yet "
                "(`perf/compare.py --pass step`, then `tuning.data add`: "
                "[docs/measurement.md](../docs/measurement.md)).",
                "",
            ]
        studied = [r for r in mine if r["seed"]]
        if studied:
            out += [
                "### auto's rule on random shapes",
                "",
                "Per run and set: the share of cases (shape × floor) where auto, as the "
                "library of the run's commit chose, is within 10% and 25% of the best path, "
                "and the worst case. A fit run times the explicit paths a rule is then "
                "fitted on; `before` / `after` runs time one seed before and after a rule "
                "change; `python3 -m tuning.judge RUN --replay-tool ...` judges the rule as "
                "built now on any run.",
                "",
            ]
            out += study_lines(ds, studied) + [""]
    held_out = [r for r in runs if r["purpose"] == "held-out" and r["seed"]]
    if held_out:
        out += [
            f"## {HELD_OUT_HEADING}",
            "",
            "Each row is a held-out run: a seed's shapes of the held-out set, on which no "
            "rule had been fitted when it ran, judged with the library of the run's commit. "
            "Share of cases (shape × floor) within 10% / within 25% of the best path meeting "
            "the floor / the worst case; **estimate**: auto by the rule "
            "(Planning::Estimate), **measure**: auto measured (Planning::Measure). "
            "`python3 -m tuning.judge RUN --replay-tool ...` replays the rule as built now "
            "on any run.",
            "",
        ]
        out += held_out_lines(ds, held_out) + [""]
    return "\n".join(out).rstrip("\n") + "\n"


def plot(ds, folder):
    """Auto's speed-up over eager PyTorch per shape of each machine's sweep, as PNG files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    for machine in sorted({r["machine"] for r in ds.runs.values()}):
        run = latest([r for r in ds.runs.values() if r["machine"] == machine], "sweep")
        if run is None:
            continue
        rows = ds.rows(run["run_id"])
        eager = {r["shape"]: r["median_ms"] for r in rows if r["path"] == REFERENCE_PEER}
        autos = [
            r
            for r in rows
            if r["path"] == "auto" and r["precision"] == "strict" and r["shape"] in eager
        ]
        fig, ax = plt.subplots(figsize=(10, 4))
        ax.bar([r["shape"] for r in autos], [eager[r["shape"]] / r["median_ms"] for r in autos])
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_ylabel("× eager PyTorch fp32 (strict auto)")
        ax.set_title(f"{NAMES.get(machine, machine)}: {run['run_id']}")
        ax.tick_params(axis="x", rotation=90)
        fig.tight_layout()
        fig.savefig(folder / f"{run['run_id']}.png", dpi=100)
        plt.close(fig)
        print(f"tuning.results: wrote {folder / (run['run_id'] + '.png')}")


def main(argv=None):
    p = argparse.ArgumentParser(description="perf/RESULTS.md from perf/data/")
    p.add_argument("--check", action="store_true", help="fail with a diff if the page is stale")
    p.add_argument(
        "--plots",
        type=Path,
        default=None,
        metavar="DIR",
        help="also draw each machine's sweep into DIR (matplotlib)",
    )
    data.add_argument(p)
    p.add_argument("--out", type=Path, default=RESULTS_MD, help="the page (perf/RESULTS.md)")
    args = p.parse_args(argv)
    try:
        ds = data.Dataset(args.data)
        text = render(ds)
    except data.DataError as e:
        print(f"tuning.results: {e}", file=sys.stderr)
        return 1
    old = args.out.read_text() if args.out.exists() else ""
    if args.check:
        if old != text:
            sys.stdout.writelines(
                difflib.unified_diff(
                    old.splitlines(True),
                    text.splitlines(True),
                    f"{args.out} (committed)",
                    f"{args.out} (from {args.data})",
                )
            )
            print(
                f"tuning.results: {args.out} is stale; run `PYTHONPATH=perf python3 -m "
                "tuning.results`",
                file=sys.stderr,
            )
            return 1
        print(f"tuning.results: {args.out} matches {args.data}")
    elif old != text:
        args.out.write_text(text)
        print(f"tuning.results: wrote {args.out} ({text.count(chr(10))} lines)")
    if args.plots:
        plot(ds, args.plots)
    return 0


if __name__ == "__main__":
    sys.exit(main())
