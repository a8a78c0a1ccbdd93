// SPDX-License-Identifier: Apache-2.0
/// \file StreamIdentity.hpp
/// Which plans calls on different instances may share, and where a plan's last use ends: the
/// plan cache orders every use of a plan after the one before (no workspace used by two
/// streams at once) and frees a plan only after its last use. The backends' own parts are beside
/// them (Kokkos::Cuda's in impl/cuda/StreamIdentity.hpp: overloads and a specialisation, taken over
/// these templates).
#ifndef FUSED_LINEAR_IMPL_STREAM_IDENTITY_HPP
#define FUSED_LINEAR_IMPL_STREAM_IDENTITY_HPP

#include <cstdint>
#include <optional>
#include <type_traits>

#include <Kokkos_Core.hpp>

#include "FusedLinear/impl/cuda/StreamIdentity.hpp"
#include "FusedLinear/impl/kernels/Common.hpp"

namespace FusedLinear {
namespace Impl {

/// Which plans a call may share with calls on other instances: plans are kept per scope, the
/// instance given at each call. On CUDA the device (impl/cuda/StreamIdentity.hpp): the plan's
/// completion mark orders a call after the plan's last use on any stream. Host backends run
/// each call to completion (the cached plan's lock serialises them): 0, but HPX, which
/// dispatches asynchronously. On HIP the stream's handle (the null and per-thread streams not
/// told apart). Elsewhere not known (`std::nullopt`): the one-shot call then waits for its work
/// before returning.
template <class ExecSpace>
std::optional<std::uint64_t> plan_scope(const ExecSpace& exec) {
#if defined(KOKKOS_ENABLE_HIP)
  if constexpr (std::is_same<ExecSpace, HipSpace>::value) {
    const hipStream_t stream = exec.hip_stream();
    if (stream == nullptr || stream == hipStreamPerThread) return std::nullopt;  // per thread
    return std::uint64_t(reinterpret_cast<std::uintptr_t>(stream));
  }
#endif
  (void)exec;
#if defined(KOKKOS_ENABLE_HPX)
  // HPX dispatches asynchronously: its instances' work may overlap, and they are not told apart.
  if constexpr (std::is_same<ExecSpace, Kokkos::Experimental::HPX>::value) return std::nullopt;
#endif
  if constexpr (is_host_space<ExecSpace>()) return std::uint64_t(0);
  return std::nullopt;
}

/// The device of a plan's memory made on `exec`: -1 but on CUDA.
template <class ExecSpace>
int device_of(const ExecSpace& exec) {
  (void)exec;
  return -1;
}

/// Where a cached plan's last use ends: a call orders itself after it (`order_after`) and marks
/// its own end (`record`), so that calls on different instances never use the plan's memory at
/// once, and the memory is freed only after its last use. On CUDA an event
/// (impl/cuda/StreamIdentity.hpp); host backends finish each call before it returns; other
/// backends' plans are per instance, waited for at release. `needed`: the plan holds memory.
template <class ExecSpace>
class CompletionMark {
 public:
  CompletionMark(const ExecSpace& exec, bool needed) {
    if (!needed || is_host_space<ExecSpace>()) return;
    m_exec.emplace(exec);
  }
  CompletionMark(const CompletionMark&) = delete;
  CompletionMark& operator=(const CompletionMark&) = delete;

  /// Before a use enqueued on `exec`; `capturing`: its stream is being captured.
  void order_after(const ExecSpace& exec, bool capturing) { (void)exec, (void)capturing; }
  /// After it.
  void record(const ExecSpace& exec, bool capturing) { (void)exec, (void)capturing; }
  void wait() {
    if (m_exec) m_exec->fence();
  }

 private:
  std::optional<ExecSpace> m_exec;  // backends without events
};

/// Runs `wait` (a fence) with `device` current where it is a CUDA device (>= 0), swallowing what
/// it throws: destructors call it, and a destructor must not throw.
template <class Wait>
void wait_quietly(int device, const Wait& wait) noexcept {
  if (!Kokkos::is_initialized()) return;
  const QuietDeviceScope scope(device);
  try {
    wait();
  } catch (...) {
  }
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
