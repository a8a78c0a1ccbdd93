# SPDX-License-Identifier: Apache-2.0
"""The Meta kernel: meta and fake tensors, torch.library.opcheck and torch.compile where this
PyTorch has them (opcheck: 2.4+, torch.compile: 2.0+; skipped with the reason otherwise)."""
import pytest
import torch

import fused_linear
from conftest import make_inputs

OP = torch.ops.fused_linear.linear_leaky_relu


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_meta_tensors(dtype):
    x = torch.empty(7, 33, device="meta", dtype=dtype)
    w = torch.empty(12, 33, device="meta", dtype=dtype)
    b = torch.empty(12, device="meta", dtype=dtype)
    y = OP(x, w, b, 2.0, 0.1)
    assert y.device.type == "meta" and y.shape == (7, 12) and y.dtype == dtype


def test_meta_checks_like_the_real_kernel():
    x = torch.empty(7, 33, device="meta")
    with pytest.raises(ValueError, match="extents do not match"):
        OP(x, torch.empty(12, 32, device="meta"), torch.empty(12, device="meta"), 2.0, 0.1)
    with pytest.raises(TypeError, match="one dtype"):
        OP(
            x,
            torch.empty(12, 33, device="meta", dtype=torch.float64),
            torch.empty(12, device="meta"),
            2.0,
            0.1,
        )


def test_fake_tensor_mode():
    fake_tensor = pytest.importorskip("torch._subclasses.fake_tensor")
    x, w, b = make_inputs(5, 16, 3)
    with fake_tensor.FakeTensorMode() as mode:
        fx, fw, fb = (mode.from_tensor(t) for t in (x, w, b))
        y = OP(fx, fw, fb, 2.0, 0.1)
        assert isinstance(y, fake_tensor.FakeTensor)
        assert y.shape == (5, 3) and y.device == x.device and y.dtype == x.dtype


def _opcheck_samples(device):
    x, w, b = make_inputs(9, 24, 6, device=device)
    yield (x, w, b, 2.0, 0.1)
    yield (x.double(), w.double(), b.double(), -1.0, 0.3, "strict", "auto")
    yield tuple(t.clone().requires_grad_() for t in (x, w, b)) + (2.0, 0.1)
    yield (x[:, ::2], w[:, ::2], b, 0.5, 0.0)  # non-contiguous inputs


@pytest.mark.skipif(
    not hasattr(torch.library, "opcheck"),
    reason=f"torch.library.opcheck needs PyTorch 2.4+ (this is {torch.__version__})",
)
def test_opcheck_cpu():
    for args in _opcheck_samples("cpu"):
        torch.library.opcheck(OP, args)


@pytest.mark.skipif(
    not hasattr(torch, "compile"),
    reason=f"torch.compile needs PyTorch 2.0+ (this is {torch.__version__})",
)
def test_compile_traces_the_op_cpu():
    # aot_eager: Dynamo and AOTAutograd trace through the Meta and Autograd kernels, with no C++
    # compiler needed (inductor's own code generation is exercised on CUDA, test_cuda.py).
    model = fused_linear.FusedLinearLeakyReLU(24, 6, 2.0, 0.1)
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    x = torch.rand(9, 24, requires_grad=True)
    y = compiled(x)
    assert torch.allclose(y, model(x), atol=1e-6)
    y.sum().backward()
    assert x.grad is not None and model.gemm.weight.grad is not None
    dynamic = torch.compile(model, backend="aot_eager", fullgraph=True, dynamic=True)
    for rows in (3, 17):
        x = torch.rand(rows, 24)
        assert torch.allclose(dynamic(x), model(x), atol=1e-6)
