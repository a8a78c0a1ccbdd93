# SPDX-License-Identifier: Apache-2.0
"""The operator on CUDA tensors (skipped without a GPU or without the CUDA kernel): values and
precisions, PyTorch's current stream, CUDA graphs, the device guard, gradients, torch.compile,
opcheck."""
import pytest
import torch
import torch.nn.functional as F

import fused_linear
from conftest import TF32_BOUND, assert_strict, eager, make_inputs, normwise_error, tf32x3_bound

if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
if not fused_linear.status()["cuda_kernel"]:
    pytest.skip(
        "this build has no CUDA kernel (a CPU torch or a Kokkos without CUDA)",
        allow_module_level=True,
    )

OP = torch.ops.fused_linear.linear_leaky_relu
M_, S_ = 2.0, 0.1
DEV = "cuda"


@pytest.mark.parametrize(
    "shape",
    [
        (1, 1, 1),
        (7, 13, 5),
        (128, 1024, 512),
        (33, 257, 65),
        (16, 8192, 1024),
        (1024, 1024, 1024),
        (300, 16, 200),
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_values_strict(shape, dtype):
    x, w, b = make_inputs(*shape, dtype=dtype, device=DEV)
    y = OP(x, w, b, M_, S_)
    assert y.device == x.device
    assert_strict(y, x, w, b, M_, S_)


@pytest.mark.parametrize("shape", [(128, 1024, 512), (1024, 2048, 1024), (512, 8192, 512)])
def test_3xtf32(shape):
    x, w, b = make_inputs(*shape, device=DEV)
    y = OP(x, w, b, M_, S_, "3xtf32")
    assert normwise_error(y, x, w, b, M_, S_) <= tf32x3_bound(shape[1])
    info = fused_linear.run_info(x, w, b, M_, S_, "3xtf32")
    assert info["precision"] in ("3xtf32", "strict"), info  # strict where faster (few rows)


def test_3xtf32_runs_on_tensor_cores_at_the_seed_shape():
    x, w, b = make_inputs(1024, 8192, 8192, device=DEV)
    info = fused_linear.run_info(x, w, b, M_, S_, "3xtf32")
    assert info["precision"] == "3xtf32", info
    assert normwise_error(OP(x, w, b, M_, S_, "3xtf32"), x, w, b, M_, S_) <= tf32x3_bound(8192)


@pytest.mark.parametrize("shape", [(128, 1024, 512), (1024, 4096, 1024)])
def test_tf32(shape):
    x, w, b = make_inputs(*shape, device=DEV)
    assert normwise_error(OP(x, w, b, M_, S_, "tf32"), x, w, b, M_, S_) <= TF32_BOUND


@pytest.mark.parametrize(
    "algorithm", ["vendor", "vendor_prefill", "vendor_lt", "fused", "fused_skinny"]
)
def test_cuda_algorithms(algorithm):
    x, w, b = make_inputs(64, 512, 96, device=DEV, seed=4)
    assert_strict(
        fused_linear.linear_leaky_relu(x, w, b, M_, S_, algorithm=algorithm), x, w, b, M_, S_
    )


def test_non_contiguous_and_special_values():
    x, w, b = make_inputs(37, 64, 29, device=DEV, seed=7)
    assert_strict(OP(x.t().contiguous().t(), w.t().contiguous().t(), b, M_, S_), x, w, b, M_, S_)
    big = torch.rand(50, 200, device=DEV)
    xs = big[3:40, ::3][:, :64]
    assert_strict(OP(xs, w, b, M_, S_), xs, w, b, M_, S_)
    x = x.clone()
    x[0, 3] = float("nan")
    x[1, 0] = float("inf")
    y, ref = OP(x, w, b, M_, S_), eager(x, w, b, M_, S_)
    assert torch.equal(torch.isnan(y), torch.isnan(ref))
    assert torch.equal(torch.isinf(y), torch.isinf(ref))


def test_empty_shapes():
    for m, k, n in [(0, 16, 8), (5, 16, 0), (4, 0, 6)]:
        x, w, b = make_inputs(m, k, n, device=DEV)
        y = OP(x, w, b, M_, S_)
        assert y.shape == (m, n) and y.is_cuda
        assert torch.allclose(y, eager(x, w, b, M_, S_))


def test_runs_on_the_current_stream():
    # On a side stream s: a long kernel, then new values into x, then the op, with no host
    # synchronisation. Only an op ordered on s (not on the default stream) sees the new x.
    x, w, b = make_inputs(256, 1024, 512, device=DEV, seed=12)
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    new_x = torch.rand_like(x)
    with torch.cuda.stream(s):
        torch.cuda._sleep(int(2e8))  # ~0.1 s of GPU time on s
        x.copy_(new_x)
        y = OP(x, w, b, M_, S_)
    s.synchronize()
    assert_strict(y, new_x, w, b, M_, S_)
    assert fused_linear.status()["cached_cuda_instances"] >= 1


def test_many_streams():
    x, w, b = make_inputs(64, 256, 32, device=DEV, seed=13)
    ref = OP(x, w, b, M_, S_)
    streams = [torch.cuda.Stream() for _ in range(8)]
    outs = []
    for s in streams:
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            outs.append(OP(x, w, b, M_, S_))
    torch.cuda.synchronize()
    for y in outs:
        assert_strict(y, x, w, b, M_, S_)
        assert torch.allclose(y, ref, rtol=1e-6, atol=1e-7)


def test_cuda_graph_after_warm_up_on_the_capture_stream():
    # The plan (its allocations) is made by a call before the capture, on the same stream; the
    # captured call then only enqueues kernels, as CUDA graphs require.
    x, w, b = make_inputs(128, 1024, 512, device=DEV, seed=14)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            OP(x, w, b, M_, S_)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s):
        y = OP(x, w, b, M_, S_)
    new_x = torch.rand_like(x)
    x.copy_(new_x)
    graph.replay()
    torch.cuda.synchronize()
    assert_strict(y, new_x, w, b, M_, S_)


def test_cuda_graph_capture_without_a_plan_is_refused():
    # A shape never called on the capture stream: its plan would allocate, which the library
    # refuses during a capture, by name, before enqueuing anything.
    s = torch.cuda.Stream()
    x, w, b = make_inputs(96, 320, 48, device=DEV, seed=15)
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        OP(x[:, :100], w[:, :100], b, M_, S_)  # the stream's Kokkos instance, another shape
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(ValueError, match="CUDA graph"):
        with torch.cuda.graph(graph, stream=s):
            OP(x, w, b, M_, S_)


def test_cuda_graph_capture_on_a_new_stream_is_refused():
    x, w, b = make_inputs(32, 64, 16, device=DEV, seed=17)
    OP(x, w, b, M_, S_)
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(ValueError, match="CUDA graph"):
        with torch.cuda.graph(graph, stream=torch.cuda.Stream()):
            OP(x, w, b, M_, S_)


def _bound_on_device(x, w, b, m, s, precision):
    """The float64 reference on the GPU and the error check of `precision`: per element the
    strict bound (conftest.strict_bound), normwise the 3xTF32 bound."""
    x, w, b = x.double(), w.double(), b.double()
    ref = F.leaky_relu(F.linear(x, w, b) * m, s)
    if precision == "strict":
        u, k = 2.0**-24, x.shape[1]
        bound = (
            (k + 3) * u * abs(m) * max(1.0, abs(s)) * F.linear(x.abs(), w.abs(), b.abs())
            + 4 * u * ref.abs()
            + 1e-300
        )
        return lambda y: ((y.double() - ref).abs() / bound).max()
    limit = tf32x3_bound(x.shape[1])
    return lambda y: (y.double() - ref).norm() / ref.norm() / limit


@pytest.mark.parametrize(
    "rows, k, n, precision, algorithm",
    [
        (1024, 4096, 4096, "3xtf32", "auto"),
        (17, 4096, 260, "strict", "auto"),
        # Paths with workspace in the plan: 3xTF32 split operands, split-K partial sums.
        (1024, 4096, 4096, "3xtf32", "vendor"),
        (1024, 4096, 4096, "3xtf32", "vendor_lt"),
        (17, 4096, 260, "strict", "fused"),
        (1000, 4100, 4092, "3xtf32", "auto"),
    ],
    ids=[
        "3xtf32-1024x4096x4096",
        "strict-17x4096x260",
        "3xtf32-vendor",
        "3xtf32-vendor_lt",
        "strict-fused-17x4096x260",
        "3xtf32-1000x4100x4092",
    ],
)
def test_two_graphs_of_one_shape_replayed_at_once(rows, k, n, precision, algorithm):
    # torch.cuda.graph captures every graph on one stream unless told otherwise, so two graphs
    # of one shape (one model captured for two static inputs) are captured on one stream with
    # one plan key; replayed at once on two streams, neither may use the other's scratch.
    # Then one graph replays on a side stream while eager calls run on the capture stream.
    # Every output is compared with float64 (ratios to the precision's bound: <= 1 passes).
    torch.manual_seed(21)
    model = fused_linear.FusedLinearLeakyReLU(
        k, n, M_, S_, precision=precision, algorithm=algorithm
    ).cuda()
    w, b = model.gemm.weight.detach(), model.gemm.bias.detach()
    sets = [torch.rand(rows, k, device=DEV) - 0.25 for _ in range(4)]
    checks = [_bound_on_device(xs, w, b, M_, S_, precision) for xs in sets]
    graphs = [torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()]
    contexts = [torch.cuda.graph(g) for g in graphs]  # PyTorch's default capture stream
    capture = getattr(contexts[0], "capture_stream", None) or torch.cuda.Stream()
    static = [sets[0].clone(), sets[1].clone()]
    with torch.no_grad():
        outs = []
        for g, xs in zip(graphs, static):
            # Warm-up on the capture stream before each capture: the stream's Kokkos instance
            # and a plan made outside the capture (a capture cannot allocate one).
            capture.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(capture):
                model(xs)
            torch.cuda.synchronize()
            with torch.cuda.graph(g, stream=capture):
                outs.append(model(xs))
        torch.cuda.synchronize()
        current = torch.cuda.current_stream()
        sides = [torch.cuda.Stream(), torch.cuda.Stream()]
        ratios = []
        for i in range(20):
            picks = [(2 * i) % 4, (2 * i + 1 + i // 2) % 4]  # changing pairs, never equal
            picks[1] = picks[1] if picks[1] != picks[0] else (picks[0] + 1) % 4
            for xs, pick in zip(static, picks):
                xs.copy_(sets[pick])
            torch.cuda._sleep(1000000)  # both replays queued before either starts: they overlap
            for side, g in zip(sides, graphs):
                side.wait_stream(current)
                with torch.cuda.stream(side):
                    g.replay()
            for side in sides:
                current.wait_stream(side)
            ratios += [("graphs at once", i, checks[p](y)) for y, p in zip(outs, picks)]
        for i in range(20):
            pick, eager_pick = i % 4, (i + 1) % 4
            static[0].copy_(sets[pick])
            torch.cuda._sleep(1000000)
            sides[0].wait_stream(current)
            capture.wait_stream(current)
            with torch.cuda.stream(sides[0]):
                graphs[0].replay()
            with torch.cuda.stream(capture):
                y_eager = model(sets[eager_pick])
            current.wait_stream(sides[0])
            current.wait_stream(capture)
            y_eager.record_stream(current)
            ratios += [
                ("graph beside eager", i, checks[pick](outs[0])),
                ("eager beside graph", i, checks[eager_pick](y_eager)),
            ]
    torch.cuda.synchronize()
    bad = [(what, i, r.item()) for what, i, r in ratios if not r.item() <= 1.0]
    assert not bad, f"{len(bad)} of {len(ratios)} outputs beyond the bound: {bad[:6]}"


def test_autocast_cuda_runs_in_float32():
    # Under torch.autocast the op is one of PyTorch's fp32-only ops: fp16 activations are cast
    # to float32, the result is float32.
    x, w, b = make_inputs(64, 256, 32, device=DEV, seed=22)
    with torch.autocast("cuda", dtype=torch.float16):
        y = OP(x.half(), w, b, M_, S_)
        y_all = OP(x.half(), w.half(), b.half(), M_, S_)
    assert y.dtype == y_all.dtype == torch.float32
    assert torch.equal(y, OP(x.half().float(), w, b, M_, S_))
    assert torch.equal(y_all, OP(x.half().float(), w.half().float(), b.half().float(), M_, S_))


def test_mixed_devices_are_refused():
    x, w, b = make_inputs(8, 16, 4, device=DEV)
    with pytest.raises((ValueError, RuntimeError)):
        OP(x, w.cpu(), b, M_, S_)


def test_current_device_is_left_alone():
    x, w, b = make_inputs(8, 16, 4, device=DEV)
    before = torch.cuda.current_device()
    OP(x, w, b, M_, S_)
    assert torch.cuda.current_device() == before


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_second_device():
    # Kokkos 3.4 drives one device per process (the first CUDA call's): tensors elsewhere are
    # refused with a message naming both, and the thread's current device is restored.
    kokkos_device = fused_linear.status()["cuda_device"]
    other = 1 if kokkos_device != 1 else 0
    x, w, b = make_inputs(8, 16, 4, device=f"cuda:{other}")
    with torch.cuda.device(kokkos_device):
        with pytest.raises(ValueError, match="one CUDA device"):
            OP(x, w, b, M_, S_)
        assert torch.cuda.current_device() == kokkos_device
    x, w, b = make_inputs(8, 16, 4, device=f"cuda:{kokkos_device}")
    with torch.cuda.device(other):  # a different current device: the guard switches for the call
        assert_strict(OP(x, w, b, M_, S_), x, w, b, M_, S_)
        assert torch.cuda.current_device() == other


def test_gradients():
    x, w, b = make_inputs(64, 128, 32, device=DEV, seed=16)
    x = x - 0.5
    ours = [t.clone().requires_grad_() for t in (x, w, b)]
    refs = [t.clone().double().requires_grad_() for t in (x, w, b)]
    dy = torch.randn(64, 32, device=DEV)
    OP(*ours, M_, S_).backward(dy)
    eager(*refs, M_, S_).backward(dy.double())
    for mine, ref in zip(ours, refs):
        assert torch.allclose(mine.grad.double(), ref.grad, rtol=1e-4, atol=1e-4)
    xd = (torch.rand(6, 9, dtype=torch.float64, device=DEV) - 0.5).requires_grad_()
    wd = (torch.rand(5, 9, dtype=torch.float64, device=DEV) - 0.5).requires_grad_()
    bd = (torch.rand(5, dtype=torch.float64, device=DEV) - 0.5).requires_grad_()
    assert torch.autograd.gradcheck(lambda a, c, d: OP(a, c, d, M_, S_), (xd, wd, bd))


def test_module_on_cuda():
    torch.manual_seed(0)
    model = fused_linear.FusedLinearLeakyReLU(1024, 512, M_, S_).cuda()
    x = torch.randn(128, 1024, device=DEV)
    ref = eager(x, model.gemm.weight, model.gemm.bias, M_, S_)
    assert torch.allclose(model(x), ref, atol=1e-4, rtol=1e-4)


@pytest.mark.skipif(not hasattr(torch, "compile"), reason="torch.compile needs PyTorch 2.0+")
def test_torch_compile_inductor():
    torch.manual_seed(0)
    model = fused_linear.FusedLinearLeakyReLU(256, 128, M_, S_).cuda()
    compiled = torch.compile(model, fullgraph=True)
    x = torch.randn(64, 256, device=DEV)
    assert torch.allclose(compiled(x), model(x), atol=1e-6)


@pytest.mark.skipif(not hasattr(torch.library, "opcheck"), reason="opcheck needs PyTorch 2.4+")
def test_opcheck_cuda():
    x, w, b = make_inputs(9, 24, 6, device=DEV)
    torch.library.opcheck(OP, (x, w, b, 2.0, 0.1))
    torch.library.opcheck(OP, tuple(t.clone().requires_grad_() for t in (x, w, b)) + (2.0, 0.1))
    torch.library.opcheck(OP, (x, w, b, 2.0, 0.1, "3xtf32"))


def test_overhead_timer_runs():
    x, w, b = make_inputs(128, 1024, 512, device=DEV)
    for mode in ("plan", "oneshot", "op"):
        t = torch.ops.fused_linear._time_calls(x, w, b, M_, S_, "strict", "auto", mode, 20, True)
        assert t.shape == (20,) and (t > 0).all()
