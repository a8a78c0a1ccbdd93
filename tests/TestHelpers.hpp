// SPDX-License-Identifier: Apache-2.0
// Shared by the test files:
//  - the test's OWN float64 reference of the layer (not the library's: an epilogue bug in the
//    library — scale and bias swapped, >= for > — must not pass because both sides share it),
//    and the per-element tolerance derived from K and the precision that ran;
//  - problems on any execution space (Views in that space's memory), filled on the host from a
//    seed, so that every backend sees the same numbers;
//  - the documented contract of which requests a build serves (`serves`), written out here
//    independently of Impl::resolve, and `attempt`, which runs a request and checks that it ran
//    exactly when the contract says, and that RunInfo tells the truth about it.
#ifndef FUSED_LINEAR_TEST_HELPERS_HPP
#define FUSED_LINEAR_TEST_HELPERS_HPP

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include <FusedLinear.hpp>

namespace FusedLinearTest {

namespace Impl = FusedLinear::Impl;
using FusedLinear::Algorithm;
using FusedLinear::all_algorithms;
using FusedLinear::Gemm;
using FusedLinear::Options;
using FusedLinear::Precision;
using FusedLinear::RunInfo;
using FusedLinear::Tuning;

using ExecSpace = Kokkos::DefaultExecutionSpace;
using MemorySpace = ExecSpace::memory_space;

constexpr Precision all_precisions[] = {Precision::Strict, Precision::TF32, Precision::TF32x3};

inline bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}
inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// ------------------------------------------------------------------ the test's own reference

/// PyTorch's LeakyReLU, written out: v > 0 ? v : v * slope (NaN compares false and stays NaN;
/// -0.0 maps to -0.0 * slope).
inline double leaky_relu(double v, double slope) { return v > 0 ? v : v * slope; }

/// A rank-2 View's values as a row-major std::vector<double> (any layout, space or traits).
/// (Through a contiguous copy in the View's own memory space: Kokkos copies strided Views
/// between memory spaces only when they are contiguous.)
template <class View>
std::vector<double> host_matrix(const View& A) {
  static_assert(View::rank == 2, "rank 2");
  using Scalar = typename View::non_const_value_type;
  Kokkos::fence();
  const std::int64_t rows = A.extent(0), cols = A.extent(1);
  Kokkos::View<Scalar**, Kokkos::LayoutRight, typename View::memory_space> c("copy", rows, cols);
  if (c.size() > 0) Kokkos::deep_copy(c, A);
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), c);
  std::vector<double> out(std::size_t(rows * cols));
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) out[std::size_t(i * cols + j)] = double(h(i, j));
  return out;
}
template <class View>
std::vector<double> host_vector(const View& v) {
  static_assert(View::rank == 1, "rank 1");
  using Scalar = typename View::non_const_value_type;
  Kokkos::fence();
  Kokkos::View<Scalar*, typename View::memory_space> c("copy", v.extent(0));
  if (c.size() > 0) Kokkos::deep_copy(c, v);
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), c);
  std::vector<double> out(v.extent(0));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = double(h(i));
  return out;
}

/// Writes row-major values into a rank-2 View of any layout, space or traits (through a
/// contiguous copy in its memory space).
template <class View>
void write_matrix(const View& A, const std::vector<double>& values) {
  using Scalar = typename View::non_const_value_type;
  const std::int64_t rows = A.extent(0), cols = A.extent(1);
  Kokkos::View<Scalar**, Kokkos::LayoutRight, typename View::memory_space> c("copy", rows, cols);
  auto h = Kokkos::create_mirror_view(c);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) h(i, j) = Scalar(values[std::size_t(i * cols + j)]);
  Kokkos::deep_copy(c, h);
  if (c.size() > 0) Kokkos::deep_copy(A, c);
  Kokkos::fence();
}
template <class View>
void write_vector(const View& v, const std::vector<double>& values) {
  using Scalar = typename View::non_const_value_type;
  Kokkos::View<Scalar*, typename View::memory_space> c("copy", v.extent(0));
  auto h = Kokkos::create_mirror_view(c);
  for (std::size_t i = 0; i < v.extent(0); ++i) h(i) = Scalar(values[i]);
  Kokkos::deep_copy(c, h);
  if (c.size() > 0) Kokkos::deep_copy(v, c);
  Kokkos::fence();
}

/// The inputs of a layer call on the host, in double, row-major: X [M,K], W [N,K], b [N].
struct HostInputs {
  std::int64_t M = 0, K = 0, N = 0;
  std::vector<double> X, W, b;
  double x(std::int64_t i, std::int64_t k) const { return X[std::size_t(i * K + k)]; }
  double w(std::int64_t j, std::int64_t k) const { return W[std::size_t(j * K + k)]; }
};

