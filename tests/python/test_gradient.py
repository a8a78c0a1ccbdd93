# SPDX-License-Identifier: Apache-2.0
"""The layer's gradient: the operator fused_linear::linear_leaky_relu_backward and the autograd
of linear_leaky_relu, which calls it. gradcheck in float64; dX, dW, db against PyTorch's
autograd of the reference model in float64 (output_mask, special values); what the forward
saves; opcheck and torch.compile where this PyTorch has them; 200-step training runs against
the float64 reference model. On the host always, on CUDA when there is one."""
import copy

import pytest
import torch
import torch.nn.functional as F

import fused_linear
from conftest import TF32_BOUND, eager, make_inputs, tf32x3_bound, unit_roundoff
from fused_linear.reference import Model

OP = torch.ops.fused_linear.linear_leaky_relu
BACKWARD = torch.ops.fused_linear.linear_leaky_relu_backward
M_, S_ = 2.0, 0.1
ALL = [True, True, True]

HAS_CUDA = torch.cuda.is_available() and bool(fused_linear.status()["cuda_kernel"])
DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device or no CUDA kernel"),
    ),
]
needs_opcheck = pytest.mark.skipif(
    not hasattr(torch.library, "opcheck"),
    reason=f"torch.library.opcheck needs PyTorch 2.4+ (this is {torch.__version__})",
)
needs_compile = pytest.mark.skipif(
    not hasattr(torch, "compile"),
    reason=f"torch.compile needs PyTorch 2.0+ (this is {torch.__version__})",
)


def _tensors(m, k, n, dtype=torch.float32, device="cpu", seed=0):
    """x (both signs), w, b as make_inputs draws them, and an upstream gradient dy."""
    x, w, b = make_inputs(m, k, n, dtype=dtype, device=device, seed=seed)
    g = torch.Generator().manual_seed(seed + 1000)
    dy = torch.randn(m, n, generator=g, dtype=torch.float64).to(dtype=dtype, device=device)
    return x - 0.5, w, b, dy


def _saved(x, w, b, m, s, as_output):
    """What the forward keeps: Y, or z (the op at slope 1, the identity), in x's dtype."""
    z = OP(x, w, b, m, 1.0)
    return F.leaky_relu(z, s) if as_output else z


def reference_gradients(dy, x, w, b, m, s, positive=None):
    """dX, dW, db of the reference model as PyTorch's autograd computes them, in float64 on the
    CPU from the same (rounded) values. `positive` (z > 0) is the float64 z's sign unless given:
    the op's own forward's, where its rounding may flip the sign of a z within rounding of 0
    (the gradient then rightly differs by (1 - slope) * multiplier * dY there)."""
    x, w, b, dy = (t.detach().double().cpu() for t in (x, w, b, dy))
    if positive is None:
        x, w, b = (t.requires_grad_() for t in (x, w, b))
        return torch.autograd.grad(eager(x, w, b, m, s), (x, w, b), dy)
    g = torch.where(positive.cpu(), dy, dy * s) * m  # leaky_relu's backward, then the scale's
    return g @ w, g.t() @ x, g.sum(0)


def forward_sign(x, w, b, m):
    """z > 0 as the op's forward decides it (z: the op at slope 1, as the forward computes it)."""
    return OP(x.detach(), w.detach(), b.detach(), m, 1.0) > 0


def gradient_bounds(dy, x, w, b, m, s, dtype, positive):
    """Per-element worst cases in dtype, any summation order: (terms + 3) u times the sum of
    the products' magnitudes (Higham's gamma_n, as conftest.strict_bound; the 3 covers G's own
    roundings, dY * slope then * multiplier); db's terms are G's."""
    u = unit_roundoff(dtype)
    x, w, dy = (t.detach().double().cpu() for t in (x, w, dy))
    g = (torch.where(positive.cpu(), dy, dy * s) * m).abs()
    rows, cols = x.shape[0], w.shape[0]
    return (
        (cols + 3) * u * g @ w.abs() + 1e-300,
        (rows + 3) * u * g.t() @ x.abs() + 1e-300,
        (rows + 3) * u * g.sum(0) + 1e-300,
    )


