// SPDX-License-Identifier: Apache-2.0
// The gradient under Planning::Measure (each product's candidates timed, the choice kept as
// wisdom) and captured into CUDA graphs (a plan's execute and the one-shot call replayed give
// the eager call's bits).
#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../common/CudaGraphs.hpp"
#include "GradientProblems.hpp"

namespace {

using namespace FusedLinearTest;
using namespace FusedLinearTest::Gradient;
using FusedLinear::Planning;
using P = FusedLinearTest::Gradient::Problem<ExecSpace, float, Kokkos::LayoutRight>;
using Plan = FusedLinear::GradientPlan<ExecSpace, P::Matrix, P::Matrix, P::Matrix, P::Matrix,
                                       P::Matrix, P::Matrix, P::Vector>;

struct Bits {
  std::vector<double> dx, dw, db;
  bool operator==(const Bits& o) const { return dx == o.dx && dw == o.dw && db == o.db; }
};
Bits bits(const P& p) {
  Kokkos::fence();
  return {host_matrix(p.dX), host_matrix(p.dW), host_vector(p.db)};
}

// Measure times the candidates meeting the floor on a GPU (on the host strict alone serves, and
// nothing is timed); its plan computes right, and a second plan of the same kind takes the
// choice from wisdom.
TEST(GradientPlanning, MeasureChoosesAndRemembers) {
  P p(96, 130, 70, 31, 2.0, 0.1);
  GradientOptions o = gradient_options(Saved::Output, false, Precision::TF32x3);
  o.planning = Planning::Measure;
  const Plan first(ExecSpace(), p.X, p.W, p.dY, p.Y, p.dX, p.dW, p.db, 2.0f, 0.1f, o);
  p.poison();
  first.execute(p.X, p.W, p.dY, p.Y, p.dX, p.dW, p.db);
  Kokkos::fence();
  const GradientInfo& info = first.info();
  EXPECT_TRUE(matches_oracle(p, p.oracle(Saved::Output), info)) << describe(o, info);
  const bool gpu = !std::is_same<ExecSpace::memory_space, Kokkos::HostSpace>::value;
  for (const FusedLinear::RunInfo* r : {&info.dx, &info.dw}) {
    EXPECT_TRUE(r->precision == Precision::Strict || r->precision == Precision::TF32x3)
        << describe(o, info);
    if (!gpu) {
      EXPECT_FALSE(r->measured) << "one candidate on the host: " << describe(o, info);
      EXPECT_EQ(r->precision, Precision::Strict);
    }
  }
  const Plan second(ExecSpace(), p.X, p.W, p.dY, p.Y, p.dX, p.dW, p.db, 2.0f, 0.1f, o);
  for (int i = 0; i < 2; ++i) {
    const FusedLinear::RunInfo& a = i == 0 ? info.dx : info.dw;
    const FusedLinear::RunInfo& b = i == 0 ? second.info().dx : second.info().dw;
    EXPECT_EQ(a.algorithm, b.algorithm);
    EXPECT_EQ(a.precision, b.precision);
    EXPECT_EQ(b.from_wisdom, a.measured) << describe(o, second.info());
  }
}

std::atomic<int> allocations{0};
void count_allocation(const Kokkos_Profiling_SpaceHandle, const char*, const void*,
                      const std::uint64_t) {
  ++allocations;
}

// After the plan (and the one-shot call's cached plan) is made, execute and the one-shot call
// allocate nothing: Kokkos' allocation hook counts none (and counts a View made meanwhile).
TEST(GradientPlanning, ExecuteAllocatesNothing) {
  P p(40, 50, 30, 33, 2.0, 0.1);
  const GradientOptions o = gradient_options(Saved::Output, true);
  const Plan plan(ExecSpace(), p.X, p.W, p.dY, p.Y, p.dX, p.dW, p.db, 2.0f, 0.1f, o);
  p.backward(o);
  Kokkos::fence();
  Kokkos::Tools::Experimental::set_allocate_data_callback(count_allocation);
  allocations = 0;
  for (int i = 0; i < 2; ++i) {
    plan.execute(p.X, p.W, p.dY, p.Y, p.dX, p.dW, p.db);
    p.backward(o);
  }
  Kokkos::fence();
  const int during_calls = allocations.load();
  { const P::Vector counted("counted", 1); }
  Kokkos::Tools::Experimental::set_allocate_data_callback(nullptr);
  EXPECT_EQ(during_calls, 0);
  EXPECT_EQ(allocations.load(), 1) << "the hook must count a View's allocation";
}

// A plan's execute and the one-shot call (its plan made by an eager call on another stream),
// each captured on a stream of their own and replayed twice: the eager call's bits, every
// precision the device serves, and the sm_90a kernels where the device has them.
TEST(GradientGraphs, ReplaysGiveTheEagerBits) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build";
#else
  for (const GradientOptions& o :
       {gradient_options(Saved::Output, false, Precision::Strict),
        gradient_options(Saved::Output, false, Precision::TF32x3),
        gradient_options(Saved::Output, false, Precision::TF32x3, Algorithm::FusedSm90)}) {
    const Precision precision = o.precision;
    P p(70, 300, 90, 32, -1.5, 0.2);
    try {
      p.backward(o);
    } catch (const std::invalid_argument& e) {  // no sm_90a kernels here
      EXPECT_EQ(o.algorithm, Algorithm::FusedSm90) << e.what();
      continue;
    }
    const Bits eager = bits(p);
    ASSERT_TRUE(matches_oracle(p, p.oracle(Saved::Output), p.backward(o))) << describe(o, {});
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    {
      const ExecSpace on_stream(stream);
      const Plan plan(on_stream, p.X, p.W, p.dY, p.Y, p.dX, p.dW, p.db, -1.5f, 0.2f, o);
      Graph planned, one_shot;
      ASSERT_EQ(
          capture(stream, planned, [&] { plan.execute(p.X, p.W, p.dY, p.Y, p.dX, p.dW, p.db); }),
          "");
      ASSERT_EQ(capture(stream, one_shot,
                        [&] {
                          FusedLinear::linear_leaky_relu_backward(on_stream, p.X, p.W, p.dY, p.Y,
                                                                  p.dX, p.dW, p.db, -1.5f, 0.2f, o);
                        }),
                "");
      for (Graph* g : {&planned, &one_shot})
        for (int replay = 0; replay < 2; ++replay) {
          p.poison();
          ASSERT_EQ(cudaGraphLaunch(g->exec, stream), cudaSuccess);
          ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
          EXPECT_TRUE(bits(p) == eager)
              << to_string(o.algorithm) << ' ' << to_string(precision) << ", replay " << replay;
        }
    }
    FusedLinear::release_cached_plans();
    cudaStreamDestroy(stream);
  }
#endif
}

}  // namespace
