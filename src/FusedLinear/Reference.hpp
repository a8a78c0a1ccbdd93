// SPDX-License-Identifier: Apache-2.0
/// \file Reference.hpp
/// The float64 host references of the layer and of its gradient.
#ifndef FUSED_LINEAR_REFERENCE_HPP
#define FUSED_LINEAR_REFERENCE_HPP

#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>

#include <Kokkos_Core.hpp>

#include "FusedLinear/Epilogue.hpp"

namespace FusedLinear {

/// Host reference of the layer, accumulating in double: what the tests and the perf program
/// measure every path against. X, W and b must be host-accessible (e.g. create_mirror_view_and_copy
/// of device Views); any layout. Runs on the default host execution space.
template <class XView, class WView, class BView>
Kokkos::View<double**, Kokkos::LayoutRight, Kokkos::HostSpace> reference_linear_leaky_relu(
    const XView& X, const WView& W, const BView& b, double multiplier, double negative_slope) {
  const std::int64_t M = X.extent(0), K = X.extent(1), N = W.extent(0);
  Kokkos::View<double**, Kokkos::LayoutRight, Kokkos::HostSpace> ref;
  if (N > 0 && static_cast<std::uint64_t>(M) > UINT64_MAX / sizeof(double) / N)
    throw std::runtime_error("FusedLinear::reference_linear_leaky_relu: cannot allocate the " +
                             std::to_string(M) + " x " + std::to_string(N) +
                             " float64 result: its size overflows 64 bits");
  try {
    ref = decltype(ref)(Kokkos::view_alloc(Kokkos::WithoutInitializing, "FusedLinear::reference"),
                        M, N);
  } catch (const std::exception& e) {
    throw std::runtime_error("FusedLinear::reference_linear_leaky_relu: cannot allocate the " +
                             std::to_string(M) + " x " + std::to_string(N) +
                             " float64 result: " + e.what());
  }
  const LeakyReLUEpilogue<double> ep{multiplier, negative_slope};
  using Policy = Kokkos::MDRangePolicy<Kokkos::DefaultHostExecutionSpace, Kokkos::Rank<2>,
                                       Kokkos::IndexType<std::int64_t>>;
  Kokkos::parallel_for("FusedLinear::reference", Policy({0, 0}, {M, N}),
                       [=](std::int64_t i, std::int64_t j) {
                         // Four partial sums: independent chains the host can overlap (double needs
                         // no care).
                         double s[4] = {0, 0, 0, 0};
                         std::int64_t k = 0;
                         for (; k + 4 <= K; k += 4)
                           for (int q = 0; q < 4; ++q)
                             s[q] += double(X(i, k + q)) * double(W(j, k + q));
                         for (; k < K; ++k) s[0] += double(X(i, k)) * double(W(j, k));
                         ref(i, j) = ep((s[0] + s[1]) + (s[2] + s[3]), double(b(j)));
                       });
  Kokkos::fence();
  return ref;
}

namespace Impl {
/// A float64 host matrix for a reference, WithoutInitializing; std::runtime_error naming
/// `function` where its size overflows 64 bits or the memory cannot be had.
inline Kokkos::View<double**, Kokkos::LayoutRight, Kokkos::HostSpace> reference_matrix(
    const char* function, const char* what, std::int64_t rows, std::int64_t cols) {
  const std::string size = std::to_string(rows) + " x " + std::to_string(cols);
  if (cols > 0 && static_cast<std::uint64_t>(rows) > UINT64_MAX / sizeof(double) / cols)
    throw std::runtime_error(std::string(function) + ": cannot allocate the " + size + " float64 " +
                             what + ": its size overflows 64 bits");
  try {
    return Kokkos::View<double**, Kokkos::LayoutRight, Kokkos::HostSpace>(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, "FusedLinear::reference"), rows, cols);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string(function) + ": cannot allocate the " + size + " float64 " +
                             what + ": " + e.what());
  }
}
}  // namespace Impl

