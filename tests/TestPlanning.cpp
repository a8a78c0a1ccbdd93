// SPDX-License-Identifier: Apache-2.0
// Planning::Measure and wisdom: the candidates Measure times (pure, under hand-made
// facts), the measured choice entering the pure dispatch, the timing rule; measured plans under
// a fake clock (Tuning::measure_clock) pick the fastest candidate, list every candidate, compute
// right and never run a refused path; with the real clock they compute right and leave the
// inputs alone; wisdom: a second plan measures nothing, the text round trip, malformed input
// refused with nothing changed, imported choices used (and ignored where they are not
// candidates).
#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "TestHelpers.hpp"

namespace {

using namespace FusedLinearTest;
using FusedLinear::Measurement;
using FusedLinear::Planning;
using Impl::Choice;
using Impl::Facts;
using Impl::Request;
using Impl::Shape;
using P = Problem<ExecSpace, float, Kokkos::LayoutRight>;
using PlanType = FusedLinear::Plan<ExecSpace, P::Matrix, P::Matrix, P::Vector, P::Matrix>;

constexpr const char* fn = "FusedLinear::test";

// ------------------------------------------------------------------ hand-made facts

Facts host_optimized() {
  Facts f;
  f.backend = Impl::Backend::Host;
  f.blas = Gemm::HostBlas;
  f.host_blas = Impl::HostBlas::Optimized;
  f.cublaslt = f.cublaslt_bias = false;
  f.sm90_tf32x3 = f.sm90_skinny = "is not in this build";
  return f;
}
Facts hopper() {
  Facts f;
  f.backend = Impl::Backend::Cuda;
  f.blas = Gemm::Cublas;
  f.cublaslt = f.cublaslt_bias = true;
  f.sm90_tf32x3 = f.sm90_skinny = nullptr;
  f.multiprocessors = 132;
  return f;
}

using PathSet = std::set<std::pair<Algorithm, Precision>>;
PathSet paths_of(const std::vector<Choice>& cs) {
  PathSet out;
  for (const Choice& c : cs) out.insert({c.algorithm, c.precision});
  return out;
}
PathSet strict_paths(std::initializer_list<Algorithm> as) {
  PathSet out;
  for (Algorithm a : as) out.insert({a, Precision::Strict});
  return out;
}

// Measure times every path the dispatch serves at a precision meeting the floor, each once,
// the rule's choice first; refused and duplicate (fallback) paths are not candidates.
TEST(Planning, CandidatesAreThePathsTheDispatchServes) {
  const Shape host_shape{37, 300, 70};
  const auto host = Impl::measure_candidates({Algorithm::Auto, Precision::Strict, false},
                                             host_shape, host_optimized(), fn);
  EXPECT_EQ(paths_of(host), strict_paths({Algorithm::Fused, Algorithm::FusedSkinny,
                                          Algorithm::Vendor, Algorithm::VendorPrefill}));
  EXPECT_EQ(host.size(), 4u) << "each path once (vendor_lt runs vendor on the host)";
  EXPECT_EQ(host[0].algorithm, Impl::strict_auto(host_shape, host_optimized()))
      << "the rule's choice first";
  // No path computes tf32 on the host: the floor gives strict paths only.
  EXPECT_EQ(paths_of(Impl::measure_candidates({Algorithm::Auto, Precision::TF32, false}, host_shape,
                                              host_optimized(), fn)),
            paths_of(host));
  // Multiplier 0: vendor_prefill runs vendor, so it is no candidate of its own.
  EXPECT_EQ(paths_of(Impl::measure_candidates({Algorithm::Auto, Precision::Strict, true},
                                              host_shape, host_optimized(), fn)),
            strict_paths({Algorithm::Fused, Algorithm::FusedSkinny, Algorithm::Vendor}));

  const Shape big{1024, 8192, 8192};
  const PathSet strict =
      strict_paths({Algorithm::Vendor, Algorithm::VendorPrefill, Algorithm::VendorLt,
                    Algorithm::Fused, Algorithm::FusedSkinny, Algorithm::SkinnySm90});
  const auto s =
      Impl::measure_candidates({Algorithm::Auto, Precision::Strict, false}, big, hopper(), fn);
  EXPECT_EQ(paths_of(s), strict);
  EXPECT_EQ(s[0].algorithm, Algorithm::VendorLt);
  PathSet x3 = strict;
  // 3xtf32's cuBLASLt products are one candidate (vendor_lt), whatever vendor path runs them.
  for (Algorithm a : {Algorithm::VendorLt, Algorithm::FusedSm90}) x3.insert({a, Precision::TF32x3});
  const auto t3 =
      Impl::measure_candidates({Algorithm::Auto, Precision::TF32x3, false}, big, hopper(), fn);
  EXPECT_EQ(paths_of(t3), x3);
  EXPECT_EQ(t3[0].algorithm, Algorithm::FusedSm90);
  PathSet tf = x3;
  for (Algorithm a : {Algorithm::Vendor, Algorithm::VendorPrefill, Algorithm::VendorLt})
    tf.insert({a, Precision::TF32});
  const auto t1 =
      Impl::measure_candidates({Algorithm::Auto, Precision::TF32, false}, big, hopper(), fn);
  EXPECT_EQ(paths_of(t1), tf);
  EXPECT_EQ(t1[0].algorithm, Algorithm::VendorLt);
  EXPECT_EQ(t1[0].precision, Precision::TF32);

  // Each candidate is served as an explicit request, as the path it is, at the floor or above.
  for (Precision floor : all_precisions)
    for (const Choice& c :
         Impl::measure_candidates({Algorithm::Auto, floor, false}, big, hopper(), fn)) {
      const Impl::Decision d = Impl::resolve({c.algorithm, c.precision, false}, big, hopper(), fn);
      EXPECT_EQ(d.algorithm, c.algorithm);
      EXPECT_EQ(d.precision, c.precision);
      EXPECT_TRUE(Impl::meets_floor(c.precision, floor));
    }
  // An explicit request is its own single candidate; a refused request is refused.
  const auto one =
      Impl::measure_candidates({Algorithm::VendorLt, Precision::Strict, false}, big, hopper(), fn);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].algorithm, Algorithm::VendorLt);
  EXPECT_THROW(
      Impl::measure_candidates({Algorithm::FusedSm90, Precision::Strict, false}, big, hopper(), fn),
      std::invalid_argument);
  Facts doubles = hopper();
  doubles.float_views = false;
  EXPECT_THROW(
      Impl::measure_candidates({Algorithm::Auto, Precision::TF32, false}, big, doubles, fn),
      std::invalid_argument);
}

