// SPDX-License-Identifier: Apache-2.0
/// \file Dispatch.hpp
/// The one place a request becomes a path: `resolve` takes what was asked (algorithm,
/// precision), the shape, and what is true of the build, the execution space, the device and the
/// Views (`Facts`, plain data gathered once per plan by Facts.hpp), and returns the Decision.
/// Pure host code with no Kokkos or vendor calls, so every combination (host with or without an
/// optimised BLAS, CUDA on Hopper or another GPU, HIP, ...) is unit-tested without a GPU.
#ifndef FUSED_LINEAR_IMPL_DISPATCH_HPP
#define FUSED_LINEAR_IMPL_DISPATCH_HPP

#include <cstdint>
#include <limits>
#include <string>

#include "FusedLinear/Types.hpp"
#include "FusedLinear/impl/Errors.hpp"
#include "FusedLinear/impl/cuda/Sm90Splits.hpp"
#include "FusedLinear/impl/kernels/HostTiles.hpp"
#include "FusedLinear/impl/kernels/SkinnyGeometry.hpp"
#include "FusedLinear/impl/rules/GpuRule.hpp"
#include "FusedLinear/impl/rules/HostRule.hpp"

namespace FusedLinear {
namespace Impl {

/// The kind of execution space a plan runs on.
enum class Backend { Host, Cuda, Hip, Sycl, OtherDevice };

/// What the host BLAS behind Kokkos Kernels is (host backends, HostBlas.hpp): Debian's
/// reference BLAS is single-threaded and unblocked; an optimised one (OpenBLAS, BLIS, MKL) runs
/// kernels written for the CPU's vector units, unless it does not know the CPU and falls back
/// to older ones (Generic: OpenBLAS 0.3.21 runs its SSE3 "Prescott" kernels on a 2023 Xeon).
enum class HostBlas { Unknown, Reference, Optimized, Generic };

/// What is true of the build, the execution space, its device and the Views, for one plan.
struct Facts {
  Backend backend = Backend::Host;
  /// float Views (the tensor-core precisions and the sm_90a kernels are float-only).
  bool float_views = true;
  /// What KokkosBlas::gemm runs for these Views: a vendor BLAS or Kokkos Kernels' native gemm.
  Gemm blas = Gemm::KokkosKernelsNative;
  HostBlas host_blas = HostBlas::Unknown;
  /// vendor_lt: cuBLASLt serves these Views (CUDA build with it, one layout, CUDA memory); and
  /// can add the bias in its epilogue (float, LayoutRight, a contiguous b).
  bool cublaslt = false, cublaslt_bias = false;
  /// Why the sm_90a kernels cannot take this problem (a sentence fragment), nullptr when they can.
  const char* sm90_tf32x3 = "is not in this build";
  const char* sm90_skinny = "is not in this build";
  /// fused_skinny reads X's and W's rows as 16-byte packs (contiguous rows of a multiple of 16
  /// bytes, aligned), not element by element.
  bool skinny_packed = true;
  /// Multiprocessors of the device (0 on the host).
  std::int64_t multiprocessors = 0;
  /// The device's peak strict fp32 rate, GFLOP/s, and its memory's peak bandwidth, GB/s (0
  /// where unknown): the GPU cost model's units, and Planning::Measure's bound.
  double fp32_gflops = 0, memory_gbps = 0;
  /// Host backends: the instance's threads and the host kernels' tiles for the Views' value
  /// type, which the host cost model counts with (host_fused_terms, host_skinny_terms).
  std::int64_t host_threads = 1;
  HostTiling host_tiling = {};
};

struct Shape {
  std::int64_t M = 0, K = 0, N = 0;
};

/// A path as Planning::Measure names it: algorithm, precision and, for vendor_lt's single
/// product, which of cuBLASLt's ranked algorithms (0: its first choice) and that algorithm's
/// configuration (cuda/CublasLt.hpp, lt_config: what identifies it in wisdom, the rank being
/// only where it stood in one query's list; empty elsewhere).
struct Choice {
  Algorithm algorithm = Algorithm::Auto;
  Precision precision = Precision::Strict;
  int variant = 0;
  std::string lt_config = {};
};

struct Request {
  Algorithm algorithm = Algorithm::Auto;
  Precision precision = Precision::Strict;
  bool zero_multiplier = false;
  /// The fastest candidate Planning::Measure timed, or wisdom remembered (Planner.hpp): under
  /// Auto it runs instead of the rule's choice, checked as an explicit request is. Auto: none.
  Choice measured = {};
};

/// What resolve decides: the RunInfo a plan reports (`measured` and `from_wisdom` are the plan's
/// to set), and what the path's engine (engines/Engines.hpp) is set up with beyond it.
struct Decision : RunInfo {
  /// vendor_lt adds the bias in cuBLASLt's epilogue; the pass then only scales.
  bool bias_in_gemm = false;
  /// vendor_lt's single product (strict, tf32): which of cuBLASLt's ranked algorithms runs, as
  /// measured (0: the heuristic's first choice), and its configuration where wisdom names it.
  int lt_variant = 0;
  std::string lt_config;
};

/// The terms of a cost model, each a count of one kind of work (host: per thread, work items
/// over the threads in waves; GPUs: in milliseconds at the device's peak rates); a path's
/// predicted milliseconds are their sum weighted by its coefficients (terms it does not have
/// are 0).
template <int Count>
struct CostTerms {
  static constexpr int count = Count;
  double term[Count] = {};
  double ms(const double (&coefficients)[Count]) const {
    double sum = 0;
    for (int i = 0; i < Count; ++i) sum += coefficients[i] * term[i];
    return sum;
  }
};
using HostTerms = CostTerms<HostRule::terms>;
using GpuTerms = CostTerms<GpuRule::terms>;

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

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

/// The rates the GPU cost model counts in: this device's where it reports them, else those of
/// the device its coefficients were fitted on (GpuRule::fitted_*).
struct GpuRates {
  double multiprocessors, fp32_gflops, memory_gbps;
};

inline GpuRates gpu_rates(const Facts& f) {
  return {f.multiprocessors > 0 ? double(f.multiprocessors) : GpuRule::fitted_multiprocessors,
          f.fp32_gflops > 0 ? f.fp32_gflops : GpuRule::fitted_fp32_gflops,
          f.memory_gbps > 0 ? f.memory_gbps : GpuRule::fitted_memory_gbps};
}

/// A path's terms on a GPU: a launch, then what its kernels do, counted from their own tiles and
/// splits, as milliseconds at the device's peak rates: multiply-adds (2 flops each) over the
/// waves of tiles the multiprocessors run, the padded or plain product, and the bytes of X, W and
/// Y each kernel moves (X and W once per tile that reads them, the pass over Y of the vendor
/// paths, split K's partial sums, 3xtf32's split of X, W read element by element where its rows
/// are not 16-byte packs). The terms are the path's whatever its precision (a vendor path runs
/// the same problem); the coefficients are per path and precision.
inline GpuTerms gpu_terms(Algorithm a, const Shape& s, const Facts& f) {
  if (s.M <= 0 || s.N <= 0 || s.K <= 0) return {};  // no product runs
  const GpuRates g = gpu_rates(f);
  const double M = double(s.M), K = double(s.K), N = double(s.N), S = g.multiprocessors;
  const auto flops = [&](double x) { return x / (g.fp32_gflops * 1e6); };
  const auto bytes = [&](double x) { return x / (g.memory_gbps * 1e6); };
  const double unpacked = f.skinny_packed ? 0 : 1;
  const double item = double(sizeof(float));
  // Output tiles of `t` x `t` and the waves of them one per multiprocessor takes.
  const auto tiles = [&](std::int64_t t) { return ceil_div(s.M, t) * ceil_div(s.N, t); };
  const auto waves = [&](std::int64_t t) { return double(ceil_div(tiles(t), std::int64_t(S))); };
  const std::int64_t t = GpuRule::tile;
  const double tile_flops = 2.0 * double(t) * double(t) * K;
  switch (a) {
    case Algorithm::Fused:
      return {{1, flops(waves(t) * S * tile_flops),
               bytes(item * (M * K * double(ceil_div(s.N, t)) + N * K * double(ceil_div(s.M, t)))),
               bytes(item * M * N), flops(2 * M * N * K), 0, 0}};
    case Algorithm::FusedSkinny: {
      using Short = SkinnyGpuTiles<32, false, false>;
      using Tall = SkinnyGpuTiles<32, false, true>;
      const SkinnyChoice c = skinny_choice<Short, Tall>(s.M, s.N, s.K, std::int64_t(S), 4, 0);
      const double resident = S * Short::min_teams, columns = Short::groups * Short::columns;
      const std::int64_t chunks = ceil_div(s.K, c.chunk);
      const double k_per_team = double(ceil_div(chunks, c.split.splits) * c.chunk);
      const double team_waves = double(ceil_div(c.tiles * c.split.splits, std::int64_t(resident)));
      const double w_bytes = item * N * K * double(ceil_div(s.M, c.rows));
      return {{1, flops(team_waves * resident * c.rows * columns * k_per_team * 2), bytes(w_bytes),
               bytes(item * M * K * double(ceil_div(s.N, std::int64_t(columns)))),
               bytes(item * double(c.partials)), bytes(item * M * N), unpacked * bytes(w_bytes)}};
    }
    case Algorithm::SkinnySm90: {
      const std::int64_t rows = Sm90::rows_per_cta(s.M), columns = Sm90::skinny_tile_columns;
      const std::int64_t cta_tiles = ceil_div(s.N, columns) * ceil_div(s.M, rows);
      const std::int64_t k_blocks = ceil_div(s.K, Sm90::skinny_k_block);
      const int unknown[Sm90::max_splits] = {};
      const int splits = Sm90::choose_splits(cta_tiles, k_blocks, int(S), unknown);
      const std::int64_t fit = std::int64_t(S) / splits > 0 ? std::int64_t(S) / splits : 1;
      const double cta_waves = double(ceil_div(cta_tiles, fit));
      const double k_per_cta = double(ceil_div(k_blocks, splits) * Sm90::skinny_k_block);
      return {{1, cta_waves, flops(cta_waves * S * double(rows * columns) * k_per_cta * 2),
               bytes(item * N * K * double(ceil_div(s.M, rows))),
               bytes(item * M * K * double(ceil_div(s.N, columns))), bytes(item * M * N), 0}};
    }
    case Algorithm::FusedSm90: {
      const double padded = 2.0 * double(ceil_div(s.M, t) * t) * double(ceil_div(s.N, t) * t) * K;
      return {
          {1, flops(padded), flops(waves(t) * S * tile_flops),
           bytes(item * (2 * M * K * double(ceil_div(s.N, t)) + N * K * double(ceil_div(s.M, t)))),
           bytes(item * M * N), bytes(3 * item * M * K), unpacked * bytes(item * N * K)}};
    }
    case Algorithm::Vendor:
    case Algorithm::VendorPrefill:
    case Algorithm::VendorLt: {
      // The vendor's tiles are its own: the model counts waves of GpuRule::tile and the product
      // padded to half of it. The pass over Y reads and writes it; vendor_prefill also fills it.
      const double passes = a == Algorithm::VendorPrefill ? 3 : 2;
      const std::int64_t h = t / 2;
      return {{1, flops(waves(t) * S * tile_flops), flops(2 * M * N * K),
               bytes(item * (M * K + N * K + M * N)), bytes(passes * item * M * N),
               flops(2.0 * double(ceil_div(s.M, h) * h) * double(ceil_div(s.N, h) * h) * K), 0}};
    }
    case Algorithm::Auto: break;
  }
  return {};
}

/// A path and the precision it computes: what auto chooses among.
struct Candidate {
  Algorithm algorithm;
  Precision precision;
};

/// The coefficients of a path at a precision (GpuRule), nullptr where the model has none.
inline const double (*gpu_coefficients(const Candidate& c))[GpuRule::terms] {
  switch (c.precision) {
    case Precision::Strict:
      switch (c.algorithm) {
        case Algorithm::Fused: return &GpuRule::fused_ms;
        case Algorithm::FusedSkinny: return &GpuRule::fused_skinny_ms;
        case Algorithm::SkinnySm90: return &GpuRule::skinny_sm90_ms;
        case Algorithm::Vendor: return &GpuRule::vendor_ms;
        case Algorithm::VendorPrefill: return &GpuRule::vendor_prefill_ms;
        case Algorithm::VendorLt: return &GpuRule::vendor_lt_ms;
        default: return nullptr;
      }
    case Precision::TF32x3:
      switch (c.algorithm) {
        case Algorithm::FusedSm90: return &GpuRule::fused_sm90_tf32x3_ms;
        case Algorithm::Vendor: return &GpuRule::vendor_tf32x3_ms;
        case Algorithm::VendorLt: return &GpuRule::vendor_lt_tf32x3_ms;
        default: return nullptr;
      }
    case Precision::TF32:
      switch (c.algorithm) {
        case Algorithm::Vendor: return &GpuRule::vendor_tf32_ms;
        case Algorithm::VendorLt: return &GpuRule::vendor_lt_tf32_ms;
        default: return nullptr;
      }
  }
  return nullptr;
}

/// Whether a GPU path serves these Views at that precision as auto would run it (the hard
/// limits; resolve refuses the rest when asked for explicitly).
inline bool gpu_serves(const Candidate& c, const Facts& f) {
  if (c.precision != Precision::Strict && !f.float_views) return false;
  switch (c.algorithm) {
    case Algorithm::Fused:
    case Algorithm::FusedSkinny: return c.precision == Precision::Strict;
    case Algorithm::SkinnySm90: return c.precision == Precision::Strict && f.sm90_skinny == nullptr;
    case Algorithm::FusedSm90: return c.precision == Precision::TF32x3 && f.sm90_tf32x3 == nullptr;
    case Algorithm::VendorLt: return f.cublaslt;
    case Algorithm::Vendor:
    case Algorithm::VendorPrefill:
      if (c.precision == Precision::Strict) return f.blas != Gemm::KokkosKernelsNative;
      if (c.algorithm == Algorithm::VendorPrefill) return false;  // never timed: not a candidate
      return c.precision == Precision::TF32 ? f.blas == Gemm::Cublas : f.cublaslt;
    case Algorithm::Auto: break;
  }
  return false;
}

/// Every path auto may take on a GPU, strict first (ties go to the earlier).
constexpr Candidate gpu_candidates[] = {
    {Algorithm::FusedSkinny, Precision::Strict}, {Algorithm::SkinnySm90, Precision::Strict},
    {Algorithm::Fused, Precision::Strict},       {Algorithm::VendorLt, Precision::Strict},
    {Algorithm::Vendor, Precision::Strict},      {Algorithm::VendorPrefill, Precision::Strict},
    {Algorithm::FusedSm90, Precision::TF32x3},   {Algorithm::VendorLt, Precision::TF32x3},
    {Algorithm::Vendor, Precision::TF32x3},      {Algorithm::VendorLt, Precision::TF32},
    {Algorithm::Vendor, Precision::TF32}};

/// The GPU cost model's prediction for a path, milliseconds (infinity where it has none).
inline double gpu_predicted_ms(const Candidate& c, const Shape& s, const Facts& f) {
  const auto coefficients = gpu_coefficients(c);
  if (coefficients == nullptr) return std::numeric_limits<double>::infinity();
  return gpu_terms(c.algorithm, s, f).ms(*coefficients);
}

/// Whether precision `p` is at least as accurate as the floor `floor` (Options::precision under
/// Algorithm::Auto): strict fp32 meets every floor, 3xTF32 (fp32-accurate) meets tf32's.
inline bool meets_floor(Precision p, Precision floor) {
  switch (floor) {
    case Precision::Strict: return p == Precision::Strict;
    case Precision::TF32x3: return p == Precision::Strict || p == Precision::TF32x3;
    case Precision::TF32: return true;
  }
  return false;
}

/// Auto on a GPU: of the paths that serve these Views at a precision meeting the floor, the one
/// the cost model predicts fastest.
inline Candidate gpu_auto(const Shape& s, const Facts& f, Precision floor) {
  Candidate best = {Algorithm::Fused, Precision::Strict};
  double best_ms = std::numeric_limits<double>::infinity();
  for (const Candidate& c : gpu_candidates) {
    if (!meets_floor(c.precision, floor) || !gpu_serves(c, f)) continue;
    const double ms = gpu_predicted_ms(c, s, f);
    if (ms < best_ms) best = c, best_ms = ms;
  }
  return best;
}

/// Whether a path computes a precision other than strict fp32 that meets the floor here.
inline bool has_tensor_path(const Facts& f, Precision floor) {
  if (f.backend == Backend::Host) return false;
  for (const Candidate& c : gpu_candidates)
    if (c.precision != Precision::Strict && meets_floor(c.precision, floor) && gpu_serves(c, f))
      return true;
  return false;
}

inline bool is_skinny(Algorithm a) {
  return a == Algorithm::FusedSkinny || a == Algorithm::SkinnySm90;
}

/// The fastest strict path for a shape (Algorithm::Auto in Precision::Strict).
inline Algorithm strict_auto(const Shape& s, const Facts& f) {
  if (f.backend != Backend::Host) return gpu_auto(s, f, Precision::Strict).algorithm;
  if (host_skinny_terms(s, f.host_tiling, f.host_threads).ms(HostRule::skinny_ms) <
      host_fused_terms(s, f.host_tiling, f.host_threads).ms(HostRule::fused_ms))
    return Algorithm::FusedSkinny;
  if (f.blas == Gemm::HostBlas && f.host_blas == HostBlas::Optimized &&
      s.M >= HostRule::vendor_rows && s.K >= HostRule::vendor_k)
    return Algorithm::Vendor;
  return Algorithm::Fused;
}

/// The path, precision and GEMM a request runs; throws std::invalid_argument naming
/// `function` when the request cannot be served as asked (never quietly computes otherwise).
inline Decision resolve(const Request& r, const Shape& s, const Facts& f, const char* function) {
  Decision d;
  d.algorithm = r.algorithm;
  d.precision = r.precision;
  const std::string mode = to_string(r.precision);
  if (r.precision != Precision::Strict && !f.float_views)
    refuse(function, "precision " + mode + " applies to float Views only");

  if (d.algorithm == Algorithm::Auto && r.measured.algorithm != Algorithm::Auto) {
    // Planning::Measure timed the candidates: the fastest runs, checked below as an explicit
    // request is, so that a refused path is refused rather than run.
    if (!meets_floor(r.measured.precision, r.precision))
      refuse(function, std::string("a measured choice in precision ") +
                           to_string(r.measured.precision) + " is below the floor " + mode);
    d.algorithm = r.measured.algorithm;
    d.precision = r.measured.precision;
    if (d.precision != r.precision)
      d.note = "precision " + mode + " asked under auto, a floor: " + to_string(d.precision) +
               " (" + to_string(d.algorithm) + ") measured faster at this shape";
  } else if (d.algorithm == Algorithm::Auto) {
    const Candidate c = f.backend == Backend::Host ? Candidate{strict_auto(s, f), Precision::Strict}
                                                   : gpu_auto(s, f, r.precision);
    d.algorithm = c.algorithm;
    d.precision = c.precision;
    if (c.precision != r.precision)
      d.note = "precision " + mode + " asked under auto, a floor: " +
               (has_tensor_path(f, r.precision)
                    ? std::string(c.precision == Precision::Strict ? "strict fp32"
                                                                   : to_string(c.precision)) +
                          " (" + to_string(c.algorithm) +
                          ") is at least as accurate and predicted faster at this shape"
                    : std::string("no path computes it here (it needs cuBLAS, cuBLASLt or a "
                                  "Hopper GPU); strict fp32 (") +
                          to_string(c.algorithm) + ") runs");
  }

  if (d.algorithm == Algorithm::VendorLt && !f.cublaslt) {
    d.algorithm = Algorithm::Vendor;
    append(d.note,
           "cuBLASLt does not serve these Views here (needs a CUDA build that found cublasLt, "
           "float/double X, W and Y of one layout in CUDA memory): ran vendor");
  }
  if (d.algorithm == Algorithm::VendorPrefill && r.zero_multiplier) {
    // With alpha = 0 a BLAS skips the product entirely, so NaN and Inf in X or W would not reach
    // Y as they do in PyTorch: run the beta = 0 variant, which keeps alpha = 1.
    d.algorithm = Algorithm::Vendor;
    append(d.note,
           "vendor_prefill with multiplier 0 would let the BLAS skip the product (alpha = 0) and "
           "drop NaN/Inf propagation; ran vendor instead");
  }

  const bool vendor = d.algorithm == Algorithm::Vendor || d.algorithm == Algorithm::VendorPrefill;
  switch (d.precision) {
    case Precision::Strict:
      if (d.algorithm == Algorithm::FusedSm90)
        refuse(function, "fused_sm90 computes precision 3xtf32 only (asked: strict)");
      if (d.algorithm == Algorithm::SkinnySm90 && f.sm90_skinny != nullptr)
        refuse(function, std::string("skinny_sm90 (the sm_90a few-rows kernel) ") + f.sm90_skinny +
                             "; fused_skinny runs everywhere");
      break;
    case Precision::TF32:
      if (!(d.algorithm == Algorithm::VendorLt || (vendor && f.blas == Gemm::Cublas)))
        refuse(function, std::string("precision tf32 needs cuBLAS or cuBLASLt (vendor, "
                                     "vendor_prefill, vendor_lt on CUDA with X, W and Y of one "
                                     "layout); ") +
                             to_string(d.algorithm) + " with these Views gets " +
                             (vendor ? to_string(f.blas) : "no tensor cores"));
      break;
    case Precision::TF32x3:
      if (d.algorithm == Algorithm::FusedSm90) {
        if (f.sm90_tf32x3 != nullptr)
          refuse(function, std::string("fused_sm90 (the sm_90a 3xtf32 kernel) ") + f.sm90_tf32x3 +
                               "; the vendor paths run 3xtf32 on any CUDA GPU");
      } else if (!((vendor || d.algorithm == Algorithm::VendorLt) && f.cublaslt)) {
        refuse(function,
               std::string("precision 3xtf32 runs on fused_sm90 (Hopper GPUs) and, "
                           "through cuBLASLt, on the vendor paths (a CUDA build that "
                           "found it, X, W and Y of one layout in CUDA memory); not on ") +
                   to_string(d.algorithm) + " here");
      }
      break;
  }

  switch (d.algorithm) {
    case Algorithm::Vendor:
    case Algorithm::VendorPrefill:
      // 3xTF32's products run through cuBLASLt on every vendor path.
      d.gemm = d.precision == Precision::TF32x3 ? Gemm::CublasLt : f.blas;
      d.vendor_blas = d.gemm != Gemm::KokkosKernelsNative;
      if (!d.vendor_blas)
        append(d.note,
               "no vendor BLAS serves these Views (needs float/double, X, W and Y of one layout, "
               "LayoutLeft or LayoutRight, in a memory space whose BLAS TPL is enabled): "
               "KokkosBlas::gemm runs its native kernel");
      break;
    case Algorithm::VendorLt:
      d.gemm = Gemm::CublasLt;
      d.vendor_blas = true;
      d.bias_in_gemm = f.cublaslt_bias;
      break;
    case Algorithm::Fused: d.gemm = Gemm::FusedKernel; break;
    case Algorithm::FusedSkinny: d.gemm = Gemm::SkinnyKernel; break;
    case Algorithm::FusedSm90: d.gemm = Gemm::Sm90Tf32x3Kernel; break;
    case Algorithm::SkinnySm90: d.gemm = Gemm::Sm90SkinnyKernel; break;
    case Algorithm::Auto: break;  // resolved above
  }

  if (d.algorithm == Algorithm::VendorLt && d.precision != Precision::TF32x3 &&
      r.measured.algorithm == d.algorithm && r.measured.precision == d.precision)
    d.lt_variant = r.measured.variant, d.lt_config = r.measured.lt_config;

  if (s.M == 0 || s.N == 0 || s.K == 0) {
    d.gemm = Gemm::None;  // no product: no BLAS runs, no bias goes through one
    d.vendor_blas = d.bias_in_gemm = false;
  }
  if (s.M == 0 || s.N == 0) {
    append(d.note, "empty output (M or N is 0): nothing to compute");
  } else if (s.K == 0) {
    // Kokkos Kernels' gemm returns without touching Y when K = 0; the product is 0 here.
    append(d.note, "K is 0: the product is zero, Y = LeakyReLU(multiplier * b) on every row");
  }
  return d;
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
