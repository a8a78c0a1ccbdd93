// SPDX-License-Identifier: Apache-2.0
// Precision modes: strict fp32 is the default (every other test); TF32 runs on the vendor paths
// with cuBLAS, within its derived bound, and leaves the shared cuBLAS handle as it found it;
// 3xTF32 runs where cuBLASLt does, within its own derived bound and far below TF32's error;
// everywhere else they are refused with a clear error rather than silently computed otherwise.
#include "TestHelpers.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <string>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#if defined(KOKKOSKERNELS_ENABLE_TPL_CUBLAS) && defined(KOKKOS_ENABLE_CUDA)
#include <KokkosBlas_tpl_spec.hpp>
#define FUSED_LINEAR_TEST_CUBLAS 1
#endif

namespace {

using namespace FusedLinearTest;
using FusedLinear::Algorithm;
using FusedLinear::Options;
using FusedLinear::Precision;
using P = Problem<float, Kokkos::LayoutRight>;

// TF32 keeps 10 of fp32's 23 mantissa bits; tensor cores may truncate rather than round, so each
// operand is within 2^-10 relative, and a product within 2 * 2^-10 + 2^-20.
constexpr bool lt_serves = FusedLinear::Impl::cublaslt_serves<ExecSpace, P::Matrix, P::Matrix, P::Matrix>();

constexpr double tf32_product_rounding = 2.0 / 1024 + 1.0 / (1024.0 * 1024.0);

TEST(Precision, NamesRoundTrip) {
  for (Precision p : {Precision::Strict, Precision::TF32, Precision::TF32x3})
    EXPECT_EQ(FusedLinear::precision_from_string(FusedLinear::to_string(p)), p);
  EXPECT_THROW(FusedLinear::precision_from_string("fp16"), std::invalid_argument);
}

TEST(Precision, Tf32IsNeverSilentlyStrict) {
  P p(33, 70, 41, 4);
  // The fused path has no TF32 mode: refused on every backend.
  try {
    FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f, Options(Algorithm::Fused, Precision::TF32));
    ADD_FAILURE() << "fused + tf32 did not throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("tf32"), std::string::npos) << e.what();
  }
  // Double Views: TF32 is a float format.
  Problem<double, Kokkos::LayoutRight> d(5, 6, 7, 4);
  EXPECT_THROW(FusedLinear::linear_leaky_relu(d.X, d.W, d.b, d.Y, 2.0, 0.1, Options(Algorithm::Vendor, Precision::TF32)),
               std::invalid_argument);
  EXPECT_THROW(FusedLinear::linear_leaky_relu(d.X, d.W, d.b, d.Y, 2.0, 0.1, Options(Algorithm::Vendor, Precision::TF32x3)),
               std::invalid_argument);
  EXPECT_THROW(FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f, Options(Algorithm::FusedSkinny, Precision::TF32x3)),
               std::invalid_argument);
#ifndef FUSED_LINEAR_TEST_CUBLAS
  // No cuBLAS in this build: every path refuses TF32.
  for (Algorithm a : all_algorithms)
    EXPECT_THROW(FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f, Options(a, Precision::TF32)),
                 std::invalid_argument) << FusedLinear::to_string(a);
#endif
  if (!lt_serves) {
    // 3xTF32 needs cuBLASLt's workspace: refused on every path without it.
    for (Algorithm a : all_algorithms)
      EXPECT_THROW(FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f, Options(a, Precision::TF32x3)),
                   std::invalid_argument) << FusedLinear::to_string(a);
  }
}

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
  std::vector<float> values{0.0f, -0.0f, 1.0f, 1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -12),
                            std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::min(),
                            std::numeric_limits<float>::denorm_min()};
  for (int i = 0; i < 100000; ++i)
    values.push_back((i % 2 ? -1.0f : 1.0f) * std::ldexp(mantissa(rng), i % 200 - 100));
  for (float x : values) {
    const FusedLinear::Impl::Tf32Split s(x);
    ASSERT_EQ(low_bits(s.hi), 0u) << x;
    ASSERT_EQ(low_bits(s.lo), 0u) << x;
    ASSERT_TRUE(std::isfinite(s.hi) && std::isfinite(s.lo)) << x;
    ASSERT_LE(std::abs(double(x) - (double(s.hi) + double(s.lo))),
              std::ldexp(std::abs(double(x)), -22) + std::numeric_limits<float>::denorm_min())
        << x;
  }
  const float inf = std::numeric_limits<float>::infinity();
  const FusedLinear::Impl::Tf32Split i(-inf), n(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(i.hi, -inf);
  EXPECT_EQ(i.lo, 0.0f);
  EXPECT_TRUE(std::isnan(n.hi));
  EXPECT_EQ(n.lo, 0.0f);
}