// The measured choice enters the dispatch as part of the request: resolve runs it, checked as an
// explicit request, so a refused or too-inaccurate choice is refused, never run.
TEST(Planning, MeasuredChoiceEntersThePureDispatch) {
  const Shape s{37, 300, 70};
  const auto with = [](Request r, Algorithm a, Precision p, int variant = 0) {
    r.measured = Choice{a, p, variant};
    return r;
  };
  const Request strict{Algorithm::Auto, Precision::Strict, false};
  const Impl::Decision d =
      Impl::resolve(with(strict, Algorithm::Vendor, Precision::Strict), s, host_optimized(), fn);
  EXPECT_EQ(d.algorithm, Algorithm::Vendor);
  EXPECT_EQ(d.gemm, Gemm::HostBlas);
  EXPECT_TRUE(d.note.empty()) << d.note;
  // Under a tf32 floor a strict choice says so.
  const Request tf32{Algorithm::Auto, Precision::TF32, false};
  const Impl::Decision floor =
      Impl::resolve(with(tf32, Algorithm::Vendor, Precision::Strict), s, hopper(), fn);
  EXPECT_EQ(floor.precision, Precision::Strict);
  EXPECT_TRUE(contains(floor.note, "floor")) << floor.note;
  EXPECT_TRUE(contains(floor.note, "measured")) << floor.note;
  // Refused: a path this build cannot run, a precision below the floor.
  EXPECT_THROW(Impl::resolve(with(strict, Algorithm::SkinnySm90, Precision::Strict), s,
                             host_optimized(), fn),
               std::invalid_argument);
  EXPECT_THROW(Impl::resolve(with(strict, Algorithm::VendorLt, Precision::TF32), s, hopper(), fn),
               std::invalid_argument);
  // cuBLASLt's variant reaches the decision for vendor_lt's single product only.
  EXPECT_EQ(Impl::resolve(with(strict, Algorithm::VendorLt, Precision::Strict, 2), s, hopper(), fn)
                .lt_variant,
            2);
  const Request x3{Algorithm::Auto, Precision::TF32x3, false};
  EXPECT_EQ(Impl::resolve(with(x3, Algorithm::VendorLt, Precision::TF32x3, 2), s, hopper(), fn)
                .lt_variant,
            0);
  const Request explicit_lt{Algorithm::VendorLt, Precision::Strict, false};
  EXPECT_EQ(
      Impl::resolve(with(explicit_lt, Algorithm::VendorLt, Precision::Strict, 3), s, hopper(), fn)
          .lt_variant,
      3);
  EXPECT_EQ(Impl::resolve(strict, s, hopper(), fn).lt_variant, 0);
}

