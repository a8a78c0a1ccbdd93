// SPDX-License-Identifier: Apache-2.0
// 3xTF32 Linear + LeakyReLU for sm_90a (H100/H200) with wgmma; the entry points are declared in
// Sm90.hpp. Built on its own with -gencode=arch=compute_90a,code=sm_90a (CMakeLists.txt), without
// Kokkos: the epilogue is Epilogue.hpp's functor and the split Tf32Split.hpp's all the same, so
// the maths stays in one place.
//
// Two GEMM kernels share the mainloop below: a tile kernel (one CTA per 128x128 output tile,
// hardware-scheduled) and a persistent split-K kernel used when the tile count leaves the last wave
// mostly empty (launch_gemm). Both also run the gradient's products (tf32x3_gradient), with A
// read MN-major (kAMn) and a plain store or add in place of the layer's epilogue. Design and
// measurements: docs/design/sm90-kernels.md#3xtf32-gemm-kernel-fused_sm90.
// Design (one CTA = 128 (n) x 128 (m) tile of Y^T, 384 threads):
//   warpgroup 0: producer (one thread issues TMA loads: W tile 128x32 fp32, Xhi/Xlo tiles 128x32,
//                128-byte swizzle, STAGES-deep ring with full/empty mbarriers).
//   warpgroups 1,2: consumers, each 64 (n) x 128 (m). W is the wgmma A operand from registers:
//                each thread reads its fragment from the swizzled smem tile, splits it with
//                Tf32Split (hi, lo both TF32), and issues per k8: Wlo*Xhi, Whi*Xlo, Whi*Xhi
//                (B = pre-split X from smem). Every PROMO k-blocks (PROMO*32 K) the wgmma
//                accumulator is added into a second register accumulator with plain FADDs.
//   A prepare kernel runs first on the stream: it splits X once per call into Xhi / Xlo ([M, Kp],
//   Kp = K rounded up to 32, zero padded), copies W into a padded [N, Kp] buffer where the copy
//   engine cannot read W's rows in place (not 16-byte aligned), and resets the split-K kernel's
//   flags and ticket counter.
#include "FusedLinear/impl/cuda/Sm90.hpp"

#include <stdint.h>

#include "FusedLinear/impl/cuda/Sm90Common.cuh"

#ifndef FUSED_LINEAR_WITHOUT_KOKKOS
#define FUSED_LINEAR_WITHOUT_KOKKOS 1
#endif
#include "FusedLinear/Epilogue.hpp"
#include "FusedLinear/impl/kernels/Tf32Split.hpp"

namespace FusedLinear {
namespace Impl {
namespace Sm90 {
namespace tf32x3_detail {

using namespace common;

constexpr int BN = 128;  // W rows (output n) per CTA
constexpr int BM = 128;  // X rows (output m) per CTA
constexpr int BK = 32;   // k per stage (128 bytes of fp32 = one swizzle atom row)
constexpr int STAGES = 4;
constexpr int TILE_BYTES = 128 * BK * 4;     // 16 KB
constexpr int STAGE_BYTES = 3 * TILE_BYTES;  // W, Xhi, Xlo
constexpr int SMEM_BYTES =
    STAGES * STAGE_BYTES + 1024 /*alignment slack*/ + 128 /*barriers + segment info*/;
constexpr int THREADS = 384;
// Promotion every 4 k-blocks = 128 K: every 256 K misses the accuracy goal, every 64 K costs
// time (docs/design/sm90-kernels.md#3xtf32-gemm-kernel-fused_sm90).
constexpr int PROMO = 4;

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
template <int R>
__device__ __forceinline__ void fence_regs(float (&r)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

// wgmma m64n64k8 tf32, A from registers, B from shared memory (K-major descriptor).
__device__ __forceinline__ void wgmma_m64n64k8_tf32_rs(float (&d)[32], uint32_t a0, uint32_t a1,
                                                       uint32_t a2, uint32_t a3, uint64_t desc_b,
                                                       uint32_t scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, "
      "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b), "r"(scale_d));
}

__device__ __forceinline__ float lds_f32(uint32_t addr) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(addr));
  return v;
}

// The shared split (Tf32Split.hpp), as the bit patterns wgmma takes.
__device__ __forceinline__ void split_tf32(float x, uint32_t& hi, uint32_t& lo) {
  const Tf32Split s(x);
  hi = __float_as_uint(s.hi);
  lo = __float_as_uint(s.lo);
}

// smem descriptor for a K-major tile, 128-byte swizzle, 8-row groups 1024 bytes apart.
__device__ __forceinline__ uint64_t make_desc_sw128(uint32_t saddr) {
  return (uint64_t)((saddr & 0x3FFFFu) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) |
         ((uint64_t)1 << 62);
}

// Where a consumer thread finds its A fragments in a stage's A tile. A fragment row
// r0 = 64*cw + 16*warp + g, r1 = r0 + 8; per k8 step s: a0:(r0,t) a1:(r1,t) a2:(r0,t+4)
// a3:(r1,t+4), k counted within the block of 32.
//   K-major A (the layer's W): 128 rows of 32 k, 128 bytes each, swizzled in 8-row groups.
//   MN-major A (the gradient's W or X, rows of A contiguous in memory): four 4 KB boxes of 32 k
//   rows x 32 A rows (128 bytes), box j holding A rows 32j..32j+31, each swizzled alike.
struct AFragment {
  uint32_t base;   // byte offset of the thread's first element
  uint32_t sw[4];  // MN-major: 16-byte chunk offsets of (r0|r1) x (t|t+4) after the swizzle
};
template <bool kAMn>
__device__ __forceinline__ AFragment a_fragment(int cw, int warp, uint32_t g, uint32_t t) {
  AFragment f;
  if constexpr (!kAMn) {
    f.base = (uint32_t)(cw * 64 + warp * 16 + (int)g) * 128u + t * 4u;
    f.sw[0] = f.sw[1] = f.sw[2] = f.sw[3] = 0u;
  } else {
    f.base = (uint32_t)(2 * cw + (warp >> 1)) * 4096u + t * 128u + (g & 3u) * 4u;
    const uint32_t q0 = (uint32_t)(warp & 1) * 4u + (g >> 2);  // chunk of r0 within its row
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int j = 0; j < 2; ++j) f.sw[2 * h + j] = ((q0 + 2u * j) ^ (t + 4u * h)) << 4;
  }
  return f;
}

// Loads this thread's A fragments for one 32-k block and splits them (hi, lo).
template <bool kAMn>
__device__ __forceinline__ void load_split_a(uint32_t atile, const AFragment& f, uint32_t g,
                                             uint32_t (&hi)[16], uint32_t (&lo)[16]) {
#pragma unroll
  for (int s = 0; s < 4; ++s) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float x0, x1;
      if constexpr (!kAMn) {
        const uint32_t c = ((uint32_t)(2 * s + h) ^ g) << 4;
        x0 = lds_f32(atile + f.base + c);
        x1 = lds_f32(atile + f.base + 1024u + c);
      } else {
        const uint32_t row = atile + f.base + (uint32_t)(s * 1024 + h * 512);
        x0 = lds_f32(row + f.sw[2 * h]);
        x1 = lds_f32(row + f.sw[2 * h + 1]);
      }
      split_tf32(x0, hi[s * 4 + h * 2], lo[s * 4 + h * 2]);
      split_tf32(x1, hi[s * 4 + h * 2 + 1], lo[s * 4 + h * 2 + 1]);
    }
  }
}

