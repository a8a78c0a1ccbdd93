// SPDX-License-Identifier: Apache-2.0
// fused_linear_perf: checks, then times, every requested path of FusedLinear::linear_leaky_relu
// on one shape, on the default execution space; with --pass backward or step, its gradient
// (GradientPlan) or a training step (the layer, then its gradient). Prints a table and optionally
// writes JSON (read by perf/compare.py). Exit status: 0 when every path wrote every checked element
// and is within the error bound, 1 when one is not (or on a runtime error), 2 for a bad command
// line.
//   usage: fused_linear_perf --help
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <Kokkos_Core.hpp>
#include <Kokkos_Random.hpp>

#include <FusedLinear.hpp>

#include "cli.hpp"
#include "json.hpp"

namespace {

using Scalar = float;  // the one place the measured precision is chosen
constexpr const char* scalar_name = "float";
using ExecSpace = Kokkos::DefaultExecutionSpace;
using MemorySpace = ExecSpace::memory_space;
using Algorithm = FusedLinear::Algorithm;
using HostMatrix = Kokkos::View<Scalar**, Kokkos::LayoutRight, Kokkos::HostSpace>;

/// A path fails when its ||Y - ref|| / ||ref|| over the checked rows exceeds this, a bound
/// derived from K and the precision rather than one number for all (u = 2^-24, fp32's unit
/// roundoff): a K-term fp32 dot product with errors of random sign grows like sqrt(K) u
/// (measured on an H200 at K = 8192: strict 1.6e-6 against sqrt(K) u = 5.4e-6), so strict
/// allows 4 sqrt(K) u. 3xTF32 adds its ranges' sums in fp32 (the same sqrt(K) u) on top of a
/// per-range error bounded by its range length, not by K, which stays under strict fp32's error
/// at the reference shape (1.5e-6): a regression to accumulating all of K in the tensor cores
/// (1.9e-5 at K = 8192) fails it. TF32 rounds each operand to 2^-11: 1.5e-3 allows 5x the
/// measured 2.9e-4. A missing tile or a wrong bias moves the error far above any of them.
double max_rel_err(FusedLinear::Precision p, std::int64_t K) {
  const double root_k_u = std::sqrt(double(std::max<std::int64_t>(K, 1))) * std::ldexp(1.0, -24);
  switch (p) {
    case FusedLinear::Precision::TF32: return 1.5e-3;
    case FusedLinear::Precision::TF32x3: return 1.5e-6 + root_k_u;
    case FusedLinear::Precision::Strict: break;
  }
  return std::max(4 * root_k_u, 1e-6);
}

/// The default shape: a host run must finish in seconds on two cores, even where the host BLAS
/// is the reference BLAS (~4 GFLOP/s); a device run uses the reference model's layer.
struct Shape {
  std::int64_t M, K, N;
};
constexpr bool runs_on_host =
    Kokkos::SpaceAccessibility<Kokkos::HostSpace, ExecSpace::memory_space>::accessible;
constexpr Shape default_shape = runs_on_host ? Shape{128, 1024, 512} : Shape{1024, 8192, 8192};
/// Up to this many multiply-adds the reference checks every row; above, sampled rows.
constexpr double all_rows_limit = 8589934592.0;  // 2^33
constexpr std::int64_t sampled_rows = 256;

using FusedLinear::all_algorithms;
/// The paths of the gradient's products (GradientOptions::algorithm): --pass's default list.
constexpr Algorithm gradient_algorithms[] = {Algorithm::Auto, Algorithm::Vendor,
                                             Algorithm::VendorLt, Algorithm::FusedSm90};

enum class Pass { Forward, Backward, Step };
const char* to_string(Pass p) {
  return p == Pass::Forward ? "forward" : p == Pass::Backward ? "backward" : "step";
}

struct Config {
  Shape shape = default_shape;
  double multiplier = 2.0, slope = 0.1;
  std::vector<Algorithm> algorithms{std::begin(all_algorithms), std::end(all_algorithms)};
  int warmup = 5, reps = 30;
  double min_time_ms = 100;  // timed rounds past `reps` until they add up to this
  std::uint64_t seed =
      static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  std::string json_path;
  std::int64_t check_rows = 0;  // 0: the default, resolved from the shape in parse_args
  bool layout_left = false;
  int alignment = 0;  // 0: as Kokkos allocates
  FusedLinear::Precision precision = FusedLinear::Precision::Strict;
  bool one_shot = false;  // time linear_leaky_relu instead of Plan::execute
  // How the plans choose (Planning::Measure times the candidates when a plan is made); `both`:
  // every path planned as estimated, plus auto planned by measuring, timed in the same rounds.
  FusedLinear::Planning planning = FusedLinear::Planning::Estimate;
  bool both_plannings = false;
  // What is timed: the layer, its gradient (GradientPlan: dX, dW, db), or a training step (the
  // layer's plan, then the gradient's on its Y).
  Pass pass = Pass::Forward;
  FusedLinear::Saved saved = FusedLinear::Saved::Output;  // --pass backward's `saved` View
  bool algorithms_given = false;  // --algorithm: otherwise the pass's own default list
};

/// The command line, each option setting its field of `c` (Kokkos removes its own options from
/// argv first). --check-rows' default depends on the shape: resolve_defaults sets it after.
FusedLinearCli::Cli command_line(Config& c) {
  using Int = std::int64_t;
  const auto one_of = [](const std::string& value, std::initializer_list<const char*> names) {
    std::string list;  // "a, b or c"
    std::size_t i = 0;
    for (const char* n : names) {
      if (value == n) return;
      list += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + std::string(n);
      ++i;
    }
    throw std::invalid_argument("takes " + list + ", got '" + value + "'");
  };
  FusedLinearCli::Cli cli("fused_linear_perf",
                          "fused_linear_perf [options] [Kokkos options, e.g. --kokkos-threads=N]");
  const std::string on = std::string(" on ") + ExecSpace::name() + ")";
  std::string algorithms;
  for (const Algorithm a : all_algorithms)
    algorithms += FusedLinear::to_string(a) + std::string(", ");
  cli.integer("--m", "M", c.shape.M, Int(1),
              "rows of X [M,K] and Y [M,N] (default " + std::to_string(default_shape.M) + on)
      .integer("--k", "K", c.shape.K, Int(1),
               "columns of X and of W [N,K] (default " + std::to_string(default_shape.K) + on)
      .integer(
          "--n", "N", c.shape.N, Int(1),
          "rows of W, columns of Y, length of b (default " + std::to_string(default_shape.N) + on)
      .number("--multiplier", "X", c.multiplier, "scale after the bias (default 2.0)")
      .number("--slope", "S", c.slope, "LeakyReLU negative slope (default 0.1)")
      .option(
          "--algorithm", "LIST",
          [&c](const std::string& list) {
            c.algorithms_given = true;
            if (list == "all") {
              c.algorithms.assign(std::begin(all_algorithms), std::end(all_algorithms));
              return;
            }
            c.algorithms.clear();
            for (const std::string& name : FusedLinearCli::split_list(list))
              c.algorithms.push_back(FusedLinear::algorithm_from_string(name));
            if (c.algorithms.empty()) throw std::invalid_argument("empty list");
          },
          "a comma list (no spaces) of " + algorithms +
              "or all (default: every path that can run the precision here; with --pass "
              "backward or step: auto, vendor, vendor_lt, fused_sm90, the gradient's paths)")
      .option(
          "--precision", "P",
          [&c](const std::string& p) { c.precision = FusedLinear::precision_from_string(p); },
          "strict (default), tf32 (vendor paths with cuBLAS) or 3xtf32 (those too, and "
          "fused_sm90 on Hopper GPUs); under auto a floor")
      .option(
          "--api", "plan|oneshot",
          [&c, one_of](const std::string& api) {
            one_of(api, {"plan", "oneshot"});
            c.one_shot = api == "oneshot";
          },
          "time Plan::execute on a plan made once (default), or the one-shot linear_leaky_relu "
          "call (which finds its cached plan)")
      .option(
          "--planning", "P",
          [&c, one_of](const std::string& planning) {
            one_of(planning, {"estimate", "measure", "both"});
            c.both_plannings = planning == "both";
            if (!c.both_plannings) c.planning = FusedLinear::planning_from_string(planning);
          },
          "estimate (default: auto's rule), measure (every plan made with Planning::Measure: "
          "auto times its candidates, vendor_lt cuBLASLt's algorithms) or both (the paths as "
          "estimated, plus auto measured, in the same rounds); the time to make each plan is "
          "reported, and for a measured one the time to make it again from wisdom")
      .option(
          "--pass", "forward|backward|step",
          [&c, one_of](const std::string& pass) {
            one_of(pass, {"forward", "backward", "step"});
            c.pass = pass == "forward"    ? Pass::Forward
                     : pass == "backward" ? Pass::Backward
                                          : Pass::Step;
          },
          "what is timed: the layer (default), its gradient (GradientPlan::execute: dX, dW and "
          "db for an upstream gradient dY, on the `saved` View a forward plan wrote once) or a "
          "training step (Plan::execute, then GradientPlan::execute on its Y); each path's "
          "plans made with its options, the outputs checked against a float64 host reference "
          "(the gradient's from the sign of the saved View, as the library reads it)")
      .option(
          "--saved", "output|preactivation|sign",
          [&c, one_of](const std::string& saved) {
            one_of(saved, {"output", "preactivation", "sign"});
            c.saved = saved == "output"          ? FusedLinear::Saved::Output
                      : saved == "preactivation" ? FusedLinear::Saved::PreActivation
                                                 : FusedLinear::Saved::Sign;
          },
          "--pass backward: the gradient reads Y (default), the pre-activation z (the forward "
          "with slope 1) or a bool mask of z > 0 (from that z), GradientOptions::saved")
      .integer("--warmup", "N", c.warmup, 0,
               "untimed calls per path after the checked one, and at least 100 ms of them "
               "(default 5)")
      .integer("--reps", "N", c.reps, 1,
               "timed calls per path (default 30), in rounds of one call of each path in a "
               "random order, each timed alone: CUDA events around the call on CUDA (as the "
               "PyTorch peers), else fences")
      .number("--min-time-ms", "T", c.min_time_ms,
              "more rounds than --reps where they take less than T ms in all (default 100, at "
              "most 1000 rounds): small layers' medians steady")
      .integer("--seed", "S", c.seed, std::uint64_t(0),
               "random seed (default: from the clock; printed)")
      .integer("--check-rows", "R", c.check_rows, Int(1),
               "rows checked against the float64 host reference (default: all when M*N*K <= "
               "2^33, else " +
                   std::to_string(sampled_rows) + " evenly spaced)")
      .option(
          "--layout", "left|right",
          [&c, one_of](const std::string& layout) {
            one_of(layout, {"left", "right"});
            c.layout_left = layout == "left";
          },
          "layout of X, W, b and Y (default right, PyTorch's)")
      .option(
          "--alignment", "A",
          [&c](const std::string& a) {
            c.alignment = FusedLinearCli::parse_integer<int>(a, 16, 1024);
            if ((c.alignment & (c.alignment - 1)) != 0)
              throw std::invalid_argument("takes a power of two, got " + a);
          },
          "place X, W and Y at addresses aligned to exactly A bytes (a power of two, 16..1024; "
          "default: where Kokkos' allocation puts them)")
      .text("--json", "FILE", c.json_path,
            "also write the results (and Kokkos' configuration) as JSON");
  return cli;
}

/// The defaults that depend on other options, and the combinations refused.
void resolve_defaults(Config& c) {
  const Shape& s = c.shape;
  if (c.pass != Pass::Forward && !c.algorithms_given)
    c.algorithms.assign(std::begin(gradient_algorithms), std::end(gradient_algorithms));
  if (c.pass == Pass::Step && c.saved != FusedLinear::Saved::Output)
    throw std::invalid_argument(
        "--saved: a training step saves its Y (--pass backward times the gradient on z or on "
        "a mask)");
  if (c.check_rows == 0)
    c.check_rows = double(s.M) * double(s.N) * double(s.K) <= all_rows_limit ? s.M : sampled_rows;
  c.check_rows = std::min(c.check_rows, s.M);
}

/// The rows compared with the reference: all of them, or `count` evenly spaced ones that
/// include the first and the last (where partial tiles are).
std::vector<std::int64_t> checked_rows(std::int64_t M, std::int64_t count) {
  std::vector<std::int64_t> rows(count);
  for (std::int64_t r = 0; r < count; ++r) rows[r] = count == 1 ? 0 : r * (M - 1) / (count - 1);
  return rows;
}

/// Agreement of one path's output with the reference over the checked rows.
struct Accuracy {
  double rel_err = 0, max_abs_err = 0;
  /// Checked elements left non-finite (the NaN poison survived) where the reference is finite;
  /// they are left out of the two errors above and fail the run on their own.
  std::int64_t unwritten = 0;
};

/// An Accuracy summed element by element: a non-finite reference is skipped (random inputs in
/// range never produce one), a non-finite result counted as unwritten.
struct AccuracySum {
  Accuracy a;
  double err2 = 0, ref2 = 0;
  void add(double expected, double got) {
    if (!std::isfinite(expected)) return;
    if (!std::isfinite(got)) {
      ++a.unwritten;
      return;
    }
    const double d = got - expected;
    err2 += d * d;
    ref2 += expected * expected;
    a.max_abs_err = std::max(a.max_abs_err, std::abs(d));
  }
  Accuracy result() {
    a.rel_err = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
    return a;
  }
};

template <class YHost>
Accuracy compare(const YHost& y, const std::vector<std::int64_t>& rows,
                 const Kokkos::View<double**, Kokkos::LayoutRight, Kokkos::HostSpace>& ref) {
  AccuracySum sum;
  for (std::size_t r = 0; r < rows.size(); ++r)
    for (std::int64_t j = 0; j < static_cast<std::int64_t>(ref.extent(1)); ++j)
      sum.add(ref(r, j), y(rows[r], j));
  return sum.result();
}

/// Milliseconds of one call. On CUDA, events recorded on the stream before and after it, as
/// torch_peers.py times the PyTorch peers (launch gaps included, the host's fence latency not);
/// elsewhere a host timer between fences.
template <class Call>
double time_one_call(const Call& call) {
  Kokkos::fence();
#if defined(KOKKOS_ENABLE_CUDA)
  if (std::is_same<ExecSpace, Kokkos::Cuda>::value) {
    const cudaStream_t stream = Kokkos::Cuda().cuda_stream();
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start, stream);
    call();
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return ms;
  }
#endif
  Kokkos::Timer timer;
  call();
  Kokkos::fence();
  return timer.seconds() * 1e3;
}

