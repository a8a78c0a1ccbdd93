// SPDX-License-Identifier: Apache-2.0
// The precision bounds: the extra relative error of the products that tf32 and 3xtf32 allow,
// derived for each path, added to Reference::check's tolerance for what RunInfo says ran.
#ifndef FUSED_LINEAR_TEST_COMMON_BOUNDS_HPP
#define FUSED_LINEAR_TEST_COMMON_BOUNDS_HPP

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "Common.hpp"
#include "Oracle.hpp"

namespace FusedLinearTest {

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

}  // namespace FusedLinearTest

#endif
