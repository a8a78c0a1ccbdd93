// SPDX-License-Identifier: Apache-2.0
/// \file HostFusedKernel.hpp
/// The host kernel behind fused: a packed GEMM with the epilogue in registers (HostCommon.hpp).
#ifndef FUSED_LINEAR_IMPL_KERNELS_HOST_FUSED_KERNEL_HPP
#define FUSED_LINEAR_IMPL_KERNELS_HOST_FUSED_KERNEL_HPP

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <Kokkos_Core.hpp>

#include "FusedLinear/Epilogue.hpp"
#include "FusedLinear/impl/kernels/HostCommon.hpp"

namespace FusedLinear {
namespace Impl {

/// Y = ep(X . W^T, b) on the host: one work item per tile of Y (HostFusedGrid), K in blocks of
/// kc; in each block the tile's columns of W packed k-major in nr-wide panels (zero past N) and
/// its rows of X in k-major mr-row strips, then every mr x nr micro-tile accumulated in
/// registers over the block, added to Y's partial sums between blocks and put through the
/// epilogue in the last one. Any layout: X, W and Y are read and written through their strides
/// (Y with whole-vector stores where it is contiguous along N).
template <class ExecSpace, class XView, class WView, class BView, class YView>
struct HostFusedKernel {
  using Scalar = typename YView::non_const_value_type;
  using Tiles = HostFusedTiles<Scalar>;
  static constexpr int L = Tiles::lanes, MR = Tiles::mr, NR = Tiles::nr, KC = Tiles::kc;
  using policy_type = Kokkos::TeamPolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>>;
  using member_type = typename policy_type::member_type;

  XView X;
  WView W;
  BView b;
  YView Y;
  LeakyReLUEpilogue<Scalar> ep;
  std::int64_t M, N, K;
  HostFusedGrid grid;

  // The packed W block, then the packed X block (strips of mr rows), from a cache line.
  static std::size_t w_block(const HostFusedGrid& g) { return std::size_t(g.tile_n) * KC; }
  static std::size_t scratch_bytes(const HostFusedGrid& g) {
    return (w_block(g) + std::size_t(g.tile_m) * KC) * sizeof(Scalar) + 64;
  }
  policy_type policy(const ExecSpace& exec) const {
    return policy_type(exec, league_size(grid.items(), M, N), 1)
        .set_scratch_size(1, Kokkos::PerTeam(scratch_bytes(grid)));
  }

  void operator()(const member_type& team) const {
    const std::int64_t item = team.league_rank();
    // Items of one column block are adjacent: the threads working at once share W's block in
    // the last-level cache.
    const std::int64_t m0 = item % grid.tiles_m * grid.tile_m;
    const std::int64_t n0 = item / grid.tiles_m * grid.tile_n;
    const std::int64_t m1 = m0 + grid.tile_m < M ? m0 + grid.tile_m : M;
    const std::int64_t n1 = n0 + grid.tile_n < N ? n0 + grid.tile_n : N;
    const std::int64_t panels = (n1 - n0 + NR - 1) / NR;
    const std::size_t bytes = scratch_bytes(grid);
    auto* const raw = static_cast<char*>(team.team_scratch(1).get_shmem(bytes));
    Scalar* const packed_w =
        reinterpret_cast<Scalar*>((reinterpret_cast<std::uintptr_t>(raw) + 63) / 64 * 64);
    Scalar* const packed_x = packed_w + w_block(grid);

    // Per K block: pack, then each W micro-panel (kc x nr, in L1) against every X strip
    // (mr x kc, from L2).
    for (std::int64_t pc = 0; pc < K; pc += KC) {
      const int kc = K - pc < KC ? int(K - pc) : KC;
      pack_w(n0, n1, pc, kc, packed_w);
      for (std::int64_t m = m0; m < m1; m += MR)
        pack_x(m, m1 - m < MR ? int(m1 - m) : MR, pc, kc, packed_x + (m - m0) * kc);
      const bool first = pc == 0, last = pc + kc == K;
      for (std::int64_t p = 0; p < panels; ++p) {
        const std::int64_t n = n0 + p * NR;
        const int columns = n1 - n < NR ? int(n1 - n) : NR;
        for (std::int64_t m = m0; m < m1; m += MR)
          micro_tile(packed_x + (m - m0) * kc, packed_w + p * kc * NR, kc, m,
                     m1 - m < MR ? int(m1 - m) : MR, n, columns, first, last);
      }
    }
  }

