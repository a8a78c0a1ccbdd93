// SPDX-License-Identifier: Apache-2.0
/// \file Types.hpp
/// The choices a caller makes (Algorithm, Precision, Options) and what a call reports (RunInfo).
#ifndef FUSED_LINEAR_TYPES_HPP
#define FUSED_LINEAR_TYPES_HPP

#include <cstddef>
#include <stdexcept>
#include <string>

namespace FusedLinear {

/// Which computation runs the layer.
enum class Algorithm {
  /// Pick per shape, precision and backend from measurements (docs/design/dispatch.md).
  Auto,
  /// KokkosBlas::gemm with beta = 0, then one pass applying bias, scale and LeakyReLU.
  Vendor,
  /// Y prefilled with multiplier * b, KokkosBlas::gemm with alpha = multiplier, beta = 1, then
  /// one pass applying LeakyReLU.
  VendorPrefill,
  /// cuBLASLt called directly (CUDA builds), the bias added in its epilogue where it can, then
  /// one pass for the rest. Where cuBLASLt cannot serve the Views, Vendor runs (RunInfo::note).
  VendorLt,
  /// The portable tiled TeamPolicy kernel: GEMM tiles in team scratch, a register tile per
  /// thread, the epilogue applied in registers before the single write of Y.
  Fused,
  /// The portable kernel for few rows of X and small layers: columns across teams, K across the
  /// lanes of a warp (and across teams where tiles are few), one launch, no pass over Y.
  FusedSkinny,
  /// The library's own Hopper (compute capability 9.0) tensor-core kernel; Precision::TF32x3 only.
  FusedSm90,
  /// The library's own Hopper kernel for few rows: W streamed through the bulk-copy engine;
  /// Precision::Strict only.
  SkinnySm90,
};

/// Every algorithm a caller can ask for.
inline constexpr Algorithm all_algorithms[] = {
    Algorithm::Auto,  Algorithm::Vendor,      Algorithm::VendorPrefill, Algorithm::VendorLt,
    Algorithm::Fused, Algorithm::FusedSkinny, Algorithm::FusedSm90,     Algorithm::SkinnySm90};

/// Arithmetic of the product.
enum class Precision {
  /// IEEE fp32 (or fp64) multiply-adds, no tensor cores: the reference model's arithmetic.
  Strict,
  /// Inputs rounded to TF32 (10-bit mantissa) on tensor cores, fp32 accumulation (relative error
  /// near 3e-4). Under Algorithm::Auto a floor: a faster path at least as accurate may run.
  TF32,
  /// fp32-accurate products on TF32 tensor cores: each operand split into a TF32 high part and
  /// a remainder, lo.hi + hi.lo + hi.hi, the large term hi.hi accumulated in the tensor cores a
  /// few hundred terms at a time before the sums are added in fp32 (the small terms, 2^-10 of
  /// its size, in one product over 2K on the vendor paths; docs/precision.md). Under
  /// Algorithm::Auto a floor: strict fp32 runs where it is faster (few rows).
  TF32x3,
};

/// Which GEMM implementation a path ran.
enum class Gemm {
  None,                 ///< no product was needed (M, N or K is 0)
  HostBlas,             ///< the host BLAS, through KokkosBlas::gemm
  Cublas,               ///< cuBLAS, through KokkosBlas::gemm
  CublasLt,             ///< cuBLASLt, called directly
  Rocblas,              ///< rocBLAS, through KokkosBlas::gemm
  OneMkl,               ///< oneMKL, through KokkosBlas::gemm
  KokkosKernelsNative,  ///< Kokkos Kernels' own gemm kernel (no vendor BLAS serves the Views)
  FusedKernel,          ///< FusedLinear's fused kernel (tiled TeamPolicy; packed GEMM on hosts)
  SkinnyKernel,         ///< FusedLinear's skinny kernel
  Sm90Tf32x3Kernel,     ///< FusedLinear's sm_90a wgmma 3xTF32 kernel
  Sm90SkinnyKernel,     ///< FusedLinear's sm_90a few-rows kernel
};

namespace Impl {
template <class Enum>
struct Named {
  Enum value;
  const char* name;
};
inline constexpr Named<Algorithm> algorithm_names[] = {{Algorithm::Auto, "auto"},
                                                       {Algorithm::Vendor, "vendor"},
                                                       {Algorithm::VendorPrefill, "vendor_prefill"},
                                                       {Algorithm::VendorLt, "vendor_lt"},
                                                       {Algorithm::Fused, "fused"},
                                                       {Algorithm::FusedSkinny, "fused_skinny"},
                                                       {Algorithm::FusedSm90, "fused_sm90"},
                                                       {Algorithm::SkinnySm90, "skinny_sm90"}};
inline constexpr Named<Precision> precision_names[] = {
    {Precision::Strict, "strict"}, {Precision::TF32, "tf32"}, {Precision::TF32x3, "3xtf32"}};
inline constexpr Named<Gemm> gemm_names[] = {
    {Gemm::None, "none"},
    {Gemm::HostBlas, "host BLAS"},
    {Gemm::Cublas, "cuBLAS"},
    {Gemm::CublasLt, "cuBLASLt"},
    {Gemm::Rocblas, "rocBLAS"},
    {Gemm::OneMkl, "oneMKL"},
    {Gemm::KokkosKernelsNative, "Kokkos Kernels native gemm"},
    {Gemm::FusedKernel, "FusedLinear fused kernel"},
    {Gemm::SkinnyKernel, "FusedLinear skinny kernel"},
    {Gemm::Sm90Tf32x3Kernel, "FusedLinear sm_90a wgmma 3xTF32 kernel"},
    {Gemm::Sm90SkinnyKernel, "FusedLinear sm_90a few-rows kernel"}};

template <class Enum, std::size_t Count>
const char* name_of(const Named<Enum> (&table)[Count], Enum value) {
  for (const auto& entry : table)
    if (entry.value == value) return entry.name;
  return "unknown";
}

template <class Enum, std::size_t Count>
Enum parse_name(const Named<Enum> (&table)[Count], const std::string& name, const char* function,
                const char* what) {
  std::string expected;
  for (const auto& entry : table) {
    if (name == entry.name) return entry.value;
    expected += expected.empty() ? "" : ", ";
    expected += entry.name;
  }
  throw std::invalid_argument(std::string(function) + ": unknown " + what + " '" + name +
                              "' (expected " + expected + ")");
}
}  // namespace Impl

/// "auto", "vendor", "vendor_prefill", "vendor_lt", "fused", "fused_skinny", "fused_sm90",
/// "skinny_sm90".
inline const char* to_string(Algorithm a) { return Impl::name_of(Impl::algorithm_names, a); }
/// "strict", "tf32", "3xtf32".
inline const char* to_string(Precision p) { return Impl::name_of(Impl::precision_names, p); }
/// "cuBLAS", "cuBLASLt", "host BLAS", "Kokkos Kernels native gemm", ...
inline const char* to_string(Gemm g) { return Impl::name_of(Impl::gemm_names, g); }

/// Parses the names printed by to_string; throws std::invalid_argument otherwise.
inline Algorithm algorithm_from_string(const std::string& name) {
  return Impl::parse_name(Impl::algorithm_names, name, "FusedLinear::algorithm_from_string",
                          "algorithm");
}
inline Precision precision_from_string(const std::string& name) {
  return Impl::parse_name(Impl::precision_names, name, "FusedLinear::precision_from_string",
                          "precision");
}

/// Knobs for tests and tuning experiments. NOT part of the stable API: names, meanings and
/// defaults may change in any release. The defaults are what the library measured best.
struct Tuning {
  /// fused_skinny and skinny_sm90: force K split this many ways (0: the library's rule).
  int skinny_splits = 0;
  /// Vendor 3xTF32: batch the K ranges' sums in one product when they fit in this many bytes.
  std::size_t tf32x3_partials_limit = std::size_t(256) << 20;
  /// fused_sm90: 0 chooses by the shape, 1 forces the tile kernel, 2 the split-K kernel.
  int sm90_tf32x3_kernel = 0;
};

/// What to run; implicitly constructible from an Algorithm.
struct Options {
  Algorithm algorithm = Algorithm::Auto;
  Precision precision = Precision::Strict;
  Tuning tuning = {};
  Options() = default;
  Options(Algorithm a) : algorithm(a) {}  // NOLINT(google-explicit-constructor): call-site brevity
  Options(Algorithm a, Precision p) : algorithm(a), precision(p) {}
};

/// What a plan runs, so that no fallback is silent.
struct RunInfo {
  /// The path that runs (Auto only in a default-constructed RunInfo).
  Algorithm algorithm = Algorithm::Auto;
  /// The arithmetic that runs (under Algorithm::Auto the requested precision is a floor).
  Precision precision = Precision::Strict;
  /// The GEMM implementation that runs.
  Gemm gemm = Gemm::None;
  /// True when a vendor path runs on a vendor BLAS (not Kokkos Kernels' native gemm).
  bool vendor_blas = false;
  /// Why the path, the precision or the GEMM differs from what was asked; empty otherwise.
  std::string note;
};

}  // namespace FusedLinear

#endif
