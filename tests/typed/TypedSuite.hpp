// SPDX-License-Identifier: Apache-2.0
// The main typed suite: every path of the layer against the test's float64 reference, typed
// over (execution space, value type, layout), as ArborX and kokkos-fft type their tests over
// device types. The tests are defined here once and instantiated by TestTypedDefault.cpp (the
// default execution space: float/double x LayoutRight/LayoutLeft) and TestTypedSpaces.cpp (every
// other execution space the build enables: float LayoutRight and double LayoutLeft), so that the
// two halves compile in parallel and the kernels are instantiated deliberately. The fixture and
// the configurations are in TypedLayer.hpp.
#ifndef FUSED_LINEAR_TEST_TYPED_SUITE_HPP
#define FUSED_LINEAR_TEST_TYPED_SUITE_HPP

#include <array>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../common/TestHelpers.hpp"
#include "TypedLayer.hpp"

namespace FusedLinearTest {

TYPED_TEST_SUITE_P(Layer);

// Shapes: single elements, K = 1, skinny M = 1 and N = 1, odd sizes, sizes that are and are not
// multiples of every tile (fused: GPU 128x128x16, host 4x16; fused_skinny: 16 or 8 rows x 32
// columns x chunks of 256 or 128 k on GPUs, 16 x 4 x 8 on hosts) and of the 16-byte pack
// (4 floats, 2 doubles), and one larger odd shape as Kokkos Kernels' own gemm tests use.
TYPED_TEST_P(Layer, EdgeAndOddShapes) {
  const std::int64_t shapes[][3] = {
      {1, 1, 1},       {1, 7, 1},      {3, 1, 5},       {1, 257, 300},   {300, 257, 1},
      {13, 15, 17},    {17, 16, 12},   {64, 64, 64},    {128, 128, 128}, {129, 136, 131},
      {127, 129, 255}, {256, 72, 260}, {12, 3071, 517}, {17, 513, 33},   {40, 1030, 65},
      {16, 256, 32},   {9, 130, 31}};
  for (const auto& s : shapes) this->check_all(s[0], s[1], s[2], 2.0, 0.1);
}

// fused_skinny with K split across teams (GPUs do it by themselves where tiles are few; forced
// here through Tuning::skinny_splits on every backend), over more splits than chunks, K not a
// multiple of a chunk, partial row and column blocks: the last team of each tile adds the
// splits' partial sums in split order and applies the epilogue. The result must be the
// reference's and the same bits on every run; the plan owns the partial sums and counters.
TYPED_TEST_P(Layer, SkinnySplitKMatchesAndIsReproducible) {
  using Scalar = typename TestFixture::Scalar;
  using Exec = typename TestFixture::Exec;
  const std::int64_t shapes[][3] = {{1, 1000, 70}, {17, 700, 33}, {40, 1030, 65}, {5, 129, 300}};
  for (int splits : {2, 3, 64}) {
    for (const auto& s : shapes) {
      typename TestFixture::P p(s[0], s[1], s[2], 77 + splits);
      const Options o = options(Algorithm::FusedSkinny, Precision::Strict, splits);
      const auto first = this->run(p, o);
      EXPECT_TRUE(p.reference(2, 0.1).template check<Scalar>(first)) << splits << " splits";
      for (int repeat = 0; repeat < 2; ++repeat) {
        const auto again = this->run(p, o);
        ASSERT_EQ(std::memcmp(first.data(), again.data(), first.size() * sizeof(double)), 0)
            << splits << " splits, " << p.M << "x" << p.K << "x" << p.N << " run " << repeat;
      }
      // The plan owns the partial sums and counters exactly when K is split: forced splits
      // split K wherever it has at least two chunks (on the host always: its chunks are 8 k;
      // GPUs' are 128 or 256: K = 129 has one there).
      FusedLinear::Plan plan(Exec(), p.X, p.W, p.b, p.Y, Scalar(2), Scalar(0.1), o);
      const auto choice = Impl::choose_skinny<Exec, Scalar>(Exec(), p.M, p.N, p.K, splits);
      EXPECT_EQ(plan.workspace_bytes() > 0, choice.partials > 0) << splits << " splits";
      if (Impl::is_host_space<Exec>() || p.K >= 512) EXPECT_GT(choice.split.splits, 1) << p.K;
    }
  }
}

TYPED_TEST_P(Layer, MultipliersAndSlopes) {
  const double multipliers[] = {2.0, 1.0, -1.5, 0.0};
  const double slopes[] = {0.1, 0.0, 1.0, 2.5, -0.5};
  for (double m : multipliers)
    for (double s : slopes) this->check_all(37, 45, 70, m, s, 99);
}

// M = 0 and N = 0 write nothing; K = 0 gives Y = LeakyReLU(multiplier * b) on every row (Kokkos
// Kernels' gemm alone would leave Y untouched). No GEMM runs (RunInfo::gemm is none, and the note
// says why).
TYPED_TEST_P(Layer, EmptyShapesAreValid) {
  using P = typename TestFixture::P;
  for (Algorithm a : all_algorithms) {
    for (Precision precision : all_precisions) {
      const Options o = options(a, precision);
      P m0(0, 8, 5, 1), n0(4, 8, 0, 1), k0(6, 0, 9, 1);
      attempt(m0, 2, 0.1, o);
      attempt(n0, 2, 0.1, o);
      if (const auto info = attempt(k0, -2, 0.1, o)) {
        EXPECT_EQ(info->gemm, Gemm::None) << describe(o, *info);
        EXPECT_TRUE(contains(info->note, "K is 0")) << describe(o, *info);
        EXPECT_TRUE(matches_reference(k0, -2, 0.1, k0.Y)) << describe(o, *info);
      }
    }
  }
}

// NaN and +-Inf in X, W or b reach Y exactly as in PyTorch: a NaN in X(i, k) poisons row i; an
// infinite W(j, k) makes column j infinite (or NaN where signs meet); an infinite bias makes its
// column +-Inf before the activation.
TYPED_TEST_P(Layer, NanAndInfPropagate) {
  using Scalar = typename TestFixture::Scalar;
  const Scalar inf = std::numeric_limits<Scalar>::infinity();
  typename TestFixture::P p(20, 33, 24, 7);
  set_element(p.X, std::numeric_limits<Scalar>::quiet_NaN(), 2, 5);
  set_element(p.W, inf, 7, 3);
  set_element(p.W, -inf, 9, 0);
  set_element(p.b, inf, 11);
  set_element(p.b, -inf, 12);
  const Reference ref = p.reference(2, 0.1);
  for (Algorithm a : all_algorithms) {
    p.poison();
    const auto info = attempt(p, 2, 0.1, options(a));
    if (!info) continue;
    const auto y = p.output();
    EXPECT_TRUE(ref.check<Scalar>(y)) << describe(options(a), *info);
    EXPECT_TRUE(std::isnan(y[2 * 24 + 0])) << describe(options(a), *info);  // the NaN row
    EXPECT_EQ(y[5 * 24 + 12], -std::numeric_limits<double>::infinity())     // -Inf bias, slope
        << describe(options(a), *info);
  }
}

// Hand-computed values with literal expectations (common/LiteralCases.hpp): the order of
// scale and bias, v > 0 rather than v >= 0, the sign of every zero, NaN in, 0 * Inf, +-Inf through
// the slope. Every algorithm that runs in the build, strict fp32 (the tensor-core precisions
// change Inf propagation by design). vendor_prefill's distributed form multiplier * acc +
// multiplier * b may turn a -0.0 into +0.0 (README): there the zeros' signs are not compared.
TYPED_TEST_P(Layer, HandComputedValues) {
  using Scalar = typename TestFixture::Scalar;
  typename TestFixture::P p(5, 2, 4, 1);
  write_literal_inputs(p.X, p.W, p.b);
  for (const LiteralCase& c : literal_cases()) {
    for (Algorithm a : all_algorithms) {
      p.poison();
      const auto info = attempt(p, c.multiplier, c.slope, options(a));
      if (!info) continue;
      EXPECT_TRUE(
          matches_literal<Scalar>(c, p.output(), info->algorithm != Algorithm::VendorPrefill))
          << describe(options(a), *info);
    }
  }
}

// Signed zeros: a row of X of signed zeros and zero biases of both signs; every path but
// vendor_prefill (README) gives the reference's sign.
TYPED_TEST_P(Layer, SignedZerosFollowTheReference) {
  using Scalar = typename TestFixture::Scalar;
  for (double multiplier : {2.0, -2.0}) {
    typename TestFixture::P p(3, 9, 4, 21);
    for (int k = 0; k < 9; ++k) set_element(p.X, (k % 2) ? Scalar(0) : -Scalar(0), 0, k);
    set_element(p.b, -Scalar(0), 0);
    set_element(p.b, Scalar(0), 1);
    const Reference ref = p.reference(multiplier, 0.1);
    for (Algorithm a : all_algorithms) {
      p.poison();
      const auto info = attempt(p, multiplier, 0.1, options(a));
      if (!info) continue;
      const auto y = p.output();
      for (int j = 0; j < 2; ++j) {
        EXPECT_EQ(y[std::size_t(j)], 0.0) << describe(options(a), *info);
        if (info->algorithm == Algorithm::VendorPrefill) continue;
        EXPECT_EQ(std::signbit(y[std::size_t(j)]), std::signbit(ref(0, j)))
            << describe(options(a), *info) << " multiplier " << multiplier << " column " << j;
      }
      EXPECT_TRUE(ref.check<Scalar>(y)) << describe(options(a), *info);
    }
  }
}

// Values past the value type's range overflow to +-Inf (then the slope applies: -Inf * slope =
// -Inf), as eager PyTorch does in that type.
TYPED_TEST_P(Layer, OverflowToInfinityAsInTheValueType) {
  using Scalar = typename TestFixture::Scalar;
  const Scalar big = Scalar(0.9) * std::numeric_limits<Scalar>::max();
  const double inf = std::numeric_limits<double>::infinity();
  typename TestFixture::P p(4, 16, 3, 5);
  {
    auto X = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.X);
    auto W = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.W);
    auto b = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.b);
    for (int k = 0; k < 16; ++k) {
      X(0, k) = big;                       // row 0: every product is big, the sum overflows
      X(1, k) = k == 0 ? big : Scalar(0);  // row 1: one product, a finite sum
      W(0, k) = 1;
      W(1, k) = -1;
      W(2, k) = 1;
    }
    b(0) = b(1) = b(2) = 0;
    Kokkos::deep_copy(p.X, X);
    Kokkos::deep_copy(p.W, W);
    Kokkos::deep_copy(p.b, b);
  }
  for (Algorithm a : all_algorithms) {
    p.poison();
    const auto info = attempt(p, 2, 0.1, options(a));
    if (!info) continue;
    const auto y = p.output();
    const std::string name = describe(options(a), *info);
    EXPECT_EQ(y[0 * 3 + 0], inf) << name;   // the sum overflows to +Inf
    EXPECT_EQ(y[0 * 3 + 1], -inf) << name;  // -Inf, times the slope, stays -Inf
    // A finite sum 0.9 max, times multiplier 2, overflows: +Inf; the negative column: -Inf.
    EXPECT_EQ(y[1 * 3 + 0], inf) << name;
    EXPECT_EQ(y[1 * 3 + 1], -inf) << name;
    EXPECT_TRUE(std::isfinite(y[2 * 3 + 2]) && std::isfinite(y[3 * 3 + 0])) << name;
  }
}

