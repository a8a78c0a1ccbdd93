#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""FusedLinear against PyTorch, shape by shape: runs both on one device in one job and writes the
run in the dataset's schema (perf/data/), with its table, summary, metadata and roofline plot.

Runs the perf program (fused_linear_perf --json) once per shape and precision and the PyTorch
peers script (torch_peers.py, beside this file) once with all shapes, then writes their rows in
the schema of perf/data/ (run.csv; tuning.data reads the raw JSON) and prints the tables of
tuning.report: every row with its speed relative to the reference model (PyTorch eager fp32) of
the same shape, and per shape, floor and planning auto against the best path meeting the floor
(tuning.judge's "auto vs best", as in perf/RESULTS.md), 3xtf32 against strict auto, auto against
the reference. Python standard library only; the plot needs matplotlib and is skipped without
it.

    python3 perf/compare.py --sweep                     # GPU: the gpu sweep
    python3 perf/compare.py 1024x8192x8192 16x8192x8192 --perf-args "--reps 50"
    python3 perf/compare.py --device cpu --threads 2 --sweep     # the host sweep on 2 threads
    python3 perf/compare.py --sweep --no-run            # re-tabulate the JSON already in --out
    python3 perf/compare.py --sweep --tf32 --planning both   # auto by the rule and measured
    python3 perf/compare.py --pass step --tf32 1024x8192x8192   # the training step, see below

`--planning measure` makes every plan with Planning::Measure; `--planning both` times every path
as estimated plus auto measured, in the same rounds of one perf-program run, and the summary
has a row for each (auto's planning in the `planning` column, plan-making time in `plan_ms`).

The raw outputs stay in --out beside the results: ours_<shape>[_<precision>].json,
peers.json and peers-meta.json; the results are run.csv (the run in the schema of perf/data/:
`PYTHONPATH=perf python3 -m tuning.data add OUT --run-id ID --machine NAME` adds it there),
compare-summary.csv, compare.json (the summary), compare-meta.json and compare.png.

`--pass backward|step` times the layer's gradient (dX, dW, db) or the training step (forward +
backward) instead: the perf program's --pass (paths TRAINING_PATHS) per shape and precision,
and torch_peers.py --pass with all shapes: eager PyTorch's layer (Linear, * multiplier,
LeakyReLU, then backward) beside fused_linear's module (FusedLinearLeakyReLU forward + backward,
from --module-path) at the same precisions. It prints every row with its ratio to eager PyTorch
fp32's pass and, per shape and precision, our auto and the module against it; it writes
<pass>_<shape>[_<precision>].json, peers-<pass>.json, peers-<pass>-meta.json, training.csv (the
rows in the schema of perf/data/training.csv) and compare-meta.json; `tuning.data add OUT
--run-id ID --machine NAME` adds them to perf/data/training.csv.
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

# perf/tuning/, beside this file (and in the device bundle): the dataset's schema, the tables.
from tuning import data, report
from tuning.names import BLAS_THREAD_VARIABLES, REFERENCE_PEER, parse_shape, shape_arg

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

