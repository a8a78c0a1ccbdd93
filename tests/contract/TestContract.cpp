// SPDX-License-Identifier: Apache-2.0
// The plan's contract, tested as the reference BLAS testers (sblat3) test theirs:
// every call either equals the float64 reference within the documented bound, or throws
// std::invalid_argument whose what() starts with the function's name ("FusedLinear::Plan",
// "FusedLinear::Plan::execute", "FusedLinear::linear_leaky_relu"); in both cases every element
// of Y's buffer outside Y (guard bands around and between its rows and columns) and every input
// buffer (guard bands included) is unchanged, and a refused call leaves Y unchanged too.
// This file: the typed suite, over every execution space (ContractSpaces.hpp):
//
//   Contract/<space>.EveryPathEveryViewKind     every algorithm x precision x float/double x
//                                               LayoutRight/Left/Stride Views: padded, strided,
//                                               offset, unaligned; one-shot call and Plan
//   Contract/<space>.PlanTimeVersusExecuteTime  a plan executed on other contents, pointers,
//                                               strides, alignment, bias strides, layouts
//   Contract/<space>.GeneratedCases             seeded shapes and View kinds
//                                               (FUSED_LINEAR_CONTRACT_SEED / _CASES)
//   Contract/<space>.Regression*                defects that every space can show
// (In this folder: the guarded buffers (Guarded.hpp), the View sets and checked_call
// (Contract.hpp).)
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ContractSpaces.hpp"

namespace {

using namespace FusedLinearTest;
using namespace FusedLinearTest::Contract;

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
/// the same Views: which requests run is `serves` (common/Serves.hpp); the rest must be refused.
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

TYPED_TEST_SUITE(Contract, Spaces, SpaceName);

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

// Guards against an overlap check on address ranges alone: X = subview(buf, ALL,
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

// Guards against cuBLASLt's bias epilogue being decided on the plan's b and not re-checked at
// execute: vendor_lt (and every path through cuBLASLt), the plan made with a unit-stride
// LayoutStride bias, executed with a stride-3 bias over the same buffer: computed right or
// refused, never the first N contiguous elements added. 512x1024x1024 on GPUs (where it
// showed), small on the host. Also an offset (not 16-byte aligned) bias slice at execute.
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

}  // namespace
