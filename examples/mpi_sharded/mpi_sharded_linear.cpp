// SPDX-License-Identifier: Apache-2.0
// The layer, Y = LeakyReLU(2 * (X W^T + b), 0.1), sharded over MPI ranks, one rank per GPU (or per
// group of host cores), the two usual ways:
//   rows     each rank holds W and b whole and its block of X's rows: those rows of Y;
//   columns  each rank holds X whole and its block of W's rows and of b: that block of Y's columns.
// Either way every rank then assembles the whole Y with MPI_Allgatherv and checks it against the
// float64 host reference (computed whole on every rank: keep the shapes small; perf/mpi's
// mpi_sharded_bench times both shardings and checks large shapes on a sample of rows).
//   usage: mpiexec -np P mpi_sharded_linear [M K N]
// Exit status: 0 when every rank's Y passed both checks, 1 when one failed, 2 for bad arguments,
// 3 (the job aborted) for any other error.
#include <mpi.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <Kokkos_Core.hpp>

#include <FusedLinear.hpp>

namespace {

using Exec = Kokkos::DefaultExecutionSpace;
using Matrix = Kokkos::View<float**, Kokkos::LayoutRight, Exec::memory_space>;
using Vector = Kokkos::View<float*, Exec::memory_space>;
using HostMatrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;
using HostVector = Kokkos::View<float*, Kokkos::HostSpace>;
using Reference = Kokkos::View<double**, Kokkos::LayoutRight, Kokkos::HostSpace>;
constexpr float kMultiplier = 2.0f, kSlope = 0.1f;

/// The balanced block [begin, end) of n items that `rank` of `ranks` owns.
struct Block {
  int begin, end;
  int size() const { return end - begin; }
  std::pair<int, int> range() const { return {begin, end}; }
};
Block block(int n, int rank, int ranks) {
  return {int(std::int64_t(n) * rank / ranks), int(std::int64_t(n) * (rank + 1) / ranks)};
}

/// The whole layer on the host, the same on every rank (one seed): X uniform on [0, 1), W and b
/// uniform on +-1/sqrt(K) as nn.Linear initialises them. A model would load only its shard.
struct Layer {
  HostMatrix X, W;
  HostVector b;
};
Layer make_layer(int M, int K, int N) {
  Layer l{HostMatrix("X", M, K), HostMatrix("W", N, K), HostVector("b", N)};
  std::mt19937 gen(2024);
  const float bound = 1.0f / std::sqrt(float(K));
  std::uniform_real_distribution<float> x(0.0f, 1.0f), w(-bound, bound);
  for (std::size_t e = 0; e < l.X.span(); ++e) l.X.data()[e] = x(gen);
  for (std::size_t e = 0; e < l.W.span(); ++e) l.W.data()[e] = w(gen);
  for (int j = 0; j < N; ++j) l.b(j) = w(gen);
  return l;
}

/// Gathers every rank's block of n items, `unit` floats each, into `all` in rank order.
void allgather(const float* mine, float* all, int n, int unit, int rank, int ranks) {
  std::vector<int> counts(ranks), displs(ranks);
  for (int q = 0; q < ranks; ++q) {
    counts[q] = block(n, q, ranks).size() * unit;
    displs[q] = block(n, q, ranks).begin * unit;
  }
  MPI_Allgatherv(mine, counts[rank], MPI_FLOAT, all, counts.data(), displs.data(), MPI_FLOAT,
                 MPI_COMM_WORLD);
}

/// Rows: this rank's rows of X through a Plan (made once, executed each step in a model); the
/// rows of Y are contiguous in LayoutRight, so the gather puts each block in its place directly.
HostMatrix sharded_rows(const Layer& l, int rank, int ranks, std::string& path) {
  const int M = l.X.extent(0), K = l.X.extent(1), N = l.W.extent(0);
  const Block rows = block(M, rank, ranks);
  Matrix X("X", rows.size(), K), W("W", N, K), Y("Y", rows.size(), N);
  Vector b("b", N);
  Kokkos::deep_copy(X, Kokkos::subview(l.X, rows.range(), Kokkos::ALL));
  Kokkos::deep_copy(W, l.W);
  Kokkos::deep_copy(b, l.b);
  FusedLinear::Plan plan(Exec(), X, W, b, Y, kMultiplier, kSlope);  // Auto, strict fp32
  plan.execute(X, W, b, Y);
  path = FusedLinear::to_string(plan.info().algorithm);
  // Debian's Open MPI cannot read GPU memory: the block goes through the host (the copy fences).
  const auto mine = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), Y);
  HostMatrix all("Y", M, N);
  allgather(mine.data(), all.data(), M, N, rank, ranks);
  return all;
}

