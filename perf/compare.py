#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""FusedLinear against PyTorch, shape by shape: one table, CSV, JSON and a roofline plot.

Runs the perf program (fused_linear_perf --json) once per shape and the PyTorch peers script
(torch_peers.py) once with all shapes, on the same GPU in the same job, then puts every path of
ours and every peer in one table with its speed relative to the reference model (PyTorch eager
fp32) of the same shape. Python standard library only; the plot needs matplotlib and is skipped
without it.

    python3 perf/compare.py --sweep
    python3 perf/compare.py 1024x8192x8192 16x8192x8192 --perf-args "--reps 50"
    python3 perf/compare.py --sweep --no-run     # re-tabulate the JSON already in --out

The raw outputs stay in --out beside the results: ours_<shape>.json and peers.json.
"""
import argparse
import csv
import json
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The four regimes, the crossovers auto's rule is drawn from (M = 1..64 at 8192^2, small
# layers around N K = 2^21), other square/rectangular shapes, and the K = 65536 stress shape.
SWEEP = ["1024x8192x8192", "4096x4096x4096", "128x1024x512", "16x8192x8192", "1x8192x8192",
         "4x8192x8192", "8x8192x8192", "32x8192x8192", "64x8192x8192", "64x1024x1024",
         "256x1024x1024", "128x4096x1024", "256x4096x4096", "2048x2048x2048", "256x65536x1024"]
REFERENCE_PEER = "torch eager fp32 (reference model)"
SCALAR_BYTES = 4  # fp32: what the perf program and the fp32 peers measure
COLUMNS = ["shape", "source", "path", "median_ms", "min_ms", "tflops", "vs_reference",
           "rel_err", "max_abs_err", "gemm", "unwritten", "note"]


def log(message):
    print(f"[compare] {message}", flush=True)


def parse_shape(text):
    """'MxKxN' -> (M, K, N), positive integers."""
    try:
        dims = tuple(int(v) for v in text.lower().split("x"))
    except ValueError:
        dims = ()
    if len(dims) != 3 or min(dims) < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a shape MxKxN of positive integers")
    return dims


def shape_arg(text):
    """Validates a command-line shape and spells it as the perf program and the peers do."""
    return "x".join(str(d) for d in parse_shape(text))


def intensity(shape):
    """FLOP per byte of the minimum traffic: read X, W, b once, write Y once."""
    M, K, N = parse_shape(shape)
    return 2.0 * M * N * K / (SCALAR_BYTES * (M * K + N * K + N + M * N))


# ------------------------------------------------------------------------- running and loading

def ours_json(out_dir, shape, precision="strict"):
    return out_dir / (f"ours_{shape}.json" if precision == "strict" else f"ours_{shape}_{precision}.json")


def run_ours(args, shape, out_dir, precision="strict"):
    """One perf-program run for one shape; returns its exit status. The tf32 and 3xtf32 runs
    time the paths that have them: vendor and vendor_lt, and for 3xtf32 auto too (the fused
    Hopper kernel where there is one)."""
    M, K, N = parse_shape(shape)
    paths = {"tf32": "vendor,vendor_lt", "3xtf32": "auto,vendor,vendor_lt"}
    mode = [] if precision == "strict" else ["--precision", precision, "--algorithm", paths[precision]]
    cmd = [str(args.perf), "--m", str(M), "--k", str(K), "--n", str(N),
           "--multiplier", str(args.mult), "--slope", str(args.slope),
           "--json", str(ours_json(out_dir, shape, precision))] + shlex.split(args.perf_args) + mode
    log(f"$ {shlex.join(cmd)}")
    return subprocess.run(cmd).returncode


def run_peers(args, shapes, out_dir):
    """One torch_peers.py run for all shapes (one process: CUDA and torch start once)."""
    cmd = [sys.executable, str(args.peers), "--mult", str(args.mult), "--slope", str(args.slope),
           "--json", str(out_dir / "peers.json")] + shlex.split(args.peers_args) + shapes
    log(f"$ {shlex.join(cmd)}")
    return subprocess.run(cmd).returncode


def load_ours(path):
    """Rows of one perf-program JSON file: one per algorithm requested."""
    rows = []
    data = json.loads(path.read_text())
    precision = data.get("config", {}).get("precision", "strict")
    for r in data["results"]:
        name = f"FusedLinear {r['algorithm_requested']}"
        if r["algorithm_ran"] != r["algorithm_requested"]:
            name += f" -> {r['algorithm_ran']}"
        if precision != "strict":
            name += f" {precision}"
        rows.append(dict(shape=r["shape"], source="FusedLinear", path=f"{name} [{r['gemm']}]",
                         median_ms=r["median_ms"], min_ms=r["min_ms"],
                         tflops=None if r["gflops"] is None else r["gflops"] / 1e3,
                         rel_err=r["rel_err"], max_abs_err=r["max_abs_err"], gemm=r["gemm"],
                         unwritten=r["unwritten"], note=r["note"]))
    return rows


def load_peers(path):
    """Rows of torch_peers.py's JSON (a list; bare products have no errors)."""
    return [dict(shape=r["shape"], source="torch", path=r["peer"], median_ms=r["median_ms"],
                 min_ms=r["min_ms"], tflops=r["tflops"], rel_err=r["rel_err"],
                 max_abs_err=r["max_abs_err"])
            for r in json.loads(path.read_text())]