template <class XView, class WView, class BView>
HostInputs host_inputs(const XView& X, const WView& W, const BView& b) {
  HostInputs in;
  in.M = X.extent(0), in.K = X.extent(1), in.N = W.extent(0);
  in.X = host_matrix(X), in.W = host_matrix(W), in.b = host_vector(b);
  return in;
}

/// gamma_n = n u / (1 - n u): the classical bound on the relative error of an n-term floating
/// point dot product accumulated in any order (Higham, Accuracy and Stability, 3.1).
template <class Scalar>
double gamma(std::int64_t n) {
  const double u = std::numeric_limits<Scalar>::epsilon() / 2;
  return n * u / (1 - n * u);
}

/// The layer in float64, from the definition: y = LeakyReLU(multiplier * (x . w + b)), computed
/// here with a plain sequential sum and the comparison above (no library code), together with
/// sum_k |x_k w_k| + |b| per element, which the tolerance scales with.
class Reference {
 public:
  Reference(const HostInputs& in, double multiplier, double slope)
      : m_M(in.M),
        m_N(in.N),
        m_K(in.K),
        m_multiplier(multiplier),
        m_slope(slope),
        m_y(std::size_t(in.M * in.N)),
        m_magnitude(std::size_t(in.M * in.N)) {
    for (std::int64_t i = 0; i < in.M; ++i)
      for (std::int64_t j = 0; j < in.N; ++j) {
        double acc = 0, magnitude = std::abs(in.b[std::size_t(j)]);
        for (std::int64_t k = 0; k < in.K; ++k) {
          const double p = in.x(i, k) * in.w(j, k);
          acc += p;
          magnitude += std::abs(p);
        }
        m_y[std::size_t(i * in.N + j)] =
            leaky_relu(multiplier * (acc + in.b[std::size_t(j)]), slope);
        m_magnitude[std::size_t(i * in.N + j)] = magnitude;
      }
  }

  double operator()(std::int64_t i, std::int64_t j) const { return m_y[std::size_t(i * m_N + j)]; }
  const std::vector<double>& values() const { return m_y; }
  std::int64_t M() const { return m_M; }
  std::int64_t N() const { return m_N; }

