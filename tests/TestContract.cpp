// SPDX-License-Identifier: Apache-2.0
// The plan's contract, tested as the reference BLAS testers (sblat3) test theirs:
// every call either equals the float64 reference within the documented bound, or throws
// std::invalid_argument whose what() starts with the function's name ("FusedLinear::Plan",
// "FusedLinear::Plan::execute", "FusedLinear::linear_leaky_relu"); in both cases every element
// of Y's buffer outside Y (guard bands around and between its rows and columns) and every input
// buffer (guard bands included) is unchanged, and a refused call leaves Y unchanged too.
// (tests/contract/: the guarded buffers, the View sets, checked_call.)
//
//   Contract/<space>.EveryPathEveryViewKind     every algorithm x precision x float/double x
//                                               LayoutRight/Left/Stride Views: padded, strided,
//                                               offset, unaligned; one-shot call and Plan
//   Contract/<space>.PlanTimeVersusExecuteTime  a plan executed on other contents, pointers,
//                                               strides, alignment, bias strides, layouts
//   Contract/<space>.GeneratedCases             seeded shapes and View kinds
//                                               (FUSED_LINEAR_CONTRACT_SEED / _CASES)
//   Contract/<space>.Regression*                past defects that every space can show
//   ContractConcurrency.*, ContractGraph.*, ContractRegression.*: threads, streams, CUDA graphs
//                                               and the CUDA-only defects (skip where not served)
//
// Instantiations: the default execution space gets every set (LayoutStride, LayoutRight,
// LayoutLeft x float, double), the others LayoutStride float and LayoutRight double: each set
// of View types compiles every kernel once more.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "contract/Contract.hpp"

namespace {

using namespace FusedLinearTest;
using namespace FusedLinearTest::Contract;

template <class Exec>
constexpr bool is_default_space = std::is_same<Exec, Kokkos::DefaultExecutionSpace>::value;

/// Calls f(Set()) for every View set instantiated on Exec (see the file's comment).
template <class Exec, class F>
void for_each_set(F&& f) {
  using Mem = typename Exec::memory_space;
  f(StridedSet<float, Mem>());
  f(RightSet<double, Mem>());
  if constexpr (is_default_space<Exec>) {
    f(StridedSet<double, Mem>());
    f(RightSet<float, Mem>());
    f(LeftSet<float, Mem>());
    f(LeftSet<double, Mem>());
  }
}
template <class Exec>
int set_count() {
  int n = 0;
  for_each_set<Exec>([&n](auto) { ++n; });
  return n;
}

/// Elements of Scalar in 16 bytes: an offset of that many keeps 16-byte alignment (but not
/// 256), an offset of 1 breaks it.
template <class Scalar>
constexpr std::int64_t a16 = 16 / sizeof(Scalar);

/// The View kinds of the matrix test, for X [M,K], W [N,K], b [N], Y [M,N]; each set takes
/// those its layout can express.
template <class Scalar>
std::vector<Arrangement> view_kinds(std::int64_t M, std::int64_t K, std::int64_t N) {
  const std::int64_t q = a16<Scalar>;
  std::vector<Arrangement> out;
  const auto add = [&out](std::string name, Geometry X, Geometry W, Geometry b, Geometry Y) {
    Arrangement a;
    a.name = std::move(name), a.X = X, a.W = W, a.b = b, a.Y = Y;
    out.push_back(a);
  };
  add("row-major, contiguous", row_major(M, K, K), row_major(N, K, K), vector(N),
      row_major(M, N, N));
  add("row-major, padded rows, starts 1 element off 16 bytes", row_major(M, K, K + 3, 1),
      row_major(N, K, K + 5, 1), vector(N, 1, 1), row_major(M, N, N + 2, 1));
  add("row-major, rows padded to 16 bytes, b stride 3", row_major(M, K, K + 2 * q - K % q, q),
      row_major(N, K, K + q - K % q, 2 * q), vector(N, 3, q), row_major(M, N, N + q + 1, q));
  add("column-major, contiguous", col_major(M, K, M), col_major(N, K, N), vector(N),
      col_major(M, N, M));
  add("column-major, padded, starts 1 element off, b stride 2", col_major(M, K, M + 3, 1),
      col_major(N, K, N + 1, 1), vector(N, 2, 1), col_major(M, N, M + 5, 1));
  add("column strides 2 and 3, b stride 3", strided(M, K, 2 * K + 1, 2, 1),
      strided(N, K, 3 * K + 2, 3), vector(N, 3, 2), strided(M, N, 2 * N + 3, 2, 1));
  add("X row-major, W column-major, Y column stride 2", row_major(M, K, K + 1, 1),
      col_major(N, K, N + 2), vector(N, 1, q + 1), strided(M, N, 2 * N, 2));
  add("both strides above 1", strided(M, K, 2, 2 * M + 1, 1), strided(N, K, 3 * K, 2),
      vector(N, 2, 1), strided(M, N, 3, 3 * M + 1, 2));
  return out;
}

/// 1. Every algorithm x precision x View kind, through the one-shot call and a Plan made on
/// the same Views: which requests run is `serves` (support/Serves.hpp); the rest must be refused.
template <class Exec, class Set>
void every_view_kind(Tally& tally, std::int64_t M, std::int64_t K, std::int64_t N);

template <class Exec, class Set>
void every_path_every_view_kind(Tally& tally) {
  // Odd sizes below every tile; one row (the skinny kernels); on GPUs past a 128 x 128 tile.
  std::vector<std::array<std::int64_t, 3>> shapes = {{13, 37, 19}, {1, 29, 70}};
  if (!Impl::is_host_space<Exec>()) shapes.push_back({133, 300, 257});
  for (const auto& shape : shapes) {
    const std::int64_t M = shape[0], K = shape[1], N = shape[2];
    SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(K) + "x" + std::to_string(N));
    every_view_kind<Exec, Set>(tally, M, K, N);
  }
}

template <class Exec, class Set>
void every_view_kind(Tally& tally, std::int64_t M, std::int64_t K, std::int64_t N) {
  using Scalar = typename Set::Scalar;
  const Exec exec;
  const HostInputs in = random_inputs(M, K, N, 2026 + M);
  const Expect expect(in, 2, 0.1);
  for (const Arrangement& a : view_kinds<Scalar>(M, K, N)) {
    if (!takes<Set>(a)) continue;
    const Buffers<Scalar, typename Set::Memory> bufs(a.sizes());
    const Views<Set> v(bufs, a);
    const Impl::Facts facts = facts_of(exec, v.X, v.W, v.b, v.Y);
    for (const Options& o : every_request()) {
      const bool served = serves(o, facts, {M, K, N});
      SCOPED_TRACE(Set::name() + ", " + label(o));
      tally.add("one-shot " + label(o),
                checked_call(exec, bufs, a, in, expect, "FusedLinear::linear_leaky_relu", !served,
                             [&] { return attempt(exec, v.X, v.W, v.b, v.Y, 2, 0.1, o); }));
      std::optional<PlanOf<Exec, Set>> plan;
      tally.add("plan " + label(o),
                checked_call(exec, bufs, a, in, expect, "FusedLinear::Plan::execute", !served,
                             [&]() -> std::optional<RunInfo> {
                               plan = make_plan(exec, v.X, v.W, v.b, v.Y, 2, 0.1, o);
                               if (!plan) return std::nullopt;
                               plan->execute(v.X, v.W, v.b, v.Y);
                               return plan->info();
                             }));
    }
  }
}

/// A plan's executes on other Views than its own: `plan_on` is what the plan was made with.
struct Execute {
  Arrangement on;
  int buffers = 0;   // 0: the plan's buffers, 1: others (other pointers)
  int contents = 0;  // 0: the inputs the plan's first execute saw, 1: others
};
struct PlanCase {
  Arrangement plan_on;
  std::vector<Execute> executes;
};

