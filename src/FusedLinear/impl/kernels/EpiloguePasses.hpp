// SPDX-License-Identifier: Apache-2.0
/// \file EpiloguePasses.hpp
/// The element-wise passes of the vendor paths over Y, each a use of the shared epilogue.
#ifndef FUSED_LINEAR_IMPL_KERNELS_EPILOGUE_PASSES_HPP
#define FUSED_LINEAR_IMPL_KERNELS_EPILOGUE_PASSES_HPP

#include <cstdint>

#include <Kokkos_Core.hpp>

#include "FusedLinear/Epilogue.hpp"
#include "FusedLinear/impl/kernels/Common.hpp"

namespace FusedLinear {
namespace Impl {

enum class Pass {
  BiasScaleActivation,  ///< after a plain product: the whole epilogue
  ScaleActivation,      ///< after a product that added the bias
  PrefillScaledBias,    ///< before a product with alpha = multiplier, beta = 1
  Activation,           ///< after that product
  BiasOnly,             ///< K = 0: the product is 0
};

template <class BView, class YView, Pass P>
struct EpiloguePass {
  using Scalar = typename YView::non_const_value_type;
  YView Y;
  BView b;
  LeakyReLUEpilogue<Scalar> ep;

  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i, std::int64_t j) const {
    switch (P) {
      case Pass::BiasScaleActivation: Y(i, j) = ep(Y(i, j), b(j)); break;
      case Pass::ScaleActivation: Y(i, j) = ep.scaled_activation(Y(i, j)); break;
      case Pass::PrefillScaledBias: Y(i, j) = ep.scaled_bias(b(j)); break;
      case Pass::Activation: Y(i, j) = ep.activation(Y(i, j)); break;
      case Pass::BiasOnly: Y(i, j) = ep(Scalar(0), b(j)); break;
    }
  }
};

/// The pass on the host where Y's rows and b are contiguous: rows across threads, each row one
/// loop the compiler vectorises (the MDRange pass went element by element through Kokkos'
/// tiles).
template <class BView, class YView, Pass P>
struct HostRowsPass {
  using Scalar = typename YView::non_const_value_type;
  YView Y;
  BView b;
  LeakyReLUEpilogue<Scalar> ep;
  std::int64_t N;

  void operator()(std::int64_t i) const {
    Scalar* const y = Y.data() + i * std::int64_t(Y.stride(0));
    const Scalar* const bias = b.data();
    const LeakyReLUEpilogue<Scalar> e = ep;
    switch (P) {
      case Pass::BiasScaleActivation:
        FUSED_LINEAR_SIMD
        for (std::int64_t j = 0; j < N; ++j) y[j] = e(y[j], bias[j]);
        break;
      case Pass::ScaleActivation:
        FUSED_LINEAR_SIMD
        for (std::int64_t j = 0; j < N; ++j) y[j] = e.scaled_activation(y[j]);
        break;
      case Pass::PrefillScaledBias:
        FUSED_LINEAR_SIMD
        for (std::int64_t j = 0; j < N; ++j) y[j] = e.scaled_bias(bias[j]);
        break;
      case Pass::Activation:
        FUSED_LINEAR_SIMD
        for (std::int64_t j = 0; j < N; ++j) y[j] = e.activation(y[j]);
        break;
      case Pass::BiasOnly:
        FUSED_LINEAR_SIMD
        for (std::int64_t j = 0; j < N; ++j) y[j] = e(Scalar(0), bias[j]);
        break;
    }
  }
};

/// One pass over Y (see elementwise_policy for the thread mapping; HostRowsPass on the host
/// where it applies).
template <Pass P, class ExecSpace, class BView, class YView, class Scalar>
void epilogue_pass(const char* label, const ExecSpace& exec, const YView& Y, const BView& b,
                   const LeakyReLUEpilogue<Scalar>& ep) {
  if constexpr (is_host_space<ExecSpace>()) {
    const std::int64_t M = Y.extent(0), N = Y.extent(1);
    if ((N <= 1 || (Y.stride(1) == 1 && b.stride(0) == 1)) && M > 0) {
      Kokkos::parallel_for(
          label, Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, M),
          HostRowsPass<BView, YView, P>{Y, b, ep, N});
      return;
    }
  }
  Kokkos::parallel_for(
      label,
      elementwise_policy<ExecSpace, typename YView::array_layout>(exec, Y.extent(0), Y.extent(1)),
      EpiloguePass<BView, YView, P>{Y, b, ep});
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
