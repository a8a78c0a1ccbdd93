// SPDX-License-Identifier: Apache-2.0
// Shared by the test files: random problems on the default execution space and the checks of a
// result against the float64 host reference.
#ifndef FUSED_LINEAR_TEST_HELPERS_HPP
#define FUSED_LINEAR_TEST_HELPERS_HPP

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <Kokkos_Random.hpp>

#include <FusedLinear.hpp>

namespace FusedLinearTest {

using ExecSpace = Kokkos::DefaultExecutionSpace;
using MemorySpace = ExecSpace::memory_space;

using FusedLinear::all_algorithms;

template <class Scalar, class Layout>
struct Problem {
  using Matrix = Kokkos::View<Scalar**, Layout, MemorySpace>;
  using Vector = Kokkos::View<Scalar*, MemorySpace>;
  Matrix X, W, Y;
  Vector b;
  std::int64_t M, K, N;

  /// X uniform in [-1, 1); W and b uniform in +-1/sqrt(K) as nn.Linear initialises them; Y
  /// poisoned with NaN so an element the kernel never writes cannot pass.
  Problem(std::int64_t m, std::int64_t k, std::int64_t n, std::uint64_t seed)
      : X("X", m, k), W("W", n, k), Y("Y", m, n), b("b", n), M(m), K(k), N(n) {
    Kokkos::Random_XorShift64_Pool<ExecSpace> pool(seed);
    const Scalar bound = Scalar(1) / std::sqrt(Scalar(k > 0 ? k : 1));
    Kokkos::fill_random(X, pool, Scalar(-1), Scalar(1));
    Kokkos::fill_random(W, pool, -bound, bound);
    Kokkos::fill_random(b, pool, -bound, bound);
    poison();
  }

  void poison() { Kokkos::deep_copy(Y, std::numeric_limits<Scalar>::quiet_NaN()); }
};

/// gamma_n = n u / (1 - n u): the classical bound on the relative error of an n-term floating
/// point dot product accumulated in any order (Higham, Accuracy and Stability, 3.1).
template <class Scalar>
double gamma(std::int64_t n) {
  const double u = std::numeric_limits<Scalar>::epsilon() / 2;
  return n * u / (1 - n * u);
}

/// Checks Y (any path's output) element by element against the float64 reference.
///
/// Tolerance per element, derived rather than tuned: the product is a K-term dot product plus
/// the bias, so in Scalar arithmetic |acc + b - exact| <= gamma_{K+1} (sum_k |x_k w_k| + |b|);
/// scaling by the multiplier and by the slope adds a rounding each (gamma_{K+3} covers them),
/// and both scale the error by |multiplier| * max(1, |slope|). A correct kernel cannot exceed
/// this in any summation order (FMA only tightens it); a wrong tile, row or column does, since
/// the test shapes keep K small enough that one missing product is far above the bound.
/// NaN and +-Inf in the reference must be reproduced exactly (PyTorch's semantics).
/// `product_rounding` adds the relative error of each product's inputs when a precision mode
/// rounds them (TF32: each operand within 2^-10, so a product within 2^-9 + 2^-20).
template <class P>
::testing::AssertionResult matches_reference(const P& p, double multiplier, double slope,
                                             const typename P::Matrix& Y,
                                             double product_rounding = 0) {
  using Scalar = typename P::Matrix::non_const_value_type;
  auto X = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.X);
  auto W = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.W);
  auto b = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.b);
  auto y = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), Y);
  auto ref = FusedLinear::reference_linear_leaky_relu(X, W, b, multiplier, slope);
  const double scale = std::abs(multiplier) * std::max(1.0, std::abs(slope));
  const double g = gamma<Scalar>(p.K + 3) + product_rounding;
  std::int64_t bad = 0;
  std::ostringstream first;
  for (std::int64_t i = 0; i < p.M; ++i) {
    for (std::int64_t j = 0; j < p.N; ++j) {
      const double r = ref(i, j), v = y(i, j);
      bool ok;
      if (std::isnan(r)) {
        ok = std::isnan(v);
      } else if (std::isinf(r)) {
        ok = v == r;
      } else {
        double magnitude = std::abs(double(b(j)));
        for (std::int64_t k = 0; k < p.K; ++k) magnitude += std::abs(double(X(i, k)) * W(j, k));
        const double tol = scale * g * magnitude + std::numeric_limits<Scalar>::denorm_min();
        ok = std::abs(v - r) <= tol;
        if (!ok && bad == 0) first << " (tolerance " << tol << ")";
      }
      if (!ok && bad++ == 0) {
        std::ostringstream head;
        head << "Y(" << i << "," << j << ") = " << v << ", reference " << r;
        first.str(head.str() + first.str());
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << p.M * p.N
                                       << " elements differ from the float64 reference; first: "
                                       << first.str() << " [M=" << p.M << " K=" << p.K
                                       << " N=" << p.N << " multiplier=" << multiplier
                                       << " slope=" << slope << "]";
}

inline std::string describe(FusedLinear::Algorithm a, const FusedLinear::RunInfo& info) {
  return std::string("requested ") + FusedLinear::to_string(a) + ", ran " +
         FusedLinear::to_string(info.algorithm) + " (" + info.gemm + ") " + info.note;
}

}  // namespace FusedLinearTest

#endif