def collect(args, shapes, out_dir):
    """Runs (unless --no-run) and loads everything; returns (rows, problems)."""
    rows, problems = [], []
    precisions = ["strict"] + (["tf32", "3xtf32"] if args.tf32 else [])
    for i, shape in enumerate(shapes, 1):
        for precision in precisions:
            path = ours_json(out_dir, shape, precision)
            if not args.no_run:
                log(f"{i}/{len(shapes)} {shape}: FusedLinear perf program ({precision})")
                path.unlink(missing_ok=True)  # never tabulate a stale file from an earlier run
                rc = run_ours(args, shape, out_dir, precision)
                if rc != 0:
                    problems.append(f"{shape}: the perf program ({precision}) exited with {rc}")
            if path.exists():
                rows += load_ours(path)
            else:
                problems.append(f"{shape}: no {path}")
    if args.peers is None:
        return rows, problems
    path = out_dir / "peers.json"
    if not args.no_run:
        log(f"PyTorch peers, all shapes at once: {args.peers}")
        path.unlink(missing_ok=True)
        rc = run_peers(args, shapes, out_dir)
        if rc != 0:
            problems.append(f"the peers script exited with {rc}")
    if path.exists():
        wanted = set(shapes)
        rows += [r for r in load_peers(path) if r["shape"] in wanted]
    else:
        problems.append(f"no {path}")
    return rows, problems


# ------------------------------------------------------------------------- results

