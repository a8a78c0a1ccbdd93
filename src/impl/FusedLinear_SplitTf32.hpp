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
/// through the hi.hi product exactly as in fp32.
struct Tf32Split {
  float hi, lo;
  KOKKOS_INLINE_FUNCTION explicit Tf32Split(float x) : hi(tf32_round(x)), lo(0) {
    if (hi - hi == 0) lo = tf32_round(x - hi);  // hi finite
  }
};

/// The operands of 3xTF32 as one TF32 product over 3K:
///   Xs = [X_lo | X_hi | X_hi]   (M x 3K)
///   Ws = [W_hi | W_lo | W_hi]   (N x 3K)
/// so Xs . Ws^T = lo.hi + hi.lo + hi.hi with the small terms accumulated first.
/// `first` selects which part goes in the first K block (lo for X, hi for W).
template <class Source, class Split>
struct SplitTf32Operand {
  Source A;
  Split S;
  std::int64_t K;
  bool lo_first;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i, std::int64_t k) const {
    const Tf32Split s(A(i, k));
    S(i, k) = lo_first ? s.lo : s.hi;
    S(i, K + k) = lo_first ? s.hi : s.lo;
    S(i, 2 * K + k) = s.hi;
  }
};

template <class ExecSpace, class Source, class Split>
void split_tf32_operand(const ExecSpace& exec, const Source& A, const Split& S, bool lo_first) {
  using Policy = Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>, Kokkos::IndexType<std::int64_t>>;
  const std::int64_t rows = A.extent(0), K = A.extent(1);
  const SplitTf32Operand<Source, Split> f{A, S, K, lo_first};
  // Contiguous index on the fast thread index (see epilogue_pass).
  const bool right = std::is_same<typename Source::array_layout, Kokkos::LayoutRight>::value;
  if (is_host_space<ExecSpace>())
    Kokkos::parallel_for("FusedLinear::split_tf32", Policy(exec, {0, 0}, {rows, K}), f);
  else if (right)
    Kokkos::parallel_for("FusedLinear::split_tf32", Policy(exec, {0, 0}, {rows, K}, {1, 256}), f);
  else
    Kokkos::parallel_for("FusedLinear::split_tf32", Policy(exec, {0, 0}, {rows, K}, {256, 1}), f);
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
