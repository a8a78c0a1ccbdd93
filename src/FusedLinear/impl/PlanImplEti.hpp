// SPDX-License-Identifier: Apache-2.0
/// \file PlanImplEti.hpp
/// Explicit instantiation of the canonical plans (FusedLinear_ENABLE_ETI), as Kokkos Kernels'
/// ETI: the library fused_linear_eti compiles PlanImpl once for each execution space the build
/// instantiates (FUSED_LINEAR_ETI_<SPACE> in Config.hpp), float and double, with X, W, b and Y
/// all LayoutRight or all LayoutLeft in the space's memory space; here they are declared extern,
/// so that a translation unit using them compiles none of the engines. Any other View type
/// compiles from the headers as before. The public headers include this header, not PlanImpl.hpp
/// alone, so that every user of a plan sees the extern declarations.
#ifndef FUSED_LINEAR_IMPL_PLAN_IMPL_ETI_HPP
#define FUSED_LINEAR_IMPL_PLAN_IMPL_ETI_HPP

#include <Kokkos_Core.hpp>

#include "FusedLinear/Config.hpp"
#include "FusedLinear/impl/PlanImpl.hpp"

/// The plan on Views of SCALAR in LAYOUT on EXEC's memory space, as Plan and linear_leaky_relu
/// canonicalise them (PlanImpl.hpp).
#define FUSED_LINEAR_ETI_VIEW(EXEC, DATA, LAYOUT) \
  Kokkos::View<DATA, LAYOUT, Kokkos::Device<EXEC, EXEC::memory_space>, Kokkos::MemoryUnmanaged>
#define FUSED_LINEAR_ETI_PLAN(EXEC, SCALAR, LAYOUT)                                        \
  ::FusedLinear::Impl::PlanImpl<EXEC, FUSED_LINEAR_ETI_VIEW(EXEC, const SCALAR**, LAYOUT), \
                                FUSED_LINEAR_ETI_VIEW(EXEC, const SCALAR**, LAYOUT),       \
                                FUSED_LINEAR_ETI_VIEW(EXEC, const SCALAR*, LAYOUT),        \
                                FUSED_LINEAR_ETI_VIEW(EXEC, SCALAR**, LAYOUT)>
/// EXTERN: `extern` (a declaration, here) or nothing (the definition, in the library's
/// generated sources cmake/FusedLinear_ETI.cpp.in).
#define FUSED_LINEAR_ETI_PLANS(EXTERN, EXEC, SCALAR)                              \
  EXTERN template class FUSED_LINEAR_ETI_PLAN(EXEC, SCALAR, Kokkos::LayoutRight); \
  EXTERN template class FUSED_LINEAR_ETI_PLAN(EXEC, SCALAR, Kokkos::LayoutLeft);
#define FUSED_LINEAR_ETI_SPACE(EXTERN, EXEC)  \
  FUSED_LINEAR_ETI_PLANS(EXTERN, EXEC, float) \
  FUSED_LINEAR_ETI_PLANS(EXTERN, EXEC, double)

#if KOKKOS_VERSION >= 40000
#define FUSED_LINEAR_ETI_HIP_SPACE Kokkos::HIP
#else
#define FUSED_LINEAR_ETI_HIP_SPACE Kokkos::Experimental::HIP
#endif

// FUSED_LINEAR_DISABLE_ETI: the translation unit compiles its own plans, as one built with other
// kernel parameters must (the library's instantiations are not its kernels).
#if defined(FUSED_LINEAR_ENABLE_ETI) && !defined(FUSED_LINEAR_DISABLE_ETI)
#if defined(FUSED_LINEAR_ETI_SERIAL) && defined(KOKKOS_ENABLE_SERIAL)
FUSED_LINEAR_ETI_SPACE(extern, Kokkos::Serial)
#endif
#if defined(FUSED_LINEAR_ETI_OPENMP) && defined(KOKKOS_ENABLE_OPENMP)
FUSED_LINEAR_ETI_SPACE(extern, Kokkos::OpenMP)
#endif
#if defined(FUSED_LINEAR_ETI_THREADS) && defined(KOKKOS_ENABLE_THREADS)
FUSED_LINEAR_ETI_SPACE(extern, Kokkos::Threads)
#endif
#if defined(FUSED_LINEAR_ETI_CUDA) && defined(KOKKOS_ENABLE_CUDA)
FUSED_LINEAR_ETI_SPACE(extern, Kokkos::Cuda)
#endif
#if defined(FUSED_LINEAR_ETI_HIP) && defined(KOKKOS_ENABLE_HIP)
FUSED_LINEAR_ETI_SPACE(extern, FUSED_LINEAR_ETI_HIP_SPACE)
#endif
#endif

#endif
