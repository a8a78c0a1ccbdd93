#!/usr/bin/env bash
# Runs on the GPU machine: compute-sanitizer's memcheck, synccheck, racecheck and initcheck over
# the CUDA suite's graph and shared-state tests and over its contract tests, each tool and group
# under a time limit of its own (racecheck and initcheck take the longest: more than 140 s over
# the contract tests on an H100).
#   scripts/device/sanitize.sh [BINARY]   BINARY: a CUDA build's fused_linear_tests (default
#                                         $DEVICE_DIR/bin/fused_linear_tests, DEVICE_DIR=.device);
#                                         device-run.sh's `sanitize` step runs it
# Environment:
#   SANITIZE_TOOLS            the tools, in this order (default "memcheck synccheck racecheck
#                             initcheck": the quick ones first)
#   SANITIZE_GROUPS           the groups of tests, one run of each tool per group: NAME=FILTER
#                             (FILTER: a --gtest_filter) or the name of a default one, `graph` or
#                             `contract` (default both, below), e.g. SANITIZE_GROUPS=graph or
#                             SANITIZE_GROUPS="suite=-*Randomized*:*HugeIndices*:OtherSpace/*"
#   SANITIZE_TIMEOUT_MEMCHECK, SANITIZE_TIMEOUT_SYNCCHECK, SANITIZE_TIMEOUT_RACECHECK,
#   SANITIZE_TIMEOUT_INITCHECK
#                             seconds one run of that tool may take (default 240, 240, 480, 480)
#   SANITIZE_ARGS             more compute-sanitizer arguments for every tool;
#   SANITIZE_ARGS_<TOOL>      for one, e.g. SANITIZE_ARGS_RACECHECK="--racecheck-report hazard"
#                             (each hazard rather than the default analysis)
#   SANITIZE_LEAKS=0          memcheck skips its leak check of the other test programs beside
#                             BINARY (fused_linear_tests_*: Kokkos finalised and initialised
#                             again), each run whole under memcheck's limit
#   OUT                       logs in $OUT/sanitize/TOOL-GROUP.log (default /tmp/fused-linear-out)
# Prints one line per run: tool, group, status, exit code, seconds and the sanitizer's ERROR
# SUMMARY; the status is clean, errors (the sanitizer found some), tests-failed (no sanitizer
# error, a test failed), timeout (stopped at the limit: not checked to the end), no-tests (the
# filter matched nothing) or failed (the sanitizer did not run to its summary).
# Exit status: 1 where a run found errors, failed tests or failed, or printed reports before it
# was stopped; otherwise 124 where a run hit its limit or matched no tests; 0 when every run was
# clean.
set -uo pipefail
set -f  # the filters' asterisks are gtest's, not the shell's
binary="${1:+$(readlink -m "$1")}"  # from the caller's folder
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 2
binary="${binary:-${DEVICE_DIR:-.device}/bin/fused_linear_tests}"
[ -x "$binary" ] || { echo "sanitize.sh: no test binary '$binary'" >&2; exit 2; }
command -v compute-sanitizer > /dev/null || PATH="/usr/local/cuda/bin:$PATH"
command -v compute-sanitizer > /dev/null ||
  { echo "sanitize.sh: no compute-sanitizer" >&2; exit 2; }
logs="${OUT:-/tmp/fused-linear-out}/sanitize"
mkdir -p "$logs"

# The graph group: captures, replays and shared plans on CUDA (GraphsShared, SharedStateCuda,
# ContractGraph) and the host's shared state (fork children, wisdom), cheap beside them. The
# contract group: the contract suites on Cuda; ContractGraph runs in the first group, and the
# typed suite's host instances (Contract/OpenMP, /Threads, /Serial) touch no GPU memory.
declare -A default_filter=(
  [graph]="GraphsShared.*:SharedState*:ContractGraph.*"
  [contract]="Contract*:-ContractGraph.*:Contract/OpenMP.*:Contract/Threads.*:Contract/Serial.*")
groups=()
for g in ${SANITIZE_GROUPS:-graph contract}; do
  if [ "${g#*=}" != "$g" ]; then
    groups+=("$g")
  elif [ -n "${default_filter[$g]:-}" ]; then
    groups+=("${g}=${default_filter[$g]}")
  else
    echo "sanitize.sh: unknown group '$g' (graph, contract or NAME=FILTER)" >&2
    exit 2
  fi
