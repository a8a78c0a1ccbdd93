// SPDX-License-Identifier: Apache-2.0
/// \file SkinnyKernel.hpp
/// The portable kernel for few rows of X and small layers (fused_skinny), with split K.
#ifndef FUSED_LINEAR_IMPL_KERNELS_SKINNY_KERNEL_HPP
#define FUSED_LINEAR_IMPL_KERNELS_SKINNY_KERNEL_HPP

#include <cstdint>
#include <type_traits>

#include <Kokkos_Core.hpp>

#include "FusedLinear/Epilogue.hpp"
#include "FusedLinear/impl/kernels/Common.hpp"
#include "FusedLinear/impl/kernels/HostSkinnyKernel.hpp"
#include "FusedLinear/impl/kernels/SkinnyGeometry.hpp"

namespace FusedLinear {
namespace Impl {

/// Tile parameters of the skinny kernel (few rows of X, small layers), one place per backend.
///
/// GPU: the layer is bound by streaming W once. A team owns `rows` rows and `groups * columns`
/// = 32 columns of Y; each warp owns `columns` rows of W and its `lanes` split K, one 16-byte
/// pack per lane and step (coalesced 512-byte warp loads). A chunk's W (`steps` steps) is
/// requested before the previous chunk is used, and X's chunk is staged in team scratch,
/// double-buffered. For M > 8 (float) the tall variant (16 rows, 1 step) reads W once for 16
/// rows instead of twice. Both fit the 128 registers of `min_teams` = 2 teams per SM without
/// spills; why these values: docs/design/skinny-kernel.md#gpu-design.
///
/// Host: fused_skinny runs HostSkinnyKernel; this kernel runs there only where
/// Experimental::Tuning::skinny_splits forces split K, so that tests exercise the split-K fix-up on
/// a CPU: one thread per team, X read in place, the 4 columns' multiply-adds as one SIMD vector
/// (`simd_columns`; docs/design/skinny-kernel.md#host-variant).
template <class ExecSpace, class Scalar, bool Tall, bool Host = is_host_space<ExecSpace>()>
struct SkinnyTiles
    : SkinnyGpuTiles<ExecutionSpaceTraits<ExecSpace>::lanes, (sizeof(Scalar) > 4), Tall> {};
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
          bool Tall, bool SplitK = false>
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
  static constexpr std::size_t reduce_bytes = L > 1 ? std::size_t(RC) * team_columns*(L + 1) *
                                                          sizeof(Scalar)
                                                    : 0;
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
  // Split K (see SkinnySplit): `splits` teams per tile, each `split_chunks` chunks of K. A
  // separate instantiation: the kernel without it keeps its registers (it spilled otherwise).
  int splits = 1;
  std::int64_t split_chunks = 0;
  Scalar* partials = nullptr;              // splits x M x N
  unsigned long long* arrivals = nullptr;  // one per tile: teams arrived (see fix_up)

  KOKKOS_INLINE_FUNCTION static std::int64_t row_blocks(std::int64_t M) {
    return (M + MT - 1) / MT;
  }
  KOKKOS_INLINE_FUNCTION static std::int64_t tiles(std::int64_t M, std::int64_t N) {
    return (N + team_columns - 1) / team_columns * row_blocks(M);
  }
  KOKKOS_INLINE_FUNCTION static std::int64_t chunks(std::int64_t K) { return (K + KC - 1) / KC; }

  KOKKOS_FORCEINLINE_FUNCTION int split_count() const { return SplitK ? splits : 1; }

