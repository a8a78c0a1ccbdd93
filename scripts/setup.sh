#!/usr/bin/env bash
# Installs everything FusedLinear needs on a Debian bookworm machine, idempotently:
#   1. Debian binary packages (compilers, CMake, Ninja, GoogleTest, LAPACK, an optimised BLAS:
#      BLIS, OpenMP build, selected as libblas.so.3; for host also Open MPI, PyTorch, pytest and
#      matplotlib; for hip Debian's HIP toolchain);
#   2. deb-src entries derived from the machine's own apt sources (no host is named here);
#   3. Kokkos and Kokkos Kernels, checked and patched by cmake/FusedLinearKokkosFetch.cmake (the
#      configure's own code; cmake/patches: one patch per version) and installed into a cache
#      prefix outside the repository, one prefix per version and configuration, rebuilt only when
#      the sources, the patch or the configuration change. By default 3.4.01 of both from Debian's
#      trilinos 13.2.0 *source* package (apt-get source); or the sources given (below).
#
# Usage: scripts/setup.sh [options] [config...]        (default: host)
#   --kokkos-source PATH    a Kokkos source: a directory, a .tar.gz or a URL, and the Kokkos
#   --kernels-source PATH   Kernels source to build with it; both or neither. Their versions are
#                           read from their CMakeLists.txt. Any Kokkos 3.4 or newer; tested:
#                           4.6.01 with Kokkos Kernels 4.6.02. An archive is built only with a
#                           known SHA-256 (the release archives') or one given below (and a
#                           SHA256SUMS beside it, if there, must agree).
#   --kokkos-sha256 SUM     the archives' SHA-256 (UNCHECKED: build them unchecked)
#   --kernels-sha256 SUM
#   --no-deprecated         Kokkos (4 or newer) without the code its major version deprecates
#                           (Kokkos_ENABLE_DEPRECATED_CODE_<major>=OFF: what Kokkos 5 removes).
#                           The prefix's name ends in -nodeprecated.
#   host      Kokkos with OpenMP + Serial for this CPU's vector ISA (Kokkos_ARCH_*, detected; see
#             host_arch_flags), Kokkos Kernels with the host BLAS/LAPACK TPLs.
#   cuda      Kokkos with CUDA (sm_90, Hopper) + OpenMP + Serial through nvcc_wrapper, Kokkos Kernels
#             with cuBLAS and host BLAS/LAPACK. Needs nvcc (CUDA 13) but no GPU.
#   debug     Kokkos with Serial only (no OpenMP), Kokkos_ENABLE_DEBUG and bounds checks, C++20,
#             Kokkos Kernels with the host BLAS/LAPACK TPLs: the prefix of the sanitizer build.
#   threads   Kokkos with Threads (C++ threads backend) + Serial, Kokkos Kernels with host BLAS.
#   hip       Debian's hipcc 5.2.3 (installed here), Kokkos with HIP for gfx90a (VEGA90A: MI200
#             series) + Serial, Kokkos Kernels without TPLs. Needs no AMD GPU.
#   cuda-uvm  as cuda, with Kokkos_ENABLE_CUDA_UVM=ON (CudaUVMSpace is Cuda's default memory space).
# Environment:
#   FUSED_LINEAR_KOKKOS_SOURCE, FUSED_LINEAR_KERNELS_SOURCE   as --kokkos-source, --kernels-source
#   FUSED_LINEAR_KOKKOS_SHA256, FUSED_LINEAR_KERNELS_SHA256   as --kokkos-sha256, --kernels-sha256
#   FUSED_LINEAR_DEPS_DIR  cache root (default: ~/.cache/fused-linear)
#   CUDA_HOME              CUDA toolkit (default: /usr/local/cuda)
# Prints "<config>=<prefix>" for each configuration on its last lines.
set -euo pipefail

readonly TRILINOS_VERSION=13.2.0
readonly REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readonly DEPS_DIR="${FUSED_LINEAR_DEPS_DIR:-${HOME}/.cache/fused-linear}"
readonly CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
readonly JOBS="$(nproc)"

log() { printf '[setup] %s\n' "$*" >&2; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else die "'$*' needs root (run as root or install sudo)"; fi
}

