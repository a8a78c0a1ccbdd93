// SPDX-License-Identifier: Apache-2.0
/// \file cuda/StreamIdentity.hpp
/// Kokkos::Cuda's side of impl/StreamIdentity.hpp: which stream an instance runs on (its id, not
/// its handle), where a call on it ends (an event), and the device its plans' memory is on.
/// Overloads and a specialisation for Kokkos::Cuda, so that the shared header has no CUDA
/// branch; without CUDA only the device scope of quiet waits is left, which does nothing.
#ifndef FUSED_LINEAR_IMPL_CUDA_STREAM_IDENTITY_HPP
#define FUSED_LINEAR_IMPL_CUDA_STREAM_IDENTITY_HPP

#include <Kokkos_Core.hpp>  // KOKKOS_ENABLE_CUDA

#if defined(KOKKOS_ENABLE_CUDA)
#include <cstdint>
#include <optional>

#include <cuda_runtime.h>

#include "FusedLinear/impl/Errors.hpp"
#include "FusedLinear/impl/cuda/Device.hpp"

namespace FusedLinear {
namespace Impl {

/// Kokkos::Cuda's instance_identity (see impl/StreamIdentity.hpp): the stream's own id
/// (cudaStreamGetId), since the handle cudaStreamPerThread (and the legacy stream under
/// --default-stream per-thread) names another stream on every thread. While the stream is
/// being captured (`capturing`), where cudaStreamGetId is not permitted, the id this thread
/// found for the handle before; a stream this thread never called on outside the capture is
/// refused.
inline std::optional<std::uint64_t> instance_identity(const Kokkos::Cuda& exec,
                                                      const char* function, bool capturing) {
  // The handles this thread identified last (a handle's id is per thread for
  // cudaStreamPerThread); a handle reused by a new stream maps to a dead stream's id, which
  // no live stream has.
  struct Known {
    cudaStream_t handle;
    unsigned long long id;
  };
  static thread_local Known known[16] = {};
  static thread_local unsigned next = 0;
  const cudaStream_t stream = exec.cuda_stream();
  unsigned long long id = 0;
  bool found = false;
  for (const Known& k : known)
    if (k.id != 0 && k.handle == stream) id = k.id, found = true;
  if (!found) {
    if (capturing)
      refuse(function,
             "this thread made no call on this stream before its capture into a CUDA graph "
             "(a plan cannot be made during one: it allocates): make one call before the "
             "capture");
    guarded_cuda_call();
    cuda_check(cudaStreamGetId(stream, &id), function, "identify the stream");
    known[next++ % 16] = {stream, id};
  }
  // Ids are unique within the process; the device keeps two devices' default streams apart.
  return std::uint64_t(id) ^ (std::uint64_t(exec.cuda_device()) << 56);
}

/// The device of a plan's memory made on `exec`.
inline int device_of(const Kokkos::Cuda& exec) { return exec.cuda_device(); }

template <class ExecSpace>
class CompletionMark;

/// On CUDA an event recorded after each call (the caller's stream may be gone when the plan
/// is freed); none where the plan holds no workspace (`needed` false).
template <>
class CompletionMark<Kokkos::Cuda> {
 public:
  CompletionMark(const Kokkos::Cuda& exec, bool needed) {
    if (!needed) return;
    CudaDeviceGuard device(exec.cuda_device(), "FusedLinear::linear_leaky_relu");
    cuda_check(cudaEventCreateWithFlags(&m_event, cudaEventDisableTiming),
               "FusedLinear::linear_leaky_relu", "create an event");
  }
  ~CompletionMark() {
    if (m_event) cudaEventDestroy(m_event);
  }
  CompletionMark(const CompletionMark&) = delete;
  CompletionMark& operator=(const CompletionMark&) = delete;

  /// After a call enqueued on `exec`.
  void record(const Kokkos::Cuda& exec) {
    if (m_event) {
      CudaDeviceGuard device(exec.cuda_device(), "FusedLinear::linear_leaky_relu");
      guarded_cuda_call();
      cuda_check(cudaEventRecord(m_event, exec.cuda_stream()), "FusedLinear::linear_leaky_relu",
                 "record an event");
    }
  }
  void wait() {
    if (m_event) {
      guarded_cuda_call();
      cudaEventSynchronize(m_event);
    }
  }

 private:
  cudaEvent_t m_event = nullptr;
};

/// `device` made current for a scope where it is a CUDA device (>= 0); never throws.
class QuietDeviceScope {
 public:
  explicit QuietDeviceScope(int device) {
    if (device >= 0) m_guard.emplace(device);
  }

 private:
  std::optional<CudaDeviceGuardNoThrow> m_guard;
};

}  // namespace Impl
}  // namespace FusedLinear

#else

namespace FusedLinear {
namespace Impl {

/// Without CUDA no plan's memory is on a device to be made current.
class QuietDeviceScope {
 public:
  explicit QuietDeviceScope(int device) { (void)device; }
};

}  // namespace Impl
}  // namespace FusedLinear

#endif
#endif
