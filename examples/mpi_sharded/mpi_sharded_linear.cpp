// SPDX-License-Identifier: Apache-2.0
// The layer, Y = LeakyReLU(2 * (X W^T + b), 0.1), sharded over MPI ranks, one rank per GPU (or per
// group of host cores), the two usual ways:
//   rows     each rank holds W and b whole and its block of X's rows: those rows of Y;
//   columns  each rank holds X whole and its block of W's rows and of b: that block of Y's columns.
// Either way every rank then assembles the whole Y with MPI_Allgatherv. Each rank makes only its
// shard of the inputs; rank 0 checks Y's rows (all of them at small shapes, else a sample) against
// the float64 host reference, and every rank's Y must hash like rank 0's.
// --bench times the same steps: the product and the gather apart, per rank and as the max over
// ranks, with the gather's phases and (--compare-single) the scaling against one rank.
//   usage: mpiexec -np P mpi_sharded_linear [M K N] [--precision strict|3xtf32]
//              [--bench [--reps R] [--warmup W] [--compare-single]] [Kokkos options]
// Exit status: 0 when every check passed, 1 when one failed, 2 for bad arguments or a refused
// request, 3 (the job aborted) for any other error.
#include <mpi.h>
// Open MPI says in mpi-ext.h whether it can read device memory (CUDA-aware); without it the gather
// stages through host memory.
#if defined(OPEN_MPI) && OPEN_MPI && __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <Kokkos_Core.hpp>

#include <FusedLinear.hpp>

