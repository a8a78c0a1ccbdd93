// SPDX-License-Identifier: Apache-2.0
/// \file Macros.hpp
/// Function qualifiers for code that the Kokkos kernels and the CUDA-only sm_90a library (built
/// without Kokkos, FUSED_LINEAR_WITHOUT_KOKKOS) share: the epilogue functor and the TF32 split.
#ifndef FUSED_LINEAR_IMPL_MACROS_HPP
#define FUSED_LINEAR_IMPL_MACROS_HPP

#ifdef FUSED_LINEAR_WITHOUT_KOKKOS
#define FUSED_LINEAR_FUNCTION __host__ __device__ __forceinline__
#else
#include <Kokkos_Core.hpp>
#define FUSED_LINEAR_FUNCTION KOKKOS_FORCEINLINE_FUNCTION
#endif

#endif
