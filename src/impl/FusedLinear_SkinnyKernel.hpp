// SPDX-License-Identifier: Apache-2.0
#ifndef FUSED_LINEAR_IMPL_SKINNY_KERNEL_HPP
#define FUSED_LINEAR_IMPL_SKINNY_KERNEL_HPP

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <Kokkos_Core.hpp>

#include "FusedLinear_Epilogue.hpp"
#include "impl/FusedLinear_FusedKernel.hpp"

namespace FusedLinear {
namespace Impl {

/// Tile parameters of the skinny kernel (few rows of X: inference-like batches, and small
/// problems), one place per backend.
///
/// GPU: the layer is bound by streaming W (N x K) once, and the 128x128 tiles of the fused
/// kernel would leave most SMs idle and compute mostly padding. A team owns `rows` = 8 rows and
/// `groups * columns` = 32 columns of Y (N = 8192 gives 256 teams per row block: two resident
/// per SM). Each warp owns `columns` rows of W and its `lanes` split K: per step lane l loads
/// one 16-byte pack of each of its W rows at k = 4l (coalesced 512-byte warp loads); `steps`
/// steps form a chunk of K whose W loads are all requested right after the previous chunk's
/// FMAs, so they are in flight during X's staging and the barrier. X's chunk (8 x 256 values)
/// is staged in team scratch, double-buffered, with coalesced 16-byte loads: every warp then
/// reads it at shared-memory latency. Row blocks of one column block are adjacent in the
/// league, so a second row block mostly reads W from L2. At the end the 32 lanes' partial sums
/// are added in team scratch in lane order (deterministic; rows padded against bank
/// conflicts) and the epilogue writes Y. One launch, no workspace.
/// For M > 8 (float) a tall variant takes 16 rows and 1 step per chunk (64 accumulators + 16 W
/// values): W is read once for 16 rows instead of twice.
/// Why these values (H200, 2026-11-30, perf/RESULTS.md): they stay within the 128 registers
/// that `min_teams` = 2 teams of 256 threads per SM allow, with no spills; 16 rows with 2 steps
/// spilled and ran 1.2-1.7x slower at M = 1..64, 8 rows with 4 steps 1.3-1.5x slower. 16 rows
/// with 1 step: 0.129 ms against 0.153 at M = 16, 0.238 against 0.277 at M = 32, but 0.093
/// against 0.082 at M = 1 (half the W bytes in flight per chunk), hence the switch at M > 8.
/// History: reading X from global memory at every step (16 dependent L2 round trips) took
/// 0.57 ms at 16x8192x8192; now 0.129 ms, and 0.082 ms at M = 1 (3.3 TB/s of W, faster than
/// cuBLAS's GEMV-like kernel).
///
/// Host: one thread per team, X read in place (no staging), 16 rows x 4 columns, 2 packs of K
/// per chunk; the 4 columns' multiply-adds as one SIMD vector (`simd_columns`: GCC emitted
/// scalar ones otherwise, 2x slower). 1.5-1.9x faster than fused on a 2-core host at every
/// shape measured (perf/RESULTS.md), so host `auto` takes it throughout.
template <class ExecSpace, class Scalar, bool Tall, bool Host = is_host_space<ExecSpace>()>
struct SkinnyTiles {
  static constexpr bool wide = sizeof(Scalar) > 4;
  static constexpr int lanes = 32, groups = 8, columns = 4;
  static constexpr int rows = Tall && !wide ? 16 : 8, steps = Tall && !wide ? 1 : 2;
  static constexpr int rows_per_reduction = wide ? 4 : 8, min_teams = 2;
  static constexpr bool stage_x = true, simd_columns = false;
};
template <class ExecSpace, class Scalar, bool Tall>
struct SkinnyTiles<ExecSpace, Scalar, Tall, true> {
  static constexpr int lanes = 1, groups = 1, columns = 4, rows = 16, steps = 2;
  static constexpr int rows_per_reduction = 16, min_teams = 1;
  static constexpr bool stage_x = false, simd_columns = true;
};

/// Y = ep(X . W^T, b) for small M: rows of Y in blocks, columns across warps, K across the
/// lanes of a warp. Vectorized has the meaning of FusedLinearKernel's (rows contiguous,
/// packable, aligned).
template <class ExecSpace, class XView, class WView, class BView, class YView, bool Vectorized,
          bool Tall>
struct SkinnyLinearKernel {
  using Scalar = typename YView::non_const_value_type;
  using Pack = Pack16<Scalar>;
  using Tiles = SkinnyTiles<ExecSpace, Scalar, Tall>;
  static constexpr int V = Pack::size;
  static constexpr int L = Tiles::lanes, G = Tiles::groups, R = Tiles::columns;
  static constexpr int MT = Tiles::rows, S = Tiles::steps, RC = Tiles::rows_per_reduction;
  static constexpr bool stage_x = Tiles::stage_x;
  static constexpr int team_size = L * G, team_columns = G * R;
  static constexpr int KS = L * V;   // k covered by one step of a warp
  static constexpr int KC = KS * S;  // k per chunk
  static constexpr int stage_packs = stage_x ? MT * KC / V / team_size : 0;  // per thread
  static constexpr std::size_t stage_bytes =
      stage_x ? 2 * std::size_t(MT) * KC * sizeof(Scalar) : 0;
  static constexpr std::size_t reduce_bytes =
      L > 1 ? std::size_t(RC) * team_columns * (L + 1) * sizeof(Scalar) : 0;
  static constexpr std::size_t scratch_bytes =
      stage_bytes > reduce_bytes ? stage_bytes : reduce_bytes;
  static_assert(MT % RC == 0, "rows are reduced in whole chunks");
  static_assert(!stage_x || (MT * KC / V) % team_size == 0, "the team stages whole X chunks");