template <class Set>
std::vector<PlanCase> plan_cases(std::int64_t M, std::int64_t K, std::int64_t N) {
  using Scalar = typename Set::Scalar;
  const std::int64_t q = a16<Scalar>;
  const bool left = std::is_same<typename Set::Matrix::array_layout, Kokkos::LayoutLeft>::value;
  const bool any = std::is_same<typename Set::Matrix::array_layout, Kokkos::LayoutStride>::value;
  const auto dense = [left](std::int64_t r, std::int64_t c, std::int64_t pad) {
    return left ? col_major(r, c, r + pad) : row_major(r, c, c + pad);
  };
  Arrangement base;
  base.name = "the plan's own kind (contiguous, aligned)";
  base.X = dense(M, K, 0), base.W = dense(N, K, 0), base.b = vector(N), base.Y = dense(M, N, 0);
  Arrangement ld = base;
  ld.name = "other row (or column) strides";
  ld.X = dense(M, K, q), ld.W = dense(N, K, 2 * q), ld.Y = dense(M, N, q);
  Arrangement b3 = base;
  b3.name = "b stride 3";
  b3.b = vector(N, 3);
  const Arrangement off1 = base.shifted(1, ", 1 element off (less aligned)");
  const Arrangement off16 = base.shifted(q, ", 16 bytes off");
  std::vector<PlanCase> out;
  PlanCase first{base, {{base, 0, 0}, {base, 0, 1}, {base, 1, 0}, {off1}, {off16}, {ld}, {b3}}};
  first.executes[1].on.name += ", other contents";
  first.executes[2].on.name += ", other pointers";
  if (any) {
    // Other strides over the same buffers: column stride 2 for X and Y (LayoutStride(M, 2K, K,
    // 2)); column-major storage (another layout, which LayoutStride can hold).
    Arrangement cs2 = base;
    cs2.name = "X and Y column stride 2";
    cs2.X = strided(M, K, 2 * K, 2), cs2.Y = strided(M, N, 2 * N, 2);
    Arrangement cm = base;
    cm.name = "column-major storage";
    cm.X = col_major(M, K, M), cm.W = col_major(N, K, N), cm.Y = col_major(M, N, M);
    first.executes.push_back({cs2});
    first.executes.push_back({cm});
    out.push_back({cs2, {{cs2}, {base}}});
  }
  out.insert(out.begin(), first);
  out.push_back({off1, {{off1}, {base}}});
  out.push_back({ld, {{ld}, {base}}});
  out.push_back({b3, {{b3}, {base}}});
  return out;
}

/// 2. Plan-time versus execute-time: each served request planned on one kind of Views, then
/// executed on others; each execute computes right or is refused (only where the path's kernel
/// was chosen for the Views: may_refuse_at_execute), guard bands and inputs unchanged.
template <class Exec, class Set>
void plan_time_versus_execute_time(Tally& tally) {
  using Scalar = typename Set::Scalar;
  using Memory = typename Set::Memory;
  const Exec exec;
  const std::int64_t M = 21, K = 44, N = 30;
  const HostInputs inputs[] = {random_inputs(M, K, N, 71), random_inputs(M, K, N, 72)};
  const Expect expects[] = {Expect(inputs[0], -1.5, 0.2), Expect(inputs[1], -1.5, 0.2)};
  const std::vector<PlanCase> cases = plan_cases<Set>(M, K, N);
  std::vector<Arrangement> all;
  for (const PlanCase& c : cases)
    for (const Execute& e : c.executes) all.push_back(e.on);
  const Buffers<Scalar, Memory> bufs[] = {Buffers<Scalar, Memory>(all),
                                          Buffers<Scalar, Memory>(all)};
  for (const PlanCase& c : cases) {
    const Views<Set> pv(bufs[0], c.plan_on);
    for (const Options& o :
         served_requests(exec, pv.X, pv.W, pv.b, pv.Y,
                         {Precision::Strict, Precision::TF32, Precision::TF32x3}, 3)) {
      SCOPED_TRACE(Set::name() + ", " + label(o) + ", plan made on: " + c.plan_on.name);
      // The plan is made under the contract too: its constructor writes nothing.
      std::optional<PlanOf<Exec, Set>> plan;
      const Image<Scalar> im = stage(exec, bufs[0], c.plan_on, inputs[0]);
      plan = make_plan(exec, pv.X, pv.W, pv.b, pv.Y, -1.5, 0.2, o);
      std::vector<double> y;
      EXPECT_TRUE(unchanged_but_y(exec, bufs[0], c.plan_on, im, true, y)) << "making the plan";
      if (!plan) continue;
      for (const Execute& e : c.executes) {
        const Views<Set> ev(bufs[e.buffers], e.on);
        tally.add(label(o),
                  checked_call(exec, bufs[e.buffers], e.on, inputs[e.contents], expects[e.contents],
                               "FusedLinear::Plan::execute", may_refuse_at_execute(plan->info()),
                               [&]() -> std::optional<RunInfo> {
                                 plan->execute(ev.X, ev.W, ev.b, ev.Y);
                                 return plan->info();
                               }));
      }
    }
  }
}

// ------------------------------------------------------------------ generated cases

inline std::uint64_t contract_seed() {
  if (const char* s = std::getenv("FUSED_LINEAR_CONTRACT_SEED"))
    return std::strtoull(s, nullptr, 10);
  return 20261202;
}
inline int contract_cases(int fallback) {
  if (const char* s = std::getenv("FUSED_LINEAR_CONTRACT_CASES")) return std::atoi(s);
  return fallback;
}

