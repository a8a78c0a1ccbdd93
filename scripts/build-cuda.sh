#!/usr/bin/env bash
# Builds the CUDA configuration (sm_90: H100/H200) here, on a machine with nvcc 13 and no GPU.
#   scripts/build-cuda.sh            set up Kokkos for CUDA (scripts/setup.sh cuda) and build
#   scripts/build-cuda.sh --bundle   also gather what a GPU machine needs to run the tests and
#                                    the perf comparison into .device/ (git-ignored): the
#                                    binaries, perf/compare.py, the PyTorch peers script, and the
#                                    host runtime libraries the binaries link that a CUDA image
#                                    may lack. Run it there with scripts/device-run.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${CUDA_HOME:-/usr/local/cuda}/bin:${PATH}"
prefix="$(bash scripts/setup.sh cuda | sed -n 's/^cuda=//p')"
cmake --preset cuda -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="${prefix}/bin/nvcc_wrapper"
cmake --build --preset cuda

if [ "${1:-}" = "--bundle" ]; then
  rm -rf .device && mkdir -p .device/bin .device/lib
  cp build/cuda/tests/fused_linear_tests build/cuda/perf/fused_linear_perf \
     build/cuda/examples/linear_leaky_relu_example .device/bin/
  cp perf/compare.py .device/
  peers="$(pwd)/../shared/peers/torch_peers.py"
  if [ -f "$peers" ]; then cp "$peers" .device/; else echo "note: no $peers to bundle" >&2; fi
  # Non-CUDA shared libraries the binaries need (OpenMP runtime, BLAS if linked): copied so the
  # binaries do not depend on what the GPU machine's image happens to have.
  for bin in .device/bin/*; do
    ldd "$bin" | awk '/=> \// { print $3 }'
  done | sort -u | grep -E 'lib(gomp|blas|lapack|gfortran|quadmath)' | xargs -r -I{} cp -L {} .device/lib/
  du -sh .device
fi
