#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""KernelBench-style evaluation of fused_linear.FusedLinearLeakyReLU (ModelNew) against the
reference model (Model: nn.Linear -> * multiplier -> LeakyReLU), eager and torch.compile'd.

    PYTHONPATH=build/<preset>/python python3 perf/kernelbench_eval.py --out DIR
    python3 perf/kernelbench_eval.py --smoke --out DIR     # CPU, small counts (ctest runs it)
    python3 perf/kernelbench_eval.py --train --out DIR     # also each problem's training step

The method, written from KernelBench's published description (not its code):
- Model and ModelNew are each built after torch.manual_seed(42) (and torch.cuda.manual_seed(42))
  from the same init inputs [in_features, out_features, multiplier, negative_slope], so ModelNew
  holds the reference's weights (it draws the same random numbers).
- Correctness: 5 trials; their seeds come from torch.manual_seed(42) followed by
  torch.randint(0, 2**32 - 1, (1,)) per trial; each trial seeds with its own, draws the inputs
  (torch.rand(1024, 8192) for the seed problem, torch.randn(128, 1024) for the earlier one),
  runs both models under no_grad and passes when torch.allclose(ref, new, atol=1e-4,
  rtol=1e-4); the max and mean |ref - new| are recorded. TF32 is left at PyTorch's default.
- Timing, per model: 3 warm-up calls, then 101 calls of which the first is discarded, each
  between CUDA events on the current stream after a synchronisation, the L2 cache flushed before
  each call by writing a 256 MB tensor (not timed). Mean, std, min and max in ms; speedup =
  reference mean / ours, against eager Model and torch.compile(Model).
One deliberate difference: the models' calls are timed in --rounds interleaved rounds (default
5: 20 kept calls per model and round, each round's first call discarded, the order rotated
from round to round), so that the GPU's clock and temperature drift over a run touch every
model alike instead of favouring the one timed first; --rounds 1 is KernelBench's order.
On the CPU (--device cpu) the timing uses time.perf_counter between synchronisations instead of
events, and the flush writes --flush-mb of host memory.

Also measured (--overhead-shape, default 128x1024x512): the per-call cost of the op beside the
C++ FusedLinear::Plan::execute in the same process, on the same tensors and stream, through the
extension's timer (torch.ops.fused_linear._time_calls): "plan" (Plan::execute, the floor),
"oneshot" (the library's one-shot call, as the op makes it), "op" (the operator through
PyTorch's dispatcher from C++, output allocation included), plus the op and the module called
from Python. Each mode is timed two ways: "latency" (call + wait for the stream, per call) and
"enqueue" (the host time of a call that returns before the device finishes). Overhead = mode
minus plan, as the median over interleaved rounds (clock drift touches every mode alike).

--train also times each problem's training step, as a problem of its own ("seed-step",
"earlier-step"): every model's call is zero_grad(set_to_none=True), forward on an x that requires
gradients, backward of one fixed upstream gradient (torch.randn after seed 42), with autograd on;
Model (eager, torch.compile) and ModelNew timed alike, interleaved as above. A trial is correct
when ModelNew's output passes the allclose above against Model's and its gradients of x, weight
and bias pass it against float64 gradients of its own output (the sign of z taken from its y: a
z within rounding of 0 may land on either side in Model and ModelNew, which the output's check
already covers). `tuning.data add-kernelbench OUT --run-id ID --machine NAME` keeps a run.

--host-sweep instead times the CPU op beside eager PyTorch at perf/compare.py's host shapes
(--threads N for both; FUSED_LINEAR_NUM_THREADS defaults to the same): host_sweep.csv/json.

