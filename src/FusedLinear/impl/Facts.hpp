// SPDX-License-Identifier: Apache-2.0
/// \file Facts.hpp
/// Gathers, once per plan, what the dispatch (Dispatch.hpp) decides on: the backend, the BLAS
/// Kokkos Kernels will call, what the vendor libraries and the sm_90a kernels can take.
#ifndef FUSED_LINEAR_IMPL_FACTS_HPP
#define FUSED_LINEAR_IMPL_FACTS_HPP

#include <type_traits>

#include <Kokkos_Core.hpp>

#include "FusedLinear/impl/Dispatch.hpp"
#include "FusedLinear/impl/HostBlas.hpp"
#include "FusedLinear/impl/cuda/LtProduct.hpp"
#include "FusedLinear/impl/cuda/Sm90Adapter.hpp"
#include "FusedLinear/impl/kernels/Common.hpp"
#include "FusedLinear/impl/vendor/KokkosBlasGemm.hpp"

namespace FusedLinear {
namespace Impl {

template <class ExecSpace>
constexpr Backend backend_of() {
  if (is_host_space<ExecSpace>()) return Backend::Host;
#if defined(KOKKOS_ENABLE_CUDA)
  if (std::is_same<ExecSpace, Kokkos::Cuda>::value) return Backend::Cuda;
#endif
#if defined(KOKKOS_ENABLE_HIP)
  return Backend::Hip;
#elif defined(KOKKOS_ENABLE_SYCL)
  return Backend::Sycl;
#else
  return Backend::OtherDevice;
#endif
}

/// Whether vendor_lt can run these Views on ExecSpace: a CUDA build with cuBLASLt, float or
/// double Views of one layout (LayoutRight or LayoutLeft) in CUDA memory.
template <class ExecSpace, class XView, class WView, class YView>
constexpr bool cublaslt_serves() {
#if defined(FUSED_LINEAR_CUBLASLT)
  using Scalar = typename YView::non_const_value_type;
  using Layout = typename YView::array_layout;
  using Memory = typename YView::memory_space;
  return std::is_same<ExecSpace, Kokkos::Cuda>::value &&
         (std::is_same<Scalar, float>::value || std::is_same<Scalar, double>::value) &&
         (std::is_same<Layout, Kokkos::LayoutLeft>::value ||
          std::is_same<Layout, Kokkos::LayoutRight>::value) &&
         std::is_same<typename XView::array_layout, Layout>::value &&
         std::is_same<typename WView::array_layout, Layout>::value &&
         std::is_same<typename XView::memory_space, Memory>::value &&
         std::is_same<typename WView::memory_space, Memory>::value &&
         (std::is_same<Memory, Kokkos::CudaSpace>::value ||
          std::is_same<Memory, Kokkos::CudaUVMSpace>::value);
#else
  return false;
#endif
}

template <class ExecSpace, class XView, class WView, class BView, class YView>
Facts gather_facts(const ExecSpace& exec, const XView& X, const WView& W, const BView& b,
                   const YView& Y) {
  using Scalar = typename YView::non_const_value_type;
  Facts f;
  f.backend = backend_of<ExecSpace>();
  f.float_views = std::is_same<Scalar, float>::value;
  f.blas = kokkos_blas_gemm<ExecSpace, XView, WView, YView>();
  if (f.blas == Gemm::HostBlas) f.host_blas = host_blas_kind();
  f.multiprocessors = multiprocessors(exec);
  f.cublaslt = cublaslt_serves<ExecSpace, XView, WView, YView>();
  // cuBLASLt's bias epilogue adds a vector along the rows of its column-major C, which are Y's
  // columns only for a row-major Y; float only, b beside Y as cuBLASLt takes it.
#if defined(FUSED_LINEAR_CUBLASLT)
  f.cublaslt_bias =
      f.cublaslt && std::is_same<Scalar, float>::value &&
      std::is_same<typename YView::array_layout, Kokkos::LayoutRight>::value &&
      std::is_same<typename BView::memory_space, typename YView::memory_space>::value &&
      cublaslt_takes_bias(b);
#endif
#if defined(FUSED_LINEAR_SM90A)
  if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value &&
                std::is_same<Scalar, float>::value) {
    const char* views = sm90_layouts_refusal(X, W, b, Y);
    const Sm90::Device device = sm90_device(exec);
    const LeakyReLUEpilogue<float> ep{1, 0};
    f.sm90_tf32x3 = views ? views : Sm90::tf32x3_refusal(device, sm90_problem(X, W, b, Y, ep));
    f.sm90_skinny = views ? views : Sm90::skinny_refusal(device, sm90_problem(X, W, b, Y, ep));
  } else {
    f.sm90_tf32x3 = f.sm90_skinny = "runs on CUDA with float Views only";
  }
#else
  (void)X, (void)W, (void)b, (void)Y;
  f.sm90_tf32x3 = f.sm90_skinny =
      "is not in this build (a CUDA build with cuBLASLt and FusedLinear_ENABLE_SM90A)";
#endif
  return f;
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