// The barriers of the STAGES-deep ring: `full` completes when a stage's TMA bytes have landed
// (one arrival + transaction bytes), `empty` when all 256 consumer threads have released it.
__device__ __forceinline__ void init_ring(uint32_t bar_full, uint32_t bar_empty) {
#pragma unroll
  for (int s = 0; s < STAGES; ++s) {
    mbar_init(bar_full + 8 * s, 1);
    mbar_init(bar_empty + 8 * s, 256);
  }
  mbar_fence_init();
}

// The producer thread's set-up: tensor maps prefetched; W streamed once (evict first), X's parts
// reused by every tile of a column (evict last).
__device__ __forceinline__ void producer_setup(const CUtensorMap* tmW, const CUtensorMap* tmXh,
                                               const CUtensorMap* tmXl, uint64_t& pol_w,
                                               uint64_t& pol_x) {
  prefetch_tensormap(tmW);
  prefetch_tensormap(tmXh);
  prefetch_tensormap(tmXl);
  pol_w = policy_evict_first();
  pol_x = policy_evict_last();
}

// One stage's TMA loads onto its `full` barrier: A (W, or the gradient's MN-major operand in
// four boxes of 32 rows of A x 32 k), then the B parts (boxes of 32 k x 128 rows).
template <bool kAMn>
__device__ __forceinline__ void load_stage(uint32_t sbase, uint32_t bar_full, int s, int k, int n0,
                                           int m0, const CUtensorMap* tmW, const CUtensorMap* tmXh,
                                           const CUtensorMap* tmXl, uint64_t pol_w,
                                           uint64_t pol_x) {
  const uint32_t fb = bar_full + 8 * s;
  mbar_expect_tx(fb, STAGE_BYTES);
  const uint32_t dst = sbase + s * STAGE_BYTES;
  // k (or n0 + 32j) may lie beyond the extent: TMA fills zeros
  if constexpr (!kAMn) {
    tma_load_2d(dst, tmW, fb, k, n0, pol_w);
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) tma_load_2d(dst + j * 4096, tmW, fb, n0 + 32 * j, k, pol_w);
  }
  tma_load_2d(dst + TILE_BYTES, tmXh, fb, k, m0, pol_x);
  tma_load_2d(dst + 2 * TILE_BYTES, tmXl, fb, k, m0, pol_x);
}

// One 32-k block of one 64x64 half: per k8, W_lo.X_hi, W_hi.X_lo, then W_hi.X_hi (the small
// terms first); `fresh` = 0 starts a promotion range (scale-d = 0).
__device__ __forceinline__ void issue_half(float (&acc)[32], const uint32_t (&hi)[16],
                                           const uint32_t (&lo)[16], uint64_t dh, uint64_t dl,
                                           uint32_t fresh) {
#pragma unroll
  for (int k8 = 0; k8 < 4; ++k8) {
    const uint64_t off = (uint64_t)(k8 * 2);  // 32 bytes per k8 step, in 16-byte units
    wgmma_m64n64k8_tf32_rs(acc, lo[k8 * 4 + 0], lo[k8 * 4 + 1], lo[k8 * 4 + 2], lo[k8 * 4 + 3],
                           dh + off, k8 == 0 ? fresh : 1u);
    wgmma_m64n64k8_tf32_rs(acc, hi[k8 * 4 + 0], hi[k8 * 4 + 1], hi[k8 * 4 + 2], hi[k8 * 4 + 3],
                           dl + off, 1u);
    wgmma_m64n64k8_tf32_rs(acc, hi[k8 * 4 + 0], hi[k8 * 4 + 1], hi[k8 * 4 + 2], hi[k8 * 4 + 3],
                           dh + off, 1u);
  }
}

// One 32-k block of the stage at `tile`, both 64x64 halves: commit groups A_j, B_j; after
// committing A_j wait for B_{j-1} (whose stage is then released, `release`), after B_j wait
// for A_j, so one group is always in flight while the other half is promoted (tot += acc) and
// the wgmma pipeline never drains at a promotion point. Promotion ranges are PROMO blocks,
// offset by PROMO/2 from the callers' unrolled loop bodies (i, a compile-time constant there),
// so that every accumulator read follows, in straight-line code, the commit of the group it
// waits for (ptxas serializes all wgmmas otherwise, C7514).
template <bool kAMn>
__device__ __forceinline__ void mma_block(int i, uint32_t tile, const AFragment& af, uint32_t g,
                                          uint32_t fresh, bool release, uint32_t release_bar,
                                          float (&acc_a)[32], float (&acc_b)[32], float (&tot)[64],
                                          uint32_t (&hi)[16], uint32_t (&lo)[16]) {
  load_split_a<kAMn>(tile, af, g, hi, lo);
  const uint64_t dh = make_desc_sw128(tile + TILE_BYTES);
  const uint64_t dl = make_desc_sw128(tile + 2 * TILE_BYTES);
  // ---- half A (m 0..63) ----
  fence_regs(acc_a);
  wgmma_fence();
  issue_half(acc_a, hi, lo, dh, dl, fresh);
  wgmma_commit();
  fence_regs(acc_a);
  wgmma_wait<1>();  // half B of the previous block is done -> its stage is free
  fence_regs(acc_b);
  if (release) mbar_arrive(release_bar);
  if (i == PROMO / 2) {  // the previous block ended a range
#pragma unroll
    for (int q = 0; q < 32; ++q) tot[32 + q] += acc_b[q];
  }
  // ---- half B (m 64..127): B rows start 64*128 bytes = 512 descriptor units further ----
  fence_regs(acc_b);
  wgmma_fence();
  issue_half(acc_b, hi, lo, dh + 512, dl + 512, fresh);
  wgmma_commit();
  fence_regs(acc_b);
  wgmma_wait<1>();  // half A of this block is done
  fence_regs(acc_a);
  if (i == PROMO / 2 - 1) {  // this block ends a range
#pragma unroll
    for (int q = 0; q < 32; ++q) tot[q] += acc_a[q];
  }
}

