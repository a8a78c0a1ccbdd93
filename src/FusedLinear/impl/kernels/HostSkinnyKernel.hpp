// SPDX-License-Identifier: Apache-2.0
/// \file HostSkinnyKernel.hpp
/// The host kernel behind fused_skinny: dot products along K for few rows (HostCommon.hpp).
#ifndef FUSED_LINEAR_IMPL_KERNELS_HOST_SKINNY_KERNEL_HPP
#define FUSED_LINEAR_IMPL_KERNELS_HOST_SKINNY_KERNEL_HPP

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <Kokkos_Core.hpp>

#include "FusedLinear/Epilogue.hpp"
#include "FusedLinear/impl/kernels/HostCommon.hpp"

namespace FusedLinear {
namespace Impl {

/// Y = ep(X . W^T, b) for few rows on the host (HostSkinnyTiles). Unit: X and W contiguous
/// along K (LayoutRight, PyTorch's), vector loads; otherwise element loads through strides.
template <class ExecSpace, class XView, class WView, class BView, class YView, bool Unit>
struct HostSkinnyKernel {
  using Scalar = typename YView::non_const_value_type;
  using Tiles = HostSkinnyTiles<Scalar>;
  static constexpr int L = Tiles::lanes, R = Tiles::columns, MT = Tiles::rows;
  using policy_type = Kokkos::RangePolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>,
                                          Kokkos::IndexType<std::int64_t>>;

  XView X;
  WView W;
  BView b;
  YView Y;
  LeakyReLUEpilogue<Scalar> ep;
  std::int64_t M, N, K;
  std::int64_t group;  // columns per work item (skinny_item_columns)

  void operator()(std::int64_t item) const {
    const std::int64_t n_end = (item + 1) * group < N ? (item + 1) * group : N;
    for (std::int64_t n = item * group; n < n_end; n += R) {
      const int columns = n_end - n < R ? int(n_end - n) : R;
      std::int64_t m = 0;
      for (; m + MT <= M; m += MT) block<MT>(m, n, columns);
      // The rest in blocks of 4, 2 and 1 rows (a block computes every one of its rows).
      if constexpr (MT > 4) {
        if (m + 4 <= M) {
          block<4>(m, n, columns);
          m += 4;
        }
      }
      if (m + 2 <= M) {
        block<2>(m, n, columns);
        m += 2;
      }
      if (m < M) block<1>(m, n, columns);
    }
  }

  /// Rows [m, m + Rows) x columns [n, n + columns) of Y.
  template <int Rows>
  void block(std::int64_t m, std::int64_t n, int columns) const {
    const std::int64_t xs0 = X.stride(0), xs1 = X.stride(1);
    const std::int64_t ws0 = W.stride(0), ws1 = W.stride(1);
    const Scalar* x[Rows];
    const Scalar* w[R];
    FUSED_LINEAR_UNROLL
    for (int i = 0; i < Rows; ++i) x[i] = X.data() + (m + i) * xs0;
    // Columns past the group repeat its last one: computed, never stored.
    FUSED_LINEAR_UNROLL
    for (int r = 0; r < R; ++r) w[r] = W.data() + (n + (r < columns ? r : columns - 1)) * ws0;

    Scalar acc[Rows][R][L];
    FUSED_LINEAR_UNROLL
    for (int i = 0; i < Rows; ++i) {
      FUSED_LINEAR_UNROLL
      for (int r = 0; r < R; ++r) {
        FUSED_LINEAR_HOST_SIMD(L)
        for (int q = 0; q < L; ++q) acc[i][r][q] = Scalar(0);
      }
    }
    // Loads straight into the multiply-adds (the compiler keeps each load for the R or Rows
    // uses): with the operands staged in small arrays GCC kept the accumulators in memory.
    const std::int64_t k_vectors = K / L * L;
    for (std::int64_t k = 0; k < k_vectors; k += L) {
      FUSED_LINEAR_UNROLL
      for (int i = 0; i < Rows; ++i) {
        FUSED_LINEAR_UNROLL
        for (int r = 0; r < R; ++r) {
          FUSED_LINEAR_HOST_SIMD(L)
          for (int q = 0; q < L; ++q)
            acc[i][r][q] +=
                Unit ? x[i][k + q] * w[r][k + q] : x[i][(k + q) * xs1] * w[r][(k + q) * ws1];
        }
      }
    }
    // The K % L tail into the lanes (contiguous rows) or after them in k order (strided), the
    // lanes added pairwise (sum_lanes): one fixed order per element.
    const int folded = Unit ? int(K - k_vectors) : 0;
    FUSED_LINEAR_UNROLL
    for (int i = 0; i < Rows; ++i) {
      FUSED_LINEAR_UNROLL
      for (int r = 0; r < R; ++r) {
        Scalar sum = sum_lanes(acc[i][r], x[i] + k_vectors, w[r] + k_vectors, folded);
        for (std::int64_t k = k_vectors + folded; k < K; ++k) sum += x[i][k * xs1] * w[r][k * ws1];
        if (r < columns) Y(m + i, n + r) = ep(sum, Scalar(b(n + r)));
      }
    }
  }
};

template <class ExecSpace, class XView, class WView, class BView, class YView, class Scalar>
void run_skinny_host(const ExecSpace& exec, const XView& X, const WView& W, const BView& b,
                     const YView& Y, const LeakyReLUEpilogue<Scalar>& ep) {
  const std::int64_t M = Y.extent(0), N = Y.extent(1), K = X.extent(1);
  using Tiles = HostSkinnyTiles<Scalar>;
  const std::int64_t threads = exec.concurrency() > 0 ? exec.concurrency() : 1;
  const std::int64_t group = skinny_item_columns(N, threads, Tiles::columns, Tiles::group_columns);
  // Neighbouring items in one chunk, up to 4 (and about four chunks a thread): two threads'
  // items share Y's cache line where they meet, which with one item a chunk was most of Y's
  // lines at short K; longer chunks put the threads' streams of W far apart.
  const std::int64_t items = (N + group - 1) / group, quarter = items / (4 * threads);
  const int chunk = int(quarter > 4 ? 4 : quarter > 1 ? quarter : 1);
  auto launch = [&](auto kernel) {
    using Kernel = decltype(kernel);
    Kokkos::parallel_for("FusedLinear::fused_skinny[host]",
                         typename Kernel::policy_type(exec, 0, items).set_chunk_size(chunk),
                         kernel);
  };
  const bool unit = K <= 1 || (X.stride(1) == 1 && W.stride(1) == 1);
  if (unit)
    launch(HostSkinnyKernel<ExecSpace, XView, WView, BView, YView, true>{X, W, b, Y, ep, M, N, K,
                                                                         group});
  else
    launch(HostSkinnyKernel<ExecSpace, XView, WView, BView, YView, false>{X, W, b, Y, ep, M, N, K,
                                                                          group});
}

}  // namespace Impl
}  // namespace FusedLinear

#endif  // FUSED_LINEAR_IMPL_KERNELS_HOST_SKINNY_KERNEL_HPP
