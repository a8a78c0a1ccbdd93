// SPDX-License-Identifier: Apache-2.0
/// \file HostKernels.hpp
/// The host (CPU) kernels behind fused and fused_skinny: register-blocked loops whose innermost
/// loop is one or two SIMD vectors of the instruction set the compiler targets (the -march that
/// Kokkos_ARCH_* gives every consumer of Kokkos: AVX-512 with Kokkos_ARCH_SKX, AVX2 with HSW/ZEN*,
/// SSE2 with none), and the epilogue applied in registers before the single write of Y.
///
/// Nothing Kokkos 3.4 lacks (it has no SIMD types): plain loops that the compiler vectorises,
/// with OpenMP's `simd simdlen(lanes)` where the host compiler runs with OpenMP (GCC 12's tuning
/// for AVX-512 CPUs prefers 256-bit vectors otherwise, half the arithmetic per instruction; with
/// it the perf program's micro-kernel is 24 vfmadd231ps on zmm registers per k). Intrinsics only
/// in one place, the 16 x 16 transposes of the packing (transpose_16x16), with a plain fallback.
/// Every element of Y is one thread's sum over k in a fixed order, whatever the thread count.
#ifndef FUSED_LINEAR_IMPL_KERNELS_HOST_KERNELS_HPP
#define FUSED_LINEAR_IMPL_KERNELS_HOST_KERNELS_HPP

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <Kokkos_Core.hpp>

#if defined(__AVX512F__) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#include <immintrin.h>
#define FUSED_LINEAR_HOST_AVX512_TRANSPOSE 1
#endif

#include "FusedLinear/Epilogue.hpp"
#include "FusedLinear/impl/kernels/Common.hpp"

#define FUSED_LINEAR_PRAGMA(x) _Pragma(#x)
// A loop of exactly `lanes` iterations (or a multiple) that is one SIMD vector of the host.
#if defined(_OPENMP) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#define FUSED_LINEAR_HOST_SIMD(lanes) FUSED_LINEAR_PRAGMA(omp simd simdlen(lanes))
#else
#define FUSED_LINEAR_HOST_SIMD(lanes) FUSED_LINEAR_UNROLL
#endif

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

#if defined(FUSED_LINEAR_HOST_AVX512_TRANSPOSE)
/// dst[q * ld + j] = rows[j][q] for j, q < 16 (a 16 x 16 block of floats transposed in
/// registers), storing the lanes of `lanes`. The one place the host kernels use intrinsics:
/// packing transposes W and X, and element by element it took a fifth of the fused kernel's
/// time at 1024^3 (0.7 ns per element against 0.3 ns this way, docs/design/host-kernels.md); compilers
/// do not find this shuffle network themselves.
inline void transpose_16x16(const float* const (&rows)[16], float* dst, std::int64_t ld,
                            __mmask16 lanes) {
  __m512 r[16], t[16];
  for (int j = 0; j < 16; ++j) r[j] = _mm512_loadu_ps(rows[j]);
  for (int j = 0; j < 16; j += 2) {
    t[j] = _mm512_unpacklo_ps(r[j], r[j + 1]);
    t[j + 1] = _mm512_unpackhi_ps(r[j], r[j + 1]);
  }
  for (int j = 0; j < 16; j += 4) {
    r[j] = _mm512_shuffle_ps(t[j], t[j + 2], 0x44);
    r[j + 1] = _mm512_shuffle_ps(t[j], t[j + 2], 0xEE);
    r[j + 2] = _mm512_shuffle_ps(t[j + 1], t[j + 3], 0x44);
    r[j + 3] = _mm512_shuffle_ps(t[j + 1], t[j + 3], 0xEE);
  }
  for (int h = 0; h < 16; h += 8) {
    for (int j = 0; j < 4; ++j) {
      t[h + j] = _mm512_shuffle_f32x4(r[h + j], r[h + j + 4], 0x88);
      t[h + j + 4] = _mm512_shuffle_f32x4(r[h + j], r[h + j + 4], 0xDD);
    }
  }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
    r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xDD);
  }
  for (int q = 0; q < 16; ++q) _mm512_mask_storeu_ps(dst + q * ld, lanes, r[q]);
}
#endif

