// SPDX-License-Identifier: Apache-2.0
// The benchmark of the sharded layer (sharded_linear.hpp; the example is mpi_sharded_linear.cpp):
// for each sharding, rows then columns, it times the product and the gather apart, per rank and
// as the max over ranks, with the gather's phases and (--compare-single) the scaling against one
// rank. Then rank 0 checks Y's rows (all of them at small shapes, else a sample) against the
// float64 host reference, element by element, and every rank's Y must hash like rank 0's. With
// --backward it then times the backward and the sum over ranks of the gradient, and the whole
// training step (forward, gather, backward, sum); every rank checks its rows of dX and dW (all or
// a sample) and its db against the float64 reference, and what the sum made whole must hash alike
// on every rank.
//   usage: mpiexec -np P mpi_sharded_bench [M K N] [options] [Kokkos options]   (--help)
// Exit status: 0 when every check passed, 1 when one failed, 2 for bad arguments or a refused
// request, 3 (the job aborted) for any other error.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "sharded_linear.hpp"

#include "cli.hpp"

namespace {

using namespace MpiSharded;
// 3xTF32's documented norm-wise accuracy (docs/precision.md): not bounded element by element.
constexpr double kTf32x3Bound = 1.5e-6;

struct Args : Shape {
  FusedLinear::Precision precision = FusedLinear::Precision::Strict;
  bool compare_single = false;
  bool backward = false;
  int reps = 20, warmup = 3;
  bool bench = true;  // --bench: always on here
};

/// The command line; every rank parses the same one. Options keep the spelling they had as
/// mpi_sharded_linear --bench, which is accepted too.
FusedLinearCli::Cli command_line(Args& a) {
  constexpr int most = std::numeric_limits<int>::max();
  FusedLinearCli::Cli cli("mpi_sharded_bench",
                          "mpiexec -np P mpi_sharded_bench [M K N] [options] [Kokkos options]");
  cli.positionals({"M", "K", "N"}, {&a.m, &a.k, &a.n}, Index(1), Index(most),
                  "X [M,K], W [N,K], b [N], Y [M,N] (97 160 75)")
      .option(
          "--precision", "strict|3xtf32",
          [&a](const std::string& p) { a.precision = checked_precision(p); },
          "arithmetic of the product (strict)")
      .integer("--reps", "R", a.reps, 1, most, "timed steps of each sharding (20)")
      .integer("--warmup", "W", a.warmup, 1, most,
               "steps before the timed ones, the first of them the checked one (3)")
      .flag("--compare-single", a.compare_single,
            "rank 0 first times the whole layer alone (scaling)")
      .flag("--backward", a.backward,
            "also time the backward, the gradient's sum over ranks and the training step, then "
            "check the gradient against the float64 reference")
      .flag("--bench", a.bench,
            "always on here: accepted so that the command lines of mpi_sharded_linear --bench "
            "run unchanged")
      .ignore_prefix("--kokkos-")  // Kokkos 3.4 leaves 4.x's options in argv
      .epilog(
          "Kokkos options (--kokkos-threads=T, --kokkos-num-devices=N) go to Kokkos::initialize.");
  return cli;
}

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

std::string scaling(double single_s, double sharded_s, int ranks) {
  if (!(single_s > 0) || !(sharded_s > 0)) return "";
  char t[128];
  const double s = single_s / sharded_s;  // = sharded throughput / one rank's
  std::snprintf(t, sizeof t, ", scaling %.2fx vs one rank (%.3f ms), efficiency %.0f%%", s,
                single_s * 1e3, 100.0 * s / ranks);
  return t;
}

/// Per step: all ranks leave a barrier and each times its product to the end of its fence; then
/// the same for the gather (or the gradient's sum), if given. A step's time is the max over ranks:
/// the slowest rank holds the others up at the next collective. Each step's row: product, gather,
/// the gather's three phases; this rank's rows and the rows of the max over ranks.
struct Steps {
  std::vector<std::array<double, 5>> mine, slowest;
  double median_of(const std::vector<std::array<double, 5>>& t, int column) const {
    std::vector<double> v;
    for (const auto& step : t) v.push_back(step[column]);
    return median(v);
  }
};
template <class Step, class Exchange>
Steps time_steps(const Args& a, const Comm& c, const Exec& exec, const Step& call,
                 const Exchange* gather) {
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
      const Steps t = time_steps(a, self, exec, call, static_cast<const Gather*>(nullptr));
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

/// Times the steps after the checked one and prints each rank's product, the slowest
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

// ------------------------------------------------------------------------------ the backward
/// Times the backward and the gradient's sum over ranks (as bench() the product and the gather),
/// then the training step: forward, gather, backward, sum, all ranks from one barrier, the
/// slowest rank's time per step. The backward's two products are 4*M*N*K flops.
void bench_backward(const char* name, const Shard& s, const ShardGradient& g, const Args& a,
                    const Comm& c, const Exec& exec, const Call& call, const Gather& gather,
                    const BackwardCall& backward, const GradientSum& sum,
                    const FusedLinear::GradientInfo& info) {
  const Steps t = time_steps(a, c, exec, backward, &sum);
  const double mine = t.median_of(t.mine, 0);
  char line[512];
  std::snprintf(line, sizeof line,
                "[%s backward] rank %d: dY[%lld,%lld] -> dX[%lld,%lld] dW[%lld,%lld] db[%lld], "
                "paths dX %s, dW %s: median %.3f ms, %.1f GFLOP/s",
                name, c.rank, (long long)g.dY.extent(0), (long long)g.dY.extent(1),
                (long long)g.dX.extent(0), (long long)g.dX.extent(1), (long long)g.dW.extent(0),
                (long long)g.dW.extent(1), (long long)g.db.extent(0), path_of(info.dx).c_str(),
                path_of(info.dw).c_str(), mine * 1e3,
                2 * gflops(s.Y.extent(0), s.Y.extent(1), a.k, mine));
  print_ordered(c, line);

  std::vector<double> steps;
  for (int r = 0; r < a.reps; ++r) {
    MPI_Barrier(c.comm);
    const double t0 = MPI_Wtime();
    call();
    exec.fence();
    gather(exec);
    backward();
    sum(exec);  // fences
    steps.push_back(MPI_Wtime() - t0);
  }
  MPI_Allreduce(MPI_IN_PLACE, steps.data(), a.reps, MPI_DOUBLE, MPI_MAX, c.comm);
  if (c.rank != 0) return;
  const double product = t.median_of(t.slowest, 0), summing = t.median_of(t.slowest, 1);
  const double step = median(steps);
  std::printf("[%s backward] dX and dW, the slowest rank's: median %.3f ms, %.1f GFLOP/s\n", name,
              product * 1e3, 2 * gflops(a.m, a.n, a.k, product));
  std::printf(
      "[%s backward] sum over ranks (%s on every rank, %s): median %.3f ms, %.2f GB/s (phases' "
      "medians: to host %.3f, MPI_Allreduce %.3f, back %.3f ms)\n",
      name, s.by_rows ? "dW and db" : "dX",
      sum.direct() ? "MPI reads the View's memory" : "staged through host memory", summing * 1e3,
      summing > 0 ? double(g.summed.extent(0)) * sizeof(float) / summing * 1e-9 : 0.0,
      t.median_of(t.slowest, 2) * 1e3, t.median_of(t.slowest, 3) * 1e3,
      t.median_of(t.slowest, 4) * 1e3);
  std::printf(
      "[%s] training step (forward, gather, backward, sum), the slowest rank's: median %.3f ms, "
      "%.1f GFLOP/s\n",
      name, step * 1e3, 3 * gflops(a.m, a.n, a.k, step));
  std::fflush(stdout);
}

/// The rows [begin, end) to check, cost multiply-adds each: all while the float64 reference is
/// cheap (2^30 in all), else 64 spread evenly from the first to the last.
std::vector<Index> sample(Index begin, Index end, double cost) {
  std::vector<Index> rows;
  if (end <= begin) return rows;
  const Index n = end - begin;
  if (double(n) * cost <= std::ldexp(1.0, 30)) {
    for (Index i = begin; i < end; ++i) rows.push_back(i);
    return rows;
  }
  for (Index q = 0; q < 64; ++q) rows.push_back(begin + q * (n - 1) / 63);
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

/// How the gradient's elements compare with the float64 reference.
/// strict: |got - ref| <= gamma_{n+2} sum |terms| for a sum of n terms (G's two roundings, then
///   the sum in any order, the ranks' partial sums included); db is the library's own sum of G in
///   every precision, so it is held to this bound always.
/// 3xtf32: dX's and dW's rows norm-wise, ||err||_F <= 1.5e-6 ||ref||_F (|err|/bound is then only
///   reported).
struct Tally {
  Index terms = 0, failures = 0;
  bool strict = true;
  double err2 = 0, ref2 = 0, worst = 0;  // worst: largest |err| / bound
  std::string first;
  void add(const char* what, Index i, Index j, float got, double ref, double abs) {
    const double e = std::fabs(double(got) - ref), bound = gamma(terms + 2) * abs;
    err2 += e * e, ref2 += ref * ref;
    if (!(e <= bound)) {  // NaN fails too
      if (failures++ == 0) {
        char t[160];
        std::snprintf(t, sizeof t, "%s(%lld,%lld) = %.9g, reference %.9g", what, (long long)i,
                      (long long)j, double(got), ref);
        first = t;
      }
    } else if (bound > 0) {
      worst = std::max(worst, e / bound);
    }
  }
  double relative() const { return ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2); }
  bool pass() const { return strict ? failures == 0 : relative() <= kTf32x3Bound; }  // NaN fails
};

/// Every rank checks its part of the gradient against the float64 reference of remade inputs,
/// with G from the gathered Y (the signs the backward saw): its rows of dX (rows sharding) or all
/// of them, all of dW's rows or its block, and likewise db; then what the sum over ranks made
/// whole must hash alike on every rank. The verdict (text on rank 0) holds on every rank.
Verdict verify_gradient(const Shard& s, const ShardGradient& g, const Args& a, const Comm& c) {
  const Index M = a.m, K = a.k, N = a.n;
  const Inputs in(K);
  const auto y = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), s.Y_all);
  const auto dX = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), g.dX);
  const auto dW = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), g.dW);
  const auto db = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), g.db);
  const auto G = [&](Index m, Index n) {  // multiplier * (leaky_relu's backward of dY)
    const double dy = in(kDY, m, n);
    return double(kMultiplier) * (y(m, n) > 0 ? dy : dy * double(kSlope));
  };
  // Global rows of dX and dW this rank holds: [x0, x1) and [w0, w1).
  const Index x0 = s.by_rows ? s.mine.begin : 0, x1 = s.by_rows ? s.mine.end : M;
  const Index w0 = s.by_rows ? 0 : s.mine.begin, w1 = s.by_rows ? N : s.mine.end;
  const bool strict = a.precision == FusedLinear::Precision::Strict;
  Tally tx, tw, tb;
  tx.terms = N, tw.terms = tb.terms = M, tx.strict = tw.strict = strict;
  std::vector<double> acc(K), abs(K);

  HostMatrix W("W", N, K), X("X", M, K);
  fill(W, in, kW, 0, 0);
  fill(X, in, kX, 0, 0);
  Kokkos::fence();
  const auto dx_rows = sample(x0, x1, double(N) * K), dw_rows = sample(w0, w1, double(M) * K);
  for (const Index m : dx_rows) {  // dX(m, :) = sum_n G(m, n) W(n, :)
    std::fill(acc.begin(), acc.end(), 0.0), std::fill(abs.begin(), abs.end(), 0.0);
    for (Index n = 0; n < N; ++n) {
      const double gmn = G(m, n);
      for (Index k = 0; k < K; ++k) acc[k] += gmn * W(n, k), abs[k] += std::fabs(gmn * W(n, k));
    }
    for (Index k = 0; k < K; ++k) tx.add("dX", m, k, dX(m - x0, k), acc[k], abs[k]);
  }
  for (const Index n : dw_rows) {  // dW(n, :) = sum_m G(m, n) X(m, :)
    std::fill(acc.begin(), acc.end(), 0.0), std::fill(abs.begin(), abs.end(), 0.0);
    for (Index m = 0; m < M; ++m) {
      const double gmn = G(m, n);
      for (Index k = 0; k < K; ++k) acc[k] += gmn * X(m, k), abs[k] += std::fabs(gmn * X(m, k));
    }
    for (Index k = 0; k < K; ++k) tw.add("dW", n, k, dW(n - w0, k), acc[k], abs[k]);
  }
  for (Index n = w0; n < w1; ++n) {  // db(n) = sum_m G(m, n)
    double sum = 0, sum_abs = 0;
    for (Index m = 0; m < M; ++m) sum += G(m, n), sum_abs += std::fabs(G(m, n));
    tb.add("db", n, 0, db(n - w0), sum, sum_abs);
  }

  int pass = tx.pass() && tw.pass() && tb.pass();
  MPI_Allreduce(MPI_IN_PLACE, &pass, 1, MPI_INT, MPI_MIN, c.comm);
  const auto summed = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), g.summed);
  std::uint64_t h[2] = {fingerprint(HostMatrix(summed.data(), 1, summed.extent(0))), 0};
  h[1] = ~h[0];
  MPI_Allreduce(MPI_IN_PLACE, h, 2, MPI_UINT64_T, MPI_MAX, c.comm);  // max of h and of ~h
  const bool same = h[0] == ~h[1];                                   // = every rank's h is equal
  double worst[3] = {tx.worst, tw.worst, tb.worst};
  MPI_Allreduce(MPI_IN_PLACE, worst, 3, MPI_DOUBLE, MPI_MAX, c.comm);
  double rel[3] = {tx.relative(), tw.relative(), tb.relative()};
  MPI_Allreduce(MPI_IN_PLACE, rel, 3, MPI_DOUBLE, MPI_MAX, c.comm);

  Verdict v;
  v.pass = pass && same;
  char text[768];
  std::snprintf(text, sizeof text,
                "rank 0 checked %lld of dX's rows, %lld of dW's, %lld of db's against float64 "
                "(each rank its own), %s; largest over ranks: |err|/bound %.3g, %.3g, %.3g, "
                "||err||_F/||ref||_F %.2e, %.2e, %.2e",
                (long long)dx_rows.size(), (long long)dw_rows.size(), (long long)(w1 - w0),
                strict ? "every |err| <= gamma_{n+2}*sum|terms|"
                       : "dX, dW norm-wise <= 1.5e-6 (3xtf32), db element-wise",
                worst[0], worst[1], worst[2], rel[0], rel[1], rel[2]);
  v.text = text;
  for (const Tally* t : {&tx, &tw, &tb})  // this rank's first failure, on its own stream
    if (!t->pass())
      std::fprintf(
          stderr, "rank %d: %s\n", c.rank,
          t->strict ? (t->first + " past the bound").c_str() : "dX or dW past the norm-wise bound");
  v.text += pass ? ": PASS" : ": FAIL";
  v.text += same ? std::string("; every rank holds the same ") + (s.by_rows ? "dW and db" : "dX")
                 : "; ranks hold different sums: FAIL";
  return v;
}

