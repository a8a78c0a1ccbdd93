// SPDX-License-Identifier: Apache-2.0
#ifndef FUSED_LINEAR_IMPL_TF32X3_SM90A_HPP
#define FUSED_LINEAR_IMPL_TF32X3_SM90A_HPP

// The 3xtf32 precision's own tensor-core kernel for Hopper (compute capability 9.0), defined in
// FusedLinear_Tf32x3Sm90a.cu: wgmma needs the sm_90a target, so that file is compiled on its
// own (-gencode=arch=compute_90a,code=sm_90a) into the fused_linear_sm90a library, without
// Kokkos. This header is all the Kokkos side sees: plain CUDA runtime types.

#include <cstddef>

#include <cuda_runtime.h>

namespace FusedLinear {
namespace Impl {
namespace Sm90a {

/// Bytes of device workspace a call needs (X split into its TF32 parts, the split-K partial
/// sums and their flags); 16-byte aligned, usable by work on the call's stream.
std::size_t tf32x3_workspace_bytes(int M, int K);

/// Enqueues Y = LeakyReLU(multiplier * (X . W^T + b), slope) in 3xTF32 on `stream`: X [M,K],
/// W [N,K], Y [M,N] with unit column stride and row strides ldx, ldw, ldy; b [N] contiguous or
/// null. Returns cudaErrorInvalidValue for what it does not take (ldw not a multiple of 4, W not
/// 16-byte aligned, a short workspace, a grid past CUDA's limits) and
/// cudaErrorInvalidDeviceFunction on a GPU that is not compute capability 9.0; never exits.
cudaError_t tf32x3_linear_leaky_relu(cudaStream_t stream, int M, int N, int K, const float* X,
                                     int ldx, const float* W, int ldw, const float* bias,
                                     float multiplier, float slope, float* Y, int ldy,
                                     void* workspace, std::size_t workspace_bytes);

/// Which of its two kernels a call takes: 0 chooses by the shape (the tile kernel unless its
/// last wave would leave many multiprocessors idle, then the persistent split-K one), 1 the
/// tile kernel, 2 the split-K kernel. A process-wide setting so that tests can take both
/// kernels at small shapes; not part of the API.
int& tf32x3_kernel_choice();

}  // namespace Sm90a
}  // namespace Impl
}  // namespace FusedLinear

#endif
