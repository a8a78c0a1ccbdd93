# SPDX-License-Identifier: Apache-2.0
"""The module under DistributedDataParallel: two processes on the host (gloo), each with half
of every batch, end five SGD steps with the parameters of one process training on the whole
batch (DDP averages the gradients; the mean loss of the halves is the whole batch's)."""
import os
import tempfile

import pytest
import torch
import torch.nn.functional as F

import fused_linear

dist = torch.distributed
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

WORLD, STEPS, ROWS, K, N = 2, 5, 32, 24, 12
SLOPES = (0.1, -0.2)  # the output saved, and the pre-activation


def _problem():
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(ROWS, K, generator=g) for _ in range(STEPS)]
    targets = [torch.randn(ROWS, N, generator=g) for _ in range(STEPS)]
    return xs, targets


def _model(s):
    torch.manual_seed(1)
    return fused_linear.FusedLinearLeakyReLU(K, N, 2.0, s)


def _train(model, xs, targets, rank=0, world=1):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    rows = slice(rank * ROWS // world, (rank + 1) * ROWS // world)
    for x, target in zip(xs, targets):
        opt.zero_grad()
        F.mse_loss(model(x[rows]), target[rows]).backward()
        opt.step()


def _worker(rank, store_file, out_dir):
    # One thread each: two processes share the machine's cores.
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store_file}", rank=rank, world_size=WORLD)
    try:
        for s in SLOPES:
            model = _model(s)
            ddp = torch.nn.parallel.DistributedDataParallel(model)
            _train(ddp, *_problem(), rank=rank, world=WORLD)
            torch.save(model.state_dict(), os.path.join(out_dir, f"{s}-rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def ddp_states():
    """Both slopes' parameters from each rank, trained by one spawn of the two processes
    (starting them is most of the time)."""
    mp = pytest.importorskip("torch.multiprocessing")
    with tempfile.TemporaryDirectory() as out_dir:
        store_file = os.path.join(out_dir, "store")
        env = {"FUSED_LINEAR_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        saved = {key: os.environ.get(key) for key in env}
        os.environ.update(env)  # the children's Kokkos: one host thread each
        try:
            mp.spawn(_worker, args=(store_file, out_dir), nprocs=WORLD, join=True)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key)
                else:
                    os.environ[key] = value
        return {
            s: [torch.load(os.path.join(out_dir, f"{s}-rank{r}.pt")) for r in range(WORLD)]
            for s in SLOPES
        }


@pytest.mark.parametrize("s", SLOPES)
def test_ddp_matches_one_process(ddp_states, s):
    states = ddp_states[s]
    single = _model(s)
    start = {key: value.clone() for key, value in single.state_dict().items()}
    _train(single, *_problem())
    for key, value in single.state_dict().items():
        assert not torch.equal(value, start[key]), key  # the steps moved it
        for rank, state in enumerate(states):
            # fp32 rounding: the halves' gradients are summed in another order.
            assert torch.allclose(state[key], value, rtol=1e-5, atol=1e-6), (key, rank)
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])  # in step
