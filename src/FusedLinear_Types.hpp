// SPDX-License-Identifier: Apache-2.0
#ifndef FUSED_LINEAR_TYPES_HPP
#define FUSED_LINEAR_TYPES_HPP

#include <stdexcept>
#include <string>

namespace FusedLinear {

/// Which computation linear_leaky_relu performs.
enum class Algorithm {
  /// Pick per shape and backend (see Impl::choose_algorithm for the rules).
  Auto,
  /// KokkosBlas::gemm with beta = 0, then one MDRange pass applying bias, scale and LeakyReLU.
  /// Moves fewer bytes than VendorPrefill: no prefill write, no read of Y inside the GEMM.
  Vendor,
  /// Prefill Y with multiplier * b, KokkosBlas::gemm with alpha = multiplier and beta = 1, then
  /// one MDRange pass applying LeakyReLU in place.
  VendorPrefill,
  /// cuBLASLt matmul (CUDA builds that found cublasLt; elsewhere Vendor runs, with a note), the
  /// bias added in its epilogue where it can (float, LayoutRight), then one MDRange pass for
  /// the rest. Stream, compute type and alignment go with each call (no shared handle state);
  /// plans are cached per shape.
  VendorLt,
  /// The hand-written TeamPolicy kernel: GEMM tiles staged in team scratch, a register tile per
  /// thread, epilogue applied in registers before the single write of Y.
  Fused,
  /// A hand-written TeamPolicy kernel for few rows of X (inference-like batches) and small
  /// problems: each team owns a block of 8 (or 16) rows x 32 columns of Y and splits K among its
  /// threads, so W streams from memory with 16-byte coalesced loads while X is staged in team
  /// scratch; the slices are summed in team scratch in a fixed order, then the epilogue.
  FusedSkinny,
};

/// Every algorithm a caller can ask for (what "all" means in the perf program's --algorithm).
inline constexpr Algorithm all_algorithms[] = {Algorithm::Auto,          Algorithm::Vendor,
                                               Algorithm::VendorPrefill, Algorithm::VendorLt,
                                               Algorithm::Fused,         Algorithm::FusedSkinny};

/// Human-readable name of an algorithm ("auto", "vendor", "vendor_prefill", "vendor_lt",
/// "fused", "fused_skinny").
inline const char* to_string(Algorithm a) {
  switch (a) {
    case Algorithm::Auto:
      return "auto";
    case Algorithm::Vendor:
      return "vendor";
    case Algorithm::VendorPrefill:
      return "vendor_prefill";
    case Algorithm::VendorLt:
      return "vendor_lt";
    case Algorithm::Fused:
      return "fused";
    case Algorithm::FusedSkinny:
      return "fused_skinny";
  }
  return "unknown";
}

/// Parses the names printed by to_string; throws std::invalid_argument otherwise.
inline Algorithm algorithm_from_string(const std::string& name) {
  for (Algorithm a : all_algorithms)
    if (name == to_string(a)) return a;
  throw std::invalid_argument(
      "FusedLinear::algorithm_from_string: unknown algorithm '" + name +
      "' (expected auto, vendor, vendor_prefill, vendor_lt, fused or fused_skinny)");
}

/// Arithmetic of the product.
enum class Precision {
  /// IEEE fp32 (or fp64) multiply-adds, no tensor cores: the reference model's arithmetic.
  Strict,
  /// float inputs rounded to TF32 (10-bit mantissa) on tensor cores, fp32 accumulation:
  /// relative error near 3e-4 instead of 1e-6, several times faster. Vendor paths with cuBLAS
  /// only (the math mode of Kokkos Kernels' cuBLAS handle is set for the call and restored).
  TF32,
  /// fp32-accurate products on TF32 tensor cores ("3xTF32"): each float operand is split into
  /// a TF32 high part and a remainder, X.W^T = lo.hi + hi.lo + hi.hi on TF32 tensor cores, never
  /// more than a few hundred terms accumulated in the tensor cores (they truncate as they
  /// accumulate) before the sums are added in rounded fp32. Fused (and auto) on compute
  /// capability 9.0 GPUs: the library's own wgmma kernel (9.2e-7 relative error at
  /// 1024x8192x8192, 2.5x the strict reference's speed on an H200); the vendor paths on CUDA
  /// builds with cuBLASLt (6.5e-7, 1.3x); strict fp32 measures 1.6e-6 there (README). An
  /// infinite input gives Inf or NaN in the outputs it reaches (the cross terms meet it too).
  TF32x3,
};

inline const char* to_string(Precision p) {
  switch (p) {
    case Precision::Strict:
      return "strict";
    case Precision::TF32:
      return "tf32";
    case Precision::TF32x3:
      return "3xtf32";
  }
  return "unknown";
}

inline Precision precision_from_string(const std::string& name) {
  for (Precision p : {Precision::Strict, Precision::TF32, Precision::TF32x3})
    if (name == to_string(p)) return p;
  throw std::invalid_argument("FusedLinear::precision_from_string: unknown precision '" + name +
                              "' (expected strict, tf32 or 3xtf32)");
}

/// Options of one call; implicitly constructible from an Algorithm.
struct Options {
  Algorithm algorithm = Algorithm::Auto;
  Precision precision = Precision::Strict;
  Options() = default;
  Options(Algorithm a) : algorithm(a) {}  // NOLINT(google-explicit-constructor): call-site brevity
  Options(Algorithm a, Precision p) : algorithm(a), precision(p) {}
};

/// What a call actually did, so that no fallback is silent.
struct RunInfo {
  /// The path that ran (Auto only in a default-constructed RunInfo: nothing ran).
  Algorithm algorithm = Algorithm::Auto;
  /// Which GEMM implementation ran: "cuBLAS", "cuBLASLt", "host BLAS", "Kokkos Kernels native
  /// gemm", "FusedLinear TeamPolicy kernel", "FusedLinear skinny TeamPolicy kernel", or "none"
  /// when no product was needed (M, N or K = 0).
  std::string gemm;
  /// True when a vendor path was requested and KokkosBlas::gemm dispatched to a vendor BLAS.
  bool vendor_blas = false;
  /// Why the path or the GEMM implementation differs from what was asked, or empty.
  std::string note;
};

}  // namespace FusedLinear

#endif
