// SPDX-License-Identifier: Apache-2.0
#ifndef FUSED_LINEAR_IMPL_SKINNY_KERNEL_HPP
#define FUSED_LINEAR_IMPL_SKINNY_KERNEL_HPP

#include <cstdint>
#include <stdexcept>
#include <string>

#include <Kokkos_Core.hpp>

#include "FusedLinear_Epilogue.hpp"
#include "impl/FusedLinear_FusedKernel.hpp"

namespace FusedLinear {
namespace Impl {

/// Tile parameters of the skinny kernel (few rows of X: inference-like batches), one place per
/// backend.
///
/// GPU: there the layer is bound by streaming W once (N x K floats), and the 128x128 tiles of
/// the fused kernel would leave most SMs idle and compute mostly padding. A team is `groups`
/// warps; each warp owns `columns` columns of Y (32 per team: N = 8192 gives 256 teams) and its
/// `lanes` split K: lane l reads k = 8l .. 8l + 7 of every 256, so a warp's loads of a W row
/// (or an X row) are 1 KB contiguous. Each lane keeps rows x columns accumulators; every X
/// value it loads serves `columns` columns, every W value `rows` rows. The 32 lanes' partial
/// sums are then added in team scratch in lane order (deterministic), eight rows at a time to
/// stay under 48 KB, and the epilogue writes Y. One launch, no workspace.
/// (A first version with one column per thread and K split across warps ran at 1.5 TB/s on
/// 1x8192x8192 and 0.65 ms on 16x8192x8192: each lane read its own W row, 32 sectors per warp
/// load.)
///
/// Host: one thread per team, the whole K range, the same register tile.
///
/// Status (H200, perf/RESULTS.md): at M = 1 it streams W at 2.8 TB/s and ties cuBLAS; its time
/// then grows with every row (0.57 ms at M = 16 against cuBLAS's 0.18 ms), so `auto` does not
/// choose it yet. The speed-of-light profile in RESULTS.md points at where the time goes.
/// The reduction scratch holds rows_per_reduction x 32 columns x 32 lanes values: 32 KB for
/// float (8 rows) and for double (4 rows), under Kokkos 3.4's 48 KB team scratch cap.
template <class ExecSpace, class Scalar, bool Host = is_host_space<ExecSpace>()>
struct SkinnyTiles {
  static constexpr int lanes = 32, groups = 8, columns = 4, rows = 16;
  static constexpr int rows_per_reduction = sizeof(Scalar) > 4 ? 4 : 8;
};
template <class ExecSpace, class Scalar>
struct SkinnyTiles<ExecSpace, Scalar, true> {
  static constexpr int lanes = 1, groups = 1, columns = 4, rows = 16, rows_per_reduction = 16;
};

/// Y = ep(X . W^T, b) for small M: columns across warps, K across the lanes of a warp.
/// Vectorized has the meaning of FusedLinearKernel's (rows contiguous, packable, aligned).
template <class ExecSpace, class XView, class WView, class BView, class YView, bool Vectorized>
struct SkinnyLinearKernel {
  using Scalar = typename YView::non_const_value_type;
  using Pack = Pack16<Scalar>;
  using Tiles = SkinnyTiles<ExecSpace, Scalar>;
  static constexpr int V = Pack::size;
  static constexpr int L = Tiles::lanes, G = Tiles::groups, R = Tiles::columns;
  static constexpr int MT = Tiles::rows, RC = Tiles::rows_per_reduction;
  static constexpr int team_size = L * G, team_columns = G * R;
  static constexpr int KV = 2 * V;  // k per lane and step: 32 bytes of a row
  static constexpr std::size_t scratch_bytes = std::size_t(RC) * team_columns * L * sizeof(Scalar);
  static_assert(MT % RC == 0, "rows are reduced in whole chunks");

  using policy_type = Kokkos::TeamPolicy<ExecSpace, Kokkos::LaunchBounds<team_size, 1>>;
  using member_type = typename policy_type::member_type;

  XView X;
  WView W;
  BView b;
  YView Y;
  LeakyReLUEpilogue<Scalar> ep;
  std::int64_t M, N, K;

  static policy_type policy(const ExecSpace& exec, std::int64_t M, std::int64_t N) {
    const std::int64_t teams = (N + team_columns - 1) / team_columns;
    return policy_type(exec, league_size(teams, M, N), team_size, 1)
        .set_scratch_size(0, Kokkos::PerTeam(scratch_bytes));
  }

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    const int tid = team.team_rank();
    const int lane = tid % L, group = tid / L;
    const std::int64_t n0 = static_cast<std::int64_t>(team.league_rank()) * team_columns;
    const std::size_t bytes = scratch_bytes;
    Scalar* const partial = static_cast<Scalar*>(team.team_scratch(0).get_shmem(bytes));