kokkos_source="${FUSED_LINEAR_KOKKOS_SOURCE:-}" kernels_source="${FUSED_LINEAR_KERNELS_SOURCE:-}"
kokkos_sha256="${FUSED_LINEAR_KOKKOS_SHA256:-}" kernels_sha256="${FUSED_LINEAR_KERNELS_SHA256:-}"
no_deprecated=0
configs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --kokkos-source) [ $# -ge 2 ] || die "$1 needs a path"; kokkos_source="$2"; shift 2 ;;
    --kokkos-source=*) kokkos_source="${1#*=}"; shift ;;
    --kernels-source) [ $# -ge 2 ] || die "$1 needs a path"; kernels_source="$2"; shift 2 ;;
    --kernels-source=*) kernels_source="${1#*=}"; shift ;;
    --kokkos-sha256) [ $# -ge 2 ] || die "$1 needs a sum"; kokkos_sha256="$2"; shift 2 ;;
    --kokkos-sha256=*) kokkos_sha256="${1#*=}"; shift ;;
    --kernels-sha256) [ $# -ge 2 ] || die "$1 needs a sum"; kernels_sha256="$2"; shift 2 ;;
    --kernels-sha256=*) kernels_sha256="${1#*=}"; shift ;;
    --no-deprecated) no_deprecated=1; shift ;;
    -*) die "unknown option '$1'" ;;
    *) configs+=("$1"); shift ;;
  esac
done
[ "${#configs[@]}" -gt 0 ] || configs=(host)
if [ -n "$kokkos_source" ] || [ -n "$kernels_source" ]; then
  [ -n "$kokkos_source" ] && [ -n "$kernels_source" ] ||
    die "give both a Kokkos and a Kokkos Kernels source (--kokkos-source, --kernels-source)"
  absolute() {  # a URL as it is, a path made absolute (the cache is keyed by it)
    case "$1" in *://*) echo "$1" ;; *) [ -e "$1" ] || die "no such source: $1"; realpath "$1" ;; esac
  }
  kokkos_source="$(absolute "$kokkos_source")" kernels_source="$(absolute "$kernels_source")"
fi
for c in "${configs[@]}"; do
  case "$c" in
    host|cuda|debug|threads|hip|cuda-uvm) ;;
    *) die "unknown configuration '$c' (expected host, cuda, debug, threads, hip or cuda-uvm)";;
  esac
done

# ---------------------------------------------------------------- 1. Debian binary packages
# The host BLAS: BLIS, OpenMP build (libblis4-openmp), selected as libblas.so.3, the soname Kokkos
# Kernels' BLAS TPL links. Measured on the CI's 2-core Xeon (model 207) against Debian's other
# builds: OpenBLAS 0.3.21 does not know this CPU and falls back to its Prescott (SSE3) kernels
# (37-60 GFLOP/s sgemm at 1024^3 .. 512x4096^2), BLIS 0.9 takes its Haswell (AVX2) kernels
# (130-150 GFLOP/s, 2.3-3x); the OpenMP build keeps its speed when called right after a Kokkos
# OpenMP kernel (it uses libgomp's threads, as Kokkos does), the pthread build loses up to half
# (its own threads next to Kokkos' spinning ones). BLIS runs one thread unless BLIS_NUM_THREADS
# or OMP_NUM_THREADS is set. libblas-dev/liblapack-dev for linking (-lblas, -llapack).
readonly BLAS_PACKAGE=libblis4-openmp BLAS_DIR=blis-openmp
readonly PACKAGES=(build-essential cmake ninja-build git ca-certificates xz-utils patch python3
                   googletest libgtest-dev libblas-dev liblapack-dev
                   "$BLAS_PACKAGE")
# Open MPI for the MPI example and its test (host configuration; ~11 MB, under a minute); PyTorch
# (CPU, 1.13) with its C++ library and pytest for the PyTorch extension built and tested on the host;
# matplotlib for `python3 -m tuning.results --plots` (perf/tuning/).
readonly HOST_PACKAGES=(libopenmpi-dev openmpi-bin python3-torch python3-pytest libtorch-dev
                        python3-matplotlib)
# Debian's HIP toolchain (ROCm 5.2.3, clang 15): only for the hip configuration.
readonly HIP_PACKAGES=(hipcc libamdhip64-dev rocm-device-libs)
apt_updated=0
apt_update_once() {
  if [ "$apt_updated" -eq 0 ]; then
    log "apt-get update"
    as_root apt-get update -qq
    apt_updated=1
  fi
}
install_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    apt_update_once
    log "installing ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
  fi
}
install_packages "${PACKAGES[@]}"
for c in "${configs[@]}"; do
  case "$c" in
    host) install_packages "${HOST_PACKAGES[@]}" ;;
    hip) install_packages "${HIP_PACKAGES[@]}" ;;
  esac
