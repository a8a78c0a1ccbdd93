// SPDX-License-Identifier: Apache-2.0
// The golden dispatch table's definition, one place for the tool that writes it
// (`fused_linear_replay_rule --golden`, perf/replay_rule.cpp) and the tests that read it
// (tests/dispatch/): named facts profiles for each kind of build and device auto distinguishes, a
// fixed list of shapes across the cost models' crossovers, and the CSV row of one decision. The
// shapes are literal, not derived from GpuRule/HostRule, so that a re-fit shows as a diff of
// decisions.
// Kokkos-free: the tool includes the dispatch alone.
#ifndef FUSED_LINEAR_TEST_DISPATCH_GOLDEN_PROFILES_HPP
#define FUSED_LINEAR_TEST_DISPATCH_GOLDEN_PROFILES_HPP

#include <cstdint>
#include <string>
#include <vector>

#include "FusedLinear/Types.hpp"
#include "FusedLinear/impl/Dispatch.hpp"

namespace FusedLinearGolden {

namespace Impl = FusedLinear::Impl;
using FusedLinear::Algorithm;
using FusedLinear::Gemm;
using FusedLinear::Precision;

/// A build, device and Views as Impl::gather_facts would describe them, by name.
struct Profile {
  const char* name;
  Impl::Facts facts;
};

/// float Views on CUDA (132 multiprocessors, an H200's count; its rates those the GPU model was
/// fitted with) with cuBLAS; with cuBLASLt or not, the sm_90a kernels taking the problem (`sm90`
/// nullptr) or refusing it, rows in 16-byte packs or not.
inline Impl::Facts cuda_profile(bool lt, const char* sm90_tf32x3, const char* sm90_skinny,
                                bool packed) {
  Impl::Facts f;
  f.backend = Impl::Backend::Cuda;
  f.float_views = true;
  f.blas = Gemm::Cublas;
  f.cublaslt = f.cublaslt_bias = lt;
  f.sm90_tf32x3 = sm90_tf32x3;
  f.sm90_skinny = sm90_skinny;
  f.skinny_packed = packed;
  f.multiprocessors = 132;
  return f;
}

/// float Views on a host backend whose KokkosBlas::gemm runs `gemm` (the host BLAS, of kind
/// `blas`, or its native kernel), on `threads` threads with AVX-512's float tiles (HostTiling's
/// defaults, which the host model was fitted with).
inline Impl::Facts host_profile(Gemm gemm, Impl::HostBlas blas, std::int64_t threads) {
  Impl::Facts f;
  f.backend = Impl::Backend::Host;
  f.float_views = true;
  f.blas = gemm;
  f.host_blas = blas;
  f.cublaslt = f.cublaslt_bias = false;
  f.sm90_tf32x3 = f.sm90_skinny = "is not in this build";
  f.multiprocessors = 0;
  f.host_threads = threads;
  f.host_tiling = Impl::HostTiling{};
  return f;
}

inline std::vector<Profile> profiles() {
  const char* not_built = "is not in this build";
  const char* not_hopper = "needs a compute capability 9.0 GPU (H100, H200)";
  const char* unaligned = "needs X's and W's rows 16-byte aligned";
  Impl::Facts hip;
  hip.backend = Impl::Backend::Hip;
  hip.float_views = true;
  hip.blas = Gemm::Rocblas;
  hip.cublaslt = hip.cublaslt_bias = false;
  hip.sm90_tf32x3 = hip.sm90_skinny = not_built;
  // No rates given: the model counts in the fitted device's, its multiprocessors included.
  hip.multiprocessors = 110;
  Impl::Facts hip_native = hip;
  hip_native.blas = Gemm::KokkosKernelsNative;
  // An H100 (SXM): an H200's multiprocessors and clock, 70% of its memory bandwidth.
  Impl::Facts h100 = cuda_profile(true, nullptr, nullptr, true);
  h100.fp32_gflops = 66908.16;
  h100.memory_gbps = 3352.3;
  return {
      // An H200: cuBLASLt and both sm_90a kernels; on rows not in 16-byte packs the few-rows
      // kernel refuses them (the 3xtf32 one pads W).
      {"cuda-sm90", cuda_profile(true, nullptr, nullptr, true)},
      {"cuda-sm90-h100", h100},
      {"cuda-sm90-unpacked", cuda_profile(true, nullptr, unaligned, false)},
      // Another CUDA GPU (or a build without the sm_90a kernels): cuBLAS and cuBLASLt.
      {"cuda", cuda_profile(true, not_hopper, not_hopper, true)},
      {"cuda-unpacked", cuda_profile(true, not_hopper, not_hopper, false)},
      // A CUDA build without cuBLASLt (and so without the sm_90a kernels).
      {"cuda-no-lt", cuda_profile(false, not_built, not_built, true)},
      {"cuda-no-lt-unpacked", cuda_profile(false, not_built, not_built, false)},
      // HIP with rocBLAS, and Views no vendor BLAS serves (Kokkos Kernels' native gemm).
      {"hip", hip},
      {"hip-native", hip_native},
      // The host: an optimised BLAS whose kernels fit the CPU, the reference BLAS, no BLAS TPL;
      // two threads (as the model was fitted), and one.
      {"host-optimized", host_profile(Gemm::HostBlas, Impl::HostBlas::Optimized, 2)},
      {"host-reference", host_profile(Gemm::HostBlas, Impl::HostBlas::Reference, 2)},
      {"host-native", host_profile(Gemm::KokkosKernelsNative, Impl::HostBlas::Unknown, 2)},
      {"host-serial", host_profile(Gemm::HostBlas, Impl::HostBlas::Optimized, 1)},
  };
}

/// The precision floors auto is asked for, in the table's order.
constexpr Precision floors[] = {Precision::Strict, Precision::TF32, Precision::TF32x3};

/// M x K x N, groups around the crossovers of the GPU and host cost models (Impl::gpu_auto,
/// Impl::strict_auto).
inline std::vector<Impl::Shape> shapes() {
  return {
      // Reference layers: the seed shape, square products, one row of a large W.
      {1024, 8192, 8192},
      {1024, 1024, 1024},
      {4096, 4096, 4096},
      {1, 8192, 8192},
      {128, 4096, 1024},
      // Few rows on the GPU (skinny kernels), and where a large W keeps the sm_90a one.
      {2, 8192, 8192},
      {8, 8192, 8192},
      {16, 8192, 8192},
      {17, 8192, 8192},
      {24, 8192, 8192},
      {32, 8192, 1536},
      {33, 8192, 1536},
      {32, 8192, 1535},
      {32, 2048, 1536},
      {32, 2044, 1536},
      {25, 1432, 2837},
      {24, 768, 3072},
      {16, 32768, 4096},
      // ... a small W of short rows.
      {16, 64, 64},
      {16, 512, 4096},
      {16, 516, 4064},
      {16, 512, 4097},
      {10, 68, 3634},
      // ... few column tiles along a long K.
      {16, 6148, 512},
      {16, 6144, 512},
      {16, 6148, 513},
      {13, 12620, 62},
      {5, 3148, 96},
      // One row: cuBLASLt's matrix-vector kernel where W's rows are not in packs.
      {1, 2048, 256},
      {1, 2044, 256},
      {1, 4096, 255},
      {2, 2048, 256},
      {1, 1024, 1024},
      {1, 1023, 1024},
      {1, 387, 6642},
      // Small products and few outputs.
      {1024, 2048, 64},
      {1024, 2049, 64},
      {1024, 128, 1024},
      {1024, 128, 1025},
      {1024, 64, 1024},
      {1024, 64, 2048},
      {1024, 48, 128},
      {1024, 49, 128},
      {1024, 48, 127},
      {15651, 16, 55},
      {192, 18, 285},
      {64, 32768, 128},
      {64, 32769, 128},
      {64, 16384, 129},
      // Short K on many tiles.
      {1024, 256, 4096},
      {1024, 257, 4096},
      {1024, 256, 1024},
      {1024, 256, 896},
      // 3xtf32 under auto: small work, few tiles, N mostly padding, unaligned rows, short K.
      {64, 1023, 4096},
      {64, 1024, 4096},
      {128, 4096, 2432},
      {128, 4096, 2560},
      {128, 32768, 2432},
      {4096, 4096, 63},
      {4096, 4096, 64},
      {63, 8190, 8192},
      {64, 8190, 8192},
      {63, 8192, 8192},
      {4096, 32, 4096},
      {4096, 36, 4096},
      // The host's vendor criterion (rows and K).
      {128, 1024, 512},
      {127, 1024, 512},
      {128, 1023, 512},
      {4096, 1024, 4096},
      {64, 4096, 4096},
      {4096, 64, 4096},
      // The host model: the measured shapes either kernel won by 1.25x or more ...
      {1, 6658, 1551},
      {3, 19321, 4606},
      {8, 13887, 34},
      {2, 25541, 25},
      {21, 2925, 25},
      {55, 5476, 38},
      {293, 331, 18},
      {6, 48, 567},
      {7, 24, 542},
      {18, 30, 12662},
      {32, 52, 1313},
      {44, 828, 18404},
      {76, 5582, 4599},
      {580, 31, 761},
      {1268, 1069, 894},
      // ... and a grid across its crossing of rows, K and N.
      {1, 24, 24},
      {1, 24, 4096},
      {1, 512, 24},
      {1, 512, 4096},
      {4, 24, 24},
      {4, 24, 4096},
      {4, 512, 24},
      {4, 512, 4096},
      {4, 8192, 24},
      {4, 8192, 4096},
      {12, 24, 24},
      {12, 24, 4096},
      {12, 512, 24},
      {12, 512, 4096},
      {12, 8192, 24},
      {12, 8192, 4096},
      {24, 24, 24},
      {24, 24, 4096},
      {24, 512, 24},
      {24, 512, 4096},
      {24, 8192, 24},
      {24, 8192, 4096},
      {48, 24, 24},
      {48, 512, 24},
      {48, 512, 4096},
      {48, 8192, 24},
      {48, 8192, 4096},
      {96, 24, 24},
      {96, 512, 24},
      {96, 8192, 24},
      {96, 8192, 4096},
      {256, 512, 24},
      {256, 8192, 24},
      {1024, 8192, 24},
  };
}

/// The table's first line and one row: profile, M, K, N, floor, and what auto runs.
inline const char* csv_header() { return "profile,M,K,N,floor,algorithm,precision"; }

inline std::string csv_key(const char* profile, const Impl::Shape& s, Precision floor) {
  return std::string(profile) + "," + std::to_string(s.M) + "," + std::to_string(s.K) + "," +
         std::to_string(s.N) + "," + FusedLinear::to_string(floor);
}

/// What Impl::resolve picks under Algorithm::Auto, as a row of the table.
inline std::string csv_row(const Profile& p, const Impl::Shape& s, Precision floor) {
  const Impl::Decision d =
      Impl::resolve({Algorithm::Auto, floor, false}, s, p.facts, "FusedLinearGolden");
  return csv_key(p.name, s, floor) + "," + FusedLinear::to_string(d.algorithm) + "," +
         FusedLinear::to_string(d.precision);
}

/// Every row, profiles in order, then shapes, then floors.
inline std::vector<std::string> csv_rows() {
  std::vector<std::string> rows;
  for (const Profile& p : profiles())
    for (const Impl::Shape& s : shapes())
      for (Precision floor : floors) rows.push_back(csv_row(p, s, floor));
  return rows;
}

}  // namespace FusedLinearGolden

#endif
