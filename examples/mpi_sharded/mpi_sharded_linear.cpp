// SPDX-License-Identifier: Apache-2.0
// The layer, Y = LeakyReLU(2 * (X W^T + b), 0.1), sharded over MPI ranks, one rank per GPU (or per
// group of host cores), both ways sharded_linear.hpp knows:
//   rows     each rank holds W and b whole and its block of X's rows: those rows of Y;
//   columns  each rank holds X whole and its block of W's rows and of b: that block of Y's columns.
// Each rank makes its shard (a model would load it), runs the layer on it, and MPI_Allgatherv
// assembles the whole Y on every rank. Rank 0 then runs the whole layer alone, and every rank
// checks its Y against that. Then the backward: each rank computes the gradient on its shard for
// its block of dY, MPI_Allreduce sums the parts every rank holds a share of (rows: dW and db;
// columns: dX), and every rank checks its dX, dW and db (its block of each, or all of it) against
// rank 0's backward of the whole layer from the same Y. The timing of the same steps is
// mpi_sharded_bench.cpp.
//   usage: mpiexec -np P mpi_sharded_linear [M K N] [--precision strict|3xtf32] [Kokkos options]
// Exit status: 0 when every check passed, 1 when one failed, 2 for bad arguments or a refused
// request, 3 (the job aborted) for any other error.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "sharded_linear.hpp"

#include "cli.hpp"

