#!/usr/bin/env bash
# Builds the CUDA configuration (sm_90: H100/H200) here, on a machine with nvcc 13 and no GPU.
#   scripts/build-cuda.sh            set up Kokkos for CUDA (scripts/setup.sh cuda) and build
#   scripts/build-cuda.sh --bundle   also gather what a GPU machine needs to run the tests and
#                                    the perf comparison into .device/ (git-ignored): the
#                                    binaries, perf/compare.py, perf/torch_peers.py, the host
#                                    runtime libraries the binaries link that a CUDA image may
#                                    lack, the MPI example with an Open MPI runtime (where MPI
#                                    was found), and OLD_PERF (a perf binary) if set, as
#                                    .device/old/. Run it there with scripts/device-run.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${CUDA_HOME:-/usr/local/cuda}/bin:${PATH}"
prefix="$(bash scripts/setup.sh cuda | sed -n 's/^cuda=//p')"
cmake --preset cuda -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="${prefix}/bin/nvcc_wrapper"
cmake --build --preset cuda

if [ "${1:-}" = "--bundle" ]; then
  rm -rf .device && mkdir -p .device/bin .device/lib
  find build/cuda/tests -maxdepth 1 -type f -executable -name 'fused_linear_tests*' \
    -exec cp {} .device/bin/ \;
  cp build/cuda/perf/fused_linear_perf build/cuda/examples/linear_leaky_relu_example .device/bin/
  cp perf/compare.py perf/torch_peers.py .device/
  git rev-parse --short HEAD > .device/COMMIT 2>/dev/null || echo unknown > .device/COMMIT
  git diff --quiet HEAD 2>/dev/null || sed -i 's/$/+dirty/' .device/COMMIT
  # A previous version's perf program, for the per-call overhead comparison (device-run.sh overhead).
  if [ -n "${OLD_PERF:-}" ]; then mkdir -p .device/old && cp "$OLD_PERF" .device/old/fused_linear_perf; fi
  # Non-CUDA shared libraries the binaries need (OpenMP runtime, BLAS if linked): copied so the
  # binaries do not depend on what the GPU machine's image happens to have.
  for bin in .device/bin/*; do
    ldd "$bin" | awk '/=> \// { print $3 }'
  done | sort -u | grep -E 'lib(gomp|blas|lapack|gfortran|quadmath|blis)' | xargs -r -I{} cp -L {} .device/lib/
  # The MPI example with a relocatable Open MPI runtime (device-run.sh mpi), where it was built.
  mpi_bin=build/cuda/examples/mpi_sharded/mpi_sharded_linear
  if [ -x "$mpi_bin" ]; then
    cp "$mpi_bin" .device/bin/
    bash examples/mpi_sharded/bundle_openmpi.sh .device/mpi "$mpi_bin" >/dev/null
  fi
  strip --strip-debug .device/bin/* 2>/dev/null || true
  du -sh .device
fi