/// An extent: 1, a prime, one off a multiple of 4 (the 16-byte pack) or of 16, or any.
inline std::int64_t draw_extent(std::mt19937_64& rng, std::int64_t max) {
  static const std::int64_t primes[] = {2, 3, 5, 7, 13, 17, 31, 37, 61, 67, 127, 131, 257};
  const auto pick = [&rng](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  std::int64_t e = 1;
  switch (pick(0, 4)) {
    case 0: e = 1; break;
    case 1: e = primes[pick(0, 12)]; break;
    case 2: e = 4 * pick(1, std::max<std::int64_t>(1, max / 4)) + pick(-1, 1); break;
    case 3: e = 16 * pick(1, std::max<std::int64_t>(1, max / 16)); break;
    default: e = pick(1, max);
  }
  return std::max<std::int64_t>(1, std::min(max, e));
}

/// A View kind for an operand [rows, cols] that Set can express: padded, offset (aligned to
/// 16 bytes or not), and for LayoutStride any of row-major, column-major or strides of 2 or 3
/// in either position.
template <class Set>
Geometry draw_geometry(std::mt19937_64& rng, std::int64_t rows, std::int64_t cols) {
  const std::int64_t q = a16<typename Set::Scalar>;
  const auto pick = [&rng](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  const std::int64_t pads[] = {0, 0, 1, 3, q};
  const std::int64_t offsets[] = {0, 0, 1, 2, q, q + 1};
  const std::int64_t pad = pads[pick(0, 4)], offset = offsets[pick(0, 5)];
  using Layout = typename Set::Matrix::array_layout;
  int kind = std::is_same<Layout, Kokkos::LayoutRight>::value  ? 0
             : std::is_same<Layout, Kokkos::LayoutLeft>::value ? 1
                                                               : int(pick(0, 3));
  switch (kind) {
    case 0: return row_major(rows, cols, cols + pad, offset);
    case 1: return col_major(rows, cols, rows + pad, offset);
    case 2: {
      const std::int64_t s1 = pick(2, 3);
      return strided(rows, cols, (cols - 1) * s1 + 1 + pad, s1, offset);
    }
    default: {
      const std::int64_t s0 = pick(2, 3);
      return strided(rows, cols, s0, (rows - 1) * s0 + 1 + pad, offset);
    }
  }
}

/// 5. One generated case: every request through the one-shot call, then a plan for one served
/// request executed on its Views and on them one element further (other alignment) with other
/// contents.
template <class Exec, class Set>
void generated_case(std::mt19937_64& rng, std::int64_t M, std::int64_t K, std::int64_t N,
                    Tally& tally) {
  using Scalar = typename Set::Scalar;
  const Exec exec;
  const auto pick = [&rng](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  Arrangement a;
  a.X = draw_geometry<Set>(rng, M, K);
  a.W = draw_geometry<Set>(rng, N, K);
  a.Y = draw_geometry<Set>(rng, M, N);
  a.b = vector(N, pick(0, 1) ? 1 : pick(2, 3), pick(0, 2));
  a.name = "generated";
  switch (pick(0, 9)) {
    case 0:  // Y after X's last element in X's buffer (inside X's span where X is padded)
      a.y = a.x, a.Y.offset = a.X.end() + pick(0, 3), a.name += ", Y after X in one buffer";
      break;
    case 1:  // X's and Y's columns interleaved in one buffer: no element shared
      if (std::is_same<typename Set::Matrix::array_layout, Kokkos::LayoutStride>::value) {
        const std::int64_t ld = 2 * std::max(K, N) + pick(0, 2);
        a.X = strided(M, K, ld, 2, 0), a.Y = strided(M, N, ld, 2, 1), a.y = a.x;
        a.name += ", X's and Y's columns interleaved in one buffer";
      }
      break;
    default: break;
  }
  const double multiplier = double(Scalar(std::uniform_real_distribution<double>(-3, 3)(rng)));
  const double slope = double(Scalar(std::uniform_real_distribution<double>(-1, 2)(rng)));
  const HostInputs in = random_inputs(M, K, N, rng()), other = random_inputs(M, K, N, rng());
  const Expect expect(in, multiplier, slope), expect_other(other, multiplier, slope);
  const Arrangement moved = a.shifted(1, ", then 1 element further");
  const Buffers<Scalar, typename Set::Memory> bufs(std::vector<Arrangement>{a, moved});
  const Views<Set> v(bufs, a), mv(bufs, moved);
  const Impl::Facts facts = facts_of(exec, v.X, v.W, v.b, v.Y);
  SCOPED_TRACE(Set::name() + " " + std::to_string(M) + "x" + std::to_string(K) + "x" +
               std::to_string(N) + " multiplier " + std::to_string(multiplier) + " slope " +
               std::to_string(slope));
  std::vector<Options> served;
  const int splits = int(pick(2, 9));
  for (const Options& o : every_request(splits)) {
    const bool serve = serves(o, facts, {M, K, N});
    if (serve) served.push_back(o);
    SCOPED_TRACE(label(o));
    tally.add(
        "one-shot " + label(Options(o.algorithm, o.precision)),
        checked_call(exec, bufs, a, in, expect, "FusedLinear::linear_leaky_relu", !serve,
                     [&] { return attempt(exec, v.X, v.W, v.b, v.Y, multiplier, slope, o); }));
  }
  if (served.empty()) return;
  const Options o = served[std::size_t(pick(0, std::int64_t(served.size()) - 1))];
  SCOPED_TRACE("plan " + label(o));
  auto plan = make_plan(exec, v.X, v.W, v.b, v.Y, multiplier, slope, o);
  if (!plan) return;
  const auto execute_on = [&](const Views<Set>& w) {
    return [&]() -> std::optional<RunInfo> {
      plan->execute(w.X, w.W, w.b, w.Y);
      return plan->info();
    };
  };
  tally.add(
      "plan " + label(Options(o.algorithm, o.precision)),
      checked_call(exec, bufs, a, in, expect, "FusedLinear::Plan::execute", false, execute_on(v)));
  tally.add("plan " + label(Options(o.algorithm, o.precision)) + ", moved",
            checked_call(exec, bufs, moved, other, expect_other, "FusedLinear::Plan::execute",
                         may_refuse_at_execute(plan->info()), execute_on(mv)));
}

template <class Exec>
void generated_cases(Tally& tally) {
  const std::uint64_t seed = contract_seed();
  const bool host = Impl::is_host_space<Exec>();
  const int cases = contract_cases(is_default_space<Exec> ? 150 : 50);
  std::printf(
      "[ contract ] %s: %d generated cases, seed %llu (replay: FUSED_LINEAR_CONTRACT_SEED=%llu"
      " FUSED_LINEAR_CONTRACT_CASES=%d)\n",
      Exec::name(), cases, static_cast<unsigned long long>(seed),
      static_cast<unsigned long long>(seed), cases);
  ::testing::Test::RecordProperty("contract_seed", std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int c = 0; c < cases; ++c) {
    // Host: extents up to 70; GPUs: a third of the cases up to 300 (past a tile of every kernel).
    const std::int64_t max = !host && c % 3 == 0 ? 300 : 70;
    const std::int64_t M = draw_extent(rng, max), K = draw_extent(rng, max),
                       N = draw_extent(rng, max);
    const int which = int(std::uniform_int_distribution<int>(0, set_count<Exec>() - 1)(rng));
    SCOPED_TRACE("generated case " + std::to_string(c) + " of seed " + std::to_string(seed));
    int i = 0;
    for_each_set<Exec>([&](auto set) {
      if (i++ == which) generated_case<Exec, decltype(set)>(rng, M, K, N, tally);
    });
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// ------------------------------------------------------------------ the typed tests

template <class Exec>
class Contract : public ::testing::Test {};

template <class... T>
struct List {};
template <class L, class T, bool add>
struct Append;
template <class... A, class T>
struct Append<List<A...>, T, true> {
  using type = List<A..., T>;
};
template <class... A, class T>
struct Append<List<A...>, T, false> {
  using type = List<A...>;
};
template <class L, class T>
using AppendOther = typename Append<L, T, !is_default_space<T>>::type;
using Spaces0 = List<Kokkos::DefaultExecutionSpace>;
#if defined(FUSED_LINEAR_TESTS_DEFAULT_SPACE_ONLY)
using Spaces3 = Spaces0;
#else
#if defined(KOKKOS_ENABLE_OPENMP)
using Spaces1 = AppendOther<Spaces0, Kokkos::OpenMP>;
#else
using Spaces1 = Spaces0;
#endif
#if defined(KOKKOS_ENABLE_THREADS)
using Spaces2 = AppendOther<Spaces1, Kokkos::Threads>;
#else
using Spaces2 = Spaces1;
#endif
#if defined(KOKKOS_ENABLE_SERIAL)
using Spaces3 = AppendOther<Spaces2, Kokkos::Serial>;
#else
using Spaces3 = Spaces2;
#endif
#endif
template <class L>
struct AsTypes;
template <class... T>
struct AsTypes<List<T...>> {
  using type = ::testing::Types<T...>;
};
struct SpaceName {
  template <class Exec>
  static std::string GetName(int) {
    return Exec::name();
  }
};
TYPED_TEST_SUITE(Contract, AsTypes<Spaces3>::type, SpaceName);

TYPED_TEST(Contract, EveryPathEveryViewKind) {
  Tally tally;
  for_each_set<TypeParam>(
      [&](auto set) { every_path_every_view_kind<TypeParam, decltype(set)>(tally); });
  tally.print(std::string(TypeParam::name()) + " EveryPathEveryViewKind");
}

TYPED_TEST(Contract, PlanTimeVersusExecuteTime) {
  Tally tally;
  for_each_set<TypeParam>(
      [&](auto set) { plan_time_versus_execute_time<TypeParam, decltype(set)>(tally); });
  tally.print(std::string(TypeParam::name()) + " PlanTimeVersusExecuteTime");
}

TYPED_TEST(Contract, GeneratedCases) {
  Tally tally;
  generated_cases<TypeParam>(tally);
  tally.print(std::string(TypeParam::name()) + " GeneratedCases");
}

// Regression (the overlap check compared address ranges): X = subview(buf, ALL,
// {0, K}) and Y = subview(buf, ALL, {K, K + N}) of one LayoutRight buffer — PyTorch's "write
// into the concatenation" — share no element and must be accepted and computed right on every
// path, through the one-shot call and a Plan; so must X's and Y's columns interleaved in one
// buffer (LayoutStride). A real overlap — Y sharing one element with X, W or b — must still be
// refused by all three entry points, nothing written.
TYPED_TEST(Contract, RegressionDisjointViewsOfOneBufferAccepted) {
  using Exec = TypeParam;
  using Mem = typename Exec::memory_space;
  using Right =
      std::conditional_t<is_default_space<Exec>, RightSet<float, Mem>, RightSet<double, Mem>>;
  using Strided = StridedSet<float, Mem>;
  const Exec exec;
  const std::int64_t M = 9, K = 20, N = 13;
  const HostInputs in = random_inputs(M, K, N, 6);
  const Expect expect(in, 2, 0.1);
  Arrangement concat;
  concat.name = "X and Y columns [0, K) and [K, K + N) of one LayoutRight buffer";
  concat.X = row_major(M, K, K + N), concat.Y = row_major(M, N, K + N, K), concat.y = 0;
  concat.W = row_major(N, K, K), concat.b = vector(N);
  Arrangement interleaved = concat;
  interleaved.name = "X's and Y's columns interleaved in one buffer";
  interleaved.X = strided(M, K, 2 * K, 2), interleaved.Y = strided(M, N, 2 * K, 2, 1);
  Tally tally;
  const auto accepted = [&](auto set, const Arrangement& a) {
    using Set = decltype(set);
    const Buffers<typename Set::Scalar, Mem> bufs(a.sizes());
    const Views<Set> v(bufs, a);
    for (const Options& o :
         served_requests(exec, v.X, v.W, v.b, v.Y,
                         {Precision::Strict, Precision::TF32, Precision::TF32x3}, 3)) {
      SCOPED_TRACE(Set::name() + ", " + label(o));
      tally.add("one-shot " + label(o),
                checked_call(exec, bufs, a, in, expect, "FusedLinear::linear_leaky_relu", false,
                             [&] { return attempt(exec, v.X, v.W, v.b, v.Y, 2, 0.1, o); }));
      std::optional<PlanOf<Exec, Set>> plan;
      tally.add("plan " + label(o),
                checked_call(exec, bufs, a, in, expect, "FusedLinear::Plan::execute", false,
                             [&]() -> std::optional<RunInfo> {
                               plan = make_plan(exec, v.X, v.W, v.b, v.Y, 2, 0.1, o);
                               if (!plan) return std::nullopt;
                               plan->execute(v.X, v.W, v.b, v.Y);
                               return plan->info();
                             }));
    }
  };
  accepted(Right(), concat);
  accepted(Strided(), interleaved);

  // Real overlaps, one element each: Y(0, 0) is X(M-1, K-1), W(N-1, K-1) or b(N-1).
  Arrangement separate;
  separate.name = "separate buffers";
  separate.X = row_major(M, K, K), separate.W = row_major(N, K, K), separate.b = vector(N);
  separate.Y = row_major(M, N, N);
  Arrangement on_x = separate, on_w = separate, on_b = separate;
  on_x.name = "Y(0,0) is X(M-1,K-1)", on_x.y = on_x.x, on_x.Y.offset = M * K - 1;
  on_w.name = "Y(0,0) is W(N-1,K-1)", on_w.y = on_w.w, on_w.Y.offset = N * K - 1;
  on_b.name = "Y(0,0) is b(N-1)", on_b.y = on_b.bias, on_b.Y.offset = N - 1;
  const Buffers<float, Mem> bufs(std::vector<Arrangement>{separate, on_x, on_w, on_b});
  const Views<Strided> sv(bufs, separate);
  for (const Arrangement* a : {&on_x, &on_w, &on_b}) {
    const Views<Strided> v(bufs, *a);
    for (const Options& o : served_requests(exec, sv.X, sv.W, sv.b, sv.Y, {Precision::Strict})) {
      SCOPED_TRACE(label(o) + ", " + a->name);
      const auto refused = [&](const char* function, auto&& call) {
        const Outcome r = checked_call(exec, bufs, *a, in, expect, function, true, call);
        EXPECT_EQ(r, Outcome::Refused) << "Y overlaps an input: " << function << " must refuse";
      };
      refused("FusedLinear::linear_leaky_relu", [&]() -> std::optional<RunInfo> {
        return FusedLinear::linear_leaky_relu(exec, v.X, v.W, v.b, v.Y, 2.f, 0.1f, o);
      });
      refused("FusedLinear::Plan", [&]() -> std::optional<RunInfo> {
        PlanOf<Exec, Strided> plan(exec, v.X, v.W, v.b, v.Y, 2.f, 0.1f, o);
        return plan.info();
      });
      std::optional<PlanOf<Exec, Strided>> plan =
          make_plan(exec, sv.X, sv.W, sv.b, sv.Y, 2, 0.1, o);
      if (!plan) continue;
      refused("FusedLinear::Plan::execute", [&]() -> std::optional<RunInfo> {
        plan->execute(v.X, v.W, v.b, v.Y);
        return plan->info();
      });
    }
  }
  tally.print(std::string(Exec::name()) + " RegressionDisjointViewsOfOneBufferAccepted");
}

// Regression (cuBLASLt's bias epilogue decided on the plan's b, never re-checked):
// vendor_lt (and every path through cuBLASLt), the plan made with a unit-stride LayoutStride
// bias, executed with a stride-3 bias over the same buffer: computed right or refused, never
// the first N contiguous elements added. 512x1024x1024 on GPUs (as found), small on the host.
// Also the review item of an offset (not 16-byte aligned) bias slice at execute.
TYPED_TEST(Contract, RegressionStridedBiasAtExecute) {
  using Exec = TypeParam;
  using Mem = typename Exec::memory_space;
  using Set =
      std::conditional_t<is_default_space<Exec>, RightSet<float, Mem>, RightSet<double, Mem>>;
  using Scalar = typename Set::Scalar;
  const Exec exec;
  const bool host = Impl::is_host_space<Exec>();
  const std::int64_t M = host ? 24 : 512, K = host ? 64 : 1024, N = host ? 40 : 1024;
  const HostInputs in = random_inputs(M, K, N, 2);
  const Expect expect(in, 2, 0.1,
                      host ? std::vector<std::int64_t>{}
                           : std::vector<std::int64_t>{0, 1, 2, 3, 255, 256, 510, 511});
  Arrangement unit;
  unit.name = "b stride 1";
  unit.X = row_major(M, K, K), unit.W = row_major(N, K, K), unit.b = vector(N);
  unit.Y = row_major(M, N, N);
  Arrangement three = unit, offset = unit;
  three.name = "b stride 3 over the same buffer", three.b = vector(N, 3);
  offset.name = "b 1 element off 16 bytes", offset.b = vector(N, 1, 1);
  const Buffers<Scalar, Mem> bufs(std::vector<Arrangement>{unit, three, offset});
  const Views<Set> v(bufs, unit), v3(bufs, three), v1(bufs, offset);
  Tally tally;
  for (Algorithm a : {Algorithm::VendorLt, Algorithm::Vendor, Algorithm::VendorPrefill})
    for (Precision p : all_precisions) {
      const Options o = options(a, p);
      SCOPED_TRACE(Set::name() + ", " + label(o));
      auto plan = make_plan(exec, v.X, v.W, v.b, v.Y, 2, 0.1, o);
      if (!plan) continue;
      for (const auto* w : {&v, &v3, &v1}) {
        const Arrangement& arr = w == &v ? unit : w == &v3 ? three : offset;
        tally.add(label(o), checked_call(exec, bufs, arr, in, expect, "FusedLinear::Plan::execute",
                                         may_refuse_at_execute(plan->info()),
                                         [&]() -> std::optional<RunInfo> {
                                           plan->execute(w->X, w->W, w->b, w->Y);
                                           return plan->info();
                                         }));
      }
    }
  tally.print(std::string(Exec::name()) + " RegressionStridedBiasAtExecute");
}

// The harness itself: a stray write between Y's columns, into the guard band after an input,
// or a Y element left unwritten must each be reported (else every test above could pass
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

// ------------------------------------------------------------------ threads and streams

/// One thread's (or stream's) problem: its Views in guarded buffers, its inputs, its reference.
template <class Set>
struct Job {
  using Scalar = typename Set::Scalar;
  Arrangement a;
  HostInputs in;
  Expect expect;
  Buffers<Scalar, typename Set::Memory> bufs;
  Views<Set> v;
  Image<Scalar> im;
  Job(const Arrangement& arr, const HostInputs& inputs, double multiplier, double slope,
      std::vector<std::int64_t> rows = {})
      : a(arr),
        in(inputs),
        expect(in, multiplier, slope, std::move(rows)),
        bufs(a.sizes()),
        v(bufs, a) {}
};

/// Row-major X, W with padded rows, a strided b, Y with column stride 2 and padded rows (the
/// concurrency tests' Views: LayoutStride, any space).
inline Arrangement padded(std::int64_t M, std::int64_t K, std::int64_t N) {
  Arrangement a;
  a.name = "padded rows, Y column stride 2";
  a.X = row_major(M, K, K + 4), a.W = row_major(N, K, K), a.b = vector(N, 2, 1);
  a.Y = strided(M, N, 2 * N + 1, 2, 1);
  return a;
}
inline Arrangement contiguous(std::int64_t M, std::int64_t K, std::int64_t N) {
  Arrangement a;
  a.name = "contiguous rows";
  a.X = row_major(M, K, K), a.W = row_major(N, K, K), a.b = vector(N), a.Y = row_major(M, N, N);
  return a;
}

/// `calls` one-shot calls of `o` on `exec` in a loop, each checked (Y's buffer; the inputs'
/// after the last); stops at the first wrong call. The job must be staged (job.im).
template <class Exec, class Set>
int one_shot_loop(const Exec& exec, Job<Set>& job, const Options& o, int calls,
                  std::mutex* serialise = nullptr) {
  int good = 0;
  for (int c = 0; c < calls; ++c) {
    std::unique_lock<std::mutex> lock;
    if (serialise) lock = std::unique_lock<std::mutex>(*serialise);
    SCOPED_TRACE(label(o) + ", call " + std::to_string(c) + " of " + std::to_string(calls));
    if (c > 0) restage_y(exec, job.bufs, job.a, job.im);
    std::optional<RunInfo> info;
    const Outcome r = invoke(
        "FusedLinear::linear_leaky_relu", false,
        [&] {
          return std::optional<RunInfo>(FusedLinear::linear_leaky_relu(
              exec, job.v.X, job.v.W, job.v.b, job.v.Y, typename Set::Scalar(2),
              typename Set::Scalar(0.1), o));
        },
        info);
    if (!settle(exec, job.bufs, job.a, job.im, job.expect, r, info, c == calls - 1)) break;
    ++good;
  }
  return good;
}

#if defined(KOKKOS_ENABLE_CUDA)
/// CUDA instances on non-blocking streams of their own, made on this (the initialising)
/// thread, as Kokkos 3.4 requires.
struct Streams {
  std::vector<cudaStream_t> streams;
  std::vector<Kokkos::Cuda> spaces;
  explicit Streams(int n) : streams(std::size_t(n)) {
    for (auto& s : streams)
      EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    for (auto& s : streams) spaces.emplace_back(s);
  }
  ~Streams() {
    for (auto& s : spaces) s.fence();
    FusedLinear::release_cached_plans();  // plans keyed by these streams
    spaces.clear();
    for (auto& s : streams) cudaStreamDestroy(s);
  }
};
using CudaStrided = StridedSet<float, Kokkos::CudaSpace>;
using CudaRight = RightSet<float, Kokkos::CudaSpace>;
using CudaRightDouble = RightSet<double, Kokkos::CudaSpace>;
#endif

// The default instance from several host threads at once (CUDA), every call checked, guard
// bands included, at shapes whose K is split. Host backends: Kokkos 3.4 instances must not be
// entered from two threads at once and its OpenMP backend runs team kernels only from the
// initialising thread (README), so there the threads call Kokkos::Serial, one at a time, as
// TestConcurrency.cpp does.
template <class Exec>
void default_instance_from_threads(bool serialise) {
  using Set = StridedSet<float, typename Exec::memory_space>;
  const bool host = Impl::is_host_space<Exec>();
  const std::int64_t M = 17, K = host ? 300 : 4096, N = host ? 40 : 260;
  const Options requests[] = {options(Algorithm::Auto),
                              options(Algorithm::FusedSkinny, Precision::Strict, 3),
                              options(Algorithm::Fused)};
  const Exec exec;
  std::vector<std::unique_ptr<Job<Set>>> jobs;
  for (int t = 0; t < 3; ++t) {
    jobs.emplace_back(new Job<Set>(padded(M, K, N), random_inputs(M, K, N, 40 + t), 2, 0.1));
    jobs.back()->im = stage(exec, jobs.back()->bufs, jobs.back()->a, jobs.back()->in);
  }
  std::mutex lock;
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      for (const Options& o : requests)
        good += one_shot_loop(exec, *jobs[std::size_t(t)], o, 10, serialise ? &lock : nullptr);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), 3 * 3 * 10);
}

TEST(ContractConcurrency, DefaultInstanceFromSeveralThreads) {
#if defined(KOKKOS_ENABLE_CUDA)
  default_instance_from_threads<Kokkos::Cuda>(false);
#elif defined(KOKKOS_ENABLE_SERIAL)
  default_instance_from_threads<Kokkos::Serial>(true);
#else
  GTEST_SKIP() << "no execution space of this build takes calls from other host threads";
#endif
}

// Several host threads, each with its own instance (CUDA: a non-blocking stream each), each on
// another path, 30 calls each, every one checked.
TEST(ContractConcurrency, OwnInstancePerThread) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "host backends: Kokkos 3.4 host instances must not be entered from two host "
                  "threads at once (README); DefaultInstanceFromSeveralThreads covers Serial";
#else
  const Options requests[] = {options(Algorithm::FusedSkinny, Precision::Strict, 7),
                              options(Algorithm::Fused), options(Algorithm::Vendor),
                              options(Algorithm::Auto, Precision::TF32x3)};
  const std::int64_t shapes[][3] = {
      {17, 4096, 260}, {130, 300, 257}, {64, 512, 96}, {33, 1024, 200}};
  Streams s(4);
  std::vector<std::unique_ptr<Job<CudaStrided>>> jobs;
  for (int t = 0; t < 4; ++t) {
    const auto* sh = shapes[t];
    jobs.emplace_back(new Job<CudaStrided>(padded(sh[0], sh[1], sh[2]),
                                           random_inputs(sh[0], sh[1], sh[2], 50 + t), 2, 0.1));
    jobs.back()->im =
        stage(s.spaces[std::size_t(t)], jobs.back()->bufs, jobs.back()->a, jobs.back()->in);
  }
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      good += one_shot_loop(s.spaces[std::size_t(t)], *jobs[std::size_t(t)], requests[t], 30);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), 4 * 30);
#endif
}

