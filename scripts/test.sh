#!/usr/bin/env bash
# From a fresh Debian machine: installs and builds the dependencies (scripts/setup.sh host),
# builds FusedLinear's host configuration (OpenMP + Serial, optimised BLAS) and runs the whole
# test suite. Extra arguments go to ctest (e.g. -R Errors).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
start=$SECONDS
prefix="$(bash scripts/setup.sh host | sed -n 's/^host=//p')"
cmake --preset host -DCMAKE_PREFIX_PATH="$prefix"
cmake --build --preset host
echo "[test] set-up and build took $((SECONDS - start)) s"
ctest --preset host "$@"