# Named sweeps. `--sweep` alone takes the device's default (gpu on cuda, host on cpu).
SWEEPS = {
    "gpu": [
        # The four regimes auto's rule is drawn from and the crossovers (M = 1..64 at 8192^2,
        # small layers around N K = 2^21), square/rectangular shapes, the K = 65536 stress shape.
        "1024x8192x8192",
        "4096x4096x4096",
        "128x1024x512",
        "16x8192x8192",
        "1x8192x8192",
        "4x8192x8192",
        "8x8192x8192",
        "32x8192x8192",
        "48x8192x8192",
        "64x8192x8192",
        "64x1024x1024",
        "256x1024x1024",
        "128x4096x1024",
        "256x4096x4096",
        "2048x2048x2048",
        "256x65536x1024",
        # short K
        "8192x64x8192",
        "8192x128x8192",
        "4096x256x4096",
        "2048x512x8192",
        # long K
        "64x32768x4096",
        # odd, not powers of two (1000x4099x3001: N odd, K not a multiple of 4)
        "1000x4099x3001",
        "517x1023x2049",
        "3000x3000x3000",
        # LM-head-like
        "16x4096x50257",
        "128x4096x50257",
        # few rows
        "2x8192x8192",
        "1x4096x4096",
        "16x4096x4096",
    ],
    "host": [
        # Sized for a 2-core machine: few rows, small, square, large, short K, long K.
        "1x4096x4096",
        "16x4096x4096",
        "128x1024x512",
        "64x1024x1024",
        "512x512x512",
        "1024x1024x1024",
        "512x4096x4096",
        "4096x64x4096",
        "2048x128x2048",
        "64x16384x1024",
    ],
}
DEFAULT_SWEEP = {"cuda": "gpu", "cpu": "host"}

# The paths the perf program times, per device and precision (its --algorithm list; None: the
# perf program's own default). A path the perf program refuses for a shape is reported by it;
# the others are still written.
PATHS = {
    "cuda": {
        "strict": "auto,vendor,vendor_prefill,vendor_lt,fused,fused_skinny,skinny_sm90",
        "tf32": "vendor,vendor_lt",
        "3xtf32": "auto,vendor,vendor_lt,fused_sm90",
    },
    "cpu": {"strict": "auto,vendor,vendor_prefill,fused,fused_skinny"},
}
# The same for --pass backward|step: the gradient's paths (auto, vendor: KokkosBlas::gemm,
# vendor_lt: cuBLASLt's 3xtf32, fused_sm90: the library's Hopper 3xtf32 kernels).
TRAINING_PATHS = {
    # vendor_lt and fused_sm90 run the gradient's products in 3xtf32 only, vendor in strict
    # and tf32.
    "cuda": {"strict": "auto,vendor", "tf32": "auto,vendor", "3xtf32": "auto,vendor_lt,fused_sm90"},
    "cpu": {"strict": "auto,vendor"},
}
# Prepended to --perf-args on the host (a later option of the same name wins): a 2-core host
# needs fewer calls than a GPU for a stable median, and the host sweep must finish in minutes.
HOST_PERF_ARGS = ["--reps", "10", "--warmup", "2"]
# Plot defaults. H200: fp32 peak of the H100/H200 SXM, bandwidth measured on the H200. Host:
# rough, not measured: 2 cores x 2.3 GHz x 64 fp32 FLOP per cycle (two AVX-512 FMA units) and
# a typical VM's share of memory bandwidth; pass the real values with the flags.
PLOT_DEFAULTS = {"cuda": (67.0, 4.3), "cpu": (0.3, 0.02)}


def log(message):
    print(f"[compare] {message}", flush=True)


# ------------------------------------------------------------------------- running and loading


def ours_json(out_dir, shape, precision="strict", pass_="forward"):
    # The forward's files are ours_*: tuning.data reads a folder's ours_*.json as a forward run.
    stem = "ours" if pass_ == "forward" else pass_
    return out_dir / (
        f"{stem}_{shape}.json" if precision == "strict" else f"{stem}_{shape}_{precision}.json"
    )


def paths_of(args, precision):
    table = PATHS if args.pass_ == "forward" else TRAINING_PATHS
    return table[args.device].get(precision)


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
    mode += [] if args.pass_ == "forward" else ["--pass", args.pass_]
    return (
        [
            str(args.perf),
            "--m",
            str(M),
            "--k",
            str(K),
            "--n",
            str(N),
            "--multiplier",
            str(args.mult),
            "--slope",
            str(args.slope),
            "--json",
            str(json_path),
        ]
        + host
        + shlex.split(args.perf_args)
        + mode
    )


