// SPDX-License-Identifier: Apache-2.0
/// \file Dispatch.hpp
/// The one place a request becomes a path: `resolve` takes what was asked (algorithm,
/// precision), the shape, and what is true of the build, the execution space, the device and the
/// Views (`Facts`, plain data of Facts.hpp gathered once per plan by GatherFacts.hpp), and
/// returns the Decision; under auto, from the paths the cost models (rules/HostModel.hpp,
/// rules/GpuModel.hpp) predict fastest. Pure host code with no Kokkos or vendor calls, so every
/// combination (host with or without an optimised BLAS, CUDA on Hopper or another GPU, HIP, ...)
/// is unit-tested without a GPU.
#ifndef FUSED_LINEAR_IMPL_DISPATCH_HPP
#define FUSED_LINEAR_IMPL_DISPATCH_HPP

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "FusedLinear/Types.hpp"
#include "FusedLinear/impl/Errors.hpp"
#include "FusedLinear/impl/Facts.hpp"
#include "FusedLinear/impl/rules/GpuModel.hpp"
#include "FusedLinear/impl/rules/HostModel.hpp"

namespace FusedLinear {
namespace Impl {

/// A path as Planning::Measure names it: algorithm, precision and, for vendor_lt's single
/// product, which of cuBLASLt's ranked algorithms (0: its first choice) and that algorithm's
/// configuration (cuda/CublasLt.hpp, lt_config: what identifies it in wisdom, the rank being
/// only where it stood in one query's list; empty elsewhere).
struct Choice {
  Algorithm algorithm = Algorithm::Auto;
  Precision precision = Precision::Strict;
  int variant = 0;
  std::string lt_config = {};
};

struct Request {
  Algorithm algorithm = Algorithm::Auto;
  Precision precision = Precision::Strict;
  bool zero_multiplier = false;
  /// The fastest candidate Planning::Measure timed, or wisdom remembered (Planner.hpp): under
  /// Auto it runs instead of the rule's choice, checked as an explicit request is. Auto: none.
  Choice measured = {};
};

/// What resolve decides: the RunInfo a plan reports (`measured` and `from_wisdom` are the plan's
/// to set), and what the path's engine (engines/Engines.hpp) is set up with beyond it.
struct Decision : RunInfo {
  /// vendor_lt adds the bias in cuBLASLt's epilogue; the pass then only scales.
  bool bias_in_gemm = false;
  /// vendor_lt's single product (strict, tf32): which of cuBLASLt's ranked algorithms runs, as
  /// measured (0: the heuristic's first choice), and its configuration where wisdom names it.
  int lt_variant = 0;
  std::string lt_config;
};

/// Whether a GPU path serves these Views at that precision as auto would run it (the hard
/// limits; resolve refuses the rest when asked for explicitly).
inline bool gpu_serves(const Candidate& c, const Facts& f) {
  if (c.precision != Precision::Strict && !f.float_views) return false;
  switch (c.algorithm) {
    case Algorithm::Fused:
    case Algorithm::FusedSkinny: return c.precision == Precision::Strict;
    case Algorithm::SkinnySm90: return c.precision == Precision::Strict && f.sm90_skinny == nullptr;
    case Algorithm::FusedSm90: return c.precision == Precision::TF32x3 && f.sm90_tf32x3 == nullptr;
    case Algorithm::VendorLt: return f.cublaslt;
    case Algorithm::Vendor:
    case Algorithm::VendorPrefill:
      if (c.precision == Precision::Strict) return f.blas != Gemm::KokkosKernelsNative;
      if (c.algorithm == Algorithm::VendorPrefill) return false;  // never timed: not a candidate
      return c.precision == Precision::TF32 ? f.blas == Gemm::Cublas : f.cublaslt;
    case Algorithm::Auto: break;
  }
  return false;
}

/// Every path auto may take on a GPU, strict first (ties go to the earlier).
constexpr Candidate gpu_candidates[] = {
    {Algorithm::FusedSkinny, Precision::Strict}, {Algorithm::SkinnySm90, Precision::Strict},
    {Algorithm::Fused, Precision::Strict},       {Algorithm::VendorLt, Precision::Strict},
    {Algorithm::Vendor, Precision::Strict},      {Algorithm::VendorPrefill, Precision::Strict},
    {Algorithm::FusedSm90, Precision::TF32x3},   {Algorithm::VendorLt, Precision::TF32x3},
    {Algorithm::Vendor, Precision::TF32x3},      {Algorithm::VendorLt, Precision::TF32},
    {Algorithm::Vendor, Precision::TF32}};

/// Whether precision `p` is at least as accurate as the floor `floor` (Options::precision under
/// Algorithm::Auto): strict fp32 meets every floor, 3xTF32 (fp32-accurate) meets tf32's.
inline bool meets_floor(Precision p, Precision floor) {
  switch (floor) {
    case Precision::Strict: return p == Precision::Strict;
    case Precision::TF32x3: return p == Precision::Strict || p == Precision::TF32x3;
    case Precision::TF32: return true;
  }
  return false;
}

/// Auto on a GPU: of the paths that serve these Views at a precision meeting the floor, the one
/// the cost model predicts fastest.
inline Candidate gpu_auto(const Shape& s, const Facts& f, Precision floor) {
  Candidate best = {Algorithm::Fused, Precision::Strict};
  double best_ms = std::numeric_limits<double>::infinity();
  for (const Candidate& c : gpu_candidates) {
    if (!meets_floor(c.precision, floor) || !gpu_serves(c, f)) continue;
    const double ms = gpu_predicted_ms(c, s, f);
    if (ms < best_ms) best = c, best_ms = ms;
  }
  return best;
}

/// Whether a path computes a precision other than strict fp32 that meets the floor here.
inline bool has_tensor_path(const Facts& f, Precision floor) {
  if (f.backend == Backend::Host) return false;
  for (const Candidate& c : gpu_candidates)
    if (c.precision != Precision::Strict && meets_floor(c.precision, floor) && gpu_serves(c, f))
      return true;
  return false;
}

inline bool is_skinny(Algorithm a) {
  return a == Algorithm::FusedSkinny || a == Algorithm::SkinnySm90;
}

/// The fastest strict path for a shape (Algorithm::Auto in Precision::Strict).
inline Algorithm strict_auto(const Shape& s, const Facts& f) {
  if (f.backend != Backend::Host) return gpu_auto(s, f, Precision::Strict).algorithm;
  if (host_predicted_ms(Algorithm::FusedSkinny, s, f) < host_predicted_ms(Algorithm::Fused, s, f))
    return Algorithm::FusedSkinny;
  if (f.blas == Gemm::HostBlas && f.host_blas == HostBlas::Optimized &&
      s.M >= HostRule::vendor_rows && s.K >= HostRule::vendor_k)
    return Algorithm::Vendor;
  return Algorithm::Fused;
}

/// The path, precision and GEMM a request runs; throws std::invalid_argument naming
/// `function` when the request cannot be served as asked (never quietly computes otherwise).
inline Decision resolve(const Request& r, const Shape& s, const Facts& f, const char* function) {
  Decision d;
  d.algorithm = r.algorithm;
  d.precision = r.precision;
  const std::string mode = to_string(r.precision);
  if (r.precision != Precision::Strict && !f.float_views)
    refuse(function, "precision " + mode + " applies to float Views only");

  if (d.algorithm == Algorithm::Auto && r.measured.algorithm != Algorithm::Auto) {
    // Planning::Measure timed the candidates: the fastest runs, checked below as an explicit
    // request is, so that a refused path is refused rather than run.
    if (!meets_floor(r.measured.precision, r.precision))
      refuse(function, std::string("a measured choice in precision ") +
                           to_string(r.measured.precision) + " is below the floor " + mode);
    d.algorithm = r.measured.algorithm;
    d.precision = r.measured.precision;
    if (d.precision != r.precision)
      d.note = "precision " + mode + " asked under auto, a floor: " + to_string(d.precision) +
               " (" + to_string(d.algorithm) + ") measured faster at this shape";
  } else if (d.algorithm == Algorithm::Auto) {
    const Candidate c = f.backend == Backend::Host ? Candidate{strict_auto(s, f), Precision::Strict}
                                                   : gpu_auto(s, f, r.precision);
    d.algorithm = c.algorithm;
    d.precision = c.precision;
    if (c.precision != r.precision)
      d.note = "precision " + mode + " asked under auto, a floor: " +
               (has_tensor_path(f, r.precision)
                    ? std::string(c.precision == Precision::Strict ? "strict fp32"
                                                                   : to_string(c.precision)) +
                          " (" + to_string(c.algorithm) +
                          ") is at least as accurate and predicted faster at this shape"
                    : std::string("no path computes it here (it needs cuBLAS, cuBLASLt or a "
                                  "Hopper GPU); strict fp32 (") +
                          to_string(c.algorithm) + ") runs");
  }

  if (d.algorithm == Algorithm::VendorLt && !f.cublaslt) {
    d.algorithm = Algorithm::Vendor;
    append(d.note,
           "cuBLASLt does not serve these Views here (needs a CUDA build that found cublasLt, "
           "float/double X, W and Y of one layout in CUDA memory): ran vendor");
  }
  if (d.algorithm == Algorithm::VendorPrefill && r.zero_multiplier) {
    // With alpha = 0 a BLAS skips the product entirely, so NaN and Inf in X or W would not reach
    // Y as they do in PyTorch: run the beta = 0 variant, which keeps alpha = 1.
    d.algorithm = Algorithm::Vendor;
    append(d.note,
           "vendor_prefill with multiplier 0 would let the BLAS skip the product (alpha = 0) and "
           "drop NaN/Inf propagation; ran vendor instead");
  }

  const bool vendor = d.algorithm == Algorithm::Vendor || d.algorithm == Algorithm::VendorPrefill;
  switch (d.precision) {
    case Precision::Strict:
      if (d.algorithm == Algorithm::FusedSm90)
        refuse(function, "fused_sm90 computes precision 3xtf32 only (asked: strict)");
      if (d.algorithm == Algorithm::SkinnySm90 && f.sm90_skinny != nullptr)
        refuse(function, std::string("skinny_sm90 (the sm_90a few-rows kernel) ") + f.sm90_skinny +
                             "; fused_skinny runs everywhere");
      break;
    case Precision::TF32:
      if (!(d.algorithm == Algorithm::VendorLt || (vendor && f.blas == Gemm::Cublas)))
        refuse(function, std::string("precision tf32 needs cuBLAS or cuBLASLt (vendor, "
                                     "vendor_prefill, vendor_lt on CUDA with X, W and Y of one "
                                     "layout); ") +
                             to_string(d.algorithm) + " with these Views gets " +
                             (vendor ? to_string(f.blas) : "no tensor cores"));
      break;
    case Precision::TF32x3:
      if (d.algorithm == Algorithm::FusedSm90) {
        if (f.sm90_tf32x3 != nullptr)
          refuse(function, std::string("fused_sm90 (the sm_90a 3xtf32 kernel) ") + f.sm90_tf32x3 +
                               "; the vendor paths run 3xtf32 on any CUDA GPU");
      } else if (!((vendor || d.algorithm == Algorithm::VendorLt) && f.cublaslt)) {
        refuse(function,
               std::string("precision 3xtf32 runs on fused_sm90 (Hopper GPUs) and, "
                           "through cuBLASLt, on the vendor paths (a CUDA build that "
                           "found it, X, W and Y of one layout in CUDA memory); not on ") +
                   to_string(d.algorithm) + " here");
      }
      break;
  }

  switch (d.algorithm) {
    case Algorithm::Vendor:
    case Algorithm::VendorPrefill:
      // 3xTF32's products run through cuBLASLt on every vendor path.
      d.gemm = d.precision == Precision::TF32x3 ? Gemm::CublasLt : f.blas;
      d.vendor_blas = d.gemm != Gemm::KokkosKernelsNative;
      if (!d.vendor_blas)
        append(d.note,
               "no vendor BLAS serves these Views (needs float/double, X, W and Y of one layout, "
               "LayoutLeft or LayoutRight, in a memory space whose BLAS TPL is enabled): "
               "KokkosBlas::gemm runs its native kernel");
      break;
    case Algorithm::VendorLt:
      d.gemm = Gemm::CublasLt;
      d.vendor_blas = true;
      d.bias_in_gemm = f.cublaslt_bias;
      break;
    case Algorithm::Fused: d.gemm = Gemm::FusedKernel; break;
    case Algorithm::FusedSkinny: d.gemm = Gemm::SkinnyKernel; break;
    case Algorithm::FusedSm90: d.gemm = Gemm::Sm90Tf32x3Kernel; break;
    case Algorithm::SkinnySm90: d.gemm = Gemm::Sm90SkinnyKernel; break;
    case Algorithm::Auto: break;  // resolved above
  }

  if (d.algorithm == Algorithm::VendorLt && d.precision != Precision::TF32x3 &&
      r.measured.algorithm == d.algorithm && r.measured.precision == d.precision)
    d.lt_variant = r.measured.variant, d.lt_config = r.measured.lt_config;

  if (s.M == 0 || s.N == 0 || s.K == 0) {
    d.gemm = Gemm::None;  // no product: no BLAS runs, no bias goes through one
    d.vendor_blas = d.bias_in_gemm = false;
  }
  if (s.M == 0 || s.N == 0) {
    append(d.note, "empty output (M or N is 0): nothing to compute");
  } else if (s.K == 0) {
    // Kokkos Kernels' gemm returns without touching Y when K = 0; the product is 0 here.
    append(d.note, "K is 0: the product is zero, Y = LeakyReLU(multiplier * b) on every row");
  }
  if (f.backend != Backend::Host) d.gpu_rates = gpu_rates(f);
  return d;
}

/// The candidates of one of the gradient's products (GradientImpl.hpp): KokkosBlas::gemm in
/// strict fp32 and, on cuBLAS, TF32; cuBLASLt's 3xTF32 where it serves the Views (`lt3x`).
inline std::vector<Candidate> gradient_candidates(const Facts& f, bool lt3x) {
  std::vector<Candidate> c{{Algorithm::Vendor, Precision::Strict}};
  if (f.blas == Gemm::Cublas && f.float_views) c.push_back({Algorithm::Vendor, Precision::TF32});
  if (lt3x) c.push_back({Algorithm::VendorLt, Precision::TF32x3});
  if (f.sm90_tf32x3 == nullptr) c.push_back({Algorithm::FusedSm90, Precision::TF32x3});
  return c;
}

inline RunInfo gradient_run_info(const Candidate& c, const Facts& f) {
  RunInfo r;
  r.algorithm = c.algorithm, r.precision = c.precision;
  r.gemm = c.algorithm == Algorithm::VendorLt    ? Gemm::CublasLt
           : c.algorithm == Algorithm::FusedSm90 ? Gemm::Sm90Tf32x3Kernel
                                                 : f.blas;
  r.vendor_blas = r.gemm != Gemm::KokkosKernelsNative;
  if (f.backend != Backend::Host) r.gpu_rates = gpu_rates(f);
  return r;
}

/// The path of one of the gradient's products, `s` the product as the forward's shape (rows,
/// reduction, columns): under auto the candidate meeting the floor that the GPU cost model
/// predicts fastest (strict on the host); `product` false where there is none to run.
inline RunInfo resolve_gradient_product(const GradientOptions& o, const Shape& s, bool product,
                                        bool lt3x, const Facts& f, const char* function) {
  const std::string mode = to_string(o.precision);
  if (o.precision != Precision::Strict && !f.float_views)
    refuse(function, "precision " + mode + " applies to float Views only");
  const std::vector<Candidate> all = gradient_candidates(f, lt3x);
  RunInfo r;
  if (o.algorithm == Algorithm::Auto) {
    Candidate best = all.front();
    double best_ms = std::numeric_limits<double>::infinity();
    bool tensor_path = false;
    for (const Candidate& c : all) {
      if (!meets_floor(c.precision, o.precision)) continue;
      tensor_path = tensor_path || c.precision != Precision::Strict;
      const double ms = f.backend == Backend::Host ? 0 : gpu_predicted_ms(c, s, f);
      if (ms < best_ms) best = c, best_ms = ms;
    }
    r = gradient_run_info(best, f);
    if (best.precision != o.precision)
      r.note = "precision " + mode + " asked under auto, a floor: " +
               (tensor_path ? std::string("strict fp32 (vendor) is at least as accurate and "
                                          "predicted faster here")
                            : std::string("no path computes it here (it needs cuBLAS, or "
                                          "cuBLASLt with float, row-major X, W, dX and dW with "
                                          "contiguous rows); strict fp32 runs"));
  } else {
    const Algorithm a = o.algorithm;
    const Precision p = o.precision;
    if (a != Algorithm::Vendor && a != Algorithm::VendorLt && a != Algorithm::FusedSm90)
      refuse(function, std::string("the gradient's products run on auto, vendor, vendor_lt or "
                                   "fused_sm90; not on ") +
                           to_string(a));
    if (a != Algorithm::Vendor && p != Precision::TF32x3)
      refuse(function, std::string(to_string(a)) +
                           " computes the gradient's products in "
                           "3xtf32; vendor runs strict and tf32");
    // vendor in 3xtf32 runs cuBLASLt's (the gradient has no split of its own for cuBLAS)
    const auto found = std::find_if(all.begin(), all.end(), [&](const Candidate& c) {
      return c.precision == p &&
             (c.algorithm == a || (a == Algorithm::Vendor && c.algorithm == Algorithm::VendorLt));
    });
    if (found == all.end())
      refuse(function,
             std::string("the gradient's products run ") + to_string(a) + " in " + mode +
                 " only on CUDA: tf32 on cuBLAS (vendor), 3xtf32 on cuBLASLt (vendor, vendor_lt) "
                 "with float X, W, dX and dW, row-major with contiguous rows, and on the sm_90a "
                 "kernel (fused_sm90) where it also has an H100 or H200 and X and W rows in "
                 "16-byte multiples" +
                 (f.sm90_tf32x3 && a == Algorithm::FusedSm90
                      ? std::string(" (fused_sm90 here: ") + f.sm90_tf32x3 + ")"
                      : std::string()));
    r = gradient_run_info(*found, f);
  }
  if (!product) {
    r.gemm = Gemm::None, r.vendor_blas = false;
    append(r.note, "no product: the output is skipped or empty, or its reduction is empty");
  }
  return r;
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