def assert_gradients(got, dy, x, w, b, m, s, names=("dX", "dW", "db")):
    """got within the strict bounds of the float64 reference (with the op's forward's signs),
    element by element; twice them in float64, where the reference has errors of that size."""
    positive = forward_sign(x, w, b, m)
    wanted = reference_gradients(dy, x, w, b, m, s, positive)
    factor = 2.0 if x.dtype == torch.float64 else 1.0
    bounds = gradient_bounds(dy, x, w, b, m, s, x.dtype, positive)
    for name, mine, ref, bound in zip(names, got, wanted, bounds):
        if mine is None:
            continue
        assert mine.shape == ref.shape and mine.dtype == x.dtype, name
        err = (mine.detach().double().cpu() - ref).abs()
        worst = (err / (factor * bound)).max().item() if err.numel() else 0.0
        assert worst <= 1.0, f"{name}: error {worst:.3g} x the bound (max abs {err.max():.3g})"


def test_reference_formula_is_pytorchs_autograd():
    # The reference with given signs is PyTorch's autograd of the reference model, bit for bit.
    x, w, b, dy = _tensors(9, 20, 7, dtype=torch.float64, seed=20)
    for s in (S_, -0.3):
        positive = F.linear(x, w, b) * M_ > 0
        for mine, ref in zip(
            reference_gradients(dy, x, w, b, M_, s, positive),
            reference_gradients(dy, x, w, b, M_, s),
        ):
            assert torch.equal(mine, ref)


# ------------------------------------------------------------------ gradcheck (float64)
@pytest.mark.parametrize(
    "m, s",
    [
        (2.0, 0.1),
        (-1.5, 0.1),
        (0.0, 0.1),
        (2.0, 0.0),
        (-0.7, 0.0),
        (0.7, 1.0),
        (1.3, 2.5),
        (2.0, -0.5),
        (-1.5, -0.5),
        (0.0, -0.5),
    ],
)
@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck(device, m, s):
    x, w, b, _ = _tensors(6, 9, 5, dtype=torch.float64, device=device, seed=1)
    args = tuple(t.requires_grad_() for t in (x, w, b))
    assert torch.autograd.gradcheck(lambda x_, w_, b_: OP(x_, w_, b_, m, s), args)


@pytest.mark.parametrize("m, s", [(2.0, 0.1), (-1.5, 0.0), (0.7, -0.5)])
def test_double_backward(m, s):
    # create_graph: the backward runs in PyTorch ops there (their own gradients are known).
    x, w, b, _ = _tensors(5, 7, 4, dtype=torch.float64, seed=2)
    args = tuple(t.requires_grad_() for t in (x, w, b))
    assert torch.autograd.gradgradcheck(lambda x_, w_, b_: OP(x_, w_, b_, m, s), args)


# ------------------------------------------------------------------ against the reference
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("m, s", [(2.0, 0.1), (-1.5, 0.0), (0.5, 1.0), (1.0, 3.0), (2.0, -0.3)])
@pytest.mark.parametrize("device", DEVICES)
def test_operator_matches_the_reference(device, dtype, m, s):
    x, w, b, dy = _tensors(33, 70, 19, dtype=dtype, device=device, seed=3)
    for as_output in (True, False) if s >= 0 else (False,):
        saved = _saved(x, w, b, m, s, as_output)
        got = BACKWARD(dy, x, w, saved, m, s, as_output, "strict", "auto", ALL)
        assert all(t.device == x.device for t in got)
        assert_gradients(got, dy, x, w, b, m, s)
    # A bool mask of z > 0 (what the layer's forward saves): the same bits as from z.
    z = _saved(x, w, b, m, s, False)
    from_mask = BACKWARD(dy, x, w, z > 0, m, s, True, "strict", "auto", ALL)
    from_z = BACKWARD(dy, x, w, z, m, s, False, "strict", "auto", ALL)
    assert all(torch.equal(a, c) for a, c in zip(from_mask, from_z))


