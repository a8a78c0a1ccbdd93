// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

int main(int argc, char* argv[]) {
  ::testing::InitGoogleTest(&argc, argv);
  // Listing the tests (CTest's discovery) initialises no device: it works on a machine without
  // the build's GPU.
  if (::testing::GTEST_FLAG(list_tests)) return RUN_ALL_TESTS();
  Kokkos::ScopeGuard kokkos(argc, argv);
  return RUN_ALL_TESTS();
}
