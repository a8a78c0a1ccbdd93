#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes perf/RESULTS.md from the runs kept in perf/results/.

Each run is a CSV written by perf/compare.py (compare.csv) beside its metadata
(<name>.meta.json, compare.py's compare-meta.json) and, where there is one, its plot
(<name>.png). RESULTS.md shows the newest run of each machine in full (configuration, auto
against the best path, every path and peer per shape) and lists the older runs, one line each.
The output depends only on those files: the same files give the same RESULTS.md.

    python3 perf/make_results.py                 # rewrite perf/RESULTS.md
    python3 perf/make_results.py --check         # exit 1 if perf/RESULTS.md is stale (CI)
    python3 perf/make_results.py --add perf_results    # keep a compare.py output folder as a
                                                       # new run in perf/results/, then rewrite
"""
import argparse
import csv
import json
import re
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import compare  # noqa: E402  (the summary and the path names are compare.py's)

RESULTS_DIR = HERE / "results"
RESULTS_MD = HERE / "RESULTS.md"
NUMBERS = ("median_ms", "min_ms", "tflops", "vs_reference", "rel_err", "max_abs_err")


# ------------------------------------------------------------------------- runs

class Run:
    def __init__(self, csv_path):
        self.csv = csv_path
        self.name = csv_path.stem
        meta_path = csv_path.with_name(self.name + ".meta.json")
        self.meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        self.plot = csv_path.with_suffix(".png") if csv_path.with_suffix(".png").exists() else None
        m = re.search(r"-(\d+)$", self.name)
        self.sequence = self.meta.get("sequence") or (int(m[1]) if m else 1)
        date = re.search(r"\d{4}-\d{2}-\d{2}", self.name)
        self.date = self.meta.get("date") or (date[0] if date else "")
        machine = self.meta.get("machine") or {}
        self.machine = machine.get("name") or "unknown machine"
        self.kind = machine.get("kind") or ("gpu" if self.meta.get("device") == "cuda" else "cpu")

    def sort_key(self):
        return (self.date, self.sequence, self.name)

    def rows(self):
        with self.csv.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        for r in rows:
            for key in NUMBERS:
                value = r.get(key)
                r[key] = float(value) if value not in (None, "") else None
            compare.describe_path(r)
        return rows


def load_runs():
    return [Run(p) for p in sorted(RESULTS_DIR.glob("*.csv"))]


# ------------------------------------------------------------------------- markdown

def cell(value, spec, suffix=""):
    return "-" if value is None else format(value, spec) + suffix


def md_table(head, body, right):
    """A Markdown table; `right`: indices of numeric columns."""
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---:" if i in right else "---" for i in range(len(head))) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body]
    return "\n".join(lines)


def configuration(run):
    m = run.meta
    items = []
    if m.get("command"):
        items.append(("command", f"`{m['command']}`"))
    machine = m.get("machine") or {}
    desc = machine.get("details") or ", ".join(
        g for g in (machine.get("gpus") or []) if g) or machine.get("name")
    if machine.get("kind") == "cpu" or run.kind == "cpu":
        desc = f"{machine.get('cpu') or machine.get('name')}, {machine.get('cores')} cores"
        if m.get("threads"):
            desc += f", {m['threads']} threads"
    items.append(("machine", desc or "-"))
    k = m.get("kokkos") or {}
    if k:
        kokkos = f"Kokkos {k.get('kokkos_version') or '?'}, execution space {k.get('execution_space') or '?'}"
        if k.get("concurrency"):
            kokkos += f", concurrency {k['concurrency']}"
        if m.get("fused_linear_version"):
            kokkos = f"FusedLinear {m['fused_linear_version']}; " + kokkos
        items.append(("configuration", kokkos))
    t = m.get("torch") or {}
    if t:
        torch = f"torch {t.get('torch_version')}"
        if t.get("cuda"):
            torch += f" (CUDA {t['cuda']})"
        if t.get("threads"):
            torch += f", {t['threads']} threads"
        if t.get("blas_loaded"):
            torch += f", BLAS {', '.join(t['blas_loaded'])}"
        items.append(("peers", torch))
    if m.get("host_blas"):
        items.append(("host BLAS (perf program)", ", ".join(m["host_blas"])))
    timing = m.get("timing") or {}
    for who in ("ours", "peers"):
        t = timing.get(who)
        if t:
            reps = t.get("reps")
            reps = "/".join(str(r) for r in reps) if isinstance(reps, list) else reps
            text = f"{reps} timed calls per path, {t.get('order')}"
            if t.get("timing"):
                text += f"; {t['timing']}"
            items.append((f"timing ({'FusedLinear' if who == 'ours' else 'peers'})", text))
    if m.get("check"):
        items.append(("check", m["check"]))
    commit = m.get("git_commit")
    if commit:
        items.append(("commit", f"`{commit}`" + (" (uncommitted changes)" if m.get("git_dirty") else "")))
    else:
        items.append(("commit", "not recorded"))
    if m.get("notes"):
        items.append(("notes", m["notes"]))
    if m.get("problems"):
        items.append(("problems", "; ".join(m["problems"])))
    return md_table(["", ""], [[k, v] for k, v in items], set())


def summary_section(summary):
    # Runs with `--planning both` have a measured auto beside the estimated one: a column says
    # which (older runs: estimate only, no column).
    planned = any((s.get("planning") or "estimate") != "estimate" for s in summary)
    precision = (lambda s: s["precision"] + (" measured" if s.get("planning") == "measure"
                                             else "")) if planned else (lambda s: s["precision"])
    body = [[s["shape"], precision(s), s["auto_ran"] or "-", cell(s["auto_ms"], ".4f"),
             s["best_path"] or "-", cell(s["best_ms"], ".4f"),
             compare.pct(s["auto_vs_best_pct"]), cell(s["auto_vs_reference"], ".2f", "x"),
             cell(s["vs_strict_auto"], ".2f", "x"), s["flags"] or ""] for s in summary]
    head = ["shape", "precision", "auto ran", "auto ms", "best other path", "best ms",
            "auto vs best", "vs ref", "vs strict auto", "flags"]
    lines = [md_table(head, body, {3, 5, 6, 7, 8}), ""]
    lines += [f"- {line}" for line in compare.summary_lines(summary)]
    return "\n".join(lines)


def path_label(r):
    if r.get("source") != "FusedLinear":
        return r["path"]
    label = f"`{r['algorithm']}`"
    if r.get("ran") and r["ran"] != r["algorithm"]:
        label += f" → `{r['ran']}`"
    return label


def shape_section(shape, rows):
    body = []
    for r in rows:
        ours = r.get("source") == "FusedLinear"
        body.append([path_label(r), r.get("precision", "") if ours else "",
                     (r.get("gemm") or "") if ours else "PyTorch",
                     cell(r["median_ms"], ".4f"), cell(r["min_ms"], ".4f"),
                     cell(r["tflops"], ".3g"), cell(r["vs_reference"], ".2f", "x"),
                     cell(r["rel_err"], ".2e"), cell(r["max_abs_err"], ".2e")])
    head = ["path", "precision", "computed by", "median ms", "min ms", "TFLOP/s", "vs ref",
            "rel err", "max abs err"]
    return f"#### {shape}\n\n" + md_table(head, body, {3, 4, 5, 6, 7, 8})


def run_section(run):
    rows = run.rows()
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    summary = compare.summarize(rows, shapes)
    title = run.machine if run.kind == "gpu" else f"Host: {run.machine}"
    out = [f"## {title}", "",
           f"Newest run: {run.date[:10]}, [`results/{run.csv.name}`](results/{run.csv.name})"
           + (f", plot [`results/{run.plot.name}`](results/{run.plot.name})" if run.plot else "")
           + ".", "", configuration(run), ""]
    if run.plot:
        out += [f"![TFLOP/s of every path per shape]({'results/' + run.plot.name})", ""]
    out += ["### auto against the best path", "",
            "Per shape and precision: `auto`'s median against the fastest of our other paths "
            "in the same precision (positive: auto is slower), against the eager reference, and "
            "against strict `auto`. Flagged: auto more than "
            f"{compare.AUTO_SLACK:.0%} behind the best path, auto slower than the eager "
            "reference, 3xtf32 auto slower than strict auto (unless it ran strict auto's kernel, "
            "the floor: the two medians then differ only by their runs' context, e.g. what the "
            "other paths of each run left in L2).", "",
            summary_section(summary) if summary else "No `auto` rows in this run.", "",
            "### Every path and peer, per shape", ""]
    for shape in shapes:
        out += [shape_section(shape, [r for r in rows if r["shape"] == shape]), ""]
    return "\n".join(out)


METHOD = """\
## Method

- **One job, one device.** `perf/compare.py` runs the perf program (`fused_linear_perf`) once
  per shape and precision, then `perf/torch_peers.py` once for all shapes, on the same GPU (or
  the same host threads) in the same job, so both sides see the same clocks and load.
- **Timing.** Each path is first called once and checked, then warmed up (at least 5 calls and
  100 ms on GPUs), then timed in rounds: every round calls each path once, in a fresh random
  order, each call timed alone — between CUDA events on GPUs (as the peers), between fences with
  a host timer on the host. A row gives the median (the upper one, `times[n/2]`) and the
  minimum. The peers are timed the same way. Older runs that timed one path after the other
  say so in their configuration.
- **Accuracy.** Inputs are fresh per shape: X uniform [0, 1), W and b as `nn.Linear`
  initialises them (uniform ±1/√K). Errors are against a float64 reference:
  ‖Y − ref‖/‖ref‖ and max |Y − ref| (ours: all rows, or 256 evenly spaced rows when
  M·N·K > 2³³; Y is poisoned with NaN first, so an unwritten element fails the check). Bare
  products ("floor: …") have no errors: they are not the whole layer.
- **vs ref** is the median of PyTorch eager fp32 (`torch eager fp32 (reference model)`,
  `F.leaky_relu(F.linear(x, W, b) * multiplier, slope)`) over the row's median: above 1.00x is
  faster than the reference. TFLOP/s = 2·M·N·K / median.

Details, and how to run it on the GPU machine: [docs/measurement.md](../docs/measurement.md).
"""


def render(runs):
    by_machine = {}
    for run in runs:
        by_machine.setdefault((run.kind != "gpu", run.machine), []).append(run)
    current, older = [], []
    for key in sorted(by_machine):
        group = sorted(by_machine[key], key=Run.sort_key)
        current.append(group[-1])
        older += group[:-1]
    parts = ["# Results", "",
             "<!-- Generated by perf/make_results.py from perf/results/; edit those files or the "
             "generator, not this file. -->", "",
             "The newest run of each machine, from the CSV and metadata files in "
             "[`results/`](results/). `python3 perf/make_results.py` rewrites this file; "
             "`--check` fails when it is stale. What the kernels do: "
             "[docs/design/](../docs/design/); the precision modes: "
             "[docs/precision.md](../docs/precision.md); what was tried and not kept: "
             "[docs/design/experiments.md](../docs/design/experiments.md).", "",
             "Machines: " + ", ".join(f"[{r.machine if r.kind == 'gpu' else 'Host: ' + r.machine}]"
                                      f"(#{anchor(r)})" for r in current) + ".", "",
             METHOD]
    for run in current:
        parts.append(run_section(run))
    parts += ["## Older runs", ""]
    if older:
        for run in sorted(older, key=lambda r: (r.machine, r.sort_key()), reverse=True):
            line = f"- [`results/{run.csv.name}`](results/{run.csv.name}): {run.machine}, {run.date[:10]}"
            if run.meta.get("notes"):
                line += f" — {run.meta['notes']}"
            parts.append(line)
    else:
        parts.append("None.")
    return "\n".join(parts).rstrip() + "\n"


def anchor(run):
    title = run.machine if run.kind == "gpu" else f"Host: {run.machine}"
    slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
    return slug


# ------------------------------------------------------------------------- --add

def slug(text):
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def add_run(folder, name=None):
    """Copies a compare.py output folder into perf/results/ as <machine>-<date>[-n]; returns
    the CSV's path."""
    folder = Path(folder)
    meta = json.loads((folder / "compare-meta.json").read_text())
    if not name:
        machine = meta.get("machine") or {}
        if machine.get("kind") == "gpu":
            base = slug(re.sub(r"(?i)^nvidia\s+", "", machine.get("name") or "gpu"))
        else:
            cpu = re.sub(r"\((R|TM)\)|\bCPU\b|\bProcessor\b", "", machine.get("cpu") or "cpu")
            base = f"host-{slug(cpu)}-{machine.get('cores')}c"
        stem = f"{base}-{meta['date'][:10]}"
        taken = [int(m[1] or 1) for p in RESULTS_DIR.glob(f"{stem}*.csv")
                 if (m := re.fullmatch(re.escape(stem) + r"(?:-(\d+))?", p.stem))]
        name = stem if not taken else f"{stem}-{max(taken) + 1}"
    if (RESULTS_DIR / f"{name}.csv").exists():
        raise SystemExit(f"make_results.py: results/{name}.csv exists already")
    suffix = re.search(r"-(\d+)$", name)
    meta.setdefault("sequence", int(suffix[1]) if suffix else 1)  # orders runs of one day
    shutil.copyfile(folder / "compare.csv", RESULTS_DIR / f"{name}.csv")
    (RESULTS_DIR / f"{name}.meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    if (folder / "compare.png").exists():
        shutil.copyfile(folder / "compare.png", RESULTS_DIR / f"{name}.png")
    return RESULTS_DIR / f"{name}.csv"


def shown(path):
    try:
        return path.relative_to(HERE.parent)
    except ValueError:
        return path


def main(argv=None):
    p = argparse.ArgumentParser(description="Writes perf/RESULTS.md from the runs kept in "
                                "perf/results/.")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 if perf/RESULTS.md differs from what it would be")
    p.add_argument("--add", metavar="DIR",
                   help="first copy compare.py's output folder DIR into perf/results/")
    p.add_argument("--name", help="with --add: the run's file name (default: <machine>-<date>[-n])")
    args = p.parse_args(argv)
    if args.check and args.add:
        p.error("--check writes nothing: not with --add")
    if args.add:
        added = add_run(args.add, args.name)
        print(f"make_results.py: added {shown(added)}")
    text = render(load_runs())
    if args.check:
        current = RESULTS_MD.read_text() if RESULTS_MD.exists() else ""
        if current != text:
            print("perf/RESULTS.md is stale: run python3 perf/make_results.py", file=sys.stderr)
            return 1
        print("perf/RESULTS.md is up to date")
        return 0
    RESULTS_MD.write_text(text)
    print(f"make_results.py: wrote {shown(RESULTS_MD)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
