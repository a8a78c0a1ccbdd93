// SPDX-License-Identifier: Apache-2.0
// Two execution space instances that may run concurrently, for the tests of instances and
// streams.
#ifndef FUSED_LINEAR_TEST_COMMON_INSTANCES_HPP
#define FUSED_LINEAR_TEST_COMMON_INSTANCES_HPP

#include <vector>

#include <gtest/gtest.h>

#include "Common.hpp"

namespace FusedLinearTest {

/// Two instances of the default execution space that may run concurrently: two non-blocking
/// CUDA streams on CUDA (they do not synchronise with the legacy default stream, which Kokkos
/// 3.4's default instance and Kokkos Kernels' gemm use); on the host the default instance twice
/// (host backends order their work anyway).
struct TwoInstances {
#ifdef KOKKOS_ENABLE_CUDA
  cudaStream_t streams[2] = {nullptr, nullptr};
  std::vector<ExecSpace> spaces;
  TwoInstances() {
    for (auto& s : streams)
      EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    spaces = {ExecSpace(streams[0]), ExecSpace(streams[1])};
  }
  ~TwoInstances() {
    for (auto& s : spaces) s.fence();
    FusedLinear::release_cached_plans();  // plans keyed by these streams
    spaces.clear();
    for (auto& s : streams) cudaStreamDestroy(s);
  }
#else
  std::vector<ExecSpace> spaces{ExecSpace(), ExecSpace()};
#endif
};

}  // namespace FusedLinearTest

#endif
