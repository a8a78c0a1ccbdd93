#!/usr/bin/env bash
# From a fresh Debian machine: sets up and builds the host configuration, then runs the perf
# program at the host's default size (seconds on 2 cores). Extra arguments go to the perf
# program (see --help), e.g. --m 512 --k 2048 --n 1024 --algorithm fused.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
prefix="$(bash scripts/setup.sh host | sed -n 's/^host=//p')"
cmake --preset host -DCMAKE_PREFIX_PATH="$prefix" > /dev/null
cmake --build --preset host
./build/host/perf/fused_linear_perf "$@"
