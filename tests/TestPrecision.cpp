// SPDX-License-Identifier: Apache-2.0
// Precision modes. Strict fp32 is the default (every other test). TF32 runs on the vendor paths
// with cuBLAS or cuBLASLt, within its derived bound, and really rounds (a test that fails if TF32
// silently ran strict); strict stays strict even when the application left Kokkos Kernels' shared
// cuBLAS handle in TF32 mode, and the handle is left as found. 3xTF32 runs on the vendor paths
// through cuBLASLt (both ways of adding its K ranges) and on the Hopper kernel fused_sm90 (both of
// its kernels), within derived bounds and far below TF32's error. Under auto the tensor-core
// precisions are floors: strict runs where it is faster (few rows; the host), and RunInfo says so.
// Everywhere else they are refused with a clear error rather than silently computed otherwise.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/TestHelpers.hpp"

#include <FusedLinear/impl/kernels/Tf32Split.hpp>

namespace {

using namespace FusedLinearTest;
using P = Problem<ExecSpace, float, Kokkos::LayoutRight>;
using PL = Problem<ExecSpace, float, Kokkos::LayoutLeft>;

Impl::Facts facts(const P& p) { return facts_of(ExecSpace(), p.X, p.W, p.b, p.Y); }

// The 3xTF32 split, element by element on the host (the same function runs in the kernels):
// both parts exactly representable in TF32 (low 13 mantissa bits zero), x = hi + lo within
// 2^-22 |x|, no infinite part from a finite x, Inf/NaN whole in hi.
TEST(Precision, Tf32SplitIsExactAndBounded) {
  const auto low_bits = [](float v) {
    std::uint32_t u;
    std::memcpy(&u, &v, sizeof u);
    return u & 0x1fffu;
  };
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::vector<float> values{0.0f,
                            -0.0f,
                            1.0f,
                            1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -12),
                            std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::min(),
                            std::numeric_limits<float>::denorm_min()};
  for (int i = 0; i < 100000; ++i)
    values.push_back((i % 2 ? -1.0f : 1.0f) * std::ldexp(mantissa(rng), i % 200 - 100));
  for (float x : values) {
    const Impl::Tf32Split s(x);
    ASSERT_EQ(low_bits(s.hi), 0u) << x;
    ASSERT_EQ(low_bits(s.lo), 0u) << x;
    ASSERT_TRUE(std::isfinite(s.hi) && std::isfinite(s.lo)) << x;
    ASSERT_LE(std::abs(double(x) - (double(s.hi) + double(s.lo))),
              std::ldexp(std::abs(double(x)), -22) + std::numeric_limits<float>::denorm_min())
        << x;
  }
  // 1 + 2^-12 is not a TF32 value: it rounds to 1, and the remainder is exact.
  const Impl::Tf32Split t(1.0f + std::ldexp(1.0f, -12));
  EXPECT_EQ(t.hi, 1.0f);
  EXPECT_EQ(t.lo, std::ldexp(1.0f, -12));
  const float inf = std::numeric_limits<float>::infinity();
  const Impl::Tf32Split i(-inf), n(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(i.hi, -inf);
  EXPECT_EQ(i.lo, 0.0f);
  EXPECT_TRUE(std::isnan(n.hi));
  EXPECT_EQ(n.lo, 0.0f);
}

// Every path refuses the precisions it cannot compute, by name; double Views refuse both.
TEST(Precision, RefusedWhereItCannotRun) {
  P p(33, 70, 41, 4);
  try {
    FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f,
                                   options(Algorithm::Fused, Precision::TF32));
    ADD_FAILURE() << "fused + tf32 did not throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "precision tf32 needs cuBLAS or cuBLASLt")) << e.what();
  }
  // Double Views: TF32 is a float format. (Through a Plan's construction, which instantiates
  // no kernel; the typed suite's double configurations run every request through the one-shot
  // call, refusals checked.)
  Problem<ExecSpace, double, Kokkos::LayoutRight> d(5, 6, 7, 4);
  for (Algorithm a : all_algorithms)
    for (Precision precision : {Precision::TF32, Precision::TF32x3}) {
      try {
        FusedLinear::Plan plan(ExecSpace(), d.X, d.W, d.b, d.Y, 2.0, 0.1, options(a, precision));
        ADD_FAILURE() << describe(options(a, precision)) << " on double Views did not throw";
      } catch (const std::invalid_argument& e) {
        EXPECT_TRUE(starts_with(e.what(), "FusedLinear::Plan: ")) << e.what();
        EXPECT_TRUE(contains(e.what(), std::string("precision ") +
                                           FusedLinear::to_string(precision) +
                                           " applies to float Views only"))
            << e.what();
      }
    }
  // Every request on float Views: refused exactly where the documented contract says.
  for (Algorithm a : all_algorithms)
    for (Precision precision : all_precisions) attempt(p, 2, 0.1, options(a, precision));
}