namespace {

using namespace MpiSharded;

struct Args : Shape {
  FusedLinear::Precision precision = FusedLinear::Precision::Strict;
};

FusedLinearCli::Cli command_line(Args& a) {
  FusedLinearCli::Cli cli("mpi_sharded_linear",
                          "mpiexec -np P mpi_sharded_linear [M K N] [options] [Kokkos options]");
  cli.positionals({"M", "K", "N"}, {&a.m, &a.k, &a.n}, Index(1),
                  Index(std::numeric_limits<int>::max()),
                  "X [M,K], W [N,K], b [N], Y [M,N] (97 160 75)")
      .option(
          "--precision", "strict|3xtf32",
          [&a](const std::string& p) { a.precision = checked_precision(p); },
          "arithmetic of the product (strict)")
      .ignore_prefix("--kokkos-")  // Kokkos 3.4 leaves 4.x's options in argv
      .epilog(
          "Kokkos options (--kokkos-threads=T, --kokkos-num-devices=N) go to Kokkos::initialize.\n"
          "Timed, and checked against the float64 reference: mpi_sharded_bench (more options).");
  return cli;
}

/// ||y - ref||_F / ||ref||_F over n contiguous floats; NaN where y holds a NaN.
double relative_difference(const float* y, const float* ref, std::size_t n) {
  double d2 = 0, r2 = 0;
  for (std::size_t e = 0; e < n; ++e) {
    const double d = double(y[e]) - double(ref[e]);
    d2 += d * d;
    r2 += double(ref[e]) * ref[e];
  }
  return r2 > 0 ? std::sqrt(d2 / r2) : std::sqrt(d2);
}

/// The largest relative_difference over the ranks (a NaN counts as infinity), on every rank.
double worst_over_ranks(double difference, const Comm& c) {
  if (std::isnan(difference)) difference = std::numeric_limits<double>::infinity();
  MPI_Allreduce(MPI_IN_PLACE, &difference, 1, MPI_DOUBLE, MPI_MAX, c.comm);
  return difference;
}

/// A View's elements on the host, contiguous (host Views and their row blocks are).
template <class View>
auto on_host(const View& v) {
  return Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
}

/// The whole layer's gradient, dX [M,K], dW [N,K] and db [N], on every rank.
struct WholeGradient {
  HostMatrix dX, dW;
  Kokkos::View<float*, Kokkos::HostSpace> db;
};

/// Rank 0 runs the backward of the whole layer alone, from the whole Y `y_all` (the sharded
/// forward's, so that both backwards see the same signs of Y: one near zero may round to either
/// side in another order) and broadcasts it. Returns false on every rank when rank 0's call was
/// refused.
bool whole_gradient(const Args& a, const Comm& world, const Exec& exec, const Matrix& y_all,
                    WholeGradient& whole) {
  whole = {HostMatrix("whole dX", a.m, a.k), HostMatrix("whole dW", a.n, a.k),
           Kokkos::View<float*, Kokkos::HostSpace>("whole db", a.n)};
  if (!first_call_everywhere(world, [&] {
        if (world.rank != 0) return;
        const Comm self(MPI_COMM_SELF);
        const Shard one = make_shard(true, a, self);
        const ShardGradient g = make_gradient(one, a);
        Kokkos::deep_copy(one.Y_all, y_all);
        make_backward_call(one, g, exec, a.precision)();
        exec.fence();
        Kokkos::deep_copy(whole.dX, g.dX);
        Kokkos::deep_copy(whole.dW, g.dW);
        Kokkos::deep_copy(whole.db, g.db);
      }))
    return false;
  MPI_Bcast(whole.dX.data(), int(whole.dX.span()), MPI_FLOAT, 0, world.comm);
  MPI_Bcast(whole.dW.data(), int(whole.dW.span()), MPI_FLOAT, 0, world.comm);
  MPI_Bcast(whole.db.data(), int(whole.db.span()), MPI_FLOAT, 0, world.comm);
  return true;
}

int run(int argc, char* argv[]) {
  const Comm world(MPI_COMM_WORLD);
  Args a;
  // Every rank parses the same arguments, so all stop here together.
  if (const auto stop = command_line(a).parse_or_stop(argc, argv, world.rank == 0)) return *stop;
  const Exec exec;

  // The whole layer on rank 0 alone: what every rank's assembled Y must match.
  HostMatrix whole("whole Y", a.m, a.n);
  if (!first_call_everywhere(world, [&] {
        if (world.rank != 0) return;
        const Shard one = make_shard(true, a, Comm(MPI_COMM_SELF));
        make_call(one, exec, a.precision)();
        Kokkos::deep_copy(whole, one.Y_all);
      }))
    return 2;
  MPI_Bcast(whole.data(), int(whole.span()), MPI_FLOAT, 0, world.comm);
  // Two float sums of K products in different orders (or two 3xTF32 results, 1.5e-6 each) stay
  // within this; a block in the wrong place, or one missing, is off by O(1). The gradient's sums
  // run over N (dX) and M (dW, db) instead.
  const auto tolerance_of = [](Index terms) {
    return 8 * std::sqrt(double(terms)) * std::ldexp(1.0, -24) + 3e-6;
  };
  const double tolerance = tolerance_of(a.k);
  const double gradient_tolerance = tolerance_of(std::max(a.m, a.n));

  int status = 0;
  for (const bool by_rows : {true, false}) {
    const Shard s = make_shard(by_rows, a, world);  // this rank's X, W, b, and room for all of Y
    Call call;  // a Plan for rows, the one-shot call for columns: either serves a model's steps
    FusedLinear::RunInfo info;
    if (!first_call_everywhere(world, [&] {
          call = make_call(s, exec, a.precision);
          info = call();  // this rank's block of Y
          exec.fence();   // MPI may read Y next
        }))
      return 2;
    const Gather gather(s, a, world);
    gather(exec);  // every rank's blocks, into every rank's Y_all

    const auto y = on_host(s.Y_all);
    const double worst =
        worst_over_ranks(relative_difference(y.data(), whole.data(), y.span()), world);
    const bool pass = worst <= tolerance;
    if (world.rank == 0)
      std::printf(
          "%s: %lldx%lldx%lld over %d rank%s on %s, rank 0's path %s: every rank's Y against "
          "the whole layer on one rank, largest ||Y - Y_one||_F/||Y_one||_F %.2e (tolerance "
          "%.1e): %s\n",
          by_rows ? "rows" : "columns", (long long)a.m, (long long)a.k, (long long)a.n, world.size,
          world.size == 1 ? "" : "s", Exec::name(), path_of(info).c_str(), worst, tolerance,
          pass ? "PASS" : "FAIL");
    std::fflush(stdout);
    if (!pass) status = 1;

    // The backward on each rank's shard, from its block of Y as the forward left it, then the
    // sum over ranks of what each holds a part of.
    const ShardGradient g = make_gradient(s, a);
    BackwardCall backward;
    FusedLinear::GradientInfo gradient_info;
    if (!first_call_everywhere(world, [&] {
          backward = make_backward_call(s, g, exec, a.precision);
          gradient_info = backward();
        }))
      return 2;
    const GradientSum sum(g, world);
    sum(exec);

    WholeGradient ref;
    if (!whole_gradient(a, world, exec, s.Y_all, ref)) return 2;
    // This rank's block of each (rows: dX's rows; columns: dW's rows and db's block), or all of
    // it (what the sum over ranks made whole); the blocks of LayoutRight rows are contiguous.
    const auto dX = on_host(g.dX), dW = on_host(g.dW);
    const auto db = on_host(g.db);
    const Index dX_at = by_rows ? s.mine.begin * a.k : 0, dW_at = by_rows ? 0 : s.mine.begin * a.k;
    const Index db_at = by_rows ? 0 : s.mine.begin;
    const double worst_dX =
        worst_over_ranks(relative_difference(dX.data(), ref.dX.data() + dX_at, dX.span()), world);
    const double worst_dW =
        worst_over_ranks(relative_difference(dW.data(), ref.dW.data() + dW_at, dW.span()), world);
    const double worst_db =
        worst_over_ranks(relative_difference(db.data(), ref.db.data() + db_at, db.span()), world);
    const bool gradient_pass = std::max({worst_dX, worst_dW, worst_db}) <= gradient_tolerance;
    if (world.rank == 0)
      std::printf(
          "%s backward: rank 0's paths dX %s, dW %s; %s summed over ranks; every rank's dX, dW, db "
          "against the whole layer's on one rank, largest relative differences %.2e, %.2e, %.2e "
          "(tolerance %.1e): %s\n",
          by_rows ? "rows" : "columns", path_of(gradient_info.dx).c_str(),
          path_of(gradient_info.dw).c_str(), by_rows ? "dW and db" : "dX", worst_dX, worst_dW,
          worst_db, gradient_tolerance, gradient_pass ? "PASS" : "FAIL");
    std::fflush(stdout);
    if (!gradient_pass) status = 1;
  }
  return status;
}

}  // namespace

int main(int argc, char* argv[]) {
  return MpiSharded::main_with_mpi(argc, argv, "mpi_sharded_linear", run);
}
