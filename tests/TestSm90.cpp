// SPDX-License-Identifier: Apache-2.0
// The sm_90a kernels' own limits (Sm90::tf32x3_refusal, Sm90::skinny_refusal), at their
// boundaries, without a GPU: they are host functions of plain data (Sm90.hpp) that do not
// dereference the problem's pointers, so fake non-null pointers stand in for the Views. And, on
// a Hopper GPU, the cluster counts a few-rows plan reads from the occupancy calculator.
#include <cstdint>
#include <string>

#include "common/TestHelpers.hpp"

namespace {

#if defined(FUSED_LINEAR_SM90A)
namespace Sm90 = FusedLinear::Impl::Sm90;
using FusedLinearTest::contains;

const float* fake(std::uintptr_t address) { return reinterpret_cast<const float*>(address); }

/// A row-major problem with contiguous rows, 256-byte aligned fake pointers.
Sm90::Problem problem(std::int64_t M, std::int64_t N, std::int64_t K) {
  Sm90::Problem p;
  p.M = M, p.N = N, p.K = K;
  p.X = fake(0x100000), p.ldx = K;
  p.W = fake(0x200000), p.ldw = K;
  p.bias = fake(0x300000);
  p.multiplier = 2, p.slope = 0.1f;
  p.Y = const_cast<float*>(fake(0x400000)), p.ldy = N;
  return p;
}

const Sm90::Device hopper{9, 0, 132};

std::string reason(const char* r) { return r ? r : "(accepted)"; }

TEST(Sm90Limits, Tf32x3AtMaxExtent) {
  const std::int64_t max = Sm90::max_extent;
  EXPECT_EQ(max, (std::int64_t(1) << 31) - 1024);
  EXPECT_EQ(Sm90::tf32x3_refusal(hopper, problem(64, 64, 64)), nullptr);
  for (int which = 0; which < 3; ++which) {
    const auto at = [&](std::int64_t extent) {
      return problem(which == 0 ? extent : 64, which == 1 ? extent : 64, which == 2 ? extent : 64);
    };
    const char* const name[] = {"M", "N", "K"};
    EXPECT_EQ(Sm90::tf32x3_refusal(hopper, at(max)), nullptr)
        << name[which] << " = max_extent: " << reason(Sm90::tf32x3_refusal(hopper, at(max)));
    const char* past = Sm90::tf32x3_refusal(hopper, at(max + 1));
    ASSERT_NE(past, nullptr) << name[which] << " = max_extent + 1 accepted";
    EXPECT_TRUE(contains(past, "max_extent")) << past;
  }
}

TEST(Sm90Limits, SkinnyAtMaxExtent) {
  const std::int64_t max = Sm90::max_extent;
  EXPECT_EQ(Sm90::skinny_refusal(hopper, problem(16, 64, 64)), nullptr);
  // N and K up to max_extent.
  EXPECT_EQ(Sm90::skinny_refusal(hopper, problem(16, max, 64)), nullptr)
      << reason(Sm90::skinny_refusal(hopper, problem(16, max, 64)));
  EXPECT_EQ(Sm90::skinny_refusal(hopper, problem(16, 64, max)), nullptr)
      << reason(Sm90::skinny_refusal(hopper, problem(16, 64, max)));
  for (const Sm90::Problem& p :
       {problem(16, max + 1, 64), problem(16, 64, max + 1), problem(max + 1, 64, 64)}) {
    const char* past = Sm90::skinny_refusal(hopper, p);
    ASSERT_NE(past, nullptr) << p.M << "x" << p.K << "x" << p.N << " accepted";
    EXPECT_TRUE(contains(past, "max_extent")) << past;
  }
  // M: one grid row per 64 rows of X, at most 65535 of them (below max_extent).
  const std::int64_t grid_rows = std::int64_t(65535) * 64;
  EXPECT_EQ(Sm90::skinny_refusal(hopper, problem(grid_rows, 64, 64)), nullptr)
      << reason(Sm90::skinny_refusal(hopper, problem(grid_rows, 64, 64)));
  const char* past = Sm90::skinny_refusal(hopper, problem(grid_rows + 1, 64, 64));
  ASSERT_NE(past, nullptr);
  EXPECT_TRUE(contains(past, "65535")) << past;
  EXPECT_NE(Sm90::skinny_refusal(hopper, problem(max, 64, 64)), nullptr);
}

TEST(Sm90Limits, ComputeCapabilityAndRows) {
  for (const Sm90::Device d : {Sm90::Device{8, 0, 108}, Sm90::Device{8, 9, 128},
                               Sm90::Device{10, 0, 148}, Sm90::Device{9, 1, 132}}) {
    const char* t = Sm90::tf32x3_refusal(d, problem(64, 64, 64));
    const char* s = Sm90::skinny_refusal(d, problem(16, 64, 64));
    ASSERT_NE(t, nullptr) << d.cc_major << "." << d.cc_minor;
    ASSERT_NE(s, nullptr) << d.cc_major << "." << d.cc_minor;
    EXPECT_TRUE(contains(t, "compute capability 9.0")) << t;
    EXPECT_TRUE(contains(s, "compute capability 9.0")) << s;
  }
  // Row strides below the rows' lengths are refused; the few-rows kernel's copy engine needs
  // 16-byte aligned rows; the 3xtf32 kernel takes any K (a padded copy of W).
  Sm90::Problem short_rows = problem(16, 64, 64);
  short_rows.ldw = 63;
  EXPECT_NE(Sm90::tf32x3_refusal(hopper, short_rows), nullptr);
  EXPECT_NE(Sm90::skinny_refusal(hopper, short_rows), nullptr);
  EXPECT_NE(Sm90::skinny_refusal(hopper, problem(16, 64, 77)), nullptr);
  EXPECT_EQ(Sm90::tf32x3_refusal(hopper, problem(16, 64, 77)), nullptr)
      << reason(Sm90::tf32x3_refusal(hopper, problem(16, 64, 77)));
  Sm90::Problem misaligned = problem(16, 64, 64);
  misaligned.X = fake(0x100004);
  EXPECT_NE(Sm90::skinny_refusal(hopper, misaligned), nullptr);
  // And the workspace grows with the problem, never zero where the kernel has work.
  EXPECT_GT(Sm90::tf32x3_workspace_bytes(problem(64, 64, 64)), 0u);
  EXPECT_GE(Sm90::tf32x3_workspace_bytes(problem(128, 64, 1024)),
            Sm90::tf32x3_workspace_bytes(problem(64, 64, 64)));
}

// choose_splits counts waves of these: every count known (a failed query would leave 0 and the
// split would assume multiprocessors / S clusters fit), at most multiprocessors / S.
TEST(Sm90Limits, ClusterCountsOfThisGpu) {
  int device = 0;
  cudaDeviceProp prop;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaGetDeviceProperties(&prop, device) != cudaSuccess || prop.major != 9 || prop.minor != 0)
    GTEST_SKIP() << "needs a compute capability 9.0 GPU";
  Sm90::Device d{prop.major, prop.minor, prop.multiProcessorCount};
  Sm90::skinny_count_clusters(d);
  EXPECT_EQ(d.skinny_clusters[0], d.multiprocessors);
  for (int S = 1; S <= Sm90::max_splits; ++S) {
    EXPECT_GE(d.skinny_clusters[S - 1], 1) << S << " CTAs";
    EXPECT_LE(d.skinny_clusters[S - 1] * S, d.multiprocessors) << S << " CTAs";
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}
#else
TEST(Sm90Limits, NotInThisBuild) {
  GTEST_SKIP() << "the sm_90a kernels are built on CUDA with FusedLinear_ENABLE_SM90A";
}
#endif

}  // namespace
