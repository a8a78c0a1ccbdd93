// SPDX-License-Identifier: Apache-2.0
// Randomised property test: seeded random shapes (1, primes, non-multiples of every tile and
// pack size, M >> N and N >> M), multipliers and slopes; every algorithm against the float64
// reference. The seed comes from FUSED_LINEAR_TEST_SEED if set, else from the clock, and is
// printed with every failure so that a failing case can be replayed.
#include <chrono>
#include <cstdlib>
#include <random>

#include "TestHelpers.hpp"

namespace {

using namespace FusedLinearTest;

std::uint64_t test_seed() {
  if (const char* s = std::getenv("FUSED_LINEAR_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

// A dimension drawn from the interesting kinds: 1, small primes, one off a tile/pack multiple,
// or uniform up to `max`.
std::int64_t draw_extent(std::mt19937_64& rng, std::int64_t max) {
  static const std::int64_t primes[] = {2, 3, 5, 7, 13, 31, 61, 127, 131, 257};
  switch (std::uniform_int_distribution<int>(0, 3)(rng)) {
    case 0: return 1;
    case 1: return std::min(max, primes[std::uniform_int_distribution<int>(0, 9)(rng)]);
    case 2: {
      const std::int64_t base = 4 * std::uniform_int_distribution<std::int64_t>(1, max / 4)(rng);
      return std::min(max, base + std::uniform_int_distribution<int>(-1, 1)(rng));
    }
    default: return std::uniform_int_distribution<std::int64_t>(1, max)(rng);
  }
}

TEST(Randomized, EveryAlgorithmMatchesTheReference) {
  const std::uint64_t seed = test_seed();
  std::mt19937_64 rng(seed);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  int cases = 0;
  for (; cases < 60 && std::chrono::steady_clock::now() < deadline; ++cases) {
    std::int64_t M = draw_extent(rng, 300), K = draw_extent(rng, 600), N = draw_extent(rng, 300);
    // Lopsided shapes on purpose: M >> N or N >> M in a quarter of the cases each.
    const int kind = std::uniform_int_distribution<int>(0, 3)(rng);
    if (kind == 0) M = std::uniform_int_distribution<std::int64_t>(400, 1200)(rng), N = std::min<std::int64_t>(N, 7);
    if (kind == 1) N = std::uniform_int_distribution<std::int64_t>(400, 1200)(rng), M = std::min<std::int64_t>(M, 7);
    const double multiplier = std::uniform_real_distribution<double>(-4, 4)(rng);
    const double slope = std::uniform_real_distribution<double>(-1, 3)(rng);
    Problem<float, Kokkos::LayoutRight> p(M, K, N, rng());
    for (FusedLinear::Algorithm a : all_algorithms) {
      p.poison();
      const auto info = FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, float(multiplier),
                                                       float(slope), a);
      Kokkos::fence();
      ASSERT_TRUE(matches_reference(p, double(float(multiplier)), double(float(slope)), p.Y))
          << "replay with FUSED_LINEAR_TEST_SEED=" << seed << " (case " << cases << "), "
          << describe(a, info);
    }
  }
  RecordProperty("seed", std::to_string(seed));
  std::printf("[ randomized ] %d cases, seed %llu\n", cases, static_cast<unsigned long long>(seed));
}

}  // namespace
