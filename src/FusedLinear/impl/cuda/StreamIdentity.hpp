// SPDX-License-Identifier: Apache-2.0
/// \file cuda/StreamIdentity.hpp
/// Kokkos::Cuda's side of impl/StreamIdentity.hpp: which plans its streams share (the device's),
/// where a plan's last use ends (an event), and the device its plans' memory is on.
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

/// Kokkos::Cuda's plan_scope (see impl/StreamIdentity.hpp): the device. Every stream of it
/// shares the plans, each use ordered after the one before by the plan's event; so a capture on
/// a stream the library never saw finds the plan an earlier call made on another stream.
inline std::optional<std::uint64_t> plan_scope(const Kokkos::Cuda& exec) {
  return std::uint64_t(exec.cuda_device());
}

/// The device of a plan's memory made on `exec`.
inline int device_of(const Kokkos::Cuda& exec) { return exec.cuda_device(); }

template <class ExecSpace>
class CompletionMark;

/// On CUDA an event recorded after each use (the caller's stream may be gone when the plan is
/// freed); none where the plan holds no workspace (`needed` false). A use under capture waits
/// for and records the event as external nodes of the graph: every replay orders itself after
/// the plan's previous use, eager or replayed, and the next use after it, so graphs and eager
/// calls on any streams share one plan.
template <>
class CompletionMark<Kokkos::Cuda> {
 public:
  CompletionMark(const Kokkos::Cuda& exec, bool needed) {
    if (!needed) return;
    CudaDeviceGuard device(exec.cuda_device(), function);
    cuda_check(cudaEventCreateWithFlags(&m_event, cudaEventDisableTiming), function,
               "create an event");
  }
  ~CompletionMark() {
    if (m_event) cudaEventDestroy(m_event);
  }
  CompletionMark(const CompletionMark&) = delete;
  CompletionMark& operator=(const CompletionMark&) = delete;

  /// Before a use enqueued on `exec` (its device current); `capturing`: its stream is being
  /// captured.
  void order_after(const Kokkos::Cuda& exec, bool capturing) {
    if (!m_event) return;
    guarded_cuda_call();
    cuda_check(cudaStreamWaitEvent(exec.cuda_stream(), m_event,
                                   capturing ? cudaEventWaitExternal : cudaEventWaitDefault),
               function, "order the call after the plan's last use");
  }
  /// After it.
  void record(const Kokkos::Cuda& exec, bool capturing) {
    if (!m_event) return;
    guarded_cuda_call();
    cuda_check(
        cudaEventRecordWithFlags(m_event, exec.cuda_stream(),
                                 capturing ? cudaEventRecordExternal : cudaEventRecordDefault),
        function, "record the end of the call");
  }
  void wait() {
    if (m_event) {
      guarded_cuda_call();
      cudaEventSynchronize(m_event);
    }
  }

 private:
  static constexpr const char* function = "FusedLinear::linear_leaky_relu";
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
