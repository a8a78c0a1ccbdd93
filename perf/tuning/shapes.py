# SPDX-License-Identifier: Apache-2.0
"""Seeded random layer shapes for the held-out study of auto's rule.

M log-uniform in [1, 16384], K and N log-uniform in [16, 65536]; a share of the extents moved off
multiples of 4 (the vectorised and TMA paths' edge); shapes whose memory or work exceeds the
bounds are drawn again, so that every path runs on the device in seconds. Each shape is assigned
to the fit set or the held-out set by the same seeded generator; perf/data/splits.csv keeps the
sets of the studies made (--csv prints a seed's rows in its schema).

    python3 perf/compare.py --tf32 --planning both \\
        $(PYTHONPATH=perf python3 -m tuning.shapes --seed 40 --count 24 --held-out 1)

Standard library only. The same seed gives the same shapes on any machine and Python 3.
"""
import argparse
import math
import random
import sys

# Memory a shape may need on the device: X, W, b, Y in fp32 plus the vendor 3xTF32 paths' split
# operands (2 (M + N) K floats) and partial sums; the H200 has 141 GB, the bound leaves room for
# PyTorch's peers in the same job. The host bound fits a 2-core machine's few GB and minutes.
LIMITS = {
    "cuda": dict(max_bytes=16 << 30, max_work=1 << 38),  # 2^38 multiply-adds: ~11 ms strict
    "cpu": dict(max_bytes=2 << 30, max_work=1 << 33),  # ~1 s per call on 2 cores
}
M_RANGE = (1, 16384)
KN_RANGE = (16, 65536)
OFF_FOUR = 0.25  # share of extents moved off multiples of 4


def log_uniform(rng, lo, hi):
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def extent(rng, lo, hi):
    v = max(lo, min(hi, log_uniform(rng, lo, hi)))
    if rng.random() < OFF_FOUR and v > 4:
        v += rng.choice([-3, -2, -1, 1, 2, 3])
        v = max(lo, min(hi, v))
    return v


def bytes_needed(M, K, N):
    floats = M * K + N * K + N + M * N + 2 * (M + N) * (K + 255)
    return 4 * floats


def draw(count, seed, device, held_out, max_bytes=None, max_work=None):
    limits = dict(LIMITS[device])
    if max_bytes is not None:
        limits["max_bytes"] = max_bytes
    if max_work is not None:
        limits["max_work"] = max_work
    rng = random.Random(seed)
    shapes, seen = [], set()
    attempts = 0
    while len(shapes) < count:
        attempts += 1
        if attempts > 1000 * count:
            raise SystemExit("tuning.shapes: the bounds leave too few shapes")
        M = extent(rng, *M_RANGE)
        K = extent(rng, *KN_RANGE)
        N = extent(rng, *KN_RANGE)
        if M * K * N > limits["max_work"] or bytes_needed(M, K, N) > limits["max_bytes"]:
            continue
        name = f"{M}x{K}x{N}"
        if name in seen:
            continue
        seen.add(name)
        shapes.append(
            dict(shape=name, M=M, K=K, N=N, split="held-out" if rng.random() < held_out else "fit")
        )
    return shapes, limits


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=80, help="shapes (default 80)")
    p.add_argument("--seed", type=int, default=21, help="seed (default 21)")
    p.add_argument(
        "--device",
        choices=sorted(LIMITS),
        default="cuda",
        help="bounds for the device (default cuda)",
    )
    p.add_argument(
        "--held-out",
        type=float,
        default=0.5,
        help="share of shapes held out from the fit (default 0.5)",
    )
    p.add_argument("--max-bytes", type=int, default=None, help="override the memory bound")
    p.add_argument(
        "--max-work", type=int, default=None, help="override the bound on M*N*K multiply-adds"
    )
    p.add_argument(
        "--csv",
        action="store_true",
        help="print the rows of perf/data/splits.csv (seed,shape,set) instead",
    )
    p.add_argument(
        "--split",
        choices=["all", "fit", "held-out"],
        default="all",
        help="which shapes to print (default all)",
    )
    args = p.parse_args(argv)
    if args.count < 1 or not 0 <= args.held_out <= 1:
        p.error("--count must be positive and --held-out in [0, 1]")
    shapes, limits = draw(
        args.count, args.seed, args.device, args.held_out, args.max_bytes, args.max_work
    )
    chosen = [s for s in shapes if args.split in ("all", s["split"])]
    if args.csv:
        print("\n".join(f"{args.seed},{s['shape']},{s['split']}" for s in chosen))
    else:
        print(" ".join(s["shape"] for s in chosen))
    return 0


if __name__ == "__main__":
    sys.exit(main())