  using policy_type =
      Kokkos::TeamPolicy<ExecSpace, Kokkos::LaunchBounds<team_size, Tiles::min_teams>>;
  using member_type = typename policy_type::member_type;

  XView X;
  WView W;
  BView b;
  YView Y;
  LeakyReLUEpilogue<Scalar> ep;
  std::int64_t M, N, K;

  static std::int64_t row_blocks(std::int64_t M) { return (M + MT - 1) / MT; }

  static policy_type policy(const ExecSpace& exec, std::int64_t M, std::int64_t N) {
    const std::int64_t teams = (N + team_columns - 1) / team_columns * row_blocks(M);
    auto p = policy_type(exec, league_size(teams, M, N), team_size, 1);
    if (scratch_bytes > 0) p.set_scratch_size(0, Kokkos::PerTeam(scratch_bytes));
    return p;
  }

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    const int tid = team.team_rank();
    const int lane = tid % L, group = tid / L;
    // Teams of one column block are adjacent in the league, so the row blocks that share W
    // run together and the second reads it from L2.
    const std::int64_t blocks = (M + MT - 1) / MT;
    const std::int64_t m0 = (team.league_rank() % blocks) * MT;
    const std::int64_t n0 = (team.league_rank() / blocks) * team_columns;
    const int rows_here = M - m0 < MT ? int(M - m0) : MT;
    const std::size_t bytes = scratch_bytes;  // a copy: nvcc cannot odr-use the static member
    Scalar* const shared =
        bytes > 0 ? static_cast<Scalar*>(team.team_scratch(0).get_shmem(bytes)) : nullptr;

    Scalar acc[MT][R];
    FUSED_LINEAR_UNROLL
    for (int i = 0; i < MT; ++i) {
      FUSED_LINEAR_UNROLL
      for (int r = 0; r < R; ++r) acc[i][r] = Scalar(0);
    }

