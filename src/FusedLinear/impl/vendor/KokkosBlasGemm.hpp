// SPDX-License-Identifier: Apache-2.0
/// \file KokkosBlasGemm.hpp
/// The product through KokkosBlas::gemm (vendor, vendor_prefill): which BLAS Kokkos Kernels will
/// call, and the call itself, ordered on the caller's execution space instance.
#ifndef FUSED_LINEAR_IMPL_VENDOR_KOKKOS_BLAS_GEMM_HPP
#define FUSED_LINEAR_IMPL_VENDOR_KOKKOS_BLAS_GEMM_HPP

#include <stdexcept>
#include <type_traits>

#include <KokkosBlas3_gemm.hpp>
#include <KokkosKernels_config.h>
#include <Kokkos_Core.hpp>

#include "FusedLinear/Types.hpp"
#include "FusedLinear/impl/cuda/CublasHandle.hpp"
#include "FusedLinear/impl/cuda/Device.hpp"

// Kokkos Kernels 4 takes the execution space instance in gemm (and its availability trait takes
// it as first parameter); 3.4 always runs on the default instance of the Views' execution space.
#if defined(KOKKOSKERNELS_VERSION_MAJOR) && (KOKKOSKERNELS_VERSION_MAJOR >= 4)
#define FUSED_LINEAR_GEMM_TAKES_SPACE 1
#endif

namespace FusedLinear {
namespace Impl {

/// Whether KokkosBlas::gemm runs on the caller's instance (Kokkos Kernels 4): 3.4 runs its
/// native kernel on the default instance, ordered by fences (which a CUDA graph cannot capture).
#if defined(FUSED_LINEAR_GEMM_TAKES_SPACE)
constexpr bool kokkos_blas_gemm_on_instance = true;
#else
constexpr bool kokkos_blas_gemm_on_instance = false;
#endif

/// Whether KokkosBlas::gemm calls a vendor BLAS for these Views, as Kokkos Kernels itself decides
/// (its gemm_tpl_spec_avail, asked with the const/unmanaged View types its gemm asks it with:
/// the library's canonical Views are those types).
template <class ExecSpace, class XView, class WView, class YView>
constexpr bool kokkos_blas_uses_tpl() {
#if defined(FUSED_LINEAR_GEMM_TAKES_SPACE)
  return KokkosBlas::Impl::gemm_tpl_spec_avail<ExecSpace, XView, WView, YView>::value;
#else
  return KokkosBlas::Impl::gemm_tpl_spec_avail<XView, WView, YView>::value;
#endif
}

/// The vendor BLAS that serves a memory space, when Kokkos Kernels says one does.
template <class Memory>
constexpr Gemm vendor_blas_of() {
  if (std::is_same<Memory, Kokkos::HostSpace>::value) return Gemm::HostBlas;
#if defined(KOKKOS_ENABLE_CUDA)
  if (std::is_same<Memory, Kokkos::CudaSpace>::value ||
      std::is_same<Memory, Kokkos::CudaUVMSpace>::value)
    return Gemm::Cublas;
#endif
#if defined(KOKKOS_ENABLE_HIP)
  return Gemm::Rocblas;  // the HIP memory spaces
#elif defined(KOKKOS_ENABLE_SYCL)
  return Gemm::OneMkl;  // the SYCL memory spaces
#else
  return Gemm::KokkosKernelsNative;
#endif
}

/// What KokkosBlas::gemm runs for these (canonical) Views on ExecSpace.
template <class ExecSpace, class XView, class WView, class YView>
constexpr Gemm kokkos_blas_gemm() {
  return kokkos_blas_uses_tpl<ExecSpace, XView, WView, YView>()
             ? vendor_blas_of<typename YView::memory_space>()
             : Gemm::KokkosKernelsNative;
}

/// C = alpha op_a(A) . op_b(B) + beta C through KokkosBlas::gemm ("N" or "T" each), ordered on
/// `exec`: after its earlier work, before its later work. `tf32` only where cuBLAS serves the
/// Views (the plan checked).
template <class ExecSpace, class AView, class BView, class CView, class Scalar>
void kokkos_blas_gemm(const ExecSpace& exec, const char* op_a, const char* op_b, Scalar alpha,
                      const AView& A, const BView& B, Scalar beta, const CView& C, bool tf32) {
#if defined(FUSED_LINEAR_CUBLAS)
  if constexpr (kokkos_blas_gemm<ExecSpace, AView, BView, CView>() == Gemm::Cublas) {
    CacheConfigGuard cache_config(exec.cuda_stream());
#if defined(FUSED_LINEAR_GEMM_TAKES_SPACE)
    CublasHandleGuard handle(exec.cuda_stream(), false, tf32);
    KokkosBlas::gemm(exec, op_a, op_b, alpha, A, B, beta, C);
#else
    CublasHandleGuard handle(exec.cuda_stream(), true, tf32);
    KokkosBlas::gemm(op_a, op_b, alpha, A, B, beta, C);
#endif
    return;
  }
#endif
  if (tf32) throw std::logic_error("FusedLinear: TF32 requested without cuBLAS");
#if defined(FUSED_LINEAR_GEMM_TAKES_SPACE)
  KokkosBlas::gemm(exec, op_a, op_b, alpha, A, B, beta, C);
#else
  // Kokkos Kernels 3.4 runs the vendor BLAS or its native kernel on the default instance of
  // ExecSpace, which need not be `exec` (another CUDA stream): order it after the caller's
  // earlier work (which may be writing A), and the caller's later work (the epilogue) after it.
  exec.fence();
  KokkosBlas::gemm(op_a, op_b, alpha, A, B, beta, C);
  ExecSpace().fence();
#endif
}

/// Y = alpha X . W^T + beta Y: the forward's product.
template <class ExecSpace, class XView, class WView, class YView, class Scalar>
void kokkos_blas_gemm_nt(const ExecSpace& exec, Scalar alpha, const XView& X, const WView& W,
                         Scalar beta, const YView& Y, bool tf32) {
  kokkos_blas_gemm(exec, "N", "T", alpha, X, W, beta, Y, tf32);
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
