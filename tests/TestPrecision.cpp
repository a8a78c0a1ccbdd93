// SPDX-License-Identifier: Apache-2.0
// Precision modes: strict fp32 is the default (every other test); TF32 runs on the vendor paths
// with cuBLAS, within its derived bound, and leaves the shared cuBLAS handle as it found it;
// everywhere else it is refused with a clear error rather than silently computed in fp32.
#include "TestHelpers.hpp"

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
constexpr double tf32_product_rounding = 2.0 / 1024 + 1.0 / (1024.0 * 1024.0);

TEST(Precision, NamesRoundTrip) {
  for (Precision p : {Precision::Strict, Precision::TF32})
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
#ifndef FUSED_LINEAR_TEST_CUBLAS
  // No cuBLAS in this build: every path refuses TF32.
  for (Algorithm a : all_algorithms)
    EXPECT_THROW(FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f, Options(a, Precision::TF32)),
                 std::invalid_argument) << FusedLinear::to_string(a);
#endif
}

#ifdef FUSED_LINEAR_TEST_CUBLAS
TEST(Precision, Tf32WithinItsBoundAndHandleRestored) {
  cublasHandle_t handle = KokkosBlas::Impl::CudaBlasSingleton::singleton().handle;
  cublasMath_t before;
  ASSERT_EQ(cublasGetMathMode(handle, &before), CUBLAS_STATUS_SUCCESS);
  for (auto shape : {std::array<std::int64_t, 3>{128, 1024, 256}, {37, 300, 130}, {1, 2048, 64}}) {
    P p(shape[0], shape[1], shape[2], 8);
    for (Algorithm a : {Algorithm::Auto, Algorithm::Vendor, Algorithm::VendorPrefill}) {
      p.poison();
      const auto info = FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f, Options(a, Precision::TF32));
      Kokkos::fence();
      EXPECT_EQ(info.gemm, "cuBLAS");
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
