# SPDX-License-Identifier: Apache-2.0
"""`pip install .`: builds the operator library with CMake and installs the package fused_linear.

Only the operator (target fused_linear_torch) is built, against the torch of the Python running
pip (-DFusedLinear_PYTHON). Kokkos: an installed one where CMake finds it (CMAKE_PREFIX_PATH),
else built inside (FusedLinear_INTERNAL_KOKKOS=AUTO), static, from the upstream release archives
or FUSED_LINEAR_KOKKOS_SOURCE / FUSED_LINEAR_KOKKOS_KERNELS_SOURCE. Environment (docs/building.md):
  CMAKE_PREFIX_PATH                  where an installed Kokkos + Kokkos Kernels are
  FUSED_LINEAR_KOKKOS_SOURCE         Kokkos to build: URL, .tar.gz or directory
  FUSED_LINEAR_KOKKOS_KERNELS_SOURCE Kokkos Kernels to build with it
  FUSED_LINEAR_INTERNAL_KOKKOS       AUTO (default), ON (always build), OFF (installed only)
  FUSED_LINEAR_CUDA                  1 / 0: the CUDA kernel or not (default: when torch has CUDA
                                     and nvcc is found)
  FUSED_LINEAR_ALLOW_CUDA_MISMATCH   1: build the CUDA kernel with an nvcc whose CUDA major is
                                     not torch's (unsupported: two CUDA runtimes in one process)
  CMAKE_ARGS                         more CMake options, e.g. "-DKokkos_ARCH_HOPPER90=ON"
  CMAKE_BUILD_PARALLEL_LEVEL         build jobs (default: all cores)

One CMake folder per configuration, build/temp.*/cmake-<key>: the key hashes the Python, its
torch, every CMake argument and the environment CMake reads, so a folder is reused (an
incremental build) only for the same configuration, and nothing one build cached (Torch_DIR,
Kokkos' backends, a source, a compiler) can carry over into a differently configured one.
"""
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
LIBRARY = "libfused_linear_torch.so"
# The environment CMake itself reads when it configures (compilers, generator, package prefixes).
CMAKE_ENVIRONMENT = (
    "CMAKE_PREFIX_PATH",
    "CMAKE_GENERATOR",
    "CMAKE_TOOLCHAIN_FILE",
    "CC",
    "CXX",
    "CUDACXX",
    "CUDAHOSTCXX",
)
KOKKOS_SETTINGS = (  # environment variable -> cache variable, passed where set
    ("FUSED_LINEAR_KOKKOS_SOURCE", "FusedLinear_KOKKOS_SOURCE"),
    ("FUSED_LINEAR_KOKKOS_KERNELS_SOURCE", "FusedLinear_KOKKOS_KERNELS_SOURCE"),
    ("FUSED_LINEAR_INTERNAL_KOKKOS", "FusedLinear_INTERNAL_KOKKOS"),
)


class BuildError(Exception):
    """A configuration that cannot give a working operator; the message says what to change."""


def torch_facts():
    """What the operator is compiled against: this Python's torch."""
    try:
        import torch
    except ImportError:
        raise BuildError(
            f"{sys.executable} cannot import torch. The operator is built against the torch of "
            "the environment pip installs into, which an isolated build does not see: "
            "pip install --no-build-isolation ."
        ) from None
    return {
        "version": torch.__version__,
        "path": os.path.dirname(torch.__file__),
        "cuda": torch.version.cuda or "",
    }


def find_nvcc(env):
    home = env.get("CUDA_HOME") or env.get("CUDA_PATH") or "/usr/local/cuda"
    nvcc = Path(home) / "bin" / "nvcc"
    return str(nvcc) if nvcc.exists() else shutil.which("nvcc", path=env.get("PATH"))


def nvcc_release(nvcc):
    """The CUDA release of nvcc, "13.0", from `nvcc --version`."""
    text = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    release = re.search(r"release (\d+\.\d+)", text)
    if not release:
        raise BuildError(f"cannot read the CUDA release from `{nvcc} --version`: {text!r}")
    return release.group(1)


def installed_kokkos_wrapper(env):
    """nvcc_wrapper of a CUDA Kokkos on CMAKE_PREFIX_PATH: the compiler its users must take."""
    for prefix in filter(None, env.get("CMAKE_PREFIX_PATH", "").split(os.pathsep)):
        wrapper = Path(prefix) / "bin" / "nvcc_wrapper"
        for common in Path(prefix).glob("lib*/cmake/Kokkos/KokkosConfigCommon.cmake"):
            devices = re.search(r"set\(Kokkos_DEVICES\s+([^)]*)\)", common.read_text(), re.I)
            if wrapper.exists() and devices and "CUDA" in devices.group(1).split(";"):
                return str(wrapper)
    return None


