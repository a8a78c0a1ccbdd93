// SPDX-License-Identifier: Apache-2.0
/// \file FusedKernel.hpp
/// The portable fused kernel: a tiled GEMM in team scratch with the epilogue in registers.
#ifndef FUSED_LINEAR_IMPL_KERNELS_FUSED_KERNEL_HPP
#define FUSED_LINEAR_IMPL_KERNELS_FUSED_KERNEL_HPP

#include <cstdint>

#include <Kokkos_Core.hpp>

#include "FusedLinear/Epilogue.hpp"
#include "FusedLinear/impl/kernels/Common.hpp"
#include "FusedLinear/impl/kernels/HostFusedKernel.hpp"

namespace FusedLinear {
namespace Impl {

/// Tile parameters of the fused kernel on GPUs, the one place where they are set: 128x128 team
/// tiles of 256 threads with 8x8 thread tiles, K step 16, one team per SM (ptxas needs 167
/// registers); double 64x64 with 4x4 (8-byte accumulators spilled at 8x8). The host runs
/// HostFusedKernel instead. Why these values: docs/design/fused-kernel.md#tile-parameters.
///
/// Tuning experiments alone change the GPU float K step and teams per SM: the perf program built
/// with -DFusedLinear_PERF_TILE_K=... / -DFusedLinear_PERF_MIN_TEAMS=... (perf/CMakeLists.txt
/// defines FUSED_LINEAR_PERF_* for that target only); every other translation unit gets these.
#ifdef FUSED_LINEAR_PERF_TILE_K
constexpr int fused_float_tile_k = FUSED_LINEAR_PERF_TILE_K;
#else
constexpr int fused_float_tile_k = 16;
#endif
#ifdef FUSED_LINEAR_PERF_MIN_TEAMS
constexpr int fused_float_min_teams = FUSED_LINEAR_PERF_MIN_TEAMS;
#else
constexpr int fused_float_min_teams = 1;
#endif
template <class ExecSpace, class Scalar, bool Host = is_host_space<ExecSpace>()>
struct FusedTiles {
  static constexpr bool wide = sizeof(Scalar) > 4;
  static constexpr int vector = Pack16<Scalar>::size;
  static constexpr int tile_m = wide ? 64 : 128, tile_n = wide ? 64 : 128;
  static constexpr int tile_k = wide ? 8 : fused_float_tile_k;
  static constexpr int thread_m = wide ? 4 : 8, thread_n = wide ? 4 : 8;
  static constexpr int min_teams_per_sm = wide ? 1 : fused_float_min_teams;
};

/// The fused Linear -> scale -> LeakyReLU kernel: Y = ep(X . W^T, b), one tile of Y per team.
///
/// Vectorized = true requires (checked by the caller): X and W contiguous along their last
/// index, their row strides and K multiples of the pack width, and 16-byte aligned data; Y is
/// then stored in packs where it is likewise (packed_y), else element by element, so an N that
/// is no multiple of 4 does not turn the product's loads element-wise too. Otherwise every
/// access goes through the View with bounds checks (any layout, any shape).
template <class ExecSpace, class XView, class WView, class BView, class YView, bool Vectorized>
struct FusedLinearKernel {
  using Scalar = typename YView::non_const_value_type;
  using Tiles = FusedTiles<ExecSpace, Scalar>;
  using Pack = Pack16<Scalar>;
  static constexpr int V = Tiles::vector;
  static constexpr int BM = Tiles::tile_m, BN = Tiles::tile_n, BK = Tiles::tile_k;
  static constexpr int TM = Tiles::thread_m, TN = Tiles::thread_n;
  static constexpr int threads_m = BM / TM, threads_n = BN / TN;
  static constexpr int team_size = threads_m * threads_n;
  // Rows of a thread tile come in TM / V groups of V consecutive rows, groups BM / (TM / V)
  // apart (likewise for columns): conflict-free 16-byte scratch reads, contiguous global writes.
  static constexpr int row_group_stride = BM / (TM / V), col_group_stride = BN / (TN / V);
  // Scratch is k-major (transposed) so the compute loop reads V consecutive rows at once; the
  // V-element pad keeps 16-byte alignment and spreads the transposing stores over all banks.
  static constexpr int ldx = BM + V, ldw = BN + V;
  static constexpr int stage_size = BK * ldx + BK * ldw;
  static constexpr int x_loads = BM * BK / V / team_size;
  static constexpr int w_loads = BN * BK / V / team_size;

