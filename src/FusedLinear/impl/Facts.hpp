// SPDX-License-Identifier: Apache-2.0
/// \file Facts.hpp
/// What the dispatch (Dispatch.hpp) and its cost models (rules/HostModel.hpp, GpuModel.hpp)
/// decide on: the problem's shape and what is true of the build, the execution space, its device
/// and the Views. Plain data without Kokkos, so that the dispatch is unit-tested and replayed
/// (perf/replay_rule.cpp) for any machine; GatherFacts.hpp fills it in once per plan.
#ifndef FUSED_LINEAR_IMPL_FACTS_HPP
#define FUSED_LINEAR_IMPL_FACTS_HPP

#include <cstdint>

#include "FusedLinear/Types.hpp"
#include "FusedLinear/impl/kernels/HostTiles.hpp"

namespace FusedLinear {
namespace Impl {

/// The kind of execution space a plan runs on.
enum class Backend { Host, Cuda, Hip, Sycl, OtherDevice };

/// What the host BLAS behind Kokkos Kernels is (host backends, HostBlas.hpp): Debian's
/// reference BLAS is single-threaded and unblocked; an optimised one (OpenBLAS, BLIS, MKL) runs
/// kernels written for the CPU's vector units, unless it does not know the CPU and falls back
/// to older ones (Generic: OpenBLAS 0.3.21 runs its SSE3 "Prescott" kernels on a 2023 Xeon).
enum class HostBlas { Unknown, Reference, Optimized, Generic };

/// What is true of the build, the execution space, its device and the Views, for one plan.
struct Facts {
  Backend backend = Backend::Host;
  /// float Views (the tensor-core precisions and the sm_90a kernels are float-only).
  bool float_views = true;
  /// What KokkosBlas::gemm runs for these Views: a vendor BLAS or Kokkos Kernels' native gemm.
  Gemm blas = Gemm::KokkosKernelsNative;
  HostBlas host_blas = HostBlas::Unknown;
  /// vendor_lt: cuBLASLt serves these Views (CUDA build with it, one layout, CUDA memory); and
  /// can add the bias in its epilogue (float, LayoutRight, a contiguous b).
  bool cublaslt = false, cublaslt_bias = false;
  /// Why the sm_90a kernels cannot take this problem (a sentence fragment), nullptr when they can.
  const char* sm90_tf32x3 = "is not in this build";
  const char* sm90_skinny = "is not in this build";
  /// fused_skinny reads X's and W's rows as 16-byte packs (contiguous rows of a multiple of 16
  /// bytes, aligned), not element by element.
  bool skinny_packed = true;
  /// Multiprocessors of the device (0 on the host).
  std::int64_t multiprocessors = 0;
  /// The device's peak fp32 rate, GFLOP/s, and its memory's peak bandwidth, GB/s (0 where
  /// unknown): the GPU cost model's units (DeviceRates.hpp reads them from the device).
  double fp32_gflops = 0, memory_gbps = 0;
  /// fp32_gflops bounds strict fp32 products from below (Planning::Measure's compute bound):
  /// CUDA before compute capability 10, whose cuBLAS may run fp32 on the tensor cores.
  bool fp32_bound = false;
  /// Where the rates came from and why (a static string), for RunInfo::gpu_rates.
  RatesSource rates_source = RatesSource::None;
  const char* rates_note = "";
  /// Host backends: the instance's threads and the host kernels' tiles for the Views' value
  /// type, which the host cost model counts with (host_fused_terms, host_skinny_terms).
  std::int64_t host_threads = 1;
  HostTiling host_tiling = {};
};

/// The product's shape: Y is M x N, X M x K, W N x K.
struct Shape {
  std::int64_t M = 0, K = 0, N = 0;
};

}  // namespace Impl
}  // namespace FusedLinear

#endif