// The timing rule: a warm-up, then timed calls whose lower median counts; a candidate that cannot
// win is dropped early.
TEST(Planning, TimingRule) {
  using Rule = Impl::MeasureRule;
  const auto run = [](std::vector<double> times, double best,
                      double retry_factor = Rule::warmup_retry_factor, int min_timed = 1) {
    std::vector<int> asked;
    const Impl::Timing t = Impl::time_candidate(
        [&](int call) {
          asked.push_back(call);
          return times.at(std::size_t(call));
        },
        best, retry_factor, min_timed);
    EXPECT_EQ(int(asked.size()), t.calls);
    for (std::size_t i = 0; i < asked.size(); ++i) EXPECT_EQ(asked[i], int(i));
    return t;
  };
  // A warm-up, then `n` calls of `ms` with the fastest `fastest` in the middle.
  const auto calls = [](double warmup, int n, double ms, double fastest) {
    std::vector<double> out(1 + std::size_t(n), ms);
    out[0] = warmup;
    out[1 + std::size_t(n) / 2] = fastest;
    return out;
  };
  const double inf = std::numeric_limits<double>::infinity();
  ASSERT_LT(Rule::timed_calls * 0.1, Rule::enough_ms);
  // The first candidate, a small layer: every timed call (their sum stays short); its time
  // is what its calls take, their lower median, not its one lucky call.
  Impl::Timing t = run(calls(0.9, Rule::timed_calls, 0.1, 0.08), inf);
  EXPECT_EQ(t.calls, 1 + Rule::timed_calls);
  EXPECT_EQ(t.ms, 0.1);
  // Calls spread wide (two launches, say) against steady ones: the steady candidate wins,
  // though the spread one's fastest call is the fastest of all.
  std::vector<double> spread = calls(0.1, Rule::timed_calls, 0.12, 0.08);
  for (std::size_t i = 1; i < spread.size(); i += 4) spread[i] = 0.09;  // 4 of 10 calls fast
  t = run(spread, 0.1);
  EXPECT_EQ(t.calls, 1 + Rule::timed_calls);
  EXPECT_EQ(t.ms, 0.12) << "behind the steady 0.1";
  t = run({0.1, 0.5, 0.4, 0.3, 0.6}, inf);  // 4 timed calls to enough_ms: the lower middle one
  EXPECT_GE(0.5 + 0.4 + 0.3 + 0.6, Rule::enough_ms);
  EXPECT_EQ(t.calls, 5);
  EXPECT_EQ(t.ms, 0.4);
  t = run({0.1, 0.5, 0.4, 0.7}, inf);  // 3: the middle one
  EXPECT_EQ(t.calls, 4);
  EXPECT_EQ(t.ms, 0.5);
  t = run({3.0, 2.5}, inf);  // a long call is enough alone
  EXPECT_GE(2.5, Rule::enough_ms);
  EXPECT_EQ(t.calls, 2);
  EXPECT_EQ(t.ms, 2.5);
  t = run({1.0, 0.8, 0.7}, inf);  // timed until the calls add up to enough_ms
  EXPECT_GE(0.8 + 0.7, Rule::enough_ms);
  EXPECT_EQ(t.calls, 3);
  EXPECT_EQ(t.ms, 0.7);
  t = run({3.0}, 1.0);  // warm-up over 2 x 1.0 + 0.5: dropped after it
  EXPECT_EQ(t.calls, 1);
  EXPECT_EQ(t.ms, 3.0);
  t = run({0.2, 0.13, 0.01}, 0.1);  // first timed call over 1.25 x the best: dropped
  EXPECT_EQ(t.calls, 2);
  EXPECT_EQ(t.ms, 0.13);
  t = run(calls(0.1, Rule::timed_calls, 0.11, 0.09), 0.1);  // close: timed in full
  EXPECT_EQ(t.calls, 1 + Rule::timed_calls);
  EXPECT_EQ(t.ms, 0.11);
  t = run(calls(0.1, Rule::timed_calls, 0.09, 0.11), 0.1);  // and faster
  EXPECT_EQ(t.ms, 0.09);
  // A warm-up far behind (a library's one-time set-up) gets a second one before it counts.
  std::vector<double> slow_first = calls(60.0, Rule::timed_calls, 0.1, 0.09);
  slow_first.insert(slow_first.begin() + 1, 0.11);
  t = run(slow_first, 0.1);
  EXPECT_GT(60.0, Rule::warmup_retry_factor * 0.1 + Rule::warmup_drop_slack_ms);
  EXPECT_EQ(t.calls, 2 + Rule::timed_calls);
  EXPECT_EQ(t.ms, 0.1);
  EXPECT_NEAR(t.timed_ms, 0.09 + (Rule::timed_calls - 1) * 0.1, 1e-12)
      << "the warm-ups are not timed calls";
  // A warm-up behind by a module's lazy load (5 ms) at a mid-size layer: a first variant's is
  // taken as its speed, a later cuBLASLt variant's (another kernel) gets a second warm-up.
  std::vector<double> loaded_first = calls(6.0, Rule::timed_calls, 1.0, 0.9);
  loaded_first.insert(loaded_first.begin() + 1, 1.1);
  EXPECT_GT(6.0, Rule::warmup_drop_factor * 1.0 + Rule::warmup_drop_slack_ms);
  EXPECT_LT(6.0, Rule::warmup_retry_factor * 1.0 + Rule::warmup_drop_slack_ms);
  t = run(loaded_first, 1.0);
  EXPECT_EQ(t.calls, 1);
  EXPECT_EQ(t.ms, 6.0);
  t = run(loaded_first, 1.0, Rule::variant_retry_factor);
  EXPECT_EQ(t.calls, 2 + 2) << "two warm-ups, then timed calls of 1.1 and 1.0 (enough_ms)";
  EXPECT_EQ(t.ms, 1.0);
  t = run({60.0, 50.0}, 0.1);  // slow twice: dropped
  EXPECT_EQ(t.calls, 2);
  EXPECT_EQ(t.ms, 50.0);
  t = run({1.0}, 0.1);  // behind, yet not by a one-time cost: dropped after one warm-up
  EXPECT_EQ(t.calls, 1);
  // The host's least number of timed calls: one stalled call (8 ms at a 0.03 ms layer), enough
  // alone, is passed over by the median of three...
  const int host = Rule::host_min_timed_calls;
  ASSERT_EQ(host, 3);
  t = run({0.03, 8.0}, inf);
  EXPECT_EQ(t.calls, 2);
  EXPECT_EQ(t.ms, 8.0) << "one timed call where stalls do not reach the timer (GPU events)";
  t = run({0.03, 8.0, 0.03, 0.031}, inf, Rule::warmup_retry_factor, host);
  EXPECT_EQ(t.calls, 1 + host);
  EXPECT_EQ(t.ms, 0.031);
  // ... and a candidate behind is dropped by the median of those, not by its first call.
  std::vector<double> slow_once = calls(0.1, Rule::timed_calls, 0.1, 0.09);
  slow_once[1] = 0.2;
  t = run(slow_once, 0.1, Rule::warmup_retry_factor, host);
  EXPECT_EQ(t.calls, 1 + Rule::timed_calls) << "a slow first call alone does not drop it";
  EXPECT_EQ(t.ms, 0.1);
  t = run({0.2, 0.13, 0.14, 0.2, 0.01}, 0.1, Rule::warmup_retry_factor, host);
  EXPECT_EQ(t.calls, 1 + host);
  EXPECT_EQ(t.ms, 0.14);
}

