// SPDX-License-Identifier: Apache-2.0
// The contract harness itself (Guarded.hpp, Contract.hpp): what the contract
// suites check must be able to fail.
#include <cstdint>
#include <vector>

#include "Contract.hpp"

namespace {

using namespace FusedLinearTest;
using namespace FusedLinearTest::Contract;

// The harness itself: a stray write between Y's columns, into the guard band after an input,
// or a Y element left unwritten must each be reported (else every contract test could pass
// vacuously).
TEST(ContractHarness, SeesStrayWritesAndUnwrittenElements) {
  using Set = StridedSet<float, MemorySpace>;
  const ExecSpace exec;
  const std::int64_t M = 5, K = 7, N = 6;
  const HostInputs in = random_inputs(M, K, N, 3);
  const Expect expect(in, 2, 0.1);
  Arrangement a;
  a.name = "Y column stride 2";
  a.X = row_major(M, K, K + 1), a.W = row_major(N, K, K), a.b = vector(N, 2);
  a.Y = strided(M, N, 2 * N, 2);
  const Buffers<float, MemorySpace> bufs(a.sizes());
  const Views<Set> v(bufs, a);
  const auto poke = [&](int buffer, std::int64_t e) {
    Kokkos::deep_copy(Kokkos::subview(bufs.v[std::size_t(buffer)], e), 1.0f);
    Kokkos::fence();
  };
  std::vector<double> y;
  {
    const Image<float> im = stage(exec, bufs, a, in);
    EXPECT_TRUE(unchanged_but_y(exec, bufs, a, im, true, y)) << "nothing written yet";
    poke(a.y, a.Y.at(2, 3) + 1);  // between Y(2, 3) and Y(2, 4)
    EXPECT_FALSE(unchanged_but_y(exec, bufs, a, im, false, y)) << "a write between Y's columns";
  }
  {
    const Image<float> im = stage(exec, bufs, a, in);
    poke(a.x, a.X.end());  // just past X's last element
    EXPECT_FALSE(unchanged_but_y(exec, bufs, a, im, false, y)) << "a write past X";
  }
  {
    // A correct call, then one Y element put back to its prior value: Y is wrong.
    const Image<float> im = stage(exec, bufs, a, in);
    const RunInfo info = FusedLinear::linear_leaky_relu(exec, v.X, v.W, v.b, v.Y, 2.f, 0.1f,
                                                        options(Algorithm::Fused));
    exec.fence();
    EXPECT_TRUE(unchanged_but_y(exec, bufs, a, im, false, y));
    EXPECT_TRUE(expect.check<float>(y, info));
    Kokkos::deep_copy(Kokkos::subview(bufs.v[std::size_t(a.y)], a.Y.at(4, 5)),
                      float(prior_value(4 * N + 5)));
    Kokkos::fence();
    EXPECT_TRUE(unchanged_but_y(exec, bufs, a, im, false, y));
    EXPECT_FALSE(expect.check<float>(y, info)) << "an element left unwritten";
    EXPECT_FALSE(unchanged_but_y(exec, bufs, a, im, true, y)) << "Y changed (for a refusal)";
  }
}

}  // namespace
