// SPDX-License-Identifier: Apache-2.0
/// \file LinearLeakyReLU.hpp
/// The one-shot call: FusedLinear::linear_leaky_relu, a plan made (or found) and executed.
#ifndef FUSED_LINEAR_LINEAR_LEAKY_RELU_HPP
#define FUSED_LINEAR_LINEAR_LEAKY_RELU_HPP

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>

#include <Kokkos_Core.hpp>

#include "FusedLinear/Types.hpp"
#include "FusedLinear/impl/Checks.hpp"
#include "FusedLinear/impl/Errors.hpp"
#include "FusedLinear/impl/OneShot.hpp"
#include "FusedLinear/impl/PlanCache.hpp"
#include "FusedLinear/impl/PlanImplEti.hpp"  // PlanImpl, its extern instantiations

namespace FusedLinear {

/// Y = LeakyReLU(multiplier * (X . W^T + b), negative_slope) in one call: as a Plan made for
/// these arguments and executed once (see Plan for the parameters, exceptions and semantics).
///
/// The plan is kept for the next call with the same device, extents, strides, alignment,
/// parameters and options, on any instance (stream) of that device (at most
/// cached_plans_limit() plans, 64 by default, the least recently used dropped first, once its
/// last call's work is done), so a call in a loop costs what Plan::execute costs plus a lookup
/// (and the returned RunInfo's copy). Calls on different streams that share a plan are ordered
/// on the device, one after the other (an event), whatever thread makes them: make a Plan per
/// stream for streams that must overlap. The plans' memory is released at Kokkos::finalize, or
/// at once by release_cached_plans(). Safe to call from several host threads (on host backends,
/// Kokkos 3.4's OpenMP instances take team kernels from the initialising thread only). In a
/// process forked after Kokkos started, a call on its host thread pool or its device throws
/// std::runtime_error (neither survives the fork); Kokkos::Serial computes there.
///
/// Under CUDA graph capture, on any stream (one the library never saw included), the call uses
/// the plan an earlier call with the same arguments made outside the capture, on any stream of
/// the device, or one a graph still holds; without one the call is refused
/// (std::invalid_argument: making one allocates, which a capture cannot): run the layer once
/// before the capture, as CUDA graph recipes do. The graph holds the plan until it and its
/// executable graphs are destroyed, and every replay orders itself after the plan's previous
/// use (eager or replayed) through the plan's event; destroy graphs before Kokkos::finalize.
///
/// \return which path, precision and GEMM ran, and why they differ from the request
template <class ExecSpace, class XView, class WView, class BView, class YView>
RunInfo linear_leaky_relu(const ExecSpace& exec, const XView& X, const WView& W, const BView& b,
                          const YView& Y, typename YView::non_const_value_type multiplier,
                          typename YView::non_const_value_type negative_slope,
                          Options options = {}) {
  static_assert(Impl::check_types<ExecSpace, XView, WView, BView, YView>(), "");
  using Plan_ = Impl::PlanImplOf<ExecSpace, XView, WView, BView, YView>;
  constexpr const char* function = "FusedLinear::linear_leaky_relu";
  return Impl::run_cached<Plan_>(
      exec, function,
      [&](std::uint64_t scope) {
        return Impl::plan_key<Plan_>(scope, X, W, b, Y, multiplier, negative_slope, options);
      },
      [&] {
        return std::make_unique<Impl::CachedPlan<Plan_, ExecSpace>>(
            exec, X, W, b, Y, multiplier, negative_slope, options, function);
      },
      [&](const Plan_& plan) { plan.execute(exec, X, W, b, Y, function); });
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
/// threads have returned), and frees those of CUDA graphs destroyed since. While a capture the
/// library knows of is in progress (one it was called in, or one on a stream that synchronises
/// with the legacy default stream) the memory is freed only at the next call or release after
/// it. Plans that graphs still alive hold stay. Plans made with FusedLinear::Plan are not
/// affected.
inline void release_cached_plans() { Impl::PlanCache::instance().release(); }

/// The most plans linear_leaky_relu keeps (64 unless set_cached_plans_limit changed it).
inline std::size_t cached_plans_limit() { return Impl::PlanCache::instance().limit(); }

/// Keeps at most `plans` plans from now on, dropping the least recently used ones beyond it: a
/// model whose layers have more distinct shapes than the limit makes plans again on every pass,
/// and its capture into a CUDA graph finds no plan for its first layers. Throws
/// std::invalid_argument naming the function for 0.
inline void set_cached_plans_limit(std::size_t plans) {
  if (plans == 0)
    Impl::refuse("FusedLinear::set_cached_plans_limit",
                 "the limit must be at least 1 (each call needs its plan)");
  Impl::PlanCache::instance().set_limit(plans);
}

}  // namespace FusedLinear

#endif