// The bound: strict fp32 cannot beat the CUDA cores' peak; nothing is known of the tensor-core
// precisions or the host.
TEST(Planning, ComputeBound) {
  Facts h200 = hopper();
  h200.fp32_gflops = 132 * 128 * 2 * 1.98;  // 132 SMs at 1.98 GHz
  const Shape seed{1024, 8192, 8192};
  EXPECT_NEAR(Impl::compute_bound_ms({Algorithm::Vendor, Precision::Strict, 0}, seed, h200), 2.054,
              1e-3);
  EXPECT_EQ(Impl::compute_bound_ms({Algorithm::FusedSm90, Precision::TF32x3, 0}, seed, h200), 0);
  EXPECT_EQ(Impl::compute_bound_ms({Algorithm::VendorLt, Precision::TF32, 0}, seed, h200), 0);
  EXPECT_EQ(Impl::compute_bound_ms({Algorithm::Vendor, Precision::Strict, 0}, seed, hopper()), 0)
      << "no peak known";
  EXPECT_EQ(
      Impl::compute_bound_ms({Algorithm::Vendor, Precision::Strict, 0}, seed, host_optimized()), 0);
}

// time_candidates with made-up candidates and times: one whose bound is not below the best so
// far is listed untimed, as are those past the budget (a one-time cost of a warm-up does not
// use it up); the fake clock's timing (real_clock false) times them all.
struct MadeUpCandidate {
  int count = 1;
  int variants() const { return count; }
  void select(int) {}
};
TEST(Planning, BoundAndBudgetLeaveCandidatesUntimed) {
  using Rule = Impl::MeasureRule;
  const Choice sm90{Algorithm::FusedSm90, Precision::TF32x3, 0};
  const Choice lt3{Algorithm::VendorLt, Precision::TF32x3, 0};
  const Choice vendor{Algorithm::Vendor, Precision::Strict, 0};
  const Choice lt{Algorithm::VendorLt, Precision::Strict, 0};
  std::map<Algorithm, double> ms = {{Algorithm::FusedSm90, 1.0},
                                    {Algorithm::Vendor, 2.8},
                                    {Algorithm::VendorLt, 2.1}};  // lt3; lt gets 2.7 below
  int calls = 0;
  const auto make = [](const Choice& c) {
    auto out = std::make_unique<MadeUpCandidate>();
    out->count = c.algorithm == Algorithm::VendorLt && c.precision == Precision::Strict ? 3 : 1;
    return out;
  };
  const auto call = [&](const MadeUpCandidate&, const Choice& c, int variant, int i) {
    ++calls;
    if (i == 0 && c.algorithm == Algorithm::VendorLt) return 90.0;  // a handle made
    return c.precision == Precision::Strict && c.algorithm == Algorithm::VendorLt
               ? 2.7 + variant
               : ms.at(c.algorithm);
  };
  const auto bound = [](const Choice& c) { return c.precision == Precision::Strict ? 2.05 : 0.0; };
  const std::vector<Choice> cands = {sm90, lt3, vendor, lt};
  for (const bool real : {true, false}) {
    calls = 0;
    const auto f = Impl::time_candidates<MadeUpCandidate>(cands, real, make, call, bound);
    ASSERT_TRUE(f.plan);
    EXPECT_EQ(f.choice.algorithm, Algorithm::FusedSm90);
    EXPECT_EQ(f.ms, 1.0);
    ASSERT_EQ(f.timed.size(), real ? 4u : 6u) << "a candidate not set up lists no variants";
    int timed_calls = 0;
    for (const Measurement& m : f.timed) {
      const bool strict = m.precision == Precision::Strict;
      EXPECT_EQ(m.bound_ms, strict ? 2.05 : 0.0);
      if (real && strict) {
        EXPECT_EQ(m.calls, 0) << "past the bound: cannot beat 1.0 ms";
        EXPECT_EQ(m.ms, std::numeric_limits<double>::infinity());
        EXPECT_EQ(m.setup_ms, 0);
      } else {
        EXPECT_GE(m.calls, 1);
        EXPECT_GE(m.setup_ms, 0);
      }
      timed_calls += m.calls;
    }
    EXPECT_EQ(timed_calls, calls);
    EXPECT_EQ(f.timed[1].calls, 3) << "vendor_lt 3xtf32: a second warm-up after a one-time cost";
    if (!real) {
      // cuBLASLt's next algorithms after every path.
      EXPECT_EQ(f.timed[3].algorithm, Algorithm::VendorLt);
      EXPECT_EQ(f.timed[3].variant, 0);
      EXPECT_EQ(f.timed[4].variant, 1);
      EXPECT_EQ(f.timed[5].variant, 2);
    }
  }

  // A later variant that wins: its candidate, freed after its first variant lost, is set up
  // again, and it becomes the plan with that variant selected.
  {
    int made = 0, selected = -1;
    struct Tracked : MadeUpCandidate {
      int* selected = nullptr;
      void select(int v) { *selected = v; }
    };
    const auto make_tracked = [&](const Choice& c) {
      ++made;
      auto out = std::make_unique<Tracked>();
      out->count = c.algorithm == Algorithm::VendorLt ? 2 : 1;
      out->selected = &selected;
      return out;
    };
    // The second variant's first call loads its kernel's module (5 ms), as on a GPU.
    const auto two = [](const Tracked&, const Choice& c, int variant, int i) {
      return c.algorithm == Algorithm::Vendor ? 2.0 : variant == 0 ? 2.5 : i == 0 ? 6.5 : 1.5;
    };
    const auto f =
        Impl::time_candidates<Tracked>(std::vector<Choice>{vendor, lt}, true, make_tracked, two,
                                       [](const Choice&) { return 0.0; });
    ASSERT_TRUE(f.plan);
    EXPECT_EQ(f.choice.algorithm, Algorithm::VendorLt);
    EXPECT_EQ(f.choice.variant, 1);
    EXPECT_EQ(f.ms, 1.5);
    EXPECT_EQ(made, 3) << "vendor, vendor_lt, and vendor_lt again for its second variant";
    EXPECT_EQ(selected, 1) << "the plan runs the winning variant";
    ASSERT_EQ(f.timed.size(), 3u);
    EXPECT_TRUE(f.timed[2].chosen);
    EXPECT_GE(f.timed[2].setup_ms, 0);
    EXPECT_GE(f.timed[2].calls, 3) << "a second warm-up after its module's load";
  }

  // The budget: candidates of 1 ms (warm-up and two timed calls each) until their calls add up
  // to budget_calls of the best (and budget_min_ms); the one-time 90 ms warm-up does not count.
  const std::vector<Choice> many(24, Choice{Algorithm::Fused, Precision::Strict, 0});
  calls = 0;
  const auto flat = [&](const MadeUpCandidate&, const Choice&, int, int i) {
    ++calls;
    return calls == 1 && i == 0 ? 90.0 : 1.0;
  };
  const auto f = Impl::time_candidates<MadeUpCandidate>(many, true, make, flat,
                                                        [](const Choice&) { return 0.0; });
  ASSERT_EQ(f.timed.size(), many.size());
  const double budget = std::max(Rule::budget_calls * 1.0, Rule::budget_min_ms);
  double spent = 0;
  for (const Measurement& m : f.timed) {
    if (spent > budget) {
      EXPECT_EQ(m.calls, 0) << "past the budget";
    } else {
      EXPECT_GE(m.calls, 3);
      EXPECT_EQ(m.ms, 1.0);
    }
    spent += m.calls * (m.calls ? m.ms : 0.0);
  }
  EXPECT_EQ(f.timed.front().calls, 3) << "the first: its warm-up (90 ms), two timed calls";
  EXPECT_EQ(f.timed.back().calls, 0) << "24 candidates of 3 calls exceed the budget";
}

