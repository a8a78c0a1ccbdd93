// SPDX-License-Identifier: Apache-2.0
// What the test files name without Kokkos (the dispatch's tests are host code that includes the
// dispatch alone): the library's enums in the test namespace, the precisions, two string
// predicates. Common.hpp adds Kokkos and the whole library.
#ifndef FUSED_LINEAR_TEST_COMMON_BASICS_HPP
#define FUSED_LINEAR_TEST_COMMON_BASICS_HPP

#include <string>

#include "FusedLinear/Types.hpp"

namespace FusedLinearTest {

namespace Impl = FusedLinear::Impl;
using FusedLinear::Algorithm;
using FusedLinear::all_algorithms;
using FusedLinear::Gemm;
using FusedLinear::Precision;

constexpr Precision all_precisions[] = {Precision::Strict, Precision::TF32, Precision::TF32x3};

inline bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}
inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace FusedLinearTest

#endif