/// Columns: this rank's rows of W and b through the one-shot call. Its block of Y, [M, N_r], is
/// gathered whole, then each block's columns are put in place.
HostMatrix sharded_columns(const Layer& l, int rank, int ranks, std::string& path) {
  const int M = l.X.extent(0), K = l.X.extent(1), N = l.W.extent(0);
  const Block cols = block(N, rank, ranks);
  Matrix X("X", M, K), W("W", cols.size(), K), Y("Y", M, cols.size());
  Vector b("b", cols.size());
  Kokkos::deep_copy(X, l.X);
  Kokkos::deep_copy(W, Kokkos::subview(l.W, cols.range(), Kokkos::ALL));
  Kokkos::deep_copy(b, Kokkos::subview(l.b, cols.range()));
  const FusedLinear::RunInfo info =
      FusedLinear::linear_leaky_relu(Exec(), X, W, b, Y, kMultiplier, kSlope);
  path = FusedLinear::to_string(info.algorithm);
  const auto mine = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), Y);
  std::vector<float> packed(std::size_t(M) * N);  // block q, [M, N_q], at M * (its first column)
  allgather(mine.data(), packed.data(), N, M, rank, ranks);
  HostMatrix all("Y", M, N);
  for (int q = 0; q < ranks; ++q) {
    const Block c = block(N, q, ranks);
    const float* block_q = packed.data() + std::size_t(M) * c.begin;
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < c.size(); ++j)
        all(i, c.begin + j) = block_q[std::size_t(i) * c.size() + j];
  }
  return all;
}

/// ||Y - ref|| / ||ref|| on this rank, then the largest over all ranks.
double worst_error(const HostMatrix& Y, const Reference& ref) {
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < Y.extent(0); ++i)
    for (std::size_t j = 0; j < Y.extent(1); ++j) {
      err += (Y(i, j) - ref(i, j)) * (Y(i, j) - ref(i, j));
      norm += ref(i, j) * ref(i, j);
    }
  double rel = norm > 0 ? std::sqrt(err / norm) : std::sqrt(err);
  if (std::isnan(rel)) rel = INFINITY;  // MPI_MAX must not lose a NaN
  MPI_Allreduce(MPI_IN_PLACE, &rel, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return rel;
}

int positive(const char* text) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 1 || v > INT_MAX)
    throw std::invalid_argument(std::string("'") + text + "' is not a positive int");
  return int(v);
}

int run(int argc, char* argv[]) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  int M = 97, K = 160, N = 75;
  const char* const usage = "usage: mpiexec -np P mpi_sharded_linear [M K N] (97 160 75)\n";
  if (argc == 2 && std::string(argv[1]) == "--help") {
    if (rank == 0) std::fputs(usage, stdout);
    return 0;
  }
  try {  // every rank parses the same arguments, so all stop here together
    if (argc != 1 && argc != 4) throw std::invalid_argument("give all of M K N, or none");
    if (argc == 4) M = positive(argv[1]), K = positive(argv[2]), N = positive(argv[3]);
    if (std::int64_t(M) * N > INT_MAX)
      throw std::invalid_argument("M * N must fit an MPI count (int)");
  } catch (const std::invalid_argument& e) {
    if (rank == 0) std::fprintf(stderr, "mpi_sharded_linear: %s\n%s", e.what(), usage);
    return 2;
  }

  const Layer layer = make_layer(M, K, N);
  const auto ref =
      FusedLinear::reference_linear_leaky_relu(layer.X, layer.W, layer.b, kMultiplier, kSlope);
  int status = 0;
  for (const bool by_rows : {true, false}) {
    std::string path;
    const HostMatrix Y = by_rows ? sharded_rows(layer, rank, ranks, path)
                                 : sharded_columns(layer, rank, ranks, path);
    const double rel = worst_error(Y, ref);
    const bool pass = rel < 1e-5;
    if (!pass) status = 1;
    if (rank == 0)
      std::printf(
          "%s: %dx%dx%d over %d rank%s on %s, rank 0's path %s, every rank's Y: "
          "||Y - ref|| / ||ref|| <= %.2e: %s\n",
          by_rows ? "rows" : "columns", M, K, N, ranks, ranks == 1 ? "" : "s", Exec::name(),
          path.c_str(), rel, pass ? "PASS" : "FAIL");
  }
  return status;
}

}  // namespace

int main(int argc, char* argv[]) {
  // MPI before Kokkos (a CUDA-aware MPI sets up before the CUDA context), Kokkos finalised before
  // MPI. With CUDA, Kokkos 3.4 gives each rank GPU (node-local rank mod GPUs).
  MPI_Init(&argc, &argv);
  int status = 0;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);  // takes the --kokkos-* options out of argv
    try {
      status = run(argc, argv);
    } catch (const std::exception& e) {
      // The other ranks may be waiting in a collective: stop the whole job.
      int rank = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      std::fprintf(stderr, "mpi_sharded_linear: rank %d: %s\n", rank, e.what());
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
  }
  MPI_Finalize();
  return status;
}