// The rule's choice (the first candidate) stays unless another beats it by more than the margin;
// a later candidate then needs only to be faster than that one.
TEST(Planning, RuleChoiceStaysWithinTheMargin) {
  const double margin = Impl::MeasureRule::rule_margin;
  const Choice rule{Algorithm::Fused, Precision::Strict, 0};
  const Choice skinny{Algorithm::FusedSkinny, Precision::Strict, 0};
  const Choice vendor{Algorithm::Vendor, Precision::Strict, 0};
  const auto make = [](const Choice&) { return std::make_unique<MadeUpCandidate>(); };
  const auto no_bound = [](const Choice&) { return 0.0; };
  const auto chosen = [&](std::map<Algorithm, double> ms) {
    const auto call = [&](const MadeUpCandidate&, const Choice& c, int, int) {
      return ms.at(c.algorithm);
    };
    const auto f = Impl::time_candidates<MadeUpCandidate>(std::vector<Choice>{rule, skinny, vendor},
                                                          true, make, call, no_bound);
    EXPECT_TRUE(f.plan);
    return f.choice.algorithm;
  };
  const double close = 1.0 / (1 + margin / 2), past = 1.0 / (1 + 2 * margin);
  EXPECT_EQ(
      chosen({{Algorithm::Fused, 1.0}, {Algorithm::FusedSkinny, close}, {Algorithm::Vendor, 2.0}}),
      Algorithm::Fused);
  EXPECT_EQ(
      chosen({{Algorithm::Fused, 1.0}, {Algorithm::FusedSkinny, past}, {Algorithm::Vendor, 2.0}}),
      Algorithm::FusedSkinny);
  // Past the rule's choice, the plain fastest: vendor within the margin of fused_skinny wins.
  EXPECT_EQ(chosen({{Algorithm::Fused, 1.0},
                    {Algorithm::FusedSkinny, past},
                    {Algorithm::Vendor, past * (1 - margin / 4)}}),
            Algorithm::Vendor);
  // No margin for a candidate that is not the rule's, even within it of the rule's time.
  EXPECT_EQ(chosen({{Algorithm::Fused, 1.1},
                    {Algorithm::FusedSkinny, 1.0},
                    {Algorithm::Vendor, 1.0 * (1 - margin / 4)}}),
            Algorithm::Vendor);
}

