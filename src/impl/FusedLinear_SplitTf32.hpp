// SPDX-License-Identifier: Apache-2.0
#ifndef FUSED_LINEAR_IMPL_SPLIT_TF32_HPP
#define FUSED_LINEAR_IMPL_SPLIT_TF32_HPP

#include <cstdint>
#include <cstring>

#include <Kokkos_Core.hpp>

#include "impl/FusedLinear_FusedKernel.hpp"

namespace FusedLinear {
namespace Impl {

/// x rounded to the nearest TF32 value (10 explicit mantissa bits; ties away from zero, as
/// cvt.rna.tf32.f32). A value the rounding would carry past FLT_MAX is truncated instead, so
/// a finite input never gets an infinite high part; Inf and NaN are returned as they are.
KOKKOS_INLINE_FUNCTION float tf32_round(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u) return x;
  std::uint32_t r = (u + 0x1000u) & 0xffffe000u;
  if ((r & 0x7f800000u) == 0x7f800000u) r = u & 0xffffe000u;
  float y;
  std::memcpy(&y, &r, sizeof y);
  return y;
}

/// x = hi + lo + e with hi = tf32_round(x), lo = tf32_round(x - hi) (x - hi is exact), so both
/// parts are exact in TF32 whatever rounding the tensor cores apply to their inputs, and
/// |e| <= 2^-11 |x - hi| <= 2^-22 |x|. Inf/NaN go to hi whole (lo = 0), so they reach Y
/// through hi.hi; an infinite hi also meets the other operand's lo in the cross terms, so an
/// output fp32 makes +-Inf may come out NaN (any 3xTF32 does this; README).
struct Tf32Split {
  float hi, lo;
  KOKKOS_INLINE_FUNCTION explicit Tf32Split(float x) : hi(tf32_round(x)), lo(0) {
    if (hi - hi == 0) lo = tf32_round(x - hi);  // hi finite
  }
};

/// An operand of 3xTF32 split into its two parts side by side, S = [first | second] (rows x
/// 2 Kp, Kp >= K; columns K to Kp of each part are zero): X as [X_lo | X_hi], W as
/// [W_hi | W_lo], so that one TF32 product over 2 Kp gives the small terms lo.hi + hi.lo, and
/// the hi parts give hi.hi in ranges of equal length (see vendor_product).
template <class Source, class Split>
struct SplitTf32Operand {
  Source A;
  Split S;
  std::int64_t K, Kp;
  bool lo_first;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i, std::int64_t k) const {
    const Tf32Split s(k < K ? float(A(i, k)) : 0.0f);
    S(i, k) = lo_first ? s.lo : s.hi;
    S(i, Kp + k) = lo_first ? s.hi : s.lo;
  }
};

template <class ExecSpace, class Source, class Split>
void split_tf32_operand(const ExecSpace& exec, const Source& A, const Split& S, bool lo_first) {
  const std::int64_t rows = A.extent(0), K = A.extent(1), Kp = S.extent(1) / 2;
  Kokkos::parallel_for("FusedLinear::split_tf32",
                       elementwise_policy<ExecSpace, typename Source::array_layout>(exec, rows, Kp),
                       SplitTf32Operand<Source, Split>{A, S, K, Kp, lo_first});
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