// Where a kernel's sums go: Y[m][n] (rows m of B, rows n of A) through the layer's epilogue
// (kLayer), stored as they are (kStore: dX), or added to Y (kAdd: dW, accumulating).
enum OutMode : int { kLayer = 0, kStore = 1, kAdd = 2 };
struct Out {
  float* Y;
  int64_t ldy;
  const float* bias;
  float multiplier, slope;
  int mode;
};

// The epilogue of a consumer thread's 64 sums (rows n of A, columns m of B), masked at the edges
// of Y. (m, n stay below 2^31: extents are at most max_extent.)
__device__ __forceinline__ void store_tile(const float (&tot)[64], int m0, int n0, int cw, int warp,
                                           uint32_t g, uint32_t t, int M, int N, const Out& o) {
  const LeakyReLUEpilogue<float> ep{o.multiplier, o.slope};
  const int nr0 = n0 + cw * 64 + warp * 16 + (int)g;
  const int nr1 = nr0 + 8;
  const float b0 = (o.bias != nullptr && nr0 < N) ? __ldg(o.bias + nr0) : 0.f;
  const float b1 = (o.bias != nullptr && nr1 < N) ? __ldg(o.bias + nr1) : 0.f;
  float* __restrict__ Y = o.Y;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int mc = m0 + j * 8 + 2 * (int)t;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int m = mc + (q & 1);
      const int n = (q & 2) ? nr1 : nr0;
      if (m < M && n < N) {
        float* y = Y + (int64_t)m * o.ldy + n;
        const float v = tot[j * 4 + q];
        *y = o.mode == kLayer ? ep(v, (q & 2) ? b1 : b0) : o.mode == kStore ? v : *y + v;
      }
    }
  }
}

// k-blocks of a K extent, rounded up to whole promotion ranges (the extra blocks are zeros).
__host__ __device__ __forceinline__ int k_blocks(int K) {
  return (int)(((int64_t)K + BK * PROMO - 1) / (BK * PROMO) * PROMO);
}

// ---- Kernel 1: one CTA per 128x128 tile (hardware scheduling); best when there are many tiles.
// ----
template <bool kAMn>
__global__ void __launch_bounds__(THREADS, 1)
    tf32x3_gemm_tile_kernel(const __grid_constant__ CUtensorMap tmW,
                            const __grid_constant__ CUtensorMap tmXh,
                            const __grid_constant__ CUtensorMap tmXl, int M, int N, int K,
                            const Out out) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) &
                                             ~static_cast<uintptr_t>(1023));
  const uint32_t sbase = smem_u32(smem);
  const uint32_t bar_full = sbase + STAGES * STAGE_BYTES;  // STAGES x 8 bytes
  const uint32_t bar_empty = bar_full + STAGES * 8;

  const int nkb = k_blocks(K);
  const int m0 = blockIdx.x * BM;
  const int n0 = blockIdx.y * BN;
  const int wg = __shfl_sync(0xffffffffu, (int)(threadIdx.x / 128), 0);  // warp-uniform for ptxas

  if (threadIdx.x == 0) init_ring(bar_full, bar_empty);
  __syncthreads();

  if (wg == 0) {
    // ---------------- producer ----------------
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (threadIdx.x == 0) {
      uint64_t pol_w, pol_x;
      producer_setup(&tmW, &tmXh, &tmXl, pol_w, pol_x);
      for (int kb = 0; kb < nkb; ++kb) {
        const int s = kb % STAGES;
        if (kb >= STAGES) mbar_wait(bar_empty + 8 * s, ((kb / STAGES) - 1) & 1);
        load_stage<kAMn>(sbase, bar_full, s, kb * BK, n0, m0, &tmW, &tmXh, &tmXl, pol_w, pol_x);
      }
    }
  } else {
    // ---------------- consumers ----------------
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const int cw = wg - 1;
    const int tid = threadIdx.x & 127;
    const int warp = tid >> 5, lane = tid & 31;
    const uint32_t g = lane >> 2, t = lane & 3;
    const AFragment af = a_fragment<kAMn>(cw, warp, g, t);

    // Two 64x64 accumulators (m columns 0-63: acc_a, 64-127: acc_b), issued as alternating
    // commit groups, so one half can be promoted (tot += acc) while the other half's wgmmas run:
    // the wgmma pipeline never drains at a promotion point.
    float acc_a[32], acc_b[32], tot[64];
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      acc_a[i] = 0.f;
      acc_b[i] = 0.f;
    }
#pragma unroll
    for (int i = 0; i < 64; ++i) tot[i] = 0.f;
    uint32_t hiA[16], loA[16], hiB[16], loB[16];

    // nkb is rounded up to a multiple of PROMO; the extra k-blocks are zero-filled by TMA.
    auto step = [&](int kb, int i, uint32_t(&hi)[16], uint32_t(&lo)[16]) {
      const int s = kb % STAGES;
      mbar_wait(bar_full + 8 * s, (kb / STAGES) & 1);
      const uint32_t fresh = (i == PROMO / 2 || kb == 0) ? 0u : 1u;
      mma_block<kAMn>(i, sbase + s * STAGE_BYTES, af, g, fresh, kb > 0,
                      bar_empty + 8 * ((kb + STAGES - 1) % STAGES), acc_a, acc_b, tot, hi, lo);
    };

    for (int kb0 = 0; kb0 < nkb; kb0 += PROMO) {
#pragma unroll
      for (int i = 0; i < PROMO; i += 2) {
        step(kb0 + i, i, hiA, loA);
        step(kb0 + i + 1, i + 1, hiB, loB);
      }
    }
    // (the last stage is never released; nothing waits for it)
    wgmma_wait<0>();
    fence_regs(acc_a);
    fence_regs(acc_b);