TYPED_TEST_P(Layer, VendorAndFusedAgree) {
  using Scalar = typename TestFixture::Scalar;
  using Exec = typename TestFixture::Exec;
  typename TestFixture::P p(70, 300, 90, 5);
  typename TestFixture::P::Matrix y_vendor("y_vendor", p.M, p.N);
  FusedLinear::linear_leaky_relu(Exec(), p.X, p.W, p.b, y_vendor, Scalar(2), Scalar(0.1),
                                 Algorithm::Vendor);
  FusedLinear::linear_leaky_relu(Exec(), p.X, p.W, p.b, p.Y, Scalar(2), Scalar(0.1),
                                 Algorithm::Fused);
  const auto v = host_matrix(y_vendor), f = p.output();
  const HostInputs in = p.inputs();
  // Each is within the reference bound, so they are within twice that bound of each other.
  const double g = gamma<Scalar>(p.K + 3);
  for (std::int64_t i = 0; i < p.M; ++i)
    for (std::int64_t j = 0; j < p.N; ++j) {
      double magnitude = std::abs(in.b[std::size_t(j)]);
      for (std::int64_t k = 0; k < p.K; ++k) magnitude += std::abs(in.x(i, k) * in.w(j, k));
      ASSERT_LE(std::abs(v[std::size_t(i * p.N + j)] - f[std::size_t(i * p.N + j)]),
                2 * 2.0 * g * magnitude)
          << i << "," << j;
    }
}

