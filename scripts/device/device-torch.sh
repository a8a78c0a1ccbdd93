#!/usr/bin/env bash
# The PyTorch extension on the GPU machine: builds it there (against that machine's PyTorch,
# CUDA toolkit and the Kokkos CUDA prefix carried from the development machine), runs the
# Python tests on CUDA and perf/kernelbench_eval.py. Logs and results under $OUT.
#
#   On the development machine, once (gathers what the GPU machine may lack, ~40 MB):
#     bash scripts/device/device-torch.sh prepare    -> .device-torch/
#   On the GPU machine, from the repository root, with .device-torch carried:
#     bash scripts/device/device-torch.sh STEP...    the steps in order; the steps:
#       build         the operator, built there (with tests: about 5 min)
#       tests         the Python tests on CUDA (builds first if needed)
#       eval          perf/kernelbench_eval.py (about 4 min; builds first if needed)
#       suite         (the C++ test suite and example built there with every execution space;
#                     GTEST_FILTER, SUITE_TARGETS: a subset of them, SUITE_CMAKE_ARGS: more
#                     configure options)
#       pip           (pip install --no-build-isolation . into a folder of its own, then the
#                     Python tests and the evaluation against the installed package, from
#                     outside the source tree; each part's time printed)
#       all           (build tests eval)
#
# .device-torch/ holds: kokkos-cuda/ (the Kokkos + Kokkos Kernels 3.4.01 CUDA prefix of
# scripts/setup.sh cuda), deps/ (the host BLAS/LAPACK runtime the prefix links: Debian's BLIS,
# reference LAPACK, gfortran), gtest/ (Debian's GoogleTest, headers and static libraries, for
# the suite), pytest/ (Debian's pure-Python pytest, used only when the GPU machine's Python has
# none). `prepare PREFIX` carries another prefix (e.g. Kokkos 4.6's); KOKKOS_PREFIX overrides
# the prefix's path on the GPU machine.
# Environment: OUT (default /tmp/fused-linear-out), PYTHON (default python3), CUDA_HOME
# (default /usr/local/cuda), STEP_TIMEOUT (seconds per step, default none), EVAL_ARGS (extra
# arguments of kernelbench_eval.py), PYTEST_ARGS (extra pytest arguments), JOBS, PACK (1: one archive, all.tgz, left in $OUT).
# Exit status: 0 when every step passed; each step's status is printed as it ends.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root="$(pwd)"
carry="${CARRY:-${root}/.device-torch}"

die() { echo "device-torch: ERROR: $*" >&2; exit 1; }

