// SPDX-License-Identifier: Apache-2.0
#ifndef FUSED_LINEAR_EPILOGUE_HPP
#define FUSED_LINEAR_EPILOGUE_HPP

// The sm_90a kernel's translation unit is built without Kokkos (FusedLinear_Tf32x3Sm90a.cu)
// and takes this functor all the same.
#ifdef FUSED_LINEAR_EPILOGUE_WITHOUT_KOKKOS
#define FUSED_LINEAR_EPILOGUE_FUNCTION __host__ __device__ __forceinline__
#else
#include <Kokkos_Core.hpp>
#define FUSED_LINEAR_EPILOGUE_FUNCTION KOKKOS_FORCEINLINE_FUNCTION
#endif

namespace FusedLinear {

/// The layer's epilogue: y = LeakyReLU(multiplier * (acc + bias), negative_slope).
///
/// The single place where the maths of the epilogue lives; every compute path (the vendor
/// paths' MDRange passes and the fused kernel's write-back) calls it. Trivially copyable, so
/// kernels capture it by value.
///
/// LeakyReLU follows PyTorch: v > 0 ? v : v * slope. NaN compares false and so stays NaN,
/// and -0.0 maps to -0.0 * slope, as PyTorch does.
template <class Scalar>
struct LeakyReLUEpilogue {
  Scalar multiplier;
  Scalar negative_slope;

  /// LeakyReLU alone (used after a GEMM that already applied scale and bias).
  FUSED_LINEAR_EPILOGUE_FUNCTION Scalar activation(Scalar v) const {
    return v > Scalar(0) ? v : v * negative_slope;
  }

  /// The bias as the prefill pass writes it before a GEMM with alpha = multiplier, beta = 1.
  FUSED_LINEAR_EPILOGUE_FUNCTION Scalar scaled_bias(Scalar bias) const {
    return multiplier * bias;
  }

  /// Scale and LeakyReLU of a biased sum (used after a GEMM that already added the bias).
  FUSED_LINEAR_EPILOGUE_FUNCTION Scalar scaled_activation(Scalar biased) const {
    return activation(multiplier * biased);
  }

  /// The whole epilogue on one accumulator (the plain product row . column).
  FUSED_LINEAR_EPILOGUE_FUNCTION Scalar operator()(Scalar acc, Scalar bias) const {
    return scaled_activation(acc + bias);
  }
};

}  // namespace FusedLinear

#endif