// What RunInfo reports, against the facts of the build: fused and fused_skinny are the portable
// kernels; vendor runs the BLAS Kokkos Kernels calls for these Views (a vendor one where its TPL
// serves them, and then no note); auto follows the documented rule (host: a host kernel, as its
// cost model predicts; GPUs: the skinny kernels for few rows); vendor_lt runs vendor where cuBLASLt
// does not serve, saying so; vendor_prefill with multiplier 0 runs vendor, saying why.
TYPED_TEST_P(Layer, ReportsWhatRan) {
  using Exec = typename TestFixture::Exec;
  typename TestFixture::P p(8, 8, 8, 3);
  const Impl::Facts facts = facts_of(Exec(), p.X, p.W, p.b, p.Y);
  const auto fused = attempt(p, 2, 0.1, options(Algorithm::Fused));
  ASSERT_TRUE(fused);
  EXPECT_EQ(fused->algorithm, Algorithm::Fused);
  EXPECT_EQ(fused->gemm, Gemm::FusedKernel);
  EXPECT_FALSE(fused->vendor_blas);
  EXPECT_TRUE(fused->note.empty()) << fused->note;

  const auto vendor = attempt(p, 2, 0.1, options(Algorithm::Vendor));
  ASSERT_TRUE(vendor);
  EXPECT_EQ(vendor->algorithm, Algorithm::Vendor);
  EXPECT_EQ(vendor->gemm, facts.blas);
  EXPECT_EQ(vendor->vendor_blas, facts.blas != Gemm::KokkosKernelsNative);
  EXPECT_EQ(vendor->note.empty(), vendor->vendor_blas) << vendor->note;
#if defined(KOKKOSKERNELS_ENABLE_TPL_BLAS)
  // Three Views of one layout in HostSpace: the host BLAS serves them (Kokkos Kernels 3.4 and
  // later, any host execution space).
  if (Impl::is_host_space<Exec>()) EXPECT_EQ(vendor->gemm, Gemm::HostBlas);
#endif
#if defined(KOKKOSKERNELS_ENABLE_TPL_CUBLAS) && defined(KOKKOS_ENABLE_CUDA)
  if (std::is_same<Exec, Kokkos::Cuda>::value) EXPECT_EQ(vendor->gemm, Gemm::Cublas);
#endif

  // Auto: the rule (the golden dispatch table pins it down), which takes a skinny kernel for 8 rows
  // on GPUs; on the host its cost model takes fused at K = 8 (a dot product of 8 steps).
  const auto automatic = attempt(p, 2, 0.1, options(Algorithm::Auto));
  ASSERT_TRUE(automatic);
  const Impl::Shape shape{p.M, p.K, p.N};
  EXPECT_EQ(automatic->algorithm, Impl::strict_auto(shape, facts));
  if (Impl::is_host_space<Exec>())
    EXPECT_TRUE(automatic->algorithm == Algorithm::Fused ||
                automatic->algorithm == Algorithm::FusedSkinny)
        << FusedLinear::to_string(automatic->algorithm);
  else
    EXPECT_TRUE(Impl::is_skinny(automatic->algorithm))
        << FusedLinear::to_string(automatic->algorithm);
  EXPECT_TRUE(automatic->note.empty()) << automatic->note;

  p.poison();
  const auto lt = attempt(p, 2, 0.1, options(Algorithm::VendorLt));
  ASSERT_TRUE(lt);
  if (facts.cublaslt) {
    EXPECT_EQ(lt->algorithm, Algorithm::VendorLt);
    EXPECT_EQ(lt->gemm, Gemm::CublasLt);
    EXPECT_TRUE(lt->note.empty()) << lt->note;
  } else {
    EXPECT_EQ(lt->algorithm, Algorithm::Vendor);
    EXPECT_TRUE(contains(lt->note, "cuBLASLt")) << lt->note;
  }
  EXPECT_TRUE(matches_reference(p, 2.0, 0.1, p.Y));

  p.poison();
  const auto zero = attempt(p, 0, 0.1, options(Algorithm::VendorPrefill));
  ASSERT_TRUE(zero);
  EXPECT_EQ(zero->algorithm, Algorithm::Vendor);
  EXPECT_TRUE(contains(zero->note, "multiplier 0")) << zero->note;
  EXPECT_TRUE(matches_reference(p, 0.0, 0.1, p.Y));
}