struct Result {
  Algorithm requested;
  FusedLinear::Options options;
  FusedLinear::RunInfo info;
  Accuracy accuracy;
  double median_ms, min_ms, gflops, gbs;
  std::string refused;  // why the path cannot run here (then nothing else is set)
  // Making the plan (fences around it; a measured plan times its candidates then), and making
  // the same plan again right after, from the wisdom the first left (measured plans only).
  int reps = 0;  // timed calls (--reps, or more under --min-time-ms)
  double plan_ms = std::numeric_limits<double>::quiet_NaN();
  double wisdom_plan_ms = std::numeric_limits<double>::quiet_NaN();
  std::vector<FusedLinear::Measurement> measurements;
};

/// Host copy of a View in LayoutRight, so the reference streams rows whatever the layout.
template <class View>
HostMatrix host_row_major(const View& A) {
  HostMatrix out(Kokkos::view_alloc(Kokkos::WithoutInitializing, A.label()), A.extent(0),
                 A.extent(1));
  Kokkos::deep_copy(out, Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), A));
  return out;
}

/// What a process pays for once, whichever plan comes first (cuBLAS's and cuBLASLt's handles,
/// the host BLAS's threads): a vendor and a vendor_lt plan of a 1x16x16 layer, made, run and
/// kept to the end as an application's would be, so that each plan_ms is the plan's own cost.
/// `ms`: how long it took.
template <class Layout>
struct LibrariesInitialised {
  using Matrix = Kokkos::View<Scalar**, Layout, MemorySpace>;
  using Vector = Kokkos::View<Scalar*, Layout, MemorySpace>;
  using Plan = FusedLinear::Plan<ExecSpace, Matrix, Matrix, Vector, Matrix>;
  Matrix X{"X", 1, 16}, W{"W", 16, 16}, Y{"Y", 1, 16};
  Vector b{"b", 16};
  std::vector<std::unique_ptr<Plan>> plans;
  double ms = 0;
  LibrariesInitialised() {
    Kokkos::fence();
    Kokkos::Timer timer;
    for (const Algorithm a : {Algorithm::Vendor, Algorithm::VendorLt}) {
      plans.emplace_back(new Plan(ExecSpace(), X, W, b, Y, Scalar(1), Scalar(0.1), a));
      plans.back()->execute(X, W, b, Y);
    }
    Kokkos::fence();
    ms = timer.seconds() * 1e3;
  }
};

