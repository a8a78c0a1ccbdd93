// SPDX-License-Identifier: Apache-2.0
/// \file GpuModel.hpp
/// The GPU cost model: what each path's kernels do, counted from their own tiles and splits at
/// the device's peak rates, and the milliseconds predicted with the coefficients
/// tuning.gpu_model fitted to these terms per path and precision (GpuRule.hpp, generated beside
/// this file). Auto on GPUs (Dispatch.hpp, gpu_auto) takes the path predicted fastest; Planning::
/// Measure times those predicted near it (Planner.hpp). Plain C++ without Kokkos.
#ifndef FUSED_LINEAR_IMPL_RULES_GPU_MODEL_HPP
#define FUSED_LINEAR_IMPL_RULES_GPU_MODEL_HPP

#include <cstdint>
#include <limits>

#include "FusedLinear/Types.hpp"
#include "FusedLinear/impl/Facts.hpp"
#include "FusedLinear/impl/cuda/Sm90Splits.hpp"
#include "FusedLinear/impl/kernels/SkinnyGeometry.hpp"
#include "FusedLinear/impl/rules/CostTerms.hpp"
#include "FusedLinear/impl/rules/GpuRule.hpp"

namespace FusedLinear {
namespace Impl {

using GpuTerms = CostTerms<GpuRule::terms>;

/// The rates the GPU cost model counts in (FusedLinear::GpuRates, which RunInfo reports).
using GpuRates = FusedLinear::GpuRates;

/// This device's rates where it reports all of them, else every one of the device the
/// coefficients were fitted on (GpuRule::fitted_*), its multiprocessors included: a device's
/// count with another device's rates describes no device.
inline GpuRates gpu_rates(const Facts& f) {
  if (f.multiprocessors > 0 && f.fp32_gflops > 0 && f.memory_gbps > 0)
    return {double(f.multiprocessors), f.fp32_gflops, f.memory_gbps,
            f.rates_source == RatesSource::None ? RatesSource::Device : f.rates_source,
            f.rates_note};
  return {GpuRule::fitted_multiprocessors, GpuRule::fitted_fp32_gflops, GpuRule::fitted_memory_gbps,
          RatesSource::Fitted,
          f.rates_source == RatesSource::Fitted ? f.rates_note : "the device reports no rates"};
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

/// A path and the precision it computes: what the model predicts for and auto chooses among
/// (Dispatch.hpp, gpu_candidates).
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

/// The GPU cost model's prediction for a path, milliseconds (infinity where it has none).
inline double gpu_predicted_ms(const Candidate& c, const Shape& s, const Facts& f) {
  const auto coefficients = gpu_coefficients(c);
  if (coefficients == nullptr) return std::numeric_limits<double>::infinity();
  return gpu_terms(c.algorithm, s, f).ms(*coefficients);
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