done
declare -A limit=([memcheck]=240 [synccheck]=240 [racecheck]=480 [initcheck]=480)

worst=0  # 0 clean, 124 a limit hit or no tests, 1 errors or failures
# run TOOL NAME WHAT SECONDS ARGUMENT...: one run of compute-sanitizer ARGUMENT... (its own
# arguments, then the program's), its line (WHAT: the tests it ran), its share of the status.
run() {
  local tool="$1" name="$2" what="$3" seconds="$4"
  shift 4
  local log="${logs}/${tool}-${name}.log" start rc took summary errors status
  start=$(date +%s)
  # timeout signals its whole process group (the sanitizer and the tests it started), and
  # kills it 30 s later if it is still there.
  timeout -k 30 "$seconds" compute-sanitizer --tool "$tool" --error-exitcode 1 --print-limit 20 \
    "$@" > "$log" 2>&1
  rc=$?
  took=$(($(date +%s) - start))
  # One summary per process the sanitizer followed (a forked child may add its own).
  summary=$(grep -E "ERROR SUMMARY: [0-9]+ error" "$log" | tail -n 1 | sed -e 's/^=* *//')
  errors=$(grep -oE "ERROR SUMMARY: [0-9]+ error" "$log" | grep -oE "[0-9]+" |
    awk '{ n += $1 } END { print n + 0 }')
  # A run stopped at its limit has no summary; the reports it printed before count (their first
  # lines, as compute-sanitizer's tools word them).
  reports=$(grep -cE "^========= +(Invalid|Uninitialized|Barrier|Program hit|Malloc|Free|Leaked|\
(Error|Warning): Race|Race reported)" "$log")
  if [ "$errors" -gt 0 ]; then
    status=errors
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    status=timeout
    summary="no ERROR SUMMARY: stopped at the limit, ${seconds} s (${reports} reports before)"
  elif [ -z "$summary" ]; then
    status=failed
  elif [ "$rc" -ne 0 ]; then
    status=tests-failed
  elif grep -qE "^\[=+\] 0 tests from" "$log"; then
    status=no-tests
  else
    status=clean
  fi
  printf '%-9s %-12s %-12s exit %3d %4d s  %s  [%s]\n' "$tool" "$name" "$status" "$rc" "$took" \
    "${summary:-no ERROR SUMMARY}" "$what"
  case "$status" in
    clean) ;;
    timeout) if [ "$reports" -gt 0 ]; then worst=1; elif [ "$worst" -ne 1 ]; then worst=124; fi ;;
    no-tests) [ "$worst" -eq 1 ] || worst=124 ;;
    *)
      worst=1
      # What went wrong, without the passing tests' lines: the log has everything.
      grep -vE "^\[ *(RUN|OK) *\]" "$log" | tail -n 25 | sed -e 's/^/    /' ;;
  esac
}

compute-sanitizer --version | tail -n 1
echo "binary: $binary"
for group in "${groups[@]}"; do echo "group ${group%%=*}: --gtest_filter=${group#*=}"; done
for tool in ${SANITIZE_TOOLS:-memcheck synccheck racecheck initcheck}; do
  timeout_var="SANITIZE_TIMEOUT_${tool^^}" args_var="SANITIZE_ARGS_${tool^^}"
  seconds="${!timeout_var:-${limit[$tool]:-480}}"
  # shellcheck disable=SC2086  # the ARGS variables are lists of words
  for group in "${groups[@]}"; do
    run "$tool" "${group%%=*}" "--gtest_filter=${group#*=}" "$seconds" ${SANITIZE_ARGS:-} \
      ${!args_var:-} "$binary" --gtest_filter="${group#*=}" --gtest_brief=1
  done
  if [ "$tool" != memcheck ] || [ "${SANITIZE_LEAKS:-1}" = 0 ]; then continue; fi
  set +f
  programs=("$binary"_*)
  set -f
  for program in "${programs[@]}"; do
    [ -x "$program" ] || continue
    name="$(basename "$program")"
    # shellcheck disable=SC2086
    run memcheck "${name#fused_linear_tests_}" "$name whole, --leak-check full" "$seconds" \
      --leak-check full ${SANITIZE_ARGS:-} ${!args_var:-} "$program"
  done
done
echo "logs: $logs"
exit "$worst"