inline auto uninitialized(const std::string& label) {
  return Kokkos::view_alloc(Kokkos::WithoutInitializing, label);
}

/// Each matrix lives in a managed buffer, seen through an unmanaged View whose first element
/// sits where --alignment asks (cuBLAS's kernel choice may depend on it: PyTorch's tensors are
/// 512-byte aligned, Kokkos 3.4 puts a View's data 128 bytes after its allocation's start).
template <class Matrix>
class AlignedMatrices {
 public:
  explicit AlignedMatrices(int alignment) : m_alignment(alignment) {}
  Matrix operator()(const std::string& label, std::int64_t rows, std::int64_t cols) {
    const std::size_t bytes = sizeof(Scalar) * std::size_t(rows) * std::size_t(cols);
    m_buffers.emplace_back(uninitialized(label), bytes + 2048);
    std::uintptr_t p = reinterpret_cast<std::uintptr_t>(m_buffers.back().data());
    if (m_alignment > 0) {
      p = (p + 1023) / 1024 * 1024;
      if (m_alignment < 1024) p += m_alignment;  // aligned to exactly `alignment`
    }
    return Matrix(reinterpret_cast<Scalar*>(p), rows, cols);
  }

 private:
  int m_alignment;
  std::vector<Kokkos::View<char*, MemorySpace>> m_buffers;
};

/// As the reference model's inputs: X uniform [0, 1), W and b as nn.Linear initialises them.
template <class Matrix, class Vector>
void fill_inputs(const Matrix& X, const Matrix& W, const Vector& b, std::uint64_t seed) {
  Kokkos::Random_XorShift64_Pool<ExecSpace> pool(seed);
  const Scalar bound = Scalar(1) / std::sqrt(Scalar(X.extent(1)));
  Kokkos::fill_random(X, pool, Scalar(0), Scalar(1));
  Kokkos::fill_random(W, pool, -bound, bound);
  Kokkos::fill_random(b, pool, -bound, bound);
  Kokkos::fence();
}

/// The layer's float64 host reference on the given rows of X only (gathered, a smaller X).
template <class Matrix, class Vector>
Kokkos::View<double**, Kokkos::LayoutRight, Kokkos::HostSpace> forward_reference(
    const Matrix& X, const Matrix& W, const Vector& b, const std::vector<std::int64_t>& rows,
    const Config& c) {
  const std::int64_t K = X.extent(1);
  const auto x_all = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), X);
  HostMatrix x_rows(uninitialized("X checked rows"), rows.size(), K);
  for (std::size_t r = 0; r < rows.size(); ++r)
    for (std::int64_t k = 0; k < K; ++k) x_rows(r, k) = x_all(rows[r], k);
  return FusedLinear::reference_linear_leaky_relu(
      x_rows, host_row_major(W), Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), b),
      c.multiplier, c.slope);
}

/// Warm-up, then the timed rounds of `call(i)` for each i of `runnable` (of `count` results):
/// each runnable one's times, sorted (empty for the others).
template <class Call>
std::vector<std::vector<double>> warm_up_and_time(const Config& c,
                                                  const std::vector<std::size_t>& runnable,
                                                  std::size_t count, const Call& call) {
  // Warm-up: at least --warmup calls of each path and 100 ms, so that the GPU's clocks have
  // ramped up again after the host-side checks (without it the first paths timed ran up to 7%
  // slow).
  int reps = c.reps;
  if (!runnable.empty()) {
    Kokkos::Timer warm;
    int rounds = 0;
    for (; rounds < c.warmup || warm.seconds() < 0.1; ++rounds) {
      for (const std::size_t p : runnable) call(p);
      if (rounds % 16 == 15) Kokkos::fence();  // bound the queue: the timer must see the GPU's time
    }
    Kokkos::fence();
    const double round_ms = warm.seconds() * 1e3 / rounds;
    reps = std::max(reps, std::min(1000, int(std::ceil(c.min_time_ms / round_ms))));
  }
  // Timed in rounds, each path once per round, in a fresh random order each round: a drift of
  // the GPU's clocks or of the host touches every path alike, and no path always follows the
  // same one, so paths that run the same kernel time alike. (Timed one path after the other,
  // auto and fused_skinny at 128x1024x512 once differed by 7.7%; in rounds of one fixed order
  // or its rotations, where auto always followed the two fused kernels, auto and vendor_lt
  // differed by 8.5% at 64x8192x8192 and 19% at 128x4096x1024.)
  std::vector<std::vector<double>> ms(count);
  for (const std::size_t i : runnable) ms[i].resize(reps);
  std::vector<std::size_t> order = runnable;
  std::mt19937_64 shuffle(c.seed);
  for (int rep = 0; rep < reps; ++rep) {
    std::shuffle(order.begin(), order.end(), shuffle);
    for (const std::size_t i : order) ms[i][rep] = time_one_call([&] { call(i); });
  }
  for (std::vector<double>& t : ms) std::sort(t.begin(), t.end());
  return ms;
}

