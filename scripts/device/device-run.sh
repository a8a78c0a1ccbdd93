#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with .device/ made by
# `scripts/device/build-cuda.sh --bundle` beside it (DEVICE_DIR=DIR: another bundle, e.g.
# DEVICE_DIR=.device-kokkos46 from `scripts/device/build-cuda.sh --kokkos-source ... --bundle`;
# relative to the repository root or absolute; DIR.tar.gz, the archive build-cuda.sh writes beside
# it, is unpacked where DIR is missing). Logs go to $OUT (default /tmp/fused-linear-out).
#   scripts/device/device-run.sh STEP...   the steps in order, in one call (one lease), e.g.
#                                          `tests compare`; the steps:
#     tests                  the test suites (every execution space of the build) and the example
#     overhead [SHAPES...]   per-call cost of Plan::execute and of the one-shot call, beside the
#                            previous version's one-shot call (.device/old/, if bundled)
#     compare [SHAPES...]    perf program + PyTorch peers, one table
#     profile                kernel times and speed-of-light (ncu) of one perf run at the
#                            reference shape
#     huge                   the 64-bit indexing tests (about 11 GB each)
#     mpi                    examples/mpi_sharded: the example, then its benchmark, 2 ranks
#                            sharing the one GPU (correctness), with the Open MPI runtime bundled in .device/mpi
#                            (scripts/device/bundle_openmpi.sh)
#     sanitize               compute-sanitizer memcheck, synccheck, racecheck and initcheck over
#                            the graph, shared-state and contract tests, each tool and group under
#                            a time limit of its own (scripts/device/sanitize.sh: its
#                            SANITIZE_* environment; the limits add up past one lease's command)
#     sass                   instruction mix of the FusedLinear kernels
# Extra perf arguments: PERF_ARGS="--reps 50"; extra compare.py arguments: COMPARE_ARGS="--tf32";
# STEP_TIMEOUT=S stops any step after S seconds (device time is scarce); PACK=1 leaves one archive,
# all.tgz, in $OUT (a lease returns only a few files). Each step's exit status
# is reported; the script fails if any step failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export DEVICE_DIR="${DEVICE_DIR:-.device}"  # exported: the bash -c steps below read it too
if [ ! -d "${DEVICE_DIR}/bin" ] && [ -f "${DEVICE_DIR}.tar.gz" ]; then  # the archived bundle
  tar -C "$(dirname "$DEVICE_DIR")" -xzf "${DEVICE_DIR}.tar.gz"