// A fixed number of seeded random cases (the seed is printed; FUSED_LINEAR_TEST_SEED replays):
// shapes of 1, primes, one off a tile or pack multiple, lopsided (M >> N, N >> M), K up to
// 1100 (long enough that forced split K has many chunks to share), multipliers and slopes;
// every algorithm in every precision, with split K forced in half of the cases; each result
// within the bound of the precision that ran.
TYPED_TEST_P(Layer, Randomized) {
  using Scalar = typename TestFixture::Scalar;
  const std::uint64_t seed = test_seed();
  std::mt19937_64 rng(seed);
  const auto draw_extent = [&rng](std::int64_t max) -> std::int64_t {
    static const std::int64_t primes[] = {2, 3, 5, 7, 13, 31, 61, 127, 131, 257};
    switch (std::uniform_int_distribution<int>(0, 3)(rng)) {
      case 0: return 1;
      case 1: return std::min(max, primes[std::uniform_int_distribution<int>(0, 9)(rng)]);
      case 2: {
        const std::int64_t base = 4 * std::uniform_int_distribution<std::int64_t>(1, max / 4)(rng);
        return std::min(max, base + std::uniform_int_distribution<int>(-1, 1)(rng));
      }
      default: return std::uniform_int_distribution<std::int64_t>(1, max)(rng);
    }
  };
  constexpr int cases = 24;
  std::int64_t runs = 0, longest_k = 0;
  for (int c = 0; c < cases; ++c) {
    std::int64_t M = draw_extent(300), K = draw_extent(1100), N = draw_extent(300);
    const int kind = std::uniform_int_distribution<int>(0, 3)(rng);
    if (kind == 0)
      M = std::uniform_int_distribution<std::int64_t>(400, 1200)(rng),
      N = std::min<std::int64_t>(N, 7);
    if (kind == 1)
      N = std::uniform_int_distribution<std::int64_t>(400, 1200)(rng),
      M = std::min<std::int64_t>(M, 7);
    if (c < 2)
      K = std::uniform_int_distribution<std::int64_t>(601, 1100)(rng);  // always some long K
    const double multiplier = double(Scalar(std::uniform_real_distribution<double>(-4, 4)(rng)));
    const double slope = double(Scalar(std::uniform_real_distribution<double>(-1, 3)(rng)));
    const int splits = std::uniform_int_distribution<int>(0, 1)(rng)
                           ? std::uniform_int_distribution<int>(2, 9)(rng)
                           : 0;
    longest_k = std::max(longest_k, K);
    typename TestFixture::P p(M, K, N, rng());
    const Reference ref = p.reference(multiplier, slope);
    for (Precision precision : all_precisions) {
      for (Algorithm a : all_algorithms) {
        p.poison();
        const Options o = options(a, precision, Impl::is_skinny(a) ? splits : 0);
        const auto info = attempt(p, multiplier, slope, o);
        if (!info) continue;
        ++runs;
        ASSERT_TRUE(ref.check<Scalar>(p.output(), product_rounding(*info, K)))
            << "replay with FUSED_LINEAR_TEST_SEED=" << seed << " (case " << c << "), "
            << describe(o, *info);
      }
    }
  }
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  std::printf("[ randomized ] %s: %d cases, %lld runs, K up to %lld, seed %llu\n",
              TypeParam::name().c_str(), cases, static_cast<long long>(runs),
              static_cast<long long>(longest_k), static_cast<unsigned long long>(seed));
}