done

# Installing the package selects it by priority only where no BLAS of higher priority is installed
# (OpenBLAS: 95-100, BLIS OpenMP: 80) and the alternative is in auto mode, so it is set explicitly;
# nothing is done when libblas.so.3 already points there. (For an OpenBLAS build the
# libopenblas.so.0 and liblapack.so.3 alternatives would have to follow: its libblas.so.3 loads
# libopenblas.so.0 through the alternatives directory.)
readonly MULTIARCH="$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)"
select_blas() {
  local alt="libblas.so.3-${MULTIARCH}" path="/usr/lib/${MULTIARCH}/${BLAS_DIR}/libblas.so.3"
  [ -e "$path" ] || die "${path} missing (is ${BLAS_PACKAGE} installed?)"
  if [ "$(update-alternatives --query "$alt" 2>/dev/null | sed -n 's/^Value: //p')" != "$path" ]; then
    log "selecting ${path} as libblas.so.3"
    as_root update-alternatives --quiet --set "$alt" "$path"
  fi
}
select_blas

# ---------------------------------------------------------------- 2. deb-src from existing sources
# Copy every binary ("deb") source the machine already uses into a matching "deb-src" entry, so the
# source package comes from the same mirror, suite and keyring as the binaries.
readonly SRC_LIST=/etc/apt/sources.list.d/fused-linear-deb-src
enable_deb_src() {
  local tmp; tmp="$(mktemp -d)"
  shopt -s nullglob
  for f in /etc/apt/sources.list.d/*.sources; do
    case "$f" in "${SRC_LIST}.sources") continue;; esac
    # deb822 stanzas are separated by blank lines; keep those whose Types include "deb".
    awk 'BEGIN { RS = ""; ORS = "\n\n" }
         /(^|\n)Types:[^\n]*(^|[ \t])deb([ \t]|\n|$)/ {
           if ($0 ~ /(^|\n)Enabled:[ \t]*no/) next
           gsub(/(^|\n)Types:[^\n]*/, "\nTypes: deb-src"); sub(/^\n/, ""); print }' "$f" \
      >> "$tmp/src.sources"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    case "$f" in "${SRC_LIST}.list") continue;; esac
    sed -n -E 's/^[[:space:]]*deb([[:space:]])/deb-src\1/p' "$f" >> "$tmp/src.list"
  done
  shopt -u nullglob
  [ -s "$tmp/src.sources" ] && as_root install -m 644 "$tmp/src.sources" "${SRC_LIST}.sources"
  [ -s "$tmp/src.list" ] && as_root install -m 644 "$tmp/src.list" "${SRC_LIST}.list"
  rm -rf "$tmp"
  as_root apt-get update -qq
  apt_updated=1
}

# ---------------------------------------------------------------- 3. Kokkos sources
# cmake/FusedLinearKokkosFetch.cmake (the configure's code) leaves a checked, patched copy of a
# source in DEST, kept while the source, its sums and the patch stay the same, and says in
# DEST/.fused-linear-info its version, the patch it applied and the source's identity.
fetch_source() {  # fetch_source NAME SOURCE DEST SHA256 SUM-OPTION [SUBDIR]
  cmake -DNAME="$1" -DSOURCE="$2" -DDEST="$3" -DSHA256="$4" -DSUM_OPTION="$5" \
    -DSUBDIR="${6:-}" -P "${REPO_ROOT}/cmake/FusedLinearKokkosFetch.cmake" >&2 ||
    die "$1: cannot use $2"
}
info() { sed -n "s/^$2=//p" "$1/.fused-linear-info"; }  # info DEST KEY
hash_of() { if [ -n "$1" ]; then sha256sum "$1" | cut -c1-12; else echo none; fi; }

