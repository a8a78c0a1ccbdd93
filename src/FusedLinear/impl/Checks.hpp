// SPDX-License-Identifier: Apache-2.0
/// \file Checks.hpp
/// The argument checks, compile-time and run-time, each failure an exception naming the function
/// and the problem. Strings are built only when a check fails.
#ifndef FUSED_LINEAR_IMPL_CHECKS_HPP
#define FUSED_LINEAR_IMPL_CHECKS_HPP

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include <Kokkos_Core.hpp>

#include "FusedLinear/impl/Facts.hpp"
#include "FusedLinear/impl/Errors.hpp"

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

/// A rank-1 or rank-2 View's elements in units of its value type: element (i, j) at
/// `i * stride[0] + j * stride[1]` from the data pointer, dimension 0 the outer one.
struct ElementSet {
  std::uintptr_t base = 0;
  std::int64_t size = 1, extent[2] = {1, 1}, stride[2] = {1, 1};
};
template <class View>
ElementSet element_set(const View& v) {
  ElementSet e;
  e.base = reinterpret_cast<std::uintptr_t>(v.data());
  e.size = std::int64_t(sizeof(typename View::value_type));
  for (unsigned r = 0; r < View::rank; ++r) {
    e.extent[r] = std::int64_t(v.extent(r));
    // A lone index's stride never matters: 1 keeps the arithmetic below positive.
    e.stride[r] = e.extent[r] > 1 ? std::int64_t(v.stride(r)) : 1;
  }
  if (e.stride[0] < e.stride[1]) {
    std::swap(e.extent[0], e.extent[1]);
    std::swap(e.stride[0], e.stride[1]);
  }
  return e;
}

/// Whether t a + u b == c for some 0 <= t < nt, 0 <= u < nu (a, b, nt, nu > 0): extended
/// Euclid, then the range of the solutions' free parameter. 128-bit where the compiler has it;
/// elsewhere values past 2^31 answer a conservative yes.
inline bool sums_meet(std::int64_t a, std::int64_t nt, std::int64_t b, std::int64_t nu,
                      std::int64_t c) {
#if defined(__SIZEOF_INT128__)
  __extension__ typedef __int128 Wide;
#else
  using Wide = std::int64_t;
  constexpr std::int64_t small = std::int64_t(1) << 31;
  if (a >= small || b >= small || nt >= small || nu >= small || c >= small || c <= -small)
    return true;
#endif
  Wide r0 = a, r1 = b, x0 = 1, x1 = 0;  // x0 a == r0 (mod b) throughout
  while (r1 != 0) {
    const Wide q = r0 / r1, r = r0 - q * r1, x = x0 - q * x1;
    r0 = r1, r1 = r, x0 = x1, x1 = x;
  }
  const Wide g = r0;
  if (c % g != 0) return false;
  const Wide y0 = (g - x0 * a) / b;  // x0 a + y0 b == g
  const Wide t0 = x0 * (c / g), u0 = y0 * (c / g), dt = b / g, du = a / g;
  // t = t0 + s dt, u = u0 - s du.
  const auto floor_div = [](Wide p, Wide q) {
    return p / q - ((p % q != 0) && ((p < 0) != (q < 0)));
  };
  const auto ceil_div = [&](Wide p, Wide q) { return -floor_div(-p, q); };
  const Wide lo = std::max(ceil_div(-t0, dt), ceil_div(u0 - (nu - 1), du));
  const Wide hi = std::min(floor_div(nt - 1 - t0, dt), floor_div(u0, du));
  return lo <= hi;
}

