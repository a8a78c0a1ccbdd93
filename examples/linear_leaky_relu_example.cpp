// SPDX-License-Identifier: Apache-2.0
// The layer of a small model: Y = LeakyReLU(2 * (X W^T + b), 0.1), computed on the default
// execution space and checked against the float64 host reference.
//   usage: linear_leaky_relu_example [M K N]
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <Kokkos_Core.hpp>
#include <Kokkos_Random.hpp>

#include <FusedLinear.hpp>

int main(int argc, char* argv[]) {
  Kokkos::ScopeGuard kokkos(argc, argv);
  const int M = argc > 3 ? std::atoi(argv[1]) : 64;
  const int K = argc > 3 ? std::atoi(argv[2]) : 256;
  const int N = argc > 3 ? std::atoi(argv[3]) : 128;

  // PyTorch's layout: row-major X [M,K], W [N,K] (nn.Linear.weight), b [N], Y [M,N].
  Kokkos::View<float**, Kokkos::LayoutRight> X("X", M, K), W("W", N, K), Y("Y", M, N);
  Kokkos::View<float*> b("b", N);
  Kokkos::Random_XorShift64_Pool<> pool(2024);
  Kokkos::fill_random(X, pool, 0.0f, 1.0f);
  Kokkos::fill_random(W, pool, -0.05f, 0.05f);
  Kokkos::fill_random(b, pool, -0.05f, 0.05f);

  // A plan decides the path once and holds what it needs; execute() reuses it (asynchronous).
  using Exec = Kokkos::DefaultExecutionSpace;
  FusedLinear::Plan plan(Exec(), X, W, b, Y, 2.0f, 0.1f);  // Algorithm::Auto, strict fp32
  plan.execute(X, W, b, Y);
  // Or in one call (it keeps a plan for the next call with the same arguments).
  Kokkos::View<float**, Kokkos::LayoutRight> Y2("Y2", M, N);
  FusedLinear::linear_leaky_relu(Exec(), X, W, b, Y2, 2.0f, 0.1f);
  Kokkos::fence();
  const FusedLinear::RunInfo& info = plan.info();

  auto y = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), Y);
  auto ref = FusedLinear::reference_linear_leaky_relu(
      Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), X),
      Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), W),
      Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), b), 2.0, 0.1);
  auto y2 = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), Y2);
  double err = 0, norm = 0;
  bool same = true;  // the same path on the same inputs gives the same bits
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      err += (y(i, j) - ref(i, j)) * (y(i, j) - ref(i, j));
      norm += ref(i, j) * ref(i, j);
      same = same && y(i, j) == y2(i, j);
    }
  const double rel = std::sqrt(err / norm);
  std::printf("FusedLinear %s on %s: %dx%dx%d, path %s (%s), ||Y-ref||/||ref|| = %.2e%s\n",
              FUSED_LINEAR_VERSION_STRING, Exec::name(), M, K, N,
              FusedLinear::to_string(info.algorithm), FusedLinear::to_string(info.gemm), rel,
              same ? "" : ", one-shot result differs from the plan's");
  return rel < 1e-5 && same ? EXIT_SUCCESS : EXIT_FAILURE;
}
