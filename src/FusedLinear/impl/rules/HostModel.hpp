// SPDX-License-Identifier: Apache-2.0
/// \file HostModel.hpp
/// The host cost model: what the host kernels do, counted from their own tiles and work items
/// (kernels/HostTiles.hpp), and the milliseconds predicted with the coefficients tuning.host_model
/// fitted to these terms (HostRule.hpp, generated beside this file). Auto on the host
/// (Dispatch.hpp, strict_auto) takes the kernel predicted faster. Plain C++ without Kokkos.
#ifndef FUSED_LINEAR_IMPL_RULES_HOST_MODEL_HPP
#define FUSED_LINEAR_IMPL_RULES_HOST_MODEL_HPP

#include <cstdint>
#include <limits>

#include "FusedLinear/Types.hpp"
#include "FusedLinear/impl/Facts.hpp"
#include "FusedLinear/impl/kernels/HostTiles.hpp"
#include "FusedLinear/impl/rules/CostTerms.hpp"
#include "FusedLinear/impl/rules/HostRule.hpp"

namespace FusedLinear {
namespace Impl {

using HostTerms = CostTerms<HostRule::terms>;

/// fused on the host (HostFusedKernel): a launch; per work item of HostFusedGrid, W's columns
/// packed (padded to nr), X's rows packed (padded to mr), the micro-tiles' multiply-adds, Y's
/// partial sums once per K block, a cost per item, and the columns of a partial nr panel packed
/// element by element.
inline HostTerms host_fused_terms(const Shape& s, const HostTiling& t, std::int64_t threads) {
  if (s.M <= 0 || s.N <= 0 || s.K <= 0) return {};  // no product runs
  const std::int64_t T = threads > 0 ? threads : 1;
  const HostFusedGrid g(s.M, s.N, T, t.mr, t.nr, t.max_rows, t.max_columns);
  const std::int64_t last_m = s.M - (g.tiles_m - 1) * g.tile_m;
  const std::int64_t last_n = s.N - (g.tiles_n - 1) * g.tile_n;
  // An item's rows and columns, padded to the micro-tile, on average over the items.
  const double rows =
      double((g.tiles_m - 1) * g.tile_m + ceil_div(last_m, t.mr) * t.mr) / double(g.tiles_m);
  const double columns =
      double((g.tiles_n - 1) * g.tile_n + ceil_div(last_n, t.nr) * t.nr) / double(g.tiles_n);
  const double partial = double(last_n % t.nr) / double(g.tiles_n);
  const double waves = double(ceil_div(g.items(), T)), K = double(s.K);
  const double k_blocks = double(ceil_div(s.K, t.kc));
  return {{1, waves * K * columns, waves * K * rows, waves * K * rows * columns,
           waves * k_blocks * rows * columns, waves, waves * K * partial}};
}

/// fused_skinny on the host (HostSkinnyKernel): a launch; per work item of skinny_item_columns,
/// for each group of `skinny_columns` columns and each block of rows, the vector multiply-adds
/// and loads along K, the K % lanes tail, each output's sum across lanes and epilogue, a cost per
/// block; W's elements read from memory; X read again for each group where
/// it outgrows a core's cache; a cost per item and row of Y (where two items meet in a row, one
/// cache line is written by two threads).
inline HostTerms host_skinny_terms(const Shape& s, const HostTiling& t, std::int64_t threads) {
  if (s.M <= 0 || s.N <= 0 || s.K <= 0) return {};  // no product runs
  const std::int64_t T = threads > 0 ? threads : 1, R = t.skinny_columns;
  const std::int64_t group = skinny_item_columns(s.N, T, t.skinny_columns, t.skinny_group);
  const std::int64_t items = ceil_div(s.N, group), last = s.N - (items - 1) * group;
  const double groups = double((items - 1) * (group / R) + ceil_div(last, R)) / double(items);
  // Blocks of skinny_rows rows, then of halves of it down to one row.
  std::int64_t blocks = s.M / t.skinny_rows;
  for (std::int64_t rest = s.M % t.skinny_rows; rest > 0; rest &= rest - 1) ++blocks;
  const double waves = double(ceil_div(items, T)), per_group = waves * groups;
  const double M = double(s.M), K = double(s.K);
  const double vectors = double(s.K / t.lanes), tail = double(s.K % t.lanes);
  const bool x_in_cache = s.M * s.K * t.scalar_bytes <= HostRule::cache_bytes;
  return {{1, per_group * vectors * double(R) * M, per_group * vectors * (M + double(R * blocks)),
           per_group * tail * double(R) * M, per_group * double(R) * M, per_group * double(blocks),
           double(s.N) * K, x_in_cache ? 0 : per_group * M * K, double(items) * M / double(T)}};
}

/// The host cost model's prediction for a kernel on these facts' threads and tiles,
/// milliseconds (infinity for a path it has no coefficients for).
inline double host_predicted_ms(Algorithm a, const Shape& s, const Facts& f) {
  switch (a) {
    case Algorithm::Fused:
      return host_fused_terms(s, f.host_tiling, f.host_threads).ms(HostRule::fused_ms);
    case Algorithm::FusedSkinny:
      return host_skinny_terms(s, f.host_tiling, f.host_threads).ms(HostRule::skinny_ms);
    default: return std::numeric_limits<double>::infinity();
  }
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
