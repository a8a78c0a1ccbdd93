// SPDX-License-Identifier: Apache-2.0
/// \file GradientImpl.hpp
/// The gradient plan behind GradientPlan and linear_leaky_relu_backward: one pass over dY and
/// what the forward saved (G and db's partial sums, in a fixed order), then the two products
/// dX = G . W and dW = G^T . X, each through the engine its decision names (docs/design/
/// gradient.md).
#ifndef FUSED_LINEAR_IMPL_GRADIENT_IMPL_HPP
#define FUSED_LINEAR_IMPL_GRADIENT_IMPL_HPP

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <Kokkos_Core.hpp>

#include "FusedLinear/Types.hpp"
#include "FusedLinear/impl/Checks.hpp"
#include "FusedLinear/impl/Dispatch.hpp"
#include "FusedLinear/impl/Errors.hpp"
#include "FusedLinear/impl/Fork.hpp"
#include "FusedLinear/impl/GatherFacts.hpp"
#include "FusedLinear/impl/PlanImpl.hpp"  // Canonical Views, ProfilingRegion
#include "FusedLinear/impl/PlanKey.hpp"
#include "FusedLinear/impl/Planner.hpp"  // CallTimer
#include "FusedLinear/impl/Wisdom.hpp"
#include "FusedLinear/impl/cuda/Device.hpp"
#include "FusedLinear/impl/cuda/LtProduct.hpp"
#include "FusedLinear/impl/cuda/Sm90Adapter.hpp"  // FUSED_LINEAR_SM90A where it is built
#include "FusedLinear/impl/engines/Engine.hpp"
#include "FusedLinear/impl/kernels/Common.hpp"
#include "FusedLinear/impl/vendor/KokkosBlasGemm.hpp"

namespace FusedLinear {
namespace Impl {

/// What the gradient's View types must be, checked where a plan or a call is instantiated.
template <class ExecSpace, class XView, class WView, class DYView, class SavedView, class DXView,
          class DWView, class DBView>
constexpr bool check_gradient_types() {
  using Scalar = typename DYView::non_const_value_type;
  static_assert(Kokkos::is_execution_space<ExecSpace>::value,
                "FusedLinear: the first argument must be a Kokkos execution space instance");
  static_assert(Kokkos::is_view<XView>::value && Kokkos::is_view<WView>::value &&
                    Kokkos::is_view<DYView>::value && Kokkos::is_view<SavedView>::value &&
                    Kokkos::is_view<DXView>::value && Kokkos::is_view<DWView>::value &&
                    Kokkos::is_view<DBView>::value,
                "FusedLinear: X, W, dY, saved, dX, dW and db must be Kokkos::Views");
  static_assert(XView::rank == 2 && WView::rank == 2 && DYView::rank == 2 && SavedView::rank == 2 &&
                    DXView::rank == 2 && DWView::rank == 2 && DBView::rank == 1,
                "FusedLinear: X, W, dY, saved, dX and dW must be rank 2 and db rank 1");
  static_assert(std::is_same<Scalar, float>::value || std::is_same<Scalar, double>::value,
                "FusedLinear: the value type must be float or double");
  static_assert(std::is_same<typename DXView::value_type, Scalar>::value &&
                    std::is_same<typename DWView::value_type, Scalar>::value &&
                    std::is_same<typename DBView::value_type, Scalar>::value,
                "FusedLinear: dX, dW and db must not be Views of const");
  static_assert(std::is_same<typename XView::non_const_value_type, Scalar>::value &&
                    std::is_same<typename WView::non_const_value_type, Scalar>::value,
                "FusedLinear: X, W, dY, dX, dW and db must have one value type");
  using Saved_ = typename SavedView::non_const_value_type;
  static_assert(std::is_same<Saved_, Scalar>::value || std::is_integral<Saved_>::value,
                "FusedLinear: saved must hold the value type (Y or z) or a sign mask (bool or "
                "integers)");
  static_assert(
      Kokkos::SpaceAccessibility<ExecSpace, typename XView::memory_space>::accessible &&
          Kokkos::SpaceAccessibility<ExecSpace, typename WView::memory_space>::accessible &&
          Kokkos::SpaceAccessibility<ExecSpace, typename DYView::memory_space>::accessible &&
          Kokkos::SpaceAccessibility<ExecSpace, typename SavedView::memory_space>::accessible &&
          Kokkos::SpaceAccessibility<ExecSpace, typename DXView::memory_space>::accessible &&
          Kokkos::SpaceAccessibility<ExecSpace, typename DWView::memory_space>::accessible &&
          Kokkos::SpaceAccessibility<ExecSpace, typename DBView::memory_space>::accessible,
      "FusedLinear: every View must be accessible from the execution space");
  return true;
}

/// Rows of G each partial sum of db covers: db is the sum, in row order, of these partial
/// sums, each summed in row order (a fixed order: the same bits on every run).
constexpr std::int64_t gradient_rows_per_partial = 64;

/// G = multiplier * (z > 0 ? dY : dY * slope) (PyTorch's leaky_relu backward, then the
/// multiply's), z > 0 read from the saved Y or z; and db's partial sums of G over
/// gradient_rows_per_partial rows. The GPU iterates (block, column), columns across threads;
/// the host (block) with rows, then columns, inside: the same sums in the same order.
template <class DYView, class SavedView, class GView, class Partials>
struct GradientPrepass {
  using Scalar = typename DYView::non_const_value_type;
  using Acc = typename Partials::non_const_value_type;
  DYView dY;
  SavedView saved;
  GView G;
  Partials partial;
  Scalar multiplier, slope;
  std::int64_t M, N;
  bool write_g, sum_db;