#pragma unroll
    for (int q = 0; q < 32; ++q) {
      tot[q] += acc_a[q];
      tot[32 + q] += acc_b[q];
    }

    // ---------------- epilogue ----------------
    store_tile(tot, m0, n0, cw, warp, g, t, M, N, out);
  }
}

// ---- Kernel 2: persistent grid with split-K for the tiles beyond full waves; for few-tile shapes.
// ---- Work decomposition (persistent grid of P CTAs, at most what fits on the GPU at once):
//   tiles t = 0..T-1 (m fastest); a tile's K range is `upt` units of PROMO k-blocks.
//   Each CTA's logical index c is a ticket it takes when it starts (an atomic counter), not
//   blockIdx.x: CUDA does not promise to start blocks in index order.
//   Data-parallel part: tiles t < T_dp (= floor(T/P)*P) are done whole, CTA c takes t = c, c+P, ...
//   Remaining T_sk = T - T_dp (< P) tiles: tile i gets a "main" CTA H+i (H = P - T_sk) that does
//   its first mu units (mu ~ upt*T_sk/P) and finishes the tile; the tails (upt - mu units each, Ut
//   units in all) are split contiguously among the H "helper" CTAs 0..H-1, which write fp32
//   partials (slot h+i) and flags. Mains run their k-ranges in lockstep (same L2 locality as the
//   data-parallel waves), wait only on helpers, whose tickets are lower, and add partials in a
//   fixed order (deterministic). A helper never waits on anything, and a lower ticket was taken by
//   a CTA that is already running, so every wait ends whatever the grid size and the order in which
//   blocks start: the waits need no time-out.
struct Sched {
  int gx, T, T_dp, upt, P;
  int H, mu, tl;
  long long Ut;
};
struct SegInfo {
  int ndp, nsk, kind;      // kind: 0 none, 1 main, 2 helper
  int i0, off0, i1, off1;  // helper: first/last tail tile and start/end unit offsets in those tails
  int hf, hl;              // main: contributing helpers [hf, hl]
  int cta;                 // the ticket: this CTA's logical index
};
// Computed once per CTA by thread 0 (before the register split); read from shared memory after.
__host__ __device__ __forceinline__ void compute_segments(const Sched& S, int c, SegInfo* si) {
  si->cta = c;
  si->ndp = S.T_dp > c ? (S.T_dp - c + S.P - 1) / S.P : 0;
  si->nsk = 0;
  si->kind = 0;
  si->i0 = si->off0 = si->i1 = si->off1 = 0;
  si->hf = 0;
  si->hl = -1;
  const int T_sk = S.T - S.T_dp;
  if (T_sk <= 0) return;
  if (c >= S.H) {
    const int i = c - S.H;
    if (i >= T_sk) return;
    si->kind = 1;
    si->nsk = 1;
    if (S.tl > 0) {
      const long long a = (long long)i * S.tl, e = a + S.tl;
      for (int h = 0; h < S.H; ++h) {
        const long long lo = S.Ut * h / S.H, hi = S.Ut * (h + 1) / S.H;
        if (hi > lo && lo < e && hi > a) {
          if (si->hl < si->hf) si->hf = h;
          si->hl = h;
        }
      }
    }
  } else if (S.tl > 0) {
    const long long lo = S.Ut * c / S.H, hi = S.Ut * (c + 1) / S.H;
    if (hi <= lo) return;
    si->kind = 2;
    si->i0 = (int)(lo / S.tl);
    si->off0 = (int)(lo - (long long)si->i0 * S.tl);
    si->i1 = (int)((hi - 1) / S.tl);
    si->off1 = (int)(hi - (long long)si->i1 * S.tl);
    si->nsk = si->i1 - si->i0 + 1;
  }
}
// role: 0 complete tile, 1 finisher (main with helpers), 2 partial writer (helper; slot = partial
// index)
__host__ __device__ __forceinline__ void get_segment(const Sched& S, const SegInfo* si, int idx,
                                                     int& tile, int& ub, int& ue, int& role,
                                                     int& slot) {
  const int c = si->cta, ndp = si->ndp;
  tile = c + idx * S.P;
  ub = 0;
  ue = S.upt;
  role = 0;
  slot = 0;
  if (idx >= ndp) {
    if (si->kind == 1) {
      tile = S.T_dp + (c - S.H);
      ue = S.mu;
      role = (si->hl >= si->hf) ? 1 : 0;
    } else {
      const int j = idx - ndp, i = si->i0 + j;
      tile = S.T_dp + i;
      ub = S.mu + (j == 0 ? si->off0 : 0);
      ue = S.mu + (i == si->i1 ? si->off1 : S.tl);
      role = 2;
      slot = c + i;
    }
  }
}

__device__ __forceinline__ void consumer_bar() { asm volatile("bar.sync 1, 256;" ::: "memory"); }