  static_assert(TM % V == 0 && TN % V == 0 && BK % V == 0, "tiles must be whole packs");
  static_assert(BM % TM == 0 && BN % TN == 0, "thread tiles must divide the team tile");
  static_assert(x_loads >= 1 && w_loads >= 1 && x_loads * team_size * V == BM * BK &&
                    w_loads * team_size * V == BN * BK,
                "each thread must load whole packs of the X and W tiles");

  using policy_type =
      Kokkos::TeamPolicy<ExecSpace, Kokkos::LaunchBounds<team_size, Tiles::min_teams_per_sm>>;
  using member_type = typename policy_type::member_type;

  XView X;
  WView W;
  BView b;
  YView Y;
  LeakyReLUEpilogue<Scalar> ep;
  std::int64_t M, N, K;
  int tiles_m;
  bool packed_y;

  static constexpr std::size_t scratch_bytes = 2 * stage_size * sizeof(Scalar);

  static policy_type policy(const ExecSpace& exec, std::int64_t M, std::int64_t N) {
    const std::int64_t tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
    return policy_type(exec, league_size(tiles, M, N), team_size, 1)
        .set_scratch_size(0, Kokkos::PerTeam(scratch_bytes));
  }

  // Global -> registers: thread `tid` loads packs tid, tid + team_size, ... of each tile, each
  // pack being V consecutive k of one row: pack l of thread tid sits at (pack_row, pack_k).
  KOKKOS_FORCEINLINE_FUNCTION static int pack_row(int tid, int l) {
    return (tid + l * team_size) / (BK / V);
  }
  KOKKOS_FORCEINLINE_FUNCTION static int pack_k(int tid, int l) {
    return ((tid + l * team_size) % (BK / V)) * V;
  }

  // Vectorized: one 16-byte load per pack from row pointers computed once per team (the row's
  // first element, null for rows past the end), so the K loop carries no 64-bit index
  // arithmetic. An address is formed only for a pack inside the row (K is whole packs here).
  template <int Loads>
  KOKKOS_FORCEINLINE_FUNCTION static void load_packed(const Scalar* const (&rows)[Loads],
                                                      std::int64_t k, std::int64_t K, int tid,
                                                      Pack (&reg)[Loads]) {
    FUSED_LINEAR_UNROLL
    for (int l = 0; l < Loads; ++l) {
      const std::int64_t kq = k + pack_k(tid, l);
      if (rows[l] != nullptr && kq < K) {
        reg[l] = *reinterpret_cast<const Pack*>(rows[l] + kq);
      } else {
        FUSED_LINEAR_UNROLL
        for (int q = 0; q < V; ++q) reg[l].v[q] = Scalar(0);
      }
    }
  }

  // Any layout: element by element through the View, out-of-range elements as zero.
  template <class View, int Loads>
  KOKKOS_FORCEINLINE_FUNCTION static void load_elements(const View& A, std::int64_t rows,
                                                        std::int64_t K, std::int64_t r0,
                                                        std::int64_t k, int tid,
                                                        Pack (&reg)[Loads]) {
    FUSED_LINEAR_UNROLL
    for (int l = 0; l < Loads; ++l) {
      const std::int64_t r = r0 + pack_row(tid, l), kq = k + pack_k(tid, l);
      FUSED_LINEAR_UNROLL
      for (int q = 0; q < V; ++q)
        reg[l].v[q] = (r < rows && kq + q < K) ? Scalar(A(r, kq + q)) : Scalar(0);
    }
  }

