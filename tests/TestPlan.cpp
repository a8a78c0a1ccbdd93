// SPDX-License-Identifier: Apache-2.0
// The Plan API beyond what the typed suite checks (reuse on fresh inputs, info() against the
// one-shot call): moves, the memory a plan owns, Views of other strides and alignment, and the
// one-shot call's plan cache.
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "common/TestHelpers.hpp"

namespace {

using namespace FusedLinearTest;
using P = Problem<ExecSpace, float, Kokkos::LayoutRight>;
using PlanType = FusedLinear::Plan<ExecSpace, P::Matrix, P::Matrix, P::Vector, P::Matrix>;

// Move construction and move assignment over a live plan (which releases it first) keep the
// moved plan working; plans live in containers that move them.
TEST(Plan, MovesKeepWorking) {
  P p(40, 1030, 65, 1), q(9, 130, 31, 2);
  const Options split = options(Algorithm::FusedSkinny, Precision::Strict, 3);
  PlanType a(ExecSpace(), p.X, p.W, p.b, p.Y, 2.f, 0.1f, split);
  const std::size_t bytes = a.workspace_bytes();
  EXPECT_GT(bytes, 0u);
  PlanType b(std::move(a));
  EXPECT_EQ(b.workspace_bytes(), bytes);
  EXPECT_EQ(b.info().algorithm, Algorithm::FusedSkinny);
  p.poison();
  b.execute(p.X, p.W, p.b, p.Y);
  EXPECT_TRUE(matches_reference(p, 2, 0.1, p.Y));

  PlanType c(ExecSpace(), q.X, q.W, q.b, q.Y, -1.f, 0.3f, options(Algorithm::Fused));
  q.poison();
  c.execute(q.X, q.W, q.b, q.Y);
  EXPECT_TRUE(matches_reference(q, -1, double(0.3f), q.Y));
  c = std::move(b);  // over a live plan of another shape
  EXPECT_EQ(c.workspace_bytes(), bytes);
  for (int round = 0; round < 3; ++round) {
    p.randomize(10 + round);
    p.poison();
    c.execute(p.X, p.W, p.b, p.Y);
    EXPECT_TRUE(matches_reference(p, 2, 0.1, p.Y)) << round;
  }
  // The moved-to plan has the moved plan's shape now.
  EXPECT_THROW(c.execute(q.X, q.W, q.b, q.Y), std::invalid_argument);

  std::vector<PlanType> plans;
  for (int i = 0; i < 5; ++i)  // reallocations move the plans
    plans.emplace_back(ExecSpace(), p.X, p.W, p.b, p.Y, float(i + 1), 0.1f,
                       i % 2 ? split : options(Algorithm::Vendor));
  for (int i = 0; i < 5; ++i) {
    p.poison();
    plans[std::size_t(i)].execute(p.X, p.W, p.b, p.Y);
    EXPECT_TRUE(matches_reference(p, double(i + 1), 0.1, p.Y)) << i;
  }
  Kokkos::fence();
}

/// Whether the plan for `info` must own device (or host) memory, from what its path keeps
/// between calls: split K's partial sums and counters (fused_skinny: the kernel's choice for the
/// shape and instance; forced splits on any backend), the 3xTF32 split operands (vendor paths
/// through cuBLASLt; the sm_90a kernel's X parts); nothing for fused, the BLAS paths and the
/// few-rows sm_90a kernel. vendor_lt in strict or tf32 holds what cuBLASLt's chosen kernel asks
/// (possibly nothing), at most 32 MiB.
enum class Owns { Nothing, Something, AtMost32MiB };
Owns expected_memory(const Options& o, const RunInfo& info, const P& p) {
  if (info.gemm == Gemm::None) return Owns::Nothing;
  switch (info.algorithm) {
    case Algorithm::FusedSkinny:
      return Impl::choose_skinny<ExecSpace, float>(ExecSpace(), p.M, p.N, p.K,
                                                   o.tuning.skinny_splits)
                         .partials > 0
                 ? Owns::Something
                 : Owns::Nothing;
    case Algorithm::Vendor:
    case Algorithm::VendorPrefill:
      return info.precision == Precision::TF32x3 ? Owns::Something : Owns::Nothing;
    case Algorithm::VendorLt:
      return info.precision == Precision::TF32x3 ? Owns::Something : Owns::AtMost32MiB;
    case Algorithm::FusedSm90: return Owns::Something;
    default: return Owns::Nothing;
  }
}

TEST(Plan, WorkspaceBytesWhereThePathOwnsMemory) {
  int owning = 0;
  for (auto shape : {std::array<std::int64_t, 3>{37, 300, 70},
                     {17, 4096, 260},
                     {300, 1030, 260},
                     {0, 64, 64},
                     {64, 0, 64}}) {
    P p(shape[0], shape[1], shape[2], 3);
    for (const Options& o :
         served_requests(ExecSpace(), p.X, p.W, p.b, p.Y,
                         {Precision::Strict, Precision::TF32, Precision::TF32x3}, 3)) {
      auto made = make_plan(ExecSpace(), p.X, p.W, p.b, p.Y, 2, 0.1, o);
      if (!made) continue;
      PlanType& plan = *made;
      const std::size_t bytes = plan.workspace_bytes();
      const std::string what = describe(o, plan.info()) + " at " + std::to_string(p.M) + "x" +
                               std::to_string(p.K) + "x" + std::to_string(p.N) + ": " +
                               std::to_string(bytes) + " bytes";
      switch (expected_memory(o, plan.info(), p)) {
        case Owns::Nothing: EXPECT_EQ(bytes, 0u) << what; break;
        case Owns::Something:
          EXPECT_GT(bytes, 0u) << what;
          ++owning;
          break;
        case Owns::AtMost32MiB: EXPECT_LE(bytes, (std::size_t(32) << 20) + 512) << what; break;
      }
      // Whatever it holds, it computes right.
      p.poison();
      plan.execute(p.X, p.W, p.b, p.Y);
      EXPECT_TRUE(p.reference(2, 0.1).check<float>(p.output(), product_rounding(plan.info(), p.K)))
          << what;
    }
  }
  EXPECT_GT(owning, 0) << "forced split K owns memory on every backend";
  // The host never splits K by itself (no multiprocessors to fill): only when forced.
  if (Impl::is_host_space<ExecSpace>()) {
    P p(17, 4096, 260, 4);
    PlanType own(ExecSpace(), p.X, p.W, p.b, p.Y, 2.f, 0.1f, options(Algorithm::FusedSkinny));
    EXPECT_EQ(own.workspace_bytes(), 0u);
  }
}

// A plan's path may depend on its Views' strides and alignment (vectorised accesses, cuBLASLt's
// kernel, the sm_90a kernels' TMA): executed with Views of the same type but other strides or
// alignment, it either computes right (the portable paths check per call) or refuses with an
// std::invalid_argument naming Plan::execute — never computes wrong.
TEST(Plan, ViewsOfOtherStridesAndAlignment) {
  const std::int64_t M = 37, K = 44, N = 70;
  P plain(M, K, N, 5);
  P::Matrix X_wide("X_wide", M, K + 5), W_wide("W_wide", N, K + 3), Y_wide("Y_wide", M, N + 1);
  auto X_off = Kokkos::subview(X_wide, Kokkos::ALL, std::make_pair(1, 1 + int(K)));
  auto W_off = Kokkos::subview(W_wide, Kokkos::ALL, std::make_pair(3, 3 + int(K)));
  auto Y_off = Kokkos::subview(Y_wide, Kokkos::ALL, std::make_pair(1, 1 + int(N)));
  Kokkos::deep_copy(X_off, plain.X);
  Kokkos::deep_copy(W_off, plain.W);
  using Sub = decltype(X_off);
  static_assert(std::is_same<Sub::array_layout, Kokkos::LayoutRight>::value, "padded LayoutRight");
  using SubPlan = FusedLinear::Plan<ExecSpace, Sub, Sub, P::Vector, Sub>;
  const Sub X_aligned = Kokkos::subview(plain.X, Kokkos::ALL, std::make_pair(0, int(K)));
  const Sub W_aligned = Kokkos::subview(plain.W, Kokkos::ALL, std::make_pair(0, int(K)));
  const Sub Y_aligned = Kokkos::subview(plain.Y, Kokkos::ALL, std::make_pair(0, int(N)));
  const Reference ref = plain.reference(2, 0.1);
  int refusals = 0;
  for (const Options& o :
       served_requests(ExecSpace(), X_aligned, W_aligned, plain.b, Y_aligned,
                       {Precision::Strict, Precision::TF32, Precision::TF32x3}, 3)) {
    for (bool made_aligned : {false, true}) {
      std::optional<SubPlan> made =
          made_aligned ? make_plan(ExecSpace(), X_aligned, W_aligned, plain.b, Y_aligned, 2, 0.1, o)
                       : make_plan(ExecSpace(), X_off, W_off, plain.b, Y_off, 2, 0.1, o);
      if (!made) {
        EXPECT_FALSE(made_aligned) << describe(o);
        continue;
      }
      const SubPlan& plan = *made;
      const std::string what =
          describe(o, plan.info()) + (made_aligned ? ", made aligned" : ", made offset");
      for (bool run_aligned : {false, true}) {
        const Sub& Y = run_aligned ? Y_aligned : Y_off;
        Kokkos::deep_copy(Y, std::numeric_limits<float>::quiet_NaN());
        try {
          if (run_aligned)
            plan.execute(X_aligned, W_aligned, plain.b, Y_aligned);
          else
            plan.execute(X_off, W_off, plain.b, Y_off);
        } catch (const std::invalid_argument& e) {
          ++refusals;
          EXPECT_TRUE(starts_with(e.what(), "FusedLinear::Plan::execute: ")) << e.what();
          const Algorithm a = plan.info().algorithm;
          EXPECT_TRUE(a == Algorithm::VendorLt || a == Algorithm::FusedSm90 ||
                      a == Algorithm::SkinnySm90 || plan.info().precision == Precision::TF32x3)
              << what << ": a portable path must take any strides: " << e.what();
          continue;
        }
        EXPECT_TRUE(ref.check<float>(host_matrix(Y), product_rounding(plan.info(), K)))
            << what << (run_aligned ? ", run aligned" : ", run offset");
      }
    }
  }
  std::printf("[ info     ] %d refusals of other strides or alignment\n", refusals);
}

// The one-shot call keeps a plan per (instance, Views, parameters, options); release_cached_plans
// empties the cache; the cache is bounded; Plans made by the caller are not in it.
TEST(Plan, OneShotPlanCache) {
  auto& cache = Impl::PlanCache::instance();
  P p(9, 130, 31, 6);
  FusedLinear::release_cached_plans();
  EXPECT_EQ(cache.size(), 0u);
  FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f);
  EXPECT_EQ(cache.size(), 1u);
  FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f);  // the same plan again
  EXPECT_EQ(cache.size(), 1u);
  FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 3.f, 0.1f);  // another multiplier
  EXPECT_EQ(cache.size(), 2u);
  FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 3.f, 0.1f, options(Algorithm::Fused));
  EXPECT_EQ(cache.size(), 3u);
  PlanType mine(ExecSpace(), p.X, p.W, p.b, p.Y, 4.f, 0.1f);
  EXPECT_EQ(cache.size(), 3u) << "a caller's Plan is not cached";
  FusedLinear::release_cached_plans();
  EXPECT_EQ(cache.size(), 0u);
  p.poison();
  mine.execute(p.X, p.W, p.b, p.Y);  // unaffected by the release
  EXPECT_TRUE(matches_reference(p, 4, 0.1, p.Y));
  // Bounded: the least recently used plans go; every call still computes right.
  const std::size_t limit = FusedLinear::cached_plans_limit();
  EXPECT_GE(limit, 40u) << "a model of 40 layers of distinct shapes keeps its plans";
  for (int i = 0; i < int(limit) + 8; ++i) {
    p.poison();
    FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, float(i + 1), 0.1f,
                                   options(Algorithm::FusedSkinny, Precision::Strict, 2));
    if (i % 10 == 0) EXPECT_TRUE(matches_reference(p, double(i + 1), 0.1, p.Y)) << i;
  }
  EXPECT_EQ(cache.size(), limit);
  // A lower limit drops the least recently used plans at once; the most recent one stays.
  FusedLinear::set_cached_plans_limit(3);
  EXPECT_EQ(cache.size(), 3u);
  p.poison();
  FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, float(limit + 8), 0.1f,
                                 options(Algorithm::FusedSkinny, Precision::Strict, 2));
  EXPECT_TRUE(matches_reference(p, double(limit + 8), 0.1, p.Y));
  EXPECT_EQ(cache.size(), 3u) << "found, not made again";
  EXPECT_THROW(FusedLinear::set_cached_plans_limit(0), std::invalid_argument);
  EXPECT_EQ(FusedLinear::cached_plans_limit(), 3u);
  FusedLinear::set_cached_plans_limit(limit);
  FusedLinear::release_cached_plans();
  EXPECT_EQ(cache.size(), 0u);
  // Calls after a release make their plans again.
  p.poison();
  FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f,
                                 options(Algorithm::FusedSkinny, Precision::Strict, 2));
  EXPECT_TRUE(matches_reference(p, 2, 0.1, p.Y));
  EXPECT_EQ(cache.size(), 1u);
}

}  // namespace
