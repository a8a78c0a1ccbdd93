// SPDX-License-Identifier: Apache-2.0
// Concurrency (two execution space instances; on CUDA also two host threads, one instance
// each) and determinism (the fused path is bitwise reproducible).
#include <cstring>
#include <thread>
#include <vector>

#include "TestHelpers.hpp"

namespace {

using namespace FusedLinearTest;
using FusedLinear::Algorithm;
using P = Problem<float, Kokkos::LayoutRight>;

/// Two instances of the default execution space that may run concurrently: two CUDA streams on
/// CUDA; on the host, the default instance twice (host backends order their work anyway).
struct TwoInstances {
#ifdef KOKKOS_ENABLE_CUDA
  cudaStream_t streams[2] = {nullptr, nullptr};
  std::vector<ExecSpace> spaces;
  TwoInstances() {
    for (auto& s : streams) EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    spaces = {ExecSpace(streams[0]), ExecSpace(streams[1])};
  }
  ~TwoInstances() {
    spaces.clear();
    for (auto& s : streams) cudaStreamDestroy(s);
  }
  static constexpr bool host_threads_supported = true;
#else
  std::vector<ExecSpace> spaces{ExecSpace(), ExecSpace()};
  // Kokkos 3.4's OpenMP instance must not be entered from two host threads at once: the README's
  // thread-safety contract says host calls are to be serialised by the caller.
  static constexpr bool host_threads_supported = false;
#endif
};

TEST(Concurrency, TwoInstancesGiveTheRightResults) {
  TwoInstances two;
  for (Algorithm a : {Algorithm::Vendor, Algorithm::VendorPrefill, Algorithm::Fused,
                      Algorithm::FusedSkinny}) {
    P p0(300, 500, 260, 1), p1(260, 300, 500, 2);
    // Both launched before either is waited for, so on CUDA the two streams overlap.
    FusedLinear::linear_leaky_relu(two.spaces[0], p0.X, p0.W, p0.b, p0.Y, 2.f, 0.1f, a);
    FusedLinear::linear_leaky_relu(two.spaces[1], p1.X, p1.W, p1.b, p1.Y, -1.f, 0.3f, a);
    two.spaces[0].fence();
    two.spaces[1].fence();
    EXPECT_TRUE(matches_reference(p0, 2.0, 0.1, p0.Y)) << FusedLinear::to_string(a);
    EXPECT_TRUE(matches_reference(p1, -1.0, double(0.3f), p1.Y)) << FusedLinear::to_string(a);
  }
}

TEST(Concurrency, TwoHostThreadsWithSeparateInstances) {
  if (!TwoInstances::host_threads_supported)
    GTEST_SKIP() << "host backends: calls from several host threads must be serialised";
  TwoInstances two;
  std::vector<P> problems;
  for (int t = 0; t < 2; ++t) problems.emplace_back(257, 400, 300, 10 + t);
  Kokkos::fence();
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (int repeat = 0; repeat < 20; ++repeat)
        for (Algorithm a : {Algorithm::Vendor, Algorithm::Fused, Algorithm::VendorPrefill,
                            Algorithm::FusedSkinny})
          FusedLinear::linear_leaky_relu(two.spaces[t], problems[t].X, problems[t].W,
                                         problems[t].b, problems[t].Y, 2.f, 0.1f, a);
      two.spaces[t].fence();
    });
  }
  for (auto& th : threads) th.join();
  for (auto& p : problems) EXPECT_TRUE(matches_reference(p, 2.0, 0.1, p.Y));
}

// The fused kernels sum every element in a fixed order, whatever the scheduling: repeated runs
// on the same inputs give the same bits. (The vendor paths inherit the BLAS's behaviour: cuBLAS
// is bitwise reproducible for one configuration and stream, but not across architectures or
// library versions; see the README.)
TEST(Determinism, FusedIsBitwiseReproducible) {
  for (Algorithm a : {Algorithm::Fused, Algorithm::FusedSkinny})
  for (auto shape : {std::array<std::int64_t, 3>{1024, 777, 515}, {17, 4096, 260}}) {
    P p(shape[0], shape[1], shape[2], 3);
    FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f, a);
    auto first = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.Y);
    for (int repeat = 0; repeat < 5; ++repeat) {
      p.poison();
      FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f, a);
      auto again = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.Y);
      ASSERT_EQ(std::memcmp(first.data(), again.data(), first.span() * sizeof(float)), 0)
          << FusedLinear::to_string(a) << " run " << repeat << " differs at " << shape[0] << "x" << shape[1] << "x" << shape[2];
    }
  }
}

}  // namespace