  // Registers -> scratch, transposed to k-major.
  template <int Loads, int Ld>
  KOKKOS_FORCEINLINE_FUNCTION static void store(Scalar* tile, int tid, const Pack (&reg)[Loads]) {
    FUSED_LINEAR_UNROLL
    for (int l = 0; l < Loads; ++l) {
      const int r = pack_row(tid, l), k = pack_k(tid, l);
      FUSED_LINEAR_UNROLL
      for (int q = 0; q < V; ++q) tile[(k + q) * Ld + r] = reg[l].v[q];
    }
  }

  KOKKOS_FORCEINLINE_FUNCTION static int row_in_tile(int i, int ty) {
    return (i / V) * row_group_stride + ty * V + i % V;
  }
  KOKKOS_FORCEINLINE_FUNCTION static int col_in_tile(int j, int tx) {
    return (j / V) * col_group_stride + tx * V + j % V;
  }

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    // Consecutive teams take consecutive row tiles of one column tile: the teams resident at
    // once then share W tiles, and all of X (M x K) stays in L2, so W streams from memory once.
    const int tile = team.league_rank();
    const std::int64_t m0 = static_cast<std::int64_t>(tile % tiles_m) * BM;
    const std::int64_t n0 = static_cast<std::int64_t>(tile / tiles_m) * BN;
    const int tid = team.team_rank();
    const int tx = tid % threads_n, ty = tid / threads_n;
    const std::size_t bytes = scratch_bytes;  // by value: get_shmem takes a reference
    Scalar* const scratch = static_cast<Scalar*>(team.team_scratch(0).get_shmem(bytes));

    Scalar acc[TM][TN];
    FUSED_LINEAR_UNROLL
    for (int i = 0; i < TM; ++i) {
      FUSED_LINEAR_UNROLL
      for (int j = 0; j < TN; ++j) acc[i][j] = Scalar(0);
    }

    const Scalar* x_rows[x_loads] = {};
    const Scalar* w_rows[w_loads] = {};
    if (Vectorized) {
      FUSED_LINEAR_UNROLL
      for (int l = 0; l < x_loads; ++l) {
        const std::int64_t r = m0 + pack_row(tid, l);
        x_rows[l] = r < M ? X.data() + r * std::int64_t(X.stride(0)) : nullptr;
      }
      FUSED_LINEAR_UNROLL
      for (int l = 0; l < w_loads; ++l) {
        const std::int64_t r = n0 + pack_row(tid, l);
        w_rows[l] = r < N ? W.data() + r * std::int64_t(W.stride(0)) : nullptr;
      }
    }
    Pack xr[x_loads], wr[w_loads];
    auto load_step = [&](std::int64_t k0) {
      if (Vectorized) {
        load_packed(x_rows, k0, K, tid, xr);
        load_packed(w_rows, k0, K, tid, wr);
      } else {
        load_elements(X, M, K, m0, k0, tid, xr);
        load_elements(W, N, K, n0, k0, tid, wr);
      }
    };
    load_step(0);
    store<x_loads, ldx>(scratch, tid, xr);
    store<w_loads, ldw>(scratch + BK * ldx, tid, wr);
    team.team_barrier();

    // Double buffering: the next K step's global loads are issued before computing on the
    // current buffer and land in the other one afterwards; one barrier per step suffices since
    // the buffer written in step t was last read in step t - 1, before that step's barrier.
    int buffer = 0;
    for (std::int64_t k0 = 0; k0 < K; k0 += BK) {
      const bool has_next = k0 + BK < K;
      if (has_next) load_step(k0 + BK);
      const Scalar* const xs = scratch + buffer * stage_size;
      const Scalar* const ws = xs + BK * ldx;
      FUSED_LINEAR_UNROLL
      for (int kk = 0; kk < BK; ++kk) {
        Scalar a[TM], w[TN];
        FUSED_LINEAR_UNROLL
        for (int g = 0; g < TM / V; ++g) {
          const Pack p =
              *reinterpret_cast<const Pack*>(xs + kk * ldx + g * row_group_stride + ty * V);
          FUSED_LINEAR_UNROLL
          for (int q = 0; q < V; ++q) a[g * V + q] = p.v[q];
        }
        FUSED_LINEAR_UNROLL
        for (int g = 0; g < TN / V; ++g) {
          const Pack p =
              *reinterpret_cast<const Pack*>(ws + kk * ldw + g * col_group_stride + tx * V);
          FUSED_LINEAR_UNROLL
          for (int q = 0; q < V; ++q) w[g * V + q] = p.v[q];
        }
        FUSED_LINEAR_UNROLL
        for (int i = 0; i < TM; ++i) {
          FUSED_LINEAR_UNROLL
          for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * w[j];
        }
      }
      if (has_next) {
        Scalar* const next = scratch + (buffer ^ 1) * stage_size;
        store<x_loads, ldx>(next, tid, xr);
        store<w_loads, ldw>(next + BK * ldx, tid, wr);
      }
      team.team_barrier();
      buffer ^= 1;
    }