template <bool kAMn>
__global__ void __launch_bounds__(THREADS, 1)
    tf32x3_gemm_persistent_kernel(const __grid_constant__ CUtensorMap tmW,
                                  const __grid_constant__ CUtensorMap tmXh,
                                  const __grid_constant__ CUtensorMap tmXl, const Sched S, int M,
                                  int N, const Out out, float* __restrict__ partials,
                                  unsigned* __restrict__ flags, unsigned* __restrict__ ticket) {
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) &
                                             ~static_cast<uintptr_t>(1023));
  const uint32_t sbase = smem_u32(smem);
  const uint32_t bar_full = sbase + STAGES * STAGE_BYTES;  // STAGES x 8 bytes
  const uint32_t bar_empty = bar_full + STAGES * 8;
  SegInfo* seginfo = reinterpret_cast<SegInfo*>(smem + STAGES * STAGE_BYTES + 2 * STAGES * 8);
  const int wg = __shfl_sync(0xffffffffu, (int)(threadIdx.x / 128), 0);  // warp-uniform for ptxas

  if (threadIdx.x == 0) {
    init_ring(bar_full, bar_empty);
    compute_segments(S, (int)atomicAdd(ticket, 1u), seginfo);
  }
  __syncthreads();

  if (wg == 0) {
    // ---------------- producer ----------------
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
    if (threadIdx.x == 0) {
      uint64_t pol_w, pol_x;
      producer_setup(&tmW, &tmXh, &tmXl, pol_w, pol_x);
      int it = 0;
      const int ns = seginfo->ndp + seginfo->nsk;
      for (int idx = 0; idx < ns; ++idx) {
        int tile, ub, ue, role, slot;
        get_segment(S, seginfo, idx, tile, ub, ue, role, slot);
        const int m0 = (tile % S.gx) * BM;
        const int n0 = (tile / S.gx) * BN;
        for (int kb = ub * PROMO; kb < ue * PROMO; ++kb, ++it) {
          const int s = it % STAGES;
          if (it >= STAGES) mbar_wait(bar_empty + 8 * s, ((it / STAGES) - 1) & 1);
          load_stage<kAMn>(sbase, bar_full, s, kb * BK, n0, m0, &tmW, &tmXh, &tmXl, pol_w, pol_x);
        }
      }
    }
  } else {
    // ---------------- consumers ----------------
    asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
    const int cw = wg - 1;
    const int ctid = threadIdx.x - 128;  // 0..255
    const int tid = threadIdx.x & 127;
    const int warp = tid >> 5, lane = tid & 31;
    const uint32_t g = lane >> 2, t = lane & 3;
    const AFragment af = a_fragment<kAMn>(cw, warp, g, t);

    // Two 64x64 accumulators (m columns 0-63: acc_a, 64-127: acc_b), issued as alternating
    // commit groups, so one half can be promoted (tot += acc) while the other half's wgmmas run.
    float acc_a[32], acc_b[32], tot[64];
    uint32_t hiA[16], loA[16], hiB[16], loB[16];
    int it = 0;  // ring position, same sequence as the producer

    auto step = [&](bool first, int i, uint32_t(&hi)[16], uint32_t(&lo)[16]) {
      const int s = it % STAGES;
      mbar_wait(bar_full + 8 * s, (it / STAGES) & 1);
      const uint32_t fresh = (i == PROMO / 2 || first) ? 0u : 1u;
      mma_block<kAMn>(i, sbase + s * STAGE_BYTES, af, g, fresh, !first,
                      bar_empty + 8 * ((it + STAGES - 1) % STAGES), acc_a, acc_b, tot, hi, lo);
      ++it;
    };

    const int nseg = seginfo->ndp + seginfo->nsk;
    for (int idx = 0; idx < nseg; ++idx) {
      int tile, ub, ue, role, slot;
      get_segment(S, seginfo, idx, tile, ub, ue, role, slot);
#pragma unroll
      for (int q = 0; q < 64; ++q) tot[q] = 0.f;
        // fresh definitions: the accumulators are then dead (not kept in registers) during the
        // epilogue
#pragma unroll
      for (int q = 0; q < 32; ++q) {
        acc_a[q] = 0.f;
        acc_b[q] = 0.f;
      }
      for (int u = ub; u < ue; ++u) {
#pragma unroll
        for (int i = 0; i < PROMO; i += 2) {
          step(u == ub && i == 0, i, hiA, loA);
          step(false, i + 1, hiB, loB);
        }
      }
      wgmma_wait<0>();
      fence_regs(acc_a);
      fence_regs(acc_b);
      mbar_arrive(bar_empty +
                  8 * ((it + STAGES - 1) % STAGES));  // release the segment's last stage
#pragma unroll
      for (int q = 0; q < 32; ++q) {
        tot[q] += acc_a[q];
        tot[32 + q] += acc_b[q];
      }
      get_segment(S, seginfo, idx, tile, ub, ue, role,
                  slot);  // re-read: keeps nothing live over the loop

      if (role == 2) {
        // partial tile for the main CTA of this tile: coalesced [16][256] float4 layout
        float4* dst = reinterpret_cast<float4*>(partials + (size_t)slot * (BM * BN));
#pragma unroll
        for (int q = 0; q < 16; ++q)
          __stcg(dst + q * 256 + ctid,
                 make_float4(tot[4 * q], tot[4 * q + 1], tot[4 * q + 2], tot[4 * q + 3]));
        __threadfence();
        consumer_bar();
        if (ctid == 0)
          asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(flags + slot), "r"(1u)
                       : "memory");
        continue;
      }
      if (role == 1) {
        // add the helpers' partials of this tile (fixed order: helper index ascending); each
        // helper holds a lower ticket, so it is running and never waits: the spin ends.
        const int i = tile - S.T_dp, hf = seginfo->hf, hl = seginfo->hl;
        if (ctid == 0) {
          for (int h = hf; h <= hl; ++h) {
            if (S.Ut * (h + 1) / S.H <= S.Ut * h / S.H) continue;  // helper without work
            unsigned v = 0;
            do {
              asm volatile("ld.acquire.gpu.global.u32 %0, [%1];"
                           : "=r"(v)
                           : "l"(flags + h + i)
                           : "memory");
            } while (v == 0);
          }
        }
        consumer_bar();
        for (int h = hf; h <= hl; ++h) {
          if (S.Ut * (h + 1) / S.H <= S.Ut * h / S.H) continue;  // helper without work
          const float4* src =
              reinterpret_cast<const float4*>(partials + (size_t)(h + i) * (BM * BN));
#pragma unroll
          for (int q = 0; q < 16; ++q) {
            const float4 v = __ldcg(src + q * 256 + ctid);
            tot[4 * q] += v.x;
            tot[4 * q + 1] += v.y;
            tot[4 * q + 2] += v.z;
            tot[4 * q + 3] += v.w;
          }
        }
      }
      // ---------------- epilogue ----------------
      store_tile(tot, (tile % S.gx) * BM, (tile / S.gx) * BN, cw, warp, g, t, M, N, out);
    }
  }
}