    for (std::int64_t m0 = 0; m0 < M; m0 += MT) {
      Scalar acc[MT][R];
      FUSED_LINEAR_UNROLL
      for (int i = 0; i < MT; ++i) {
        FUSED_LINEAR_UNROLL
        for (int r = 0; r < R; ++r) acc[i][r] = Scalar(0);
      }
      for (std::int64_t k = std::int64_t(lane) * KV; k < K; k += std::int64_t(L) * KV) {
        Scalar w[R][KV];
        FUSED_LINEAR_UNROLL
        for (int r = 0; r < R; ++r) {
          const std::int64_t n = n0 + group * R + r;
          if (n < N) {
            load_row(W, n, k, w[r]);
          } else {
            FUSED_LINEAR_UNROLL
            for (int q = 0; q < KV; ++q) w[r][q] = Scalar(0);
          }
        }
        FUSED_LINEAR_UNROLL
        for (int i = 0; i < MT; ++i) {
          if (m0 + i < M) {  // uniform across the team: no divergence
            Scalar x[KV];
            load_row(X, m0 + i, k, x);
            FUSED_LINEAR_UNROLL
            for (int r = 0; r < R; ++r) {
              FUSED_LINEAR_UNROLL
              for (int q = 0; q < KV; ++q) acc[i][r] += x[q] * w[r][q];
            }
          }
        }
      }
      // The L lanes' partial sums of each (row, column), added in lane order: reproducible.
      FUSED_LINEAR_UNROLL
      for (int c0 = 0; c0 < MT; c0 += RC) {
        FUSED_LINEAR_UNROLL
        for (int i = 0; i < RC; ++i) {
          FUSED_LINEAR_UNROLL
          for (int r = 0; r < R; ++r)
            partial[(i * team_columns + group * R + r) * L + lane] = acc[c0 + i][r];
        }
        team.team_barrier();
        for (int e = tid; e < RC * team_columns; e += team_size) {
          const int i = e / team_columns, c = e % team_columns;
          const std::int64_t m = m0 + c0 + i, n = n0 + c;
          if (m < M && n < N) {
            Scalar sum = partial[e * L];
            for (int l = 1; l < L; ++l) sum += partial[e * L + l];
            Y(m, n) = ep(sum, Scalar(b(n)));
          }
        }
        team.team_barrier();  // partial is reused by the next chunk
      }
    }
  }

  // KV consecutive elements of row r from k, zero past K.
  template <class View>
  KOKKOS_FORCEINLINE_FUNCTION void load_row(const View& A, std::int64_t r, std::int64_t k,
                                            Scalar (&out)[KV]) const {
    if (Vectorized && k + KV <= K) {
      const Pack* p = reinterpret_cast<const Pack*>(&A(r, k));
      FUSED_LINEAR_UNROLL
      for (int h = 0; h < KV / V; ++h) {
        const Pack v = p[h];
        FUSED_LINEAR_UNROLL
        for (int q = 0; q < V; ++q) out[h * V + q] = v.v[q];
      }
    } else {
      FUSED_LINEAR_UNROLL
      for (int q = 0; q < KV; ++q) out[q] = k + q < K ? Scalar(A(r, k + q)) : Scalar(0);
    }
  }
};

template <class ExecSpace, class XView, class WView, class BView, class YView, class Scalar>
void run_skinny(const ExecSpace& exec, const XView& X, const WView& W, const BView& b,
                const YView& Y, const LeakyReLUEpilogue<Scalar>& ep) {
  const std::int64_t M = Y.extent(0), N = Y.extent(1), K = X.extent(1);
  const bool vectorized = rows_are_packable(X) && rows_are_packable(W);
  auto launch = [&](auto kernel) {
    using Kernel = decltype(kernel);
    Kokkos::parallel_for(vectorized ? "FusedLinear::fused_skinny[vectorized]"
                                    : "FusedLinear::fused_skinny",
                         Kernel::policy(exec, M, N), kernel);
  };
  if (vectorized) {
    launch(SkinnyLinearKernel<ExecSpace, XView, WView, BView, YView, true>{X, W, b, Y, ep, M, N,
                                                                           K});
  } else {
    launch(SkinnyLinearKernel<ExecSpace, XView, WView, BView, YView, false>{X, W, b, Y, ep, M,
                                                                            N, K});
  }
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
