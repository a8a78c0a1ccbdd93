// SPDX-License-Identifier: Apache-2.0
// What the Planning suite's files share (TestPlanning*.cpp): the problem and plan type of its
// measured plans (one instantiation), the fake clock that Tuning::measure_clock points at, the
// options of a measured plan, and the candidates Measure times for a problem.
#ifndef FUSED_LINEAR_TEST_PLANNING_MEASURING_HPP
#define FUSED_LINEAR_TEST_PLANNING_MEASURING_HPP

#include <map>
#include <set>
#include <utility>
#include <vector>

#include "../common/TestHelpers.hpp"

namespace FusedLinearTest {
namespace Measuring {

using FusedLinear::Planning;
using P = Problem<ExecSpace, float, Kokkos::LayoutRight>;
using PlanType = FusedLinear::Plan<ExecSpace, P::Matrix, P::Matrix, P::Vector, P::Matrix>;

/// The function name the pure planning calls are given.
constexpr const char* fn = "FusedLinear::test";

/// The (algorithm, precision) pairs of a list of choices.
using PathSet = std::set<std::pair<Algorithm, Precision>>;
inline PathSet paths_of(const std::vector<Impl::Choice>& cs) {
  PathSet out;
  for (const Impl::Choice& c : cs) out.insert({c.algorithm, c.precision});
  return out;
}

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

inline Options measured(Precision p = Precision::Strict, bool fake = true) {
  Options o(Algorithm::Auto, p);
  o.planning = Planning::Measure;
  if (fake) o.tuning.measure_clock = &FakeClock::time;
  return o;
}

/// What Measure times for p's plan at the floor (zero: multiplier 0).
inline std::vector<Impl::Choice> candidates_for(const P& p, Precision floor, bool zero = false) {
  return Impl::measure_candidates({Algorithm::Auto, floor, zero}, Impl::Shape{p.M, p.K, p.N},
                                  facts_of(ExecSpace(), p.X, p.W, p.b, p.Y), fn);
}

}  // namespace Measuring
}  // namespace FusedLinearTest

#endif
