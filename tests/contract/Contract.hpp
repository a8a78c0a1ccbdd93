// SPDX-License-Identifier: Apache-2.0
// The contract suites' vocabulary (tests/contract/): the View types a case is built from (one
// instantiation of the library per set: LayoutStride covers every stride at run time,
// LayoutRight and LayoutLeft where the layout type matters: cuBLASLt, the BLAS), the reference
// of the rows checked, and `checked_call`: one call of the library under the contract — it
// computes right or throws std::invalid_argument naming the function, and either way nothing
// but Y's elements changes (nothing at all when refused).
#ifndef FUSED_LINEAR_TEST_CONTRACT_CONTRACT_HPP
#define FUSED_LINEAR_TEST_CONTRACT_CONTRACT_HPP

#include <array>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "Guarded.hpp"

namespace FusedLinearTest {
namespace Contract {

/// All four operands LayoutStride (any strides, one instantiation).
template <class Scalar_, class Memory_>
struct StridedSet {
  using Scalar = Scalar_;
  using Memory = Memory_;
  using Matrix = Kokkos::View<Scalar**, Kokkos::LayoutStride, Memory, Kokkos::MemoryUnmanaged>;
  using Vector = Kokkos::View<Scalar*, Kokkos::LayoutStride, Memory, Kokkos::MemoryUnmanaged>;
  static std::string name() { return std::string("LayoutStride ") + type_name(); }
  static const char* type_name() { return sizeof(Scalar) == 4 ? "float" : "double"; }
  static bool takes(const Geometry&) { return true; }
  static Matrix matrix(Scalar* base, const Geometry& g) {
    return Matrix(base + g.offset, Kokkos::LayoutStride(std::size_t(g.rows), std::size_t(g.s0),
                                                        std::size_t(g.cols), std::size_t(g.s1)));
  }
};

/// X, W, Y LayoutRight with padded rows (column subviews of wider unmanaged Views), b strided.
template <class Scalar_, class Memory_>
struct RightSet {
  using Scalar = Scalar_;
  using Memory = Memory_;
  using Base = Kokkos::View<Scalar**, Kokkos::LayoutRight, Memory, Kokkos::MemoryUnmanaged>;
  using Matrix = decltype(Kokkos::subview(std::declval<Base>(), Kokkos::ALL,
                                          std::pair<std::int64_t, std::int64_t>()));
  using Vector = typename StridedSet<Scalar, Memory>::Vector;
  static_assert(std::is_same<typename Matrix::array_layout, Kokkos::LayoutRight>::value, "");
  static std::string name() {
    return std::string("LayoutRight ") + StridedSet<Scalar, Memory>::type_name();
  }
  static bool takes(const Geometry& g) { return g.s1 == 1 && g.s0 >= g.cols; }
  static Matrix matrix(Scalar* base, const Geometry& g) {
    return Kokkos::subview(Base(base + g.offset, std::size_t(g.rows), std::size_t(g.s0)),
                           Kokkos::ALL, std::make_pair(std::int64_t(0), g.cols));
  }
};

/// X, W, Y LayoutLeft with padded columns (row subviews of taller unmanaged Views), b strided.
template <class Scalar_, class Memory_>
struct LeftSet {
  using Scalar = Scalar_;
  using Memory = Memory_;
  using Base = Kokkos::View<Scalar**, Kokkos::LayoutLeft, Memory, Kokkos::MemoryUnmanaged>;
  using Matrix = decltype(Kokkos::subview(std::declval<Base>(),
                                          std::pair<std::int64_t, std::int64_t>(), Kokkos::ALL));
  using Vector = typename StridedSet<Scalar, Memory>::Vector;
  static_assert(std::is_same<typename Matrix::array_layout, Kokkos::LayoutLeft>::value, "");
  static std::string name() {
    return std::string("LayoutLeft ") + StridedSet<Scalar, Memory>::type_name();
  }
  static bool takes(const Geometry& g) { return g.s0 == 1 && g.s1 >= g.rows; }
  static Matrix matrix(Scalar* base, const Geometry& g) {
    return Kokkos::subview(Base(base + g.offset, std::size_t(g.s1), std::size_t(g.cols)),
                           std::make_pair(std::int64_t(0), g.rows), Kokkos::ALL);
  }
};

template <class Set>
bool takes(const Arrangement& a) {
  return Set::takes(a.X) && Set::takes(a.W) && Set::takes(a.Y);
}

/// The Views of an arrangement over buffers, in a set's types.
template <class Set>
struct Views {
  typename Set::Matrix X, W, Y;
  typename Set::Vector b;
  template <class B>
  Views(const B& bufs, const Arrangement& a)
      : X(Set::matrix(bufs.data(a.x), a.X)),
        W(Set::matrix(bufs.data(a.w), a.W)),
        Y(Set::matrix(bufs.data(a.y), a.Y)),
        b(bufs.data(a.bias) + a.b.offset,
          Kokkos::LayoutStride(std::size_t(a.b.rows), std::size_t(a.b.s0))) {}
};

template <class Exec, class Set>
using PlanOf = FusedLinear::Plan<Exec, typename Set::Matrix, typename Set::Matrix,
                                 typename Set::Vector, typename Set::Matrix>;

/// Inputs as nn.Linear draws them (X in [-1, 1), W and b in +-1/sqrt(K)), exact in float so
/// that float and double cases compute from the same numbers.
inline HostInputs random_inputs(std::int64_t M, std::int64_t K, std::int64_t N,
                                std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const double bound = 1 / std::sqrt(double(K > 0 ? K : 1));
  std::uniform_real_distribution<double> x(-1, 1), w(-bound, bound);
  HostInputs in;
  in.M = M, in.K = K, in.N = N;
  in.X.resize(std::size_t(M * K)), in.W.resize(std::size_t(N * K)), in.b.resize(std::size_t(N));
  for (double& v : in.X) v = double(float(x(rng)));
  for (double& v : in.W) v = double(float(w(rng)));
  for (double& v : in.b) v = double(float(w(rng)));
  return in;
}

/// The float64 reference of the rows checked: all of them, or a sample for large layers.
class Expect {
 public:
  Expect(const HostInputs& in, double multiplier, double slope, std::vector<std::int64_t> rows = {})
      : m_rows(std::move(rows)), m_K(in.K), m_N(in.N), m_ref(subset(in), multiplier, slope) {}
  template <class Scalar>
  ::testing::AssertionResult check(const std::vector<double>& y, const RunInfo& info) const {
    std::vector<double> rows;
    for (std::int64_t i : m_rows)
      rows.insert(rows.end(), y.begin() + i * m_N, y.begin() + (i + 1) * m_N);
    return m_ref.check<Scalar>(rows, product_rounding(info, m_K));
  }

