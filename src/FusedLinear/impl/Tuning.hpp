// SPDX-License-Identifier: Apache-2.0
/// \file Tuning.hpp
/// Experimental::Tuning, the knobs of Options::tuning: for the library's tests and tuning
/// experiments, not part of the stable API.
#ifndef FUSED_LINEAR_IMPL_TUNING_HPP
#define FUSED_LINEAR_IMPL_TUNING_HPP

#include <cstddef>

namespace FusedLinear {

enum class Algorithm;
enum class Precision;

namespace Experimental {

/// Knobs for tests and tuning experiments. NOT part of the stable API: names, meanings and
/// defaults may change in any release. The defaults are what the library measured best.
struct Tuning {
  /// fused_skinny and skinny_sm90: force K split this many ways (0: the library's rule).
  int skinny_splits = 0;
  /// Vendor 3xTF32: batch the K ranges' sums in one product when they fit in this many bytes.
  std::size_t tf32x3_partials_limit = std::size_t(256) << 20;
  /// fused_sm90: 0 chooses by the shape, 1 forces the tile kernel, 2 the split-K kernel.
  int sm90_tf32x3_kernel = 0;
  /// Planning::Measure: when set, each timed call's milliseconds are what this returns, given
  /// the candidate (algorithm, precision, cuBLASLt variant), the call (0: the warm-up) and the
  /// time measured, so that tests decide which candidate is fastest. Wisdom remembers the
  /// choices it leads to. With it every candidate is timed (no budget).
  double (*measure_clock)(Algorithm algorithm, Precision precision, int variant, int call,
                          double measured_ms) = nullptr;
};

}  // namespace Experimental
}  // namespace FusedLinear

#endif