if [ -n "$kokkos_source" ]; then
  # One copy per source (a URL or an absolute path), refreshed in place when it changes.
  KOKKOS_SRC="${DEPS_DIR}/src/kokkos-$(printf '%s' "$kokkos_source" | sha256sum | cut -c1-12)"
  KERNELS_SRC="${DEPS_DIR}/src/kokkos-kernels-$(printf '%s' "$kernels_source" | sha256sum | cut -c1-12)"
  fetch_source kokkos "$kokkos_source" "$KOKKOS_SRC" "$kokkos_sha256" "--kokkos-sha256 <sum>"
  fetch_source kokkos-kernels "$kernels_source" "$KERNELS_SRC" "$kernels_sha256" "--kernels-sha256 <sum>"
  KOKKOS_VERSION="$(info "$KOKKOS_SRC" version)" KERNELS_VERSION="$(info "$KERNELS_SRC" version)"
  PATCH="$(info "$KOKKOS_SRC" patch)" KERNELS_PATCH="$(info "$KERNELS_SRC" patch)"
  PATCH_HASH="$(hash_of "$PATCH")" KERNELS_PATCH_HASH="$(hash_of "$KERNELS_PATCH")"
  # What else keys the prefix (the stamp below): the sources' identities, Kokkos Kernels' patch.
  STAMP_SOURCES=("$(info "$KOKKOS_SRC" source_id)" "$KERNELS_VERSION"
                 "$(info "$KERNELS_SRC" source_id)" "$KERNELS_PATCH_HASH")
  log "Kokkos ${KOKKOS_VERSION} from ${kokkos_source} (patch: $(basename "${PATCH:-none}"))"
  log "Kokkos Kernels ${KERNELS_VERSION} from ${kernels_source} (patch: $(basename "${KERNELS_PATCH:-none}"))"
else
  # Debian's trilinos source: apt-get source verifies it against the signed .dsc; the CMake code
  # takes packages/kokkos and packages/kokkos-kernels out of it (and checks its built-in sum).
  SRC_DIR="${DEPS_DIR}/src/trilinos-${TRILINOS_VERSION}"
  KOKKOS_SRC="${SRC_DIR}/kokkos" KERNELS_SRC="${SRC_DIR}/kokkos-kernels"
  fetch_debian_source() {
    mkdir -p "$SRC_DIR"
    local tarball="${SRC_DIR}/trilinos_${TRILINOS_VERSION}.orig.tar.gz"
    if [ ! -f "$tarball" ]; then
      # The listing is captured first: "apt-cache ... | grep -q" fails under pipefail when grep
      # exits at its first match and apt-cache then writes into the closed pipe (SIGPIPE, 141).
      local version
      version="$(apt-cache showsrc trilinos 2>/dev/null | sed -n "s/^Version: \(${TRILINOS_VERSION}-.*\)/\1/p")" || true
      if [ -z "$version" ]; then
        log "enabling deb-src entries derived from the existing apt sources"
        enable_deb_src
        version="$(apt-cache showsrc trilinos 2>/dev/null | sed -n "s/^Version: \(${TRILINOS_VERSION}-.*\)/\1/p")" || true
      fi
      [ -n "$version" ] ||
        die "Debian's source package trilinos ${TRILINOS_VERSION} is not available from apt"
      version="${version%%$'\n'*}"
      log "downloading Debian source package trilinos=${version}"
      # apt verifies the checksums listed in the signed .dsc.
      (cd "$SRC_DIR" && apt-get source --download-only -qq "trilinos=${version}" 2>&1 |
         grep -v "unsandboxed" >&2 || true)
      [ -f "$tarball" ] || die "apt-get source did not produce ${tarball}"
    fi
    fetch_source kokkos-kernels "$tarball" "$KERNELS_SRC" "" "" packages/kokkos-kernels
    fetch_source kokkos "$tarball" "$KOKKOS_SRC" "" "" packages/kokkos
  }
  fetch_debian_source
  KOKKOS_VERSION="$(info "$KOKKOS_SRC" version)" KERNELS_VERSION="$(info "$KERNELS_SRC" version)"
  PATCH="$(info "$KOKKOS_SRC" patch)" KERNELS_PATCH="$(info "$KERNELS_SRC" patch)"
  PATCH_HASH="$(hash_of "$PATCH")"
  STAMP_SOURCES=("$TRILINOS_VERSION")  # (as before: the prefixes already built stay valid)
  [ -z "$KERNELS_PATCH" ] || STAMP_SOURCES+=("$(hash_of "$KERNELS_PATCH")")