/// One sharding: shard, first call (the refusal check), gather, the timed steps, then the check;
/// with --backward the same for the backward and the gradient's sum, then the training step.
/// Returns 0 (passed), 1 (failed) or 2 (refused).
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
  bench(name, s, a, c, exec, call, gather, info, single_s);
  const Verdict v = verify(s, a, c);
  if (c.rank == 0) std::printf("[%s] check: %s\n", name, v.text.c_str());
  std::fflush(stdout);
  if (!a.backward) return v.pass ? 0 : 1;

  const ShardGradient g = make_gradient(s, a);
  BackwardCall backward;
  FusedLinear::GradientInfo gradient_info;
  if (!first_call_everywhere(c, [&] {
        backward = make_backward_call(s, g, exec, a.precision);
        gradient_info = backward();
      }))
    return 2;
  const GradientSum sum(g, c);
  sum(exec);
  bench_backward(name, s, g, a, c, exec, call, gather, backward, sum, gradient_info);
  const Verdict gv = verify_gradient(s, g, a, c);
  if (c.rank == 0) std::printf("[%s backward] check: %s\n", name, gv.text.c_str());
  std::fflush(stdout);
  return v.pass && gv.pass ? 0 : 1;
}

int run(int argc, char* argv[]) {
  const Comm world(MPI_COMM_WORLD);
  Args a;
  // Every rank parses the same arguments, so all stop here together.
  if (const auto stop = command_line(a).parse_or_stop(argc, argv, world.rank == 0)) return *stop;
  const Exec exec;
  if (world.rank == 0) {
    char library[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int length = 0;
    MPI_Get_library_version(library, &length);
    std::printf(
        "mpi_sharded_bench: Y = LeakyReLU(%g * (X W^T + b), %g), %lldx%lldx%lld (M x K x N), "
        "float, precision %s, %d rank%s, Kokkos %s, FusedLinear %s, %.*s\n",
        double(kMultiplier), double(kSlope), (long long)a.m, (long long)a.k, (long long)a.n,
        FusedLinear::to_string(a.precision), world.size, world.size == 1 ? "" : "s", Exec::name(),
        FUSED_LINEAR_VERSION_STRING, int(std::strcspn(library, ",\n")),
        library);  // "Open MPI v4.1.4"
    std::fflush(stdout);
  }
  const double single_s = a.compare_single ? time_single(a, world, exec) : 0;
  if (single_s < 0) return 2;
  int status = 0;
  for (const bool by_rows : {true, false})
    if (status != 2) status = std::max(status, run_sharding(by_rows, a, world, exec, single_s));
  return status;
}

}  // namespace

int main(int argc, char* argv[]) {
  return MpiSharded::main_with_mpi(argc, argv, "mpi_sharded_bench", run);
}
