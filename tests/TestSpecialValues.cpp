// SPDX-License-Identifier: Apache-2.0
// Special values, element by element, with PyTorch's fp32 semantics: signed zeros keep the sign
// the reference gives them, and values past float's range overflow to +-Inf (then the slope
// applies: -Inf * slope = -Inf), as eager PyTorch in fp32 does.
#include <cmath>
#include <limits>

#include "TestHelpers.hpp"

namespace {

using namespace FusedLinearTest;
using FusedLinear::Algorithm;
using P = Problem<float, Kokkos::LayoutRight>;

TEST(SpecialValues, SignedZerosFollowTheReference) {
  for (Algorithm a : all_algorithms) {
    for (float multiplier : {2.f, -2.f}) {
      P p(3, 9, 4, 21);
      auto X = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.X);
      auto b = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.b);
      for (int k = 0; k < 9; ++k) X(0, k) = (k % 2) ? 0.f : -0.f;  // a row of signed zeros
      b(0) = -0.f;
      b(1) = 0.f;
      Kokkos::deep_copy(p.X, X);
      Kokkos::deep_copy(p.b, b);
      FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, multiplier, 0.1f, a);
      auto y = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.Y);
      auto ref = FusedLinear::reference_linear_leaky_relu(
          X, Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.W), b, multiplier, 0.1);
      for (int j = 0; j < 2; ++j) {
        EXPECT_EQ(y(0, j), 0.f) << FusedLinear::to_string(a);
        // vendor_prefill computes multiplier * acc + multiplier * b (the bias is prefilled
        // scaled, beta = 1): the distributed form can turn -0 into +0 (README); others match.
        if (a == Algorithm::VendorPrefill) continue;
        EXPECT_EQ(std::signbit(y(0, j)), std::signbit(ref(0, j)))
            << FusedLinear::to_string(a) << " multiplier " << multiplier << " column " << j;
      }
    }
  }
}

TEST(SpecialValues, OverflowToInfinityAsInFloat) {
  const float big = 3.0e38f;  // close to FLT_MAX = 3.4e38
  const float inf = std::numeric_limits<float>::infinity();
  for (Algorithm a : all_algorithms) {
    P p(4, 16, 3, 5);
    auto X = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.X);
    auto W = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.W);
    auto b = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.b);
    for (int k = 0; k < 16; ++k) {
      X(0, k) = big;        // row 0: every product is +3e38, the sum overflows
      X(1, k) = k == 0 ? big : 0.f;  // row 1: one product of 3e38, finite sum
      W(0, k) = 1.f;
      W(1, k) = -1.f;
      W(2, k) = 1.f;
    }
    b(0) = b(1) = b(2) = 0.f;
    Kokkos::deep_copy(p.X, X);
    Kokkos::deep_copy(p.W, W);
    Kokkos::deep_copy(p.b, b);
    FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f, a);
    auto y = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.Y);
    const char* name = FusedLinear::to_string(a);
    EXPECT_EQ(y(0, 0), inf) << name;   // sum overflows to +Inf
    EXPECT_EQ(y(0, 1), -inf) << name;  // -Inf, times the slope, stays -Inf
    // Finite sum 3e38, times multiplier 2 overflows: +Inf; the negative column: -Inf * 0.1.
    EXPECT_EQ(y(1, 0), inf) << name;
    EXPECT_EQ(y(1, 1), -inf) << name;
    // And the remaining rows are ordinary numbers.
    EXPECT_TRUE(std::isfinite(y(2, 2)) && std::isfinite(y(3, 0))) << name;
  }
}

}  // namespace
