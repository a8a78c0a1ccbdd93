// SPDX-License-Identifier: Apache-2.0
#ifndef FUSED_LINEAR_IMPL_VENDOR_HPP
#define FUSED_LINEAR_IMPL_VENDOR_HPP

#include <algorithm>
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
#include "impl/FusedLinear_CublasLt.hpp"
#include "impl/FusedLinear_FusedKernel.hpp"
#include "impl/FusedLinear_SplitTf32.hpp"

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
constexpr bool blas_eligible() {
  using Scalar = typename YView::non_const_value_type;
  using Layout = typename YView::array_layout;
  using Memory = typename YView::memory_space;
  return (std::is_same<Scalar, float>::value || std::is_same<Scalar, double>::value) &&
         std::is_same<typename XView::non_const_value_type, Scalar>::value &&
         std::is_same<typename WView::non_const_value_type, Scalar>::value &&
         (std::is_same<Layout, Kokkos::LayoutLeft>::value ||
          std::is_same<Layout, Kokkos::LayoutRight>::value) &&
         std::is_same<typename XView::array_layout, Layout>::value &&
         std::is_same<typename WView::array_layout, Layout>::value &&
         std::is_same<typename XView::memory_space, Memory>::value &&
         std::is_same<typename WView::memory_space, Memory>::value;
}