fi
[ -d "${DEVICE_DIR}/bin" ] || { echo "no ${DEVICE_DIR}/bin: make it with scripts/device/build-cuda.sh --bundle"; exit 2; }
out="${OUT:-/tmp/fused-linear-out}"
mkdir -p "$out"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:$(cd "$DEVICE_DIR" && pwd)/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMP_PROC_BIND=false PYTHONUNBUFFERED=1
export FUSED_LINEAR_COMMIT="${FUSED_LINEAR_COMMIT:-$(cat "${DEVICE_DIR}/COMMIT" 2>/dev/null)}"
status=0
step() {  # step NAME COMMAND...: run, log to $out/NAME.log, remember failures
  local name="$1"; shift
  echo "=== ${name}: $*"
  timeout "${STEP_TIMEOUT:-0}" "$@" > "${out}/${name}.log" 2>&1
  local rc=$?
  [ "$rc" -ne 124 ] || echo "(${name}: stopped after STEP_TIMEOUT=${STEP_TIMEOUT} s)" >> "${out}/${name}.log"
  tail -n "${TAIL:-15}" "${out}/${name}.log"
  echo "=== ${name}: exit ${rc}"
  [ "$rc" -eq 0 ] || status=1
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,utilization.gpu \
  --format=csv > "${out}/gpu.txt" 2>&1
cat "${out}/gpu.txt"
while [ $# -gt 0 ]; do
  case "$1" in
    tests)
      shift
      for t in "$DEVICE_DIR"/bin/fused_linear_tests*; do step "$(basename "$t")" "$t"; done
      step example "$DEVICE_DIR"/bin/linear_leaky_relu_example 1000 3000 2000 ;;
    overhead)
      shift
      shapes=()
      while [ $# -gt 0 ] && [ -n "${1##[a-z]*}" ]; do shapes+=("$1"); shift; done
      [ "${#shapes[@]}" -gt 0 ] || shapes=(128x1024x512 16x4096x4096 1024x8192x8192)
      # Alternating runs of each binary, so that clock drift touches all alike.
      TAIL=80 step overhead bash -c '
        for shape in "$@"; do
          IFS=x read -r m k n <<< "$shape"
          for round in 1 2; do
            for api in plan oneshot; do
              echo "--- $shape new $api (round $round)"
              "$DEVICE_DIR"/bin/fused_linear_perf --m $m --k $k --n $n --algorithm auto --reps 200 \
                --api $api | grep -E "^auto "
            done
            if [ -x "$DEVICE_DIR"/old/fused_linear_perf ]; then
              echo "--- $shape old one-shot (round $round)"
              "$DEVICE_DIR"/old/fused_linear_perf --m $m --k $k --n $n --algorithm auto --reps 200 |
                grep -E "^auto "
            fi
          done
        done' overhead "${shapes[@]}" ;;
    compare)
      shift
      shapes=()
      while [ $# -gt 0 ] && [ -n "${1##[a-z]*}" ]; do shapes+=("$1"); shift; done  # not a step
      [ "${#shapes[@]}" -gt 0 ] || shapes=(1024x8192x8192)
      TAIL=60 step compare python3 "$DEVICE_DIR"/compare.py --perf "$DEVICE_DIR"/bin/fused_linear_perf \
        --out "${out}/compare" ${COMPARE_ARGS:-} \
        ${PERF_ARGS:+--perf-args "$PERF_ARGS"} "${shapes[@]}"
      # Few files come back from a lease: the plot beside one archive of everything.
      cp "${out}"/compare/*.png "${out}/" 2>/dev/null
      tar czf "${out}/compare.tgz" -C "${out}" compare && rm -rf "${out}/compare" ;;
    mpi)
      shift
      step mpi bash -c '
        source "$DEVICE_DIR"/mpi/env.sh || exit 1
        export OMP_NUM_THREADS=4
        mpiexec -np 2 --bind-to none "$DEVICE_DIR"/bin/mpi_sharded_linear 500 1000 700 || exit 1
        for p in strict 3xtf32; do
          mpiexec -np 2 --bind-to none "$DEVICE_DIR"/bin/mpi_sharded_bench 1024 8192 8192 \
            --precision $p --reps 10 --backward || exit 1
        done' ;;
    huge)
      shift
      FUSED_LINEAR_TEST_HUGE=1 step huge "$DEVICE_DIR"/bin/fused_linear_tests --gtest_filter='HugeIndices*' ;;
    sanitize)
      shift
      TAIL=40 OUT="$out" step sanitize \
        bash scripts/device/sanitize.sh "$DEVICE_DIR"/bin/fused_linear_tests ;;
    sass)
      shift
      # Instruction mix of each FusedLinear kernel in the perf binary (wide loads, FFMA density).
      step sass bash -c 'cuobjdump -sass "$DEVICE_DIR"/bin/fused_linear_perf | awk "
        /Function :/ { if (name) print name, ldg128, ldg, lds128, ffma, ldl; name = \$3;
                       ldg128 = ldg = lds128 = ffma = ldl = 0 }
        /LDG.E.128/ { ldg128++ } /LDG/ { ldg++ } /LDS.128/ { lds128++ } /FFMA/ { ffma++ }
        /LDL|STL/ { ldl++ }
        END { print name, ldg128, ldg, lds128, ffma, ldl }" | grep -i fusedlinear |
        sed -e "s/^/kernel (LDG.128 LDG LDS.128 FFMA LDL+STL): /"' ;;
    profile)
      shift
      TAIL=80 step profile ncu --clock-control none --section SpeedOfLight \
        --kernel-name-base demangled -k "regex:FusedLinear|gemm|xmma|cutlass" \
        --launch-skip "${PROFILE_SKIP:-0}" --launch-count "${PROFILE_COUNT:-12}" \
        "$DEVICE_DIR"/bin/fused_linear_perf --warmup 0 --reps 1 ${PROFILE_ARGS:-} ;;
    *) echo "unknown step '$1'"; exit 2 ;;
  esac
done
# PACK=1: everything under the output folder in one archive, alone there (a lease brings back
# only a few files, the first in name order).
if [ -n "${PACK:-}" ]; then
  tar czf "/tmp/fused-linear-pack.tgz" -C "${out}" . && rm -rf "${out:?}"/* &&
    mv /tmp/fused-linear-pack.tgz "${out}/all.tgz"
fi
exit "$status"