  KOKKOS_INLINE_FUNCTION Scalar g(std::int64_t m, std::int64_t n) const {
    using Saved = typename SavedView::non_const_value_type;
    const Scalar dy = dY(m, n);
    // y > 0 or z > 0 (NaN is not), or a mask's nonzero (negative integers included).
    const Saved v = saved(m, n);
    const bool positive = std::is_integral<Saved>::value ? v != Saved(0) : v > Saved(0);
    return (positive ? dy : dy * slope) * multiplier;
  }
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t block, std::int64_t n) const {
    const std::int64_t last = (block + 1) * gradient_rows_per_partial;
    const std::int64_t end = last < M ? last : M;
    Acc sum = 0;
    for (std::int64_t m = block * gradient_rows_per_partial; m < end; ++m) {
      const Scalar v = g(m, n);
      if (write_g) G(m, n) = v;
      sum += Acc(v);
    }
    if (sum_db) partial(block, n) = sum;
  }
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t block) const {
    const std::int64_t last = (block + 1) * gradient_rows_per_partial;
    const std::int64_t end = last < M ? last : M;
    if (sum_db)
      for (std::int64_t n = 0; n < N; ++n) partial(block, n) = Acc(0);
    for (std::int64_t m = block * gradient_rows_per_partial; m < end; ++m)
      for (std::int64_t n = 0; n < N; ++n) {
        const Scalar v = g(m, n);
        if (write_g) G(m, n) = v;
        if (sum_db) partial(block, n) += Acc(v);
      }
  }
};

/// db(n) = [db(n) +] the partial sums of column n, in block order, rounded once.
template <class DBView, class Partials>
struct SumPartials {
  using Scalar = typename DBView::non_const_value_type;
  using Acc = typename Partials::non_const_value_type;
  DBView db;
  Partials partial;
  std::int64_t blocks;
  bool accumulate;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t n) const {
    Acc sum = 0;
    for (std::int64_t b = 0; b < blocks; ++b) sum += partial(b, n);
    db(n) = accumulate ? Scalar(db(n) + Scalar(sum)) : Scalar(sum);
  }
};

/// Zeros into an output of any layout (Kokkos 3.4's deep_copy of a value takes no rank-2
/// LayoutStride View). At namespace scope: CUDA's extended lambdas cannot be defined in a
/// private member.
template <class ExecSpace, class V>
void fill_zero(const ExecSpace& exec, const V& v) {
  using Scalar = typename V::non_const_value_type;
  if constexpr (V::rank == 1) {
    Kokkos::parallel_for(
        "FusedLinear::gradient::zero",
        Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, v.extent(0)),
        KOKKOS_LAMBDA(std::int64_t i) { v(i) = Scalar(0); });
  } else {
    Kokkos::parallel_for(
        "FusedLinear::gradient::zero",
        elementwise_policy<ExecSpace, typename V::array_layout>(exec, v.extent(0), v.extent(1)),
        KOKKOS_LAMBDA(std::int64_t i, std::int64_t j) { v(i, j) = Scalar(0); });
  }
}

/// A product's path: KokkosBlas::gemm (strict or TF32), cuBLASLt's 3xTF32, or the library's
/// sm_90a 3xTF32 kernel.
enum class ProductPath { None, KokkosBlas, Lt3x, Sm90 };

template <class ExecSpace, class XView, class WView, class DYView, class SavedView, class DXView,
          class DWView, class DBView>
class GradientImpl {
 public:
  using Scalar = typename DYView::non_const_value_type;
  using Memory = typename DYView::memory_space;
  using Device = Kokkos::Device<ExecSpace, Memory>;
  using Acc = double;
  // G in dY's layout where a BLAS takes it (one layout for every operand), else row-major.
  using GLayout =
      std::conditional_t<std::is_same<typename DYView::array_layout, Kokkos::LayoutLeft>::value,
                         Kokkos::LayoutLeft, Kokkos::LayoutRight>;
  using GView = Kokkos::View<Scalar**, GLayout, Device, Kokkos::MemoryUnmanaged>;
  using GConst = Kokkos::View<const Scalar**, GLayout, Device, Kokkos::MemoryUnmanaged>;
  using Partials = Kokkos::View<Acc**, Kokkos::LayoutRight, Device, Kokkos::MemoryUnmanaged>;

