// SPDX-License-Identifier: Apache-2.0
/// \file Epilogue.hpp
/// The layer's epilogue, the one place its maths lives.
#ifndef FUSED_LINEAR_EPILOGUE_HPP
#define FUSED_LINEAR_EPILOGUE_HPP

#include "FusedLinear/impl/Macros.hpp"

namespace FusedLinear {

/// The layer's epilogue: y = LeakyReLU(multiplier * (acc + bias), negative_slope).
///
/// Every compute path calls it: the vendor paths' element-wise passes, the portable kernels'
/// write-back and the sm_90a kernels' (which include this header without Kokkos). Trivially
/// copyable, so kernels capture it by value.
///
/// LeakyReLU follows PyTorch: v > 0 ? v : v * slope. NaN compares false and so stays NaN, and
/// -0.0 maps to -0.0 * slope, as PyTorch does.
template <class Scalar>
struct LeakyReLUEpilogue {
  Scalar multiplier;
  Scalar negative_slope;

  /// LeakyReLU alone (after a GEMM that already applied scale and bias).
  FUSED_LINEAR_FUNCTION Scalar activation(Scalar v) const {
    return v > Scalar(0) ? v : v * negative_slope;
  }

  /// The bias as the prefill pass writes it before a GEMM with alpha = multiplier, beta = 1.
  FUSED_LINEAR_FUNCTION Scalar scaled_bias(Scalar bias) const { return multiplier * bias; }

  /// Scale and LeakyReLU of a biased sum (after a GEMM that already added the bias).
  FUSED_LINEAR_FUNCTION Scalar scaled_activation(Scalar biased) const {
    return activation(multiplier * biased);
  }

  /// The whole epilogue on one accumulator (the plain product row . column).
  FUSED_LINEAR_FUNCTION Scalar operator()(Scalar acc, Scalar bias) const {
    return scaled_activation(acc + bias);
  }
};

}  // namespace FusedLinear

#endif
