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
/// docs/design/host-kernels.md#vector-code-without-simd-types). Intrinsics only in one place,
/// the 16 x 16 transposes of the packing (transpose_16x16), with a plain fallback.
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

#define FUSED_LINEAR_PRAGMA(x) _Pragma(#x)
// A loop of exactly `lanes` iterations (or a multiple) that is one SIMD vector of the host.
#if defined(_OPENMP) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#define FUSED_LINEAR_HOST_SIMD(lanes) FUSED_LINEAR_PRAGMA(omp simd simdlen(lanes))
#else
#define FUSED_LINEAR_HOST_SIMD(lanes) FUSED_LINEAR_UNROLL
#endif

namespace FusedLinear {
namespace Impl {

/// The host's SIMD registers as the compiler targets them: their width and how many there are.
struct HostVector {
#if defined(__AVX512F__)
  static constexpr int bytes = 64, registers = 32;
#elif defined(__AVX__)
  static constexpr int bytes = 32, registers = 16;
#elif defined(__aarch64__)
  static constexpr int bytes = 16, registers = 32;
#else
  static constexpr int bytes = 16, registers = 16;  // SSE2, the x86-64 baseline
#endif
  template <class Scalar>
  static constexpr int lanes() {
    return bytes / static_cast<int>(sizeof(Scalar));
  }
};

#if defined(FUSED_LINEAR_HOST_AVX512_TRANSPOSE)
/// dst[q * ld + j] = rows[j][q] for j, q < 16 (a 16 x 16 block of floats transposed in
/// registers), storing the lanes of `lanes`. The one place the host kernels use intrinsics:
/// element by element, packing's transposes were a large share of the fused kernel's time, and
/// compilers do not find this shuffle network (docs/design/host-kernels.md#fused-on-the-host).
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

}  // namespace Impl
}  // namespace FusedLinear

#endif  // FUSED_LINEAR_IMPL_KERNELS_HOST_COMMON_HPP
