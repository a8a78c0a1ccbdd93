// SPDX-License-Identifier: Apache-2.0
// The gradient on Views of every kind, as the reference BLAS testers check their routines: all
// seven operands placed in one buffer the user allocated (kokkos_malloc, Unmanaged Views over
// it), with guard bands of sentinels before, after and between them (and between the rows and
// columns of strided ones); after each call every element but the outputs' must hold its bits,
// the inputs' included, and the outputs must match the oracle. Kinds: LayoutRight, LayoutLeft,
// LayoutStride with gaps in both directions, subviews at an offset of wider Views (padded rows),
// an output interleaved with an input; through the one-shot call and a plan, overwriting and
// accumulating, each output skipped in turn. Also host threads, each with its own plan.
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "GradientProblems.hpp"

namespace {

using namespace FusedLinearTest;
using namespace FusedLinearTest::Gradient;
using Scalar = float;

/// Where an operand's elements lie in the buffer: (i, j) at offset + i s0 + j s1 (vectors:
/// cols = 1); `first` and `end` bound its footprint (a subview's wider View included).
struct Geometry {
  std::int64_t rows = 0, cols = 0, offset = 0, s0 = 1, s1 = 1, first = 0, end = 0;
  std::int64_t at(std::int64_t i, std::int64_t j) const { return offset + i * s0 + j * s1; }
};

enum class Kind { Right, Left, Stride, Subview };
const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Right: return "LayoutRight";
    case Kind::Left: return "LayoutLeft";
    case Kind::Stride: return "LayoutStride with gaps";
    case Kind::Subview: return "subviews at an offset of wider Views";
  }
  return "";
}

/// Sizes of a subview's wider View: one row above and below, two columns left, three right.
constexpr std::int64_t pad_top = 1, pad_rows = 2, pad_left = 2, pad_cols = 5;
/// Sentinels between operands.
constexpr std::int64_t guard = 7;

/// Places an operand of `kind` at `cursor` (moved past it and a guard band).
Geometry place(Kind kind, std::int64_t rows, std::int64_t cols, bool vector, std::int64_t& cursor) {
  Geometry g;
  g.rows = rows, g.cols = cols, g.first = cursor;
  switch (kind) {
    case Kind::Right: g.offset = cursor, g.s0 = cols, g.s1 = 1; break;
    case Kind::Left: g.offset = cursor, g.s0 = 1, g.s1 = vector ? 1 : rows; break;
    case Kind::Stride:  // gaps between columns (2) and rows (2 cols + 3); vectors every third
      g.offset = cursor + 1;
      if (vector)
        g.s0 = 3, g.s1 = 1;
      else
        g.s0 = 2 * cols + 3, g.s1 = 2;
      break;
    case Kind::Subview:
      if (vector) {
        g.offset = cursor + pad_left, g.s0 = 1, g.s1 = 1;
      } else {
        const std::int64_t ld = cols + pad_cols;
        g.offset = cursor + pad_top * ld + pad_left, g.s0 = ld, g.s1 = 1;
      }
      break;
  }
  std::int64_t end = rows == 0 || cols == 0 ? g.offset : g.at(rows - 1, cols - 1) + 1;
  if (kind == Kind::Subview)
    end = vector ? cursor + rows + pad_cols : cursor + (rows + pad_rows) * (cols + pad_cols);
  g.end = end;
  cursor = end + guard;
  return g;
}