// A plan executing on one instance while another plan of the same shape and request executes
// on another (CUDA: two non-blocking streams, both launched before either is waited for; host:
// the default instance twice), every request the build serves, split K forced too.
// The one-shot cache makes a plan outside its lock: while one thread's plan is being made (held
// up inside Planning::Measure's clock until the other thread is done), another thread's call of
// another shape completes. Made under the lock, the second call waited for the first plan and
// the first plan's clock gave up waiting.
namespace held_up {
std::atomic<bool> inside{false}, other_done{false}, gave_up{false};
double clock(Algorithm, Precision, int, int, double measured) {
  inside = true;
  for (int i = 0; i < 2000 && !other_done; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (!other_done) gave_up = true;
  return measured;
}
}  // namespace held_up
TEST(ContractConcurrency, PlanMadeOutsideTheCacheLock) {
#if !defined(KOKKOS_ENABLE_SERIAL)
  GTEST_SKIP() << "needs Kokkos::Serial for the second thread";
#else
  FusedLinear::release_cached_plans();
  FusedLinear::forget_wisdom();
  using Slow = Problem<ExecSpace, float, Kokkos::LayoutRight>;
  using Quick = Problem<Kokkos::Serial, float, Kokkos::LayoutRight>;
  Slow slow(37, 300, 70, 31);
  Quick quick(5, 16, 9, 32);
  Options measured(Algorithm::Auto);
  measured.planning = FusedLinear::Planning::Measure;
  measured.tuning.measure_clock = &held_up::clock;
  std::thread other([&] {
    while (!held_up::inside) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    FusedLinear::linear_leaky_relu(Kokkos::Serial(), quick.X, quick.W, quick.b, quick.Y, 2.f, 0.1f);
    held_up::other_done = true;
  });
  FusedLinear::linear_leaky_relu(ExecSpace(), slow.X, slow.W, slow.b, slow.Y, 2.f, 0.1f, measured);
  other.join();
  EXPECT_FALSE(held_up::gave_up) << "the other thread's call waited for this plan's making";
  EXPECT_TRUE(matches_reference(slow, 2, 0.1, slow.Y));
  EXPECT_TRUE(matches_reference(quick, 2, 0.1, quick.Y));
  FusedLinear::release_cached_plans();
  FusedLinear::forget_wisdom();
#endif
}

TEST(ContractConcurrency, PlanOnOneStreamWhileAnotherRuns) {
  using Set = StridedSet<float, MemorySpace>;
  const bool host = Impl::is_host_space<ExecSpace>();
  const std::int64_t M = 17, K = host ? 300 : 4096, N = host ? 40 : 260;
  TwoInstances two;
  std::vector<std::unique_ptr<Job<Set>>> jobs;
  for (int t = 0; t < 2; ++t)
    jobs.emplace_back(new Job<Set>(padded(M, K, N), random_inputs(M, K, N, 60 + t), 2, 0.1));
  const Views<Set>& v = jobs[0]->v;
  Tally tally;
  for (const Options& o :
       served_requests(two.spaces[0], v.X, v.W, v.b, v.Y,
                       {Precision::Strict, Precision::TF32, Precision::TF32x3}, 3)) {
    SCOPED_TRACE(label(o));
    std::vector<std::optional<PlanOf<ExecSpace, Set>>> plans;
    for (int t = 0; t < 2; ++t) {
      const Views<Set>& w = jobs[std::size_t(t)]->v;
      plans.push_back(make_plan(two.spaces[std::size_t(t)], w.X, w.W, w.b, w.Y, 2, 0.1, o));
    }
    if (!plans[0] || !plans[1]) continue;
    for (int round = 0; round < 3; ++round) {
      std::vector<Outcome> outcomes(2);
      std::vector<std::optional<RunInfo>> infos(2);
      for (int t = 0; t < 2; ++t) {
        Job<Set>& j = *jobs[std::size_t(t)];
        j.in = random_inputs(M, K, N, 100 * round + t);
        j.expect = Expect(j.in, 2, 0.1);
        j.im = stage(two.spaces[std::size_t(t)], j.bufs, j.a, j.in);
      }
      for (int t = 0; t < 2; ++t) {  // both enqueued before either is fenced
        Job<Set>& j = *jobs[std::size_t(t)];
        outcomes[std::size_t(t)] = invoke(
            "FusedLinear::Plan::execute", false,
            [&]() -> std::optional<RunInfo> {
              plans[std::size_t(t)]->execute(j.v.X, j.v.W, j.v.b, j.v.Y);
              return plans[std::size_t(t)]->info();
            },
            infos[std::size_t(t)]);
      }
      for (int t = 0; t < 2; ++t) {
        Job<Set>& j = *jobs[std::size_t(t)];
        SCOPED_TRACE("instance " + std::to_string(t) + ", round " + std::to_string(round));
        settle(two.spaces[std::size_t(t)], j.bufs, j.a, j.im, j.expect, outcomes[std::size_t(t)],
               infos[std::size_t(t)]);
        tally.add(label(o), outcomes[std::size_t(t)]);
      }
    }
  }
  tally.print("PlanOnOneStreamWhileAnotherRuns");
}

// Regression (the plan cache identified an instance by its cudaStream_t value, which
// is the same handle for every thread's per-thread default stream): two host threads, each on
// Kokkos::Cuda(cudaStreamPerThread), each calling the one-shot fused_skinny with 7 forced K
// splits at 17x4096x260 200 times on inputs of its own; every result checked.
TEST(ContractRegression, PerThreadDefaultStreamsDoNotShareAPlan) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build (per-thread default streams)";
#else
  const std::int64_t M = 17, K = 4096, N = 260;
  std::vector<Kokkos::Cuda> spaces;
  for (int t = 0; t < 2; ++t) spaces.emplace_back(cudaStreamPerThread);
  std::vector<std::unique_ptr<Job<CudaStrided>>> jobs;
  for (int t = 0; t < 2; ++t) {
    jobs.emplace_back(
        new Job<CudaStrided>(padded(M, K, N), random_inputs(M, K, N, 70 + t), 2, 0.1));
    jobs.back()->im =
        stage(spaces[std::size_t(t)], jobs.back()->bufs, jobs.back()->a, jobs.back()->in);
  }
  Kokkos::fence();
  const Options o = options(Algorithm::FusedSkinny, Precision::Strict, 7);
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back(
        [&, t] { good += one_shot_loop(spaces[std::size_t(t)], *jobs[std::size_t(t)], o, 200); });
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), 2 * 200);
  FusedLinear::release_cached_plans();