    const std::int64_t chunks = (K + KC - 1) / KC;
    // W of chunk c + 1 is requested right after chunk c's FMAs, so its loads are in flight
    // during X's staging and the barrier instead of after them.
    Scalar w[S][R][V];
    load_w_chunk(group, lane, n0, 0, w);
    if (stage_x) {
      stage_x_chunk(tid, m0, 0, shared);
      team.team_barrier();
    }
    for (std::int64_t c = 0; c < chunks; ++c) {
      const std::int64_t k0 = c * KC;
      const Scalar* xs = stage_x ? shared + (c & 1) * MT * KC : nullptr;
      FUSED_LINEAR_UNROLL
      for (int s = 0; s < S; ++s) {
        const int kk = s * KS + lane * V;
        // Host: W's pack transposed, columns innermost, so that the R columns are one SIMD
        // vector (GCC emitted only scalar multiply-adds otherwise); the transpose pays off over
        // several rows, not one. Each acc[i][r] adds its V products in q order either way, so the
        // vector loop gives the scalar loop's bits.
        const bool simd = Tiles::simd_columns && rows_here > 1;
        Scalar wt[Tiles::simd_columns ? V : 1][R];
        if (simd) {
          FUSED_LINEAR_UNROLL
          for (int q = 0; q < V; ++q) {
            FUSED_LINEAR_UNROLL
            for (int r = 0; r < R; ++r) wt[q][r] = w[s][r][q];
          }
        }
        FUSED_LINEAR_UNROLL
        for (int i = 0; i < MT; ++i) {
          if (i < rows_here) {  // uniform across the team: no divergence
            Scalar x[V];
            if (stage_x) {
              const Pack p = *reinterpret_cast<const Pack*>(xs + i * KC + kk);
              FUSED_LINEAR_UNROLL
              for (int q = 0; q < V; ++q) x[q] = p.v[q];
            } else {
              load_row(X, m0 + i, M, k0 + kk, x);
            }
            if (simd) {
              FUSED_LINEAR_UNROLL
              for (int q = 0; q < V; ++q) {
                FUSED_LINEAR_SIMD
                for (int r = 0; r < R; ++r) acc[i][r] += x[q] * wt[q][r];
              }
            } else {
              FUSED_LINEAR_UNROLL
              for (int r = 0; r < R; ++r) {
                FUSED_LINEAR_UNROLL
                for (int q = 0; q < V; ++q) acc[i][r] += x[q] * w[s][r][q];
              }
            }
          }
        }
      }
      if (c + 1 < chunks) load_w_chunk(group, lane, n0, k0 + KC, w);
      if (stage_x) {
        if (c + 1 < chunks) stage_x_chunk(tid, m0, k0 + KC, shared + ((c + 1) & 1) * MT * KC);
        team.team_barrier();  // the next chunk is staged; this one is free to overwrite
      }
    }

    if (L == 1) {
      FUSED_LINEAR_UNROLL
      for (int i = 0; i < MT; ++i) {
        FUSED_LINEAR_UNROLL
        for (int r = 0; r < R; ++r) {
          const std::int64_t n = n0 + group * R + r;
          if (i < rows_here && n < N) Y(m0 + i, n) = ep(acc[i][r], Scalar(b(n)));
        }
      }
      return;
    }
    // The L lanes' partial sums of each (row, column), added in lane order: reproducible.
    // Row stride L + 1 keeps both the stores (by lane) and the sums (by output) conflict-free.
    FUSED_LINEAR_UNROLL
    for (int c0 = 0; c0 < MT; c0 += RC) {
      if (c0 < rows_here) {
        FUSED_LINEAR_UNROLL
        for (int i = 0; i < RC; ++i) {
          FUSED_LINEAR_UNROLL
          for (int r = 0; r < R; ++r)
            shared[(i * team_columns + group * R + r) * (L + 1) + lane] = acc[c0 + i][r];
        }
        team.team_barrier();
        for (int e = tid; e < RC * team_columns; e += team_size) {
          const int i = e / team_columns, col = e % team_columns;
          const std::int64_t m = m0 + c0 + i, n = n0 + col;
          if (m < M && n < N) {
            Scalar sum = shared[e * (L + 1)];
            for (int l = 1; l < L; ++l) sum += shared[e * (L + 1) + l];
            Y(m, n) = ep(sum, Scalar(b(n)));
          }
        }
        team.team_barrier();  // the scratch is reused by the next rows
      }
    }
  }