/// Runs the whole method on one layout: inputs, reference, then check and time each path.
template <class Layout>
std::vector<Result> run(const Config& c) {
  using Matrix = Kokkos::View<Scalar**, Layout, MemorySpace, Kokkos::MemoryUnmanaged>;
  using Vector = Kokkos::View<Scalar*, Layout, MemorySpace>;
  const auto M = c.shape.M, K = c.shape.K, N = c.shape.N;
  AlignedMatrices<Matrix> matrix(c.alignment);
  const Matrix X = matrix("X", M, K), W = matrix("W", N, K), Y = matrix("Y", M, N);
  Vector b(uninitialized("b"), N);
  fill_inputs(X, W, b, c.seed);

  // The reference, once, on the checked rows of X only (the gathered rows form a smaller X).
  const std::vector<std::int64_t> rows = checked_rows(M, c.check_rows);
  const auto ref = forward_reference(X, W, b, rows, c);
  auto y_host = Kokkos::create_mirror_view(Y);

  const double flops = 2.0 * double(M) * double(N) * double(K);
  const double bytes = sizeof(Scalar) * (double(M) * K + double(N) * K + N + double(M) * N);
  // One plan per path, made once (as an application would); or the one-shot call, which finds
  // the plan it made on its first call. A path that cannot run here (a precision it does not
  // have, a kernel for another GPU) is listed as refused, with the reason.
  using Plan = FusedLinear::Plan<ExecSpace, Matrix, Matrix, Vector, Matrix>;
  std::vector<std::unique_ptr<Plan>> plans;  // one per result; null where refused
  std::vector<Result> results;
  std::vector<FusedLinear::Options> requests;
  for (const Algorithm a : c.algorithms) {
    requests.emplace_back(a, c.precision, c.planning);
    if (c.both_plannings && a == Algorithm::Auto)
      requests.emplace_back(a, c.precision, FusedLinear::Planning::Measure);
  }
  const auto make_plan = [&](const FusedLinear::Options& o, double& ms) {
    Kokkos::fence();
    Kokkos::Timer timer;
    std::unique_ptr<Plan> plan(
        new Plan(ExecSpace(), X, W, b, Y, Scalar(c.multiplier), Scalar(c.slope), o));
    Kokkos::fence();
    ms = timer.seconds() * 1e3;
    return plan;
  };
  for (const FusedLinear::Options& o : requests) {
    const double none = std::numeric_limits<double>::quiet_NaN();  // JSON null: not timed
    Result r{o.algorithm, o, {}, {}, none, none, none, none, {}};
    try {
      plans.push_back(make_plan(o, r.plan_ms));
      r.info = plans.back()->info();
      r.measurements = plans.back()->measurements();
      if (r.info.measured) make_plan(o, r.wisdom_plan_ms);  // from the wisdom just left
    } catch (const std::invalid_argument& e) {
      plans.emplace_back();
      r.refused = e.what();
    }
    results.push_back(r);
  }
  std::vector<std::size_t> runnable;
  for (std::size_t i = 0; i < results.size(); ++i)
    if (plans[i]) runnable.push_back(i);
  const auto call = [&](std::size_t i) {
    if (c.one_shot)
      FusedLinear::linear_leaky_relu(ExecSpace(), X, W, b, Y, Scalar(c.multiplier), Scalar(c.slope),
                                     results[i].options);
    else
      plans[i]->execute(X, W, b, Y);
  };
  for (const std::size_t i : runnable) {
    // Checked call: an element the path never writes keeps the NaN and is counted.
    Kokkos::deep_copy(Y, std::numeric_limits<Scalar>::quiet_NaN());
    call(i);
    Kokkos::fence();
    Kokkos::deep_copy(y_host, Y);
    results[i].accuracy = compare(y_host, rows, ref);
  }

  const std::vector<std::vector<double>> ms = warm_up_and_time(c, runnable, results.size(), call);
  for (const std::size_t i : runnable) {
    const std::vector<double>& t = ms[i];
    Result& r = results[i];
    // The upper median, times[n/2], as torch_peers.py takes it: ratios compare like with like.
    r.median_ms = t[t.size() / 2];
    r.min_ms = t.front();
    r.reps = int(t.size());
    r.gflops = flops / (r.median_ms * 1e-3) / 1e9;
    r.gbs = bytes / (r.median_ms * 1e-3) / 1e9;
  }
  return results;
}

// ------------------------------------------------------------------------- the gradient

using HostReference = Kokkos::View<double**, Kokkos::LayoutRight, Kokkos::HostSpace>;
using HostReferenceVector = Kokkos::View<double*, Kokkos::LayoutRight, Kokkos::HostSpace>;

/// Agreement of a vector with its float64 reference, every element (as compare's).
template <class VHost>
Accuracy compare_vector(const VHost& v, const HostReferenceVector& ref) {
  AccuracySum sum;
  for (std::size_t j = 0; j < ref.extent(0); ++j) sum.add(ref(j), v(j));
  return sum.result();
}

/// The gradient in float64 on the checked rows of dX [M,K] and dW [N,K], and all of db.
struct GradientReference {
  HostReference dx, dw;
  Kokkos::View<double*, Kokkos::LayoutRight, Kokkos::HostSpace> db;
};

/// A[rows, cols] of a host matrix, copied into LayoutLeft: the library's reference runs its
/// sums down columns of W and X, which LayoutLeft keeps contiguous.
template <class V>
Kokkos::View<typename V::non_const_value_type**, Kokkos::LayoutLeft, Kokkos::HostSpace> gathered(
    const V& a, const std::vector<std::int64_t>& rows, const std::vector<std::int64_t>& cols) {
  Kokkos::View<typename V::non_const_value_type**, Kokkos::LayoutLeft, Kokkos::HostSpace> out(
      uninitialized("perf gathered"), rows.size(), cols.size());
  for (std::size_t c = 0; c < cols.size(); ++c)
    for (std::size_t r = 0; r < rows.size(); ++r) out(r, c) = a(rows[r], cols[c]);
  return out;
}

std::vector<std::int64_t> all_of(std::int64_t n) {
  std::vector<std::int64_t> v(n);
  std::iota(v.begin(), v.end(), std::int64_t(0));
  return v;
}

/// The gradient's float64 host reference, FusedLinear::reference_linear_leaky_relu_backward
/// (G = (saved > 0 ? dY : dY * slope) * multiplier, dX = G W, dW = G^T X, db = G's column
/// sums), on the checked rows: one call when every row is checked; otherwise three on gathered
/// operands, so that a sampled reference costs what its rows need (1024x8192x8192: 3.9e10
/// multiply-adds instead of 1.4e11): the checked rows of dY and saved (dX's rows), the checked
/// columns of dY and saved with W's checked rows (dW's rows), and X and W with no columns (db).
/// The sign comes from the `saved` View the library reads (Y, z or a mask): where fp32 rounded
/// a z near 0 to the other side of 0 than float64 would, one element of G changes by
/// |dY| multiplier (1 - slope), moving a row of dX and of dW far beyond any bound, though it is
/// the forward's rounding, which the forward's check counts.
template <class HostView, class HostSaved>
GradientReference gradient_reference(const HostView& x, const HostView& w, const HostView& dy,
                                     const HostSaved& saved,
                                     const std::vector<std::int64_t>& rows_x,
                                     const std::vector<std::int64_t>& rows_w, double multiplier,
                                     double slope) {
  const std::int64_t M = x.extent(0), K = x.extent(1), N = w.extent(0);
  const std::vector<std::int64_t> all_m = all_of(M), all_k = all_of(K), all_n = all_of(N);
  const auto reference = [&](const std::vector<std::int64_t>& m, const std::vector<std::int64_t>& n,
                             const std::vector<std::int64_t>& k) {
    return FusedLinear::reference_linear_leaky_relu_backward(
        gathered(x, m, k), gathered(w, n, k), gathered(dy, m, n), gathered(saved, m, n), multiplier,
        slope);
  };
  if (std::int64_t(rows_x.size()) == M && std::int64_t(rows_w.size()) == N) {
    const FusedLinear::ReferenceGradient all = reference(all_m, all_n, all_k);
    return GradientReference{all.dX, all.dW, all.db};
  }
  return GradientReference{reference(rows_x, all_n, all_k).dX, reference(all_m, rows_w, all_k).dW,
                           reference(all_m, all_n, {}).db};
}