  /// cuBLASLt's 3xTF32 serves the products: the transposed problems dX^T = W^T . G^T and
  /// dW^T = X^T . G as column-major products of the row-major Views (no copy beyond 3xTF32's
  /// split operands).
  static constexpr bool lt3x_compiles() {
#if defined(FUSED_LINEAR_CUBLASLT)
    using Right = Kokkos::LayoutRight;
    return std::is_same<ExecSpace, Kokkos::Cuda>::value && std::is_same<Scalar, float>::value &&
           std::is_same<typename XView::array_layout, Right>::value &&
           std::is_same<typename WView::array_layout, Right>::value &&
           std::is_same<typename DXView::array_layout, Right>::value &&
           std::is_same<typename DWView::array_layout, Right>::value &&
           std::is_same<GLayout, Right>::value;
#else
    return false;
#endif
  }
  /// The sm_90a 3xTF32 kernel serves them on the same Views as cuBLASLt (row-major G too).
  static constexpr bool sm90_compiles() {
#if defined(FUSED_LINEAR_SM90A)
    return lt3x_compiles();
#else
    return false;
#endif
  }

  GradientImpl(const ExecSpace& exec, const XView& X, const WView& W, const DYView& dY,
               const SavedView& saved, const DXView& dX, const DWView& dW, const DBView& db,
               Scalar multiplier, Scalar slope, const GradientOptions& options,
               const char* function)
      : m_multiplier(multiplier), m_slope(slope), m_options(options) {
    check_parameters(multiplier, slope, options, function);
    m_shape =
        Shape{std::int64_t(X.extent(0)), std::int64_t(X.extent(1)), std::int64_t(W.extent(0))};
    m_dx = dX.size() > 0, m_dw = dW.size() > 0, m_db = db.size() > 0;
    check_views(X, W, dY, saved, dX, dW, db, function);
    refuse_if_forked(exec, function);
    ExecDeviceGuard<ExecSpace> device(exec, function);
    refuse_if_capturing(exec, function,
                        "a plan cannot be made while its stream is being captured into a CUDA "
                        "graph (it allocates): make it before the capture");
    const std::int64_t M = m_shape.M, K = m_shape.K, N = m_shape.N;
    m_dx_product = m_dx && M > 0 && K > 0 && N > 0;
    m_dw_product = m_dw && N > 0 && K > 0 && M > 0;
    m_blocks = (M + gradient_rows_per_partial - 1) / gradient_rows_per_partial;
    const bool lt3x = lt3x_serves(X, W, dX, dW);
    m_info.dx =
        decide(Shape{M, N, K}, m_dx_product, lt3x, facts_of(exec, X, W, dX, dW, true), function);
    m_info.dw =
        decide(Shape{N, M, K}, m_dw_product, lt3x, facts_of(exec, X, W, dX, dW, false), function);
#if defined(FUSED_LINEAR_SM90A)
    if constexpr (sm90_compiles()) m_sm90_device = sm90_device(exec);
#endif
    // Measure sets up each candidate it times; the workspace is then the choice's.
    if (options.planning == Planning::Measure) measure(exec, X, W, dY, saved, dX, dW, db, function);
    allocate(X, W, dX, dW, function);
  }

  const GradientInfo& info() const { return m_info; }
  std::size_t workspace_bytes() const { return m_workspace.bytes(); }

  void execute(const ExecSpace& exec, const XView& X, const WView& W, const DYView& dY,
               const SavedView& saved, const DXView& dX, const DWView& dW, const DBView& db,
               const char* function) const {
    if (std::int64_t(X.extent(0)) != m_shape.M || std::int64_t(X.extent(1)) != m_shape.K ||
        std::int64_t(W.extent(0)) != m_shape.N)
      refuse(function, "extents differ from the plan's: X " + shape_of(X) + ", W " + shape_of(W) +
                           " where the plan has M = " + std::to_string(m_shape.M) + ", K = " +
                           std::to_string(m_shape.K) + ", N = " + std::to_string(m_shape.N));
    if ((dX.size() > 0) != m_dx || (dW.size() > 0) != m_dw || (db.size() > 0) != m_db)
      refuse(function,
             "the outputs present (non-empty Views) differ from those the plan was made for: "
             "make a plan for them");
    check_views(X, W, dY, saved, dX, dW, db, function);
    refuse_if_forked(exec, function);
    ExecDeviceGuard<ExecSpace> device(exec, function);
    check_engines(exec, X, W, dX, dW, function);
    ProfilingRegion region("FusedLinear::gradient");
    run(exec, X, W, dY, saved, dX, dW, db, m_options.accumulate, function);
  }

