// SPDX-License-Identifier: Apache-2.0
// The contract suites' memory (tests/contract/), as the reference BLAS testers (sblat3) lay out
// theirs: each operand placed inside a larger buffer whose other elements hold sentinels (guard
// bands before, after and between its rows and columns), two operands possibly in one buffer;
// a host image of every buffer staged before a call, and the check after it that nothing but
// Y's elements changed (bit for bit, so a NaN written over a NaN sentinel still shows: every
// sentinel is a NaN with its own payload, which a read also propagates into Y).
//
// Data moves only by memcpy (host memory) or Kokkos::deep_copy on the call's instance (device
// memory), never through a Kokkos kernel: worker threads may stage and check (Kokkos 3.4's
// OpenMP backend runs kernels from the initialising thread only).
#ifndef FUSED_LINEAR_TEST_CONTRACT_GUARDED_HPP
#define FUSED_LINEAR_TEST_CONTRACT_GUARDED_HPP

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../common/TestHelpers.hpp"

namespace FusedLinearTest {
namespace Contract {

/// Where an operand's elements lie in its buffer: element (i, j) at offset + i s0 + j s1 (the
/// bias: rows = N, cols = 1, s0 its stride).
struct Geometry {
  std::int64_t rows = 0, cols = 0, offset = 0, s0 = 1, s1 = 1;
  std::int64_t at(std::int64_t i, std::int64_t j) const { return offset + i * s0 + j * s1; }
  std::int64_t end() const { return rows == 0 || cols == 0 ? offset : at(rows - 1, cols - 1) + 1; }
};
inline Geometry row_major(std::int64_t rows, std::int64_t cols, std::int64_t ld,
                          std::int64_t offset = 0) {
  return {rows, cols, offset, ld, 1};
}
inline Geometry col_major(std::int64_t rows, std::int64_t cols, std::int64_t ld,
                          std::int64_t offset = 0) {
  return {rows, cols, offset, 1, ld};
}
inline Geometry strided(std::int64_t rows, std::int64_t cols, std::int64_t s0, std::int64_t s1,
                        std::int64_t offset = 0) {
  return {rows, cols, offset, s0, s1};
}
inline Geometry vector(std::int64_t n, std::int64_t stride = 1, std::int64_t offset = 0) {
  return {n, 1, offset, stride, 1};
}

/// X, W, b and Y placed in numbered buffers (two operands may share one).
struct Arrangement {
  std::string name;
  Geometry X, W, b, Y;
  int x = 0, w = 1, bias = 2, y = 3;  // the buffer of each operand
  /// Elements each buffer needs: its operands' extent and a guard band of 7 elements after.
  std::vector<std::int64_t> sizes() const {
    std::vector<std::int64_t> s(4, 8);
    const std::pair<int, const Geometry*> ops[] = {{x, &X}, {w, &W}, {bias, &b}, {y, &Y}};
    for (const auto& op : ops)
      s[std::size_t(op.first)] = std::max(s[std::size_t(op.first)], op.second->end() + 7);
    return s;
  }
  /// The same, every operand `by` elements further into its buffer (other alignment).
  Arrangement shifted(std::int64_t by, const std::string& suffix) const {
    Arrangement a = *this;
    a.X.offset += by, a.W.offset += by, a.b.offset += by, a.Y.offset += by;
    a.name += suffix;
    return a;
  }
};

/// Four buffers (some may stay unused), each sized for every arrangement it will hold.
template <class Scalar, class Memory>
struct Buffers {
  std::vector<Kokkos::View<Scalar*, Memory>> v;
  explicit Buffers(const std::vector<std::int64_t>& sizes) {
    for (std::int64_t n : sizes)
      v.emplace_back(Kokkos::view_alloc(Kokkos::WithoutInitializing, "contract"), std::size_t(n));
  }
  /// Room for every arrangement given (the element-wise maximum of their sizes).
  explicit Buffers(const std::vector<Arrangement>& all) : Buffers(max_sizes(all)) {}
  static std::vector<std::int64_t> max_sizes(const std::vector<Arrangement>& all) {
    std::vector<std::int64_t> s(4, 8);
    for (const Arrangement& a : all)
      for (std::size_t i = 0; i < 4; ++i) s[i] = std::max(s[i], a.sizes()[i]);
    return s;
  }
  Scalar* data(int i) const { return v[std::size_t(i)].data(); }
};

/// A NaN whose payload names the element (never what arithmetic produces: a computed NaN has
/// the default payload or an input's).
template <class Scalar>
Scalar sentinel(std::int64_t e) {
  using Bits = std::conditional_t<sizeof(Scalar) == 4, std::uint32_t, std::uint64_t>;
  const Bits quiet = sizeof(Scalar) == 4 ? Bits(0x7fc00000u) : Bits(0x7ff8000000000000ull);
  const Bits bits = quiet | Bits(std::uint64_t(e) % 0x3ffff0u + 7);
  Scalar s;
  std::memcpy(&s, &bits, sizeof s);
  return s;
}

template <class Exec, class Scalar, class Memory>
void upload(const Exec& exec, const Kokkos::View<Scalar*, Memory>& v,
            const std::vector<Scalar>& h) {
  exec.fence();
  if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, Memory>::accessible) {
    std::memcpy(v.data(), h.data(), h.size() * sizeof(Scalar));
  } else {
    Kokkos::View<const Scalar*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> hv(h.data(), h.size());
    Kokkos::deep_copy(exec, v, hv);
    exec.fence();
  }
}
template <class Exec, class Scalar, class Memory>
std::vector<Scalar> download(const Exec& exec, const Kokkos::View<Scalar*, Memory>& v) {
  std::vector<Scalar> h(v.extent(0));
  exec.fence();
  if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace, Memory>::accessible) {
    std::memcpy(h.data(), v.data(), h.size() * sizeof(Scalar));
  } else {
    Kokkos::View<Scalar*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> hv(h.data(), h.size());
    Kokkos::deep_copy(exec, hv, v);
    exec.fence();
  }
  return h;
}

