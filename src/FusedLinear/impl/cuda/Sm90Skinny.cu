// SPDX-License-Identifier: Apache-2.0
// Strict fp32 Linear + LeakyReLU for few rows of X (M = 1..64: inference batches) on sm_90a,
// declared in Sm90.hpp. No tensor cores: IEEE fp32 multiply-adds in a fixed order, so results are
// bitwise the same run to run.
//
// The layer is bound by reading W once. The portable kernel keeps W's loads in flight in
// registers, where they compete with the accumulators; here the copy engine (TMA) streams W
// into a deep ring in shared memory, so the bytes in flight cost no registers:
//   CTA = 1 producer warp (one thread issues a TMA box of W, 128 rows x 32 k, and one of X, MT
//   rows, per stage onto its `full` mbarrier) + 8 consumer warps (lane l owns W rows l, l+32,
//   l+64, l+96, conflict-free through the 128-byte swizzle; X read by broadcast; MR x 4
//   accumulators per thread, products added in k order). It owns 128 columns of Y, MT rows of X
//   (1..64, by M) and one K range; a K split is a thread-block cluster whose CTAs add each
//   other's sums in rank order through DSMEM. One launch, no workspace, no atomics.
// Design and measurements: docs/design/sm90-kernels.md#few-rows-kernel-skinny_sm90.
#include "FusedLinear/impl/cuda/Sm90.hpp"

#include <stdint.h>

#include "FusedLinear/impl/cuda/Sm90Common.cuh"

#ifndef FUSED_LINEAR_WITHOUT_KOKKOS
#define FUSED_LINEAR_WITHOUT_KOKKOS 1
#endif
#include "FusedLinear/Epilogue.hpp"