  policy_type policy(const ExecSpace& exec) const {
    auto p = policy_type(exec, league_size(tiles(M, N) * split_count(), M, N), team_size, 1);
    if (scratch_bytes > 0) p.set_scratch_size(0, Kokkos::PerTeam(scratch_bytes));
    return p;
  }

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    const int tid = team.team_rank();
    const int lane = tid % L, group = tid / L;
    // Teams of one column block are adjacent in the league, so the row blocks that share W
    // run together and the second reads it from L2.
    // The splits of a tile are a league apart: all tiles' first splits run first.
    // (tile and split are recomputed where needed after the loop: kept live through it, they
    // cost the registers that made this kernel spill.)
    const std::int64_t blocks = row_blocks(M);
    const std::int64_t tile = SplitK ? team.league_rank() % tiles(M, N) : team.league_rank();
    const std::int64_t m0 = (tile % blocks) * MT;
    const std::int64_t n0 = (tile / blocks) * team_columns;
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

    const std::int64_t first = SplitK ? split_of(team) * split_chunks : 0;
    const std::int64_t last =
        SplitK && first + split_chunks < chunks(K) ? first + split_chunks : chunks(K);
    // W of chunk c + 1 is requested right after chunk c's FMAs, so its loads are in flight
    // during X's staging and the barrier instead of after them.
    Scalar w[S][R][V];
    load_w_chunk(group, lane, n0, first * KC, w);
    if (stage_x) {
      stage_x_chunk(tid, m0, first * KC, shared + (first & 1) * MT * KC);
      team.team_barrier();
    }
    for (std::int64_t c = first; c < last; ++c) {
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
      if (c + 1 < last) load_w_chunk(group, lane, n0, k0 + KC, w);
      if (stage_x) {
        if (c + 1 < last) stage_x_chunk(tid, m0, k0 + KC, shared + ((c + 1) & 1) * MT * KC);
        team.team_barrier();  // the next chunk is staged; this one is free to overwrite
      }
    }

