// SPDX-License-Identifier: Apache-2.0
/// \file LinearLeakyReLU.hpp
/// The one-shot call: FusedLinear::linear_leaky_relu, a plan made (or found) and executed.
#ifndef FUSED_LINEAR_LINEAR_LEAKY_RELU_HPP
#define FUSED_LINEAR_LINEAR_LEAKY_RELU_HPP

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>

#include <Kokkos_Core.hpp>

#include "FusedLinear/Types.hpp"
#include "FusedLinear/impl/Checks.hpp"
#include "FusedLinear/impl/Errors.hpp"
#include "FusedLinear/impl/PlanCache.hpp"
#include "FusedLinear/impl/PlanImpl.hpp"
#include "FusedLinear/impl/cuda/Device.hpp"

namespace FusedLinear {

/// Y = LeakyReLU(multiplier * (X . W^T + b), negative_slope) in one call: as a Plan made for
/// these arguments and executed once (see Plan for the parameters, exceptions and semantics).
///
/// The plan is kept for the next call with the same instance (stream), extents, strides,
/// alignment, parameters and options (at most 32 plans, the least recently used dropped first,
/// once its last call's work is done), so a call in a loop costs what Plan::execute costs plus a
/// lookup (and the returned RunInfo's copy). Their memory is released at Kokkos::finalize, or at
/// once by release_cached_plans(). Safe to call from several host threads (on CUDA, HIP: one
/// instance each or one shared, cudaStreamPerThread included; on host backends, Kokkos 3.4's
/// OpenMP instances take team kernels from the initialising thread only). Under CUDA graph
/// capture only with a plan cached by an earlier call with the same arguments outside the
/// capture (making one allocates: otherwise std::invalid_argument); that plan is then pinned,
/// never evicted while the graph may replay it, until release_cached_plans() or
/// Kokkos::finalize (free the graph first).
///
/// \return which path, precision and GEMM ran, and why they differ from the request
template <class ExecSpace, class XView, class WView, class BView, class YView>
RunInfo linear_leaky_relu(const ExecSpace& exec, const XView& X, const WView& W, const BView& b,
                          const YView& Y, typename YView::non_const_value_type multiplier,
                          typename YView::non_const_value_type negative_slope,
                          Options options = {}) {
  static_assert(Impl::check_types<ExecSpace, XView, WView, BView, YView>(), "");
  using Plan_ =
      Impl::PlanImpl<ExecSpace, Impl::CanonicalInput<ExecSpace, XView>,
                     Impl::CanonicalInput<ExecSpace, WView>, Impl::CanonicalInput<ExecSpace, BView>,
                     Impl::CanonicalOutput<ExecSpace, YView>>;
  using Cached = Impl::CachedPlan<Plan_, ExecSpace>;
  constexpr const char* function = "FusedLinear::linear_leaky_relu";
  bool capturing = false;
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value)
    capturing = Impl::stream_is_capturing(exec.cuda_stream());
#endif
  const std::optional<std::uint64_t> instance = Impl::instance_identity(exec, function, capturing);
  const Impl::PlanKey key =
      Impl::plan_key<Plan_>(instance.value_or(0), X, W, b, Y, multiplier, negative_slope, options);
  std::shared_ptr<Cached> cached;
  if (capturing) {
    cached = Impl::PlanCache::instance().pin<Cached>(key);
    if (!cached)
      Impl::refuse(function,
                   "no plan is cached for these arguments on this stream, and none can be made "
                   "while the stream is being captured into a CUDA graph (it allocates): make "
                   "one call before the capture");
  } else {
    cached = Impl::PlanCache::instance().get<Cached>(key, [&] {
      return std::make_unique<Cached>(exec, X, W, b, Y, multiplier, negative_slope, options,
                                      function);
    });
  }
  std::lock_guard<std::mutex> lock(cached->mutex);
  cached->plan.execute(exec, X, W, b, Y, function);
  if (!capturing) cached->done.record(exec);  // a pinned plan: freed after a device fence
  // An instance this cache cannot tell from another shares the plan's workspace with them: its
  // work must be done before another call may start.
  if (!instance && cached->plan.workspace_bytes() > 0) exec.fence();
  return cached->plan.info();
}

/// Same as above on the default instance of Y's execution space.
template <class XView, class WView, class BView, class YView>
RunInfo linear_leaky_relu(const XView& X, const WView& W, const BView& b, const YView& Y,
                          typename YView::non_const_value_type multiplier,
                          typename YView::non_const_value_type negative_slope,
                          Options options = {}) {
  return linear_leaky_relu(typename YView::execution_space(), X, W, b, Y, multiplier,
                           negative_slope, options);
}

/// Drops the plans linear_leaky_relu keeps, freeing their memory (once calls in flight on other
/// threads have returned). Plans made with FusedLinear::Plan are not affected.
inline void release_cached_plans() { Impl::PlanCache::instance().release(); }

}  // namespace FusedLinear

#endif
