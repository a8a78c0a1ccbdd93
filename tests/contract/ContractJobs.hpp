// SPDX-License-Identifier: Apache-2.0
// What the contract's thread, stream and graph suites share (tests/contract/): one problem per
// thread or stream in guarded buffers (Job), its Views' arrangements, a checked loop of one-shot
// calls, CUDA instances on streams of their own, and a plan captured in a CUDA graph and
// replayed.
#ifndef FUSED_LINEAR_TEST_CONTRACT_CONTRACT_JOBS_HPP
#define FUSED_LINEAR_TEST_CONTRACT_CONTRACT_JOBS_HPP

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "Contract.hpp"

namespace FusedLinearTest {
namespace Contract {

/// One thread's (or stream's) problem: its Views in guarded buffers, its inputs, its reference.
template <class Set>
struct Job {
  using Scalar = typename Set::Scalar;
  Arrangement a;
  HostInputs in;
  Expect expect;
  Buffers<Scalar, typename Set::Memory> bufs;
  Views<Set> v;
  Image<Scalar> im;
  Job(const Arrangement& arr, const HostInputs& inputs, double multiplier, double slope,
      std::vector<std::int64_t> rows = {})
      : a(arr),
        in(inputs),
        expect(in, multiplier, slope, std::move(rows)),
        bufs(a.sizes()),
        v(bufs, a) {}
};

/// Row-major X, W with padded rows, a strided b, Y with column stride 2 and padded rows (the
/// concurrency tests' Views: LayoutStride, any space).
inline Arrangement padded(std::int64_t M, std::int64_t K, std::int64_t N) {
  Arrangement a;
  a.name = "padded rows, Y column stride 2";
  a.X = row_major(M, K, K + 4), a.W = row_major(N, K, K), a.b = vector(N, 2, 1);
  a.Y = strided(M, N, 2 * N + 1, 2, 1);
  return a;
}
/// Contiguous row-major operands (the CUDA graph and sm_90a tests' Views).
inline Arrangement contiguous(std::int64_t M, std::int64_t K, std::int64_t N) {
  Arrangement a;
  a.name = "contiguous rows";
  a.X = row_major(M, K, K), a.W = row_major(N, K, K), a.b = vector(N), a.Y = row_major(M, N, N);
  return a;
}

/// `calls` one-shot calls of `o` on `exec` in a loop, each checked (Y's buffer; the inputs'
/// after the last); stops at the first wrong call. The job must be staged (job.im).
template <class Exec, class Set>
int one_shot_loop(const Exec& exec, Job<Set>& job, const Options& o, int calls,
                  std::mutex* serialise = nullptr) {
  int good = 0;
  for (int c = 0; c < calls; ++c) {
    std::unique_lock<std::mutex> lock;
    if (serialise) lock = std::unique_lock<std::mutex>(*serialise);
    SCOPED_TRACE(label(o) + ", call " + std::to_string(c) + " of " + std::to_string(calls));
    if (c > 0) restage_y(exec, job.bufs, job.a, job.im);
    std::optional<RunInfo> info;
    const Outcome r = invoke(
        "FusedLinear::linear_leaky_relu", false,
        [&] {
          return std::optional<RunInfo>(FusedLinear::linear_leaky_relu(
              exec, job.v.X, job.v.W, job.v.b, job.v.Y, typename Set::Scalar(2),
              typename Set::Scalar(0.1), o));
        },
        info);
    if (!settle(exec, job.bufs, job.a, job.im, job.expect, r, info, c == calls - 1)) break;
    ++good;
  }
  return good;
}

#if defined(KOKKOS_ENABLE_CUDA)
/// CUDA instances on non-blocking streams of their own, made on this (the initialising)
/// thread, as Kokkos 3.4 requires.
struct Streams {
  std::vector<cudaStream_t> streams;
  std::vector<Kokkos::Cuda> spaces;
  explicit Streams(int n) : streams(std::size_t(n)) {
    for (auto& s : streams)
      EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    for (auto& s : streams) spaces.emplace_back(s);
  }
  ~Streams() {
    for (auto& s : spaces) s.fence();
    FusedLinear::release_cached_plans();  // plans keyed by these streams
    spaces.clear();
    for (auto& s : streams) cudaStreamDestroy(s);
  }
};
using CudaStrided = StridedSet<float, Kokkos::CudaSpace>;
using CudaRight = RightSet<float, Kokkos::CudaSpace>;
using CudaRightDouble = RightSet<double, Kokkos::CudaSpace>;
#endif

#if defined(KOKKOS_ENABLE_CUDA)
/// Paths that must replay right (the others may refuse capture instead).
inline bool must_replay(const Options& o) {
  switch (o.algorithm) {
    case Algorithm::FusedSkinny: return o.tuning.skinny_splits > 0;
    case Algorithm::Fused:
    case Algorithm::Vendor:
    case Algorithm::VendorLt:
    case Algorithm::FusedSm90:
    case Algorithm::SkinnySm90: return true;
    default: return false;
  }
}

/// A plan on `exec` (a non-blocking stream), executed once (the warm-up step applications run
/// before capturing), then plan.execute captured (cudaStreamCaptureModeGlobal), the graph
/// instantiated and launched 3 times with Y poisoned (NaN) and X's contents changed before
/// each; every replay must give the right Y, guard bands and inputs unchanged. A refusal of
/// execute under capture (std::invalid_argument mentioning "graph capture") is recorded;
/// `must_replay` paths may not refuse.
template <class Set>
void capture_and_replay(const Kokkos::Cuda& exec, const Arrangement& a, const Options& o,
                        Tally& tally) {
  using Scalar = typename Set::Scalar;
  const cudaStream_t stream = exec.cuda_stream();
  const std::int64_t M = a.X.rows, K = a.X.cols, N = a.W.rows;
  std::vector<HostInputs> in;
  std::vector<Expect> expect;
  for (int r = 0; r < 4; ++r) {
    in.push_back(random_inputs(M, K, N, 90 + r));
    if (r > 0) in.back().W = in[0].W, in.back().b = in[0].b;  // only X changes between launches
    expect.emplace_back(in.back(), 2, 0.1);
  }
  const Buffers<Scalar, Kokkos::CudaSpace> bufs(a.sizes());
  const Views<Set> v(bufs, a);
  SCOPED_TRACE(Set::name() + ", " + label(o) + ", " + std::to_string(M) + "x" + std::to_string(K) +
               "x" + std::to_string(N));
  auto plan = make_plan(exec, v.X, v.W, v.b, v.Y, 2, 0.1, o);
  if (!plan) return;
  const auto execute = [&]() -> std::optional<RunInfo> {
    plan->execute(v.X, v.W, v.b, v.Y);
    return plan->info();
  };
  checked_call(exec, bufs, a, in[0], expect[0], "FusedLinear::Plan::execute", false, execute);
  Image<Scalar> im = stage(exec, bufs, a, in[1], /*nan_y=*/true);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  std::string refusal, other;
  try {
    plan->execute(v.X, v.W, v.b, v.Y);
  } catch (const std::invalid_argument& e) {
    refusal = e.what();
  } catch (const std::exception& e) {
    other = e.what();
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (!refusal.empty() || !other.empty()) {
    if (graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    EXPECT_TRUE(other.empty()) << "execute under capture threw something else: " << other;
    EXPECT_TRUE(starts_with(refusal, "FusedLinear::Plan::execute: ") &&
                contains(refusal, "graph capture"))
        << refusal;
    EXPECT_FALSE(must_replay(o)) << "this path must replay under a CUDA graph: " << refusal;
    settle(exec, bufs, a, im, expect[1], Outcome::Refused, std::nullopt);
    tally.add(label(o) + " (capture refused)", Outcome::Refused);
    return;
  }
  EXPECT_EQ(ended, cudaSuccess) << "execute broke the capture: " << cudaGetErrorString(ended);
  if (ended != cudaSuccess || graph == nullptr) {
    (void)cudaGetLastError();
    return;
  }
  cudaGraphExec_t instance = nullptr;
  EXPECT_EQ(cudaGraphInstantiateWithFlags(&instance, graph, 0), cudaSuccess);
  for (int r = 1; r <= 3 && instance; ++r) {
    SCOPED_TRACE("replay " + std::to_string(r));
    if (r > 1) im = stage(exec, bufs, a, in[std::size_t(r)], /*nan_y=*/true);
    EXPECT_EQ(cudaGraphLaunch(instance, stream), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    settle(exec, bufs, a, im, expect[std::size_t(r)], Outcome::Ran, plan->info());
    tally.add(label(o) + " (replayed)", Outcome::Ran);
  }
  if (instance) cudaGraphExecDestroy(instance);
  cudaGraphDestroy(graph);
}
#endif

}  // namespace Contract
}  // namespace FusedLinearTest

#endif
