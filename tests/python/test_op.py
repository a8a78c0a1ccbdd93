# SPDX-License-Identifier: Apache-2.0
"""The operator on CPU tensors: values against the reference within the library's bounds, over
shapes, strides, dtypes, special values and empty tensors; its errors; gradients."""
import threading

import pytest
import torch

import fused_linear
from conftest import assert_strict, eager, make_inputs

M_, S_ = 2.0, 0.1


@pytest.mark.parametrize(
    "shape",
    [
        (1, 1, 1),
        (7, 13, 5),
        (128, 1024, 512),
        (33, 257, 65),
        (2, 4096, 3),
        (300, 16, 200),
        (1, 1000, 17),
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_values(op, shape, dtype):
    x, w, b = make_inputs(*shape, dtype=dtype)
    y = op(x, w, b, M_, S_)
    assert_strict(y, x, w, b, M_, S_)
    # And beside eager PyTorch in the same dtype (both within the bound of the float64 truth).
    assert torch.allclose(y, eager(x, w, b, M_, S_), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize(
    "m, s", [(2.0, 0.1), (-1.5, 0.2), (0.5, 0.0), (1.0, -0.5), (0.0, 0.1), (3.0, 1.0), (1.0, 2.5)]
)
def test_multiplier_and_slope(op, m, s):
    x, w, b = make_inputs(40, 96, 24, seed=3)
    x = x - 0.5  # both signs before the activation
    assert_strict(op(x, w, b, m, s), x, w, b, m, s)


@pytest.mark.parametrize("algorithm", ["auto", "vendor", "vendor_prefill", "fused", "fused_skinny"])
def test_host_algorithms(algorithm):
    x, w, b = make_inputs(64, 300, 48, seed=5)
    y = fused_linear.linear_leaky_relu(x, w, b, M_, S_, algorithm=algorithm)
    assert_strict(y, x, w, b, M_, S_)
    info = fused_linear.run_info(x, w, b, M_, S_, algorithm=algorithm)
    if algorithm != "auto":
        assert info["algorithm"] == algorithm, info


@pytest.mark.parametrize("precision", ["tf32", "3xtf32"])
def test_tensor_core_precisions_on_the_host_run_strict(precision):
    # On the host no path computes TF32 products; under auto the precision is a floor, so the
    # more accurate strict path runs, and RunInfo says so.
    x, w, b = make_inputs(50, 200, 30, seed=6)
    assert_strict(
        fused_linear.linear_leaky_relu(x, w, b, M_, S_, precision=precision), x, w, b, M_, S_
    )
    info = fused_linear.run_info(x, w, b, M_, S_, precision=precision)
    assert info["precision"] == "strict" and info["note"], info


def _strided_cases():
    x, w, b = make_inputs(37, 64, 29, seed=7)
    big = torch.rand(50, 200)
    yield "transposed weight", x, w.t().contiguous().t(), b
    yield "column-sliced x", big[:37, ::3][:, :64], w, b
    yield "row offset x", big[5:42, 10:74], w, b
    yield "strided bias", x, w, torch.rand(58)[::2]
    yield "expanded x (stride 0)", torch.rand(1, 64).expand(37, 64), w, b
    yield "fortran-order x", x.t().contiguous().t(), w, b
    yield "size-1 dims with odd strides", torch.rand(64, 1).t(), w, b


@pytest.mark.parametrize("case", list(_strided_cases()), ids=lambda c: c[0])
def test_non_contiguous_inputs(op, case):
    _, x, w, b = case
    before = [t.clone() for t in (x, w, b)]
    y = op(x, w, b, M_, S_)
    assert_strict(y, x, w, b, M_, S_)
    assert y.is_contiguous()
    for t, old in zip((x, w, b), before):
        assert torch.equal(t, old)  # inputs are read, never written


def test_empty_shapes(op):
    x, w, b = make_inputs(0, 16, 8)
    assert op(x, w, b, M_, S_).shape == (0, 8)
    x, w, b = make_inputs(5, 16, 0)
    assert op(x, w, b, M_, S_).shape == (5, 0)
    x, w, b = make_inputs(0, 0, 0)
    assert op(x, w, b, M_, S_).shape == (0, 0)
    # K = 0: nothing to sum; every row is LeakyReLU(m * b).
    x, w, b = make_inputs(4, 0, 6)
    b = torch.tensor([1.0, -2.0, 0.0, 3.5, -0.25, 7.0])
    y = op(x, w, b, M_, S_)
    assert torch.equal(y, torch.nn.functional.leaky_relu(b * M_, S_).expand(4, 6))


def test_special_values(op):
    x, w, b = make_inputs(6, 32, 10, seed=8)
    w = w.abs() + 0.01  # positive weights: +inf in x gives +inf, -inf gives -inf ...
    w[3, 0] = 0.0  # ... except where it meets a zero weight: inf * 0 = NaN
    x[0, 5] = float("nan")
    x[1, 0] = float("inf")
    x[2, 0] = -float("inf")
    x[4, 7] = 3e38  # overflow to inf in the sum
    ref = eager(x, w, b, M_, S_)
    y = op(x, w, b, M_, S_)
    assert torch.equal(torch.isnan(y), torch.isnan(ref))
    assert torch.isnan(y[0]).all() and torch.isnan(y[1, 3])
    inf = torch.isinf(ref)
    assert torch.equal(torch.isinf(y), inf) and torch.equal(y[inf], ref[inf])
    finite = torch.isfinite(ref)
    assert torch.allclose(y[finite], ref[finite], rtol=1e-5, atol=1e-6)


def test_errors(op):
    x, w, b = make_inputs(8, 16, 4)
    with pytest.raises(ValueError, match=r"^FusedLinear::linear_leaky_relu: extents do not match"):
        op(x, w[:, :15], b, M_, S_)
    with pytest.raises(ValueError, match=r"^FusedLinear::linear_leaky_relu: extents do not match"):
        op(x, w, b[:3], M_, S_)
    with pytest.raises(ValueError, match="x must be 2-D"):
        op(x[0], w, b, M_, S_)
    with pytest.raises(ValueError, match="bias must be 1-D"):
        op(x, w, b[None], M_, S_)
    with pytest.raises(TypeError, match="one dtype"):
        op(x.double(), w, b, M_, S_)
    with pytest.raises(TypeError, match="float32 or float64"):
        op(x.half(), w.half(), b.half(), M_, S_)
    with pytest.raises(TypeError, match="float32 or float64"):
        op(x.long(), w.long(), b.long(), M_, S_)
    with pytest.raises(
        ValueError, match=r"^FusedLinear::linear_leaky_relu: multiplier must be finite"
    ):
        op(x, w, b, float("inf"), S_)
    with pytest.raises(
        ValueError, match=r"^FusedLinear::linear_leaky_relu: negative_slope must be finite"
    ):
        op(x, w, b, M_, float("nan"))
    with pytest.raises(
        ValueError, match=r"^FusedLinear::precision_from_string: unknown precision 'fp16'"
    ):
        op(x, w, b, M_, S_, "fp16")
    with pytest.raises(ValueError, match=r"^FusedLinear::algorithm_from_string: unknown algorithm"):
        op(x, w, b, M_, S_, "strict", "fastest")
    # A path this build or backend cannot run is refused by name, not replaced silently.
    with pytest.raises(ValueError, match=r"^FusedLinear::linear_leaky_relu: .*fused_sm90"):
        op(x, w, b, M_, S_, "3xtf32", "fused_sm90")
    with pytest.raises(ValueError, match="one device"):
        op(x, w.to("meta"), b, M_, S_)


def test_python_wrapper_matches_the_op(op):
    x, w, b = make_inputs(9, 20, 7)
    assert torch.equal(fused_linear.linear_leaky_relu(x, w, b, 2, 0.1), op(x, w, b, 2.0, 0.1))


def test_calls_from_another_thread():
    # Calls from other threads than the initialising one compute too (on the host pool, one
    # at a time: tests/python/test_concurrency.py has the details).
    x, w, b = make_inputs(32, 128, 16, seed=9)
    fused_linear.linear_leaky_relu(x, w, b, M_, S_)  # initialised here, on the main thread
    results, errors = {}, []

    def work(i):
        try:
            results[i] = fused_linear.linear_leaky_relu(x, w, b, M_, S_)
        except Exception as e:  # noqa: BLE001  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for y in results.values():
        assert_strict(y, x, w, b, M_, S_)


# ------------------------------------------------------------------ gradients
@pytest.mark.parametrize("m, s", [(2.0, 0.1), (-0.7, 0.0), (1.3, -0.4), (0.5, 1.0)])
def test_gradcheck(op, m, s):
    torch.manual_seed(0)
    x = (torch.rand(6, 9, dtype=torch.float64) - 0.5).requires_grad_()
    w = (torch.rand(5, 9, dtype=torch.float64) - 0.5).requires_grad_()
    b = (torch.rand(5, dtype=torch.float64) - 0.5).requires_grad_()
    assert torch.autograd.gradcheck(lambda x_, w_, b_: op(x_, w_, b_, m, s), (x, w, b))


def test_gradients_match_the_reference(op):
    x, w, b = make_inputs(16, 40, 12, seed=10)
    x = x - 0.5
    ours = [t.clone().requires_grad_() for t in (x, w, b)]
    refs = [t.clone().double().requires_grad_() for t in (x, w, b)]
    dy = torch.randn(16, 12)
    op(*ours, M_, S_).backward(dy)
    eager(*refs, M_, S_).backward(dy.double())
    for mine, ref in zip(ours, refs):
        assert torch.allclose(mine.grad.double(), ref.grad, rtol=1e-4, atol=1e-5)


def test_gradient_of_some_inputs_only(op):
    x, w, b = make_inputs(4, 8, 3, seed=11)
    w.requires_grad_()
    y = op(x, w, b, M_, S_)
    assert y.requires_grad
    y.sum().backward()
    assert w.grad is not None and x.grad is None and b.grad is None
    assert not op(x, w.detach(), b, M_, S_).requires_grad
    with torch.no_grad():
        assert not op(x, w, b, M_, S_).requires_grad


@pytest.mark.parametrize("s", [0.1, 0.0, -0.3])
def test_output_modified_in_place_before_backward(s):
    # The reference model saves what its backward needs, not its output: y += r after the
    # forward, then backward, works there, and must here with the same gradients.
    torch.manual_seed(12)
    ours = fused_linear.FusedLinearLeakyReLU(30, 20, M_, s, dtype=torch.float64)
    gemm = ours.gemm
    x = (torch.rand(10, 30, dtype=torch.float64) - 0.5).requires_grad_()
    x_ref = x.detach().clone().requires_grad_()
    r = torch.rand(10, 20, dtype=torch.float64)
    y = ours(x)
    y += r
    y.relu_()
    y.sum().backward()
    grads = [t.grad.clone() for t in (x, gemm.weight, gemm.bias)]
    gemm.zero_grad()
    y_ref = torch.nn.functional.leaky_relu(gemm(x_ref) * M_, s)
    y_ref += r
    y_ref.relu_()
    y_ref.sum().backward()
    for mine, ref in zip(grads, (x_ref.grad, gemm.weight.grad, gemm.bias.grad)):
        assert torch.allclose(mine, ref, rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------ autocast
LOW = [torch.bfloat16] + ([torch.float16] if not torch.__version__.startswith("1.") else [])


@pytest.mark.parametrize("low", LOW, ids=str)
def test_autocast_runs_in_float32(op, low):
    # Under torch.autocast the op is one of PyTorch's fp32-only ops: fp16/bf16 arguments are
    # cast to float32 and the result is float32 (outside autocast they are refused, above).
    x, w, b = make_inputs(24, 64, 12, seed=13)
    xl, wl, bl = x.to(low), w.to(low), b.to(low)
    with torch.autocast("cpu", dtype=low):
        y = op(xl, wl, bl, M_, S_)
        y_mixed = op(xl, w, b, M_, S_)  # a low-precision activation, float32 parameters
        y32 = op(x, w, b, M_, S_)
        y64 = op(x.double(), w.double(), b.double(), M_, S_)
    assert y.dtype == y_mixed.dtype == y32.dtype == torch.float32 and y64.dtype == torch.float64
    assert torch.equal(y, op(xl.float(), wl.float(), bl.float(), M_, S_))
    assert torch.equal(y_mixed, op(xl.float(), w, b, M_, S_))
    assert torch.equal(y32, op(x, w, b, M_, S_))


def test_autocast_module_and_gradients():
    torch.manual_seed(14)
    model = fused_linear.FusedLinearLeakyReLU(64, 12, M_, S_)
    x = torch.rand(24, 64).bfloat16().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = model(x)
    assert y.dtype == torch.float32
    y.sum().backward()
    assert x.grad.dtype == torch.bfloat16 and model.gemm.weight.grad.dtype == torch.float32
    dw = model.gemm.weight.grad.clone()
    x32 = x.detach().float().requires_grad_()  # the same values in float32, no autocast
    model.zero_grad()
    model(x32).sum().backward()
    assert torch.allclose(x.grad.float(), x32.grad, rtol=1e-2, atol=1e-2)  # bf16 rounding
    assert torch.allclose(dw, model.gemm.weight.grad, rtol=1e-6, atol=1e-6)