struct TrainingResult {
  FusedLinear::Options options;  // the path, precision and planning asked, of both plans
  FusedLinear::GradientOptions gradient_options;
  FusedLinear::RunInfo forward;  // --pass step: the layer's plan
  FusedLinear::GradientInfo gradient;
  Accuracy y, dx, dw, db;  // y: --pass step only
  double median_ms = std::numeric_limits<double>::quiet_NaN();
  double min_ms = std::numeric_limits<double>::quiet_NaN();
  double gflops = std::numeric_limits<double>::quiet_NaN();
  double gbs = std::numeric_limits<double>::quiet_NaN();
  double plan_ms = std::numeric_limits<double>::quiet_NaN();  // both plans, --pass step
  int reps = 0;
  std::string refused;  // why the path cannot run here (then nothing else is set)
};

/// mask(i, j) = z(i, j) > 0, for --saved sign (a functor: the device runs it).
template <class Mask, class Z>
struct SignOf {
  Mask mask;
  Z z;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i, std::int64_t j) const {
    mask(i, j) = z(i, j) > 0;
  }
};

/// --pass backward|step on one layout: inputs, plans, checks against the float64 reference,
/// then the timed rounds, as run() does for the layer. `Mask`: the value type of --saved sign's
/// View (Scalar otherwise: the gradient reads Y or z, written into Y).
template <class Layout, class Mask = Scalar>
std::vector<TrainingResult> run_training(const Config& c) {
  using Matrix = Kokkos::View<Scalar**, Layout, MemorySpace, Kokkos::MemoryUnmanaged>;
  using Vector = Kokkos::View<Scalar*, Layout, MemorySpace>;
  constexpr bool sign = !std::is_same<Mask, Scalar>::value;
  using Saved =
      typename std::conditional<sign, Kokkos::View<Mask**, Layout, MemorySpace>, Matrix>::type;
  using Plan = FusedLinear::Plan<ExecSpace, Matrix, Matrix, Vector, Matrix>;
  using GradientPlan =
      FusedLinear::GradientPlan<ExecSpace, Matrix, Matrix, Matrix, Saved, Matrix, Matrix, Vector>;
  const auto M = c.shape.M, K = c.shape.K, N = c.shape.N;
  const bool step = c.pass == Pass::Step;
  AlignedMatrices<Matrix> matrix(c.alignment);
  // Y: the step's output, or the `saved` View of --pass backward.
  const Matrix X = matrix("X", M, K), W = matrix("W", N, K), Y = matrix("Y", M, N);
  const Matrix dY = matrix("dY", M, N), dX = matrix("dX", M, K), dW = matrix("dW", N, K);
  Vector b(uninitialized("b"), N), db(uninitialized("db"), N);
  fill_inputs(X, W, b, c.seed);
  {
    // The loss's gradient, uniform [-1, 1), from a stream of its own: X, W and b are the
    // forward's of the same seed.
    Kokkos::Random_XorShift64_Pool<ExecSpace> pool(c.seed + 1);
    Kokkos::fill_random(dY, pool, Scalar(-1), Scalar(1));
    Kokkos::fence();
  }
  const Scalar multiplier(c.multiplier), slope(c.slope);
  Saved saved;  // what the gradient reads: Y (a step, --saved output or preactivation) or a mask
  if (!step) {
    // Written once, by the layer's auto plan: Y, or z (the layer with slope 1, the identity),
    // and for --saved sign the mask of z > 0 from that z.
    const bool z = c.saved != FusedLinear::Saved::Output;
    Plan(ExecSpace(), X, W, b, Y, multiplier, z ? Scalar(1) : slope, Algorithm::Auto)
        .execute(X, W, b, Y);
    Kokkos::fence();
  }
  if constexpr (sign) {
    saved = Saved(uninitialized("mask"), M, N);
    using Policy =
        Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>, Kokkos::IndexType<std::int64_t>>;
    Kokkos::parallel_for("perf::sign", Policy({0, 0}, {M, N}), SignOf<Saved, Matrix>{saved, Y});
    Kokkos::fence();
  } else {
    saved = Y;
  }

  // Checked: the rows of X (dX, and Y in a step) and of W (dW) that --check-rows gives.
  const std::vector<std::int64_t> rows_x = checked_rows(M, c.check_rows);
  const std::vector<std::int64_t> rows_w =
      checked_rows(N, std::min<std::int64_t>(c.check_rows == M ? N : c.check_rows, N));
  const HostReference y_ref = step ? forward_reference(X, W, b, rows_x, c) : HostReference();
  const HostMatrix x_host = host_row_major(X), w_host = host_row_major(W);
  const HostMatrix dy_host = host_row_major(dY);
  const auto reference = [&](const auto& saved_host) {
    return gradient_reference(x_host, w_host, dy_host, saved_host, rows_x, rows_w, c.multiplier,
                              c.slope);
  };
  GradientReference fixed;  // --pass backward: every path reads the same `saved`
  if (!step) fixed = reference(Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), saved));

  std::vector<FusedLinear::Options> requests;
  for (const Algorithm a : c.algorithms) {
    requests.emplace_back(a, c.precision, c.planning);
    if (c.both_plannings && a == Algorithm::Auto)
      requests.emplace_back(a, c.precision, FusedLinear::Planning::Measure);
  }
  // One plan per path (and one of the layer's for a step), made once; a path the gradient (or
  // the layer) refuses here is listed as refused, with the reason.
  std::vector<std::unique_ptr<Plan>> plans;
  std::vector<std::unique_ptr<GradientPlan>> gradients;  // null where refused
  std::vector<TrainingResult> results;
  for (const FusedLinear::Options& o : requests) {
    TrainingResult r;
    r.options = o;
    r.gradient_options.algorithm = o.algorithm;
    r.gradient_options.precision = o.precision;
    r.gradient_options.planning = o.planning;
    r.gradient_options.saved = step ? FusedLinear::Saved::Output : c.saved;
    std::unique_ptr<Plan> plan;
    std::unique_ptr<GradientPlan> gradient;
    try {
      Kokkos::fence();
      Kokkos::Timer timer;
      if (step) plan.reset(new Plan(ExecSpace(), X, W, b, Y, multiplier, slope, o));
      gradient.reset(new GradientPlan(ExecSpace(), X, W, dY, saved, dX, dW, db, multiplier, slope,
                                      r.gradient_options));
      Kokkos::fence();
      r.plan_ms = timer.seconds() * 1e3;
      if (plan) r.forward = plan->info();
      r.gradient = gradient->info();
    } catch (const std::invalid_argument& e) {
      plan.reset(), gradient.reset();
      r.refused = e.what();
    }
    plans.push_back(std::move(plan));
    gradients.push_back(std::move(gradient));
    results.push_back(r);
  }
  std::vector<std::size_t> runnable;
  for (std::size_t i = 0; i < results.size(); ++i)
    if (gradients[i]) runnable.push_back(i);
  const auto call = [&](std::size_t i) {
    const TrainingResult& r = results[i];
    if (c.one_shot) {
      if (step)
        FusedLinear::linear_leaky_relu(ExecSpace(), X, W, b, Y, multiplier, slope, r.options);
      FusedLinear::linear_leaky_relu_backward(ExecSpace(), X, W, dY, saved, dX, dW, db, multiplier,
                                              slope, r.gradient_options);
    } else {
      if (step) plans[i]->execute(X, W, b, Y);
      gradients[i]->execute(X, W, dY, saved, dX, dW, db);
    }
  };
  const Scalar nan = std::numeric_limits<Scalar>::quiet_NaN();
  for (const std::size_t i : runnable) {
    // Checked call: an element the path never writes keeps the NaN and is counted.
    if (step) Kokkos::deep_copy(Y, nan);
    Kokkos::deep_copy(dX, nan), Kokkos::deep_copy(dW, nan), Kokkos::deep_copy(db, nan);
    call(i);
    Kokkos::fence();
    TrainingResult& r = results[i];
    const HostMatrix y_host = step ? host_row_major(Y) : HostMatrix();
    const GradientReference ref = step ? reference(y_host) : fixed;
    if (step) r.y = compare(y_host, rows_x, y_ref);
    r.dx = compare(host_row_major(dX), rows_x, ref.dx);
    r.dw = compare(host_row_major(dW), rows_w, ref.dw);
    r.db = compare_vector(Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), db), ref.db);
  }

  const std::vector<std::vector<double>> ms = warm_up_and_time(c, runnable, results.size(), call);
  // Two products a backward, three a step; each matrix read or written once (the saved View
  // in its own value type: a mask of bool is a quarter of Y).
  const double mnk = double(M) * double(N) * double(K);
  const double flops = (step ? 6.0 : 4.0) * mnk;
  const double gradient_bytes =
      sizeof(Scalar) * (2.0 * (double(M) * K + double(N) * K) + double(M) * N + N) +
      sizeof(typename Saved::value_type) * double(M) * N;
  const double forward_bytes = sizeof(Scalar) * (double(M) * K + double(N) * K + N + double(M) * N);
  const double bytes = gradient_bytes + (step ? forward_bytes : 0);
  for (const std::size_t i : runnable) {
    const std::vector<double>& t = ms[i];
    TrainingResult& r = results[i];
    r.median_ms = t[t.size() / 2];  // the upper median, as run() and torch_peers.py take it
    r.min_ms = t.front();
    r.reps = int(t.size());
    r.gflops = flops / (r.median_ms * 1e-3) / 1e9;
    r.gbs = bytes / (r.median_ms * 1e-3) / 1e9;
  }
  return results;
}

