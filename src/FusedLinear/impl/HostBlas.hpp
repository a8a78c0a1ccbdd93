// SPDX-License-Identifier: Apache-2.0
/// \file HostBlas.hpp
/// Which host BLAS library the process runs, and whether its kernels fit the CPU: the dispatch
/// takes the vendor path on the host only where an optimised BLAS serves it (Dispatch.hpp).
#ifndef FUSED_LINEAR_IMPL_HOST_BLAS_HPP
#define FUSED_LINEAR_IMPL_HOST_BLAS_HPP

#include <cstdlib>
#include <string>

#if defined(__unix__) || defined(__APPLE__)
#include <dlfcn.h>
#define FUSED_LINEAR_HAS_DLADDR 1
#endif

#include "FusedLinear/impl/Facts.hpp"

namespace FusedLinear {
namespace Impl {

/// Classifies a BLAS library by its file name (after symbolic links: Debian's
/// /usr/lib/<triplet>/libblas.so.3 is an alternatives link to the implementation's file).
inline HostBlas classify_blas_library(const std::string& path) {
  for (const char* optimized : {"openblas", "blis", "mkl", "armpl", "essl", "atlas", "accelerate",
                                "Accelerate", "nvpl", "aocl", "libsci"})
    if (path.find(optimized) != std::string::npos) return HostBlas::Optimized;
  // Netlib's reference BLAS as Debian installs it (libblas3: .../blas/libblas.so.3).
  if (path.find("/blas/libblas.so") != std::string::npos) return HostBlas::Reference;
  return HostBlas::Unknown;
}

/// The file of the library that provides sgemm_ to this process, "" if unknown.
inline const std::string& blas_library_path() {
  // Found once: every plan's wisdom key names it, and the BLAS a process resolved does not change.
  static const std::string path = [] {
#if defined(FUSED_LINEAR_HAS_DLADDR)
    void* symbol = dlsym(RTLD_DEFAULT, "sgemm_");
    Dl_info info;
    if (symbol == nullptr || dladdr(symbol, &info) == 0 || info.dli_fname == nullptr)
      return std::string();
    char* resolved = realpath(info.dli_fname, nullptr);
    const std::string found = resolved ? resolved : info.dli_fname;
    std::free(resolved);
    return found;
#else
    return std::string();
#endif
  }();
  return path;
}

/// The vector instruction set an OpenBLAS core's kernels use: 0 SSE, 1 AVX (or AVX with FMA),
/// 2 AVX2 with FMA, 3 AVX-512; -1 for a name not listed (another architecture, a newer core).
/// Names as openblas_get_corename() returns them (OpenBLAS 0.3.x, x86-64 DYNAMIC_ARCH).
inline int openblas_core_level(const std::string& core) {
  for (const char* sse :
       {"Katmai", "Coppermine", "Northwood", "Prescott", "Banias", "Atom", "Core2", "Penryn",
        "Dunnington", "Nehalem", "Opteron", "Barcelona", "Nano", "Bobcat"})
    if (core.rfind(sse, 0) == 0) return 0;
  for (const char* avx : {"Sandybridge", "Bulldozer", "Piledriver", "Steamroller", "Excavator"})
    if (core == avx) return 1;
  for (const char* avx2 : {"Haswell", "Zen"})
    if (core == avx2) return 2;
  for (const char* avx512 : {"SkylakeX", "Cooperlake", "SapphireRapids"})
    if (core == avx512) return 3;
  return -1;
}

/// The CPU's vector instruction set on the scale of openblas_core_level; -1 where unknown.
inline int cpu_vector_level() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (__builtin_cpu_supports("avx512f")) return 3;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 2;
  if (__builtin_cpu_supports("avx")) return 1;
  return 0;
#else
  return -1;
#endif
}

/// The kernels the BLAS library at `path` (already loaded) says it runs, "" when it does not
/// say: only OpenBLAS does, through openblas_get_corename; Debian's BLIS libblas.so.3 exports
/// no bli_* symbol. Asked of that library and its dependencies only: a process may load
/// OpenBLAS for LAPACK beside another BLAS.
inline std::string blas_kernels(const std::string& path) {
#if defined(FUSED_LINEAR_HAS_DLADDR)
  if (path.empty()) return "";
  void* library = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (library == nullptr) return "";
  std::string kernels;
  using CoreName = char* (*)();
  if (void* symbol = dlsym(library, "openblas_get_corename")) {
    const char* core = reinterpret_cast<CoreName>(symbol)();
    kernels = core ? core : "";
  }
  dlclose(library);
  return kernels;
#else
  (void)path;
  return "";
#endif
}

/// What the library at `path` is (classify_blas_library), corrected by what its kernels are
/// for: an optimised library whose kernels use less of the CPU's vector units than it has is
/// Generic. OpenBLAS says which kernels it runs (`kernels`, its core name); one that does not
/// know the CPU falls back to its oldest (0.3.21 runs "Prescott", SSE3, on an Emerald Rapids
/// Xeon). BLIS does not say through libblas.so.3; 0.9 takes its AVX-512 kernels only where it
/// can count the CPU's FMA units, and on the same Xeon ran its AVX2 ones ("Number of FMA units
/// unknown; using 'haswell'", BLIS_ARCH_DEBUG=1), behind the fused kernel: on AVX-512 CPUs
/// BLIS counts as Generic. Measurements: docs/design/host-kernels.md#the-host-blas-on-this-cpu.
inline HostBlas classify_blas(const std::string& path, const std::string& kernels, int cpu_level) {
  const HostBlas library = classify_blas_library(path);
  if (library != HostBlas::Optimized) return library;
  if (!kernels.empty()) {
    const int level = openblas_core_level(kernels);
    return level >= 0 && cpu_level >= 0 && level < cpu_level ? HostBlas::Generic : library;
  }
  if (path.find("blis") != std::string::npos && cpu_level >= 3) return HostBlas::Generic;
  return library;
}

/// The host BLAS behind Kokkos Kernels, found once per process (the library a process loaded
/// does not change, nor, after its first call, the kernels it runs).
inline HostBlas host_blas_kind() {
  static const HostBlas kind = [] {
    const std::string path = blas_library_path();
    return classify_blas(path, blas_kernels(path), cpu_vector_level());
  }();
  return kind;
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