/// The host image of every buffer before a call: sentinels, the inputs' values at their
/// elements, Y's prior values (distinct, far from any result, or NaN) at Y's; which elements
/// are Y's.
template <class Scalar>
struct Image {
  std::vector<std::vector<Scalar>> buf;
  std::vector<std::vector<char>> is_y;
};

inline double prior_value(std::int64_t e) { return 4096.0 + double(e % 1021); }

/// Stages `a` with the inputs `in` (row-major X [M,K], W [N,K], b [N]) in `bufs`. Y's elements
/// are written last, so an arrangement where Y overlaps an input (to be refused) holds Y's.
template <class Exec, class Scalar, class Memory>
Image<Scalar> stage(const Exec& exec, const Buffers<Scalar, Memory>& bufs, const Arrangement& a,
                    const HostInputs& in, bool nan_y = false) {
  Image<Scalar> im;
  for (const auto& v : bufs.v) {
    im.buf.emplace_back(v.extent(0));
    im.is_y.emplace_back(v.extent(0), 0);
    for (std::size_t e = 0; e < v.extent(0); ++e) im.buf.back()[e] = sentinel<Scalar>(e);
  }
  const auto put = [&](int b, const Geometry& g, const std::vector<double>& values) {
    for (std::int64_t i = 0; i < g.rows; ++i)
      for (std::int64_t j = 0; j < g.cols; ++j)
        im.buf[std::size_t(b)][std::size_t(g.at(i, j))] =
            Scalar(values[std::size_t(i * g.cols + j)]);
  };
  put(a.x, a.X, in.X);
  put(a.w, a.W, in.W);
  put(a.bias, a.b, in.b);
  for (std::int64_t i = 0; i < a.Y.rows; ++i)
    for (std::int64_t j = 0; j < a.Y.cols; ++j) {
      const std::size_t e = std::size_t(a.Y.at(i, j));
      im.buf[std::size_t(a.y)][e] =
          nan_y ? std::numeric_limits<Scalar>::quiet_NaN() : Scalar(prior_value(i * a.Y.cols + j));
      im.is_y[std::size_t(a.y)][e] = 1;
    }
  for (std::size_t b = 0; b < bufs.v.size(); ++b) upload(exec, bufs.v[b], im.buf[b]);
  return im;
}

/// Re-stages Y's buffer only (the inputs' buffers untouched: other threads may read them).
template <class Exec, class Scalar, class Memory>
void restage_y(const Exec& exec, const Buffers<Scalar, Memory>& bufs, const Arrangement& a,
               const Image<Scalar>& im) {
  upload(exec, bufs.v[std::size_t(a.y)], im.buf[std::size_t(a.y)]);
}

inline bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }
inline bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

/// After a call: every element of every buffer but Y's unchanged, bit for bit (Y's too when
/// `y_too`: a refused call); Y's values, row-major, into `y`. Only Y's buffer when
/// `inputs_too` is false.
template <class Exec, class Scalar, class Memory>
::testing::AssertionResult unchanged_but_y(const Exec& exec, const Buffers<Scalar, Memory>& bufs,
                                           const Arrangement& a, const Image<Scalar>& im,
                                           bool y_too, std::vector<double>& y,
                                           bool inputs_too = true) {
  std::ostringstream bad;
  std::int64_t changed = 0;
  y.assign(std::size_t(a.Y.rows * a.Y.cols), 0);
  for (int b = 0; b < int(bufs.v.size()); ++b) {
    if (!inputs_too && b != a.y) continue;
    const std::vector<Scalar> now = download(exec, bufs.v[std::size_t(b)]);
    const auto& was = im.buf[std::size_t(b)];
    std::int64_t here = 0;
    for (std::size_t e = 0; e < now.size(); ++e) {
      if (im.is_y[std::size_t(b)][e] && !y_too) continue;
      if (same_bits(now[e], was[e])) continue;
      if (here++ < 3)
        bad << " buffer " << b << " element " << e << (im.is_y[std::size_t(b)][e] ? " (Y's)" : "")
            << ": " << now[e] << ";";
    }
    changed += here;
    if (b == a.y)
      for (std::int64_t i = 0; i < a.Y.rows; ++i)
        for (std::int64_t j = 0; j < a.Y.cols; ++j)
          y[std::size_t(i * a.Y.cols + j)] = double(now[std::size_t(a.Y.at(i, j))]);
  }
  if (changed == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << changed << " element(s) " << (y_too ? "of the buffers" : "outside Y")
         << " changed by the call; first:" << bad.str();
}

}  // namespace Contract
}  // namespace FusedLinearTest

#endif