template <class XView, class WView, class YView>
const char* vendor_blas_name() {
  using Memory = typename YView::memory_space;
  if (!blas_eligible<XView, WView, YView>()) return nullptr;
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

/// Whether the vendor_lt path can run these Views on ExecSpace: a CUDA build with cuBLASLt,
/// Views as a vendor BLAS takes them, in CUDA memory.
template <class ExecSpace, class XView, class WView, class YView>
constexpr bool cublaslt_serves() {
#if defined(FUSED_LINEAR_CUBLASLT)
  using Memory = typename YView::memory_space;
  return std::is_same<ExecSpace, Kokkos::Cuda>::value && blas_eligible<XView, WView, YView>() &&
         (std::is_same<Memory, Kokkos::CudaSpace>::value ||
          std::is_same<Memory, Kokkos::CudaUVMSpace>::value);
#else
  return false;
#endif
}

/// Whether vendor_lt adds the bias inside cuBLASLt's product (its BIAS epilogue, as PyTorch's
/// Linear does), leaving scale and LeakyReLU to the pass: float, LayoutRight (the epilogue adds
/// a vector along the rows of cuBLASLt's column-major C, which are Y's columns only then), and
/// a contiguous b beside Y.
template <class ExecSpace, class XView, class WView, class BView, class YView>
bool cublaslt_adds_bias(const BView& b) {
  return cublaslt_serves<ExecSpace, XView, WView, YView>() &&
         std::is_same<typename YView::non_const_value_type, float>::value &&
         std::is_same<typename BView::non_const_value_type, float>::value &&
         std::is_same<typename YView::array_layout, Kokkos::LayoutRight>::value &&
         std::is_same<typename BView::memory_space, typename YView::memory_space>::value &&
         b.span_is_contiguous() && b.span() == b.extent(0);
}

#if defined(KOKKOS_ENABLE_CUDA)
/// Kokkos 3.4 sets cudaFuncCachePreferShared device-wide when it initialises (its own kernels
/// carry per-kernel settings). cuBLAS's kernels follow the device-wide setting, and with it
/// cuBLAS's fp32 SIMT GEMM runs 10% slower on an H200 (PyTorch's own 1024x8192x8192 product:
/// 2.72 ms with the default preference, 3.00 ms with Kokkos'; perf/RESULTS.md). So around a
/// vendor GEMM the default preference is put back, and Kokkos' restored after (a launch-time
/// preference: no effect on results).
class DeviceCacheConfigGuard {
 public:
  DeviceCacheConfigGuard() {
    if (cudaDeviceGetCacheConfig(&m_previous) == cudaSuccess &&
        m_previous != cudaFuncCachePreferNone)
      m_changed = cudaDeviceSetCacheConfig(cudaFuncCachePreferNone) == cudaSuccess;
  }
  ~DeviceCacheConfigGuard() {
    if (m_changed) cudaDeviceSetCacheConfig(m_previous);
  }
  DeviceCacheConfigGuard(const DeviceCacheConfigGuard&) = delete;
  DeviceCacheConfigGuard& operator=(const DeviceCacheConfigGuard&) = delete;

 private:
  cudaFuncCache m_previous = cudaFuncCachePreferNone;
  bool m_changed = false;
};
#endif

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

/// C = alpha * X . W^T + beta * C on the caller's execution space instance, through cuBLASLt
/// when `lt` (the caller checked cublaslt_serves) and KokkosBlas::gemm otherwise; with `tf32`
/// (only where cuBLAS serves the Views, checked by the caller) on TF32 tensor cores.
/// `bias` (cuBLASLt only, where cublaslt_adds_bias): also add b, given as b.data(), to every row.
template <class ExecSpace, class XView, class WView, class YView, class Scalar>
void gemm_nt(const ExecSpace& exec, Scalar alpha, const XView& X, const WView& W, Scalar beta,
             const YView& Y, bool tf32, bool lt, const Scalar* bias = nullptr) {
#if defined(FUSED_LINEAR_CUBLASLT)
  if constexpr (cublaslt_serves<ExecSpace, XView, WView, YView>()) {
    if (lt) {
      DeviceCacheConfigGuard cache_config;
      cublaslt_gemm_nt(exec, alpha, X, W, beta, Y, tf32, bias);
      return;
    }
  }
#endif
  if (bias != nullptr) throw std::logic_error("FusedLinear: a bias epilogue needs cuBLASLt");
  if (lt) throw std::logic_error("FusedLinear: cuBLASLt requested where it cannot run");
#if defined(FUSED_LINEAR_CUBLAS)
  if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value) {
    std::lock_guard<std::mutex> lock(vendor_enqueue_mutex());
    DeviceCacheConfigGuard cache_config;
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

/// Length of the K ranges over which 3xTF32 lets the tensor cores accumulate hi.hi. Their fp32
/// accumulation truncates: measured on an H200 (cuBLAS TF32, 1024x8192x8192, perf/RESULTS.md),
/// the norm-wise error of hi.hi grows in proportion to the accumulated length, 1.9e-5 over the
/// whole K = 8192, 1.2e-6 over 512, 6.4e-7 over 256 (strict fp32 SIMT: 1.6e-6). The ranges'
/// sums are added in fp32 with rounding. 256 keeps a factor 2 below #4's 1.5e-6 (512: 1.80
/// against 2.13 ms, too close to it). The small terms lo.hi + hi.lo (2^-10 of the size) run in
/// one product.
constexpr std::int64_t tf32x3_chunk = 256;
/// How the ranges' sums reach Y. Where all of them fit in this many bytes of workspace (small
/// Y, long K) one strided-batched product computes them side by side and one pass adds them to
/// Y in order: one launch instead of one per range (256x65536x1024 on an H200: 0.98 ms against
/// 2.45 range by range). Otherwise cuBLAS adds each range's product to Y itself (beta = 1).
/// (Blocks of Y's columns small enough to stay in L2 between ranges measured no faster: 2.16
/// and 2.54 ms for 16 and 8 MB blocks against 2.12 at 1024x8192x8192.) A process-wide setting
/// so that tests can take both ways at small shapes; not part of the API.
inline std::size_t& tf32x3_partials_limit() {
  static std::size_t limit = std::size_t(256) << 20;
  return limit;
}

/// Y(i, j) += P_0(i, j) + P_1(i, j) + ..., in that order: the ranges' sums of hi.hi, laid out
/// as the batched product wrote them (each M x N, in Y's layout, contiguous).
template <class YView>
struct AddPartialSums {
  YView Y;
  const float* P;
  std::int64_t count, M, N;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i, std::int64_t j) const {
    constexpr bool right = std::is_same<typename YView::array_layout, Kokkos::LayoutRight>::value;
    const std::int64_t at = right ? i * N + j : j * M + i;
    float sum = Y(i, j);
    for (std::int64_t c = 0; c < count; ++c) sum += P[c * M * N + at];
    Y(i, j) = sum;
  }
};

/// C = alpha * X . W^T + beta * C in the requested precision. TF32x3 (only where cuBLASLt
/// serves the Views, checked by the caller; through cuBLASLt whatever `lt` says) splits X and W
/// into TF32 parts in workspace from CublasLt's stream-ordered pool, X as [lo | hi] and W as
/// [hi | lo] (K padded with zeros to whole ranges): one TF32 product over both parts gives
/// lo.hi + hi.lo, then hi.hi is added tf32x3_chunk columns at a time.
template <class ExecSpace, class XView, class WView, class YView, class Scalar>
void vendor_product(const ExecSpace& exec, Scalar alpha, const XView& X, const WView& W,
                    Scalar beta, const YView& Y, Precision precision, bool lt,
                    const Scalar* bias = nullptr) {
  if (precision != Precision::TF32x3) {
    gemm_nt(exec, alpha, X, W, beta, Y, precision == Precision::TF32, lt, bias);
    return;
  }
#if defined(FUSED_LINEAR_CUBLASLT)
  if constexpr (cublaslt_serves<ExecSpace, XView, WView, YView>() &&
                std::is_same<Scalar, float>::value) {
    using Layout = typename YView::array_layout;
    using Split = Kokkos::View<float**, Layout, Kokkos::CudaSpace, Kokkos::MemoryUnmanaged>;
    constexpr bool right = std::is_same<Layout, Kokkos::LayoutRight>::value;
    const std::int64_t M = X.extent(0), N = W.extent(0), K = X.extent(1);
    const std::int64_t C = tf32x3_chunk, ranges = (K + C - 1) / C, Kp = ranges * C;
    const auto aligned = [](std::size_t bytes) { return (bytes + 255) / 256 * 256; };
    // One allocation: X's parts, W's, and the ranges' sums when batched, each at a 256-byte
    // boundary (cuBLASLt's preferred alignment).
    const std::size_t w_offset = aligned(std::size_t(M) * 2 * Kp * sizeof(float));
    const std::size_t p_offset = aligned(w_offset + std::size_t(N) * 2 * Kp * sizeof(float));
    const std::size_t partial_bytes = std::size_t(ranges) * M * N * sizeof(float);
    const bool batched = ranges > 1 && partial_bytes <= tf32x3_partials_limit();
    LtWorkspace workspace(batched ? p_offset + partial_bytes : p_offset, exec.cuda_stream());
    char* base = static_cast<char*>(workspace.data());
    const Split Xs(reinterpret_cast<float*>(base), M, 2 * Kp);
    const Split Ws(reinterpret_cast<float*>(base + w_offset), N, 2 * Kp);
    split_tf32_operand(exec, X, Xs, /*lo_first=*/true);
    split_tf32_operand(exec, W, Ws, /*lo_first=*/false);
    DeviceCacheConfigGuard cache_config;
    cublaslt_gemm_nt(exec, alpha, Xs, Ws, beta, Y, /*tf32=*/true, bias);

    // Column `col` of a split operand with `rows` rows, and the leading dimensions.
    const auto column = [](const Split& S, std::int64_t rows, std::int64_t col) {
      return S.data() + (right ? col : col * rows);
    };
    const std::int64_t ldx = right ? 2 * Kp : M, ldw = right ? 2 * Kp : N;
    const std::int64_t ldy = right ? Y.stride(0) : Y.stride(1);
    if (batched) {
      float* partials = reinterpret_cast<float*>(base + p_offset);
      const LtBatch batch{ranges, right ? C : C * M, right ? C : C * N, M * N};
      cublaslt_gemm_nt(exec, right, M, N, C, alpha, column(Xs, M, Kp), ldx, column(Ws, N, 0), ldw,
                       0.0f, partials, right ? N : M, /*tf32=*/true,
                       static_cast<const float*>(nullptr), batch);
      Kokkos::parallel_for("FusedLinear::3xtf32::add_ranges",
                           elementwise_policy<ExecSpace, Layout>(exec, M, N),
                           AddPartialSums<YView>{Y, partials, ranges, M, N});
      return;
    }
    for (std::int64_t k0 = 0; k0 < Kp; k0 += C)
      cublaslt_gemm_nt(exec, right, M, N, C, alpha, column(Xs, M, Kp + k0), ldx, column(Ws, N, k0),
                       ldw, 1.0f, Y.data(), ldy, /*tf32=*/true);
    return;
  }
#endif
  throw std::logic_error("FusedLinear: 3xTF32 requested where cuBLASLt cannot run");
}

/// The element-wise passes of the vendor paths, each a use of the shared epilogue functor.
enum class Pass { BiasScaleActivation, ScaleActivation, PrefillScaledBias, Activation, BiasOnly };

template <class BView, class YView, Pass P>
struct EpiloguePass {
  using Scalar = typename YView::non_const_value_type;
  YView Y;
  BView b;
  LeakyReLUEpilogue<Scalar> ep;

  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i, std::int64_t j) const {
    switch (P) {
      case Pass::BiasScaleActivation:
        Y(i, j) = ep(Y(i, j), b(j));
        break;
      case Pass::ScaleActivation:
        Y(i, j) = ep.scaled_activation(Y(i, j));
        break;
      case Pass::PrefillScaledBias:
        Y(i, j) = ep.scaled_bias(b(j));
        break;
      case Pass::Activation:
        Y(i, j) = ep.activation(Y(i, j));
        break;
      case Pass::BiasOnly:
        Y(i, j) = ep(Scalar(0), b(j));
        break;  // K = 0: the product is 0
    }
  }
};

/// One pass over Y (see elementwise_policy for the thread mapping).
template <Pass P, class ExecSpace, class BView, class YView, class Scalar>
void epilogue_pass(const char* label, const ExecSpace& exec, const YView& Y, const BView& b,
                   const LeakyReLUEpilogue<Scalar>& ep) {
  Kokkos::parallel_for(
      label, elementwise_policy<ExecSpace, typename YView::array_layout>(exec, Y.extent(0), Y.extent(1)),
      EpiloguePass<BView, YView, P>{Y, b, ep});
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