// Runs first on the stream, in one launch: rows r < M split X into hi/lo [M, Kp]; rows r >= M
// (only when W must be padded) copy W's row r - M into wp [N, Kp]; both zero for k >= K. Block
// (0, 0) also resets the split-K flags and the ticket counter of the kernel that follows. 2-D
// grid: x over float4 columns, y over rows (strided).
__global__ void __launch_bounds__(256)
    prepare_kernel(const float* __restrict__ X, int64_t ldx, const float* __restrict__ W,
                   int64_t ldw, int64_t M, int64_t rows, int64_t K, int64_t Kp,
                   float* __restrict__ xh, float* __restrict__ xl, float* __restrict__ wp,
                   int x_vec, unsigned* __restrict__ flags, int nflags) {
  if (blockIdx.x == 0 && blockIdx.y == 0)
    for (int i = threadIdx.x; i < nflags; i += blockDim.x) flags[i] = 0u;
  const int64_t k = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 4;
  if (k >= Kp) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const bool is_x = r < M;
    const float* src = is_x ? X + r * ldx : W + (r - M) * ldw;
    float v[4];
    if (is_x && x_vec && k + 3 < K) {
      const float4 f = __ldg(reinterpret_cast<const float4*>(src + k));
      v[0] = f.x;
      v[1] = f.y;
      v[2] = f.z;
      v[3] = f.w;
    } else {  // W comes here only when its rows are not 16-byte aligned
#pragma unroll
      for (int i = 0; i < 4; ++i) v[i] = (k + i < K) ? __ldg(src + k + i) : 0.f;
    }
    if (is_x) {
      const Tf32Split s0(v[0]), s1(v[1]), s2(v[2]), s3(v[3]);
      const int64_t o = r * Kp + k;
      __stcg(reinterpret_cast<float4*>(xh + o), make_float4(s0.hi, s1.hi, s2.hi, s3.hi));
      __stcg(reinterpret_cast<float4*>(xl + o), make_float4(s0.lo, s1.lo, s2.lo, s3.lo));
    } else {
      __stcg(reinterpret_cast<float4*>(wp + (r - M) * Kp + k), make_float4(v[0], v[1], v[2], v[3]));
    }
  }
}

constexpr int MAXP = 160;  // max persistent CTAs (partials/flags reserved in the workspace)

// The workspace, in order: X's parts, W padded (when needed), split-K partials, flags and the
// ticket counter. Each part starts on a 256-byte boundary.
struct Layout {
  int64_t Kp;
  bool pad_w;
  size_t xh, xl, wp, partials, flags, total;
};
inline size_t round256(size_t b) { return (b + 255) / 256 * 256; }
inline Layout layout(const Problem& p) {
  Layout L;
  // K = 0 takes the padded path too: one block of zeros stands for W (Y = ep(0 + b)).
  L.Kp = p.K > 0 ? (p.K + BK - 1) / BK * BK : BK;
  L.pad_w = p.K == 0 || !tma_rows_ok(p.W, p.ldw);
  const size_t xbytes = round256((size_t)p.M * (size_t)L.Kp * sizeof(float));
  L.xh = 0;
  L.xl = xbytes;
  L.wp = 2 * xbytes;
  L.partials = L.wp + (L.pad_w ? round256((size_t)p.N * (size_t)L.Kp * sizeof(float)) : 0);
  L.flags = L.partials + (size_t)MAXP * BM * BN * sizeof(float);
  L.total = L.flags + round256((MAXP + 1) * sizeof(unsigned));
  return L;
}

// Tiles of Y (BM x BN), as the kernels count them.
inline int64_t tiles_m(const Problem& p) { return (p.M + BM - 1) / BM; }
inline int64_t tiles_n(const Problem& p) { return (p.N + BN - 1) / BN; }

Sched make_sched(int M, int N, int K, int pmax) {
  Sched S;
  S.gx = (int)(((int64_t)M + BM - 1) / BM);
  const long long gy = ((int64_t)N + BN - 1) / BN;
  const long long T = (long long)S.gx * gy;
  const int nkb = (int)(((int64_t)K + BK - 1) / BK);
  S.upt = (nkb + PROMO - 1) / PROMO;
  if (T >= pmax) {
    S.P = pmax;
    S.T_dp = (int)((T / pmax) * pmax);
  } else {
    const long long units = T * S.upt;
    S.P = (int)(units < pmax ? units : pmax);
    S.T_dp = 0;
  }
  S.T = (int)T;
  const int T_sk = S.T - S.T_dp;
  S.H = 0;
  S.mu = S.upt;
  S.tl = 0;
  S.Ut = 0;
  if (T_sk > 0 && S.P > T_sk) {
    S.H = S.P - T_sk;
    long long mu = ((long long)S.upt * T_sk * 2 + S.P) / (2LL * S.P);  // round(upt * T_sk / P)
    if (mu < 1) mu = 1;
    if (mu > S.upt) mu = S.upt;
    S.mu = (int)mu;
    S.tl = S.upt - S.mu;
    S.Ut = (long long)T_sk * S.tl;
  } else if (T_sk > 0) {
    S.P = T_sk;  // (only when T_dp == 0 and T*upt <= P: one whole tile per CTA)
  }
  return S;
}

// The persistent grid's size: what fits on the GPU at once, at most MAXP (the workspace's slots).
// Correctness does not depend on it (tickets); a grid larger than what fits would only wait.
template <bool kAMn>
cudaError_t persistent_ctas(const Device& d, int& pmax) {
  cudaError_t e = cudaFuncSetAttribute(tf32x3_gemm_persistent_kernel<kAMn>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
  if (e != cudaSuccess) return e;
  int per_sm = 0;
  e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, tf32x3_gemm_persistent_kernel<kAMn>,
                                                    THREADS, SMEM_BYTES);
  if (e != cudaSuccess) return e;
  const long long fit =
      (long long)(per_sm > 0 ? per_sm : 1) * (d.multiprocessors > 0 ? d.multiprocessors : 1);
  pmax = (int)(fit < MAXP ? fit : MAXP);
  return cudaSuccess;
}