 private:
  template <class S>
  static void check_parameters(S multiplier, S slope, const GradientOptions& o,
                               const char* function) {
    if (!std::isfinite(double(multiplier)))
      refuse(function, "multiplier must be finite, got " + std::to_string(double(multiplier)));
    if (!std::isfinite(double(slope)))
      refuse(function, "negative_slope must be finite, got " + std::to_string(double(slope)));
    constexpr bool mask = std::is_integral<typename SavedView::non_const_value_type>::value;
    if (mask != (o.saved == Saved::Sign))
      refuse(function, mask ? "saved is a View of integers (a sign mask): options.saved must be "
                              "Saved::Sign"
                            : "Saved::Sign takes a mask of bool or integers, not a View of the "
                              "value type (Y or z: Saved::Output or Saved::PreActivation)");
    if (o.saved == Saved::Output && slope < S(0))
      refuse(function,
             "a negative slope maps negative pre-activations to positive outputs, so Y cannot "
             "tell the LeakyReLU's branch: pass the pre-activation z (Saved::PreActivation) or "
             "a mask of z > 0 (Saved::Sign)");
  }

  /// Extents, data, aliasing: every refusal before anything is written.
  void check_views(const XView& X, const WView& W, const DYView& dY, const SavedView& saved,
                   const DXView& dX, const DWView& dW, const DBView& db,
                   const char* function) const {
    const std::int64_t M = m_shape.M, K = m_shape.K, N = m_shape.N;
    const auto is = [](const auto& v, std::int64_t r, std::int64_t c) {
      return std::int64_t(v.extent(0)) == r && std::int64_t(v.extent(1)) == c;
    };
    if (!is(X, M, K) || !is(W, N, K) || !is(dY, M, N) || !is(saved, M, N) ||
        (m_dx && !is(dX, M, K)) || (m_dw && !is(dW, N, K)) ||
        (m_db && std::int64_t(db.extent(0)) != N)) {
      std::ostringstream os;
      os << "extents do not match: expected X [M,K], W [N,K], dY and saved [M,N], dX [M,K], "
            "dW [N,K], db [N] (an output may be empty, to skip it); got X "
         << shape_of(X) << ", W " << shape_of(W) << ", dY " << shape_of(dY) << ", saved "
         << shape_of(saved) << ", dX " << shape_of(dX) << ", dW " << shape_of(dW) << ", db "
         << shape_of(db);
      refuse(function, os.str());
    }
    const auto needs_data = [&](const auto& v, const char* name) {
      if (!has_data(v)) refuse(function, std::string(name) + " is not allocated");
    };
    needs_data(X, "X"), needs_data(W, "W"), needs_data(dY, "dY"), needs_data(saved, "saved");
    needs_data(dX, "dX"), needs_data(dW, "dW"), needs_data(db, "db");
    const auto output = [&](const auto& out, const char* name) {
      if (maps_two_indices_to_one_element(out))
        refuse(function, std::string(name) + "'s strides map two of its elements to one address");
      // `name` by value: the lambda outlives this call.
      const auto apart = [&, name](const auto& in, const char* other) {
        if (shares_elements(out, in))
          refuse(function, std::string(name) + " aliases " + other +
                               " (they share elements: an output must not overlap another View)");
      };
      apart(X, "X"), apart(W, "W"), apart(dY, "dY"), apart(saved, "saved");
      return apart;
    };
    const auto dx_apart = output(dX, "dX");
    const auto dw_apart = output(dW, "dW");
    output(db, "db");
    dx_apart(dW, "dW"), dx_apart(db, "db"), dw_apart(db, "db");
  }

  template <class V>
  static bool contiguous_rows(const V& v) {
    return v.extent(0) <= 1 || std::int64_t(v.stride(0)) == std::int64_t(v.extent(1));
  }
  bool lt3x_serves(const XView& X, const WView& W, const DXView& dX, const DWView& dW) const {
    if constexpr (lt3x_compiles())
      return contiguous_rows(X) && contiguous_rows(W) && (!m_dx || contiguous_rows(dX)) &&
             (!m_dw || contiguous_rows(dW));
    (void)X, (void)W, (void)dX, (void)dW;
    return false;
  }