prepare() {
  local src="${1:-$HOME/.cache/fused-linear/kokkos-3.4.01-cuda}"
  [ -f "${src}/lib/cmake/Kokkos/KokkosConfig.cmake" ] ||
    die "no Kokkos CUDA prefix at ${src} (bash scripts/setup.sh cuda makes it)"
  rm -rf "${carry}" && mkdir -p "${carry}/deps" "${carry}/pytest"
  cp -a "${src}" "${carry}/kokkos-cuda"
  # The BLAS and LAPACK the prefix's Kokkos Kernels links, with what they need at run time.
  local lib
  for lib in libblas.so.3 liblapack.so.3; do
    cp -L "/usr/lib/x86_64-linux-gnu/${lib}" "${carry}/deps/${lib}"
    ln -sf "${lib}" "${carry}/deps/${lib%.3}"
  done
  ldd "${carry}/deps/liblapack.so.3" | awk '/=>/ {print $3}' |
    grep -E 'lib(gfortran|quadmath)' | xargs -r -I{} cp -L {} "${carry}/deps/"
  mkdir -p "${carry}/gtest/include" "${carry}/gtest/lib"
  cp -a /usr/include/gtest "${carry}/gtest/include/"
  cp -L /usr/lib/x86_64-linux-gnu/libgtest.a /usr/lib/x86_64-linux-gnu/libgtest_main.a \
    "${carry}/gtest/lib/"
  local d=/usr/lib/python3/dist-packages
  for p in pytest _pytest pluggy iniconfig attr attrs packaging py py.py \
           pytest-*.dist-info pluggy-*.egg-info iniconfig-*.egg-info; do
    cp -a ${d}/${p} "${carry}/pytest/" 2>/dev/null || true
  done
  [ -d "${carry}/pytest/_pytest" ] || echo "device-torch: note: no Debian pytest to carry (apt-get install python3-pytest)"
  du -sh "${carry}"/* "${carry}"
  echo "carry: .device-torch"
}

if [ "${1:-}" = prepare ]; then
  shift
  prepare "$@"
  exit 0
fi

# ---------------------------------------------------------------------------- GPU machine
out="${OUT:-/tmp/fused-linear-out}"
mkdir -p "${out}"
exec > >(tee -a "${out}/device-torch.log") 2>&1
export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
export PATH="${CUDA_HOME}/bin:${PATH}"
export OMP_PROC_BIND=false PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
# The carried BLAS/LAPACK where the machine has none (the build's RPATH names them too).
export LD_LIBRARY_PATH="${carry}/deps${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
python="${PYTHON:-python3}"
jobs="${JOBS:-$(nproc)}"
build="${root}/build/device-torch"
status=0

step() {  # step NAME COMMAND...: run with a log in $out/NAME.log, remember failures
  local name="$1"; shift
  echo "=== ${name}: $*"
  local start=$SECONDS
  # A child bash (the step's functions are exported): a failing check ends the step, not the run.
  timeout "${STEP_TIMEOUT:-0}" bash -c '"$@"' "${name}" "$@" > "${out}/${name}.log" 2>&1
  local rc=$?
  [ "$rc" -ne 124 ] || echo "(${name}: stopped after STEP_TIMEOUT=${STEP_TIMEOUT} s)" >> "${out}/${name}.log"
  tail -n "${TAIL:-25}" "${out}/${name}.log"
  echo "=== ${name}: exit ${rc} after $((SECONDS - start)) s"
  [ "$rc" -eq 0 ] || status=1
  return "$rc"
}

diagnostics() {
  echo "--- $(date -u) on $(hostname)"
  uname -a
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 | head -5
  command -v nvcc && nvcc --version | tail -2
  cmake --version | head -1
  command -v ninja > /dev/null && echo "ninja $(ninja --version)"
  command -v g++ > /dev/null && g++ --version | head -1
  "${python}" - <<'EOF'
import sys
print("python", sys.version.split()[0], sys.executable)
try:
    import torch
except Exception as e:
    print("torch: cannot import:", e); sys.exit(0)
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(),
      "devices", torch.cuda.device_count(), "cxx11abi", torch._C._GLIBCXX_USE_CXX11_ABI)
print("torch cmake prefix", torch.utils.cmake_prefix_path)
if torch.cuda.is_available():
    print("gpu", torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))
try:
    import pytest; print("pytest", pytest.__version__)
except Exception as e:
    print("pytest: not importable:", e)
EOF
}

# The carried prefix's CMake files name files of the machine it was built on (CUDA under
# /usr/local/cuda/lib, Debian's BLAS/LAPACK). A patched copy names this machine's, or the
# carried runtime libraries where this machine has none; every replacement is printed.
patched_prefix() {
  local src="${KOKKOS_PREFIX:-}"
  if [ -z "${src}" ]; then
    for c in "${carry}/kokkos-cuda" "${root}/.device-kokkos" "${root}/.device/kokkos-cuda"; do
      [ -f "${c}/lib/cmake/Kokkos/KokkosConfig.cmake" ] && src="${c}" && break
    done
  fi
  [ -n "${src}" ] && [ -f "${src}/lib/cmake/Kokkos/KokkosConfig.cmake" ] ||
    die "no Kokkos CUDA prefix: expected .device-torch/kokkos-cuda (bash" \
        "scripts/device/device-torch.sh prepare, then carry .device-torch) or KOKKOS_PREFIX"
  grep -q "CUDA" <(grep "Kokkos_DEVICES" "${src}/lib/cmake/Kokkos/KokkosConfigCommon.cmake") ||
    die "${src} is not a CUDA build of Kokkos"
  local dst="${build}-kokkos"
  rm -rf "${dst}" && mkdir -p "$(dirname "${dst}")" && cp -a "${src}" "${dst}"
  local deps="${carry}/deps" f
  local cudalib="${CUDA_HOME}/lib64"
  [ -d "${cudalib}" ] || cudalib="${CUDA_HOME}/targets/x86_64-linux/lib"
  for f in $(grep -rhoE '/(usr|opt|root|home)/[^";) ]+\.(so|a)' "${dst}/lib/cmake" | sort -u); do
    [ -e "${f}" ] && continue
    local base repl=""
    base="$(basename "${f}")"
    case "${f}" in
      */stubs/*) repl="${cudalib}/stubs/${base}" ;;
      /usr/local/cuda/*) repl="${cudalib}/${base}" ;;
      */libdl.a | */libdl.so)
        for repl in libdl.a libdl.so libdl.so.2 ""; do
          [ -n "${repl}" ] && repl="$(g++ -print-file-name="${repl}")" && [ -e "${repl}" ] && break
        done ;;
      *) [ -e "${deps}/${base}" ] && repl="${deps}/${base}" ;;
    esac
    [ -n "${repl}" ] && [ -e "${repl}" ] ||
      die "the Kokkos prefix links ${f}, which this machine lacks and the carry has no ${base} for"
    echo "prefix: ${f} -> ${repl}" >&2
    grep -rlF "${f}" "${dst}/lib/cmake" | xargs sed -i "s|${f}|${repl}|g"
  done
  sed -i "s|/usr/local/cuda/include|${CUDA_HOME}/include|g" "${dst}"/lib/cmake/*/*.cmake
  chmod +x "${dst}/bin/"* 2>/dev/null
  echo "${dst}"
}

configure_and_build() {
  command -v nvcc > /dev/null || die "nvcc not found (CUDA_HOME=${CUDA_HOME})"
  command -v g++ > /dev/null || die "g++ not found (nvcc_wrapper compiles host code with it)"
  command -v cmake > /dev/null || die "cmake not found"
  "${python}" -c "import torch; assert torch.cuda.is_available(), 'no GPU'" ||
    die "${python}: torch with a usable CUDA device is needed"
  local torch_major nvcc_major
  torch_major="$("${python}" -c 'import torch; print((torch.version.cuda or "0").split(".")[0])')"
  nvcc_major="$(nvcc --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')"
  [ "${torch_major}" = "${nvcc_major}" ] ||
    echo "device-torch: WARNING: torch is built for CUDA ${torch_major}, nvcc is ${nvcc_major}"
  local prefix torch_prefix gen=()
  prefix="$(patched_prefix)" || die "cannot prepare the Kokkos prefix (above)"
  torch_prefix="$("${python}" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
  command -v ninja > /dev/null && gen=(-G Ninja)
  local common=("${gen[@]}" -DCMAKE_BUILD_TYPE=Release
    "-DCMAKE_PREFIX_PATH=${prefix};${torch_prefix}"
    "-DCMAKE_CXX_COMPILER=${prefix}/bin/nvcc_wrapper" "-DCMAKE_CUDA_COMPILER=${CUDA_HOME}/bin/nvcc"
    "-DFusedLinear_PYTHON=$(command -v "${python}")" -DFusedLinear_ENABLE_TORCH=ON
    -DFusedLinear_ENABLE_TESTS=OFF -DFusedLinear_ENABLE_PERF=OFF -DFusedLinear_ENABLE_EXAMPLES=OFF)
  # torch's own CMake config first; where it fails (its CUDA discovery wants the toolkit torch
  # was built with), the include and library folders of the Python package instead; last, the
  # operator's file through nvcc rather than the host compiler. Later attempts reconfigure the
  # same folder, so the Kokkos side (the long compile) is built once.
  local attempt discovery host_only
  rm -rf "${build}"
  for attempt in "cmake ON" "python ON" "python OFF"; do
    read -r discovery host_only <<< "${attempt}"
    echo "--- configure: ${discovery} discovery, operator file --host-only ${host_only}"
    if cmake -S "${root}" -B "${build}" "${common[@]}" -DFusedLinear_TORCH_DISCOVERY=${discovery} \
         -DFusedLinear_TORCH_HOST_ONLY=${host_only} &&
       cmake --build "${build}" --target fused_linear_torch -j "${jobs}"; then
      if PYTHONPATH="${build}/python" "${python}" -c \
        'import fused_linear, torch; x = torch.rand(4, 8, device="cuda"); w = torch.rand(3, 8, device="cuda"); b = torch.rand(3, device="cuda"); y = fused_linear.linear_leaky_relu(x, w, b, 2.0, 0.1); ref = torch.nn.functional.leaky_relu(torch.nn.functional.linear(x, w, b) * 2, 0.1); print("first CUDA call: max |y - ref|", (y - ref).abs().max().item()); assert torch.allclose(y, ref, atol=1e-5); print(fused_linear.status())'; then
        echo "${attempt}" > "${build}/ATTEMPT"
        return 0
      fi
      echo "--- built, but the import or the first CUDA call failed"
    fi
  done
  return 1
}

pytest_env() {  # the machine's pytest, else the carried one
  if ! "${python}" -c "import pytest" 2> /dev/null; then
    [ -d "${carry}/pytest/_pytest" ] || die "no pytest on ${python} and none carried in .device-torch/pytest"
    export PYTHONPATH="${carry}/pytest${PYTHONPATH:+:${PYTHONPATH}}"
  fi
}

run_tests() {
  pytest_env
  export PYTHONPATH="${build}/python${PYTHONPATH:+:${PYTHONPATH}}"
  "${python}" -m pytest -ra -p no:cacheprovider --junitxml="${out}/pytest.xml" \
    ${PYTEST_ARGS:-} tests/python
}

run_eval() {
  export PYTHONPATH="${build}/python${PYTHONPATH:+:${PYTHONPATH}}"
  "${python}" perf/kernelbench_eval.py --out "${out}/kernelbench" ${EVAL_ARGS:-}
}

built() { [ -f "${build}/python/fused_linear/libfused_linear_torch.so" ]; }

# As a PyTorch user installs it: `pip install --no-build-isolation .` (setup.py drives CMake),
# Kokkos from the carried CUDA prefix, into a folder of its own (--target: the machine's Python
# is left as it was); then, from outside the source tree, the Python tests and the evaluation
# against the installed package, and `pip wheel` for the wheel's size.
run_pip() {
  local prefix site="${root}/build/device-pip/site" work="${root}/build/device-pip/work" t0=$SECONDS
  prefix="$(patched_prefix)" || die "cannot prepare the Kokkos prefix (above)"
  rm -rf "${root}/build/device-pip" && mkdir -p "${site}" "${work}" "${out}/wheel"
  export CMAKE_PREFIX_PATH="${prefix}" CMAKE_BUILD_PARALLEL_LEVEL="${jobs}" FUSED_LINEAR_INTERNAL_KOKKOS=OFF
  # As the build step: torch's CMake config, else torch's folders as the Python package has them,
  # else the operator's file through nvcc (CMAKE_ARGS: each attempt configures a CMake folder of
  # its own, as setup.py keys the folder by its arguments).
  local attempt args=""
  for attempt in "-DFusedLinear_TORCH_DISCOVERY=cmake" "-DFusedLinear_TORCH_DISCOVERY=python" \
                 "-DFusedLinear_TORCH_DISCOVERY=python -DFusedLinear_TORCH_HOST_ONLY=OFF"; do
    echo "--- pip install (Kokkos: ${prefix}; CMAKE_ARGS=${attempt})"
    if CMAKE_ARGS="${attempt}" "${python}" -m pip install -v --no-build-isolation --no-index \
         --no-deps --target "${site}" "${root}"; then
      args="${attempt}"
      break
    fi
  done
  [ -n "${args}" ] || return 1
  echo "--- pip install took $((SECONDS - t0)) s"
  CMAKE_ARGS="${args}" "${python}" -m pip wheel --no-build-isolation --no-index --no-deps \
    -w "${out}/wheel" "${root}" > /dev/null || return 1
  ls -l "${out}/wheel"
  pytest_env
  export PYTHONPATH="${site}${PYTHONPATH:+:${PYTHONPATH}}"
  cd "${work}" || return 1
  "${python}" -c 'import fused_linear, sys; print("installed:", fused_linear.__file__, fused_linear.status()); sys.exit(not fused_linear.__file__.startswith(sys.argv[1]))' "${site}" ||
    return 1
  local rc=0 t1=$SECONDS
  "${python}" -m pytest -ra -p no:cacheprovider --junitxml="${out}/pip-pytest.xml" \
    ${PYTEST_ARGS:-} "${root}/tests/python" || rc=1
  echo "--- tests took $((SECONDS - t1)) s"
  t1=$SECONDS
  "${python}" "${root}/perf/kernelbench_eval.py" --out "${out}/pip-kernelbench" ${EVAL_ARGS:-} || rc=1
  echo "--- eval took $((SECONDS - t1)) s; pip step $((SECONDS - t0)) s"
  return "${rc}"
}

# The C++ suite with every execution space of the prefix (OpenMP, Serial beside CUDA), the
# reinitialisation test and the example, built here against the carried prefix and GoogleTest.
run_suite() {
  local prefix gen=() suite="${root}/build/device-suite"
  prefix="$(patched_prefix)" || die "cannot prepare the Kokkos prefix (above)"
  command -v ninja > /dev/null && gen=(-G Ninja)
  cmake -S "${root}" -B "${suite}" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    "-DCMAKE_PREFIX_PATH=${prefix}" "-DGTEST_ROOT=${carry}/gtest" \
    "-DCMAKE_CXX_COMPILER=${prefix}/bin/nvcc_wrapper" "-DCMAKE_CUDA_COMPILER=${CUDA_HOME}/bin/nvcc" \
    -DFusedLinear_ENABLE_HEADER_CHECKS=OFF -DFusedLinear_ENABLE_PERF=OFF ${SUITE_CMAKE_ARGS:-} ||
    return 1
  local targets=(${SUITE_TARGETS:-fused_linear_tests fused_linear_tests_gradient
    fused_linear_tests_reinitialize linear_leaky_relu_example})
  cmake --build "${suite}" -j "${jobs}" --target "${targets[@]}" || return 1
  local rc=0 t
  for t in "${targets[@]}"; do
    case "${t}" in
      fused_linear_tests) "${suite}/tests/${t}" --gtest_filter="${GTEST_FILTER:-*}" \
                            --gtest_output="xml:${out}/gtest.xml" || rc=1 ;;
      fused_linear_tests_reinitialize | fused_linear_tests_gradient) "${suite}/tests/${t}" || rc=1 ;;
      linear_leaky_relu_example) "${suite}/examples/${t}" 1000 3000 2000 || rc=1 ;;
    esac
  done
  return "${rc}"
}

export root carry out python jobs build
export -f die diagnostics patched_prefix configure_and_build pytest_env run_tests run_eval \
  run_suite run_pip

[ $# -gt 0 ] || set -- build tests eval
[ "$1" != all ] || set -- build tests eval
TAIL=40 step diagnostics diagnostics
for s in "$@"; do
  case "${s}" in
    build) TAIL=40 step build configure_and_build ;;
    tests)
      built || TAIL=40 step build configure_and_build
      built && TAIL=60 step tests run_tests ;;
    eval)
      built || TAIL=40 step build configure_and_build
      built && TAIL=80 step eval run_eval ;;
    suite) TAIL=60 step suite run_suite ;;
    pip) TAIL=80 step pip run_pip ;;
    *) die "unknown step '${s}' (prepare, build, tests, eval, suite, pip, all)" ;;
  esac
done
# PACK=1: everything under the output folder in one archive, alone there (a lease brings back
# only a few files, the first in name order).
if [ -n "${PACK:-}" ]; then
  tar czf "/tmp/fused-linear-pack.tgz" -C "${out}" . && rm -rf "${out:?}"/* &&
    mv /tmp/fused-linear-pack.tgz "${out}/all.tgz"
fi
ls -la "${out}"
exit "${status}"
