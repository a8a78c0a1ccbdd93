# SPDX-License-Identifier: Apache-2.0
"""Threads, forks and interpreter exit on the host, each case in a fresh interpreter with a
timeout (a hang fails the test): which Kokkos execution space a thread's call runs on, the
thread count PyTorch keeps, a call in flight at exit, a child forked after the op ran."""
import os
import subprocess
import sys
import textwrap

import pytest

TIMEOUT = 120  # seconds for one interpreter; every case takes a few


def run(code, timeout=TIMEOUT, **env):
    environment = dict(os.environ, **env)
    try:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            env=environment,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"hung: no exit after {timeout} s\n{e.stdout}\n{e.stderr}")
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


PRELUDE = """
import threading, torch, fused_linear
import torch.nn.functional as F
x, w, b = torch.rand(48, 200), torch.rand(24, 200) - 0.5, torch.rand(24) - 0.5
ref = F.leaky_relu(F.linear(x.double(), w.double(), b.double()) * 2.0, 0.1)
def check(y):
    assert (y.double() - ref).abs().max().item() < 1e-4, (y.double() - ref).abs().max()
def space():  # runs the layer from the calling thread; the execution space it ran on
    info = fused_linear.run_info(x, w, b, 2.0, 0.1)
    check(fused_linear.linear_leaky_relu(x, w, b, 2.0, 0.1))
    return info["execution_space"]
def in_thread(f):
    out = {}
    def body():
        try:
            out["value"], out["ident"] = f(), threading.get_ident()
        except Exception as e:  # reported by the caller
            out["error"] = e
    t = threading.Thread(target=body)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["value"], out["ident"]
"""


def script(body):
    return PRELUDE + textwrap.dedent(body)


# Two host threads for Kokkos, whatever PyTorch's default (one on a machine of one physical
# core): a pool that a fork leaves behind, and a space that is not Serial.
POOL = {"FUSED_LINEAR_NUM_THREADS": "2"}


def test_first_call_from_a_worker_thread_leaves_every_thread_on_the_pool():
    # Kokkos is initialised by a worker thread's call; the main thread's calls, and a later
    # thread's, still run on the default host space (not on Kokkos::Serial for good).
    done = run(
        script(
            """
        first, _ = in_thread(space)
        main = space()
        later, _ = in_thread(space)
        print(first, main, later, fused_linear.status()["host_space"])
    """
        ),
        **POOL,
    )
    first, main, later, host = done.stdout.split()
    assert first == main == later == host, done.stdout


def test_a_thread_reusing_a_dead_initialisers_id():
    # The initialising thread ends; new threads (glibc reuses a dead thread's id, often at
    # once) and the main thread compute, on the default host space.
    done = run(
        script(
            """
        first, dead = in_thread(space)
        reused = 0
        for _ in range(20):
            got, ident = in_thread(space)
            assert got == first, (got, first)
            reused += ident == dead
        print(space(), first, reused)
    """
        ),
        **POOL,
    )
    main, first, reused = done.stdout.split()
    assert main == first, done.stdout
    print("threads that reused the initialiser's id:", reused)


def test_threads_at_once():
    # Calls from several threads at once (the main thread's among them) are all right.
    run(
        script(
            """
        space()
        errors = []
        def work():
            try:
                for _ in range(30):
                    check(fused_linear.linear_leaky_relu(x, w, b, 2.0, 0.1))
            except Exception as e:
                errors.append(e)
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        work()
        for t in threads:
            t.join()
        assert not errors, errors
    """
        ),
        **POOL,
    )


def test_num_threads_setting_leaves_torchs_count_alone():
    # Kokkos' OpenMP backend sets OpenMP's thread count when it starts; PyTorch's count (the
    # calling thread's OpenMP setting) must be what it was.
    for how in ("environment", "initialize"):
        done = run(
            script(
                f"""
            import os
            before = torch.get_num_threads()
            if "{how}" == "environment":
                os.environ["FUSED_LINEAR_NUM_THREADS"] = str(before + 1)
                space()
            else:
                fused_linear.initialize(num_threads=before + 1)
            s = fused_linear.status()
            print(before, torch.get_num_threads(), s["host_threads"], s["host_space"])
        """
            )
        )
        before, after, kokkos, host = done.stdout.split()
        assert after == before, (how, done.stdout)
        if host in ("OpenMP", "Threads"):
            assert int(kokkos) == int(before) + 1, (how, done.stdout)


