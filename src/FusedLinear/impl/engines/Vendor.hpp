// SPDX-License-Identifier: Apache-2.0
/// \file Vendor.hpp
/// The vendor paths: a product engine's GEMM and the passes over Y around it; and the engine
/// whose product is KokkosBlas::gemm (vendor, vendor_prefill). cuBLASLt's is in CublasLt.hpp.
/// docs/design/vendor-paths.md says why each path is shaped as it is.
#ifndef FUSED_LINEAR_IMPL_ENGINES_VENDOR_HPP
#define FUSED_LINEAR_IMPL_ENGINES_VENDOR_HPP

#include <stdexcept>

#include <Kokkos_Core.hpp>

#include "FusedLinear/Epilogue.hpp"
#include "FusedLinear/Types.hpp"
#include "FusedLinear/impl/engines/Engine.hpp"
#include "FusedLinear/impl/kernels/EpiloguePasses.hpp"
#include "FusedLinear/impl/vendor/KokkosBlasGemm.hpp"

namespace FusedLinear {
namespace Impl {

/// Runs vendor path `a` around `product.product(exec, alpha, X, W, beta, Y, bias)`:
/// - vendor: the product (beta = 0), then one pass for bias, scale and LeakyReLU;
/// - vendor_prefill: the design's "multiplier folded into alpha/beta" path: Y prefilled with
///   multiplier * b, the product with alpha = multiplier and beta = 1, then a LeakyReLU pass;
/// - vendor_lt: as vendor, with cuBLASLt adding b in its epilogue where the plan found it can
///   (PyTorch's Linear does the same); the pass then only scales.
template <class Product, class ExecSpace, class XView, class WView, class BView, class YView,
          class Scalar>
void run_vendor(const Product& product, Algorithm a, bool bias_in_gemm, const ExecSpace& exec,
                const XView& X, const WView& W, const BView& b, const YView& Y,
                const LeakyReLUEpilogue<Scalar>& ep) {
  switch (a) {
    case Algorithm::Vendor:
      product.product(exec, Scalar(1), X, W, Scalar(0), Y, nullptr);
      epilogue_pass<Pass::BiasScaleActivation>("FusedLinear::vendor::epilogue", exec, Y, b, ep);
      return;
    case Algorithm::VendorPrefill:
      epilogue_pass<Pass::PrefillScaledBias>("FusedLinear::vendor_prefill::bias", exec, Y, b, ep);
      product.product(exec, ep.multiplier, X, W, Scalar(1), Y, nullptr);
      epilogue_pass<Pass::Activation>("FusedLinear::vendor_prefill::leaky_relu", exec, Y, b, ep);
      return;
    case Algorithm::VendorLt:
      product.product(exec, Scalar(1), X, W, Scalar(0), Y, bias_in_gemm ? b.data() : nullptr);
      if (bias_in_gemm)
        epilogue_pass<Pass::ScaleActivation>("FusedLinear::vendor_lt::epilogue", exec, Y, b, ep);
      else
        epilogue_pass<Pass::BiasScaleActivation>("FusedLinear::vendor_lt::epilogue", exec, Y, b,
                                                 ep);
      return;
    default: throw std::logic_error("FusedLinear: a vendor engine was given another path");
  }
}

/// vendor and vendor_prefill through KokkosBlas::gemm: the vendor BLAS Kokkos Kernels calls for
/// these Views, or its native kernel. Kokkos Kernels decides per call (strides, alignment).
template <class ExecSpace, class XView, class WView, class BView, class YView>
class KokkosBlasEngine : public EngineBase {
  using Scalar = typename YView::non_const_value_type;

 public:
  explicit KokkosBlasEngine(const EngineSetup<ExecSpace, XView, WView, BView, YView>& s)
      : m_ep(s.ep),
        m_algorithm(s.decision.algorithm),
        m_native(s.decision.gemm == Gemm::KokkosKernelsNative),
        m_tf32(s.decision.precision == Precision::TF32) {}

  void check(const ExecSpace& exec, const XView&, const WView&, const BView&, const YView&,
             const char* function) const {
    if (m_native && !kokkos_blas_gemm_on_instance)
      refuse_if_capturing(exec, function,
                          "Kokkos Kernels' native gemm (on these Views) runs on the default "
                          "instance, ordered by fences, and cannot be captured into a CUDA graph");
  }
  void run(const ExecSpace& exec, const XView& X, const WView& W, const BView& b, const YView& Y,
           const char*) const {
    run_vendor(*this, m_algorithm, false, exec, X, W, b, Y, m_ep);
  }
  void product(const ExecSpace& exec, Scalar alpha, const XView& X, const WView& W, Scalar beta,
               const YView& Y, const Scalar*) const {
    kokkos_blas_gemm_nt(exec, alpha, X, W, beta, Y, m_tf32);
  }

 private:
  LeakyReLUEpilogue<Scalar> m_ep;
  Algorithm m_algorithm;
  bool m_native, m_tf32;
};

}  // namespace Impl
}  // namespace FusedLinear

#endif
