# SPDX-License-Identifier: Apache-2.0
"""The drop-in module: the reference model's parameters, initialisation, state_dict and values."""
import pytest
import torch
from torch import nn

import fused_linear
from conftest import assert_strict
from fused_linear.reference import Model


ARGS = (96, 40, 2.0, 0.1)


def test_state_dict_keys_and_shapes():
    ours, ref = fused_linear.FusedLinearLeakyReLU(*ARGS), Model(*ARGS)
    assert list(ours.state_dict()) == list(ref.state_dict()) == ["gemm.weight", "gemm.bias"]
    for key, value in ref.state_dict().items():
        assert ours.state_dict()[key].shape == value.shape


def test_seeded_construction_gives_the_references_weights():
    # nn.Linear's initialisation, drawing the same random numbers in the same order.
    torch.manual_seed(42)
    ref = Model(*ARGS)
    after_ref = torch.rand(3)
    torch.manual_seed(42)
    ours = fused_linear.FusedLinearLeakyReLU(*ARGS)
    after_ours = torch.rand(3)
    for key, value in ref.state_dict().items():
        assert torch.equal(ours.state_dict()[key], value), key
    assert torch.equal(after_ref, after_ours)  # the same amount of the RNG stream was used


def test_forward_matches_the_reference():
    torch.manual_seed(1)
    ref = Model(*ARGS)
    ours = fused_linear.FusedLinearLeakyReLU(*ARGS)
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(64, 96)
    y = ours(x)
    assert torch.allclose(y, ref(x), atol=1e-5, rtol=1e-4)
    assert_strict(y, x, ref.gemm.weight, ref.gemm.bias, 2.0, 0.1)


def test_reference_loads_our_state_dict():
    ours = fused_linear.FusedLinearLeakyReLU(*ARGS)
    ref = Model(*ARGS)
    ref.load_state_dict(ours.state_dict())
    x = torch.rand(5, 96)
    assert torch.allclose(ours(x), ref(x), atol=1e-5, rtol=1e-4)


def test_leading_dimensions():
    ours = fused_linear.FusedLinearLeakyReLU(*ARGS)
    ref = Model(*ARGS)
    ref.load_state_dict(ours.state_dict())
    for shape in [(96,), (2, 3, 96), (4, 1, 5, 96), (0, 96)]:
        x = torch.randn(*shape)
        y = ours(x)
        assert y.shape == shape[:-1] + (40,)
        assert torch.allclose(y, ref(x), atol=1e-5, rtol=1e-4)


def test_double_module_and_gradients():
    torch.manual_seed(2)
    ref = Model(*ARGS).double()
    ours = fused_linear.FusedLinearLeakyReLU(*ARGS, dtype=torch.float64)
    ours.load_state_dict(ref.state_dict())
    x = torch.randn(12, 96, dtype=torch.float64, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    ours(x).pow(2).sum().backward()
    ref(x_ref).pow(2).sum().backward()
    assert torch.allclose(x.grad, x_ref.grad, rtol=1e-10, atol=1e-12)
    for (name, p), q in zip(ours.named_parameters(), ref.parameters()):
        assert torch.allclose(p.grad, q.grad, rtol=1e-10, atol=1e-12), name


def test_training_step_moves_like_the_reference():
    torch.manual_seed(3)
    ref = Model(*ARGS)
    ours = fused_linear.FusedLinearLeakyReLU(*ARGS)
    ours.load_state_dict(ref.state_dict())
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)
    opt_ours = torch.optim.SGD(ours.parameters(), lr=0.1)
    x, target = torch.randn(32, 96), torch.randn(32, 40)
    for model, opt in ((ref, opt_ref), (ours, opt_ours)):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), target).backward()
        opt.step()
    for key, value in ref.state_dict().items():
        assert torch.allclose(ours.state_dict()[key], value, atol=1e-6), key


@pytest.mark.parametrize("precision", ["strict", "3xtf32", "tf32"])
def test_precision_attribute_and_repr(precision):
    ours = fused_linear.FusedLinearLeakyReLU(*ARGS, precision=precision)
    assert ours.precision == precision and f"precision='{precision}'" in repr(ours)
    x = torch.rand(8, 96)
    # On the host every precision runs strict (the floor): the strict bound holds.
    assert_strict(ours(x), x, ours.gemm.weight, ours.gemm.bias, 2.0, 0.1)
