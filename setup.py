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
  CMAKE_ARGS                         more CMake options, e.g. "-DKokkos_ARCH_HOPPER90=ON"
  CMAKE_BUILD_PARALLEL_LEVEL         build jobs (default: all cores)
"""
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


def torch_has_cuda():
    try:
        import torch  # the torch the operator is built against: this Python's
    except ImportError:
        sys.exit(f"fused_linear: {sys.executable} cannot import torch. The operator is built "
                 "against the torch of the environment pip installs into, which an isolated "
                 "build does not see: pip install --no-build-isolation .")
    return bool(torch.version.cuda)


def find_nvcc():
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    nvcc = Path(home) / "bin" / "nvcc"
    return str(nvcc) if nvcc.exists() else shutil.which("nvcc")


def installed_kokkos_wrapper():
    """nvcc_wrapper of a CUDA Kokkos on CMAKE_PREFIX_PATH: the compiler its users must take."""
    for prefix in filter(None, os.environ.get("CMAKE_PREFIX_PATH", "").split(os.pathsep)):
        wrapper = Path(prefix) / "bin" / "nvcc_wrapper"
        for common in Path(prefix).glob("lib*/cmake/Kokkos/KokkosConfigCommon.cmake"):
            devices = re.search(r"set\(Kokkos_DEVICES\s+([^)]*)\)", common.read_text(), re.I)
            if wrapper.exists() and devices and "CUDA" in devices.group(1).split(";"):
                return str(wrapper)
    return None


class CMakeBuild(build_ext):
    def get_ext_filename(self, fullname):
        # The package loads its library by this plain name (fused_linear/__init__.py).
        return os.path.join(*fullname.split(".")[:-1], LIBRARY)

    def build_extension(self, ext):
        build = Path(self.build_temp).resolve() / "cmake"
        build.mkdir(parents=True, exist_ok=True)
        args = ["-DCMAKE_BUILD_TYPE=Release", f"-DFusedLinear_PYTHON={sys.executable}",
                "-DFusedLinear_ENABLE_TORCH=ON", "-DFusedLinear_ENABLE_TESTS=OFF",
                "-DFusedLinear_ENABLE_PERF=OFF", "-DFusedLinear_ENABLE_EXAMPLES=OFF"]
        if shutil.which("ninja") and not (build / "CMakeCache.txt").exists():
            args.append("-GNinja")
        for env, var in (("FUSED_LINEAR_KOKKOS_SOURCE", "FusedLinear_KOKKOS_SOURCE"),
                         ("FUSED_LINEAR_KOKKOS_KERNELS_SOURCE", "FusedLinear_KOKKOS_KERNELS_SOURCE"),
                         ("FUSED_LINEAR_INTERNAL_KOKKOS", "FusedLinear_INTERNAL_KOKKOS")):
            if os.environ.get(env):
                args.append(f"-D{var}={os.environ[env]}")
        user = shlex.split(os.environ.get("CMAKE_ARGS", ""))

        want = os.environ.get("FUSED_LINEAR_CUDA")
        nvcc = find_nvcc()
        if want is None:
            cuda = torch_has_cuda() and nvcc is not None
        else:
            cuda = want == "1"
        if cuda and not nvcc:
            sys.exit("fused_linear: FUSED_LINEAR_CUDA=1 but no nvcc (set CUDA_HOME)")
        print(f"fused_linear: CUDA kernel {'on' if cuda else 'off'} (torch CUDA: "
              f"{torch_has_cuda()}, nvcc: {nvcc})", flush=True)
        if cuda:
            os.environ["PATH"] = str(Path(nvcc).parent) + os.pathsep + os.environ["PATH"]
            args.append(f"-DCMAKE_CUDA_COMPILER={nvcc}")
            wrapper = installed_kokkos_wrapper()
            if wrapper and not any(a.startswith("-DCMAKE_CXX_COMPILER") for a in user):
                args.append(f"-DCMAKE_CXX_COMPILER={wrapper}")
        # The backends of a Kokkos built inside (ignored when an installed one is found):
        # OpenMP for the host, as torch's own CPU kernels; CUDA beside it for a CUDA build.
        if not any(a.startswith("-DKokkos_ENABLE_") for a in user):
            args += ["-DKokkos_ENABLE_SERIAL=ON", "-DKokkos_ENABLE_OPENMP=ON"]
            if cuda:
                args.append("-DKokkos_ENABLE_CUDA=ON")

        subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build)] + args + user, check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        subprocess.run(["cmake", "--build", str(build), "--target", "fused_linear_torch",
                        "-j", jobs], check=True)
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(build / "python" / "fused_linear" / LIBRARY, target)


setup(
    packages=["fused_linear"],
    package_dir={"fused_linear": "python/fused_linear"},
    ext_modules=[Extension("fused_linear.fused_linear_torch", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
