#!/usr/bin/env bash
# Formats the sources at 100 columns: the C++/CUDA with the repository's .clang-format (Google
# style) through Debian bookworm's clang-format 14, the Python with black 23 (pyproject.toml's
# [tool.black]); flake8 5 (.flake8) checks what black does not fix. Debian's packages are
# installed if missing (other versions format differently).
#   scripts/format.sh           rewrite every *.hpp *.cpp *.cu *.cuh under src tests perf examples
#                               and every *.py of setup.py python perf tests examples
#   scripts/format.sh --check   change nothing; list the files that are not formatted and
#                               flake8's findings, exit 1 if any
# Environment: CLANG_FORMAT, BLACK, FLAKE8  the binaries (default: clang-format-14, black, flake8)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

check=0
case "${1:-}" in
  --check) check=1 ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

CLANG_FORMAT="${CLANG_FORMAT:-clang-format-14}"
BLACK="${BLACK:-black}"
FLAKE8="${FLAKE8:-flake8}"

# install_missing BINARY DEBIAN-PACKAGE: apt-get installs the package when the binary is absent.
install_missing() {
  command -v "$1" >/dev/null && return 0
  echo "[format] installing $2" >&2
  local sudo_=()
  [ "$(id -u)" -eq 0 ] || sudo_=(sudo)
  "${sudo_[@]}" apt-get install -y -qq --no-install-recommends "$2" >/dev/null ||
    { "${sudo_[@]}" apt-get update -qq && "${sudo_[@]}" apt-get install -y -qq \
        --no-install-recommends "$2" >/dev/null; }
}
install_missing "$CLANG_FORMAT" clang-format-14
install_missing "$BLACK" black
[ "$check" -eq 0 ] || install_missing "$FLAKE8" flake8

version="$("$CLANG_FORMAT" --version)"
case "$version" in
  *"version 14."*) ;;
  *) echo "[format] warning: ${version}; the sources are formatted with clang-format 14" >&2 ;;
esac
version="$("$BLACK" --version | head -n 1)"
case "$version" in
  *" 23."*) ;;
  *) echo "[format] warning: ${version}; the Python is formatted with black 23" >&2 ;;
esac

mapfile -d '' files < <(find src tests perf examples -type f \
  \( -name '*.hpp' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) -print0 | sort -z)
py_dirs=()
for d in setup.py python perf tests examples; do [ -e "$d" ] && py_dirs+=("$d"); done
py_files=()
[ "${#py_dirs[@]}" -eq 0 ] ||
  mapfile -d '' py_files < <(find "${py_dirs[@]}" -name __pycache__ -prune -o -type f \
    -name '*.py' -print0 | sort -z)
[ "${#files[@]}" -gt 0 ] || [ "${#py_files[@]}" -gt 0 ] ||
  { echo "[format] no sources found" >&2; exit 0; }

if [ "$check" -eq 0 ]; then
  [ "${#files[@]}" -eq 0 ] || "$CLANG_FORMAT" -i --style=file "${files[@]}"
  [ "${#py_files[@]}" -eq 0 ] || "$BLACK" --quiet "${py_files[@]}"
  echo "[format] formatted ${#files[@]} C++ and ${#py_files[@]} Python files"
  exit 0
fi
status=0
bad=()
for f in "${files[@]}"; do
  "$CLANG_FORMAT" --style=file --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ "${#py_files[@]}" -gt 0 ]; then
  # black --check exits 1 and names each file it would change ("would reformat FILE"); any
  # other failure (a file it cannot parse) is shown as it is.
  rc=0
  out="$("$BLACK" --check "${py_files[@]}" 2>&1)" || rc=$?
  case "$rc" in
    0 | 1)
      mapfile -t py_bad < <(printf '%s\n' "$out" |
        sed -n "s|^would reformat \($PWD/\)\{0,1\}||p")
      bad+=("${py_bad[@]}") ;;
    *) printf '%s\n' "$out"; echo "[format] black failed (exit ${rc})"; status=1 ;;
  esac
fi
if [ "${#bad[@]}" -gt 0 ]; then
  echo "[format] ${#bad[@]} of $((${#files[@]} + ${#py_files[@]})) files are not formatted" \
    "(run scripts/format.sh):"
  printf '  %s\n' "${bad[@]}"
  status=1
else
  echo "[format] all ${#files[@]} C++ and ${#py_files[@]} Python files formatted"
fi
if [ "${#py_files[@]}" -gt 0 ]; then
  if findings="$("$FLAKE8" "${py_files[@]}")"; then
    echo "[format] flake8: no findings in ${#py_files[@]} Python files"
  else
    echo "[format] flake8 (.flake8) finds:"
    printf '%s\n' "$findings" | sed 's/^/  /'
    status=1
  fi
fi
exit "$status"