/// Whether some element of `a` sits `c` elements past some element of `b` (i a0 + j a1 ==
/// c + k b0 + l b1). Same strides: one equation over the index differences. Otherwise a's lines
/// (its inner dimension) against the lines of b within their reach; past `budget` steps (lines
/// of a walked and pairs of lines compared) the answer is a conservative yes.
inline bool elements_meet(const ElementSet& a, const ElementSet& b, std::int64_t c,
                          std::int64_t budget) {
  const std::int64_t A0 = a.stride[0], A1 = a.stride[1], B0 = b.stride[0], B1 = b.stride[1];
  if (A0 == B0 && A1 == B1)
    return sums_meet(A0, a.extent[0] + b.extent[0] - 1, A1, a.extent[1] + b.extent[1] - 1,
                     c + (b.extent[0] - 1) * A0 + (b.extent[1] - 1) * A1);
  const std::int64_t a_line = (a.extent[1] - 1) * A1, b_line = (b.extent[1] - 1) * B1;
  for (std::int64_t i = 0; i < a.extent[0]; ++i) {
    if (--budget < 0) return true;  // each line walked counts, met or not
    // b's lines k whose span [c + k B0, c + k B0 + b_line] meets [i A0, i A0 + a_line].
    const std::int64_t from = i * A0 - c - b_line, to = i * A0 + a_line - c;
    const std::int64_t k0 =
        std::max<std::int64_t>(0, from > 0 ? (from + B0 - 1) / B0 : -(-from / B0));
    const std::int64_t k1 = std::min<std::int64_t>(b.extent[0] - 1, to >= 0 ? to / B0 : -1);
    for (std::int64_t k = k0; k <= k1; ++k) {
      if (--budget < 0) return true;
      // j A1 - l B1 == c + k B0 - i A0, with l' = n - 1 - l: j A1 + l' B1 == that + b_line.
      if (sums_meet(A1, a.extent[1], B1, b.extent[1], c + k * B0 - i * A0 + b_line)) return true;
    }
  }
  return false;
}

/// Whether two Views share an element, decided element by element (Views of one buffer that
/// interleave without sharing, such as column blocks of one matrix, do not). Empty Views share
/// nothing.
template <class A, class B>
bool shares_elements(const A& a_view, const B& b_view) {
  if (a_view.size() == 0 || b_view.size() == 0) return false;
  const ElementSet a = element_set(a_view), b = element_set(b_view);
  const auto end = [](const ElementSet& e) {
    return e.base +
           std::uintptr_t(((e.extent[0] - 1) * e.stride[0] + (e.extent[1] - 1) * e.stride[1] + 1) *
                          e.size);
  };
  if (end(a) <= b.base || end(b) <= a.base) return false;
  // Not one value type, or a stride of 0 (an input broadcast along a dimension): the ranges
  // overlap, say so.
  if (a.size != b.size || a.stride[1] == 0 || b.stride[1] == 0) return true;
  // Elements share a byte when their addresses differ by less than one element: with
  // b.base - a.base = q size + r (0 <= r < size), an a element at q or (r > 0) q + 1 elements
  // past a b element.
  const std::int64_t size = a.size;
  const std::int64_t d = std::int64_t(b.base - a.base), r = ((d % size) + size) % size;
  const std::int64_t q = (d - r) / size;
  constexpr std::int64_t budget = std::int64_t(1) << 16;
  const bool fewer_lines_in_a = a.extent[0] <= b.extent[0];
  for (std::int64_t c = q; c <= q + (r > 0); ++c)
    if (fewer_lines_in_a ? elements_meet(a, b, c, budget) : elements_meet(b, a, -c, budget))
      return true;
  return false;
}

/// Whether a View maps two of its indices to one element (a stride of 0, or strides that
/// fold one dimension onto the other): i a0 + j a1 == 0 for some (i, j) != 0 within the extents.
template <class View>
bool maps_two_indices_to_one_element(const View& v) {
  if (v.size() <= 1) return false;
  const ElementSet e = element_set(v);
  if (e.stride[1] == 0) return true;
  if (e.extent[0] == 1 || e.extent[1] == 1) return false;
  std::int64_t g = e.stride[0], h = e.stride[1];
  while (h != 0) g = std::exchange(h, g % h);
  // The smallest solution is (a1 / g, -a0 / g).
  return e.stride[1] / g < e.extent[0] && e.stride[0] / g < e.extent[1];
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
  if (maps_two_indices_to_one_element(Y))
    refuse(function, "Y's strides map two of its elements to one address");
  if (shares_elements(Y, X))
    refuse(function, "Y aliases X (they share elements: the output must not overlap an input)");
  if (shares_elements(Y, W))
    refuse(function, "Y aliases W (they share elements: the output must not overlap an input)");
  if (shares_elements(Y, b))
    refuse(function, "Y aliases b (they share elements: the output must not overlap an input)");
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
