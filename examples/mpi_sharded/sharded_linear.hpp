// SPDX-License-Identifier: Apache-2.0
// The layer, Y = LeakyReLU(2 * (X W^T + b), 0.1), sharded over MPI ranks, one rank per GPU (or per
// group of host cores), the two usual ways:
//   rows     each rank holds W and b whole and its block of X's rows: those rows of Y;
//   columns  each rank holds X whole and its block of W's rows and of b: that block of Y's columns.
// Either way MPI_Allgatherv then assembles the whole Y on every rank. The backward, for the
// upstream gradient dY of each rank's block of Y, computes on the rank's shard what is local and
// sums over ranks (MPI_Allreduce) what each rank holds a part of:
//   rows     dX's rows local; dW and db partial sums over the rank's rows, summed over ranks;
//   columns  dW's rows and db's block local; dX [M,K] a partial sum over the rank's columns of Y,
//            summed over ranks.
// What the example (mpi_sharded_linear.cpp) and its benchmark (mpi_sharded_bench.cpp) share.
#pragma once

#include <mpi.h>
// Open MPI says in mpi-ext.h whether it can read device memory (CUDA-aware); without it the gather
// stages through host memory.
#if defined(OPEN_MPI) && OPEN_MPI && __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <Kokkos_Core.hpp>

#include <FusedLinear.hpp>

namespace MpiSharded {

using Exec = Kokkos::DefaultExecutionSpace;
using Matrix = Kokkos::View<float**, Kokkos::LayoutRight, Exec::memory_space>;
using Vector = Kokkos::View<float*, Exec::memory_space>;
using HostMatrix = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;
#if defined(KOKKOS_ENABLE_CUDA)
using StagingSpace = Kokkos::CudaHostPinnedSpace;  // page-locked: the GPU copies at full speed
#else
using StagingSpace = Kokkos::HostSpace;
#endif
using Index = std::int64_t;
using Call = std::function<FusedLinear::RunInfo()>;
constexpr float kMultiplier = 2.0f, kSlope = 0.1f;

/// X [m,k], W [n,k], b [n], Y [m,n]; by default uneven blocks over 2 ranks (97 rows, 75 columns).
struct Shape {
  Index m = 97, k = 160, n = 75;
};

struct Comm {
  MPI_Comm comm;
  int rank = 0, size = 1;
  explicit Comm(MPI_Comm c) : comm(c) {
    MPI_Comm_rank(c, &rank);
    MPI_Comm_size(c, &size);
  }
};

/// The balanced block [begin, end) of n items that `rank` of `ranks` owns.
struct Block {
  Index begin, end;
  Index size() const { return end - begin; }
  std::pair<Index, Index> range() const { return {begin, end}; }
};
inline Block block(Index n, int rank, int ranks) {
  return {n * rank / ranks, n * (rank + 1) / ranks};
}

// ------------------------------------------------------------------------------ inputs
enum Salt : std::uint64_t { kX = 1, kW = 2, kB = 3, kDY = 4 };

/// Element (i, j) of X, W, b (row 0) or dY as a pure function of its place, so that each rank
/// makes its own shard (a model would load it) and rank 0 remakes what the reference needs. X is
/// uniform on [0, 1) like torch.rand, W and b on +-1/sqrt(K) as nn.Linear initialises them: Y is
/// O(1) and both LeakyReLU branches run. dY, the loss's gradient, is uniform on [-1, 1). Bit for
/// bit the same on host and device: 24 random bits converted exactly, then one rounded product.
struct Inputs {
  float w_step;
  explicit Inputs(Index K) : w_step(float(std::ldexp(1.0 / std::sqrt(double(K)), -23))) {}

