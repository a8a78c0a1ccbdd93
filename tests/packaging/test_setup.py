# SPDX-License-Identifier: Apache-2.0
"""setup.py, the way pip runs it (`python setup.py build_ext` in the source tree), with stand-ins
for what it drives: a `cmake` that keeps a cache per folder as CMake does (every -D lasts, -U
forgets, Torch_DIR is found once and then cached), a torch per virtual environment and an nvcc
of a chosen CUDA release. Each test builds twice from one tree and checks what the second
configure really gets: the cache of the folder it ran in, not just the arguments it was given.
"""
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SETUP_PY = Path(__file__).resolve().parents[2] / "setup.py"

FAKE_CMAKE = """\
#!{python}
import fnmatch, json, os, subprocess, sys
from pathlib import Path

argv = sys.argv[1:]
if argv[0] == "--build":
    library = Path(argv[1]) / "python" / "fused_linear" / "libfused_linear_torch.so"
    library.parent.mkdir(parents=True, exist_ok=True)
    library.write_bytes(b"")
    sys.exit(0)
build = Path(argv[argv.index("-B") + 1])
build.mkdir(parents=True, exist_ok=True)
cache_file = build / "FakeCMakeCache.json"
cache = json.loads(cache_file.read_text()) if cache_file.exists() else {{}}
for arg in argv:
    if arg.startswith("-U"):
        cache = {{k: v for k, v in cache.items() if not fnmatch.fnmatchcase(k, arg[2:])}}
    elif arg.startswith("-D"):
        name, value = arg[2:].split("=", 1)
        cache[name.split(":")[0]] = value
if "Torch_DIR" not in cache:  # find_package(Torch): found once, then cached
    cache["Torch_DIR"] = subprocess.run(
        [cache["FusedLinear_PYTHON"], "-c",
         "import os, torch; print(os.path.dirname(torch.__file__))"],
        capture_output=True, text=True, check=True).stdout.strip()
cache_file.write_text(json.dumps(cache))
with open(os.environ["FAKE_CMAKE_LOG"], "a") as log:
    log.write(json.dumps({{"folder": str(build), "cache": cache}}) + "\\n")
"""

FAKE_TORCH = """\
import os
__version__ = "{version}"
class version:
    cuda = os.environ.get("FAKE_TORCH_CUDA") or None
"""

FAKE_NVCC = """\
#!/bin/sh
echo "Cuda compilation tools, release $FAKE_NVCC_RELEASE, V$FAKE_NVCC_RELEASE.1"
"""


