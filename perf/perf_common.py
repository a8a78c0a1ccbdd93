# SPDX-License-Identifier: Apache-2.0
"""The perf scripts' shared names, now in tuning.names: kept so that an older bundle's scripts
(scripts/build-cuda.sh copies this file beside compare.py) still import."""
from tuning.names import BLAS_THREAD_VARIABLES, REFERENCE_PEER, parse_shape, shape_arg  # noqa: F401