/// The View types of each kind, over the buffer (Unmanaged: the user's memory).
template <Kind kind>
struct Views;
template <class Layout>
struct Contiguous {
  using Matrix = Kokkos::View<Scalar**, Layout, MemorySpace, Kokkos::MemoryUnmanaged>;
  using Vector = Kokkos::View<Scalar*, Layout, MemorySpace, Kokkos::MemoryUnmanaged>;
  static Matrix matrix(Scalar* base, const Geometry& g) {
    return Matrix(base + g.offset, g.rows, g.cols);
  }
  static Vector vector(Scalar* base, const Geometry& g) { return Vector(base + g.offset, g.rows); }
};
template <>
struct Views<Kind::Right> : Contiguous<Kokkos::LayoutRight> {};
template <>
struct Views<Kind::Left> : Contiguous<Kokkos::LayoutLeft> {};
template <>
struct Views<Kind::Stride> {
  using Matrix = Kokkos::View<Scalar**, Kokkos::LayoutStride, MemorySpace, Kokkos::MemoryUnmanaged>;
  using Vector = Kokkos::View<Scalar*, Kokkos::LayoutStride, MemorySpace, Kokkos::MemoryUnmanaged>;
  static Matrix matrix(Scalar* base, const Geometry& g) {
    return Matrix(base + g.offset, Kokkos::LayoutStride(g.rows, g.s0, g.cols, g.s1));
  }
  static Vector vector(Scalar* base, const Geometry& g) {
    return Vector(base + g.offset, Kokkos::LayoutStride(g.rows, g.s0));
  }
};
template <>
struct Views<Kind::Subview> {
  using Wide = Views<Kind::Right>;
  static auto matrix(Scalar* base, const Geometry& g) {
    const typename Wide::Matrix wide(base + g.first, g.rows + pad_rows, g.cols + pad_cols);
    return Kokkos::subview(wide, std::make_pair(pad_top, pad_top + g.rows),
                           std::make_pair(pad_left, pad_left + g.cols));
  }
  static auto vector(Scalar* base, const Geometry& g) {
    const typename Wide::Vector wide(base + g.first, g.rows + pad_cols);
    return Kokkos::subview(wide, std::make_pair(pad_left, pad_left + g.rows));
  }
};

/// A NaN whose payload names the element (a computed NaN has the default payload or an
/// input's, and every input element here is finite).
Scalar sentinel(std::int64_t e) {
  const std::uint32_t bits = 0x7fc00000u | std::uint32_t(std::uint64_t(e) % 0x3ffff0u + 7);
  Scalar s;
  std::memcpy(&s, &bits, sizeof s);
  return s;
}
bool bits_equal(Scalar a, Scalar b) { return std::memcmp(&a, &b, sizeof a) == 0; }