namespace FusedLinear {
namespace Impl {
namespace Sm90 {
namespace skinny_detail {

using namespace common;

constexpr int LANE_ROWS = 4;        // W rows per lane
constexpr int BN = 32 * LANE_ROWS;  // W rows (columns of Y) per CTA
constexpr int BK = skinny_k_block;  // k per stage: one 128-byte swizzle row
static_assert(BN == skinny_tile_columns, "the cost model counts these tiles");
constexpr int CHUNKS = BK / 4;  // 16-byte chunks of k per stage row
constexpr int CONSUMER_WARPS = 8;
constexpr int CONSUMERS = 32 * CONSUMER_WARPS;
constexpr int THREADS = CONSUMERS + 32;  // + the producer warp
constexpr int W_STAGE = BN * BK * 4;     // 16 KB
constexpr int RING_BUDGET = 196 * 1024;  // one CTA per SM: the ring is the bytes in flight

template <int MT>
struct Config {
  static constexpr int MR = MT < 16 ? MT : 16;    // X rows per thread
  static constexpr int MW = MT / MR;              // warps along X's rows
  static constexpr int KW = CONSUMER_WARPS / MW;  // warps along a stage's chunks
  static constexpr int CPW = CHUNKS / KW;         // chunks per warp per stage
  static constexpr int X_STAGE = MT * BK * 4;
  static constexpr int STAGES_FIT = RING_BUDGET / (W_STAGE + X_STAGE);
  static constexpr int STAGES = STAGES_FIT < 12 ? STAGES_FIT : 12;
  static constexpr int RING = STAGES * (W_STAGE + X_STAGE);
  static constexpr int PARTIALS = KW * MT * BN * 4;  // the warps' sums, in the ring at the end
  static constexpr int BAR_OFFSET = RING > PARTIALS ? RING : PARTIALS;   // the mbarriers
  static constexpr int SMEM_BYTES = BAR_OFFSET + 2 * STAGES * 8 + 1024;  // + 1024: alignment
  static_assert(MW * KW == CONSUMER_WARPS && KW * CPW == CHUNKS, "warps tile the stage");
  static_assert(PARTIALS <= RING, "the partial sums fit in the drained ring");
  static_assert(SMEM_BYTES <= 227 * 1024, "shared memory of one CTA");
};

// ---- clusters ----
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
/// All threads of the cluster (release / acquire: shared-memory writes before it are seen by
/// every CTA's reads after it). Not .aligned: the producer warp arrives after diverging.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}
/// The float at shared address `addr` of the cluster's CTA `rank`.
__device__ __forceinline__ float ld_cluster(uint32_t addr, uint32_t rank) {
  uint32_t remote;
  float v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
  return v;
}
__device__ __forceinline__ void consumer_bar() {
  asm volatile("bar.sync 1, %0;" ::"n"(CONSUMERS) : "memory");
}

template <int MT>
__global__ void __launch_bounds__(THREADS, 1)
    skinny_kernel(const __grid_constant__ CUtensorMap tmW, const __grid_constant__ CUtensorMap tmX,
                  int M, int N, int K, int S, const float* __restrict__ bias, float multiplier,
                  float slope, float* __restrict__ Y, int64_t ldy) {
  using C = Config<MT>;
  extern __shared__ uint8_t smem_raw[];
  // 1024-byte alignment: the 128-byte swizzle repeats every 8 rows of 128 bytes. (Offset from
  // smem_raw, not through an integer, so the compiler keeps shared-memory loads: LDS, not LD.)
  uint8_t* const smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  uint8_t* const w_ring = smem;                              // [STAGES][BN][32] swizzled
  uint8_t* const x_ring = smem + C::STAGES * W_STAGE;        // [STAGES][MT][32]
  const uint32_t bar_full = smem_u32(smem + C::BAR_OFFSET);  // STAGES x 8 bytes
  const uint32_t bar_empty = bar_full + C::STAGES * 8;

  const int s = (int)cluster_rank();  // of the S CTAs of this tile
  const int n0 = (int)(blockIdx.x / S) * BN;
  const int m0 = (int)blockIdx.y * MT;
  // This CTA's k-blocks [kb0, kb1): the tile's blocks cut into S near-equal ranges.
  const int64_t nkb = ((int64_t)K + BK - 1) / BK;
  const int kb0 = (int)(nkb * s / S), kb1 = (int)(nkb * (s + 1) / S);
  const int nb = kb1 - kb0;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  if (threadIdx.x == 0) {
    for (int i = 0; i < C::STAGES; ++i) {
      mbar_init(bar_full + 8 * i, 1);
      mbar_init(bar_empty + 8 * i, CONSUMERS);
    }
    mbar_fence_init();
  }
  __syncthreads();

  if (warp == CONSUMER_WARPS) {
    // ---------------- producer ----------------
    if (lane == 0) {
      prefetch_tensormap(&tmW);
      prefetch_tensormap(&tmX);
      const uint64_t pol_w = policy_evict_first(), pol_x = policy_evict_last();
      for (int it = 0; it < nb; ++it) {
        const int st = it % C::STAGES;
        if (it >= C::STAGES) mbar_wait(bar_empty + 8 * st, ((it / C::STAGES) - 1) & 1);
        const uint32_t full = bar_full + 8 * st;
        mbar_expect_tx(full, W_STAGE + C::X_STAGE);
        const int k = (kb0 + it) * BK;  // past K: zeros
        tma_load_2d(smem_u32(w_ring + st * W_STAGE), &tmW, full, k, n0, pol_w);
        tma_load_2d(smem_u32(x_ring + st * C::X_STAGE), &tmX, full, k, m0, pol_x);
      }
    }
    __syncwarp();
  } else {
    // ---------------- consumers ----------------
    const int mw = warp / C::KW, kw = warp % C::KW;  // X rows mw*MR.., chunks kw*CPW..
    float acc[C::MR][LANE_ROWS];
#pragma unroll
    for (int i = 0; i < C::MR; ++i)
#pragma unroll
      for (int j = 0; j < LANE_ROWS; ++j) acc[i][j] = 0.f;
    // Row lane + 32 j of a stage's W box, 16-byte chunk c, lies at (lane + 32 j) * 128 +
    // ((c ^ (lane % 8)) * 16): the 128-byte swizzle.
    const int w_lane = lane * 128;
    const int swz = lane % 8;
    for (int it = 0; it < nb; ++it) {
      const int st = it % C::STAGES;
      mbar_wait(bar_full + 8 * st, (it / C::STAGES) & 1);
      const uint8_t* ws = w_ring + st * W_STAGE + w_lane;
      const uint8_t* xs = x_ring + st * C::X_STAGE + mw * C::MR * 128;
      // Unrolled (MT 32, 64: 2 or 4 chunks): the next chunk's loads overlap this one's
      // multiply-adds (168 registers, no spills; faster than a rolled loop).
#pragma unroll
      for (int cc = 0; cc < C::CPW; ++cc) {
        const int c = kw * C::CPW + cc;
        float4 w[LANE_ROWS];
#pragma unroll
        for (int j = 0; j < LANE_ROWS; ++j)
          w[j] = *reinterpret_cast<const float4*>(ws + j * 32 * 128 + ((c ^ swz) << 4));
#pragma unroll
        for (int i = 0; i < C::MR; ++i) {
          const float4 x = *reinterpret_cast<const float4*>(xs + i * 128 + c * 16);
#pragma unroll
          for (int j = 0; j < LANE_ROWS; ++j) {
            acc[i][j] = fmaf(x.x, w[j].x, acc[i][j]);
            acc[i][j] = fmaf(x.y, w[j].y, acc[i][j]);
            acc[i][j] = fmaf(x.z, w[j].z, acc[i][j]);
            acc[i][j] = fmaf(x.w, w[j].w, acc[i][j]);
          }
        }
      }
      mbar_arrive(bar_empty + 8 * st);  // this thread's reads of the stage are done
    }

    // The warps' sums into the drained ring, [KW][MT][BN] (all of the ring's copies have
    // landed: every consumer waited on every stage), then added in warp order in place.
    consumer_bar();
    float* const part = reinterpret_cast<float*>(smem);
#pragma unroll
    for (int i = 0; i < C::MR; ++i)
#pragma unroll
      for (int j = 0; j < LANE_ROWS; ++j)
        part[(kw * MT + mw * C::MR + i) * BN + lane + 32 * j] = acc[i][j];
    consumer_bar();
    for (int o = threadIdx.x; o < MT * BN; o += CONSUMERS) {
      float v = part[o];
#pragma unroll
      for (int w = 1; w < C::KW; ++w) v += part[w * MT * BN + o];
      part[o] = v;
    }
  }

  // The split's CTAs add their sums in rank order, each for its share of the tile's outputs,
  // and apply the epilogue. Only the rows of X that exist count.
  cluster_sync();
  {
    const LeakyReLUEpilogue<float> ep{multiplier, slope};
    const int rows = M - m0 < MT ? M - m0 : MT;
    const int outputs = rows * BN, share = (outputs + S - 1) / S;
    const int o_end = (s + 1) * share < outputs ? (s + 1) * share : outputs;
    const uint32_t part = smem_u32(smem);
    for (int o = s * share + (int)threadIdx.x; o < o_end; o += THREADS) {
      const int m = m0 + o / BN, n = n0 + o % BN;
      if (n >= N) continue;
      float v = ld_cluster(part + 4 * o, 0);
      for (int r = 1; r < S; ++r) v += ld_cluster(part + 4 * o, (uint32_t)r);
      Y[(int64_t)m * ldy + n] = ep(v, bias != nullptr ? __ldg(bias + n) : 0.f);
    }
  }
  cluster_sync();  // no CTA leaves while the others read its shared memory
}

// A launch of clusters of S CTAs along x; `cluster` holds the attribute the result points to.
inline cudaLaunchConfig_t cluster_config(dim3 grid, int S, int smem_bytes, cudaStream_t stream,
                                         cudaLaunchAttribute* cluster) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(THREADS);
  cfg.dynamicSmemBytes = (size_t)smem_bytes;
  cfg.stream = stream;
  cluster->id = cudaLaunchAttributeClusterDimension;
  cluster->val.clusterDim.x = (unsigned)S;
  cluster->val.clusterDim.y = 1;
  cluster->val.clusterDim.z = 1;
  cfg.attrs = cluster;
  cfg.numAttrs = 1;
  return cfg;
}

template <int MT>
cudaError_t launch(cudaStream_t stream, const Device& d, const Problem& p, int splits) {
  using C = Config<MT>;
  const int64_t nkb = (p.K + BK - 1) / BK;
  const int64_t tiles = (p.N + BN - 1) / BN * ((p.M + MT - 1) / MT);
  if (splits <= 0) splits = choose_splits(tiles, nkb, d.multiprocessors, d.skinny_clusters);
  if (splits > max_splits) splits = max_splits;
  if (splits > nkb) splits = (int)nkb;
  CUtensorMap mW, mX;
  if (!make_map_2d(&mW, p.W, (uint64_t)p.K, (uint64_t)p.N, (uint64_t)p.ldw, BK, BN,
                   CU_TENSOR_MAP_SWIZZLE_128B) ||
      !make_map_2d(&mX, p.X, (uint64_t)p.K, (uint64_t)p.M, (uint64_t)p.ldx, BK, MT,
                   CU_TENSOR_MAP_SWIZZLE_NONE))
    return cudaErrorInvalidValue;
  cudaError_t e = cudaFuncSetAttribute(skinny_kernel<MT>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM_BYTES);
  if (e != cudaSuccess) return e;
  cudaLaunchAttribute cluster;
  const cudaLaunchConfig_t cfg = cluster_config(
      dim3((unsigned)(((p.N + BN - 1) / BN) * splits), (unsigned)((p.M + MT - 1) / MT)), splits,
      C::SMEM_BYTES, stream, &cluster);
  // The launch's own error (cudaGetLastError would add an earlier call's, left on the thread).
  return cudaLaunchKernelEx(&cfg, skinny_kernel<MT>, mW, mX, (int)p.M, (int)p.N, (int)p.K, splits,
                            p.bias, p.multiplier, p.slope, p.Y, p.ldy);
}

}  // namespace skinny_detail

const char* skinny_refusal(const Device& d, const Problem& p) {
  using namespace skinny_detail;
  if (d.cc_major != 9 || d.cc_minor != 0) return "needs a compute capability 9.0 GPU (H100, H200)";
  if (p.M < 0 || p.N < 0 || p.K < 1) return "needs K >= 1 and non-negative M, N";
  if (p.M > max_extent || p.N > max_extent || p.K > max_extent)
    return "needs M, N and K of at most Sm90::max_extent (2^31 - 1024)";
  if (p.ldx < p.K || p.ldw < p.K || p.ldy < p.N || p.ldy < 0)
    return "needs row strides of at least the rows' lengths";
  if ((p.M + 63) / 64 > 65535) return "needs M below 65535 * 64 (one grid row per 64 rows of X)";
  // The copy engine reads rows that start on 16-byte boundaries only; the portable kernels
  // serve the rest.
  if (!common::tma_rows_ok(p.W, p.ldw) || !common::tma_rows_ok(p.X, p.ldx))
    return "needs X's and W's rows 16-byte aligned (row strides a multiple of 4 floats)";
  return nullptr;
}

void skinny_count_clusters(Device& d) {
  using namespace skinny_detail;
  // Every configuration is one CTA per multiprocessor with about the same shared memory, so the
  // counts of one are those of all (docs/design/sm90-kernels.md, "The K split").
  using C = Config<16>;
  if (cudaFuncSetAttribute(skinny_kernel<16>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           C::SMEM_BYTES) != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: leave no error for the caller's next check
    return;
  }
  for (int S = 1; S <= max_splits; ++S) {
    cudaLaunchAttribute cluster;
    const cudaLaunchConfig_t cfg = cluster_config(dim3((unsigned)S), S, C::SMEM_BYTES, 0, &cluster);
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, skinny_kernel<16>, &cfg) != cudaSuccess) {
      (void)cudaGetLastError();
      clusters = 0;
    }
    d.skinny_clusters[S - 1] = clusters;
  }
}

std::size_t skinny_workspace_bytes(const Device&, const Problem&) { return 0; }

cudaError_t skinny_linear_leaky_relu(cudaStream_t stream, const Device& d, const Problem& p,
                                     void* /*workspace*/, std::size_t /*workspace_bytes*/,
                                     int splits) {
  using namespace skinny_detail;
  if (skinny_refusal(d, p) != nullptr) return cudaErrorInvalidValue;
  if (p.M == 0 || p.N == 0) return cudaSuccess;  // nothing to write
  if (!p.X || !p.W || !p.Y) return cudaErrorInvalidValue;
  switch (rows_per_cta(p.M)) {
    case 1: return launch<1>(stream, d, p, splits);
    case 2: return launch<2>(stream, d, p, splits);
    case 4: return launch<4>(stream, d, p, splits);
    case 8: return launch<8>(stream, d, p, splits);
    case 16: return launch<16>(stream, d, p, splits);
    case 32: return launch<32>(stream, d, p, splits);
    default: return launch<64>(stream, d, p, splits);
  }
}

}  // namespace Sm90
}  // namespace Impl
}  // namespace FusedLinear
