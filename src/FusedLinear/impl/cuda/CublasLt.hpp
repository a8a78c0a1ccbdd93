// SPDX-License-Identifier: Apache-2.0
/// \file CublasLt.hpp
/// cuBLASLt, called directly by the vendor_lt path and the vendor 3xTF32 products. Built when
/// the CMake package found CUDA's cublasLt (FusedLinear/Config.hpp then defines
/// FUSED_LINEAR_ENABLE_CUBLASLT).
///
/// Why beside KokkosBlas::gemm: cuBLASLt takes the stream, the compute type (TF32 without touching
/// a shared handle's math mode), the operands' alignment and a bias epilogue per descriptor; it
/// is also what PyTorch's Linear calls. On an H200 it picks the same fp32 SIMT kernel as Kokkos
/// Kernels' cublasSgemm at the large shapes (docs/design/vendor-paths.md#cublaslt-vendor_lt).
///
/// A plan owns its handle and its descriptors (made once, with the heuristic's choice, when the
/// plan is made: the query costs more than a small product); nothing here is process-wide.
#ifndef FUSED_LINEAR_IMPL_CUDA_CUBLASLT_HPP
#define FUSED_LINEAR_IMPL_CUDA_CUBLASLT_HPP

#include <Kokkos_Core.hpp>  // KOKKOS_ENABLE_CUDA

#include "FusedLinear/Config.hpp"

#if defined(FUSED_LINEAR_ENABLE_CUBLASLT) && defined(KOKKOS_ENABLE_CUDA)
#define FUSED_LINEAR_CUBLASLT 1

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include <cublasLt.h>
#include <cuda_runtime.h>

namespace FusedLinear {
namespace Impl {

[[noreturn]] inline void cublaslt_fail(const char* what, int status) {
  throw std::runtime_error(std::string("FusedLinear: cuBLASLt cannot ") + what + " (status " +
                           std::to_string(status) + ")");
}
inline void lt_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) cublaslt_fail(what, int(s));
}
inline void lt_check(cudaError_t s, const char* what) {
  if (s != cudaSuccess) cublaslt_fail(what, int(s));
}

/// One column-major problem C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C, as cuBLASLt
/// takes it, plus what changes the kernel choice: compute type and pointer alignments.
struct LtProblem {
  std::int64_t m, n, k, lda, ldb, ldc;
  bool trans_a, trans_b, is_double, tf32;
  bool bias;  // CUBLASLT_EPILOGUE_BIAS: C += bias broadcast along C's columns (length m)
  int align_a, align_b, align_c;
  // Strided batch: `batch` products, operand i at A + i * stride_a etc. (1: a single product).
  std::int64_t batch, stride_a, stride_b, stride_c;
};

/// Descriptors and the heuristic's algorithm for one LtProblem (created once, then reused:
/// the heuristic query costs more than a small product).
class LtPlan {
 public:
  /// `algorithms`: how many of the heuristic's ranked algorithms to hold (1: its first; more:
  /// also its first within PyTorch's workspace, where it differs).
  LtPlan(cublasLtHandle_t handle, const LtProblem& p, int algorithms = 1) {
    const cudaDataType_t type = p.is_double ? CUDA_R_64F : CUDA_R_32F;
    const cublasComputeType_t compute =
        p.is_double ? CUBLAS_COMPUTE_64F
                    : (p.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
    m_compute = compute, m_scale = type, m_type = type;
    lt_check(cublasLtMatmulDescCreate(&m_op, compute, type), "create a matmul descriptor");
    const cublasOperation_t ta = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    lt_check(cublasLtMatmulDescSetAttribute(m_op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)),
             "set TRANSA");
    lt_check(cublasLtMatmulDescSetAttribute(m_op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)),
             "set TRANSB");
    if (p.bias) {
      const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      lt_check(cublasLtMatmulDescSetAttribute(m_op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                              sizeof(epilogue)),
               "set the bias epilogue");
    }
    lt_check(
        cublasLtMatrixLayoutCreate(&m_a, type, p.trans_a ? p.k : p.m, p.trans_a ? p.m : p.k, p.lda),
        "create the layout of A");
    lt_check(
        cublasLtMatrixLayoutCreate(&m_b, type, p.trans_b ? p.n : p.k, p.trans_b ? p.k : p.n, p.ldb),
        "create the layout of B");
    lt_check(cublasLtMatrixLayoutCreate(&m_c, type, p.m, p.n, p.ldc), "create the layout of C");
    if (p.batch > 1) {
      const std::int32_t count = static_cast<std::int32_t>(p.batch);
      const std::pair<cublasLtMatrixLayout_t, std::int64_t> layouts[] = {
          {m_a, p.stride_a}, {m_b, p.stride_b}, {m_c, p.stride_c}};
      for (const auto& l : layouts) {
        lt_check(cublasLtMatrixLayoutSetAttribute(l.first, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                  &count, sizeof(count)),
                 "set the batch count");
        lt_check(
            cublasLtMatrixLayoutSetAttribute(l.first, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                             &l.second, sizeof(l.second)),
            "set the batch stride");
      }
    }

