// SPDX-License-Identifier: Apache-2.0
// The documented contract of which requests a build serves (`serves`), written out here
// independently of Impl::resolve, and `attempt`/`make_plan`, which run a request and check that
// it ran exactly when the contract says, and that RunInfo tells the truth about it.
#ifndef FUSED_LINEAR_TEST_COMMON_SERVES_HPP
#define FUSED_LINEAR_TEST_COMMON_SERVES_HPP

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "Common.hpp"

namespace FusedLinearTest {

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
/// independently of Impl::resolve (tests/dispatch/ pins resolve down; this pins down the runs):
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

}  // namespace FusedLinearTest

#endif
