// SPDX-License-Identifier: Apache-2.0
// Concurrency, every result checked (not only the last one written):
//  - two execution space instances (CUDA: two non-blocking streams; host: the default instance
//    twice), every path the build serves, split K included, both launched before either is
//    fenced;
//  - two host threads with an instance each (CUDA);
//  - two host threads in a loop on the default instance through the overload without an
//    instance, at shapes whose K is split (guarding against split-K counters that a race
//    could corrupt for good), then single-threaded calls;
//  - (the product on the caller's stream, Concurrency.NativeGemmOnTheCallersStream, is in
//    TestViews.cpp: it shares the mixed-layout Views' instantiation).
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "common/TestHelpers.hpp"

namespace {

using namespace FusedLinearTest;
using P = Problem<ExecSpace, float, Kokkos::LayoutRight>;
using HostMatrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;

std::vector<double> as_vector(const HostMatrix& h) {
  std::vector<double> out(h.size());
  for (std::size_t i = 0; i < h.extent(0); ++i)
    for (std::size_t j = 0; j < h.extent(1); ++j) out[i * h.extent(1) + j] = h(i, j);
  return out;
}

/// The requests run concurrently: every one the build serves for p, split K forced too.
std::vector<Options> requests_for(const ExecSpace& exec, const P& p) {
  return served_requests(exec, p.X, p.W, p.b, p.Y,
                         {Precision::Strict, Precision::TF32, Precision::TF32x3}, 3);
}

TEST(Concurrency, TwoInstancesEveryPath) {
  TwoInstances two;
  const std::array<std::int64_t, 3> pairs[][2] = {{{300, 500, 260}, {260, 300, 500}},
                                                  {{17, 4096, 260}, {17, 4096, 260}},
                                                  {{1, 1000, 70}, {40, 1030, 65}}};
  for (const auto& shapes : pairs) {
    P p0(shapes[0][0], shapes[0][1], shapes[0][2], 1),
        p1(shapes[1][0], shapes[1][1], shapes[1][2], 2);
    const Reference r0 = p0.reference(2, 0.1), r1 = p1.reference(-1, double(0.3f));
    const Impl::Facts f1 = facts_of(two.spaces[1], p1.X, p1.W, p1.b, p1.Y);
    for (const Options& o : requests_for(two.spaces[0], p0)) {
      if (!serves(o, f1, {p1.M, p1.K, p1.N})) continue;
      p0.poison();
      p1.poison();
      // Both launched before either is waited for, so on CUDA the two streams overlap.
      const RunInfo i0 =
          FusedLinear::linear_leaky_relu(two.spaces[0], p0.X, p0.W, p0.b, p0.Y, 2.f, 0.1f, o);
      const RunInfo i1 =
          FusedLinear::linear_leaky_relu(two.spaces[1], p1.X, p1.W, p1.b, p1.Y, -1.f, 0.3f, o);
      two.spaces[0].fence();
      two.spaces[1].fence();
      EXPECT_TRUE(r0.check<float>(p0.output(), product_rounding(i0, p0.K))) << describe(o, i0);
      EXPECT_TRUE(r1.check<float>(p1.output(), product_rounding(i1, p1.K))) << describe(o, i1);
    }
  }
}

// CUDA: several host threads, one instance each, every path, every result checked.
TEST(Concurrency, TwoHostThreadsWithAnInstanceEach) {
#ifndef KOKKOS_ENABLE_CUDA
  GTEST_SKIP() << "host backends: Kokkos 3.4 host instances must not be entered from two host "
                  "threads at once (README), and its OpenMP backend dispatches only from the "
                  "thread that initialised it; DefaultInstanceFromTwoThreads covers Serial";
#else
  TwoInstances two;
  std::vector<P> problems;
  problems.emplace_back(257, 400, 300, 10);
  problems.emplace_back(17, 4096, 260, 11);
  std::vector<Reference> refs;
  std::vector<HostMatrix> mirrors;
  std::vector<std::vector<Options> > requests;
  for (auto& p : problems) {
    refs.push_back(p.reference(2, 0.1));
    mirrors.emplace_back("y", p.M, p.N);
    requests.push_back(requests_for(two.spaces[0], p));
  }
  std::atomic<int> failures{0}, runs{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      P& p = problems[std::size_t(t)];
      const ExecSpace& space = two.spaces[std::size_t(t)];
      for (int repeat = 0; repeat < 3; ++repeat)
        for (const Options& o : requests[std::size_t(t)]) {
          Kokkos::deep_copy(space, p.Y, std::numeric_limits<float>::quiet_NaN());
          const RunInfo info =
              FusedLinear::linear_leaky_relu(space, p.X, p.W, p.b, p.Y, 2.f, 0.1f, o);
          Kokkos::deep_copy(space, mirrors[std::size_t(t)], p.Y);
          space.fence();
          ++runs;
          const auto check = refs[std::size_t(t)].check<float>(as_vector(mirrors[std::size_t(t)]),
                                                               product_rounding(info, p.K));
          if (!check && failures++ < 5)
            ADD_FAILURE() << "thread " << t << ": " << describe(o, info) << ": " << check.message();
        }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(runs.load(), 12);
#endif
}

// Two host threads in a loop on the default instance, through the overload without an instance,
// at shapes whose K is split (17x4096x260 splits by itself on GPUs; fused_skinny with forced
// splits everywhere): each result checked, then single-threaded calls checked. Split K's
// arrival counters are numbered per call: a race that left a counter wrong must not make later
// calls wrong for good. On CUDA the threads call concurrently; on host backends calls must be
// serialised (README), so each call is made under a mutex, on Kokkos::Serial (Kokkos 3.4's
// OpenMP backend dispatches only from the thread that initialised it).
template <class Exec>
void default_instance_from_two_threads(bool serialise) {
  using Q = Problem<Exec, float, Kokkos::LayoutRight>;
  std::vector<Q> problems;
  problems.emplace_back(17, 4096, 260, 20);
  problems.emplace_back(17, 4096, 260, 21);
  std::vector<Reference> refs;
  for (auto& p : problems) refs.push_back(p.reference(2, 0.1));
  const Options requests[] = {options(Algorithm::Auto),
                              options(Algorithm::FusedSkinny, Precision::Strict, 3),
                              options(Algorithm::FusedSkinny, Precision::Strict, 7)};
  std::mutex serial;
  std::atomic<int> failures{0};
  const auto one_call = [&](Q& p, const Reference& ref, const Options& o, int who) {
    std::unique_lock<std::mutex> lock(serial, std::defer_lock);
    if (serialise) lock.lock();
    Kokkos::deep_copy(p.Y, std::numeric_limits<float>::quiet_NaN());
    const RunInfo info = FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, 2.f, 0.1f, o);
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.Y);
    if (lock.owns_lock()) lock.unlock();
    std::vector<double> y(h.size());
    for (std::size_t i = 0; i < h.extent(0); ++i)
      for (std::size_t j = 0; j < h.extent(1); ++j) y[i * h.extent(1) + j] = h(i, j);
    const auto check = ref.check<float>(y);
    if (!check && failures++ < 5)
      ADD_FAILURE() << "caller " << who << ": " << describe(o, info) << ": " << check.message();
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      for (int repeat = 0; repeat < 10; ++repeat)
        for (const Options& o : requests)
          one_call(problems[std::size_t(t)], refs[std::size_t(t)], o, t);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0) << "while two threads called";
  for (int repeat = 0; repeat < 3; ++repeat)
    for (const Options& o : requests)
      for (std::size_t t = 0; t < 2; ++t) one_call(problems[t], refs[t], o, -1);
  EXPECT_EQ(failures.load(), 0) << "after the threads";
}

TEST(Concurrency, DefaultInstanceFromTwoThreads) {
#if defined(KOKKOS_ENABLE_CUDA)
  default_instance_from_two_threads<Kokkos::Cuda>(false);
#elif defined(KOKKOS_ENABLE_SERIAL)
  default_instance_from_two_threads<Kokkos::Serial>(true);
#else
  GTEST_SKIP() << "no execution space here takes calls from other host threads";
#endif
}

}  // namespace