// Auto's tensor-core precisions are floors: at few rows, and wherever no path computes them (the
// host at every shape), strict fp32 runs, and RunInfo says strict with a note saying why.
TEST(Precision, AutoFloorRunsStrictAtFewRows) {
  for (auto shape : {std::array<std::int64_t, 3>{1, 512, 256}, {16, 300, 130}, {4, 4096, 64}}) {
    P p(shape[0], shape[1], shape[2], 6);
    for (Precision precision : {Precision::TF32, Precision::TF32x3}) {
      p.poison();
      const auto info = attempt(p, 2, 0.1, options(Algorithm::Auto, precision));
      ASSERT_TRUE(info);
      EXPECT_EQ(info->precision, Precision::Strict)
          << describe(options(Algorithm::Auto, precision), *info);
      EXPECT_TRUE(contains(info->note, "a floor")) << info->note;
      EXPECT_TRUE(contains(info->note, FusedLinear::to_string(precision))) << info->note;
      // The strict rule's path: a skinny kernel on GPUs, the host's cost model's choice there.
      EXPECT_EQ(info->algorithm, Impl::strict_auto({p.M, p.K, p.N}, facts(p)));
      if (!Impl::is_host_space<ExecSpace>())
        EXPECT_TRUE(info->algorithm == Algorithm::FusedSkinny ||
                    info->algorithm == Algorithm::SkinnySm90);
      // Strict really: within the strict bound.
      EXPECT_TRUE(matches_reference(p, 2, 0.1, p.Y))
          << describe(options(Algorithm::Auto, precision), *info);
    }
  }
  // Where no path computes the precision (the host), strict runs at every shape, noted.
  if (Impl::is_host_space<ExecSpace>()) {
    P big(512, 1024, 256, 7);
    for (Precision precision : {Precision::TF32, Precision::TF32x3}) {
      const auto info = attempt(big, 2, 0.1, options(Algorithm::Auto, precision));
      ASSERT_TRUE(info);
      EXPECT_EQ(info->precision, Precision::Strict);
      EXPECT_TRUE(contains(info->note, "no path computes it here")) << info->note;
      EXPECT_TRUE(matches_reference(big, 2, 0.1, big.Y));
    }
  }
}

/// X = 1 + 2^-12 everywhere, W = 1, b = 0, multiplier 1: every output is K (1 + 2^-12) =
/// 1024.25 at K = 1024, exactly representable, and every partial sum of the products (m terms:
/// m + m 2^-12) is too: strict fp32 computes it exactly in any order. TF32 rounds 1 + 2^-12 to
/// 1 (10 mantissa bits), so it gives 1024: a relative error of 2^-12, whatever the tensor cores'
/// rounding. 3xTF32 carries the 2^-12 in the remainder and is exact again.
struct OnePlusTwoToMinus12 {
  P p;
  OnePlusTwoToMinus12(std::int64_t M, std::int64_t K, std::int64_t N) : p(M, K, N, 1) {
    Kokkos::deep_copy(p.X, 1.0f + std::ldexp(1.0f, -12));
    Kokkos::deep_copy(p.W, 1.0f);
    Kokkos::deep_copy(p.b, 0.0f);
  }
  /// The largest relative error of Y against K (1 + 2^-12).
  double error() const {
    const double exact = double(p.K) * (1 + std::ldexp(1.0, -12));
    double worst = 0;
    for (double y : p.output())
      worst = std::max(worst, std::isnan(y) ? 1.0 : std::abs(y - exact) / exact);
    return worst;
  }
};

