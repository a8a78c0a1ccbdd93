// SPDX-License-Identifier: Apache-2.0
// What the dispatch is told about real Views of this build: the rule that decides "host" by the
// execution space, the facts a plan gathers, and what Kokkos Kernels' gemm runs for the
// canonical View types.
#include <type_traits>
#include <utility>

#include "../common/Common.hpp"
#include "../common/Serves.hpp"

namespace {

using namespace FusedLinearTest;
using Impl::Backend;
using Impl::Facts;

// "Host" is decided by the execution space type, never by whether the host can reach the memory:
// CUDA with UVM (or HIP on an APU) is a GPU all the same.
TEST(ExecutionSpaces, HostIsDecidedByTheExecutionSpace) {
  int checked = 0;
#if defined(KOKKOS_ENABLE_SERIAL)
  EXPECT_TRUE(Impl::is_host_space<Kokkos::Serial>());
  EXPECT_EQ(Impl::ExecutionSpaceTraits<Kokkos::Serial>::lanes, 1);
  EXPECT_EQ(int(Impl::backend_of<Kokkos::Serial>()), int(Backend::Host));
  ++checked;
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
  EXPECT_TRUE(Impl::is_host_space<Kokkos::OpenMP>());
  EXPECT_EQ(int(Impl::backend_of<Kokkos::OpenMP>()), int(Backend::Host));
  ++checked;
#endif
#if defined(KOKKOS_ENABLE_THREADS)
  EXPECT_TRUE(Impl::is_host_space<Kokkos::Threads>());
  EXPECT_EQ(int(Impl::backend_of<Kokkos::Threads>()), int(Backend::Host));
  ++checked;
#endif
#if defined(KOKKOS_ENABLE_CUDA)
  EXPECT_FALSE(Impl::is_host_space<Kokkos::Cuda>());
  EXPECT_EQ(Impl::ExecutionSpaceTraits<Kokkos::Cuda>::lanes, 32);
  EXPECT_EQ(int(Impl::backend_of<Kokkos::Cuda>()), int(Backend::Cuda));
  // UVM memory is accessible from the host, yet its execution space is the GPU's.
  static_assert(Kokkos::SpaceAccessibility<Kokkos::HostSpace, Kokkos::CudaUVMSpace>::accessible,
                "");
  using UvmDevice = Kokkos::Device<Kokkos::Cuda, Kokkos::CudaUVMSpace>;
  using PinnedDevice = Kokkos::Device<Kokkos::Cuda, Kokkos::CudaHostPinnedSpace>;
  EXPECT_FALSE(Impl::is_host_space<UvmDevice::execution_space>());
  EXPECT_FALSE(Impl::is_host_space<PinnedDevice::execution_space>());
  EXPECT_FALSE(Impl::is_host_space<Kokkos::CudaUVMSpace::execution_space>());
  ++checked;
#endif
  EXPECT_EQ(Impl::is_host_space<Kokkos::DefaultHostExecutionSpace>(), true);
  EXPECT_GT(checked, 0);
}

// The facts of this build for real Views (through the library's canonical Views), as a plan
// gathers them: which BLAS Kokkos Kernels calls (its own gemm_tpl_spec_avail decides), whether
// cuBLASLt and the sm_90a kernels are in the build.
TEST(ExecutionSpaces, FactsOfThisBuild) {
  using Right = Kokkos::View<float**, Kokkos::LayoutRight, MemorySpace>;
  using Left = Kokkos::View<float**, Kokkos::LayoutLeft, MemorySpace>;
  using Vector = Kokkos::View<float*, MemorySpace>;
  Right X("X", 4, 8), W("W", 3, 8), Y("Y", 4, 3);
  Left W_left("W", 3, 8);
  Vector b("b", 3);
  const Facts same = facts_of(ExecSpace(), X, W, b, Y);
  const Facts mixed = facts_of(ExecSpace(), X, W_left, b, Y);
  // A column-offset subview of a wider View is still LayoutRight (padded rows): the BLAS takes
  // it; a View of LayoutStride is not.
  auto padded = Kokkos::subview(Right("wide", 4, 11), Kokkos::ALL, std::make_pair(1, 9));
  static_assert(std::is_same<decltype(padded)::array_layout, Kokkos::LayoutRight>::value, "");
  EXPECT_EQ(facts_of(ExecSpace(), padded, W, b, Y).blas, same.blas);
  const Kokkos::View<float**, Kokkos::LayoutStride, MemorySpace> strided = padded;
  const Facts stride = facts_of(ExecSpace(), strided, W, b, Y);
  EXPECT_TRUE(same.float_views);
  EXPECT_EQ(mixed.blas, Gemm::KokkosKernelsNative) << "mixed layouts: Kokkos Kernels' own gemm";
  EXPECT_EQ(stride.blas, Gemm::KokkosKernelsNative) << "LayoutStride: Kokkos Kernels' own gemm";
  EXPECT_FALSE(mixed.cublaslt);
  EXPECT_FALSE(stride.cublaslt);
  if (Impl::is_host_space<ExecSpace>()) {
    EXPECT_EQ(int(same.backend), int(Backend::Host));
    EXPECT_EQ(same.multiprocessors, 0);
    EXPECT_EQ(same.host_threads, ExecSpace().concurrency());
    EXPECT_EQ(same.host_tiling.mr, Impl::HostFusedTiles<float>::mr);
    EXPECT_EQ(same.host_tiling.skinny_rows, Impl::HostSkinnyTiles<float>::rows);
    EXPECT_EQ(same.host_tiling.scalar_bytes, 4);
#if defined(KOKKOSKERNELS_ENABLE_TPL_BLAS)
    EXPECT_EQ(same.blas, Gemm::HostBlas);
    EXPECT_EQ(int(same.host_blas), int(Impl::host_blas_kind()));
#else
    EXPECT_EQ(same.blas, Gemm::KokkosKernelsNative);
#endif
    EXPECT_FALSE(same.cublaslt);
  }
#if defined(KOKKOS_ENABLE_CUDA)
  EXPECT_EQ(int(same.backend), int(Backend::Cuda));
  EXPECT_GT(same.multiprocessors, 0);
#if defined(KOKKOSKERNELS_ENABLE_TPL_CUBLAS)
  EXPECT_EQ(same.blas, Gemm::Cublas);
#endif
#if defined(FUSED_LINEAR_CUBLASLT)
  EXPECT_TRUE(same.cublaslt);
  EXPECT_TRUE(same.cublaslt_bias);
  // UVM Views: still CUDA, cuBLASLt still serves them.
  Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::CudaUVMSpace> Xu("X", 4, 8), Wu("W", 3, 8),
      Yu("Y", 4, 3);
  Kokkos::View<float*, Kokkos::CudaUVMSpace> bu("b", 3);
  const Facts uvm = facts_of(Kokkos::Cuda(), Xu, Wu, bu, Yu);
  EXPECT_EQ(int(uvm.backend), int(Backend::Cuda));
  EXPECT_TRUE(uvm.cublaslt);
#else
  EXPECT_FALSE(same.cublaslt);
#endif
#endif
#if !defined(FUSED_LINEAR_SM90A)
  EXPECT_TRUE(contains(same.sm90_tf32x3, "is not in this build"));
  EXPECT_TRUE(contains(same.sm90_skinny, "is not in this build"));
#endif
  Kokkos::View<double**, Kokkos::LayoutRight, MemorySpace> Xd("X", 4, 8), Wd("W", 3, 8),
      Yd("Y", 4, 3);
  Kokkos::View<double*, MemorySpace> bd("b", 3);
  EXPECT_FALSE(facts_of(ExecSpace(), Xd, Wd, bd, Yd).float_views);
  if (Impl::is_host_space<ExecSpace>()) {
    EXPECT_EQ(facts_of(ExecSpace(), Xd, Wd, bd, Yd).host_tiling.scalar_bytes, 8);
    EXPECT_EQ(facts_of(ExecSpace(), Xd, Wd, bd, Yd).host_tiling.lanes,
              Impl::HostFusedTiles<double>::lanes);
  }
  EXPECT_NE(facts_of(ExecSpace(), Xd, Wd, bd, Yd).sm90_tf32x3, nullptr);
}

// What Kokkos Kernels' gemm runs, asked at compile time with the canonical View types.
TEST(ExecutionSpaces, KokkosBlasGemmAvailability) {
  using E = ExecSpace;
  using CR = Impl::CanonicalInput<E, Kokkos::View<float**, Kokkos::LayoutRight, MemorySpace>>;
  using CL = Impl::CanonicalInput<E, Kokkos::View<float**, Kokkos::LayoutLeft, MemorySpace>>;
  using CS = Impl::CanonicalInput<E, Kokkos::View<float**, Kokkos::LayoutStride, MemorySpace>>;
  using YR = Impl::CanonicalOutput<E, Kokkos::View<float**, Kokkos::LayoutRight, MemorySpace>>;
  using YL = Impl::CanonicalOutput<E, Kokkos::View<float**, Kokkos::LayoutLeft, MemorySpace>>;
  constexpr Gemm right = Impl::kokkos_blas_gemm<E, CR, CR, YR>();
  constexpr Gemm left = Impl::kokkos_blas_gemm<E, CL, CL, YL>();
  constexpr Gemm mixed = Impl::kokkos_blas_gemm<E, CR, CL, YR>();
  constexpr Gemm strided = Impl::kokkos_blas_gemm<E, CS, CR, YR>();
  EXPECT_EQ(mixed, Gemm::KokkosKernelsNative);
  EXPECT_EQ(strided, Gemm::KokkosKernelsNative);
  EXPECT_EQ(right, left);
#if defined(KOKKOS_ENABLE_CUDA) && defined(KOKKOSKERNELS_ENABLE_TPL_CUBLAS)
  EXPECT_EQ(right, Gemm::Cublas);
#elif !defined(KOKKOS_ENABLE_CUDA) && !defined(KOKKOS_ENABLE_HIP) && \
    defined(KOKKOSKERNELS_ENABLE_TPL_BLAS)
  EXPECT_EQ(right, Gemm::HostBlas);
#endif
}

}  // namespace