 private:
  HostInputs subset(const HostInputs& in) {
    if (m_rows.empty())
      for (std::int64_t i = 0; i < in.M; ++i) m_rows.push_back(i);
    HostInputs s = in;
    s.M = std::int64_t(m_rows.size());
    s.X.clear();
    for (std::int64_t i : m_rows)
      s.X.insert(s.X.end(), in.X.begin() + i * in.K, in.X.begin() + (i + 1) * in.K);
    return s;
  }
  std::vector<std::int64_t> m_rows;
  std::int64_t m_K, m_N;
  Reference m_ref;
};

/// Every request: every algorithm in every precision, the skinny kernels with forced split K too.
inline std::vector<Options> every_request(int splits = 3) {
  std::vector<Options> out;
  for (Precision p : all_precisions)
    for (Algorithm a : all_algorithms) {
      out.push_back(options(a, p));
      if (Impl::is_skinny(a)) out.push_back(options(a, p, splits));
    }
  return out;
}
inline std::string label(const Options& o) {
  std::string s = describe(o);
  if (o.tuning.skinny_splits > 0) s += " " + std::to_string(o.tuning.skinny_splits) + " splits";
  return s;
}

/// Paths whose kernel is chosen for the plan's strides or alignment (cuBLASLt's heuristic, the
/// sm_90a kernels' TMA): the only ones README lets refuse other Views at execute.
inline bool may_refuse_at_execute(const RunInfo& info) {
  return info.gemm == Gemm::CublasLt || info.algorithm == Algorithm::FusedSm90 ||
         info.algorithm == Algorithm::SkinnySm90;
}

enum class Outcome { Ran, Refused, Broke };

/// Calls made per requested path, for the report.
class Tally {
 public:
  void add(const std::string& path, Outcome o) {
    std::lock_guard<std::mutex> lock(m_mutex);
    ++m_counts[path][o == Outcome::Ran ? 0 : 1];
  }
  void print(const std::string& test) {
    std::lock_guard<std::mutex> lock(m_mutex);
    long ran = 0, refused = 0;
    std::string detail;
    for (const auto& c : m_counts) {
      ran += c.second[0], refused += c.second[1];
      detail += "\n    " + c.first + ": " + std::to_string(c.second[0]) + " computed, " +
                std::to_string(c.second[1]) + " refused";
    }
    std::printf("[ contract ] %s: %ld calls computed, %ld refused%s\n", test.c_str(), ran, refused,
                detail.c_str());
  }