// TF32 really rounds where it runs (a path that silently ran strict fp32 would give the exact
// result here), and auto's floor (strict) does not round at all. At M = 512 no skinny rule applies
// on GPUs: auto takes the tensor-core path too.
TEST(Precision, Tf32ReallyRounds) {
  OnePlusTwoToMinus12 t(512, 1024, 256);
  int tf32_runs = 0;
  for (Algorithm a : all_algorithms) {
    for (Precision precision : {Precision::TF32, Precision::TF32x3, Precision::Strict}) {
      t.p.poison();
      const Options o = options(a, precision);
      const auto info = attempt(t.p, 1, 0.1, o);
      if (!info) continue;
      const double error = t.error();
      if (info->precision == Precision::TF32) {
        ++tf32_runs;
        EXPECT_GE(error, std::ldexp(1.0, -13)) << describe(o, *info) << ": TF32 did not round";
        EXPECT_LE(error, std::ldexp(1.0, -11)) << describe(o, *info);
      } else {
        EXPECT_LE(error, std::ldexp(1.0, -20))
            << describe(o, *info) << ": strict and 3xTF32 are exact here";
      }
    }
  }
  const Impl::Facts f = facts(t.p);
  const bool tf32_available = f.cublaslt || f.blas == Gemm::Cublas;
  EXPECT_EQ(tf32_runs > 0, tf32_available);
  std::printf("[ info     ] %d TF32 runs\n", tf32_runs);
}

TEST(Precision, Tf32WithinItsBound) {
  for (auto shape : {std::array<std::int64_t, 3>{512, 1024, 256}, {37, 300, 130}, {1, 2048, 64}}) {
    P p(shape[0], shape[1], shape[2], 8);
    const Reference ref = p.reference(2, double(0.1f));
    for (Algorithm a : all_algorithms) {
      p.poison();
      const auto info = attempt(p, 2, 0.1, options(a, Precision::TF32));
      if (!info) continue;
      EXPECT_TRUE(ref.check<float>(p.output(), product_rounding(*info, p.K)))
          << describe(options(a, Precision::TF32), *info);
    }
  }
}

// 3xTF32 within its derived bound, on every path that has it, and far below TF32's error.
TEST(Precision, Tf32x3WithinItsBoundAndFarBelowTf32) {
  for (auto shape : {std::array<std::int64_t, 3>{512, 1024, 256},
                     {37, 300, 130},
                     {1, 2048, 64},
                     {300, 4096, 96},
                     {33, 77, 41}}) {
    P p(shape[0], shape[1], shape[2], 21);
    const Reference ref = p.reference(2, double(0.1f));
    double tf32_error = 0;
    if (const auto tf32 = attempt(p, 2, 0.1, options(Algorithm::VendorLt, Precision::TF32)))
      tf32_error = ref.relative_error(p.output());
    for (Algorithm a : all_algorithms) {
      p.poison();
      const Options o = options(a, Precision::TF32x3);
      const auto info = attempt(p, 2, 0.1, o);
      if (!info) continue;
      EXPECT_TRUE(ref.check<float>(p.output(), product_rounding(*info, p.K))) << describe(o, *info);
      // A mode that quietly ran plain TF32 (operands within 2^-11, not 2^-22) would pass the
      // per-element bound at small K but not this: its norm-wise error is ~2^10 times larger on
      // random data; a factor 16 leaves room for accumulation effects. (Only where cuBLAS surely
      // takes tensor cores for TF32: it may run a tiny product on an fp32 kernel.)
      if (info->precision == Precision::TF32x3 && tf32_error > 0 && p.K >= 1024 && p.M >= 64)
        EXPECT_LT(ref.relative_error(p.output()), tf32_error / 16)
            << describe(o, *info) << " tf32 error " << tf32_error;
    }
  }
}

