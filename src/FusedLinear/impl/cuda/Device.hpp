// SPDX-License-Identifier: Apache-2.0
/// \file Device.hpp
/// CUDA runtime state a call must get right and leave as it found it: the calling thread's
/// current device, and the device-wide cache preference around vendor GEMMs.
#ifndef FUSED_LINEAR_IMPL_CUDA_DEVICE_HPP
#define FUSED_LINEAR_IMPL_CUDA_DEVICE_HPP

#include <Kokkos_Core.hpp>  // KOKKOS_ENABLE_CUDA

#if defined(KOKKOS_ENABLE_CUDA)
#include <cstdint>
#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

namespace FusedLinear {
namespace Impl {

/// Throws std::runtime_error naming `function` and what failed, for a CUDA runtime error.
inline void cuda_check(cudaError_t e, const char* function, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(function) + ": cannot " + what + " (" +
                             cudaGetErrorString(e) + ")");
}

/// Makes `device` (the device of the caller's execution space instance) current on this thread
/// for a scope and restores the thread's previous device after: direct CUDA calls (cuBLASLt, the
/// sm_90a kernels, allocations, attribute queries) act on the current device, which in an
/// application's worker thread, or one that uses another GPU too, need not be Kokkos'.
/// The first time on each thread it sets the device even where it is current already: only
/// that binds the device's primary context to the thread, and driver entry points called
/// through the runtime (cuTensorMapEncodeTiled) fail without one, as in a worker thread whose
/// first CUDA work is the layer.
class CudaDeviceGuard {
 public:
  CudaDeviceGuard(int device, const char* function) {
    cuda_check(cudaGetDevice(&m_previous), function, "query the current device");
    static thread_local std::uint64_t bound = 0;  // devices set on this thread (the first 64)
    const std::uint64_t bit = device < 64 ? std::uint64_t(1) << device : 0;
    if (m_previous != device || (bound & bit) == 0) {
      cuda_check(cudaSetDevice(device), function, "make the execution space's device current");
      bound |= bit;
      m_changed = m_previous != device;
    }
  }
  ~CudaDeviceGuard() {
    if (m_changed) cudaSetDevice(m_previous);
  }
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;

 private:
  int m_previous = 0;
  bool m_changed = false;
};

/// Whether work enqueued on `stream` is being captured into a CUDA graph (not run). A query that
/// fails (a capture elsewhere in cudaStreamCaptureModeGlobal can forbid it) counts as capturing;
/// its error is taken off the thread, since it is this query's own.
inline bool stream_is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return true;
  }
  return status != cudaStreamCaptureStatusNone;
}

/// Kokkos 3.4 sets cudaFuncCachePreferShared device-wide when it initialises (its own kernels
/// carry per-kernel settings). cuBLAS's kernels follow the device-wide setting, and with it
/// cuBLAS's fp32 SIMT GEMM runs slower on an H200
/// (docs/design/vendor-paths.md#the-cublas-cache-preference-finding). So around a vendor GEMM
/// the default preference is put back, and the previous one restored after (a launch-time
/// preference: no effect on results). Needs the device current (CudaDeviceGuard).
/// Not while `stream` is being captured: the graph's launches run later, whatever the setting
/// is then.
class CacheConfigGuard {
 public:
  explicit CacheConfigGuard(cudaStream_t stream) {
    if (!stream_is_capturing(stream) && cudaDeviceGetCacheConfig(&m_previous) == cudaSuccess &&
        m_previous != cudaFuncCachePreferNone)
      m_changed = cudaDeviceSetCacheConfig(cudaFuncCachePreferNone) == cudaSuccess;
  }
  ~CacheConfigGuard() {
    if (m_changed) cudaDeviceSetCacheConfig(m_previous);
  }
  CacheConfigGuard(const CacheConfigGuard&) = delete;
  CacheConfigGuard& operator=(const CacheConfigGuard&) = delete;

 private:
  cudaFuncCache m_previous = cudaFuncCachePreferNone;
  bool m_changed = false;
};

}  // namespace Impl
}  // namespace FusedLinear

#endif
#endif