def cuda_kernel(env, torch, nvcc, release):
    """Whether to build the CUDA kernel, given torch's facts and nvcc (None) and its release."""
    want = env.get("FUSED_LINEAR_CUDA", "")
    if want not in ("", "0", "1"):
        raise BuildError(f"FUSED_LINEAR_CUDA is 1 or 0, not {want!r}")
    if want == "0" or (want == "" and not (torch["cuda"] and nvcc)):
        return False
    if not nvcc:
        raise BuildError("FUSED_LINEAR_CUDA=1 but no nvcc (set CUDA_HOME)")
    if not torch["cuda"]:
        raise BuildError(f"FUSED_LINEAR_CUDA=1 but torch {torch['version']} has no CUDA")
    # torch loads its CUDA major's runtime, the kernel would link nvcc's: one major, one runtime.
    major, torch_major = release.split(".")[0], torch["cuda"].split(".")[0]
    if major != torch_major and env.get("FUSED_LINEAR_ALLOW_CUDA_MISMATCH") != "1":
        raise BuildError(
            f"{nvcc} is CUDA {release}, torch {torch['version']} is built for CUDA "
            f"{torch['cuda']}: the operator would link CUDA {major}'s runtime into a process "
            f"running CUDA {torch_major}'s. Set CUDA_HOME to a CUDA {torch_major} toolkit, or "
            "FUSED_LINEAR_CUDA=0 for an operator without the CUDA kernel "
            "(FUSED_LINEAR_ALLOW_CUDA_MISMATCH=1 builds it anyway, unsupported)"
        )
    return True


def cmake_arguments(env, python, cuda, nvcc, wrapper, ninja):
    """The configure arguments: the operator alone, for this Python, then CMAKE_ARGS."""
    args = [
        "-DCMAKE_BUILD_TYPE=Release",
        f"-DFusedLinear_PYTHON={python}",
        "-DFusedLinear_ENABLE_TORCH=ON",
        "-DFusedLinear_ENABLE_TESTS=OFF",
        "-DFusedLinear_ENABLE_PERF=OFF",
        "-DFusedLinear_ENABLE_EXAMPLES=OFF",
    ]
    if ninja and not env.get("CMAKE_GENERATOR"):
        args.append("-GNinja")
    args += [f"-D{var}={env[name]}" for name, var in KOKKOS_SETTINGS if env.get(name)]
    user = shlex.split(env.get("CMAKE_ARGS", ""))
    if cuda:
        args.append(f"-DCMAKE_CUDA_COMPILER={nvcc}")
        if wrapper and not any(a.startswith("-DCMAKE_CXX_COMPILER") for a in user):
            args.append(f"-DCMAKE_CXX_COMPILER={wrapper}")
    # The backends of a Kokkos built inside (ignored when an installed one is found): OpenMP
    # for the host, as torch's own CPU kernels; CUDA beside it for a CUDA build.
    if not any(a.startswith("-DKokkos_ENABLE_") for a in user):
        args += ["-DKokkos_ENABLE_SERIAL=ON", "-DKokkos_ENABLE_OPENMP=ON"]
        args.append(f"-DKokkos_ENABLE_CUDA={'ON' if cuda else 'OFF'}")
    return args + user


def build_folder(base, python, torch, args, env):
    """base/cmake-<key> and what the key hashes: a folder serves one configuration only."""
    configuration = {
        "python": python,
        "torch": torch,
        "cmake_args": args,
        "environment": {name: env[name] for name in CMAKE_ENVIRONMENT if env.get(name)},
    }
    text = json.dumps(configuration, indent=1, sort_keys=True)
    key = hashlib.sha256(text.encode()).hexdigest()[:12]
    return Path(base) / f"cmake-{key}", text


class CMakeBuild(build_ext):
    def get_ext_filename(self, fullname):
        # The package loads its library by this plain name (fused_linear/__init__.py).
        return os.path.join(*fullname.split(".")[:-1], LIBRARY)

    def build_extension(self, ext):
        try:
            self.build_operator(ext)
        except BuildError as e:
            sys.exit(f"fused_linear: {e}")

    def build_operator(self, ext):
        env = os.environ
        torch = torch_facts()
        nvcc = find_nvcc(env)
        want = env.get("FUSED_LINEAR_CUDA", "")
        release = nvcc_release(nvcc) if nvcc and want != "0" and (want or torch["cuda"]) else ""
        cuda = cuda_kernel(env, torch, nvcc, release)
        print(
            f"fused_linear: CUDA kernel {'on' if cuda else 'off'} (torch {torch['version']} "
            f"CUDA '{torch['cuda']}', nvcc {nvcc or 'not found'} {release})",
            flush=True,
        )
        if cuda:  # nvcc_wrapper takes the nvcc on PATH
            os.environ["PATH"] = str(Path(nvcc).parent) + os.pathsep + os.environ["PATH"]
        wrapper = installed_kokkos_wrapper(env) if cuda else None
        args = cmake_arguments(env, sys.executable, cuda, nvcc, wrapper, shutil.which("ninja"))
        build, configuration = build_folder(
            Path(self.build_temp).resolve(), sys.executable, torch, args, env
        )
        build.mkdir(parents=True, exist_ok=True)
        (build / "fused-linear-configuration.json").write_text(configuration + "\n")
        print(f"fused_linear: CMake folder {build}", flush=True)

        subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build)] + args, check=True)
        jobs = env.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        subprocess.run(
            ["cmake", "--build", str(build), "--target", "fused_linear_torch", "-j", jobs],
            check=True,
        )
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(build / "python" / "fused_linear" / LIBRARY, target)


# Run by pip (setuptools executes this file as __main__); imported, it only defines the above.
if __name__ == "__main__":
    setup(
        packages=["fused_linear"],
        package_dir={"fused_linear": "python/fused_linear"},
        ext_modules=[Extension("fused_linear.fused_linear_torch", sources=[])],
        cmdclass={"build_ext": CMakeBuild},
        zip_safe=False,
    )