def test_exit_while_a_daemon_thread_is_in_the_op():
    # A daemon thread is inside a long call when the interpreter exits: finalize (at exit)
    # waits for it, then later calls are refused; the process ends cleanly. A handler that
    # runs after finalize keeps the process alive until the call has returned.
    done = run(
        """
        import atexit, threading, time
        state = {"calls": 0, "after": None, "done": threading.Event(), "started": threading.Event()}
        def wait_for_the_daemon():
            state["done"].wait(60)
            print("daemon calls", state["calls"], "then", state["after"])
        atexit.register(wait_for_the_daemon)  # before fused_linear's: runs after its finalize
        import torch, fused_linear
        f64 = torch.float64
        x, w = torch.rand(1500, 1500, dtype=f64), torch.rand(1500, 1500, dtype=f64)
        b = torch.rand(1500, dtype=f64)
        fused_linear.linear_leaky_relu(x[:8], w, b, 2.0, 0.1)  # Kokkos up on the main thread
        def daemon():
            y = None
            try:
                while True:
                    state["started"].set()
                    y = fused_linear.linear_leaky_relu(x, w, b, 2.0, 0.1)
                    state["calls"] += 1
            except Exception as e:
                state["after"] = type(e).__name__ + ": " + str(e)[:80]
            # Freed now: a tensor freed by a daemon thread while the interpreter finalises
            # ends the process (torch releases the GIL to free it, and cannot take it back).
            del y
            state["done"].set()
        threading.Thread(target=daemon, daemon=True).start()
        state["started"].wait()
        time.sleep(0.2)
    """,
        FUSED_LINEAR_NUM_THREADS="1",
    )
    assert "Kokkos" not in done.stderr and "rror" not in done.stderr, done.stderr
    assert "then RuntimeError: fused_linear: Kokkos was finalised" in done.stdout, done.stdout
    assert int(done.stdout.split()[2]) >= 1, done.stdout  # the call in flight returned


# ------------------------------------------------------------------ fork
FORK = """
import multiprocessing as mp, os, sys
def child(queue):
    try:
        y = fused_linear.linear_leaky_relu(x, w, b, 2.0, 0.1)
        queue.put(("ok", y.double().tolist(), fused_linear.run_info(x, w, b, 2.0, 0.1)))
    except Exception as e:
        queue.put(("error", type(e).__name__ + ": " + str(e), None))
def forked_call():
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    p = ctx.Process(target=child, args=(queue,))
    p.start()
    p.join(60)
    if p.is_alive():
        p.kill()
        raise SystemExit("the forked child hangs (killed after 60 s)")
    kind, value, info = queue.get(timeout=10)
    if kind == "ok":
        check(torch.tensor(value, dtype=torch.float64))
        print("child computed on", info["execution_space"])
    else:
        assert "fork" in value, value  # a refusal must say why
        print("child refused:", value)
"""


@pytest.mark.parametrize("parent", ["op", "torch pool", "nothing"])
def test_forked_child_computes_or_refuses(parent):
    # multiprocessing forks by default on Linux (DataLoader workers too): GNU OpenMP's threads
    # do not survive fork, so a child must not enter the parent's pool (it would wait forever).
    before = {
        "op": "space()",
        "torch pool": "torch.set_num_threads(2); torch.rand(2000, 2000).sum()",
        "nothing": "pass",
    }[parent]
    done = run(
        script(
            FORK + before + "\nforked_call()\n"
            "print('parent', space(), fused_linear.status()['host_space'])"
        ),
        **POOL,
    )
    assert "child computed" in done.stdout or "child refused" in done.stdout, done.stdout
    _, mine, host = done.stdout.split()[-3:]
    assert mine == host, done.stdout  # the parent keeps its pool


def test_forked_child_exits_through_atexit():
    # A child of os.fork that ends normally runs the atexit handlers, fused_linear's finalize
    # among them: it must not enter the dead pool either.
    run(
        script(
            """
        import os
        space()
        pid = os.fork()
        if pid == 0:
            try:
                check(fused_linear.linear_leaky_relu(x, w, b, 2.0, 0.1))
            except Exception as e:
                assert "fork" in str(e), e
            raise SystemExit(0)  # atexit handlers run
        import time
        for _ in range(600):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, 9)
            raise SystemExit("the forked child hangs (killed after 60 s)")
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    """
        ),
        **POOL,
    )


# ------------------------------------------------------------------ fork after the GPU started
def _cuda_kernel():
    import torch
    import fused_linear

    return torch.cuda.is_available() and bool(fused_linear.status()["cuda_kernel"])


needs_cuda = pytest.mark.skipif(
    not _cuda_kernel(), reason="needs a CUDA device and the CUDA kernel"
)

# The parent runs the op on CUDA first: Kokkos' CUDA instances, capture lanes and plans exist
# when it forks, and torch's CUDA context too.
CUDA_FIRST = """
xc, wc, bc = x.cuda(), w.cuda(), b.cuda()
check(fused_linear.linear_leaky_relu(xc, wc, bc, 2.0, 0.1).cpu())
torch.cuda.synchronize()
assert fused_linear.status()["cuda_capture_lanes"] > 0, fused_linear.status()
"""


