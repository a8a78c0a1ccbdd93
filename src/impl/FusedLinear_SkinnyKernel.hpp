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
/// the fused kernel would leave most SMs idle and compute mostly padding. A team of 256 threads
/// owns 32 columns of Y (so N = 8192 gives 256 teams, two per SM) and splits K eight ways
/// inside the team: thread (slice, lane) streams its own W row 32 bytes at a time (a whole
/// memory sector) over its K slice, multiplies it by `rows` rows of X (broadcast loads shared by
/// the warp, from L1) into `rows` accumulators, and the eight slices are added in scratch in a
/// fixed order before the epilogue: one launch, no workspace, deterministic.
///
/// Host: one thread per team and column, the whole K range.
template <class ExecSpace, bool Host = is_host_space<ExecSpace>()>
struct SkinnyTiles {
  static constexpr int columns = 32, slices = 8, rows = 16;
};
template <class ExecSpace>
struct SkinnyTiles<ExecSpace, true> {
  static constexpr int columns = 1, slices = 1, rows = 16;
};

/// Y = ep(X . W^T, b) for small M, column-parallel with an in-team split of K.
/// Vectorized has the meaning of FusedLinearKernel's (rows contiguous, packable, aligned).
template <class ExecSpace, class XView, class WView, class BView, class YView, bool Vectorized>
struct SkinnyLinearKernel {
  using Scalar = typename YView::non_const_value_type;
  using Pack = Pack16<Scalar>;
  using Tiles = SkinnyTiles<ExecSpace>;
  static constexpr int V = Pack::size;
  static constexpr int C = Tiles::columns, S = Tiles::slices, MT = Tiles::rows;
  static constexpr int team_size = C * S;
  static constexpr int KV = 2 * V;  // k per step: two packs, 32 bytes of a W row
  static constexpr std::size_t scratch_bytes = std::size_t(S) * MT * C * sizeof(Scalar);

  using policy_type = Kokkos::TeamPolicy<ExecSpace, Kokkos::LaunchBounds<team_size, 1>>;
  using member_type = typename policy_type::member_type;

  XView X;
  WView W;
  BView b;
  YView Y;
  LeakyReLUEpilogue<Scalar> ep;
  std::int64_t M, N, K;
  std::int64_t slice_length;  // multiple of KV

  static policy_type policy(const ExecSpace& exec, std::int64_t N) {
    const std::int64_t teams = (N + C - 1) / C;
    if (teams > 2147483647)
      throw std::invalid_argument("FusedLinear::linear_leaky_relu: N = " + std::to_string(N) +
                                  " needs more than 2^31 teams");
    return policy_type(exec, static_cast<int>(teams), team_size, 1)
        .set_scratch_size(0, Kokkos::PerTeam(scratch_bytes));
  }

  KOKKOS_INLINE_FUNCTION void operator()(const member_type& team) const {
    const int tid = team.team_rank();
    const int lane = tid % C, slice = tid / C;
    const std::int64_t n0 = static_cast<std::int64_t>(team.league_rank()) * C;
    const std::int64_t n = n0 + lane;
    const std::int64_t k_begin = slice * slice_length;
    const std::int64_t k_end = k_begin + slice_length < K ? k_begin + slice_length : K;
    const std::size_t bytes = scratch_bytes;
    Scalar* const partial = static_cast<Scalar*>(team.team_scratch(0).get_shmem(bytes));

    for (std::int64_t m0 = 0; m0 < M; m0 += MT) {
      Scalar acc[MT];
      FUSED_LINEAR_UNROLL
      for (int i = 0; i < MT; ++i) acc[i] = Scalar(0);

      if (n < N) {
        for (std::int64_t k = k_begin; k < k_end; k += KV) {
          Scalar w[KV];
          load_row(W, n, k, w);
          FUSED_LINEAR_UNROLL
          for (int i = 0; i < MT; ++i) {
            if (m0 + i < M) {  // uniform across the team: no divergence
              Scalar x[KV];
              load_row(X, m0 + i, k, x);
              FUSED_LINEAR_UNROLL
              for (int q = 0; q < KV; ++q) acc[i] += x[q] * w[q];
            }
          }
        }
      }
      // The S slices of each (row, column) are added in slice order: fixed, so reproducible.
      FUSED_LINEAR_UNROLL
      for (int i = 0; i < MT; ++i) partial[(slice * MT + i) * C + lane] = acc[i];
      team.team_barrier();
      for (int e = tid; e < MT * C; e += team_size) {
        const int i = e / C, c = e % C;
        const std::int64_t m = m0 + i, col = n0 + c;
        if (m < M && col < N) {
          Scalar sum = partial[i * C + c];
          for (int s = 1; s < S; ++s) sum += partial[(s * MT + i) * C + c];
          Y(m, col) = ep(sum, Scalar(b(col)));
        }
      }
      team.team_barrier();  // partial is reused by the next row block
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
    const std::int64_t per_slice = (K + Kernel::S - 1) / Kernel::S;
    kernel.slice_length = (per_slice + Kernel::KV - 1) / Kernel::KV * Kernel::KV;
    Kokkos::parallel_for(vectorized ? "FusedLinear::fused_skinny[vectorized]"
                                    : "FusedLinear::fused_skinny",
                         Kernel::policy(exec, N), kernel);
  };
  if (vectorized) {
    launch(SkinnyLinearKernel<ExecSpace, XView, WView, BView, YView, true>{X, W, b, Y, ep, M, N,
                                                                           K, 0});
  } else {
    launch(SkinnyLinearKernel<ExecSpace, XView, WView, BView, YView, false>{X, W, b, Y, ep, M,
                                                                            N, K, 0});
  }
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