/// Tiles of the host fused kernel (a GEMM in the manner of GotoBLAS/BLIS with the epilogue in
/// registers), one place.
///
/// Micro-tile: `mr` rows x `nr` columns of Y in registers, nr = two vectors; each k costs two
/// vector loads of packed W, mr broadcasts of packed X and 2 mr multiply-adds, so mr is as large
/// as the register file allows: 2 mr accumulators + 2 + 1 registers (AVX-512: 32 registers,
/// mr = 12 (24 accumulators); AVX2/SSE: 16 registers, mr = 6 (12)). K advances in blocks of
/// `kc`: an X strip (mr x kc, packed k-major) stays in L1 while the packed W micro-panels
/// (kc x nr each) stay in L1 in turn while the item's X strips stream from L2 (the item's
/// packed W block, columns x kc, and X block, rows x kc, stay there). A work item is a tile of Y
/// of up to `max_columns` columns (W block 512 KB for float on AVX-512) and `max_rows` rows (X
/// block 768 KB): the W block it packs serves all of its rows and the X block all of its
/// columns (packing costs about 1 ns per element of W or X, against rows or columns / 32 cycles
/// of multiply-adds on AVX-512). X is packed too although its rows are contiguous along K: read
/// in place, the mr rows (K apart, 4 KB at K = 1024) fall in the same L1 sets.
/// Measured (1 thread, share of the FMA peak, 768x1024x768, 512x4096x4096): kc = 128 or 384
/// 5-10% below 256; max_columns 8 nr 5-15% below 16 nr, 32 nr level or 3% below.
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

/// Y = ep(X . W^T, b) on the host: one work item per tile of Y (HostFusedGrid), K in blocks of
/// kc; in each block the tile's columns of W packed k-major in nr-wide panels (zero past N) and
/// its rows of X in k-major mr-row strips, then every mr x nr micro-tile accumulated in
/// registers over the block, added to Y's partial sums between blocks and put through the
/// epilogue in the last one. Any layout: X, W and Y are read and written through their strides
/// (Y with whole-vector stores where it is contiguous along N).
template <class ExecSpace, class XView, class WView, class BView, class YView>
struct HostFusedKernel {
  using Scalar = typename YView::non_const_value_type;
  using Tiles = HostFusedTiles<Scalar>;
  static constexpr int L = Tiles::lanes, MR = Tiles::mr, NR = Tiles::nr, KC = Tiles::kc;
  using policy_type = Kokkos::TeamPolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>>;
  using member_type = typename policy_type::member_type;

  XView X;
  WView W;
  BView b;
  YView Y;
  LeakyReLUEpilogue<Scalar> ep;
  std::int64_t M, N, K;
  HostFusedGrid grid;

  // The packed W block, then the packed X block (strips of mr rows), from a cache line.
  static std::size_t w_block(const HostFusedGrid& g) { return std::size_t(g.tile_n) * KC; }
  static std::size_t scratch_bytes(const HostFusedGrid& g) {
    return (w_block(g) + std::size_t(g.tile_m) * KC) * sizeof(Scalar) + 64;
  }
  policy_type policy(const ExecSpace& exec) const {
    return policy_type(exec, league_size(grid.items(), M, N), 1)
        .set_scratch_size(1, Kokkos::PerTeam(scratch_bytes(grid)));
  }