TEST(Planning, Names) {
  EXPECT_STREQ(FusedLinear::to_string(Planning::Estimate), "estimate");
  EXPECT_STREQ(FusedLinear::to_string(Planning::Measure), "measure");
  EXPECT_EQ(FusedLinear::planning_from_string("measure"), Planning::Measure);
  EXPECT_THROW(FusedLinear::planning_from_string("patient"), std::invalid_argument);
  EXPECT_EQ(Options().planning, Planning::Estimate) << "Estimate is the default";
}

// ------------------------------------------------------------------ the fake clock

/// The clock Tuning::measure_clock points at: each path's time from `times` (default 10 ms),
/// plus 0.01 ms per cuBLASLt variant; counts the calls it times.
struct FakeClock {
  static inline std::map<std::pair<Algorithm, Precision>, double> times;
  static inline int calls = 0;
  static double time(Algorithm a, Precision p, int variant, int call, double measured) {
    (void)call;
    EXPECT_GE(measured, 0.0);
    ++calls;
    const auto it = times.find({a, p});
    return (it == times.end() ? 10.0 : it->second) + 0.01 * variant;
  }
};

Options measured(Precision p = Precision::Strict, bool fake = true) {
  Options o(Algorithm::Auto, p);
  o.planning = Planning::Measure;
  if (fake) o.tuning.measure_clock = &FakeClock::time;
  return o;
}

std::vector<Choice> candidates_for(const P& p, Precision floor, bool zero = false) {
  return Impl::measure_candidates({Algorithm::Auto, floor, zero}, Shape{p.M, p.K, p.N},
                                  facts_of(ExecSpace(), p.X, p.W, p.b, p.Y), fn);
}

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
    EXPECT_LE(m.calls, 2 + Impl::MeasureRule::timed_calls) << what;
    calls += m.calls;
    if (m.chosen) {
      ++chosen;
      EXPECT_EQ(m.algorithm, plan.info().algorithm) << what;
      EXPECT_EQ(m.precision, plan.info().precision) << what;
      // The fastest, or the rule's choice (listed first) within the margin of it.
      const double margin = &m == &ms.front() ? 1 + Impl::MeasureRule::rule_margin : 1.0;
      for (const Measurement& other : ms) EXPECT_LE(m.ms, margin * other.ms) << what;
    }
  }
  EXPECT_EQ(chosen, 1);
  if (clock_calls >= 0) EXPECT_EQ(calls, clock_calls) << "every timed call went through the clock";
}

