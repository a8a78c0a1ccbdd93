// SPDX-License-Identifier: Apache-2.0
/// \file Tf32Split.hpp
/// The split of a float into two TF32 parts that every 3xTF32 path uses (the vendor path's
/// Kokkos pass and the sm_90a kernels, which include this header without Kokkos).
#ifndef FUSED_LINEAR_IMPL_KERNELS_TF32_SPLIT_HPP
#define FUSED_LINEAR_IMPL_KERNELS_TF32_SPLIT_HPP

#include <cstdint>
#include <cstring>

#include "FusedLinear/impl/Macros.hpp"

namespace FusedLinear {
namespace Impl {

/// x rounded to the nearest TF32 value (10 explicit mantissa bits; ties away from zero, as
/// cvt.rna.tf32.f32). A value the rounding would carry past FLT_MAX is truncated instead, so
/// a finite input never gets an infinite high part; Inf and NaN are returned as they are.
/// Branch-free (selects only): the sm_90a kernel splits W in its wgmma mainloop, where the
/// branches of an early return cost much of its speed
/// (docs/design/sm90-kernels.md#3xtf32-gemm-kernel-fused_sm90).
FUSED_LINEAR_FUNCTION float tf32_round(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  const std::uint32_t a = u & 0x7fffffffu;
  // |x| >= 0x7f7ff000 (as bits): rounding up would reach the all-ones exponent, so truncate;
  // |x| >= 0x7f800000: Inf or NaN, kept whole.
  const std::uint32_t big = a >= 0x7f800000u ? u : u & 0xffffe000u;
  const std::uint32_t r = a >= 0x7f7ff000u ? big : (u + 0x1000u) & 0xffffe000u;
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
  FUSED_LINEAR_FUNCTION explicit Tf32Split(float x) : hi(tf32_round(x)), lo(0) {
    // For finite x, x - hi is exact and at most 2^-11 |x|: its rounding cannot carry into the
    // exponent's all-ones, so plain integer rounding is tf32_round's (no checks: this runs
    // per element of W in the sm_90a mainloop). Inf/NaN x: lo = 0.
    std::uint32_t u, d;
    std::memcpy(&u, &x, sizeof u);
    const float rest = x - hi;
    std::memcpy(&d, &rest, sizeof d);
    d = (d + 0x1000u) & 0xffffe000u;
    float rounded;
    std::memcpy(&rounded, &d, sizeof rounded);
    lo = (u & 0x7fffffffu) < 0x7f800000u ? rounded : 0.f;
  }
};

}  // namespace Impl
}  // namespace FusedLinear

#endif
