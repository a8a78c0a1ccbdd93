// SPDX-License-Identifier: Apache-2.0
// The typed suite's fixture and configurations (TypedSuite.hpp defines the tests): `Layer`, typed
// over (execution space, value type, layout), with the runs every test repeats, and the lists of
// configurations TestTypedDefault.cpp and TestTypedSpaces.cpp instantiate it for.
#ifndef FUSED_LINEAR_TEST_TYPED_TYPED_LAYER_HPP
#define FUSED_LINEAR_TEST_TYPED_TYPED_LAYER_HPP

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include "../common/Bounds.hpp"
#include "../common/Common.hpp"
#include "../common/Oracle.hpp"
#include "../common/Problems.hpp"
#include "../common/Serves.hpp"

namespace FusedLinearTest {

template <class Exec_, class Scalar_, class Layout_>
struct Config {
  using Exec = Exec_;
  using Scalar = Scalar_;
  using Layout = Layout_;
  static std::string name() {
    return std::string(Exec::name()) +
           (std::is_same<Scalar, float>::value ? "_float_" : "_double_") +
           (std::is_same<Layout, Kokkos::LayoutRight>::value ? "LayoutRight" : "LayoutLeft");
  }
};

struct ConfigName {
  template <class C>
  static std::string GetName(int) {
    return C::name();
  }
};

template <class C>
class Layer : public ::testing::Test {
 public:
  using Exec = typename C::Exec;
  using Scalar = typename C::Scalar;
  using Layout = typename C::Layout;
  using P = Problem<Exec, Scalar, Layout>;

  /// Runs every request the build serves for p (every algorithm in `precision`, refusals
  /// checked by attempt) on fresh output and checks each result against the reference.
  static void check_all(P& p, double multiplier, double slope,
                        Precision precision = Precision::Strict, int splits = 0) {
    const Reference ref = p.reference(multiplier, slope);
    for (Algorithm a : all_algorithms) {
      p.poison();
      const Options o = options(a, precision, Impl::is_skinny(a) ? splits : 0);
      const auto info = attempt(p, multiplier, slope, o);
      if (!info) continue;
      EXPECT_TRUE(ref.check<Scalar>(p.output(), product_rounding(*info, p.K)))
          << describe(o, *info);
    }
  }
  static void check_all(std::int64_t M, std::int64_t K, std::int64_t N, double multiplier,
                        double slope, std::uint64_t seed = 1234) {
    P p(M, K, N, seed);
    check_all(p, multiplier, slope);
  }

  static std::vector<double> run(P& p, const Options& o, double multiplier = 2,
                                 double slope = 0.1) {
    p.poison();
    FusedLinear::linear_leaky_relu(Exec(), p.X, p.W, p.b, p.Y, Scalar(multiplier), Scalar(slope),
                                   o);
    return p.output();
  }
};

template <class... T>
struct TypeList {};
template <class A, class B>
struct Concat;
template <class... A, class... B>
struct Concat<TypeList<A...>, TypeList<B...>> {
  using type = TypeList<A..., B...>;
};
template <class L>
struct AsGTestTypes;
template <class... T>
struct AsGTestTypes<TypeList<T...>> {
  using type = ::testing::Types<T...>;
};

/// The default execution space: the full matrix.
using DefaultConfigs = TypeList<Config<Kokkos::DefaultExecutionSpace, float, Kokkos::LayoutRight>,
                                Config<Kokkos::DefaultExecutionSpace, float, Kokkos::LayoutLeft>,
                                Config<Kokkos::DefaultExecutionSpace, double, Kokkos::LayoutRight>,
                                Config<Kokkos::DefaultExecutionSpace, double, Kokkos::LayoutLeft>>;

/// Another execution space: float LayoutRight (PyTorch's) and double LayoutLeft, unless it is
/// the default one (covered by DefaultConfigs).
template <class Exec>
using OtherConfigs = std::conditional_t<
    std::is_same<Exec, Kokkos::DefaultExecutionSpace>::value, TypeList<>,
    TypeList<Config<Exec, float, Kokkos::LayoutRight>, Config<Exec, double, Kokkos::LayoutLeft>>>;

using SpaceConfigs0 = TypeList<>;
#if defined(KOKKOS_ENABLE_OPENMP)
using SpaceConfigs1 = typename Concat<SpaceConfigs0, OtherConfigs<Kokkos::OpenMP>>::type;
#else
using SpaceConfigs1 = SpaceConfigs0;
#endif
#if defined(KOKKOS_ENABLE_THREADS)
using SpaceConfigs2 = typename Concat<SpaceConfigs1, OtherConfigs<Kokkos::Threads>>::type;
#else
using SpaceConfigs2 = SpaceConfigs1;
#endif
#if defined(KOKKOS_ENABLE_SERIAL)
using SpaceConfigs3 = typename Concat<SpaceConfigs2, OtherConfigs<Kokkos::Serial>>::type;
#else
using SpaceConfigs3 = SpaceConfigs2;
#endif
/// Every enabled execution space but the default one.
using NonDefaultConfigs = SpaceConfigs3;

}  // namespace FusedLinearTest

#endif