def run_ours(args, shape, out_dir, precision="strict"):
    """One perf-program run for one shape and precision; returns (exit status, problems). If
    the perf program rejects the command line (exit 2) without writing JSON, e.g. a path name it
    does not know, each path is run alone and the results that came back are merged."""
    target = ours_json(out_dir, shape, precision, args.pass_)
    paths = paths_of(args, precision)
    cmd = perf_command(args, shape, target, precision, paths)
    log(f"$ {shlex.join(cmd)}")
    rc = execute(cmd, args.env)
    if rc != 2 or target.exists() or paths is None or "," not in paths:
        return rc, []
    log(
        f"{shape} ({precision}): the perf program rejected the command line; "
        "running the paths one at a time"
    )
    merged, status, problems = None, 0, []
    for path in paths.split(","):
        part = target.with_name(f"{target.stem}.{path}.json")
        cmd = perf_command(args, shape, part, precision, path)
        log(f"$ {shlex.join(cmd)}")
        rc = execute(cmd, args.env)
        if rc == 2:
            problems.append(
                f"{shape}: the perf program ({precision}) rejected path {path} (exit 2)"
            )
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


def peers_json(out_dir, pass_, meta=False):
    stem = "peers" if pass_ == "forward" else f"peers-{pass_}"
    return out_dir / (f"{stem}-meta.json" if meta else f"{stem}.json")


def run_peers(args, shapes, out_dir):
    """One torch_peers.py run for all shapes (one process: torch and the device start once)."""
    cmd = [
        args.peers_python,
        str(args.peers),
        "--mult",
        str(args.mult),
        "--slope",
        str(args.slope),
        "--json",
        str(peers_json(out_dir, args.pass_)),
    ]
    if peers_supports_meta(args.peers):
        cmd += ["--meta", str(peers_json(out_dir, args.pass_, meta=True))]
    if args.device == "cpu":
        cmd += ["--device", "cpu", "--threads", str(args.threads)]
    env = args.env
    if args.pass_ != "forward":
        # fused_linear's module beside eager PyTorch, at the precisions our paths run.
        cmd += ["--pass", args.pass_, "--module-precisions", ",".join(precisions(args))]
        if args.module_path is not None:
            env = dict(env)
            env["PYTHONPATH"] = str(args.module_path) + (
                ":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
            )
    cmd += shlex.split(args.peers_args) + shapes
    log(f"$ {shlex.join(cmd)}")
    return execute(cmd, env)


def with_shape(rows):
    """The rows that ran, each with its shape's name, as tuning.data's reader gives them."""
    return [dict(r, shape=data.shape_name(r)) for r in rows if r]


def load_ours(path, pass_="forward"):
    """The perf program's config and its rows in the dataset's schema (tuning.data reads the
    file; training.csv's for --pass backward|step); a path that ran otherwise than asked says
    why in its note, logged here."""
    config, results = data.parse_perf_json(path)
    for r in results:
        note = r.get("note") or r.get("error") or r.get("refused")
        if note:
            log(f"note: {r['shape']} {r.get('algorithm_requested', '?')}: {note}")
    convert = data.ours_row if pass_ == "forward" else data.training_ours_row
    return config, with_shape(convert(config, r) for r in results)


def load_peers(path, shapes, pass_="forward"):
    """The rows of torch_peers.py's JSON of the shapes asked, in the dataset's schema."""
    wanted = set(shapes)
    convert = data.peer_row if pass_ == "forward" else data.training_peer_row
    rows = with_shape(convert(r) for r in json.loads(path.read_text()))
    return [r for r in rows if r["shape"] in wanted]


def precisions(args):
    return ["strict"] + (["tf32", "3xtf32"] if args.tf32 else [])