  // This warp's W rows over chunk [k0, k0 + KC): S packs per row and lane, all requested
  // before any is used.
  KOKKOS_FORCEINLINE_FUNCTION void load_w_chunk(int group, int lane, std::int64_t n0,
                                                std::int64_t k0, Scalar (&w)[S][R][V]) const {
    FUSED_LINEAR_UNROLL
    for (int s = 0; s < S; ++s) {
      FUSED_LINEAR_UNROLL
      for (int r = 0; r < R; ++r)
        load_row(W, n0 + group * R + r, N, k0 + s * KS + lane * V, w[s][r]);
    }
  }

  // X chunk [m0, m0 + MT) x [k0, k0 + KC) into scratch (row-major, KC per row): thread tid
  // copies packs tid, tid + team_size, ... (coalesced); zero outside X.
  KOKKOS_FORCEINLINE_FUNCTION void stage_x_chunk(int tid, std::int64_t m0, std::int64_t k0,
                                                 Scalar* xs) const {
    FUSED_LINEAR_UNROLL
    for (int l = 0; l < stage_packs; ++l) {
      const int e = tid + l * team_size;
      const int i = e / (KC / V), kk = (e % (KC / V)) * V;
      Pack p;
      load_row(X, m0 + i, M, k0 + kk, p.v);
      *reinterpret_cast<Pack*>(xs + std::size_t(e) * V) = p;
    }
  }

  // V consecutive elements of row r (of `rows`) from k; zero past the matrix.
  template <class View, int Count>
  KOKKOS_FORCEINLINE_FUNCTION void load_row(const View& A, std::int64_t r, std::int64_t rows,
                                            std::int64_t k, Scalar (&out)[Count]) const {
    static_assert(Count == V, "one pack");
    if (Vectorized && r < rows && k + V <= K) {
      const Pack p = *reinterpret_cast<const Pack*>(&A(r, k));
      FUSED_LINEAR_UNROLL
      for (int q = 0; q < V; ++q) out[q] = p.v[q];
    } else {
      FUSED_LINEAR_UNROLL
      for (int q = 0; q < V; ++q) out[q] = r < rows && k + q < K ? Scalar(A(r, k + q)) : Scalar(0);
    }
  }
};

template <class ExecSpace, class XView, class WView, class BView, class YView, class Scalar>
void run_skinny(const ExecSpace& exec, const XView& X, const WView& W, const BView& b,
                const YView& Y, const LeakyReLUEpilogue<Scalar>& ep) {
  const std::int64_t M = Y.extent(0), N = Y.extent(1), K = X.extent(1);
  const bool vectorized = rows_are_packable(X) && rows_are_packable(W);
  using Short = SkinnyTiles<ExecSpace, Scalar, false>;
  constexpr bool has_tall = SkinnyTiles<ExecSpace, Scalar, true>::rows != Short::rows;
  auto launch = [&](auto kernel) {
    using Kernel = decltype(kernel);
    Kokkos::parallel_for(
        vectorized ? "FusedLinear::fused_skinny[vectorized]" : "FusedLinear::fused_skinny",
        Kernel::policy(exec, M, N), kernel);
  };
  auto launch_rows = [&](auto tall) {
    constexpr bool Tall = decltype(tall)::value;
    if (vectorized)
      launch(SkinnyLinearKernel<ExecSpace, XView, WView, BView, YView, true, Tall>{X, W, b, Y, ep,
                                                                                   M, N, K});
    else
      launch(SkinnyLinearKernel<ExecSpace, XView, WView, BView, YView, false, Tall>{X, W, b, Y, ep,
                                                                                    M, N, K});
  };
  if constexpr (has_tall) {
    if (M > Short::rows) return launch_rows(std::true_type());
  }
  launch_rows(std::false_type());
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