fi
readonly KOKKOS_MAJOR="${KOKKOS_VERSION%%.*}" KOKKOS_MINOR="$(echo "$KOKKOS_VERSION" | cut -d. -f2)"
[ "$KOKKOS_MAJOR" -gt 3 ] || { [ "$KOKKOS_MAJOR" -eq 3 ] && [ "$((10#$KOKKOS_MINOR))" -ge 4 ]; } ||
  die "Kokkos ${KOKKOS_VERSION}: FusedLinear needs Kokkos 3.4 or newer"
# The prefix: kokkos-<version>[-kernels-<version> where it differs][-nodeprecated]-<config>.
PREFIX_STEM="kokkos-${KOKKOS_VERSION}"
[ "$KERNELS_VERSION" = "$KOKKOS_VERSION" ] || PREFIX_STEM+="-kernels-${KERNELS_VERSION}"
if [ "$no_deprecated" -eq 1 ]; then
  [ "$KOKKOS_MAJOR" -ge 4 ] || die "--no-deprecated: Kokkos ${KOKKOS_VERSION} has no Kokkos_ENABLE_DEPRECATED_CODE_<major>"
  PREFIX_STEM+="-nodeprecated"
fi

# ---------------------------------------------------------------- 4. builds, one prefix per config
common_kokkos_flags=(-G Ninja -DCMAKE_CXX_EXTENSIONS=OFF -DBUILD_SHARED_LIBS=OFF
                     -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DKokkos_ENABLE_SERIAL=ON
                     -DKokkos_ENABLE_TESTS=OFF -DKokkos_ENABLE_EXAMPLES=OFF)
[ "$no_deprecated" -eq 0 ] || common_kokkos_flags+=("-DKokkos_ENABLE_DEPRECATED_CODE_${KOKKOS_MAJOR}=OFF")
# Only the BLAS component, no default explicit instantiations: FusedLinear instantiates the gemm
# it uses itself. F77_BLAS_MANGLE spares the Fortran compiler probe; LAPACK must stay on with BLAS
# (Kokkos Kernels 3.4 fails to link otherwise). Kokkos Kernels 4 names the components one by one.
if [ "$KOKKOS_MAJOR" -ge 4 ]; then
  components_flags=(-DKokkosKernels_ENABLE_ALL_COMPONENTS=OFF -DKokkosKernels_ENABLE_COMPONENT_BLAS=ON)
else
  components_flags=(-DKokkosKernels_ENABLED_COMPONENTS=BLAS)
fi
common_kernels_flags=(-G Ninja -DCMAKE_CXX_EXTENSIONS=OFF
                      -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON
                      "${components_flags[@]}"
                      -DKokkosKernels_ADD_DEFAULT_ETI=OFF
                      -DKokkosKernels_INST_FLOAT=OFF -DKokkosKernels_INST_DOUBLE=OFF
                      -DKokkosKernels_INST_COMPLEX_FLOAT=OFF -DKokkosKernels_INST_COMPLEX_DOUBLE=OFF
                      -DKokkosKernels_INST_LAYOUTLEFT=OFF -DKokkosKernels_INST_LAYOUTRIGHT=OFF
                      -DKokkosKernels_INST_OFFSET_INT=OFF -DKokkosKernels_INST_OFFSET_SIZE_T=OFF
                      -DKokkosKernels_INST_ORDINAL_INT=OFF
                      -DKokkosKernels_ENABLE_TESTS=OFF -DKokkosKernels_ENABLE_EXAMPLES=OFF)
host_blas_flags=(-DKokkosKernels_ENABLE_TPL_BLAS=ON -DKokkosKernels_ENABLE_TPL_LAPACK=ON
                 "-DF77_BLAS_MANGLE=(name,NAME) name ## _")

