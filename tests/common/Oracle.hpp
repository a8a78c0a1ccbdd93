// SPDX-License-Identifier: Apache-2.0
// The test's OWN float64 reference of the layer (not the library's: an epilogue bug in the
// library — scale and bias swapped, >= for > — must not pass because both sides share it), and
// the per-element tolerance derived from K and the value type (Bounds.hpp adds the precisions').
#ifndef FUSED_LINEAR_TEST_COMMON_ORACLE_HPP
#define FUSED_LINEAR_TEST_COMMON_ORACLE_HPP

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>

#include "HostCopies.hpp"

namespace FusedLinearTest {

/// PyTorch's LeakyReLU, written out: v > 0 ? v : v * slope (NaN compares false and stays NaN;
/// -0.0 maps to -0.0 * slope).
inline double leaky_relu(double v, double slope) { return v > 0 ? v : v * slope; }

/// gamma_n = n u / (1 - n u): the classical bound on the relative error of an n-term floating
/// point dot product accumulated in any order (Higham, Accuracy and Stability, 3.1).
template <class Scalar>
double gamma(std::int64_t n) {
  const double u = std::numeric_limits<Scalar>::epsilon() / 2;
  return n * u / (1 - n * u);
}

/// The layer in float64, from the definition: y = LeakyReLU(multiplier * (x . w + b)), computed
/// here with a plain sequential sum and the comparison above (no library code), together with
/// sum_k |x_k w_k| + |b| per element, which the tolerance scales with.
class Reference {
 public:
  Reference(const HostInputs& in, double multiplier, double slope)
      : m_M(in.M),
        m_N(in.N),
        m_K(in.K),
        m_multiplier(multiplier),
        m_slope(slope),
        m_y(std::size_t(in.M * in.N)),
        m_magnitude(std::size_t(in.M * in.N)) {
    for (std::int64_t i = 0; i < in.M; ++i)
      for (std::int64_t j = 0; j < in.N; ++j) {
        double acc = 0, magnitude = std::abs(in.b[std::size_t(j)]);
        for (std::int64_t k = 0; k < in.K; ++k) {
          const double p = in.x(i, k) * in.w(j, k);
          acc += p;
          magnitude += std::abs(p);
        }
        m_y[std::size_t(i * in.N + j)] =
            leaky_relu(multiplier * (acc + in.b[std::size_t(j)]), slope);
        m_magnitude[std::size_t(i * in.N + j)] = magnitude;
      }
  }

  double operator()(std::int64_t i, std::int64_t j) const { return m_y[std::size_t(i * m_N + j)]; }
  const std::vector<double>& values() const { return m_y; }
  std::int64_t M() const { return m_M; }
  std::int64_t N() const { return m_N; }

  /// Checks y (row-major, any path's output) element by element.
  ///
  /// Tolerance per element, derived rather than tuned: the product is a K-term dot product plus
  /// the bias, so in Scalar arithmetic |acc + b - exact| <= gamma_{K+1} (sum_k |x_k w_k| + |b|);
  /// scaling by the multiplier and by the slope adds a rounding each (gamma_{K+3} covers them),
  /// and both scale the error by |multiplier| * max(1, |slope|). A correct kernel cannot exceed
  /// this in any summation order (FMA only tightens it); a wrong tile, row or column does, since
  /// the test shapes keep K small enough that one missing product is far above the bound.
  /// NaN and +-Inf in the reference must be reproduced exactly (PyTorch's semantics).
  /// `product_rounding` adds the relative error of each product's inputs when a precision mode
  /// rounds them (Bounds.hpp).
  template <class Scalar>
  ::testing::AssertionResult check(const std::vector<double>& y,
                                   double product_rounding = 0) const {
    if (y.size() != m_y.size())
      return ::testing::AssertionFailure()
             << "Y has " << y.size() << " elements, expected " << m_y.size();
    const double scale = std::abs(m_multiplier) * std::max(1.0, std::abs(m_slope));
    const double g = gamma<Scalar>(m_K + 3) + product_rounding;
    std::int64_t bad = 0;
    std::ostringstream first;
    for (std::int64_t i = 0; i < m_M; ++i) {
      for (std::int64_t j = 0; j < m_N; ++j) {
        const std::size_t e = std::size_t(i * m_N + j);
        const double r = m_y[e], v = y[e];
        bool ok;
        double tol = 0;
        if (std::isnan(r)) {
          ok = std::isnan(v);
        } else if (std::isinf(r)) {
          ok = v == r;
        } else {
          tol = scale * g * m_magnitude[e] + double(std::numeric_limits<Scalar>::denorm_min());
          ok = std::abs(v - r) <= tol;
        }
        if (!ok && bad++ == 0)
          first << "Y(" << i << "," << j << ") = " << v << ", reference " << r << " (tolerance "
                << tol << ")";
      }
    }
    if (bad == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << bad << " of " << m_M * m_N
           << " elements differ from the float64 reference; first: " << first.str() << " [M=" << m_M
           << " K=" << m_K << " N=" << m_N << " multiplier=" << m_multiplier << " slope=" << m_slope
           << " product_rounding=" << product_rounding << "]";
  }

  /// Norm-wise relative error ||y - ref|| / ||ref|| over the finite elements.
  double relative_error(const std::vector<double>& y) const {
    double err = 0, norm = 0;
    for (std::size_t e = 0; e < m_y.size(); ++e) {
      if (!std::isfinite(m_y[e])) continue;
      err += (y[e] - m_y[e]) * (y[e] - m_y[e]);
      norm += m_y[e] * m_y[e];
    }
    return std::sqrt(err / norm);
  }

 private:
  std::int64_t m_M, m_N, m_K;
  double m_multiplier, m_slope;
  std::vector<double> m_y, m_magnitude;
};

}  // namespace FusedLinearTest

#endif