  /// Checks y (row-major, any path's output) element by element.
  ///
  /// Tolerance per element, derived rather than tuned: the product is a K-term dot product plus
  /// the bias, so in Scalar arithmetic |acc + b - exact| <= gamma_{K+1} (sum_k |x_k w_k| + |b|);
  /// scaling by the multiplier and by the slope adds a rounding each (gamma_{K+3} covers them),
  /// and both scale the error by |multiplier| * max(1, |slope|). A correct kernel cannot exceed
  /// this in any summation order (FMA only tightens it); a wrong tile, row or column does, since
  /// the test shapes keep K small enough that one missing product is far above the bound.
  /// NaN and +-Inf in the reference must be reproduced exactly (PyTorch's semantics).
  /// `product_rounding` adds the relative error of each product's inputs when a precision mode
  /// rounds them (see the tf32 bounds below).
  template <class Scalar>
  ::testing::AssertionResult check(const std::vector<double>& y,
                                   double product_rounding = 0) const {
    if (y.size() != m_y.size())
      return ::testing::AssertionFailure()
             << "Y has " << y.size() << " elements, expected " << m_y.size();
    const double scale = std::abs(m_multiplier) * std::max(1.0, std::abs(m_slope));
    const double g = gamma<Scalar>(m_K + 3) + product_rounding;
    std::int64_t bad = 0;
    std::ostringstream first;
    for (std::int64_t i = 0; i < m_M; ++i) {
      for (std::int64_t j = 0; j < m_N; ++j) {
        const std::size_t e = std::size_t(i * m_N + j);
        const double r = m_y[e], v = y[e];
        bool ok;
        double tol = 0;
        if (std::isnan(r)) {
          ok = std::isnan(v);
        } else if (std::isinf(r)) {
          ok = v == r;
        } else {
          tol = scale * g * m_magnitude[e] + double(std::numeric_limits<Scalar>::denorm_min());
          ok = std::abs(v - r) <= tol;
        }
        if (!ok && bad++ == 0)
          first << "Y(" << i << "," << j << ") = " << v << ", reference " << r << " (tolerance "
                << tol << ")";
      }
    }
    if (bad == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << bad << " of " << m_M * m_N
           << " elements differ from the float64 reference; first: " << first.str() << " [M=" << m_M
           << " K=" << m_K << " N=" << m_N << " multiplier=" << m_multiplier << " slope=" << m_slope
           << " product_rounding=" << product_rounding << "]";
  }

  /// Norm-wise relative error ||y - ref|| / ||ref|| over the finite elements.
  double relative_error(const std::vector<double>& y) const {
    double err = 0, norm = 0;
    for (std::size_t e = 0; e < m_y.size(); ++e) {
      if (!std::isfinite(m_y[e])) continue;
      err += (y[e] - m_y[e]) * (y[e] - m_y[e]);
      norm += m_y[e] * m_y[e];
    }
    return std::sqrt(err / norm);
  }

 private:
  std::int64_t m_M, m_N, m_K;
  double m_multiplier, m_slope;
  std::vector<double> m_y, m_magnitude;
};

// ------------------------------------------------------------------ precision bounds

/// TF32 keeps 10 of fp32's 23 mantissa bits; tensor cores may truncate rather than round, so
/// each operand is within 2^-10 relative, and a product within 2 * 2^-10 + 2^-20.
constexpr double tf32_product_rounding = 2.0 / 1024 + 1.0 / (1024.0 * 1024.0);

/// Length of the K ranges the vendor 3xTF32 adds in fp32 (Impl::tf32x3_chunk on CUDA builds;
/// restated here so that the bound below exists on every build).
constexpr std::int64_t tf32x3_chunk = 256;
#if defined(FUSED_LINEAR_CUBLASLT)
static_assert(Impl::tf32x3_chunk == tf32x3_chunk, "the bound below assumes this range length");
#endif

/// The vendor 3xTF32's per-element bound, derived. Each operand x = hi + lo + e with hi, lo exact
/// in TF32 and |e| <= 2^-22 |x|, |lo| <= 2^-11 |x|; dropping lo.lo and the two e terms leaves
/// each product within 3 * 2^-22 |x w| (+ 2^-44). The products are exact in fp32 and accumulated
/// by the tensor cores, which may truncate rather than round (unit 2^-23): lo.hi + hi.lo (at
/// most 2^-10 (1 + 2^-11) sum |x w|) over 2K terms, hi.hi (at most (1 + 2^-10) sum |x w|) over
/// ranges of tf32x3_chunk terms; then the ceil(K / chunk) + 1 partial sums are added in fp32
/// with rounding (gamma_n, unit 2^-24). Reference::check adds gamma_{K+3} itself, so the extra
/// is the rest.
inline double tf32x3_product_rounding(std::int64_t K) {
  const double u = std::ldexp(1.0, -23);
  const auto truncating = [u](double n) { return n * u / (1 - n * u); };
  const std::int64_t chunk = std::min<std::int64_t>(tf32x3_chunk, std::max<std::int64_t>(K, 1));
  const double small_terms =
      truncating(2.0 * K) * std::ldexp(1.0, -10) * (1 + std::ldexp(1.0, -11));
  const double big_terms = truncating(double(chunk)) * (1 + std::ldexp(1.0, -10));
  const double sums = gamma<float>((K + chunk - 1) / chunk + 1) * (1 + std::ldexp(1.0, -9));
  const double total =
      3 * std::ldexp(1.0, -22) + std::ldexp(1.0, -44) + small_terms + big_terms + sums;
  return std::max(0.0, total - gamma<float>(K + 3));
}

/// The same bound for the Hopper kernel (fused_sm90), derived the same way for what it does
/// differently: lo = x - hi is left exact and the tensor cores read its leading TF32 bits
/// (truncation: within 2^-10 |lo| <= 2^-21 |x|), so each product is within 2^-22 (lo.lo) +
/// 2 (1 + 2^-11) 2^-21 of x w; all three products share one truncating accumulator for at most
/// 128 k (3 * 128 terms of total magnitude <= (1 + 2^-9) sum |x w|); the ranges' sums (ranges
/// staggered by 64 k, and split-K's partial tiles) are added in fp32.
inline double tf32x3_fused_product_rounding(std::int64_t K) {
  const double u = std::ldexp(1.0, -23);
  const auto truncating = [u](double n) { return n * u / (1 - n * u); };
  const double products =
      std::ldexp(1.0, -22) + 2 * (1 + std::ldexp(1.0, -11)) * std::ldexp(1.0, -21);
  const double ranges =
      truncating(3.0 * std::min<std::int64_t>(128, K)) * (1 + std::ldexp(1.0, -9));
  const double sums = gamma<float>((K + 63) / 64 + 4) * (1 + std::ldexp(1.0, -9));
  return std::max(0.0, products + ranges + sums - gamma<float>(K + 3));
}

/// The extra relative error of the products for what RunInfo says ran.
inline double product_rounding(const RunInfo& info, std::int64_t K) {
  switch (info.precision) {
    case Precision::Strict: return 0;
    case Precision::TF32: return tf32_product_rounding;
    case Precision::TF32x3:
      return info.algorithm == Algorithm::FusedSm90 ? tf32x3_fused_product_rounding(K)
                                                    : tf32x3_product_rounding(K);
  }
  return 0;
}

// ------------------------------------------------------------------ problems

/// A problem on execution space Exec: X [M,K], W [N,K], b [N], Y [M,N] in Exec's memory space
/// (Kokkos::Device<Exec, memory>, so that the overload without an instance runs on Exec too).
/// X uniform in [-1, 1); W and b uniform in +-1/sqrt(K) as nn.Linear initialises them, drawn on
/// the host in row-major order (the same numbers on every backend and layout); Y poisoned with
/// NaN so an element the kernel never writes cannot pass.
template <class Exec, class Scalar, class Layout>
struct Problem {
  using execution_space = Exec;
  using scalar_type = Scalar;
  using layout = Layout;
  using memory_space = typename Exec::memory_space;
  using Device = Kokkos::Device<Exec, memory_space>;
  using Matrix = Kokkos::View<Scalar**, Layout, Device>;
  using Vector = Kokkos::View<Scalar*, Layout, Device>;
  Matrix X, W, Y;
  Vector b;
  std::int64_t M, K, N;