@pytest.mark.parametrize("shape", [(1, 1, 1), (7, 13, 5), (130, 300, 70), (300, 16, 200)])
@pytest.mark.parametrize("device", DEVICES)
def test_autograd_matches_the_reference(device, shape):
    x, w, b, dy = _tensors(*shape, device=device, seed=4)
    for s in (S_, -0.3):
        ours = [t.clone().requires_grad_() for t in (x, w, b)]
        OP(*ours, M_, s).backward(dy)
        assert_gradients([t.grad for t in ours], dy, x, w, b, M_, s)
        ours64 = [t.double().requires_grad_() for t in (x, w, b)]
        OP(*ours64, M_, s).backward(dy.double())
        assert_gradients([t.grad for t in ours64], dy.double(), *ours64, M_, s)


@pytest.mark.parametrize("device", DEVICES)
def test_every_forward_path_has_a_backward(device):
    # Whatever precision and algorithm the forward accepts, its backward runs (the gradient's
    # own paths: vendor, vendor_lt in 3xtf32, or auto) within the precision's error.
    x, w, b, dy = _tensors(40, 96, 24, device=device, seed=21)
    algorithms = ["auto", "vendor", "vendor_prefill", "vendor_lt", "fused", "fused_skinny"]
    if device == "cuda":
        algorithms += ["fused_sm90", "skinny_sm90"]
    ran = 0
    for precision in ("strict", "tf32", "3xtf32"):
        for algorithm in algorithms:
            ours = [t.clone().requires_grad_() for t in (x, w, b)]
            try:
                y = OP(*ours, M_, S_, precision, algorithm)
            except ValueError:
                continue  # a path this build or device does not run, refused by the forward
            y.backward(dy)
            ran += 1
            if precision == "strict":
                assert_gradients([t.grad for t in ours], dy, x, w, b, M_, S_)
                continue
            wanted = reference_gradients(dy, x, w, b, M_, S_, forward_sign(x, w, b, M_))
            for mine, ref in zip((t.grad for t in ours), wanted):
                err = ((mine.double().cpu() - ref).norm() / ref.norm()).item()
                assert err <= TF32_BOUND, (precision, algorithm, err)
    assert ran >= 8


