#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch peers of FusedLinear's layer, Y = LeakyReLU(mult * (X . W^T + b), slope), timed and
checked the way the perf program (fused_linear_perf) times and checks our paths.

Run it in the same job as the perf program (perf/compare.py does), so that both see the same
device, clocks and load:

    python3 perf/torch_peers.py [--mult 2.0] [--slope 0.1] [--json FILE] MxKxN ...
    python3 perf/torch_peers.py --device cpu --threads 2 MxKxN ...

GPU rows (--device cuda, the default):
  torch eager fp32 (reference model)   F.leaky_relu(F.linear(x, W, b) * mult, slope), strict fp32
  torch eager tf32                     the same with TF32 tensor cores allowed
  torch.compile default fp32           --compile default (the default) or all; torch >= 2.0
  torch.compile max-autotune-no-cudagraphs fp32    --compile max or all
  floor: cuBLAS fp32 / tf32 / bf16 product only    x @ W.t() alone: no bias, no epilogue
  3xTF32 emulated, unfused             three TF32 products on split operands, then the epilogue
CPU rows (--device cpu): the reference model and "floor: fp32 product only", on --threads
threads (torch.set_num_threads; the BLAS and OpenMP thread variables are set to the same number
before torch loads, unless already set).

Method, per shape: fresh inputs (X uniform [0, 1), W and b as nn.Linear initialises them), one
checked call per peer against a float64 reference (||out - ref|| / ||ref|| and max |out - ref|;
floors have no errors), warm-up (--warmup calls of every peer, and on GPUs at least 100 ms of
them), then --reps rounds, each calling every peer once in a fresh random order (seeded by
--seed), each call timed alone: CUDA events around the call after a synchronisation (GPU), or
perf_counter between synchronisations (CPU). --sequential times each peer's calls back to back
instead. Rows report the upper median (times[n // 2], as the perf program) and the minimum.
A peer that fails (e.g. torch.compile without a working compiler) is reported and left out; the
others still run.

Training (--pass backward|step): the reference model's layer with x, W and b requiring
gradients ("torch eager fp32 (reference model)"; "torch eager tf32" too on GPUs) beside
fused_linear.FusedLinearLeakyReLU at each of --module-precisions (W and b copied in; needs
fused_linear on PYTHONPATH, e.g. PYTHONPATH=build/host/python, else skipped with a note). step:
y = layer(x), y.backward(dy); backward: y.backward(dy, retain_graph=True) on a graph made once.
dy is uniform [-1, 1); the gradients are set to None before each call, untimed (as zero_grad).
Checked: y against the float64 layer, dX, dW and db against float64 gradients whose mask
(z > 0) is the peer's own y > 0; rel_err is the largest of the four. TFLOP/s count 4 M N K
(backward) or 6 M N K (step). No torch.compile rows.

Output: one line per row, and with --json a list of
{shape, peer, median_ms, min_ms, tflops, rel_err, max_abs_err} (training: also pass, source
"peer" or "module", precision, ran, rel_err_y/dx/dw/db); --meta FILE writes what ran
(torch version, device, threads, BLAS, method) as JSON. Works with torch 1.13 (Debian's
python3-torch; no torch.compile there: skipped with a note) and torch 2.x.
"""
import argparse
import json
import logging
import os
import random
import re
import sys
import time

# perf/tuning/, beside this file (and in the device bundle): standard library only.
from tuning.names import BLAS_THREAD_VARIABLES, REFERENCE_PEER, parse_shape, shape_arg

COMPILE_MODES = {
    "default": ["default"],
    "max": ["max-autotune-no-cudagraphs"],
    "all": ["default", "max-autotune-no-cudagraphs"],
    "none": [],
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="PyTorch peers of FusedLinear's layer, timed and "
        "checked as the perf program times and checks ours.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "shapes",
        nargs="*",
        default=["1024x8192x8192"],
        help="shapes MxKxN (X [M,K], W [N,K]); default 1024x8192x8192",
    )
    p.add_argument("--mult", type=float, default=2.0, help="multiplier (default 2.0)")
    p.add_argument("--slope", type=float, default=0.1, help="LeakyReLU slope (default 0.1)")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument(
        "--threads", type=int, default=0, help="CPU threads (--device cpu; 0: torch's default)"
    )
    p.add_argument(
        "--compile",
        choices=sorted(COMPILE_MODES),
        default="default",
        help="torch.compile modes timed on GPUs (default: default; max = "
        "max-autotune-no-cudagraphs; all = both)",
    )
    p.add_argument(
        "--reps",
        type=int,
        default=None,
        help="timed calls per peer (default 30 on cuda, 10 on cpu)",
    )
    p.add_argument(
        "--warmup",
        type=int,
        default=None,
        help="untimed calls per peer before timing (default 5 on cuda, 2 on cpu)",
    )
    p.add_argument(
        "--seed", type=int, default=0, help="random seed of inputs and order (default 0)"
    )
    p.add_argument(
        "--sequential",
        action="store_true",
        help="time each peer's calls back to back instead of in random-order rounds",
    )
    p.add_argument(
        "--verbose",
        action="store_true",
        help="keep torch.compile's own log messages (autotuning choices that fail)",
    )
    p.add_argument(
        "--pass",
        dest="pass_",
        choices=["forward", "backward", "step"],
        default="forward",
        help="forward (default: the rows above), backward (y.backward(dy) on a kept graph) or "
        "step (forward + backward): eager PyTorch (fp32; tf32 too on GPUs) beside "
        "fused_linear's module, gradients checked against float64",
    )
    p.add_argument(
        "--module-precisions",
        default=None,
        help="--pass backward|step: fused_linear.FusedLinearLeakyReLU at these precisions "
        "(default strict,3xtf32,tf32 on cuda, strict on cpu; needs fused_linear on "
        "PYTHONPATH, else skipped with a note; empty: none)",
    )
    p.add_argument("--json", help="write the rows to this file")
    p.add_argument("--meta", help="write what ran (torch, device, BLAS, threads, method) here")
    a = p.parse_args(argv)
    a.shapes = [shape_arg(s) for s in a.shapes]
    if a.reps is None:
        a.reps = 30 if a.device == "cuda" else 10
    if a.warmup is None:
        a.warmup = 5 if a.device == "cuda" else 2
    if a.module_precisions is None:
        a.module_precisions = "strict,3xtf32,tf32" if a.device == "cuda" else "strict"
    if a.reps < 1 or a.warmup < 0 or a.threads < 0:
        p.error("--reps must be >= 1, --warmup and --threads >= 0")
    return a


ARGS = parse_args() if __name__ == "__main__" else None
if ARGS is not None and ARGS.device == "cpu" and ARGS.threads:
    # The BLAS behind torch reads these when it loads: set them before importing torch, so that
    # torch.set_num_threads and the BLAS agree (OpenBLAS's pthread build has its own pool).
    for var in ("OMP_NUM_THREADS",) + BLAS_THREAD_VARIABLES:
        os.environ.setdefault(var, str(ARGS.threads))

import torch  # noqa: E402  (after the thread variables above)
import torch.nn.functional as F  # noqa: E402


def log(text):
    print(text, flush=True)


# ------------------------------------------------------------------------- what runs where


def loaded_blas_libraries():
    """BLAS/LAPACK shared objects mapped into this process (Linux), resolved to real files:
    which BLAS torch's CPU products really call (Debian's torch calls libblas.so.3, whatever
    the system's alternative points to)."""
    names = ("blas", "lapack", "mkl", "blis", "openblas")
    found = []
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                base = os.path.basename(path).lower()
                if path.startswith("/") and any(n in base for n in names):
                    real = os.path.realpath(path)
                    if real not in found:
                        found.append(real)
    except OSError:
        pass
    return found


def describe(a):
    """What this run measures, for the console (lines starting with '#') and --meta."""
    info = dict(
        torch_version=torch.__version__,
        python=sys.version.split()[0],
        device=a.device,
        reps=a.reps,
        warmup=a.warmup,
        seed=a.seed,
        order="sequential" if a.sequential else "random-order rounds",
        multiplier=a.mult,
        slope=a.slope,
        compile=a.compile,
        torch_compile_available=hasattr(torch, "compile"),
    )
    info["pass"] = a.pass_
    if a.device == "cuda":
        info.update(
            gpu=torch.cuda.get_device_name(0),
            cuda=torch.version.cuda,
            timing="CUDA events around each call, after a synchronisation",
        )
    else:
        # A product first, so that the BLAS torch calls is loaded and shows in the mappings.
        torch.ones(8, 8) @ torch.ones(8, 8)
        config = torch.__config__.show()
        info.update(
            threads=torch.get_num_threads(),
            parallel_info=torch.__config__.parallel_info(),
            blas_info=re.findall(r"\b(?:BLAS|LAPACK)_INFO=[^,\s]+", config),
            blas_loaded=loaded_blas_libraries(),
            env={
                v: os.environ.get(v)
                for v in (
                    "OMP_NUM_THREADS",
                    "OPENBLAS_NUM_THREADS",
                    "MKL_NUM_THREADS",
                    "OMP_PROC_BIND",
                )
            },
            timing="time.perf_counter around each call",
        )
    return info


def print_description(info):
    log(f"# torch {info['torch_version']} (Python {info['python']}), device {info['device']}")
    if info["device"] == "cuda":
        log(f"# {info['gpu']}, CUDA {info['cuda']}")
    else:
        log(
            f"# torch threads: {info['threads']}; build: {', '.join(info['blas_info']) or '?'}; "
            f"BLAS loaded: {', '.join(info['blas_loaded']) or 'none found'}"
        )
        for line in info["parallel_info"].strip().splitlines():
            log(f"#   {line.strip()}")
    log(
        f"# timing: {info['timing']}; {info['reps']} timed calls per peer "
        f"({info['order']}), {info['warmup']} warm-up calls; seed {info['seed']}"
    )
    if (
        info["device"] == "cuda"
        and info["compile"] != "none"
        and not info["torch_compile_available"]
    ):
        log(
            f"# note: torch {info['torch_version']} has no torch.compile (it came with 2.0): "
            "the torch.compile rows are skipped"
        )


# ------------------------------------------------------------------------- timing


class Timer:
    """Times one call of a function on the device the way the perf program times ours."""

    def __init__(self, device):
        self.cuda = device == "cuda"

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def __call__(self, fn):
        if self.cuda:
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            return start.elapsed_time(stop)
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3


class Peer:
    """One way of computing the layer (or its bare product) for one shape."""

    def __init__(self, name, fn, tf32=False, full_output=True, cuda=True):
        self.name, self.fn, self.tf32, self.full_output = name, fn, tf32, full_output
        self.cuda = cuda
        self.times = []
        self.error = None
        self.rel_err = self.max_abs_err = None

    def reset(self):
        """Before each call, untimed (the training peers clear their gradients)."""

    def __call__(self):
        # TF32 is a process-wide switch read when the product is launched: set it for this call
        # only, so that peers timed in turn each get their own arithmetic.
        if not self.cuda:
            return self.fn()
        torch.backends.cuda.matmul.allow_tf32 = self.tf32
        try:
            return self.fn()
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False


def upper_median(times):
    t = sorted(times)
    return t[len(t) // 2]


def split_tf32(a):
    """a = hi + lo with hi exactly representable in TF32 (the low 13 mantissa bits cleared)."""
    hi = (a.view(torch.int32) & -8192).view(torch.float32)  # -8192 == ~0x1FFF
    return hi, a - hi


# ------------------------------------------------------------------------- one shape


def peers_for(shape, a, x, W, b):
    """The peers of one shape (the layer, or its bare product where full_output is False)."""
    mult, slope = a.mult, a.slope

    def eager():
        return F.leaky_relu(F.linear(x, W, b) * mult, slope)

    if a.device == "cpu":
        return [
            Peer(REFERENCE_PEER, eager, cuda=False),
            Peer("floor: fp32 product only", lambda: x @ W.t(), full_output=False, cuda=False),
        ]
    xb, Wb = x.bfloat16(), W.bfloat16()
    xh, xl = split_tf32(x)
    Wh, Wl = split_tf32(W)

    def three_tf32():
        y = xl @ Wh.t()
        y += xh @ Wl.t()
        y += xh @ Wh.t()
        return F.leaky_relu((y + b) * mult, slope)

    peers = [
        Peer(REFERENCE_PEER, eager),
        Peer("torch eager tf32", eager, tf32=True),
        Peer("floor: cuBLAS fp32 product only", lambda: x @ W.t(), full_output=False),
        Peer("floor: cuBLAS tf32 product only", lambda: x @ W.t(), tf32=True, full_output=False),
        Peer("floor: cuBLAS bf16 product only", lambda: xb @ Wb.t(), full_output=False),
        Peer("3xTF32 emulated, unfused", three_tf32, tf32=True),
    ]
    if hasattr(torch, "compile"):
        if not a.verbose:
            # max-autotune logs every candidate kernel that does not fit the GPU as an error.
            logging.getLogger("torch._inductor").setLevel(logging.CRITICAL)
        for mode in COMPILE_MODES[a.compile]:
            # A fresh compilation per shape and mode, static shapes (no dynamic kernels after
            # the first shape); compiled at the checked call, never timed.
            torch._dynamo.reset()
            layer = torch.compile(
                lambda x_, W_, b_: F.leaky_relu(F.linear(x_, W_, b_) * mult, slope),
                mode=mode,
                dynamic=False,
            )
            peers.append(Peer(f"torch.compile {mode} fp32", lambda f=layer: f(x, W, b)))
    return peers


def warm_up_and_time(live, a, timer, rng):
    """Warm-up (--warmup calls of every peer, and on GPUs at least 100 ms of them), then the
    timed calls into each peer's times."""
    cuda = a.device == "cuda"
    warm_start = time.perf_counter()
    i = 0
    while i < a.warmup or (cuda and time.perf_counter() - warm_start < 0.1):
        for peer in live:
            peer.reset()
            peer()
        if cuda and i % 16 == 15:
            timer.sync()  # bound the queue: the clock must see the GPU's time
        i += 1
    timer.sync()

    # Timed: rounds in a fresh random order (a drift of clocks or load touches every peer
    # alike, and no peer always follows the same one), or back to back with --sequential.
    def timed(peer):
        peer.reset()  # outside the timed region: gradients set to None, as zero_grad does
        return timer(peer)

    if a.sequential:
        for peer in live:
            peer.times = [timed(peer) for _ in range(a.reps)]
    else:
        order = list(live)
        for _ in range(a.reps):
            rng.shuffle(order)
            for peer in order:
                peer.times.append(timed(peer))


def checked(peers, shape, check):
    """The peers whose checked call ran (check(peer, output) records the errors); a failing peer
    is reported and left out."""
    live = []
    for peer in peers:
        try:
            peer.reset()
            check(peer, peer())
            live.append(peer)
        except Exception as ex:  # one failing peer must not hide the others
            first_line = (str(ex).strip().splitlines() or [""])[0]
            peer.error = f"{type(ex).__name__}: {first_line}"
            log(f"{shape} | {peer.name} | failed: {peer.error}")
    return live


def run_shape(shape, a, timer, rng):
    """Checks, warms up and times every peer of one shape; returns the JSON rows."""
    M, K, N = parse_shape(shape)
    dev = a.device
    with torch.no_grad():
        x = torch.rand(M, K, device=dev)
        layer = torch.nn.Linear(K, N, device=dev)  # W and b uniform +-1/sqrt(K), as in models
        W, b = layer.weight.detach(), layer.bias.detach()
        # In a dict, so that it is freed (cleared) before the timed calls.
        ref = dict(y=F.leaky_relu((x.double() @ W.double().t() + b.double()) * a.mult, a.slope))
        ref_norm = ref["y"].norm().item()
        peers = peers_for(shape, a, x, W, b)

        def check(peer, out):
            timer.sync()
            if peer.full_output:
                d = out.double() - ref["y"]
                peer.rel_err = d.norm().item() / ref_norm if ref_norm else d.norm().item()
                peer.max_abs_err = d.abs().max().item()

        # The checked call (compiles where it has to), then the warm-up and the timed calls.
        live = checked(peers, shape, check)
        ref.clear()
        warm_up_and_time(live, a, timer, rng)

    flops = 2.0 * M * N * K
    rows = []
    for peer in live:
        med, mn = upper_median(peer.times), min(peer.times)
        row = dict(
            shape=shape,
            peer=peer.name,
            median_ms=med,
            min_ms=mn,
            tflops=flops / (med * 1e-3) / 1e12,
            rel_err=peer.rel_err,
            max_abs_err=peer.max_abs_err,
        )
        rows.append(row)
        err = "-" if peer.rel_err is None else f"{peer.rel_err:.2e} | {peer.max_abs_err:.2e}"
        log(
            f"{shape} | {peer.name} | {med:.4f} ms (min {mn:.4f}) | "
            f"{row['tflops']:.3g} TFLOP/s | {err}"
        )
    return rows


# ------------------------------------------------------------------------- training passes


class TrainingPeer(Peer):
    """A layer's backward (--pass backward: y.backward(dy) on a graph kept from one forward)
    or training step (--pass step: forward, then backward) for one shape. `forward()` gives y;
    `params` are the tensors whose gradients the backward writes (x, W, b)."""

    def __init__(self, name, forward, params, dy, pass_, tf32=False, cuda=True, source="peer"):
        self.forward, self.params, self.dy, self.pass_ = forward, params, dy, pass_
        self.source, self.precision, self.ran = source, None, None
        self.y = None
        self.errors = {}
        super().__init__(name, self.run, tf32=tf32, cuda=cuda)

    def reset(self):
        for t in self.params:
            t.grad = None

    def run(self):
        if self.pass_ == "step" or self.y is None:
            self.y = self.forward()
        self.y.backward(self.dy, retain_graph=self.pass_ == "backward")
        return self.y


def module_peers(a, x, W, b, dy, pass_):
    """fused_linear's module (FusedLinearLeakyReLU) at each --module-precisions, with W and b
    copied in; [] with a note when fused_linear cannot be imported (PYTHONPATH=<build>/python)."""
    try:
        import fused_linear
    except ImportError as ex:
        log(f"# note: no fused_linear ({ex}): the module rows are skipped")
        return []
    peers = []
    for precision in [p for p in a.module_precisions.split(",") if p]:
        module = fused_linear.FusedLinearLeakyReLU(
            W.shape[1], W.shape[0], a.mult, a.slope, precision=precision
        ).to(a.device)
        with torch.no_grad():
            module.gemm.weight.copy_(W)
            module.gemm.bias.copy_(b)
        peer = TrainingPeer(
            f"fused_linear module {precision}",
            lambda m=module: m(x),
            [x, module.gemm.weight, module.gemm.bias],
            dy,
            pass_,
            cuda=a.device == "cuda",
            source="module",
        )
        peer.precision = precision
        info = fused_linear.run_info(x.detach(), W.detach(), b.detach(), a.mult, a.slope, precision)
        peer.ran = f"y={info['algorithm']}/{info['precision']}"
        peers.append(peer)
    return peers


def run_training_shape(shape, a, timer, rng):
    """--pass backward|step: eager PyTorch's layer and fused_linear's module, each checked
    against float64 gradients, warmed up and timed as run_shape does."""
    M, K, N = parse_shape(shape)
    dev, cuda = a.device, a.device == "cuda"
    layer = torch.nn.Linear(K, N, device=dev)
    W = layer.weight.detach().clone().requires_grad_(True)
    b = layer.bias.detach().clone().requires_grad_(True)
    x = torch.rand(M, K, device=dev).requires_grad_(True)
    dy = torch.rand(M, N, device=dev) * 2 - 1  # the loss's gradient, uniform [-1, 1)
    mult, slope = a.mult, a.slope

    def eager():
        return F.leaky_relu(F.linear(x, W, b) * mult, slope)

    peers = [TrainingPeer(REFERENCE_PEER, eager, [x, W, b], dy, a.pass_, cuda=cuda)]
    if cuda:
        peers.append(TrainingPeer("torch eager tf32", eager, [x, W, b], dy, a.pass_, tf32=True))
    peers += module_peers(a, x, W, b, dy, a.pass_)

    x64, W64, b64, dy64 = (t.detach().double() for t in (x, W, b, dy))
    y_ref = F.leaky_relu((x64 @ W64.t() + b64) * mult, slope)

    def rel(got, want):
        d = (got.detach().double() - want).norm().item()
        n = want.norm().item()
        return d / n if n else d

    def check(peer, y):
        timer.sync()
        # The gradients' reference takes the sign of z from the peer's own y (y > 0 exactly
        # where z > 0 for slope >= 0): where fp32 and float64 disagree on a z near 0 the two
        # masks differ, a forward rounding the y error already counts, not a backward's error.
        g = torch.where(y.detach() > 0, dy64, dy64 * slope) * mult
        grads = [t.grad for t in peer.params]
        peer.errors = dict(
            y=rel(y, y_ref),
            dx=rel(grads[0], g @ W64),
            dw=rel(grads[1], g.t() @ x64),
            db=rel(grads[2], g.sum(0)),
        )
        peer.rel_err = max(peer.errors.values())
        peer.max_abs_err = (y.detach().double() - y_ref).abs().max().item()

    live = checked(peers, shape, check)
    warm_up_and_time(live, a, timer, rng)
    for peer in live:
        peer.y = None  # the graph kept for --pass backward

    flops = (6.0 if a.pass_ == "step" else 4.0) * M * N * K
    rows = []
    for peer in live:
        med, mn = upper_median(peer.times), min(peer.times)
        row = dict(
            shape=shape,
            peer=peer.name,
            source=peer.source,
            precision=peer.precision,
            ran=peer.ran,
            median_ms=med,
            min_ms=mn,
            tflops=flops / (med * 1e-3) / 1e12,
            rel_err=peer.rel_err,
            **{f"rel_err_{k}": v for k, v in peer.errors.items()},
        )
        row["pass"] = a.pass_
        rows.append(row)
        errs = " ".join(f"{k} {v:.2e}" for k, v in peer.errors.items())
        log(
            f"{shape} | {a.pass_} | {peer.name} | {med:.4f} ms (min {mn:.4f}) | "
            f"{row['tflops']:.3g} TFLOP/s | {errs}"
        )
    return rows


def main(a):
    if a.device == "cuda" and not torch.cuda.is_available():
        log("torch_peers.py: no CUDA device visible to torch (use --device cpu for the host)")
        return 2
    if a.device == "cpu" and a.threads:
        torch.set_num_threads(a.threads)
    info = describe(a)
    print_description(info)
    timer = Timer(a.device)
    rng = random.Random(a.seed)
    torch.manual_seed(a.seed)  # then fresh inputs per shape, drawn in turn
    rows, failed = [], 0
    for shape in a.shapes:
        try:
            run = run_shape if a.pass_ == "forward" else run_training_shape
            rows += run(shape, a, timer, rng)
        except Exception as ex:  # e.g. out of memory at one shape: report, go on
            failed += 1
            log(f"{shape} | failed: {type(ex).__name__}: {ex}")
        if a.device == "cuda":
            torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)
            fh.write("\n")
    if a.meta:
        info["shapes"] = a.shapes
        with open(a.meta, "w") as fh:
            json.dump(info, fh, indent=1)
            fh.write("\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(ARGS))