  Problem(std::int64_t m, std::int64_t k, std::int64_t n, std::uint64_t seed)
      : X("X", m, k), W("W", n, k), Y("Y", m, n), b("b", n), M(m), K(k), N(n) {
    randomize(seed);
    poison();
  }

  /// Fresh contents for X, W and b (the same Views).
  void randomize(std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    const double bound = 1 / std::sqrt(double(K > 0 ? K : 1));
    std::uniform_real_distribution<double> x(-1, 1), w(-bound, bound);
    auto hX = Kokkos::create_mirror_view(X);
    auto hW = Kokkos::create_mirror_view(W);
    auto hb = Kokkos::create_mirror_view(b);
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t k = 0; k < K; ++k) hX(i, k) = Scalar(x(rng));
    for (std::int64_t j = 0; j < N; ++j)
      for (std::int64_t k = 0; k < K; ++k) hW(j, k) = Scalar(w(rng));
    for (std::int64_t j = 0; j < N; ++j) hb(j) = Scalar(w(rng));
    Kokkos::deep_copy(X, hX);
    Kokkos::deep_copy(W, hW);
    Kokkos::deep_copy(b, hb);
  }

  void poison() { Kokkos::deep_copy(Y, std::numeric_limits<Scalar>::quiet_NaN()); }

  HostInputs inputs() const { return host_inputs(X, W, b); }
  Reference reference(double multiplier, double slope) const {
    return Reference(inputs(), multiplier, slope);
  }
  std::vector<double> output() const { return host_matrix(Y); }
};

/// Y (any path's output) against the test's float64 reference.
template <class P>
::testing::AssertionResult matches_reference(const P& p, double multiplier, double slope,
                                             const typename P::Matrix& Y,
                                             double product_rounding = 0) {
  return p.reference(multiplier, slope)
      .template check<typename P::scalar_type>(host_matrix(Y), product_rounding);
}

/// Sets one element of a View from the host.
template <class View, class... Index>
void set_element(const View& v, typename View::non_const_value_type value, Index... index) {
  Kokkos::fence();
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  h(index...) = value;
  Kokkos::deep_copy(v, h);
}

// ------------------------------------------------------------------ what a build serves

inline std::string describe(const Options& o, const RunInfo& info) {
  std::ostringstream os;
  os << "requested " << FusedLinear::to_string(o.algorithm) << "/"
     << FusedLinear::to_string(o.precision);
  if (o.tuning.skinny_splits > 0) os << " (" << o.tuning.skinny_splits << " splits)";
  if (o.tuning.sm90_tf32x3_kernel > 0) os << " (sm90 kernel " << o.tuning.sm90_tf32x3_kernel << ")";
  if (o.tuning.tf32x3_partials_limit != Tuning().tf32x3_partials_limit)
    os << " (partials limit " << o.tuning.tf32x3_partials_limit << ")";
  os << ", ran " << FusedLinear::to_string(info.algorithm) << "/"
     << FusedLinear::to_string(info.precision) << " (" << FusedLinear::to_string(info.gemm) << ")";
  if (!info.note.empty()) os << ": " << info.note;
  return os.str();
}
inline std::string describe(const Options& o) {
  return std::string(FusedLinear::to_string(o.algorithm)) + "/" +
         FusedLinear::to_string(o.precision);
}

inline Options options(Algorithm a, Precision p = Precision::Strict, int splits = 0) {
  Options o(a, p);
  o.tuning.skinny_splits = splits;
  return o;
}