Output in --out: kernelbench.json (everything, with the environment), kernelbench.csv (one row
per problem x implementation), overhead.csv; a table on stdout.
"""
import argparse
import csv
import json
import math
import os
import platform
import statistics
import sys
import time

import torch

from compare import SWEEPS  # the host sweep's shapes, beside this file
from tuning.names import dims_arg

try:
    import fused_linear
    from fused_linear.reference import Model
except ImportError as e:  # the usual cause: <build>/python not on PYTHONPATH
    sys.exit(
        f"kernelbench_eval: cannot import fused_linear ({e}); run with " "PYTHONPATH=<build>/python"
    )


# ------------------------------------------------------------------ the problem, as KernelBench
# Model: the reference (fused_linear.reference); ModelNew: the drop-in at a precision and path.
def model_new_class(precision, algorithm="auto"):
    class ModelNew(fused_linear.FusedLinearLeakyReLU):
        def __init__(self, in_features, out_features, multiplier, negative_slope):
            super().__init__(
                in_features,
                out_features,
                multiplier,
                negative_slope,
                precision=precision,
                algorithm=algorithm,
            )

    ModelNew.__name__ = f"ModelNew[{precision}@{algorithm}]"
    return ModelNew


PROBLEMS = {
    # KernelBench's current size of level 2 "Gemm_Multiply_LeakyReLU" and its inputs.
    "seed": dict(
        batch=1024,
        in_features=8192,
        out_features=8192,
        multiplier=2.0,
        negative_slope=0.1,
        inputs="rand",
    ),
    # The earlier size of the same problem.
    "earlier": dict(
        batch=128,
        in_features=1024,
        out_features=512,
        multiplier=2.0,
        negative_slope=0.1,
        inputs="randn",
    ),
}


def init_inputs(p):
    return [p["in_features"], p["out_features"], p["multiplier"], p["negative_slope"]]


def get_inputs(p):
    draw = torch.rand if p["inputs"] == "rand" else torch.randn
    return [draw(p["batch"], p["in_features"])]


def set_seed(seed, device):
    torch.manual_seed(seed)
    if device.type == "cuda":
        torch.cuda.manual_seed(seed)


def build(cls, p, device):
    set_seed(42, device)
    return cls(*init_inputs(p)).to(device)


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ------------------------------------------------------------------ correctness
def check_correctness(model, model_new, p, device, trials, atol, rtol):
    torch.manual_seed(42)
    seeds = [int(torch.randint(0, 2**32 - 1, (1,)).item()) for _ in range(trials)]
    results = []
    for seed in seeds:
        set_seed(seed, device)
        inputs = [t.to(device) for t in get_inputs(p)]
        with torch.no_grad():
            ref = model(*inputs)
            new = model_new(*inputs)
        synchronize(device)
        if ref.shape != new.shape:
            results.append(
                dict(
                    seed=seed,
                    passed=False,
                    error=f"shape {tuple(new.shape)} != " f"{tuple(ref.shape)}",
                )
            )
            continue
        diff = (ref - new).abs()
        results.append(
            dict(
                seed=seed,
                passed=bool(torch.allclose(ref, new, atol=atol, rtol=rtol)),
                max_abs_diff=float(diff.max()),
                mean_abs_diff=float(diff.mean()),
                nan=bool(torch.isnan(new).any()),
            )
        )
    return results


# ------------------------------------------------------------------ timing
class L2Flush:
    """Writing a buffer larger than the cache evicts the previous call's data (256 MB: more
    than an H200's 50 MB L2 several times over)."""

    def __init__(self, device, megabytes):
        n = max(1, int(megabytes * 2**20) // 8)
        self.buffer = torch.empty(n, dtype=torch.int64, device=device) if megabytes > 0 else None

    def __call__(self):
        if self.buffer is not None:
            self.buffer.fill_(42)


def time_model(fn, inputs, device, warmup, calls, flush, grad=False):
    """KernelBench's timing of one model: `warmup` calls, then `calls` timed calls of which the
    first is discarded, each after the flush and a synchronisation (`grad`: with autograd on,
    for a training step)."""
    with torch.enable_grad() if grad else torch.no_grad():
        for _ in range(warmup):
            fn(*inputs)
            synchronize(device)
        times = []
        for _ in range(calls):
            flush()
            synchronize(device)
            if device.type == "cuda":
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                fn(*inputs)
                end.record()
                torch.cuda.synchronize(device)
                times.append(start.elapsed_time(end))
            else:
                t0 = time.perf_counter()
                fn(*inputs)
                times.append((time.perf_counter() - t0) * 1e3)
    return times[1:]  # the first timed call is discarded


def summary(times):
    return dict(
        mean_ms=statistics.fmean(times),
        std_ms=statistics.pstdev(times),
        min_ms=min(times),
        max_ms=max(times),
        calls=len(times),
    )


def time_models(models, inputs, device, warmup, calls, flush, rounds, grad=False):
    """Every model timed as time_model does, in `rounds` interleaved rounds of (calls - 1) /
    rounds kept calls each (A B C, B C A, ...: clock and temperature drift touch every model
    alike); rounds = 1 is KernelBench's order, one model after the other. A model that raises
    is reported with its error and left out of later rounds."""
    kept = max(1, (calls - 1) // rounds)
    times = {name: [] for name in models}
    errors = {}
    names = list(models)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            if name in errors:
                continue
            try:
                times[name] += time_model(
                    models[name], inputs, device, warmup if r == 0 else 0, kept + 1, flush, grad
                )
            except Exception as e:  # noqa: BLE001  (reported, the rest still runs)
                errors[name] = dict(error=f"{type(e).__name__}: {e}")
    return {name: errors.get(name) or summary(times[name]) for name in models}


# ------------------------------------------------------------------ training step (--train)
def step_of(model, dy):
    """A training step of `model` as a call: zero_grad(set_to_none=True), forward, backward of
    the fixed upstream gradient dy (the input's gradient cleared and computed too)."""

    def step(x):
        model.zero_grad(set_to_none=True)
        x.grad = None
        y = model(x)
        y.backward(dy)
        return y

    return step


def draw_dy(p, device):
    """The loss's gradient: the same for every model and trial, drawn after seed 42."""
    set_seed(42, device)
    return torch.randn(p["batch"], p["out_features"], device=device)


def step_inputs(p, device):
    return [t.to(device).requires_grad_(True) for t in get_inputs(p)]


def check_step_correctness(model, model_new, p, device, trials, atol, rtol):
    """check_correctness for the step: per trial, ModelNew's output against Model's
    (torch.allclose) and its gradients of x, weight and bias against float64 gradients of its
    own output (the mask z > 0 is y > 0: Model and ModelNew may round a z near 0 to either side
    of it, which the output's check counts; allclose at the same tolerances)."""
    torch.manual_seed(42)
    seeds = [int(torch.randint(0, 2**32 - 1, (1,)).item()) for _ in range(trials)]
    dy = draw_dy(p, device)
    mult, slope = p["multiplier"], p["negative_slope"]
    results = []
    for seed in seeds:
        set_seed(seed, device)
        x = step_inputs(p, device)[0]
        with torch.enable_grad():
            ref = step_of(model, dy)(x).detach()
            new = step_of(model_new, dy)(x).detach()
        synchronize(device)
        w, b = model_new.gemm.weight, model_new.gemm.bias
        g = torch.where(new > 0, dy.double(), dy.double() * slope) * mult
        expected = dict(
            x=g @ w.detach().double(), weight=g.t() @ x.detach().double(), bias=g.sum(0)
        )
        got = dict(x=x.grad, weight=w.grad, bias=b.grad)
        passed = bool(torch.allclose(ref, new, atol=atol, rtol=rtol))
        diffs = dict(output=float((ref - new).abs().max()))
        for k in expected:
            passed &= bool(torch.allclose(got[k].double(), expected[k], atol=atol, rtol=rtol))
            diffs[k] = float((got[k].double() - expected[k]).abs().max())
        results.append(
            dict(
                seed=seed,
                passed=passed,
                max_abs_diff=max(diffs.values()),
                mean_abs_diff=float((ref - new).abs().mean()),
                max_abs_diffs=diffs,
                nan=bool(torch.isnan(new).any()),
            )
        )
    return results


# ------------------------------------------------------------------ per-call overhead
def measure_overhead(shape, device, precision, rounds, iters):
    m, k, n = shape
    torch.manual_seed(0)
    x = torch.rand(m, k, device=device)
    model = fused_linear.FusedLinearLeakyReLU(k, n, 2.0, 0.1, precision=precision).to(device)
    w, b = model.gemm.weight.detach(), model.gemm.bias.detach()
    op = torch.ops.fused_linear.linear_leaky_relu

    def python_calls(fn, sync):
        out = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            if sync:
                synchronize(device)
            out.append((time.perf_counter() - t0) * 1e6)
        synchronize(device)
        return out

    python_modes = {
        "op from Python": lambda: op(x, w, b, 2.0, 0.1, precision, "auto"),
        "module from Python": lambda: model(x),
    }
    per_round = {}
    with torch.no_grad():
        for fn in python_modes.values():  # warm: plans made, allocator primed
            fn()
        for _ in range(rounds):
            for sync, label in ((True, "latency"), (False, "enqueue")):
                for mode in ("plan", "oneshot", "op"):
                    t = torch.ops.fused_linear._time_calls(
                        x, w, b, 2.0, 0.1, precision, "auto", mode, iters, sync
                    )
                    per_round.setdefault((mode, label), []).append(statistics.median(t.tolist()))
                for mode, fn in python_modes.items():
                    per_round.setdefault((mode, label), []).append(
                        statistics.median(python_calls(fn, sync))
                    )
    rows = []
    for label in ("latency", "enqueue"):
        floor = statistics.median(per_round[("plan", label)])
        for mode in ("plan", "oneshot", "op", "op from Python", "module from Python"):
            us = statistics.median(per_round[(mode, label)])
            rows.append(
                dict(
                    shape=f"{m}x{k}x{n}",
                    precision=precision,
                    timing=label,
                    mode=mode,
                    median_us=us,
                    overhead_vs_plan_us=us - floor,
                    rounds=rounds,
                    iters=iters,
                )
            )
    return rows


# ------------------------------------------------------------------ driver
def environment(device, args):
    env = dict(
        date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        torch=torch.__version__,
        python=platform.python_version(),
        platform=platform.platform(),
        device=str(device),
        allow_tf32_matmul=bool(torch.backends.cuda.matmul.allow_tf32),
        threads=torch.get_num_threads(),
        fused_linear=fused_linear.status(),
        argv=sys.argv[1:],
        commit=os.environ.get("FUSED_LINEAR_COMMIT", ""),
    )
    if device.type == "cuda":
        env["gpu"] = torch.cuda.get_device_name(device)
        env["cuda"] = torch.version.cuda
    else:
        env["cpu"] = cpu_model()
    return env


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--problems", default="seed,earlier", help="comma list of seed, earlier")
    ap.add_argument(
        "--precisions",
        default="strict,3xtf32,tf32",
        help="comma list of precisions, each optionally @algorithm (e.g. "
        "strict@vendor_lt) to time one path instead of auto",
    )
    ap.add_argument("--trials", type=int, default=5, help="correctness trials")
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--calls", type=int, default=101, help="timed calls (the first discarded)")
    ap.add_argument("--flush-mb", type=float, default=256.0)
    ap.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="interleaved timing rounds (1: each model's calls in one block, "
        "KernelBench's order)",
    )
    ap.add_argument("--no-compile", action="store_true", help="leave out torch.compile(Model)")
    ap.add_argument(
        "--train",
        action="store_true",
        help="also time each problem's training step as the problem '<problem>-step': "
        "zero_grad, forward, backward of a fixed upstream gradient, for Model (eager, compile) "
        "and ModelNew; correct: the output against Model's and the gradients against float64",
    )
    ap.add_argument("--overhead-shape", type=dims_arg, default=(128, 1024, 512))
    ap.add_argument("--overhead-precisions", default="strict")
    ap.add_argument("--overhead-rounds", type=int, default=5)
    ap.add_argument("--overhead-iters", type=int, default=500)
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (CPU)")
    ap.add_argument(
        "--host-sweep",
        action="store_true",
        help="instead of the evaluation: the CPU op (the module) beside the eager "
        "reference at the host sweep's shapes (perf/compare.py), same threads",
    )
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="CPU, the earlier problem and its training step, 2 trials, 11 calls, 16 MB flush, "
        "short overhead",
    )
    ap.add_argument("--out", required=True, help="output folder")
    args = ap.parse_args()
    if args.smoke:
        args.device, args.problems, args.trials, args.calls = "cpu", "earlier", 2, 11
        args.warmup, args.flush_mb, args.overhead_rounds, args.overhead_iters = 1, 16, 2, 20
        args.rounds, args.train = 2, True
    device = torch.device(args.device)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    if args.host_sweep:
        return host_sweep(args)
    problems = [s for s in args.problems.split(",") if s]
    unknown = [s for s in problems if s not in PROBLEMS]
    if unknown:
        sys.exit(f"kernelbench_eval: unknown problems {unknown} (known: {sorted(PROBLEMS)})")
    precisions = [s for s in args.precisions.split(",") if s]
    can_compile = hasattr(torch, "compile") and not args.no_compile
    flush = L2Flush(device, args.flush_mb)

    env = environment(device, args)
    print(
        f"# torch {env['torch']} on {env.get('gpu', device)}; allow_tf32(matmul) "
        f"{env['allow_tf32_matmul']}; fused_linear {env['fused_linear']}",
        flush=True,
    )
    rows, details = [], []
    runs = [
        (name, step) for name in problems for step in ((False, True) if args.train else (False,))
    ]
    for base, step in runs:
        # A training step is a problem of its own: "<problem>-step", its own Model baselines.
        name = f"{base}-step" if step else base
        p = PROBLEMS[base]
        shape = f"{p['batch']}x{p['in_features']}->{p['out_features']}"
        set_seed(42, device)
        timing_inputs = step_inputs(p, device) if step else [t.to(device) for t in get_inputs(p)]
        dy = draw_dy(p, device) if step else None
        timed_as = (lambda m: step_of(m, dy)) if step else (lambda m: m)
        model = build(Model, p, device).eval()
        models = {"eager": timed_as(model)}
        if can_compile:
            models["compile"] = timed_as(torch.compile(build(Model, p, device).eval()))
        entries = []
        for entry in precisions:
            precision, _, algorithm = entry.partition("@")
            algorithm = algorithm or "auto"
            model_new = build(model_new_class(precision, algorithm), p, device).eval()
            check = check_step_correctness if step else check_correctness
            trials = check(model, model_new, p, device, args.trials, args.atol, args.rtol)
            info = fused_linear.run_info(
                timing_inputs[0].detach(),
                model_new.gemm.weight.detach(),
                model_new.gemm.bias.detach(),
                p["multiplier"],
                p["negative_slope"],
                precision,
                algorithm,
            )
            models[entry] = timed_as(model_new)
            entries.append((entry, precision, algorithm, trials, info))
        timed = time_models(
            models, timing_inputs, device, args.warmup, args.calls, flush, args.rounds, step
        )
        baselines = {
            "eager": timed["eager"],
            "compile": timed.get("compile")
            or dict(error="torch.compile unavailable (PyTorch < 2.0) or --no-compile"),
        }
        for impl, t in baselines.items():
            rows.append(
                dict(
                    problem=name,
                    shape=shape,
                    impl=f"Model {impl}",
                    precision="strict",
                    correct="",
                    max_abs_diff="",
                    mean_abs_diff="",
                    **timing_cols(t),
                    speedup_vs_eager="",
                    speedup_vs_compile="",
                )
            )
        for entry, precision, algorithm, trials, info in entries:
            t = timed[entry]
            passed = sum(r["passed"] for r in trials)
            row = dict(
                problem=name,
                shape=shape,
                impl="ModelNew" if algorithm == "auto" else f"ModelNew {algorithm}",
                precision=precision,
                correct=f"{passed}/{len(trials)}",
                max_abs_diff=max(r.get("max_abs_diff", math.inf) for r in trials),
                mean_abs_diff=statistics.fmean(r.get("mean_abs_diff", math.inf) for r in trials),
                **timing_cols(t),
                speedup_vs_eager=ratio(baselines["eager"], t),
                speedup_vs_compile=ratio(baselines["compile"], t),
            )
            rows.append(row)
            details.append(
                dict(
                    problem=name,
                    precision=precision,
                    algorithm=algorithm,
                    trials=trials,
                    timing=t,
                    run_info=info,
                )
            )
            print(
                f"{name:8s} {shape:18s} {entry:16s} correct {row['correct']} "
                f"max|diff| {row['max_abs_diff']:.3g}  {t.get('mean_ms', math.nan):.4f} ms "
                f"(std {t.get('std_ms', math.nan):.4f})  x{fmt(row['speedup_vs_eager'])} eager "
                f"x{fmt(row['speedup_vs_compile'])} compile  [{info['algorithm']}, "
                f"{info['precision']}] {t.get('error', '')}",
                flush=True,
            )
        details.append(dict(problem=name, baselines=baselines))
        for impl, t in baselines.items():
            if "mean_ms" in t:
                print(
                    f"{name:8s} {shape:18s} Model {impl:7s} {t['mean_ms']:.4f} ms "
                    f"(std {t['std_ms']:.4f})",
                    flush=True,
                )
            else:
                print(f"{name:8s} {shape:18s} Model {impl}: {t['error']}", flush=True)

    overhead = []
    for precision in [s for s in args.overhead_precisions.split(",") if s]:
        overhead += measure_overhead(
            args.overhead_shape, device, precision, args.overhead_rounds, args.overhead_iters
        )
    for r in overhead:
        print(
            f"overhead {r['shape']} {r['precision']:7s} {r['timing']:8s} {r['mode']:20s} "
            f"{r['median_us']:9.2f} us  ({r['overhead_vs_plan_us']:+.2f} us vs Plan::execute)",
            flush=True,
        )

    env["fused_linear"] = fused_linear.status()  # after the runs: what Kokkos ran on
    with open(os.path.join(args.out, "kernelbench.json"), "w") as f:
        json.dump(
            dict(
                environment=env,
                method=dict(
                    trials=args.trials,
                    atol=args.atol,
                    rtol=args.rtol,
                    warmup=args.warmup,
                    calls=args.calls,
                    rounds=args.rounds,
                    discarded_per_round=1,
                    flush_mb=args.flush_mb,
                ),
                rows=rows,
                details=details,
                overhead=overhead,
            ),
            f,
            indent=1,
            default=str,
        )
    write_csv(os.path.join(args.out, "kernelbench.csv"), rows)
    write_csv(os.path.join(args.out, "overhead.csv"), overhead)
    print(f"# wrote {args.out}/kernelbench.json, kernelbench.csv, overhead.csv")


