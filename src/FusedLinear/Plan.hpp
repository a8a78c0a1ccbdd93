// SPDX-License-Identifier: Apache-2.0
/// \file Plan.hpp
/// FusedLinear::Plan: the layer for one execution space instance, shape, set of View types,
/// multiplier, slope and options, decided and set up once, executed many times.
#ifndef FUSED_LINEAR_PLAN_HPP
#define FUSED_LINEAR_PLAN_HPP

#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include <Kokkos_Core.hpp>

#include "FusedLinear/Types.hpp"
#include "FusedLinear/impl/Checks.hpp"
#include "FusedLinear/impl/PlanCache.hpp"
#include "FusedLinear/impl/PlanImplEti.hpp"  // PlanImpl, its extern instantiations

namespace FusedLinear {

/// Y = LeakyReLU(multiplier * (X . W^T + b), negative_slope), PyTorch's
/// `leaky_relu(linear(X, W, b) * multiplier, negative_slope)` with nn.Linear's shapes
/// X [M,K], W [N,K], b [N], Y [M,N], planned once and executed many times (as KokkosFFT::Plan).
///
/// The constructor checks the arguments, decides the path and precision (RunInfo says which and
/// why), and allocates everything that path needs (cuBLASLt descriptors and workspace, split-K
/// partial sums, 3xTF32 split operands), throwing std::runtime_error naming the class if it
/// cannot. execute() then enqueues the layer on the plan's execution space instance, allocating
/// nothing (Kokkos makes its kernels' label strings; the library makes strings only for an
/// exception).
///
/// Thread safety: a plan is used by one host thread at a time, its calls on its own instance
/// (make one per thread or stream); different plans may execute concurrently on different
/// instances. execute() may be captured into a CUDA graph and replayed (README, "CUDA
/// graphs"); the constructor refuses to run under capture (it allocates). The destructor waits for
/// the plan's instance (its memory may be in use by work still queued there): keep the instance
/// (and its stream) alive until the plan is gone, and destroy plans before Kokkos::finalize.
///
/// \tparam ExecSpace a Kokkos execution space; X, W, b and Y must be accessible from it.
/// \tparam XView, WView, BView, YView Kokkos::Views of rank 2, 2, 1, 2 and one value type, float
///         or double; any layout (LayoutRight, PyTorch's, is the fast one) and memory traits.
template <class ExecSpace, class XView, class WView, class BView, class YView>
class Plan : Impl::OwnedPlan<ExecSpace, Impl::PlanImplOf<ExecSpace, XView, WView, BView, YView>> {
  static_assert(Impl::check_types<ExecSpace, XView, WView, BView, YView>(), "");
  using Impl_ = Impl::PlanImplOf<ExecSpace, XView, WView, BView, YView>;
  using Owned = Impl::OwnedPlan<ExecSpace, Impl_>;
  using Owned::m_exec;
  using Owned::m_impl;

 public:
  using execution_space = ExecSpace;
  using value_type = typename YView::non_const_value_type;

  /// \param exec            the instance execute() orders its work on
  /// \param X, W, b, Y      Views of the shapes and types execute() will take (their strides
  ///                        and alignment are planned for; their contents are not read, but
  ///                        under Planning::Measure, which runs the layer on them: X, W and b
  ///                        are left as they are, Y is overwritten)
  /// \param multiplier      finite scale applied after the bias
  /// \param negative_slope  finite LeakyReLU slope for non-positive values
  /// \param options         algorithm (Auto by default), precision (Strict by default) and
  ///                        planning (Estimate by default: the rule; Measure: timed)
  /// \throws std::invalid_argument naming the class and the problem: mismatched extents,
  ///         unallocated Views, Y aliasing an input, a non-finite multiplier or slope, a request
  ///         the build, device or Views cannot serve; std::runtime_error when resources cannot be
  ///         had.
  Plan(const ExecSpace& exec, const XView& X, const WView& W, const BView& b, const YView& Y,
       value_type multiplier, value_type negative_slope, Options options = {})
      : Owned(exec, new Impl_(exec, X, W, b, Y, multiplier, negative_slope, options,
                              "FusedLinear::Plan")) {}

  /// Enqueues the layer on the plan's instance (asynchronous: fence it before reading Y on the
  /// host). The Views must have the plan's extents; their strides and alignment those the plan
  /// was made for where its path depends on them (cuBLASLt, the Hopper kernels; otherwise
  /// std::invalid_argument, before anything is written: make another plan). Y must share no
  /// element with an input.
  void execute(const XView& X, const WView& W, const BView& b, const YView& Y) const {
    m_impl->execute(m_exec, X, W, b, Y, "FusedLinear::Plan::execute");
  }

  /// The path, precision and GEMM this plan runs, and why they differ from the request.
  const RunInfo& info() const { return m_impl->info(); }
  /// Planning::Measure: the candidates this plan timed when it was made (algorithm, precision,
  /// cuBLASLt variant, milliseconds, calls), the one it runs marked chosen; empty where it timed
  /// nothing (Planning::Estimate, a choice from wisdom, an empty shape, nothing to choose).
  const std::vector<Measurement>& measurements() const { return m_impl->measurements(); }
  /// Device (or host) memory the plan holds for its path.
  std::size_t workspace_bytes() const { return m_impl->workspace_bytes(); }
  const ExecSpace& space() const { return m_exec; }
};

}  // namespace FusedLinear

#endif
