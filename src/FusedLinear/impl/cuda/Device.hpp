// SPDX-License-Identifier: Apache-2.0
/// \file Device.hpp
/// CUDA runtime state a call must get right and leave as it found it: the calling thread's
/// current device, and the device-wide cache preference around vendor GEMMs.
#ifndef FUSED_LINEAR_IMPL_CUDA_DEVICE_HPP
#define FUSED_LINEAR_IMPL_CUDA_DEVICE_HPP

#include <Kokkos_Core.hpp>  // KOKKOS_ENABLE_CUDA

#if defined(KOKKOS_ENABLE_CUDA)
#include <atomic>
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

/// The CUDA driver's version (cudaDriverGetVersion: 12080 is 12.8), or 0 where there is no
/// driver or the query fails. Read once: it cannot change in a process. It acts on no device
/// and makes no context, so it needs no CudaDeviceGuard (import_wisdom calls it outside one);
/// a failure's error is taken off the thread, being this query's own.
inline int cuda_driver_version() {
  static const int version = [] {
    int v = 0;
    if (cudaDriverGetVersion(&v) != cudaSuccess) {
      (void)cudaGetLastError();
      v = 0;
    }
    return v;
  }();
  return version;
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
    ++depth();
    try {
      enter(device, function);
    } catch (...) {
      --depth();
      throw;
    }
  }
  ~CudaDeviceGuard() {
    if (m_changed) cudaSetDevice(m_previous);
    --depth();
  }
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;

  /// Guards alive on this thread: direct CUDA calls of the library's entry points come after one
  /// (cuda_call_without_guard counts those that do not; the tests read it).
  static int& depth() {
    static thread_local int guards = 0;
    return guards;
  }

 private:
  void enter(int device, const char* function) {
    cuda_check(cudaGetDevice(&m_previous), function, "query the current device");
    static thread_local std::uint64_t bound = 0;  // devices set on this thread (the first 64)
    const std::uint64_t bit = device < 64 ? std::uint64_t(1) << device : 0;
    if (m_previous != device || (bound & bit) == 0) {
      cuda_check(cudaSetDevice(device), function, "make the execution space's device current");
      bound |= bit;
      m_changed = m_previous != device;
    }
  }
  int m_previous = 0;
  bool m_changed = false;
};

/// Direct CUDA calls an entry point made before selecting its device (none, when every entry
/// point takes its device guard first): counted by guarded_cuda_call, read by the tests.
inline std::atomic<long>& cuda_calls_without_guard() {
  static std::atomic<long> calls{0};
  return calls;
}
/// Marks a direct CUDA call that acts on, or reads, the current device's state.
inline void guarded_cuda_call() {
  if (CudaDeviceGuard::depth() == 0) cuda_calls_without_guard().fetch_add(1);
}

/// CudaDeviceGuard for destructors and deferred releases: never throws (a device that cannot
/// be made current leaves the thread's as it was).
class CudaDeviceGuardNoThrow {
 public:
  explicit CudaDeviceGuardNoThrow(int device) {
    ++CudaDeviceGuard::depth();
    if (cudaGetDevice(&m_previous) == cudaSuccess && m_previous != device)
      m_changed = cudaSetDevice(device) == cudaSuccess;
    (void)cudaGetLastError();
  }
  ~CudaDeviceGuardNoThrow() {
    if (m_changed) cudaSetDevice(m_previous);
    --CudaDeviceGuard::depth();
  }
  CudaDeviceGuardNoThrow(const CudaDeviceGuardNoThrow&) = delete;
  CudaDeviceGuardNoThrow& operator=(const CudaDeviceGuardNoThrow&) = delete;

 private:
  int m_previous = 0;
  bool m_changed = false;
};

/// A stream's capture into a CUDA graph: whether it is being captured, and then the capture's
/// id (unique in the process) and the graph being built (null where the capture was
/// invalidated or the query failed).
struct StreamCapture {
  bool capturing = false;
  unsigned long long id = 0;
  cudaGraph_t graph = nullptr;
};
/// A query that fails (a capture elsewhere in cudaStreamCaptureModeGlobal can forbid it)
/// counts as capturing, with no graph; its error is taken off the thread, being this query's.
inline StreamCapture stream_capture(cudaStream_t stream) {
  guarded_cuda_call();
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  StreamCapture c;
#if CUDART_VERSION >= 13000
  const cudaError_t e = cudaStreamGetCaptureInfo(stream, &status, &c.id, &c.graph);
#else
  const cudaError_t e =
      cudaStreamGetCaptureInfo_v2(stream, &status, &c.id, &c.graph, nullptr, nullptr);
#endif
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return {true, 0, nullptr};
  }
  c.capturing = status != cudaStreamCaptureStatusNone;
  if (status != cudaStreamCaptureStatusActive) c.graph = nullptr;
  return c;
}

/// This thread's stream capture interaction mode set to relaxed for a scope: what the library
/// frees then is not refused because another thread captures in global mode (the memory of a
/// released plan is in no capture).
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode() {
    m_changed = cudaThreadExchangeStreamCaptureMode(&m_mode) == cudaSuccess;
    (void)cudaGetLastError();
  }
  ~RelaxedCaptureMode() {
    if (m_changed) cudaThreadExchangeStreamCaptureMode(&m_mode);
  }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  cudaStreamCaptureMode m_mode = cudaStreamCaptureModeRelaxed;
  bool m_changed = false;
};

/// Whether a stream of the current device that synchronises with the legacy default stream is
/// being captured (the legacy stream's own query then fails with cudaErrorStreamCaptureImplicit).
inline bool blocking_capture_on_current_device() {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t e = cudaStreamIsCapturing(cudaStreamLegacy, &status);
  if (e != cudaSuccess) (void)cudaGetLastError();
  return e != cudaSuccess || status != cudaStreamCaptureStatusNone;
}

/// Whether work enqueued on `stream` is being captured into a CUDA graph (not run). A query that
/// fails (a capture elsewhere in cudaStreamCaptureModeGlobal can forbid it) counts as capturing;
/// its error is taken off the thread, since it is this query's own.
inline bool stream_is_capturing(cudaStream_t stream) {
  guarded_cuda_call();
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
