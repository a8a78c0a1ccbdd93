// SPDX-License-Identifier: Apache-2.0
// The plan's contract under concurrency: the default instance from several host threads, an
// instance per thread, a plan made while another thread calls, two plans running on two
// instances at once; every call checked as the contract suites check (Contract.hpp).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ContractJobs.hpp"

namespace {

using namespace FusedLinearTest;
using namespace FusedLinearTest::Contract;

// The default instance from several host threads at once (CUDA), every call checked, guard
// bands included, at shapes whose K is split. Host backends: Kokkos 3.4 instances must not be
// entered from two threads at once and its OpenMP backend runs team kernels only from the
// initialising thread (README), so there the threads call Kokkos::Serial, one at a time, as
// TestConcurrency.cpp does.
template <class Exec>
void default_instance_from_threads(bool serialise) {
  using Set = StridedSet<float, typename Exec::memory_space>;
  const bool host = Impl::is_host_space<Exec>();
  const std::int64_t M = 17, K = host ? 300 : 4096, N = host ? 40 : 260;
  const Options requests[] = {options(Algorithm::Auto),
                              options(Algorithm::FusedSkinny, Precision::Strict, 3),
                              options(Algorithm::Fused)};
  const Exec exec;
  std::vector<std::unique_ptr<Job<Set>>> jobs;
  for (int t = 0; t < 3; ++t) {
    jobs.emplace_back(new Job<Set>(padded(M, K, N), random_inputs(M, K, N, 40 + t), 2, 0.1));
    jobs.back()->im = stage(exec, jobs.back()->bufs, jobs.back()->a, jobs.back()->in);
  }
  std::mutex lock;
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      for (const Options& o : requests)
        good += one_shot_loop(exec, *jobs[std::size_t(t)], o, 10, serialise ? &lock : nullptr);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), 3 * 3 * 10);
}

TEST(ContractConcurrency, DefaultInstanceFromSeveralThreads) {
#if defined(KOKKOS_ENABLE_CUDA)
  default_instance_from_threads<Kokkos::Cuda>(false);
#elif defined(KOKKOS_ENABLE_SERIAL)
  default_instance_from_threads<Kokkos::Serial>(true);
#else
  GTEST_SKIP() << "no execution space of this build takes calls from other host threads";
#endif
}

// Several host threads, each with its own instance (CUDA: a non-blocking stream each), each on
// another path, 30 calls each, every one checked.
TEST(ContractConcurrency, OwnInstancePerThread) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "host backends: Kokkos 3.4 host instances must not be entered from two host "
                  "threads at once (README); DefaultInstanceFromSeveralThreads covers Serial";
#else
  const Options requests[] = {options(Algorithm::FusedSkinny, Precision::Strict, 7),
                              options(Algorithm::Fused), options(Algorithm::Vendor),
                              options(Algorithm::Auto, Precision::TF32x3)};
  const std::int64_t shapes[][3] = {
      {17, 4096, 260}, {130, 300, 257}, {64, 512, 96}, {33, 1024, 200}};
  Streams s(4);
  std::vector<std::unique_ptr<Job<CudaStrided>>> jobs;
  for (int t = 0; t < 4; ++t) {
    const auto* sh = shapes[t];
    jobs.emplace_back(new Job<CudaStrided>(padded(sh[0], sh[1], sh[2]),
                                           random_inputs(sh[0], sh[1], sh[2], 50 + t), 2, 0.1));
    jobs.back()->im =
        stage(s.spaces[std::size_t(t)], jobs.back()->bufs, jobs.back()->a, jobs.back()->in);
  }
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      good += one_shot_loop(s.spaces[std::size_t(t)], *jobs[std::size_t(t)], requests[t], 30);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), 4 * 30);
#endif
}