def collect(args, shapes, out_dir):
    """Runs (unless --no-run) and loads everything; returns (the run's rows in the dataset's
    schema, perf configs, problems)."""
    rows, configs, problems = [], [], []
    for i, shape in enumerate(shapes, 1):
        for precision in precisions(args):
            path = ours_json(out_dir, shape, precision, args.pass_)
            if not args.no_run:
                log(f"{i}/{len(shapes)} {shape}: FusedLinear perf program ({precision})")
                path.unlink(missing_ok=True)  # never tabulate a stale file from an earlier run
                rc, rejected = run_ours(args, shape, out_dir, precision)
                problems += rejected
                if rc == 1:
                    problems.append(
                        f"{shape}: the perf program ({precision}) exited with 1: a path "
                        "failed its accuracy check or was refused (see its output)"
                    )
                elif rc != 0:
                    problems.append(f"{shape}: the perf program ({precision}) exited with {rc}")
            if path.exists():
                config, loaded = load_ours(path, args.pass_)
                rows += loaded
                configs.append(config)
            else:
                problems.append(f"{shape}: no {path}")
    if args.peers is None:
        return rows, configs, problems
    path = peers_json(out_dir, args.pass_)
    if not args.no_run:
        log(f"PyTorch peers, all shapes at once: {args.peers}")
        path.unlink(missing_ok=True)
        peers_json(out_dir, args.pass_, meta=True).unlink(missing_ok=True)
        rc = run_peers(args, shapes, out_dir)
        if rc != 0:
            problems.append(f"the peers script exited with {rc}")
    if path.exists():
        rows += load_peers(path, shapes, args.pass_)
    else:
        problems.append(f"no {path}")
    return rows, configs, problems


def write_csv(rows, path, columns):
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, restval="", extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def write_json(summary, path, args):
    meta = dict(
        multiplier=args.mult,
        slope=args.slope,
        device=args.device,
        peak_tflops=args.peak_tflops,
        bandwidth_tbs=args.bandwidth_tbs,
        reference_peer=report.REFERENCE_PEER,
        auto_slack=report.AUTO_SLACK,
    )
    path.write_text(json.dumps(dict(config=meta, summary=summary), indent=1) + "\n")


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
        smi = quiet(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]
        )
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
    pm = peers_json(args.out, args.pass_, meta=True)
    if args.peers is not None and pm.exists():
        peers_meta = json.loads(pm.read_text())
    first = configs[0] if configs else {}
    commit, dirty = git_commit()
    reps = sorted({c.get("reps") for c in configs if c.get("reps") is not None})
    return dict(
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        machine=machine(args, peers_meta),
        command=shlex.join([Path(sys.executable).name] + sys.argv),
        no_run=args.no_run,
        device=args.device,
        threads=args.threads if args.device == "cpu" else None,
        module_path=None if args.module_path is None else str(args.module_path),
        sweep=args.sweep_name,
        shapes=shapes,
        **{"pass": args.pass_},
        precisions=precisions(args),
        planning=args.planning,
        paths={p: paths_of(args, p) for p in precisions(args)},
        perf_args=(HOST_PERF_ARGS if args.device == "cpu" else []) + shlex.split(args.perf_args),
        peers_args=args.peers_args,
        kokkos={
            k: first.get(k)
            for k in ("kokkos_version", "execution_space", "memory_space", "concurrency")
        },
        fused_linear_version=first.get("fused_linear_version"),
        timing=dict(
            ours=dict(
                reps=reps,
                warmup=sorted({c.get("warmup") for c in configs if c.get("warmup") is not None}),
                order="random-order rounds",
            ),
            peers=None
            if peers_meta is None
            else {k: peers_meta.get(k) for k in ("reps", "warmup", "order", "timing")},
        ),
        torch=None
        if peers_meta is None
        else {
            k: peers_meta.get(k)
            for k in ("torch_version", "cuda", "threads", "blas_info", "blas_loaded")
        },
        host_blas=host_blas(args) if args.device == "cpu" and not args.no_run else None,
        env={
            k: args.env.get(k)
            for k in ("OMP_NUM_THREADS", "OMP_PROC_BIND", "LD_LIBRARY_PATH") + BLAS_THREAD_VARIABLES
            if args.env.get(k)
        }
        if args.device == "cpu"
        else None,
        git_commit=commit,
        git_dirty=dirty,
        # A shared host's load (1, 5, 15 minutes) when the run ends: its medians move with it.
        load_average=list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        multiplier=args.mult,
        slope=args.slope,
        flagged=sum(1 for s in summary if s["flags"]),
        problems=problems,
    )