/// One user buffer (device memory where the build has it) holding the seven operands.
struct Buffer {
  std::int64_t size;
  Scalar* data;
  explicit Buffer(std::int64_t n)
      : size(n),
        data(static_cast<Scalar*>(Kokkos::kokkos_malloc<MemorySpace>(
            "gradient user buffer", std::size_t(n) * sizeof(Scalar)))) {}
  ~Buffer() {
    Kokkos::fence();
    FusedLinear::release_cached_plans();  // the cached plans' keys name this memory
    Kokkos::kokkos_free<MemorySpace>(data);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Kokkos::View<Scalar*, MemorySpace, Kokkos::MemoryUnmanaged> view() const {
    return Kokkos::View<Scalar*, MemorySpace, Kokkos::MemoryUnmanaged>(data, std::size_t(size));
  }
  void upload(const std::vector<Scalar>& h) const {
    Kokkos::fence();
    Kokkos::deep_copy(
        view(), Kokkos::View<const Scalar*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(h.data(),
                                                                                        h.size()));
    Kokkos::fence();
  }
  std::vector<Scalar> download() const {
    std::vector<Scalar> h(static_cast<std::size_t>(size));
    Kokkos::fence();
    Kokkos::deep_copy(
        Kokkos::View<Scalar*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged>(h.data(), h.size()),
        view());
    Kokkos::fence();
    return h;
  }
};

/// The operands' places for one kind; `interleave` puts dX in the gaps between X's columns
/// (LayoutStride only: no element shared).
struct Arrangement {
  Geometry X, W, dY, saved, dX, dW, db;
  std::int64_t size = 0;
  Arrangement(Kind kind, std::int64_t M, std::int64_t K, std::int64_t N, bool interleave = false) {
    std::int64_t cursor = guard;
    X = place(kind, M, K, false, cursor);
    W = place(kind, N, K, false, cursor);
    dY = place(kind, M, N, false, cursor);
    saved = place(kind, M, N, false, cursor);
    if (interleave) {
      dX = X;
      dX.offset += 1;  // the odd elements of X's rows (stride 2)
    } else {
      dX = place(kind, M, K, false, cursor);
    }
    dW = place(kind, N, K, false, cursor);
    db = place(kind, N, 1, true, cursor);
    size = cursor;
  }
};

/// Values for the inputs (saved made on the host: z uniform, Y = leaky_relu(z)) and the
/// outputs' prior values (distinct, far from any result).
struct Data {
  std::int64_t M, K, N;
  double multiplier = -1.5, slope = 0.1;
  Inputs z, y;  // the oracle's inputs for each saved kind
  std::vector<double> prior_dx, prior_dw, prior_db;
  Data(std::int64_t m, std::int64_t k, std::int64_t n) : M(m), K(k), N(n) {
    std::mt19937_64 rng(4646);
    std::uniform_real_distribution<double> u(-1, 1);
    const auto draw = [&](std::int64_t count, double scale) {
      std::vector<double> v(static_cast<std::size_t>(count));
      for (double& x : v) x = double(Scalar(scale * u(rng)));
      return v;
    };
    z.M = M, z.K = K, z.N = N;
    z.X = draw(M * K, 1), z.W = draw(N * K, 1 / std::sqrt(double(K))), z.dY = draw(M * N, 1);
    z.saved = draw(M * N, 1);
    y = z;
    for (double& v : y.saved) v = double(Scalar(v > 0 ? v : v * slope));
    prior_dx = draw(M * K, 1), prior_dw = draw(N * K, 1), prior_db = draw(N, 1);
    for (auto* p : {&prior_dx, &prior_dw, &prior_db})
      for (double& v : *p) v += 4096;
  }
  const Inputs& inputs(Saved s) const { return s == Saved::Output ? y : z; }
};

/// What one call does to the buffer.
struct Call {
  bool plan = false, accumulate = false, skip_dx = false, skip_dw = false, skip_db = false;
  Saved saved = Saved::Output;
  std::string name() const {
    std::ostringstream os;
    os << (plan ? "plan" : "one-shot") << (accumulate ? ", accumulate" : "") << ", "
       << saved_name(saved) << (skip_dx ? ", dX skipped" : "") << (skip_dw ? ", dW skipped" : "")
       << (skip_db ? ", db skipped" : "");
    return os.str();
  }
};

/// Stages the buffer (sentinels, inputs, the outputs' prior values), runs `call`, and checks:
/// every element that is not a written output's holds its bits; the written outputs match the
/// oracle (the accumulated ones with their prior values added).
template <Kind kind>
void run_guarded(const Data& d, const Arrangement& a, const Call& call, const std::string& what) {
  using V = Views<kind>;
  Buffer buf(a.size);
  std::vector<Scalar> image(std::size_t(a.size));
  for (std::int64_t e = 0; e < a.size; ++e) image[std::size_t(e)] = sentinel(e);
  std::vector<char> written(std::size_t(a.size), 0);
  const auto put = [&](const Geometry& g, const std::vector<double>& v, bool output, bool skipped) {
    for (std::int64_t i = 0; i < g.rows; ++i)
      for (std::int64_t j = 0; j < g.cols; ++j) {
        const std::size_t e = std::size_t(g.at(i, j));
        image[e] = Scalar(v[std::size_t(i * g.cols + j)]);
        written[e] = output && !skipped;
      }
  };
  const Inputs& in = d.inputs(call.saved);
  put(a.X, in.X, false, false);
  put(a.W, in.W, false, false);
  put(a.dY, in.dY, false, false);
  put(a.saved, in.saved, false, false);
  put(a.dX, d.prior_dx, true, call.skip_dx);
  put(a.dW, d.prior_dw, true, call.skip_dw);
  put(a.db, d.prior_db, true, call.skip_db);
  buf.upload(image);

  const auto X = V::matrix(buf.data, a.X), W = V::matrix(buf.data, a.W),
             dY = V::matrix(buf.data, a.dY), S = V::matrix(buf.data, a.saved);
  using Matrix = std::remove_const_t<decltype(X)>;
  using Vector = std::remove_const_t<decltype(V::vector(buf.data, a.db))>;
  const Matrix dX = call.skip_dx ? Matrix() : Matrix(V::matrix(buf.data, a.dX));
  const Matrix dW = call.skip_dw ? Matrix() : Matrix(V::matrix(buf.data, a.dW));
  const Vector db = call.skip_db ? Vector() : Vector(V::vector(buf.data, a.db));
  GradientOptions o = gradient_options(call.saved, call.accumulate);
  const Scalar m = Scalar(d.multiplier), s = Scalar(d.slope);
  GradientInfo info;
  if (call.plan) {
    FusedLinear::GradientPlan plan(ExecSpace(), X, W, dY, S, dX, dW, db, m, s, o);
    plan.execute(X, W, dY, S, dX, dW, db);
    info = plan.info();
    Kokkos::fence();
  } else {
    info = FusedLinear::linear_leaky_relu_backward(ExecSpace(), X, W, dY, S, dX, dW, db, m, s, o);
  }
  const std::vector<Scalar> now = buf.download();
  const std::string where = what + ", " + call.name() + ": " + describe(o, info);
  std::int64_t changed = 0;
  std::ostringstream first;
  for (std::int64_t e = 0; e < a.size; ++e) {
    if (written[std::size_t(e)] || bits_equal(now[std::size_t(e)], image[std::size_t(e)])) continue;
    if (changed++ < 3) first << " element " << e << ": " << now[std::size_t(e)] << ";";
  }
  EXPECT_EQ(changed, 0) << where
                        << ": elements outside the written outputs changed:" << first.str();
  const auto read = [&](const Geometry& g) {
    std::vector<double> v(std::size_t(g.rows * g.cols));
    for (std::int64_t i = 0; i < g.rows; ++i)
      for (std::int64_t j = 0; j < g.cols; ++j)
        v[std::size_t(i * g.cols + j)] = double(now[std::size_t(g.at(i, j))]);
    return v;
  };
  const Oracle oracle(in, d.multiplier, d.slope);
  const std::vector<double> none;
  if (!call.skip_dx)
    EXPECT_TRUE(
        check<Scalar>("dX", oracle.dx(), read(a.dX), Sum::Product, product_rounding(info.dx, d.N)))
        << where;
  if (!call.skip_dw)
    EXPECT_TRUE(check<Scalar>("dW", oracle.dw(call.accumulate ? d.prior_dw : none), read(a.dW),
                              Sum::Product, product_rounding(info.dw, d.M)))
        << where;
  if (!call.skip_db)
    EXPECT_TRUE(check<Scalar>("db", oracle.db(call.accumulate ? d.prior_db : none), read(a.db),
                              Sum::WideColumnSum))
        << where;
}

/// Every call variation for one kind.
template <Kind kind>
void every_call(std::int64_t M, std::int64_t K, std::int64_t N, bool interleave = false) {
  const Data d(M, K, N);
  const Arrangement a(kind, M, K, N, interleave);
  const std::string what =
      std::string(kind_name(kind)) + (interleave ? ", dX interleaved with X" : "") +
      ", M=" + std::to_string(M) + " K=" + std::to_string(K) + " N=" + std::to_string(N);
  std::vector<Call> calls;
  for (bool plan : {false, true})
    for (bool accumulate : {false, true})
      for (Saved saved : {Saved::Output, Saved::PreActivation}) {
        Call c;
        c.plan = plan, c.accumulate = accumulate, c.saved = saved;
        calls.push_back(c);
      }
  for (int skip = 0; skip < 3; ++skip) {
    Call c;
    c.accumulate = true;
    c.skip_dx = skip == 0, c.skip_dw = skip == 1, c.skip_db = skip == 2;
    calls.push_back(c);
  }
  for (const Call& c : calls) run_guarded<kind>(d, a, c, what);
}

TEST(GradientViews, LayoutRightWithGuardBands) {
  every_call<Kind::Right>(33, 7, 17);
  every_call<Kind::Right>(1, 129, 1);
}
TEST(GradientViews, LayoutLeftWithGuardBands) {
  every_call<Kind::Left>(33, 7, 17);
  every_call<Kind::Left>(7, 1, 33);
}
TEST(GradientViews, LayoutStrideWithGapsAndGuardBands) {
  every_call<Kind::Stride>(33, 7, 17);
  every_call<Kind::Stride>(129, 33, 1);
}
TEST(GradientViews, SubviewsAtAnOffsetWithGuardBands) {
  every_call<Kind::Subview>(33, 7, 17);
  every_call<Kind::Subview>(1, 33, 7);
}
// dX in the gaps between X's columns: no element shared, so accepted, and X read right while
// dX is written beside it.
TEST(GradientViews, OutputInterleavedWithAnInputIsAccepted) {
  every_call<Kind::Stride>(17, 9, 13, true);
}

// Mixed layouts (X, dY and dX LayoutLeft; W, saved, dW and db LayoutRight): no vendor BLAS
// takes the products (Kokkos Kernels' native gemm runs, and RunInfo says so), every output right.
TEST(GradientViews, MixedLayouts) {
  using Left = Kokkos::View<float**, Kokkos::LayoutLeft, MemorySpace>;
  using Right = Kokkos::View<float**, Kokkos::LayoutRight, MemorySpace>;
  using Vector = Kokkos::View<float*, Kokkos::LayoutRight, MemorySpace>;
  const std::int64_t M = 33, K = 7, N = 17;
  const Data d(M, K, N);
  Left X("X", M, K), dY("dY", M, N), dX("dX", M, K);
  Right W("W", N, K), S("saved", M, N), dW("dW", N, K);
  Vector db("db", N);
  for (Saved saved : {Saved::Output, Saved::PreActivation})
    for (bool accumulate : {false, true}) {
      const Inputs& in = d.inputs(saved);
      write_matrix(X, in.X), write_matrix(W, in.W), write_matrix(dY, in.dY);
      write_matrix(S, in.saved);
      Kokkos::deep_copy(dX, std::numeric_limits<float>::quiet_NaN());
      write_matrix(dW, d.prior_dw), write_vector(db, d.prior_db);
      const GradientOptions o = gradient_options(saved, accumulate);
      const GradientInfo info = FusedLinear::linear_leaky_relu_backward(
          ExecSpace(), X, W, dY, S, dX, dW, db, float(d.multiplier), float(d.slope), o);
      const std::string what = describe(o, info);
      for (const RunInfo* r : {&info.dx, &info.dw})
        if (r->gemm == Gemm::KokkosKernelsNative) EXPECT_FALSE(r->vendor_blas) << what;
      const Oracle oracle(in, d.multiplier, d.slope);
      const std::vector<double> none;
      EXPECT_TRUE(check<float>("dX", oracle.dx(), host_matrix(dX))) << what;
      EXPECT_TRUE(check<float>("dW", oracle.dw(accumulate ? d.prior_dw : none), host_matrix(dW)))
          << what;
      EXPECT_TRUE(check<float>("db", oracle.db(accumulate ? d.prior_db : none), host_vector(db),
                               Sum::WideColumnSum))
          << what;
    }
}

// ---------------------------------------------------------------------------------------------
// Host threads, each with its own plan (and the one-shot call's shared cache). On CUDA two
// non-blocking streams, the threads calling concurrently; on host backends calls must be
// serialised (README: Kokkos 3.4 host instances are not entered from two threads at once, and
// its OpenMP backend dispatches from the initialising thread only), so each call is made under a
// mutex, on Kokkos::Serial.
template <class Exec>
void threads_with_their_own_plans(const std::vector<Exec>& spaces, bool serialise) {
  using P = Gradient::Problem<Exec, float, Kokkos::LayoutRight>;
  using Plan = FusedLinear::GradientPlan<Exec, typename P::Matrix, typename P::Matrix,
                                         typename P::Matrix, typename P::Matrix, typename P::Matrix,
                                         typename P::Matrix, typename P::Vector>;
  using Mirror = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;
  using MirrorVector = Kokkos::View<float*, Kokkos::HostSpace>;
  std::vector<P> problems;
  problems.emplace_back(129, 33, 65, 1200, 2, 0.1);
  problems.emplace_back(65, 129, 33, 1201, -1.5, 0.0);
  std::vector<Oracle> oracles;
  std::vector<Mirror> dx, dw;
  std::vector<MirrorVector> db;
  for (const P& p : problems) {
    oracles.push_back(p.oracle(Saved::Output));
    dx.emplace_back("dx", p.M, p.K), dw.emplace_back("dw", p.N, p.K), db.emplace_back("db", p.N);
  }
  std::mutex serial;
  std::atomic<int> failures{0}, runs{0};
  const auto as_vector = [](const auto& h) {
    std::vector<double> v(h.size());
    for (std::size_t e = 0; e < h.size(); ++e) v[e] = double(h.data()[e]);
    return v;
  };
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      P& p = problems[t];
      const Exec& space = spaces[t];
      const GradientOptions o = gradient_options(Saved::Output);
      std::unique_lock<std::mutex> lock(serial, std::defer_lock);
      if (serialise) lock.lock();
      Plan plan(space, p.X, p.W, p.dY, p.Y, p.dX, p.dW, p.db, float(p.multiplier), float(p.slope),
                o);
      if (serialise) lock.unlock();
      for (int repeat = 0; repeat < 6; ++repeat) {
        if (serialise) lock.lock();
        Kokkos::deep_copy(space, p.dX, std::numeric_limits<float>::quiet_NaN());
        GradientInfo info;
        if (repeat % 2 == 0) {
          plan.execute(p.X, p.W, p.dY, p.Y, p.dX, p.dW, p.db);
          info = plan.info();
        } else {
          info = FusedLinear::linear_leaky_relu_backward(
              space, p.X, p.W, p.dY, p.Y, p.dX, p.dW, p.db, float(p.multiplier), float(p.slope), o);
        }
        Kokkos::deep_copy(space, dx[t], p.dX);
        Kokkos::deep_copy(space, dw[t], p.dW);
        Kokkos::deep_copy(space, db[t], p.db);
        space.fence();
        if (serialise) lock.unlock();
        ++runs;
        const Oracle& oracle = oracles[t];
        for (const auto& r :
             {check<float>("dX", oracle.dx(), as_vector(dx[t]), Sum::Product,
                           product_rounding(info.dx, p.N)),
              check<float>("dW", oracle.dw(), as_vector(dw[t]), Sum::Product,
                           product_rounding(info.dw, p.M)),
              check<float>("db", oracle.db(), as_vector(db[t]), Sum::WideColumnSum)})
          if (!r && failures++ < 5) ADD_FAILURE() << "thread " << t << ": " << r.message();
      }
      if (serialise) lock.lock();  // the plan's destructor enters the instance too
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(runs.load(), 12);
}

TEST(GradientConcurrency, HostThreadsEachWithItsOwnPlan) {
#if defined(KOKKOS_ENABLE_CUDA)
  TwoInstances two;
  threads_with_their_own_plans<ExecSpace>(two.spaces, false);
#elif defined(KOKKOS_ENABLE_SERIAL)
  threads_with_their_own_plans<Kokkos::Serial>({Kokkos::Serial(), Kokkos::Serial()}, true);
#else
  GTEST_SKIP() << "no execution space here takes calls from other host threads";
#endif
}

}  // namespace