  KOKKOS_INLINE_FUNCTION static std::uint64_t mix(std::uint64_t z) {  // SplitMix64's finaliser
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  KOKKOS_INLINE_FUNCTION float operator()(std::uint64_t salt, Index i, Index j) const {
    const std::uint64_t h =
        mix(mix(mix(2024 ^ (salt << 56)) + std::uint64_t(i)) + std::uint64_t(j));
    const std::int32_t bits = std::int32_t(h >> 40);
    if (salt == kX) return float(bits) * 0x1p-24f;
    return float(bits - (1 << 23)) * (salt == kDY ? 0x1p-23f : w_step);
  }
};

/// A(i, j) = element (row0 + i, col0 + j) of `salt`, on A's execution space.
template <class View>
void fill(const View& A, const Inputs& in, std::uint64_t salt, Index row0, Index col0) {
  using Policy = Kokkos::MDRangePolicy<typename View::execution_space, Kokkos::Rank<2>,
                                       Kokkos::IndexType<Index>>;
  const Index rows = A.extent(0), cols = A.extent(1);
  if (rows == 0 || cols == 0) return;
  Kokkos::parallel_for(
      "mpi_sharded::fill", Policy({0, 0}, {rows, cols}),
      KOKKOS_LAMBDA(const Index i, const Index j) { A(i, j) = in(salt, row0 + i, col0 + j); });
}

/// b seen as its one row, for fill.
template <class View>
auto as_row(const View& b) {
  return Kokkos::View<float**, Kokkos::LayoutRight, typename View::memory_space>(b.data(), 1,
                                                                                 b.extent(0));
}

// ------------------------------------------------------------------------------ the pattern
/// One rank's share of the layer, and the whole Y the gather assembles in `whole`:
///   rows     Y is this rank's block of the whole Y's rows, in place (LayoutRight: contiguous);
///   columns  Y [M, N_r] is block r of `whole` (the ranks' blocks one after the other), and the
///            gather copies each block into its columns of Y_all.
struct Shard {
  bool by_rows;
  Block mine;  // this rank's rows of X (rows) or of W (columns)
  Matrix X, W, Y, Y_all;
  Vector b, whole;
};

inline Shard make_shard(bool by_rows, const Shape& a, const Comm& c) {
  const Index M = a.m, K = a.k, N = a.n;
  const Block mine = block(by_rows ? M : N, c.rank, c.size);
  const Inputs in(K);
  Shard s{by_rows, mine};
  s.whole = Vector("Y blocks", M * N);
  if (by_rows) {
    s.X = Matrix("X", mine.size(), K), s.W = Matrix("W", N, K), s.b = Vector("b", N);
    s.Y = Matrix(s.whole.data() + mine.begin * N, mine.size(), N);
    s.Y_all = Matrix(s.whole.data(), M, N);
    fill(s.X, in, kX, mine.begin, 0);  // global row indices: the same X as on one rank
    fill(s.W, in, kW, 0, 0);
    fill(as_row(s.b), in, kB, 0, 0);
  } else {
    s.X = Matrix("X", M, K), s.W = Matrix("W", mine.size(), K), s.b = Vector("b", mine.size());
    s.Y = Matrix(s.whole.data() + M * mine.begin, M, mine.size());
    s.Y_all = Matrix("Y", M, N);
    fill(s.X, in, kX, 0, 0);
    fill(s.W, in, kW, mine.begin, 0);  // W's global row = Y's global column
    fill(as_row(s.b), in, kB, 0, mine.begin);
  }
  Kokkos::fence();
  return s;
}

/// The layer on the shard: rows through a Plan (made once, executed each step, as in a model),
/// columns through the one-shot call (it caches its plan). Throws std::invalid_argument when the
/// request is refused (3xtf32 off CUDA, say).
inline Call make_call(const Shard& s, const Exec& exec, FusedLinear::Precision precision) {
  const FusedLinear::Options opt(FusedLinear::Algorithm::Auto, precision);
  if (s.by_rows) {
    using Plan = FusedLinear::Plan<Exec, Matrix, Matrix, Vector, Matrix>;
    const auto plan = std::make_shared<Plan>(exec, s.X, s.W, s.b, s.Y, kMultiplier, kSlope, opt);
    return [plan, s] {
      plan->execute(s.X, s.W, s.b, s.Y);
      return plan->info();
    };
  }
  return [s, exec, opt] {
    return FusedLinear::linear_leaky_relu(exec, s.X, s.W, s.b, s.Y, kMultiplier, kSlope, opt);
  };
}

// ------------------------------------------------------------------------------ the backward
/// One rank's share of the gradient of its block of Y:
///   rows     dY [M_r, N] and dX [M_r, K] are this rank's rows; dW [N, K] and db [N] are first
///            the sums over its rows only, then (GradientSum) the sums over all rows;
///   columns  dY [M, N_r] is this rank's columns; dW [N_r, K] and db [N_r] its block of W's rows
///            and of b, whole here; dX [M, K] first the sum over its N_r columns only, then
///            (GradientSum) over all of them.
/// `summed` is what GradientSum adds over the ranks: rows dW then db (one MPI_Allreduce for
/// both), columns dX; the other Views point into it.
struct ShardGradient {
  Matrix dY, dX, dW;
  Vector db, summed;
};

inline ShardGradient make_gradient(const Shard& s, const Shape& a) {
  const Index M = a.m, K = a.k, N = a.n;
  const Inputs in(K);
  ShardGradient g;
  if (s.by_rows) {
    g.dY = Matrix("dY", s.mine.size(), N), g.dX = Matrix("dX", s.mine.size(), K);
    g.summed = Vector("dW and db", N * K + N);
    g.dW = Matrix(g.summed.data(), N, K), g.db = Vector(g.summed.data() + N * K, N);
    fill(g.dY, in, kDY, s.mine.begin, 0);
  } else {
    g.dY = Matrix("dY", M, s.mine.size());
    g.dW = Matrix("dW", s.mine.size(), K), g.db = Vector("db", s.mine.size());
    g.summed = Vector("dX", M * K);
    g.dX = Matrix(g.summed.data(), M, K);
    fill(g.dY, in, kDY, 0, s.mine.begin);  // Y's global columns
  }
  Kokkos::fence();
  return g;
}

/// The backward on the shard, from what the forward saved: this rank's block of Y (enough for
/// kSlope >= 0: y > 0 exactly where the pre-activation is). As the forward: rows through a
/// GradientPlan (made once, as a model would), columns through the one-shot call. Each rank's
/// result is partial until GradientSum has run.
using BackwardCall = std::function<FusedLinear::GradientInfo()>;
inline BackwardCall make_backward_call(const Shard& s, const ShardGradient& g, const Exec& exec,
                                       FusedLinear::Precision precision) {
  FusedLinear::GradientOptions opt;
  opt.precision = precision;
  opt.saved = FusedLinear::Saved::Output;
  if (s.by_rows) {
    using Plan =
        FusedLinear::GradientPlan<Exec, Matrix, Matrix, Matrix, Matrix, Matrix, Matrix, Vector>;
    const auto plan = std::make_shared<Plan>(exec, s.X, s.W, g.dY, s.Y, g.dX, g.dW, g.db,
                                             kMultiplier, kSlope, opt);
    return [plan, s, g] {
      plan->execute(s.X, s.W, g.dY, s.Y, g.dX, g.dW, g.db);
      return plan->info();
    };
  }
  return [s, g, exec, opt] {
    return FusedLinear::linear_leaky_relu_backward(exec, s.X, s.W, g.dY, s.Y, g.dX, g.dW, g.db,
                                                   kMultiplier, kSlope, opt);
  };
}

/// True when MPI can be handed pointers to Exec's memory: host memory, or device memory with a
/// CUDA-aware Open MPI (asked at run time: the library may differ from the headers).
inline bool mpi_reads_exec_memory() {
  if (Kokkos::SpaceAccessibility<Kokkos::HostSpace, Exec::memory_space>::accessible) return true;
#if defined(KOKKOS_ENABLE_CUDA) && defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  if (std::is_same<Exec::memory_space, Kokkos::CudaSpace>::value)
    return MPIX_Query_cuda_support() == 1;
#endif
  return false;
}

/// Assembles the whole Y on every rank: MPI_Allgatherv fills the other ranks' blocks of `whole` in
/// place, through pinned host memory unless MPI reads the View's memory; counts are in units of a
/// block's row (N floats) or column (M floats), far below INT_MAX. Returns the phases' seconds:
/// own block to host, MPI_Allgatherv, to device and into Y_all's columns.
class Gather {
 public:
  Gather(const Shard& s, const Shape& a, const Comm& c)
      : m_s(s),
        m_comm(c.comm),
        m_unit_floats(s.by_rows ? a.n : a.m),
        m_counts(c.size),
        m_displs(c.size),
        m_direct(mpi_reads_exec_memory()),
        m_staging("staging", m_direct ? 0 : a.m * a.n) {
    for (int r = 0; r < c.size; ++r) {
      const Block br = block(s.by_rows ? a.m : a.n, r, c.size);
      m_counts[r] = int(br.size()), m_displs[r] = int(br.begin);
      if (!s.by_rows) m_column_blocks.push_back(br);
    }
    MPI_Type_contiguous(int(m_unit_floats), MPI_FLOAT, &m_unit);
    MPI_Type_commit(&m_unit);
  }
  ~Gather() { MPI_Type_free(&m_unit); }
  Gather(const Gather&) = delete;
  Gather& operator=(const Gather&) = delete;

