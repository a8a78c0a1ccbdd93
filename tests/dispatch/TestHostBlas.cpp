// SPDX-License-Identifier: Apache-2.0
// Which host BLAS the process runs and whether its kernels fit the CPU (Impl::classify_blas),
// which the host dispatch trusts only where they do.
#include <cstdio>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "FusedLinear/impl/HostBlas.hpp"

namespace {

namespace Impl = FusedLinear::Impl;

TEST(HostBlas, ClassifiesTypicalLibraries) {
  using Impl::HostBlas;
  const std::pair<const char*, HostBlas> paths[] = {
      {"/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3", HostBlas::Optimized},
      {"/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3", HostBlas::Optimized},
      {"/usr/lib/x86_64-linux-gnu/blis-openmp/libblas.so.3", HostBlas::Optimized},
      {"/usr/lib/x86_64-linux-gnu/blis-pthread/libblas.so.3", HostBlas::Optimized},
      {"/usr/lib/x86_64-linux-gnu/atlas/libblas.so.3", HostBlas::Optimized},
      {"/opt/intel/oneapi/mkl/2024.0/lib/libmkl_rt.so.2", HostBlas::Optimized},
      {"libmkl_rt.so", HostBlas::Optimized},
      {"/usr/lib/x86_64-linux-gnu/blas/libblas.so.3", HostBlas::Reference},
      {"/usr/lib/aarch64-linux-gnu/blas/libblas.so.3.11.0", HostBlas::Reference},
      // The alternatives link itself, unresolved, says nothing; nor does an unknown library.
      {"/usr/lib/x86_64-linux-gnu/libblas.so.3", HostBlas::Unknown},
      {"/home/user/lib/libmyblas.so", HostBlas::Unknown},
      {"", HostBlas::Unknown},
  };
  for (const auto& p : paths)
    EXPECT_EQ(int(Impl::classify_blas_library(p.first)), int(p.second)) << "'" << p.first << "'";
  // An optimised library whose kernels use less of the vector units than the CPU has (an
  // OpenBLAS that does not know the CPU runs its oldest kernels) is Generic.
  EXPECT_EQ(Impl::openblas_core_level("Prescott"), 0);
  EXPECT_EQ(Impl::openblas_core_level("Haswell"), 2);
  EXPECT_EQ(Impl::openblas_core_level("SkylakeX"), 3);
  EXPECT_EQ(Impl::openblas_core_level("NeoverseN1"), -1);
  const std::string openblas = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3";
  const std::string blis = "/usr/lib/x86_64-linux-gnu/blis-openmp/libblas.so.3";
  const std::string reference = "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3";
  EXPECT_EQ(int(Impl::classify_blas(openblas, "Prescott", 3)), int(HostBlas::Generic));
  EXPECT_EQ(int(Impl::classify_blas(openblas, "Haswell", 3)), int(HostBlas::Generic));
  EXPECT_EQ(int(Impl::classify_blas(openblas, "Haswell", 2)), int(HostBlas::Optimized));
  EXPECT_EQ(int(Impl::classify_blas(openblas, "SkylakeX", 3)), int(HostBlas::Optimized));
  EXPECT_EQ(int(Impl::classify_blas(openblas, "", 3)), int(HostBlas::Optimized));
  EXPECT_EQ(int(Impl::classify_blas(openblas, "NeoverseN1", 3)), int(HostBlas::Optimized));
  EXPECT_EQ(int(Impl::classify_blas(openblas, "Prescott", -1)), int(HostBlas::Optimized));
  EXPECT_EQ(int(Impl::classify_blas(reference, "Prescott", 3)), int(HostBlas::Reference));
  // BLIS does not say which kernels it runs; on AVX-512 CPUs it ran its AVX2 ones.
  EXPECT_EQ(int(Impl::classify_blas(blis, "", 3)), int(HostBlas::Generic));
  EXPECT_EQ(int(Impl::classify_blas(blis, "", 2)), int(HostBlas::Optimized));
  EXPECT_EQ(int(Impl::classify_blas("", "", 3)), int(HostBlas::Unknown));
  // The process's own: whatever provides sgemm_, classified once.
  const std::string path = Impl::blas_library_path();
  EXPECT_EQ(int(Impl::host_blas_kind()),
            int(Impl::classify_blas(path, Impl::blas_kernels(path), Impl::cpu_vector_level())));
  std::printf("[ info     ] sgemm_ from '%s', kernels '%s', CPU vector level %d, kind %d\n",
              path.c_str(), Impl::blas_kernels(path).c_str(), Impl::cpu_vector_level(),
              int(Impl::host_blas_kind()));
}

}  // namespace
