// SPDX-License-Identifier: Apache-2.0
#ifndef FUSED_LINEAR_IMPL_VENDOR_HPP
#define FUSED_LINEAR_IMPL_VENDOR_HPP

#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <KokkosBlas3_gemm.hpp>
#include <KokkosKernels_config.h>
#include <Kokkos_Core.hpp>

#include "FusedLinear_Epilogue.hpp"
#include "FusedLinear_Types.hpp"
#include "impl/FusedLinear_FusedKernel.hpp"

// Kokkos Kernels 4 takes the execution space instance in gemm; 3.4 always calls cuBLAS through a
// process-wide handle on the handle's own stream, so there we point that handle at the caller's
// stream for the duration of the call (and restore it: the handle is shared).
#if defined(KOKKOSKERNELS_VERSION_MAJOR) && (KOKKOSKERNELS_VERSION_MAJOR >= 4)
#define FUSED_LINEAR_GEMM_TAKES_SPACE 1
#endif
#if defined(KOKKOSKERNELS_ENABLE_TPL_CUBLAS) && defined(KOKKOS_ENABLE_CUDA)
#include <KokkosBlas_tpl_spec.hpp>  // KokkosBlas::Impl::CudaBlasSingleton, in 3.4 and 4.x
#define FUSED_LINEAR_CUBLAS 1
#endif

namespace FusedLinear {
namespace Impl {

/// Whether KokkosBlas::gemm("N", "T", ...) on these Views dispatches to a vendor BLAS, and
/// which. Mirrors Kokkos Kernels' availability rule (gemm_tpl_spec_avail): float or double, all
/// three Views of one layout (LayoutLeft or LayoutRight) in one memory space that the enabled
/// TPL serves. Anything else makes Kokkos Kernels run its own native gemm kernel.
template <class XView, class WView, class YView>
const char* vendor_blas_name() {
  using Scalar = typename YView::non_const_value_type;
  using Layout = typename YView::array_layout;
  using Memory = typename YView::memory_space;
  constexpr bool eligible =
      (std::is_same<Scalar, float>::value || std::is_same<Scalar, double>::value) &&
      std::is_same<typename XView::non_const_value_type, Scalar>::value &&
      std::is_same<typename WView::non_const_value_type, Scalar>::value &&
      (std::is_same<Layout, Kokkos::LayoutLeft>::value ||
       std::is_same<Layout, Kokkos::LayoutRight>::value) &&
      std::is_same<typename XView::array_layout, Layout>::value &&
      std::is_same<typename WView::array_layout, Layout>::value &&
      std::is_same<typename XView::memory_space, Memory>::value &&
      std::is_same<typename WView::memory_space, Memory>::value;
  if (!eligible) return nullptr;
#if defined(KOKKOSKERNELS_ENABLE_TPL_CUBLAS) && defined(KOKKOS_ENABLE_CUDA)
  if (std::is_same<Memory, Kokkos::CudaSpace>::value ||
      std::is_same<Memory, Kokkos::CudaUVMSpace>::value)
    return "cuBLAS";
#endif
#if defined(KOKKOSKERNELS_ENABLE_TPL_BLAS)
  if (std::is_same<Memory, Kokkos::HostSpace>::value) return "host BLAS";
#endif
  return nullptr;
}

#ifdef FUSED_LINEAR_CUBLAS
/// Sets up Kokkos Kernels' shared cuBLAS handle for one GEMM and restores what it changed: the
/// stream (with Kokkos Kernels 3.4, whose gemm takes no execution space) and, for TF32, the
/// math mode. The handle is shared with the rest of the application, hence the restore.
class CublasHandleGuard {
 public:
  CublasHandleGuard(cudaStream_t stream, bool set_stream, bool tf32)
      : m_handle(KokkosBlas::Impl::CudaBlasSingleton::singleton().handle) {
    if (set_stream) {
      check(cublasGetStream(m_handle, &m_stream), "read the cuBLAS stream");
      check(cublasSetStream(m_handle, stream), "set the cuBLAS stream");
      m_restore_stream = true;
    }
    if (tf32) {
      check(cublasGetMathMode(m_handle, &m_math), "read the cuBLAS math mode");
      check(cublasSetMathMode(m_handle, CUBLAS_TF32_TENSOR_OP_MATH), "set the TF32 math mode");
      m_restore_math = true;
    }
  }
  ~CublasHandleGuard() {
    if (m_restore_math) cublasSetMathMode(m_handle, m_math);
    if (m_restore_stream) cublasSetStream(m_handle, m_stream);
  }
  CublasHandleGuard(const CublasHandleGuard&) = delete;
  CublasHandleGuard& operator=(const CublasHandleGuard&) = delete;

