// SPDX-License-Identifier: Apache-2.0
// Defects the CUDA paths have shown, one test each: plans shared between per-thread default
// streams, a worker thread's first call to skinny_sm90, a split-K graph replay, an sm_90a plan
// executed with column stride 2, cuBLASLt refusing after a write. CUDA builds only (skipped
// elsewhere); the defects every space can show are Contract/*.Regression*.
#include <atomic>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ContractJobs.hpp"

namespace {

using namespace FusedLinearTest;
using namespace FusedLinearTest::Contract;

// Guards against the plan cache identifying an instance by its cudaStream_t value alone, which
// is the same handle for every thread's per-thread default stream: two host threads, each on
// Kokkos::Cuda(cudaStreamPerThread), each calling the one-shot fused_skinny with 7 forced K
// splits at 17x4096x260 200 times on inputs of its own; every result checked.
TEST(ContractRegression, PerThreadDefaultStreamsDoNotShareAPlan) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build (per-thread default streams)";
#else
  const std::int64_t M = 17, K = 4096, N = 260;
  std::vector<Kokkos::Cuda> spaces;
  for (int t = 0; t < 2; ++t) spaces.emplace_back(cudaStreamPerThread);
  std::vector<std::unique_ptr<Job<CudaStrided> > > jobs;
  for (int t = 0; t < 2; ++t) {
    jobs.emplace_back(
        new Job<CudaStrided>(padded(M, K, N), random_inputs(M, K, N, 70 + t), 2, 0.1));
    jobs.back()->im =
        stage(spaces[std::size_t(t)], jobs.back()->bufs, jobs.back()->a, jobs.back()->in);
  }
  Kokkos::fence();
  const Options o = options(Algorithm::FusedSkinny, Precision::Strict, 7);
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back(
        [&, t] { good += one_shot_loop(spaces[std::size_t(t)], *jobs[std::size_t(t)], o, 200); });
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), 2 * 200);
  FusedLinear::release_cached_plans();
#endif
}

// The same, with the two threads' calls overlapping on the GPU: each thread enqueues 200 calls
// without waiting, cycling over 8 outputs (one plan: same strides and alignment class), then
// all outputs are checked. Were one plan's split-K partial sums and counters shared, the
// threads' kernels would mix each other's sums.
TEST(ContractRegression, PerThreadDefaultStreamsOverlapping) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build (per-thread default streams)";
#else
  using P = Problem<Kokkos::Cuda, float, Kokkos::LayoutRight>;
  using Out =
      Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::CudaSpace, Kokkos::MemoryUnmanaged>;
  const std::int64_t M = 17, K = 4096, N = 260, outputs = 8, apart = 4608;  // 256-byte steps
  std::vector<Kokkos::Cuda> spaces;
  std::vector<std::unique_ptr<P> > problems;
  std::vector<Kokkos::View<float*, Kokkos::CudaSpace> > ys;
  for (int t = 0; t < 2; ++t) {
    spaces.emplace_back(cudaStreamPerThread);
    problems.emplace_back(new P(M, K, N, 90 + t));
    ys.emplace_back("Ys", outputs * apart);
    Kokkos::deep_copy(ys.back(), std::numeric_limits<float>::quiet_NaN());
  }
  Kokkos::fence();
  const Options o = options(Algorithm::FusedSkinny, Precision::Strict, 7);
  std::vector<std::thread> threads;
  std::atomic<int> refused{0};
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      const P& p = *problems[std::size_t(t)];
      try {
        for (int c = 0; c < 200; ++c)
          FusedLinear::linear_leaky_relu(
              spaces[std::size_t(t)], p.X, p.W, p.b,
              Out(ys[std::size_t(t)].data() + (c % outputs) * apart, M, N), 2.f, 0.1f, o);
        spaces[std::size_t(t)].fence();
      } catch (const std::exception&) {
        ++refused;
      }
    });
  for (auto& th : threads) th.join();
  ASSERT_EQ(refused.load(), 0);
  for (int t = 0; t < 2; ++t)
    for (std::int64_t i = 0; i < outputs; ++i)
      EXPECT_TRUE(problems[std::size_t(t)]->reference(2, 0.1).check<float>(
          host_matrix(Out(ys[std::size_t(t)].data() + i * apart, M, N))))
          << "thread " << t << ", output " << i;
  FusedLinear::release_cached_plans();