// The fused paths sum every element in a fixed order, whatever the scheduling: repeated runs on
// the same inputs give the same bits, split K included (the partial sums are added in split
// order whichever team finishes last), and the Hopper kernels. (The vendor paths inherit the
// BLAS's behaviour: see the README.)
TYPED_TEST_P(Layer, FusedPathsAreBitwiseReproducible) {
  using P = typename TestFixture::P;
  const Options requests[] = {options(Algorithm::Fused),
                              options(Algorithm::FusedSkinny),
                              options(Algorithm::FusedSkinny, Precision::Strict, 3),
                              options(Algorithm::SkinnySm90),
                              options(Algorithm::SkinnySm90, Precision::Strict, 3),
                              options(Algorithm::FusedSm90, Precision::TF32x3)};
  for (auto shape : {std::array<std::int64_t, 3>{1024 / debug_scale, 777, 515}, {17, 4096, 260}}) {
    P p(shape[0], shape[1], shape[2], 3);
    const auto reference = p.reference(2, 0.1);
    for (const Options& o : requests) {
      p.poison();
      const auto info = attempt(p, 2, 0.1, o);
      if (!info) continue;  // the Hopper kernels where they cannot run (attempt checked why)
      const auto first = p.output();
      EXPECT_TRUE(
          reference.template check<typename P::scalar_type>(first, product_rounding(*info, p.K)))
          << describe(o, *info);
      for (int repeat = 0; repeat < 3; ++repeat) {
        const auto again = this->run(p, o);
        ASSERT_EQ(std::memcmp(first.data(), again.data(), first.size() * sizeof(double)), 0)
            << describe(o, *info) << " run " << repeat << " differs at " << shape[0] << "x"
            << shape[1] << "x" << shape[2];
      }
    }
  }
}