std::string ran(const FusedLinear::RunInfo& info) {
  return std::string(FusedLinear::to_string(info.algorithm)) + "/" +
         FusedLinear::to_string(info.precision);
}

/// The largest relative error among the outputs a result checked.
double worst_rel_err(const TrainingResult& r, bool step) {
  double worst = std::max({r.dx.rel_err, r.dw.rel_err, r.db.rel_err});
  return step ? std::max(worst, r.y.rel_err) : worst;
}

void print_training_table(const std::vector<TrainingResult>& results, const Config& c) {
  const bool step = c.pass == Pass::Step;
  const char* const head =
      "%-15s %-8s %-19s %-19s %-19s %10s %10s %9s %9s %9s %9s %9s %9s %9s %10s\n";
  const char* const row =
      "%-15s %-8s %-19s %-19s %-19s %10.4f %10.4f %9.1f %9.1f %9s %9.2e %9.2e %9.2e %9lld "
      "%10.3f\n";
  std::printf(head, "algorithm", "planning", "y ran", "dx ran", "dw ran", "median ms", "min ms",
              "GFLOP/s", "GB/s", "err y", "err dx", "err dw", "err db", "unwritten", "plan ms");
  for (const TrainingResult& r : results) {
    if (!r.refused.empty()) continue;
    const long long unwritten = r.y.unwritten + r.dx.unwritten + r.dw.unwritten + r.db.unwritten;
    char y_err[16] = "-";  // a backward has no Y of its own
    if (step) std::snprintf(y_err, sizeof y_err, "%.2e", r.y.rel_err);
    std::printf(row, FusedLinear::to_string(r.options.algorithm),
                FusedLinear::to_string(r.options.planning), step ? ran(r.forward).c_str() : "-",
                ran(r.gradient.dx).c_str(), ran(r.gradient.dw).c_str(), r.median_ms, r.min_ms,
                r.gflops, r.gbs, y_err, r.dx.rel_err, r.dw.rel_err, r.db.rel_err, unwritten,
                r.plan_ms);
  }
  for (const TrainingResult& r : results) {
    const char* name = FusedLinear::to_string(r.options.algorithm);
    if (!r.refused.empty()) {
      std::cout << "refused (" << name << "): " << r.refused << '\n';
      continue;
    }
    const std::pair<const char*, const FusedLinear::RunInfo*> infos[] = {
        {"y", &r.forward}, {"dx", &r.gradient.dx}, {"dw", &r.gradient.dw}};
    for (const auto& info : infos)
      if (!info.second->note.empty())
        std::cout << "note (" << name << ", " << info.first << "): " << info.second->note << '\n';
  }
}

/// Prints why each failing path fails; true when all pass (refused paths did not run). Each
/// output's bound is max_rel_err's for the precision its product ran and its reduction: K for
/// Y, N for dX = G W, M for dW = G^T X; db (summed in double) strict's for M.
bool all_training_pass(const std::vector<TrainingResult>& results, const Config& c) {
  const bool step = c.pass == Pass::Step;
  bool ok = true;
  for (const TrainingResult& r : results) {
    if (!r.refused.empty()) continue;
    const char* name = FusedLinear::to_string(r.options.algorithm);
    struct Check {
      const char* output;
      const Accuracy& accuracy;
      FusedLinear::Precision precision;
      std::int64_t reduction;
    };
    std::vector<Check> checks{{"dX", r.dx, r.gradient.dx.precision, c.shape.N},
                              {"dW", r.dw, r.gradient.dw.precision, c.shape.M},
                              {"db", r.db, FusedLinear::Precision::Strict, c.shape.M}};
    if (step) checks.push_back({"Y", r.y, r.forward.precision, c.shape.K});
    for (const Check& k : checks) {
      if (k.accuracy.unwritten > 0) {
        std::cout << "FAIL " << name << ": " << k.accuracy.unwritten << " checked elements of "
                  << k.output << " are not finite where the reference is\n";
        ok = false;
      }
      const double bound = max_rel_err(k.precision, k.reduction);
      if (!(k.accuracy.rel_err <= bound)) {  // NaN fails too
        std::cout << "FAIL " << name << ": " << k.output << "'s relative error "
                  << k.accuracy.rel_err << " exceeds " << bound << " ("
                  << FusedLinear::to_string(k.precision) << ", reduction " << k.reduction << ")\n";
        ok = false;
      }
    }
  }
  return ok;
}

std::string kokkos_version() {
  std::ostringstream os;
  os << KOKKOS_VERSION / 10000 << '.' << KOKKOS_VERSION / 100 % 100 << '.' << KOKKOS_VERSION % 100;
  return os.str();
}

/// Kokkos' own account of its build and devices: too long for the console, kept in the JSON.
std::string kokkos_configuration() {
  std::ostringstream os;
  Kokkos::print_configuration(os);
  return os.str();
}

