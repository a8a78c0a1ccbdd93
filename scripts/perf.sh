#!/usr/bin/env bash
# From a fresh Debian machine: sets up and builds the host configuration, then runs the perf
# program at the host's default size (seconds on 2 cores). Extra arguments go to the perf
# program (see --help), e.g. --m 512 --k 2048 --n 1024 --algorithm fused.
#   scripts/perf.sh compare [compare.py arguments]   our paths beside PyTorch on the CPU (Debian's
#       python3-torch, installed here for this only), e.g. compare --threads 2 --sweep
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
prefix="$(bash scripts/setup.sh host | sed -n 's/^host=//p')"
cmake --preset host -DCMAKE_PREFIX_PATH="$prefix" > /dev/null
cmake --build --preset host
if [ "${1:-}" = "compare" ]; then
  shift
  if ! dpkg-query -W -f='${Status}' python3-torch 2>/dev/null | grep -q "install ok installed"; then
    sudo_=(); [ "$(id -u)" -eq 0 ] || sudo_=(sudo)
    "${sudo_[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch >/dev/null
  fi
  # Debian's interpreter, which has python3-torch (not whatever python3 comes first in PATH).
  exec /usr/bin/python3 perf/compare.py --device cpu --perf build/host/perf/fused_linear_perf "$@"
fi
./build/host/perf/fused_linear_perf "$@"
