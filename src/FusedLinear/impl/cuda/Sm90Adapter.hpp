// SPDX-License-Identifier: Apache-2.0
/// \file Sm90Adapter.hpp
/// The Kokkos side of the sm_90a kernels (Sm90.hpp): what they can take, from the Views and the
/// device, and their launch on a plan's workspace.
#ifndef FUSED_LINEAR_IMPL_CUDA_SM90_ADAPTER_HPP
#define FUSED_LINEAR_IMPL_CUDA_SM90_ADAPTER_HPP

#include <Kokkos_Core.hpp>

#include "FusedLinear/Config.hpp"

#if defined(FUSED_LINEAR_ENABLE_SM90A) && defined(KOKKOS_ENABLE_CUDA)
#define FUSED_LINEAR_SM90A 1

#include <cstdint>
#include <type_traits>

#include "FusedLinear/Epilogue.hpp"
#include "FusedLinear/impl/cuda/Device.hpp"
#include "FusedLinear/impl/cuda/Sm90.hpp"

namespace FusedLinear {
namespace Impl {

inline Sm90::Device sm90_device(const Kokkos::Cuda& exec) {
  const cudaDeviceProp& p = exec.cuda_device_prop();
  Sm90::Device d;
  d.cc_major = p.major, d.cc_minor = p.minor, d.multiprocessors = p.multiProcessorCount;
  return d;
}

/// The kernels' view of a call; valid only where sm90_layouts_refusal said yes.
template <class XView, class WView, class BView, class YView>
Sm90::Problem sm90_problem(const XView& X, const WView& W, const BView& b, const YView& Y,
                           const LeakyReLUEpilogue<float>& ep) {
  Sm90::Problem p;
  p.M = Y.extent(0), p.N = Y.extent(1), p.K = X.extent(1);
  p.X = X.data(), p.ldx = std::int64_t(X.stride(0));
  p.W = W.data(), p.ldw = std::int64_t(W.stride(0));
  p.bias = b.data();
  p.multiplier = ep.multiplier, p.slope = ep.negative_slope;
  p.Y = Y.data(), p.ldy = std::int64_t(Y.stride(0));
  return p;
}

/// What the kernels need of the Views themselves (the rest is the kernels' own check): float,
/// rows contiguous, b contiguous. nullptr when they have it.
template <class XView, class WView, class BView, class YView>
const char* sm90_layouts_refusal(const XView& X, const WView& W, const BView& b, const YView& Y) {
  if (!std::is_same<typename YView::non_const_value_type, float>::value)
    return "runs on float Views only";
  if ((X.extent(1) > 1 && X.stride(1) != 1) || (W.extent(1) > 1 && W.stride(1) != 1) ||
      (Y.extent(1) > 1 && Y.stride(1) != 1) || (b.extent(0) > 1 && b.stride(0) != 1))
    return "needs X, W and Y with contiguous rows (LayoutRight) and a contiguous b";
  return nullptr;
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
#endif