 private:
  std::mutex m_mutex;
  std::map<std::string, std::array<long, 2>> m_counts;
};

/// Runs `call` (returning the RunInfo of what ran, or nothing where a helper saw a documented
/// refusal; or throwing) and says what happened; a refusal must name `function` and be one
/// the contract allows.
template <class Call>
Outcome invoke(const char* function, bool may_refuse, Call&& call, std::optional<RunInfo>& info) {
  try {
    info = call();
    return info ? Outcome::Ran : Outcome::Refused;
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(starts_with(e.what(), std::string(function) + ": "))
        << "a refusal must name " << function << ": " << e.what();
    EXPECT_TRUE(may_refuse) << "refused a call the contract serves: " << e.what();
    return Outcome::Refused;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "neither computed nor refused with std::invalid_argument: " << e.what();
    return Outcome::Broke;
  }
}

/// After a call on `a` staged as `im`: guard bands and inputs unchanged, Y unchanged if it did
/// not run, Y right if it did.
/// (Only Y's buffer when `inputs_too` is false: calls in a loop check the inputs at the end.)
/// Returns whether all held.
template <class Exec, class Scalar, class Memory>
bool settle(const Exec& exec, const Buffers<Scalar, Memory>& bufs, const Arrangement& a,
            const Image<Scalar>& im, const Expect& expect, Outcome outcome,
            const std::optional<RunInfo>& info, bool inputs_too = true) {
  std::vector<double> y;
  const auto unchanged = unchanged_but_y(exec, bufs, a, im, outcome != Outcome::Ran, y, inputs_too);
  EXPECT_TRUE(unchanged);
  if (outcome != Outcome::Ran) return bool(unchanged) && outcome == Outcome::Refused;
  const auto right = expect.check<Scalar>(y, *info);
  EXPECT_TRUE(right) << "ran " << FusedLinear::to_string(info->algorithm) << "/"
                     << FusedLinear::to_string(info->precision) << " ("
                     << FusedLinear::to_string(info->gemm) << ")";
  return unchanged && right;
}

/// One call under the contract: stage `a` with `in`, call, settle.
template <class Exec, class Scalar, class Memory, class Call>
Outcome checked_call(const Exec& exec, const Buffers<Scalar, Memory>& bufs, const Arrangement& a,
                     const HostInputs& in, const Expect& expect, const char* function,
                     bool may_refuse, Call&& call) {
  SCOPED_TRACE("Views: " + a.name);
  const Image<Scalar> im = stage(exec, bufs, a, in);
  std::optional<RunInfo> info;
  const Outcome outcome = invoke(function, may_refuse, call, info);
  settle(exec, bufs, a, im, expect, outcome, info);
  return outcome;
}

}  // namespace Contract
}  // namespace FusedLinearTest

#endif