  /// What the cost model and the candidates depend on, for the product of View types B (W or
  /// X) and C (dX or dW).
  template <class BView, class CView>
  static Facts product_facts(const ExecSpace& exec) {
    Facts f;
    f.backend = backend_of<ExecSpace>();
    f.float_views = std::is_same<Scalar, float>::value;
    f.blas = kokkos_blas_gemm<ExecSpace, GConst, BView, CView>();
    if (f.blas == Gemm::HostBlas) f.host_blas = host_blas_kind();
    set_device_rates(device_report(exec), f);
    if (f.backend == Backend::Host) f.host_threads = exec.concurrency();
    return f;
  }
  /// Facts of dX (is_dx) or of dW; sm90_tf32x3 says why the sm_90a kernel cannot take it.
  Facts facts_of(const ExecSpace& exec, const XView& X, const WView& W, const DXView& dX,
                 const DWView& dW, bool is_dx) const {
    Facts f = is_dx ? product_facts<WView, DXView>(exec) : product_facts<XView, DWView>(exec);
    f.sm90_tf32x3 = sm90_refusal(exec, X, W, dX, dW, is_dx);
    return f;
  }

#if defined(FUSED_LINEAR_SM90A)
  /// dX = G . W (is_dx: S = W, D = dX) or dW (+)= G^T . X (S = X, D = dW) as the sm_90a kernel
  /// takes it; G [M, N] row-major.
  template <class SView, class DView>
  Sm90::GradientProduct sm90_product(const SView& S, const DView& D, const float* G,
                                     bool is_dx) const {
    Sm90::GradientProduct p;
    p.P = is_dx ? m_shape.M : m_shape.N, p.K = m_shape.K, p.R = is_dx ? m_shape.N : m_shape.M;
    p.S = reinterpret_cast<const float*>(S.data()), p.lds = std::int64_t(S.stride(0));
    p.G = G, p.ldg = m_shape.N, p.transpose_g = !is_dx;
    p.D = reinterpret_cast<float*>(D.data()), p.ldd = std::int64_t(D.stride(0));
    p.accumulate = !is_dx && m_options.accumulate;
    return p;
  }
#endif
  const char* sm90_refusal(const ExecSpace& exec, const XView& X, const WView& W, const DXView& dX,
                           const DWView& dW, bool is_dx) const {
#if defined(FUSED_LINEAR_SM90A)
    if constexpr (sm90_compiles()) {
      if (!(is_dx ? m_dx_product : m_dw_product)) return nullptr;  // nothing for it to run
      if (!contiguous_rows(X) || !contiguous_rows(W) || (is_dx && !contiguous_rows(dX)) ||
          (!is_dx && !contiguous_rows(dW)))
        return "needs X, W, dX and dW row-major with contiguous rows";
      return Sm90::tf32x3_gradient_refusal(
          sm90_device(exec),
          is_dx ? sm90_product(W, dX, nullptr, true) : sm90_product(X, dW, nullptr, false));
    }
#endif
    (void)exec, (void)X, (void)W, (void)dX, (void)dW, (void)is_dx;
    return "runs on CUDA with float, row-major X, W, dX and dW, in a build with the sm_90a "
           "kernels";
  }

  RunInfo decide(const Shape& s, bool product, bool lt3x, const Facts& f,
                 const char* function) const {
    return resolve_gradient_product(m_options, s, product, lt3x, f, function);
  }

  static ProductPath path_of(const RunInfo& r) {
    if (r.gemm == Gemm::None) return ProductPath::None;
    if (r.gemm == Gemm::Sm90Tf32x3Kernel) return ProductPath::Sm90;
    return r.gemm == Gemm::CublasLt ? ProductPath::Lt3x : ProductPath::KokkosBlas;
  }

  // The transposed, column-major problems cuBLASLt runs in 3xTF32.
  using LeftOut = Kokkos::View<float**, Kokkos::LayoutLeft, Device, Kokkos::MemoryUnmanaged>;
  using LeftIn = Kokkos::View<const float**, Kokkos::LayoutLeft, Device, Kokkos::MemoryUnmanaged>;
  template <class V>
  static LeftIn transposed_in(const V& v) {
    return LeftIn(reinterpret_cast<const float*>(v.data()), v.extent(1), v.extent(0));
  }
  template <class V>
  static LeftOut transposed_out(const V& v) {
    return LeftOut(reinterpret_cast<float*>(v.data()), v.extent(1), v.extent(0));
  }
  GView g_view() const { return GView(m_workspace.template at<Scalar>(0), m_shape.M, m_shape.N); }
  Partials partials() const {
    return Partials(m_workspace.template at<Acc>(m_partials_at), m_blocks, m_shape.N);
  }
  void* engine_workspace() const { return m_workspace.base() + m_engine_at; }

  /// The plan's one block of memory: G, db's partial sums, then what the products' engines use
  /// (cuBLASLt's 3xTF32 operands, the sm_90a kernel's split G): the two products run one after
  /// the other and share it.
  void allocate(const XView& X, const WView& W, const DXView& dX, const DWView& dW,
                const char* function) {
    m_workspace = Workspace<Memory>();
    const std::int64_t M = m_shape.M, N = m_shape.N;
    const bool need_g = m_dx_product || m_dw_product;
    m_write_g = need_g;
    m_sum_db = m_db && M > 0 && N > 0;
    const std::size_t g_bytes = need_g ? std::size_t(M) * N * sizeof(Scalar) : 0;
    const std::size_t p_bytes = m_sum_db ? std::size_t(m_blocks) * N * sizeof(Acc) : 0;
    m_partials_at = Workspace<Memory>::piece(g_bytes);
    m_engine_at = m_partials_at + Workspace<Memory>::piece(p_bytes);
    std::size_t engine_bytes = 0;
#if defined(FUSED_LINEAR_CUBLASLT)
    if constexpr (lt3x_compiles()) {
      const std::size_t limit = m_options.tuning.tf32x3_partials_limit;
      const GConst G(nullptr, M, N);
      m_lt_dx.reset(), m_lt_dw.reset();
      if (path_of(m_info.dx) == ProductPath::Lt3x) {
        m_lt_dx.reset(
            new Lt(transposed_in(W), G, transposed_out(dX), false, Precision::TF32x3, limit));
        engine_bytes = std::max(engine_bytes, m_lt_dx->workspace_bytes());
      }
      if (path_of(m_info.dw) == ProductPath::Lt3x) {
        m_lt_dw.reset(new Lt(transposed_in(X), transposed_in(G), transposed_out(dW), false,
                             Precision::TF32x3, limit));
        engine_bytes = std::max(engine_bytes, m_lt_dw->workspace_bytes());
      }
    }
#endif
#if defined(FUSED_LINEAR_SM90A)
    if constexpr (sm90_compiles()) {
      if (path_of(m_info.dx) == ProductPath::Sm90)
        engine_bytes =
            std::max(engine_bytes,
                     Sm90::tf32x3_gradient_workspace_bytes(sm90_product(W, dX, nullptr, true)));
      if (path_of(m_info.dw) == ProductPath::Sm90)
        engine_bytes =
            std::max(engine_bytes,
                     Sm90::tf32x3_gradient_workspace_bytes(sm90_product(X, dW, nullptr, false)));
    }
#endif
    (void)X, (void)W, (void)dX, (void)dW;
    const std::size_t total = m_engine_at + engine_bytes;
    m_workspace = Workspace<Memory>(total == 0 ? 0 : Workspace<Memory>::piece(total), function,
                                    Algorithm::Vendor);
  }

