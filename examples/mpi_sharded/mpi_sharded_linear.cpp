// SPDX-License-Identifier: Apache-2.0
// The layer, Y = LeakyReLU(2 * (X W^T + b), 0.1), sharded over MPI ranks, one rank per GPU (or per
// group of host cores), both ways sharded_linear.hpp knows:
//   rows     each rank holds W and b whole and its block of X's rows: those rows of Y;
//   columns  each rank holds X whole and its block of W's rows and of b: that block of Y's columns.
// Each rank makes its shard (a model would load it), runs the layer on it, and MPI_Allgatherv
// assembles the whole Y on every rank. Rank 0 then runs the whole layer alone, and every rank
// checks its Y against that. The timing of the same steps is mpi_sharded_bench.cpp.
//   usage: mpiexec -np P mpi_sharded_linear [M K N] [--precision strict|3xtf32] [Kokkos options]
// Exit status: 0 when every check passed, 1 when one failed, 2 for bad arguments or a refused
// request, 3 (the job aborted) for any other error.
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

/// ||y - ref||_F / ||ref||_F over the whole Y; NaN where y holds a NaN.
double relative_difference(const HostMatrix& y, const HostMatrix& ref) {
  double d2 = 0, r2 = 0;
  for (std::size_t e = 0; e < y.span(); ++e) {
    const double d = double(y.data()[e]) - double(ref.data()[e]);
    d2 += d * d;
    r2 += double(ref.data()[e]) * ref.data()[e];
  }
  return r2 > 0 ? std::sqrt(d2 / r2) : std::sqrt(d2);
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
  // within this; a block in the wrong place, or one missing, is off by O(1).
  const double tolerance = 8 * std::sqrt(double(a.k)) * std::ldexp(1.0, -24) + 3e-6;

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

    HostMatrix y("y", a.m, a.n);
    Kokkos::deep_copy(y, s.Y_all);
    double difference = relative_difference(y, whole);
    if (std::isnan(difference)) difference = std::numeric_limits<double>::infinity();
    double worst = difference;
    MPI_Allreduce(&difference, &worst, 1, MPI_DOUBLE, MPI_MAX, world.comm);
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
  }
  return status;
}

}  // namespace

int main(int argc, char* argv[]) {
  return MpiSharded::main_with_mpi(argc, argv, "mpi_sharded_linear", run);
}