  void operator()(const member_type& team) const {
    const std::int64_t item = team.league_rank();
    // Items of one column block are adjacent: the threads working at once share W's block in
    // the last-level cache.
    const std::int64_t m0 = item % grid.tiles_m * grid.tile_m;
    const std::int64_t n0 = item / grid.tiles_m * grid.tile_n;
    const std::int64_t m1 = m0 + grid.tile_m < M ? m0 + grid.tile_m : M;
    const std::int64_t n1 = n0 + grid.tile_n < N ? n0 + grid.tile_n : N;
    const std::int64_t panels = (n1 - n0 + NR - 1) / NR;
    const std::size_t bytes = scratch_bytes(grid);
    auto* const raw = static_cast<char*>(team.team_scratch(1).get_shmem(bytes));
    Scalar* const packed_w =
        reinterpret_cast<Scalar*>((reinterpret_cast<std::uintptr_t>(raw) + 63) / 64 * 64);
    Scalar* const packed_x = packed_w + w_block(grid);

    // Per K block: pack, then each W micro-panel (kc x nr, in L1) against every X strip
    // (mr x kc, from L2). (X strips outermost, each W panel streaming from L2, measured the
    // same within the noise; kc = 128 or 384 instead of 256 5-10% slower at 768x1024x768.)
    for (std::int64_t pc = 0; pc < K; pc += KC) {
      const int kc = K - pc < KC ? int(K - pc) : KC;
      pack_w(n0, n1, pc, kc, packed_w);
      for (std::int64_t m = m0; m < m1; m += MR)
        pack_x(m, m1 - m < MR ? int(m1 - m) : MR, pc, kc, packed_x + (m - m0) * kc);
      const bool first = pc == 0, last = pc + kc == K;
      for (std::int64_t p = 0; p < panels; ++p) {
        const std::int64_t n = n0 + p * NR;
        const int columns = n1 - n < NR ? int(n1 - n) : NR;
        for (std::int64_t m = m0; m < m1; m += MR)
          micro_tile(packed_x + (m - m0) * kc, packed_w + p * kc * NR, kc, m,
                     m1 - m < MR ? int(m1 - m) : MR, n, columns, first, last);
      }
    }
  }

  /// W[n0:n1, pc:pc+kc) as panels of nr columns, each k-major (kc rows of nr values), zero
  /// past N.
  void pack_w(std::int64_t n0, std::int64_t n1, std::int64_t pc, int kc, Scalar* packed) const {
    const std::int64_t ws0 = W.stride(0), ws1 = W.stride(1);
    for (std::int64_t n = n0; n < n1; n += NR) {
      Scalar* const panel = packed + (n - n0) / NR * kc * NR;
      const int columns = n1 - n < NR ? int(n1 - n) : NR;
      if (ws0 == 1 && columns == NR) {
        // LayoutLeft W: the panel's rows are contiguous in W.
        for (int k = 0; k < kc; ++k) {
          const Scalar* const w = W.data() + n + (pc + k) * ws1;
          FUSED_LINEAR_HOST_SIMD(L)
          for (int j = 0; j < NR; ++j) panel[k * NR + j] = w[j];
        }
        continue;
      }
      // W's rows contiguous along K (PyTorch's layout): 16 x 16 blocks transposed in registers
      // (AVX-512, float), or each row read in order and written as a column of the panel.
      int k_done = 0;
#if defined(FUSED_LINEAR_HOST_AVX512_TRANSPOSE)
      if constexpr (std::is_same<Scalar, float>::value && NR % 16 == 0) {
        if (ws1 == 1 && columns == NR) {
          for (; k_done + 16 <= kc; k_done += 16) {
            for (int j0 = 0; j0 < NR; j0 += 16) {
              const float* rows[16];
              for (int j = 0; j < 16; ++j) rows[j] = W.data() + (n + j0 + j) * ws0 + pc + k_done;
              transpose_16x16(rows, panel + k_done * NR + j0, NR, 0xFFFF);
            }
          }
        }
      }
#endif
      for (int j = 0; j < NR; ++j) {
        const Scalar* const w = W.data() + (n + (j < columns ? j : 0)) * ws0 + pc * ws1;
        if (j >= columns) {
          for (int k = k_done; k < kc; ++k) panel[k * NR + j] = Scalar(0);
        } else if (ws1 == 1) {
          for (int k = k_done; k < kc; ++k) panel[k * NR + j] = w[k];
        } else {
          for (int k = k_done; k < kc; ++k) panel[k * NR + j] = w[k * ws1];
        }
      }
    }
  }