def arrange(rows, shapes):
    """Groups rows by shape in the order asked (ours first, as loaded) and adds vs_reference:
    the reference model's median over the row's (> 1: faster than PyTorch eager fp32)."""
    out = []
    for shape in shapes:
        group = [r for r in rows if r["shape"] == shape]
        ref = next((r["median_ms"] for r in group if r["path"] == REFERENCE_PEER), None)
        for r in group:
            r["vs_reference"] = ref / r["median_ms"] if ref and r["median_ms"] else None
        out += group
    return out


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def table(rows):
    """The human table, columns sized to their content."""
    head = ["shape", "path", "median ms", "TFLOP/s", "vs ref", "rel err", "max abs err"]
    body = [[r["shape"], r["path"], fmt(r["median_ms"], ".4f"), fmt(r["tflops"], ".3g"),
             fmt(r["vs_reference"], ".2f") + ("x" if r["vs_reference"] else ""),
             fmt(r["rel_err"], ".2e"), fmt(r["max_abs_err"], ".2e")] for r in rows]
    widths = [max(len(line[c]) for line in [head] + body) for c in range(len(head))]
    left = {0, 1}  # text columns; numbers align right

    def line(cells):
        return "  ".join(c.ljust(w) if i in left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    lines = [line(head), line(["-" * w for w in widths])]
    previous = None
    for cells in body:
        if previous is not None and cells[0] != previous:
            lines.append("")  # a blank line between shapes
        previous = cells[0]
        lines.append(line(cells))
    return "\n".join(lines)


def write_csv(rows, path):
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS, restval="", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def write_json(rows, path, args):
    meta = dict(multiplier=args.mult, slope=args.slope, peak_tflops=args.peak_tflops,
                bandwidth_tbs=args.bandwidth_tbs, reference_peer=REFERENCE_PEER)
    path.write_text(json.dumps(dict(config=meta, rows=rows), indent=1) + "\n")


def plot(rows, shapes, path, peak_tflops, bandwidth_tbs):
    """TFLOP/s of every path per shape, shapes ordered by arithmetic intensity; the fp32 peak as
    a line and each shape's roofline bound min(peak, bandwidth x intensity) as a marker."""
    try:
        import matplotlib
        matplotlib.use("Agg")  # no display on the GPU machines
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is not installed: no plot (re-run with --no-run where it is)")
        return False
    order = sorted(shapes, key=intensity)
    x = {shape: i for i, shape in enumerate(order)}
    fig, ax = plt.subplots(figsize=(max(8, 1.4 * len(order) + 4), 6))
    series = {}
    for r in rows:
        if r["tflops"] is not None:
            series.setdefault(r["path"], []).append((x[r["shape"]], r["tflops"]))
    markers = "os^vD<>pPhX*"
    for i, (name, points) in enumerate(series.items()):
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker=markers[i % len(markers)],
                linestyle="-" if name.startswith("FusedLinear") else ":", linewidth=1, label=name)
    ax.axhline(peak_tflops, color="black", linestyle="--", linewidth=1,
               label=f"fp32 peak {peak_tflops:g} TFLOP/s")
    ax.scatter(range(len(order)),
               [min(peak_tflops, bandwidth_tbs * intensity(s)) for s in order],
               marker="_", s=600, linewidths=2.5, color="black", zorder=3,
               label=f"roofline: min(peak, {bandwidth_tbs:g} TB/s x intensity)")
    ax.set_xticks(range(len(order)))
    ax.set_xticklabels([f"{s}\n{intensity(s):.3g} FLOP/B" for s in order], fontsize=8)
    ax.set_yscale("log")
    ax.set_xlabel("shape MxKxN and arithmetic intensity (fp32, minimum traffic)")
    ax.set_ylabel("TFLOP/s (2MNK / median time)")
    ax.set_title("Y = LeakyReLU(multiplier * (X W^T + b), slope)")
    ax.grid(True, which="both", axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


# ------------------------------------------------------------------------- main

def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("shapes", nargs="*", type=shape_arg,
                   help="shapes MxKxN (nn.Linear: X [M,K], W [N,K])")
    p.add_argument("--sweep", action="store_true", help="add the default sweep: " + " ".join(SWEEP))
    p.add_argument("--perf", type=Path, default=REPO / "build/cuda/perf/fused_linear_perf",
                   help="the perf program (default: %(default)s)")
    p.add_argument("--peers", type=Path, default=REPO.parent / "shared/peers/torch_peers.py",
                   help="the PyTorch peers script (default: %(default)s)")
    p.add_argument("--no-peers", dest="peers", action="store_const", const=None,
                   help="run no peers (no vs-ref column)")
    p.add_argument("--perf-args", default="", help="more arguments for the perf program, e.g. "
                   "\"--reps 50\"")
    p.add_argument("--peers-args", default="", help="more arguments for the peers script, e.g. "
                   "\"--compile none\"")
    p.add_argument("--mult", type=float, default=2.0, help="multiplier (default 2.0)")
    p.add_argument("--slope", type=float, default=0.1, help="LeakyReLU slope (default 0.1)")
    p.add_argument("--tf32", action="store_true",
                   help="also time the vendor paths in the tf32 and 3xtf32 precisions (CUDA builds)")
    p.add_argument("--out", type=Path, default=Path("perf_results"),
                   help="output folder (default: %(default)s)")
    p.add_argument("--peak-tflops", type=float, default=67.0,
                   help="fp32 peak for the plot (default 67, the H100/H200 SXM's)")
    p.add_argument("--bandwidth-tbs", type=float, default=4.3,
                   help="memory bandwidth for the plot's roofline (default 4.3, measured on H200)")
    p.add_argument("--no-run", action="store_true",
                   help="run nothing: tabulate and plot the JSON already in --out")
    args = p.parse_args()

    shapes = list(dict.fromkeys(args.shapes + (SWEEP if args.sweep else [])))  # dedup, in order
    if not shapes:
        p.error("give shapes MxKxN or --sweep")
    if not args.no_run:
        for what, path in (("--perf", args.perf), ("--peers", args.peers)):
            if path is not None and not path.is_file():
                p.error(f"{what} {path}: no such file (--no-peers runs without peers)")
    args.out.mkdir(parents=True, exist_ok=True)

    rows, problems = collect(args, shapes, args.out)
    rows = arrange(rows, shapes)
    print(flush=True)
    print(table(rows), flush=True)
    for r in rows:
        if r.get("note"):  # a path that ran otherwise than asked says why
            log(f"note: {r['shape']} {r['path']}: {r['note']}")
    write_csv(rows, args.out / "compare.csv")
    write_json(rows, args.out / "compare.json", args)
    written = ["compare.csv", "compare.json"]
    if plot(rows, shapes, args.out / "compare.png", args.peak_tflops, args.bandwidth_tbs):
        written.append("compare.png")
    log(f"wrote {', '.join(str(args.out / w) for w in written)}")
    for problem in problems:
        log(f"problem: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