# ------------------------------------------------------------------------- training passes


def training_table(rows, shapes):
    """--pass backward|step: every row with its speed relative to eager PyTorch fp32's pass of
    the same shape (x eager above 1: faster), as a text table."""
    eager = {r["shape"]: r["median_ms"] for r in rows if r["path"] == REFERENCE_PEER}
    order = {s: i for i, s in enumerate(shapes)}
    source_order = {"ours": 0, "module": 1, "peer": 2}
    rows = sorted(
        rows, key=lambda r: (order.get(r["shape"], len(order)), source_order[r["source"]])
    )
    head = (
        "shape",
        "pass",
        "source",
        "path",
        "precision",
        "ran",
        "median ms",
        "min ms",
        "x eager",
        "rel err",
    )
    cells = [head]
    for r in rows:
        e = eager.get(r["shape"])
        cells.append(
            (
                r["shape"],
                r["pass"],
                r["source"],
                r["path"],
                r.get("precision") or "-",
                r.get("ran") or "-",
                f"{r['median_ms']:.4f}",
                "-" if r.get("min_ms") is None else f"{r['min_ms']:.4f}",
                "-" if not e else f"{e / r['median_ms']:.2f}",
                "-" if r.get("rel_err") is None else f"{r['rel_err']:.2e}",
            )
        )
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def training_summary(rows, shapes, floors):
    """Per shape and precision: our auto (C++), the module and eager PyTorch, with ratios."""
    eager = {r["shape"]: r["median_ms"] for r in rows if r["path"] == REFERENCE_PEER}
    lines = []
    for shape in shapes:
        for precision in floors:
            auto = next(
                (
                    r
                    for r in rows
                    if r["shape"] == shape
                    and r["source"] == "ours"
                    and r["path"] == "auto"
                    and r["precision"] == precision
                ),
                None,
            )
            module = next(
                (
                    r
                    for r in rows
                    if r["shape"] == shape
                    and r["source"] == "module"
                    and r["precision"] == precision
                ),
                None,
            )
            e = eager.get(shape)
            parts = []
            for name, r in (("C++ auto", auto), ("module", module)):
                if r is not None:
                    ratio = f" (x{e / r['median_ms']:.2f} eager)" if e else ""
                    parts.append(f"{name} {r['median_ms']:.4f} ms{ratio}")
            if parts:
                tail = f", eager fp32 {e:.4f} ms" if e else ", no eager row"
                lines.append(f"{shape} {precision}: " + ", ".join(parts) + tail)
    return lines


def main_training(args, shapes):
    """compare.py --pass backward|step: the perf program's pass per shape and precision, the
    peers' (eager PyTorch and fused_linear's module), one table, training.csv."""
    rows, configs, problems = collect(args, shapes, args.out)
    print(flush=True)
    print(training_table(rows, shapes), flush=True)
    print(flush=True)
    for line in training_summary(rows, shapes, precisions(args)):
        log(line)
    (args.out / "training.csv").write_text(data.training_text(rows))
    meta_path = args.out / "compare-meta.json"
    if not (args.no_run and meta_path.exists()):  # re-tabulating keeps the run's own metadata
        meta = metadata(args, shapes, configs, problems, [])
        meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    log(f"wrote {args.out / 'training.csv'}, {args.out / 'compare-meta.json'}")
    for problem in problems:
        log(f"problem: {problem}")
    return 1 if problems else 0


