// SPDX-License-Identifier: Apache-2.0
// The few-rows sm_90a kernel's split of K (Impl::Sm90::choose_splits), host code without a GPU.
#include <cstdint>

#include <gtest/gtest.h>

#include "FusedLinear/impl/cuda/Sm90Splits.hpp"

namespace {

namespace Impl = FusedLinear::Impl;

// The few-rows Hopper kernel's K split, on an H200's cluster capacities (cudaOccupancy-
// MaxActiveClusters for 1..8 CTAs): the split whose waves of co-resident clusters leave each CTA
// the least K. 32 tiles of 128 columns do not fit as 32 clusters of 4 (30 do): 3 CTAs per tile
// then beat 4 (measured: 16x8192x4096 0.057 ms against 0.081) and 2.
TEST(Sm90Splits, FillWavesOfCoResidentClusters) {
  const int h200[Impl::Sm90::max_splits] = {132, 66, 39, 30, 22, 17, 15, 15};
  const int unknown[Impl::Sm90::max_splits] = {};
  const auto splits = [&](std::int64_t tiles, std::int64_t K,
                          const int(&clusters)[Impl::Sm90::max_splits]) {
    return Impl::Sm90::choose_splits(tiles, (K + 31) / 32, 132, clusters);
  };
  EXPECT_EQ(splits(32, 8192, h200), 3);    // N = 4096
  EXPECT_EQ(splits(24, 8192, h200), 4);    // N = 3072: 24 clusters of 4 fit; 8 ties, loses
  EXPECT_EQ(splits(48, 8192, h200), 2);    // N = 6144: 96 CTAs in one wave
  EXPECT_EQ(splits(64, 8192, h200), 2);    // N = 8192
  EXPECT_EQ(splits(16, 8192, h200), 6);    // N = 2048: 16 clusters of 6 fit, of 7 or 8 do not
  EXPECT_EQ(splits(8, 65536, h200), 8);    // N = 1024, long K: the most a cluster takes
  EXPECT_EQ(splits(23, 1432, h200), 4);    // 45 k-blocks: 5 would need two waves of 22
  EXPECT_EQ(splits(1000, 8192, h200), 1);  // tiles enough for every multiprocessor
  EXPECT_EQ(splits(32, 200, h200), 1);     // 7 k-blocks: no range under 8
  EXPECT_EQ(splits(32, 512, h200), 2);     // 16 k-blocks: ranges of 8 at most 2 ways
  // Unknown capacities count multiprocessors / S: 33 clusters of 4 for 32 tiles.
  EXPECT_EQ(splits(32, 8192, unknown), 4);
}

}  // namespace