#endif
}

// Guards against "cannot run the sm_90a few-rows kernel (invalid argument)" on a worker
// thread's first call: four std::threads that never touched CUDA, each with its own instance
// on a non-blocking stream (made on the initialising thread), each making its first CUDA call
// a one-shot skinny_sm90 call at M x 8192 x 8192 (M = 3, 5, 6, 7), 30 calls each, all checked.
TEST(ContractRegression, WorkerThreadsFirstCallToSkinnySm90) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build with the sm_90a kernels and a Hopper GPU";
#else
  const std::int64_t K = 8192, N = 8192, rows[] = {3, 5, 6, 7};
  const Options o = options(Algorithm::SkinnySm90);
  Streams s(4);
  std::vector<std::unique_ptr<Job<CudaStrided> > > jobs;
  HostInputs shared = random_inputs(7, K, N, 80);  // W and b shared by value, X cut per thread
  for (int t = 0; t < 4; ++t) {
    HostInputs in = shared;
    in.M = rows[t];
    in.X.resize(std::size_t(rows[t] * K));
    jobs.emplace_back(new Job<CudaStrided>(contiguous(rows[t], K, N), in, 2, 0.1));
    const Views<CudaStrided>& v = jobs.back()->v;
    if (!serves(o, facts_of(s.spaces[0], v.X, v.W, v.b, v.Y), {rows[t], K, N}))
      GTEST_SKIP() << "skinny_sm90 is not served here: "
                   << facts_of(s.spaces[0], v.X, v.W, v.b, v.Y).sm90_skinny;
    jobs.back()->im = stage(s.spaces[std::size_t(t)], jobs.back()->bufs, jobs.back()->a, in);
  }
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back(
        [&, t] { good += one_shot_loop(s.spaces[std::size_t(t)], *jobs[std::size_t(t)], o, 30); });
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), 4 * 30);
#endif
}

// Guards against split-K state baked into a graph (a call number passed as a kernel argument,
// arrival counters not reset between replays): fused_skinny with 4 forced K splits, captured
// and replayed 3 times: every replay must write the right Y.
TEST(ContractRegression, GraphReplayOfSplitK) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build (CUDA graphs)";
#else
  Streams s(1);
  Tally tally;
  capture_and_replay<CudaRight>(s.spaces[0], contiguous(17, 4096, 260),
                                options(Algorithm::FusedSkinny, Precision::Strict, 4), tally);
  tally.print("GraphReplayOfSplitK");
#endif
}

