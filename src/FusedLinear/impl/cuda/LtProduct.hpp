// SPDX-License-Identifier: Apache-2.0
/// \file LtProduct.hpp
/// The product C = alpha X . W^T + beta C (+ bias) through cuBLASLt in a precision: strict and
/// TF32 as one cuBLASLt call, 3xTF32 as split operands and several calls. Made once per plan
/// (descriptors, heuristic choices, workspace size), run per call on the plan's workspace.
#ifndef FUSED_LINEAR_IMPL_CUDA_LT_PRODUCT_HPP
#define FUSED_LINEAR_IMPL_CUDA_LT_PRODUCT_HPP

#include "FusedLinear/impl/cuda/CublasLt.hpp"

#ifdef FUSED_LINEAR_CUBLASLT

#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <Kokkos_Core.hpp>

#include "FusedLinear/Types.hpp"
#include "FusedLinear/impl/kernels/Common.hpp"
#include "FusedLinear/impl/kernels/Tf32Split.hpp"

namespace FusedLinear {
namespace Impl {

/// Whether cuBLASLt's bias epilogue can take b: contiguous, and 16-byte aligned (the heuristic
/// is told the operands' alignment, not the bias pointer's, and its kernels may assume it).
template <class BView>
bool cublaslt_takes_bias(const BView& b) {
  return (b.extent(0) <= 1 || b.stride(0) == 1) &&
         reinterpret_cast<std::uintptr_t>(b.data()) % 16 == 0;
}

/// Length of the K ranges over which 3xTF32 lets the tensor cores accumulate hi.hi: their fp32
/// accumulation truncates, so its error grows with the length accumulated; 256 keeps a factor 2
/// below strict fp32's error (docs/precision.md has the measurements, 512 among them).
constexpr std::int64_t tf32x3_chunk = 256;

/// An operand of 3xTF32 split into its two parts side by side, S = [first | second] (rows x
/// 2 Kp, Kp >= K; columns K to Kp of each part are zero): X as [X_lo | X_hi], W as
/// [W_hi | W_lo], so that one TF32 product over 2 Kp gives the small terms lo.hi + hi.lo, and
/// the hi parts give hi.hi in ranges of equal length.
template <class Source, class Split>
struct SplitTf32Operand {
  Source A;
  Split S;
  std::int64_t K, Kp;
  bool lo_first;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i, std::int64_t k) const {
    const Tf32Split s(k < K ? float(A(i, k)) : 0.0f);
    S(i, k) = lo_first ? s.lo : s.hi;
    S(i, Kp + k) = lo_first ? s.hi : s.lo;
  }
};

/// Y(i, j) += P_0(i, j) + P_1(i, j) + ..., in that order: the ranges' sums of hi.hi, laid out
/// as the batched product wrote them (each M x N, in Y's layout, contiguous).
template <class YView>
struct AddPartialSums {
  YView Y;
  const float* P;
  std::int64_t count, M, N;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i, std::int64_t j) const {
    constexpr bool right = std::is_same<typename YView::array_layout, Kokkos::LayoutRight>::value;
    const std::int64_t at = right ? i * N + j : j * M + i;
    float sum = Y(i, j);
    for (std::int64_t c = 0; c < count; ++c) sum += P[c * M * N + at];
    Y(i, j) = sum;
  }
};

/// C = alpha X . W^T + beta C (+ bias on every row) through cuBLASLt, for one plan's shape,
/// layout (LayoutRight or LayoutLeft, X, W, Y alike) and precision.
///
/// 3xTF32 splits X and W into TF32 parts in the plan's workspace, X as [lo | hi] and W as
/// [hi | lo] (K padded with zeros to whole ranges): one TF32 product over both parts gives
/// lo.hi + hi.lo, then hi.hi is added tf32x3_chunk columns at a time, either as one strided
/// batch of the ranges' sums plus one pass adding them to Y in order (where they fit in
/// Experimental::Tuning::tf32x3_partials_limit bytes: small Y, long K, where it is much faster;
/// docs/design/vendor-paths.md), or range by range with cuBLASLt adding each to Y (beta = 1).
template <class Scalar, class Layout>
class LtProduct {
  static constexpr bool right = std::is_same<Layout, Kokkos::LayoutRight>::value;
  static constexpr bool is_double = std::is_same<Scalar, double>::value;
  using Split = Kokkos::View<float**, Layout, Kokkos::CudaSpace, Kokkos::MemoryUnmanaged>;

