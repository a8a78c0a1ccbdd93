#!/usr/bin/env bash
# Builds the CUDA configuration (sm_90: H100/H200) here, on a machine with nvcc 13 and no GPU.
#   scripts/device/build-cuda.sh [OPTION...]
#   (none)                 set up Kokkos for CUDA (scripts/setup.sh cuda) and build
#   --bundle               also gather what a GPU machine needs to run the tests and the perf
#                          comparison into .device/ (git-ignored): the binaries, perf/compare.py,
#                          perf/torch_peers.py and perf/tuning/ (the dataset's schema, which
#                          compare.py writes), the host runtime libraries the binaries link that
#                          a CUDA image may lack, the MPI example and its benchmark with an Open
#                          MPI runtime (where MPI was found), and OLD_PERF (a perf binary) if
#                          set, as .device/old/. Run it there with
#                          scripts/device/device-run.sh.
#   --kokkos-source PATH --kernels-source PATH [--no-deprecated]
#                          the same against the Kokkos and Kokkos Kernels sources given
#                          (scripts/setup.sh's options), configured with plain cmake (no preset)
#                          in build/cuda-<Kokkos prefix name>; the bundle goes to
#                          .device-kokkos<major><minor>/ (e.g. .device-kokkos46/):
#                          DEVICE_DIR=.device-kokkos46 scripts/device/device-run.sh tests.
#   -DVAR=VALUE            passed to cmake (e.g. -DFusedLinear_ENABLE_HEADER_CHECKS=OFF).
#   --target T             build T (repeatable) instead of everything; not with --bundle.
#   --build-dir DIR, --bundle-dir DIR
#                          other places for either. The bundle is also archived as DIR.tar.gz
#                          (git-ignored too), to carry instead of the folder.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PATH="${CUDA_HOME:-/usr/local/cuda}/bin:${PATH}"
setup_args=() cmake_args=() targets=() bundle=0 build_dir= bundle_dir=
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) bundle=1; shift ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --bundle-dir) bundle_dir="$2"; shift 2 ;;
    --target) targets+=(--target "$2"); shift 2 ;;
    --kokkos-source|--kernels-source) setup_args+=("$1" "$2"); shift 2 ;;
    --kokkos-source=*|--kernels-source=*|--no-deprecated) setup_args+=("$1"); shift ;;
    -D*) cmake_args+=("$1"); shift ;;
    *) echo "build-cuda.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ "$bundle" -eq 0 ] || [ "${#targets[@]}" -eq 0 ] ||
  { echo "build-cuda.sh: a bundle needs every target (leave out --target)" >&2; exit 2; }
prefix="$(bash scripts/setup.sh "${setup_args[@]}" cuda | sed -n 's/^cuda=//p')"
if [ "${#setup_args[@]}" -eq 0 ] && [ -z "$build_dir" ]; then
  build_dir=build/cuda
  cmake --preset cuda -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="${prefix}/bin/nvcc_wrapper" \
    "${cmake_args[@]}"
  cmake --build --preset cuda "${targets[@]}"
  : "${bundle_dir:=.device}"
else
  # What a user with an installed Kokkos does: the prefix and its nvcc_wrapper, nothing else.
  : "${build_dir:=build/cuda-$(basename "${prefix%-cuda}")}"
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_CXX_COMPILER="${prefix}/bin/nvcc_wrapper" "${cmake_args[@]}"
  cmake --build "$build_dir" "${targets[@]}"
  version="$(basename "$prefix" | sed -n 's/^kokkos-\([0-9]*\)\.\([0-9]*\)\..*/\1\2/p')"
  : "${bundle_dir:=.device-kokkos${version}}"
fi

if [ "$bundle" -eq 1 ]; then
  d="$bundle_dir"
  rm -rf "$d" && mkdir -p "$d/bin" "$d/lib"
  find "$build_dir/tests" -maxdepth 1 -type f -executable -name 'fused_linear_tests*' \
    -exec cp {} "$d/bin/" \;
  cp "$build_dir/perf/fused_linear_perf" "$build_dir/examples/linear_leaky_relu_example" "$d/bin/"
  cp perf/compare.py perf/torch_peers.py "$d/"
  mkdir -p "$d/tuning" && cp perf/tuning/*.py "$d/tuning/"
  git rev-parse --short HEAD > "$d/COMMIT" 2>/dev/null || echo unknown > "$d/COMMIT"
  git diff --quiet HEAD 2>/dev/null || sed -i 's/$/+dirty/' "$d/COMMIT"
  echo "$(basename "$prefix")" > "$d/KOKKOS"  # which Kokkos prefix the binaries were built against
  # A previous version's perf program, for the per-call overhead comparison (device-run.sh overhead).
  if [ -n "${OLD_PERF:-}" ]; then mkdir -p "$d/old" && cp "$OLD_PERF" "$d/old/fused_linear_perf"; fi
  # Non-CUDA shared libraries the binaries need (OpenMP runtime, BLAS if linked): copied so the
  # binaries do not depend on what the GPU machine's image happens to have.
  for bin in "$d"/bin/*; do
    ldd "$bin" | awk '/=> \// { print $3 }'
  done | sort -u | grep -E 'lib(gomp|blas|lapack|gfortran|quadmath|blis)' | xargs -r -I{} cp -L {} "$d/lib/"
  # The MPI example and its benchmark with a relocatable Open MPI runtime (device-run.sh mpi),
  # where they were built.
  mpi_bin="$build_dir/examples/mpi_sharded/mpi_sharded_linear"
  if [ -x "$mpi_bin" ]; then
    cp "$mpi_bin" "$build_dir/examples/mpi_sharded/mpi_sharded_bench" "$d/bin/"
    bash scripts/device/bundle_openmpi.sh "$d/mpi" "$mpi_bin" >/dev/null
  fi
  strip --strip-debug "$d"/bin/* 2>/dev/null || true
  # One archive beside it, a third of the size, to carry to the GPU machine (device-run.sh
  # unpacks DIR.tar.gz where DIR is missing).
  tar -C "$(dirname "$d")" -czf "${d}.tar.gz" "$(basename "$d")"
  du -sh "$d" "${d}.tar.gz"
fi