// 3xTF32's vendor paths add the K ranges' sums to Y one of two ways (a batched product plus one
// pass, or range by range: Tuning::tf32x3_partials_limit = 0 forces the latter): both, on both
// layouts, with K not a whole number of ranges.
TEST(Precision, Tf32x3BothWaysOfAddingRanges) {
  P right(70, 700, 250, 41);
  PL left(70, 700, 250, 41);
  const Reference ref_right = right.reference(2, double(0.1f)),
                  ref_left = left.reference(2, double(0.1f));
  int runs = 0;
  for (bool batched : {true, false}) {
    for (Algorithm a : {Algorithm::VendorLt, Algorithm::Vendor, Algorithm::VendorPrefill}) {
      Options o = options(a, Precision::TF32x3);
      if (!batched) o.tuning.tf32x3_partials_limit = 0;
      right.poison();
      left.poison();
      const auto ir = attempt(right, 2, 0.1, o);
      const auto il = attempt(left, 2, 0.1, o);
      if (ir) {
        ++runs;
        EXPECT_TRUE(ref_right.check<float>(right.output(), product_rounding(*ir, right.K)))
            << describe(o, *ir);
      }
      if (il) {
        ++runs;
        EXPECT_TRUE(ref_left.check<float>(left.output(), product_rounding(*il, left.K)))
            << describe(o, *il) << ", LayoutLeft";
      }
    }
  }
  EXPECT_EQ(runs > 0, facts(right).cublaslt);
}

// The Hopper kernel (fused_sm90) through both of its kernels (Tuning::sm90_tf32x3_kernel 1: one
// CTA per tile; 2: the persistent split-K one; 0: its own choice), at shapes that are and are not
// multiples of its 128 x 128 x 32 tiles, K not a multiple of 4 included (a padded copy of W);
// within its derived bound and the same bits on every run. Auto takes it for 3xtf32 where no
// skinny rule applies and the product is not small. LayoutLeft is refused by name.
TEST(Precision, Tf32x3HopperKernel) {
  {
    P probe(1, 4, 1, 1);
    const Impl::Facts f = facts(probe);
    if (f.sm90_tf32x3 != nullptr) GTEST_SKIP() << "the sm_90a 3xtf32 kernel " << f.sm90_tf32x3;
  }
  for (int kernel : {0, 1, 2}) {
    for (auto shape : {std::array<std::int64_t, 3>{1, 4, 1},
                       {100, 76, 300},
                       {129, 1000, 257},
                       {37, 300, 130},
                       {1024, 300, 2048},
                       {3, 4100, 5},
                       {33, 77, 41},
                       {300, 1025, 129}}) {
      P p(shape[0], shape[1], shape[2], 50 + kernel);
      Options o = options(Algorithm::FusedSm90, Precision::TF32x3);
      o.tuning.sm90_tf32x3_kernel = kernel;
      const auto info = attempt(p, 2, 0.1, o);
      ASSERT_TRUE(info) << "K = " << p.K << ": fused_sm90 takes any K";
      EXPECT_EQ(info->gemm, Gemm::Sm90Tf32x3Kernel);
      EXPECT_TRUE(matches_reference(p, 2, double(0.1f), p.Y, tf32x3_fused_product_rounding(p.K)))
          << describe(o, *info);
      const auto first = p.output();
      p.poison();
      FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f, o);
      const auto again = p.output();
      EXPECT_EQ(std::memcmp(first.data(), again.data(), first.size() * sizeof(double)), 0)
          << shape[0] << "x" << shape[1] << "x" << shape[2] << " kernel choice " << kernel;
    }
  }
  // Where the cost model predicts the Hopper kernel fastest at the 3xtf32 floor, auto's 3xtf32
  // runs it, with K not a multiple of 4 too.
  P large(1024, 1027, 1024, 9);
  const auto automatic = attempt(large, 2, 0.1, options(Algorithm::Auto, Precision::TF32x3));
  ASSERT_TRUE(automatic);
  const Impl::Candidate predicted =
      Impl::gpu_auto({large.M, large.K, large.N}, facts(large), Precision::TF32x3);
  EXPECT_EQ(automatic->algorithm, predicted.algorithm);
  EXPECT_EQ(automatic->precision, predicted.precision);
  PL left(33, 76, 41, 4);
  try {
    FusedLinear::linear_leaky_relu(left.X, left.W, left.b, left.Y, 2.f, 0.1f,
                                   options(Algorithm::FusedSm90, Precision::TF32x3));
    ADD_FAILURE() << "fused_sm90 on LayoutLeft did not throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "LayoutRight")) << e.what();
  }
}