# ------------------------------------------------------------------------- main


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="FusedLinear against PyTorch, shape by shape, on one "
        "device in one job (see the top of this file)."
    )
    p.add_argument(
        "shapes", nargs="*", type=shape_arg, help="shapes MxKxN (nn.Linear: X [M,K], W [N,K])"
    )
    p.add_argument(
        "--sweep",
        nargs="?",
        const="default",
        metavar="NAME",
        help="add a named sweep: "
        + ", ".join(f"{k} ({len(v)} shapes)" for k, v in SWEEPS.items())
        + "; SWEEPS in this file lists them. Alone: the device's default, gpu on cuda, "
        "host on cpu",
    )
    p.add_argument(
        "--device",
        choices=["cuda", "cpu"],
        default="cuda",
        help="cuda (default): the GPU; cpu: the host, our OpenMP build and PyTorch on " "the CPU",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="host threads (--device cpu; default: all cores): OMP_NUM_THREADS and "
        "the BLAS thread variables for both programs, --threads for the peers",
    )
    p.add_argument(
        "--blas-dir",
        type=Path,
        default=None,
        help="host: a folder with the libblas.so.3 to use (prepended to "
        "LD_LIBRARY_PATH for the perf program and the peers alike), e.g. "
        "/usr/lib/x86_64-linux-gnu/openblas-pthread",
    )
    p.add_argument(
        "--perf",
        type=Path,
        default=None,
        help="the perf program (default: build/cuda/perf/fused_linear_perf, or "
        "build/host/perf/fused_linear_perf with --device cpu)",
    )
    p.add_argument(
        "--peers",
        type=Path,
        default=HERE / "torch_peers.py",
        help="the PyTorch peers script (default: %(default)s)",
    )
    p.add_argument(
        "--no-peers",
        dest="peers",
        action="store_const",
        const=None,
        help="run no peers (no vs-ref column)",
    )
    p.add_argument(
        "--peers-python",
        default=sys.executable,
        help="the Python that has torch, for the peers (default: this one)",
    )
    p.add_argument(
        "--perf-args", default="", help="more arguments for the perf program, e.g. " '"--reps 50"'
    )
    p.add_argument(
        "--peers-args",
        default="",
        help="more arguments for the peers script, e.g. " '"--compile none"',
    )
    p.add_argument("--mult", type=float, default=2.0, help="multiplier (default 2.0)")
    p.add_argument("--slope", type=float, default=0.1, help="LeakyReLU slope (default 0.1)")
    p.add_argument(
        "--planning",
        choices=["estimate", "measure", "both"],
        default="estimate",
        help="how the perf program's plans choose: estimate (default, auto's rule), "
        "measure (Planning::Measure) or both (auto also measured, in the same "
        "rounds)",
    )
    p.add_argument(
        "--pass",
        dest="pass_",
        choices=["forward", "backward", "step"],
        default="forward",
        help="forward (default: the layer), backward (dX, dW, db) or step (forward + "
        "backward): the perf program's --pass beside torch_peers.py --pass (eager PyTorch "
        "and fused_linear's module); writes training.csv, read by tuning.data add",
    )
    p.add_argument(
        "--module-path",
        type=Path,
        default=None,
        help="--pass backward|step: the folder with the fused_linear package for the peers' "
        "module rows, put first on their PYTHONPATH (default: build/cuda/python, or "
        "build/host/python with --device cpu, where it exists)",
    )
    p.add_argument(
        "--tf32", action="store_true", help="also time the tf32 and 3xtf32 precisions (CUDA builds)"
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path("perf_results"),
        help="output folder (default: %(default)s)",
    )
    p.add_argument(
        "--peak-tflops",
        type=float,
        default=None,
        help="fp32 peak for the plot (default: 67, the H100/H200 SXM's; host: 0.3, " "rough)",
    )
    p.add_argument(
        "--bandwidth-tbs",
        type=float,
        default=None,
        help="memory bandwidth for the plot's roofline (default: 4.3, measured on "
        "the H200; host: 0.02, rough)",
    )
    p.add_argument(
        "--no-run",
        action="store_true",
        help="run nothing: tabulate and plot the JSON already in --out",
    )
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
        args.perf = (
            REPO
            / ("build/host" if args.device == "cpu" else "build/cuda")
            / "perf/fused_linear_perf"
        )
    if args.module_path is None and args.pass_ != "forward":
        built = REPO / ("build/host" if args.device == "cpu" else "build/cuda") / "python"
        args.module_path = built if (built / "fused_linear").is_dir() else None
    if args.pass_ != "forward" and args.planning == "both":
        p.error("--planning both times the forward's paths: use estimate or measure with --pass")
    peak, bandwidth = PLOT_DEFAULTS[args.device]
    args.rough_roofline = args.device == "cpu" and args.peak_tflops is None
    args.peak_tflops = peak if args.peak_tflops is None else args.peak_tflops
    args.bandwidth_tbs = bandwidth if args.bandwidth_tbs is None else args.bandwidth_tbs

    # The environment of both programs. Host: the same threads for our OpenMP kernels and for
    # whichever BLAS libblas.so.3 is (OpenBLAS's OpenMP build reads OMP_NUM_THREADS, its pthread
    # build OPENBLAS_NUM_THREADS, BLIS BLIS_NUM_THREADS), threads free to move.
    env = dict(os.environ)
    if args.device == "cpu":
        env.update(
            OMP_NUM_THREADS=str(args.threads),
            OMP_PROC_BIND="false",
            **{v: str(args.threads) for v in BLAS_THREAD_VARIABLES},
        )
        if args.blas_dir is not None:
            env["LD_LIBRARY_PATH"] = str(args.blas_dir) + (
                ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else ""
            )
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
    if args.pass_ != "forward":
        return main_training(args, shapes)

    rows, configs, problems = collect(args, shapes, args.out)
    summary = report.summarize(rows, shapes)
    print(flush=True)
    print(report.table(rows, shapes), flush=True)
    print(flush=True)
    if summary:
        print(
            f"auto against the best path meeting the floor (flagged: more than "
            f"{report.AUTO_SLACK:.0%} behind it, slower than the eager reference, or 3xtf32 "
            "slower than strict auto):",
            flush=True,
        )
        print(report.summary_table(summary), flush=True)
        for line in report.summary_lines(summary):
            log(line)
    else:
        log("no auto rows: no summary")

    data.write_run(args.out / "run.csv", rows)
    write_csv(summary, args.out / "compare-summary.csv", report.SUMMARY_COLUMNS)
    write_json(summary, args.out / "compare.json", args)
    meta_path = args.out / "compare-meta.json"
    if args.no_run and meta_path.exists():
        # Re-tabulating: the run's own metadata stays (date, machine, command); what changed is
        # the summary, and when and how it was re-tabulated.
        meta = json.loads(meta_path.read_text())
        meta.update(
            flagged=sum(1 for s in summary if s["flags"]),
            retabulated=dict(
                date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                command=shlex.join([Path(sys.executable).name] + sys.argv),
                problems=problems,
            ),
        )
    else:
        meta = metadata(args, shapes, configs, problems, summary)
    meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    written = ["run.csv", "compare-summary.csv", "compare.json", "compare-meta.json"]
    if report.plot(
        rows,
        shapes,
        args.out / "compare.png",
        args.peak_tflops,
        args.bandwidth_tbs,
        args.rough_roofline,
    ):
        written.append("compare.png")
    else:
        log("matplotlib is not installed: no plot (re-run with --no-run where it is)")
    log(f"wrote {', '.join(str(args.out / w) for w in written)}")
    for problem in problems:
        log(f"problem: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
