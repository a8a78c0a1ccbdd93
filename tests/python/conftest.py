# SPDX-License-Identifier: Apache-2.0
"""Shared helpers of the fused_linear tests: the reference model and the library's error bounds.

Run through ctest (which puts <build>/python on PYTHONPATH), or by hand:
    PYTHONPATH=build/host/python python3 -m pytest tests/python
"""
import math

import pytest
import torch
import torch.nn.functional as F

import fused_linear  # noqa: F401  (fails the collection clearly when the build is not on the path)


def eager(x, w, b, m, s):
    """The reference model's arithmetic in the inputs' dtype: what the op must reproduce."""
    return F.leaky_relu(F.linear(x, w, b) * m, s)


def reference64(x, w, b, m, s):
    """The exact-enough reference: float64 on the CPU from the same (rounded) inputs."""
    x, w, b = (t.detach().double().cpu() for t in (x, w, b))
    return F.leaky_relu(F.linear(x, w, b) * m, s)


def unit_roundoff(dtype):
    return 2.0**-24 if dtype == torch.float32 else 2.0**-53


def strict_bound(x, w, b, m, s):
    """Per-element worst case of a K-term dot product in the inputs' precision, any summation
    order: (K + 1) u (|x| |w|^T + |b|) for the sum and bias, scaled by |m| and, where negative,
    |slope|, plus a few u of |result| for the scale and the slope products (Higham's gamma_n,
    n u / (1 - n u) ~ n u here)."""
    u = unit_roundoff(x.dtype)
    k = x.shape[1]
    magnitude = F.linear(
        x.detach().double().abs().cpu(),
        w.detach().double().abs().cpu(),
        b.detach().double().abs().cpu(),
    )
    return (
        (k + 3) * u * abs(m) * max(1.0, abs(s)) * magnitude
        + 4 * u * reference64(x, w, b, m, s).abs()
        + 1e-300
    )


def assert_strict(y, x, w, b, m, s):
    """y within the strict bound of the float64 reference, element by element."""
    ref = reference64(x, w, b, m, s)
    assert y.shape == ref.shape and y.dtype == x.dtype
    err = (y.detach().double().cpu() - ref).abs()
    bound = strict_bound(x, w, b, m, s)
    worst = (err / bound).max().item() if err.numel() else 0.0
    assert worst <= 1.0, f"error {worst:.3g} x the strict bound (max abs error {err.max():.3g})"


def normwise_error(y, x, w, b, m, s):
    ref = reference64(x, w, b, m, s)
    return ((y.detach().double().cpu() - ref).norm() / ref.norm().clamp_min(1e-300)).item()


def tf32x3_bound(k):
    """The library's 3xTF32 bound (perf/perf_linear_leaky_relu.cpp): its ranges' fp32 sums,
    sqrt(K) u, on top of a per-range error below 1.5e-6."""
    return 1.5e-6 + math.sqrt(max(k, 1)) * 2.0**-24


TF32_BOUND = 1.5e-3  # 5x the measured 2.9e-4 of inputs rounded to 10 mantissa bits


def make_inputs(m, k, n, dtype=torch.float32, device="cpu", seed=0):
    """X uniform in [0, 1) as the KernelBench inputs, W and b as nn.Linear initialises them."""
    g = torch.Generator().manual_seed(seed)
    bound = 1.0 / math.sqrt(k) if k else 0.0
    x = torch.rand(m, k, generator=g, dtype=torch.float64)
    w = (torch.rand(n, k, generator=g, dtype=torch.float64) * 2 - 1) * bound
    b = (torch.rand(n, generator=g, dtype=torch.float64) * 2 - 1) * max(bound, 0.5)
    return tuple(t.to(dtype=dtype, device=device) for t in (x, w, b))


@pytest.fixture
def op():
    return torch.ops.fused_linear.linear_leaky_relu