class Venv:
    """A virtual environment with a torch of its own (a stand-in: version, folder, CUDA)."""

    def __init__(self, root, torch_version):
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(root)],
            check=True,
        )
        self.python = root / "bin" / "python"
        purelib = subprocess.run(
            [str(self.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        self.torch = Path(purelib) / "torch"
        self.torch.mkdir(parents=True)
        (self.torch / "__init__.py").write_text(FAKE_TORCH.format(version=torch_version))


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    """Two environments with different torches, a bin/ with cmake, a CUDA toolkit with nvcc."""
    if subprocess.run([sys.executable, "-c", "import setuptools, venv"]).returncode != 0:
        pytest.skip(f"{sys.executable} has no setuptools or venv")
    root = tmp_path_factory.mktemp("machine")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    (bin_dir / "cmake").write_text(FAKE_CMAKE.format(python=sys.executable))
    (bin_dir / "cmake").chmod(0o755)
    cuda = root / "cuda"
    (cuda / "bin").mkdir(parents=True)
    (cuda / "bin" / "nvcc").write_text(FAKE_NVCC)
    (cuda / "bin" / "nvcc").chmod(0o755)
    (root / "no-cuda").mkdir()
    return {
        "bin": bin_dir,
        "cuda": cuda,
        "no_cuda": root / "no-cuda",
        "a": Venv(root / "venv-a", "2.1.0"),
        "b": Venv(root / "venv-b", "2.3.0"),
    }


@pytest.fixture
def tree(tmp_path):
    """A source tree of its own (setup.py alone: cmake is the stand-in)."""
    shutil.copy(SETUP_PY, tmp_path / "setup.py")
    (tmp_path / "python" / "fused_linear").mkdir(parents=True)
    return tmp_path


def build(machine, tree, venv="a", check=True, **env):
    """setup.py build_ext with the environment's Python; returns (process, last configure)."""
    log = tree / "configures.jsonl"
    env = {
        "PATH": str(machine["bin"]),  # cmake only: no real nvcc, ninja, compiler
        "CUDA_HOME": str(machine["no_cuda"]),
        "FAKE_CMAKE_LOG": str(log),
        **{name: str(value) for name, value in env.items()},
    }
    before = len(log.read_text().splitlines()) if log.exists() else 0
    process = subprocess.run(
        [str(machine[venv].python), "setup.py", "build_ext"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )
    if check:
        assert process.returncode == 0, process.stdout + process.stderr
    lines = log.read_text().splitlines() if log.exists() else []
    return process, json.loads(lines[-1]) if len(lines) > before else None


def test_same_configuration_reuses_its_folder(machine, tree):
    _, first = build(machine, tree)
    _, second = build(machine, tree)
    assert first["folder"] == second["folder"]


def test_another_environment_builds_against_its_own_torch(machine, tree):
    _, first = build(machine, tree, "a")
    assert first["cache"]["Torch_DIR"] == str(machine["a"].torch)
    _, second = build(machine, tree, "b")
    assert second["cache"]["FusedLinear_PYTHON"] == str(machine["b"].python)
    assert second["cache"]["Torch_DIR"] == str(machine["b"].torch)
    _, again = build(machine, tree, "a")
    assert again["folder"] == first["folder"]


def test_cpu_only_after_a_cuda_build(machine, tree):
    cuda = dict(CUDA_HOME=machine["cuda"], FAKE_TORCH_CUDA="12.4", FAKE_NVCC_RELEASE="12.8")
    _, first = build(machine, tree, **cuda)
    assert first["cache"]["Kokkos_ENABLE_CUDA"] == "ON"
    assert first["cache"]["CMAKE_CUDA_COMPILER"] == str(machine["cuda"] / "bin" / "nvcc")
    _, second = build(machine, tree, **cuda, FUSED_LINEAR_CUDA="0")
    assert second["cache"].get("Kokkos_ENABLE_CUDA", "OFF") == "OFF"
    assert "CMAKE_CUDA_COMPILER" not in second["cache"]


def test_cuda_by_default_only_with_a_cuda_torch_and_nvcc(machine, tree):
    _, no_nvcc = build(machine, tree, FAKE_TORCH_CUDA="12.4")
    assert no_nvcc["cache"].get("Kokkos_ENABLE_CUDA", "OFF") == "OFF"
    _, cpu_torch = build(machine, tree, CUDA_HOME=machine["cuda"], FAKE_NVCC_RELEASE="12.4")
    assert cpu_torch["cache"].get("Kokkos_ENABLE_CUDA", "OFF") == "OFF"
    process, _ = build(machine, tree, check=False, FUSED_LINEAR_CUDA="1")
    assert process.returncode != 0 and "no nvcc" in process.stderr


def test_nvcc_of_another_cuda_major_than_torch_is_refused(machine, tree):
    cuda = dict(CUDA_HOME=machine["cuda"], FAKE_TORCH_CUDA="12.4", FAKE_NVCC_RELEASE="13.0")
    process, configure = build(machine, tree, check=False, **cuda)
    assert process.returncode != 0 and configure is None
    message = " ".join(process.stderr.split())
    assert "CUDA 13.0" in message and "CUDA 12.4" in message, message
    assert "FUSED_LINEAR_CUDA=0" in message and "FUSED_LINEAR_ALLOW_CUDA_MISMATCH=1" in message
    _, cpu = build(machine, tree, **cuda, FUSED_LINEAR_CUDA="0")
    assert cpu["cache"].get("Kokkos_ENABLE_CUDA", "OFF") == "OFF"
    _, allowed = build(machine, tree, **cuda, FUSED_LINEAR_ALLOW_CUDA_MISMATCH="1")
    assert allowed["cache"]["Kokkos_ENABLE_CUDA"] == "ON"


def test_an_unset_kokkos_source_is_not_kept(machine, tree):
    archive = "/archives/kokkos-4.6.01.tar.gz"
    _, first = build(machine, tree, FUSED_LINEAR_KOKKOS_SOURCE=archive)
    assert first["cache"]["FusedLinear_KOKKOS_SOURCE"] == archive
    _, second = build(machine, tree)
    assert second["cache"].get("FusedLinear_KOKKOS_SOURCE") != archive


def test_cmake_args_last_one_build(machine, tree):
    _, first = build(machine, tree, CMAKE_ARGS="-DFusedLinear_ENABLE_ETI=OFF")
    assert first["cache"]["FusedLinear_ENABLE_ETI"] == "OFF"
    _, second = build(machine, tree)
    assert "FusedLinear_ENABLE_ETI" not in second["cache"]


def test_the_decisions_as_functions():
    """What the runs above cannot reach: a wrong value, CUDA asked of a CPU torch, the key."""
    pytest.importorskip("setuptools")
    spec = importlib.util.spec_from_file_location("fused_linear_setup", SETUP_PY)
    setup = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup)  # defines, does not build
    cpu = {"version": "2.3.0", "path": "/torch", "cuda": ""}
    cuda = dict(cpu, cuda="12.4")
    nvcc = "/cuda/bin/nvcc"
    assert setup.cuda_kernel({}, cuda, nvcc, "12.8") and not setup.cuda_kernel({}, cuda, None, "")
    with pytest.raises(setup.BuildError, match="1 or 0"):
        setup.cuda_kernel({"FUSED_LINEAR_CUDA": "yes"}, cuda, nvcc, "12.4")
    with pytest.raises(setup.BuildError, match="has no CUDA"):
        setup.cuda_kernel({"FUSED_LINEAR_CUDA": "1"}, cpu, nvcc, "12.4")
    args = setup.cmake_arguments({}, "/venv/bin/python", False, None, None, None)
    assert "-DKokkos_ENABLE_CUDA=OFF" in args and "-DFusedLinear_PYTHON=/venv/bin/python" in args
    folder, text = setup.build_folder("/b", "/venv/bin/python", cpu, args, {"CXX": "g++"})
    assert json.loads(text)["environment"] == {"CXX": "g++"}
    assert folder == setup.build_folder("/b", "/venv/bin/python", cpu, args, {"CXX": "g++"})[0]
    assert folder != setup.build_folder("/b", "/venv/bin/python", cpu, args, {"CXX": "clang++"})[0]
