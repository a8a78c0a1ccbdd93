// SPDX-License-Identifier: Apache-2.0
// Measured plans: under a fake clock (Tuning::measure_clock, Measuring.hpp) they pick
// the fastest candidate, list every candidate, compute right and never run a refused path; with
// the real clock they compute right and leave the inputs alone; Estimate and explicit paths
// measure nothing; the one-shot call measures its cached plan once.
#include <array>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "Measuring.hpp"

namespace {

using namespace FusedLinearTest;
using namespace FusedLinearTest::Measuring;
using FusedLinear::Measurement;
using Impl::Choice;
using Impl::Facts;
using Impl::Shape;

/// Checks what a measured plan lists: every candidate (every cuBLASLt variant of vendor_lt),
/// each served by this build and meeting the floor, one chosen (the path the plan runs), and
/// that the clock was asked at most 2 + timed_calls times per entry (`clock_calls` < 0: the
/// real clock).
void expect_measurements(const PlanType& plan, const P& p, Precision floor, int clock_calls) {
  const auto& ms = plan.measurements();
  const auto want = candidates_for(p, floor);
  EXPECT_EQ(paths_of([&] {
              std::vector<Choice> c;
              for (const Measurement& m : ms) c.push_back({m.algorithm, m.precision, m.variant});
              return c;
            }()),
            paths_of(want));
  const Facts f = facts_of(ExecSpace(), p.X, p.W, p.b, p.Y);
  int chosen = 0, calls = 0;
  for (const Measurement& m : ms) {
    const std::string what = std::string(FusedLinear::to_string(m.algorithm)) + "/" +
                             FusedLinear::to_string(m.precision) + " #" + std::to_string(m.variant);
    EXPECT_TRUE(serves(options(m.algorithm, m.precision), f, Shape{p.M, p.K, p.N})) << what;
    EXPECT_TRUE(Impl::meets_floor(m.precision, floor)) << what;
    // Under the real clock the budget may leave the last candidates untimed (listed, time
    // infinite); the fake clock times them all.
    if (clock_calls >= 0 || m.calls > 0)
      EXPECT_GE(m.calls, 1) << what;
    else
      EXPECT_EQ(m.ms, std::numeric_limits<double>::infinity()) << what;
    EXPECT_EQ(m.bound_ms, Impl::compute_bound_ms({m.algorithm, m.precision, m.variant},
                                                 Shape{p.M, p.K, p.N}, f))
        << what;
    EXPECT_GE(m.setup_ms, 0) << what;
    if (m.calls == 0) EXPECT_EQ(m.setup_ms, 0) << what;
    EXPECT_LE(m.calls, 2 + 2 * Impl::MeasureRule::timed_calls) << what << ", re-timed included";
    calls += m.calls;
    if (m.chosen) {
      ++chosen;
      EXPECT_EQ(m.algorithm, plan.info().algorithm) << what;
      EXPECT_EQ(m.precision, plan.info().precision) << what;
      // The fastest, or the rule's choice (listed first) within the margin of it; a real clock's
      // re-timed pair is timed apart from the others, whose calls it is not compared with.
      const double margin = &m == &ms.front() ? 1 + Impl::MeasureRule::rule_margin : 1.0;
      if (clock_calls >= 0)
        for (const Measurement& other : ms) EXPECT_LE(m.ms, margin * other.ms) << what;
    }
  }
  EXPECT_EQ(chosen, 1);
  if (clock_calls >= 0) EXPECT_EQ(calls, clock_calls) << "every timed call went through the clock";
}

// A measured plan runs the fastest candidate, whichever it is; lists them all; computes right.
TEST(Planning, MeasuredPlanPicksTheFastestCandidate) {
  P p(64, 1024, 300, 11);  // several candidates at every floor, GPUs' cost model's too
  for (Precision floor : all_precisions) {
    const auto cands = candidates_for(p, floor);
    ASSERT_GE(cands.size(), 2u) << "a shape with one candidate is not measured";
    for (std::size_t target = 0; target < cands.size(); ++target) {
      FusedLinear::forget_wisdom();
      FakeClock::times.clear();
      for (std::size_t i = 0; i < cands.size(); ++i)
        FakeClock::times[{cands[i].algorithm, cands[i].precision}] =
            i == target ? 1.0 : 1.5 + 0.25 * double(i);
      FakeClock::calls = 0;
      PlanType plan(ExecSpace(), p.X, p.W, p.b, p.Y, 2.f, 0.1f, measured(floor));
      const RunInfo& info = plan.info();
      const std::string what = describe(measured(floor), info);
      EXPECT_TRUE(info.measured) << what;
      EXPECT_FALSE(info.from_wisdom) << what;
      EXPECT_EQ(info.algorithm, cands[target].algorithm) << what;
      EXPECT_EQ(info.precision, cands[target].precision) << what;
      if (info.precision != floor) EXPECT_TRUE(contains(info.note, "floor")) << what;
      EXPECT_GT(FakeClock::calls, 0);
      expect_measurements(plan, p, floor, FakeClock::calls);
      p.poison();
      plan.execute(p.X, p.W, p.b, p.Y);
      EXPECT_TRUE(matches_reference(p, 2, 0.1, p.Y, product_rounding(info, p.K))) << what;
    }
  }
  FusedLinear::forget_wisdom();
}

// With the real clock: measured plans compute right at shapes of every regime, for every floor,
// and measuring (which runs the candidates on the plan's Views) leaves X, W and b unchanged. A
// plan with one candidate and nothing to choose within it (GPUs' cost model may leave one at
// small shapes) times nothing and says so; 64x1024x300 has several everywhere.
TEST(Planning, MeasuredPlansComputeRightAndLeaveTheInputs) {
  for (auto shape : {std::array<std::int64_t, 3>{1, 64, 33},
                     {37, 300, 70},
                     {64, 1024, 300},
                     {130, 129, 65},
                     {0, 8, 8},
                     {8, 0, 8}}) {
    P p(shape[0], shape[1], shape[2], 12);
    for (Precision floor : all_precisions) {
      FusedLinear::forget_wisdom();
      const HostInputs before = p.inputs();
      PlanType plan(ExecSpace(), p.X, p.W, p.b, p.Y, -1.5f, 0.2f, measured(floor, false));
      const HostInputs after = p.inputs();
      EXPECT_EQ(before.X, after.X);
      EXPECT_EQ(before.W, after.W);
      EXPECT_EQ(before.b, after.b);
      const RunInfo& info = plan.info();
      const std::string what = describe(measured(floor), info) + " at " + std::to_string(p.M) +
                               "x" + std::to_string(p.K) + "x" + std::to_string(p.N);
      const bool empty = p.M == 0 || p.N == 0 || p.K == 0;
      const auto cands = empty ? std::vector<Choice>{} : candidates_for(p, floor);
      const bool timed = cands.size() > 1 || (cands.size() == 1 && Impl::has_variants(cands[0]));
      EXPECT_EQ(info.measured, timed) << what;
      EXPECT_EQ(plan.measurements().empty(), !timed) << what;
      if (timed) expect_measurements(plan, p, floor, -1);
      if (timed && floor == Precision::Strict) {
        std::printf("[ info     ] %s measured:", what.c_str());
        for (const Measurement& m : plan.measurements())
          std::printf(" %s/%s#%d %.4f ms (%d calls)%s;", FusedLinear::to_string(m.algorithm),
                      FusedLinear::to_string(m.precision), m.variant, m.ms, m.calls,
                      m.chosen ? " chosen" : "");
        std::printf("\n");
      }
      for (const Measurement& m : plan.measurements())
        EXPECT_TRUE(m.calls == 0 || m.ms >= 0) << what;
      for (int round = 0; round < 2; ++round) {
        p.randomize(100 + std::uint64_t(round));
        p.poison();
        plan.execute(p.X, p.W, p.b, p.Y);
        EXPECT_TRUE(matches_reference(p, -1.5, double(0.2f), p.Y, product_rounding(info, p.K)))
            << what;
      }
    }
  }
  FusedLinear::forget_wisdom();
}

// On a GPU whose fp32 peak is known, at a 3xtf32 floor where fused_sm90 runs well under fp32's
// compute bound, no strict candidate is timed: the cost model leaves them out, or they are listed
// with their bound, past the best time, and not run.
TEST(Planning, StrictCandidatesPastTheBoundAreNotTimed) {
  P p(512, 4096, 4096, 14);
  const Facts f = facts_of(ExecSpace(), p.X, p.W, p.b, p.Y);
  if (!f.fp32_bound || f.sm90_tf32x3 != nullptr)
    GTEST_SKIP() << "no fp32 bound or no fused_sm90 for this execution space";
  FusedLinear::forget_wisdom();
  PlanType plan(ExecSpace(), p.X, p.W, p.b, p.Y, 2.f, 0.1f, measured(Precision::TF32x3, false));
  const Shape shape{p.M, p.K, p.N};
  double chosen = std::numeric_limits<double>::infinity();
  for (const Measurement& m : plan.measurements())
    if (m.chosen) chosen = m.ms;
  EXPECT_EQ(plan.info().precision, Precision::TF32x3);
  int strict = 0;
  for (const Measurement& m : plan.measurements()) {
    const std::string what = std::string(FusedLinear::to_string(m.algorithm)) + "/" +
                             FusedLinear::to_string(m.precision);
    if (m.precision != Precision::Strict) continue;
    ++strict;
    EXPECT_DOUBLE_EQ(m.bound_ms, Impl::compute_bound_ms({m.algorithm, m.precision, 0}, shape, f));
    EXPECT_GT(m.bound_ms, chosen) << what;
    EXPECT_EQ(m.calls, 0) << what << ": its bound " << m.bound_ms << " ms, the best " << chosen;
  }
  for (const Choice& c : candidates_for(p, Precision::TF32x3))
    if (c.precision == Precision::Strict) EXPECT_GT(strict, 0) << "a strict candidate not listed";
  FusedLinear::forget_wisdom();
}

// Estimate (the default) measures nothing; an explicit algorithm with nothing to choose between
// (no cuBLASLt variants) measures nothing either.
TEST(Planning, EstimateAndExplicitPathsMeasureNothing) {
  P p(37, 300, 70, 13);
  FusedLinear::forget_wisdom();
  FakeClock::calls = 0;
  Options estimate(Algorithm::Auto);
  estimate.tuning.measure_clock = &FakeClock::time;
  PlanType plain(ExecSpace(), p.X, p.W, p.b, p.Y, 2.f, 0.1f, estimate);
  EXPECT_FALSE(plain.info().measured);
  EXPECT_TRUE(plain.measurements().empty());
  Options fused = measured();
  fused.algorithm = Algorithm::Fused;
  PlanType explicit_plan(ExecSpace(), p.X, p.W, p.b, p.Y, 2.f, 0.1f, fused);
  EXPECT_FALSE(explicit_plan.info().measured);
  EXPECT_EQ(explicit_plan.info().algorithm, Algorithm::Fused);
  EXPECT_EQ(FakeClock::calls, 0);
  EXPECT_EQ(FusedLinear::wisdom_size(), 0u);
}

// The one-shot call with Planning::Measure: its cached plan is measured once; the RunInfo says so.
TEST(Planning, OneShotCallMeasures) {
  P p(64, 1024, 300, 16);
  FusedLinear::release_cached_plans();
  FusedLinear::forget_wisdom();
  FakeClock::times.clear();
  FakeClock::calls = 0;
  const RunInfo info = FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f, measured());
  EXPECT_TRUE(info.measured);
  EXPECT_TRUE(matches_reference(p, 2, 0.1, p.Y));
  const int calls = FakeClock::calls;
  EXPECT_GT(calls, 0);
  p.poison();
  const RunInfo again = FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f, measured());
  EXPECT_EQ(again.algorithm, info.algorithm);
  EXPECT_EQ(FakeClock::calls, calls) << "the cached plan is not measured again";
  EXPECT_TRUE(matches_reference(p, 2, 0.1, p.Y));
  // An Estimate call of the same arguments is another plan, not measured.
  const RunInfo estimate = FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f);
  EXPECT_FALSE(estimate.measured);
  FusedLinear::release_cached_plans();
  FusedLinear::forget_wisdom();
}

}  // namespace
