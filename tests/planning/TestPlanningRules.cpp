// SPDX-License-Identifier: Apache-2.0
// Planning::Measure's pure rules, under hand-made facts (no kernel runs): the candidates it
// times, the measured choice entering the pure dispatch, the timing rule, the compute bound,
// the budget and the rule's margin, the names. (TestPlanningMeasured.cpp: measured plans;
// TestPlanningWisdom.cpp: wisdom.)
#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "Measuring.hpp"

namespace {

using namespace FusedLinearTest;
using namespace FusedLinearTest::Measuring;
using FusedLinear::Measurement;
using Impl::Choice;
using Impl::Facts;
using Impl::Request;
using Impl::Shape;

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

  // On GPUs, of the paths served, those the cost model predicts within GpuRule::measure_within
  // of its fastest (the rule's choice, first).
  const Shape big{1024, 8192, 8192};
  const auto within = [&](const PathSet& served) {
    double least = std::numeric_limits<double>::infinity();
    for (const auto& [a, p] : served)
      least = std::min(least, Impl::gpu_predicted_ms({a, p}, big, hopper()));
    PathSet kept;
    for (const auto& [a, p] : served)
      if (Impl::gpu_predicted_ms({a, p}, big, hopper()) <= Impl::GpuRule::measure_within * least)
        kept.insert({a, p});
    return kept;
  };
  const PathSet strict =
      strict_paths({Algorithm::Vendor, Algorithm::VendorPrefill, Algorithm::VendorLt,
                    Algorithm::Fused, Algorithm::FusedSkinny, Algorithm::SkinnySm90});
  const auto s =
      Impl::measure_candidates({Algorithm::Auto, Precision::Strict, false}, big, hopper(), fn);
  EXPECT_EQ(paths_of(s), within(strict));
  EXPECT_EQ(s[0].algorithm, Algorithm::VendorLt);
  // fused_skinny, predicted over twice cuBLASLt's time at this shape, is not timed.
  EXPECT_EQ(paths_of(s).count({Algorithm::FusedSkinny, Precision::Strict}), 0u);
  PathSet x3 = strict;
  // 3xtf32's cuBLASLt products are one candidate (vendor_lt), whatever vendor path runs them.
  for (Algorithm a : {Algorithm::VendorLt, Algorithm::FusedSm90}) x3.insert({a, Precision::TF32x3});
  const auto t3 =
      Impl::measure_candidates({Algorithm::Auto, Precision::TF32x3, false}, big, hopper(), fn);
  EXPECT_EQ(paths_of(t3), within(x3));
  EXPECT_EQ(t3[0].algorithm, Algorithm::FusedSm90);
  PathSet tf = x3;
  for (Algorithm a : {Algorithm::Vendor, Algorithm::VendorPrefill, Algorithm::VendorLt})
    tf.insert({a, Precision::TF32});
  const auto t1 =
      Impl::measure_candidates({Algorithm::Auto, Precision::TF32, false}, big, hopper(), fn);
  EXPECT_EQ(paths_of(t1), within(tf));
  EXPECT_EQ(t1[0].algorithm, Algorithm::VendorLt);
  EXPECT_EQ(t1[0].precision, Precision::TF32);
  // One candidate where the model puts every other path past the margin (fused_skinny, predicted
  // under two thirds of cuBLASLt's time, at 37x300x70): nothing to time.
  EXPECT_EQ(paths_of(Impl::measure_candidates({Algorithm::Auto, Precision::Strict, false},
                                              {37, 300, 70}, hopper(), fn)),
            strict_paths({Algorithm::FusedSkinny}));
  // Every path is a candidate where the model cannot tell them apart: an empty product.
  const Shape empty{0, 8192, 8192};
  EXPECT_EQ(paths_of(Impl::measure_candidates({Algorithm::Auto, Precision::Strict, false}, empty,
                                              hopper(), fn)),
            strict);

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
  h200.fp32_bound = true;
  const Shape seed{1024, 8192, 8192};
  EXPECT_NEAR(Impl::compute_bound_ms({Algorithm::Vendor, Precision::Strict, 0}, seed, h200), 2.054,
              1e-3);
  EXPECT_EQ(Impl::compute_bound_ms({Algorithm::FusedSm90, Precision::TF32x3, 0}, seed, h200), 0);
  EXPECT_EQ(Impl::compute_bound_ms({Algorithm::VendorLt, Precision::TF32, 0}, seed, h200), 0);
  EXPECT_EQ(Impl::compute_bound_ms({Algorithm::Vendor, Precision::Strict, 0}, seed, hopper()), 0)
      << "no peak known";
  Facts blackwell = h200;
  blackwell.fp32_bound = false;  // cuBLAS may run fp32 on the tensor cores
  EXPECT_EQ(Impl::compute_bound_ms({Algorithm::Vendor, Precision::Strict, 0}, seed, blackwell), 0);
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
/// A made-up candidate that records the variant last selected.
struct Tracked : MadeUpCandidate {
  int* selected = nullptr;
  void select(int v) { *selected = v; }
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

// Before another candidate replaces the rule's choice, the two are timed again, interleaved: a
// candidate whose first calls were lucky loses to the rule's choice it only seemed to beat; one
// that is faster stays chosen; a later variant of the rule's own path is timed on the rule's
// engine (kept set up while another path leads) and timed against variant 0 on it.
TEST(Planning, MeasureRetimesTheRuleAgainstTheWinner) {
  const Choice rule{Algorithm::Fused, Precision::Strict, 0};
  const Choice skinny{Algorithm::FusedSkinny, Precision::Strict, 0};
  const Choice lt{Algorithm::VendorLt, Precision::Strict, 0};
  const auto no_bound = [](const Choice&) { return 0.0; };
  int made = 0, selected = -1;
  const auto make = [&](const Choice& c) {
    ++made;
    auto out = std::make_unique<Tracked>();
    out->count = c.algorithm == Algorithm::VendorLt ? 2 : 1;
    out->selected = &selected;
    return out;
  };
  std::vector<std::pair<Algorithm, int>> log;  // each call's path and variant
  // `fast` runs 0.9 ms in its first three calls (warm-up, two timed) and `later` ms after.
  const auto run = [&](const std::vector<Choice>& cands, Choice fast, double later) {
    made = 0, selected = -1;
    log.clear();
    const auto call = [&](const Tracked&, const Choice& c, int v, int i) {
      log.emplace_back(c.algorithm, v);
      if (c.algorithm == Algorithm::Fused && cands.front().algorithm != Algorithm::Fused)
        return 0.8;
      if (c.algorithm == fast.algorithm && v == fast.variant) return i < 3 ? 0.9 : later;
      return 1.0;
    };
    return Impl::time_candidates<Tracked>(cands, true, make, call, no_bound);
  };

  {  // Lucky: 0.9 ms, then 1.1: the rule's choice stays.
    const auto f = run({rule, skinny}, skinny, 1.1);
    ASSERT_TRUE(f.plan);
    EXPECT_EQ(f.choice.algorithm, Algorithm::Fused);
    EXPECT_TRUE(f.rule);
    EXPECT_EQ(f.ms, 1.0);
    ASSERT_EQ(f.timed.size(), 2u);
    EXPECT_TRUE(f.timed[0].chosen);
    EXPECT_EQ(f.timed[1].ms, 1.1) << "the re-timed calls' lower median";
    EXPECT_EQ(f.timed[0].calls, 3 + 2) << "warm-up, two timed calls, two re-timed";
    EXPECT_EQ(f.timed[1].calls, 3 + 2);
    ASSERT_GE(log.size(), 4u);
    const std::vector<std::pair<Algorithm, int>> last(log.end() - 4, log.end());
    EXPECT_EQ(last, (std::vector<std::pair<Algorithm, int>>{{Algorithm::Fused, 0},
                                                            {Algorithm::FusedSkinny, 0},
                                                            {Algorithm::FusedSkinny, 0},
                                                            {Algorithm::Fused, 0}}))
        << "interleaved, each side first in turn";
  }
  {  // Faster throughout: it stays chosen, at its re-timed time.
    const auto f = run({rule, skinny}, skinny, 0.9);
    EXPECT_EQ(f.choice.algorithm, Algorithm::FusedSkinny);
    EXPECT_FALSE(f.rule);
    EXPECT_EQ(f.ms, 0.9);
    EXPECT_TRUE(f.timed[1].chosen);
  }
  {  // The rule's own later variant, lucky: variant 0 stays, selected on the one engine.
    const auto f = run({lt, skinny}, Choice{Algorithm::VendorLt, Precision::Strict, 1}, 1.1);
    EXPECT_EQ(f.choice.algorithm, Algorithm::VendorLt);
    EXPECT_EQ(f.choice.variant, 0);
    EXPECT_EQ(selected, 0) << "the plan runs variant 0";
    EXPECT_EQ(made, 2) << "vendor_lt's variants on the rule's engine";
  }
  {  // Another path leads (fused, 0.8): the rule's engine, kept, times its variant 1; then fused
     // is timed against variant 0 and stays chosen.
    const auto f = run({lt, rule}, Choice{Algorithm::VendorLt, Precision::Strict, 1}, 0.9);
    EXPECT_EQ(f.choice.algorithm, Algorithm::Fused);
    EXPECT_EQ(f.ms, 0.8);
    EXPECT_EQ(made, 2) << "no third set-up: the rule's engine was kept";
    ASSERT_EQ(f.timed.size(), 3u);
    EXPECT_EQ(f.timed[0].calls, 3 + 2) << "variant 0, re-timed against fused";
  }
}

TEST(Planning, Names) {
  EXPECT_STREQ(FusedLinear::to_string(Planning::Estimate), "estimate");
  EXPECT_STREQ(FusedLinear::to_string(Planning::Measure), "measure");
  EXPECT_EQ(FusedLinear::planning_from_string("measure"), Planning::Measure);
  EXPECT_THROW(FusedLinear::planning_from_string("patient"), std::invalid_argument);
  EXPECT_EQ(Options().planning, Planning::Estimate) << "Estimate is the default";
}

}  // namespace
