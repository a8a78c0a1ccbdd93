// SPDX-License-Identifier: Apache-2.0
/// \file CublasLt.hpp
/// The engine whose product is cuBLASLt, called directly (cuda/LtProduct.hpp): vendor_lt, and
/// vendor and vendor_prefill in 3xtf32. What cuBLASLt serves is decided here; elsewhere (no
/// cuBLASLt in the build, Views it does not take) the engine is UnavailableEngine.
#ifndef FUSED_LINEAR_IMPL_ENGINES_CUBLASLT_HPP
#define FUSED_LINEAR_IMPL_ENGINES_CUBLASLT_HPP

#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>

#include <Kokkos_Core.hpp>

#include "FusedLinear/Epilogue.hpp"
#include "FusedLinear/Types.hpp"
#include "FusedLinear/impl/Facts.hpp"
#include "FusedLinear/impl/cuda/CublasLt.hpp"  // FUSED_LINEAR_CUBLASLT where it is built
#include "FusedLinear/impl/cuda/Device.hpp"
#include "FusedLinear/impl/cuda/LtProduct.hpp"
#include "FusedLinear/impl/engines/Engine.hpp"
#include "FusedLinear/impl/engines/Vendor.hpp"

namespace FusedLinear {
namespace Impl {

/// Whether cuBLASLt can run these Views on ExecSpace: a CUDA build with cuBLASLt, float or
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

/// Facts::cublaslt and cublaslt_bias. cuBLASLt's bias epilogue adds a vector along the rows of
/// its column-major C, which are Y's columns only for a row-major Y; float only, b beside Y as
/// cuBLASLt takes it.
template <class ExecSpace, class XView, class WView, class BView, class YView>
void cublaslt_facts(const BView& b, Facts& f) {
  f.cublaslt = cublaslt_serves<ExecSpace, XView, WView, YView>();
#if defined(FUSED_LINEAR_CUBLASLT)
  f.cublaslt_bias =
      f.cublaslt && std::is_same<typename YView::non_const_value_type, float>::value &&
      std::is_same<typename YView::array_layout, Kokkos::LayoutRight>::value &&
      std::is_same<typename BView::memory_space, typename YView::memory_space>::value &&
      cublaslt_takes_bias(b);
#endif
  (void)b;
}

template <class ExecSpace, class XView, class WView, class BView, class YView,
          bool = cublaslt_serves<ExecSpace, XView, WView, YView>()>
class CublasLtEngine : public UnavailableEngine {
 public:
  template <class Setup>
  explicit CublasLtEngine(const Setup& s) : UnavailableEngine(s, "cuBLASLt") {}
};

#if defined(FUSED_LINEAR_CUBLASLT)
/// cuBLASLt's descriptors and ranked algorithms for the plan's Views, and their workspace.
/// cuBLASLt's kernel was chosen for the plan's leading dimensions and alignment: execute checks
/// that the call's Views have them.
template <class ExecSpace, class XView, class WView, class BView, class YView>
class CublasLtEngine<ExecSpace, XView, WView, BView, YView, true> {
  using Scalar = typename YView::non_const_value_type;
  using Memory = typename YView::memory_space;
  using Lt = LtProduct<Scalar, typename YView::array_layout>;

 public:
  explicit CublasLtEngine(const EngineSetup<ExecSpace, XView, WView, BView, YView>& s)
      : m_ep(s.ep), m_algorithm(s.decision.algorithm), m_bias(s.decision.bias_in_gemm) {
    const Experimental::Tuning& t = s.options.tuning;
    m_lt.reset(new Lt(s.X, s.W, s.Y, m_bias, s.decision.precision, t.tf32x3_partials_limit,
                      s.lt_algorithms, s.decision.lt_variant, s.decision.lt_config));
    m_workspace = Workspace<Memory>(Workspace<Memory>::piece(m_lt->workspace_bytes()), s.function,
                                    m_algorithm);
  }

  std::size_t workspace_bytes() const { return m_workspace.bytes(); }
  /// cuBLASLt's ranked algorithms held (Planning::Measure times each), and the one that runs.
  int variants() const { return m_lt->variants(); }
  void select(int variant) { m_lt->select(variant); }
  std::string variant_config() const { return m_lt->variant_config(); }

  void check(const ExecSpace&, const XView& X, const WView& W, const BView& b, const YView& Y,
             const char* function) const {
    if (const char* why = m_lt->refusal(X, W, Y, m_bias, m_workspace.base()))
      refuse_other_views(function, m_algorithm, why);
    if (m_bias && !cublaslt_takes_bias(b))
      refuse_other_views(
          function, m_algorithm,
          "cuBLASLt adds b in its epilogue, planned for a contiguous, 16-byte aligned b");
  }
  void run(const ExecSpace& exec, const XView& X, const WView& W, const BView& b, const YView& Y,
           const char*) const {
    run_vendor(*this, m_algorithm, m_bias, exec, X, W, b, Y, m_ep);
  }
  void product(const ExecSpace& exec, Scalar alpha, const XView& X, const WView& W, Scalar beta,
               const YView& Y, const Scalar* bias) const {
    CacheConfigGuard cache_config(exec.cuda_stream());
    m_lt->run(exec, alpha, X, W, beta, Y, bias, m_workspace.base());
  }

 private:
  LeakyReLUEpilogue<Scalar> m_ep;
  Algorithm m_algorithm;
  bool m_bias;
  std::unique_ptr<Lt> m_lt;
  Workspace<Memory> m_workspace;
};
#endif

}  // namespace Impl
}  // namespace FusedLinear

#endif
