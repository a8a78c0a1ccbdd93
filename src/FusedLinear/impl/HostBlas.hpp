// SPDX-License-Identifier: Apache-2.0
/// \file HostBlas.hpp
/// Which host BLAS library the process runs: the dispatch takes the vendor path on the host only
/// where an optimised BLAS serves it.
#ifndef FUSED_LINEAR_IMPL_HOST_BLAS_HPP
#define FUSED_LINEAR_IMPL_HOST_BLAS_HPP

#include <cstdlib>
#include <string>

#if defined(__unix__) || defined(__APPLE__)
#include <dlfcn.h>
#define FUSED_LINEAR_HAS_DLADDR 1
#endif

#include "FusedLinear/impl/Dispatch.hpp"

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
inline std::string blas_library_path() {
#if defined(FUSED_LINEAR_HAS_DLADDR)
  void* symbol = dlsym(RTLD_DEFAULT, "sgemm_");
  Dl_info info;
  if (symbol == nullptr || dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return "";
  char* resolved = realpath(info.dli_fname, nullptr);
  const std::string path = resolved ? resolved : info.dli_fname;
  std::free(resolved);
  return path;
#else
  return "";
#endif
}

/// The host BLAS behind Kokkos Kernels, found once per process (the library a process loaded
/// does not change).
inline HostBlas host_blas_kind() {
  static const HostBlas kind = classify_blas_library(blas_library_path());
  return kind;
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
