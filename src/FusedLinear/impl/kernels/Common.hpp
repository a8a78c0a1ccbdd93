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

#include "FusedLinear/impl/DeviceRates.hpp"

#if defined(KOKKOS_ENABLE_CUDA)
#include <cuda_runtime.h>

#include "FusedLinear/impl/cuda/Nvml.hpp"
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
/// Kokkos' HIP execution space, under the name of the Kokkos in use.
#if KOKKOS_VERSION >= 40000
using HipSpace = Kokkos::HIP;
#else
using HipSpace = Kokkos::Experimental::HIP;
#endif
// AMD's CDNA (data-centre) GPUs execute 64-wide wavefronts, the RDNA ones Kokkos 4 supports
// 32-wide.
template <>
struct ExecutionSpaceTraits<HipSpace> {
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

/// What the GPU `exec` runs on reports of its rates (DeviceRates.hpp turns it into the cost
/// model's): CUDA's properties and clocks, with NVML's word on MIG and the application clock;
/// HIP's properties. Host backends: an empty report; other GPUs: the multiprocessors alone.
template <class ExecSpace>
DeviceReport device_report(const ExecSpace& exec) {
  DeviceReport r;
  if (is_host_space<ExecSpace>()) return r;
  r.backend = Backend::OtherDevice;
  r.multiprocessors = multiprocessors(exec);
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value) {
    const auto& prop = exec.cuda_device_prop();
    r.backend = Backend::Cuda;
    r.cc_major = prop.major, r.cc_minor = prop.minor;
    int khz = 0, memory_khz = 0, bits = 0;
    const int device = exec.cuda_device();
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&memory_khz, cudaDevAttrMemoryClockRate, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, device) != cudaSuccess)
      (void)cudaGetLastError();  // this query's own error: the rates stay unknown
    r.clock_khz = khz, r.memory_clock_khz = memory_khz, r.memory_bus_bits = bits;
    unsigned char uuid[16];
    for (int i = 0; i < 16; ++i) uuid[i] = static_cast<unsigned char>(prop.uuid.bytes[i]);
    const NvmlReport n = nvml_report(device, uuid);
    r.nvml = n.read ? DeviceReport::Nvml::Read : DeviceReport::Nvml::Unavailable;
    r.mig = n.mig, r.mig_memory_share = n.mig_memory_share;
    r.sm_clock_max_mhz = n.sm_clock_max_mhz, r.sm_clock_app_mhz = n.sm_clock_app_mhz;
  }
#endif
#if defined(KOKKOS_ENABLE_HIP)
  if constexpr (std::is_same<ExecSpace, HipSpace>::value) {
    const auto& prop = exec.hip_device_prop();
    r.backend = Backend::Hip;
    r.clock_khz = prop.clockRate, r.memory_clock_khz = prop.memoryClockRate;
    r.memory_bus_bits = prop.memoryBusWidth;
  }
#endif
  return r;
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
