// SPDX-License-Identifier: Apache-2.0
// The main typed suite (TypedSuite.hpp) on every other execution space the build enables
// (a CUDA build: OpenMP and Serial; a host build: Serial, or Threads), with Views in that space's
// memory: float LayoutRight and double LayoutLeft.
#include "TypedSuite.hpp"

namespace FusedLinearTest {

#if !defined(FUSED_LINEAR_TESTS_DEFAULT_SPACE_ONLY) &&                                        \
    (defined(KOKKOS_ENABLE_CUDA) + defined(KOKKOS_ENABLE_HIP) + defined(KOKKOS_ENABLE_SYCL) + \
     defined(KOKKOS_ENABLE_OPENMPTARGET) + defined(KOKKOS_ENABLE_OPENMP) +                    \
     defined(KOKKOS_ENABLE_THREADS) + defined(KOKKOS_ENABLE_HPX) +                            \
     defined(KOKKOS_ENABLE_SERIAL)) > 1
INSTANTIATE_TYPED_TEST_SUITE_P(OtherSpace, Layer, AsGTestTypes<NonDefaultConfigs>::type,
                               ConfigName);
#elif defined(FUSED_LINEAR_TESTS_DEFAULT_SPACE_ONLY)
TEST(Layer, OtherExecutionSpaces) {
  GTEST_SKIP() << "built with FusedLinear_TESTS_DEFAULT_SPACE_ONLY: the default space only";
}
#else
TEST(Layer, OtherExecutionSpaces) {
  GTEST_SKIP() << "this build enables one execution space only ("
               << Kokkos::DefaultExecutionSpace::name() << "): the default one's suite covers it";
}
#endif

}  // namespace FusedLinearTest