// Y[m][n] from A (map mA, n rows) and B's parts (maps mBh, mBl, m rows) over a reduction of
// `kp` (a multiple of BK; zeros past the operands' extent): the tile kernel (hardware-scheduled,
// faster per tile) unless its last wave would leave many SMs idle (wave efficiency
// T / (ceil(T/P) P) < 0.9), then the persistent split-K kernel; `kernel_choice` 1 or 2 forces one.
// `flags` (MAXP + 1 of them, the last the ticket) must be zero when the launch runs.
template <bool kAMn>
cudaError_t launch_gemm(cudaStream_t stream, const Device& d, const CUtensorMap& mA,
                        const CUtensorMap& mBh, const CUtensorMap& mBl, int64_t m, int64_t n,
                        int64_t kp, const Out& out, float* partials, unsigned* flags,
                        int kernel_choice) {
  const int64_t gx = (m + BM - 1) / BM, gy = (n + BN - 1) / BN;
  int pmax = 0;
  cudaError_t e;
  if ((e = persistent_ctas<kAMn>(d, pmax)) != cudaSuccess) return e;
  int which = kernel_choice;
  if (which != 1 && which != 2) {
    const long long T = gx * gy;
    const long long waves = (T + pmax - 1) / pmax;
    which = ((double)T >= 0.9 * (double)(waves * pmax)) ? 1 : 2;
  }
  if (gy > 65535) which = 2;  // tile kernel grid.y limit
  if (which == 1) {
    if ((e = cudaFuncSetAttribute(tf32x3_gemm_tile_kernel<kAMn>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES)) !=
        cudaSuccess)
      return e;
    return launch_kernel(tf32x3_gemm_tile_kernel<kAMn>, dim3((unsigned)gx, (unsigned)gy),
                         dim3(THREADS), SMEM_BYTES, stream, mA, mBh, mBl, (int)m, (int)n, (int)kp,
                         out);
  }
  const Sched S = make_sched((int)m, (int)n, (int)kp, pmax);
  return launch_kernel(tf32x3_gemm_persistent_kernel<kAMn>, dim3(S.P), dim3(THREADS), SMEM_BYTES,
                       stream, mA, mBh, mBl, S, (int)m, (int)n, out, partials, flags, flags + MAXP);
}

// The gradient's B operand, split: rows p of B = rows of G (dX: B = G) or its columns (dW:
// B = G^T), into bh / bl [P, ldb] (hi, lo); 32 x 32 tiles through shared memory, so that both
// the reads of G and the writes are whole rows. Block (0, 0) also resets the flags and ticket of
// the GEMM kernel that follows.
__global__ void __launch_bounds__(256)
    gradient_split_kernel(const float* __restrict__ G, int64_t ldg, int64_t rows, int64_t cols,
                          int transpose, float* __restrict__ bh, float* __restrict__ bl,
                          int64_t ldb, unsigned* __restrict__ flags, int nflags) {
  __shared__ float tile[32][33];
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
  if (blockIdx.x == 0 && blockIdx.y == 0)
    for (int i = threadIdx.x; i < nflags; i += blockDim.x) flags[i] = 0u;
  const int64_t c0 = (int64_t)blockIdx.x * 32;
  for (int64_t r0 = (int64_t)blockIdx.y * 32; r0 < rows; r0 += (int64_t)gridDim.y * 32) {
#pragma unroll
    for (int i = ty; i < 32; i += 8) {
      const int64_t r = r0 + i, c = c0 + tx;
      tile[i][tx] = (r < rows && c < cols) ? __ldg(G + r * ldg + c) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int i = ty; i < 32; i += 8) {
      // B's row p and column (the reduction index) of this thread's element
      const int64_t p = transpose ? c0 + i : r0 + i, q = transpose ? r0 + tx : c0 + tx;
      if (p < (transpose ? cols : rows) && q < (transpose ? rows : cols)) {
        const Tf32Split v(transpose ? tile[tx][i] : tile[i][tx]);
        __stcg(bh + p * ldb + q, v.hi);
        __stcg(bl + p * ldb + q, v.lo);
      }
    }
    __syncthreads();
  }
}

// The gradient product's workspace: B's parts [P, ldb], then the split-K partials and flags.
struct GradientLayout {
  int64_t ldb;
  size_t bh, bl, partials, flags, total;
};
inline GradientLayout gradient_layout(const GradientProduct& p) {
  GradientLayout L;
  L.ldb = (p.R + BK - 1) / BK * BK;
  const size_t bbytes = round256((size_t)p.P * (size_t)L.ldb * sizeof(float));
  L.bh = 0;
  L.bl = bbytes;
  L.partials = 2 * bbytes;
  L.flags = L.partials + (size_t)MAXP * BM * BN * sizeof(float);
  L.total = L.flags + round256((MAXP + 1) * sizeof(unsigned));
  return L;
}

}  // namespace tf32x3_detail

const char* tf32x3_refusal(const Device& d, const Problem& p) {
  using namespace tf32x3_detail;
  if (d.cc_major != 9 || d.cc_minor != 0) return "needs a compute capability 9.0 GPU (H100, H200)";
  if (p.M < 0 || p.N < 0 || p.K < 0) return "needs non-negative extents";
  if (p.M > max_extent || p.N > max_extent || p.K > max_extent)
    return "needs M, N and K of at most Sm90::max_extent (2^31 - 1024)";
  if (p.ldx < p.K || p.ldw < p.K || p.ldy < p.N || p.ldx < 0 || p.ldw < 0 || p.ldy < 0)
    return "needs row strides of at least the rows' lengths";
  // Tile and ticket indices are 32-bit; Y would need 2^45 elements to reach this.
  if (tiles_m(p) * tiles_n(p) > 0x7fffffffLL)
    return "needs fewer than 2^31 tiles of 128 x 128 in Y";
  return nullptr;
}

std::size_t tf32x3_workspace_bytes(const Problem& p) {
  using namespace tf32x3_detail;
  if (p.M < 1 || p.N < 1) return 0;
  return layout(p).total;
}

