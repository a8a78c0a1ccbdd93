// SPDX-License-Identifier: Apache-2.0
/// \file Sm90Splits.hpp
/// How the few-rows kernel (Sm90Skinny.cu) cuts a problem: its tiles, and how many CTAs each
/// tile's K is split across. Plain C++, so that host tests check the choice on a device's
/// measured cluster capacities and the GPU cost model (rules/GpuModel.hpp) counts the same CTAs.
#ifndef FUSED_LINEAR_IMPL_CUDA_SM90_SPLITS_HPP
#define FUSED_LINEAR_IMPL_CUDA_SM90_SPLITS_HPP

#include <cstdint>

namespace FusedLinear {
namespace Impl {
namespace Sm90 {

/// The most CTAs of a K split: the portable thread-block cluster size.
constexpr int max_splits = 8;
/// Columns of Y a CTA owns (32 lanes x 4 W rows each), and k per pipeline stage.
constexpr int skinny_tile_columns = 128, skinny_k_block = 32;

/// Rows of X a CTA owns: the least power of two that holds M, at most 64.
inline int rows_per_cta(std::int64_t M) {
  return M <= 1 ? 1 : M <= 2 ? 2 : M <= 4 ? 4 : M <= 8 ? 8 : M <= 16 ? 16 : M <= 32 ? 32 : 64;
}

/// CTAs per tile S (1..8; the kernel cuts K into S near-equal ranges, any S): the one whose
/// CTAs each cover the least K over the waves of co-resident clusters it takes,
/// ceil(tiles / clusters[S-1]) * ceil(k_blocks / S). Clusters stay within a GPC, so fewer fit
/// than multiprocessors / S; clusters[S-1] is the device's count (0: unknown, taken as
/// multiprocessors / S). No ranges under 8 k-blocks, whose fixed costs (pipeline fill, the
/// cross-CTA sum) would dominate; ties within 2% go to fewer CTAs.
inline int choose_splits(std::int64_t tiles, std::int64_t k_blocks, int multiprocessors,
                         const int (&clusters)[max_splits]) {
  int best = 1;
  double best_cost = 0;
  for (int S = 1; S <= max_splits; ++S) {
    if (S > 1 && k_blocks < 8 * S) break;
    std::int64_t fit = clusters[S - 1] > 0 ? clusters[S - 1] : multiprocessors / S;
    if (fit < 1) fit = 1;
    const double cost = double((tiles + fit - 1) / fit) * double((k_blocks + S - 1) / S);
    if (S == 1 || cost < 0.98 * best_cost) {
      best = S;
      best_cost = cost;
    }
  }
  return best;
}

}  // namespace Sm90
}  // namespace Impl
}  // namespace FusedLinear

#endif
