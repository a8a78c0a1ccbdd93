// SPDX-License-Identifier: Apache-2.0
/// \file OneShot.hpp
/// What the one-shot calls (linear_leaky_relu, linear_leaky_relu_backward) share: the plan of
/// their key found in the cache or made, under CUDA graph capture the one a capture may use,
/// and its call ordered after the plan's previous use on any stream.
#ifndef FUSED_LINEAR_IMPL_ONE_SHOT_HPP
#define FUSED_LINEAR_IMPL_ONE_SHOT_HPP

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>

#include <Kokkos_Core.hpp>

#include "FusedLinear/impl/Fork.hpp"
#include "FusedLinear/impl/PlanCache.hpp"
#include "FusedLinear/impl/PlanKey.hpp"
#include "FusedLinear/impl/StreamIdentity.hpp"
#include "FusedLinear/impl/cuda/Device.hpp"
#include "FusedLinear/impl/engines/Engine.hpp"  // ExecDeviceGuard

namespace FusedLinear {
namespace Impl {

/// Runs `run(plan)` with the cached plan of `key_of(scope)`, made by `make()` (a
/// std::unique_ptr<CachedPlan<PlanType, ExecSpace>>) when there is none and no capture is in
/// progress. Returns a copy of the plan's info().
template <class PlanType, class ExecSpace, class KeyOf, class Make, class Run>
auto run_cached(const ExecSpace& exec, const char* function, KeyOf&& key_of, Make&& make, Run&& run)
    -> std::decay_t<decltype(std::declval<const PlanType&>().info())> {
  using Cached = CachedPlan<PlanType, ExecSpace>;
  refuse_if_forked(exec, function);  // before any device call
  // The instance's device first: every CUDA query below reads or changes that device's state.
  ExecDeviceGuard<ExecSpace> device(exec, function);
  bool capturing = false;
#if defined(KOKKOS_ENABLE_CUDA)
  StreamCapture capture;
  if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value) {
    capture = stream_capture(exec.cuda_stream());
    capturing = capture.capturing;
  }
#endif
  const std::optional<std::uint64_t> scope = plan_scope(exec);
  const PlanKey key = key_of(scope.value_or(0));
  PlanCache& cache = PlanCache::instance();
  std::shared_ptr<Cached> cached;
  if (capturing) {
#if defined(KOKKOS_ENABLE_CUDA)
    if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value)
      cached = cache.for_capture<Cached>(key, exec.cuda_stream(), capture, function);
#endif
  } else {
#if defined(KOKKOS_ENABLE_CUDA)
    if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value)
      cache.not_capturing(exec.cuda_stream());
#endif
    cached = cache.get<Cached>(key, make);
  }
  std::lock_guard<std::mutex> lock(cached->mutex);
  cached->done.order_after(exec, capturing);
  run(static_cast<const PlanType&>(cached->plan));
  cached->done.record(exec, capturing);
  // An instance this cache cannot tell from another shares the plan's workspace with them: its
  // work must be done before another call may start.
  if (!scope && cached->plan.workspace_bytes() > 0) exec.fence();
  return cached->plan.info();
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