  bool direct() const { return m_direct; }

  std::array<double, 3> operator()(const Exec& exec) const {
    const double t0 = MPI_Wtime();
    float* buffer = m_s.whole.data();
    if (!m_direct) {
      const std::pair<Index, Index> mine(m_unit_floats * m_s.mine.begin,
                                         m_unit_floats * m_s.mine.end);
      Kokkos::deep_copy(exec, Kokkos::subview(m_staging, mine), Kokkos::subview(m_s.whole, mine));
      exec.fence();
      buffer = m_staging.data();
    }
    const double t1 = MPI_Wtime();
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffer, m_counts.data(), m_displs.data(),
                   m_unit, m_comm);
    const double t2 = MPI_Wtime();
    if (!m_direct) Kokkos::deep_copy(exec, m_s.whole, m_staging);
    const Index M = m_s.Y_all.extent(0);
    for (const Block& br : m_column_blocks)  // a block's columns are strided in Y_all
      Kokkos::deep_copy(exec, Kokkos::subview(m_s.Y_all, Kokkos::ALL, br.range()),
                        Matrix(m_s.whole.data() + M * br.begin, M, br.size()));
    exec.fence();
    return {t1 - t0, t2 - t1, MPI_Wtime() - t2};
  }

 private:
  const Shard& m_s;
  MPI_Comm m_comm;
  Index m_unit_floats;
  std::vector<int> m_counts, m_displs;
  std::vector<Block> m_column_blocks;
  bool m_direct;
  Kokkos::View<float*, StagingSpace> m_staging;
  MPI_Datatype m_unit = MPI_DATATYPE_NULL;
};

/// Adds each rank's partial gradient (ShardGradient::summed) over the ranks, in place on every
/// rank: MPI_Allreduce with MPI_SUM, through pinned host memory unless MPI reads the View's
/// memory, in pieces of at most 2^30 floats (MPI counts are ints). Fences `exec` first: the
/// backward writes `summed` there. Returns the phases' seconds: to host, MPI_Allreduce, back.
class GradientSum {
 public:
  GradientSum(const ShardGradient& g, const Comm& c)
      : m_summed(g.summed),
        m_comm(c.comm),
        m_direct(mpi_reads_exec_memory()),
        m_staging("gradient staging", m_direct ? 0 : g.summed.extent(0)) {}

