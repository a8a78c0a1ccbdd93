// SPDX-License-Identifier: Apache-2.0
/// \file Sm90Splits.hpp
/// How many CTAs the few-rows kernel (Sm90Skinny.cu) splits each tile's K across. Plain C++, so
/// that host tests check the choice on a device's measured cluster capacities.
#ifndef FUSED_LINEAR_IMPL_CUDA_SM90_SPLITS_HPP
#define FUSED_LINEAR_IMPL_CUDA_SM90_SPLITS_HPP

#include <cstdint>

namespace FusedLinear {
namespace Impl {
namespace Sm90 {

/// The most CTAs of a K split: the portable thread-block cluster size.
constexpr int max_splits = 8;

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