// Norm-wise relative error of Y against the float64 reference (all of Y).
double relative_error(const P& p, const P::Matrix& Y) {
  auto X = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.X);
  auto W = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.W);
  auto b = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.b);
  auto y = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), Y);
  auto ref = FusedLinear::reference_linear_leaky_relu(X, W, b, 2.0, double(0.1f));
  double err = 0, norm = 0;
  for (std::int64_t i = 0; i < p.M; ++i)
    for (std::int64_t j = 0; j < p.N; ++j) {
      err += (y(i, j) - ref(i, j)) * (y(i, j) - ref(i, j));
      norm += ref(i, j) * ref(i, j);
    }
  return std::sqrt(err / norm);
}

// 3xTF32's per-element bound, derived. Each operand x = hi + lo + e with hi, lo exact in TF32 and
// |e| <= 2^-22 |x|, |lo| <= 2^-11 |x|; dropping lo.lo and the two e terms leaves each product
// within 3 * 2^-22 |x w| (+ 2^-44). The products are exact in fp32 and accumulated by the tensor
// cores, which may truncate rather than round (unit 2^-23): lo.hi + hi.lo (at most 2^-10 (1 +
// 2^-11) sum |x w|) over 2K terms, hi.hi (at most (1 + 2^-10) sum |x w|) over ranges of
// tf32x3_chunk terms; then the ceil(K / chunk) + 1 partial sums are added in fp32 with rounding
// (gamma_n, unit 2^-24). matches_reference adds gamma_{K+3} itself, so the extra is the rest.
double tf32x3_product_rounding(std::int64_t K) {
  const double u = std::ldexp(1.0, -23);
  const auto truncating = [u](double n) { return n * u / (1 - n * u); };
  const std::int64_t chunk = std::min<std::int64_t>(FusedLinear::Impl::tf32x3_chunk, K);
  const double small_terms = truncating(2.0 * K) * std::ldexp(1.0, -10) * (1 + std::ldexp(1.0, -11));
  const double big_terms = truncating(double(chunk)) * (1 + std::ldexp(1.0, -10));
  const double sums = gamma<float>((K + chunk - 1) / chunk + 1) * (1 + std::ldexp(1.0, -9));
  const double total = 3 * std::ldexp(1.0, -22) + std::ldexp(1.0, -44) + small_terms + big_terms + sums;
  return std::max(0.0, total - gamma<float>(K + 3));
}

// The same bound for the fused path's Hopper kernel (FusedLinear_Tf32x3Sm90a.cu), derived the
// same way for what it does differently: lo = x - hi is left exact and the tensor cores read its
// leading TF32 bits (truncation: within 2^-10 |lo| <= 2^-21 |x|), so each product is within
// 2^-22 (lo.lo) + 2 (1 + 2^-11) 2^-21 of x w; all three products share one truncating
// accumulator for at most 128 k (3 * 128 terms of total magnitude <= (1 + 2^-9) sum |x w|);
// the ranges' sums (ranges staggered by 64 k, and split-K's partial tiles) are added in fp32.
double tf32x3_fused_product_rounding(std::int64_t K) {
  const double u = std::ldexp(1.0, -23);
  const auto truncating = [u](double n) { return n * u / (1 - n * u); };
  const double products = std::ldexp(1.0, -22) + 2 * (1 + std::ldexp(1.0, -11)) * std::ldexp(1.0, -21);
  const double ranges = truncating(3.0 * std::min<std::int64_t>(128, K)) * (1 + std::ldexp(1.0, -9));
  const double sums = gamma<float>((K + 63) / 64 + 4) * (1 + std::ldexp(1.0, -9));
  return std::max(0.0, products + ranges + sums - gamma<float>(K + 3));
}

// Why the Hopper kernel cannot run here ("" when it can): its tests run on H100/H200 only.
std::string fused_tf32x3_refusal() {
  P p(1, 4, 1, 1);  // K a multiple of 4: W's rows 16-byte aligned, as the kernel needs
  return FusedLinear::Impl::sm90a_tf32x3_refusal(ExecSpace(), p.X, p.W, p.b, p.Y);
}

