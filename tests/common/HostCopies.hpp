// SPDX-License-Identifier: Apache-2.0
// Views to and from the host: any View's values as row-major doubles and back, one element set
// from the host, and a layer call's inputs gathered for the reference.
#ifndef FUSED_LINEAR_TEST_COMMON_HOST_COPIES_HPP
#define FUSED_LINEAR_TEST_COMMON_HOST_COPIES_HPP

#include <cstddef>
#include <cstdint>
#include <vector>

#include <Kokkos_Core.hpp>

namespace FusedLinearTest {

/// A rank-2 View's values as a row-major std::vector<double> (any layout, space or traits).
/// (Through a contiguous copy in the View's own memory space: Kokkos copies strided Views
/// between memory spaces only when they are contiguous.)
template <class View>
std::vector<double> host_matrix(const View& A) {
  static_assert(View::rank == 2, "rank 2");
  using Scalar = typename View::non_const_value_type;
  Kokkos::fence();
  const std::int64_t rows = A.extent(0), cols = A.extent(1);
  Kokkos::View<Scalar**, Kokkos::LayoutRight, typename View::memory_space> c("copy", rows, cols);
  if (c.size() > 0) Kokkos::deep_copy(c, A);
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), c);
  std::vector<double> out(std::size_t(rows * cols));
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) out[std::size_t(i * cols + j)] = double(h(i, j));
  return out;
}
template <class View>
std::vector<double> host_vector(const View& v) {
  static_assert(View::rank == 1, "rank 1");
  using Scalar = typename View::non_const_value_type;
  Kokkos::fence();
  Kokkos::View<Scalar*, typename View::memory_space> c("copy", v.extent(0));
  if (c.size() > 0) Kokkos::deep_copy(c, v);
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), c);
  std::vector<double> out(v.extent(0));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = double(h(i));
  return out;
}

/// Writes row-major values into a rank-2 View of any layout, space or traits (through a
/// contiguous copy in its memory space).
template <class View>
void write_matrix(const View& A, const std::vector<double>& values) {
  using Scalar = typename View::non_const_value_type;
  const std::int64_t rows = A.extent(0), cols = A.extent(1);
  Kokkos::View<Scalar**, Kokkos::LayoutRight, typename View::memory_space> c("copy", rows, cols);
  auto h = Kokkos::create_mirror_view(c);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) h(i, j) = Scalar(values[std::size_t(i * cols + j)]);
  Kokkos::deep_copy(c, h);
  if (c.size() > 0) Kokkos::deep_copy(A, c);
  Kokkos::fence();
}
template <class View>
void write_vector(const View& v, const std::vector<double>& values) {
  using Scalar = typename View::non_const_value_type;
  Kokkos::View<Scalar*, typename View::memory_space> c("copy", v.extent(0));
  auto h = Kokkos::create_mirror_view(c);
  for (std::size_t i = 0; i < v.extent(0); ++i) h(i) = Scalar(values[i]);
  Kokkos::deep_copy(c, h);
  if (c.size() > 0) Kokkos::deep_copy(v, c);
  Kokkos::fence();
}

/// The inputs of a layer call on the host, in double, row-major: X [M,K], W [N,K], b [N].
struct HostInputs {
  std::int64_t M = 0, K = 0, N = 0;
  std::vector<double> X, W, b;
  double x(std::int64_t i, std::int64_t k) const { return X[std::size_t(i * K + k)]; }
  double w(std::int64_t j, std::int64_t k) const { return W[std::size_t(j * K + k)]; }
};

template <class XView, class WView, class BView>
HostInputs host_inputs(const XView& X, const WView& W, const BView& b) {
  HostInputs in;
  in.M = X.extent(0), in.K = X.extent(1), in.N = W.extent(0);
  in.X = host_matrix(X), in.W = host_matrix(W), in.b = host_vector(b);
  return in;
}

/// Sets one element of a View from the host.
template <class View, class... Index>
void set_element(const View& v, typename View::non_const_value_type value, Index... index) {
  Kokkos::fence();
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  h(index...) = value;
  Kokkos::deep_copy(v, h);
}

}  // namespace FusedLinearTest

#endif