#endif
}

// The same, with the two threads' calls overlapping on the GPU: each thread enqueues 200 calls
// without waiting, cycling over 8 outputs (one plan: same strides and alignment class), then
// all outputs are checked. Sharing one plan's split-K partial sums and counters, the threads'
// kernels mixed each other's sums.
TEST(ContractRegression, PerThreadDefaultStreamsOverlapping) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build (per-thread default streams)";
#else
  using P = Problem<Kokkos::Cuda, float, Kokkos::LayoutRight>;
  using Out =
      Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::CudaSpace, Kokkos::MemoryUnmanaged>;
  const std::int64_t M = 17, K = 4096, N = 260, outputs = 8, apart = 4608;  // 256-byte steps
  std::vector<Kokkos::Cuda> spaces;
  std::vector<std::unique_ptr<P>> problems;
  std::vector<Kokkos::View<float*, Kokkos::CudaSpace>> ys;
  for (int t = 0; t < 2; ++t) {
    spaces.emplace_back(cudaStreamPerThread);
    problems.emplace_back(new P(M, K, N, 90 + t));
    ys.emplace_back("Ys", outputs * apart);
    Kokkos::deep_copy(ys.back(), std::numeric_limits<float>::quiet_NaN());
  }
  Kokkos::fence();
  const Options o = options(Algorithm::FusedSkinny, Precision::Strict, 7);
  std::vector<std::thread> threads;
  std::atomic<int> refused{0};
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      const P& p = *problems[std::size_t(t)];
      try {
        for (int c = 0; c < 200; ++c)
          FusedLinear::linear_leaky_relu(
              spaces[std::size_t(t)], p.X, p.W, p.b,
              Out(ys[std::size_t(t)].data() + (c % outputs) * apart, M, N), 2.f, 0.1f, o);
        spaces[std::size_t(t)].fence();
      } catch (const std::exception&) {
        ++refused;
      }
    });
  for (auto& th : threads) th.join();
  ASSERT_EQ(refused.load(), 0);
  for (int t = 0; t < 2; ++t)
    for (std::int64_t i = 0; i < outputs; ++i)
      EXPECT_TRUE(problems[std::size_t(t)]->reference(2, 0.1).check<float>(
          host_matrix(Out(ys[std::size_t(t)].data() + i * apart, M, N))))
          << "thread " << t << ", output " << i;
  FusedLinear::release_cached_plans();
