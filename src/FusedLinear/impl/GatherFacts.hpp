// SPDX-License-Identifier: Apache-2.0
/// \file GatherFacts.hpp
/// Gathers, once per plan, the Facts (Facts.hpp) the dispatch decides on: the backend, the BLAS
/// Kokkos Kernels will call, and what the cuBLASLt and sm_90a engines say they can take.
#ifndef FUSED_LINEAR_IMPL_GATHER_FACTS_HPP
#define FUSED_LINEAR_IMPL_GATHER_FACTS_HPP

#include <type_traits>

#include <Kokkos_Core.hpp>

#include "FusedLinear/impl/Facts.hpp"
#include "FusedLinear/impl/HostBlas.hpp"
#include "FusedLinear/impl/engines/CublasLt.hpp"
#include "FusedLinear/impl/engines/Sm90.hpp"
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

template <class ExecSpace, class XView, class WView, class BView, class YView>
Facts gather_facts(const ExecSpace& exec, const XView& X, const WView& W, const BView& b,
                   const YView& Y) {
  using Scalar = typename YView::non_const_value_type;
  Facts f;
  f.backend = backend_of<ExecSpace>();
  f.float_views = std::is_same<Scalar, float>::value;
  f.blas = kokkos_blas_gemm<ExecSpace, XView, WView, YView>();
  if (f.blas == Gemm::HostBlas) f.host_blas = host_blas_kind();
  f.skinny_packed = rows_are_packable(X) && rows_are_packable(W);
  set_device_rates(device_report(exec), f);
  if (f.backend == Backend::Host) {
    f.host_threads = exec.concurrency();
    f.host_tiling = host_tiling_of<Scalar>();
  }
  cublaslt_facts<ExecSpace, XView, WView, BView, YView>(b, f);
  sm90_facts(exec, X, W, b, Y, f);
  return f;
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