  /// X[m:m+rows, pc:pc+kc) k-major (kc rows of mr values); rows past the strip repeat its
  /// first row (computed, never stored).
  void pack_x(std::int64_t m, int rows, std::int64_t pc, int kc, Scalar* packed) const {
    const std::int64_t xs0 = X.stride(0), xs1 = X.stride(1);
    int k_done = 0;
#if defined(FUSED_LINEAR_HOST_AVX512_TRANSPOSE)
    if constexpr (std::is_same<Scalar, float>::value && MR <= 16) {
      if (xs1 == 1) {
        for (; k_done + 16 <= kc; k_done += 16) {
          const float* x[16];
          for (int i = 0; i < 16; ++i)
            x[i] = X.data() + (m + (i < rows ? i : 0)) * xs0 + pc + k_done;
          transpose_16x16(x, packed + k_done * MR, MR, __mmask16((1u << MR) - 1));
        }
      }
    }
#endif
    for (int i = 0; i < MR; ++i) {
      const Scalar* const x = X.data() + (m + (i < rows ? i : 0)) * xs0 + pc * xs1;
      if (xs1 == 1) {
        for (int k = k_done; k < kc; ++k) packed[k * MR + i] = x[k];
      } else {
        for (int k = k_done; k < kc; ++k) packed[k * MR + i] = x[k * xs1];
      }
    }
  }

  /// One mr x nr tile of Y over one K block: kc rank-1 updates from zero, plus Y's partial
  /// sums of the earlier blocks (added after the block: loaded first, they would stall the
  /// multiply-adds for an L3 miss per row, Y being larger than L2; they are prefetched
  /// instead), stored as partial sums or, in the last block, through the epilogue. Each element
  /// of Y is thus ((block 0) + block 1) + ...: one order whatever the thread count.
  void micro_tile(const Scalar* xp, const Scalar* wp, int kc, std::int64_t m, int rows,
                  std::int64_t n, int columns, bool first, bool last) const {
    const std::int64_t ys0 = Y.stride(0), ys1 = Y.stride(1);
    Scalar* const y = Y.data() + m * ys0 + n * ys1;
    const bool whole = columns == NR && ys1 == 1;
#if defined(__GNUC__)
    if (!first && whole) {
      for (int i = 0; i < rows; ++i) {
        FUSED_LINEAR_UNROLL
        for (int j = 0; j < NR; j += 64 / int(sizeof(Scalar)))
          __builtin_prefetch(y + i * ys0 + j, 1);
      }
    }
#endif
    Scalar acc[MR][NR];
    FUSED_LINEAR_UNROLL
    for (int i = 0; i < MR; ++i) {
      FUSED_LINEAR_HOST_SIMD(L)
      for (int j = 0; j < NR; ++j) acc[i][j] = Scalar(0);
    }
    for (int k = 0; k < kc; ++k) {
      FUSED_LINEAR_UNROLL
      for (int i = 0; i < MR; ++i) {
        const Scalar a = xp[k * MR + i];
        FUSED_LINEAR_HOST_SIMD(L)
        for (int j = 0; j < NR; ++j) acc[i][j] += a * wp[k * NR + j];
      }
    }
    if (whole)
      finish_whole(acc, y, ys0, rows, n, first, last);
    else
      finish_edge(acc, y, ys0, ys1, rows, n, columns, first, last);
  }

  /// Partial sums, epilogue and stores of a micro-tile whose nr columns are contiguous in Y:
  /// every loop a whole number of vectors, without per-element conditions (GCC left the
  /// epilogue scalar when they were mixed in).
  void finish_whole(Scalar (&acc)[MR][NR], Scalar* y, std::int64_t ys0, int rows, std::int64_t n,
                    bool first, bool last) const {
    if (!first) {
      FUSED_LINEAR_UNROLL
      for (int i = 0; i < MR; ++i) {
        const Scalar* const yi = y + (i < rows ? i : 0) * ys0;
        FUSED_LINEAR_HOST_SIMD(L)
        for (int j = 0; j < NR; ++j) acc[i][j] = yi[j] + acc[i][j];
      }
    }
    if (last) {
      const LeakyReLUEpilogue<Scalar> e = ep;
      Scalar bias[NR];
      for (int j = 0; j < NR; ++j) bias[j] = b(n + j);
      FUSED_LINEAR_UNROLL
      for (int i = 0; i < MR; ++i) {
        FUSED_LINEAR_HOST_SIMD(L)
        for (int j = 0; j < NR; ++j) acc[i][j] = e(acc[i][j], bias[j]);
      }
    }
    FUSED_LINEAR_UNROLL
    for (int i = 0; i < MR; ++i) {
      if (i < rows) {
        Scalar* const yi = y + i * ys0;
        FUSED_LINEAR_HOST_SIMD(L)
        for (int j = 0; j < NR; ++j) yi[j] = acc[i][j];
      }
    }
  }

