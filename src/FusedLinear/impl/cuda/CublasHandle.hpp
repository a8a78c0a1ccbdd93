// SPDX-License-Identifier: Apache-2.0
/// \file CublasHandle.hpp
/// Kokkos Kernels' cuBLAS handle: one per process, shared with the rest of the application.
/// The one place FusedLinear touches it (and cuBLAS's version, which wisdom's keys name).
#ifndef FUSED_LINEAR_IMPL_CUDA_CUBLAS_HANDLE_HPP
#define FUSED_LINEAR_IMPL_CUDA_CUBLAS_HANDLE_HPP

#include <Kokkos_Core.hpp>
#include <KokkosKernels_config.h>

#if defined(KOKKOSKERNELS_ENABLE_TPL_CUBLAS) && defined(KOKKOS_ENABLE_CUDA)
#define FUSED_LINEAR_CUBLAS 1

#include <mutex>
#include <stdexcept>
#include <string>

#include <KokkosBlas_tpl_spec.hpp>  // KokkosBlas::Impl::CudaBlasSingleton (3.4, 4.x, 5.x)

namespace FusedLinear {
namespace Impl {

/// The version of the cuBLAS library loaded, "major.minor.patch" (cublasGetProperty: a library
/// query, no handle and no device), or "unknown" where it fails. Read once per process.
inline const std::string& cublas_version() {
  static const std::string version = [] {
    int major = 0, minor = 0, patch = 0;
    if (cublasGetProperty(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS ||
        cublasGetProperty(MINOR_VERSION, &minor) != CUBLAS_STATUS_SUCCESS ||
        cublasGetProperty(PATCH_LEVEL, &patch) != CUBLAS_STATUS_SUCCESS)
      return std::string("unknown");
    return std::to_string(major) + '.' + std::to_string(minor) + '.' + std::to_string(patch);
  }();
  return version;
}

/// Points Kokkos Kernels' shared cuBLAS handle at the caller's stream (with Kokkos Kernels 3.4,
/// whose gemm takes no execution space; 4.x sets the stream itself) and sets its math mode for
/// one GEMM — strict calls too: an application may have left the handle in TF32 mode, which
/// would silently turn strict fp32 into TF32 — then restores what it set: the stream and the
/// math mode with Kokkos Kernels 3.4; the math mode only with 4.x, whose gemm sets the stream
/// itself and leaves the handle on the caller's stream. Holds a process-wide lock
/// for its scope: two host threads pointing the handle at their streams at once could enqueue
/// each other's GEMM on the wrong stream (the enqueue is asynchronous and takes microseconds).
/// Other code using the same handle at the same moment is not covered.
class CublasHandleGuard {
 public:
  CublasHandleGuard(cudaStream_t stream, bool set_stream, bool tf32)
      : m_lock(mutex()), m_handle(KokkosBlas::Impl::CudaBlasSingleton::singleton().handle) {
    if (set_stream) {
      check(cublasGetStream(m_handle, &m_stream), "read the cuBLAS stream");
      check(cublasSetStream(m_handle, stream), "set the cuBLAS stream");
      m_restore_stream = true;
    }
    check(cublasGetMathMode(m_handle, &m_math), "read the cuBLAS math mode");
    check(cublasSetMathMode(m_handle, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
          "set the cuBLAS math mode");
  }
  ~CublasHandleGuard() {
    cublasSetMathMode(m_handle, m_math);
    if (m_restore_stream) cublasSetStream(m_handle, m_stream);
  }
  CublasHandleGuard(const CublasHandleGuard&) = delete;
  CublasHandleGuard& operator=(const CublasHandleGuard&) = delete;

  /// The shared handle (for tests that set its state as an application might).
  static cublasHandle_t handle() { return KokkosBlas::Impl::CudaBlasSingleton::singleton().handle; }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static void check(cublasStatus_t status, const char* what) {
    if (status != CUBLAS_STATUS_SUCCESS)
      throw std::runtime_error(std::string("FusedLinear: cannot ") + what + " (cuBLAS status " +
                               std::to_string(int(status)) + ")");
  }
  std::lock_guard<std::mutex> m_lock;
  cublasHandle_t m_handle;
  cudaStream_t m_stream = nullptr;
  cublasMath_t m_math = CUBLAS_DEFAULT_MATH;
  bool m_restore_stream = false;
};

}  // namespace Impl
}  // namespace FusedLinear

#endif
#endif
