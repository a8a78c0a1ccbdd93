// SPDX-License-Identifier: Apache-2.0
/// \file HostTiles.hpp
/// How the host kernels (HostFusedKernel.hpp, HostSkinnyKernel.hpp) cut a problem: register
/// tiles for the vector instruction set the compiler targets and the work items over threads.
/// Plain C++ without Kokkos, so that the host cost model (rules/HostModel.hpp) counts the
/// same tiles and items the kernels run.
#ifndef FUSED_LINEAR_IMPL_KERNELS_HOST_TILES_HPP
#define FUSED_LINEAR_IMPL_KERNELS_HOST_TILES_HPP

#include <cstdint>

namespace FusedLinear {
namespace Impl {

/// The host's SIMD registers as the compiler targets them: their width and how many there are.
struct HostVector {
#if defined(__AVX512F__)
  static constexpr int bytes = 64, registers = 32;
#elif defined(__AVX__)
  static constexpr int bytes = 32, registers = 16;
#elif defined(__aarch64__)
  static constexpr int bytes = 16, registers = 32;
#else
  static constexpr int bytes = 16, registers = 16;  // SSE2, the x86-64 baseline
#endif
  template <class Scalar>
  static constexpr int lanes() {
    return bytes / static_cast<int>(sizeof(Scalar));
  }
};

/// Tiles of the host fused kernel (a GEMM in the manner of GotoBLAS/BLIS with the epilogue in
/// registers), one place. Micro-tile: `mr` x `nr` of Y in registers (nr = two vectors, mr as
/// large as 2 mr accumulators + 3 registers allow). K in blocks of `kc`, so that a packed W
/// micro-panel (kc x nr) stays in L1; a work item's packed W block (`max_columns` x kc) and X
/// block (`max_rows` x kc) stay in L2, each packed once for all of the other side. X is packed
/// too: read in place, its mr rows (K apart) fall in the same L1 sets. Why these values:
/// docs/design/host-kernels.md#fused-on-the-host.
template <class Scalar>
struct HostFusedTiles {
  static constexpr int lanes = HostVector::lanes<Scalar>();
  static constexpr int nr = 2 * lanes;
  static constexpr int mr = HostVector::registers >= 32 ? 12 : 6;
  static constexpr int kc = 32768 / (nr * static_cast<int>(sizeof(Scalar)));
  static constexpr int max_columns = 16 * nr;
  static constexpr int max_rows = 64 * mr;
  static_assert(2 * mr + 3 <= HostVector::registers, "the micro-tile must fit the registers");
};

/// Work items of the host fused kernel for a shape on `threads` threads: rows x columns tiles
/// of Y, at least `items_per_thread` per thread where the shape has them (dynamic scheduling
/// evens out the rest; the machine may be shared). An item packs its columns of W (a cost per
/// element of W over its rows) and its strips of X (a cost per element of X over its columns):
/// from tiles of up to max_rows x max_columns (M cut evenly), the larger side is halved until
/// there are items enough.
struct HostFusedGrid {
  std::int64_t tile_m = 0, tile_n = 0, tiles_m = 0, tiles_n = 0;
  static constexpr std::int64_t items_per_thread = 4;

  HostFusedGrid() = default;
  HostFusedGrid(std::int64_t M, std::int64_t N, std::int64_t threads, std::int64_t mr,
                std::int64_t nr, std::int64_t max_rows, std::int64_t max_columns) {
    const auto round_up = [](std::int64_t v, std::int64_t to) { return (v + to - 1) / to * to; };
    const std::int64_t want = items_per_thread * (threads > 0 ? threads : 1);
    tile_n = N < max_columns ? round_up(N, nr) : max_columns;
    const std::int64_t row_tiles = (M + max_rows - 1) / max_rows;
    tile_m = round_up((M + row_tiles - 1) / row_tiles, mr);
    const auto count = [&] {
      tiles_m = (M + tile_m - 1) / tile_m;
      tiles_n = (N + tile_n - 1) / tile_n;
      return tiles_m * tiles_n;
    };
    while (count() < want && (tile_m > mr || tile_n > nr)) {
      if (tile_n > nr && (tile_n >= tile_m || tile_m <= mr))
        tile_n = round_up(tile_n / 2, nr);
      else
        tile_m = round_up(tile_m / 2, mr);
    }
  }
  std::int64_t items() const { return tiles_m * tiles_n; }
};

/// Columns of Y in one work item of the host skinny kernel: `group` (a multiple of `columns`),
/// fewer on a Y too narrow to give each of `threads` threads an item (24 columns were one item:
/// one thread streamed all of W while the others waited).
inline std::int64_t skinny_item_columns(std::int64_t N, std::int64_t threads, int columns,
                                        int group) {
  const std::int64_t t = threads > 0 ? threads : 1;
  const std::int64_t per_thread = (N + t - 1) / t;
  const std::int64_t item = (per_thread + columns - 1) / columns * columns;
  return item < columns ? columns : item < group ? item : group;
}

/// Tiles of the host skinny kernel (few rows of X: W streams from memory once): dot products
/// along K, `rows` x `columns` of them in registers as vectors of partial sums (one vector
/// load of W per column and of X per row per step, rows x columns multiply-adds; AVX-512:
/// 8 x 3 = 24 accumulators + 3 + 1 registers; AVX2/SSE: 4 x 2), added across their lanes once
/// at the end. Row blocks of 8, 4, 2 and 1 rows (so that M = 1 computes one row, not eight).
/// A work item is up to `group_columns` columns of Y (skinny_item_columns) and all rows.
template <class Scalar>
struct HostSkinnyTiles {
  static constexpr int lanes = HostVector::lanes<Scalar>();
  static constexpr int rows = HostVector::registers >= 32 ? 8 : 4;
  static constexpr int columns = HostVector::registers >= 32 ? 3 : 2;
  static constexpr int group_columns = 8 * columns;
  static_assert(rows * columns + columns + 1 <= HostVector::registers,
                "the register block must fit the registers");
};

/// The host kernels' tiles as plain values, for the dispatch's cost model: the build's for the
/// Views' value type (host_tiling_of, gathered with the facts), or another in a test. The
/// defaults are AVX-512's for float, the tiles the model was fitted with.
struct HostTiling {
  int lanes = 16;
  int mr = 12, nr = 32, kc = 256, max_rows = 768, max_columns = 512;  // fused
  int skinny_rows = 8, skinny_columns = 3, skinny_group = 24;         // fused_skinny
  int scalar_bytes = 4;
};

template <class Scalar>
constexpr HostTiling host_tiling_of() {
  using F = HostFusedTiles<Scalar>;
  using S = HostSkinnyTiles<Scalar>;
  return HostTiling{F::lanes,
                    F::mr,
                    F::nr,
                    F::kc,
                    F::max_rows,
                    F::max_columns,
                    S::rows,
                    S::columns,
                    S::group_columns,
                    int(sizeof(Scalar))};
}

}  // namespace Impl
}  // namespace FusedLinear

#endif  // FUSED_LINEAR_IMPL_KERNELS_HOST_TILES_HPP
