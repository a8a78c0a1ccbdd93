#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""FusedLinear against PyTorch, shape by shape: one table, a summary, CSV, JSON, metadata and a
roofline plot.

Runs the perf program (fused_linear_perf --json) once per shape and precision and the PyTorch
peers script (torch_peers.py, beside this file) once with all shapes, on the same device in the
same job, then puts every path of ours and every peer in one table with its speed relative to
the reference model (PyTorch eager fp32) of the same shape, and checks auto's choices (auto
against the best of our paths, 3xtf32 against strict, auto against the reference). Python
standard library only; the plot needs matplotlib and is skipped without it.

    python3 perf/compare.py --sweep                     # GPU: the gpu sweep
    python3 perf/compare.py 1024x8192x8192 16x8192x8192 --perf-args "--reps 50"
    python3 perf/compare.py --device cpu --threads 2 --sweep     # the host sweep on 2 threads
    python3 perf/compare.py --sweep --no-run            # re-tabulate the JSON already in --out
    python3 perf/compare.py --sweep --tf32 --planning both   # auto by the rule and measured

`--planning measure` makes every plan with Planning::Measure; `--planning both` times every path
as estimated plus auto measured, in the same rounds of one perf-program run, and the summary
has a row for each (auto's planning in the `planning` column, plan-making time in `plan_ms`).

The raw outputs stay in --out beside the results: ours_<shape>[_<precision>].json,
peers.json and peers-meta.json; the results are compare.csv, compare-summary.csv,
compare.json, compare-meta.json, compare.png and run.csv, the run in the schema of perf/data/
(`PYTHONPATH=perf python3 -m tuning.data add OUT --run-id ID --machine NAME` adds it there).
"""
import argparse
import csv
import datetime
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from perf_common import BLAS_THREAD_VARIABLES, REFERENCE_PEER, parse_shape, shape_arg
from tuning import data  # the dataset's schema (perf/tuning/, beside this file)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

# Named sweeps. `--sweep` alone takes the device's default (gpu on cuda, host on cpu).
SWEEPS = {
    "gpu": [
        # The four regimes auto's rule is drawn from and the crossovers (M = 1..64 at 8192^2,
        # small layers around N K = 2^21), square/rectangular shapes, the K = 65536 stress shape.
        "1024x8192x8192", "4096x4096x4096", "128x1024x512", "16x8192x8192", "1x8192x8192",
        "4x8192x8192", "8x8192x8192", "32x8192x8192", "48x8192x8192", "64x8192x8192",
        "64x1024x1024",
        "256x1024x1024", "128x4096x1024", "256x4096x4096", "2048x2048x2048", "256x65536x1024",
        # short K
        "8192x64x8192", "8192x128x8192", "4096x256x4096", "2048x512x8192",
        # long K
        "64x32768x4096",
        # odd, not powers of two (1000x4099x3001: N odd, K not a multiple of 4)
        "1000x4099x3001", "517x1023x2049", "3000x3000x3000",
        # LM-head-like
        "16x4096x50257", "128x4096x50257",
        # few rows
        "2x8192x8192", "1x4096x4096", "16x4096x4096",
    ],
    "host": [
        # Sized for a 2-core machine: few rows, small, square, large, short K, long K.
        "1x4096x4096", "16x4096x4096", "128x1024x512", "64x1024x1024", "512x512x512",
        "1024x1024x1024", "512x4096x4096", "4096x64x4096", "2048x128x2048", "64x16384x1024",
    ],
}
DEFAULT_SWEEP = {"cuda": "gpu", "cpu": "host"}

# The paths the perf program times, per device and precision (its --algorithm list; None: the
# perf program's own default). A path the perf program refuses for a shape is reported by it;
# the others are still written.
PATHS = {
    "cuda": {"strict": "auto,vendor,vendor_prefill,vendor_lt,fused,fused_skinny,skinny_sm90",
             "tf32": "vendor,vendor_lt",
             "3xtf32": "auto,vendor,vendor_lt,fused_sm90"},
    "cpu": {"strict": "auto,vendor,vendor_prefill,fused,fused_skinny"},
}
# Prepended to --perf-args on the host (a later option of the same name wins): a 2-core host
# needs fewer calls than a GPU for a stable median, and the host sweep must finish in minutes.
HOST_PERF_ARGS = ["--reps", "10", "--warmup", "2"]
# Plot defaults. H200: fp32 peak of the H100/H200 SXM, bandwidth measured on the H200. Host:
# rough, not measured: 2 cores x 2.3 GHz x 64 fp32 FLOP per cycle (two AVX-512 FMA units) and
# a typical VM's share of memory bandwidth; pass the real values with the flags.
PLOT_DEFAULTS = {"cuda": (67.0, 4.3), "cpu": (0.3, 0.02)}

SCALAR_BYTES = 4  # fp32: what the perf program and the fp32 peers measure
COLUMNS = ["shape", "source", "path", "median_ms", "min_ms", "tflops", "vs_reference",
           "rel_err", "max_abs_err", "gemm", "unwritten", "note",
           "precision", "algorithm", "ran", "planning", "plan_ms", "flags"]
SUMMARY_COLUMNS = ["shape", "precision", "planning", "auto_plan_ms", "auto_ran", "auto_ms",
                   "best_path", "best_ms",
                   "auto_vs_best_pct", "reference_ms", "auto_vs_reference", "strict_auto_ms",
                   "vs_strict_auto", "flags"]
AUTO_SLACK = 0.05  # auto may be this much slower than the best path before it is flagged


def log(message):
    print(f"[compare] {message}", flush=True)


def intensity(shape):
    """FLOP per byte of the minimum traffic: read X, W, b once, write Y once."""
    M, K, N = parse_shape(shape)
    return 2.0 * M * N * K / (SCALAR_BYTES * (M * K + N * K + N + M * N))


PATH_NAME = re.compile(r"^FusedLinear (?P<algorithm>\S+)(?: -> (?P<ran>\S+))?"
                       r"(?: (?P<precision>tf32|3xtf32))?(?: \[.*\])?$")


def describe_path(row):
    """Fills precision, algorithm and ran of one of our rows from its name where they are
    missing (CSV files written before those columns existed)."""
    if row.get("source") != "FusedLinear":
        return row
    m = PATH_NAME.match(row.get("path", ""))
    if m:
        row["algorithm"] = row.get("algorithm") or m["algorithm"]
        row["ran"] = row.get("ran") or m["ran"] or m["algorithm"]
        row["precision"] = row.get("precision") or m["precision"] or "strict"
    return row


# ------------------------------------------------------------------------- running and loading

def ours_json(out_dir, shape, precision="strict"):
    return out_dir / (f"ours_{shape}.json" if precision == "strict" else f"ours_{shape}_{precision}.json")


def execute(cmd, env):
    """Runs a command, its output going to ours; its exit status, or 127 when it cannot start."""
    try:
        return subprocess.run(cmd, env=env).returncode
    except OSError as ex:
        log(f"cannot run {cmd[0]}: {ex}")
        return 127


def perf_command(args, shape, json_path, precision, paths):
    M, K, N = parse_shape(shape)
    mode = [] if precision == "strict" else ["--precision", precision]
    mode += [] if paths is None else ["--algorithm", paths]
    host = HOST_PERF_ARGS if args.device == "cpu" else []
    mode += [] if args.planning == "estimate" else ["--planning", args.planning]
    return ([str(args.perf), "--m", str(M), "--k", str(K), "--n", str(N),
             "--multiplier", str(args.mult), "--slope", str(args.slope),
             "--json", str(json_path)] + host + shlex.split(args.perf_args) + mode)


def run_ours(args, shape, out_dir, precision="strict"):
    """One perf-program run for one shape and precision; returns (exit status, problems). If
    the perf program rejects the command line (exit 2) without writing JSON, e.g. a path name it
    does not know, each path is run alone and the results that came back are merged."""
    target = ours_json(out_dir, shape, precision)
    paths = PATHS[args.device].get(precision)
    cmd = perf_command(args, shape, target, precision, paths)
    log(f"$ {shlex.join(cmd)}")
    rc = execute(cmd, args.env)
    if rc != 2 or target.exists() or paths is None or "," not in paths:
        return rc, []
    log(f"{shape} ({precision}): the perf program rejected the command line; "
        "running the paths one at a time")
    merged, status, problems = None, 0, []
    for path in paths.split(","):
        part = target.with_name(f"{target.stem}.{path}.json")
        cmd = perf_command(args, shape, part, precision, path)
        log(f"$ {shlex.join(cmd)}")
        rc = execute(cmd, args.env)
        if rc == 2:
            problems.append(f"{shape}: the perf program ({precision}) rejected path {path} (exit 2)")
        elif rc != 0:
            status = max(status, rc)
        if part.exists():
            loaded = json.loads(part.read_text())
            if merged is None:
                merged = loaded
            else:
                merged["results"] += loaded.get("results", [])
            part.unlink()
    if merged is not None:
        target.write_text(json.dumps(merged, indent=1) + "\n")
    return status, problems


def peers_supports_meta(path):
    try:
        return "--meta" in Path(path).read_text(errors="replace")
    except OSError:
        return False


def run_peers(args, shapes, out_dir):
    """One torch_peers.py run for all shapes (one process: torch and the device start once)."""
    cmd = [args.peers_python, str(args.peers), "--mult", str(args.mult), "--slope", str(args.slope),
           "--json", str(out_dir / "peers.json")]
    if peers_supports_meta(args.peers):
        cmd += ["--meta", str(out_dir / "peers-meta.json")]
    if args.device == "cpu":
        cmd += ["--device", "cpu", "--threads", str(args.threads)]
    cmd += shlex.split(args.peers_args) + shapes
    log(f"$ {shlex.join(cmd)}")
    return execute(cmd, args.env)


def load_ours(path):
    """Rows of one perf-program JSON file (one per algorithm requested), its config and its
    rows in the dataset's schema (tuning.data reads the file)."""
    rows = []
    config, results = data.parse_perf_json(path)
    precision = config["precision"]
    for r in results:
        requested = r.get("algorithm_requested", "?")
        ran = r["algorithm_ran"]
        planning = r["planning"]
        name = f"FusedLinear {requested}" + (":measure" if planning == "measure" else "")
        if ran != requested:
            name += f" -> {ran}"
        if precision != "strict":
            name += f" {precision}"
        gemm = r.get("gemm", "")
        gflops = r.get("gflops")
        note = r.get("note") or r.get("error") or ""
        rows.append(dict(shape=r["shape"], source="FusedLinear",
                         path=f"{name} [{gemm}]" if gemm else name,
                         median_ms=r.get("median_ms"), min_ms=r.get("min_ms"),
                         tflops=None if gflops is None else gflops / 1e3,
                         rel_err=r.get("rel_err"), max_abs_err=r.get("max_abs_err"), gemm=gemm,
                         unwritten=r.get("unwritten"), note=note, precision=precision,
                         algorithm=requested, ran=ran, planning=planning,
                         plan_ms=r.get("plan_ms")))
    dataset = [d for d in (data.ours_row(config, r) for r in results) if d]
    return rows, config, dataset


def load_peers(path):
    """Rows of torch_peers.py's JSON (a list; bare products have no errors)."""
    return [dict(shape=r["shape"], source="torch", path=r["peer"], median_ms=r["median_ms"],
                 min_ms=r["min_ms"], tflops=r["tflops"], rel_err=r["rel_err"],
                 max_abs_err=r["max_abs_err"])
            for r in json.loads(path.read_text())]


def precisions(args):
    return ["strict"] + (["tf32", "3xtf32"] if args.tf32 else [])


def collect(args, shapes, out_dir):
    """Runs (unless --no-run) and loads everything; returns (rows, perf configs, problems,
    the run's rows in the dataset's schema)."""
    rows, configs, problems, dataset = [], [], [], []
    for i, shape in enumerate(shapes, 1):
        for precision in precisions(args):
            path = ours_json(out_dir, shape, precision)
            if not args.no_run:
                log(f"{i}/{len(shapes)} {shape}: FusedLinear perf program ({precision})")
                path.unlink(missing_ok=True)  # never tabulate a stale file from an earlier run
                rc, rejected = run_ours(args, shape, out_dir, precision)
                problems += rejected
                if rc == 1:
                    problems.append(f"{shape}: the perf program ({precision}) exited with 1: a path "
                                    "failed its accuracy check or was refused (see its output)")
                elif rc != 0:
                    problems.append(f"{shape}: the perf program ({precision}) exited with {rc}")
            if path.exists():
                loaded, config, schema_rows = load_ours(path)
                rows += loaded
                configs.append(config)
                dataset += schema_rows
            else:
                problems.append(f"{shape}: no {path}")
    if args.peers is None:
        return rows, configs, problems, dataset
    path = out_dir / "peers.json"
    if not args.no_run:
        log(f"PyTorch peers, all shapes at once: {args.peers}")
        path.unlink(missing_ok=True)
        (out_dir / "peers-meta.json").unlink(missing_ok=True)
        rc = run_peers(args, shapes, out_dir)
        if rc != 0:
            problems.append(f"the peers script exited with {rc}")
    if path.exists():
        wanted = set(shapes)
        peers = [r for r in load_peers(path) if r["shape"] in wanted]
        rows += peers
        dataset += [d for d in (data.peer_row(dict(r, peer=r["path"])) for r in peers) if d]
    else:
        problems.append(f"no {path}")
    return rows, configs, problems, dataset


# ------------------------------------------------------------------------- results

def arrange(rows, shapes):
    """Groups rows by shape in the order asked (ours first, as loaded) and adds vs_reference:
    the reference model's median over the row's (> 1: faster than PyTorch eager fp32)."""
    out = []
    for shape in shapes:
        group = [describe_path(r) for r in rows if r["shape"] == shape]
        ref = next((r["median_ms"] for r in group if r["path"] == REFERENCE_PEER), None)
        for r in group:
            r["vs_reference"] = ref / r["median_ms"] if ref and r["median_ms"] else None
        out += group
    return out


def summarize(rows, shapes):
    """Per shape and precision with an auto row: auto against the fastest other path of ours
    in that precision, against the reference, and (3xtf32, tf32) against strict auto. Flags:
    auto more than AUTO_SLACK behind the best path, 3xtf32 auto slower than strict auto (unless
    it ran strict auto's kernel, the floor), auto slower than the reference. Adds each flag to its auto row's `flags` too."""
    out = []
    for shape in shapes:
        group = [r for r in rows if r["shape"] == shape]
        ref = next((r["median_ms"] for r in group if r["path"] == REFERENCE_PEER), None)
        ours = [r for r in group if r.get("source") == "FusedLinear" and r.get("median_ms")]
        autos = {(r["precision"], r.get("planning") or "estimate"): r
                 for r in ours if r.get("algorithm") == "auto"}
        for precision, planning in [(p, q) for p in ("strict", "tf32", "3xtf32")
                                    for q in ("estimate", "measure")]:
            auto = autos.get((precision, planning))
            if auto is None:
                continue
            # Auto of either planning is no "other path": the best other is an explicit one.
            others = [r for r in ours if r["precision"] == precision and r.get("algorithm") != "auto"]
            best = min(others, key=lambda r: r["median_ms"], default=None)
            s = dict(shape=shape, precision=precision, planning=planning,
                     auto_plan_ms=auto.get("plan_ms"), auto_ran=auto.get("ran"),
                     auto_ms=auto["median_ms"], best_path=None, best_ms=None,
                     auto_vs_best_pct=None, reference_ms=ref, auto_vs_reference=None,
                     strict_auto_ms=None, vs_strict_auto=None, flags="")
            flags = []
            if best is not None:
                s["best_path"] = best["algorithm"] + (f" -> {best['ran']}" if best["ran"] != best["algorithm"] else "")
                s["best_ms"] = best["median_ms"]
                s["auto_vs_best_pct"] = 100.0 * (auto["median_ms"] / best["median_ms"] - 1.0)
                if auto["median_ms"] > (1.0 + AUTO_SLACK) * best["median_ms"]:
                    flags.append(f"auto {s['auto_vs_best_pct']:.1f}% behind {s['best_path']}")
            if ref:
                s["auto_vs_reference"] = ref / auto["median_ms"]
                if auto["median_ms"] > ref:
                    flags.append("auto slower than the eager reference")
            strict = autos.get(("strict", planning))
            if precision != "strict" and strict is not None:
                s["strict_auto_ms"] = strict["median_ms"]
                s["vs_strict_auto"] = strict["median_ms"] / auto["median_ms"]
                # Under the floor both ran one strict kernel: a difference is the two runs'
                # context (their other paths, what they left in L2), not the choice.
                floor = (auto.get("ran") == strict.get("ran")
                         and "a floor: strict fp32" in (auto.get("note") or ""))
                if precision == "3xtf32" and auto["median_ms"] > strict["median_ms"] and not floor:
                    flags.append("3xtf32 auto slower than strict auto")
            s["flags"] = "; ".join(flags)
            auto["flags"] = s["flags"]
            out.append(s)
    return out


def fmt(value, spec):
    return "-" if value is None or value == "" else format(value, spec)


def pct(value):
    """A signed percentage, "+0.0%" rather than "-0.0%"."""
    if value is None:
        return "-"
    text = format(value, "+.1f")
    return ("+0.0" if text == "-0.0" else text) + "%"


def text_table(head, body, left):
    """Columns sized to their content; `left`: indices of text columns (numbers align right).
    A blank line wherever the first column changes."""
    widths = [max(len(line[c]) for line in [head] + body) for c in range(len(head))]

    def line(cells):
        return "  ".join(c.ljust(w) if i in left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    lines = [line(head), line(["-" * w for w in widths])]
    previous = None
    for cells in body:
        if previous is not None and cells[0] != previous:
            lines.append("")
        previous = cells[0]
        lines.append(line(cells))
    return "\n".join(lines)


def table(rows):
    """The human table of every row."""
    head = ["shape", "path", "median ms", "TFLOP/s", "vs ref", "rel err", "max abs err"]
    body = [[r["shape"], r["path"], fmt(r["median_ms"], ".4f"), fmt(r["tflops"], ".3g"),
             fmt(r["vs_reference"], ".2f") + ("x" if r["vs_reference"] else ""),
             fmt(r["rel_err"], ".2e"), fmt(r["max_abs_err"], ".2e")] for r in rows]
    return text_table(head, body, {0, 1})


def summary_table(summary):
    head = ["shape", "precision", "planning", "plan ms", "auto ->", "auto ms", "best other path",
            "best ms", "auto vs best", "vs ref", "vs strict auto", "flags"]
    body = [[s["shape"], s["precision"], s.get("planning") or "estimate",
             fmt(s.get("auto_plan_ms"), ".2f"), s["auto_ran"] or "-", fmt(s["auto_ms"], ".4f"),
             s["best_path"] or "-", fmt(s["best_ms"], ".4f"),
             pct(s["auto_vs_best_pct"]),
             fmt(s["auto_vs_reference"], ".2f") + ("x" if s["auto_vs_reference"] else ""),
             fmt(s["vs_strict_auto"], ".2f") + ("x" if s["vs_strict_auto"] else ""),
             s["flags"]] for s in summary]
    return text_table(head, body, {0, 1, 2, 4, 6, 11})


def summary_lines(summary):
    """One sentence per precision: how close auto is to the best path, and what is flagged."""
    lines = []
    for precision in ("strict", "tf32", "3xtf32"):
        for planning in ("estimate", "measure"):
            group = [s for s in summary if s["precision"] == precision
                     and (s.get("planning") or "estimate") == planning]
            gaps = [s["auto_vs_best_pct"] for s in group if s["auto_vs_best_pct"] is not None]
            if not group:
                continue
            flagged = sum(1 for s in group if s["flags"])
            worst = (f"auto within {max(0.0, max(gaps)):.1f}% of the best path" if gaps
                     else "no other path")
            label = precision if planning == "estimate" else f"{precision} (measured)"
            lines.append(f"{label}: {worst} on {len(group)} shape(s); {flagged} flagged")
    return lines


def write_csv(rows, path, columns):
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, restval="", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def write_json(rows, summary, path, args):
    meta = dict(multiplier=args.mult, slope=args.slope, device=args.device,
                peak_tflops=args.peak_tflops, bandwidth_tbs=args.bandwidth_tbs,
                reference_peer=REFERENCE_PEER, auto_slack=AUTO_SLACK)
    path.write_text(json.dumps(dict(config=meta, rows=rows, summary=summary), indent=1) + "\n")


# ------------------------------------------------------------------------- metadata

def quiet(cmd, env=None):
    """A command's stdout, or None when it cannot run."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=env)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def machine(args, peers_meta):
    """What ran it, without the host name: GPU model(s) or CPU model, and core count."""
    cpu = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = dict(kind="gpu" if args.device == "cuda" else "cpu", cpu=cpu, cores=os.cpu_count())
    if args.device == "cuda":
        smi = quiet(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                     "--format=csv,noheader"])
        gpus = [g.strip() for g in smi.splitlines() if g.strip()] if smi else []
        name = gpus[0].split(",")[0].strip() if gpus else (peers_meta or {}).get("gpu")
        info.update(name=name, gpus=gpus or None)
    else:
        info.update(name=f"{cpu or 'CPU'}, {os.cpu_count()} cores")
    return info


def host_blas(args):
    """The BLAS library the perf program loads (ldd, with this run's environment)."""
    out = quiet(["ldd", str(args.perf)], env=args.env) if args.perf else None
    libs = []
    for line in (out or "").splitlines():
        m = re.match(r"\s*(\S*(?:blas|lapack|blis|mkl)\S*)\s+=>\s+(\S+)", line)
        if m:
            libs.append(f"{m[1]} -> {os.path.realpath(m[2])}")
    return libs or None


def git_commit():
    commit = quiet(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
    if commit:
        dirty = quiet(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"])
        return commit, bool(dirty)
    return os.environ.get("FUSED_LINEAR_COMMIT") or None, None


def metadata(args, shapes, configs, problems, summary):
    peers_meta = None
    pm = args.out / "peers-meta.json"
    if args.peers is not None and pm.exists():
        peers_meta = json.loads(pm.read_text())
    first = configs[0] if configs else {}
    commit, dirty = git_commit()
    reps = sorted({c.get("reps") for c in configs if c.get("reps") is not None})
    return dict(
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        machine=machine(args, peers_meta),
        command=shlex.join([Path(sys.executable).name] + sys.argv),
        no_run=args.no_run, device=args.device,
        threads=args.threads if args.device == "cpu" else None,
        sweep=args.sweep_name, shapes=shapes, precisions=precisions(args),
        planning=args.planning,
        paths={p: PATHS[args.device].get(p) for p in precisions(args)},
        perf_args=(HOST_PERF_ARGS if args.device == "cpu" else []) + shlex.split(args.perf_args),
        peers_args=args.peers_args,
        kokkos={k: first.get(k) for k in ("kokkos_version", "execution_space", "memory_space",
                                          "concurrency")},
        fused_linear_version=first.get("fused_linear_version"),
        timing=dict(ours=dict(reps=reps, warmup=sorted({c.get("warmup") for c in configs
                                                         if c.get("warmup") is not None}),
                              order="random-order rounds"),
                    peers=None if peers_meta is None else
                    {k: peers_meta.get(k) for k in ("reps", "warmup", "order", "timing")}),
        torch=None if peers_meta is None else
        {k: peers_meta.get(k) for k in ("torch_version", "cuda", "threads", "blas_info",
                                        "blas_loaded")},
        host_blas=host_blas(args) if args.device == "cpu" and not args.no_run else None,
        env={k: args.env.get(k) for k in ("OMP_NUM_THREADS", "OMP_PROC_BIND", "LD_LIBRARY_PATH")
             + BLAS_THREAD_VARIABLES if args.env.get(k)} if args.device == "cpu" else None,
        git_commit=commit, git_dirty=dirty,
        multiplier=args.mult, slope=args.slope,
        flagged=sum(1 for s in summary if s["flags"]),
        problems=problems,
    )


# ------------------------------------------------------------------------- plot

def plot(rows, shapes, path, peak_tflops, bandwidth_tbs, rough):
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
    note = " (rough)" if rough else ""
    ax.axhline(peak_tflops, color="black", linestyle="--", linewidth=1,
               label=f"fp32 peak {peak_tflops:g} TFLOP/s{note}")
    ax.scatter(range(len(order)),
               [min(peak_tflops, bandwidth_tbs * intensity(s)) for s in order],
               marker="_", s=600, linewidths=2.5, color="black", zorder=3,
               label=f"roofline: min(peak, {bandwidth_tbs:g} TB/s x intensity){note}")
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

def parse_args(argv=None):
    p = argparse.ArgumentParser(description="FusedLinear against PyTorch, shape by shape, on one "
                                "device in one job (see the top of this file).")
    p.add_argument("shapes", nargs="*", type=shape_arg,
                   help="shapes MxKxN (nn.Linear: X [M,K], W [N,K])")
    p.add_argument("--sweep", nargs="?", const="default", metavar="NAME",
                   help="add a named sweep: " + ", ".join(f"{k} ({len(v)} shapes)" for k, v in SWEEPS.items())
                   + "; SWEEPS in this file lists them. Alone: the device's default, gpu on cuda, "
                   "host on cpu")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="cuda (default): the GPU; cpu: the host, our OpenMP build and PyTorch on "
                        "the CPU")
    p.add_argument("--threads", type=int, default=None,
                   help="host threads (--device cpu; default: all cores): OMP_NUM_THREADS and "
                        "the BLAS thread variables for both programs, --threads for the peers")
    p.add_argument("--blas-dir", type=Path, default=None,
                   help="host: a folder with the libblas.so.3 to use (prepended to "
                        "LD_LIBRARY_PATH for the perf program and the peers alike), e.g. "
                        "/usr/lib/x86_64-linux-gnu/openblas-pthread")
    p.add_argument("--perf", type=Path, default=None,
                   help="the perf program (default: build/cuda/perf/fused_linear_perf, or "
                        "build/host/perf/fused_linear_perf with --device cpu)")
    p.add_argument("--peers", type=Path, default=HERE / "torch_peers.py",
                   help="the PyTorch peers script (default: %(default)s)")
    p.add_argument("--no-peers", dest="peers", action="store_const", const=None,
                   help="run no peers (no vs-ref column)")
    p.add_argument("--peers-python", default=sys.executable,
                   help="the Python that has torch, for the peers (default: this one)")
    p.add_argument("--perf-args", default="", help="more arguments for the perf program, e.g. "
                   "\"--reps 50\"")
    p.add_argument("--peers-args", default="", help="more arguments for the peers script, e.g. "
                   "\"--compile none\"")
    p.add_argument("--mult", type=float, default=2.0, help="multiplier (default 2.0)")
    p.add_argument("--slope", type=float, default=0.1, help="LeakyReLU slope (default 0.1)")
    p.add_argument("--planning", choices=["estimate", "measure", "both"], default="estimate",
                   help="how the perf program's plans choose: estimate (default, auto's rule), "
                        "measure (Planning::Measure) or both (auto also measured, in the same "
                        "rounds)")
    p.add_argument("--tf32", action="store_true",
                   help="also time the tf32 and 3xtf32 precisions (CUDA builds)")
    p.add_argument("--out", type=Path, default=Path("perf_results"),
                   help="output folder (default: %(default)s)")
    p.add_argument("--peak-tflops", type=float, default=None,
                   help="fp32 peak for the plot (default: 67, the H100/H200 SXM's; host: 0.3, "
                        "rough)")
    p.add_argument("--bandwidth-tbs", type=float, default=None,
                   help="memory bandwidth for the plot's roofline (default: 4.3, measured on "
                        "the H200; host: 0.02, rough)")
    p.add_argument("--no-run", action="store_true",
                   help="run nothing: tabulate and plot the JSON already in --out")
    args = p.parse_args(argv)

    # `--sweep SHAPE ...`: the first shape was taken as the sweep's name.
    shapes = list(args.shapes)
    args.sweep_name = None
    if args.sweep is not None:
        name = args.sweep
        if name != "default" and name not in SWEEPS:
            try:
                shapes.insert(0, shape_arg(name))
            except argparse.ArgumentTypeError:
                p.error(f"--sweep {name}: not a sweep ({', '.join(SWEEPS)}) or a shape MxKxN")
            name = "default"
        args.sweep_name = DEFAULT_SWEEP[args.device] if name == "default" else name
        shapes += SWEEPS[args.sweep_name]
    args.shape_list = list(dict.fromkeys(shapes))  # dedup, in order
    if not args.shape_list:
        p.error("give shapes MxKxN or --sweep [NAME]")
    if args.device == "cpu" and args.tf32:
        p.error("--tf32 needs --device cuda (tf32 and 3xtf32 run on NVIDIA tensor cores)")
    if args.threads is not None and (args.device != "cpu" or args.threads < 1):
        p.error("--threads takes a positive count, with --device cpu")
    if args.device == "cpu" and args.threads is None:
        args.threads = os.cpu_count() or 1
    if args.perf is None:
        args.perf = REPO / ("build/host" if args.device == "cpu" else "build/cuda") / "perf/fused_linear_perf"
    peak, bandwidth = PLOT_DEFAULTS[args.device]
    args.rough_roofline = args.device == "cpu" and args.peak_tflops is None
    args.peak_tflops = peak if args.peak_tflops is None else args.peak_tflops
    args.bandwidth_tbs = bandwidth if args.bandwidth_tbs is None else args.bandwidth_tbs

    # The environment of both programs. Host: the same threads for our OpenMP kernels and for
    # whichever BLAS libblas.so.3 is (OpenBLAS's OpenMP build reads OMP_NUM_THREADS, its pthread
    # build OPENBLAS_NUM_THREADS, BLIS BLIS_NUM_THREADS), threads free to move.
    env = dict(os.environ)
    if args.device == "cpu":
        env.update(OMP_NUM_THREADS=str(args.threads), OMP_PROC_BIND="false",
                   **{v: str(args.threads) for v in BLAS_THREAD_VARIABLES})
        if args.blas_dir is not None:
            env["LD_LIBRARY_PATH"] = str(args.blas_dir) + (
                ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    args.env = env

    if not args.no_run:
        if not args.perf.is_file():
            p.error(f"--perf {args.perf}: no such file")
        if args.peers is not None and not args.peers.is_file():
            p.error(f"--peers {args.peers}: no such file (--no-peers runs without peers)")
        if args.peers is not None and shutil.which(args.peers_python) is None:
            p.error(f"--peers-python {args.peers_python}: not found")
    return args


def main(argv=None):
    args = parse_args(argv)
    shapes = args.shape_list
    args.out.mkdir(parents=True, exist_ok=True)

    rows, configs, problems, dataset = collect(args, shapes, args.out)
    rows = arrange(rows, shapes)
    summary = summarize(rows, shapes)
    print(flush=True)
    print(table(rows), flush=True)
    for r in rows:
        if r.get("note"):  # a path that ran otherwise than asked says why
            log(f"note: {r['shape']} {r['path']}: {r['note']}")
    print(flush=True)
    if summary:
        print(f"auto against the best of our other paths (flagged: more than {AUTO_SLACK:.0%} "
              "behind it, slower than the eager reference, or 3xtf32 slower than strict auto):",
              flush=True)
        print(summary_table(summary), flush=True)
        for line in summary_lines(summary):
            log(line)
    else:
        log("no auto rows: no summary")

    write_csv(rows, args.out / "compare.csv", COLUMNS)
    write_csv(summary, args.out / "compare-summary.csv", SUMMARY_COLUMNS)
    write_json(rows, summary, args.out / "compare.json", args)
    data.write_run(args.out / "run.csv", dataset)
    meta_path = args.out / "compare-meta.json"
    if args.no_run and meta_path.exists():
        # Re-tabulating: the run's own metadata stays (date, machine, command); what changed is
        # the summary, and when and how it was re-tabulated.
        meta = json.loads(meta_path.read_text())
        meta.update(flagged=sum(1 for s in summary if s["flags"]), retabulated=dict(
            date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            command=shlex.join([Path(sys.executable).name] + sys.argv), problems=problems))
    else:
        meta = metadata(args, shapes, configs, problems, summary)
    meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    written = ["compare.csv", "compare-summary.csv", "compare.json", "compare-meta.json",
               "run.csv"]
    if plot(rows, shapes, args.out / "compare.png", args.peak_tflops, args.bandwidth_tbs,
            args.rough_roofline):
        written.append("compare.png")
    log(f"wrote {', '.join(str(args.out / w) for w in written)}")
    for problem in problems:
        log(f"problem: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
