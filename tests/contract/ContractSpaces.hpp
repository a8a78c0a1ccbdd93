// SPDX-License-Identifier: Apache-2.0
// Which execution spaces and View sets the contract suites instantiate: the default execution
// space gets every set (LayoutStride, LayoutRight, LayoutLeft x float, double), the others
// LayoutStride float and LayoutRight double; each set of View types compiles every kernel once
// more, so the suites that share these sets compile as one translation unit
// (tests/CMakeLists.txt).
#ifndef FUSED_LINEAR_TEST_CONTRACT_CONTRACT_SPACES_HPP
#define FUSED_LINEAR_TEST_CONTRACT_CONTRACT_SPACES_HPP

#include <string>
#include <type_traits>

#include <gtest/gtest.h>

#include "Contract.hpp"

namespace FusedLinearTest {
namespace Contract {

template <class Exec>
constexpr bool is_default_space = std::is_same<Exec, Kokkos::DefaultExecutionSpace>::value;

/// Calls f(Set()) for every View set instantiated on Exec (see the file's comment).
template <class Exec, class F>
void for_each_set(F&& f) {
  using Mem = typename Exec::memory_space;
  f(StridedSet<float, Mem>());
  f(RightSet<double, Mem>());
  if constexpr (is_default_space<Exec>) {
    f(StridedSet<double, Mem>());
    f(RightSet<float, Mem>());
    f(LeftSet<float, Mem>());
    f(LeftSet<double, Mem>());
  }
}
template <class Exec>
int set_count() {
  int n = 0;
  for_each_set<Exec>([&n](auto) { ++n; });
  return n;
}

/// The execution spaces of the typed contract suite: the default one first, then each other
/// enabled host space (only the default one under FUSED_LINEAR_TESTS_DEFAULT_SPACE_ONLY).
namespace SpaceList {
template <class... T>
struct List {};
template <class L, class T, bool add>
struct Append;
template <class... A, class T>
struct Append<List<A...>, T, true> {
  using type = List<A..., T>;
};
template <class... A, class T>
struct Append<List<A...>, T, false> {
  using type = List<A...>;
};
template <class L, class T>
using AppendOther = typename Append<L, T, !is_default_space<T>>::type;
using Spaces0 = List<Kokkos::DefaultExecutionSpace>;
#if defined(FUSED_LINEAR_TESTS_DEFAULT_SPACE_ONLY)
using Spaces3 = Spaces0;
#else
#if defined(KOKKOS_ENABLE_OPENMP)
using Spaces1 = AppendOther<Spaces0, Kokkos::OpenMP>;
#else
using Spaces1 = Spaces0;
#endif
#if defined(KOKKOS_ENABLE_THREADS)
using Spaces2 = AppendOther<Spaces1, Kokkos::Threads>;
#else
using Spaces2 = Spaces1;
#endif
#if defined(KOKKOS_ENABLE_SERIAL)
using Spaces3 = AppendOther<Spaces2, Kokkos::Serial>;
#else
using Spaces3 = Spaces2;
#endif
#endif
template <class L>
struct AsTypes;
template <class... T>
struct AsTypes<List<T...>> {
  using type = ::testing::Types<T...>;
};
}  // namespace SpaceList
using Spaces = SpaceList::AsTypes<SpaceList::Spaces3>::type;

/// gtest's name of a space parameter: Kokkos' name of the space.
struct SpaceName {
  template <class Exec>
  static std::string GetName(int) {
    return Exec::name();
  }
};

}  // namespace Contract
}  // namespace FusedLinearTest

#endif