#endif
}

// Regression ("cannot run the sm_90a few-rows kernel (invalid argument)" on a worker
// thread's first call): four std::threads that never touched CUDA, each with its own instance
// on a non-blocking stream (made on the initialising thread), each making its first CUDA call
// a one-shot skinny_sm90 call at M x 8192 x 8192 (M = 3, 5, 6, 7), 30 calls each, all checked.
TEST(ContractRegression, WorkerThreadsFirstCallToSkinnySm90) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build with the sm_90a kernels and a Hopper GPU";
#else
  const std::int64_t K = 8192, N = 8192, rows[] = {3, 5, 6, 7};
  const Options o = options(Algorithm::SkinnySm90);
  Streams s(4);
  std::vector<std::unique_ptr<Job<CudaStrided>>> jobs;
  HostInputs shared = random_inputs(7, K, N, 80);  // W and b shared by value, X cut per thread
  for (int t = 0; t < 4; ++t) {
    HostInputs in = shared;
    in.M = rows[t];
    in.X.resize(std::size_t(rows[t] * K));
    jobs.emplace_back(new Job<CudaStrided>(contiguous(rows[t], K, N), in, 2, 0.1));
    const Views<CudaStrided>& v = jobs.back()->v;
    if (!serves(o, facts_of(s.spaces[0], v.X, v.W, v.b, v.Y), {rows[t], K, N}))
      GTEST_SKIP() << "skinny_sm90 is not served here: "
                   << facts_of(s.spaces[0], v.X, v.W, v.b, v.Y).sm90_skinny;
    jobs.back()->im = stage(s.spaces[std::size_t(t)], jobs.back()->bufs, jobs.back()->a, in);
  }
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back(
        [&, t] { good += one_shot_loop(s.spaces[std::size_t(t)], *jobs[std::size_t(t)], o, 30); });
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), 4 * 30);
#endif
}