  /// W[n0:n1, pc:pc+kc) as panels of nr columns, each k-major (kc rows of nr values), zero
  /// past N.
  void pack_w(std::int64_t n0, std::int64_t n1, std::int64_t pc, int kc, Scalar* packed) const {
    const std::int64_t ws0 = W.stride(0), ws1 = W.stride(1);
    for (std::int64_t n = n0; n < n1; n += NR) {
      Scalar* const panel = packed + (n - n0) / NR * kc * NR;
      const int columns = n1 - n < NR ? int(n1 - n) : NR;
      if (ws0 == 1 && columns == NR) {
        // LayoutLeft W: the panel's rows are contiguous in W.
        for (int k = 0; k < kc; ++k) {
          const Scalar* const w = W.data() + n + (pc + k) * ws1;
          FUSED_LINEAR_HOST_SIMD(L)
          for (int j = 0; j < NR; ++j) panel[k * NR + j] = w[j];
        }
        continue;
      }
      // W's rows contiguous along K (PyTorch's layout): 16 x 16 blocks transposed in registers
      // (AVX-512, float), or each row read in order and written as a column of the panel.
      int k_done = 0;
#if defined(FUSED_LINEAR_HOST_AVX512_TRANSPOSE)
      if constexpr (std::is_same<Scalar, float>::value && NR % 16 == 0) {
        if (ws1 == 1 && columns == NR) {
          for (; k_done + 16 <= kc; k_done += 16) {
            for (int j0 = 0; j0 < NR; j0 += 16) {
              const float* rows[16];
              for (int j = 0; j < 16; ++j) rows[j] = W.data() + (n + j0 + j) * ws0 + pc + k_done;
              transpose_16x16(rows, panel + k_done * NR + j0, NR, 0xFFFF);
            }
          }
        }
      }
#endif
      for (int j = 0; j < NR; ++j) {
        const Scalar* const w = W.data() + (n + (j < columns ? j : 0)) * ws0 + pc * ws1;
        if (j >= columns) {
          for (int k = k_done; k < kc; ++k) panel[k * NR + j] = Scalar(0);
        } else if (ws1 == 1) {
          for (int k = k_done; k < kc; ++k) panel[k * NR + j] = w[k];
        } else {
          for (int k = k_done; k < kc; ++k) panel[k * NR + j] = w[k * ws1];
        }
      }
    }
  }

  /// X[m:m+rows, pc:pc+kc) k-major (kc rows of mr values); rows past the strip repeat its
  /// first row (computed, never stored).
  void pack_x(std::int64_t m, int rows, std::int64_t pc, int kc, Scalar* packed) const {
    const std::int64_t xs0 = X.stride(0), xs1 = X.stride(1);
    int k_done = 0;
#if defined(FUSED_LINEAR_HOST_AVX512_TRANSPOSE)
    if constexpr (std::is_same<Scalar, float>::value && MR <= 16) {
      if (xs1 == 1) {
        for (; k_done + 16 <= kc; k_done += 16) {
          const float* x[16];
          for (int i = 0; i < 16; ++i)
            x[i] = X.data() + (m + (i < rows ? i : 0)) * xs0 + pc + k_done;
          transpose_16x16(x, packed + k_done * MR, MR, __mmask16((1u << MR) - 1));
        }
      }
    }
#endif
    for (int i = 0; i < MR; ++i) {
      const Scalar* const x = X.data() + (m + (i < rows ? i : 0)) * xs0 + pc * xs1;
      if (xs1 == 1) {
        for (int k = k_done; k < kc; ++k) packed[k * MR + i] = x[k];
      } else {
        for (int k = k_done; k < kc; ++k) packed[k * MR + i] = x[k * xs1];
      }
    }
  }

