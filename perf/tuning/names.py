# SPDX-License-Identifier: Apache-2.0
"""How the perf tools spell things: shapes MxKxN, the reference peer's name and the BLAS thread
variables. Standard library only and imports nothing of the package: the tuning tools, and the
scripts beside the package (compare.py, torch_peers.py, kernelbench_eval.py), read it alike."""
import argparse

# The PyTorch peer every row's speed is compared with (torch_peers.py's name for it).
REFERENCE_PEER = "torch eager fp32 (reference model)"
# The thread counts of the BLAS builds torch or libblas.so.3 may be (OpenBLAS's pthread build,
# BLIS, MKL); OpenMP builds, OpenBLAS's included, read OMP_NUM_THREADS.
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS", "MKL_NUM_THREADS")


def parse_shape(text):
    """'MxKxN' -> (M, K, N), positive integers; ValueError otherwise."""
    try:
        dims = tuple(int(v) for v in text.lower().split("x"))
    except ValueError:
        dims = ()
    if len(dims) != 3 or min(dims) < 1:
        raise ValueError(f"'{text}' is not a shape MxKxN of positive integers")
    return dims


def shape_name(dims):
    """(M, K, N) -> 'MxKxN'."""
    return "x".join(str(d) for d in dims)


def shape_arg(text):
    """A command-line shape (argparse's type), validated and spelled as the perf program and the
    peers do ('01X2x3' -> '1x2x3')."""
    try:
        return shape_name(parse_shape(text))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def dims_arg(text):
    """A command-line shape (argparse's type) as (M, K, N)."""
    try:
        return parse_shape(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