  void check_engines(const ExecSpace& exec, const XView& X, const WView& W, const DXView& dX,
                     const DWView& dW, const char* function) const {
    for (const RunInfo* r : {&m_info.dx, &m_info.dw}) {
      if (r->gemm == Gemm::KokkosKernelsNative && !kokkos_blas_gemm_on_instance)
        refuse_if_capturing(exec, function,
                            "Kokkos Kernels' native gemm (on these Views) runs on the default "
                            "instance, ordered by fences, and cannot be captured into a CUDA "
                            "graph");
    }
#if defined(FUSED_LINEAR_CUBLASLT)
    if constexpr (lt3x_compiles()) {
      const GConst G(g_view().data(), m_shape.M, m_shape.N);
      const char* why = nullptr;
      if (m_lt_dx && !(contiguous_rows(W) && contiguous_rows(dX)))
        why = "cuBLASLt's 3xtf32 reads W and writes dX as contiguous rows";
      else if (m_lt_dw && !(contiguous_rows(X) && contiguous_rows(dW)))
        why = "cuBLASLt's 3xtf32 reads X and writes dW as contiguous rows";
      else if (m_lt_dx)
        why = m_lt_dx->refusal(transposed_in(W), G, transposed_out(dX), false, engine_workspace());
      if (!why && m_lt_dw)
        why = m_lt_dw->refusal(transposed_in(X), transposed_in(G), transposed_out(dW), false,
                               engine_workspace());
      if (why) refuse_other_views(function, Algorithm::VendorLt, why);
    }
#endif
#if defined(FUSED_LINEAR_SM90A)
    if constexpr (sm90_compiles()) {
      for (const bool is_dx : {true, false}) {
        if (path_of(is_dx ? m_info.dx : m_info.dw) != ProductPath::Sm90) continue;
        if (const char* why = sm90_refusal(exec, X, W, dX, dW, is_dx))
          refuse_other_views(function, Algorithm::FusedSm90, why);
      }
    }
#endif
    (void)exec, (void)X, (void)W, (void)dX, (void)dW;
  }

