// SPDX-License-Identifier: Apache-2.0
// The gradient suite's problems: the forward's inputs and an upstream gradient on any
// execution space, what the forward saves for the backward (Y, and z: the forward with slope 1)
// computed by the library's forward, the outputs poisoned, and the one-shot backward called on
// them; the host images the oracle reads.
#ifndef FUSED_LINEAR_TEST_GRADIENT_GRADIENT_PROBLEMS_HPP
#define FUSED_LINEAR_TEST_GRADIENT_GRADIENT_PROBLEMS_HPP

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <FusedLinear/Gradient.hpp>
#include <FusedLinear/Reference.hpp>

#include "../common/TestHelpers.hpp"
#include "GradientOracle.hpp"

namespace FusedLinearTest {
namespace Gradient {

using FusedLinear::GradientInfo;
using FusedLinear::GradientOptions;
using FusedLinear::Saved;

inline GradientOptions gradient_options(Saved saved, bool accumulate = false,
                                        Precision precision = Precision::Strict,
                                        Algorithm algorithm = Algorithm::Auto) {
  GradientOptions o;
  o.saved = saved;
  o.accumulate = accumulate;
  o.precision = precision;
  o.algorithm = algorithm;
  return o;
}

inline const char* saved_name(Saved s) {
  switch (s) {
    case Saved::Output: return "Saved::Output";
    case Saved::PreActivation: return "Saved::PreActivation";
    case Saved::Sign: return "Saved::Sign";
  }
  return "?";
}

inline std::string describe(const GradientOptions& o, const GradientInfo& info) {
  Options forward(o.algorithm, o.precision);
  return "dX: " + FusedLinearTest::describe(forward, info.dx) +
         "; dW: " + FusedLinearTest::describe(forward, info.dw) + " (" + saved_name(o.saved) +
         (o.accumulate ? ", accumulate)" : ")");
}

/// A layer on execution space Exec with an upstream gradient: X [M,K] uniform in [-1, 1), W
/// and b in +-1/sqrt(K) (nn.Linear's), dY [M,N] uniform in [-1, 1), all drawn on the host in
/// row-major order (the same numbers on every backend and layout); Z and Y the forward's
/// pre-activation (slope 1) and output, computed by the library's forward; dX, dW and db
/// poisoned with NaN (an element never written cannot pass, and overwriting must not read them).
template <class Exec, class Scalar, class Layout>
struct Problem {
  using execution_space = Exec;
  using scalar_type = Scalar;
  using Device = Kokkos::Device<Exec, typename Exec::memory_space>;
  using Matrix = Kokkos::View<Scalar**, Layout, Device>;
  using Vector = Kokkos::View<Scalar*, Layout, Device>;
  std::int64_t M, K, N;
  double multiplier, slope;
  Matrix X, W, dY, Z, Y, dX, dW;
  Vector b, db;

  Problem(std::int64_t m, std::int64_t k, std::int64_t n, std::uint64_t seed, double mult, double s)
      : M(m),
        K(k),
        N(n),
        multiplier(mult),
        slope(s),
        X("X", m, k),
        W("W", n, k),
        dY("dY", m, n),
        Z("Z", m, n),
        Y("Y", m, n),
        dX("dX", m, k),
        dW("dW", n, k),
        b("b", n),
        db("db", n) {
    std::mt19937_64 rng(seed);
    const double bound = 1 / std::sqrt(double(K > 0 ? K : 1));
    std::uniform_real_distribution<double> x(-1, 1), w(-bound, bound);
    std::vector<double> hx(std::size_t(M * K)), hw(std::size_t(N * K)),
        hb(static_cast<std::size_t>(N)), hdy(std::size_t(M * N));
    for (double& v : hx) v = x(rng);
    for (double& v : hw) v = w(rng);
    for (double& v : hb) v = w(rng);
    for (double& v : hdy) v = x(rng);
    write_matrix(X, hx);
    write_matrix(W, hw);
    write_vector(b, hb);
    write_matrix(dY, hdy);
    forward();
    poison();
  }

  /// Z and Y from the library's forward (Y for any slope: a negative one is refused later).
  void forward() {
    FusedLinear::linear_leaky_relu(Exec(), X, W, b, Z, Scalar(multiplier), Scalar(1));
    FusedLinear::linear_leaky_relu(Exec(), X, W, b, Y, Scalar(multiplier), Scalar(slope));
    Kokkos::fence();
  }
  void poison() {
    Kokkos::deep_copy(dX, std::numeric_limits<Scalar>::quiet_NaN());
    Kokkos::deep_copy(dW, std::numeric_limits<Scalar>::quiet_NaN());
    Kokkos::deep_copy(db, std::numeric_limits<Scalar>::quiet_NaN());
    Kokkos::fence();
  }
  const Matrix& saved(Saved s) const { return s == Saved::Output ? Y : Z; }

  /// The oracle's inputs for `s`.
  Inputs inputs(Saved s) const {
    Inputs in;
    in.M = M, in.K = K, in.N = N;
    in.X = host_matrix(X), in.W = host_matrix(W), in.dY = host_matrix(dY);
    in.saved = host_matrix(saved(s));
    return in;
  }
  Oracle oracle(Saved s) const { return Oracle(inputs(s), multiplier, slope); }

  /// The one-shot backward on Exec's default instance, on the problem's own outputs or others.
  GradientInfo backward(const GradientOptions& o, const Matrix& dx, const Matrix& dw,
                        const Vector& bias) const {
    return FusedLinear::linear_leaky_relu_backward(Exec(), X, W, dY, saved(o.saved), dx, dw, bias,
                                                   Scalar(multiplier), Scalar(slope), o);
  }
  GradientInfo backward(const GradientOptions& o) const { return backward(o, dX, dW, db); }
};

/// Every output against the oracle (the accumulated ones against their prior values added),
/// with the extra error of the precision each product ran in (RunInfo).
template <class P>
::testing::AssertionResult matches_oracle(const P& p, const Oracle& oracle,
                                          const GradientInfo& info,
                                          const std::vector<double>& prior_dw = {},
                                          const std::vector<double>& prior_db = {}) {
  using Scalar = typename P::scalar_type;
  const auto dx = check<Scalar>("dX", oracle.dx(), host_matrix(p.dX), Sum::Product,
                                product_rounding(info.dx, p.N));
  if (!dx) return dx;
  const auto dw = check<Scalar>("dW", oracle.dw(prior_dw), host_matrix(p.dW), Sum::Product,
                                product_rounding(info.dw, p.M));
  if (!dw) return dw;
  return check<Scalar>("db", oracle.db(prior_db), host_vector(p.db), Sum::WideColumnSum);
}

/// The std::invalid_argument `f` throws, or "no exception".
template <class F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no exception";
}
inline ::testing::AssertionResult names(const std::string& what, const std::string& function,
                                        const std::string& problem) {
  if (starts_with(what, function + ": ") && contains(what, problem))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "'" << what << "' should start with '" << function << ": ' and say '" << problem << "'";
}

}  // namespace Gradient
}  // namespace FusedLinearTest

#endif