    // The heuristic's ranked algorithms: its first choice alone unless Planning::Measure times
    // the first few (Planner.hpp; measurements in docs/design/dispatch.md). Measure also times
    // its first choice within PyTorch's default cuBLASLt workspace (1 MiB) where that differs:
    // PyTorch's own call, which at some shapes is the faster.
    cublasLtMatmulHeuristicResult_t results[max_algorithms] = {};
    const int asked = std::max(1, std::min(algorithms, max_algorithms - 1));
    int found = 0;
    const cublasStatus_t s = heuristic(handle, p, workspace_limit, asked, results, found);
    for (int i = 0; s == CUBLAS_STATUS_SUCCESS && i < found && i < asked; ++i) {
      if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
      m_algos[m_count] = results[i].algo;
      m_sizes[m_count] = results[i].workspaceSize;
      ++m_count;
    }
    cublasLtMatmulHeuristicResult_t small = {};
    int small_found = 0;
    if (m_count > 0 && algorithms > 1 &&
        heuristic(handle, p, pytorch_workspace, 1, &small, small_found) == CUBLAS_STATUS_SUCCESS &&
        small_found == 1 && small.state == CUBLAS_STATUS_SUCCESS &&
        std::none_of(m_algos, m_algos + m_count, [&](const cublasLtMatmulAlgo_t& held) {
          return std::memcmp(&held, &small.algo, sizeof(held)) == 0;
        })) {
      // Second in line: timed right after the first.
      std::move_backward(m_algos + 1, m_algos + m_count, m_algos + m_count + 1);
      std::move_backward(m_sizes + 1, m_sizes + m_count, m_sizes + m_count + 1);
      m_algos[1] = small.algo;
      m_sizes[1] = small.workspaceSize;
      ++m_count;
    }
    if (s != CUBLAS_STATUS_SUCCESS || m_count == 0) {
      destroy();
      cublaslt_fail("find an algorithm for this product", int(s));
    }
  }
  ~LtPlan() { destroy(); }
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;

  /// Workspace for any of the algorithms held (so that select() needs no other).
  std::size_t workspace_bytes() const {
    std::size_t bytes = 0;
    for (int i = 0; i < m_count; ++i) bytes = std::max(bytes, m_sizes[i]);
    return bytes;
  }
  /// The heuristic's algorithms held, in its order, and which one run() uses (0: its first;
  /// clamped to those held).
  int algorithms() const { return m_count; }
  void select(int i) { m_chosen = std::max(0, std::min(i, m_count - 1)); }

  /// The selected algorithm's configuration as text: its id and configuration attributes (tile,
  /// stages, split K, reduction, swizzling, custom option, inner and cluster shapes), which
  /// identify it for this cuBLASLt, unlike its rank in one heuristic query's list.
  std::string config() const {
    std::string text;
    for (const cublasLtMatmulAlgoConfigAttributes_t a : config_attributes) {
      std::uint64_t value = 0;
      std::size_t size = 0;
      if (cublasLtMatmulAlgoConfigGetAttribute(&m_algos[m_chosen], a, nullptr, 0, &size) !=
              CUBLAS_STATUS_SUCCESS ||
          size > sizeof(value) ||
          cublasLtMatmulAlgoConfigGetAttribute(&m_algos[m_chosen], a, &value, size, &size) !=
              CUBLAS_STATUS_SUCCESS)
        value = 0;
      text += (text.empty() ? "" : ",") + std::to_string(value);
    }
    return text;
  }

  /// Selects the algorithm of configuration `config` (config()'s text, from wisdom): one of
  /// those held, else made from the configuration (cublasLtMatmulAlgoInit and its attributes),
  /// if cuBLASLt checks that it runs this product. Where it cannot, the selection stays.
  void adopt(cublasLtHandle_t handle, const std::string& config) {
    const int before = m_chosen;
    for (int i = 0; i < m_count; ++i) {
      m_chosen = i;
      if (this->config() == config) return;
    }
    m_chosen = before;
    std::uint64_t values[sizeof(config_attributes) / sizeof(config_attributes[0])] = {};
    std::size_t n = 0, at = 0;
    while (n < sizeof(values) / sizeof(values[0]) && at <= config.size()) {
      const std::size_t comma = std::min(config.find(',', at), config.size());
      values[n++] = std::strtoull(config.substr(at, comma - at).c_str(), nullptr, 10);
      at = comma + 1;
    }
    if (n != sizeof(values) / sizeof(values[0]) || m_count >= max_algorithms) return;
    cublasLtMatmulAlgo_t algo;
    if (cublasLtMatmulAlgoInit(handle, m_compute, m_scale, m_type, m_type, m_type, m_type,
                               int(values[0]), &algo) != CUBLAS_STATUS_SUCCESS)
      return;
    for (std::size_t i = 1; i < n; ++i) {
      std::size_t size = 0;
      if (cublasLtMatmulAlgoConfigGetAttribute(&algo, config_attributes[i], nullptr, 0, &size) !=
              CUBLAS_STATUS_SUCCESS ||
          size > sizeof(std::uint64_t))
        return;
      // The attributes are little-endian integers of 2 or 4 bytes: their low bytes.
      if (cublasLtMatmulAlgoConfigSetAttribute(&algo, config_attributes[i], &values[i], size) !=
          CUBLAS_STATUS_SUCCESS)
        return;
    }
    cublasLtMatmulHeuristicResult_t checked = {};
    if (cublasLtMatmulAlgoCheck(handle, m_op, m_a, m_b, m_c, m_c, &algo, &checked) !=
            CUBLAS_STATUS_SUCCESS ||
        checked.state != CUBLAS_STATUS_SUCCESS || checked.workspaceSize > workspace_limit)
      return;
    m_algos[m_count] = algo;
    m_sizes[m_count] = checked.workspaceSize;
    m_chosen = m_count++;
  }
  /// Enqueues the product on `stream` (`workspace`: workspace_bytes() on that stream; `bias`:
  /// the bias vector when the plan has the bias epilogue).
  void run(cublasLtHandle_t handle, cudaStream_t stream, const void* alpha, const void* A,
           const void* B, const void* beta, void* C, void* workspace, const void* bias) const {
    if (bias != nullptr)
      lt_check(cublasLtMatmulDescSetAttribute(m_op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                              sizeof(bias)),
               "set the bias pointer");
    lt_check(cublasLtMatmul(handle, m_op, alpha, A, m_a, B, m_b, beta, C, m_c, C, m_c,
                            &m_algos[m_chosen], workspace, m_sizes[m_chosen], stream),
             "run the product");
  }

  static constexpr std::uint64_t workspace_limit = std::uint64_t(32) << 20;
  /// PyTorch's default cuBLASLt workspace (CUBLASLT_WORKSPACE_SIZE unset).
  static constexpr std::uint64_t pytorch_workspace = std::uint64_t(1) << 20;
  /// The most of the heuristic's algorithms a plan holds.
  static constexpr int max_algorithms = 8;

 private:
  /// The heuristic's first `count` algorithms for this problem within `max_workspace` bytes.
  cublasStatus_t heuristic(cublasLtHandle_t handle, const LtProblem& p, std::uint64_t max_workspace,
                           int count, cublasLtMatmulHeuristicResult_t* results, int& found) const {
    cublasLtMatmulPreference_t pref;
    lt_check(cublasLtMatmulPreferenceCreate(&pref), "create a preference");
    const std::uint32_t aa = p.align_a, ab = p.align_b, ac = p.align_c;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                         &max_workspace, sizeof(max_workspace));
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aa,
                                         sizeof(aa));
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ab,
                                         sizeof(ab));
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ac,
                                         sizeof(ac));
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ac,
                                         sizeof(ac));
    const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(handle, m_op, m_a, m_b, m_c, m_c, pref,
                                                            count, results, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    return s;
  }
  void destroy() {
    if (m_c) cublasLtMatrixLayoutDestroy(m_c);
    if (m_b) cublasLtMatrixLayoutDestroy(m_b);
    if (m_a) cublasLtMatrixLayoutDestroy(m_a);
    if (m_op) cublasLtMatmulDescDestroy(m_op);
    m_a = m_b = m_c = nullptr;
    m_op = nullptr;
  }
  /// What identifies an algorithm besides its id (config(), adopt()), in config()'s order.
  static constexpr cublasLtMatmulAlgoConfigAttributes_t config_attributes[] = {
      CUBLASLT_ALGO_CONFIG_ID,
      CUBLASLT_ALGO_CONFIG_TILE_ID,
      CUBLASLT_ALGO_CONFIG_STAGES_ID,
      CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
      CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
      CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING,
      CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION,
      CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID,
      CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID};
  cublasComputeType_t m_compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t m_scale = CUDA_R_32F, m_type = CUDA_R_32F;
  cublasLtMatmulDesc_t m_op = nullptr;
  cublasLtMatrixLayout_t m_a = nullptr, m_b = nullptr, m_c = nullptr;
  cublasLtMatmulAlgo_t m_algos[max_algorithms] = {};
  std::size_t m_sizes[max_algorithms] = {};
  int m_count = 0, m_chosen = 0;
};