  /// The pre-pass, db, then the products, in that order on `exec`.
  void run(const ExecSpace& exec, const XView& X, const WView& W, const DYView& dY,
           const SavedView& saved, const DXView& dX, const DWView& dW, const DBView& db,
           bool accumulate, const char* function) const {
    const std::int64_t M = m_shape.M, K = m_shape.K, N = m_shape.N;
    const GView G = m_write_g ? g_view() : GView();
    if (m_write_g || m_sum_db) {
      using Prepass = GradientPrepass<DYView, SavedView, GView, Partials>;
      const Prepass pass{dY,           saved,   G, m_sum_db ? partials() : Partials(),
                         m_multiplier, m_slope, M, N,
                         m_write_g,    m_sum_db};
      if (is_host_space<ExecSpace>())
        Kokkos::parallel_for(
            "FusedLinear::gradient::prepass",
            Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, m_blocks),
            pass);
      else
        Kokkos::parallel_for("FusedLinear::gradient::prepass",
                             elementwise_policy<ExecSpace, Kokkos::LayoutRight>(exec, m_blocks, N),
                             pass);
    }
    if (m_db && N > 0) {
      if (m_sum_db)
        Kokkos::parallel_for(
            "FusedLinear::gradient::db",
            Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>(exec, 0, N),
            SumPartials<DBView, Partials>{db, partials(), m_blocks, accumulate});
      else if (!accumulate)
        fill_zero(exec, db);  // M = 0: the sum of no rows
    }
    const GConst Gc = G;
    if (m_dx && M > 0 && K > 0) {
      if (!m_dx_product)  // N = 0: a sum over no columns of G
        fill_zero(exec, dX);
      else
        product(exec, m_info.dx, Gc, W, dX, "N", Scalar(0), true, function);
    }
    if (m_dw && N > 0 && K > 0) {
      if (!m_dw_product) {
        if (!accumulate) fill_zero(exec, dW);  // M = 0
      } else {
        product(exec, m_info.dw, Gc, X, dW, "T", Scalar(accumulate ? 1 : 0), false, function);
      }
    }
  }

  /// dX = G . W (`op_g` "N") or dW = G^T . X (+ beta dW) (`op_g` "T").
  template <class BView, class CView>
  void product(const ExecSpace& exec, const RunInfo& r, const GConst& G, const BView& B,
               const CView& C, const char* op_g, Scalar beta, bool is_dx,
               const char* function) const {
    if (path_of(r) == ProductPath::KokkosBlas) {
      kokkos_blas_gemm(exec, op_g, "N", Scalar(1), G, B, beta, C, r.precision == Precision::TF32);
      return;
    }
#if defined(FUSED_LINEAR_SM90A)
    if constexpr (sm90_compiles()) {
      if (path_of(r) == ProductPath::Sm90) {
        Sm90::GradientProduct p = sm90_product(B, C, G.data(), is_dx);
        p.accumulate = beta != Scalar(0);
        cuda_check(Sm90::tf32x3_gradient(exec.cuda_stream(), m_sm90_device, p, engine_workspace(),
                                         m_workspace.bytes() - m_engine_at,
                                         m_options.tuning.sm90_tf32x3_kernel),
                   function, "run the sm_90a 3xTF32 gradient kernel");
        return;
      }
    }
#endif
#if defined(FUSED_LINEAR_CUBLASLT)
    if constexpr (lt3x_compiles()) {
      CacheConfigGuard cache_config(exec.cuda_stream());
      if (is_dx)
        m_lt_dx->run(exec, 1.0f, transposed_in(B), G, beta, transposed_out(C), nullptr,
                     engine_workspace());
      else
        m_lt_dw->run(exec, 1.0f, transposed_in(B), transposed_in(G), beta, transposed_out(C),
                     nullptr, engine_workspace());
      return;
    }
#endif
    (void)is_dx, (void)function;
    throw std::logic_error("FusedLinear: a 3xtf32 engine was chosen where it cannot run");
  }

  /// Planning::Measure under Auto: each product's candidates meeting the floor timed on the
  /// plan's Views (dX, dW and db overwritten), the fastest kept; remembered as wisdom.
  void measure(const ExecSpace& exec, const XView& X, const WView& W, const DYView& dY,
               const SavedView& saved, const DXView& dX, const DWView& dW, const DBView& db,
               const char* function) {
    if (m_options.algorithm != Algorithm::Auto) return;
    const bool lt3x = lt3x_serves(X, W, dX, dW);
    CallTimer<ExecSpace> timer(exec, function);
    RunInfo* const infos[2] = {&m_info.dx, &m_info.dw};
    const bool products[2] = {m_dx_product, m_dw_product};
    for (int which = 0; which < 2; ++which) {
      if (!products[which]) continue;
      const Facts f = facts_of(exec, X, W, dX, dW, which == 0);
      std::vector<Candidate> all;
      for (const Candidate& c : gradient_candidates(f, lt3x))
        if (meets_floor(c.precision, m_options.precision)) all.push_back(c);
      if (all.size() < 2) continue;
      const std::string key = measure_key(exec, X, W, dY, all);
      RunInfo& info = *infos[which];
      const std::string product_key = key + (which == 0 ? "; product dX" : "; product dW");
      std::optional<WisdomEntry> known = WisdomStore::instance().find(product_key);
      Candidate best{};
      if (known) {
        best = Candidate{known->choice.algorithm, known->choice.precision};
      } else {
        double best_ms = std::numeric_limits<double>::infinity();
        for (const Candidate& c : all) {
          info = gradient_run_info(c, f);
          allocate(X, W, dX, dW, function);
          run(exec, X, W, dY, saved, dX, dW, db, false, function);  // the warm-up; G for both
          std::vector<double> ms;
          for (int i = 0; i < 3; ++i) {
            const double t = timer([&] {
              if (which == 0)
                product(exec, info, GConst(g_view().data(), m_shape.M, m_shape.N), W, dX, "N",
                        Scalar(0), true, function);
              else
                product(exec, info, GConst(g_view().data(), m_shape.M, m_shape.N), X, dW, "T",
                        Scalar(0), false, function);
            });
            ms.push_back(t);
          }
          std::sort(ms.begin(), ms.end());
          if (ms[ms.size() / 2] < best_ms) best_ms = ms[ms.size() / 2], best = c;
        }
        Choice choice;
        choice.algorithm = best.algorithm, choice.precision = best.precision;
        WisdomStore::instance().remember(product_key, WisdomEntry{choice, best_ms});
      }
      if (std::none_of(all.begin(), all.end(), [&](const Candidate& c) {
            return c.algorithm == best.algorithm && c.precision == best.precision;
          }))
        best = all.front();  // wisdom from elsewhere names no candidate here
      info = gradient_run_info(best, f);
      if (best.precision != m_options.precision)
        info.note = std::string("precision ") + to_string(m_options.precision) +
                    " asked under auto, a floor: " + to_string(best.precision) + " (" +
                    to_string(best.algorithm) + ") measured faster at this shape";
      info.measured = true, info.from_wisdom = bool(known);
    }
  }

  std::string measure_key(const ExecSpace& exec, const XView& X, const WView& W, const DYView& dY,
                          const std::vector<Candidate>& all) const {
    std::ostringstream os;
    os.imbue(std::locale::classic());
    os << "gradient; library " << build_identity() << "; device " << device_identity(exec)
       << "; value " << (std::is_same<Scalar, float>::value ? "float" : "double") << "; layouts "
       << layout_name<typename XView::array_layout>() << ','
       << layout_name<typename WView::array_layout>() << ','
       << layout_name<typename DYView::array_layout>() << "; shape " << m_shape.M << 'x'
       << m_shape.K << 'x' << m_shape.N << "; strides " << X.stride(0) << ',' << W.stride(0) << ','
       << dY.stride(0) << "; floor " << to_string(m_options.precision) << "; candidates";
    for (const Candidate& c : all)
      os << ' ' << to_string(c.algorithm) << '/' << to_string(c.precision);
    return wisdom_text(os.str());
  }

