// SPDX-License-Identifier: Apache-2.0
// The gradient's maths, on the default execution space with LayoutRight Views (float and
// double): dX, dW and db against the suite's own float64 oracle at odd shapes (empty ones too),
// every kind of slope and multiplier, what the forward can save (Y and z, computed by the
// library's forward, and a sign mask of bool or integers), PyTorch's special values, each output
// skipped, accumulation, plans reused on other Views, the one-shot call's cache, the same bits on
// every run, the tensor-core precisions' floors; and misuse (a negative slope with
// Saved::Output, extents, aliasing, unserved requests), refused by name before anything is
// written. The library's own float64 reference of the backward is checked against
// the oracle too.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "GradientProblems.hpp"

namespace {

using namespace FusedLinearTest;
using namespace FusedLinearTest::Gradient;
using PF = Gradient::Problem<ExecSpace, float, Kokkos::LayoutRight>;
using PD = Gradient::Problem<ExecSpace, double, Kokkos::LayoutRight>;
using Matrix = PF::Matrix;
using Vector = PF::Vector;
using Plan =
    FusedLinear::GradientPlan<ExecSpace, Matrix, Matrix, Matrix, Matrix, Matrix, Matrix, Vector>;

constexpr const char* one_shot = "FusedLinear::linear_leaky_relu_backward";
constexpr const char* plan_make = "FusedLinear::GradientPlan";
constexpr const char* plan_execute = "FusedLinear::GradientPlan::execute";
constexpr double nan_ = std::numeric_limits<double>::quiet_NaN();
constexpr double inf_ = std::numeric_limits<double>::infinity();

std::vector<double> random_values(std::size_t n, std::uint64_t seed, double bound = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-bound, bound);
  std::vector<double> v(n);
  for (double& x : v) x = double(float(u(rng)));
  return v;
}

// ---------------------------------------------------------------------------------------------
// The references.

/// A backward small enough to compute by hand, every product and sum exact in float:
///   X = [[1, 2], [3, -1], [0.5, 4]],  W = [[1, -1], [2, 0.5]],  dY = [[1, 2], [4, 1], [1, 1]],
///   z = [[1, 0], [NaN, -2], [-0, 3]], multiplier 2, slope 0.5.
/// Only z(0,0) and z(2,1) are > 0: zero, -0 and NaN take the slope (PyTorch compares z > 0), so
///   G = 2 * [[1, 2*0.5], [4*0.5, 1*0.5], [1*0.5, 1]] = [[2, 2], [4, 1], [1, 2]]
///   dX = G W = [[6, -1], [6, -3.5], [5, 0]],  dW = G^T X = [[14.5, 4], [6, 11]],  db = [7, 5].
/// A ">=" would give G(0,1) = 4 and G(2,0) = 2; a "!(z <= 0)" G(1,0) = 8.
struct HandCase {
  Inputs in;
  double multiplier = 2, slope = 0.5;
  std::vector<double> dx{6, -1, 6, -3.5, 5, 0}, dw{14.5, 4, 6, 11}, db{7, 5};
  HandCase() {
    in.M = 3, in.K = 2, in.N = 2;
    in.X = {1, 2, 3, -1, 0.5, 4};
    in.W = {1, -1, 2, 0.5};
    in.dY = {1, 2, 4, 1, 1, 1};
    in.saved = {1, 0, nan_, -2, -0.0, 3};
  }
};

// The oracle reproduces the hand-computed values exactly (they check each other).
TEST(GradientReference, OracleGivesTheHandComputedValues) {
  const HandCase c;
  const Oracle o(c.in, c.multiplier, c.slope);
  EXPECT_TRUE(same_bits("dX", o.dx().value, c.dx));
  EXPECT_TRUE(same_bits("dW", o.dw().value, c.dw));
  EXPECT_TRUE(same_bits("db", o.db().value, c.db));
}

// The library's FusedLinear::reference_linear_leaky_relu_backward (what the perf program would
// measure against) agrees with the oracle: the hand case, random values, and NaN/Inf in dY with
// zero, -0 and NaN saved values, for slopes negative, 0 and above 1.
TEST(GradientReference, LibraryReferenceAgreesWithTheOracle) {
  using HostMatrix = Kokkos::View<double**, Kokkos::LayoutRight, Kokkos::HostSpace>;
  const auto agree = [](const Inputs& in, double multiplier, double slope, const char* what) {
    HostMatrix X("X", in.M, in.K), W("W", in.N, in.K), dY("dY", in.M, in.N), s("saved", in.M, in.N);
    write_matrix(X, in.X), write_matrix(W, in.W), write_matrix(dY, in.dY),
        write_matrix(s, in.saved);
    const auto lib =
        FusedLinear::reference_linear_leaky_relu_backward(X, W, dY, s, multiplier, slope);
    const Oracle o(in, multiplier, slope);
    const auto close = [&](const char* name, const Expected& e, const std::vector<double>& got) {
      // Both in double, summed in other orders: gamma_{terms} of double each, four times over.
      Expected loose = e;
      for (double& m : loose.magnitude) m *= 4;
      return check<double>(name, loose, got);
    };
    EXPECT_TRUE(close("dX", o.dx(), host_matrix(lib.dX))) << what;
    EXPECT_TRUE(close("dW", o.dw(), host_matrix(lib.dW))) << what;
    EXPECT_TRUE(close("db", o.db(), host_vector(lib.db))) << what;
  };
  const HandCase c;
  agree(c.in, c.multiplier, c.slope, "the hand case");
  Inputs in;
  in.M = 37, in.K = 13, in.N = 21;
  in.X = random_values(std::size_t(in.M * in.K), 1);
  in.W = random_values(std::size_t(in.N * in.K), 2);
  in.dY = random_values(std::size_t(in.M * in.N), 3);
  in.saved = random_values(std::size_t(in.M * in.N), 4);
  for (double slope : {-0.5, 0.0, 0.1, 1.0, 1.5}) agree(in, -1.5, slope, "random");
  in.saved[0] = 0, in.saved[1] = -0.0, in.saved[2] = nan_, in.dY[3] = nan_, in.dY[40] = inf_;
  in.dY[41] = -inf_;
  for (double slope : {-0.5, 0.0, 1.5}) agree(in, 2, slope, "special values");
}