TEST(Precision, Tf32x3WithinItsBoundAndFarBelowTf32) {
  if (!lt_serves) GTEST_SKIP() << "3xtf32 needs cuBLASLt (CUDA builds)";
  for (auto shape : {std::array<std::int64_t, 3>{128, 1024, 256}, {37, 300, 130}, {1, 2048, 64},
                     {64, 4096, 96}}) {
    P p(shape[0], shape[1], shape[2], 21);
    P::Matrix y_tf32("y_tf32", p.M, p.N);
    FusedLinear::linear_leaky_relu(p.X, p.W, p.b, y_tf32, 2.f, 0.1f, Options(Algorithm::VendorLt, Precision::TF32));
    Kokkos::fence();
    const double tf32_error = relative_error(p, y_tf32);
    for (Algorithm a : {Algorithm::Auto, Algorithm::VendorLt, Algorithm::Vendor, Algorithm::VendorPrefill}) {
      p.poison();
      const auto info = FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f, Options(a, Precision::TF32x3));
      Kokkos::fence();
      const double bound = info.algorithm == Algorithm::Fused ? tf32x3_fused_product_rounding(p.K)
                                                              : tf32x3_product_rounding(p.K);
      EXPECT_TRUE(matches_reference(p, 2.0, double(0.1f), p.Y, bound)) << describe(a, info);
      // A mode that quietly ran plain TF32 (operands within 2^-11, not 2^-22) would pass the
      // loose per-element bound at small K but not this: its norm-wise error is ~2^10 times
      // larger on random data; a factor 16 leaves ample room for accumulation effects. (Only
      // where cuBLAS surely takes tensor cores: it may run a tiny product, M = 1 here, on an
      // fp32 kernel, where plain TF32 loses nothing.)
      if (p.K >= 1024 && p.M >= 64) {
        const double error = relative_error(p, p.Y);
        EXPECT_LT(error, tf32_error / 16) << describe(a, info) << " tf32 error " << tf32_error;
      }
    }
  }
}

// 3xtf32 on the fused path (auto takes it there): within its derived bound at shapes that are
// and are not multiples of its 128 x 128 x 32 tiles, through both of its kernels (one CTA per
// tile, and the persistent split-K one that few-tile shapes take), and the same bits on every
// run.
#ifdef FUSED_LINEAR_SM90A  // a CUDA build with the kernel (it skips on other GPUs)
TEST(Precision, Tf32x3FusedHopperKernel) {
  const std::string refusal = fused_tf32x3_refusal();
  if (!refusal.empty()) GTEST_SKIP() << "the sm_90a 3xtf32 kernel " << refusal;
  int& choice = FusedLinear::Impl::Sm90a::tf32x3_kernel_choice();
  for (int kernel : {0, 1, 2}) {
    choice = kernel;
    for (auto shape : {std::array<std::int64_t, 3>{1, 4, 1}, {100, 76, 300}, {129, 1000, 257},
                       {37, 300, 130}, {1024, 300, 2048}, {3, 4100, 5}}) {
      P p(shape[0], shape[1], shape[2], 50 + kernel);
      const Options options(kernel == 0 ? Algorithm::Auto : Algorithm::Fused, Precision::TF32x3);
      const auto info = FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f, options);
      Kokkos::fence();
      EXPECT_EQ(info.algorithm, Algorithm::Fused);
      EXPECT_EQ(info.gemm, std::string("FusedLinear sm_90a wgmma 3xTF32 kernel"));
      EXPECT_TRUE(matches_reference(p, 2.0, double(0.1f), p.Y, tf32x3_fused_product_rounding(p.K)))
          << describe(options.algorithm, info) << ", kernel choice " << kernel;
      auto first = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.Y);
      p.poison();
      FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f, options);
      auto again = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.Y);
      EXPECT_EQ(std::memcmp(first.data(), again.data(), first.span() * sizeof(float)), 0)
          << shape[0] << "x" << shape[1] << "x" << shape[2] << " kernel choice " << kernel;
    }
  }
  choice = 0;

  // What it does not take (W's rows not 16-byte aligned: K = 77; LayoutLeft) is refused by
  // name when asked for, and auto runs the portable 3xtf32 instead.
  P odd(33, 77, 41, 4);
  const auto fallback = FusedLinear::linear_leaky_relu(odd.X, odd.W, odd.b, odd.Y, 2.f, 0.1f,
                                                       Options(Algorithm::Auto, Precision::TF32x3));
  Kokkos::fence();
  EXPECT_EQ(fallback.algorithm, Algorithm::VendorLt);
  EXPECT_TRUE(matches_reference(odd, 2.0, double(0.1f), odd.Y, tf32x3_product_rounding(odd.K)));
  EXPECT_THROW(FusedLinear::linear_leaky_relu(odd.X, odd.W, odd.b, odd.Y, 2.f, 0.1f,
                                              Options(Algorithm::Fused, Precision::TF32x3)),
               std::invalid_argument);
  Problem<float, Kokkos::LayoutLeft> left(33, 76, 41, 4);
  try {
    FusedLinear::linear_leaky_relu(left.X, left.W, left.b, left.Y, 2.f, 0.1f,
                                   Options(Algorithm::Fused, Precision::TF32x3));
    ADD_FAILURE() << "fused 3xtf32 on LayoutLeft did not throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("LayoutRight"), std::string::npos) << e.what();
  }
}

