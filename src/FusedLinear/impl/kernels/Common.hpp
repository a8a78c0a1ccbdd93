// SPDX-License-Identifier: Apache-2.0
/// \file Common.hpp
/// What the portable Kokkos kernels share: the per-backend facts their shapes are derived from,
/// 16-byte packs, loop pragmas, and the policy of element-wise passes. No vendor calls here.
#ifndef FUSED_LINEAR_IMPL_KERNELS_COMMON_HPP
#define FUSED_LINEAR_IMPL_KERNELS_COMMON_HPP

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <Kokkos_Core.hpp>

#if defined(KOKKOS_ENABLE_CUDA)
#include <cuda_runtime.h>
#endif

#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__clang__)
#define FUSED_LINEAR_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define FUSED_LINEAR_UNROLL _Pragma("GCC unroll 16")
#else
#define FUSED_LINEAR_UNROLL
#endif
// A loop whose iterations are one SIMD vector on the host (OpenMP's simd directive, honoured
// whenever the host compiler runs with OpenMP); device compilers unroll it instead.
#if defined(_OPENMP) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#define FUSED_LINEAR_SIMD _Pragma("omp simd")
#else
#define FUSED_LINEAR_SIMD FUSED_LINEAR_UNROLL
#endif

namespace FusedLinear {
namespace Impl {

/// The facts about an execution space the kernels' shapes depend on, one place per backend.
/// `host`: a CPU backend (Serial, OpenMP, Threads, HPX), decided by the execution space itself:
/// whether the host can reach its memory says nothing (CUDA with UVM, HIP on an APU).
/// `lanes`: threads that execute in lockstep on a GPU (a warp, a wavefront); 1 on the host.
template <class ExecSpace>
struct ExecutionSpaceTraits {
  static constexpr bool host = false;
  static constexpr int lanes = 32;
};
#if defined(KOKKOS_ENABLE_SERIAL)
template <>
struct ExecutionSpaceTraits<Kokkos::Serial> {
  static constexpr bool host = true;
  static constexpr int lanes = 1;
};
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
template <>
struct ExecutionSpaceTraits<Kokkos::OpenMP> {
  static constexpr bool host = true;
  static constexpr int lanes = 1;
};
#endif
#if defined(KOKKOS_ENABLE_THREADS)
template <>
struct ExecutionSpaceTraits<Kokkos::Threads> {
  static constexpr bool host = true;
  static constexpr int lanes = 1;
};
#endif
#if defined(KOKKOS_ENABLE_HPX)
template <>
struct ExecutionSpaceTraits<Kokkos::Experimental::HPX> {
  static constexpr bool host = true;
  static constexpr int lanes = 1;
};
#endif
#if defined(KOKKOS_ENABLE_HIP)
// AMD's CDNA (data-centre) GPUs execute 64-wide wavefronts, the RDNA ones Kokkos 4 supports
// 32-wide.
#if KOKKOS_VERSION >= 40000
template <>
struct ExecutionSpaceTraits<Kokkos::HIP> {
#else
template <>
struct ExecutionSpaceTraits<Kokkos::Experimental::HIP> {
#endif
  static constexpr bool host = false;
#if defined(KOKKOS_ARCH_AMD_GFX1030) || defined(KOKKOS_ARCH_AMD_GFX1100) || \
    defined(KOKKOS_ARCH_AMD_GFX1103)
  static constexpr int lanes = 32;
#else
  static constexpr int lanes = 64;
#endif
};
#endif

template <class ExecSpace>
constexpr bool is_host_space() {
  return ExecutionSpaceTraits<ExecSpace>::host;
}

/// Multiprocessors (NVIDIA SMs, AMD CUs) of the device `exec` runs on, as Kokkos reports the
/// device's properties; 0 on the host, where the kernels' choices do not use it.
template <class ExecSpace>
std::int64_t multiprocessors(const ExecSpace& exec) {
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value)
    return exec.cuda_device_prop().multiProcessorCount;
#endif
#if defined(KOKKOS_ENABLE_HIP)
  if constexpr (!ExecutionSpaceTraits<ExecSpace>::host)
    return exec.hip_device_prop().multiProcessorCount;
#endif
  if (is_host_space<ExecSpace>()) return 0;
  // Elsewhere: resident threads over the 2048 an NVIDIA or AMD multiprocessor holds.
  return std::int64_t(exec.concurrency()) / 2048;
}

/// The peak strict fp32 rate (GFLOP/s) of the NVIDIA GPU `exec` runs on: every
/// multiprocessor's 128 fp32 lanes (no NVIDIA GPU has more) doing a multiply-add per cycle at
/// the peak clock. 0 where no bound is known: the host, other devices, and compute capability
/// 10 on, whose cuBLAS may emulate fp32 on the tensor cores.
template <class ExecSpace>
double fp32_peak_gflops(const ExecSpace& exec) {
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value) {
    const auto& prop = exec.cuda_device_prop();
    if (prop.major >= 10) return 0;
    int khz = 0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, exec.cuda_device()) != cudaSuccess) {
      (void)cudaGetLastError();  // this query's own error
      return 0;
    }
    return double(prop.multiProcessorCount) * 128 * 2 * khz * 1e-6;
  }