# Kokkos' architecture option for this CPU's vector ISA (the names below are 3.4's and 4.x's), for the host configurations: it
# becomes -march for Kokkos and every consumer, and the host kernels' vector width follows it
# (without one they compile for SSE2: correct, ~4x slower arithmetic). Binaries built against
# such a prefix need that ISA; the stamp keys the prefix by it, so a cache shared by machines of
# different ISAs holds one prefix per ISA. FUSED_LINEAR_HOST_ARCH overrides the detection: a
# Kokkos 3.4 option name (SKX, HSW, BDW, ZEN, ZEN2, ZEN3, ...) or "none".
host_arch_flags() {
  local arch="${FUSED_LINEAR_HOST_ARCH:-}"
  if [ -z "$arch" ]; then
    local flags vendor family model
    flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
    vendor="$(grep -m1 '^vendor_id' /proc/cpuinfo | awk '{print $3}')"
    family="$(grep -m1 '^cpu family' /proc/cpuinfo | awk '{print $4}')"
    model="$(grep -m1 '^model[[:space:]]' /proc/cpuinfo | awk '{print $3}')"
    case "$flags" in
      # Intel Skylake-SP and later; AMD Zen 4 (Kokkos 3.4 has no ZEN4; skylake-avx512 code runs there).
      *" avx512f "*) arch=SKX ;;
      *" avx2 "*)
        if [ "$vendor" = AuthenticAMD ]; then
          case "$family" in
            23) if [ "${model:-0}" -ge 48 ]; then arch=ZEN2; else arch=ZEN; fi ;;  # Zen 2 from model 0x30
            25) arch=ZEN3 ;;
            *) arch=ZEN ;;
          esac
        else arch=HSW; fi ;;
      *) arch=none ;;
    esac
  fi
  [ "$arch" = none ] || echo "-DKokkos_ARCH_${arch}=ON"
}

