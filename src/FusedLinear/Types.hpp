// SPDX-License-Identifier: Apache-2.0
/// \file Types.hpp
/// The choices a caller makes (Algorithm, Precision, Options) and what a call reports (RunInfo).
#ifndef FUSED_LINEAR_TYPES_HPP
#define FUSED_LINEAR_TYPES_HPP

#include <cstddef>
#include <stdexcept>
#include <string>

#include "FusedLinear/impl/Tuning.hpp"

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

/// How a plan chooses its path under Algorithm::Auto, as FFTW plans (FFTW_ESTIMATE,
/// FFTW_MEASURE).
enum class Planning {
  /// The rule (docs/design/dispatch.md): nothing is measured; the same choice on every run.
  Estimate,
  /// When the plan is made, time every path that can serve its Views at the precision floor
  /// (vendor_lt also over cuBLASLt's first ranked algorithms) on the plan's own Views and
  /// instance, a few calls each after a warm-up, and keep the fastest. This RUNS THE LAYER on
  /// the Views given: X, W and b are read and never changed, Y is overwritten (as FFTW_MEASURE
  /// overwrites its arrays). The choice is remembered as wisdom (Wisdom.hpp): a later plan of the
  /// same kind times nothing. With an explicit algorithm only vendor_lt has anything to choose
  /// (cuBLASLt's algorithms). Cost: docs/design/dispatch.md, "Planning".
  Measure,
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

/// Where the rates the GPU cost model counted in came from (GpuRates::source).
enum class RatesSource {
  None,       ///< no GPU model: a host plan
  Device,     ///< this device's report (the CUDA or HIP runtime)
  Corrected,  ///< the runtime's report corrected through NVML (a MIG slice, a lower clock)
  Fitted,     ///< the device the model was fitted on (GpuRule::fitted_*): a rate was unknown
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
inline constexpr Named<Planning> planning_names[] = {{Planning::Estimate, "estimate"},
                                                     {Planning::Measure, "measure"}};
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
inline constexpr Named<RatesSource> rates_source_names[] = {{RatesSource::None, "none"},
                                                            {RatesSource::Device, "device"},
                                                            {RatesSource::Corrected, "corrected"},
                                                            {RatesSource::Fitted, "fitted"}};

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
/// "estimate", "measure".
inline const char* to_string(Planning p) { return Impl::name_of(Impl::planning_names, p); }
/// "cuBLAS", "cuBLASLt", "host BLAS", "Kokkos Kernels native gemm", ...
inline const char* to_string(Gemm g) { return Impl::name_of(Impl::gemm_names, g); }
/// "none", "device", "corrected", "fitted".
inline const char* to_string(RatesSource r) { return Impl::name_of(Impl::rates_source_names, r); }

/// Parses the names printed by to_string; throws std::invalid_argument otherwise.
inline Algorithm algorithm_from_string(const std::string& name) {
  return Impl::parse_name(Impl::algorithm_names, name, "FusedLinear::algorithm_from_string",
                          "algorithm");
}
inline Precision precision_from_string(const std::string& name) {
  return Impl::parse_name(Impl::precision_names, name, "FusedLinear::precision_from_string",
                          "precision");
}
inline Planning planning_from_string(const std::string& name) {
  return Impl::parse_name(Impl::planning_names, name, "FusedLinear::planning_from_string",
                          "planning");
}

/// What to run; implicitly constructible from an Algorithm.
struct Options {
  Algorithm algorithm = Algorithm::Auto;
  Precision precision = Precision::Strict;
  /// Experimental (impl/Tuning.hpp): knobs for the library's tests and experiments, not part
  /// of the stable API; the defaults are the library's behaviour.
  Experimental::Tuning tuning = {};
  /// How Algorithm::Auto chooses: the rule (Estimate, the default) or by timing (Measure).
  Planning planning = Planning::Estimate;
  Options() = default;
  Options(Algorithm a) : algorithm(a) {}  // NOLINT(google-explicit-constructor): call-site brevity
  Options(Algorithm a, Precision p) : algorithm(a), precision(p) {}
  Options(Algorithm a, Precision p, Planning how) : algorithm(a), precision(p), planning(how) {}
};

/// The rates the GPU cost model counted in (RunInfo::gpu_rates): plain values and a static
/// text, so that copying a RunInfo allocates nothing for them. All zero on the host.
struct GpuRates {
  /// Multiprocessors (SMs, CUs) the model spreads tiles over.
  double multiprocessors = 0;
  /// Peak fp32 rate (GFLOP/s) and memory bandwidth (GB/s).
  double fp32_gflops = 0, memory_gbps = 0;
  RatesSource source = RatesSource::None;
  /// Why these rates: what was read, corrected or unknown (a static string, never freed).
  const char* note = "";
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
  /// The path was chosen by timing the candidates (Planning::Measure): by this plan when it was
  /// made (Plan::measurements() has the times), or earlier, remembered as wisdom.
  bool measured = false;
  /// The measured choice came from wisdom: this plan timed nothing.
  bool from_wisdom = false;
  /// GPU plans: the device's rates the cost model counts in (under auto and Planning::Measure's
  /// candidate list) and where they came from; host plans: zero, RatesSource::None.
  GpuRates gpu_rates = {};
};

/// One candidate Planning::Measure timed (Plan::measurements()).
struct Measurement {
  Algorithm algorithm = Algorithm::Auto;
  Precision precision = Precision::Strict;
  /// vendor_lt in strict or tf32: which of cuBLASLt's ranked algorithms (0: its first choice).
  int variant = 0;
  /// Milliseconds: the lower median of its timed calls (the middle one, of an even number the
  /// lower of the two middle ones; fewer calls are timed once they show it cannot win); for a
  /// candidate dropped after its warm-up (far behind the best so far), that call's; infinity
  /// where its memory could not be had. Where another candidate led the rule's choice (listed
  /// first), the two were timed again, their calls interleaved: their re-timed calls'.
  double ms = 0;
  /// Calls run, the warm-up and any re-timed calls included (0: not timed: its memory could not
  /// be had, it came past the measurement's budget, or its bound is not below the best time).
  int calls = 0;
  /// The plan runs this one.
  bool chosen = false;
  /// Milliseconds its set-up took on the host (workspace, descriptors), listed with the first
  /// variant timed after it (a later cuBLASLt variant's candidate may be set up again); 0
  /// where it was not set up.
  double setup_ms = 0;
  /// The least time its arithmetic can take on this device (strict fp32 at the CUDA cores'
  /// peak), 0 where no bound is known.
  double bound_ms = 0;
};

/// What the forward left for the gradient (Gradient.hpp): the layer's output Y, or the
/// pre-activation z = multiplier * (X . W^T + b).
enum class Saved {
  /// Y itself: y > 0 exactly where z > 0 when negative_slope >= 0 (no memory beyond Y).
  Output,
  /// z, [M,N]: what a negative slope needs (it maps both signs of z to positive outputs).
  PreActivation,
  /// A mask, [M,N], of bool (or integers): nonzero exactly where z > 0. Any slope; M*N bytes as
  /// bool, and Y may then change before the gradient runs.
  Sign,
};

/// What to run for the gradient (GradientPlan, linear_leaky_relu_backward).
struct GradientOptions {
  /// Auto (a cost model per product), Vendor (KokkosBlas::gemm), VendorLt (cuBLASLt's 3xtf32)
  /// or FusedSm90 (the library's sm_90a 3xtf32 kernels).
  Algorithm algorithm = Algorithm::Auto;
  /// The products' arithmetic; under Algorithm::Auto a floor, as the forward's.
  Precision precision = Precision::Strict;
  /// How Algorithm::Auto chooses each product's path: the cost model, or by timing them.
  Planning planning = Planning::Estimate;
  /// dW += G^T . X and db += sum of G's rows (gradient accumulation) instead of overwriting.
  bool accumulate = false;
  /// What the `saved` View holds.
  Saved saved = Saved::Output;
  /// Experimental (impl/Tuning.hpp), as Options::tuning: sm90_tf32x3_kernel picks the kernel of
  /// the fused_sm90 products.
  Experimental::Tuning tuning = {};
};

/// What a gradient plan runs for each product (RunInfo's fields; Gemm::None where the product
/// is skipped or empty). db is summed by the library's own pass over G in every case.
struct GradientInfo {
  RunInfo dx;  ///< dX = G . W
  RunInfo dw;  ///< dW = G^T . X
};

}  // namespace FusedLinear

#endif
