// SPDX-License-Identifier: Apache-2.0
/// \file Checks.hpp
/// The argument checks, compile-time and run-time, each failure an exception naming the function
/// and the problem. Strings are built only when a check fails.
#ifndef FUSED_LINEAR_IMPL_CHECKS_HPP
#define FUSED_LINEAR_IMPL_CHECKS_HPP

#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <Kokkos_Core.hpp>

#include "FusedLinear/impl/Dispatch.hpp"

namespace FusedLinear {
namespace Impl {

/// What the View types must be, checked where a plan or a call is instantiated.
template <class ExecSpace, class XView, class WView, class BView, class YView>
constexpr bool check_types() {
  using Scalar = typename YView::non_const_value_type;
  static_assert(Kokkos::is_execution_space<ExecSpace>::value,
                "FusedLinear: the first argument must be a Kokkos execution space instance");
  static_assert(Kokkos::is_view<XView>::value && Kokkos::is_view<WView>::value &&
                    Kokkos::is_view<BView>::value && Kokkos::is_view<YView>::value,
                "FusedLinear: X, W, b and Y must be Kokkos::Views");
  static_assert(XView::rank == 2 && WView::rank == 2 && BView::rank == 1 && YView::rank == 2,
                "FusedLinear: X, W and Y must be rank 2 and b rank 1");
  static_assert(std::is_same<Scalar, float>::value || std::is_same<Scalar, double>::value,
                "FusedLinear: the value type must be float or double");
  static_assert(std::is_same<typename YView::value_type, Scalar>::value,
                "FusedLinear: Y must not be a View of const");
  static_assert(std::is_same<typename XView::non_const_value_type, Scalar>::value &&
                    std::is_same<typename WView::non_const_value_type, Scalar>::value &&
                    std::is_same<typename BView::non_const_value_type, Scalar>::value,
                "FusedLinear: X, W, b and Y must have one value type");
  static_assert(
      Kokkos::SpaceAccessibility<ExecSpace, typename XView::memory_space>::accessible &&
          Kokkos::SpaceAccessibility<ExecSpace, typename WView::memory_space>::accessible &&
          Kokkos::SpaceAccessibility<ExecSpace, typename BView::memory_space>::accessible &&
          Kokkos::SpaceAccessibility<ExecSpace, typename YView::memory_space>::accessible,
      "FusedLinear: X, W, b and Y must be accessible from the execution space");
  return true;
}

template <class View>
std::string shape_of(const View& v) {
  std::ostringstream os;
  os << '[' << v.extent(0);
  for (unsigned r = 1; r < View::rank; ++r) os << ',' << v.extent(r);
  os << ']';
  return os.str();
}

/// Whether two Views' memory ranges overlap (empty Views overlap nothing).
template <class A, class B>
bool overlaps(const A& a, const B& b) {
  if (a.span() == 0 || b.span() == 0) return false;
  const auto a0 = reinterpret_cast<std::uintptr_t>(a.data());
  const auto b0 = reinterpret_cast<std::uintptr_t>(b.data());
  const auto a1 = a0 + a.span() * sizeof(typename A::value_type);
  const auto b1 = b0 + b.span() * sizeof(typename B::value_type);
  return a0 < b1 && b0 < a1;
}

/// A View holding elements must point at them; an empty one may be null (an empty tensor from
/// another library: Unmanaged, extent 0, no data).
template <class View>
bool has_data(const View& v) {
  return v.size() == 0 || v.data() != nullptr;
}

/// The checks of every call, cheap when they pass: extents against `shape`, data, aliasing.
template <class XView, class WView, class BView, class YView>
void check_views(const XView& X, const WView& W, const BView& b, const YView& Y, const Shape& shape,
                 const char* function) {
  if (std::int64_t(X.extent(0)) != shape.M || std::int64_t(X.extent(1)) != shape.K ||
      std::int64_t(W.extent(0)) != shape.N || std::int64_t(W.extent(1)) != shape.K ||
      std::int64_t(b.extent(0)) != shape.N || std::int64_t(Y.extent(0)) != shape.M ||
      std::int64_t(Y.extent(1)) != shape.N) {
    std::ostringstream os;
    os << "extents do not match: expected X [M,K], W [N,K], b [N], Y [M,N] with M = " << shape.M
       << ", K = " << shape.K << ", N = " << shape.N << "; got X " << shape_of(X) << ", W "
       << shape_of(W) << ", b " << shape_of(b) << ", Y " << shape_of(Y);
    refuse(function, os.str());
  }
  if (!has_data(X)) refuse(function, "X is not allocated");
  if (!has_data(W)) refuse(function, "W is not allocated");
  if (!has_data(b)) refuse(function, "b is not allocated");
  if (!has_data(Y)) refuse(function, "Y is not allocated");
  if (overlaps(Y, X)) refuse(function, "Y aliases X (the output must not overlap an input)");
  if (overlaps(Y, W)) refuse(function, "Y aliases W (the output must not overlap an input)");
  if (overlaps(Y, b)) refuse(function, "Y aliases b (the output must not overlap an input)");
}

/// The shape the Views describe, checked for consistency and size; and the parameters.
template <class XView, class WView, class BView, class YView, class Scalar>
Shape check_arguments(const XView& X, const WView& W, const BView& b, const YView& Y,
                      Scalar multiplier, Scalar negative_slope, const char* function) {
  if (W.extent(1) != X.extent(1) || b.extent(0) != W.extent(0) || Y.extent(0) != X.extent(0) ||
      Y.extent(1) != W.extent(0))
    refuse(function, "extents do not match: expected X [M,K], W [N,K], b [N], Y [M,N]; got X " +
                         shape_of(X) + ", W " + shape_of(W) + ", b " + shape_of(b) + ", Y " +
                         shape_of(Y));
  // cuBLAS and BLAS take 32-bit dimensions; products of them may exceed 2^31 (64-bit indexing).
  constexpr std::size_t max_extent = 2147483647;
  if (X.extent(0) > max_extent || X.extent(1) > max_extent || W.extent(0) > max_extent)
    refuse(function,
           "M, N and K must each be below 2^31; got X " + shape_of(X) + ", W " + shape_of(W));
  if (!std::isfinite(static_cast<double>(multiplier)))
    refuse(function,
           "multiplier must be finite, got " + std::to_string(static_cast<double>(multiplier)));
  if (!std::isfinite(static_cast<double>(negative_slope)))
    refuse(function, "negative_slope must be finite, got " +
                         std::to_string(static_cast<double>(negative_slope)));
  const Shape shape{std::int64_t(X.extent(0)), std::int64_t(X.extent(1)),
                    std::int64_t(W.extent(0))};
  check_views(X, W, b, Y, shape, function);
  return shape;
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