// Non-finite inputs, on every path that has 3xtf32. As in any 3xTF32, an infinite element meets
// the other operand's remainder in the cross terms (Inf * lo, with lo of either sign or zero), so
// an output it reaches is Inf or NaN where fp32 gives +-Inf; NaN stays NaN; every other output is
// as accurate as ever (README). Asserted as exactly that.
TEST(Precision, Tf32x3NonFiniteInputs) {
  P p(40, 300, 50, 9);
  const float inf = std::numeric_limits<float>::infinity();
  set_element(p.X, std::numeric_limits<float>::quiet_NaN(), 2, 5);
  set_element(p.W, inf, 7, 3);
  set_element(p.W, -inf, 9, 0);
  const Reference ref = p.reference(2, double(0.1f));
  for (Algorithm a : all_algorithms) {
    p.poison();
    const auto info = attempt(p, 2, 0.1, options(a, Precision::TF32x3));
    if (!info || info->precision != Precision::TF32x3) continue;
    const auto y = p.output();
    const std::string name = describe(options(a, Precision::TF32x3), *info);
    for (std::int64_t i = 0; i < p.M; ++i)
      for (std::int64_t j = 0; j < p.N; ++j) {
        const double r = ref(i, j), v = y[std::size_t(i * p.N + j)];
        if (std::isnan(r)) EXPECT_TRUE(std::isnan(v)) << name << " " << i << "," << j;
        if (std::isinf(r)) EXPECT_FALSE(std::isfinite(v)) << name << " " << i << "," << j;
        if (std::isfinite(r)) EXPECT_NEAR(v, r, 1e-5 * (1 + std::abs(r))) << name;
      }
    EXPECT_TRUE(std::isnan(y[2 * 50 + 0])) << name;
    EXPECT_FALSE(std::isfinite(y[5 * 50 + 7])) << name;
  }
}

// The point of 3xTF32 is fp32 accuracy at tensor-core speed: a norm-wise error no worse than
// strict fp32's on the reference model (1.5e-6 at 1024x8192x8192: x = torch.rand, W as nn.Linear
// initialises it, K = 8192), asserted here on those inputs at the same K. 3xTF32's dominant error
// is the tensor cores' truncating accumulation, which grows with the accumulated length: adding
// 256 (vendor) or 128 (Hopper kernel) terms at a time measured 6e-7 to 9e-7 at every shape of the
// H200 sweep; accumulating all of K at once measured 1.9e-5 at K = 8192: this test catches it.
TEST(Precision, Tf32x3MeetsTheStrictFp32AccuracyTarget) {
  constexpr double target = 1.5e-6;
  P p(128, 8192, 256, 29);
  {
    std::mt19937_64 rng(30);
    std::uniform_real_distribution<double> u(0, 1);
    std::vector<double> x(std::size_t(p.M * p.K));
    for (double& v : x) v = double(float(u(rng)));
    write_matrix(p.X, x);
  }
  const Reference ref = p.reference(2, double(0.1f));
  int runs = 0;
  for (Algorithm a : all_algorithms) {
    p.poison();
    const auto info = attempt(p, 2, 0.1, options(a, Precision::TF32x3));
    if (!info || info->precision != Precision::TF32x3) continue;
    ++runs;
    const double error = ref.relative_error(p.output());
    EXPECT_LE(error, target) << describe(options(a, Precision::TF32x3), *info);
    std::printf("[ info     ] %s 3xtf32 error %.3g\n", FusedLinear::to_string(info->algorithm),
                error);
  }
  if (runs == 0) GTEST_SKIP() << "no 3xtf32 path in this build (CUDA with cuBLASLt)";
}