    // One lane (the host) has nothing to add across lanes: not even compiled there.
    if constexpr (L == 1) {
      FUSED_LINEAR_UNROLL
      for (int i = 0; i < MT; ++i) {
        FUSED_LINEAR_UNROLL
        for (int r = 0; r < R; ++r) {
          const std::int64_t n = n0 + group * R + r;
          if (i < rows_here && n < N) finish(team, m0 + i, n, acc[i][r]);
        }
      }
    } else {
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
              finish(team, m, n, sum);
            }
          }
          team.team_barrier();  // the scratch is reused by the next rows
        }
      }
    }
    fix_up(team, m0, rows_here, n0);
  }

  // One (row, column)'s sum over this team's K: Y's element, or this split's partial sum.
  KOKKOS_FORCEINLINE_FUNCTION void finish(const member_type& team, std::int64_t m, std::int64_t n,
                                          Scalar sum) const {
    if (!SplitK)
      Y(m, n) = ep(sum, Scalar(b(n)));
    else
      partials[(split_of(team) * M + m) * N + n] = sum;
  }
  KOKKOS_FORCEINLINE_FUNCTION std::int64_t split_of(const member_type& team) const {
    return team.league_rank() / tiles(M, N);
  }

  // Split K: the tile's last team to arrive adds the splits' partial sums in split order (the
  // same bits whichever team is last) and applies the epilogue once, to the full sum.
  // The last team also puts the tile's counter back to zero (every other team has counted), so
  // each launch finds zeros: a CUDA graph replays the same launch any number of times.
  KOKKOS_INLINE_FUNCTION void fix_up(const member_type& team, std::int64_t m0, int rows_here,
                                     std::int64_t n0) const {
    if (!SplitK) return;
    const std::int64_t tile = team.league_rank() % tiles(M, N);
    Kokkos::memory_fence();  // this thread's partial sums, before the team's arrival below
    team.team_barrier();
    int last_to_arrive = 0;
    if (team.team_rank() == 0) {
      last_to_arrive =
          Kokkos::atomic_fetch_add(&arrivals[tile], 1ull) == (unsigned long long)(splits - 1);
      if (last_to_arrive) Kokkos::atomic_exchange(&arrivals[tile], 0ull);
    }
    team.team_broadcast(last_to_arrive, 0);
    if (!last_to_arrive) return;
    Kokkos::memory_fence();
    // Volatile: the other teams' sums, read past any cache that is not coherent with theirs.
    const volatile Scalar* const p = partials;
    const std::int64_t plane = M * N;
    for (int e = team.team_rank(); e < rows_here * team_columns; e += team_size) {
      const std::int64_t m = m0 + e / team_columns, n = n0 + e % team_columns;
      if (n < N) {
        Scalar sum = p[m * N + n];
        for (int s = 1; s < splits; ++s) sum += p[s * plane + m * N + n];
        Y(m, n) = ep(sum, Scalar(b(n)));
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

/// Split K across teams (GPUs): where a shape has too few tiles to keep every multiprocessor
/// busy (small problems; N of a few thousand), each tile's K is cut into `splits` ranges of
/// whole chunks, one team each, and the tile's last team to finish adds their partial sums in
/// order and applies the epilogue (fix_up): still one launch, and no pass over Y before it.
/// `forced` > 0 takes that many splits on any backend (Experimental::Tuning::skinny_splits: tests
/// take the fix-up on the host too).
template <class ExecSpace, class Scalar>
SkinnyChoice choose_skinny(const ExecSpace& exec, std::int64_t M, std::int64_t N, std::int64_t K,
                           int forced_splits) {
  return skinny_choice<SkinnyTiles<ExecSpace, Scalar, false>, SkinnyTiles<ExecSpace, Scalar, true>>(
      M, N, K, multiprocessors(exec), Pack16<Scalar>::size, forced_splits);
}

/// Y = ep(X . W^T, b) through fused_skinny as `c` says; `partials` and `arrivals` are the plan's
/// memory for split K (c.partials Scalars and c.tiles counters, zero between calls).
template <class ExecSpace, class XView, class WView, class BView, class YView, class Scalar>
void run_skinny(const ExecSpace& exec, const XView& X, const WView& W, const BView& b,
                const YView& Y, const LeakyReLUEpilogue<Scalar>& ep, const SkinnyChoice& c,
                Scalar* partials, unsigned long long* arrivals) {
  if constexpr (is_host_space<ExecSpace>()) {
    if (c.split.splits == 1) return run_skinny_host(exec, X, W, b, Y, ep);
  }
  const std::int64_t M = Y.extent(0), N = Y.extent(1), K = X.extent(1);
  const bool vectorized = rows_are_packable(X) && rows_are_packable(W);
  auto launch = [&](auto vectorized, auto tall) {
    constexpr bool Vec = decltype(vectorized)::value, Tall = decltype(tall)::value;
    using Plain = SkinnyLinearKernel<ExecSpace, XView, WView, BView, YView, Vec, Tall>;
    using Split = SkinnyLinearKernel<ExecSpace, XView, WView, BView, YView, Vec, Tall, true>;
    const char* label = Vec ? "FusedLinear::fused_skinny[vectorized]" : "FusedLinear::fused_skinny";
    if (c.split.splits == 1) {
      const Plain kernel{X, W, b, Y, ep, M, N, K};
      Kokkos::parallel_for(label, kernel.policy(exec), kernel);
      return;
    }
    Split kernel{X, W, b, Y, ep, M, N, K};
    kernel.splits = c.split.splits;
    kernel.split_chunks = c.split.chunks_per_split;
    kernel.partials = partials;
    kernel.arrivals = arrivals;
    Kokkos::parallel_for(label, kernel.policy(exec), kernel);
  };
  auto launch_rows = [&](auto tall) {
    if (vectorized)
      launch(std::true_type(), tall);
    else
      launch(std::false_type(), tall);
  };
  using Short = SkinnyTiles<ExecSpace, Scalar, false>;
  if constexpr (SkinnyTiles<ExecSpace, Scalar, true>::rows != Short::rows) {
    if (c.tall) return launch_rows(std::true_type());
  }
  launch_rows(std::false_type());
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
