# SPDX-License-Identifier: Apache-2.0
"""The reference model in plain PyTorch (KernelBench level 2, Gemm_Multiply_LeakyReLU).

``fused_linear.FusedLinearLeakyReLU`` is its drop-in: built after the same seed from the same
arguments it holds the same parameters under the same state_dict keys. The Python tests and
``perf/kernelbench_eval.py`` compare against this one definition.
"""
from torch import nn

__all__ = ["Model"]


class Model(nn.Module):
    """A GEMM, a multiplication by a scalar, a LeakyReLU: ``nn.Linear -> * multiplier ->
    nn.LeakyReLU``."""

    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.leaky_relu = nn.LeakyReLU(negative_slope)

    def forward(self, x):
        return self.leaky_relu(self.gemm(x) * self.multiplier)