@needs_cuda
def test_dataloader_workers_forked_after_the_gpu_started():
    # DataLoader's workers are forked (its default context on Linux, named here) after the parent
    # computed on the GPU; each item calls the op on CPU tensors. Every batch is right and the
    # workers exit cleanly (exit code 0).
    done = run(
        script(
            CUDA_FIRST
            + textwrap.dedent(
                """
        class Rows(torch.utils.data.Dataset):
            def __len__(self):
                return 24
            def __getitem__(self, i):
                return i, fused_linear.linear_leaky_relu(x, w, b, 2.0, 0.1)[i % 48]
        loader = torch.utils.data.DataLoader(
            Rows(), batch_size=4, num_workers=2, multiprocessing_context="fork"
        )
        it = iter(loader)
        seen = []
        for index, rows in it:
            for i, row in zip(index.tolist(), rows):
                assert (row.double() - ref[i % 48]).abs().max().item() < 1e-4, i
            seen += index.tolist()
        assert sorted(seen) == list(range(24)), seen
        workers = list(getattr(it, "_workers", []))
        it._shutdown_workers()
        assert [p.exitcode for p in workers] == [0] * len(workers), [p.exitcode for p in workers]
        check(fused_linear.linear_leaky_relu(xc, wc, bc, 2.0, 0.1).cpu())  # the parent goes on
        print("batches", len(seen) // 4, "workers", len(workers))
    """
            )
        ),
        **POOL,
    )
    assert "batches 6 workers 2" in done.stdout, done.stdout


@needs_cuda
def test_forked_children_after_the_gpu_started():
    # multiprocessing's fork children of a parent that used the op on CUDA: one computing on CPU
    # tensors exits 0, one calling it on CUDA tensors gets a RuntimeError naming fork (no
    # abort) and exits 0, one that only exits exits 0.
    done = run(
        script(
            CUDA_FIRST
            + textwrap.dedent(
                """
        import multiprocessing as mp
        ctx = mp.get_context("fork")
        def on_cpu():
            check(fused_linear.linear_leaky_relu(x, w, b, 2.0, 0.1))
            check(fused_linear.linear_leaky_relu(x, w, b, 2.0, 0.1))
        def on_cuda(queue):
            try:
                fused_linear.linear_leaky_relu(xc, wc, bc, 2.0, 0.1)
                queue.put("no error")
            except Exception as e:
                queue.put(type(e).__name__ + ": " + str(e))
        def nothing():
            pass
        def start(target, *args):
            p = ctx.Process(target=target, args=args)
            p.start()
            p.join(60)
            if p.is_alive():
                p.kill()
                raise SystemExit(f"{target.__name__}: the forked child hangs (killed after 60 s)")
            return p.exitcode
        assert start(on_cpu) == 0
        queue = ctx.Queue()
        assert start(on_cuda, queue) == 0
        message = queue.get(timeout=10)
        assert message.startswith("RuntimeError: ") and "fork" in message, message
        assert start(nothing) == 0
        assert start(on_cpu) == 0
        check(fused_linear.linear_leaky_relu(xc, wc, bc, 2.0, 0.1).cpu())  # the parent goes on
        print("child on CUDA:", message)
    """
            )
        ),
        **POOL,
    )
    assert "child on CUDA: RuntimeError" in done.stdout, done.stdout


@needs_cuda
def test_fork_while_a_thread_holds_the_instances_lock():
    # A thread makes the Kokkos instance of a new stream (Kokkos 3.4 waits for the device there,
    # busy with a long kernel, holding the bridge's lock of instances) while the main thread
    # forks: the child's status and CPU calls must not wait for that lock, which no thread of
    # the child will ever release.
    done = run(
        script(
            CUDA_FIRST
            + textwrap.dedent(
                """
        import multiprocessing as mp
        busy = torch.cuda.Stream()
        with torch.cuda.stream(busy):
            torch.cuda._sleep(int(2e9))  # about a second of GPU time
        result = {}
        def on_a_new_stream():
            with torch.cuda.stream(torch.cuda.Stream(priority=-1)):
                result["y"] = fused_linear.linear_leaky_relu(xc, wc, bc, 2.0, 0.1).cpu()
        thread = threading.Thread(target=on_a_new_stream)
        thread.start()
        import time
        time.sleep(0.2)
        def child():
            assert fused_linear.status()["cached_cuda_instances"] == 0  # the parent's: abandoned
            check(fused_linear.linear_leaky_relu(x, w, b, 2.0, 0.1))
        p = mp.get_context("fork").Process(target=child)
        p.start()
        p.join(60)
        if p.is_alive():
            p.kill()
            raise SystemExit("the forked child hangs (killed after 60 s)")
        thread.join()
        check(result["y"])
        print("child exit", p.exitcode)
    """
            )
        ),
        **POOL,
    )
    assert "child exit 0" in done.stdout, done.stdout