// ------------------------------------------------------------------ CUDA graphs

#if defined(KOKKOS_ENABLE_CUDA)
/// Paths that must replay right (the others may refuse capture instead).
bool must_replay(const Options& o) {
  switch (o.algorithm) {
    case Algorithm::FusedSkinny: return o.tuning.skinny_splits > 0;
    case Algorithm::Fused:
    case Algorithm::Vendor:
    case Algorithm::VendorLt:
    case Algorithm::FusedSm90:
    case Algorithm::SkinnySm90: return true;
    default: return false;
  }
}

/// A plan on `exec` (a non-blocking stream), executed once (the warm-up step applications run
/// before capturing), then plan.execute captured (cudaStreamCaptureModeGlobal), the graph
/// instantiated and launched 3 times with Y poisoned (NaN) and X's contents changed before
/// each; every replay must give the right Y, guard bands and inputs unchanged. A refusal of
/// execute under capture (std::invalid_argument mentioning "graph capture") is recorded;
/// `must_replay` paths may not refuse.
template <class Set>
void capture_and_replay(const Kokkos::Cuda& exec, const Arrangement& a, const Options& o,
                        Tally& tally) {
  using Scalar = typename Set::Scalar;
  const cudaStream_t stream = exec.cuda_stream();
  const std::int64_t M = a.X.rows, K = a.X.cols, N = a.W.rows;
  std::vector<HostInputs> in;
  std::vector<Expect> expect;
  for (int r = 0; r < 4; ++r) {
    in.push_back(random_inputs(M, K, N, 90 + r));
    if (r > 0) in.back().W = in[0].W, in.back().b = in[0].b;  // only X changes between launches
    expect.emplace_back(in.back(), 2, 0.1);
  }
  const Buffers<Scalar, Kokkos::CudaSpace> bufs(a.sizes());
  const Views<Set> v(bufs, a);
  SCOPED_TRACE(Set::name() + ", " + label(o) + ", " + std::to_string(M) + "x" + std::to_string(K) +
               "x" + std::to_string(N));
  auto plan = make_plan(exec, v.X, v.W, v.b, v.Y, 2, 0.1, o);
  if (!plan) return;
  const auto execute = [&]() -> std::optional<RunInfo> {
    plan->execute(v.X, v.W, v.b, v.Y);
    return plan->info();
  };
  checked_call(exec, bufs, a, in[0], expect[0], "FusedLinear::Plan::execute", false, execute);
  Image<Scalar> im = stage(exec, bufs, a, in[1], /*nan_y=*/true);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  std::string refusal, other;
  try {
    plan->execute(v.X, v.W, v.b, v.Y);
  } catch (const std::invalid_argument& e) {
    refusal = e.what();
  } catch (const std::exception& e) {
    other = e.what();
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (!refusal.empty() || !other.empty()) {
    if (graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    EXPECT_TRUE(other.empty()) << "execute under capture threw something else: " << other;
    EXPECT_TRUE(starts_with(refusal, "FusedLinear::Plan::execute: ") &&
                contains(refusal, "graph capture"))
        << refusal;
    EXPECT_FALSE(must_replay(o)) << "this path must replay under a CUDA graph: " << refusal;
    settle(exec, bufs, a, im, expect[1], Outcome::Refused, std::nullopt);
    tally.add(label(o) + " (capture refused)", Outcome::Refused);
    return;
  }
  EXPECT_EQ(ended, cudaSuccess) << "execute broke the capture: " << cudaGetErrorString(ended);
  if (ended != cudaSuccess || graph == nullptr) {
    (void)cudaGetLastError();
    return;
  }
  cudaGraphExec_t instance = nullptr;
  EXPECT_EQ(cudaGraphInstantiateWithFlags(&instance, graph, 0), cudaSuccess);
  for (int r = 1; r <= 3 && instance; ++r) {
    SCOPED_TRACE("replay " + std::to_string(r));
    if (r > 1) im = stage(exec, bufs, a, in[std::size_t(r)], /*nan_y=*/true);
    EXPECT_EQ(cudaGraphLaunch(instance, stream), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    settle(exec, bufs, a, im, expect[std::size_t(r)], Outcome::Ran, plan->info());
    tally.add(label(o) + " (replayed)", Outcome::Ran);
  }
  if (instance) cudaGraphExecDestroy(instance);
  cudaGraphDestroy(graph);
}
#endif

// Every path the build serves on Cuda, captured in a CUDA graph and replayed (or its capture
// refused, where README allows).
TEST(ContractGraph, CaptureAndReplayEveryPath) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build (CUDA graphs)";
#else
  Streams s(1);
  const Kokkos::Cuda& exec = s.spaces[0];
  Tally tally;
  const std::int64_t shapes[][3] = {{64, 256, 96}, {17, 4096, 260}};
  for (const auto& sh : shapes) {
    const Arrangement a = contiguous(sh[0], sh[1], sh[2]);
    const auto each = [&](auto set) {
      using Set = decltype(set);
      const Buffers<typename Set::Scalar, Kokkos::CudaSpace> bufs(a.sizes());
      const Views<Set> v(bufs, a);
      for (const Options& o :
           served_requests(exec, v.X, v.W, v.b, v.Y,
                           {Precision::Strict, Precision::TF32, Precision::TF32x3}, 4))
        capture_and_replay<Set>(exec, a, o, tally);
    };
    each(CudaRight());
    each(CudaRightDouble());
  }
  tally.print("CaptureAndReplayEveryPath");
#endif
}

// Regression (the call number a kernel argument baked into the graph, the arrival
// counters never reset): fused_skinny with 4 forced K splits, captured and replayed 3 times:
// every replay must write the right Y.
TEST(ContractRegression, GraphReplayOfSplitK) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build (CUDA graphs)";
#else
  Streams s(1);
  Tally tally;
  capture_and_replay<CudaRight>(s.spaces[0], contiguous(17, 4096, 260),
                                options(Algorithm::FusedSkinny, Precision::Strict, 4), tally);
  tally.print("GraphReplayOfSplitK");
#endif
}

// The one-shot call made for the first time while its stream is being captured (no cached
// plan: making one allocates, which would invalidate the capture) must throw
// std::invalid_argument mentioning "capture", leave the capture intact and write nothing; after
// the capture the same call computes right.
TEST(ContractGraph, OneShotFirstCallUnderCaptureRefused) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build (CUDA graphs)";
#else
  Streams s(1);
  const Kokkos::Cuda& exec = s.spaces[0];
  const std::int64_t M = 17, K = 4096, N = 260;
  const Arrangement a = contiguous(M, K, N);
  const HostInputs in = random_inputs(M, K, N, 95);
  const Expect expect(in, 2, 0.1);
  const Buffers<float, Kokkos::CudaSpace> bufs(a.sizes());
  const Views<CudaRight> v(bufs, a);
  for (const Options& o : {options(Algorithm::FusedSkinny, Precision::Strict, 4),
                           options(Algorithm::VendorLt), options(Algorithm::Auto)}) {
    SCOPED_TRACE(label(o));
    FusedLinear::release_cached_plans();
    const Image<float> im = stage(exec, bufs, a, in);
    ASSERT_EQ(cudaStreamBeginCapture(exec.cuda_stream(), cudaStreamCaptureModeGlobal), cudaSuccess);
    std::string what;
    try {
      FusedLinear::linear_leaky_relu(exec, v.X, v.W, v.b, v.Y, 2.f, 0.1f, o);
      what = "(no exception)";
    } catch (const std::invalid_argument& e) {
      what = e.what();
      EXPECT_TRUE(starts_with(what, "FusedLinear::linear_leaky_relu: ") &&
                  contains(what, "capture"))
          << what;
    } catch (const std::exception& e) {
      what = e.what();
      ADD_FAILURE() << "not an std::invalid_argument: " << what;
    }
    EXPECT_NE(what, "(no exception)") << "a first call under capture must be refused";
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(exec.cuda_stream(), &graph);
    EXPECT_EQ(ended, cudaSuccess) << "the call broke the capture: " << cudaGetErrorString(ended);
    if (graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    settle(exec, bufs, a, im, expect, Outcome::Refused, std::nullopt);
    checked_call(exec, bufs, a, in, expect, "FusedLinear::linear_leaky_relu", false,
                 [&] { return attempt(exec, v.X, v.W, v.b, v.Y, 2, 0.1, o); });
  }
  FusedLinear::release_cached_plans();
#endif
}

// The one-shot call captured after a first call outside the capture: the cached plan is pinned,
// so the graph still replays right after 40 other shapes have gone through the cache (32
// plans), each replay on a poisoned Y.
TEST(ContractGraph, OneShotCapturedAfterAFirstCallIsPinned) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build (CUDA graphs)";
#else
  using P = Problem<Kokkos::Cuda, float, Kokkos::LayoutRight>;
  Streams s(1);
  const Kokkos::Cuda& exec = s.spaces[0];
  const cudaStream_t stream = exec.cuda_stream();
  FusedLinear::release_cached_plans();
  P p(17, 4096, 260, 96);
  const Options o = options(Algorithm::FusedSkinny, Precision::Strict, 4);
  FusedLinear::linear_leaky_relu(exec, p.X, p.W, p.b, p.Y, 2.f, 0.1f, o);
  exec.fence();
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  std::string error;
  try {
    FusedLinear::linear_leaky_relu(exec, p.X, p.W, p.b, p.Y, 2.f, 0.1f, o);
  } catch (const std::exception& e) {
    error = e.what();
  }
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_EQ(error, "");
  cudaGraphExec_t replay = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&replay, graph, 0), cudaSuccess);
  for (int round = 0; round < 2; ++round) {
    if (round == 1) {
      for (int i = 0; i < 40; ++i) {  // other plans through the cache
        P q(2, 8 + i, 3, 200 + i);
        FusedLinear::linear_leaky_relu(exec, q.X, q.W, q.b, q.Y, 2.f, 0.1f, o);
      }
      exec.fence();
    }
    p.poison();
    Kokkos::fence();
    ASSERT_EQ(cudaGraphLaunch(replay, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_TRUE(matches_reference(p, 2, 0.1, p.Y)) << "replay after round " << round;
  }
  cudaGraphExecDestroy(replay);
  cudaGraphDestroy(graph);
  FusedLinear::release_cached_plans();
#endif
}

// ------------------------------------------------------------------ the other CUDA defects

// Regression (run_sm90 re-checked row strides and alignment, never the column
// strides): skinny_sm90 (and auto, which takes it) planned on LayoutStride CudaSpace Unmanaged
// Views with unit column strides, X 8x8192, W 4096x8192, Y 8x4096, executed with X and Y of
// column stride 2 over the same buffers (LayoutStride(M, 2K, K, 2)): computed right or
// refused, nothing outside Y written. The same for fused_sm90/3xtf32 at 256x8192x4096.
TEST(ContractRegression, Sm90PlanExecutedWithColumnStride2) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build with the sm_90a kernels and a Hopper GPU";
#else
  const Kokkos::Cuda exec;
  Tally tally;
  int served = 0;
  const struct {
    std::int64_t M, K, N;
    Options o;
    std::vector<std::int64_t> rows;
  } cases[] = {
      {8, 8192, 4096, options(Algorithm::SkinnySm90), {}},
      {8, 8192, 4096, options(Algorithm::Auto), {}},
      {256, 8192, 4096, options(Algorithm::FusedSm90, Precision::TF32x3), {0, 1, 127, 128, 255}}};
  for (const auto& c : cases) {
    SCOPED_TRACE(label(c.o) + " at " + std::to_string(c.M) + "x" + std::to_string(c.K) + "x" +
                 std::to_string(c.N));
    const std::int64_t M = c.M, K = c.K, N = c.N;
    const Arrangement unit = contiguous(M, K, N);
    Arrangement two = unit;
    two.name = "X and Y column stride 2 over the same buffers";
    two.X = strided(M, K, 2 * K, 2), two.Y = strided(M, N, 2 * N, 2);
    const HostInputs in = random_inputs(M, K, N, 11);
    const Expect expect(in, 2, 0.1, c.rows);
    const Buffers<float, Kokkos::CudaSpace> bufs(std::vector<Arrangement>{unit, two});
    const Views<CudaStrided> v(bufs, unit), v2(bufs, two);
    if (!serves(c.o, facts_of(exec, v.X, v.W, v.b, v.Y), {M, K, N}) ||
        (c.o.algorithm == Algorithm::Auto && facts_of(exec, v.X, v.W, v.b, v.Y).sm90_skinny))
      continue;
    ++served;
    auto plan = make_plan(exec, v.X, v.W, v.b, v.Y, 2, 0.1, c.o);
    ASSERT_TRUE(plan);
    for (const auto* w : {&v, &v2})
      tally.add(label(c.o), checked_call(exec, bufs, w == &v ? unit : two, in, expect,
                                         "FusedLinear::Plan::execute", w == &v2,
                                         [&]() -> std::optional<RunInfo> {
                                           plan->execute(w->X, w->W, w->b, w->Y);
                                           return plan->info();
                                         }));
  }
  if (served == 0) GTEST_SKIP() << "the sm_90a kernels are not served here (build or GPU)";
  tally.print("Sm90PlanExecutedWithColumnStride2");
#endif
}