def host_sweep(args):
    """Eager Model and ModelNew (strict) on the CPU, each timed in its own blocks, alternating
    (A B A B A B: drift and other load touch both alike), the flush before every call; the
    speedup of the means and of the minima (the minimum is the steadier on a shared machine)."""
    device = torch.device("cpu")
    flush = L2Flush(device, args.flush_mb)
    os.environ.setdefault("FUSED_LINEAR_NUM_THREADS", str(torch.get_num_threads()))
    rows = []
    for shape in SWEEPS["host"]:
        m, k, n = (int(v) for v in shape.split("x"))
        p = dict(
            batch=m,
            in_features=k,
            out_features=n,
            multiplier=2.0,
            negative_slope=0.1,
            inputs="rand",
        )
        models = {
            "eager": build(Model, p, device).eval(),
            "op": build(model_new_class("strict"), p, device).eval(),
        }
        set_seed(42, device)
        inputs = get_inputs(p)
        calls = max(6, min(args.calls, int(2e10 / (2 * m * k * n))))
        samples = {name: [] for name in models}
        for _ in range(3):
            for name, model in models.items():
                samples[name].append(summary(time_model(model, inputs, device, 1, calls, flush)))
        mean = {name: statistics.fmean(t["mean_ms"] for t in ts) for name, ts in samples.items()}
        low = {name: min(t["min_ms"] for t in ts) for name, ts in samples.items()}
        info = fused_linear.run_info(
            inputs[0], models["op"].gemm.weight.detach(), models["op"].gemm.bias.detach(), 2.0, 0.1
        )
        row = dict(
            shape=shape,
            threads=torch.get_num_threads(),
            eager_mean_ms=mean["eager"],
            op_mean_ms=mean["op"],
            speedup_mean=mean["eager"] / mean["op"],
            eager_min_ms=low["eager"],
            op_min_ms=low["op"],
            speedup_min=low["eager"] / low["op"],
            algorithm=info["algorithm"],
            calls=3 * (calls - 1),
        )
        rows.append(row)
        print(
            f"{shape:16s} eager {row['eager_mean_ms']:9.3f} ms  op {row['op_mean_ms']:9.3f} ms  "
            f"x{row['speedup_mean']:.2f} (minima x{row['speedup_min']:.2f})  "
            f"[{row['algorithm']}]",
            flush=True,
        )
    write_csv(os.path.join(args.out, "host_sweep.csv"), rows)
    with open(os.path.join(args.out, "host_sweep.json"), "w") as f:
        json.dump(dict(environment=environment(device, args), rows=rows), f, indent=1, default=str)
    print(f"# wrote {args.out}/host_sweep.csv, host_sweep.json")


def timing_cols(t):
    return {k: t.get(k, "") for k in ("mean_ms", "std_ms", "min_ms", "max_ms")}


def ratio(baseline, ours):
    return (
        baseline["mean_ms"] / ours["mean_ms"] if "mean_ms" in baseline and "mean_ms" in ours else ""
    )


def fmt(v):
    return f"{v:.2f}" if isinstance(v, float) else "-"


def write_csv(path, rows):
    if not rows:
        return
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
