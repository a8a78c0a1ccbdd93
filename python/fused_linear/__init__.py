# SPDX-License-Identifier: Apache-2.0
"""FusedLinear from PyTorch: Y = LeakyReLU(multiplier * (x @ weight.T + bias), negative_slope).

    import fused_linear
    model = fused_linear.FusedLinearLeakyReLU(8192, 8192, 2.0, 0.1, precision="3xtf32").cuda()
    y = model(x)

The operator is ``torch.ops.fused_linear.linear_leaky_relu`` (CPU, CUDA, Meta and Autograd
kernels); :func:`linear_leaky_relu` is the same call with Python defaults. Its backward is the
operator ``torch.ops.fused_linear.linear_leaky_relu_backward`` (CPU, CUDA and Meta kernels),
:func:`linear_leaky_relu_backward` from Python.
"""
import atexit
import os
from pathlib import Path

import torch

__all__ = [
    "linear_leaky_relu",
    "linear_leaky_relu_backward",
    "run_info",
    "status",
    "initialize",
    "finalize",
    "FusedLinearLeakyReLU",
    "library_path",
]


def _find_library():
    # FUSED_LINEAR_TORCH_LIBRARY names the shared library explicitly (an installed package whose
    # library lives elsewhere); by default it is beside this file, where the build puts it.
    explicit = os.environ.get("FUSED_LINEAR_TORCH_LIBRARY")
    if explicit:
        return Path(explicit)
    here = Path(__file__).resolve().parent
    for name in (
        "libfused_linear_torch.so",
        "libfused_linear_torch.dylib",
        "fused_linear_torch.dll",
    ):
        if (here / name).exists():
            return here / name
    raise ImportError(
        f"fused_linear: the operator library libfused_linear_torch.so is not in {here}; build "
        "it with -DFusedLinear_ENABLE_TORCH=ON and put <build>/python on PYTHONPATH (or set "
        "FUSED_LINEAR_TORCH_LIBRARY)"
    )


library_path = _find_library()
torch.ops.load_library(str(library_path))
_ops = torch.ops.fused_linear


def linear_leaky_relu(
    x, weight, bias, multiplier, negative_slope, precision="strict", algorithm="auto"
):
    """``F.leaky_relu(F.linear(x, weight, bias) * multiplier, negative_slope)`` in one call.

    x [M, K], weight [N, K], bias [N]: float32 or float64 (float16 and bfloat16 under
    torch.autocast, which runs them in float32), one device (CPU or CUDA; on CUDA it runs on
    PyTorch's current stream; on the CPU from any thread, one call at a time). precision:
    "strict" (IEEE fp32), "3xtf32" (fp32-accurate on tensor cores), "tf32"; algorithm: "auto"
    or one of the library's paths. Non-contiguous tensors are copied to contiguous first.
    Differentiable in x, weight and bias: the backward is :func:`linear_leaky_relu_backward`
    at the same precision, from a bool mask of the pre-activation's sign that the forward
    saves (one byte per output element; the output may be modified in place before backward()).
    """
    return _ops.linear_leaky_relu(
        x, weight, bias, float(multiplier), float(negative_slope), precision, algorithm
    )


def linear_leaky_relu_backward(
    grad_y,
    x,
    weight,
    saved,
    multiplier,
    negative_slope,
    saved_is_output=True,
    precision="strict",
    algorithm="auto",
    output_mask=(True, True, True),
):
    """The gradient of :func:`linear_leaky_relu`: ``(grad_x, grad_weight, grad_bias)`` for the
    upstream gradient ``grad_y`` [M, N], as PyTorch's autograd computes them for the reference
    model; an output ``output_mask`` leaves out is None.

    ``saved`` [M, N] is the forward's output (``saved_is_output=True``; negative_slope >= 0),
    its pre-activation ``z = multiplier * (x @ weight.T + bias)`` (``saved_is_output=False``,
    any slope), which :func:`linear_leaky_relu` computes with ``negative_slope=1``, or a bool
    mask of ``z > 0`` (any slope; ``saved_is_output`` is then not read). precision:
    "strict", "3xtf32", "tf32" (on CUDA; the host computes strict); algorithm: "auto",
    "vendor", "vendor_lt" or "fused_sm90" (the library's Hopper 3xtf32 kernels).
    Non-contiguous tensors are copied to contiguous first.
    """
    return _ops.linear_leaky_relu_backward(
        grad_y,
        x,
        weight,
        saved,
        float(multiplier),
        float(negative_slope),
        bool(saved_is_output),
        precision,
        algorithm,
        [bool(b) for b in output_mask],
    )


def run_info(x, weight, bias, multiplier, negative_slope, precision="strict", algorithm="auto"):
    """What the library runs for these arguments (it runs them once): a dict with the keys
    algorithm, precision, gemm, execution_space (the Kokkos execution space the call ran on,
    from this thread) and note (why any of them differs from the request)."""
    text = _ops.run_info(
        x, weight, bias, float(multiplier), float(negative_slope), precision, algorithm
    )
    return dict(item.split("=", 1) for item in text.split(";", 4))


def status():
    """The extension's Kokkos: initialised, by whom, host threads, CUDA device, versions."""
    out = {}
    for item in _ops._status().split(";"):
        key, value = item.split("=", 1)
        out[key] = int(value) if value.lstrip("-").isdigit() else value
    return out


def initialize(num_threads=None, device=None):
    """Initialises Kokkos now (otherwise the first call does): num_threads host threads
    (default: torch.get_num_threads(), or FUSED_LINEAR_NUM_THREADS), CUDA device index (default:
    the first CUDA call's). Nothing happens when Kokkos is initialised already."""
    _ops._initialize(
        -1 if num_threads is None else int(num_threads), -1 if device is None else int(device)
    )


def finalize():
    """Refuses new calls, waits for those other threads have in flight, releases the cached
    plans and Kokkos instances and finalises Kokkos if this extension initialised it. Runs at
    interpreter exit; afterwards the op refuses (Kokkos cannot start twice in a process)."""
    _ops._finalize()


# Before the interpreter tears down torch (CUDA's caching allocator, the runtime): Kokkos'
# device memory and the plans' must go while CUDA is still up.
atexit.register(finalize)

from .module import FusedLinearLeakyReLU  # noqa: E402  (needs the op loaded)