// Guards against run_sm90 re-checking row strides and alignment at execute but not the column
// strides: skinny_sm90 (and auto, which takes it) planned on LayoutStride CudaSpace Unmanaged
// Views with unit column strides, X 8x8192, W 4096x8192, Y 8x4096, executed with X and Y of
// column stride 2 over the same buffers (LayoutStride(M, 2K, K, 2)): computed right or
// refused, nothing outside Y written. The same for fused_sm90/3xtf32 at 256x8192x4096.
TEST(ContractRegression, Sm90PlanExecutedWithColumnStride2) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build with the sm_90a kernels and a Hopper GPU";
#else
  const Kokkos::Cuda exec;
  Tally tally;
  int served = 0;
  const struct {
    std::int64_t M, K, N;
    Options o;
    std::vector<std::int64_t> rows;
  } cases[] = {
      {8, 8192, 4096, options(Algorithm::SkinnySm90), {}},
      {8, 8192, 4096, options(Algorithm::Auto), {}},
      {256, 8192, 4096, options(Algorithm::FusedSm90, Precision::TF32x3), {0, 1, 127, 128, 255}}};
  for (const auto& c : cases) {
    SCOPED_TRACE(label(c.o) + " at " + std::to_string(c.M) + "x" + std::to_string(c.K) + "x" +
                 std::to_string(c.N));
    const std::int64_t M = c.M, K = c.K, N = c.N;
    const Arrangement unit = contiguous(M, K, N);
    Arrangement two = unit;
    two.name = "X and Y column stride 2 over the same buffers";
    two.X = strided(M, K, 2 * K, 2), two.Y = strided(M, N, 2 * N, 2);
    const HostInputs in = random_inputs(M, K, N, 11);
    const Expect expect(in, 2, 0.1, c.rows);
    const Buffers<float, Kokkos::CudaSpace> bufs(std::vector<Arrangement>{unit, two});
    const Views<CudaStrided> v(bufs, unit), v2(bufs, two);
    if (!serves(c.o, facts_of(exec, v.X, v.W, v.b, v.Y), {M, K, N}) ||
        (c.o.algorithm == Algorithm::Auto && facts_of(exec, v.X, v.W, v.b, v.Y).sm90_skinny))
      continue;
    ++served;
    auto plan = make_plan(exec, v.X, v.W, v.b, v.Y, 2, 0.1, c.o);
    ASSERT_TRUE(plan);
    for (const auto* w : {&v, &v2})
      tally.add(label(c.o), checked_call(exec, bufs, w == &v ? unit : two, in, expect,
                                         "FusedLinear::Plan::execute", w == &v2,
                                         [&]() -> std::optional<RunInfo> {
                                           plan->execute(w->X, w->W, w->b, w->Y);
                                           return plan->info();
                                         }));
  }
  if (served == 0) GTEST_SKIP() << "the sm_90a kernels are not served here (build or GPU)";
  tally.print("Sm90PlanExecutedWithColumnStride2");
#endif
}

// Guards against a path writing Y (vendor_prefill + 3xtf32's prefill) before cuBLASLt's check
// can refuse the Views. Every path through cuBLASLt, planned on aligned LayoutRight
// Views, executed on Views one element off (less aligned than the plan's kernel assumes):
// computed right or refused, and a refused call leaves Y untouched.
TEST(ContractRegression, CublasLtRefusalLeavesYUntouched) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build with cuBLASLt (no other build runs vendor_prefill in "
                  "3xtf32)";
#else
  const Kokkos::Cuda exec;
  const std::int64_t M = 64, K = 256, N = 96;
  const Arrangement aligned = contiguous(M, K, N);
  const Arrangement off = aligned.shifted(1, ", 1 element off");
  const HostInputs in = random_inputs(M, K, N, 12);
  const Expect expect(in, 2, 0.1);
  const Buffers<float, Kokkos::CudaSpace> bufs(std::vector<Arrangement>{aligned, off});
  const Views<CudaRight> v(bufs, aligned), vo(bufs, off);
  Tally tally;
  int lt = 0;
  for (Algorithm a : {Algorithm::VendorPrefill, Algorithm::Vendor, Algorithm::VendorLt})
    for (Precision p : all_precisions) {
      const Options o = options(a, p);
      SCOPED_TRACE(label(o));
      auto plan = make_plan(exec, v.X, v.W, v.b, v.Y, 2, 0.1, o);
      if (!plan || plan->info().gemm != Gemm::CublasLt) continue;
      ++lt;
      tally.add(label(o), checked_call(exec, bufs, off, in, expect, "FusedLinear::Plan::execute",
                                       true, [&]() -> std::optional<RunInfo> {
                                         plan->execute(vo.X, vo.W, vo.b, vo.Y);
                                         return plan->info();
                                       }));
    }
  if (lt == 0) GTEST_SKIP() << "no path runs cuBLASLt in this build";
  tally.print("CublasLtRefusalLeavesYUntouched");
#endif
}

}  // namespace