  /// The same for the last columns of Y (fewer than nr) or a Y strided along N: element by
  /// element.
  void finish_edge(const Scalar (&acc)[MR][NR], Scalar* y, std::int64_t ys0, std::int64_t ys1,
                   int rows, std::int64_t n, int columns, bool first, bool last) const {
    for (int i = 0; i < rows; ++i) {
      for (int j = 0; j < columns; ++j) {
        Scalar v = acc[i][j];
        if (!first) v = y[i * ys0 + j * ys1] + v;
        if (last) v = ep(v, Scalar(b(n + j)));
        y[i * ys0 + j * ys1] = v;
      }
    }
  }
};

template <class ExecSpace, class XView, class WView, class BView, class YView, class Scalar>
void run_fused_host(const ExecSpace& exec, const XView& X, const WView& W, const BView& b,
                    const YView& Y, const LeakyReLUEpilogue<Scalar>& ep) {
  const std::int64_t M = Y.extent(0), N = Y.extent(1), K = X.extent(1);
  using Tiles = HostFusedTiles<Scalar>;
  const HostFusedGrid grid(M, N, exec.concurrency(), Tiles::mr, Tiles::nr, Tiles::max_rows,
                           Tiles::max_columns);
  using Kernel = HostFusedKernel<ExecSpace, XView, WView, BView, YView>;
  const Kernel kernel{X, W, b, Y, ep, M, N, K, grid};
  Kokkos::parallel_for("FusedLinear::fused[host]", kernel.policy(exec), kernel);
}

/// Tiles of the host skinny kernel (few rows of X: W streams from memory once): dot products
/// along K, `rows` x `columns` of them in registers as vectors of partial sums (one vector
/// load of W per column and of X per row per step, rows x columns multiply-adds; AVX-512:
/// 8 x 3 = 24 accumulators + 3 + 1 registers; AVX2/SSE: 4 x 2), added across their lanes once
/// at the end. Row blocks of 8, 4, 2 and 1 rows (so that M = 1 computes one row, not eight).
/// A work item is `group_columns` columns of Y (a multiple of `columns`) and all rows.
template <class Scalar>
struct HostSkinnyTiles {
  static constexpr int lanes = HostVector::lanes<Scalar>();
  static constexpr int rows = HostVector::registers >= 32 ? 8 : 4;
  static constexpr int columns = HostVector::registers >= 32 ? 3 : 2;
  static constexpr int group_columns = 8 * columns;
  static_assert(rows * columns + columns + 1 <= HostVector::registers,
                "the register block must fit the registers");
};

/// Y = ep(X . W^T, b) for few rows on the host (HostSkinnyTiles). Unit: X and W contiguous
/// along K (LayoutRight, PyTorch's), vector loads; otherwise element loads through strides.
template <class ExecSpace, class XView, class WView, class BView, class YView, bool Unit>
struct HostSkinnyKernel {
  using Scalar = typename YView::non_const_value_type;
  using Tiles = HostSkinnyTiles<Scalar>;
  static constexpr int L = Tiles::lanes, R = Tiles::columns, MT = Tiles::rows;
  static constexpr int G = Tiles::group_columns;
  using policy_type = Kokkos::RangePolicy<ExecSpace, Kokkos::Schedule<Kokkos::Dynamic>,
                                          Kokkos::IndexType<std::int64_t>>;

  XView X;
  WView W;
  BView b;
  YView Y;
  LeakyReLUEpilogue<Scalar> ep;
  std::int64_t M, N, K;

  static std::int64_t items(std::int64_t N) { return (N + G - 1) / G; }

  void operator()(std::int64_t item) const {
    const std::int64_t n_end = (item + 1) * G < N ? (item + 1) * G : N;
    for (std::int64_t n = item * G; n < n_end; n += R) {
      const int columns = n_end - n < R ? int(n_end - n) : R;
      std::int64_t m = 0;
      for (; m + MT <= M; m += MT) block<MT>(m, n, columns);
      // The rest in blocks of 4, 2 and 1 rows (a block computes every one of its rows).
      if constexpr (MT > 4) {
        if (m + 4 <= M) {
          block<4>(m, n, columns);
          m += 4;
        }
      }
      if (m + 2 <= M) {
        block<2>(m, n, columns);
        m += 2;
      }
      if (m < M) block<1>(m, n, columns);
    }
  }

