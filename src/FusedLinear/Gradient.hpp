// SPDX-License-Identifier: Apache-2.0
/// \file Gradient.hpp
/// The layer's gradient: dX, dW and db of Y = LeakyReLU(multiplier * (X . W^T + b), slope) for
/// an upstream gradient dY, as PyTorch's autograd computes them; a plan made once and executed
/// many times (GradientPlan) and the one-shot call with the plan cache
/// (linear_leaky_relu_backward).
#ifndef FUSED_LINEAR_GRADIENT_HPP
#define FUSED_LINEAR_GRADIENT_HPP

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>

#include <Kokkos_Core.hpp>

#include "FusedLinear/Types.hpp"
#include "FusedLinear/impl/GradientImpl.hpp"
#include "FusedLinear/impl/OneShot.hpp"
#include "FusedLinear/impl/PlanCache.hpp"

namespace FusedLinear {

/// GradientPlan's View types as the library computes with them; the same rules as Plan's.
///
/// With G = multiplier * (z > 0 ? dY : dY * slope), z = multiplier * (X . W^T + b) the
/// pre-activation (PyTorch's leaky_relu backward: slope at z == 0 and for NaN z):
///   dX [M,K] = G . W,   dW [N,K] = G^T . X   (+ dW with accumulate),
///   db [N] = sum over rows of G               (+ db with accumulate),
/// each summed in an order fixed by the plan (the same bits on every run).
///
/// What the backward needs from the forward (`saved`, [M,N], options.saved says which): the
/// forward's output Y (Saved::Output, no memory beyond Y itself: y > 0 exactly where z > 0 for
/// slope >= 0), the pre-activation z (Saved::PreActivation, M*N values), or a mask of z > 0
/// (Saved::Sign: a View of bool or integers, M*N bytes as bool; any slope, and Y may change
/// before the gradient runs). z is what the forward computes with slope 1 (LeakyReLU with slope
/// 1 is the identity, bit for bit); Y is then LeakyReLU(z, slope). The gradient never
/// recomputes the product.
///
/// Each output is optional: an empty View (default-constructed, extent 0) skips it. The plan
/// allocates G (M*N values) and, for db, one partial sum per 64 rows and column (in the value
/// type's wider accumulator) at construction; execute() allocates nothing. The products run
/// through engines of the forward: KokkosBlas::gemm (cuBLAS, the host BLAS, Kokkos Kernels'
/// native gemm) in strict fp32 or TF32, cuBLASLt in 3xTF32 (CUDA, row-major X, W, dX
/// and dW with contiguous rows); GradientInfo says which ran for each.
template <class ExecSpace, class XView, class WView, class DYView, class SavedView, class DXView,
          class DWView, class DBView>
class GradientPlan
    : Impl::OwnedPlan<ExecSpace, Impl::GradientImplOf<ExecSpace, XView, WView, DYView, SavedView,
                                                      DXView, DWView, DBView>> {
  static_assert(Impl::check_gradient_types<ExecSpace, XView, WView, DYView, SavedView, DXView,
                                           DWView, DBView>(),
                "");
  using Impl_ =
      Impl::GradientImplOf<ExecSpace, XView, WView, DYView, SavedView, DXView, DWView, DBView>;
  using Owned = Impl::OwnedPlan<ExecSpace, Impl_>;
  using Owned::m_exec;
  using Owned::m_impl;

 public:
  using execution_space = ExecSpace;
  using value_type = typename DYView::non_const_value_type;

  /// \param exec            the instance execute() orders its work on
  /// \param X, W            the forward's inputs, [M,K] and [N,K]
  /// \param dY              the gradient of the loss with respect to Y, [M,N]
  /// \param saved           Y, z or a mask of z > 0, [M,N], as options.saved says
  /// \param dX, dW, db      the outputs, [M,K], [N,K], [N]; an empty View skips one
  /// \param multiplier, negative_slope  the forward's (finite)
  /// \param options         precision (a floor under Algorithm::Auto), algorithm (Auto, Vendor
  ///                        or VendorLt), planning, accumulate, saved
  /// \throws std::invalid_argument naming the class and the problem (extents, unallocated or
  ///         aliasing Views, an output sharing elements with another View, a negative slope
  ///         with Saved::Output, options.saved not matching saved's value type, a request the
  ///         build, device or Views cannot serve);
  ///         std::runtime_error when resources cannot be had.
  GradientPlan(const ExecSpace& exec, const XView& X, const WView& W, const DYView& dY,
               const SavedView& saved, const DXView& dX, const DWView& dW, const DBView& db,
               value_type multiplier, value_type negative_slope, GradientOptions options = {})
      : Owned(exec, new Impl_(exec, X, W, dY, saved, dX, dW, db, multiplier, negative_slope,
                              options, "FusedLinear::GradientPlan")) {}

  /// Enqueues the gradient on the plan's instance (asynchronous). The Views must have the
  /// plan's extents, and the outputs it was made with present or absent alike; every refusal
  /// comes before anything is written.
  void execute(const XView& X, const WView& W, const DYView& dY, const SavedView& saved,
               const DXView& dX, const DWView& dW, const DBView& db) const {
    m_impl->execute(m_exec, X, W, dY, saved, dX, dW, db, "FusedLinear::GradientPlan::execute");
  }

  /// The path, precision and GEMM of each product, and why they differ from the request.
  const GradientInfo& info() const { return m_impl->info(); }
  /// Device (or host) memory the plan holds: G, db's partial sums, the products' workspace.
  std::size_t workspace_bytes() const { return m_impl->workspace_bytes(); }
  const ExecSpace& space() const { return m_exec; }
};

/// The gradient in one call: a GradientPlan made for these arguments (or found in the cache
/// linear_leaky_relu keeps, with the same rules: keyed by device, extents, strides, alignment,
/// parameters and options; shared by streams, ordered by an event; usable under CUDA graph
/// capture once made outside it) and executed once.
/// \return the path, precision and GEMM of each product
template <class ExecSpace, class XView, class WView, class DYView, class SavedView, class DXView,
          class DWView, class DBView>
GradientInfo linear_leaky_relu_backward(const ExecSpace& exec, const XView& X, const WView& W,
                                        const DYView& dY, const SavedView& saved, const DXView& dX,
                                        const DWView& dW, const DBView& db,
                                        typename DYView::non_const_value_type multiplier,
                                        typename DYView::non_const_value_type negative_slope,
                                        GradientOptions options = {}) {
  static_assert(Impl::check_gradient_types<ExecSpace, XView, WView, DYView, SavedView, DXView,
                                           DWView, DBView>(),
                "");
  using Impl_ =
      Impl::GradientImplOf<ExecSpace, XView, WView, DYView, SavedView, DXView, DWView, DBView>;
  constexpr const char* function = "FusedLinear::linear_leaky_relu_backward";
  return Impl::run_cached<Impl_>(
      exec, function,
      [&](std::uint64_t scope) {
        return Impl::gradient_key<Impl_>(scope, X, W, dY, saved, dX, dW, db, multiplier,
                                         negative_slope, options);
      },
      [&] {
        return std::make_unique<Impl::CachedPlan<Impl_, ExecSpace>>(
            exec, X, W, dY, saved, dX, dW, db, multiplier, negative_slope, options, function);
      },
      [&](const Impl_& plan) { plan.execute(exec, X, W, dY, saved, dX, dW, db, function); });
}

/// Same as above on the default instance of dY's execution space.
template <class XView, class WView, class DYView, class SavedView, class DXView, class DWView,
          class DBView>
GradientInfo linear_leaky_relu_backward(const XView& X, const WView& W, const DYView& dY,
                                        const SavedView& saved, const DXView& dX, const DWView& dW,
                                        const DBView& db,
                                        typename DYView::non_const_value_type multiplier,
                                        typename DYView::non_const_value_type negative_slope,
                                        GradientOptions options = {}) {
  return linear_leaky_relu_backward(typename DYView::execution_space(), X, W, dY, saved, dX, dW, db,
                                    multiplier, negative_slope, options);
}

}  // namespace FusedLinear

#endif
