// SPDX-License-Identifier: Apache-2.0
/// \file SkinnyGeometry.hpp
/// How fused_skinny cuts a problem on a GPU: its tiles, and whether and how far K is split.
/// Plain C++, shared by the kernel (SkinnyKernel.hpp) and the GPU cost model (rules/GpuModel.hpp),
/// which counts the same teams, waves and passes the kernel runs.
#ifndef FUSED_LINEAR_IMPL_KERNELS_SKINNY_GEOMETRY_HPP
#define FUSED_LINEAR_IMPL_KERNELS_SKINNY_GEOMETRY_HPP

#include <cstdint>

namespace FusedLinear {
namespace Impl {

/// GPU tiles of the skinny kernel (few rows of X, small layers) for `Lanes`-wide warps and
/// Scalars wider than 4 bytes or not (SkinnyKernel.hpp, SkinnyTiles, says what each means).
template <int Lanes, bool Wide, bool Tall>
struct SkinnyGpuTiles {
  // A warp (wavefront) per group of columns, 256 threads a team: 8 warps of 32 on NVIDIA GPUs,
  // 4 wavefronts of 64 on AMD GPUs.
  static constexpr int lanes = Lanes, groups = 256 / Lanes;
  static constexpr int columns = 4;
  static constexpr int rows = Tall && !Wide ? 16 : 8, steps = Tall && !Wide ? 1 : 2;
  static constexpr int rows_per_reduction = Wide ? 4 : 8, min_teams = 2;
  static constexpr bool stage_x = true, simd_columns = false;
};

struct SkinnySplit {
  int splits = 1;
  std::int64_t chunks_per_split = 0;

  /// tiles x splits teams for `resident` teams at a time (0: no split unless forced).
  SkinnySplit(std::int64_t tiles, std::int64_t chunks, std::int64_t resident, int forced) {
    std::int64_t want = 1;
    if (forced > 0)
      want = forced;
    else if (resident > 0 && 2 * tiles <= resident && chunks >= 4 * min_chunks_per_split)
      want = (split_waves * resident + tiles - 1) / tiles;
    if (want > chunks) want = chunks;
    if (want < 2) return;
    chunks_per_split = (chunks + want - 1) / want;
    if (forced <= 0 && chunks_per_split < min_chunks_per_split)
      chunks_per_split = min_chunks_per_split;
    splits = int((chunks + chunks_per_split - 1) / chunks_per_split);  // none empty
  }
  /// A split pays only where at most half the resident slots would be busy and K is long: each
  /// split adds a fence, an atomic and a read of the partial sums
  /// (docs/design/skinny-kernel.md#split-k).
  static constexpr std::int64_t split_waves = 2, min_chunks_per_split = 4;
};

/// How a plan runs fused_skinny at its shape: tall or short rows, K split or not, and the
/// memory split K needs (partial sums, one arrival counter per tile), which the plan owns.
struct SkinnyChoice {
  bool tall = false;
  SkinnySplit split{0, 0, 0, 0};
  std::int64_t tiles = 0;
  std::int64_t partials = 0;  // Scalars of partial sums (0: no split)
  int rows = 0, chunk = 0;    // rows of X a team owns, k a chunk covers
};

/// The choice for tiles `Short` and `Tall`, `pack` Scalars a 16-byte pack, on `sms`
/// multiprocessors (0: the host, where nothing splits unless forced).
template <class Short, class TallTiles>
SkinnyChoice skinny_choice(std::int64_t M, std::int64_t N, std::int64_t K, std::int64_t sms,
                           int pack, int forced_splits) {
  // Tall rows read W once for 16 rows but halve the teams: where that would leave at most one
  // team per multiprocessor the short rows are faster (docs/design/skinny-kernel.md#split-k).
  const auto tiles_of = [&](int rows, int columns) {
    return (N + columns - 1) / columns * ((M + rows - 1) / rows);
  };
  SkinnyChoice c;
  c.tall = TallTiles::rows != Short::rows && M > Short::rows &&
           !(sms > 0 && tiles_of(TallTiles::rows, TallTiles::groups * TallTiles::columns) <= sms);
  c.rows = c.tall ? TallTiles::rows : Short::rows;
  const int steps = c.tall ? TallTiles::steps : Short::steps;
  c.chunk = Short::lanes * pack * steps;
  c.tiles = tiles_of(c.rows, Short::groups * Short::columns);
  c.split =
      SkinnySplit(c.tiles, (K + c.chunk - 1) / c.chunk, sms * Short::min_teams, forced_splits);
  c.partials = c.split.splits > 1 ? std::int64_t(c.split.splits) * M * N : 0;
  return c;
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