/// The gradient's float64 host reference (reference_linear_leaky_relu_backward): dX [M,K],
/// dW [N,K] and db [N], without accumulation (a caller accumulating adds its prior values).
struct ReferenceGradient {
  Kokkos::View<double**, Kokkos::LayoutRight, Kokkos::HostSpace> dX, dW;
  Kokkos::View<double*, Kokkos::LayoutRight, Kokkos::HostSpace> db;
};

/// Host reference of the gradient (Gradient.hpp's maths, PyTorch's autograd), accumulating in
/// double: G = multiplier * (saved > 0 ? dY : dY * negative_slope), dX = G . W, dW = G^T . X,
/// db = the column sums of G. `saved` is the forward's Y (for negative_slope >= 0) or its
/// pre-activation z: y > 0 exactly where z > 0 then, so one comparison serves both (a negative
/// slope needs z). X [M,K], W [N,K], dY and saved [M,N] must be host-accessible; any layout.
/// Runs on the default host execution space.
template <class XView, class WView, class DYView, class SavedView>
ReferenceGradient reference_linear_leaky_relu_backward(const XView& X, const WView& W,
                                                       const DYView& dY, const SavedView& saved,
                                                       double multiplier, double negative_slope) {
  constexpr const char* function = "FusedLinear::reference_linear_leaky_relu_backward";
  const std::int64_t M = X.extent(0), K = X.extent(1), N = W.extent(0);
  // G in double, leaky_relu's backward before the multiply's (PyTorch's order): NaN in saved
  // compares false and takes the slope, as z == 0 does.
  const auto G = Impl::reference_matrix(function, "G", M, N);
  ReferenceGradient out;
  out.dX = Impl::reference_matrix(function, "dX", M, K);
  out.dW = Impl::reference_matrix(function, "dW", N, K);
  try {
    out.db = decltype(out.db)(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, "FusedLinear::reference"), N);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string(function) + ": cannot allocate the " + std::to_string(N) +
                             " float64 db: " + e.what());
  }
  using Policy = Kokkos::MDRangePolicy<Kokkos::DefaultHostExecutionSpace, Kokkos::Rank<2>,
                                       Kokkos::IndexType<std::int64_t>>;
  using Range =
      Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace, Kokkos::IndexType<std::int64_t>>;
  Kokkos::parallel_for("FusedLinear::reference_backward_g", Policy({0, 0}, {M, N}),
                       [=](std::int64_t i, std::int64_t j) {
                         const double dy = double(dY(i, j));
                         G(i, j) =
                             multiplier * (double(saved(i, j)) > 0 ? dy : dy * negative_slope);
                       });
  Kokkos::fence();
  // Four partial sums, as the forward's reference: independent chains the host can overlap.
  const auto dx = out.dX, dw = out.dW;
  const auto db = out.db;
  Kokkos::parallel_for("FusedLinear::reference_backward_dx", Policy({0, 0}, {M, K}),
                       [=](std::int64_t i, std::int64_t k) {
                         double s[4] = {0, 0, 0, 0};
                         std::int64_t j = 0;
                         for (; j + 4 <= N; j += 4)
                           for (int q = 0; q < 4; ++q) s[q] += G(i, j + q) * double(W(j + q, k));
                         for (; j < N; ++j) s[0] += G(i, j) * double(W(j, k));
                         dx(i, k) = (s[0] + s[1]) + (s[2] + s[3]);
                       });
  Kokkos::parallel_for("FusedLinear::reference_backward_dw", Policy({0, 0}, {N, K}),
                       [=](std::int64_t j, std::int64_t k) {
                         double s[4] = {0, 0, 0, 0};
                         std::int64_t i = 0;
                         for (; i + 4 <= M; i += 4)
                           for (int q = 0; q < 4; ++q) s[q] += G(i + q, j) * double(X(i + q, k));
                         for (; i < M; ++i) s[0] += G(i, j) * double(X(i, k));
                         dw(j, k) = (s[0] + s[1]) + (s[2] + s[3]);
                       });
  Kokkos::parallel_for("FusedLinear::reference_backward_db", Range(0, N), [=](std::int64_t j) {
    double s = 0;
    for (std::int64_t i = 0; i < M; ++i) s += G(i, j);
    db(j) = s;
  });
  Kokkos::fence();
  return out;
}

}  // namespace FusedLinear

#endif