// Regression: vendor_prefill + 3xtf32 wrote Y (the prefill) before cuBLASLt's
// check could refuse the Views. Every path through cuBLASLt, planned on aligned LayoutRight
// Views, executed on Views one element off (less aligned than the plan's kernel assumes):
// computed right or refused, and a refused call leaves Y untouched.
TEST(ContractRegression, CublasLtRefusalLeavesYUntouched) {
#if !defined(KOKKOS_ENABLE_CUDA)
  GTEST_SKIP() << "needs a CUDA build with cuBLASLt (no other build runs vendor_prefill in "
                  "3xtf32)";
#else
  const Kokkos::Cuda exec;
  const std::int64_t M = 64, K = 256, N = 96;
  const Arrangement aligned = contiguous(M, K, N);
  const Arrangement off = aligned.shifted(1, ", 1 element off");
  const HostInputs in = random_inputs(M, K, N, 12);
  const Expect expect(in, 2, 0.1);
  const Buffers<float, Kokkos::CudaSpace> bufs(std::vector<Arrangement>{aligned, off});
  const Views<CudaRight> v(bufs, aligned), vo(bufs, off);
  Tally tally;
  int lt = 0;
  for (Algorithm a : {Algorithm::VendorPrefill, Algorithm::Vendor, Algorithm::VendorLt})
    for (Precision p : all_precisions) {
      const Options o = options(a, p);
      SCOPED_TRACE(label(o));
      auto plan = make_plan(exec, v.X, v.W, v.b, v.Y, 2, 0.1, o);
      if (!plan || plan->info().gemm != Gemm::CublasLt) continue;
      ++lt;
      tally.add(label(o), checked_call(exec, bufs, off, in, expect, "FusedLinear::Plan::execute",
                                       true, [&]() -> std::optional<RunInfo> {
                                         plan->execute(vo.X, vo.W, vo.b, vo.Y);
                                         return plan->info();
                                       }));
    }
  if (lt == 0) GTEST_SKIP() << "no path runs cuBLASLt in this build";
  tally.print("CublasLtRefusalLeavesYUntouched");
#endif
}

}  // namespace