  /// One mr x nr tile of Y over one K block: kc rank-1 updates from zero, plus Y's partial
  /// sums of the earlier blocks (added after the block: loaded first, they would stall the
  /// multiply-adds for an L3 miss per row, Y being larger than L2; they are prefetched
  /// instead), stored as partial sums or, in the last block, through the epilogue. Each element
  /// of Y is thus ((block 0) + block 1) + ...: one order whatever the thread count.
  void micro_tile(const Scalar* xp, const Scalar* wp, int kc, std::int64_t m, int rows,
                  std::int64_t n, int columns, bool first, bool last) const {
    const std::int64_t ys0 = Y.stride(0), ys1 = Y.stride(1);
    Scalar* const y = Y.data() + m * ys0 + n * ys1;
    const bool whole = columns == NR && ys1 == 1;
#if defined(__GNUC__)
    if (!first && whole) {
      for (int i = 0; i < rows; ++i) {
        FUSED_LINEAR_UNROLL
        for (int j = 0; j < NR; j += 64 / int(sizeof(Scalar)))
          __builtin_prefetch(y + i * ys0 + j, 1);
      }
    }
#endif
    Scalar acc[MR][NR];
    FUSED_LINEAR_UNROLL
    for (int i = 0; i < MR; ++i) {
      FUSED_LINEAR_HOST_SIMD(L)
      for (int j = 0; j < NR; ++j) acc[i][j] = Scalar(0);
    }
    for (int k = 0; k < kc; ++k) {
      FUSED_LINEAR_UNROLL
      for (int i = 0; i < MR; ++i) {
        const Scalar a = xp[k * MR + i];
        FUSED_LINEAR_HOST_SIMD(L)
        for (int j = 0; j < NR; ++j) acc[i][j] += a * wp[k * NR + j];
      }
    }
    if (whole)
      finish_whole(acc, y, ys0, rows, n, first, last);
    else
      finish_edge(acc, y, ys0, ys1, rows, n, columns, first, last);
  }

  /// Partial sums, epilogue and stores of a micro-tile whose nr columns are contiguous in Y:
  /// every loop a whole number of vectors, without per-element conditions (GCC left the
  /// epilogue scalar when they were mixed in).
  void finish_whole(Scalar (&acc)[MR][NR], Scalar* y, std::int64_t ys0, int rows, std::int64_t n,
                    bool first, bool last) const {
    if (!first) {
      FUSED_LINEAR_UNROLL
      for (int i = 0; i < MR; ++i) {
        const Scalar* const yi = y + (i < rows ? i : 0) * ys0;
        FUSED_LINEAR_HOST_SIMD(L)
        for (int j = 0; j < NR; ++j) acc[i][j] = yi[j] + acc[i][j];
      }
    }
    if (last) {
      const LeakyReLUEpilogue<Scalar> e = ep;
      Scalar bias[NR];
      for (int j = 0; j < NR; ++j) bias[j] = b(n + j);
      FUSED_LINEAR_UNROLL
      for (int i = 0; i < MR; ++i) {
        FUSED_LINEAR_HOST_SIMD(L)
        for (int j = 0; j < NR; ++j) acc[i][j] = e(acc[i][j], bias[j]);
      }
    }
    FUSED_LINEAR_UNROLL
    for (int i = 0; i < MR; ++i) {
      if (i < rows) {
        Scalar* const yi = y + i * ys0;
        FUSED_LINEAR_HOST_SIMD(L)
        for (int j = 0; j < NR; ++j) yi[j] = acc[i][j];
      }
    }
  }

  /// The same for the last columns of Y (fewer than nr) or a Y strided along N: element by
  /// element.
  void finish_edge(const Scalar (&acc)[MR][NR], Scalar* y, std::int64_t ys0, std::int64_t ys1,
                   int rows, std::int64_t n, int columns, bool first, bool last) const {
    for (int i = 0; i < rows; ++i) {
      for (int j = 0; j < columns; ++j) {
        Scalar v = acc[i][j];
        if (!first) v = y[i * ys0 + j * ys1] + v;
        if (last) v = ep(v, Scalar(b(n + j)));
        y[i * ys0 + j * ys1] = v;
      }
    }
  }
};

template <class ExecSpace, class XView, class WView, class BView, class YView, class Scalar>
void run_fused_host(const ExecSpace& exec, const XView& X, const WView& W, const BView& b,
                    const YView& Y, const LeakyReLUEpilogue<Scalar>& ep) {
  const std::int64_t M = Y.extent(0), N = Y.extent(1), K = X.extent(1);
  using Tiles = HostFusedTiles<Scalar>;
  const HostFusedGrid grid(M, N, exec.concurrency(), Tiles::mr, Tiles::nr, Tiles::max_rows,
                           Tiles::max_columns);
  using Kernel = HostFusedKernel<ExecSpace, XView, WView, BView, YView>;
  const Kernel kernel{X, W, b, Y, ep, M, N, K, grid};
  Kokkos::parallel_for("FusedLinear::fused[host]", kernel.policy(exec), kernel);
}

}  // namespace Impl
}  // namespace FusedLinear

#endif  // FUSED_LINEAR_IMPL_KERNELS_HOST_FUSED_KERNEL_HPP
