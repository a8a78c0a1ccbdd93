// SPDX-License-Identifier: Apache-2.0
/// \file Reference.hpp
/// The float64 host reference of the layer.
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

}  // namespace FusedLinear

#endif