/// The facts the library gathers for these Views (through its canonical View types, as a plan
/// does).
template <class Exec, class XView, class WView, class BView, class YView>
Impl::Facts facts_of(const Exec& exec, const XView& X, const WView& W, const BView& b,
                     const YView& Y) {
  const Impl::CanonicalInput<Exec, XView> x = X;
  const Impl::CanonicalInput<Exec, WView> w = W;
  const Impl::CanonicalInput<Exec, BView> bias = b;
  const Impl::CanonicalOutput<Exec, YView> y = Y;
  return Impl::gather_facts(exec, x, w, bias, y);
}

/// Whether a build serves a request, as README.md and Types.hpp document it, written out here
/// independently of Impl::resolve (TestDispatch.cpp pins resolve down; this pins down the runs):
///  - the tensor-core precisions need float Views;
///  - under Auto they are floors, never refused: strict runs where it is faster (few rows) and
///    where no path computes them (the host; builds without cuBLAS/cuBLASLt or a Hopper GPU);
///  - vendor_lt runs vendor where cuBLASLt does not serve the Views;
///  - explicit algorithms: TF32 on vendor/vendor_prefill with cuBLAS or on vendor_lt; 3xTF32 on
///    the vendor paths with cuBLASLt or on fused_sm90 where its kernel takes the problem;
///    fused_sm90 computes 3xTF32 only, skinny_sm90 strict only and only where its kernel takes
///    the problem; the portable kernels strict only.
inline bool serves(const Options& o, const Impl::Facts& f, const Impl::Shape& s) {
  if (o.precision != Precision::Strict && !f.float_views) return false;
  Algorithm a = o.algorithm;
  (void)s;
  if (a == Algorithm::Auto) return true;  // the precision is a floor: strict where nothing has it
  if (a == Algorithm::VendorLt && !f.cublaslt) a = Algorithm::Vendor;
  const bool vendor = a == Algorithm::Vendor || a == Algorithm::VendorPrefill;
  switch (o.precision) {
    case Precision::Strict:
      if (a == Algorithm::FusedSm90) return false;
      if (a == Algorithm::SkinnySm90) return f.sm90_skinny == nullptr;
      return true;
    case Precision::TF32: return a == Algorithm::VendorLt || (vendor && f.blas == Gemm::Cublas);
    case Precision::TF32x3:
      if (a == Algorithm::FusedSm90) return f.sm90_tf32x3 == nullptr;
      return (vendor || a == Algorithm::VendorLt) && f.cublaslt;
  }
  return false;
}

inline bool is_vendor_gemm(Gemm g) {
  return g == Gemm::HostBlas || g == Gemm::Cublas || g == Gemm::CublasLt || g == Gemm::Rocblas ||
         g == Gemm::OneMkl;
}

/// What RunInfo must say of any run: a concrete path; the precision asked for (under Auto, or
/// strict as a floor with a note saying so); the asked algorithm unless a documented fallback
/// ran, with a note; a GEMM that belongs to the path (none for empty shapes); vendor_blas true
/// exactly when a vendor library computes the product.
inline void expect_consistent(const Options& o, const RunInfo& info, const Impl::Shape& s,
                              bool zero_multiplier) {
  const std::string what = describe(o, info);
  EXPECT_NE(info.algorithm, Algorithm::Auto) << what;
  if (o.algorithm == Algorithm::Auto) {
    if (info.precision != o.precision) {
      EXPECT_EQ(info.precision, Precision::Strict) << what;
      EXPECT_TRUE(contains(info.note, "floor")) << what;
    }
  } else {
    EXPECT_EQ(info.precision, o.precision) << what;
    if (info.algorithm != o.algorithm) {
      const bool lt_fallback = o.algorithm == Algorithm::VendorLt &&
                               info.algorithm == Algorithm::Vendor &&
                               contains(info.note, "cuBLASLt");
      const bool prefill_fallback = o.algorithm == Algorithm::VendorPrefill &&
                                    info.algorithm == Algorithm::Vendor && zero_multiplier &&
                                    contains(info.note, "multiplier 0");
      EXPECT_TRUE(lt_fallback || prefill_fallback) << "undocumented fallback: " << what;
    }
  }
  if (s.M == 0 || s.N == 0 || s.K == 0) {
    EXPECT_EQ(info.gemm, Gemm::None) << what;
    EXPECT_FALSE(info.note.empty()) << what;
  } else {
    switch (info.algorithm) {
      case Algorithm::Fused: EXPECT_EQ(info.gemm, Gemm::FusedKernel) << what; break;
      case Algorithm::FusedSkinny: EXPECT_EQ(info.gemm, Gemm::SkinnyKernel) << what; break;
      case Algorithm::FusedSm90: EXPECT_EQ(info.gemm, Gemm::Sm90Tf32x3Kernel) << what; break;
      case Algorithm::SkinnySm90: EXPECT_EQ(info.gemm, Gemm::Sm90SkinnyKernel) << what; break;
      case Algorithm::VendorLt: EXPECT_EQ(info.gemm, Gemm::CublasLt) << what; break;
      case Algorithm::Vendor:
      case Algorithm::VendorPrefill:
        if (info.precision == Precision::TF32x3)
          EXPECT_EQ(info.gemm, Gemm::CublasLt) << what;
        else
          EXPECT_TRUE(is_vendor_gemm(info.gemm) || info.gemm == Gemm::KokkosKernelsNative) << what;
        if (info.gemm == Gemm::KokkosKernelsNative)
          EXPECT_TRUE(contains(info.note, "native")) << what;
        break;
      case Algorithm::Auto: break;
    }
  }
  EXPECT_EQ(info.vendor_blas, is_vendor_gemm(info.gemm)) << what;
}