#endif

// Non-finite inputs, on every path that has 3xtf32. As in any 3xTF32, an infinite element
// meets the other operand's remainder in the cross terms (Inf * lo, with lo of either sign or
// zero), so an output it reaches is Inf or NaN where fp32 gives +-Inf; NaN stays NaN; every
// other output is as accurate as ever (README). Asserted as exactly that.
TEST(Precision, Tf32x3NonFiniteInputs) {
  if (!lt_serves) GTEST_SKIP() << "3xtf32 needs cuBLASLt (CUDA builds)";
  P p(40, 300, 50, 9);
  const float inf = std::numeric_limits<float>::infinity();
  auto set = [](const P::Matrix& v, int i, int j, float value) {
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
    h(i, j) = value;
    Kokkos::deep_copy(v, h);
  };
  set(p.X, 2, 5, std::numeric_limits<float>::quiet_NaN());
  set(p.W, 7, 3, inf);
  set(p.W, 9, 0, -inf);
  auto ref = FusedLinear::reference_linear_leaky_relu(
      Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.X),
      Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.W),
      Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.b), 2.0, double(0.1f));
  std::vector<Algorithm> paths{Algorithm::VendorLt, Algorithm::Vendor, Algorithm::VendorPrefill};
  if (fused_tf32x3_refusal().empty()) paths.push_back(Algorithm::Fused);  // the Hopper kernel
  for (Algorithm a : paths) {
    p.poison();
    FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f, Options(a, Precision::TF32x3));
    Kokkos::fence();
    auto y = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.Y);
    for (std::int64_t i = 0; i < p.M; ++i)
      for (std::int64_t j = 0; j < p.N; ++j) {
        if (std::isnan(ref(i, j))) EXPECT_TRUE(std::isnan(y(i, j))) << FusedLinear::to_string(a) << " " << i << "," << j;
        if (std::isinf(ref(i, j))) EXPECT_FALSE(std::isfinite(y(i, j))) << FusedLinear::to_string(a) << " " << i << "," << j;
        if (std::isfinite(ref(i, j)))
          EXPECT_NEAR(y(i, j), ref(i, j), 1e-5 * (1 + std::abs(ref(i, j)))) << FusedLinear::to_string(a);
      }
    EXPECT_TRUE(std::isnan(y(2, 0))) << FusedLinear::to_string(a);
    EXPECT_FALSE(std::isfinite(y(5, 7))) << FusedLinear::to_string(a);
  }
}

// The point of 3xTF32 is fp32 accuracy at tensor-core speed: #4's target is a norm-wise error no
// worse than strict fp32's on the reference model (1.5e-6 at 1024x8192x8192: x = torch.rand,
// W as nn.Linear initialises it, K = 8192), asserted here on those inputs at the same K.
// 3xTF32's dominant error is the tensor cores' truncating accumulation of hi.hi, which grows with
// the accumulated length, not with K or the shape: accumulating tf32x3_chunk = 256 terms at a time
// measured 6.2e-7 to 7.0e-7 at every shape of the H200 sweep (perf/RESULTS.md), so 1.5e-6 leaves
// a factor 2. Accumulating all of K at once, as a 3xTF32 on cuBLAS does unless K is split,
// measured 1.9e-5 at K = 8192: this test catches it. (Strict fp32's own error is printed, not
// compared: cuBLAS splits K at some shapes, this one included, which makes it far more accurate
// there than at the reference shape.)
TEST(Precision, Tf32x3MeetsTheStrictFp32AccuracyTarget) {
  if (!lt_serves) GTEST_SKIP() << "3xtf32 needs cuBLASLt (CUDA builds)";
  constexpr double target = 1.5e-6;
  P p(128, 8192, 256, 29);
  Kokkos::Random_XorShift64_Pool<ExecSpace> pool(30);
  Kokkos::fill_random(p.X, pool, 0.0f, 1.0f);
  FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f, Options(Algorithm::VendorLt));
  Kokkos::fence();
  const double strict_error = relative_error(p, p.Y);
  std::vector<Algorithm> paths{Algorithm::VendorLt, Algorithm::Vendor, Algorithm::VendorPrefill};
  if (fused_tf32x3_refusal().empty()) paths.push_back(Algorithm::Fused);  // the Hopper kernel
  for (Algorithm a : paths) {
    p.poison();
    const auto info = FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f, Options(a, Precision::TF32x3));
    Kokkos::fence();
    const double error = relative_error(p, p.Y);
    EXPECT_LE(error, target) << describe(a, info);
    std::printf("[ info     ] %s 3xtf32 error %.3g (strict fp32 here %.3g)\n", FusedLinear::to_string(a), error, strict_error);
  }
}