std::string shape_string(const Shape& s) {
  return std::to_string(s.M) + 'x' + std::to_string(s.K) + 'x' + std::to_string(s.N);
}

/// What each timed call is, for the header.
const char* saved_name(FusedLinear::Saved s) {
  return s == FusedLinear::Saved::Output          ? "output"
         : s == FusedLinear::Saved::PreActivation ? "preactivation"
                                                  : "sign";
}

std::string timed_calls(const Config& c) {
  const std::string forward = c.one_shot ? "one-shot linear_leaky_relu" : "Plan::execute";
  const std::string gradient =
      c.one_shot ? "one-shot linear_leaky_relu_backward" : "GradientPlan::execute";
  switch (c.pass) {
    case Pass::Forward: return forward;
    case Pass::Backward: return gradient + " (saved: " + saved_name(c.saved) + ")";
    case Pass::Step: break;
  }
  return forward + " then " + gradient + " (a training step)";
}

void print_header(const Config& c) {
  std::cout << "FusedLinear " << FUSED_LINEAR_VERSION_STRING
            << " perf: Y = LeakyReLU(multiplier * (X . W^T + b), slope), " << scalar_name
            << "\nKokkos " << kokkos_version() << ": execution space " << ExecSpace::name()
            << ", memory space " << MemorySpace::name() << ", concurrency "
            << ExecSpace().concurrency() << "\nshape MxKxN " << shape_string(c.shape) << ", layout "
            << (c.layout_left ? "left" : "right")
            << (c.alignment ? ", alignment " + std::to_string(c.alignment) : std::string())
            << ", precision " << FusedLinear::to_string(c.precision) << ", multiplier "
            << c.multiplier << ", slope " << c.slope << ", seed " << c.seed << ", warm-up "
            << c.warmup << ", reps " << c.reps << "\nhost BLAS library: "
            << (FusedLinear::Impl::blas_library_path().empty()
                    ? std::string("none found")
                    : FusedLinear::Impl::blas_library_path())
            << ", timed: " << timed_calls(c) << ", planning: "
            << (c.both_plannings ? "both (auto also measured)" : FusedLinear::to_string(c.planning))
            << "\nchecked against the float64 host reference: "
            << (c.check_rows == c.shape.M ? "all " : "") << c.check_rows << " of " << c.shape.M
            << " rows\n\n"
            << std::flush;  // what runs shows while it runs, through a pipe too
}

void print_table(const std::vector<Result>& results) {
  // Widths fit the longest values: "vendor_prefill" and the longest Gemm name.
  const char* const head = "%-15s %-8s %-15s %-7s %-37s %10s %10s %9s %9s %10s %12s %10s %10s\n";
  const char* const row =
      "%-15s %-8s %-15s %-7s %-37s %10.4f %10.4f %9.1f %9.1f %10.2e %12.2e %10lld %10.3f\n";
  std::printf(head, "algorithm", "planning", "ran", "arith", "gemm", "median ms", "min ms",
              "GFLOP/s", "GB/s", "rel err", "max abs err", "unwritten", "plan ms");
  for (const Result& r : results)
    if (r.refused.empty())
      std::printf(row, FusedLinear::to_string(r.requested),
                  FusedLinear::to_string(r.options.planning),
                  FusedLinear::to_string(r.info.algorithm),
                  FusedLinear::to_string(r.info.precision), FusedLinear::to_string(r.info.gemm),
                  r.median_ms, r.min_ms, r.gflops, r.gbs, r.accuracy.rel_err,
                  r.accuracy.max_abs_err, static_cast<long long>(r.accuracy.unwritten), r.plan_ms);
  for (const Result& r : results) {
    if (r.info.measured) {
      std::cout << "measured (" << FusedLinear::to_string(r.requested) << "): plan made in "
                << r.plan_ms << " ms, again from wisdom in " << r.wisdom_plan_ms << " ms;";
      for (const FusedLinear::Measurement& m : r.measurements)
        std::cout << ' ' << FusedLinear::to_string(m.algorithm) << '/'
                  << FusedLinear::to_string(m.precision)
                  << (m.variant ? "#" + std::to_string(m.variant) : std::string()) << ' ' << m.ms
                  << " ms (" << m.calls << (m.calls == 1 ? " call)" : " calls)")
                  << (m.chosen ? " chosen" : "") << ';';
      std::cout << '\n';
    }
  }
  for (const Result& r : results) {
    if (!r.refused.empty())
      std::cout << "refused (" << FusedLinear::to_string(r.requested) << "): " << r.refused << '\n';
    else if (!r.info.note.empty())
      std::cout << "note (" << FusedLinear::to_string(r.requested) << "): " << r.info.note << '\n';
  }
}

/// The rates the GPU cost model counted in and where they came from (zero on the host).
std::string gpu_rates_json(const FusedLinear::GpuRates& g) {
  return FusedLinearJson::Object()
      .number("multiprocessors", g.multiprocessors)
      .number("fp32_gflops", g.fp32_gflops)
      .number("memory_gbps", g.memory_gbps)
      .string("source", FusedLinear::to_string(g.source))
      .string("note", g.note)
      .str();
}

/// The run's configuration (and Kokkos'), the JSON's "config".
FusedLinearJson::Object config_json(const Config& c, double library_init_ms) {
  using FusedLinear::to_string;
  FusedLinearJson::Object config;
  config.string("fused_linear_version", FUSED_LINEAR_VERSION_STRING)
      .string("kokkos_version", kokkos_version())
      .string("execution_space", ExecSpace::name())
      .string("memory_space", MemorySpace::name())
      .integer("concurrency", ExecSpace().concurrency())
      .string("scalar", scalar_name)
      .string("shape", shape_string(c.shape))
      .integer("M", c.shape.M)
      .integer("K", c.shape.K)
      .integer("N", c.shape.N)
      .string("layout", c.layout_left ? "left" : "right")
      .string("precision", to_string(c.precision))
      .number("multiplier", c.multiplier)
      .number("slope", c.slope)
      .integer("seed", c.seed)
      .integer("warmup", c.warmup)
      .integer("reps", c.reps)
      .number("min_time_ms", c.min_time_ms)
      .integer("check_rows", c.check_rows)
      .string("api", c.one_shot ? "oneshot" : "plan")
      .string("planning", c.both_plannings ? "both" : to_string(c.planning))
      .number("library_init_ms", library_init_ms)
      .string("blas_library", FusedLinear::Impl::blas_library_path())
      .string("pass", to_string(c.pass))
      .string("saved", saved_name(c.saved))
      .string("kokkos_configuration", kokkos_configuration());
  return config;
}