 private:
  static void check(cublasStatus_t status, const char* what) {
    if (status != CUBLAS_STATUS_SUCCESS)
      throw std::runtime_error(std::string("FusedLinear::linear_leaky_relu: cannot ") + what +
                               " (cuBLAS status " + std::to_string(int(status)) + ")");
  }
  cublasHandle_t m_handle;
  cudaStream_t m_stream = nullptr;
  cublasMath_t m_math = CUBLAS_DEFAULT_MATH;
  bool m_restore_stream = false, m_restore_math = false;
};
#endif

/// Kokkos Kernels drives cuBLAS through one process-wide handle and points it at the caller's
/// stream before each call (we do that ourselves on 3.4). Two host threads doing this at once
/// could enqueue a GEMM on the other's stream, so FusedLinear serialises the (asynchronous,
/// microseconds-long) enqueue. Other code using the same handle concurrently is not covered.
inline std::mutex& vendor_enqueue_mutex() {
  static std::mutex mutex;
  return mutex;
}

/// C = alpha * X . W^T + beta * C on the caller's execution space instance; with `tf32` (only
/// where cuBLAS serves the Views, checked by the caller) on TF32 tensor cores.
template <class ExecSpace, class XView, class WView, class YView, class Scalar>
void gemm_nt(const ExecSpace& exec, Scalar alpha, const XView& X, const WView& W, Scalar beta,
             const YView& Y, bool tf32 = false) {
#if defined(FUSED_LINEAR_CUBLAS)
  if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value) {
    std::lock_guard<std::mutex> lock(vendor_enqueue_mutex());
#if defined(FUSED_LINEAR_GEMM_TAKES_SPACE)
    CublasHandleGuard guard(exec.cuda_stream(), false, tf32);
    KokkosBlas::gemm(exec, "N", "T", alpha, X, W, beta, Y);
#else
    CublasHandleGuard guard(exec.cuda_stream(), true, tf32);
    KokkosBlas::gemm("N", "T", alpha, X, W, beta, Y);
#endif
    return;
  }
#endif
  if (tf32) throw std::logic_error("FusedLinear: TF32 requested without cuBLAS");
#if defined(FUSED_LINEAR_GEMM_TAKES_SPACE)
  KokkosBlas::gemm(exec, "N", "T", alpha, X, W, beta, Y);
#else
  // Kokkos Kernels 3.4 runs on the Views' default execution space instance: order it after the
  // caller's earlier work, and the caller's later work after it.
  exec.fence();
  KokkosBlas::gemm("N", "T", alpha, X, W, beta, Y);
  typename YView::execution_space().fence();
#endif
}

/// The element-wise passes of the vendor paths, each a use of the shared epilogue functor.
enum class Pass { BiasScaleActivation, PrefillScaledBias, Activation, BiasOnly };

template <class BView, class YView, Pass P>
struct EpiloguePass {
  using Scalar = typename YView::non_const_value_type;
  YView Y;
  BView b;
  LeakyReLUEpilogue<Scalar> ep;

  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i, std::int64_t j) const {
    switch (P) {
      case Pass::BiasScaleActivation: Y(i, j) = ep(Y(i, j), b(j)); break;
      case Pass::PrefillScaledBias: Y(i, j) = ep.scaled_bias(b(j)); break;
      case Pass::Activation: Y(i, j) = ep.activation(Y(i, j)); break;
      case Pass::BiasOnly: Y(i, j) = ep(Scalar(0), b(j)); break;  // K = 0: the product is 0
    }
  }
};

/// One pass over Y. On GPUs the contiguous index is put on the fast thread index: Kokkos 3.4's
/// CUDA MDRange maps threadIdx.x to the first index whatever the iteration order, so with the
/// default tile a LayoutRight Y was written with a stride (measured 5x slower on an H200).
template <Pass P, class ExecSpace, class BView, class YView, class Scalar>
void epilogue_pass(const char* label, const ExecSpace& exec, const YView& Y, const BView& b,
                   const LeakyReLUEpilogue<Scalar>& ep) {
  using Policy = Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>, Kokkos::IndexType<std::int64_t>>;
  const std::int64_t M = Y.extent(0), N = Y.extent(1);
  const EpiloguePass<BView, YView, P> pass{Y, b, ep};
  if (is_host_space<ExecSpace>()) {
    Kokkos::parallel_for(label, Policy(exec, {0, 0}, {M, N}), pass);
  } else if (std::is_same<typename YView::array_layout, Kokkos::LayoutLeft>::value) {
    Kokkos::parallel_for(label, Policy(exec, {0, 0}, {M, N}, {256, 1}), pass);
  } else {
    Kokkos::parallel_for(label, Policy(exec, {0, 0}, {M, N}, {1, 256}), pass);
  }
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
