# SPDX-License-Identifier: Apache-2.0
"""The drop-in module for the reference model (Linear -> * multiplier -> LeakyReLU)."""
import torch
from torch import nn

__all__ = ["FusedLinearLeakyReLU"]


class FusedLinearLeakyReLU(nn.Module):
    """``leaky_relu(gemm(x) * multiplier, negative_slope)`` as one FusedLinear call.

    A drop-in for the reference model, :class:`fused_linear.reference.Model`
    (``nn.Linear -> * multiplier -> nn.LeakyReLU``).

    The parameters live in an ``nn.Linear`` named ``gemm``, made the same way: the same
    initialisation drawing the same random numbers (a model built after the same seed has the
    reference's weights) and the same state_dict keys, ``gemm.weight`` and ``gemm.bias``.
    Inputs of shape [..., in_features]; leading dimensions are flattened for the call. The
    backward is the library's gradient at the module's precision, from a bool mask of the
    pre-activation's sign the forward saves (one byte per output element).
    """

    def __init__(
        self,
        in_features,
        out_features,
        multiplier,
        negative_slope,
        precision="strict",
        algorithm="auto",
        device=None,
        dtype=None,
    ):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=True, device=device, dtype=dtype)
        self.multiplier = float(multiplier)
        self.negative_slope = float(negative_slope)
        self.precision = precision
        self.algorithm = algorithm

    def forward(self, x):
        rows = x.reshape(-1, x.shape[-1]) if x.dim() != 2 else x
        y = torch.ops.fused_linear.linear_leaky_relu(
            rows,
            self.gemm.weight,
            self.gemm.bias,
            self.multiplier,
            self.negative_slope,
            self.precision,
            self.algorithm,
        )
        return y if x.dim() == 2 else y.reshape(*x.shape[:-1], y.shape[-1])

    def extra_repr(self):
        return (
            f"multiplier={self.multiplier}, negative_slope={self.negative_slope}, "
            f"precision={self.precision!r}, algorithm={self.algorithm!r}"
        )