/// Runs the one-shot call with `o`; checks that it ran exactly when `serves` says so (a refusal
/// must be an std::invalid_argument naming the function) and what RunInfo says. Returns the
/// RunInfo, or nothing when refused.
template <class Exec, class XView, class WView, class BView, class YView>
std::optional<RunInfo> attempt(const Exec& exec, const XView& X, const WView& W, const BView& b,
                               const YView& Y, double multiplier, double slope, const Options& o) {
  using Scalar = typename YView::non_const_value_type;
  const Impl::Shape shape{std::int64_t(X.extent(0)), std::int64_t(X.extent(1)),
                          std::int64_t(W.extent(0))};
  const bool served = serves(o, facts_of(exec, X, W, b, Y), shape);
  try {
    const RunInfo info =
        FusedLinear::linear_leaky_relu(exec, X, W, b, Y, Scalar(multiplier), Scalar(slope), o);
    EXPECT_TRUE(served) << "ran, but the documented contract refuses it: " << describe(o, info);
    expect_consistent(o, info, shape, Scalar(multiplier) == Scalar(0));
    return info;
  } catch (const std::invalid_argument& e) {
    EXPECT_FALSE(served) << "refused a request the build serves (" << describe(o)
                         << "): " << e.what();
    EXPECT_TRUE(starts_with(e.what(), "FusedLinear::linear_leaky_relu: ")) << e.what();
    return std::nullopt;
  }
}

template <class P>
std::optional<RunInfo> attempt(const P& p, double multiplier, double slope, const Options& o) {
  return attempt(typename P::execution_space(), p.X, p.W, p.b, p.Y, multiplier, slope, o);
}

/// Makes a Plan with `o`; checks, as attempt() does, that it is made exactly when `serves` says
/// so (a refusal must be an std::invalid_argument naming FusedLinear::Plan) and what its info()
/// says. Nothing when refused.
template <class Exec, class XView, class WView, class BView, class YView>
std::optional<FusedLinear::Plan<Exec, XView, WView, BView, YView>> make_plan(
    const Exec& exec, const XView& X, const WView& W, const BView& b, const YView& Y,
    double multiplier, double slope, const Options& o) {
  using Scalar = typename YView::non_const_value_type;
  const Impl::Shape shape{std::int64_t(X.extent(0)), std::int64_t(X.extent(1)),
                          std::int64_t(W.extent(0))};
  const bool served = serves(o, facts_of(exec, X, W, b, Y), shape);
  std::optional<FusedLinear::Plan<Exec, XView, WView, BView, YView>> plan;
  try {
    plan.emplace(exec, X, W, b, Y, Scalar(multiplier), Scalar(slope), o);
  } catch (const std::invalid_argument& e) {
    EXPECT_FALSE(served) << "refused a request the build serves (" << describe(o)
                         << "): " << e.what();
    EXPECT_TRUE(starts_with(e.what(), "FusedLinear::Plan: ")) << e.what();
    return plan;
  }
  EXPECT_TRUE(served) << "made, but the documented contract refuses it: "
                      << describe(o, plan->info());
  expect_consistent(o, plan->info(), shape, Scalar(multiplier) == Scalar(0));
  return plan;
}

/// Every request the build serves for these Views: all algorithms in each precision given, with
/// forced split K added for the skinny kernels (fused_skinny, skinny_sm90) when `splits` > 0.
template <class Exec, class XView, class WView, class BView, class YView>
std::vector<Options> served_requests(const Exec& exec, const XView& X, const WView& W,
                                     const BView& b, const YView& Y,
                                     std::initializer_list<Precision> precisions, int splits = 0) {
  const Impl::Facts f = facts_of(exec, X, W, b, Y);
  const Impl::Shape s{std::int64_t(X.extent(0)), std::int64_t(X.extent(1)),
                      std::int64_t(W.extent(0))};
  std::vector<Options> out;
  for (Precision p : precisions)
    for (Algorithm a : all_algorithms) {
      if (serves(options(a, p), f, s)) out.push_back(options(a, p));
      if (splits > 0 && Impl::is_skinny(a) && serves(options(a, p), f, s))
        out.push_back(options(a, p, splits));
    }
  return out;
}