// A measured plan runs the fastest candidate, whichever it is; lists them all; computes right.
TEST(Planning, MeasuredPlanPicksTheFastestCandidate) {
  P p(37, 300, 70, 11);
  for (Precision floor : all_precisions) {
    const auto cands = candidates_for(p, floor);
    ASSERT_FALSE(cands.empty());
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
// and measuring (which runs the candidates on the plan's Views) leaves X, W and b unchanged.
TEST(Planning, MeasuredPlansComputeRightAndLeaveTheInputs) {
  for (auto shape : {std::array<std::int64_t, 3>{1, 64, 33},
                     {37, 300, 70},
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
      EXPECT_EQ(info.measured, !empty) << what;
      EXPECT_EQ(plan.measurements().empty(), empty) << what;
      if (!empty) expect_measurements(plan, p, floor, -1);
      if (!empty && floor == Precision::Strict) {
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
// compute bound, the strict candidates are listed with their bound and not timed.
TEST(Planning, StrictCandidatesPastTheBoundAreNotTimed) {
  P p(512, 4096, 4096, 14);
  const Facts f = facts_of(ExecSpace(), p.X, p.W, p.b, p.Y);
  if (f.fp32_gflops <= 0 || f.sm90_tf32x3 != nullptr)
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
  EXPECT_GT(strict, 0);
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

// ------------------------------------------------------------------ wisdom

std::string exported() {
  std::ostringstream os;
  FusedLinear::export_wisdom(os);
  return os.str();
}
void import_text(const std::string& text) {
  std::istringstream is(text);
  FusedLinear::import_wisdom(is);
}

// A second plan of the same kind measures nothing and runs the remembered choice; the wisdom
// survives a text round trip; a plan made from imported wisdom times nothing and runs the
// imported choice.
TEST(Planning, WisdomRoundTrip) {
  P p(37, 300, 70, 14);
  const auto cands = candidates_for(p, Precision::Strict);
  ASSERT_GE(cands.size(), 2u);
  FusedLinear::forget_wisdom();
  EXPECT_EQ(FusedLinear::wisdom_size(), 0u);
  FakeClock::times.clear();
  FakeClock::times[{cands.back().algorithm, cands.back().precision}] = 1.0;
  FakeClock::calls = 0;
  PlanType first(ExecSpace(), p.X, p.W, p.b, p.Y, 2.f, 0.1f, measured());
  EXPECT_TRUE(first.info().measured);
  EXPECT_EQ(first.info().algorithm, cands.back().algorithm);
  const int calls = FakeClock::calls;
  EXPECT_GT(calls, 0);
  EXPECT_EQ(FusedLinear::wisdom_size(), 1u);

  // Another multiplier and slope, the same kind of plan: from wisdom.
  PlanType second(ExecSpace(), p.X, p.W, p.b, p.Y, 3.f, 0.2f, measured());
  EXPECT_EQ(FakeClock::calls, calls) << "a plan made from wisdom measures nothing";
  EXPECT_TRUE(second.info().measured);
  EXPECT_TRUE(second.info().from_wisdom);
  EXPECT_TRUE(second.measurements().empty());
  EXPECT_EQ(second.info().algorithm, first.info().algorithm);
  p.poison();
  second.execute(p.X, p.W, p.b, p.Y);
  EXPECT_TRUE(matches_reference(p, 3, double(0.2f), p.Y));

  // Another shape is another key.
  P q(38, 300, 70, 15);
  PlanType other(ExecSpace(), q.X, q.W, q.b, q.Y, 2.f, 0.1f, measured());
  EXPECT_GT(FakeClock::calls, calls);
  EXPECT_FALSE(other.info().from_wisdom);
  EXPECT_EQ(FusedLinear::wisdom_size(), 2u);

  const std::string text = exported();
  EXPECT_TRUE(starts_with(text, "FusedLinear wisdom 1\n")) << text;
  EXPECT_TRUE(contains(text, "\nend\n")) << text;
  FusedLinear::forget_wisdom();
  EXPECT_EQ(FusedLinear::wisdom_size(), 0u);
  EXPECT_EQ(exported(), "FusedLinear wisdom 1\nend\n");
  import_text(text);
  EXPECT_EQ(FusedLinear::wisdom_size(), 2u);
  EXPECT_EQ(exported(), text) << "export, import, export gives the same text";

  const int before = FakeClock::calls;
  PlanType imported(ExecSpace(), p.X, p.W, p.b, p.Y, 2.f, 0.1f, measured());
  EXPECT_EQ(FakeClock::calls, before);
  EXPECT_TRUE(imported.info().from_wisdom);
  EXPECT_EQ(imported.info().algorithm, cands.back().algorithm);

  // Imported wisdom that names another candidate: that one runs, nothing timed.
  const std::string from =
      std::string("\t") + FusedLinear::to_string(cands.back().algorithm) + "\tstrict\t";
  const std::string to =
      std::string("\t") + FusedLinear::to_string(cands.front().algorithm) + "\tstrict\t";
  std::string edited;
  {
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      if (contains(line, "shape 37x300x70") && contains(line, from))
        line.replace(line.find(from), from.size(), to);
      edited += line + "\n";
    }
  }
  ASSERT_NE(edited, text);
  FusedLinear::forget_wisdom();
  import_text(edited);
  PlanType chosen(ExecSpace(), p.X, p.W, p.b, p.Y, 2.f, 0.1f, measured());
  EXPECT_EQ(FakeClock::calls, before);
  EXPECT_TRUE(chosen.info().from_wisdom);
  EXPECT_EQ(chosen.info().algorithm, cands.front().algorithm);
  p.poison();
  chosen.execute(p.X, p.W, p.b, p.Y);
  EXPECT_TRUE(matches_reference(p, 2, 0.1, p.Y));

  // Wisdom naming a path that is no candidate here (fused_sm90 never computes strict) is not
  // run: the plan measures.
  std::string bogus;
  {
    std::istringstream lines(edited);
    for (std::string line; std::getline(lines, line);) {
      if (contains(line, "shape 37x300x70") && contains(line, to))
        line.replace(line.find(to), to.size(), "\tfused_sm90\tstrict\t");
      bogus += line + "\n";
    }
  }
  FusedLinear::forget_wisdom();
  import_text(bogus);
  PlanType remeasured(ExecSpace(), p.X, p.W, p.b, p.Y, 2.f, 0.1f, measured());
  EXPECT_GT(FakeClock::calls, before);
  EXPECT_FALSE(remeasured.info().from_wisdom);
  EXPECT_EQ(remeasured.info().algorithm, cands.back().algorithm);
  FusedLinear::forget_wisdom();
}

// Malformed wisdom is refused, naming the function and the line, and changes nothing.
TEST(Planning, MalformedWisdomIsRefusedAndChangesNothing) {
  FusedLinear::forget_wisdom();
  import_text("FusedLinear wisdom 1\nentry\tsome key\tfused\tstrict\t0\t1.5\nend\n");
  const std::string before = exported();
  ASSERT_EQ(FusedLinear::wisdom_size(), 1u);
  const std::string head = "FusedLinear wisdom 1\n";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "empty"},
      {"not wisdom\n", "not FusedLinear wisdom"},
      {"FusedLinear wisdom 2\nend\n", "version"},
      {head, "truncated"},
      {head + "entry\tk2\tfused\tstrict\t0\t1\n", "truncated"},
      {head + "entry\tk2\tfused\tstrict\t0\nend\n", "tabs"},
      {head + "entry\tk2\tfused\tstrict\t0\t1\t7\nend\n", "tabs"},
      {head + "item\tk2\tfused\tstrict\t0\t1\nend\n", "tabs"},
      {head + "entry\t\tfused\tstrict\t0\t1\nend\n", "empty key"},
      {head + "entry\tk2\tfastest\tstrict\t0\t1\nend\n", "unknown algorithm"},
      {head + "entry\tk2\tfused\tfp16\t0\t1\nend\n", "unknown precision"},
      {head + "entry\tk2\tauto\tstrict\t0\t1\nend\n", "not auto"},
      {head + "entry\tk2\tfused\tstrict\t-1\t1\nend\n", "variant"},
      {head + "entry\tk2\tfused\tstrict\tx\t1\nend\n", "variant"},
      {head + "entry\tk2\tfused\tstrict\t0\tnan\nend\n", "milliseconds"},
      {head + "entry\tk2\tfused\tstrict\t0\t1ms\nend\n", "milliseconds"},
      {head + "entry\tk2\tfused\tstrict\t0\t-2\nend\n", "milliseconds"},
      {head + "entry\tk2\tfused\tstrict\t0\t1\nend\nentry\tk3\tfused\tstrict\t0\t1\n",
       "after \"end\""},
  };
  for (const auto& [text, why] : bad) {
    try {
      import_text(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const std::invalid_argument& e) {
      EXPECT_TRUE(starts_with(e.what(), "FusedLinear::import_wisdom: line ")) << e.what();
      EXPECT_TRUE(contains(e.what(), why)) << e.what() << " (expected: " << why << ")";
    }
    EXPECT_EQ(exported(), before) << "a refused import changed the wisdom: " << text;
  }
  // A well-formed import adds, replacing entries of the same key.
  import_text(head +
              "entry\tsome key\tvendor\tstrict\t0\t1\nentry\tk2\tfused\tstrict\t0\t1\nend\n");
  EXPECT_EQ(FusedLinear::wisdom_size(), 2u);
  EXPECT_TRUE(contains(exported(), "some key\tvendor\t"));
  FusedLinear::forget_wisdom();
  EXPECT_EQ(FusedLinear::wisdom_size(), 0u);
}

// The one-shot call with Planning::Measure: its cached plan is measured once; the RunInfo says so.
TEST(Planning, OneShotCallMeasures) {
  P p(37, 300, 70, 16);
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