/// A cuBLASLt handle, owned (made and destroyed) by one plan.
class LtHandle {
 public:
  LtHandle() { lt_check(cublasLtCreate(&m_handle), "create its handle"); }
  ~LtHandle() {
    if (m_handle) cublasLtDestroy(m_handle);
  }
  LtHandle(const LtHandle&) = delete;
  LtHandle& operator=(const LtHandle&) = delete;
  cublasLtHandle_t get() const { return m_handle; }

 private:
  cublasLtHandle_t m_handle = nullptr;
};

/// Largest power of two (up to 256) dividing the address: cuBLASLt must not pick a kernel
/// that assumes more alignment than a subview's pointer has.
inline int pointer_alignment(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  int align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

/// A strided batch of products: `count` of them, the i-th on X + i * x_stride, W + i * w_stride
/// and Y + i * y_stride.
struct LtBatch {
  std::int64_t count = 1, x_stride = 0, w_stride = 0, y_stride = 0;
};

/// The cuBLASLt problem of Y = alpha X . W^T + beta Y (plus `bias` on every row when asked),
/// X [M,K], W [N,K], Y [M,N] row-major (`right`) or column-major, given by their first elements
/// and leading dimensions (elements between rows, respectively columns). Row-major Y = X . W^T
/// is column-major Y^T[N,M] = W[N,K] . X^T[K,M]: A = W read transposed, B = X as stored.
struct LtCall {
  LtProblem problem;
  const void* A;
  const void* B;
};
inline LtCall lt_call(bool right, std::int64_t M, std::int64_t N, std::int64_t K, bool is_double,
                      bool tf32, const void* X, std::int64_t ldx, const void* W, std::int64_t ldw,
                      const void* Y, std::int64_t ldy, bool bias, const LtBatch& batch = {}) {
  LtProblem p{};
  p.k = K;
  p.batch = batch.count;
  p.stride_c = batch.y_stride;
  p.is_double = is_double;
  p.tf32 = tf32;
  p.bias = bias;
  const void *A, *B;
  // A leading dimension must cover its row or column even where a stride is meaningless (an
  // extent of 1).
  if (right) {
    p.m = N, p.n = M, p.trans_a = true, p.trans_b = false;
    A = W, B = X;
    p.lda = std::max(ldw, K), p.ldb = std::max(ldx, K), p.ldc = std::max(ldy, N);
    p.stride_a = batch.w_stride, p.stride_b = batch.x_stride;
  } else {
    p.m = M, p.n = N, p.trans_a = false, p.trans_b = true;
    A = X, B = W;
    p.lda = std::max(ldx, M), p.ldb = std::max(ldw, N), p.ldc = std::max(ldy, M);
    p.stride_a = batch.x_stride, p.stride_b = batch.w_stride;
  }
  p.align_a = pointer_alignment(A), p.align_b = pointer_alignment(B);
  p.align_c = pointer_alignment(Y);
  return {p, A, B};
}

/// True when a call's operands are at least as aligned as those the plan was made for (the
/// kernel the heuristic chose may rely on it).
inline bool lt_alignment_holds(const LtProblem& planned, const LtCall& now) {
  return now.problem.align_a >= planned.align_a && now.problem.align_b >= planned.align_b &&
         now.problem.align_c >= planned.align_c;
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
#endif
