// SPDX-License-Identifier: Apache-2.0
// The plan's contract under CUDA graphs: every path captured and replayed (or its capture
// refused, where README allows), the one-shot call's first call under capture refused, a
// captured one-shot call's plan held by its graph. CUDA builds only (skipped elsewhere).
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ContractJobs.hpp"

namespace {

using namespace FusedLinearTest;
using namespace FusedLinearTest::Contract;

// Every path the build serves on Cuda, captured in a CUDA graph and replayed (or its capture
// refused, where README allows).
TEST(ContractGraph, CaptureAndReplayEveryPath) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build (CUDA graphs)";
#else
  Streams s(1);
  const Kokkos::Cuda& exec = s.spaces[0];
  Tally tally;
  const std::int64_t shapes[][3] = {{64, 256, 96}, {17, 4096, 260}};
  for (const auto& sh : shapes) {
    const Arrangement a = contiguous(sh[0], sh[1], sh[2]);
    const auto each = [&](auto set) {
      using Set = decltype(set);
      const Buffers<typename Set::Scalar, Kokkos::CudaSpace> bufs(a.sizes());
      const Views<Set> v(bufs, a);
      for (const Options& o :
           served_requests(exec, v.X, v.W, v.b, v.Y,
                           {Precision::Strict, Precision::TF32, Precision::TF32x3}, 4))
        capture_and_replay<Set>(exec, a, o, tally);
    };
    each(CudaRight());
    each(CudaRightDouble());
  }
  tally.print("CaptureAndReplayEveryPath");
#endif
}

// The one-shot call made for the first time while its stream is being captured (no cached
// plan: making one allocates, which would invalidate the capture) must throw
// std::invalid_argument mentioning "capture", leave the capture intact and write nothing; after
// the capture the same call computes right.
TEST(ContractGraph, OneShotFirstCallUnderCaptureRefused) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build (CUDA graphs)";
#else
  Streams s(1);
  const Kokkos::Cuda& exec = s.spaces[0];
  const std::int64_t M = 17, K = 4096, N = 260;
  const Arrangement a = contiguous(M, K, N);
  const HostInputs in = random_inputs(M, K, N, 95);
  const Expect expect(in, 2, 0.1);
  const Buffers<float, Kokkos::CudaSpace> bufs(a.sizes());
  const Views<CudaRight> v(bufs, a);
  for (const Options& o : {options(Algorithm::FusedSkinny, Precision::Strict, 4),
                           options(Algorithm::VendorLt), options(Algorithm::Auto)}) {
    SCOPED_TRACE(label(o));
    FusedLinear::release_cached_plans();
    const Image<float> im = stage(exec, bufs, a, in);
    ASSERT_EQ(cudaStreamBeginCapture(exec.cuda_stream(), cudaStreamCaptureModeGlobal), cudaSuccess);
    std::string what;
    try {
      FusedLinear::linear_leaky_relu(exec, v.X, v.W, v.b, v.Y, 2.f, 0.1f, o);
      what = "(no exception)";
    } catch (const std::invalid_argument& e) {
      what = e.what();
      EXPECT_TRUE(starts_with(what, "FusedLinear::linear_leaky_relu: ") &&
                  contains(what, "capture"))
          << what;
    } catch (const std::exception& e) {
      what = e.what();
      ADD_FAILURE() << "not an std::invalid_argument: " << what;
    }
    EXPECT_NE(what, "(no exception)") << "a first call under capture must be refused";
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(exec.cuda_stream(), &graph);
    EXPECT_EQ(ended, cudaSuccess) << "the call broke the capture: " << cudaGetErrorString(ended);
    if (graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    settle(exec, bufs, a, im, expect, Outcome::Refused, std::nullopt);
    checked_call(exec, bufs, a, in, expect, "FusedLinear::linear_leaky_relu", false,
                 [&] { return attempt(exec, v.X, v.W, v.b, v.Y, 2, 0.1, o); });
  }
  FusedLinear::release_cached_plans();
#endif
}

// The one-shot call captured after a first call outside the capture: the graph holds the plan,
// so it still replays right after more other shapes than the cache keeps have gone through it
// (the plan dropped from the cache), each replay on a poisoned Y.
TEST(ContractGraph, OneShotCapturedAfterAFirstCallIsPinned) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build (CUDA graphs)";
#else
  using P = Problem<Kokkos::Cuda, float, Kokkos::LayoutRight>;
  Streams s(1);
  const Kokkos::Cuda& exec = s.spaces[0];
  const cudaStream_t stream = exec.cuda_stream();
  FusedLinear::release_cached_plans();
  P p(17, 4096, 260, 96);
  const Options o = options(Algorithm::FusedSkinny, Precision::Strict, 4);
  FusedLinear::linear_leaky_relu(exec, p.X, p.W, p.b, p.Y, 2.f, 0.1f, o);
  exec.fence();
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  std::string error;
  try {
    FusedLinear::linear_leaky_relu(exec, p.X, p.W, p.b, p.Y, 2.f, 0.1f, o);
  } catch (const std::exception& e) {
    error = e.what();
  }
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_EQ(error, "");
  cudaGraphExec_t replay = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&replay, graph, 0), cudaSuccess);
  for (int round = 0; round < 2; ++round) {
    if (round == 1) {
      for (int i = 0; i < int(FusedLinear::cached_plans_limit()) + 8; ++i) {  // other plans
        P q(2, 8 + i, 3, 200 + i);
        FusedLinear::linear_leaky_relu(exec, q.X, q.W, q.b, q.Y, 2.f, 0.1f, o);
      }
      exec.fence();
    }
    p.poison();
    Kokkos::fence();
    ASSERT_EQ(cudaGraphLaunch(replay, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_TRUE(matches_reference(p, 2, 0.1, p.Y)) << "replay after round " << round;
  }
  cudaGraphExecDestroy(replay);
  cudaGraphDestroy(graph);
  FusedLinear::release_cached_plans();
#endif
}

}  // namespace