// A plan reused for many executes gives the reference each time, on fresh contents of its
// Views and on Views of other data of the same shape; its info() is what the one-shot call
// reports for the same request.
TYPED_TEST_P(Layer, PlanReusedOnFreshInputs) {
  using Scalar = typename TestFixture::Scalar;
  using Exec = typename TestFixture::Exec;
  using P = typename TestFixture::P;
  P p(37, 300, 70, 11), other(37, 300, 70, 12);
  for (const Options& o :
       served_requests(Exec(), p.X, p.W, p.b, p.Y,
                       {Precision::Strict, Precision::TF32, Precision::TF32x3}, 3)) {
    auto made = make_plan(Exec(), p.X, p.W, p.b, p.Y, 2, 0.1, o);
    if (!made) continue;
    auto& plan = *made;
    const RunInfo& info = plan.info();
    for (int round = 0; round < 3; ++round) {
      p.randomize(100 + round);
      p.poison();
      plan.execute(p.X, p.W, p.b, p.Y);
      EXPECT_TRUE(
          p.reference(2, 0.1).template check<Scalar>(p.output(), product_rounding(info, p.K)))
          << describe(o, info) << " round " << round;
    }
    other.poison();
    plan.execute(other.X, other.W, other.b, other.Y);
    EXPECT_TRUE(
        other.reference(2, 0.1).template check<Scalar>(other.output(), product_rounding(info, p.K)))
        << describe(o, info) << " on other Views";
    const RunInfo once =
        FusedLinear::linear_leaky_relu(Exec(), p.X, p.W, p.b, p.Y, Scalar(2), Scalar(0.1), o);
    EXPECT_EQ(once.algorithm, info.algorithm) << describe(o, info);
    EXPECT_EQ(once.precision, info.precision) << describe(o, info);
    EXPECT_EQ(once.gemm, info.gemm) << describe(o, info);
    EXPECT_EQ(once.vendor_blas, info.vendor_blas) << describe(o, info);
    EXPECT_EQ(once.note, info.note) << describe(o, info);
  }
}

REGISTER_TYPED_TEST_SUITE_P(Layer, EdgeAndOddShapes, SkinnySplitKMatchesAndIsReproducible,
                            MultipliersAndSlopes, EmptyShapesAreValid, NanAndInfPropagate,
                            HandComputedValues, SignedZerosFollowTheReference,
                            OverflowToInfinityAsInTheValueType, VendorAndFusedAgree, ReportsWhatRan,
                            Randomized, FusedPathsAreBitwiseReproducible, PlanReusedOnFreshInputs);

}  // namespace FusedLinearTest

#endif
