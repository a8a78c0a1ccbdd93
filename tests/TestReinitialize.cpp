// SPDX-License-Identifier: Apache-2.0
// Kokkos::finalize and Kokkos::initialize again (a process of its own: the suite's main keeps
// Kokkos initialised): in each cycle, every path the build serves through the one-shot call
// (whose plan cache keeps the plans and their memory) and through a Plan (destroyed before
// finalize), every result checked; right after each finalize the cache must be empty. Without the
// cache's finalize hook registered anew in every cycle, the second cycle's cached plans would
// outlive Kokkos (their memory freed after finalize, or never): run under ASan's leak checker on
// the host and compute-sanitizer --leak-check full on the GPU.
//
// Kokkos 3.x host backends allow initialising again after finalize; its CUDA backend and Kokkos 4
// and later abort on it, so there one cycle runs.
#include <cstdio>

#include "common/TestHelpers.hpp"

namespace {

using namespace FusedLinearTest;

int run_cycle(int argc, char* argv[], int cycle) {
  Kokkos::initialize(argc, argv);
  {
    using P = Problem<ExecSpace, float, Kokkos::LayoutRight>;
    P p(17, 1030, 70, 100 + cycle), q(300, 300, 260, 200 + cycle);
    for (P* problem : {&p, &q}) {
      const Reference ref = problem->reference(2, 0.1);
      const auto requests =
          served_requests(ExecSpace(), problem->X, problem->W, problem->b, problem->Y,
                          {Precision::Strict, Precision::TF32, Precision::TF32x3}, 3);
      for (const Options& o : requests) {
        problem->poison();
        const auto info = attempt(*problem, 2, 0.1, o);
        if (!info) continue;
        EXPECT_TRUE(ref.check<float>(problem->output(), product_rounding(*info, problem->K)))
            << "cycle " << cycle << ", one-shot: " << describe(o, *info);
        auto plan =
            make_plan(ExecSpace(), problem->X, problem->W, problem->b, problem->Y, 2, 0.1, o);
        if (!plan) continue;
        problem->poison();
        plan->execute(problem->X, problem->W, problem->b, problem->Y);
        EXPECT_TRUE(ref.check<float>(problem->output(), product_rounding(plan->info(), problem->K)))
            << "cycle " << cycle << ", plan: " << describe(o, plan->info());
      }
    }
    EXPECT_GT(Impl::PlanCache::instance().size(), 0u) << "the one-shot calls keep plans";
  }
  Kokkos::finalize();
  // PlanCache::size() only reads a vector under a mutex: no Kokkos call after finalize.
  const std::size_t left = Impl::PlanCache::instance().size();
  EXPECT_EQ(left, 0u) << "cycle " << cycle << ": cached plans outlived Kokkos::finalize";
  return ::testing::Test::HasFailure() ? 1 : 0;
}

int g_argc = 0;
char** g_argv = nullptr;

TEST(Reinitialize, FinalizeAndInitializeAgain) {
#if KOKKOS_VERSION >= 40000
  std::printf(
      "[ info     ] Kokkos %d: initialising again after finalize is not allowed; one cycle\n",
      KOKKOS_VERSION);
  const int cycles = 1;
#elif defined(KOKKOS_ENABLE_CUDA)
  // Kokkos 3.4's CUDA backend aborts on it ("Calling Cuda::initialize after Cuda::finalize is
  // illegal", seen on an H200): one cycle, whose finalize must still empty the cache and free
  // everything (compute-sanitizer --leak-check full).
  std::printf(
      "[ info     ] Kokkos %d with CUDA: initialising again after finalize is not allowed; "
      "one cycle\n",
      KOKKOS_VERSION);
  const int cycles = 1;
#else
  const int cycles = 2;
#endif
  for (int cycle = 0; cycle < cycles; ++cycle) {
    EXPECT_FALSE(Kokkos::is_initialized());
    run_cycle(g_argc, g_argv, cycle);
  }
}

}  // namespace

int main(int argc, char* argv[]) {
  ::testing::InitGoogleTest(&argc, argv);
  g_argc = argc, g_argv = argv;
  return RUN_ALL_TESTS();
}
