# SPDX-License-Identifier: Apache-2.0
"""Kokkos' lifetime in the Python process: initialised on first use with PyTorch's thread count,
finalised at exit after the plans are released; each case in a fresh interpreter."""
import os
import subprocess
import sys
import textwrap

import torch


def run(code, **env):
    environment = dict(os.environ, **env)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


PRELUDE = """
import torch, fused_linear
x, w, b = torch.rand(16, 32), torch.rand(8, 32), torch.rand(8)
"""


def test_initialised_on_first_call_and_finalised_at_exit():
    done = run(
        PRELUDE
        + """
        assert fused_linear.status()["initialized"] == 0
        y = fused_linear.linear_leaky_relu(x, w, b, 2.0, 0.1)
        s = fused_linear.status()
        assert s["initialized"] == 1 and s["owned"] == 1, s
        print("threads", s["host_threads"], torch.get_num_threads(), s["host_space"])
    """.replace(
            "\n        ", "\n"
        )
    )
    # A clean exit: no Kokkos complaint (allocations alive at finalize, a backend left
    # running), no error of any kind on stderr.
    assert "Kokkos" not in done.stderr and "rror" not in done.stderr, done.stderr
    words = done.stdout.split()
    if words[3] in ("OpenMP", "Threads"):
        assert words[1] == words[2]  # as many host threads as PyTorch's intra-op pool


def test_thread_count_follows_torch_and_the_environment():
    done = run(
        PRELUDE + "torch.set_num_threads(1)\nfused_linear.linear_leaky_relu(x, w, b, 2.0, 0.1)\n"
        "print(fused_linear.status()['host_threads'])"
    )
    assert done.stdout.split()[-1] == "1"
    done = run(
        PRELUDE + "fused_linear.linear_leaky_relu(x, w, b, 2.0, 0.1)\n"
        "s = fused_linear.status()\nprint(s['host_threads'], s['host_space'])",
        FUSED_LINEAR_NUM_THREADS="2",
    )
    threads, space = done.stdout.split()
    assert threads == ("2" if space in ("OpenMP", "Threads") else "1")


def test_explicit_initialize_and_finalize():
    run(
        PRELUDE
        + """
        fused_linear.initialize(num_threads=1)
        assert fused_linear.status()["initialized"] == 1
        fused_linear.initialize(num_threads=2)  # already up: nothing changes
        assert fused_linear.status()["host_threads"] == 1
        y = fused_linear.linear_leaky_relu(x, w, b, 2.0, 0.1)
        fused_linear.finalize()
        fused_linear.finalize()  # twice is fine
        s = fused_linear.status()
        assert s["initialized"] == 0 and s["finalized"] == 1, s
        try:
            fused_linear.linear_leaky_relu(x, w, b, 2.0, 0.1)
        except RuntimeError as e:
            assert "cannot start again" in str(e), e
        else:
            raise AssertionError("a call after finalize must fail")
    """.replace(
            "\n        ", "\n"
        )
    )


def test_many_shapes_then_exit():
    # More shapes than the one-shot call keeps plans for (32): the oldest are dropped, and the
    # remaining ones are released at exit before Kokkos::finalize.
    run(
        """
        import torch, fused_linear
        for n in range(1, 41):
            x, w, b = torch.rand(3, n), torch.rand(n, n), torch.rand(n)
            y = fused_linear.linear_leaky_relu(x, w, b, 2.0, 0.1)
            ref = torch.nn.functional.leaky_relu(torch.nn.functional.linear(x, w, b) * 2, 0.1)
            assert torch.allclose(y, ref, rtol=1e-5, atol=1e-5)
    """.replace(
            "\n        ", "\n"
        )
    )


def test_import_alone_does_not_start_kokkos():
    done = run("import fused_linear; print(fused_linear.status()['initialized'])")
    assert done.stdout.split()[-1] == "0"


def test_torch_version_is_reported():
    done = run("import fused_linear; print(fused_linear.status()['torch_version'])")
    assert (
        done.stdout.split()[-1] == torch.__version__.split("+")[0][: len(done.stdout.split()[-1])]
    )