#endif
  (void)exec;
  return 0;
}

/// The peak bandwidth (GB/s) of the memory of the NVIDIA GPU `exec` runs on: two transfers per
/// memory clock over the bus width, as the device reports them. 0 where unknown (the host, other
/// devices, a device that reports neither).
template <class ExecSpace>
double memory_peak_gbps(const ExecSpace& exec) {
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value) {
    int khz = 0, bits = 0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, exec.cuda_device()) !=
            cudaSuccess ||
        cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, exec.cuda_device()) !=
            cudaSuccess) {
      (void)cudaGetLastError();  // this query's own error
      return 0;
    }
    return 2.0 * khz * 1e-6 * bits / 8;
  }
#endif
  (void)exec;
  return 0;
}

/// Sixteen bytes of Scalar, loaded and stored as one access (LDG.128/STS.128 on NVIDIA GPUs,
/// one SSE/AVX move on the host). Only used where the addresses are 16-byte aligned.
template <class Scalar>
struct alignas(16) Pack16 {
  static constexpr int size = 16 / static_cast<int>(sizeof(Scalar));
  Scalar v[size];
};

/// True when the View's rows are contiguous, whole packs long, pack-aligned apart and the data
/// 16-byte aligned: the kernels may then load and store 16 bytes at a time.
template <class View>
bool rows_are_packable(const View& A) {
  using Scalar = typename View::non_const_value_type;
  constexpr int V = Pack16<Scalar>::size;
  return A.extent(1) % V == 0 && (A.extent(0) <= 1 || A.stride(0) % V == 0) &&
         (A.extent(1) <= 1 || A.stride(1) == 1) &&
         reinterpret_cast<std::uintptr_t>(A.data()) % 16 == 0;
}

/// A league size as Kokkos takes it (an int), or a clear error when the shape needs more teams.
inline int league_size(std::int64_t teams, std::int64_t M, std::int64_t N) {
  if (teams > 2147483647)
    throw std::invalid_argument("FusedLinear: M x N = " + std::to_string(M) + " x " +
                                std::to_string(N) + " needs more than 2^31 teams");
  return static_cast<int>(teams);
}

/// The policy of an element-wise pass over a rows x columns matrix of layout Layout. On GPUs the
/// contiguous index goes on the fast thread index: Kokkos 3.4's CUDA MDRange maps threadIdx.x to
/// the first index whatever the iteration order, so with the default tile a LayoutRight matrix
/// was written with a stride, several times slower
/// (docs/design/vendor-paths.md#kokkos-kernels-gemm).
template <class ExecSpace, class Layout>
Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>, Kokkos::IndexType<std::int64_t>>
elementwise_policy(const ExecSpace& exec, std::int64_t rows, std::int64_t columns) {
  using Policy = Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>, Kokkos::IndexType<std::int64_t>>;
  if (is_host_space<ExecSpace>()) return Policy(exec, {0, 0}, {rows, columns});
  if (std::is_same<Layout, Kokkos::LayoutLeft>::value)
    return Policy(exec, {0, 0}, {rows, columns}, {256, 1});
  return Policy(exec, {0, 0}, {rows, columns}, {1, 256});
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