@pytest.mark.parametrize("mask", [[a, b, c] for a in (0, 1) for b in (0, 1) for c in (0, 1)])
@pytest.mark.parametrize("device", DEVICES)
def test_output_mask(device, mask):
    mask = [bool(v) for v in mask]
    x, w, b, dy = _tensors(20, 30, 10, device=device, seed=5)
    saved = _saved(x, w, b, M_, S_, True)
    full = BACKWARD(dy, x, w, saved, M_, S_, True, "strict", "auto", ALL)
    some = BACKWARD(dy, x, w, saved, M_, S_, True, "strict", "auto", mask)
    for wanted, got, asked in zip(full, some, mask):
        if not asked:
            assert got is None
        elif device == "cpu":
            assert torch.equal(got, wanted)
        else:  # another plan, whose GEMMs the vendor library may choose otherwise
            assert torch.allclose(got, wanted, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("which", [0, 1, 2, (0, 2), (1, 2)])
def test_gradients_of_some_inputs(which):
    # Autograd asks only for what needs a gradient; the others stay None.
    which = (which,) if isinstance(which, int) else which
    x, w, b, dy = _tensors(12, 24, 6, seed=6)
    ours = [t.clone().requires_grad_(i in which) for i, t in enumerate((x, w, b))]
    OP(*ours, M_, S_).backward(dy)
    full = [t.clone().requires_grad_() for t in (x, w, b)]
    OP(*full, M_, S_).backward(dy)
    for i, (mine, ref) in enumerate(zip(ours, full)):
        assert (mine.grad is None) == (i not in which)
        if i in which:
            assert torch.equal(mine.grad, ref.grad)


@pytest.mark.parametrize("s", [0.1, 0.0, -0.3])
def test_special_values_propagate_as_pytorchs(s):
    # NaN and Inf in x (so in z, both signs and inf * 0) and in dY: the same NaN and Inf as
    # PyTorch's autograd in the same dtype, the finite values beside its.
    x, w, b, dy = _tensors(8, 32, 10, seed=7)
    w[3, 0] = 0.0
    x[0, 5] = float("nan")
    x[1, 0] = float("inf")
    x[2, 0] = -float("inf")
    dy[3, 4] = float("nan")
    dy[4, 2] = float("inf")
    dy[5, 7] = -float("inf")
    ours = [t.clone().requires_grad_() for t in (x, w, b)]
    refs = [t.clone().requires_grad_() for t in (x, w, b)]
    OP(*ours, M_, s).backward(dy)
    eager(*refs, M_, s).backward(dy)
    for name, mine, ref in zip(("dX", "dW", "db"), ours, refs):
        mine, ref = mine.grad, ref.grad
        assert torch.equal(torch.isnan(mine), torch.isnan(ref)), name
        inf = torch.isinf(ref)
        assert torch.equal(torch.isinf(mine), inf) and torch.equal(mine[inf], ref[inf]), name
        finite = torch.isfinite(ref)
        assert torch.allclose(mine[finite], ref[finite], rtol=1e-5, atol=1e-5), name
        assert torch.isnan(ref).any() and inf.any(), name  # the case tests something


def test_empty_shapes():
    for m, k, n in [(0, 16, 8), (5, 16, 0), (4, 0, 6), (0, 0, 0)]:
        x, w, b, dy = _tensors(m, k, n, seed=8)
        ours = [t.clone().requires_grad_() for t in (x, w, b)]
        OP(*ours, M_, S_).backward(dy)
        for mine, ref in zip(ours, reference_gradients(dy, x, w, b, M_, S_)):
            assert mine.grad.shape == ref.shape  # K = 0: db alone is not empty, nor zero
            assert torch.allclose(mine.grad.double(), ref, rtol=1e-6, atol=0)


def test_non_contiguous_inputs():
    x, w, b, dy = _tensors(24, 40, 12, seed=9)
    saved = _saved(x, w, b, M_, S_, True)
    wanted = BACKWARD(dy, x, w, saved, M_, S_, True, "strict", "auto", ALL)
    strided = (
        dy.t().contiguous().t(),
        torch.stack([x, x], -1)[..., 0],  # every other element
        w.t().contiguous().t(),
        torch.stack([saved, saved], 1)[:, 0],  # every other row
    )
    assert not any(t.is_contiguous() for t in strided)
    got = BACKWARD(*strided, M_, S_, True, "strict", "auto", ALL)
    for mine, ref in zip(got, wanted):
        assert mine.is_contiguous() and torch.equal(mine, ref)


def test_errors():
    x, w, b, dy = _tensors(8, 16, 4, seed=10)
    y = _saved(x, w, b, M_, S_, True)
    with pytest.raises(ValueError, match="extents do not match"):
        BACKWARD(dy, x, w[:, :15], y, M_, S_, True, "strict", "auto", ALL)
    with pytest.raises(ValueError, match="extents do not match"):
        BACKWARD(dy, x, w, y[:7], M_, S_, True, "strict", "auto", ALL)
    with pytest.raises(ValueError, match="must be 2-D"):
        BACKWARD(dy[0], x, w, y, M_, S_, True, "strict", "auto", ALL)
    with pytest.raises(TypeError, match="one dtype"):
        BACKWARD(dy.double(), x, w, y, M_, S_, True, "strict", "auto", ALL)
    with pytest.raises(TypeError, match="float32 or float64"):
        BACKWARD(dy.half(), x.half(), w.half(), y.half(), M_, S_, True, "strict", "auto", ALL)
    # The library's refusals, in its words: Y cannot tell z's sign for a negative slope.
    with pytest.raises(ValueError, match=r"^FusedLinear::linear_leaky_relu_backward: "):
        BACKWARD(dy, x, w, y, M_, -0.1, True, "strict", "auto", ALL)
    with pytest.raises(ValueError, match=r"^FusedLinear::precision_from_string"):
        BACKWARD(dy, x, w, y, M_, S_, True, "fp16", "auto", ALL)
    with pytest.raises(ValueError, match=r"^FusedLinear::linear_leaky_relu_backward: "):
        BACKWARD(dy, x, w, y, float("inf"), S_, True, "strict", "auto", ALL)
    # It has no gradient of its own: refused where autograd would record it.
    leaf = x.clone().requires_grad_()
    with pytest.raises(RuntimeError, match="is not differentiable"):
        BACKWARD(dy, leaf, w, y, M_, S_, True, "strict", "auto", ALL)
    with torch.no_grad():
        got = BACKWARD(dy, leaf, w, y, M_, S_, True, "strict", "auto", ALL)
    assert torch.equal(got[0], BACKWARD(dy, x, w, y, M_, S_, True, "strict", "auto", ALL)[0])


def test_python_wrapper_matches_the_op():
    x, w, b, dy = _tensors(9, 20, 7, seed=11)
    z = _saved(x, w, b, M_, -0.2, False)
    got = fused_linear.linear_leaky_relu_backward(
        dy, x, w, z, 2, -0.2, saved_is_output=False, output_mask=(1, 0, 1)
    )
    wanted = BACKWARD(dy, x, w, z, 2.0, -0.2, False, "strict", "auto", [True, False, True])
    assert torch.equal(got[0], wanted[0]) and got[1] is None and torch.equal(got[2], wanted[2])


# ------------------------------------------------------------------ what the forward saves
def _saved_by_forward(x, w, b, s):
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        y = OP(x, w, b, M_, s)
    return y, saved


@pytest.mark.parametrize("s", [S_, 0.0, -0.3])
def test_forward_saves_the_sign_of_the_pre_activation(s):
    x, w, b, _ = _tensors(10, 20, 6, seed=12)
    x.requires_grad_()
    y, saved = _saved_by_forward(x, w, b, s)
    assert len(saved) == 3  # x, weight and a bool mask: neither Y nor z
    assert saved[0].data_ptr() == x.data_ptr() and saved[1].data_ptr() == w.data_ptr()
    assert saved[2].dtype == torch.bool and saved[2].shape == y.shape
    z = OP(x.detach(), w, b, M_, 1.0)
    assert torch.equal(saved[2], z > 0)
    assert torch.equal(y, F.leaky_relu(z, s)) and torch.equal(y, OP(x.detach(), w, b, M_, s))


def test_nothing_is_saved_without_a_graph():
    x, w, b, _ = _tensors(10, 20, 6, seed=12)
    assert _saved_by_forward(x, w, b, S_)[1] == []
    with torch.no_grad():
        assert _saved_by_forward(x.requires_grad_(), w, b, -0.3)[1] == []


@pytest.mark.skipif(not hasattr(torch.utils, "_python_dispatch"), reason="needs TorchDispatchMode")
@pytest.mark.parametrize("s", [S_, -0.3])
def test_backward_is_the_operator_and_no_product_is_recomputed(s):
    from torch.utils._python_dispatch import TorchDispatchMode

    class Calls(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.append(str(func))
            return func(*args, **(kwargs or {}))

    x, w, b, dy = _tensors(10, 20, 6, seed=13)
    ours = [t.clone().requires_grad_() for t in (x, w, b)]
    forward, backward = Calls(), Calls()
    with forward:
        y = OP(*ours, M_, s)
    with backward:
        y.backward(dy)
    products = ("mm", "addmm", "linear", "matmul", "bmm")
    assert [n for n in forward.names if "linear_leaky_relu" in n] == [
        "fused_linear.linear_leaky_relu.default"
    ]
    assert [n for n in backward.names if "linear_leaky_relu" in n] == [
        "fused_linear.linear_leaky_relu_backward.default"
    ]
    for name in forward.names + backward.names:
        assert name.split(".")[1] not in products, (name, forward.names, backward.names)


# ------------------------------------------------------------------ opcheck, torch.compile
def _backward_samples(device):
    x, w, b, dy = _tensors(9, 24, 6, device=device, seed=14)
    y, z = _saved(x, w, b, 2.0, 0.1, True), _saved(x, w, b, 2.0, 0.1, False)
    yield (dy, x, w, y, 2.0, 0.1, True, "strict", "auto", ALL)
    yield (dy, x, w, z, 2.0, -0.3, False, "strict", "vendor", [True, False, True])
    x64, w64, b64, dy64 = (t.double() for t in (x, w, b, dy))
    z64 = _saved(x64, w64, b64, -1.0, 0.2, False)
    yield (dy64, x64, w64, z64, -1.0, 0.2, False, "strict", "auto", [False, True, False])
    yield (dy.t().contiguous().t(), x[:, ::2], w[:, ::2], y, 0.5, 0.0, True, "3xtf32", "auto", ALL)


@needs_opcheck
@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    for args in _backward_samples(device):
        torch.library.opcheck(BACKWARD, args)
    # The layer with inputs requiring grad: its autograd and the gradient operator traced.
    x, w, b, _ = _tensors(9, 24, 6, device=device, seed=15)
    for s in (0.1, -0.3):
        torch.library.opcheck(OP, tuple(t.clone().requires_grad_() for t in (x, w, b)) + (2.0, s))


def test_meta_kernel():
    x, w, dy = torch.empty(7, 33), torch.empty(12, 33), torch.empty(7, 12)
    args = [t.to("meta") for t in (dy, x, w, dy)]
    dx, dw, db = BACKWARD(*args, 2.0, 0.1, True, "strict", "auto", ALL)
    assert dx.device.type == "meta" and dx.shape == (7, 33) and dw.shape == (12, 33)
    assert db.shape == (12,) and db.dtype == torch.float32
    assert BACKWARD(*args, 2.0, 0.1, True, "strict", "auto", [False, True, False])[0] is None
    with pytest.raises(ValueError, match="extents do not match"):
        BACKWARD(args[0], args[1], args[2][:, :5], args[3], 2.0, 0.1, True, "strict", "auto", ALL)


@needs_compile
@pytest.mark.parametrize("s", [S_, -0.3])
@pytest.mark.parametrize("device", DEVICES)
def test_compiled_training_step(device, s):
    # The forward and the loss compiled whole (fullgraph); AOTAutograd's backward graph calls
    # the gradient operator (and no product), and three SGD steps move the parameters as eager.
    from torch._dynamo.backends.common import aot_autograd

    try:
        from torch._functorch.aot_autograd import make_boxed_func
    except ImportError:
        from functorch.compile import make_boxed_func

    graphs = {}

    def keep(kind):
        def compiler(gm, example_inputs):
            graphs[kind] = gm.code
            return make_boxed_func(gm.forward)

        return compiler

    backend = aot_autograd(fw_compiler=keep("forward"), bw_compiler=keep("backward"))
    torch.manual_seed(16)
    model = fused_linear.FusedLinearLeakyReLU(16, 8, M_, s).to(device)
    twin = copy.deepcopy(model)
    x = torch.randn(64, 16, device=device)
    target = torch.randn(64, 8, device=device)

    def loss_of(net):
        return lambda x_, t_: F.mse_loss(net(x_), t_)

    compiled = torch.compile(loss_of(model), backend=backend, fullgraph=True)
    for net, step in ((model, compiled), (twin, loss_of(twin))):
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            step(x, target).backward()
            opt.step()
    assert "linear_leaky_relu_backward" in graphs["backward"], graphs["backward"]
    assert "aten.mm" not in graphs["backward"] and "addmm" not in graphs["backward"]
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        assert torch.allclose(p, q, rtol=1e-5, atol=1e-6), name


# ------------------------------------------------------------------ training
def _regression_task(device):
    """64 samples of 16 features -> 8 targets: a teacher layer plus noise (the loss levels off
    above zero, so a relative comparison stays meaningful)."""
    g = torch.Generator().manual_seed(17)
    x = torch.randn(64, 16, generator=g)
    teacher = torch.randn(8, 16, generator=g) / 4
    target = F.leaky_relu(x @ teacher.t(), 0.1) + 0.1 * torch.randn(64, 8, generator=g)
    return x.to(device), target.to(device)


def _losses(model, optimizer, x, target, steps=200):
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return torch.tensor(losses, dtype=torch.float64)


OPTIMIZERS = {
    "sgd": lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9),
    "adam": lambda params: torch.optim.Adam(params, lr=3e-3),
}


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
@pytest.mark.parametrize("precision", ["strict", "3xtf32"])
@pytest.mark.parametrize("s", [S_, -0.2])
@pytest.mark.parametrize("device", DEVICES)
def test_training_follows_the_float64_reference(device, s, precision, optimizer):
    # 200 steps in float32 beside the reference model in float64 from the same start: the loss
    # curves agree to 1e-4 relative at every step.
    torch.manual_seed(18)
    ref = Model(16, 8, M_, s).double()
    ours = fused_linear.FusedLinearLeakyReLU(16, 8, M_, s, precision=precision).to(device)
    ours.load_state_dict(ref.state_dict())
    x, target = _regression_task(device)
    mine = _losses(ours, OPTIMIZERS[optimizer](ours.parameters()), x, target)
    wanted = _losses(
        ref, OPTIMIZERS[optimizer](ref.parameters()), x.double().cpu(), target.double().cpu()
    )
    assert wanted[-1] < 0.5 * wanted[0]  # it learns
    worst = ((mine - wanted).abs() / wanted).max().item()
    assert worst <= 1e-4, f"loss curves differ by {worst:.3g} relative"


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device or no CUDA kernel")
@pytest.mark.parametrize("precision", ["strict", "3xtf32"])
def test_cuda_gradients_at_the_precision(precision):
    # A larger layer on the device: strict within the strict bounds, 3xtf32 within its
    # normwise bound (each product's), against the float64 reference.
    x, w, b, dy = _tensors(256, 512, 384, device="cuda", seed=19)
    ours = [t.clone().requires_grad_() for t in (x, w, b)]
    fused_linear.linear_leaky_relu(*ours, M_, S_, precision=precision).backward(dy)
    got = [t.grad for t in ours]
    if precision == "strict":
        assert_gradients(got, dy, x, w, b, M_, S_)
        return
    wanted = reference_gradients(dy, x, w, b, M_, S_, forward_sign(x, w, b, M_))
    for mine, ref, terms in zip(got, wanted, (384, 256, 256)):
        err = (mine.double().cpu() - ref).norm() / ref.norm()
        assert err <= tf32x3_bound(terms), err.item()


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device or no CUDA kernel")
def test_cuda_sm90_products_direct_and_captured():
    # The library's sm_90a 3xTF32 products (fused_sm90) where the device has them: every output
    # within 3xTF32's bound of float64; then the call captured on a stream the operator never
    # saw and replayed on new dY, giving the eager call's bits.
    x, w, b, dy = _tensors(300, 520, 264, device="cuda", seed=23)
    y = _saved(x, w, b, M_, S_, True)
    try:
        got = BACKWARD(dy, x, w, y, M_, S_, True, "3xtf32", "fused_sm90", ALL)
    except ValueError as e:
        if "compute capability 9.0" not in str(e) and "sm_90a" not in str(e):
            raise
        pytest.skip(str(e))
    wanted = reference_gradients(dy, x, w, b, M_, S_, y > 0)
    for mine, ref, terms in zip(got, wanted, (264, 300, 300)):
        err = (mine.double().cpu() - ref).norm() / ref.norm()
        assert err <= tf32x3_bound(terms), err.item()
    static_dy = dy.clone()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=torch.cuda.Stream(priority=-1)):
        captured = BACKWARD(static_dy, x, w, y, M_, S_, True, "3xtf32", "fused_sm90", ALL)
    for seed in (24, 25):
        static_dy.copy_(_tensors(300, 520, 264, device="cuda", seed=seed)[3])
        graph.replay()
        torch.cuda.synchronize()
        eager_call = BACKWARD(static_dy, x, w, y, M_, S_, True, "3xtf32", "fused_sm90", ALL)
        assert all(torch.equal(a, c) for a, c in zip(captured, eager_call)), seed
