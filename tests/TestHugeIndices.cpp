// SPDX-License-Identifier: Apache-2.0
// 64-bit indexing: shapes where M*K, N*K or M*N exceed 2^31 elements (about 10.5 GB each), on
// every path. Opt-in (FUSED_LINEAR_TEST_HUGE=1): meant for a GPU with that much memory, e.g.
// the H200 (scripts/device-run.sh huge); skipped elsewhere.
//
// Inputs come from a counter-based hash, so the host recomputes any input element without
// copying 10 GB back, and checks sampled rows and columns, among them the last ones (whose
// offsets are past 2^31), against a float64 dot product.
#include <cstdlib>
#include <vector>

#include "TestHelpers.hpp"

namespace {

using namespace FusedLinearTest;
using FusedLinear::Algorithm;

/// A value in [-1, 1) from (row, column, salt): a SplitMix64 finaliser, identical on any device.
KOKKOS_INLINE_FUNCTION float hashed(std::uint64_t i, std::uint64_t j, std::uint64_t salt) {
  std::uint64_t z = i * 0x9E3779B97F4A7C15ull ^ (j + salt * 0xBF58476D1CE4E5B9ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(static_cast<double>(z >> 40) / double(1ull << 23) - 1.0);
}

template <class View>
struct HashFill {
  View v;
  std::uint64_t salt;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i, std::int64_t j) const {
    v(i, j) = hashed(i, j, salt);
  }
};

template <class View>
void hash_fill(const View& v, std::uint64_t salt) {
  using Policy = Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>, Kokkos::IndexType<std::int64_t>>;
  Kokkos::parallel_for("hash_fill", Policy({0, 0}, {std::int64_t(v.extent(0)), std::int64_t(v.extent(1))}),
                       HashFill<View>{v, salt});
}

void check_huge(std::int64_t M, std::int64_t K, std::int64_t N,
                std::initializer_list<Algorithm> algorithms = {Algorithm::Vendor,
                                                              Algorithm::VendorPrefill,
                                                              Algorithm::Fused,
                                                              Algorithm::FusedSkinny}) {
  using Matrix = Kokkos::View<float**, Kokkos::LayoutRight, MemorySpace>;
  Matrix X(Kokkos::view_alloc(Kokkos::WithoutInitializing, "X"), M, K);
  Matrix W(Kokkos::view_alloc(Kokkos::WithoutInitializing, "W"), N, K);
  Matrix Y(Kokkos::view_alloc(Kokkos::WithoutInitializing, "Y"), M, N);
  Kokkos::View<float**, Kokkos::LayoutRight, MemorySpace> b2d("b", 1, N);
  auto b = Kokkos::subview(b2d, 0, Kokkos::ALL);
  hash_fill(X, 1);
  hash_fill(W, 2);
  hash_fill(b2d, 3);
  const std::int64_t rows[] = {0, 1, M / 2, M - 2, M - 1};
  const std::int64_t cols[] = {0, 1, N / 2, N - 2, N - 1};
  const double g = gamma<float>(K + 3), multiplier = 2.0, slope = 0.1;
  for (Algorithm a : algorithms) {
    Kokkos::deep_copy(Y, std::numeric_limits<float>::quiet_NaN());
    const auto info = FusedLinear::linear_leaky_relu(X, W, b, Y, 2.f, 0.1f, a);
    Kokkos::fence();
    for (std::int64_t i : rows) {
      if (i < 0 || i >= M) continue;
      for (std::int64_t j : cols) {
        if (j < 0 || j >= N) continue;
        float y;
        Kokkos::deep_copy(Kokkos::View<float, Kokkos::HostSpace>(&y), Kokkos::subview(Y, i, j));
        double acc = 0, magnitude = std::abs(double(hashed(0, j, 3)));
        for (std::int64_t k = 0; k < K; ++k) {
          const double p = double(hashed(i, k, 1)) * double(hashed(j, k, 2));
          acc += p;
          magnitude += std::abs(p);
        }
        const FusedLinear::LeakyReLUEpilogue<double> ep{multiplier, slope};
        const double ref = ep(acc, double(hashed(0, j, 3)));
        EXPECT_LE(std::abs(double(y) - ref), multiplier * g * magnitude)
            << "Y(" << i << "," << j << ") = " << y << ", reference " << ref << " ["
            << M << "x" << K << "x" << N << "] " << describe(a, info);
      }
    }
  }
}

class HugeIndices : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* opt_in = std::getenv("FUSED_LINEAR_TEST_HUGE");
    if (opt_in == nullptr || std::string(opt_in) != "1")
      GTEST_SKIP() << "set FUSED_LINEAR_TEST_HUGE=1 to run (needs about 11 GB of device memory)";
  }
};

TEST_F(HugeIndices, WeightsPast2To31Elements) { check_huge(3, 40000, 65536); }
TEST_F(HugeIndices, OutputPast2To31Elements) { check_huge(65536, 8, 40000); }
// Not fused_skinny: made for few rows and parallel over columns, N = 3 gives it one team, which
// would take minutes on 65536 rows; it gets enough columns (132 SMs x 32) in the next test.
TEST_F(HugeIndices, InputPast2To31Elements) {
  check_huge(65536, 40000, 3, {Algorithm::Vendor, Algorithm::VendorPrefill, Algorithm::Fused});
}
TEST_F(HugeIndices, InputPast2To31ElementsSkinny) {
  check_huge(65536, 40000, 4224, {Algorithm::FusedSkinny});
}

}  // namespace

namespace {
// The same check at a small shape, always on: keeps the hash inputs and the sampled check honest.
TEST(HugeIndicesCheck, WorksAtSmallShapes) { check_huge(37, 50, 41); }
}  // namespace
