#!/usr/bin/env bash
# Formats the C++/CUDA sources with the repository's .clang-format (Google style, 100 columns),
# using Debian bookworm's clang-format 14 (installed if missing; other versions format differently).
#   scripts/format.sh           rewrite every *.hpp *.cpp *.cu *.cuh under src tests perf examples
#   scripts/format.sh --check   change nothing; list the files that are not formatted, exit 1 if any
# Environment: CLANG_FORMAT  the clang-format binary (default: clang-format-14)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

check=0
case "${1:-}" in
  --check) check=1 ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

CLANG_FORMAT="${CLANG_FORMAT:-clang-format-14}"
if ! command -v "$CLANG_FORMAT" >/dev/null; then
  echo "[format] installing clang-format-14" >&2
  sudo_=(); [ "$(id -u)" -eq 0 ] || sudo_=(sudo)
  "${sudo_[@]}" apt-get install -y -qq --no-install-recommends clang-format-14 >/dev/null ||
    { "${sudo_[@]}" apt-get update -qq && "${sudo_[@]}" apt-get install -y -qq \
        --no-install-recommends clang-format-14 >/dev/null; }
fi
version="$("$CLANG_FORMAT" --version)"
case "$version" in
  *"version 14."*) ;;
  *) echo "[format] warning: ${version}; the sources are formatted with clang-format 14" >&2 ;;
esac

mapfile -d '' files < <(find src tests perf examples -type f \
  \( -name '*.hpp' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) -print0 | sort -z)
[ "${#files[@]}" -gt 0 ] || { echo "[format] no sources found" >&2; exit 0; }

if [ "$check" -eq 0 ]; then
  "$CLANG_FORMAT" -i --style=file "${files[@]}"
  echo "[format] formatted ${#files[@]} files"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$CLANG_FORMAT" --style=file --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ "${#bad[@]}" -gt 0 ]; then
  echo "[format] ${#bad[@]} of ${#files[@]} files are not formatted (run scripts/format.sh):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "[format] all ${#files[@]} files formatted"
