// SPDX-License-Identifier: Apache-2.0
// What every test file names: Basics.hpp, the library's types in the test namespace, the default
// execution space, the debug build's scale and the seed of the randomised tests.
#ifndef FUSED_LINEAR_TEST_COMMON_COMMON_HPP
#define FUSED_LINEAR_TEST_COMMON_COMMON_HPP

#include <cstdint>
#include <cstdlib>
#include <string>

#include <Kokkos_Core.hpp>

#include <FusedLinear.hpp>

#include "Basics.hpp"

namespace FusedLinearTest {

namespace Impl = FusedLinear::Impl;
using FusedLinear::Algorithm;
using FusedLinear::all_algorithms;
using FusedLinear::Gemm;
using FusedLinear::Options;
using FusedLinear::Precision;
using FusedLinear::RunInfo;
using FusedLinear::Experimental::Tuning;

using ExecSpace = Kokkos::DefaultExecutionSpace;
using MemorySpace = ExecSpace::memory_space;

/// The debug build (Kokkos debug and bounds checks, sanitizers, -O1) runs several times slower:
/// its largest cases take 1/debug_scale of their rows there, which runs the same code (the other
/// builds run them in full).
#if defined(KOKKOS_ENABLE_DEBUG)
constexpr std::int64_t debug_scale = 4;
#else
constexpr std::int64_t debug_scale = 1;
#endif

/// The seed of the randomised tests: FUSED_LINEAR_TEST_SEED, else a fixed default (printed).
inline std::uint64_t test_seed(std::uint64_t fallback = 20261201) {
  if (const char* s = std::getenv("FUSED_LINEAR_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  return fallback;
}

}  // namespace FusedLinearTest

#endif