 public:
  /// For the Views a plan is made with; throws std::runtime_error if cuBLASLt finds no kernel.
  /// The plan's workspace is 256-byte aligned.
  /// `algorithms`, `variant` (strict and tf32): hold the heuristic's first `algorithms` ranked
  /// algorithms (Planning::Measure times them) and run the `variant`-th (0: its first choice);
  /// `config` (from wisdom): run the algorithm of that configuration instead (LtPlan::adopt).
  template <class XView, class WView, class YView>
  LtProduct(const XView& X, const WView& W, const YView& Y, bool bias, Precision precision,
            std::size_t partials_limit, int algorithms = 1, int variant = 0,
            const std::string& config = {})
      : m_precision(precision), m_M(Y.extent(0)), m_N(Y.extent(1)), m_K(X.extent(1)) {
    if (precision != Precision::TF32x3) {
      m_main.reset(
          new Planned(m_handle, call_of(X, W, Y, bias), std::max(algorithms, variant + 1)));
      m_main->plan.select(variant);
      if (!config.empty()) m_main->plan.adopt(m_handle.get(), config);
      m_workspace = m_main->plan.workspace_bytes();
      return;
    }
    const std::int64_t C = tf32x3_chunk, M = m_M, N = m_N;
    m_ranges = (m_K + C - 1) / C;
    m_Kp = m_ranges * C;
    const auto aligned = [](std::size_t bytes) { return (bytes + 255) / 256 * 256; };
    // One block: X's parts, W's, and the ranges' sums when batched, each at a 256-byte
    // boundary (cuBLASLt's preferred alignment), then cuBLASLt's own workspace.
    m_w_offset = aligned(std::size_t(M) * 2 * m_Kp * sizeof(float));
    m_p_offset = aligned(m_w_offset + std::size_t(N) * 2 * m_Kp * sizeof(float));
    const std::size_t partial_bytes = std::size_t(m_ranges) * M * N * sizeof(float);
    m_batched = m_ranges > 1 && partial_bytes <= partials_limit;
    m_lt_offset = aligned(m_batched ? m_p_offset + partial_bytes : m_p_offset);
    // Planned on a stand-in base address with the workspace's alignment.
    char* const base = reinterpret_cast<char*>(std::uintptr_t(256));
    m_main.reset(new Planned(m_handle, small_terms(base, Y, bias)));
    m_ranges_product.reset(new Planned(m_handle, range(base, Y, 0)));
    m_workspace = m_lt_offset + std::max(m_main->plan.workspace_bytes(),
                                         m_ranges_product->plan.workspace_bytes());
  }

  /// Bytes of device workspace run() needs (with any of the algorithms held).
  std::size_t workspace_bytes() const { return m_workspace; }

  /// cuBLASLt's algorithms held for the product (1 in 3xtf32, whose several products keep the
  /// heuristic's first), and which one runs.
  int variants() const { return m_precision != Precision::TF32x3 ? m_main->plan.algorithms() : 1; }
  void select(int variant) {
    if (m_precision != Precision::TF32x3) m_main->plan.select(variant);
  }
  /// The configuration of the algorithm that runs (strict, tf32; empty in 3xtf32).
  std::string variant_config() const {
    return m_precision != Precision::TF32x3 ? m_main->plan.config() : std::string();
  }

  /// Why run() cannot take these Views (their leading dimensions or alignment differ from
  /// those the plan was made for: cuBLASLt's kernel was chosen for them), or nullptr.
  template <class XView, class WView, class YView>
  const char* refusal(const XView& X, const WView& W, const YView& Y, bool bias,
                      void* workspace) const {
    const LtCall now = m_precision != Precision::TF32x3
                           ? call_of(X, W, Y, bias)
                           : small_terms(static_cast<char*>(workspace), Y, bias);
    const LtProblem &p = m_main->call.problem, &q = now.problem;
    if (q.lda != p.lda || q.ldb != p.ldb || q.ldc != p.ldc)
      return "cuBLASLt was planned for other leading dimensions";
    if (!lt_alignment_holds(p, now)) return "cuBLASLt's kernel was chosen for more alignment";
    return nullptr;
  }