  bool direct() const { return m_direct; }

  std::array<double, 3> operator()(const Exec& exec) const {
    constexpr Index kPiece = Index(1) << 30;
    const double t0 = MPI_Wtime();
    float* buffer = m_summed.data();
    if (!m_direct) {
      Kokkos::deep_copy(exec, m_staging, m_summed);
      buffer = m_staging.data();
    }
    exec.fence();
    const double t1 = MPI_Wtime();
    const Index n = Index(m_summed.extent(0));
    for (Index done = 0; done < n; done += kPiece)
      MPI_Allreduce(MPI_IN_PLACE, buffer + done, int(std::min(kPiece, n - done)), MPI_FLOAT,
                    MPI_SUM, m_comm);
    const double t2 = MPI_Wtime();
    if (!m_direct) Kokkos::deep_copy(exec, m_summed, m_staging);
    exec.fence();
    return {t1 - t0, t2 - t1, MPI_Wtime() - t2};
  }

 private:
  Vector m_summed;
  MPI_Comm m_comm;
  bool m_direct;
  Kokkos::View<float*, StagingSpace> m_staging;
};

/// The first call on every rank, in a try: a refused request stops all ranks together with each
/// saying why, instead of one rank leaving the others in a collective.
inline bool first_call_everywhere(const Comm& c, const std::function<void()>& first) {
  std::string error;
  try {
    first();
  } catch (const std::invalid_argument& e) {
    error = e.what();
  }
  int ok = error.empty();
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, c.comm);
  if (!ok && !error.empty()) std::fprintf(stderr, "rank %d: %s\n", c.rank, error.c_str());
  return ok;
}

/// A precision whose accuracy the programs' checks know: strict or 3xtf32 (tf32 has no bound).
inline FusedLinear::Precision checked_precision(const std::string& name) {
  const FusedLinear::Precision p = FusedLinear::precision_from_string(name);
  if (p != FusedLinear::Precision::Strict && p != FusedLinear::Precision::TF32x3)
    throw std::invalid_argument("takes strict or 3xtf32, got '" + name + "'");
  return p;
}

/// The path, GEMM and precision that ran (under Algorithm::Auto a requested 3xtf32 is a floor).
inline std::string path_of(const FusedLinear::RunInfo& info) {
  return std::string(FusedLinear::to_string(info.algorithm)) + " (" +
         FusedLinear::to_string(info.gemm) + ", " + FusedLinear::to_string(info.precision) + ")";
}

/// main() of a program that runs `run` on every rank: MPI before Kokkos (a CUDA-aware MPI sets up
/// before the CUDA context), Kokkos finalised before MPI. With CUDA, Kokkos 3.4 gives each rank GPU
/// (node-local rank mod GPUs). Only the main thread calls MPI. An exception stops the whole job
/// with status 3: the other ranks may be waiting in a collective.
inline int main_with_mpi(int argc, char* argv[], const char* program, int (*run)(int, char*[])) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int status = 0;
  {
    Kokkos::ScopeGuard kokkos(argc, argv);  // takes the --kokkos-* options out of argv
    try {
      status = run(argc, argv);
    } catch (const std::exception& e) {
      int rank = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      std::fprintf(stderr, "%s: rank %d: %s\n", program, rank, e.what());
      MPI_Abort(MPI_COMM_WORLD, 3);
    }
  }
  MPI_Finalize();
  return status;
}

}  // namespace MpiSharded