namespace {

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
// 3xTF32's documented norm-wise accuracy (docs/precision.md): not bounded element by element.
constexpr double kTf32x3Bound = 1.5e-6;

struct Args {
  Index m = 97, k = 160, n = 75;
  FusedLinear::Precision precision = FusedLinear::Precision::Strict;
  bool bench = false, compare_single = false;
  int reps = 20, warmup = 3;
};

const char* const kUsage =
    "usage: mpiexec -np P mpi_sharded_linear [M K N] [options] [Kokkos options]\n"
    "  M K N                      X [M,K], W [N,K], b [N], Y [M,N] (97 160 75)\n"
    "  --precision strict|3xtf32  arithmetic of the product (strict)\n"
    "  --bench                    time the product and the gather of each sharding\n"
    "  --reps R --warmup W        --bench: timed and untimed steps (20, 3)\n"
    "  --compare-single           --bench: rank 0 first times the whole layer alone (scaling)\n"
    "Kokkos options (--kokkos-threads=T, --kokkos-num-devices=N) go to Kokkos::initialize.\n";

int parse_int(const std::string& name, const std::string& v, int lo) {
  std::size_t used = 0;
  long long x = -1;
  try {
    x = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (v.empty() || used != v.size() || x < lo || x > std::numeric_limits<int>::max())
    throw std::invalid_argument(name + " expects an int >= " + std::to_string(lo) + ", got '" + v +
                                "'");
  return int(x);
}

// Throws std::invalid_argument; returns false after printing the usage for --help.
bool parse(int argc, char* argv[], Args& a, bool print) {
  std::vector<std::string> shape;
  for (int i = 1; i < argc; ++i) {
    const std::string opt = argv[i];
    // Kokkos 3.4 leaves the --kokkos-* options it does not know (4.x's) in argv.
    if (opt.rfind("--kokkos-", 0) == 0) continue;
    if (opt == "--help" || opt == "-h") {
      if (print) std::fputs(kUsage, stdout);
      return false;
    }
    if (opt.rfind("--", 0) != 0) {
      shape.push_back(opt);
    } else if (opt == "--bench") {
      a.bench = true;
    } else if (opt == "--compare-single") {
      a.compare_single = true;
    } else if (opt == "--precision" || opt == "--reps" || opt == "--warmup") {
      if (i + 1 == argc) throw std::invalid_argument(opt + " needs a value");
      const std::string v = argv[++i];
      if (opt == "--reps") a.reps = parse_int(opt, v, 1);
      if (opt == "--warmup") a.warmup = parse_int(opt, v, 1);  // the first is the refusal check
      if (opt == "--precision") {
        a.precision = FusedLinear::precision_from_string(v);
        if (a.precision != FusedLinear::Precision::Strict &&  // tf32 has no bound to check
            a.precision != FusedLinear::Precision::TF32x3)
          throw std::invalid_argument("--precision expects strict or 3xtf32, got '" + v + "'");
      }
    } else {
      throw std::invalid_argument("unknown option '" + opt + "' (--help lists them)");
    }
  }
  if (!shape.empty() && shape.size() != 3)
    throw std::invalid_argument("give all of M K N, or none");
  if (shape.size() == 3)
    a.m = parse_int("M", shape[0], 1), a.k = parse_int("K", shape[1], 1),
    a.n = parse_int("N", shape[2], 1);
  if (a.compare_single && !a.bench) throw std::invalid_argument("--compare-single needs --bench");
  return true;
}

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
Block block(Index n, int rank, int ranks) { return {n * rank / ranks, n * (rank + 1) / ranks}; }

// ------------------------------------------------------------------------------ inputs
enum Salt : std::uint64_t { kX = 1, kW = 2, kB = 3 };

/// Element (i, j) of X, W or b (row 0) as a pure function of its place, so that each rank makes
/// its own shard (a model would load it) and rank 0 remakes what the reference needs. X is uniform
/// on [0, 1) like torch.rand, W and b on +-1/sqrt(K) as nn.Linear initialises them: Y is O(1) and
/// both LeakyReLU branches run. Bit for bit the same on host and device: 24 random bits converted
/// exactly, then one rounded product.
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
    return salt == kX ? float(bits) * 0x1p-24f : float(bits - (1 << 23)) * w_step;
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

Shard make_shard(bool by_rows, const Args& a, const Comm& c) {
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
Call make_call(const Shard& s, const Exec& exec, FusedLinear::Precision precision) {
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

/// True when MPI can be handed pointers to Exec's memory: host memory, or device memory with a
/// CUDA-aware Open MPI (asked at run time: the library may differ from the headers).
bool mpi_reads_exec_memory() {
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
  Gather(const Shard& s, const Args& a, const Comm& c)
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

// ------------------------------------------------------------------------------ the check
/// Rows of Y to check: all while the float64 reference is cheap (M*N*K <= 2^30 multiply-adds),
/// else 64 spread evenly plus the first and last row of every rank's block (where an off-by-one
/// in the sharding would show).
std::vector<Index> rows_to_check(const Args& a, int ranks) {
  std::vector<Index> rows;
  if (double(a.m) * double(a.n) * double(a.k) <= std::ldexp(1.0, 30)) {
    for (Index i = 0; i < a.m; ++i) rows.push_back(i);
    return rows;
  }
  for (Index s = 0; s < 64; ++s) rows.push_back(s * (a.m - 1) / 63);
  for (int r = 0; r < ranks; ++r) {
    const Block b = block(a.m, r, ranks);
    if (b.size() > 0) rows.insert(rows.end(), {b.begin, b.end - 1});
  }
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

/// gamma_n = n u / (1 - n u): the bound on the relative error of n floating-point operations.
double gamma(Index n) {
  const double nu = double(n) * std::ldexp(1.0, -24);
  return nu < 1 ? nu / (1 - nu) : std::numeric_limits<double>::infinity();
}

struct Verdict {
  bool pass = true;
  std::string text;
};

/// Compares y [S, N] (rows `rows` of Y) with the float64 reference of remade inputs.
/// strict: per element, |y - ref| <= gamma_{K+3} (sum_k |x w| + |b|) |multiplier| max(1, |slope|),
///   the worst case of a K-term dot product, the bias add, the scaling and the slope.
/// 3xtf32: norm-wise, ||y - ref||_F <= 1.5e-6 ||ref||_F over the rows.
Verdict check(const Args& a, const std::vector<Index>& rows, const HostMatrix& y) {
  const Index S = Index(rows.size()), K = a.k, N = a.n;
  const Inputs in(K);
  HostMatrix X("X rows", S, K), W("W", N, K), b("b", 1, N);
  for (Index q = 0; q < S; ++q)
    for (Index k = 0; k < K; ++k) X(q, k) = in(kX, rows[q], k);
  fill(W, in, kW, 0, 0);
  fill(b, in, kB, 0, 0);
  Kokkos::fence();
  const auto b1 = Kokkos::subview(b, 0, Kokkos::ALL);
  const auto ref = FusedLinear::reference_linear_leaky_relu(X, W, b1, kMultiplier, kSlope);

  double err2 = 0, ref2 = 0, worst = 0;  // worst: largest |y - ref| / bound
  Index failures = 0, fail_q = -1, fail_j = -1;
  const bool strict = a.precision == FusedLinear::Precision::Strict;
  if (strict) {
    // With slope 1 and multiplier 1 the reference of |X|, |W|, |b| is sum_k |x w| + |b|.
    for (const HostMatrix& v : {X, W, b})
      for (std::size_t e = 0; e < v.span(); ++e) v.data()[e] = std::fabs(v.data()[e]);
    const auto absref = FusedLinear::reference_linear_leaky_relu(X, W, b1, 1.0, 1.0);
    const double scale =
        gamma(K + 3) * std::fabs(double(kMultiplier)) * std::max(1.0, std::fabs(double(kSlope)));
    for (Index q = 0; q < S; ++q)
      for (Index j = 0; j < N; ++j) {
        const double e = std::fabs(double(y(q, j)) - ref(q, j)), bound = scale * absref(q, j);
        if (!(e <= bound)) {  // NaN fails too
          if (failures++ == 0) fail_q = q, fail_j = j;
        } else if (bound > 0) {
          worst = std::max(worst, e / bound);
        }
      }
  }
  for (Index q = 0; q < S; ++q)
    for (Index j = 0; j < N; ++j) {
      const double d = double(y(q, j)) - ref(q, j);
      err2 += d * d;
      ref2 += ref(q, j) * ref(q, j);
    }
  const double rel = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  char text[512];
  Verdict v;
  if (!strict) {
    v.pass = rel <= kTf32x3Bound;  // NaN fails
    std::snprintf(text, sizeof text,
                  "%lld rows x %lld columns vs float64, ||err||_F/||ref||_F = %.2e (3xtf32 bound "
                  "%.1e): %s",
                  (long long)S, (long long)N, rel, kTf32x3Bound, v.pass ? "PASS" : "FAIL");
  } else if ((v.pass = failures == 0)) {
    std::snprintf(
        text, sizeof text,
        "%lld rows x %lld columns vs float64, every |err| <= gamma_%lld*(sum|x*w|+|b|)*%g "
        "(largest |err|/bound %.3g), ||err||/||ref|| %.2e: PASS",
        (long long)S, (long long)N, (long long)(K + 3),
        std::fabs(double(kMultiplier)) * std::max(1.0, std::fabs(double(kSlope))), worst, rel);
  } else {
    std::snprintf(text, sizeof text,
                  "%lld rows x %lld columns vs float64: %lld element(s) past the bound, the first "
                  "Y(%lld,%lld) = %.9g, reference %.9g: FAIL",
                  (long long)S, (long long)N, (long long)failures, (long long)rows[fail_q],
                  (long long)fail_j, double(y(fail_q, fail_j)), ref(fail_q, fail_j));
  }
  v.text = text;
  return v;
}

/// FNV-1a over the bits of a host matrix: ranks that should hold the same Y compare this.
std::uint64_t fingerprint(const HostMatrix& y) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  const unsigned char* p = reinterpret_cast<const unsigned char*>(y.data());
  for (std::size_t e = 0; e < y.span() * sizeof(float); ++e) h = (h ^ p[e]) * 0x100000001b3ULL;
  return h;
}

/// Rank 0 checks its whole Y's rows_to_check against the reference, and every rank's must hash
/// alike. The verdict (text on rank 0) holds on every rank.
Verdict verify(const Shard& s, const Args& a, const Comm& c) {
  const auto rows = rows_to_check(a, c.size);
  HostMatrix y("y", rows.size(), a.n);
  if (Index(rows.size()) == a.m)
    Kokkos::deep_copy(y, s.Y_all);
  else
    for (std::size_t q = 0; q < rows.size(); ++q)
      Kokkos::deep_copy(Kokkos::subview(y, q, Kokkos::ALL),
                        Kokkos::subview(s.Y_all, rows[q], Kokkos::ALL));
  std::uint64_t h[2] = {fingerprint(y), 0};
  h[1] = ~h[0];
  MPI_Allreduce(MPI_IN_PLACE, h, 2, MPI_UINT64_T, MPI_MAX, c.comm);  // max of h and of ~h
  const bool same = h[0] == ~h[1];                                   // = every rank's h is equal
  Verdict v;
  if (c.rank == 0) v = check(a, rows, y);
  int pass = v.pass && same;
  MPI_Bcast(&pass, 1, MPI_INT, 0, c.comm);
  v.pass = pass;
  v.text += same ? "; every rank holds the same Y" : "; ranks hold different Ys: FAIL";
  return v;
}

// ------------------------------------------------------------------------------ timing
/// The first call on every rank, in a try: a refused request stops all ranks together with each
/// saying why, instead of one rank leaving the others in a collective.
bool first_call_everywhere(const Comm& c, const std::function<void()>& first) {
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

/// Rank 0 prints every rank's line, in rank order (lines printed by each rank interleave).
void print_ordered(const Comm& c, const std::string& line) {
  constexpr int kWidth = 512;
  char mine[kWidth] = {};
  std::snprintf(mine, kWidth, "%s", line.c_str());
  std::vector<char> all(c.rank == 0 ? std::size_t(kWidth) * c.size : 0);
  MPI_Gather(mine, kWidth, MPI_CHAR, all.data(), kWidth, MPI_CHAR, 0, c.comm);
  if (c.rank == 0)
    for (int r = 0; r < c.size; ++r) std::printf("%s\n", &all[std::size_t(r) * kWidth]);
  std::fflush(stdout);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double gflops(Index M, Index N, Index K, double seconds) {
  return seconds > 0 ? 2.0 * double(M) * double(N) * double(K) / seconds * 1e-9 : 0.0;
}

std::string describe(const Exec& exec) {
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same<Exec, Kokkos::Cuda>::value)
    return "Cuda GPU " + std::to_string(exec.cuda_device()) + " (" + exec.cuda_device_prop().name +
           ")";
#endif
  return std::string(Exec::name()) + " " + std::to_string(exec.concurrency()) + " thread" +
         (exec.concurrency() == 1 ? "" : "s");
}

/// The path, GEMM and precision that ran (under Algorithm::Auto a requested 3xtf32 is a floor).
std::string path_of(const FusedLinear::RunInfo& info) {
  return std::string(FusedLinear::to_string(info.algorithm)) + " (" +
         FusedLinear::to_string(info.gemm) + ", " + FusedLinear::to_string(info.precision) + ")";
}

std::string scaling(double single_s, double sharded_s, int ranks) {
  if (!(single_s > 0) || !(sharded_s > 0)) return "";
  char t[128];
  const double s = single_s / sharded_s;  // = sharded throughput / one rank's
  std::snprintf(t, sizeof t, ", scaling %.2fx vs one rank (%.3f ms), efficiency %.0f%%", s,
                single_s * 1e3, 100.0 * s / ranks);
  return t;
}

/// Per step: all ranks leave a barrier and each times its product to the end of its fence; then
/// the same for the gather, if given. A step's time is the max over ranks: the slowest rank holds
/// the others up at the next collective. Each step's row: product, gather, the gather's three
/// phases; this rank's rows and the rows of the max over ranks.
struct Steps {
  std::vector<std::array<double, 5>> mine, slowest;
  double median_of(const std::vector<std::array<double, 5>>& t, int column) const {
    std::vector<double> v;
    for (const auto& step : t) v.push_back(step[column]);
    return median(v);
  }
};
Steps time_steps(const Args& a, const Comm& c, const Exec& exec, const Call& call,
                 const Gather* gather) {
  for (int w = 1; w < a.warmup; ++w) {  // the first step was the checked one
    call();
    exec.fence();
    if (gather) (*gather)(exec);
  }
  Steps t{std::vector<std::array<double, 5>>(a.reps, std::array<double, 5>{}), {}};
  for (auto& step : t.mine) {
    MPI_Barrier(c.comm);
    double t0 = MPI_Wtime();
    call();
    exec.fence();
    step[0] = MPI_Wtime() - t0;
    if (!gather) continue;
    MPI_Barrier(c.comm);  // so that the gather's time leaves out waiting for the slowest product
    t0 = MPI_Wtime();
    const auto phases = (*gather)(exec);
    step[1] = MPI_Wtime() - t0;
    std::copy(phases.begin(), phases.end(), step.begin() + 2);
  }
  t.slowest = t.mine;
  MPI_Allreduce(MPI_IN_PLACE, t.slowest.front().data(), 5 * a.reps, MPI_DOUBLE, MPI_MAX, c.comm);
  return t;
}

/// Rank 0 times the whole layer alone (the rows pattern on one rank) while the others wait
/// without keeping a core busy (Open MPI's blocking calls poll). Returns its median in seconds on
/// every rank, or -1 when the call was refused.
double time_single(const Args& a, const Comm& world, const Exec& exec) {
  double median_s = -1;
  if (world.rank == 0) {
    const Comm self(MPI_COMM_SELF);
    const Shard s = make_shard(true, a, self);
    Call call;
    FusedLinear::RunInfo info;
    if (first_call_everywhere(self, [&] {
          call = make_call(s, exec, a.precision);
          info = call();
          exec.fence();
        })) {
      const Steps t = time_steps(a, self, exec, call, nullptr);
      median_s = t.median_of(t.mine, 0);
      std::printf(
          "[single] rank 0 alone, the whole layer on %s, path %s: median %.3f ms, %.1f "
          "GFLOP/s\n",
          describe(exec).c_str(), path_of(info).c_str(), median_s * 1e3,
          gflops(a.m, a.n, a.k, median_s));
      std::fflush(stdout);
    }
  }
  MPI_Request request;
  MPI_Ibarrier(world.comm, &request);
  for (int done = 0; MPI_Test(&request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done;)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  MPI_Bcast(&median_s, 1, MPI_DOUBLE, 0, world.comm);
  return median_s;
}

/// --bench: times the steps after the checked one and prints each rank's product, the slowest
/// rank's product and gather, and the scaling against one rank.
void bench(const char* name, const Shard& s, const Args& a, const Comm& c, const Exec& exec,
           const Call& call, const Gather& gather, const FusedLinear::RunInfo& info,
           double single_s) {
  const Steps t = time_steps(a, c, exec, call, &gather);
  const double mine = t.median_of(t.mine, 0);
  char line[512];
  std::snprintf(line, sizeof line,
                "[%s] rank %d: %s, X[%lld,%lld] W[%lld,%lld] -> Y[%lld,%lld], path %s: median "
                "%.3f ms, %.1f GFLOP/s",
                name, c.rank, describe(exec).c_str(), (long long)s.X.extent(0),
                (long long)s.X.extent(1), (long long)s.W.extent(0), (long long)s.W.extent(1),
                (long long)s.Y.extent(0), (long long)s.Y.extent(1), path_of(info).c_str(),
                mine * 1e3, gflops(s.Y.extent(0), s.Y.extent(1), a.k, mine));
  print_ordered(c, line);
  if (c.rank != 0) return;
  const double product = t.median_of(t.slowest, 0), g = t.median_of(t.slowest, 1);
  std::vector<double> total;
  for (const auto& step : t.slowest) total.push_back(step[0] + step[1]);
  const double both = median(total);
  std::printf("[%s] product, the slowest rank's: median %.3f ms, %.1f GFLOP/s%s\n", name,
              product * 1e3, gflops(a.m, a.n, a.k, product),
              scaling(single_s, product, c.size).c_str());
  std::printf(
      "[%s] gather (Y assembled on every rank, %s): median %.3f ms, %.2f GB/s of Y (phases' "
      "medians: to host %.3f, MPI_Allgatherv %.3f, to device + rearrange %.3f ms); "
      "product + gather %.3f ms, %.1f GFLOP/s%s\n",
      name, gather.direct() ? "MPI reads the View's memory" : "staged through host memory", g * 1e3,
      g > 0 ? double(a.m) * a.n * sizeof(float) / g * 1e-9 : 0.0, t.median_of(t.slowest, 2) * 1e3,
      t.median_of(t.slowest, 3) * 1e3, t.median_of(t.slowest, 4) * 1e3, both * 1e3,
      gflops(a.m, a.n, a.k, both), scaling(single_s, both, c.size).c_str());
  std::fflush(stdout);
}

/// One sharding: shard, first call (the refusal check), gather, then the timed steps (--bench),
/// then the check. Returns 0 (passed), 1 (failed) or 2 (refused).
int run_sharding(bool by_rows, const Args& a, const Comm& c, const Exec& exec, double single_s) {
  const char* const name = by_rows ? "rows" : "columns";
  const Shard s = make_shard(by_rows, a, c);
  Call call;
  FusedLinear::RunInfo info;
  if (!first_call_everywhere(c, [&] {
        call = make_call(s, exec, a.precision);
        info = call();
        exec.fence();
      }))
    return 2;
  const Gather gather(s, a, c);
  gather(exec);
  if (a.bench) bench(name, s, a, c, exec, call, gather, info, single_s);
  const Verdict v = verify(s, a, c);
  if (c.rank == 0 && a.bench) std::printf("[%s] check: %s\n", name, v.text.c_str());
  if (c.rank == 0 && !a.bench)
    std::printf("%s: %lldx%lldx%lld over %d rank%s on %s, rank 0's path %s: %s\n", name,
                (long long)a.m, (long long)a.k, (long long)a.n, c.size, c.size == 1 ? "" : "s",
                Exec::name(), path_of(info).c_str(), v.text.c_str());
  std::fflush(stdout);
  return v.pass ? 0 : 1;
}

int run(int argc, char* argv[]) {
  const Comm world(MPI_COMM_WORLD);
  Args a;
  try {  // every rank parses the same arguments, so all stop here together
    if (!parse(argc, argv, a, world.rank == 0)) return 0;
  } catch (const std::invalid_argument& e) {
    if (world.rank == 0) std::fprintf(stderr, "mpi_sharded_linear: %s\n%s", e.what(), kUsage);
    return 2;
  }
  const Exec exec;
  double single_s = 0;
  if (a.bench) {
    if (world.rank == 0) {
      char library[MPI_MAX_LIBRARY_VERSION_STRING] = {};
      int length = 0;
      MPI_Get_library_version(library, &length);
      std::printf(
          "mpi_sharded_linear --bench: Y = LeakyReLU(%g * (X W^T + b), %g), %lldx%lldx%lld "
          "(M x K x N), float, precision %s, %d rank%s, Kokkos %s, FusedLinear %s, %.*s\n",
          double(kMultiplier), double(kSlope), (long long)a.m, (long long)a.k, (long long)a.n,
          FusedLinear::to_string(a.precision), world.size, world.size == 1 ? "" : "s", Exec::name(),
          FUSED_LINEAR_VERSION_STRING, int(std::strcspn(library, ",\n")),
          library);  // "Open MPI v4.1.4"
      std::fflush(stdout);
    }
    if (a.compare_single) single_s = time_single(a, world, exec);
    if (single_s < 0) return 2;
  }
  int status = 0;
  for (const bool by_rows : {true, false})
    if (status != 2) status = std::max(status, run_sharding(by_rows, a, world, exec, single_s));
  return status;
}

}  // namespace

int main(int argc, char* argv[]) {
  // MPI before Kokkos (a CUDA-aware MPI sets up before the CUDA context), Kokkos finalised before
  // MPI. With CUDA, Kokkos 3.4 gives each rank GPU (node-local rank mod GPUs). Only the main
  // thread calls MPI.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
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
