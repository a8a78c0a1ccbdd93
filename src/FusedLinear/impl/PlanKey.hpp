// SPDX-License-Identifier: Apache-2.0
/// \file PlanKey.hpp
/// What a cached plan of the one-shot linear_leaky_relu depends on, as one comparable key:
/// the plan's type, the scope (impl/StreamIdentity.hpp: on CUDA the device, not the stream),
/// the Views' extents, strides and alignments, the parameters
/// and the options.
#ifndef FUSED_LINEAR_IMPL_PLAN_KEY_HPP
#define FUSED_LINEAR_IMPL_PLAN_KEY_HPP

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <typeinfo>

#include "FusedLinear/Types.hpp"

namespace FusedLinear {
namespace Impl {

/// Everything a plan depends on, as plain bytes compared with memcmp (no padding between the
/// members, in this order).
struct PlanKey {
  const std::type_info* type;  // the plan's type: value type, layouts, memory spaces
  std::uint64_t scope;
  std::int64_t extents[3];  // M, K, N
  // The forward: X, W (2 each), b, Y (2); the gradient: X, W, dY, saved, dX, dW (2 each), db.
  std::int64_t strides[13];
  std::uint64_t alignments;  // log2 of min(256, alignment) of each View, in order, 8 bits each
  double multiplier, slope;
  std::uint64_t partials_limit;
  std::uint64_t measure_clock;  // options.tuning.measure_clock (tests): another plan
  std::int32_t algorithm, precision, splits, sm90_kernel;
  std::int32_t planning, flags;  // the gradient's: accumulate, saved, outputs present

  bool operator==(const PlanKey& o) const { return std::memcmp(this, &o, sizeof *this) == 0; }
};
static_assert(sizeof(PlanKey) == 208, "PlanKey has no padding");

inline std::uint64_t alignment_log2(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::uint64_t log2 = 0;
  while (log2 < 8 && (a & ((std::uintptr_t(1) << (log2 + 1)) - 1)) == 0) ++log2;
  return log2;
}

template <class PlanType, class XView, class WView, class BView, class YView, class Scalar>
PlanKey plan_key(std::uint64_t scope, const XView& X, const WView& W, const BView& b,
                 const YView& Y, Scalar multiplier, Scalar slope, const Options& options) {
  PlanKey k;
  std::memset(&k, 0, sizeof k);
  k.type = &typeid(PlanType);
  k.scope = scope;
  k.extents[0] = X.extent(0), k.extents[1] = X.extent(1), k.extents[2] = W.extent(0);
  const std::int64_t strides[7] = {std::int64_t(X.stride(0)), std::int64_t(X.stride(1)),
                                   std::int64_t(W.stride(0)), std::int64_t(W.stride(1)),
                                   std::int64_t(b.stride(0)), std::int64_t(Y.stride(0)),
                                   std::int64_t(Y.stride(1))};
  std::copy(strides, strides + 7, k.strides);
  k.alignments = alignment_log2(X.data()) | alignment_log2(W.data()) << 8 |
                 alignment_log2(b.data()) << 16 | alignment_log2(Y.data()) << 24;
  k.multiplier = double(multiplier), k.slope = double(slope);
  k.algorithm = std::int32_t(options.algorithm), k.precision = std::int32_t(options.precision);
  k.splits = options.tuning.skinny_splits, k.sm90_kernel = options.tuning.sm90_tf32x3_kernel;
  k.partials_limit = options.tuning.tf32x3_partials_limit;
  k.measure_clock = reinterpret_cast<std::uint64_t>(options.tuning.measure_clock);
  k.planning = std::int32_t(options.planning);
  return k;
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
