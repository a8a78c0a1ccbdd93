// SPDX-License-Identifier: Apache-2.0
#ifndef FUSED_LINEAR_IMPL_TF32X3_NATIVE_HPP
#define FUSED_LINEAR_IMPL_TF32X3_NATIVE_HPP

// The fused 3xtf32 path: on a Hopper GPU, the library's own wgmma kernel
// (FusedLinear_Tf32x3Sm90a.cu), which splits the operands, runs the three TF32 products and
// applies the epilogue in one pass over W, with fp32 accuracy (see Precision::TF32x3). The
// portable 3xtf32 (vendor paths through cuBLASLt) serves every other GPU and layout.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <Kokkos_Core.hpp>

#include "FusedLinear_Epilogue.hpp"
#include "impl/FusedLinear_CublasLt.hpp"

#if defined(FUSED_LINEAR_ENABLE_SM90A) && defined(FUSED_LINEAR_CUBLASLT)
#define FUSED_LINEAR_SM90A 1
#include "impl/FusedLinear_Tf32x3Sm90a.hpp"
#endif

namespace FusedLinear {
namespace Impl {

/// Why the Hopper 3xtf32 kernel cannot take this call; empty when it can.
template <class ExecSpace, class XView, class WView, class BView, class YView>
std::string sm90a_tf32x3_refusal(const ExecSpace& exec, const XView& X, const WView& W,
                                 const BView& b, const YView& Y) {
#ifdef FUSED_LINEAR_SM90A
  if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value &&
                std::is_same<typename YView::non_const_value_type, float>::value) {
    const cudaDeviceProp& device = exec.cuda_device_prop();
    if (device.major != 9 || device.minor != 0)
      return "needs a compute capability 9.0 GPU (H100, H200); this one is " +
             std::to_string(device.major) + "." + std::to_string(device.minor);
    if (X.stride(1) != 1 || W.stride(1) != 1 || Y.stride(1) != 1 || b.stride(0) != 1)
      return "needs X, W and Y with contiguous rows (LayoutRight) and a contiguous b";
    const std::int64_t int_max = 2147483647;
    if (X.extent(0) > int_max || X.extent(1) > int_max || W.extent(0) > int_max ||
        X.stride(0) > int_max || W.stride(0) > int_max || Y.stride(0) > int_max)
      return "needs extents and row strides below 2^31";
    if (W.stride(0) % 4 != 0 || reinterpret_cast<std::uintptr_t>(W.data()) % 16 != 0)
      return "needs W's rows 16-byte aligned (a row stride that is a multiple of 4)";
    return "";
  }
  (void)exec, (void)X, (void)W, (void)b, (void)Y;
  return "runs on CUDA with float Views only";
#else
  (void)exec, (void)X, (void)W, (void)b, (void)Y;
  return "is not in this build (a CUDA build with cuBLASLt and FusedLinear_ENABLE_SM90A)";
#endif
}

/// Y = ep(X . W^T, b) in 3xTF32 through the Hopper kernel, on exec's stream; only after
/// sm90a_tf32x3_refusal said yes.
template <class ExecSpace, class XView, class WView, class BView, class YView, class Scalar>
void run_sm90a_tf32x3(const ExecSpace& exec, const XView& X, const WView& W, const BView& b,
                      const YView& Y, const LeakyReLUEpilogue<Scalar>& ep) {
#ifdef FUSED_LINEAR_SM90A
  if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value && std::is_same<Scalar, float>::value) {
    const int M = int(Y.extent(0)), N = int(Y.extent(1)), K = int(X.extent(1));
    const cudaStream_t stream = exec.cuda_stream();
    const std::size_t bytes = Sm90a::tf32x3_workspace_bytes(M, K);
    LtWorkspace workspace(bytes, stream);
    const cudaError_t e = Sm90a::tf32x3_linear_leaky_relu(
        stream, M, N, K, X.data(), int(X.stride(0)), W.data(), int(W.stride(0)), b.data(),
        ep.multiplier, ep.negative_slope, Y.data(), int(Y.stride(0)), workspace.data(), bytes);
    if (e != cudaSuccess)
      throw std::runtime_error(
          std::string("FusedLinear::linear_leaky_relu: the sm_90a 3xtf32 kernel failed (") +
          cudaGetErrorString(e) + ")");
    return;
  }
#endif
  (void)exec, (void)X, (void)W, (void)b, (void)Y, (void)ep;
  throw std::logic_error("FusedLinear::linear_leaky_relu: the sm_90a 3xtf32 kernel is not here");
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