  /// Rows [m, m + Rows) x columns [n, n + columns) of Y.
  template <int Rows>
  void block(std::int64_t m, std::int64_t n, int columns) const {
    const std::int64_t xs0 = X.stride(0), xs1 = X.stride(1);
    const std::int64_t ws0 = W.stride(0), ws1 = W.stride(1);
    const Scalar* x[Rows];
    const Scalar* w[R];
    FUSED_LINEAR_UNROLL
    for (int i = 0; i < Rows; ++i) x[i] = X.data() + (m + i) * xs0;
    // Columns past the group repeat its last one: computed, never stored.
    FUSED_LINEAR_UNROLL
    for (int r = 0; r < R; ++r) w[r] = W.data() + (n + (r < columns ? r : columns - 1)) * ws0;

    Scalar acc[Rows][R][L];
    FUSED_LINEAR_UNROLL
    for (int i = 0; i < Rows; ++i) {
      FUSED_LINEAR_UNROLL
      for (int r = 0; r < R; ++r) {
        FUSED_LINEAR_HOST_SIMD(L)
        for (int q = 0; q < L; ++q) acc[i][r][q] = Scalar(0);
      }
    }
    // Loads straight into the multiply-adds (the compiler keeps each load for the R or Rows
    // uses): with the operands staged in small arrays GCC kept the accumulators in memory.
    const std::int64_t k_vectors = K / L * L;
    for (std::int64_t k = 0; k < k_vectors; k += L) {
      FUSED_LINEAR_UNROLL
      for (int i = 0; i < Rows; ++i) {
        FUSED_LINEAR_UNROLL
        for (int r = 0; r < R; ++r) {
          FUSED_LINEAR_HOST_SIMD(L)
          for (int q = 0; q < L; ++q)
            acc[i][r][q] +=
                Unit ? x[i][k + q] * w[r][k + q] : x[i][(k + q) * xs1] * w[r][(k + q) * ws1];
        }
      }
    }
    // Lanes added pairwise (halves, then quarters, ...), then the K % L tail in k order: one
    // fixed order per element. (On a copy: reading the accumulators lane by lane made GCC keep
    // them in memory throughout.)
    FUSED_LINEAR_UNROLL
    for (int i = 0; i < Rows; ++i) {
      FUSED_LINEAR_UNROLL
      for (int r = 0; r < R; ++r) {
        Scalar t[L];
        FUSED_LINEAR_HOST_SIMD(L)
        for (int q = 0; q < L; ++q) t[q] = acc[i][r][q];
        FUSED_LINEAR_UNROLL
        for (int half = L / 2; half > 0; half /= 2) {
          FUSED_LINEAR_UNROLL
          for (int q = 0; q < half; ++q) t[q] += t[q + half];
        }
        Scalar sum = t[0];
        for (std::int64_t k = k_vectors; k < K; ++k) sum += x[i][k * xs1] * w[r][k * ws1];
        if (r < columns) Y(m + i, n + r) = ep(sum, Scalar(b(n + r)));
      }
    }
  }
};

template <class ExecSpace, class XView, class WView, class BView, class YView, class Scalar>
void run_skinny_host(const ExecSpace& exec, const XView& X, const WView& W, const BView& b,
                     const YView& Y, const LeakyReLUEpilogue<Scalar>& ep) {
  const std::int64_t M = Y.extent(0), N = Y.extent(1), K = X.extent(1);
  auto launch = [&](auto kernel) {
    using Kernel = decltype(kernel);
    Kokkos::parallel_for("FusedLinear::fused_skinny[host]",
                         typename Kernel::policy_type(exec, 0, Kernel::items(N)), kernel);
  };
  const bool unit = K <= 1 || (X.stride(1) == 1 && W.stride(1) == 1);
  if (unit)
    launch(HostSkinnyKernel<ExecSpace, XView, WView, BView, YView, true>{X, W, b, Y, ep, M, N, K});
  else
    launch(HostSkinnyKernel<ExecSpace, XView, WView, BView, YView, false>{X, W, b, Y, ep, M, N, K});
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