  /// Enqueues the product on `exec` (whose device is current) with the plan's workspace, for
  /// Views that refusal() accepts.
  template <class XView, class WView, class YView>
  void run(const Kokkos::Cuda& exec, Scalar alpha, const XView& X, const WView& W, Scalar beta,
           const YView& Y, const Scalar* bias, void* workspace) const {
    const cudaStream_t stream = exec.cuda_stream();
    char* const base = static_cast<char*>(workspace);
    if (m_precision != Precision::TF32x3) {
      const LtCall now = call_of(X, W, Y, bias != nullptr);
      m_main->plan.run(m_handle.get(), stream, &alpha, now.A, now.B, &beta, Y.data(), base, bias);
      return;
    }
    if constexpr (!is_double) {
      const std::int64_t M = m_M, N = m_N;
      const LtCall main = small_terms(base, Y, bias != nullptr);
      split(exec, X, Split(x_parts(base), M, 2 * m_Kp), /*lo_first=*/true);
      split(exec, W, Split(w_parts(base), N, 2 * m_Kp), /*lo_first=*/false);
      void* const lt_workspace = base + m_lt_offset;
      m_main->plan.run(m_handle.get(), stream, &alpha, main.A, main.B, &beta, Y.data(),
                       lt_workspace, bias);
      const Scalar zero = 0, one = 1;
      if (m_batched) {
        const LtCall sums = range(base, Y, 0);
        float* const partials = reinterpret_cast<float*>(base + m_p_offset);
        m_ranges_product->plan.run(m_handle.get(), stream, &alpha, sums.A, sums.B, &zero, partials,
                                   lt_workspace, nullptr);
        Kokkos::parallel_for("FusedLinear::3xtf32::add_ranges",
                             elementwise_policy<Kokkos::Cuda, Layout>(exec, M, N),
                             AddPartialSums<YView>{Y, partials, m_ranges, M, N});
        return;
      }
      for (std::int64_t k0 = 0; k0 < m_Kp; k0 += tf32x3_chunk) {
        const LtCall r = range(base, Y, k0);
        m_ranges_product->plan.run(m_handle.get(), stream, &alpha, r.A, r.B, &one, Y.data(),
                                   lt_workspace, nullptr);
      }
    }
  }

 private:
  struct Planned {
    Planned(const LtHandle& handle, const LtCall& c, int algorithms = 1)
        : call(c), plan(handle.get(), c.problem, algorithms) {}
    LtCall call;
    LtPlan plan;
  };

  template <class View>
  static std::int64_t leading(const View& A) {
    return std::int64_t(right ? A.stride(0) : A.stride(1));
  }
  template <class XView, class WView, class YView>
  LtCall call_of(const XView& X, const WView& W, const YView& Y, bool bias) const {
    return lt_call(right, m_M, m_N, m_K, is_double, m_precision == Precision::TF32, X.data(),
                   leading(X), W.data(), leading(W), Y.data(), leading(Y), bias);
  }

  // 3xTF32's split operands in the workspace at `base`: X's [lo | hi] (M x 2 Kp) and W's
  // [hi | lo] (N x 2 Kp), in Y's layout.
  float* x_parts(char* base) const { return reinterpret_cast<float*>(base); }
  float* w_parts(char* base) const { return reinterpret_cast<float*>(base + m_w_offset); }
  std::int64_t split_ld(std::int64_t rows) const { return right ? 2 * m_Kp : rows; }
  /// Column `col` of a split operand with `rows` rows.
  const float* column(const float* S, std::int64_t rows, std::int64_t col) const {
    return S + (right ? col : col * rows);
  }
  /// lo.hi + hi.lo: both parts side by side, one TF32 product over 2 Kp.
  template <class YView>
  LtCall small_terms(char* base, const YView& Y, bool bias) const {
    return lt_call(right, m_M, m_N, 2 * m_Kp, false, true, x_parts(base), split_ld(m_M),
                   w_parts(base), split_ld(m_N), Y.data(), leading(Y), bias);
  }
  /// hi.hi over the range starting at k0 into Y (beta = 1), or all ranges' sums side by side
  /// into the partial sums when batched.
  template <class YView>
  LtCall range(char* base, const YView& Y, std::int64_t k0) const {
    const std::int64_t M = m_M, N = m_N, C = tf32x3_chunk;
    const float* x = column(x_parts(base), M, m_Kp + k0);
    const float* w = column(w_parts(base), N, k0);
    if (!m_batched)
      return lt_call(right, M, N, C, false, true, x, split_ld(M), w, split_ld(N), Y.data(),
                     leading(Y), false);
    const LtBatch batch{m_ranges, right ? C : C * M, right ? C : C * N, M * N};
    return lt_call(right, M, N, C, false, true, x, split_ld(M), w, split_ld(N), base + m_p_offset,
                   right ? N : M, false, batch);
  }
  template <class Source>
  void split(const Kokkos::Cuda& exec, const Source& A, const Split& S, bool lo_first) const {
    const std::int64_t rows = A.extent(0), K = A.extent(1);
    Kokkos::parallel_for(
        "FusedLinear::split_tf32",
        elementwise_policy<Kokkos::Cuda, typename Source::array_layout>(exec, rows, m_Kp),
        SplitTf32Operand<Source, Split>{A, S, K, m_Kp, lo_first});
  }

  LtHandle m_handle;
  Precision m_precision;
  std::int64_t m_M, m_N, m_K, m_Kp = 0, m_ranges = 0;
  std::size_t m_w_offset = 0, m_p_offset = 0, m_lt_offset = 0, m_workspace = 0;
  bool m_batched = false;
  std::unique_ptr<Planned> m_main, m_ranges_product;
};

}  // namespace Impl
}  // namespace FusedLinear

#endif
#endif
