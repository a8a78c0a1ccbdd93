// SPDX-License-Identifier: Apache-2.0
#ifndef FUSED_LINEAR_LINEAR_LEAKY_RELU_HPP
#define FUSED_LINEAR_LINEAR_LEAKY_RELU_HPP

#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <Kokkos_Core.hpp>

#include "FusedLinear_Epilogue.hpp"
#include "FusedLinear_Types.hpp"
#include "impl/FusedLinear_FusedKernel.hpp"
#include "impl/FusedLinear_SkinnyKernel.hpp"
#include "impl/FusedLinear_Tf32x3Native.hpp"
#include "impl/FusedLinear_Vendor.hpp"

namespace FusedLinear {
namespace Impl {

constexpr const char* function_name = "FusedLinear::linear_leaky_relu";

[[noreturn]] inline void fail(const std::string& problem) {
  throw std::invalid_argument(std::string(function_name) + ": " + problem);
}

template <class View>
std::string shape_of(const View& v) {
  std::ostringstream os;
  os << '[' << v.extent(0);
  for (unsigned r = 1; r < View::rank; ++r) os << ',' << v.extent(r);
  os << ']';
  return os.str();
}

template <class A, class B>
bool overlaps(const A& a, const B& b) {
  if (a.span() == 0 || b.span() == 0) return false;
  const auto a0 = reinterpret_cast<std::uintptr_t>(a.data());
  const auto b0 = reinterpret_cast<std::uintptr_t>(b.data());
  const auto a1 = a0 + a.span() * sizeof(typename A::value_type);
  const auto b1 = b0 + b.span() * sizeof(typename B::value_type);
  return a0 < b1 && b0 < a1;
}

template <class XView, class WView, class BView, class YView, class Scalar>
void check_arguments(const XView& X, const WView& W, const BView& b, const YView& Y,
                     Scalar multiplier, Scalar negative_slope) {
  if (!X.is_allocated()) fail("X is not allocated");
  if (!W.is_allocated()) fail("W is not allocated");
  if (!b.is_allocated()) fail("b is not allocated");
  if (!Y.is_allocated()) fail("Y is not allocated");
  if (W.extent(1) != X.extent(1) || b.extent(0) != W.extent(0) || Y.extent(0) != X.extent(0) ||
      Y.extent(1) != W.extent(0)) {
    fail("extents do not match: expected X [M,K], W [N,K], b [N], Y [M,N]; got X " + shape_of(X) +
         ", W " + shape_of(W) + ", b " + shape_of(b) + ", Y " + shape_of(Y));
  }
  // cuBLAS and BLAS take 32-bit dimensions; products of them may exceed 2^31 (64-bit indexing).
  constexpr std::size_t max_extent = 2147483647;
  if (X.extent(0) > max_extent || X.extent(1) > max_extent || W.extent(0) > max_extent)
    fail("M, N and K must each be below 2^31; got X " + shape_of(X) + ", W " + shape_of(W));
  if (overlaps(Y, X)) fail("Y aliases X (the output must not overlap an input)");
  if (overlaps(Y, W)) fail("Y aliases W (the output must not overlap an input)");
  if (overlaps(Y, b)) fail("Y aliases b (the output must not overlap an input)");
  if (!std::isfinite(static_cast<double>(multiplier)))
    fail("multiplier must be finite, got " + std::to_string(static_cast<double>(multiplier)));
  if (!std::isfinite(static_cast<double>(negative_slope)))
    fail("negative_slope must be finite, got " +
         std::to_string(static_cast<double>(negative_slope)));
}

/// Auto's rule for strict precision, from the measurements in perf/RESULTS.md:
/// - host backends: fused_skinny at every shape (2 cores: 1.5-1.9x faster than fused from
///   1x4096x4096 to 1024x1024x1024, 2-8x faster than Debian's single-threaded reference BLAS).
/// - fused_skinny for few rows (M <= `skinny_rows`). GPUs: it streams W faster than cuBLAS, 1.4x
///   at M = 1 to 1.2x at M = 16 on an H200 at K = N = 8192; cuBLAS wins from M = 32.
/// - GPUs otherwise: fused_skinny for small layers (M <= `small_rows` and N K <= `small_weights`:
///   one launch and no pass over Y, 1.3-1.5x faster than cuBLAS plus the pass at 64x1024x1024
///   and 128x1024x512, as fast or 7% faster at 256x1024x1024, cuBLAS ahead at 128x4096x1024);
///   then cuBLASLt where it serves the Views, else the vendor BLAS Kokkos Kernels dispatches to,
///   else fused (faster than Kokkos Kernels' native gemm plus a pass).
/// - and for up to `mid_rows` rows with N K <= `mid_weights` (H200: 32x2048x2048 0.025 ms
///   against cuBLASLt's 0.031; cuBLASLt ahead at 32x8192x8192 and 128x4096x1024).
struct AutoRule {
  static constexpr std::int64_t skinny_rows = 16;
  static constexpr std::int64_t small_rows = 256;
  static constexpr std::int64_t small_weights = std::int64_t(1) << 21;
  static constexpr std::int64_t mid_rows = 32;
  static constexpr std::int64_t mid_weights = std::int64_t(1) << 22;
};

template <class ExecSpace, class XView, class WView, class YView>
Algorithm choose_algorithm(std::int64_t M, std::int64_t N, std::int64_t K) {
  if (is_host_space<ExecSpace>() || M <= AutoRule::skinny_rows) return Algorithm::FusedSkinny;
  if (M <= AutoRule::small_rows && N * K <= AutoRule::small_weights) return Algorithm::FusedSkinny;
  if (M <= AutoRule::mid_rows && N * K <= AutoRule::mid_weights) return Algorithm::FusedSkinny;
  if (cublaslt_serves<ExecSpace, XView, WView, YView>()) return Algorithm::VendorLt;
  return vendor_blas_name<XView, WView, YView>() != nullptr ? Algorithm::Vendor : Algorithm::Fused;
}

/// Pushes a Kokkos profiling region for the scope of the call, exceptions included.
struct ProfilingRegion {
  explicit ProfilingRegion(const std::string& name) { Kokkos::Profiling::pushRegion(name); }
  ~ProfilingRegion() { Kokkos::Profiling::popRegion(); }
  ProfilingRegion(const ProfilingRegion&) = delete;
  ProfilingRegion& operator=(const ProfilingRegion&) = delete;
};

}  // namespace Impl

/// Y = LeakyReLU(multiplier * (X . W^T + b), negative_slope), as PyTorch's
/// `leaky_relu(linear(X, W, b) * multiplier, negative_slope)` with nn.Linear's shapes:
/// X [M,K], W [N,K], b [N], Y [M,N].
///
/// \param exec            execution space instance the work is ordered on (asynchronous: fence
///                        `exec` before reading Y on the host)
/// \param X, W, b         inputs; any layout (LayoutRight, PyTorch's, is the fast one)
/// \param Y               output; must not overlap an input
/// \param multiplier      finite scale applied after the bias
/// \param negative_slope  finite LeakyReLU slope for non-positive values
/// \param options         algorithm (Algorithm::Auto by default) and precision (Strict by
///                        default; TF32 and TF32x3 need a vendor path with cuBLAS and float
///                        Views, TF32x3 also cuBLASLt; TF32x3 also runs fused on compute
///                        capability 9.0 GPUs, which auto prefers)
/// \return which path and which GEMM implementation ran, with the reason for any difference
///         from the request
/// \throws std::invalid_argument naming the function and the problem for mismatched extents,
///         unallocated Views, Y aliasing an input, a non-finite multiplier or slope, or a
///         precision the requested path cannot provide.
///
/// Empty shapes are valid: M = 0 or N = 0 does nothing; K = 0 gives
/// Y = LeakyReLU(multiplier * b) on every row.
template <class ExecSpace, class XView, class WView, class BView, class YView>
RunInfo linear_leaky_relu(const ExecSpace& exec, const XView& X, const WView& W, const BView& b,
                          const YView& Y, typename YView::non_const_value_type multiplier,
                          typename YView::non_const_value_type negative_slope,
                          Options options = {}) {
  using Scalar = typename YView::non_const_value_type;
  static_assert(Kokkos::is_execution_space<ExecSpace>::value,
                "FusedLinear::linear_leaky_relu: the first argument must be an execution space");
  static_assert(Kokkos::is_view<XView>::value && Kokkos::is_view<WView>::value &&
                    Kokkos::is_view<BView>::value && Kokkos::is_view<YView>::value,
                "FusedLinear::linear_leaky_relu: X, W, b and Y must be Kokkos::Views");
  static_assert(XView::rank == 2 && WView::rank == 2 && BView::rank == 1 && YView::rank == 2,
                "FusedLinear::linear_leaky_relu: X, W and Y must be rank 2 and b rank 1");
  static_assert(std::is_floating_point<Scalar>::value,
                "FusedLinear::linear_leaky_relu: the value type must be float or double");
  static_assert(std::is_same<typename YView::value_type, Scalar>::value,
                "FusedLinear::linear_leaky_relu: Y must not be a View of const");
  static_assert(std::is_same<typename XView::non_const_value_type, Scalar>::value &&
                    std::is_same<typename WView::non_const_value_type, Scalar>::value &&
                    std::is_same<typename BView::non_const_value_type, Scalar>::value,
                "FusedLinear::linear_leaky_relu: X, W, b and Y must have one value type");
  static_assert(
      Kokkos::SpaceAccessibility<ExecSpace, typename XView::memory_space>::accessible &&
          Kokkos::SpaceAccessibility<ExecSpace, typename WView::memory_space>::accessible &&
          Kokkos::SpaceAccessibility<ExecSpace, typename BView::memory_space>::accessible &&
          Kokkos::SpaceAccessibility<ExecSpace, typename YView::memory_space>::accessible,
      "FusedLinear::linear_leaky_relu: X, W, b and Y must be accessible from the execution "
      "space");

  Impl::check_arguments(X, W, b, Y, multiplier, negative_slope);
  const LeakyReLUEpilogue<Scalar> ep{multiplier, negative_slope};
  const std::int64_t M = Y.extent(0), N = Y.extent(1), K = X.extent(1);

  RunInfo info;
  const char* vendor_blas = Impl::vendor_blas_name<XView, WView, YView>();
  constexpr bool lt_serves = Impl::cublaslt_serves<ExecSpace, XView, WView, YView>();
  const Precision precision = options.precision;
  info.algorithm = options.algorithm;
  // 3xtf32 on the fused path is the Hopper kernel; why it cannot run here, if it cannot.
  const std::string native_refusal =
      precision == Precision::TF32x3 &&
              (info.algorithm == Algorithm::Auto || info.algorithm == Algorithm::Fused)
          ? Impl::sm90a_tf32x3_refusal(exec, X, W, b, Y)
          : std::string();
  if (info.algorithm == Algorithm::Auto) {
    if (precision == Precision::TF32x3 && native_refusal.empty())
      info.algorithm = Algorithm::Fused;  // 2-2.5x the cuBLASLt 3xtf32 (perf/RESULTS.md)
    else if (precision != Precision::Strict)
      info.algorithm = lt_serves ? Algorithm::VendorLt : Algorithm::Vendor;
    else
      info.algorithm = Impl::choose_algorithm<ExecSpace, XView, WView, YView>(M, N, K);
  }
  if (info.algorithm == Algorithm::VendorLt && !lt_serves) {
    info.algorithm = Algorithm::Vendor;
    info.note =
        "cuBLASLt does not serve these Views here (needs a CUDA build that found "
        "cublasLt, float/double X, W and Y of one layout in CUDA memory): ran vendor";
  }
  if (precision != Precision::Strict) {
    // Tensor-core modes exist through cuBLAS and the Hopper kernel only; never quietly compute
    // something else.
    const std::string mode = to_string(precision);
    if (!std::is_same<Scalar, float>::value)
      Impl::fail("precision " + mode + " applies to float Views only");
    const bool native = precision == Precision::TF32x3 && info.algorithm == Algorithm::Fused;
    if (native && !native_refusal.empty())
      Impl::fail("precision 3xtf32 on the fused path (the sm_90a kernel) " + native_refusal +
                 "; the vendor paths run 3xtf32 on any CUDA GPU");
    if (!native && (info.algorithm == Algorithm::Fused || info.algorithm == Algorithm::FusedSkinny))
      Impl::fail("precision " + mode + " is available on the vendor paths" +
                 (precision == Precision::TF32x3 ? " and, on Hopper GPUs, fused" : "") +
                 ", not on " + to_string(info.algorithm));
    if (precision == Precision::TF32x3 && !lt_serves && !native)
      Impl::fail(
          "precision 3xtf32 needs cuBLASLt (a CUDA build that found it, X, W and Y of one "
          "layout in CUDA memory)");
    if (!native && info.algorithm != Algorithm::VendorLt &&
        (vendor_blas == nullptr || std::string(vendor_blas) != "cuBLAS"))
      Impl::fail("precision " + mode +
                 " needs cuBLAS (CUDA, X, W and Y of one layout); these "
                 "Views get " +
                 std::string(vendor_blas ? vendor_blas : "no vendor BLAS"));
  }
  Impl::ProfilingRegion region(std::string(Impl::function_name) + "[" + to_string(info.algorithm) +
                               "]");

  if (M == 0 || N == 0) {
    info.gemm = "none";
    info.note = "empty output (M or N is 0): nothing to compute";
    return info;
  }
  if (K == 0) {
    // Kokkos Kernels' gemm returns without touching Y when K = 0; the product is 0 here.
    info.gemm = "none";
    info.note = "K is 0: the product is zero, Y = LeakyReLU(multiplier * b) on every row";
    Impl::epilogue_pass<Impl::Pass::BiasOnly>("FusedLinear::bias_only", exec, Y, b, ep);
    return info;
  }

  if (info.algorithm == Algorithm::VendorPrefill && multiplier == Scalar(0)) {
    // With alpha = 0 a BLAS skips the product entirely, so NaN and Inf in X or W would not
    // reach Y as they do in PyTorch: run the beta = 0 variant, which keeps alpha = 1.
    info.algorithm = Algorithm::Vendor;
    info.note =
        "vendor_prefill with multiplier 0 would let the BLAS skip the product "
        "(alpha = 0) and drop NaN/Inf propagation; ran vendor instead";
  }

  switch (info.algorithm) {
    case Algorithm::Fused:
      if (precision == Precision::TF32x3) {
        info.gemm = "FusedLinear sm_90a wgmma 3xTF32 kernel";
        Impl::run_sm90a_tf32x3(exec, X, W, b, Y, ep);
        break;
      }
      info.gemm = "FusedLinear TeamPolicy kernel";
      Impl::run_fused(exec, X, W, b, Y, ep);
      break;
    case Algorithm::FusedSkinny:
      info.gemm = "FusedLinear skinny TeamPolicy kernel";
      Impl::run_skinny(exec, X, W, b, Y, ep);
      break;
    case Algorithm::VendorLt: {
      info.vendor_blas = true;
      info.gemm = "cuBLASLt";
      // PyTorch's Linear adds the bias in cuBLASLt's epilogue too; the pass then only scales.
      const bool bias_in_gemm = Impl::cublaslt_adds_bias<ExecSpace, XView, WView, BView, YView>(b);
      Impl::vendor_product(exec, Scalar(1), X, W, Scalar(0), Y, precision, true,
                           bias_in_gemm ? b.data() : static_cast<const Scalar*>(nullptr));
      if (bias_in_gemm)
        Impl::epilogue_pass<Impl::Pass::ScaleActivation>("FusedLinear::vendor_lt::epilogue", exec,
                                                         Y, b, ep);
      else
        Impl::epilogue_pass<Impl::Pass::BiasScaleActivation>("FusedLinear::vendor_lt::epilogue",
                                                             exec, Y, b, ep);
      break;
    }
    case Algorithm::Vendor:
    case Algorithm::VendorPrefill: {
      info.vendor_blas = vendor_blas != nullptr;
      // 3xTF32's products are cuBLASLt's on every vendor path (see vendor_product).
      info.gemm = precision == Precision::TF32x3 ? "cuBLASLt"
                  : vendor_blas != nullptr      ? vendor_blas
                                                : "Kokkos Kernels native gemm";
      if (vendor_blas == nullptr) {
        if (!info.note.empty()) info.note += "; ";
        info.note +=
            "no vendor BLAS serves these Views (needs float/double, X, W and Y of one layout, "
            "LayoutLeft or LayoutRight, in a memory space whose BLAS TPL is enabled): "
            "KokkosBlas::gemm ran its native kernel";
      }
      if (info.algorithm == Algorithm::Vendor) {
        Impl::vendor_product(exec, Scalar(1), X, W, Scalar(0), Y, precision, false);
        Impl::epilogue_pass<Impl::Pass::BiasScaleActivation>("FusedLinear::vendor::epilogue", exec,
                                                             Y, b, ep);
      } else {
        Impl::epilogue_pass<Impl::Pass::PrefillScaledBias>("FusedLinear::vendor_prefill::bias",
                                                           exec, Y, b, ep);
        Impl::vendor_product(exec, multiplier, X, W, Scalar(1), Y, precision, false);
        Impl::epilogue_pass<Impl::Pass::Activation>("FusedLinear::vendor_prefill::leaky_relu", exec,
                                                    Y, b, ep);
      }
      break;
    }
    case Algorithm::Auto:
      break;  // resolved above
  }
  return info;
}

/// Same as above on the default execution space instance of Y's memory space.
template <class XView, class WView, class BView, class YView>
RunInfo linear_leaky_relu(const XView& X, const WView& W, const BView& b, const YView& Y,
                          typename YView::non_const_value_type multiplier,
                          typename YView::non_const_value_type negative_slope,
                          Options options = {}) {
  return linear_leaky_relu(typename YView::execution_space(), X, W, b, Y, multiplier,
                           negative_slope, options);
}

}  // namespace FusedLinear

#endif
