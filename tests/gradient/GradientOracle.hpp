// SPDX-License-Identifier: Apache-2.0
// The gradient suite's OWN float64 reference of the backward (not the library's: a mask bug
// shared by both, >= for >, must not pass), written from PyTorch's autograd, and the
// per-element tolerance of each output derived from the length of its sums.
#ifndef FUSED_LINEAR_TEST_GRADIENT_GRADIENT_ORACLE_HPP
#define FUSED_LINEAR_TEST_GRADIENT_GRADIENT_ORACLE_HPP

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "../common/Oracle.hpp"

namespace FusedLinearTest {
namespace Gradient {

/// The backward's inputs on the host, row-major doubles: X [M,K], W [N,K], dY and saved [M,N].
struct Inputs {
  std::int64_t M = 0, K = 0, N = 0;
  std::vector<double> X, W, dY, saved;
};

/// Which elements of an output the reference expects, how large, and from how many terms.
struct Expected {
  std::int64_t rows = 0, cols = 0;
  std::int64_t terms = 0;                // the length of each element's sum
  std::vector<double> value, magnitude;  // sum_t g_t v_t and sum_t |g_t v_t|
};

/// The backward from the definition, in double: G = multiplier * (s > 0 ? dy : dy * slope) with
/// s the saved value (NaN and zero take the slope: PyTorch's leaky_relu_backward compares
/// self > 0), then dX = G W, dW = G^T X, db = column sums of G, each a plain sequential sum.
class Oracle {
 public:
  Oracle(const Inputs& in, double multiplier, double slope) : m_in(in) {
    const std::int64_t M = in.M, K = in.K, N = in.N;
    std::vector<double> G(std::size_t(M * N));
    for (std::size_t e = 0; e < G.size(); ++e) {
      const double dy = in.dY[e];
      G[e] = multiplier * (in.saved[e] > 0 ? dy : dy * slope);
    }
    m_dx = {M, K, N, std::vector<double>(std::size_t(M * K)),
            std::vector<double>(std::size_t(M * K))};
    m_dw = {N, K, M, std::vector<double>(std::size_t(N * K)),
            std::vector<double>(std::size_t(N * K))};
    m_db = {N, 1, M, std::vector<double>(std::size_t(N)), std::vector<double>(std::size_t(N))};
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t k = 0; k < K; ++k) {
        double s = 0, a = 0;
        for (std::int64_t j = 0; j < N; ++j) {
          const double p = G[std::size_t(i * N + j)] * in.W[std::size_t(j * K + k)];
          s += p, a += std::abs(p);
        }
        m_dx.value[std::size_t(i * K + k)] = s, m_dx.magnitude[std::size_t(i * K + k)] = a;
      }
    for (std::int64_t j = 0; j < N; ++j)
      for (std::int64_t k = 0; k < K; ++k) {
        double s = 0, a = 0;
        for (std::int64_t i = 0; i < M; ++i) {
          const double p = G[std::size_t(i * N + j)] * in.X[std::size_t(i * K + k)];
          s += p, a += std::abs(p);
        }
        m_dw.value[std::size_t(j * K + k)] = s, m_dw.magnitude[std::size_t(j * K + k)] = a;
      }
    for (std::int64_t j = 0; j < N; ++j) {
      double s = 0, a = 0;
      for (std::int64_t i = 0; i < M; ++i)
        s += G[std::size_t(i * N + j)], a += std::abs(G[std::size_t(i * N + j)]);
      m_db.value[std::size_t(j)] = s, m_db.magnitude[std::size_t(j)] = a;
    }
  }

  /// Each output, optionally added to its prior values (accumulation: one more rounding).
  const Expected& dx() const { return m_dx; }
  Expected dw(const std::vector<double>& prior = {}) const { return added(m_dw, prior); }
  Expected db(const std::vector<double>& prior = {}) const { return added(m_db, prior); }
  const Inputs& inputs() const { return m_in; }

 private:
  static Expected added(Expected e, const std::vector<double>& prior) {
    if (prior.empty()) return e;
    for (std::size_t i = 0; i < e.value.size(); ++i) {
      e.value[i] += prior[i];
      e.magnitude[i] += std::abs(prior[i]);
    }
    return e;
  }
  Inputs m_in;
  Expected m_dx, m_dw, m_db;
};

/// How an output was summed, for its tolerance.
enum class Sum {
  /// A product in the value type (dX, dW): G rounded to it (two roundings: the slope, the
  /// multiplier), then `terms` products and sums in any order: gamma_{terms + 3} of the
  /// magnitude (the accumulation's addition included), plus what a precision mode adds.
  Product,
  /// db: accumulated in double, as documented, from G in the value type: G's two roundings, the
  /// prior value's addition and the final rounding (gamma_4 of the value type) plus double's own
  /// gamma_{terms + 1}. A float accumulator exceeds it over many rows (about sqrt(M / 3) u of
  /// the magnitude for a sequential sum of random signs).
  WideColumnSum,
};

template <class Scalar>
double tolerance_factor(Sum sum, std::int64_t terms, double product_rounding) {
  if (sum == Sum::WideColumnSum)
    return std::is_same<Scalar, float>::value ? gamma<float>(4) + gamma<double>(terms + 1)
                                              : gamma<double>(terms + 3);
  return gamma<Scalar>(terms + 3) + product_rounding;
}

/// An output (row-major values) element by element against the reference: NaN where it is NaN,
/// the same infinity where it is infinite, within the derived tolerance elsewhere.
template <class Scalar>
::testing::AssertionResult check(const char* name, const Expected& e,
                                 const std::vector<double>& got, Sum sum = Sum::Product,
                                 double product_rounding = 0) {
  if (got.size() != e.value.size())
    return ::testing::AssertionFailure()
           << name << " has " << got.size() << " elements, expected " << e.value.size();
  const double f = tolerance_factor<Scalar>(sum, e.terms, product_rounding);
  std::int64_t bad = 0;
  std::ostringstream first;
  for (std::size_t n = 0; n < got.size(); ++n) {
    const double r = e.value[n], v = got[n];
    double tol = 0;
    bool ok;
    if (std::isnan(r)) {
      ok = std::isnan(v);
    } else if (std::isinf(r)) {
      ok = v == r;
    } else {
      tol = f * e.magnitude[n] + double(std::numeric_limits<Scalar>::denorm_min());
      ok = std::abs(v - r) <= tol;
    }
    if (!ok && bad++ == 0)
      first << name << "(" << std::int64_t(n) / e.cols << "," << std::int64_t(n) % e.cols
            << ") = " << v << ", reference " << r << " (tolerance " << tol << ")";
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " elements of " << name
         << " differ from the float64 reference; first: " << first.str() << " [" << e.terms
         << " terms]";
}

/// Bit for bit, element by element (NaN payloads aside: any NaN matches a NaN).
inline ::testing::AssertionResult same_bits(const char* name, const std::vector<double>& a,
                                            const std::vector<double>& b) {
  if (a.size() != b.size())
    return ::testing::AssertionFailure() << name << ": " << a.size() << " vs " << b.size();
  for (std::size_t n = 0; n < a.size(); ++n) {
    if (std::isnan(a[n]) && std::isnan(b[n])) continue;
    if (std::memcmp(&a[n], &b[n], sizeof(double)) != 0)
      return ::testing::AssertionFailure()
             << name << " element " << n << ": " << a[n] << " vs " << b[n] << " (bits differ)";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace Gradient
}  // namespace FusedLinearTest

#endif
