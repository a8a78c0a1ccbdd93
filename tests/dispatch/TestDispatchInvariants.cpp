// SPDX-License-Identifier: Apache-2.0
// What holds of every decision, whatever the rule's numbers: over the golden table's profiles
// and shapes (GoldenProfiles.hpp), every floor and every explicit algorithm, auto
// chooses a path an explicit request is served on, meets its floor, and a note appears exactly
// where what runs differs from what was asked, saying so; an empty shape runs no product.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "FusedLinear/impl/Dispatch.hpp"
#include "../common/Basics.hpp"
#include "GoldenProfiles.hpp"

namespace {

using namespace FusedLinearTest;
namespace Golden = FusedLinearGolden;
using Impl::Decision;
using Impl::Shape;

constexpr const char* fn = "FusedLinear::test";

std::string shape_name(const Shape& s) {
  return std::to_string(s.M) + "x" + std::to_string(s.K) + "x" + std::to_string(s.N);
}
std::string what(const Golden::Profile& p, const Shape& s, Algorithm a, Precision floor) {
  return std::string(p.name) + " " + shape_name(s) + ": " + FusedLinear::to_string(a) + "/" +
         FusedLinear::to_string(floor);
}

/// At least as accurate as the floor, written out apart from Impl::meets_floor: strict meets
/// every floor, 3xtf32 its own and tf32's.
bool at_least(Precision p, Precision floor) {
  return p == floor || p == Precision::Strict ||
         (p == Precision::TF32x3 && floor == Precision::TF32);
}

/// Calls f(profile, shape, floor, auto's decision) for every case of the golden table.
template <class F>
void for_each_auto(F&& f) {
  for (const Golden::Profile& p : Golden::profiles())
    for (const Shape& s : Golden::shapes())
      for (Precision floor : Golden::floors)
        f(p, s, floor, Impl::resolve({Algorithm::Auto, floor, false}, s, p.facts, fn));
}

TEST(DispatchInvariants, AutoChoicesAreServable) {
  int checked = 0;
  for_each_auto([&](const Golden::Profile& p, const Shape& s, Precision floor, const Decision& d) {
    const std::string at = what(p, s, Algorithm::Auto, floor);
    ASSERT_NE(d.algorithm, Algorithm::Auto) << at;
    try {
      const Decision asked = Impl::resolve({d.algorithm, d.precision, false}, s, p.facts, fn);
      EXPECT_EQ(asked.algorithm, d.algorithm) << at;
      EXPECT_EQ(asked.precision, d.precision) << at;
      EXPECT_EQ(asked.gemm, d.gemm) << at;
      EXPECT_TRUE(asked.note.empty()) << at << ": asked explicitly, " << asked.note;
    } catch (const std::invalid_argument& e) {
      ADD_FAILURE() << at << ": auto chose " << FusedLinear::to_string(d.algorithm) << "/"
                    << FusedLinear::to_string(d.precision)
                    << ", which is refused when asked for: " << e.what();
    }
    ++checked;
  });
  EXPECT_EQ(checked, int(Golden::profiles().size() * Golden::shapes().size() *
                         (sizeof(Golden::floors) / sizeof(Golden::floors[0]))));
}

TEST(DispatchInvariants, AutoMeetsTheFloor) {
  for_each_auto([&](const Golden::Profile& p, const Shape& s, Precision floor, const Decision& d) {
    const std::string at = what(p, s, Algorithm::Auto, floor);
    // The floor itself, or a more accurate precision where it is predicted faster or nothing
    // computes the floor.
    EXPECT_TRUE(at_least(d.precision, floor))
        << at << ": ran " << FusedLinear::to_string(d.precision);
  });
}

TEST(DispatchInvariants, NotesSayWhatChanged) {
  // Under auto only the precision can differ from the request (the path is auto's to choose).
  for_each_auto([&](const Golden::Profile& p, const Shape& s, Precision floor, const Decision& d) {
    const std::string at = what(p, s, Algorithm::Auto, floor);
    if (d.precision == floor) {
      EXPECT_TRUE(d.note.empty()) << at << ": unexpected note: " << d.note;
    } else {
      EXPECT_TRUE(contains(d.note, std::string("precision ") + FusedLinear::to_string(floor) +
                                       " asked under auto, a floor") &&
                  contains(d.note, d.precision == Precision::Strict
                                       ? std::string("strict fp32")
                                       : std::string(FusedLinear::to_string(d.precision))))
          << at << ": ran " << FusedLinear::to_string(d.precision) << ", note: '" << d.note << "'";
    }
  });
  // Explicit requests run their precision or are refused; where another path runs, or a vendor
  // path without a vendor BLAS, the note says which.
  int served = 0, refused = 0;
  for (const Golden::Profile& p : Golden::profiles())
    for (const Shape& s : Golden::shapes())
      for (Algorithm a : all_algorithms)
        for (Precision precision : all_precisions)
          for (bool zero : {false, true}) {
            if (a == Algorithm::Auto) continue;
            const std::string at = what(p, s, a, precision) + (zero ? " multiplier 0" : "");
            Decision d;
            try {
              d = Impl::resolve({a, precision, zero}, s, p.facts, fn);
            } catch (const std::invalid_argument& e) {
              EXPECT_TRUE(starts_with(e.what(), std::string(fn) + ": ")) << at << ": " << e.what();
              ++refused;
              continue;
            }
            ++served;
            EXPECT_EQ(d.precision, precision) << at;
            const bool other_path = d.algorithm != a;
            const bool native =
                (d.algorithm == Algorithm::Vendor || d.algorithm == Algorithm::VendorPrefill) &&
                !d.vendor_blas;
            EXPECT_EQ(d.note.empty(), !other_path && !native) << at << ": note '" << d.note << "'";
            if (other_path) {
              EXPECT_TRUE(
                  contains(d.note, std::string("ran ") + FusedLinear::to_string(d.algorithm)))
                  << at << ": ran " << FusedLinear::to_string(d.algorithm) << ", note '" << d.note
                  << "'";
            }
            if (native) {
              EXPECT_TRUE(contains(d.note, "native kernel")) << at << ": " << d.note;
            }
          }
  EXPECT_GT(served, 0);
  EXPECT_GT(refused, 0);
}

// Empty shapes: M = 0 or N = 0 write nothing, K = 0 gives LeakyReLU(multiplier * b): no GEMM
// runs (gemm none), and the note says why. The request is still checked as usual.
TEST(DispatchInvariants, EmptyShapesRunNothing) {
  const std::pair<Shape, const char*> shapes[] = {{{0, 64, 64}, "empty output (M or N is 0)"},
                                                  {{64, 64, 0}, "empty output (M or N is 0)"},
                                                  {{0, 0, 0}, "empty output (M or N is 0)"},
                                                  {{64, 0, 64}, "K is 0"}};
  int vendor_flags_set = 0;
  std::string first_flagged;
  for (const Golden::Profile& p : Golden::profiles())
    for (const auto& s : shapes)
      for (Algorithm a : all_algorithms)
        for (Precision precision : all_precisions) {
          const std::string at = what(p, s.first, a, precision);
          // The same request with the empty extents made 1: served exactly when that one is.
          const Shape filled{std::max<std::int64_t>(s.first.M, 1),
                             std::max<std::int64_t>(s.first.K, 1),
                             std::max<std::int64_t>(s.first.N, 1)};
          bool full_refused = false;
          try {
            Impl::resolve({a, precision, false}, filled, p.facts, fn);
          } catch (const std::invalid_argument&) {
            full_refused = true;
          }
          try {
            const Decision d = Impl::resolve({a, precision, false}, s.first, p.facts, fn);
            EXPECT_FALSE(full_refused) << at << ": an empty shape must not change what is served";
            EXPECT_EQ(d.gemm, Gemm::None) << at;
            EXPECT_TRUE(contains(d.note, s.second)) << at << ": " << d.note;
            if (d.vendor_blas || d.bias_in_gemm) {
              if (vendor_flags_set++ == 0) first_flagged = at;
            }
          } catch (const std::invalid_argument& e) {
            EXPECT_TRUE(full_refused) << at << ": " << e.what();
          }
        }
  // No product runs for an empty shape: no BLAS (RunInfo::vendor_blas: "True when a vendor path
  // runs on a vendor BLAS"), no bias through one.
  EXPECT_EQ(vendor_flags_set, 0) << "decisions with gemm none but vendor_blas or bias_in_gemm "
                                    "set, first: "
                                 << first_flagged;
}

}  // namespace