// 3xTF32 adds its ranges' sums to Y one of two ways (a batched product plus one pass, or range by
// range): both, on both layouts, with K not a whole number of ranges.
TEST(Precision, Tf32x3BothWaysOfAddingRanges) {
  if (!lt_serves) GTEST_SKIP() << "3xtf32 needs cuBLASLt (CUDA builds)";
  std::size_t& limit = FusedLinear::Impl::tf32x3_partials_limit();
  const std::size_t saved = limit;
  for (bool batched : {true, false}) {
    limit = batched ? saved : 0;
    Problem<float, Kokkos::LayoutRight> right(70, 700, 250, 41);
    Problem<float, Kokkos::LayoutLeft> left(70, 700, 250, 41);
    for (Algorithm a : {Algorithm::VendorLt, Algorithm::VendorPrefill}) {
      right.poison();
      left.poison();
      FusedLinear::linear_leaky_relu(right.X, right.W, right.b, right.Y, 2.f, 0.1f, Options(a, Precision::TF32x3));
      const auto info = FusedLinear::linear_leaky_relu(left.X, left.W, left.b, left.Y, 2.f, 0.1f, Options(a, Precision::TF32x3));
      Kokkos::fence();
      EXPECT_TRUE(matches_reference(right, 2.0, double(0.1f), right.Y, tf32x3_product_rounding(right.K)))
          << describe(a, info) << (batched ? " batched" : " range by range");
      EXPECT_TRUE(matches_reference(left, 2.0, double(0.1f), left.Y, tf32x3_product_rounding(left.K)))
          << describe(a, info) << (batched ? " batched" : " range by range") << ", LayoutLeft";
    }
  }
  limit = saved;
}

#ifdef FUSED_LINEAR_TEST_CUBLAS
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

TEST(Precision, Tf32WithinItsBoundAndHandleRestored) {
  cublasHandle_t handle = KokkosBlas::Impl::CudaBlasSingleton::singleton().handle;
  cublasMath_t before;
  ASSERT_EQ(cublasGetMathMode(handle, &before), CUBLAS_STATUS_SUCCESS);
  for (auto shape : {std::array<std::int64_t, 3>{128, 1024, 256}, {37, 300, 130}, {1, 2048, 64}}) {
    P p(shape[0], shape[1], shape[2], 8);
    for (Algorithm a : {Algorithm::Auto, Algorithm::Vendor, Algorithm::VendorPrefill, Algorithm::VendorLt}) {
      p.poison();
      const auto info = FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f, Options(a, Precision::TF32));
      Kokkos::fence();
      const bool lt = lt_serves && (a == Algorithm::Auto || a == Algorithm::VendorLt);
      EXPECT_EQ(info.gemm, lt ? "cuBLASLt" : "cuBLAS");
      EXPECT_TRUE(matches_reference(p, 2.0, double(0.1f), p.Y, tf32_product_rounding)) << describe(a, info);
      cublasMath_t after;
      ASSERT_EQ(cublasGetMathMode(handle, &after), CUBLAS_STATUS_SUCCESS);
      EXPECT_EQ(after, before) << "the shared cuBLAS handle's math mode was not restored";
    }
    // And strict fp32 right after is strict again (the bound without TF32 rounding).
    p.poison();
    FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f, Algorithm::Vendor);
    Kokkos::fence();
    EXPECT_TRUE(matches_reference(p, 2.0, double(0.1f), p.Y));
  }
}
#endif

}  // namespace