cudaError_t tf32x3_linear_leaky_relu(cudaStream_t stream, const Device& d, const Problem& p,
                                     void* workspace, std::size_t workspace_bytes,
                                     int kernel_choice) {
  using namespace tf32x3_detail;
  if (tf32x3_refusal(d, p) != nullptr) return cudaErrorInvalidValue;
  if (p.M == 0 || p.N == 0) return cudaSuccess;  // nothing to write
  if (!p.Y || (p.K > 0 && (!p.X || !p.W)) || !workspace) return cudaErrorInvalidValue;
  if ((reinterpret_cast<uintptr_t>(workspace) & 15) != 0) return cudaErrorInvalidValue;
  const Layout L = layout(p);
  if (workspace_bytes < L.total) return cudaErrorInvalidValue;

  char* ws = static_cast<char*>(workspace);
  float* xh = reinterpret_cast<float*>(ws + L.xh);
  float* xl = reinterpret_cast<float*>(ws + L.xl);
  float* wp = L.pad_w ? reinterpret_cast<float*>(ws + L.wp) : nullptr;
  float* partials = reinterpret_cast<float*>(ws + L.partials);
  unsigned* flags = reinterpret_cast<unsigned*>(ws + L.flags);

  CUtensorMap mW, mXh, mXl;
  const bool maps_ok =
      (L.pad_w ? make_map_2d(&mW, wp, (uint64_t)L.Kp, (uint64_t)p.N, (uint64_t)L.Kp, BK, BN,
                             CU_TENSOR_MAP_SWIZZLE_128B)
               : make_map_2d(&mW, p.W, (uint64_t)p.K, (uint64_t)p.N, (uint64_t)p.ldw, BK, BN,
                             CU_TENSOR_MAP_SWIZZLE_128B)) &&
      make_map_2d(&mXh, xh, (uint64_t)L.Kp, (uint64_t)p.M, (uint64_t)L.Kp, BK, BM,
                  CU_TENSOR_MAP_SWIZZLE_128B) &&
      make_map_2d(&mXl, xl, (uint64_t)L.Kp, (uint64_t)p.M, (uint64_t)L.Kp, BK, BM,
                  CU_TENSOR_MAP_SWIZZLE_128B);
  if (!maps_ok) return cudaErrorInvalidValue;

  cudaError_t e;
  {
    const int threads = 256;
    const int64_t rows = p.M + (L.pad_w ? p.N : 0);
    const dim3 grid((unsigned)((L.Kp / 4 + threads - 1) / threads),
                    (unsigned)(rows < 65535 ? rows : 65535));
    const int x_vec = tma_rows_ok(p.X, p.ldx) ? 1 : 0;
    e = launch_kernel(prepare_kernel, grid, dim3(threads), 0, stream, p.X, p.ldx, p.W, p.ldw, p.M,
                      rows, p.K, L.Kp, xh, xl, wp, x_vec, flags, MAXP + 1);
    if (e != cudaSuccess) return e;
  }

  // (the padded K: the same blocks, zeros past K)
  const Out out{p.Y, p.ldy, p.bias, p.multiplier, p.slope, kLayer};
  return launch_gemm<false>(stream, d, mW, mXh, mXl, p.M, p.N, L.Kp, out, partials, flags,
                            kernel_choice);
}

const char* tf32x3_gradient_refusal(const Device& d, const GradientProduct& p) {
  using namespace tf32x3_detail;
  if (d.cc_major != 9 || d.cc_minor != 0) return "needs a compute capability 9.0 GPU (H100, H200)";
  if (p.P < 0 || p.K < 0 || p.R < 0) return "needs non-negative extents";
  if (p.P > max_extent || p.K > max_extent || p.R > max_extent)
    return "needs M, N and K of at most Sm90::max_extent (2^31 - 1024)";
  if (p.lds < p.K || p.ldg < (p.transpose_g ? p.P : p.R) || p.ldd < p.K)
    return "needs row strides of at least the rows' lengths";
  if (!tma_rows_ok(p.S, p.lds))
    return "reads W (dX) and X (dW) with the copy engine: their data and row strides must be "
           "multiples of 16 bytes";
  if (((p.P + BM - 1) / BM) * ((p.K + BN - 1) / BN) > 0x7fffffffLL)
    return "needs fewer than 2^31 tiles of 128 x 128 in the output";
  return nullptr;
}

std::size_t tf32x3_gradient_workspace_bytes(const GradientProduct& p) {
  using namespace tf32x3_detail;
  if (p.P < 1 || p.K < 1 || p.R < 1) return 0;
  return gradient_layout(p).total;
}

cudaError_t tf32x3_gradient(cudaStream_t stream, const Device& d, const GradientProduct& p,
                            void* workspace, std::size_t workspace_bytes, int kernel_choice) {
  using namespace tf32x3_detail;
  if (tf32x3_gradient_refusal(d, p) != nullptr) return cudaErrorInvalidValue;
  if (p.P == 0 || p.K == 0 || p.R == 0) return cudaSuccess;  // the caller fills an empty sum
  if (!p.S || !p.G || !p.D || !workspace) return cudaErrorInvalidValue;
  if ((reinterpret_cast<uintptr_t>(workspace) & 15) != 0) return cudaErrorInvalidValue;
  const GradientLayout L = gradient_layout(p);
  if (workspace_bytes < L.total) return cudaErrorInvalidValue;

  char* ws = static_cast<char*>(workspace);
  float* bh = reinterpret_cast<float*>(ws + L.bh);
  float* bl = reinterpret_cast<float*>(ws + L.bl);
  float* partials = reinterpret_cast<float*>(ws + L.partials);
  unsigned* flags = reinterpret_cast<unsigned*>(ws + L.flags);

  // A = S [R, K] read MN-major in boxes of 32 x 32; B's parts [P, R] K-major, zeros past R.
  CUtensorMap mS, mBh, mBl;
  if (!make_map_2d(&mS, p.S, (uint64_t)p.K, (uint64_t)p.R, (uint64_t)p.lds, 32, 32,
                   CU_TENSOR_MAP_SWIZZLE_128B) ||
      !make_map_2d(&mBh, bh, (uint64_t)p.R, (uint64_t)p.P, (uint64_t)L.ldb, BK, BM,
                   CU_TENSOR_MAP_SWIZZLE_128B) ||
      !make_map_2d(&mBl, bl, (uint64_t)p.R, (uint64_t)p.P, (uint64_t)L.ldb, BK, BM,
                   CU_TENSOR_MAP_SWIZZLE_128B))
    return cudaErrorInvalidValue;

  // G is [M, N]: rows P and columns R for dX, rows R and columns P for dW.
  const int64_t g_rows = p.transpose_g ? p.R : p.P, g_cols = p.transpose_g ? p.P : p.R;
  const int64_t row_tiles = (g_rows + 31) / 32;
  const dim3 grid((unsigned)((g_cols + 31) / 32),
                  (unsigned)(row_tiles < 65535 ? row_tiles : 65535));
  cudaError_t e =
      launch_kernel(gradient_split_kernel, grid, dim3(256), 0, stream, p.G, p.ldg, g_rows, g_cols,
                    p.transpose_g ? 1 : 0, bh, bl, L.ldb, flags, MAXP + 1);
  if (e != cudaSuccess) return e;
  const Out out{p.D, p.ldd, nullptr, 1.f, 1.f, p.accumulate ? kAdd : kStore};
  return launch_gemm<true>(stream, d, mS, mBh, mBl, p.P, p.K, L.ldb, out, partials, flags,
                           kernel_choice);
}

}  // namespace Sm90
}  // namespace Impl
}  // namespace FusedLinear
