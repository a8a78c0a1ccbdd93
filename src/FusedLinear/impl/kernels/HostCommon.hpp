// SPDX-License-Identifier: Apache-2.0
/// \file HostCommon.hpp
/// What the host (CPU) kernels behind fused and fused_skinny share (HostFusedKernel.hpp,
/// HostSkinnyKernel.hpp): register-blocked loops whose innermost
/// loop is one or two SIMD vectors of the instruction set the compiler targets (the -march that
/// Kokkos_ARCH_* gives every consumer of Kokkos: AVX-512 with Kokkos_ARCH_SKX, AVX2 with HSW/ZEN*,
/// SSE2 with none), and the epilogue applied in registers before the single write of Y.
///
/// Nothing Kokkos 3.4 lacks (it has no SIMD types): plain loops that the compiler vectorises,
/// with OpenMP's `simd simdlen(lanes)` where the host compiler runs with OpenMP (without it GCC
/// 12 prefers 256-bit vectors on AVX-512 CPUs: half the arithmetic per instruction; see
/// docs/design/host-kernels.md#vector-code-without-simd-types). Intrinsics only in two places,
/// each with a plain fallback: the 16 x 16 transposes of the packing (transpose_16x16) and the
/// sum of a vector's lanes (sum_lanes).
/// Every element of Y is one thread's sum over k in a fixed order, whatever the thread count.
#ifndef FUSED_LINEAR_IMPL_KERNELS_HOST_COMMON_HPP
#define FUSED_LINEAR_IMPL_KERNELS_HOST_COMMON_HPP

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <Kokkos_Core.hpp>

#if defined(__AVX512F__) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#include <immintrin.h>
#define FUSED_LINEAR_HOST_AVX512_TRANSPOSE 1
#endif

#include "FusedLinear/Epilogue.hpp"
#include "FusedLinear/impl/kernels/Common.hpp"
#include "FusedLinear/impl/kernels/HostTiles.hpp"

#define FUSED_LINEAR_PRAGMA(x) _Pragma(#x)
// A loop of exactly `lanes` iterations (or a multiple) that is one SIMD vector of the host.
#if defined(_OPENMP) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#define FUSED_LINEAR_HOST_SIMD(lanes) FUSED_LINEAR_PRAGMA(omp simd simdlen(lanes))
#else
#define FUSED_LINEAR_HOST_SIMD(lanes) FUSED_LINEAR_UNROLL
#endif

namespace FusedLinear {
namespace Impl {

#if defined(FUSED_LINEAR_HOST_AVX512_TRANSPOSE)
/// dst[q * ld + j] = rows[j][q] for j, q < 16 (a 16 x 16 block of floats transposed in
/// registers), storing the lanes of `lanes`. Intrinsics because element by element, packing's
/// transposes were a large share of the fused kernel's time, and compilers do not find this
/// shuffle network (docs/design/host-kernels.md#fused-on-the-host).
inline void transpose_16x16(const float* const (&rows)[16], float* dst, std::int64_t ld,
                            __mmask16 lanes) {
  __m512 r[16], t[16];
  for (int j = 0; j < 16; ++j) r[j] = _mm512_loadu_ps(rows[j]);
  for (int j = 0; j < 16; j += 2) {
    t[j] = _mm512_unpacklo_ps(r[j], r[j + 1]);
    t[j + 1] = _mm512_unpackhi_ps(r[j], r[j + 1]);
  }
  for (int j = 0; j < 16; j += 4) {
    r[j] = _mm512_shuffle_ps(t[j], t[j + 2], 0x44);
    r[j + 1] = _mm512_shuffle_ps(t[j], t[j + 2], 0xEE);
    r[j + 2] = _mm512_shuffle_ps(t[j + 1], t[j + 3], 0x44);
    r[j + 3] = _mm512_shuffle_ps(t[j + 1], t[j + 3], 0xEE);
  }
  for (int h = 0; h < 16; h += 8) {
    for (int j = 0; j < 4; ++j) {
      t[h + j] = _mm512_shuffle_f32x4(r[h + j], r[h + j + 4], 0x88);
      t[h + j + 4] = _mm512_shuffle_f32x4(r[h + j], r[h + j + 4], 0xDD);
    }
  }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
    r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xDD);
  }
  for (int q = 0; q < 16; ++q) _mm512_mask_storeu_ps(dst + q * ld, lanes, r[q]);
}
#endif

/// The sum of a vector's lanes after the products x[q] w[q] of its first `tail` lanes are added
/// to them (a dot product's last, partial step; tail < L), added pairwise (halves, then
/// quarters, ...): one fixed order. AVX-512 floats by masked loads and the reduction's shuffles,
/// in that order: the lane-by-lane form went through memory and, with the tail's dependent
/// multiply-adds after it, cost the skinny kernel more per output than a dot product of 16 steps.
template <class Scalar, int L>
inline Scalar sum_lanes(const Scalar (&v)[L], const Scalar* x, const Scalar* w, int tail) {
#if defined(FUSED_LINEAR_HOST_AVX512_TRANSPOSE)
  if constexpr (std::is_same<Scalar, float>::value && L == 16) {
    const __mmask16 lanes = __mmask16((1u << tail) - 1);
    return _mm512_reduce_add_ps(_mm512_fmadd_ps(
        _mm512_maskz_loadu_ps(lanes, x), _mm512_maskz_loadu_ps(lanes, w), _mm512_loadu_ps(v)));
  }
#endif
  Scalar t[L];
  FUSED_LINEAR_HOST_SIMD(L)
  for (int q = 0; q < L; ++q) t[q] = v[q];
  for (int q = 0; q < tail; ++q) t[q] += x[q] * w[q];
  FUSED_LINEAR_UNROLL
  for (int half = L / 2; half > 0; half /= 2) {
    FUSED_LINEAR_UNROLL
    for (int q = 0; q < half; ++q) t[q] += t[q + half];
  }
  return t[0];
}

}  // namespace Impl
}  // namespace FusedLinear

#endif  // FUSED_LINEAR_IMPL_KERNELS_HOST_COMMON_HPP
