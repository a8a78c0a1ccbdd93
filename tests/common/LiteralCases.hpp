// SPDX-License-Identifier: Apache-2.0
// Hand-computed values: a layer small enough to compute by hand, its literal expectations for
// several multipliers and slopes, and the exact comparison (NaN, +-Inf, the sign of every zero).
#ifndef FUSED_LINEAR_TEST_COMMON_LITERAL_CASES_HPP
#define FUSED_LINEAR_TEST_COMMON_LITERAL_CASES_HPP

#include <cmath>
#include <cstddef>
#include <limits>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

namespace FusedLinearTest {

/// A layer small enough to compute by hand, with PyTorch's semantics spelled out:
///   X = [[1, 2], [NaN, 1], [3, 3], [0, 1], [-1, 0.25]]
///   W = [[1, 1], [-1, 0.5], [1, -1], [+Inf, 1]],  b = [0.5, -3, 0, 0]
/// x . w: row 0: 3, 0, -1, Inf;  row 1: NaN (everywhere: NaN * w, NaN * Inf);
///        row 2: 6, -1.5, +0 (3 - 3: exact cancellation gives +0 in any order), Inf;
///        row 3: 1, 0.5, -1, NaN (0 * Inf);  row 4: -0.75, 1.125, -1.25, -Inf.
/// Each case: y = LeakyReLU(multiplier * (x . w + b)), v > 0 ? v : v * slope.
struct LiteralCase {
  double multiplier, slope;
  double y[5][4];
};
constexpr double literal_x[5][2] = {{1, 2}, {0, 1} /* X(1,0) is NaN */, {3, 3}, {0, 1}, {-1, 0.25}};
constexpr double literal_w[4][2] = {{1, 1}, {-1, 0.5}, {1, -1}, {0 /* +Inf */, 1}};
constexpr double literal_b[4] = {0.5, -3, 0, 0};
constexpr double inf_ = std::numeric_limits<double>::infinity();
constexpr double nan_ = std::numeric_limits<double>::quiet_NaN();
inline const std::vector<LiteralCase>& literal_cases() {
  static const std::vector<LiteralCase> cases = {
      // multiplier 2, slope 0.1: 2 * (3 + 0.5) = 7; 2 * (0 - 3) = -6 -> -0.6; 2 * -1 -> -0.2;
      // row 2, column 2: 2 * (+0 + 0) = +0, not > 0, so +0 * 0.1 = +0.
      {2,
       0.1,
       {{7, -0.6, -0.2, inf_},
        {nan_, nan_, nan_, nan_},
        {13, -0.9, 0.0, inf_},
        {3, -0.5, -0.2, nan_},
        {-0.05, -0.375, -0.25, -inf_}}},
      // multiplier -2: the scale comes after the bias (-2 * 3.5 = -7 -> -0.7, not -2*3 + 0.5);
      // row 2, column 2: -2 * +0 = -0, not > 0, so -0 * 0.1 = -0.0; -Inf stays -Inf after the
      // slope; row 4, column 3: -2 * -Inf = +Inf.
      {-2,
       0.1,
       {{-0.7, 6, 2, -inf_},
        {nan_, nan_, nan_, nan_},
        {-1.3, 9, -0.0, -inf_},
        {-0.3, 5, 2, nan_},
        {0.5, 3.75, 2.5, inf_}}},
      // multiplier 0: the sign of each zero is the sign of x . w + b (0 * -3 = -0, then
      // -0 * 0.1 = -0.0); 0 * Inf is NaN.
      {0,
       0.1,
       {{0.0, -0.0, -0.0, nan_},
        {nan_, nan_, nan_, nan_},
        {0.0, -0.0, 0.0, nan_},
        {0.0, -0.0, -0.0, nan_},
        {-0.0, -0.0, -0.0, nan_}}},
      // A negative slope tells v > 0 from v >= 0: +0 is not > 0, so +0 * -0.5 = -0.0 (row 2,
      // column 2); a ">=" would keep +0. -Inf * -0.5 = +Inf.
      {2,
       -0.5,
       {{7, 3, 1, inf_},
        {nan_, nan_, nan_, nan_},
        {13, 4.5, -0.0, inf_},
        {3, 2.5, 1, nan_},
        {0.25, 1.875, 1.25, inf_}}},
      // A slope above 1: v * slope is below v for negative v (a max(v, v * slope) form would keep
      // v); +0 * 1.5 = +0.
      {2,
       1.5,
       {{7, -9, -3, inf_},
        {nan_, nan_, nan_, nan_},
        {13, -13.5, 0.0, inf_},
        {3, -7.5, -3, nan_},
        {-0.75, -5.625, -3.75, -inf_}}},
  };
  return cases;
}

/// Writes the literal inputs into X [5,2], W [4,2], b [4] (any space, layout or value type).
template <class XView, class WView, class BView>
void write_literal_inputs(const XView& X, const WView& W, const BView& b) {
  using Scalar = typename XView::non_const_value_type;
  auto hX = Kokkos::create_mirror_view(X);
  auto hW = Kokkos::create_mirror_view(W);
  auto hb = Kokkos::create_mirror_view(b);
  for (int i = 0; i < 5; ++i)
    for (int k = 0; k < 2; ++k) hX(i, k) = Scalar(literal_x[i][k]);
  hX(1, 0) = std::numeric_limits<Scalar>::quiet_NaN();
  for (int j = 0; j < 4; ++j)
    for (int k = 0; k < 2; ++k) hW(j, k) = Scalar(literal_w[j][k]);
  hW(3, 0) = std::numeric_limits<Scalar>::infinity();
  for (int j = 0; j < 4; ++j) hb(j) = Scalar(literal_b[j]);
  Kokkos::deep_copy(X, hX);
  Kokkos::deep_copy(W, hW);
  Kokkos::deep_copy(b, hb);
}

/// y (row-major 5 x 4) against a literal case: NaN, +-Inf and the sign of every zero exactly
/// (unless `zero_signs` is false), other values within `ulps` units of Scalar's epsilon.
template <class Scalar>
::testing::AssertionResult matches_literal(const LiteralCase& c, const std::vector<double>& y,
                                           bool zero_signs = true, double ulps = 4) {
  std::ostringstream bad;
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 4; ++j) {
      const double e = c.y[i][j], v = y[std::size_t(i * 4 + j)];
      bool ok;
      if (std::isnan(e))
        ok = std::isnan(v);
      else if (std::isinf(e) || e == 0)
        ok = v == e && (!zero_signs || e != 0 || std::signbit(v) == std::signbit(e));
      else
        ok = std::abs(v - e) <= ulps * std::numeric_limits<Scalar>::epsilon() * std::abs(e);
      if (!ok) bad << " Y(" << i << "," << j << ") = " << v << " expected " << e << ";";
    }
  if (bad.str().empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "multiplier " << c.multiplier << ", slope " << c.slope << ":" << bad.str();
}

}  // namespace FusedLinearTest

#endif