/// A value in [-1, 1) from (row, column, salt): a SplitMix64 finaliser, identical on any device
/// and the host, so inputs written by a kernel can be recomputed without copying them back.
KOKKOS_INLINE_FUNCTION double hashed(std::uint64_t i, std::uint64_t j, std::uint64_t salt) {
  std::uint64_t z = i * 0x9E3779B97F4A7C15ull ^ (j + salt * 0xBF58476D1CE4E5B9ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 40) / double(1ull << 23) - 1.0;
}

/// v(i, j) = scale * hashed(i, j, salt), enqueued on `exec`.
template <class View>
struct HashFill {
  View v;
  std::uint64_t salt;
  double scale;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i, std::int64_t j) const {
    v(i, j) = typename View::non_const_value_type(scale * hashed(i, j, salt));
  }
};
template <class Exec, class View>
void hash_fill(const Exec& exec, const View& v, std::uint64_t salt, double scale = 1) {
  using Policy = Kokkos::MDRangePolicy<Exec, Kokkos::Rank<2>, Kokkos::IndexType<std::int64_t>>;
  Kokkos::parallel_for("FusedLinearTest::hash_fill",
                       Policy(exec, {0, 0}, {std::int64_t(v.extent(0)), std::int64_t(v.extent(1))}),
                       HashFill<View>{v, salt, scale});
}

/// Two instances of the default execution space that may run concurrently: two non-blocking
/// CUDA streams on CUDA (they do not synchronise with the legacy default stream, which Kokkos
/// 3.4's default instance and Kokkos Kernels' gemm use); on the host the default instance twice
/// (host backends order their work anyway).
struct TwoInstances {
#ifdef KOKKOS_ENABLE_CUDA
  cudaStream_t streams[2] = {nullptr, nullptr};
  std::vector<ExecSpace> spaces;
  TwoInstances() {
    for (auto& s : streams)
      EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    spaces = {ExecSpace(streams[0]), ExecSpace(streams[1])};
  }
  ~TwoInstances() {
    for (auto& s : spaces) s.fence();
    FusedLinear::release_cached_plans();  // plans keyed by these streams
    spaces.clear();
    for (auto& s : streams) cudaStreamDestroy(s);
  }
#else
  std::vector<ExecSpace> spaces{ExecSpace(), ExecSpace()};
#endif
};

