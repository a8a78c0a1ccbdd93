// SPDX-License-Identifier: Apache-2.0
// Misuse, through both entry points: the one-shot call ("FusedLinear::linear_leaky_relu: ..."),
// a Plan's construction ("FusedLinear::Plan: ...") and Plan::execute
// ("FusedLinear::Plan::execute: ..."): mismatched extents, extents past 2^31, unallocated Views
// (or Views with elements and null data), an output overlapping an input, non-finite
// parameters, requests the build cannot serve. Each an std::invalid_argument naming the function
// and the problem, before anything is written.
#include <limits>
#include <random>
#include <set>
#include <vector>
#include <string>

#include "common/TestHelpers.hpp"

namespace {

using namespace FusedLinearTest;
using P = Problem<ExecSpace, float, Kokkos::LayoutRight>;
using Matrix = P::Matrix;
using Vector = P::Vector;
using PlanType = FusedLinear::Plan<ExecSpace, Matrix, Matrix, Vector, Matrix>;
using Unmanaged = Kokkos::View<float**, Kokkos::LayoutRight, P::Device, Kokkos::MemoryUnmanaged>;

constexpr const char* one_shot = "FusedLinear::linear_leaky_relu: ";
constexpr const char* plan_make = "FusedLinear::Plan: ";
constexpr const char* plan_execute = "FusedLinear::Plan::execute: ";

template <class... Args>
std::string one_shot_error(Args&&... args) {
  try {
    FusedLinear::linear_leaky_relu(std::forward<Args>(args)...);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no exception";
}
template <class X, class W, class B, class Y, class... Rest>
std::string plan_error(const X& x, const W& w, const B& b, const Y& y, Rest&&... rest) {
  try {
    FusedLinear::Plan plan(ExecSpace(), x, w, b, y, std::forward<Rest>(rest)...);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no exception";
}
template <class Plan, class X, class W, class B, class Y>
std::string execute_error(const Plan& plan, const X& x, const W& w, const B& b, const Y& y) {
  try {
    plan.execute(x, w, b, y);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no exception";
}
::testing::AssertionResult names(const std::string& what, const char* function,
                                 const std::string& problem) {
  if (starts_with(what, function) && contains(what, problem)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "'" << what << "' should start with '" << function << "' and say '" << problem << "'";
}

class Errors : public ::testing::Test {
 protected:
  P p{6, 5, 4, 11};
  /// Y must be untouched by a refused call.
  void expect_y_untouched() const {
    for (double v : p.output()) ASSERT_TRUE(std::isnan(v)) << "a refused call wrote Y";
  }
};

TEST_F(Errors, MismatchedExtents) {
  Matrix W_bad_k("W", 4, 6), Y_bad_m("Y", 7, 4), Y_bad_n("Y", 6, 3);
  Vector b_bad("b", 5);
  const PlanType plan(ExecSpace(), p.X, p.W, p.b, p.Y, 2.f, 0.1f);
  for (Algorithm a : all_algorithms) {
    EXPECT_TRUE(names(one_shot_error(p.X, W_bad_k, p.b, p.Y, 2.f, 0.1f, a), one_shot,
                      "extents do not match"));
    EXPECT_TRUE(names(one_shot_error(p.X, p.W, b_bad, p.Y, 2.f, 0.1f, a), one_shot,
                      "extents do not match"));
    EXPECT_TRUE(names(one_shot_error(p.X, p.W, p.b, Y_bad_m, 2.f, 0.1f, a), one_shot,
                      "extents do not match"));
    EXPECT_TRUE(names(one_shot_error(p.X, p.W, p.b, Y_bad_n, 2.f, 0.1f, a), one_shot,
                      "X [6,5], W [4,5], b [4], Y [6,3]"));
    EXPECT_TRUE(names(plan_error(p.X, W_bad_k, p.b, p.Y, 2.f, 0.1f, Options(a)), plan_make,
                      "extents do not match"));
    EXPECT_TRUE(names(plan_error(p.X, p.W, p.b, Y_bad_n, 2.f, 0.1f, Options(a)), plan_make,
                      "X [6,5], W [4,5], b [4], Y [6,3]"));
  }
  // A plan takes the extents it was made for only: each View in turn of another shape.
  Matrix X_other("X", 7, 5), W_other("W", 5, 5);
  EXPECT_TRUE(
      names(execute_error(plan, X_other, p.W, p.b, p.Y), plan_execute,
            "expected X [M,K], W [N,K], b [N], Y [M,N] with M = 6, K = 5, N = 4; got X [7,5]"));
  EXPECT_TRUE(
      names(execute_error(plan, p.X, W_other, p.b, p.Y), plan_execute, "extents do not match"));
  EXPECT_TRUE(
      names(execute_error(plan, p.X, W_bad_k, p.b, p.Y), plan_execute, "extents do not match"));
  EXPECT_TRUE(
      names(execute_error(plan, p.X, p.W, b_bad, p.Y), plan_execute, "extents do not match"));
  EXPECT_TRUE(
      names(execute_error(plan, p.X, p.W, p.b, Y_bad_m), plan_execute, "extents do not match"));
  EXPECT_TRUE(names(execute_error(plan, p.X, p.W, p.b, Y_bad_n), plan_execute,
                    "got X [6,5], W [4,5], b [4], Y [6,3]"));
  expect_y_untouched();
}

TEST_F(Errors, ExtentsPast32Bits) {
  // Unmanaged Views over a few floats with a 2^31 extent: refused before anything is touched.
  const std::size_t huge = std::size_t(1) << 31;
  const Unmanaged X_huge(p.X.data(), huge, 5), Y_huge(p.Y.data(), huge, 4);
  const Unmanaged W_huge(p.W.data(), huge, 5), X_k(p.X.data(), 6, huge), W_k(p.W.data(), 4, huge);
  Kokkos::View<float*, P::Device, Kokkos::MemoryUnmanaged> b_huge(p.b.data(), huge);
  const Unmanaged Y_n(p.Y.data(), 6, huge);
  EXPECT_TRUE(names(one_shot_error(X_huge, p.W, p.b, Y_huge, 2.f, 0.1f), one_shot,
                    "must each be below 2^31"));
  EXPECT_TRUE(names(one_shot_error(p.X, W_huge, b_huge, Y_n, 2.f, 0.1f), one_shot,
                    "must each be below 2^31"));
  EXPECT_TRUE(
      names(one_shot_error(X_k, W_k, p.b, p.Y, 2.f, 0.1f), one_shot, "must each be below 2^31"));
  EXPECT_TRUE(
      names(plan_error(X_huge, p.W, p.b, Y_huge, 2.f, 0.1f), plan_make, "must each be below 2^31"));
  EXPECT_TRUE(
      names(plan_error(X_k, W_k, p.b, p.Y, 2.f, 0.1f), plan_make, "must each be below 2^31"));
  // 2^31 - 1 is the largest extent taken (the check, not an allocation: M = 0 rows of X).
  const Unmanaged X_max(p.X.data(), 0, huge - 1), W_max(p.W.data(), 4, huge - 1);
  const Unmanaged Y_empty(p.Y.data(), 0, 4);
  EXPECT_EQ(one_shot_error(X_max, W_max, p.b, Y_empty, 2.f, 0.1f, options(Algorithm::Fused)),
            "no exception");
  expect_y_untouched();
}

TEST_F(Errors, UnallocatedViews) {
  Matrix none;
  Vector no_bias;
  // With elements but null data (an Unmanaged View over nothing): not allocated either.
  const Unmanaged null_x(nullptr, 6, 5), null_y(nullptr, 6, 4);
  for (Algorithm a : all_algorithms) {
    EXPECT_TRUE(
        names(one_shot_error(none, p.W, p.b, p.Y, 2.f, 0.1f, a), one_shot, "extents do not match"));
    EXPECT_TRUE(
        names(one_shot_error(null_x, p.W, p.b, p.Y, 2.f, 0.1f, a), one_shot, "X is not allocated"));
    EXPECT_TRUE(
        names(one_shot_error(p.X, p.W, p.b, null_y, 2.f, 0.1f, a), one_shot, "Y is not allocated"));
  }
  // Unallocated Views of the right extents cannot be made (an unallocated View has extent 0),
  // except as Unmanaged Views with null data.
  const Unmanaged null_w(nullptr, 4, 5);
  const Kokkos::View<float*, P::Device, Kokkos::MemoryUnmanaged> null_b(nullptr, 4);
  EXPECT_TRUE(
      names(one_shot_error(p.X, null_w, p.b, p.Y, 2.f, 0.1f), one_shot, "W is not allocated"));
  EXPECT_TRUE(
      names(one_shot_error(p.X, p.W, null_b, p.Y, 2.f, 0.1f), one_shot, "b is not allocated"));
  EXPECT_TRUE(names(plan_error(null_x, p.W, p.b, p.Y, 2.f, 0.1f), plan_make, "X is not allocated"));
  EXPECT_TRUE(names(plan_error(p.X, null_w, p.b, p.Y, 2.f, 0.1f), plan_make, "W is not allocated"));
  EXPECT_TRUE(names(plan_error(p.X, p.W, null_b, p.Y, 2.f, 0.1f), plan_make, "b is not allocated"));
  EXPECT_TRUE(names(plan_error(p.X, p.W, p.b, null_y, 2.f, 0.1f), plan_make, "Y is not allocated"));
  // A plan of Unmanaged Views, executed with null ones.
  const Unmanaged X(p.X.data(), 6, 5), W(p.W.data(), 4, 5), Y(p.Y.data(), 6, 4);
  const FusedLinear::Plan plan(ExecSpace(), X, W, p.b, Y, 2.f, 0.1f);
  EXPECT_TRUE(names(execute_error(plan, null_x, W, p.b, Y), plan_execute, "X is not allocated"));
  EXPECT_TRUE(names(execute_error(plan, X, null_w, p.b, Y), plan_execute, "W is not allocated"));
  EXPECT_TRUE(names(execute_error(plan, X, W, p.b, null_y), plan_execute, "Y is not allocated"));
  const PlanType managed(ExecSpace(), p.X, p.W, p.b, p.Y, 2.f, 0.1f);
  EXPECT_TRUE(
      names(execute_error(managed, none, p.W, p.b, p.Y), plan_execute, "extents do not match"));
  EXPECT_TRUE(
      names(execute_error(managed, p.X, p.W, no_bias, p.Y), plan_execute, "extents do not match"));
  expect_y_untouched();
}

TEST_F(Errors, OutputAliasingAnInput) {
  // Y over the memory of X, of W (from its second element), and of b: each refused before
  // anything is written.
  Matrix XY("XY", 6, 5);
  const Unmanaged Y_on_X(XY.data(), 6, 4);
  Matrix W_big("W", 4, 5), X1("X1", 1, 5);
  const Unmanaged Y_on_W(W_big.data() + 1, 1, 4), Y_on_b(p.b.data(), 1, 4);
  const Unmanaged X_u(XY.data(), 6, 5), X1_u(X1.data(), 1, 5), Y_ok(p.Y.data(), 6, 4);
  for (Algorithm a : all_algorithms) {
    EXPECT_TRUE(names(one_shot_error(XY, p.W, p.b, Y_on_X, 2.f, 0.1f, a), one_shot, "Y aliases X"));
    EXPECT_TRUE(
        names(one_shot_error(X1, W_big, p.b, Y_on_W, 2.f, 0.1f, a), one_shot, "Y aliases W"));
    EXPECT_TRUE(names(one_shot_error(X1, p.W, p.b, Y_on_b, 2.f, 0.1f, a), one_shot, "Y aliases b"));
  }
  EXPECT_TRUE(names(plan_error(XY, p.W, p.b, Y_on_X, 2.f, 0.1f), plan_make, "Y aliases X"));
  EXPECT_TRUE(names(plan_error(X1, p.W, p.b, Y_on_b, 2.f, 0.1f), plan_make, "Y aliases b"));
  // A plan made with separate Views, executed with an aliasing Y.
  const FusedLinear::Plan plan(ExecSpace(), X_u, p.W, p.b, Y_ok, 2.f, 0.1f);
  EXPECT_TRUE(names(execute_error(plan, X_u, p.W, p.b, Y_on_X), plan_execute, "Y aliases X"));
  const Unmanaged Y_on_b6(p.b.data(), 6, 4);
  EXPECT_TRUE(names(execute_error(plan, X_u, p.W, p.b, Y_on_b6), plan_execute, "Y aliases b"));
  expect_y_untouched();
  // Adjacent but not overlapping is fine: Y right after X in one block.
  Kokkos::View<float*, P::Device> block("block", 6 * 5 + 6 * 4);
  const Unmanaged X_first(block.data(), 6, 5), Y_after(block.data() + 30, 6, 4);
  Kokkos::deep_copy(X_first, p.X);
  EXPECT_EQ(one_shot_error(X_first, p.W, p.b, Y_after, 2.f, 0.1f), "no exception");
}

// The overlap check decides by elements, not address ranges: against a brute-force set of
// addresses over random strided Views of one buffer (rows, columns, interleaved columns,
// offsets), and for Y's own strides mapping two indices to one address.
TEST(Checks, SharesElementsAsTheAddressesSay) {
  using Strided =
      Kokkos::View<float**, Kokkos::LayoutStride, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>;
  std::vector<float> buffer(1024);
  std::mt19937 rng(20261201);
  const auto make = [&] {
    const int e0 = 1 + int(rng() % 6), e1 = 1 + int(rng() % 6);
    int s0 = 1 + int(rng() % 11), s1 = 1 + int(rng() % 11);
    if (rng() % 3 == 0) s1 = 1, s0 = e1 + int(rng() % 4);  // rows, padded
    if (rng() % 5 == 0) s0 = 1, s1 = e0 + int(rng() % 3);  // columns
    return Strided(buffer.data() + rng() % 160, Kokkos::LayoutStride(e0, s0, e1, s1));
  };
  const auto addresses = [](const Strided& v) {
    std::vector<const float*> a;
    for (std::size_t i = 0; i < v.extent(0); ++i)
      for (std::size_t j = 0; j < v.extent(1); ++j) a.push_back(&v(i, j));
    return a;
  };
  int shared = 0;
  for (int c = 0; c < 20000; ++c) {
    const Strided a = make(), b = make();
    const std::vector<const float*> in_a = addresses(a), in_b = addresses(b);
    const std::set<const float*> set_a(in_a.begin(), in_a.end());
    bool truth = false;
    for (const float* p : in_b) truth = truth || set_a.count(p) > 0;
    shared += truth;
    ASSERT_EQ(Impl::shares_elements(a, b), truth) << "case " << c;
    ASSERT_EQ(Impl::shares_elements(b, a), truth) << "case " << c;
    ASSERT_EQ(Impl::maps_two_indices_to_one_element(a), set_a.size() < in_a.size()) << "case " << c;
  }
  EXPECT_GT(shared, 1000);  // both answers were exercised
  EXPECT_LT(shared, 19000);
}

// X and Y as column blocks of one row-major matrix share no element: accepted and computed
// right on every path; one shared column is still refused.
TEST_F(Errors, ColumnBlocksOfOneMatrixAreNotAliases) {
  const std::int64_t M = 6, K = 5, N = 4;
  Kokkos::View<float**, Kokkos::LayoutRight, P::Device> buffer("buffer", M, K + N);
  const auto X = Kokkos::subview(buffer, Kokkos::ALL, Kokkos::make_pair(0, int(K)));
  const auto Y = Kokkos::subview(buffer, Kokkos::ALL, Kokkos::make_pair(int(K), int(K + N)));
  Kokkos::deep_copy(X, p.X);
  for (Algorithm a : all_algorithms) {
    const auto info = attempt(ExecSpace(), X, p.W, p.b, Y, 2.0, 0.1, options(a));
    if (info)
      EXPECT_TRUE(p.reference(2.0, 0.1).check<float>(host_matrix(Y), product_rounding(*info, K)))
          << describe(options(a), *info);
    Kokkos::fence();
    EXPECT_EQ(host_matrix(X), host_matrix(p.X)) << "X changed under " << FusedLinear::to_string(a);
  }
  const auto Y_over_X =
      Kokkos::subview(buffer, Kokkos::ALL, Kokkos::make_pair(int(K - 1), int(K + N - 1)));
  EXPECT_TRUE(names(one_shot_error(X, p.W, p.b, Y_over_X, 2.f, 0.1f), one_shot, "Y aliases X"));
}

TEST_F(Errors, NonFiniteParameters) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (Algorithm a : all_algorithms) {
    EXPECT_TRUE(names(one_shot_error(p.X, p.W, p.b, p.Y, nan, 0.1f, a), one_shot,
                      "multiplier must be finite"));
    EXPECT_TRUE(names(one_shot_error(p.X, p.W, p.b, p.Y, -inf, 0.1f, a), one_shot,
                      "multiplier must be finite"));
    EXPECT_TRUE(names(one_shot_error(p.X, p.W, p.b, p.Y, 2.f, nan, a), one_shot,
                      "negative_slope must be finite"));
    EXPECT_TRUE(names(one_shot_error(p.X, p.W, p.b, p.Y, 2.f, inf, a), one_shot,
                      "negative_slope must be finite"));
    EXPECT_TRUE(names(plan_error(p.X, p.W, p.b, p.Y, inf, 0.1f, Options(a)), plan_make,
                      "multiplier must be finite"));
    EXPECT_TRUE(names(plan_error(p.X, p.W, p.b, p.Y, 2.f, -nan, Options(a)), plan_make,
                      "negative_slope must be finite"));
  }
  expect_y_untouched();
}

// Requests the build cannot serve are refused by name, by both entry points (the full table of
// what each build serves is tests/dispatch/'s; these are the ones every build refuses).
TEST_F(Errors, RefusedRequests) {
  const std::pair<Options, const char*> refused[] = {
      {options(Algorithm::FusedSm90), "fused_sm90 computes precision 3xtf32 only"},
      {options(Algorithm::Fused, Precision::TF32), "precision tf32 needs cuBLAS or cuBLASLt"},
      {options(Algorithm::FusedSkinny, Precision::TF32x3), "precision 3xtf32 runs on fused_sm90"},
      {options(Algorithm::SkinnySm90, Precision::TF32x3), "precision 3xtf32 runs on fused_sm90"},
  };
  for (const auto& r : refused) {
    EXPECT_TRUE(names(one_shot_error(p.X, p.W, p.b, p.Y, 2.f, 0.1f, r.first), one_shot, r.second));
    EXPECT_TRUE(names(plan_error(p.X, p.W, p.b, p.Y, 2.f, 0.1f, r.first), plan_make, r.second));
  }
#if !defined(FUSED_LINEAR_SM90A)
  EXPECT_TRUE(names(one_shot_error(p.X, p.W, p.b, p.Y, 2.f, 0.1f, options(Algorithm::SkinnySm90)),
                    one_shot, "skinny_sm90 (the sm_90a few-rows kernel) is not in this build"));
  EXPECT_TRUE(names(
      plan_error(p.X, p.W, p.b, p.Y, 2.f, 0.1f, options(Algorithm::FusedSm90, Precision::TF32x3)),
      plan_make, "fused_sm90 (the sm_90a 3xtf32 kernel) is not in this build"));
#endif
  expect_y_untouched();
}

}  // namespace