// The one-shot cache makes a plan outside its lock: while one thread's plan is being made (held
// up inside Planning::Measure's clock until the other thread is done), another thread's call of
// another shape completes. Made under the lock, the second call waited for the first plan and
// the first plan's clock gave up waiting.
namespace held_up {
std::atomic<bool> inside{false}, other_done{false}, gave_up{false};
double clock(Algorithm, Precision, int, int, double measured) {
  inside = true;
  for (int i = 0; i < 2000 && !other_done; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (!other_done) gave_up = true;
  return measured;
}
}  // namespace held_up
TEST(ContractConcurrency, PlanMadeOutsideTheCacheLock) {
#if !defined(KOKKOS_ENABLE_SERIAL)
  GTEST_SKIP() << "needs Kokkos::Serial for the second thread";
#else
  FusedLinear::release_cached_plans();
  FusedLinear::forget_wisdom();
  using Slow = Problem<ExecSpace, float, Kokkos::LayoutRight>;
  using Quick = Problem<Kokkos::Serial, float, Kokkos::LayoutRight>;
  // A shape with several candidates to time on every backend (a single one is not timed, and
  // the clock would never be called).
  Slow slow(64, 1024, 300, 31);
  Quick quick(5, 16, 9, 32);
  Options measured(Algorithm::Auto);
  measured.planning = FusedLinear::Planning::Measure;
  measured.tuning.measure_clock = &held_up::clock;
  std::thread other([&] {
    while (!held_up::inside) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    FusedLinear::linear_leaky_relu(Kokkos::Serial(), quick.X, quick.W, quick.b, quick.Y, 2.f, 0.1f);
    held_up::other_done = true;
  });
  FusedLinear::linear_leaky_relu(ExecSpace(), slow.X, slow.W, slow.b, slow.Y, 2.f, 0.1f, measured);
  const bool timed = held_up::inside;
  held_up::inside = true;  // where nothing was timed, the other thread goes now
  other.join();
  EXPECT_TRUE(timed) << "Planning::Measure timed nothing at this shape";
  EXPECT_FALSE(held_up::gave_up) << "the other thread's call waited for this plan's making";
  EXPECT_TRUE(matches_reference(slow, 2, 0.1, slow.Y));
  EXPECT_TRUE(matches_reference(quick, 2, 0.1, quick.Y));
  FusedLinear::release_cached_plans();
  FusedLinear::forget_wisdom();
#endif
}

// A plan executing on one instance while another plan of the same shape and request executes
// on another (CUDA: two non-blocking streams, both launched before either is waited for; host:
// the default instance twice), every request the build serves, split K forced too.
TEST(ContractConcurrency, PlanOnOneStreamWhileAnotherRuns) {
  using Set = StridedSet<float, MemorySpace>;
  const bool host = Impl::is_host_space<ExecSpace>();
  const std::int64_t M = 17, K = host ? 300 : 4096, N = host ? 40 : 260;
  TwoInstances two;
  std::vector<std::unique_ptr<Job<Set>>> jobs;
  for (int t = 0; t < 2; ++t)
    jobs.emplace_back(new Job<Set>(padded(M, K, N), random_inputs(M, K, N, 60 + t), 2, 0.1));
  const Views<Set>& v = jobs[0]->v;
  Tally tally;
  for (const Options& o :
       served_requests(two.spaces[0], v.X, v.W, v.b, v.Y,
                       {Precision::Strict, Precision::TF32, Precision::TF32x3}, 3)) {
    SCOPED_TRACE(label(o));
    std::vector<std::optional<PlanOf<ExecSpace, Set>>> plans;
    for (int t = 0; t < 2; ++t) {
      const Views<Set>& w = jobs[std::size_t(t)]->v;
      plans.push_back(make_plan(two.spaces[std::size_t(t)], w.X, w.W, w.b, w.Y, 2, 0.1, o));
    }
    if (!plans[0] || !plans[1]) continue;
    for (int round = 0; round < 3; ++round) {
      std::vector<Outcome> outcomes(2);
      std::vector<std::optional<RunInfo>> infos(2);
      for (int t = 0; t < 2; ++t) {
        Job<Set>& j = *jobs[std::size_t(t)];
        j.in = random_inputs(M, K, N, 100 * round + t);
        j.expect = Expect(j.in, 2, 0.1);
        j.im = stage(two.spaces[std::size_t(t)], j.bufs, j.a, j.in);
      }
      for (int t = 0; t < 2; ++t) {  // both enqueued before either is fenced
        Job<Set>& j = *jobs[std::size_t(t)];
        outcomes[std::size_t(t)] = invoke(
            "FusedLinear::Plan::execute", false,
            [&]() -> std::optional<RunInfo> {
              plans[std::size_t(t)]->execute(j.v.X, j.v.W, j.v.b, j.v.Y);
              return plans[std::size_t(t)]->info();
            },
            infos[std::size_t(t)]);
      }
      for (int t = 0; t < 2; ++t) {
        Job<Set>& j = *jobs[std::size_t(t)];
        SCOPED_TRACE("instance " + std::to_string(t) + ", round " + std::to_string(round));
        settle(two.spaces[std::size_t(t)], j.bufs, j.a, j.im, j.expect, outcomes[std::size_t(t)],
               infos[std::size_t(t)]);
        tally.add(label(o), outcomes[std::size_t(t)]);
      }
    }
  }
  tally.print("PlanOnOneStreamWhileAnotherRuns");
}

}  // namespace