    // Epilogue in registers, then the single write of Y.
    Scalar bias[TN];
    FUSED_LINEAR_UNROLL
    for (int j = 0; j < TN; ++j) {
      const std::int64_t n = n0 + col_in_tile(j, tx);
      bias[j] = n < N ? Scalar(b(n)) : Scalar(0);
    }
    FUSED_LINEAR_UNROLL
    for (int i = 0; i < TM; ++i) {
      const std::int64_t m = m0 + row_in_tile(i, ty);
      if (m >= M) continue;
      FUSED_LINEAR_UNROLL
      for (int g = 0; g < TN / V; ++g) {
        const std::int64_t n = n0 + col_in_tile(g * V, tx);
        if (Vectorized && packed_y) {
          if (n < N) {
            Pack out;
            FUSED_LINEAR_UNROLL
            for (int q = 0; q < V; ++q) out.v[q] = ep(acc[i][g * V + q], bias[g * V + q]);
            *reinterpret_cast<Pack*>(Y.data() + m * std::int64_t(Y.stride(0)) + n) = out;
          }
        } else {
          FUSED_LINEAR_UNROLL
          for (int q = 0; q < V; ++q)
            if (n + q < N) Y(m, n + q) = ep(acc[i][g * V + q], bias[g * V + q]);
        }
      }
    }
  }
};

/// Y = ep(X . W^T, b) through FusedLinearKernel (GPUs).
template <class ExecSpace, class XView, class WView, class BView, class YView, class Scalar>
void run_fused_portable(const ExecSpace& exec, const XView& X, const WView& W, const BView& b,
                        const YView& Y, const LeakyReLUEpilogue<Scalar>& ep) {
  const std::int64_t M = Y.extent(0), N = Y.extent(1), K = X.extent(1);
  const bool vectorized = rows_are_packable(X) && rows_are_packable(W);
  const bool packed_y = rows_are_packable(Y);
  auto launch = [&](auto kernel) {
    using Kernel = decltype(kernel);
    kernel.tiles_m = static_cast<int>((M + Kernel::BM - 1) / Kernel::BM);
    kernel.packed_y = packed_y;
    Kokkos::parallel_for(vectorized ? "FusedLinear::fused[vectorized]" : "FusedLinear::fused",
                         Kernel::policy(exec, M, N), kernel);
  };
  if (vectorized) {
    launch(FusedLinearKernel<ExecSpace, XView, WView, BView, YView, true>{X, W, b, Y, ep, M, N, K,
                                                                          0, false});
  } else {
    launch(FusedLinearKernel<ExecSpace, XView, WView, BView, YView, false>{X, W, b, Y, ep, M, N, K,
                                                                           0, false});
  }
}

/// Y = ep(X . W^T, b) through the fused kernel of ExecSpace's kind: FusedLinearKernel on GPUs,
/// HostFusedKernel (HostFusedKernel.hpp) on the host.
template <class ExecSpace, class XView, class WView, class BView, class YView, class Scalar>
void run_fused(const ExecSpace& exec, const XView& X, const WView& W, const BView& b,
               const YView& Y, const LeakyReLUEpilogue<Scalar>& ep) {
  if constexpr (is_host_space<ExecSpace>())
    run_fused_host(exec, X, W, b, Y, ep);
  else
    run_fused_portable(exec, X, W, b, Y, ep);
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