/// The seed of the randomised tests: FUSED_LINEAR_TEST_SEED, else a fixed default (printed).
inline std::uint64_t test_seed(std::uint64_t fallback = 20261201) {
  if (const char* s = std::getenv("FUSED_LINEAR_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  return fallback;
}

// ------------------------------------------------------------------ hand-computed values

/// A layer small enough to compute by hand, with PyTorch's semantics spelled out:
///   X = [[1, 2], [NaN, 1], [3, 3], [0, 1], [-1, 0.25]]
///   W = [[1, 1], [-1, 0.5], [1, -1], [+Inf, 1]],  b = [0.5, -3, 0, 0]
/// x . w: row 0: 3, 0, -1, Inf;  row 1: NaN (everywhere: NaN * w, NaN * Inf);
///        row 2: 6, -1.5, +0 (3 - 3: exact cancellation gives +0 in any order), Inf;
///        row 3: 1, 0.5, -1, NaN (0 * Inf);  row 4: -0.75, 1.125, -1.25, -Inf.
/// Each case: y = LeakyReLU(multiplier * (x . w + b)), v > 0 ? v : v * slope.
struct LiteralCase {
  double multiplier, slope;
  double y[5][4];
};
constexpr double literal_x[5][2] = {{1, 2}, {0, 1} /* X(1,0) is NaN */, {3, 3}, {0, 1}, {-1, 0.25}};
constexpr double literal_w[4][2] = {{1, 1}, {-1, 0.5}, {1, -1}, {0 /* +Inf */, 1}};
constexpr double literal_b[4] = {0.5, -3, 0, 0};
constexpr double inf_ = std::numeric_limits<double>::infinity();
constexpr double nan_ = std::numeric_limits<double>::quiet_NaN();
inline const std::vector<LiteralCase>& literal_cases() {
  static const std::vector<LiteralCase> cases = {
      // multiplier 2, slope 0.1: 2 * (3 + 0.5) = 7; 2 * (0 - 3) = -6 -> -0.6; 2 * -1 -> -0.2;
      // row 2, column 2: 2 * (+0 + 0) = +0, not > 0, so +0 * 0.1 = +0.
      {2,
       0.1,
       {{7, -0.6, -0.2, inf_},
        {nan_, nan_, nan_, nan_},
        {13, -0.9, 0.0, inf_},
        {3, -0.5, -0.2, nan_},
        {-0.05, -0.375, -0.25, -inf_}}},
      // multiplier -2: the scale comes after the bias (-2 * 3.5 = -7 -> -0.7, not -2*3 + 0.5);
      // row 2, column 2: -2 * +0 = -0, not > 0, so -0 * 0.1 = -0.0; -Inf stays -Inf after the
      // slope; row 4, column 3: -2 * -Inf = +Inf.
      {-2,
       0.1,
       {{-0.7, 6, 2, -inf_},
        {nan_, nan_, nan_, nan_},
        {-1.3, 9, -0.0, -inf_},
        {-0.3, 5, 2, nan_},
        {0.5, 3.75, 2.5, inf_}}},
      // multiplier 0: the sign of each zero is the sign of x . w + b (0 * -3 = -0, then
      // -0 * 0.1 = -0.0); 0 * Inf is NaN.
      {0,
       0.1,
       {{0.0, -0.0, -0.0, nan_},
        {nan_, nan_, nan_, nan_},
        {0.0, -0.0, 0.0, nan_},
        {0.0, -0.0, -0.0, nan_},
        {-0.0, -0.0, -0.0, nan_}}},
      // A negative slope tells v > 0 from v >= 0: +0 is not > 0, so +0 * -0.5 = -0.0 (row 2,
      // column 2); a ">=" would keep +0. -Inf * -0.5 = +Inf.
      {2,
       -0.5,
       {{7, 3, 1, inf_},
        {nan_, nan_, nan_, nan_},
        {13, 4.5, -0.0, inf_},
        {3, 2.5, 1, nan_},
        {0.25, 1.875, 1.25, inf_}}},
      // A slope above 1: v * slope is below v for negative v (a max(v, v * slope) form would keep
      // v); +0 * 1.5 = +0.
      {2,
       1.5,
       {{7, -9, -3, inf_},
        {nan_, nan_, nan_, nan_},
        {13, -13.5, 0.0, inf_},
        {3, -7.5, -3, nan_},
        {-0.75, -5.625, -3.75, -inf_}}},
  };
  return cases;
}

/// Writes the literal inputs into X [5,2], W [4,2], b [4] (any space, layout or value type).
template <class XView, class WView, class BView>
void write_literal_inputs(const XView& X, const WView& W, const BView& b) {
  using Scalar = typename XView::non_const_value_type;
  auto hX = Kokkos::create_mirror_view(X);
  auto hW = Kokkos::create_mirror_view(W);
  auto hb = Kokkos::create_mirror_view(b);
  for (int i = 0; i < 5; ++i)
    for (int k = 0; k < 2; ++k) hX(i, k) = Scalar(literal_x[i][k]);
  hX(1, 0) = std::numeric_limits<Scalar>::quiet_NaN();
  for (int j = 0; j < 4; ++j)
    for (int k = 0; k < 2; ++k) hW(j, k) = Scalar(literal_w[j][k]);
  hW(3, 0) = std::numeric_limits<Scalar>::infinity();
  for (int j = 0; j < 4; ++j) hb(j) = Scalar(literal_b[j]);
  Kokkos::deep_copy(X, hX);
  Kokkos::deep_copy(W, hW);
  Kokkos::deep_copy(b, hb);
}

/// y (row-major 5 x 4) against a literal case: NaN, +-Inf and the sign of every zero exactly
/// (unless `zero_signs` is false), other values within `ulps` units of Scalar's epsilon.
template <class Scalar>
::testing::AssertionResult matches_literal(const LiteralCase& c, const std::vector<double>& y,
                                           bool zero_signs = true, double ulps = 4) {
  std::ostringstream bad;
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 4; ++j) {
      const double e = c.y[i][j], v = y[std::size_t(i * 4 + j)];
      bool ok;
      if (std::isnan(e))
        ok = std::isnan(v);
      else if (std::isinf(e) || e == 0)
        ok = v == e && (!zero_signs || e != 0 || std::signbit(v) == std::signbit(e));
      else
        ok = std::abs(v - e) <= ulps * std::numeric_limits<Scalar>::epsilon() * std::abs(e);
      if (!ok) bad << " Y(" << i << "," << j << ") = " << v << " expected " << e << ";";
    }
  if (bad.str().empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "multiplier " << c.multiplier << ", slope " << c.slope << ":" << bad.str();
}

}  // namespace FusedLinearTest

#endif