build_config() {
  local config="$1" prefix="${DEPS_DIR}/${PREFIX_STEM}-$1"
  local kokkos_flags=("${common_kokkos_flags[@]}") kernels_flags=("${common_kernels_flags[@]}")
  case "$config" in
    host)
      kokkos_flags+=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=17 -DKokkos_ENABLE_OPENMP=ON
                     -DCMAKE_CXX_COMPILER=g++ $(host_arch_flags))
      kernels_flags+=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=g++ "${host_blas_flags[@]}") ;;
    cuda|cuda-uvm)
      [ -x "${CUDA_HOME}/bin/nvcc" ] || die "${config}: no nvcc at ${CUDA_HOME}/bin/nvcc (set CUDA_HOME)"
      kokkos_flags+=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=17 -DKokkos_ENABLE_OPENMP=ON
                     -DCMAKE_CXX_COMPILER="${KOKKOS_SRC}/bin/nvcc_wrapper" -DKokkos_ENABLE_CUDA=ON)
      # Device lambdas: an option in 3.4, always on (the option deprecated) in 4.x.
      [ "$KOKKOS_MAJOR" -ge 4 ] || kokkos_flags+=(-DKokkos_ENABLE_CUDA_LAMBDA=ON)
      kokkos_flags+=(-DKokkos_ARCH_HOPPER90=ON -DCUDAToolkit_ROOT="${CUDA_HOME}")
      [ "$config" = cuda-uvm ] && kokkos_flags+=(-DKokkos_ENABLE_CUDA_UVM=ON)
      kernels_flags+=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="${prefix}/bin/nvcc_wrapper"
                      "${host_blas_flags[@]}"
                      -DKokkosKernels_ENABLE_TPL_CUBLAS=ON -DKokkosKernels_ENABLE_TPL_CUSPARSE=OFF
                      -DCUDAToolkit_ROOT="${CUDA_HOME}")
      # Kokkos Kernels 4 also turns cuSOLVER on with CUDA, which then insists on cuSPARSE.
      [ "$KOKKOS_MAJOR" -lt 4 ] || kernels_flags+=(-DKokkosKernels_ENABLE_TPL_CUSOLVER=OFF) ;;
    debug)
      # Serial is then the default execution space; Kokkos_ENABLE_DEBUG and the bounds checks are
      # compiled into every consumer through KokkosCore_config.h; Kokkos exports cxx_std_20.
      kokkos_flags+=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_STANDARD=20
                     -DKokkos_ENABLE_OPENMP=OFF -DKokkos_ENABLE_DEBUG=ON
                     -DKokkos_ENABLE_DEBUG_BOUNDS_CHECK=ON -DCMAKE_CXX_COMPILER=g++)
      kernels_flags+=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=g++
                      "${host_blas_flags[@]}") ;;
    threads)  # Kokkos 3.4 names the Threads backend PTHREAD, 4.x THREADS
      local threads_option=THREADS
      [ "$KOKKOS_MAJOR" -ge 4 ] || threads_option=PTHREAD
      kokkos_flags+=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=17 -DKokkos_ENABLE_OPENMP=OFF
                     "-DKokkos_ENABLE_${threads_option}=ON" -DCMAKE_CXX_COMPILER=g++ $(host_arch_flags))
      kernels_flags+=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=g++ "${host_blas_flags[@]}") ;;
    hip)
      command -v hipcc >/dev/null || die "hip: no hipcc (Debian package hipcc)"
      kokkos_flags+=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=17 -DKokkos_ENABLE_OPENMP=OFF
                     -DCMAKE_CXX_COMPILER="$(command -v hipcc)"
                     -DKokkos_ENABLE_HIP=ON -DKokkos_ARCH_VEGA90A=ON)
      kernels_flags+=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$(command -v hipcc)"
                      -DKokkosKernels_ENABLE_TPL_BLAS=OFF -DKokkosKernels_ENABLE_TPL_LAPACK=OFF) ;;
  esac
  # The stamp keys the prefix by the sources, version, patch and every flag: any change rebuilds it.
  local stamp
  stamp="$(printf '%s\n' "${STAMP_SOURCES[@]}" "$KOKKOS_VERSION" "$PATCH_HASH" "${kokkos_flags[@]}" \
             "${kernels_flags[@]}" | sed "s#${DEPS_DIR}#DEPS#g" | sha256sum | cut -c1-16)"
  if [ -f "${prefix}/.fused-linear-stamp" ] && [ "$(cat "${prefix}/.fused-linear-stamp")" = "$stamp" ]; then
    log "${config}: up to date in ${prefix}"
    return
  fi
  # Kokkos alone has a stamp too: when only Kokkos Kernels' flags changed (or its build failed),
  # the installed Kokkos is kept and Kokkos Kernels is built into the prefix again.
  local kokkos_stamp
  kokkos_stamp="$(printf '%s\n' "${STAMP_SOURCES[@]}" "$KOKKOS_VERSION" "$PATCH_HASH" "${kokkos_flags[@]}" |
                    sed "s#${DEPS_DIR}#DEPS#g" | sha256sum | cut -c1-16)"
  local build="${DEPS_DIR}/build/${PREFIX_STEM}-${config}"
  export PATH="${CUDA_HOME}/bin:${PATH}"
  local t0=$SECONDS
  rm -f "${prefix}/.fused-linear-stamp"
  if [ -f "${prefix}/.fused-linear-kokkos-stamp" ] &&
     [ "$(cat "${prefix}/.fused-linear-kokkos-stamp")" = "$kokkos_stamp" ]; then
    log "${config}: Kokkos ${KOKKOS_VERSION} up to date in ${prefix}"
    rm -rf "$build" && mkdir -p "$build"
  else
    rm -rf "$prefix" "$build"
    mkdir -p "$build"
    log "${config}: building Kokkos ${KOKKOS_VERSION} (log: ${build}/kokkos.log)"
    { cmake -S "$KOKKOS_SRC" -B "${build}/kokkos" -DCMAKE_INSTALL_PREFIX="$prefix" "${kokkos_flags[@]}" &&
      cmake --build "${build}/kokkos" -j "$JOBS" && cmake --install "${build}/kokkos"; } \
      > "${build}/kokkos.log" 2>&1 || { tail -n 40 "${build}/kokkos.log" >&2; die "${config}: Kokkos build failed"; }
    echo "$kokkos_stamp" > "${prefix}/.fused-linear-kokkos-stamp"
  fi
  log "${config}: Kokkos took $((SECONDS - t0)) s; building Kokkos Kernels ${KERNELS_VERSION} (log: ${build}/kernels.log)"
  { cmake -S "$KERNELS_SRC" -B "${build}/kernels" -DCMAKE_INSTALL_PREFIX="$prefix" \
      -DKokkos_ROOT="$prefix" "${kernels_flags[@]}" &&
    cmake --build "${build}/kernels" -j "$JOBS" && cmake --install "${build}/kernels"; } \
    > "${build}/kernels.log" 2>&1 || { tail -n 40 "${build}/kernels.log" >&2; die "${config}: Kokkos Kernels build failed"; }
  echo "$stamp" > "${prefix}/.fused-linear-stamp"
  rm -rf "$build"
  log "${config}: installed in ${prefix} ($((SECONDS - t0)) s)"
}

for c in "${configs[@]}"; do build_config "$c"; done
for c in "${configs[@]}"; do echo "${c}=${DEPS_DIR}/${PREFIX_STEM}-${c}"; done