void write_json(const std::string& path, const Config& c, double library_init_ms,
                const std::vector<Result>& results) {
  namespace json = FusedLinearJson;
  using FusedLinear::to_string;
  const std::string shape = shape_string(c.shape);
  const json::Object config = config_json(c, library_init_ms);
  std::vector<std::string> rows;
  for (const Result& r : results) {
    std::vector<std::string> measurements;
    for (const FusedLinear::Measurement& t : r.measurements)
      measurements.push_back(json::Object()
                                 .string("algorithm", to_string(t.algorithm))
                                 .string("precision", to_string(t.precision))
                                 .integer("variant", t.variant)
                                 .number("ms", t.ms)
                                 .integer("calls", t.calls)
                                 .boolean("chosen", t.chosen)
                                 .number("setup_ms", t.setup_ms)
                                 .number("bound_ms", t.bound_ms)
                                 .str());
    rows.push_back(json::Object()
                       .string("shape", shape)
                       .string("algorithm_requested", to_string(r.requested))
                       .string("planning", to_string(r.options.planning))
                       .string("algorithm_ran", to_string(r.info.algorithm))
                       .string("precision_ran", to_string(r.info.precision))
                       .string("gemm", to_string(r.info.gemm))
                       .string("refused", r.refused)
                       .boolean("vendor_blas", r.info.vendor_blas)
                       .string("note", r.info.note)
                       .number("median_ms", r.median_ms)
                       .number("min_ms", r.min_ms)
                       .integer("reps", r.reps)
                       .number("gflops", r.gflops)
                       .number("gbs", r.gbs)
                       .number("rel_err", r.accuracy.rel_err)
                       .number("max_abs_err", r.accuracy.max_abs_err)
                       .integer("unwritten", r.accuracy.unwritten)
                       .number("plan_ms", r.plan_ms)
                       .number("wisdom_plan_ms", r.wisdom_plan_ms)
                       .boolean("measured", r.info.measured)
                       .boolean("from_wisdom", r.info.from_wisdom)
                       .raw("gpu_rates", gpu_rates_json(r.info.gpu_rates))
                       .raw("measurements", json::array(measurements))
                       .str());
  }
  // One result a line, indented, so that a diff of two runs reads by path.
  std::ofstream os(path);
  os << "{\n  \"config\": " << config.str()
     << ",\n  \"results\": " << json::array(rows, ",\n    ", "\n    ", "\n  ") << "\n}\n";
  if (!os) throw std::runtime_error("cannot write " + path);
}

/// --pass backward|step's JSON: the config, then a result per path with what ran for each
/// product ("y": the step's layer), each output's errors and the worst of them (rel_err).
void write_training_json(const std::string& path, const Config& c, double library_init_ms,
                         const std::vector<TrainingResult>& results) {
  namespace json = FusedLinearJson;
  using FusedLinear::to_string;
  const bool step = c.pass == Pass::Step;
  std::vector<std::string> rows;
  for (const TrainingResult& r : results) {
    json::Object row;
    row.string("shape", shape_string(c.shape))
        .string("pass", to_string(c.pass))
        .string("algorithm_requested", to_string(r.options.algorithm))
        .string("planning", to_string(r.options.planning))
        .string("refused", r.refused);
    const std::pair<const char*, const FusedLinear::RunInfo*> infos[] = {
        {"y", &r.forward}, {"dx", &r.gradient.dx}, {"dw", &r.gradient.dw}};
    for (const auto& info : infos) {
      const bool present = r.refused.empty() && (step || std::string(info.first) != "y");
      const std::string suffix = std::string("_") + info.first;
      row.string("ran" + suffix, present ? to_string(info.second->algorithm) : "")
          .string("precision_ran" + suffix, present ? to_string(info.second->precision) : "")
          .string("gemm" + suffix, present ? to_string(info.second->gemm) : "")
          .string("note" + suffix, info.second->note)
          .raw("gpu_rates" + suffix, gpu_rates_json(info.second->gpu_rates));
    }
    const double none = std::numeric_limits<double>::quiet_NaN();  // JSON null
    const auto ran_err = [&](const Accuracy& a) { return r.refused.empty() ? a.rel_err : none; };
    row.number("median_ms", r.median_ms)
        .number("min_ms", r.min_ms)
        .integer("reps", r.reps)
        .number("gflops", r.gflops)
        .number("gbs", r.gbs)
        .number("rel_err", r.refused.empty() ? worst_rel_err(r, step) : none)
        .number("rel_err_y", step ? ran_err(r.y) : none)
        .number("rel_err_dx", ran_err(r.dx))
        .number("rel_err_dw", ran_err(r.dw))
        .number("rel_err_db", ran_err(r.db))
        .number("max_abs_err_dx", r.dx.max_abs_err)
        .number("max_abs_err_dw", r.dw.max_abs_err)
        .number("max_abs_err_db", r.db.max_abs_err)
        .integer("unwritten", r.y.unwritten + r.dx.unwritten + r.dw.unwritten + r.db.unwritten)
        .number("plan_ms", r.plan_ms);
    rows.push_back(row.str());
  }
  std::ofstream os(path);
  os << "{\n  \"config\": " << config_json(c, library_init_ms).str()
     << ",\n  \"results\": " << json::array(rows, ",\n    ", "\n    ", "\n  ") << "\n}\n";
  if (!os) throw std::runtime_error("cannot write " + path);
}

/// Prints why each failing path fails; true when all pass (refused paths do not fail: they
/// did not run).
bool all_pass(const std::vector<Result>& results, std::int64_t K) {
  bool ok = true;
  for (const Result& r : results) {
    if (!r.refused.empty()) continue;
    const char* name = FusedLinear::to_string(r.requested);
    if (r.accuracy.unwritten > 0) {
      std::cout << "FAIL " << name << ": " << r.accuracy.unwritten
                << " checked elements are not finite where the reference is\n";
      ok = false;
    }
    const double bound = max_rel_err(r.info.precision, K);
    if (!(r.accuracy.rel_err <= bound)) {  // NaN fails too
      std::cout << "FAIL " << name << ": relative error " << r.accuracy.rel_err << " exceeds "
                << bound << " (" << FusedLinear::to_string(r.info.precision) << ", K = " << K
                << ")\n";
      ok = false;
    }
  }
  return ok;
}

}  // namespace

int main(int argc, char* argv[]) {
  Config config;
  const FusedLinearCli::Cli cli = command_line(config);
  // Answered before Kokkos starts, which would print its own help for --help as well.
  if (FusedLinearCli::Cli::asks_for_help(argc, argv)) {
    cli.print_help(std::cout);
    return 0;
  }
  Kokkos::ScopeGuard kokkos(argc, argv);  // removes the Kokkos options from argv
  try {
    cli.parse(argc, argv);
    resolve_defaults(config);
  } catch (const std::exception& e) {
    std::cerr << cli.message(e) << '\n';
    return 2;
  }
  try {
    print_header(config);
    std::optional<LibrariesInitialised<Kokkos::LayoutLeft>> left;
    std::optional<LibrariesInitialised<Kokkos::LayoutRight>> right;
    const double library_init_ms = config.layout_left ? left.emplace().ms : right.emplace().ms;
    std::cout << "libraries initialised in " << library_init_ms << " ms (before the plans)\n";
    if (config.pass != Pass::Forward) {
      const bool sign = config.saved == FusedLinear::Saved::Sign;
      const std::vector<TrainingResult> results =
          config.layout_left ? (sign ? run_training<Kokkos::LayoutLeft, bool>(config)
                                     : run_training<Kokkos::LayoutLeft>(config))
                             : (sign ? run_training<Kokkos::LayoutRight, bool>(config)
                                     : run_training<Kokkos::LayoutRight>(config));
      print_training_table(results, config);
      if (!config.json_path.empty()) {
        write_training_json(config.json_path, config, library_init_ms, results);
        std::cout << "wrote " << config.json_path << '\n';
      }
      return all_training_pass(results, config) ? 0 : 1;
    }
    const std::vector<Result> results =
        config.layout_left ? run<Kokkos::LayoutLeft>(config) : run<Kokkos::LayoutRight>(config);
    print_table(results);
    if (!config.json_path.empty()) {
      write_json(config.json_path, config, library_init_ms, results);
      std::cout << "wrote " << config.json_path << '\n';
    }
    return all_pass(results, config.shape.K) ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "fused_linear_perf: " << e.what() << '\n';
    return 1;
  }
}
