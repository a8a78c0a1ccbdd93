# SPDX-License-Identifier: Apache-2.0
"""The operator on CUDA tensors (skipped without a GPU or without the CUDA kernel): values and
precisions, PyTorch's current stream, CUDA graphs (PyTorch's recipes: torch.cuda.graph after a
side-stream warm-up, make_graphed_callables, torch.compile's reduce-overhead; captures on streams
the op never saw, from several threads), the device guard, gradients, torch.compile, opcheck."""
import contextlib
import gc
import threading

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


def _unseen_stream():
    """A stream the op never ran on outside a capture: high-priority streams come from a pool of
    their own, which this suite uses for captures only."""
    return torch.cuda.Stream(priority=-1)


@pytest.fixture
def unseen_capture_stream():
    """torch.cuda.graph without a stream argument captures on one stream of its own, made once
    per process: here a stream the op never ran on, as in a fresh process (the recipe's case)."""
    saved = getattr(torch.cuda.graph, "default_capture_stream", None)
    torch.cuda.graph.default_capture_stream = _unseen_stream()
    yield torch.cuda.graph.default_capture_stream
    torch.cuda.synchronize()
    torch.cuda.graph.default_capture_stream = saved


def test_cuda_graph_capture_without_a_plan_is_refused():
    # A shape never called on any stream of the device: its plan would allocate, which the
    # library refuses during a capture, by name; the capture itself stays valid (its end
    # would raise otherwise), on a stream with a Kokkos instance and on one without.
    x, w, b = make_inputs(97, 331, 49, device=DEV, seed=15)
    seen = torch.cuda.Stream()
    seen.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(seen):
        OP(x[:, :100], w[:, :100], b, M_, S_)  # the stream's Kokkos instance, another shape
    torch.cuda.synchronize()
    for stream in (seen, _unseen_stream()):
        graph = torch.cuda.CUDAGraph()
        with pytest.raises(ValueError, match="CUDA graph"):
            with torch.cuda.graph(graph, stream=stream):
                OP(x, w, b, M_, S_)


def test_cuda_graph_capture_on_a_new_stream():
    # The plan is made by a call on the default stream; the capture runs on a stream the op
    # never saw (no Kokkos instance for it, none made during the capture: a capture lane).
    x, w, b = make_inputs(32, 64, 16, device=DEV, seed=17)
    OP(x, w, b, M_, S_)
    torch.cuda.synchronize()
    assert fused_linear.status()["cuda_capture_lanes"] == 4, fused_linear.status()
    instances = fused_linear.status()["cached_cuda_instances"]
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=_unseen_stream()):
        y = OP(x, w, b, M_, S_)
    assert fused_linear.status()["cached_cuda_instances"] == instances  # none made
    for seed in (18, 19):
        new_x = make_inputs(32, 64, 16, device=DEV, seed=seed)[0]
        x.copy_(new_x)
        graph.replay()
        torch.cuda.synchronize()
        assert_strict(y, new_x, w, b, M_, S_)


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


