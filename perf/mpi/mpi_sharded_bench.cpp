// SPDX-License-Identifier: Apache-2.0
// The benchmark of examples/mpi_sharded (which shows the pattern alone): one layer,
// Y = LeakyReLU(2 * (X W^T + b), 0.1), sharded over MPI ranks, one rank per GPU (or per group of
// host cores), checked and timed two ways:
//   rows     X's rows split over the ranks (data parallel): each rank holds W and b whole, its
//            block of rows of X and computes the same rows of Y. No communication.
//   columns  W's rows split over the ranks: each rank holds X whole and its slice of W and b and
//            computes Y's column slice [M, N_r]; with --gather yes every rank then assembles the
//            whole Y with MPI_Allgatherv (timed apart from the product).
// Inputs are a pure function of (seed, element), so each rank makes only its own slice and rank 0
// remakes what the float64 reference needs; rank 0 checks a sample of rows of Y against it.
//
//   usage: mpiexec -np P mpi_sharded_bench [--m M] [--k K] [--n N] [--sharding rows|columns|both]
//              [--gather yes|no] [--precision strict|3xtf32] [--reps R] [--warmup W]
//              [--check-rows S] [--compare-single] [--baseline-ms T] [--seed S] [Kokkos options]
// Exit status: 0 when every check passed, 1 when one failed, 2 for bad arguments or a refused call,
// 3 (the job aborted) for any other error.
#include <mpi.h>
// Open MPI says in mpi-ext.h whether it can read device memory (CUDA-aware); without it the gather
// stages through host memory.
#if defined(OPEN_MPI) && OPEN_MPI && __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#if defined(__linux__)
#include <sched.h>  // sched_getaffinity: the cores a rank is bound to
#endif

#include <Kokkos_Core.hpp>

#include <FusedLinear.hpp>

