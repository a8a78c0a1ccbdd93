#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Where ModelNew's time goes beside the reference's, one KernelBench problem on one GPU:

    PYTHONPATH=build/<preset>/python python3 perf/kernelbench_profile.py [--problem seed]

1. The kernels of one call of each model (torch.profiler): name, duration, and the gap from the
   start of the call to each kernel, so an extra kernel or a late launch shows.
2. kernelbench_eval.py's timing (L2 flush, events, synchronisation) in interleaved rounds
   (A B C ... A B C ...), so clock and temperature drift touch every model alike; the median
   of the round means and the GPU's clock and power before and after.
"""
import argparse
import statistics
import subprocess

import torch
import torch.nn.functional as F

from kernelbench_eval import PROBLEMS, L2Flush, Model, build, get_inputs, model_new_class, \
    set_seed, time_model


def gpu_state():
    try:
        return subprocess.run(
            ["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu",
             "--format=csv,noheader"], capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception as e:  # noqa: BLE001  (a diagnostic: say so and go on)
        return f"nvidia-smi: {e}"


def kernels_of_one_call(name, fn, x, flush):
    from torch.profiler import ProfilerActivity, profile
    with torch.no_grad():
        fn(x)
        torch.cuda.synchronize()
        flush()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            fn(x)
            torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    cpu = [e for e in prof.events() if e.device_type != torch.autograd.DeviceType.CUDA]
    t0 = min(e.time_range.start for e in cpu) if cpu else 0
    print(f"--- {name}: kernels of one call (us from the first host event)")
    for e in sorted(events, key=lambda e: e.time_range.start):
        print(f"  +{e.time_range.start - t0:9.1f}  {e.time_range.elapsed_us():9.1f}  {e.name[:110]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problem", default="seed", choices=sorted(PROBLEMS))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=21)
    ap.add_argument("--flush-mb", type=float, default=256.0)
    ap.add_argument("--no-kernels", action="store_true", help="timing only")
    args = ap.parse_args()
    device = torch.device("cuda")
    p = PROBLEMS[args.problem]
    set_seed(42, device)
    x = get_inputs(p)[0].to(device)
    flush = L2Flush(device, args.flush_mb)
    model = build(Model, p, device).eval()
    w, b = model.gemm.weight.detach(), model.gemm.bias.detach()
    m, s = p["multiplier"], p["negative_slope"]
    models = {"eager": model,
              "addmm alone": lambda x: torch.addmm(b, x, w.t()),
              "F.linear alone": lambda x: F.linear(x, w, b),
              "mm alone": lambda x: torch.mm(x, w.t())}
    for algorithm in ("auto", "vendor_lt", "vendor", "vendor_prefill"):
        models[f"ModelNew strict@{algorithm}"] = build(model_new_class("strict", algorithm), p,
                                                      device).eval()
    # Each model holds its own W (same values, another allocation): each path on the other's W
    # too, so that where the tensors lie is told apart from what the paths do.
    new = models["ModelNew strict@auto"]
    w2, b2 = new.gemm.weight.detach(), new.gemm.bias.detach()
    models["eager ops on ModelNew's W"] = lambda x: F.leaky_relu(F.linear(x, w2, b2) * m, s)
    models["op on eager's W"] = lambda x: torch.ops.fused_linear.linear_leaky_relu(
        x, w, b, m, s, "strict", "auto")
    models["eager ops on a copy of W"] = lambda x, w3=w.clone(), b3=b.clone(): F.leaky_relu(
        F.linear(x, w3, b3) * m, s)
    for name, fn in models.items():
        if not args.no_kernels:
            kernels_of_one_call(name, fn, x, flush)

    print(f"--- interleaved rounds: {args.rounds} x {args.calls} calls, flush "
          f"{args.flush_mb} MB; GPU before: {gpu_state()}")
    means = {name: [] for name in models}
    for r in range(args.rounds):
        for name, fn in models.items():
            means[name].append(statistics.fmean(time_model(fn, [x], device, 2, args.calls, flush)))
        print(f"  round {r}: " + "  ".join(f"{n}={v[-1]:.4f}" for n, v in means.items()),
              flush=True)
    print(f"GPU after: {gpu_state()}")
    eager = statistics.median(means["eager"])
    for name, v in means.items():
        med = statistics.median(v)
        print(f"{name:28s} median {med:.4f} ms  min {min(v):.4f}  eager/this {eager / med:.4f}")


if __name__ == "__main__":
    main()
