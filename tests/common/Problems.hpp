// SPDX-License-Identifier: Apache-2.0
// Problems on any execution space (Views in that space's memory), filled on the host from a
// seed so that every backend sees the same numbers, checked against the reference; and the hash
// fill, which generates inputs on the device that the host can recompute.
#ifndef FUSED_LINEAR_TEST_COMMON_PROBLEMS_HPP
#define FUSED_LINEAR_TEST_COMMON_PROBLEMS_HPP

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include "HostCopies.hpp"
#include "Oracle.hpp"

namespace FusedLinearTest {

/// A problem on execution space Exec: X [M,K], W [N,K], b [N], Y [M,N] in Exec's memory space
/// (Kokkos::Device<Exec, memory>, so that the overload without an instance runs on Exec too).
/// X uniform in [-1, 1); W and b uniform in +-1/sqrt(K) as nn.Linear initialises them, drawn on
/// the host in row-major order (the same numbers on every backend and layout); Y poisoned with
/// NaN so an element the kernel never writes cannot pass.
template <class Exec, class Scalar, class Layout>
struct Problem {
  using execution_space = Exec;
  using scalar_type = Scalar;
  using layout = Layout;
  using memory_space = typename Exec::memory_space;
  using Device = Kokkos::Device<Exec, memory_space>;
  using Matrix = Kokkos::View<Scalar**, Layout, Device>;
  using Vector = Kokkos::View<Scalar*, Layout, Device>;
  Matrix X, W, Y;
  Vector b;
  std::int64_t M, K, N;

  Problem(std::int64_t m, std::int64_t k, std::int64_t n, std::uint64_t seed)
      : X("X", m, k), W("W", n, k), Y("Y", m, n), b("b", n), M(m), K(k), N(n) {
    randomize(seed);
    poison();
  }

  /// Fresh contents for X, W and b (the same Views).
  void randomize(std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    const double bound = 1 / std::sqrt(double(K > 0 ? K : 1));
    std::uniform_real_distribution<double> x(-1, 1), w(-bound, bound);
    auto hX = Kokkos::create_mirror_view(X);
    auto hW = Kokkos::create_mirror_view(W);
    auto hb = Kokkos::create_mirror_view(b);
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t k = 0; k < K; ++k) hX(i, k) = Scalar(x(rng));
    for (std::int64_t j = 0; j < N; ++j)
      for (std::int64_t k = 0; k < K; ++k) hW(j, k) = Scalar(w(rng));
    for (std::int64_t j = 0; j < N; ++j) hb(j) = Scalar(w(rng));
    Kokkos::deep_copy(X, hX);
    Kokkos::deep_copy(W, hW);
    Kokkos::deep_copy(b, hb);
  }

  void poison() { Kokkos::deep_copy(Y, std::numeric_limits<Scalar>::quiet_NaN()); }

  HostInputs inputs() const { return host_inputs(X, W, b); }
  Reference reference(double multiplier, double slope) const {
    return Reference(inputs(), multiplier, slope);
  }
  std::vector<double> output() const { return host_matrix(Y); }
};

/// Y (any path's output) against the test's float64 reference.
template <class P>
::testing::AssertionResult matches_reference(const P& p, double multiplier, double slope,
                                             const typename P::Matrix& Y,
                                             double product_rounding = 0) {
  return p.reference(multiplier, slope)
      .template check<typename P::scalar_type>(host_matrix(Y), product_rounding);
}

/// A value in [-1, 1) from (row, column, salt): a SplitMix64 finaliser, identical on any device
/// and the host, so inputs written by a kernel can be recomputed without copying them back.
KOKKOS_INLINE_FUNCTION double hashed(std::uint64_t i, std::uint64_t j, std::uint64_t salt) {
  std::uint64_t z = i * 0x9E3779B97F4A7C15ull ^ (j + salt * 0xBF58476D1CE4E5B9ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 40) / double(1ull << 23) - 1.0;
}

/// v(i, j) = scale * hashed(i, j, salt), enqueued on `exec`.
template <class View>
struct HashFill {
  View v;
  std::uint64_t salt;
  double scale;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i, std::int64_t j) const {
    v(i, j) = typename View::non_const_value_type(scale * hashed(i, j, salt));
  }
};
template <class Exec, class View>
void hash_fill(const Exec& exec, const View& v, std::uint64_t salt, double scale = 1) {
  using Policy = Kokkos::MDRangePolicy<Exec, Kokkos::Rank<2>, Kokkos::IndexType<std::int64_t>>;
  Kokkos::parallel_for("FusedLinearTest::hash_fill",
                       Policy(exec, {0, 0}, {std::int64_t(v.extent(0)), std::int64_t(v.extent(1))}),
                       HashFill<View>{v, salt, scale});
}

}  // namespace FusedLinearTest

#endif