#if defined(FUSED_LINEAR_CUBLAS)
// Kokkos 3.4 sets a device-wide cache preference that slows cuBLAS; the vendor paths lift it for
// their GEMM only: afterwards the application's setting is back, whatever it was.
TEST(Precision, VendorPathsRestoreTheDeviceCachePreference) {
  P p(64, 256, 96, 3);
  cudaFuncCache original;
  ASSERT_EQ(cudaDeviceGetCacheConfig(&original), cudaSuccess);
  for (cudaFuncCache setting : {cudaFuncCachePreferShared, cudaFuncCachePreferL1, original}) {
    ASSERT_EQ(cudaDeviceSetCacheConfig(setting), cudaSuccess);
    for (Algorithm a : {Algorithm::Vendor, Algorithm::VendorPrefill, Algorithm::VendorLt}) {
      p.poison();
      FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f, a);
      Kokkos::fence();
      EXPECT_TRUE(matches_reference(p, 2.0, double(0.1f), p.Y)) << FusedLinear::to_string(a);
      cudaFuncCache after;
      ASSERT_EQ(cudaDeviceGetCacheConfig(&after), cudaSuccess);
      EXPECT_EQ(after, setting) << FusedLinear::to_string(a);
    }
  }
}

// TF32 on cuBLAS sets the shared handle's math mode for its GEMM and restores it.
TEST(Precision, Tf32LeavesTheSharedHandleAsFound) {
  cublasHandle_t handle = Impl::CublasHandleGuard::handle();
  cublasMath_t before;
  ASSERT_EQ(cublasGetMathMode(handle, &before), CUBLAS_STATUS_SUCCESS);
  P p(512, 1024, 256, 8);
  for (Algorithm a :
       {Algorithm::Auto, Algorithm::Vendor, Algorithm::VendorPrefill, Algorithm::VendorLt}) {
    p.poison();
    const auto info = attempt(p, 2, 0.1, options(a, Precision::TF32));
    ASSERT_TRUE(info);
    EXPECT_TRUE(matches_reference(p, 2.0, double(0.1f), p.Y, tf32_product_rounding))
        << describe(options(a, Precision::TF32), *info);
    cublasMath_t after;
    ASSERT_EQ(cublasGetMathMode(handle, &after), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(after, before) << "the shared cuBLAS handle's math mode was not restored";
  }
  // And strict fp32 right after is strict again: exact where strict is exact, the strict bound.
  OnePlusTwoToMinus12 exact(512, 1024, 256);
  for (Algorithm a : {Algorithm::Vendor, Algorithm::VendorPrefill}) {
    ASSERT_TRUE(attempt(exact.p, 2, 0.1, options(a, Precision::TF32)));
    exact.p.poison();
    ASSERT_TRUE(attempt(exact.p, 1, 0.1, options(a)));
    EXPECT_LE(exact.error(), std::ldexp(1.0, -20)) << FusedLinear::to_string(a) << " after tf32";
    p.poison();
    ASSERT_TRUE(attempt(p, 2, 0.1, options(a)));
    EXPECT_TRUE(matches_reference(p, 2.0, double(0.1f), p.Y))
        << FusedLinear::to_string(a) << " after tf32";
  }
}

// An application may leave Kokkos Kernels' shared cuBLAS handle in TF32 mode (as PyTorch's
// allow_tf32 does to its own): strict vendor and vendor_prefill must still compute strict fp32,
// and leave the application's mode in place.
TEST(Precision, StrictStaysStrictOnATf32Handle) {
  cublasHandle_t handle = Impl::CublasHandleGuard::handle();
  cublasMath_t original;
  ASSERT_EQ(cublasGetMathMode(handle, &original), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH), CUBLAS_STATUS_SUCCESS);
  OnePlusTwoToMinus12 exact(512, 1024, 256);
  P random(512, 2048, 256, 12);
  const Reference ref = random.reference(2, double(0.1f));
  random.poison();
  ASSERT_TRUE(attempt(random, 2, 0.1, options(Algorithm::Vendor, Precision::TF32)));
  const double tf32_error = ref.relative_error(random.output());
  for (Algorithm a : {Algorithm::Vendor, Algorithm::VendorPrefill}) {
    exact.p.poison();
    const auto info = attempt(exact.p, 1, 0.1, options(a));
    ASSERT_TRUE(info);
    EXPECT_EQ(info->gemm, Gemm::Cublas);
    EXPECT_LE(exact.error(), std::ldexp(1.0, -20)) << describe(options(a), *info) << ": ran TF32";
    random.poison();
    attempt(random, 2, 0.1, options(a));
    EXPECT_LT(ref.relative_error(random.output()), tf32_error / 16)
        << describe(options(a), *info) << ", TF32's error " << tf32_error;
    EXPECT_TRUE(ref.check<float>(random.output())) << describe(options(a), *info);
    cublasMath_t after;
    ASSERT_EQ(cublasGetMathMode(handle, &after), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(after, CUBLAS_TF32_TENSOR_OP_MATH) << "the application's math mode was not restored";
  }
  ASSERT_EQ(cublasSetMathMode(handle, original), CUBLAS_STATUS_SUCCESS);
}
#endif

#if defined(FUSED_LINEAR_SM90A)
// The few-rows Hopper kernel (skinny_sm90), strict fp32: within the strict bound where its kernel
// takes the problem (compute capability 9.0; rows 16-byte aligned), refused by its reason
// elsewhere, K split over a cluster when forced (Tuning::skinny_splits); auto takes it for few
// rows of large layers on Hopper.
TEST(Precision, SkinnySm90IsStrict) {
  for (auto shape :
       {std::array<std::int64_t, 3>{1, 4096, 4096}, {16, 1024, 520}, {5, 4100, 33}, {3, 77, 41}}) {
    P p(shape[0], shape[1], shape[2], 13);
    const Impl::Facts f = facts(p);
    const auto info = attempt(p, 2, 0.1, options(Algorithm::SkinnySm90));
    if (!info) {
      std::printf("[ info     ] skinny_sm90 %s at K = %lld\n", f.sm90_skinny, (long long)p.K);
      continue;
    }
    EXPECT_TRUE(matches_reference(p, 2, 0.1, p.Y))
        << describe(options(Algorithm::SkinnySm90), *info);
    const auto automatic = attempt(p, 2, 0.1, options(Algorithm::Auto));
    ASSERT_TRUE(automatic);
    // Auto takes what the cost model predicts fastest, this kernel among the candidates.
    EXPECT_EQ(automatic->algorithm, Impl::strict_auto({p.M, p.K, p.N}, f));
    for (int splits : {2, 5}) {  // K split over a cluster, forced
      p.poison();
      const auto split =
          attempt(p, 2, 0.1, options(Algorithm::SkinnySm90, Precision::Strict, splits));
      ASSERT_TRUE(split);
      EXPECT_TRUE(matches_reference(p, 2, 0.1, p.Y))
          << describe(options(Algorithm::SkinnySm90, Precision::Strict, splits), *split);
    }
  }
}
#endif

}  // namespace
