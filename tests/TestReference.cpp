// SPDX-License-Identifier: Apache-2.0
// The references themselves: the test's own float64 reference (common/Oracle.hpp) reproduces
// the hand-computed values, and the library's FusedLinear::reference_linear_leaky_relu (what the
// perf program measures against) agrees with it, special values and signed zeros included; the
// library's reference fails with a clear exception when it cannot allocate.
#include <cmath>
#include <limits>
#include <random>

#include "common/TestHelpers.hpp"

namespace {

using namespace FusedLinearTest;
using HostMatrix = Kokkos::View<double**, Kokkos::LayoutRight, Kokkos::HostSpace>;
using HostVector = Kokkos::View<double*, Kokkos::HostSpace>;

HostInputs literal_inputs() {
  HostMatrix X("X", 5, 2), W("W", 4, 2);
  HostVector b("b", 4);
  write_literal_inputs(X, W, b);
  return host_inputs(X, W, b);
}

// The test reference, computed from the definition, gives the hand-computed numbers exactly:
// the literal table and the reference check each other.
TEST(Reference, TestReferenceGivesTheHandComputedValues) {
  const HostInputs in = literal_inputs();
  for (const LiteralCase& c : literal_cases()) {
    const Reference ref(in, c.multiplier, c.slope);
    EXPECT_TRUE(matches_literal<double>(c, ref.values(), true, 1));
  }
}

// Inputs the library's reference and the test's must agree on: random values, signed zeros in X
// and b, NaN, +-Inf in X, W and b.
void expect_references_agree(const HostMatrix& X, const HostMatrix& W, const HostVector& b,
                             double multiplier, double slope) {
  const auto lib = FusedLinear::reference_linear_leaky_relu(X, W, b, multiplier, slope);
  const Reference ref(host_inputs(X, W, b), multiplier, slope);
  const std::int64_t M = X.extent(0), N = W.extent(0), K = X.extent(1);
  ASSERT_EQ(std::int64_t(lib.extent(0)), M);
  ASSERT_EQ(std::int64_t(lib.extent(1)), N);
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      const double l = lib(i, j), r = ref(i, j);
      bool ok;
      if (std::isnan(r))
        ok = std::isnan(l);
      else if (std::isinf(r) || r == 0)
        ok = l == r && std::signbit(l) == std::signbit(r);
      else
        ok = std::abs(l - r) <= 4 * gamma<double>(K + 3) * std::abs(multiplier) *
                                    std::max(1.0, std::abs(slope)) *
                                    (std::abs(b(j)) + double(K) * 2.0);
      if (!ok && bad++ < 5)
        ADD_FAILURE() << "library reference Y(" << i << "," << j << ") = " << l << ", test " << r
                      << " (multiplier " << multiplier << ", slope " << slope << ")";
    }
  EXPECT_EQ(bad, 0);
}

TEST(Reference, LibraryReferenceAgreesWithTheTestReference) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-1, 1);
  const std::int64_t M = 23, K = 37, N = 19;
  HostMatrix X("X", M, K), W("W", N, K);
  HostVector b("b", N);
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t k = 0; k < K; ++k) X(i, k) = u(rng);
  for (std::int64_t j = 0; j < N; ++j) {
    for (std::int64_t k = 0; k < K; ++k) W(j, k) = u(rng);
    b(j) = u(rng);
  }
  // Row 0 and 1: signed zeros (exact zero sums); zero biases of both signs.
  for (std::int64_t k = 0; k < K; ++k) X(0, k) = (k % 2) ? 0.0 : -0.0;
  for (std::int64_t k = 0; k < K; ++k) X(1, k) = 0.0;
  b(0) = -0.0, b(1) = 0.0;
  // Specials.
  const double inf = std::numeric_limits<double>::infinity();
  X(3, 4) = std::numeric_limits<double>::quiet_NaN();
  W(5, 6) = inf;
  W(7, 8) = -inf;
  b(9) = inf;
  b(10) = -inf;
  for (double multiplier : {2.0, -2.0, 0.0, 1.0})
    for (double slope : {0.1, -0.5, 0.0, 2.0}) expect_references_agree(X, W, b, multiplier, slope);
  // The hand-computed layer, too.
  HostMatrix Xl("X", 5, 2), Wl("W", 4, 2);
  HostVector bl("b", 4);
  write_literal_inputs(Xl, Wl, bl);
  for (const LiteralCase& c : literal_cases())
    expect_references_agree(Xl, Wl, bl, c.multiplier, c.slope);
}

TEST(Reference, AllocationFailureIsAnException) {
  // 2^24 x 2^24 doubles (2 PB): the allocation fails.
  float x[4] = {}, w[4] = {}, bias[4] = {};
  const std::size_t huge = std::size_t(1) << 24;
  using Matrix =
      Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  using Vector = Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  Matrix X(x, huge, 1), W(w, huge, 1);
  Vector b(bias, huge);
  auto expect_clear_error = [](auto&& call) {
    try {
      call();
      ADD_FAILURE() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_TRUE(
          starts_with(e.what(), "FusedLinear::reference_linear_leaky_relu: cannot allocate"))
          << e.what();
    }
  };
  expect_clear_error([&] { FusedLinear::reference_linear_leaky_relu(X, W, b, 2.0, 0.1); });
  // 2^31 x 2^31 doubles: the byte count itself overflows 64 bits.
  const std::size_t past = std::size_t(1) << 31;
  Matrix X_past(x, past, 1), W_past(w, past, 1);
  Vector b_past(bias, past);
  expect_clear_error(
      [&] { FusedLinear::reference_linear_leaky_relu(X_past, W_past, b_past, 2.0, 0.1); });
}

}  // namespace