// The library's reference fails with a clear exception, naming itself, where it cannot allocate
// (2^24 x 2^24 doubles for G: 2 PB) or where the byte count overflows 64 bits (2^31 x 2^31).
// (Unmanaged Views over four floats: nothing is read before the allocation.)
TEST(GradientReference, LibraryReferenceAllocationFailureIsAnException) {
  float x[4] = {}, w[4] = {}, dy[4] = {}, saved[4] = {};
  using HostMatrix =
      Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  for (const std::size_t extent : {std::size_t(1) << 24, std::size_t(1) << 31}) {
    const HostMatrix X(x, extent, 1), W(w, extent, 1), dY(dy, extent, extent),
        S(saved, extent, extent);
    try {
      FusedLinear::reference_linear_leaky_relu_backward(X, W, dY, S, 2.0, 0.1);
      ADD_FAILURE() << "no exception at " << extent;
    } catch (const std::runtime_error& e) {
      EXPECT_TRUE(starts_with(e.what(),
                              "FusedLinear::reference_linear_leaky_relu_backward: cannot allocate"))
          << e.what();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The maths.

/// dX, dW and db at one shape, float or double, both saved kinds (z alone for a negative
/// slope), on NaN-poisoned outputs (overwriting must not read them).
template <class P>
void check_shape(std::int64_t M, std::int64_t K, std::int64_t N, double multiplier, double slope,
                 std::uint64_t seed) {
  P p(M, K, N, seed, multiplier, slope);
  for (Saved saved : {Saved::Output, Saved::PreActivation}) {
    if (saved == Saved::Output && slope < 0) continue;
    p.poison();
    const GradientOptions o = gradient_options(saved);
    const GradientInfo info = p.backward(o);
    EXPECT_TRUE(matches_oracle(p, p.oracle(saved), info))
        << "M=" << M << " K=" << K << " N=" << N << " multiplier " << multiplier << " slope "
        << slope << ": " << describe(o, info);
  }
}

// Odd shapes (1, 7, 33, 129: none a multiple of any tile or vector width) in every position,
// float and double.
TEST(Gradient, OddShapesFloatAndDouble) {
  const std::int64_t shapes[][3] = {{1, 1, 1},    {1, 7, 33},   {33, 1, 7},   {7, 33, 1},
                                    {129, 7, 33}, {33, 129, 7}, {7, 33, 129}, {129, 33, 65}};
  std::uint64_t seed = test_seed(46);
  for (const auto& s : shapes) {
    check_shape<PF>(s[0], s[1], s[2], 2, 0.1, ++seed);
    check_shape<PD>(s[0], s[1], s[2], 2, 0.1, ++seed);
  }
}

// Empty shapes still define every output that has elements: M = 0 (no rows) makes dW and db
// zero, N = 0 makes dX zero (a sum of nothing), K = 0 leaves db the column sums of G.
// With accumulate, M = 0 leaves dW and db as they were (+= a sum of nothing).
TEST(Gradient, EmptyShapesDefineTheOtherOutputs) {
  const std::int64_t shapes[][3] = {{0, 7, 5}, {6, 7, 0}, {6, 0, 5}};
  for (const auto& s : shapes) {
    check_shape<PF>(s[0], s[1], s[2], 2, 0.1, 7);
    check_shape<PD>(s[0], s[1], s[2], -3, 1.5, 8);
    PF p(s[0], s[1], s[2], 9, 2, 0.1);
    const std::vector<double> dw0 = random_values(std::size_t(p.N * p.K), 10, 4),
                              db0 = random_values(std::size_t(p.N), 11, 4);
    write_matrix(p.dW, dw0);
    write_vector(p.db, db0);
    const GradientInfo info = p.backward(gradient_options(Saved::Output, true));
    EXPECT_TRUE(matches_oracle(p, p.oracle(Saved::Output), info, dw0, db0))
        << "accumulate, M=" << s[0] << " K=" << s[1] << " N=" << s[2];
  }
}

using Unmanaged = Kokkos::View<float**, Kokkos::LayoutRight, PF::Device, Kokkos::MemoryUnmanaged>;
using UnmanagedVector =
    Kokkos::View<float*, Kokkos::LayoutRight, PF::Device, Kokkos::MemoryUnmanaged>;

// Empty operands as another library hands them over (Unmanaged, extent 0, null data) are valid
// where they have no element, and the outputs with elements are still defined: M = 0 makes dW
// and db zero, K = 0 leaves db the column sums of G, N = 0 makes dX zero.
TEST(Gradient, EmptyNullViewsAccepted) {
  const std::int64_t M = 6, K = 7, N = 5;
  PF p(M, K, N, 20, 2, 0.1);
  const Unmanaged none_mk(nullptr, 0, K), none_mn(nullptr, 0, N), none_m0(nullptr, M, 0),
      none_n0(nullptr, N, 0), none_0k(nullptr, 0, K);
  const UnmanagedVector none_0(nullptr, 0);
  const Unmanaged X(p.X.data(), M, K), W(p.W.data(), N, K), dY(p.dY.data(), M, N),
      S(p.Y.data(), M, N), dX(p.dX.data(), M, K), dW(p.dW.data(), N, K);
  const UnmanagedVector db(p.db.data(), N);
  const GradientOptions o = gradient_options(Saved::Output);
  const auto all = [](const std::vector<double>& v, double x) {
    return std::all_of(v.begin(), v.end(), [x](double e) { return e == x; });
  };
  // M = 0.
  p.poison();
  FusedLinear::linear_leaky_relu_backward(ExecSpace(), none_mk, W, none_mn, none_mn, none_mk, dW,
                                          db, 2.f, 0.1f, o);
  EXPECT_TRUE(all(host_matrix(p.dW), 0) && all(host_vector(p.db), 0)) << "M = 0";
  // K = 0: db only.
  p.poison();
  FusedLinear::linear_leaky_relu_backward(ExecSpace(), none_m0, none_n0, dY, S, none_m0, none_n0,
                                          db, 2.f, 0.1f, o);
  Inputs in = p.inputs(Saved::Output);
  in.K = 0, in.X.clear(), in.W.clear();
  EXPECT_TRUE(check<float>("db", Oracle(in, 2, 0.1).db(), host_vector(p.db), Sum::WideColumnSum))
      << "K = 0";
  // N = 0: dX only.
  p.poison();
  FusedLinear::linear_leaky_relu_backward(ExecSpace(), X, none_0k, none_m0, none_m0, dX, none_0k,
                                          none_0, 2.f, 0.1f, o);
  EXPECT_TRUE(all(host_matrix(p.dX), 0)) << "N = 0";
  // The same through a plan.
  p.poison();
  FusedLinear::GradientPlan plan(ExecSpace(), none_mk, W, none_mn, none_mn, none_mk, dW, db, 2.f,
                                 0.1f, o);
  plan.execute(none_mk, W, none_mn, none_mn, none_mk, dW, db);
  Kokkos::fence();
  EXPECT_TRUE(all(host_matrix(p.dW), 0) && all(host_vector(p.db), 0)) << "M = 0, plan";
}

// Slopes negative, 0, 1 and above 1; multipliers positive, negative and 0. (A slope of 1 makes
// the mask irrelevant; a slope above 1 must not be taken for max(v, v slope); a multiplier of 0
// makes G zero.)
TEST(Gradient, SlopesAndMultipliers) {
  std::uint64_t seed = 100;
  for (double multiplier : {2.0, -1.5, 0.0})
    for (double slope : {-0.5, 0.0, 0.1, 1.0, 1.5}) {
      check_shape<PF>(33, 17, 29, multiplier, slope, ++seed);
      check_shape<PD>(7, 5, 9, multiplier, slope, ++seed);
    }
}

// For slope >= 0, Y and z say the same (y > 0 exactly where z > 0): the forward's Y is
// leaky_relu(z, slope) bit for bit, and the backward gives the same bits from either.
TEST(Gradient, OutputAndPreActivationGiveTheSameBits) {
  for (double slope : {0.0, 0.1, 1.0, 1.5})
    for (double multiplier : {2.0, -1.5}) {
      PF p(65, 33, 47, 200, multiplier, slope);
      const auto y = host_matrix(p.Y), z = host_matrix(p.Z);
      for (std::size_t e = 0; e < y.size(); ++e) {
        const float v = float(z[e]) > 0 ? float(z[e]) : float(z[e]) * float(slope);
        ASSERT_TRUE(same_bits("Y", {y[e]}, {double(v)}))
            << "the forward's Y is not leaky_relu(z) at element " << e << ": z " << z[e]
            << " slope " << slope;
      }
      p.backward(gradient_options(Saved::Output));
      const auto dx = host_matrix(p.dX), dw = host_matrix(p.dW), db = host_vector(p.db);
      p.poison();
      p.backward(gradient_options(Saved::PreActivation));
      EXPECT_TRUE(same_bits("dX", host_matrix(p.dX), dx)) << "slope " << slope;
      EXPECT_TRUE(same_bits("dW", host_matrix(p.dW), dw)) << "slope " << slope;
      EXPECT_TRUE(same_bits("db", host_vector(p.db), db)) << "slope " << slope;
    }
}

/// Every output still holds NaN (the poison): nothing was written.
bool untouched(const PF& p) {
  for (double v : host_matrix(p.dX))
    if (!std::isnan(v)) return false;
  for (double v : host_matrix(p.dW))
    if (!std::isnan(v)) return false;
  for (double v : host_vector(p.db))
    if (!std::isnan(v)) return false;
  return true;
}

using BoolMask = Kokkos::View<bool**, Kokkos::LayoutRight, PF::Device>;
using IntMask = Kokkos::View<std::int32_t**, Kokkos::LayoutRight, PF::Device>;

/// dX, dW and db as row-major doubles.
struct Outputs {
  std::vector<double> dx, dw, db;
  explicit Outputs(const PF& p)
      : dx(host_matrix(p.dX)), dw(host_matrix(p.dW)), db(host_vector(p.db)) {}
  ::testing::AssertionResult same_as(const Outputs& o) const {
    auto r = same_bits("dX", dx, o.dx);
    if (r) r = same_bits("dW", dw, o.dw);
    if (r) r = same_bits("db", db, o.db);
    return r;
  }
};

/// The mask of z > 0 with `yes` for true (NaN, 0 and -0 are not > 0).
std::vector<double> mask_values(const std::vector<double>& z, double yes) {
  std::vector<double> m(z.size());
  for (std::size_t e = 0; e < z.size(); ++e) m[e] = z[e] > 0 ? yes : 0;
  return m;
}

// Saved::Sign: a mask of z > 0, of bool or of integers, serves any slope (negative included)
// and gives the bits z gives, through the one-shot call and a plan; a mask with another saved
// kind, or a View of the value type as a mask, is refused by name.
TEST(Gradient, SignMaskGivesTheBitsOfZ) {
  std::uint64_t seed = 1300;
  for (double slope : {-0.5, 0.0, 0.1, 1.5})
    for (double multiplier : {2.0, -1.5}) {
      PF p(65, 33, 47, ++seed, multiplier, slope);
      std::vector<double> z = host_matrix(p.Z);
      z[0] = 0, z[1] = -0.0, z[2] = nan_;  // none of them > 0
      write_matrix(p.Z, z);
      const GradientInfo info = p.backward(gradient_options(Saved::PreActivation));
      EXPECT_TRUE(matches_oracle(p, p.oracle(Saved::PreActivation), info));
      const Outputs from_z(p);
      const GradientOptions o = gradient_options(Saved::Sign);
      BoolMask b("mask", p.M, p.N);
      IntMask i("mask", p.M, p.N);
      write_matrix(b, mask_values(z, 1));
      write_matrix(i, mask_values(z, 1));
      const std::string what =
          "slope " + std::to_string(slope) + ", multiplier " + std::to_string(multiplier);
      p.poison();
      FusedLinear::linear_leaky_relu_backward(ExecSpace(), p.X, p.W, p.dY, b, p.dX, p.dW, p.db,
                                              float(multiplier), float(slope), o);
      EXPECT_TRUE(Outputs(p).same_as(from_z)) << what << ", bool mask";
      p.poison();
      FusedLinear::linear_leaky_relu_backward(ExecSpace(), p.X, p.W, p.dY, i, p.dX, p.dW, p.db,
                                              float(multiplier), float(slope), o);
      EXPECT_TRUE(Outputs(p).same_as(from_z)) << what << ", int32 mask";
      p.poison();
      FusedLinear::GradientPlan plan(ExecSpace(), p.X, p.W, p.dY, b, p.dX, p.dW, p.db,
                                     float(multiplier), float(slope), o);
      plan.execute(p.X, p.W, p.dY, b, p.dX, p.dW, p.db);
      EXPECT_TRUE(Outputs(p).same_as(from_z)) << what << ", bool mask, plan";
    }
  PF p(9, 5, 7, 1399, 2, 0.1);
  const BoolMask b("mask", p.M, p.N);
  for (Saved saved : {Saved::Output, Saved::PreActivation}) {
    const std::string e = refusal([&] {
      FusedLinear::linear_leaky_relu_backward(ExecSpace(), p.X, p.W, p.dY, b, p.dX, p.dW, p.db, 2.f,
                                              0.1f, gradient_options(saved));
    });
    EXPECT_TRUE(names(e, one_shot, "Saved::Sign")) << e;
  }
  const std::string e = refusal([&] { p.backward(gradient_options(Saved::Sign)); });
  EXPECT_TRUE(names(e, one_shot, "Saved::Sign")) << e;
  EXPECT_TRUE(untouched(p)) << "a refused call wrote an output";
}

// An integer mask is documented as "nonzero exactly where z > 0": a negative value (an
// all-ones comparison mask, -1) or any other nonzero says z > 0 as 1 does.
TEST(Gradient, SignMaskOfIntegersTakesAnyNonzeroAsTrue) {
  PF p(33, 17, 29, 1400, 2, 0.1);
  const std::vector<double> z = host_matrix(p.Z);
  p.backward(gradient_options(Saved::PreActivation));
  const Outputs from_z(p);
  for (double yes : {-1.0, 2.0, -2147483648.0}) {
    IntMask i("mask", p.M, p.N);
    write_matrix(i, mask_values(z, yes));
    p.poison();
    FusedLinear::linear_leaky_relu_backward(ExecSpace(), p.X, p.W, p.dY, i, p.dX, p.dW, p.db, 2.f,
                                            0.1f, gradient_options(Saved::Sign));
    EXPECT_TRUE(Outputs(p).same_as(from_z)) << "true written as " << yes;
  }
}

// A negative slope maps both signs of z to positive outputs: Y cannot tell them apart, so
// Saved::Output is refused by the plan, the one-shot call (and nothing is written); with
// Saved::PreActivation it runs (SlopesAndMultipliers checks the values).
TEST(Gradient, NegativeSlopeWithSavedOutputIsRefused) {
  PF p(9, 5, 7, 300, 2, -0.25);
  const GradientOptions o = gradient_options(Saved::Output);
  const std::string made = refusal(
      [&] { Plan plan(ExecSpace(), p.X, p.W, p.dY, p.Y, p.dX, p.dW, p.db, 2.f, -0.25f, o); });
  EXPECT_TRUE(names(made, plan_make, "slope")) << made;
  EXPECT_TRUE(contains(made, "Output") || contains(made, "PreActivation")) << made;
  const std::string called = refusal([&] { p.backward(o); });
  EXPECT_TRUE(names(called, one_shot, "slope")) << called;
  EXPECT_TRUE(std::isnan(host_matrix(p.dX)[0]) && std::isnan(host_matrix(p.dW)[0]) &&
              std::isnan(host_vector(p.db)[0]))
      << "a refused call wrote an output";
  // -0.0 is not negative.
  PF q(9, 5, 7, 301, 2, -0.0);
  EXPECT_TRUE(matches_oracle(q, q.oracle(Saved::Output), q.backward(o)));
}

/// The hand case on the library's Views (z given, or Y = leaky_relu(z, 0.5)): every output bit
/// for bit, zeros by value (the sign of a zero sum is the summation order's).
template <class Scalar>
void run_hand_case(Saved saved) {
  using P = Gradient::Problem<ExecSpace, Scalar, Kokkos::LayoutRight>;
  const HandCase c;
  P p(3, 2, 2, 1, c.multiplier, c.slope);
  write_matrix(p.X, c.in.X), write_matrix(p.W, c.in.W), write_matrix(p.dY, c.in.dY);
  std::vector<double> s = c.in.saved;
  if (saved == Saved::Output)
    for (double& v : s) v = v > 0 ? v : v * c.slope;
  write_matrix(p.saved(saved), s);
  p.poison();
  const GradientInfo info = p.backward(gradient_options(saved));
  const std::string what =
      std::string(saved_name(saved)) + ": " + describe(gradient_options(saved), info);
  const auto zero_as_plus = [](std::vector<double> v) {
    for (double& x : v) x = x == 0 ? 0.0 : x;
    return v;
  };
  EXPECT_TRUE(same_bits("dX", zero_as_plus(host_matrix(p.dX)), c.dx)) << what;
  EXPECT_TRUE(same_bits("dW", zero_as_plus(host_matrix(p.dW)), c.dw)) << what;
  EXPECT_TRUE(same_bits("db", zero_as_plus(host_vector(p.db)), c.db)) << what;
}

// PyTorch's semantics where they are defined: z == 0, -0 and NaN take the slope (hand case, bit
// for bit); NaN in dY makes its row of dX, its column's row of dW and its db NaN, and nothing
// else; +-Inf in dY gives infinities of the signs IEEE gives, NaN where Inf meets a zero (slope
// 0 at a non-positive z, a zero weight) or an infinity of the other sign.
TEST(Gradient, SpecialValuesAsPyTorch) {
  for (Saved saved : {Saved::Output, Saved::PreActivation}) {
    run_hand_case<float>(saved);
    run_hand_case<double>(saved);
  }
  const std::int64_t M = 6, K = 5, N = 4;
  for (double slope : {0.0, 0.25, 1.5, -0.5})
    for (double multiplier : {2.0, -1.0}) {
      PF p(M, K, N, 400, multiplier, slope);
      std::vector<double> z = host_matrix(p.Z), dy = host_matrix(p.dY), w = host_matrix(p.W);
      z[0 * N + 0] = 0;                            // -> slope
      z[0 * N + 1] = -0.0;                         // -> slope
      z[1 * N + 0] = nan_;                         // -> slope
      z[1 * N + 1] = 0.5, dy[1 * N + 1] = nan_;    // NaN through the dY branch
      z[2 * N + 2] = -0.5, dy[2 * N + 2] = inf_;   // Inf * slope (NaN for slope 0)
      z[3 * N + 3] = 0.75, dy[3 * N + 3] = -inf_;  // -Inf through the dY branch
      z[4 * N + 0] = 0, dy[4 * N + 0] = inf_;      // z == 0 with Inf: the slope's branch
      w[3 * K + 1] = 0;                            // dX(3, 1) meets -Inf * 0: NaN
      write_matrix(p.Z, z), write_matrix(p.dY, dy), write_matrix(p.W, w);
      std::vector<double> y = z;
      for (double& v : y) v = double(float(v > 0 ? v : v * slope));
      write_matrix(p.Y, y);
      for (Saved saved : {Saved::Output, Saved::PreActivation}) {
        if (saved == Saved::Output && slope < 0) continue;
        p.poison();
        const GradientInfo info = p.backward(gradient_options(saved));
        EXPECT_TRUE(matches_oracle(p, p.oracle(saved), info))
            << "slope " << slope << " multiplier " << multiplier << " " << saved_name(saved);
      }
    }
}

// Each output skipped by an empty View, alone and in pairs: the others right, the skipped ones
// left as they were, their products reported as not run (Gemm::None).
TEST(Gradient, EachOutputSkippedByAnEmptyView) {
  PF p(33, 17, 29, 500, 2, 0.1);
  const Oracle oracle = p.oracle(Saved::Output);
  const GradientOptions o = gradient_options(Saved::Output);
  for (int skip = 1; skip < 7; ++skip) {  // bit 0: dX, bit 1: dW, bit 2: db
    const bool sx = skip & 1, sw = skip & 2, sb = skip & 4;
    const std::string what =
        std::string("skipping") + (sx ? " dX" : "") + (sw ? " dW" : "") + (sb ? " db" : "");
    p.poison();
    const GradientInfo info =
        p.backward(o, sx ? Matrix() : p.dX, sw ? Matrix() : p.dW, sb ? Vector() : p.db);
    const auto dx = host_matrix(p.dX), dw = host_matrix(p.dW);
    const auto db = host_vector(p.db);
    if (sx) {
      EXPECT_EQ(info.dx.gemm, Gemm::None) << what;
      EXPECT_TRUE(std::all_of(dx.begin(), dx.end(), [](double v) { return std::isnan(v); }))
          << what << ": dX written";
    } else {
      EXPECT_NE(info.dx.gemm, Gemm::None) << what;
      EXPECT_TRUE(check<float>("dX", oracle.dx(), dx, Sum::Product, product_rounding(info.dx, p.N)))
          << what;
    }
    if (sw) {
      EXPECT_EQ(info.dw.gemm, Gemm::None) << what;
      EXPECT_TRUE(std::all_of(dw.begin(), dw.end(), [](double v) { return std::isnan(v); }))
          << what << ": dW written";
    } else {
      EXPECT_NE(info.dw.gemm, Gemm::None) << what;
      EXPECT_TRUE(check<float>("dW", oracle.dw(), dw, Sum::Product, product_rounding(info.dw, p.M)))
          << what;
    }
    if (sb)
      EXPECT_TRUE(std::all_of(db.begin(), db.end(), [](double v) { return std::isnan(v); }))
          << what << ": db written";
    else
      EXPECT_TRUE(check<float>("db", oracle.db(), db, Sum::WideColumnSum)) << what;
  }
}

// With accumulate, dW and db are added to what they held (twice: twice the gradient), and dX
// is overwritten (its NaN never read); without it, all three overwritten.
TEST(Gradient, AccumulateAddsToDwAndDbAndOverwritesDx) {
  for (Saved saved : {Saved::Output, Saved::PreActivation}) {
    PF p(129, 33, 7, 600, -1.5, 0.1);
    const Oracle oracle = p.oracle(saved);
    const std::vector<double> dw0 = random_values(std::size_t(p.N * p.K), 601, 4),
                              db0 = random_values(std::size_t(p.N), 602, 4);
    write_matrix(p.dW, dw0);
    write_vector(p.db, db0);
    const GradientOptions o = gradient_options(saved, true);
    const GradientInfo info = p.backward(o);
    EXPECT_TRUE(matches_oracle(p, oracle, info, dw0, db0)) << describe(o, info);
    // Again: dW and db now hold prior + gradient.
    Kokkos::deep_copy(p.dX, std::numeric_limits<float>::quiet_NaN());
    const std::vector<double> dw1 = host_matrix(p.dW), db1 = host_vector(p.db);
    p.backward(o);
    EXPECT_TRUE(matches_oracle(p, oracle, info, dw1, db1)) << "second accumulation";
    // The same Views without accumulate: overwritten.
    p.backward(gradient_options(saved, false));
    EXPECT_TRUE(matches_oracle(p, oracle, info)) << "overwriting after accumulating";
  }
}

// db summed in double over many rows, within gamma_4 of float of its magnitude: column 0 is 1
// then 4095 times 2^-24 (each lost to a float accumulator after the 1: it would give 1, not
// 1 + 4095 2^-24), column 1 positive (a float sum's error grows with it), the others of random
// signs.
TEST(Gradient, DbIsAccumulatedInDouble) {
  PF p(4096, 1, 5, 650, 1, 1);
  std::vector<double> dy = host_matrix(p.dY);
  for (std::int64_t i = 0; i < p.M; ++i) {
    dy[std::size_t(i * p.N)] = i == 0 ? 1 : std::ldexp(1.0, -24);
    dy[std::size_t(i * p.N + 1)] = 0.75 + 0.25 * dy[std::size_t(i * p.N + 1)];
  }
  write_matrix(p.dY, dy);
  const GradientInfo info = p.backward(gradient_options(Saved::PreActivation));
  EXPECT_TRUE(matches_oracle(p, p.oracle(Saved::PreActivation), info));
}

// A plan made on some Views executes on others of the same extents (and back): the others'
// outputs right, the first ones' untouched.
TEST(Gradient, PlanReusedOnOtherViews) {
  for (bool accumulate : {false, true}) {
    PF a(33, 17, 29, 700, 2, 0.1), b(33, 17, 29, 701, 2, 0.1);
    const GradientOptions o = gradient_options(Saved::Output, accumulate);
    Kokkos::deep_copy(a.dW, 1.0f), Kokkos::deep_copy(a.db, 1.0f);
    Kokkos::deep_copy(b.dW, 1.0f), Kokkos::deep_copy(b.db, 1.0f);
    const std::vector<double> ones_w(std::size_t(a.N * a.K), 1), ones_b(std::size_t(a.N), 1);
    const std::vector<double> none;
    Plan plan(ExecSpace(), a.X, a.W, a.dY, a.Y, a.dX, a.dW, a.db, 2.f, 0.1f, o);
    // It holds G at least (M N values), allocated once.
    EXPECT_GE(plan.workspace_bytes(), std::size_t(a.M * a.N) * sizeof(float));
    plan.execute(b.X, b.W, b.dY, b.Y, b.dX, b.dW, b.db);
    Kokkos::fence();
    EXPECT_TRUE(matches_oracle(b, b.oracle(Saved::Output), plan.info(), accumulate ? ones_w : none,
                               accumulate ? ones_b : none))
        << "on the other Views";
    EXPECT_TRUE(std::isnan(host_matrix(a.dX)[0])) << "the plan's own dX written";
    EXPECT_EQ(host_matrix(a.dW)[0], 1.0) << "the plan's own dW written";
    EXPECT_EQ(host_vector(a.db)[0], 1.0) << "the plan's own db written";
    plan.execute(a.X, a.W, a.dY, a.Y, a.dX, a.dW, a.db);
    Kokkos::fence();
    EXPECT_TRUE(matches_oracle(a, a.oracle(Saved::Output), plan.info(), accumulate ? ones_w : none,
                               accumulate ? ones_b : none))
        << "on its own Views";
  }
}

// The same bits on every run: the one-shot call twice (its cached plan), a plan twice, and
// the plan against the one-shot call, for float and double.
template <class P>
void expect_same_bits_every_run(std::uint64_t seed) {
  P p(129, 65, 33, seed, 2, 0.1);
  const GradientOptions o = gradient_options(Saved::Output);
  const auto outputs = [&] {
    return std::make_tuple(host_matrix(p.dX), host_matrix(p.dW), host_vector(p.db));
  };
  p.backward(o);
  const auto first = outputs();
  p.poison();
  p.backward(o);
  const auto second = outputs();
  FusedLinear::GradientPlan plan(ExecSpace(), p.X, p.W, p.dY, p.Y, p.dX, p.dW, p.db,
                                 typename P::scalar_type(2), typename P::scalar_type(0.1), o);
  p.poison();
  plan.execute(p.X, p.W, p.dY, p.Y, p.dX, p.dW, p.db);
  const auto third = outputs();
  p.poison();
  plan.execute(p.X, p.W, p.dY, p.Y, p.dX, p.dW, p.db);
  const auto fourth = outputs();
  for (const auto* run : {&second, &third, &fourth}) {
    EXPECT_TRUE(same_bits("dX", std::get<0>(*run), std::get<0>(first)));
    EXPECT_TRUE(same_bits("dW", std::get<1>(*run), std::get<1>(first)));
    EXPECT_TRUE(same_bits("db", std::get<2>(*run), std::get<2>(first)));
  }
}
TEST(Gradient, SameBitsOnEveryRun) {
  expect_same_bits_every_run<PF>(800);
  expect_same_bits_every_run<PD>(801);
}

// The one-shot call on the same Views with other parameters each time (multiplier, slope,
// saved kind, accumulate, outputs skipped): its cache must tell them apart, every result right.
TEST(Gradient, CacheTellsParametersApart) {
  PF p(33, 17, 29, 850, 2, 0.1);
  const auto z = p.oracle(Saved::PreActivation).inputs();
  struct Variant {
    double multiplier, slope;
    Saved saved;
    bool accumulate, skip_dw;
  };
  const Variant variants[] = {{2, 0.1, Saved::Output, false, false},
                              {-1.5, 0.1, Saved::PreActivation, false, false},
                              {2, 0.25, Saved::PreActivation, false, false},
                              {2, -0.5, Saved::PreActivation, false, false},
                              {2, 0.1, Saved::PreActivation, true, false},
                              {2, 0.1, Saved::PreActivation, false, true},
                              {2, 0.1, Saved::PreActivation, false, false}};
  for (int round = 0; round < 2; ++round)
    for (const Variant& v : variants) {
      p.poison();
      Kokkos::deep_copy(p.dW, 0.5f), Kokkos::deep_copy(p.db, 0.5f);
      GradientOptions o = gradient_options(v.saved, v.accumulate);
      // Y for this slope from z, on the host (the Views stay the same).
      std::vector<double> y = z.saved;
      for (double& e : y) e = double(float(e > 0 ? e : e * v.slope));
      if (v.saved == Saved::Output) write_matrix(p.Y, y);
      const GradientInfo info = FusedLinear::linear_leaky_relu_backward(
          ExecSpace(), p.X, p.W, p.dY, p.saved(v.saved), p.dX, v.skip_dw ? Matrix() : p.dW, p.db,
          float(v.multiplier), float(v.slope), o);
      Inputs in = z;
      if (v.saved == Saved::Output) in.saved = y;
      const Oracle oracle(in, v.multiplier, v.slope);
      const std::vector<double> half_w(std::size_t(p.N * p.K), 0.5), half_b(std::size_t(p.N), 0.5);
      const std::string what = "round " + std::to_string(round) + ", multiplier " +
                               std::to_string(v.multiplier) + ", slope " + std::to_string(v.slope) +
                               ": " + describe(o, info);
      EXPECT_TRUE(check<float>("dX", oracle.dx(), host_matrix(p.dX))) << what;
      if (v.skip_dw)
        EXPECT_EQ(host_matrix(p.dW)[0], 0.5) << what;
      else
        EXPECT_TRUE(check<float>("dW", oracle.dw(v.accumulate ? half_w : std::vector<double>()),
                                 host_matrix(p.dW)))
            << what;
      EXPECT_TRUE(check<float>("db", oracle.db(v.accumulate ? half_b : std::vector<double>()),
                               host_vector(p.db), Sum::WideColumnSum))
          << what;
    }
}

// TF32 and 3xTF32 requests (floors under Auto): on the host strict fp32 runs for both
// products, and each RunInfo says so with a note; on GPUs each product runs what its RunInfo
// says, within that precision's bound.
TEST(Gradient, TensorCorePrecisionsAreFloors) {
  PF p(129, 65, 33, 900, 2, 0.1);
  const Oracle oracle = p.oracle(Saved::Output);
  for (Precision precision : {Precision::TF32, Precision::TF32x3}) {
    p.poison();
    const GradientOptions o = gradient_options(Saved::Output, false, precision);
    const GradientInfo info = p.backward(o);
    for (const RunInfo* r : {&info.dx, &info.dw}) {
      if (Impl::is_host_space<ExecSpace>()) {
        EXPECT_EQ(r->precision, Precision::Strict) << describe(o, info);
        EXPECT_FALSE(r->note.empty()) << describe(o, info);
        EXPECT_TRUE(contains(r->note, FusedLinear::to_string(precision))) << describe(o, info);
      } else {
        EXPECT_TRUE(r->precision == precision || r->precision == Precision::Strict ||
                    (precision == Precision::TF32 && r->precision == Precision::TF32x3))
            << describe(o, info);
        if (r->precision != precision) EXPECT_FALSE(r->note.empty()) << describe(o, info);
      }
      EXPECT_NE(r->algorithm, Algorithm::Auto) << describe(o, info);
    }
    EXPECT_TRUE(matches_oracle(p, oracle, info)) << describe(o, info);
  }
}

// ---------------------------------------------------------------------------------------------
// The sm_90a 3xTF32 kernels (fused_sm90), where this build and device have them.

/// Empty where fused_sm90 computes the gradient here, else why not (a device or build without
/// the kernels: the tests skip). Any other refusal of these Views is a failure.
std::string sm90_absent() {
  PF p(1, 4, 1, 1, 2, 0.1);
  try {
    p.backward(gradient_options(Saved::Output, false, Precision::TF32x3, Algorithm::FusedSm90));
  } catch (const std::invalid_argument& e) {
    const std::string why = e.what();
    if (!contains(why, "compute capability 9.0") && !contains(why, "in a build with the sm_90a"))
      ADD_FAILURE() << why;
    return why;
  }
  return std::string();
}

GradientOptions sm90_options(bool accumulate = false, int kernel = 0) {
  GradientOptions o =
      gradient_options(Saved::Output, accumulate, Precision::TF32x3, Algorithm::FusedSm90);
  o.tuning.sm90_tf32x3_kernel = kernel;
  return o;
}

// Odd M and N around the 128-wide tiles, K a multiple of 4 (the copy engine reads X's and W's
// rows) from 4 to past a promotion range; both kernels (tile, split-K) and the shape's choice,
// overwriting and accumulating: every output against float64 within 3xTF32's bound.
TEST(GradientSm90, OddShapesBothKernelsAndAccumulate) {
  const std::string absent = sm90_absent();
  if (!absent.empty()) GTEST_SKIP() << absent;
  const std::int64_t shapes[][3] = {{1, 4, 1},      {129, 36, 33},   {33, 132, 129},
                                    {257, 68, 131}, {130, 1000, 33}, {7, 520, 300}};
  std::uint64_t seed = test_seed(47);
  for (const auto& s : shapes)
    for (int kernel : {0, 1, 2})
      for (bool accumulate : {false, true}) {
        PF p(s[0], s[1], s[2], ++seed, 2, 0.1);
        std::vector<double> dw0, db0;
        if (accumulate) {
          dw0 = random_values(std::size_t(p.N * p.K), seed + 1000, 4);
          db0 = random_values(std::size_t(p.N), seed + 2000, 4);
          write_matrix(p.dW, dw0);
          write_vector(p.db, db0);
        }
        const GradientOptions o = sm90_options(accumulate, kernel);
        const GradientInfo info = p.backward(o);
        EXPECT_EQ(info.dx.gemm, Gemm::Sm90Tf32x3Kernel) << describe(o, info);
        EXPECT_EQ(info.dw.gemm, Gemm::Sm90Tf32x3Kernel) << describe(o, info);
        EXPECT_TRUE(matches_oracle(p, p.oracle(Saved::Output), info, dw0, db0))
            << "M=" << s[0] << " K=" << s[1] << " N=" << s[2] << " kernel " << kernel << ": "
            << describe(o, info);
      }
}

// The same bits on every run, split-K's partial sums included.
TEST(GradientSm90, Deterministic) {
  const std::string absent = sm90_absent();
  if (!absent.empty()) GTEST_SKIP() << absent;
  for (int kernel : {1, 2}) {
    PF p(300, 2000, 70, test_seed(48), 2, 0.1);
    p.backward(sm90_options(false, kernel));
    const std::vector<double> dx = host_matrix(p.dX), dw = host_matrix(p.dW);
    for (int run = 0; run < 3; ++run) {
      p.poison();
      p.backward(sm90_options(false, kernel));
      EXPECT_TRUE(host_matrix(p.dX) == dx) << "kernel " << kernel << ", run " << run;
      EXPECT_TRUE(host_matrix(p.dW) == dw) << "kernel " << kernel << ", run " << run;
    }
  }
}

// Inputs and outputs inside larger buffers, at 16-byte offsets: nothing outside dX and dW is
// written. X and W at an offset the copy engine cannot read: fused_sm90 refused by name (a
// plan made on aligned Views too, at execute), while auto's 3xtf32 floor runs another path.
TEST(GradientSm90, GuardBandsAndAlignment) {
  const std::string absent = sm90_absent();
  if (!absent.empty()) GTEST_SKIP() << absent;
  const std::int64_t M = 67, K = 132, N = 45, band = 64;
  PF p(M, K, N, test_seed(49), 2, 0.1);
  const Oracle oracle = p.oracle(Saved::Output);
  const float sentinel = 7.25f;
  const auto buffer = [&](std::int64_t n) {
    Vector v("buffer", std::size_t(n + 2 * band + 1));
    Kokkos::deep_copy(v, sentinel);
    return v;
  };
  const auto inside = [&](const Vector& v, std::int64_t offset, std::int64_t rows,
                          std::int64_t cols) { return Unmanaged(v.data() + offset, rows, cols); };
  const auto bands_intact = [&](const Vector& v, std::int64_t offset, std::int64_t n) {
    const std::vector<double> h = host_vector(v);
    for (std::int64_t i = 0; i < std::int64_t(h.size()); ++i)
      if ((i < offset || i >= offset + n) && h[std::size_t(i)] != double(sentinel)) return false;
    return true;
  };
  for (const std::int64_t in_offset : {std::int64_t(band), band + 1}) {
    const Vector xb = buffer(M * K), wb = buffer(N * K), dxb = buffer(M * K), dwb = buffer(N * K);
    const Unmanaged X = inside(xb, in_offset, M, K), W = inside(wb, in_offset, N, K);
    const Unmanaged dX = inside(dxb, band, M, K), dW = inside(dwb, band, N, K);
    Kokkos::deep_copy(X, p.X);
    Kokkos::deep_copy(W, p.W);
    const bool aligned = in_offset == band;
    for (const GradientOptions& o :
         {sm90_options(), gradient_options(Saved::Output, false, Precision::TF32x3)}) {
      const auto run = [&] {
        return FusedLinear::linear_leaky_relu_backward(ExecSpace(), X, W, p.dY, p.Y, dX, dW, p.db,
                                                       2.f, 0.1f, o);
      };
      if (!aligned && o.algorithm == Algorithm::FusedSm90) {
        const std::string e = refusal(run);
        EXPECT_TRUE(names(e, one_shot, "16 bytes")) << e;
        continue;
      }
      const GradientInfo info = run();
      if (aligned && o.algorithm == Algorithm::FusedSm90)
        EXPECT_EQ(info.dx.gemm, Gemm::Sm90Tf32x3Kernel);
      if (!aligned) EXPECT_NE(info.dx.gemm, Gemm::Sm90Tf32x3Kernel) << describe(o, info);
      Kokkos::deep_copy(p.dX, dX);
      Kokkos::deep_copy(p.dW, dW);
      EXPECT_TRUE(matches_oracle(p, oracle, info)) << describe(o, info);
      EXPECT_TRUE(bands_intact(dxb, band, M * K)) << "dX's guard bands: " << describe(o, info);
      EXPECT_TRUE(bands_intact(dwb, band, N * K)) << "dW's guard bands: " << describe(o, info);
    }
  }
  // A plan made on aligned Views, executed on X one float further on: refused by name.
  const Vector xb = buffer(M * K);
  const Unmanaged shifted = inside(xb, band + 1, M, K);
  Kokkos::deep_copy(shifted, p.X);
  using UnmanagedPlan = FusedLinear::GradientPlan<ExecSpace, Unmanaged, Matrix, Matrix, Matrix,
                                                  Matrix, Matrix, Vector>;
  const Unmanaged aligned_x = inside(xb, band, M, K);
  UnmanagedPlan plan(ExecSpace(), aligned_x, p.W, p.dY, p.Y, p.dX, p.dW, p.db, 2.f, 0.1f,
                     sm90_options());
  p.poison();
  const std::string e = refusal([&] { plan.execute(shifted, p.W, p.dY, p.Y, p.dX, p.dW, p.db); });
  EXPECT_TRUE(names(e, plan_execute, "fused_sm90")) << e;
  EXPECT_TRUE(untouched(p)) << "a refused call wrote an output";
}

// ---------------------------------------------------------------------------------------------
// Misuse: refused by name, before anything is written.

// Any View's extents off by one, through the one-shot call, a plan's construction and its
// execute (the plan made right, then handed other extents).
TEST(GradientErrors, ExtentsMismatchRefused) {
  const std::int64_t M = 9, K = 5, N = 7;
  PF p(M, K, N, 1000, 2, 0.1);
  const GradientOptions o = gradient_options(Saved::Output);
  Plan plan(ExecSpace(), p.X, p.W, p.dY, p.Y, p.dX, p.dW, p.db, 2.f, 0.1f, o);
  const Matrix X1("X", M, K + 1), X2("X", M + 1, K), W1("W", N, K + 1), W2("W", N + 1, K),
      dY1("dY", M, N + 1), dY2("dY", M + 1, N), S1("saved", M, N + 1), S2("saved", M + 1, N),
      dX1("dX", M, K + 1), dX2("dX", M + 1, K), dW1("dW", N, K + 1), dW2("dW", N + 1, K);
  const Vector db1("db", N + 1), db2("db", N - 1);
  struct Case {
    const char* what;
    Matrix X, W, dY, s, dX, dW;
    Vector db;
  };
  const Case cases[] = {{"X's K", X1, p.W, p.dY, p.Y, p.dX, p.dW, p.db},
                        {"X's M", X2, p.W, p.dY, p.Y, p.dX, p.dW, p.db},
                        {"W's K", p.X, W1, p.dY, p.Y, p.dX, p.dW, p.db},
                        {"W's N", p.X, W2, p.dY, p.Y, p.dX, p.dW, p.db},
                        {"dY's N", p.X, p.W, dY1, p.Y, p.dX, p.dW, p.db},
                        {"dY's M", p.X, p.W, dY2, p.Y, p.dX, p.dW, p.db},
                        {"saved's N", p.X, p.W, p.dY, S1, p.dX, p.dW, p.db},
                        {"saved's M", p.X, p.W, p.dY, S2, p.dX, p.dW, p.db},
                        {"dX's K", p.X, p.W, p.dY, p.Y, dX1, p.dW, p.db},
                        {"dX's M", p.X, p.W, p.dY, p.Y, dX2, p.dW, p.db},
                        {"dW's K", p.X, p.W, p.dY, p.Y, p.dX, dW1, p.db},
                        {"dW's N", p.X, p.W, p.dY, p.Y, p.dX, dW2, p.db},
                        {"db longer", p.X, p.W, p.dY, p.Y, p.dX, p.dW, db1},
                        {"db shorter", p.X, p.W, p.dY, p.Y, p.dX, p.dW, db2}};
  for (const Case& c : cases) {
    const std::string a = refusal([&] {
      FusedLinear::linear_leaky_relu_backward(ExecSpace(), c.X, c.W, c.dY, c.s, c.dX, c.dW, c.db,
                                              2.f, 0.1f, o);
    });
    EXPECT_TRUE(names(a, one_shot, "extents")) << c.what;
    const std::string b = refusal(
        [&] { Plan bad(ExecSpace(), c.X, c.W, c.dY, c.s, c.dX, c.dW, c.db, 2.f, 0.1f, o); });
    EXPECT_TRUE(names(b, plan_make, "extents")) << c.what;
    const std::string e = refusal([&] { plan.execute(c.X, c.W, c.dY, c.s, c.dX, c.dW, c.db); });
    EXPECT_TRUE(names(e, plan_execute, "extents")) << c.what;
    EXPECT_TRUE(untouched(p)) << c.what << ": a refused call wrote an output";
  }
  // A plan made with an output executed without it, or the other way: refused too.
  const std::string skipped =
      refusal([&] { plan.execute(p.X, p.W, p.dY, p.Y, p.dX, Matrix(), p.db); });
  EXPECT_TRUE(starts_with(skipped, std::string(plan_execute) + ": ")) << skipped;
  Plan without(ExecSpace(), p.X, p.W, p.dY, p.Y, p.dX, p.dW, Vector(), 2.f, 0.1f, o);
  const std::string added =
      refusal([&] { without.execute(p.X, p.W, p.dY, p.Y, p.dX, p.dW, p.db); });
  EXPECT_TRUE(starts_with(added, std::string(plan_execute) + ": ")) << added;
  EXPECT_TRUE(untouched(p));
}

// Requests no product path serves, refused by name through both entry points: the forward's
// own kernels (the gradient's products run on auto, vendor, vendor_lt or fused_sm90), tensor-core
// precisions on double Views, vendor_lt in anything but 3xtf32, explicit tensor-core requests
// where nothing computes them (the host), non-finite parameters. Where a GPU serves an explicit
// request, it runs exactly what was asked.
TEST(GradientErrors, UnservedRequestsRefused) {
  PF p(9, 5, 7, 1200, 2, 0.1);
  PD d(9, 5, 7, 1201, 2, 0.1);
  const auto both = [&](const GradientOptions& o, float multiplier, float slope) {
    const std::string a = refusal([&] {
      FusedLinear::linear_leaky_relu_backward(ExecSpace(), p.X, p.W, p.dY, p.Y, p.dX, p.dW, p.db,
                                              multiplier, slope, o);
    });
    const std::string b = refusal([&] {
      Plan plan(ExecSpace(), p.X, p.W, p.dY, p.Y, p.dX, p.dW, p.db, multiplier, slope, o);
    });
    return std::make_pair(a, b);
  };
  for (Algorithm a : all_algorithms) {
    if (a == Algorithm::Auto || a == Algorithm::Vendor || a == Algorithm::VendorLt ||
        a == Algorithm::FusedSm90)
      continue;
    const auto r = both(gradient_options(Saved::Output, false, Precision::Strict, a), 2, 0.1f);
    EXPECT_TRUE(names(r.first, one_shot, FusedLinear::to_string(a))) << r.first;
    EXPECT_TRUE(names(r.second, plan_make, FusedLinear::to_string(a))) << r.second;
  }
  for (Precision precision : {Precision::TF32, Precision::TF32x3}) {
    const std::string e =
        refusal([&] { d.backward(gradient_options(Saved::Output, false, precision)); });
    EXPECT_TRUE(names(e, one_shot, "float")) << e;
  }
  for (Algorithm a : {Algorithm::VendorLt, Algorithm::FusedSm90})
    for (Precision precision : {Precision::Strict, Precision::TF32}) {
      const auto r = both(gradient_options(Saved::Output, false, precision, a), 2, 0.1f);
      EXPECT_TRUE(names(r.first, one_shot, "3xtf32")) << r.first;
      EXPECT_TRUE(names(r.second, plan_make, "3xtf32")) << r.second;
    }
  const float nan = std::numeric_limits<float>::quiet_NaN(),
              inf = std::numeric_limits<float>::infinity();
  for (const auto& bad : {std::make_pair(nan, 0.1f), std::make_pair(inf, 0.1f),
                          std::make_pair(2.f, nan), std::make_pair(2.f, -inf)}) {
    const auto r = both(gradient_options(Saved::PreActivation), bad.first, bad.second);
    EXPECT_TRUE(names(r.first, one_shot, "finite")) << r.first;
    EXPECT_TRUE(names(r.second, plan_make, "finite")) << r.second;
  }
  EXPECT_TRUE(untouched(p)) << "a refused call wrote an output";
  const std::pair<Algorithm, Precision> explicit_requests[] = {
      {Algorithm::Vendor, Precision::TF32},
      {Algorithm::VendorLt, Precision::TF32x3},
      {Algorithm::FusedSm90, Precision::TF32x3}};
  for (const auto& request : explicit_requests) {
    const GradientOptions o = gradient_options(Saved::Output, false, request.second, request.first);
    if (Impl::is_host_space<ExecSpace>()) {
      const auto r = both(o, 2, 0.1f);
      EXPECT_TRUE(names(r.first, one_shot, FusedLinear::to_string(request.second))) << r.first;
      EXPECT_TRUE(names(r.second, plan_make, FusedLinear::to_string(request.second))) << r.second;
      continue;
    }
    try {
      p.poison();
      const GradientInfo info = p.backward(o);
      for (const RunInfo* r : {&info.dx, &info.dw})
        EXPECT_EQ(r->precision, request.second) << describe(o, info);
      EXPECT_TRUE(matches_oracle(p, p.oracle(Saved::Output), info)) << describe(o, info);
    } catch (const std::invalid_argument& e) {
      EXPECT_TRUE(starts_with(e.what(), std::string(one_shot) + ": ")) << e.what();
    }
  }
}

// A View with elements but no data (null) is refused by name, input or output.
TEST(GradientErrors, NullDataWithElementsRefused) {
  const std::int64_t M = 6, K = 7, N = 5;
  PF p(M, K, N, 21, 2, 0.1);
  const Unmanaged null_mk(nullptr, M, K), null_nk(nullptr, N, K), null_mn(nullptr, M, N);
  const UnmanagedVector null_n(nullptr, N);
  const Unmanaged X(p.X.data(), M, K), W(p.W.data(), N, K), dY(p.dY.data(), M, N),
      S(p.Y.data(), M, N), dX(p.dX.data(), M, K), dW(p.dW.data(), N, K);
  const UnmanagedVector db(p.db.data(), N);
  struct Case {
    const char* name;
    Unmanaged X, W, dY, S, dX, dW;
    UnmanagedVector db;
  };
  const Case cases[] = {{"X", null_mk, W, dY, S, dX, dW, db},
                        {"W", X, null_nk, dY, S, dX, dW, db},
                        {"dY", X, W, null_mn, S, dX, dW, db},
                        {"saved", X, W, dY, null_mn, dX, dW, db}};
  for (const Case& c : cases) {
    const std::string e = refusal([&] {
      FusedLinear::linear_leaky_relu_backward(ExecSpace(), c.X, c.W, c.dY, c.S, c.dX, c.dW, c.db,
                                              2.f, 0.1f, gradient_options(Saved::Output));
    });
    EXPECT_TRUE(names(e, one_shot, std::string(c.name) + " is not allocated")) << e;
  }
  // An output with elements and null data: the same View type as an empty one, but not empty.
  const std::string e = refusal([&] {
    FusedLinear::linear_leaky_relu_backward(ExecSpace(), X, W, dY, S, null_mk, dW, db, 2.f, 0.1f,
                                            gradient_options(Saved::Output));
  });
  EXPECT_TRUE(names(e, one_shot, "dX is not allocated")) << e;
  EXPECT_TRUE(untouched(p)) << "a refused call wrote an output";
}

/// The refusal names the function and says the outputs overlap something ("alias" or
/// "share"), and names both Views.
::testing::AssertionResult names_aliasing(const std::string& what, const char* function,
                                          const char* a, const char* b) {
  const bool aliasing = contains(what, "alias") || contains(what, "share");
  if (starts_with(what, std::string(function) + ": ") && aliasing && contains(what, a) &&
      contains(what, b))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << what << "' should start with '" << function
                                       << ": ', say alias or share, and name " << a << " and " << b;
}

// An output sharing elements with an input, whole or in part (a row), through both entry
// points and a plan's execute: refused by name, nothing written. (M = N = K so that every pair
// can alias.) Inputs sharing memory with each other are fine: they are only read.
TEST(GradientErrors, OutputAliasingAnInputRefused) {
  const std::int64_t M = 8;
  PF p(M, M, M, 1100, 2, 0.1);
  const GradientOptions o = gradient_options(Saved::Output);
  const std::vector<double> inputs_before[] = {host_matrix(p.X), host_matrix(p.W),
                                               host_matrix(p.dY), host_matrix(p.Y)};
  const auto inputs_unchanged = [&] {
    const std::vector<double> now[] = {host_matrix(p.X), host_matrix(p.W), host_matrix(p.dY),
                                       host_matrix(p.Y)};
    for (int i = 0; i < 4; ++i)
      if (!same_bits("input", now[i], inputs_before[i])) return false;
    return true;
  };
  const Vector dY_row2 = Kokkos::subview(p.dY, 2, Kokkos::ALL);
  const Vector X_row1 = Kokkos::subview(p.X, 1, Kokkos::ALL);
  const Vector W_row5 = Kokkos::subview(p.W, 5, Kokkos::ALL);
  const Vector saved_row7 = Kokkos::subview(p.Y, 7, Kokkos::ALL);
  struct Case {
    const char* a;
    const char* b;
    Matrix dX, dW;
    Vector db;
  };
  const Case cases[] = {{"dX", "X", p.X, p.dW, p.db},      {"dX", "W", p.W, p.dW, p.db},
                        {"dX", "dY", p.dY, p.dW, p.db},    {"dX", "saved", p.Y, p.dW, p.db},
                        {"dW", "X", p.dX, p.X, p.db},      {"dW", "W", p.dX, p.W, p.db},
                        {"dW", "dY", p.dX, p.dY, p.db},    {"dW", "saved", p.dX, p.Y, p.db},
                        {"db", "X", p.dX, p.dW, X_row1},   {"db", "W", p.dX, p.dW, W_row5},
                        {"db", "dY", p.dX, p.dW, dY_row2}, {"db", "saved", p.dX, p.dW, saved_row7}};
  for (const Case& c : cases) {
    const std::string a = refusal([&] {
      FusedLinear::linear_leaky_relu_backward(ExecSpace(), p.X, p.W, p.dY, p.Y, c.dX, c.dW, c.db,
                                              2.f, 0.1f, o);
    });
    EXPECT_TRUE(names_aliasing(a, one_shot, c.a, c.b)) << c.a << " over " << c.b;
    const std::string b = refusal(
        [&] { Plan bad(ExecSpace(), p.X, p.W, p.dY, p.Y, c.dX, c.dW, c.db, 2.f, 0.1f, o); });
    EXPECT_TRUE(names_aliasing(b, plan_make, c.a, c.b)) << c.a << " over " << c.b;
    EXPECT_TRUE(untouched(p) && inputs_unchanged())
        << c.a << " over " << c.b << ": a refused call wrote something";
  }
  // A plan made on separate Views, executed with aliasing ones: refused at execute.
  Plan plan(ExecSpace(), p.X, p.W, p.dY, p.Y, p.dX, p.dW, p.db, 2.f, 0.1f, o);
  const std::string e = refusal([&] { plan.execute(p.X, p.W, p.dY, p.Y, p.X, p.dW, p.db); });
  EXPECT_TRUE(names_aliasing(e, plan_execute, "dX", "X")) << e;
  EXPECT_TRUE(untouched(p) && inputs_unchanged());
  // The inputs may share: X and W the same View, saved and dY the same View.
  PF q(M, M, M, 1101, 2, 0.1);
  const GradientInfo info =
      FusedLinear::linear_leaky_relu_backward(ExecSpace(), q.X, q.X, q.dY, q.dY, q.dX, q.dW, q.db,
                                              2.f, 0.1f, gradient_options(Saved::PreActivation));
  Inputs in = q.inputs(Saved::PreActivation);
  in.W = in.X, in.saved = in.dY;
  EXPECT_TRUE(matches_oracle(q, Oracle(in, 2, 0.1), info)) << "inputs sharing memory";
}

// Outputs sharing elements with each other (dX and dW the same View, db a row of dW or of dX):
// refused by name through both entry points and a plan's execute, nothing written.
TEST(GradientErrors, OutputsAliasingEachOtherRefused) {
  const std::int64_t M = 8;
  PF p(M, M, M, 1102, 2, 0.1);
  const GradientOptions o = gradient_options(Saved::Output);
  const Matrix other("other", M, M);
  const Vector dW_row0 = Kokkos::subview(other, 0, Kokkos::ALL);
  const Vector dX_row3 = Kokkos::subview(other, 3, Kokkos::ALL);
  struct Case {
    const char* a;
    const char* b;
    Matrix dX, dW;
    Vector db;
  };
  const Case cases[] = {{"dX", "dW", other, other, p.db},
                        {"dW", "db", p.dX, other, dW_row0},
                        {"dX", "db", other, p.dW, dX_row3}};
  Kokkos::deep_copy(other, std::numeric_limits<float>::quiet_NaN());
  const auto other_untouched = [&] {
    for (double v : host_matrix(other))
      if (!std::isnan(v)) return false;
    return true;
  };
  Plan plan(ExecSpace(), p.X, p.W, p.dY, p.Y, p.dX, p.dW, p.db, 2.f, 0.1f, o);
  for (const Case& c : cases) {
    const std::string a = refusal([&] {
      FusedLinear::linear_leaky_relu_backward(ExecSpace(), p.X, p.W, p.dY, p.Y, c.dX, c.dW, c.db,
                                              2.f, 0.1f, o);
    });
    EXPECT_TRUE(names_aliasing(a, one_shot, c.a, c.b)) << c.a << " over " << c.b;
    const std::string b = refusal(
        [&] { Plan bad(ExecSpace(), p.X, p.W, p.dY, p.Y, c.dX, c.dW, c.db, 2.f, 0.1f, o); });
    EXPECT_TRUE(names_aliasing(b, plan_make, c.a, c.b)) << c.a << " over " << c.b;
    const std::string e = refusal([&] { plan.execute(p.X, p.W, p.dY, p.Y, c.dX, c.dW, c.db); });
    EXPECT_TRUE(names_aliasing(e, plan_execute, c.a, c.b)) << c.a << " over " << c.b;
    EXPECT_TRUE(untouched(p) && other_untouched())
        << c.a << " over " << c.b << ": a refused call wrote something";
  }
}

}  // namespace
