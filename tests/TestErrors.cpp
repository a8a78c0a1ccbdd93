// SPDX-License-Identifier: Apache-2.0
// Misuse, through both entry points: the one-shot call ("FusedLinear::linear_leaky_relu: ..."),
// a Plan's construction ("FusedLinear::Plan: ...") and Plan::execute
// ("FusedLinear::Plan::execute: ..."): mismatched extents, extents past 2^31, unallocated Views
// (or Views with elements and null data), an output overlapping an input, non-finite
// parameters, requests the build cannot serve. Each an std::invalid_argument naming the function
// and the problem, before anything is written.
#include <limits>
#include <string>

#include "TestHelpers.hpp"

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
// what each build serves is TestDispatch.cpp's; these are the ones every build refuses).
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
