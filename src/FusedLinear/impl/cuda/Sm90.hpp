// SPDX-License-Identifier: Apache-2.0
/// \file Sm90.hpp
/// The library's own Hopper (compute capability 9.0) kernels, defined in Sm90Tf32x3.cu and
/// Sm90Skinny.cu. wgmma and the bulk-copy engine need the sm_90a target, so those files are
/// compiled on their own (-gencode=arch=compute_90a,code=sm_90a) into the fused_linear_sm90a
/// static library, without Kokkos. This header is all the Kokkos side sees: plain types, and the
/// checks of what each kernel takes, which both sides of the boundary call (one copy of them).
#ifndef FUSED_LINEAR_IMPL_CUDA_SM90_HPP
#define FUSED_LINEAR_IMPL_CUDA_SM90_HPP

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "FusedLinear/impl/cuda/Sm90Splits.hpp"

namespace FusedLinear {
namespace Impl {
namespace Sm90 {

/// One layer call as the sm_90a kernels take it: X [M,K], W [N,K], Y [M,N] row-major (unit
/// column stride) with row strides ldx, ldw, ldy (elements); bias [N] contiguous or null.
struct Problem {
  std::int64_t M = 0, N = 0, K = 0;
  const float* X = nullptr;
  std::int64_t ldx = 0;
  const float* W = nullptr;
  std::int64_t ldw = 0;
  const float* bias = nullptr;
  float multiplier = 1, slope = 0;
  float* Y = nullptr;
  std::int64_t ldy = 0;
};

/// What the plan knows of the device (read once, when the plan is made).
struct Device {
  int cc_major = 0, cc_minor = 0, multiprocessors = 0;
  /// Clusters of S CTAs of the few-rows kernel that fit at once, at [S - 1] (0: not known);
  /// set by skinny_count_clusters.
  int skinny_clusters[max_splits] = {};
};

/// Largest M, N or K the kernels take: their index arithmetic stays in 64 bits, but TMA
/// coordinates and grid dimensions are 32-bit, and tiles are rounded up past the extent.
constexpr std::int64_t max_extent = (std::int64_t(1) << 31) - 1024;

/// Why the 3xTF32 kernel cannot take `p` on `d` (a sentence fragment such as "needs a compute
/// capability 9.0 GPU"), or nullptr when it can. Pointers are not dereferenced.
const char* tf32x3_refusal(const Device& d, const Problem& p);

/// Bytes of device workspace a 3xTF32 call of this shape needs (16-byte aligned start; need not
/// be zeroed). W's rows not 16-byte aligned (or K = 0) add a padded copy of W: N * K * 4 bytes.
std::size_t tf32x3_workspace_bytes(const Problem& p);

/// Which of the 3xTF32 kernels a call takes: 0 chooses by the shape, 1 the tile kernel, 2 the
/// persistent split-K kernel (Options::tuning, for tests).
cudaError_t tf32x3_linear_leaky_relu(cudaStream_t stream, const Device& d, const Problem& p,
                                     void* workspace, std::size_t workspace_bytes,
                                     int kernel_choice);

/// One product of the layer's gradient as the 3xTF32 kernel takes it: D [P, K] (+)= B . S with
/// S [R, K] row-major (read as the MN-major operand) and B = G [P, R] (dX = G . W: P = M,
/// R = N, S = W) or B = G^T (dW = G^T . X: P = N, R = M, S = X, `transpose_g`), G [M, N]
/// row-major with row stride ldg; `accumulate` adds to D (beta = 1).
struct GradientProduct {
  std::int64_t P = 0, K = 0, R = 0;
  const float* S = nullptr;
  std::int64_t lds = 0;
  const float* G = nullptr;
  std::int64_t ldg = 0;
  bool transpose_g = false;
  float* D = nullptr;
  std::int64_t ldd = 0;
  bool accumulate = false;
};

/// Why the 3xTF32 kernel cannot take the gradient product `p` on `d`, or nullptr. Its workspace
/// (B's split parts, 2 P R floats, and the split-K partials) and its launch: a split pass over G,
/// then the kernel of the forward's 3xTF32 product with W's role taken by S, read transposed on
/// its way into registers. Nothing is written when P, K or R is 0 (an empty sum: the caller's).
const char* tf32x3_gradient_refusal(const Device& d, const GradientProduct& p);
std::size_t tf32x3_gradient_workspace_bytes(const GradientProduct& p);
cudaError_t tf32x3_gradient(cudaStream_t stream, const Device& d, const GradientProduct& p,
                            void* workspace, std::size_t workspace_bytes, int kernel_choice);

/// The few-rows kernel (strict fp32, W streamed through the bulk-copy engine): why it cannot
/// take `p` on `d`, or nullptr; its workspace; its launch. `splits` > 0 forces the number of
/// CTAs that share each tile's K (at most 8, at most K/32; Options::tuning, for tests); 0
/// chooses by the shape and the device (choose_splits).
const char* skinny_refusal(const Device& d, const Problem& p);
/// Fills d.skinny_clusters from the occupancy calculator (left 0 where it fails); once per plan.
void skinny_count_clusters(Device& d);
std::size_t skinny_workspace_bytes(const Device& d, const Problem& p);
cudaError_t skinny_linear_leaky_relu(cudaStream_t stream, const Device& d, const Problem& p,
                                     void* workspace, std::size_t workspace_bytes, int splits = 0);

}  // namespace Sm90
}  // namespace Impl
}  // namespace FusedLinear

#endif
