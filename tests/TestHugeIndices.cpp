// SPDX-License-Identifier: Apache-2.0
// 64-bit indexing: shapes where M*K, N*K or M*N exceed 2^31 elements (about 10.5 GB each), on
// every path the build and device can run for them: vendor, vendor_prefill, vendor_lt, fused,
// fused_skinny, skinny_sm90 in strict fp32, and both 3xtf32 paths (vendor_lt through cuBLASLt,
// fused_sm90). Opt-in (FUSED_LINEAR_TEST_HUGE=1): meant for a GPU with that much memory, e.g. the
// H200 (scripts/device/device-run.sh huge); skipped elsewhere. A path the build cannot run is
// skipped by the documented contract (attempt() checks the refusal).
//
// Inputs come from a counter-based hash written by a kernel, so the host recomputes any input
// element without copying 10 GB back, and checks sampled rows and columns, among them the last
// ones (whose offsets are past 2^31), against a float64 dot product.
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <vector>

#include "common/TestHelpers.hpp"

namespace {

using namespace FusedLinearTest;

void check_huge(std::int64_t M, std::int64_t K, std::int64_t N,
                std::initializer_list<Options> requests) {
  using Matrix = Kokkos::View<float**, Kokkos::LayoutRight, MemorySpace>;
  Matrix X(Kokkos::view_alloc(Kokkos::WithoutInitializing, "X"), M, K);
  Matrix W(Kokkos::view_alloc(Kokkos::WithoutInitializing, "W"), N, K);
  Matrix Y(Kokkos::view_alloc(Kokkos::WithoutInitializing, "Y"), M, N);
  Matrix b2d("b", 1, N);
  auto b = Kokkos::subview(b2d, 0, Kokkos::ALL);
  hash_fill(ExecSpace(), X, 1);
  hash_fill(ExecSpace(), W, 2);
  hash_fill(ExecSpace(), b2d, 3);
  Kokkos::fence();
  const auto hx = [](std::int64_t i, std::int64_t k) { return double(float(hashed(i, k, 1))); };
  const auto hw = [](std::int64_t j, std::int64_t k) { return double(float(hashed(j, k, 2))); };
  const auto hb = [](std::int64_t j) { return double(float(hashed(0, j, 3))); };
  const std::int64_t rows[] = {0, 1, M / 2, M - 2, M - 1};
  const std::int64_t cols[] = {0, 1, N / 2, N - 2, N - 1};
  const double multiplier = 2.0, slope = 0.1;
  int ran = 0;
  for (const Options& o : requests) {
    Kokkos::deep_copy(Y, std::numeric_limits<float>::quiet_NaN());
    const auto info = attempt(ExecSpace(), X, W, b, Y, multiplier, slope, o);
    if (!info) continue;
    ++ran;
    Kokkos::fence();
    std::printf("[ huge     ] %lldx%lldx%lld %s\n", static_cast<long long>(M),
                static_cast<long long>(K), static_cast<long long>(N), describe(o, *info).c_str());
    const double g = gamma<float>(K + 3) + product_rounding(*info, K);
    for (std::int64_t i : rows) {
      if (i < 0 || i >= M) continue;
      for (std::int64_t j : cols) {
        if (j < 0 || j >= N) continue;
        float y;
        Kokkos::deep_copy(Kokkos::View<float, Kokkos::HostSpace>(&y), Kokkos::subview(Y, i, j));
        double acc = 0, magnitude = std::abs(hb(j));
        for (std::int64_t k = 0; k < K; ++k) {
          const double p = hx(i, k) * hw(j, k);
          acc += p;
          magnitude += std::abs(p);
        }
        const double ref = leaky_relu(multiplier * (acc + hb(j)), slope);
        EXPECT_LE(std::abs(double(y) - ref), multiplier * g * magnitude)
            << "Y(" << i << "," << j << ") = " << y << ", reference " << ref << " [" << M << "x"
            << K << "x" << N << "] " << describe(o, *info);
      }
    }
    // The plans of these shapes hold gigabytes (3xtf32's split operands): not kept.
    FusedLinear::release_cached_plans();
  }
  EXPECT_GT(ran, 0);
}

const Options strict_paths[] = {options(Algorithm::Vendor),      options(Algorithm::VendorPrefill),
                                options(Algorithm::VendorLt),    options(Algorithm::Fused),
                                options(Algorithm::FusedSkinny), options(Algorithm::SkinnySm90)};
const Options tf32x3_paths[] = {options(Algorithm::VendorLt, Precision::TF32x3),
                                options(Algorithm::FusedSm90, Precision::TF32x3)};

class HugeIndices : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* opt_in = std::getenv("FUSED_LINEAR_TEST_HUGE");
    if (opt_in == nullptr || std::string(opt_in) != "1")
      GTEST_SKIP() << "set FUSED_LINEAR_TEST_HUGE=1 to run (needs about 40 GB of device memory)";
  }
};

#define FUSED_LINEAR_ALL_PATHS                                                           \
  {                                                                                      \
    strict_paths[0], strict_paths[1], strict_paths[2], strict_paths[3], strict_paths[4], \
        strict_paths[5], tf32x3_paths[0], tf32x3_paths[1]                                \
  }

TEST_F(HugeIndices, WeightsPast2To31Elements) {
  check_huge(3, 40000, 65536, FUSED_LINEAR_ALL_PATHS);
}
TEST_F(HugeIndices, OutputPast2To31Elements) {
  check_huge(65536, 8, 40000, FUSED_LINEAR_ALL_PATHS);
}
// Not the few-rows kernels: made for few rows and parallel over columns, N = 3 gives them one
// team, which would take minutes on 65536 rows; fused_skinny gets enough columns (132 SMs x 32)
// in the next test.
TEST_F(HugeIndices, InputPast2To31Elements) {
  check_huge(65536, 40000, 3,
             {strict_paths[0], strict_paths[1], strict_paths[2], strict_paths[3], tf32x3_paths[0],
              tf32x3_paths[1]});
}
TEST_F(HugeIndices, InputPast2To31ElementsSkinny) {
  check_huge(65536, 40000, 4224, {options(Algorithm::FusedSkinny)});
}

// The same check at a small shape, always on: keeps the hash inputs and the sampled check honest.
TEST(HugeIndicesCheck, WorksAtSmallShapes) {
  check_huge(37, 50, 41, FUSED_LINEAR_ALL_PATHS);
  check_huge(37, 50, 41, {options(Algorithm::FusedSkinny, Precision::Strict, 3)});
}

}  // namespace