#if defined(FUSED_LINEAR_CUBLASLT)
  using Lt = LtProduct<float, Kokkos::LayoutLeft>;
  std::unique_ptr<Lt> m_lt_dx, m_lt_dw;
#endif
#if defined(FUSED_LINEAR_SM90A)
  Sm90::Device m_sm90_device;
#endif
  Shape m_shape;
  Scalar m_multiplier, m_slope;
  GradientOptions m_options;
  GradientInfo m_info;
  bool m_dx = false, m_dw = false, m_db = false, m_dx_product = false, m_dw_product = false;
  bool m_write_g = false, m_sum_db = false;
  std::int64_t m_blocks = 0;
  std::size_t m_partials_at = 0, m_engine_at = 0;
  Workspace<Memory> m_workspace;
};

/// The plan of the canonical Views of a user's View types.
template <class ExecSpace, class XView, class WView, class DYView, class SavedView, class DXView,
          class DWView, class DBView>
using GradientImplOf =
    GradientImpl<ExecSpace, CanonicalInput<ExecSpace, XView>, CanonicalInput<ExecSpace, WView>,
                 CanonicalInput<ExecSpace, DYView>, CanonicalInput<ExecSpace, SavedView>,
                 CanonicalOutput<ExecSpace, DXView>, CanonicalOutput<ExecSpace, DWView>,
                 CanonicalOutput<ExecSpace, DBView>>;

/// The one-shot gradient's cache key: the plan's type, scope, extents, every View's strides
/// and alignment, the parameters and options.
template <class PlanType, class XView, class WView, class DYView, class SavedView, class DXView,
          class DWView, class DBView, class Scalar>
PlanKey gradient_key(std::uint64_t scope, const XView& X, const WView& W, const DYView& dY,
                     const SavedView& saved, const DXView& dX, const DWView& dW, const DBView& db,
                     Scalar multiplier, Scalar slope, const GradientOptions& o) {
  PlanKey k;
  std::memset(&k, 0, sizeof k);
  k.type = &typeid(PlanType);
  k.scope = scope;
  k.extents[0] = X.extent(0), k.extents[1] = X.extent(1), k.extents[2] = W.extent(0);
  const std::int64_t strides[13] = {
      std::int64_t(X.stride(0)),     std::int64_t(X.stride(1)),     std::int64_t(W.stride(0)),
      std::int64_t(W.stride(1)),     std::int64_t(dY.stride(0)),    std::int64_t(dY.stride(1)),
      std::int64_t(saved.stride(0)), std::int64_t(saved.stride(1)), std::int64_t(dX.stride(0)),
      std::int64_t(dX.stride(1)),    std::int64_t(dW.stride(0)),    std::int64_t(dW.stride(1)),
      std::int64_t(db.stride(0))};
  std::copy(strides, strides + 13, k.strides);
  const void* data[7] = {X.data(),  W.data(),  dY.data(), saved.data(),
                         dX.data(), dW.data(), db.data()};
  for (int i = 0; i < 7; ++i) k.alignments |= alignment_log2(data[i]) << (8 * i);
  k.multiplier = double(multiplier), k.slope = double(slope);
  k.algorithm = std::int32_t(o.algorithm), k.precision = std::int32_t(o.precision);
  k.planning = std::int32_t(o.planning);
  k.sm90_kernel = o.tuning.sm90_tf32x3_kernel;
  k.partials_limit = o.tuning.tf32x3_partials_limit;
  k.flags = std::int32_t(o.accumulate) | std::int32_t(o.saved) << 1 |
            std::int32_t(dX.size() > 0) << 2 | std::int32_t(dW.size() > 0) << 3 |
            std::int32_t(db.size() > 0) << 4;
  return k;
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
