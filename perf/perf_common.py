# SPDX-License-Identifier: Apache-2.0
"""What the perf scripts share: shapes spelled MxKxN, the reference peer's name and the BLAS
thread variables. Standard library only; the scripts import it from beside them (perf/, or the
device bundle, where scripts/device/build-cuda.sh copies it with compare.py and
torch_peers.py)."""
import argparse

# The PyTorch peer every row's speed is compared with (torch_peers.py's name for it).
REFERENCE_PEER = "torch eager fp32 (reference model)"
# The thread counts of the BLAS builds torch or libblas.so.3 may be (OpenBLAS's pthread build,
# BLIS, MKL); OpenMP builds, OpenBLAS's included, read OMP_NUM_THREADS.
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS", "MKL_NUM_THREADS")


def parse_shape(text):
    """'MxKxN' -> (M, K, N), positive integers; argparse.ArgumentTypeError otherwise."""
    try:
        dims = tuple(int(v) for v in text.lower().split("x"))
    except ValueError:
        dims = ()
    if len(dims) != 3 or min(dims) < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a shape MxKxN of positive integers")
    return dims


def shape_arg(text):
    """A command-line shape, validated and spelled as the perf program and the peers do
    ('01X2x3' -> '1x2x3')."""
    return "x".join(str(d) for d in parse_shape(text))