def _side_stream_warm_up(model, *args):
    """PyTorch's CUDA graph recipe before a capture: three calls on a side stream."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            model(*args)
    torch.cuda.current_stream().wait_stream(side)


@pytest.mark.parametrize(
    "rows, k, n, precision, algorithm",
    [
        (128, 1024, 512, "strict", "auto"),
        (1024, 4096, 1024, "3xtf32", "auto"),
        (17, 4096, 260, "strict", "fused"),  # split-K partial sums in the plan's workspace
    ],
    ids=["strict-128x1024x512", "3xtf32-1024x4096x1024", "strict-fused-17x4096x260"],
)
def test_torch_cuda_graph_recipe(unseen_capture_stream, rows, k, n, precision, algorithm):
    # PyTorch's whole-network capture as its CUDA semantics notes write it: warm-up on a side
    # stream, then `with torch.cuda.graph(g)` (its own capture stream, which the op never saw);
    # replays with new inputs against float64 (ratios to the precision's bound: <= 1 passes).
    torch.manual_seed(31)
    model = fused_linear.FusedLinearLeakyReLU(
        k, n, M_, S_, precision=precision, algorithm=algorithm
    ).cuda()
    w, b = model.gemm.weight.detach(), model.gemm.bias.detach()
    static_x = torch.rand(rows, k, device=DEV) - 0.25
    with torch.no_grad():
        _side_stream_warm_up(model, static_x)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_y = model(static_x)
        for i in range(3):
            new_x = torch.rand(rows, k, device=DEV) - 0.25
            static_x.copy_(new_x)
            g.replay()
            ratio = _bound_on_device(new_x, w, b, M_, S_, precision)(static_y).item()
            assert ratio <= 1.0, (i, ratio)


def test_make_graphed_callables_forward_and_backward(unseen_capture_stream):
    # make_graphed_callables warms up on a side stream of its own, then captures the forward
    # and the backward on torch.cuda.graph's stream. Twenty runs with fresh inputs: outputs
    # against float64, gradients against eager autograd of the same module (the same fp32
    # forward, so the same LeakyReLU signs).
    torch.manual_seed(32)
    rows, k, n = 64, 256, 96
    model = fused_linear.FusedLinearLeakyReLU(k, n, M_, S_).cuda()
    sample = (torch.rand(rows, k, device=DEV) - 0.5).requires_grad_()
    graphed = torch.cuda.make_graphed_callables(model, (sample,))
    params = (model.gemm.weight, model.gemm.bias)
    for i in range(20):
        x = (torch.rand(rows, k, device=DEV) - 0.5).requires_grad_()
        dy = torch.randn(rows, n, device=DEV)
        model.zero_grad(set_to_none=True)
        y = graphed(x)
        y.backward(dy)
        w, b = (p.detach() for p in params)
        ratio = _bound_on_device(x.detach(), w, b, M_, S_, "strict")(y.detach()).item()
        assert ratio <= 1.0, (i, ratio)
        x_eager = x.detach().clone().requires_grad_()
        wanted = torch.autograd.grad(model(x_eager), (x_eager,) + params, dy)
        got = (x.grad, model.gemm.weight.grad, model.gemm.bias.grad)
        for name, mine, ref in zip(("x", "weight", "bias"), got, wanted):
            assert torch.allclose(mine, ref, rtol=1e-4, atol=1e-5), (i, name)


@pytest.mark.skipif(not hasattr(torch, "compile"), reason="torch.compile needs PyTorch 2.0+")
def test_torch_compile_reduce_overhead_records_again():
    # CUDA graph trees: a warm-up run, a recording (on a stream of their own), replays; a new
    # batch size records another graph, and so does a second model instance.
    from torch._dynamo.utils import counters

    counters.clear()
    torch.manual_seed(33)
    models = [fused_linear.FusedLinearLeakyReLU(256, 128, M_, S_).cuda() for _ in range(2)]
    with torch.no_grad():
        for model in models:
            compiled = torch.compile(model, mode="reduce-overhead", dynamic=False)
            w, b = model.gemm.weight.detach(), model.gemm.bias.detach()
            for rows in (8, 8, 8, 8, 24, 24, 24, 24, 8, 8):
                x = torch.rand(rows, 256, device=DEV) - 0.25
                y = compiled(x)
                ratio = _bound_on_device(x, w, b, M_, S_, "strict")(y).item()
                assert ratio <= 1.0, (rows, ratio)
    assert not counters["inductor"]["cudagraph_skips"], dict(counters["inductor"])


def test_model_of_40_layers_captured_whole(unseen_capture_stream):
    # Forty layers of distinct shapes (forty plans, within the cache's 64) warmed up on a side
    # stream and captured whole, replayed with new inputs, against the model in float64. A
    # layer's rounding is about sqrt(K) u normwise (< 2e-6, K <= 408) and the layers do not
    # amplify earlier errors (nn.Linear's initialisation, multiplier 1): 1e-4 normwise keeps a
    # margin over forty layers, where one wrong layer is off by O(1).
    torch.manual_seed(34)
    widths = [96 + 8 * i for i in range(41)]
    layers = [
        fused_linear.FusedLinearLeakyReLU(widths[i], widths[i + 1], 1.0, S_) for i in range(40)
    ]
    model = torch.nn.Sequential(*layers).cuda()

    def reference(x):
        y = x.double()
        for layer in model:
            weight, bias = layer.gemm.weight.double(), layer.gemm.bias.double()
            y = F.leaky_relu(F.linear(y, weight, bias) * layer.multiplier, layer.negative_slope)
        return y

    static_x = torch.rand(33, widths[0], device=DEV) - 0.25
    with torch.no_grad():
        _side_stream_warm_up(model, static_x)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_y = model(static_x)
        for i in range(3):
            new_x = torch.rand(33, widths[0], device=DEV) - 0.25
            static_x.copy_(new_x)
            g.replay()
            ref = reference(new_x)
            error = ((static_y.double() - ref).norm() / ref.norm()).item()
            assert error <= 1e-4, (i, error)


@contextlib.contextmanager
def _quiet_device():
    """What torch.cuda.graph does before a capture, for captures begun by hand: the device idle,
    unreferenced graphs and cached blocks freed now, no garbage collection during the captures
    (freeing a graph, or waiting for the device, while a capture is in progress breaks it)."""
    torch.cuda.synchronize()
    gc.collect()
    torch.cuda.empty_cache()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_concurrent_captures_from_two_threads():
    # Two threads capture at once, each on a stream the op never saw: a capture lane joins one
    # capture at a time, so each capture gets a lane of its own; each graph computes its layer.
    shapes = [(64, 320, 80), (48, 192, 112)]
    sets = [make_inputs(*shape, device=DEV, seed=40 + i) for i, shape in enumerate(shapes)]
    for x, w, b in sets:
        OP(x, w, b, M_, S_)  # the plans, outside the captures
    torch.cuda.synchronize()
    barrier = threading.Barrier(2)
    graphs, outs, errors = [None, None], [None, None], []

    def capture(i):
        x, w, b = sets[i]
        g = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.stream(_unseen_stream()):
                barrier.wait()
                # Thread-local mode: neither capture is broken by the other thread's calls.
                g.capture_begin(capture_error_mode="thread_local")
                try:
                    barrier.wait()  # both captures in progress
                    outs[i] = OP(x, w, b, M_, S_)
                    barrier.wait()  # both calls made, neither capture ended
                finally:
                    g.capture_end()
            graphs[i] = g
        except Exception as e:  # reported by the main thread
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=capture, args=(i,)) for i in range(2)]
    with _quiet_device():
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors
    for i, (x, w, b) in enumerate(sets):
        new_x = make_inputs(*shapes[i], device=DEV, seed=50 + i)[0]
        x.copy_(new_x)
        graphs[i].replay()
        torch.cuda.synchronize()
        assert_strict(outs[i], new_x, w, b, M_, S_)


def test_captures_beyond_the_lanes_are_refused():
    # One capture more than there are lanes, all in progress at once on streams the op never
    # saw: the last call is refused by name (no lane, and none can be made during a capture),
    # leaving its capture valid; the others compute. Relaxed capture mode: this thread ends
    # each capture while the others are still in progress.
    x, w, b = make_inputs(24, 40, 8, device=DEV, seed=60)
    OP(x, w, b, M_, S_)
    torch.cuda.synchronize()
    lanes = fused_linear.status()["cuda_capture_lanes"]
    begun, outs = [], []
    with _quiet_device():
        try:
            for _ in range(lanes + 1):
                g, stream = torch.cuda.CUDAGraph(), _unseen_stream()
                with torch.cuda.stream(stream):
                    g.capture_begin(capture_error_mode="relaxed")
                begun.append((g, stream))
            for i, (g, stream) in enumerate(begun):
                with torch.cuda.stream(stream):
                    if i < lanes:
                        outs.append(OP(x, w, b, M_, S_))
                    else:
                        with pytest.raises(ValueError, match="too many concurrent captures"):
                            OP(x, w, b, M_, S_)
        finally:
            for g, stream in begun:
                with torch.cuda.stream(stream):
                    g.capture_end()
    new_x = make_inputs(24, 40, 8, device=DEV, seed=61)[0]
    x.copy_(new_x)
    for (g, _), y in zip(begun, outs):
        g.replay()
        torch.cuda.synchronize()
        assert_strict(y, new_x, w, b, M_, S_)


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
