// SPDX-License-Identifier: Apache-2.0
/// \file CostTerms.hpp
/// What the host and GPU cost models (HostModel.hpp, GpuModel.hpp) share: a path's terms and
/// their weighted sum. Plain C++ without Kokkos, as the dispatch that reads them.
#ifndef FUSED_LINEAR_IMPL_RULES_COST_TERMS_HPP
#define FUSED_LINEAR_IMPL_RULES_COST_TERMS_HPP

#include <cstdint>

namespace FusedLinear {
namespace Impl {

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

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace Impl
}  // namespace FusedLinear

#endif