namespace {

using Scalar = float;  // 3xtf32 exists for float only, so one type serves both precisions
using Exec = Kokkos::DefaultExecutionSpace;
using Matrix = Kokkos::View<Scalar**, Kokkos::LayoutRight, Exec::memory_space>;
using Vector = Kokkos::View<Scalar*, Exec::memory_space>;
using HostMatrix = Kokkos::View<Scalar**, Kokkos::LayoutRight, Kokkos::HostSpace>;
using HostVector = Kokkos::View<Scalar*, Kokkos::HostSpace>;
#if defined(KOKKOS_ENABLE_CUDA)
using StagingSpace = Kokkos::CudaHostPinnedSpace;  // page-locked: GPU copies at full speed
#else
using StagingSpace = Kokkos::HostSpace;
#endif
using Index = std::int64_t;

constexpr Scalar kMultiplier = 2.0f;
constexpr Scalar kSlope = 0.1f;
// The documented norm-wise accuracy of 3xTF32 (README: "fp32-accurate"; measured 6.5e-7 to
// 9.2e-7 at 1024x8192x8192): its error is not bounded element by element like fp32's.
constexpr double kTf32x3NormwiseBound = 1.5e-6;

// ------------------------------------------------------------------------------ arguments
struct Args {
  Index m = 256, k = 512, n = 384;
  bool rows = true, columns = true;
  bool gather = true;
  FusedLinear::Precision precision = FusedLinear::Precision::Strict;
  int reps = 20, warmup = 3;
  Index check_rows = -1;  // -1: all rows when the reference is cheap, else 64 (plus shard edges)
  bool compare_single = false;
  double baseline_ms = 0;  // > 0: a one-rank time measured elsewhere, for the scaling line
  std::uint64_t seed = 2024;
};

const char* const kUsage =
    "usage: mpiexec -np P mpi_sharded_bench [options] [Kokkos options]\n"
    "  --m M --k K --n N          shape: X [M,K], W [N,K], b [N], Y [M,N] (256 512 384)\n"
    "  --sharding rows|columns|both   split X's rows, or W's rows (Y's columns), or run both\n"
    "  --gather yes|no            columns: assemble the whole Y on every rank (yes)\n"
    "  --precision strict|3xtf32  arithmetic of the product (strict)\n"
    "  --reps R --warmup W        timed and untimed calls per sharding (20, 3)\n"
    "  --check-rows S             rows of Y checked on rank 0; 0 skips the check\n"
    "                             (all rows when M*N*K <= 2^30, else 64 plus the shard edges)\n"
    "  --compare-single           rank 0 first times the whole layer alone: scaling line\n"
    "  --baseline-ms T            the one-rank time to compute scaling against\n"
    "  --seed S                   inputs' seed (2024)\n"
    "Kokkos options (--kokkos-threads=T, --kokkos-device-id=D, --kokkos-num-devices=N) go to\n"
    "Kokkos::initialize. With CUDA, Kokkos 3.4 gives each rank the GPU (local rank mod GPUs).\n";

// Kokkos 3.4 removes the --kokkos-* options it knows from argv but leaves unknown ones (e.g. 4.x's
// --kokkos-map-device-to-rank) and its unprefixed spellings (--threads=4): not ours, so skipped.
bool is_kokkos_option(const std::string& a) {
  for (const char* p : {"--kokkos-", "--threads=", "--numa=", "--device-id=", "--device=",
                        "--num-devices=", "--ndevices="})
    if (a.rfind(p, 0) == 0) return true;
  return false;
}

Index parse_int(const std::string& name, const std::string& v, Index lo) {
  std::size_t used = 0;
  Index x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (v.empty() || used != v.size() || x < lo)
    throw std::invalid_argument(name + " expects an integer >= " + std::to_string(lo) + ", got '" +
                                v + "'");
  return x;
}

bool parse_yes_no(const std::string& name, const std::string& v) {
  if (v == "yes") return true;
  if (v == "no") return false;
  throw std::invalid_argument(name + " expects yes or no, got '" + v + "'");
}

// Throws std::invalid_argument; returns false after printing the usage for --help.
bool parse(int argc, char* argv[], Args& a, bool print) {
  for (int i = 1; i < argc; ++i) {
    std::string opt = argv[i], value;
    if (is_kokkos_option(opt)) continue;
    if (opt == "--help" || opt == "-h") {
      if (print) std::fputs(kUsage, stdout);
      return false;
    }
    if (opt == "--compare-single") {
      a.compare_single = true;
      continue;
    }
    const auto eq = opt.find('=');  // --m=256 as well as --m 256
    if (eq != std::string::npos) {
      value = opt.substr(eq + 1);
      opt.resize(eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      throw std::invalid_argument(opt + " needs a value");
    }
    if (opt == "--m")
      a.m = parse_int(opt, value, 0);
    else if (opt == "--k")
      a.k = parse_int(opt, value, 0);
    else if (opt == "--n")
      a.n = parse_int(opt, value, 0);
    else if (opt == "--reps")
      a.reps = int(parse_int(opt, value, 1));
    else if (opt == "--warmup")
      a.warmup = int(parse_int(opt, value, 1));  // >= 1: the first is also the refusal check
    else if (opt == "--check-rows")
      a.check_rows = parse_int(opt, value, 0);
    else if (opt == "--seed")
      a.seed = std::uint64_t(parse_int(opt, value, 0));
    else if (opt == "--gather")
      a.gather = parse_yes_no(opt, value);
    else if (opt == "--baseline-ms") {
      char* end = nullptr;
      a.baseline_ms = std::strtod(value.c_str(), &end);
      if (*end != '\0' || !(a.baseline_ms > 0))
        throw std::invalid_argument("--baseline-ms expects a positive time, got '" + value + "'");
    } else if (opt == "--sharding") {
      if (value != "rows" && value != "columns" && value != "both")
        throw std::invalid_argument("--sharding expects rows, columns or both, got '" + value +
                                    "'");
      a.rows = value != "columns";
      a.columns = value != "rows";
    } else if (opt == "--precision") {
      a.precision = FusedLinear::precision_from_string(value);
      // tf32 has no accuracy bound this check could hold it to.
      if (a.precision != FusedLinear::Precision::Strict &&
          a.precision != FusedLinear::Precision::TF32x3)
        throw std::invalid_argument("--precision expects strict or 3xtf32, got '" + value + "'");
    } else {
      throw std::invalid_argument("unknown option '" + opt + "' (--help lists them)");
    }
  }
  if (a.m > INT32_MAX || a.n > INT32_MAX)
    throw std::invalid_argument("--m and --n must fit an MPI count (int)");
  return true;
}

// ------------------------------------------------------------------------------ inputs
enum Salt : std::uint64_t { kSaltX = 1, kSaltW = 2, kSaltB = 3 };

/// A uniform distribution on [-centre, 2^24 - centre) * step: 2^24 values, each exact in float.
struct Uniform {
  std::int32_t centre;
  Scalar step;
};

/// Counter-based inputs: element (i, j) of matrix `salt` is a pure function of (seed, salt, i, j),
/// so every rank makes its own slice with no communication and rank 0 remakes any element for the
/// reference. The value comes out bit for bit the same on host and device: an exact int-to-float
/// conversion and one rounded product, nothing a compiler could contract into an FMA.
struct Generator {
  std::uint64_t seed;

  KOKKOS_INLINE_FUNCTION static std::uint64_t mix(std::uint64_t z) {  // SplitMix64's finaliser
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  KOKKOS_INLINE_FUNCTION Scalar operator()(std::uint64_t salt, Index i, Index j, Uniform u) const {
    const std::uint64_t h =
        mix(mix(mix(seed ^ (salt << 56)) + std::uint64_t(i)) + std::uint64_t(j));
    return Scalar(std::int32_t(h >> 40) - u.centre) * u.step;  // the top 24 bits
  }
};

/// The reference model's inputs (those of the project's accuracy targets): X uniform on [0, 1)
/// like torch.rand, W and b uniform on +-1/sqrt(K) as nn.Linear initialises them, so that Y is
/// O(1) and about half its pre-activations are negative (both LeakyReLU branches run).
struct Inputs {
  Uniform x, w, b;
  explicit Inputs(Index K) {
    const double bound = 1.0 / std::sqrt(double(std::max<Index>(K, 1)));
    x = {0, Scalar(std::ldexp(1.0, -24))};
    w = b = {std::int32_t(1) << 23, Scalar(bound * std::ldexp(1.0, -23))};
  }
};

/// A(i, j) = element (row0 + i, col0 + j) of matrix `salt`, on A's execution space.
template <class View>
void fill(const View& A, Generator gen, std::uint64_t salt, Index row0, Index col0, Uniform u) {
  using Space = typename View::execution_space;
  using Policy = Kokkos::MDRangePolicy<Space, Kokkos::Rank<2>, Kokkos::IndexType<Index>>;
  const Index rows = A.extent(0), cols = A.extent(1);
  if (rows == 0 || cols == 0) return;
  Kokkos::parallel_for(
      "mpi_sharded::fill", Policy({0, 0}, {rows, cols}),
      KOKKOS_LAMBDA(const Index i, const Index j) { A(i, j) = gen(salt, row0 + i, col0 + j, u); });
}

/// b(j) = element (0, col0 + j) of the bias.
template <class View>
void fill_bias(const View& b, Generator gen, Index col0, Uniform u) {
  using Space = typename View::execution_space;
  Kokkos::parallel_for(
      "mpi_sharded::fill_bias",
      Kokkos::RangePolicy<Space, Kokkos::IndexType<Index>>(0, b.extent(0)),
      KOKKOS_LAMBDA(const Index j) { b(j) = gen(kSaltB, 0, col0 + j, u); });
}

// ------------------------------------------------------------------------------ MPI helpers
struct Comm {
  MPI_Comm world = MPI_COMM_WORLD;
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;  // among the ranks of this node
  std::string host;
};

/// The balanced block [begin, end) of n items that `rank` of `size` owns.
struct Block {
  Index begin, end;
  Index size() const { return end - begin; }
};
Block block(Index n, int rank, int size) { return {n * rank / size, n * (rank + 1) / size}; }

/// Rank 0 prints every rank's line, in rank order (lines printed by each rank interleave).
void print_ordered(const Comm& c, const std::string& line) {
  constexpr int kWidth = 512;
  char mine[kWidth] = {};
  std::snprintf(mine, kWidth, "%s", line.c_str());
  std::vector<char> all(c.rank == 0 ? std::size_t(kWidth) * c.size : 0);
  MPI_Gather(mine, kWidth, MPI_CHAR, all.data(), kWidth, MPI_CHAR, 0, c.world);
  if (c.rank == 0)
    for (int r = 0; r < c.size; ++r) std::printf("%s\n", &all[std::size_t(r) * kWidth]);
  std::fflush(stdout);
}

std::vector<double> max_over_ranks(const Comm& c, std::vector<double> v) {
  MPI_Allreduce(MPI_IN_PLACE, v.data(), int(v.size()), MPI_DOUBLE, MPI_MAX, c.world);
  return v;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// MPI datatype of `count` contiguous floats: with it as the unit, counts and displacements of
/// whole rows (or column blocks) stay far below INT_MAX even when element counts would not.
struct ContiguousType {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  explicit ContiguousType(Index count) {
    MPI_Type_contiguous(int(std::max<Index>(count, 1)), MPI_FLOAT, &type);
    MPI_Type_commit(&type);
  }
  ~ContiguousType() { MPI_Type_free(&type); }
  ContiguousType(const ContiguousType&) = delete;
  ContiguousType& operator=(const ContiguousType&) = delete;
};

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

// ------------------------------------------------------------------------------ device
/// The CPUs this process may run on (its affinity mask), or 0 where that is not known.
int cpus_of_this_process() {
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
#endif
  return 0;
}

/// The GPU this rank uses (-1 on the host backends), to spot ranks sharing one.
int device_id(const Exec& exec) {
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same<Exec, Kokkos::Cuda>::value) return exec.cuda_device();
#endif
  (void)exec;
  return -1;
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

// ------------------------------------------------------------------------------ the check
/// Sorted, distinct rows to check: `count` spread evenly from the first to the last row, plus the
/// first and last row of every rank's block (where an off-by-one in the sharding would show).
std::vector<Index> sample_rows(Index M, Index count, int ranks) {
  std::vector<Index> rows;
  if (M == 0 || count == 0) return rows;
  if (count >= M) {
    for (Index i = 0; i < M; ++i) rows.push_back(i);
    return rows;
  }
  for (Index s = 0; s < count; ++s) rows.push_back(count == 1 ? 0 : s * (M - 1) / (count - 1));
  for (int r = 0; r < ranks; ++r) {
    const Block b = block(M, r, ranks);
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

/// Rank 0: compares y [S, N] (rows `rows` of Y) with the float64 reference from remade inputs.
/// strict: per element, |y - ref| <= gamma_{K+3} (sum_k |x w| + |b|) |multiplier| max(1, |slope|),
///   the worst case of a K-term dot product, the bias add, the scaling and the slope.
/// 3xtf32: norm-wise, ||y - ref||_F <= 1.5e-6 ||ref||_F over the sampled rows.
Verdict check(const Args& a, const std::vector<Index>& rows, const HostMatrix& y) {
  const Index S = Index(rows.size()), K = a.k, N = a.n;
  const Generator gen{a.seed};
  const Inputs inputs(K);
  HostMatrix Xs("Xs", S, K), W("W", N, K);
  HostVector b("b", N);
  Kokkos::View<Index*, Kokkos::HostSpace> row_of("row_of", S);
  for (Index q = 0; q < S; ++q) row_of(q) = rows[q];
  using HostExec = Kokkos::DefaultHostExecutionSpace;
  using Policy = Kokkos::MDRangePolicy<HostExec, Kokkos::Rank<2>, Kokkos::IndexType<Index>>;
  if (S > 0 && K > 0)
    Kokkos::parallel_for(
        "mpi_sharded::remake_x", Policy({0, 0}, {S, K}),
        [=](const Index q, const Index k) { Xs(q, k) = gen(kSaltX, row_of(q), k, inputs.x); });
  fill(W, gen, kSaltW, 0, 0, inputs.w);
  fill_bias(b, gen, 0, inputs.b);
  Kokkos::fence();
  const auto ref = FusedLinear::reference_linear_leaky_relu(Xs, W, b, kMultiplier, kSlope);

  double err2 = 0, ref2 = 0, worst = 0;  // worst: largest |y - ref| / bound
  Index failures = 0, fail_q = -1, fail_j = -1;
  const bool strict = a.precision == FusedLinear::Precision::Strict;
  if (strict) {
    // With slope 1 and multiplier 1 the reference of |X|, |W|, |b| is sum_k |x w| + |b|.
    auto to_abs = [](auto v) {
      Scalar* p = v.data();
      for (std::size_t e = 0; e < v.span(); ++e) p[e] = std::fabs(p[e]);
    };
    to_abs(Xs);
    to_abs(W);
    to_abs(b);
    const auto absref = FusedLinear::reference_linear_leaky_relu(Xs, W, b, 1.0, 1.0);
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
  if (strict) {
    v.pass = failures == 0;
    if (v.pass)
      std::snprintf(
          text, sizeof text,
          "%lld rows x %lld columns vs float64, every |err| <= gamma_%lld*(sum|x*w|+|b|)*%g "
          "(largest |err|/bound %.3g), ||err||/||ref|| %.2e: PASS",
          (long long)S, (long long)N, (long long)(K + 3),
          std::fabs(double(kMultiplier)) * std::max(1.0, std::fabs(double(kSlope))), worst, rel);
    else
      std::snprintf(
          text, sizeof text,
          "%lld rows x %lld columns vs float64: %lld element(s) past the bound, the first "
          "Y(%lld,%lld) = %.9g, reference %.9g: FAIL",
          (long long)S, (long long)N, (long long)failures, (long long)rows[fail_q],
          (long long)fail_j, double(y(fail_q, fail_j)), ref(fail_q, fail_j));
  } else {
    v.pass = rel <= kTf32x3NormwiseBound;  // NaN fails
    std::snprintf(text, sizeof text,
                  "%lld rows x %lld columns vs float64, ||err||_F/||ref||_F = %.2e (3xtf32 bound "
                  "%.1e): %s",
                  (long long)S, (long long)N, rel, kTf32x3NormwiseBound, v.pass ? "PASS" : "FAIL");
  }
  v.text = text;
  return v;
}

/// FNV-1a over the bits of a host matrix: ranks that should hold the same Y compare this.
std::uint64_t fingerprint(const HostMatrix& y) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  const unsigned char* p = reinterpret_cast<const unsigned char*>(y.data());
  for (std::size_t e = 0; e < y.span() * sizeof(Scalar); ++e) h = (h ^ p[e]) * 0x100000001b3ULL;
  return h;
}

/// Copies rows `rows` of Y (Y's row 0 being global row `row0`) into host rows of out.
void copy_rows(const Matrix& Y, Index row0, const std::vector<Index>& rows, const HostMatrix& out) {
  for (std::size_t q = 0; q < rows.size(); ++q)
    Kokkos::deep_copy(Kokkos::subview(out, Index(q), Kokkos::ALL),
                      Kokkos::subview(Y, rows[q] - row0, Kokkos::ALL));
}

// ------------------------------------------------------------------------------ timing
/// Untimed calls, then `reps` timed ones: all ranks leave a barrier together, each times its call
/// to the end of its fence; the step's time is the max over ranks (the slowest rank holds the
/// others up at the next collective).
template <class Call>
std::vector<double> time_calls(MPI_Comm comm, const Exec& exec, int warmup, int reps,
                               const Call& call) {
  for (int w = 0; w < warmup; ++w) call();
  exec.fence();
  std::vector<double> t(reps);
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(comm);
    const double t0 = MPI_Wtime();
    call();
    exec.fence();
    t[r] = MPI_Wtime() - t0;
  }
  return t;
}

double gflops(Index M, Index N, Index K, double seconds) {
  return seconds > 0 ? 2.0 * double(M) * double(N) * double(K) / seconds * 1e-9 : 0.0;
}

/// The first call on every rank, in a try: a refused precision (3xtf32 off CUDA, say) stops all
/// ranks together with rank 0 saying why, instead of one rank leaving the others in a collective.
template <class Call>
bool first_call_everywhere(const Comm& c, const Exec& exec, const Call& call,
                           FusedLinear::RunInfo& info) {
  std::string error;
  try {
    info = call();
    exec.fence();
  } catch (const std::invalid_argument& e) {
    error = e.what();
  }
  int ok = error.empty() ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, c.world);
  if (!ok)
    print_ordered(
        c, "rank " + std::to_string(c.rank) + ": " + (error.empty() ? std::string("ok") : error));
  return ok == 1;
}

/// The path, GEMM and precision that ran (under Algorithm::Auto a requested 3xtf32 is a floor:
/// strict fp32 may run where it is faster).
std::string path_of(const FusedLinear::RunInfo& info) {
  return std::string(FusedLinear::to_string(info.algorithm)) + " (" +
         FusedLinear::to_string(info.gemm) + ", " + FusedLinear::to_string(info.precision) + ")";
}

/// Rows of Y to check: --check-rows, or all while the float64 reference is cheap (M*N*K <= 2^30
/// multiply-adds), else 64; sample_rows adds each rank's first and last row.
Index rows_to_check(const Args& a) {
  if (a.check_rows >= 0) return a.check_rows;
  return double(a.m) * double(a.n) * double(a.k) <= std::ldexp(1.0, 30) ? a.m : 64;
}

/// Waits for every rank without keeping a core busy: Open MPI's blocking calls poll, and while
/// rank 0 times the layer alone the others must leave it the node's cores.
void wait_quietly(const Comm& c) {
  MPI_Request request;
  MPI_Ibarrier(c.world, &request);
  for (int done = 0; MPI_Test(&request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done;)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

/// Rank 0 times the whole layer alone on its device; returns its median in seconds on every rank,
/// or -1 when the call was refused.
double time_single(const Args& a, const Comm& c, const Exec& exec) {
  double median_s = 0;
  if (c.rank == 0) {
    const Generator gen{a.seed};
    const Inputs inputs(a.k);
    Matrix X("X", a.m, a.k), W("W", a.n, a.k), Y("Y", a.m, a.n);
    Vector b("b", a.n);
    fill(X, gen, kSaltX, 0, 0, inputs.x);
    fill(W, gen, kSaltW, 0, 0, inputs.w);
    fill_bias(b, gen, 0, inputs.b);
    Kokkos::fence();
    const FusedLinear::Options opt(FusedLinear::Algorithm::Auto, a.precision);
    FusedLinear::RunInfo info;
    auto call = [&] {
      info = FusedLinear::linear_leaky_relu(exec, X, W, b, Y, kMultiplier, kSlope, opt);
    };
    try {
      median_s = median(time_calls(MPI_COMM_SELF, exec, a.warmup, a.reps, call));
      std::printf(
          "[single] rank 0 alone, the whole layer %lldx%lldx%lld on %s, path %s: "
          "median %.3f ms, %.1f GFLOP/s\n",
          (long long)a.m, (long long)a.k, (long long)a.n, describe(exec).c_str(),
          path_of(info).c_str(), median_s * 1e3, gflops(a.m, a.n, a.k, median_s));
    } catch (const std::invalid_argument& e) {
      std::printf("rank 0: %s\n", e.what());
      median_s = -1;
    }
    std::fflush(stdout);
  }
  wait_quietly(c);
  MPI_Bcast(&median_s, 1, MPI_DOUBLE, 0, c.world);
  return median_s;
}

std::string scaling_text(double single_s, double sharded_s, int ranks) {
  if (!(single_s > 0) || !(sharded_s > 0)) return "";
  char t[128];
  const double s = single_s / sharded_s;  // = sharded throughput / single-rank throughput
  std::snprintf(t, sizeof t, ", scaling %.2fx vs one rank (%.3f ms), efficiency %.0f%%", s,
                single_s * 1e3, 100.0 * s / ranks);
  return t;
}

// ------------------------------------------------------------------------------ rows
/// Data parallel: rank r owns rows [r0, r1) of X and Y, all of W and b. No communication.
int run_rows(const Args& a, const Comm& c, const Exec& exec, double single_s) {
  const Block rows = block(a.m, c.rank, c.size);
  const Generator gen{a.seed};
  const Inputs inputs(a.k);
  Matrix X("X", rows.size(), a.k), W("W", a.n, a.k), Y("Y", rows.size(), a.n);
  Vector b("b", a.n);
  fill(X, gen, kSaltX, rows.begin, 0, inputs.x);  // the global row index: the same X as one rank
  fill(W, gen, kSaltW, 0, 0, inputs.w);
  fill_bias(b, gen, 0, inputs.b);
  Kokkos::fence();

  const FusedLinear::Options opt(FusedLinear::Algorithm::Auto, a.precision);
  FusedLinear::RunInfo info;
  auto call = [&] {
    return FusedLinear::linear_leaky_relu(exec, X, W, b, Y, kMultiplier, kSlope, opt);
  };
  if (!first_call_everywhere(c, exec, call, info)) return 2;
  const auto local = time_calls(c.world, exec, a.warmup - 1, a.reps, [&] { call(); });
  const auto step = max_over_ranks(c, local);

  char line[512];
  const double mine = median(local);
  std::snprintf(line, sizeof line,
                "[rows] rank %d on %s: %s, X[%lld,%lld] W[%lld,%lld] -> Y[%lld,%lld], path %s: "
                "median %.3f ms, %.1f GFLOP/s",
                c.rank, c.host.c_str(), describe(exec).c_str(), (long long)rows.size(),
                (long long)a.k, (long long)a.n, (long long)a.k, (long long)rows.size(),
                (long long)a.n, path_of(info).c_str(), mine * 1e3,
                gflops(rows.size(), a.n, a.k, mine));
  print_ordered(c, line);
  const double global = median(step);
  if (c.rank == 0)
    std::printf(
        "[rows] overall: %d rank%s, %lldx%lldx%lld %s, median of the max over ranks "
        "%.3f ms, %.1f GFLOP/s%s\n",
        c.size, c.size == 1 ? "" : "s", (long long)a.m, (long long)a.k, (long long)a.n,
        FusedLinear::to_string(a.precision), global * 1e3, gflops(a.m, a.n, a.k, global),
        scaling_text(single_s, global, c.size).c_str());

  // The check: each rank sends its sampled rows to rank 0, in rank order = row order.
  const auto sample = sample_rows(a.m, rows_to_check(a), c.size);
  if (sample.empty()) {
    if (c.rank == 0) std::printf("[rows] check: skipped\n");
    return 0;
  }
  std::vector<Index> mine_rows;
  for (Index i : sample)
    if (i >= rows.begin && i < rows.end) mine_rows.push_back(i);
  HostMatrix mine_y("mine_y", mine_rows.size(), a.n);
  copy_rows(Y, rows.begin, mine_rows, mine_y);
  std::vector<int> counts(c.size), displs(c.size);
  for (int r = 0, off = 0; r < c.size; ++r) {
    const Block br = block(a.m, r, c.size);
    counts[r] = int(std::count_if(sample.begin(), sample.end(),
                                  [&](Index i) { return i >= br.begin && i < br.end; }));
    displs[r] = off;
    off += counts[r];
  }
  HostMatrix y("y", c.rank == 0 ? Index(sample.size()) : 0, a.n);
  ContiguousType row(a.n);
  MPI_Gatherv(mine_y.data(), int(mine_rows.size()), row.type, y.data(), counts.data(),
              displs.data(), row.type, 0, c.world);
  int pass = 1;
  if (c.rank == 0) {
    const Verdict v = check(a, sample, y);
    pass = v.pass;
    std::printf("[rows] check: %s\n", v.text.c_str());
    std::fflush(stdout);
  }
  MPI_Bcast(&pass, 1, MPI_INT, 0, c.world);
  return pass ? 0 : 1;
}

// ------------------------------------------------------------------------------ columns
/// Rank r owns rows [c0, c1) of W and b, hence columns [c0, c1) of Y: Y_r [M, N_r] from all of X.
/// With gather, Y_r is computed straight into its block of a rank-major buffer (block r = Y_r, in
/// LayoutRight, at offset M*c0), MPI_Allgatherv fills the other blocks in place, and one copy per
/// block moves it into the columns of the whole Y (a block's columns are strided in LayoutRight).
int run_columns(const Args& a, const Comm& c, const Exec& exec, double single_s) {
  const Block cols = block(a.n, c.rank, c.size);
  const Index M = a.m, K = a.k, N = a.n, Nr = cols.size();
  const Generator gen{a.seed};
  const Inputs inputs(K);
  Matrix X("X", M, K), W("W", Nr, K), Yfull;
  Vector b("b", Nr), packed;
  Matrix Y;
  if (a.gather) {
    packed = Vector("packed", M * N);
    Y = Matrix(packed.data() + M * cols.begin, M, Nr);  // unmanaged: a view of block r
    Yfull = Matrix("Yfull", M, N);
  } else {
    Y = Matrix("Y", M, Nr);
  }
  fill(X, gen, kSaltX, 0, 0, inputs.x);
  fill(W, gen, kSaltW, cols.begin, 0, inputs.w);  // W's global row = Y's global column
  fill_bias(b, gen, cols.begin, inputs.b);
  Kokkos::fence();

  const FusedLinear::Options opt(FusedLinear::Algorithm::Auto, a.precision);
  FusedLinear::RunInfo info;
  auto call = [&] {
    return FusedLinear::linear_leaky_relu(exec, X, W, b, Y, kMultiplier, kSlope, opt);
  };
  if (!first_call_everywhere(c, exec, call, info)) return 2;

  // The gather: counts and displacements in units of M floats (block r is N_r such units).
  const bool direct = mpi_reads_exec_memory();
  Kokkos::View<Scalar*, StagingSpace> staging("staging", direct || !a.gather ? 0 : M * N);
  std::vector<int> counts(c.size), displs(c.size);
  for (int r = 0; r < c.size; ++r) {
    const Block br = block(N, r, c.size);
    counts[r] = int(br.size());
    displs[r] = int(br.begin);
  }
  ContiguousType unit(M);
  double phase[3] = {0, 0, 0};  // device to host, MPI_Allgatherv, host to device + rearrange
  auto gather = [&] {
    double t = MPI_Wtime();
    Scalar* buffer = packed.data();
    if (!direct) {
      const std::pair<Index, Index> mine(M * cols.begin, M * cols.end);
      Kokkos::deep_copy(exec, Kokkos::subview(staging, mine), Kokkos::subview(packed, mine));
      exec.fence();
      buffer = staging.data();
    }
    double t1 = MPI_Wtime();
    phase[0] = t1 - t;
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffer, counts.data(), displs.data(),
                   unit.type, c.world);
    t = MPI_Wtime();
    phase[1] = t - t1;
    if (!direct) Kokkos::deep_copy(exec, packed, staging);
    for (int r = 0; r < c.size; ++r) {
      const Block br = block(N, r, c.size);
      const Matrix block_r(packed.data() + M * br.begin, M, br.size());
      Kokkos::deep_copy(exec, Kokkos::subview(Yfull, Kokkos::ALL, std::make_pair(br.begin, br.end)),
                        block_r);
    }
    exec.fence();
    phase[2] = MPI_Wtime() - t;
  };

  // Each step: the product, timed as in time_calls, then (gather yes) the gather, timed alone.
  if (a.gather) gather();  // the first call had no gather
  for (int w = 1; w < a.warmup; ++w) {
    call();
    exec.fence();
    if (a.gather) gather();
  }
  exec.fence();
  // Per step: compute, gather, compute + gather, and the gather's three phases.
  std::vector<double> local(6 * std::size_t(a.reps), 0.0);
  for (int s = 0; s < a.reps; ++s) {
    MPI_Barrier(c.world);
    double t0 = MPI_Wtime();
    call();
    exec.fence();
    local[6 * s] = MPI_Wtime() - t0;
    if (a.gather) {
      MPI_Barrier(c.world);  // so that the gather's time leaves out waiting for the slowest product
      t0 = MPI_Wtime();
      gather();
      local[6 * s + 1] = MPI_Wtime() - t0;
      for (int p = 0; p < 3; ++p) local[6 * s + 3 + p] = phase[p];
    }
    local[6 * s + 2] = local[6 * s] + local[6 * s + 1];
  }
  const auto step = max_over_ranks(c, local);
  auto column = [&](const std::vector<double>& v, int which) {
    std::vector<double> out(a.reps);
    for (int s = 0; s < a.reps; ++s) out[s] = v[6 * s + which];
    return median(out);
  };

  char line[512];
  const double mine = column(local, 0);
  std::snprintf(line, sizeof line,
                "[columns] rank %d on %s: %s, X[%lld,%lld] W[%lld,%lld] -> Y[%lld,%lld], path %s: "
                "median %.3f ms, %.1f GFLOP/s",
                c.rank, c.host.c_str(), describe(exec).c_str(), (long long)M, (long long)K,
                (long long)Nr, (long long)K, (long long)M, (long long)Nr, path_of(info).c_str(),
                mine * 1e3, gflops(M, Nr, K, mine));
  print_ordered(c, line);
  if (c.rank == 0) {
    const double compute = column(step, 0);
    std::printf(
        "[columns] overall: %d rank%s, %lldx%lldx%lld %s, median of the max over ranks "
        "%.3f ms, %.1f GFLOP/s%s\n",
        c.size, c.size == 1 ? "" : "s", (long long)M, (long long)K, (long long)N,
        FusedLinear::to_string(a.precision), compute * 1e3, gflops(M, N, K, compute),
        scaling_text(single_s, compute, c.size).c_str());
    if (a.gather) {
      const double g = column(step, 1), total = column(step, 2);
      char phases[160];
      if (direct)
        std::snprintf(phases, sizeof phases, "MPI_Allgatherv %.3f, rearrange %.3f ms",
                      column(step, 4) * 1e3, column(step, 5) * 1e3);
      else
        std::snprintf(phases, sizeof phases,
                      "own block to host %.3f, MPI_Allgatherv %.3f, to device + rearrange %.3f ms",
                      column(step, 3) * 1e3, column(step, 4) * 1e3, column(step, 5) * 1e3);
      std::printf(
          "[columns] gather (Y assembled on every rank, %s): median %.3f ms, %.2f GB/s "
          "of Y (phases' medians: %s); product + gather %.3f ms, %.1f GFLOP/s%s\n",
          direct ? "MPI reads the View's memory" : "staged through host memory", g * 1e3,
          g > 0 ? double(M) * N * sizeof(Scalar) / g * 1e-9 : 0.0, phases, total * 1e3,
          gflops(M, N, K, total), scaling_text(single_s, total, c.size).c_str());
    }
    std::fflush(stdout);
  }

  // The check. Gathered: rank 0 reads its own whole Y, and every rank's sampled rows must hash
  // alike. Distributed: each rank sends its slice of the sampled rows, [S, N_r] in units of S.
  const auto sample = sample_rows(M, rows_to_check(a), c.size);
  if (sample.empty()) {
    if (c.rank == 0) std::printf("[columns] check: skipped\n");
    return 0;
  }
  const Index S = Index(sample.size());
  HostMatrix y("y", c.rank == 0 || a.gather ? S : 0, N);
  std::string same_everywhere;
  int pass = 1;
  if (a.gather) {
    copy_rows(Yfull, 0, sample, y);
    std::uint64_t h[2] = {fingerprint(y), 0};
    h[1] = ~h[0];
    MPI_Allreduce(MPI_IN_PLACE, h, 2, MPI_UINT64_T, MPI_MAX, c.world);  // max of h and of ~h
    pass = h[0] == ~h[1];  // = every rank's fingerprint is the same
    same_everywhere = pass ? "; every rank holds the same Y (sampled rows)"
                           : "; ranks hold different Ys after the gather: FAIL";
  } else {
    HostMatrix mine("mine", S, Nr);
    for (Index q = 0; q < S; ++q)
      Kokkos::deep_copy(Kokkos::subview(mine, q, Kokkos::ALL),
                        Kokkos::subview(Y, sample[q], Kokkos::ALL));
    HostVector blocks("blocks", c.rank == 0 ? S * N : 0);
    ContiguousType unit_s(S);
    MPI_Gatherv(mine.data(), int(Nr), unit_s.type, blocks.data(), counts.data(), displs.data(),
                unit_s.type, 0, c.world);
    if (c.rank == 0)
      for (int r = 0; r < c.size; ++r) {  // block r: [S, N_r] row-major at offset S * c0_r
        const Block br = block(N, r, c.size);
        for (Index q = 0; q < S; ++q)
          for (Index j = 0; j < br.size(); ++j)
            y(q, br.begin + j) = blocks(S * br.begin + q * br.size() + j);
      }
  }
  if (c.rank == 0) {
    const Verdict v = check(a, sample, y);
    pass = pass && v.pass;
    std::printf("[columns] check: %s%s\n", v.text.c_str(), same_everywhere.c_str());
    std::fflush(stdout);
  }
  MPI_Bcast(&pass, 1, MPI_INT, 0, c.world);
  return pass ? 0 : 1;
}

// ------------------------------------------------------------------------------ main
int run(int argc, char* argv[], Comm& c) {
  Args a;
  try {
    if (!parse(argc, argv, a, c.rank == 0)) return 0;
  } catch (const std::invalid_argument& e) {  // every rank parses the same argv: all stop here
    if (c.rank == 0) std::fprintf(stderr, "mpi_sharded_bench: %s\n%s", e.what(), kUsage);
    return 2;
  }

  MPI_Comm local;  // the ranks of this node: device sharing and core oversubscription
  MPI_Comm_split_type(c.world, MPI_COMM_TYPE_SHARED, c.rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &c.local_rank);
  MPI_Comm_size(local, &c.local_size);
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  c.host = name;

  const Exec exec;
  // Two ranks on one GPU give correct results but not per-GPU timings; ranks x threads beyond
  // the node's cores slow every rank down (OpenMP: set OMP_NUM_THREADS or --kokkos-threads).
  std::vector<int> devices(c.local_size);
  const int dev = device_id(exec);
  MPI_Allgather(&dev, 1, MPI_INT, devices.data(), 1, MPI_INT, local);
  int threads = Kokkos::DefaultHostExecutionSpace().concurrency(), node_threads = 0;
  MPI_Allreduce(&threads, &node_threads, 1, MPI_INT, MPI_SUM, local);
  MPI_Comm_free(&local);
  if (c.local_rank == 0) {
    std::sort(devices.begin(), devices.end());
    if (dev >= 0 && std::adjacent_find(devices.begin(), devices.end()) != devices.end())
      std::fprintf(stderr,
                   "note: on %s several ranks share a GPU: results are right, timings are not "
                   "per GPU\n",
                   c.host.c_str());
    const unsigned cores = std::thread::hardware_concurrency();
    if (dev < 0 && cores > 0 && unsigned(node_threads) > cores)
      std::fprintf(stderr,
                   "note: on %s %d ranks run %d host threads on %u cores: set OMP_NUM_THREADS "
                   "(or --kokkos-threads) to cores / ranks\n",
                   c.host.c_str(), c.local_size, node_threads, cores);
  }
  // Open MPI binds each rank to one core when there are 2 ranks or fewer: more threads than the
  // rank's cores then take turns on them.
  const int bound_to = cpus_of_this_process();
  if (dev < 0 && bound_to > 0 && threads > bound_to)
    std::fprintf(stderr,
                 "note: rank %d runs %d threads on the %d core%s it is bound to: launch with "
                 "mpiexec --bind-to none, or --map-by slot:PE=%d\n",
                 c.rank, threads, bound_to, bound_to == 1 ? "" : "s", threads);

  if (c.rank == 0) {
    std::printf(
        "mpi_sharded_bench: Y = LeakyReLU(%g * (X W^T + b), %g), %lldx%lldx%lld "
        "(M x K x N), float, precision %s, %d rank%s, Kokkos %s",
        double(kMultiplier), double(kSlope), (long long)a.m, (long long)a.k, (long long)a.n,
        FusedLinear::to_string(a.precision), c.size, c.size == 1 ? "" : "s", Exec::name());
#ifdef FUSED_LINEAR_VERSION_STRING
    std::printf(", FusedLinear %s", FUSED_LINEAR_VERSION_STRING);
#endif
    char library[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int length = 0;
    MPI_Get_library_version(library, &length);
    std::printf(", %.*s\n", int(std::strcspn(library, ",\n")), library);  // "Open MPI v4.1.4"
    std::fflush(stdout);
  }

  double single_s = a.baseline_ms > 0 ? a.baseline_ms * 1e-3 : 0.0;
  if (a.compare_single) single_s = time_single(a, c, exec);

  int status = single_s < 0 ? 2 : 0;  // 0 passed, 1 a check failed, 2 the call was refused
  if (a.rows && status != 2) status = std::max(status, run_rows(a, c, exec, single_s));
  if (a.columns && status != 2) status = std::max(status, run_columns(a, c, exec, single_s));
  if (c.rank == 0)
    std::printf("mpi_sharded_bench: %s\n", status == 0   ? "all checks passed"
                                           : status == 1 ? "a check FAILED"
                                                         : "the call was refused");
  return status;
}

}  // namespace

int main(int argc, char* argv[]) {
  // MPI before Kokkos, Kokkos finalised before MPI: a CUDA-aware MPI sets up its GPU support
  // before the CUDA context exists, and MPI may take its own arguments out of argv. (Kokkos 3.4
  // reads the node-local rank it maps GPUs with from the launcher's environment either way.)
  // Only the main thread calls MPI.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  Comm c;
  MPI_Comm_rank(c.world, &c.rank);
  MPI_Comm_size(c.world, &c.size);
  int status = 0;
  Kokkos::initialize(argc, argv);  // takes the --kokkos-* options out of argv
  try {
    status = run(argc, argv, c);
  } catch (const std::exception& e) {
    // Past the first call the ranks are in lock step: one rank's failure would leave the others
    // waiting in a collective, so the whole job stops.
    std::fprintf(stderr, "mpi_sharded_bench: rank %d: %s\n", c.rank, e.what());
    MPI_Abort(c.world, 3);
  }
  Kokkos::finalize();  // every View is gone with run(); MPI goes last
  MPI_Finalize();
  return status;
}
