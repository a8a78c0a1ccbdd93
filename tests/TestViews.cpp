// SPDX-License-Identifier: Apache-2.0
// Views of every kind (memory traits included), on the default execution space,
// each against the test's reference on every path the build can run for it (a refusal must be a
// documented one: attempt() checks): column-offset subviews of wider Views (padded LayoutRight,
// rows not 16-byte aligned), LayoutStride Views with non-unit strides in every position, mixed
// layouts, const and RandomAccess inputs, an Atomic output, Unmanaged Views over user memory, a
// bias whose pointer is not 16-byte aligned, and zero-extent Unmanaged Views with null data.
// Also here, as it shares the mixed-layout Views' instantiation (W LayoutLeft: Kokkos Kernels'
// native gemm): Concurrency.NativeGemmOnTheCallersStream.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/TestHelpers.hpp"

namespace {

using namespace FusedLinearTest;
using Right = Kokkos::View<float**, Kokkos::LayoutRight, MemorySpace>;
using Left = Kokkos::View<float**, Kokkos::LayoutLeft, MemorySpace>;
using Stride = Kokkos::View<float**, Kokkos::LayoutStride, MemorySpace>;
using Vector = Kokkos::View<float*, Kokkos::LayoutRight, MemorySpace>;
using StrideVector = Kokkos::View<float*, Kokkos::LayoutStride, MemorySpace>;
using P = Problem<ExecSpace, float, Kokkos::LayoutRight>;

constexpr std::int64_t M = 37, K = 45, N = 70;

std::vector<double> random_values(std::size_t n, double bound, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-bound, bound);
  std::vector<double> v(n);
  for (double& x : v) x = double(float(u(rng)));
  return v;
}

/// The values every case computes with (so that each case's Views hold the same numbers).
struct Values {
  std::vector<double> X = random_values(M * K, 1, 1);
  std::vector<double> W = random_values(N * K, 1 / std::sqrt(double(K)), 2);
  std::vector<double> b = random_values(N, 1 / std::sqrt(double(K)), 3);
  Reference reference(double multiplier, double slope) const {
    HostInputs in;
    in.M = M, in.K = K, in.N = N, in.X = X, in.W = W, in.b = b;
    return Reference(in, multiplier, slope);
  }
};
const Values& values() {
  static const Values v;
  return v;
}

/// Every request the build serves for these Views (all algorithms, all precisions, fused_skinny
/// with forced split K too), each on a poisoned Y, against the reference.
template <class XView, class WView, class BView, class YView, class Poison>
void check_every_path(const std::string& what, const XView& X, const WView& W, const BView& b,
                      const YView& Y, Poison&& poison, double multiplier = 2, double slope = 0.1) {
  const Reference ref = values().reference(multiplier, slope);
  int ran = 0;
  for (Precision precision : all_precisions)
    for (Algorithm a : all_algorithms)
      for (int splits : {0, 3}) {
        if (splits > 0 && a != Algorithm::FusedSkinny) continue;
        poison();
        const Options o = options(a, precision, splits);
        const auto info = attempt(ExecSpace(), X, W, b, Y, multiplier, slope, o);
        if (!info) continue;
        ++ran;
        EXPECT_TRUE(ref.check<float>(host_matrix(Y), product_rounding(*info, K)))
            << what << ": " << describe(o, *info);
      }
  EXPECT_GE(ran, 7) << what << ": every strict path but the sm_90a ones runs everywhere";
}

template <class YView>
auto poison_of(const YView& Y) {
  return [Y] { Kokkos::deep_copy(Y, std::numeric_limits<float>::quiet_NaN()); };
}

/// Plain contiguous Views holding the values.
struct Plain {
  Right X{"X", M, K}, W{"W", N, K}, Y{"Y", M, N};
  Vector b{"b", N};
  Plain() {
    write_matrix(X, values().X);
    write_matrix(W, values().W);
    write_vector(b, values().b);
  }
};

/// Column-offset subviews of wider Views: still LayoutRight, with padded rows whose starts are
/// not 16-byte aligned (offset 3 floats in X, 1 in W, 2 in Y), and b at offset 1 of a wider
/// vector (its pointer 4 bytes past a 16-byte boundary).
struct Offset {
  Right X_wide{"X_wide", M, K + 7}, W_wide{"W_wide", N, K + 5}, Y_wide{"Y_wide", M, N + 6};
  Vector b_wide{"b_wide", N + 1};
  decltype(Kokkos::subview(X_wide, Kokkos::ALL, std::make_pair(0, 1))) X, W, Y;
  decltype(Kokkos::subview(b_wide, std::make_pair(0, 1))) b;
  Offset()
      : X(Kokkos::subview(X_wide, Kokkos::ALL, std::make_pair(3, 3 + int(K)))),
        W(Kokkos::subview(W_wide, Kokkos::ALL, std::make_pair(1, 1 + int(K)))),
        Y(Kokkos::subview(Y_wide, Kokkos::ALL, std::make_pair(2, 2 + int(N)))),
        b(Kokkos::subview(b_wide, std::make_pair(1, 1 + int(N)))) {
    write_matrix(X, values().X);
    write_matrix(W, values().W);
    write_vector(b, values().b);
    // The Views outside the subviews are left as NaN: a read past a row would show.
    Kokkos::deep_copy(Kokkos::subview(X_wide, Kokkos::ALL, std::make_pair(0, 3)),
                      std::numeric_limits<float>::quiet_NaN());
    Kokkos::deep_copy(Kokkos::subview(W_wide, Kokkos::ALL, std::make_pair(0, 1)),
                      std::numeric_limits<float>::quiet_NaN());
    Kokkos::deep_copy(Kokkos::subview(b_wide, std::make_pair(0, 1)),
                      std::numeric_limits<float>::quiet_NaN());
  }
};

/// LayoutStride Views with non-unit strides: X with every other column of a wider buffer, W
/// stored column-major with padding (stride(0) = 1), b every third element, Y every other
/// column with padded rows. The buffers hold NaN outside the Views.
struct Strided {
  Kokkos::View<float*, MemorySpace> x_buf{"x_buf", std::size_t(M*(2 * K + 1))},
      w_buf{"w_buf", std::size_t((N + 3) * K)}, b_buf{"b_buf", std::size_t(3 * N)},
      y_buf{"y_buf", std::size_t(M*(2 * N + 1))};
  Stride X, W, Y;
  StrideVector b;
  Strided() {
    for (auto* buf : {&x_buf, &w_buf, &b_buf, &y_buf})
      Kokkos::deep_copy(*buf, std::numeric_limits<float>::quiet_NaN());
    X = Stride(x_buf.data(), Kokkos::LayoutStride(M, 2 * K + 1, K, 2));
    W = Stride(w_buf.data(), Kokkos::LayoutStride(N, 1, K, N + 3));
    b = StrideVector(b_buf.data(), Kokkos::LayoutStride(N, 3));
    Y = Stride(y_buf.data(), Kokkos::LayoutStride(M, 2 * N + 1, N, 2));
    write_matrix(X, values().X);
    write_matrix(W, values().W);
    write_vector(b, values().b);
  }
};

TEST(Views, ColumnOffsetSubviewsOfWiderViews) {
  static_assert(std::is_same<decltype(Offset::X)::array_layout, Kokkos::LayoutRight>::value,
                "a column-offset subview of a LayoutRight View is LayoutRight with padded rows");
  Plain p;
  Offset o;
  check_every_path("plain", p.X, p.W, p.b, p.Y, poison_of(p.Y));
  check_every_path("X offset", o.X, p.W, p.b, p.Y, poison_of(p.Y));
  check_every_path("W offset", p.X, o.W, p.b, p.Y, poison_of(p.Y));
  check_every_path("b offset (pointer not 16-byte aligned)", p.X, p.W, o.b, p.Y, poison_of(p.Y));
  check_every_path("Y offset", p.X, p.W, p.b, o.Y, poison_of(o.Y));
  check_every_path("all offset", o.X, o.W, o.b, o.Y, poison_of(o.Y));
  // Y's neighbours in its wider View are never written.
  Kokkos::deep_copy(o.Y_wide, -7.0f);
  FusedLinear::linear_leaky_relu(o.X, o.W, o.b, o.Y, 2.f, 0.1f);
  const auto wide = host_matrix(o.Y_wide);
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j : {0, 1, int(N) + 2, int(N) + 3, int(N) + 4, int(N) + 5})
      EXPECT_EQ(wide[std::size_t(i * (N + 6) + j)], -7.0) << i << "," << j;
}

// What the dispatch is told of fused_skinny's loads (Facts::skinny_packed, which sends one row
// to cuBLASLt where W cannot be read in packs): rows a multiple of 16 bytes long, contiguous and
// 16-byte aligned, in X and in W; a column-offset subview keeps it only at an aligned offset.
TEST(Views, SkinnyPackedFactFollowsTheRows) {
  const ExecSpace exec;
  const std::int64_t k = 48;
  const Right X("X", 1, k), W("W", N, k), Y("Y", 1, N), X_odd("X_odd", 1, k + 1),
      W_odd("W_odd", N, k + 1), W_wide("W_wide", N, k + 8);
  const Vector b("b", N);
  const auto columns = [&](int first) {
    return Kokkos::subview(W_wide, Kokkos::ALL, std::make_pair(first, first + int(k)));
  };
  EXPECT_TRUE(facts_of(exec, X, W, b, Y).skinny_packed);
  EXPECT_FALSE(facts_of(exec, X_odd, W_odd, b, Y).skinny_packed) << "K not a multiple of 4";
  EXPECT_TRUE(facts_of(exec, X, columns(4), b, Y).skinny_packed) << "offset 4, row stride 56";
  EXPECT_FALSE(facts_of(exec, X, columns(1), b, Y).skinny_packed) << "offset 1";
}

// A matrix of LayoutStride Views: each of X, W, b and Y strided alone, then all four. (One set of
// View types, all LayoutStride: the strides differ at run time, which is what the kernels look
// at; each set of types would compile every kernel and Kokkos Kernels' native gemm once more.)
TEST(Views, LayoutStrideInEveryPosition) {
  Plain p;
  Strided s;
  const Stride X = p.X, W = p.W, Y = p.Y;  // contiguous, typed LayoutStride
  const StrideVector b = p.b;
  EXPECT_EQ(X.stride(1), 1u);
  check_every_path("X strided", s.X, W, b, Y, poison_of(Y));
  check_every_path("W strided", X, s.W, b, Y, poison_of(Y));
  check_every_path("b strided", X, W, s.b, Y, poison_of(Y));
  check_every_path("Y strided", X, W, b, s.Y, poison_of(s.Y));
  check_every_path("all strided", s.X, s.W, s.b, s.Y, poison_of(s.Y));
  check_every_path("none strided", X, W, b, Y, poison_of(Y));
  // Y's gaps in its buffer are never written.
  const auto buf = host_vector(s.y_buf);
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j)
      ASSERT_TRUE(std::isnan(buf[std::size_t(i * (2 * N + 1) + 2 * j + 1)])) << i << "," << j;
}

// Mixed layouts: Kokkos Kernels runs its native gemm for vendor (reported), every path right.
TEST(Views, MixedLayouts) {
  Plain p;
  Left W_left("W_left", N, K);
  write_matrix(W_left, values().W);
  check_every_path("W LayoutLeft", p.X, W_left, p.b, p.Y, poison_of(p.Y));
  const auto info = attempt(ExecSpace(), p.X, W_left, p.b, p.Y, 2, 0.1, options(Algorithm::Vendor));
  ASSERT_TRUE(info);
  EXPECT_EQ(info->gemm, Gemm::KokkosKernelsNative);
  EXPECT_FALSE(info->vendor_blas);
  EXPECT_TRUE(contains(info->note, "native")) << info->note;
  // Auto avoids the native gemm (on GPUs it takes fused where no vendor BLAS serves).
  const Impl::Facts f = facts_of(ExecSpace(), p.X, W_left, p.b, p.Y);
  EXPECT_EQ(f.blas, Gemm::KokkosKernelsNative);
  {
    const Impl::Shape large{1024, 1024, 1024};
    if (!Impl::is_host_space<ExecSpace>()) EXPECT_EQ(Impl::strict_auto(large, f), Algorithm::Fused);
  }
}

// Const, RandomAccess const inputs and an Atomic output: the same Views seen with other types.
TEST(Views, ConstRandomAccessAndAtomic) {
  Plain p;
  using ConstMatrix = Kokkos::View<const float**, Kokkos::LayoutRight, MemorySpace>;
  using ConstVector = Kokkos::View<const float*, Kokkos::LayoutRight, MemorySpace>;
  using RandomMatrix = Kokkos::View<const float**, Kokkos::LayoutRight, MemorySpace,
                                    Kokkos::MemoryTraits<Kokkos::RandomAccess>>;
  using RandomVector = Kokkos::View<const float*, Kokkos::LayoutRight, MemorySpace,
                                    Kokkos::MemoryTraits<Kokkos::RandomAccess>>;
  using AtomicMatrix =
      Kokkos::View<float**, Kokkos::LayoutRight, MemorySpace, Kokkos::MemoryTraits<Kokkos::Atomic>>;
  const ConstMatrix Xc = p.X, Wc = p.W;
  const ConstVector bc = p.b;
  const RandomMatrix Xr = p.X, Wr = p.W;
  const RandomVector br = p.b;
  const AtomicMatrix Ya = p.Y;
  check_every_path("const", Xc, Wc, bc, p.Y, poison_of(p.Y));
  check_every_path("RandomAccess const", Xr, Wr, br, p.Y, poison_of(p.Y));
  check_every_path("Atomic Y", p.X, p.W, p.b, Ya, poison_of(p.Y));
  check_every_path("RandomAccess inputs, Atomic Y", Xr, Wr, br, Ya, poison_of(p.Y));
  // Unmanaged const, as another library's tensor would come.
  using UnmanagedConst =
      Kokkos::View<const float**, Kokkos::LayoutRight, MemorySpace,
                   Kokkos::MemoryTraits<Kokkos::Unmanaged | Kokkos::RandomAccess>>;
  // (Made Unmanaged first: Kokkos 3.4 cannot construct a RandomAccess View of CUDA memory from
  // a pointer, CudaLDGFetch has no such constructor; assigning one is fine.)
  using Unmanaged =
      Kokkos::View<const float**, Kokkos::LayoutRight, MemorySpace, Kokkos::MemoryUnmanaged>;
  const UnmanagedConst Xu = Unmanaged(p.X.data(), M, K), Wu = Unmanaged(p.W.data(), N, K);
  check_every_path("Unmanaged RandomAccess const", Xu, Wu, p.b, p.Y, poison_of(p.Y));
}

// Unmanaged Views over memory the application allocated itself.
TEST(Views, UnmanagedOverUserMemory) {
  using U = Kokkos::View<float**, Kokkos::LayoutRight, MemorySpace, Kokkos::MemoryUnmanaged>;
  using UV = Kokkos::View<float*, Kokkos::LayoutRight, MemorySpace, Kokkos::MemoryUnmanaged>;
  // One block, as a framework's allocator would hand out: X, W, b, Y one after the other, b
  // and Y at offsets that are not multiples of 16 bytes.
  const std::size_t floats = std::size_t(M * K + N * K + 1 + N + 3 + M * N);
  float* block =
      static_cast<float*>(Kokkos::kokkos_malloc<MemorySpace>("user", floats * sizeof(float)));
  {
    U X(block, M, K), W(block + M * K, N, K);
    UV b(block + M * K + N * K + 1, N);
    U Y(block + M * K + N * K + 1 + N + 3, M, N);
    write_matrix(X, values().X);
    write_matrix(W, values().W);
    write_vector(b, values().b);
    check_every_path("Unmanaged over user memory", X, W, b, Y, poison_of(Y));
  }
  Kokkos::fence();
  FusedLinear::release_cached_plans();  // the cached plans' keys name this memory
  Kokkos::kokkos_free<MemorySpace>(block);
}

// Zero-extent Unmanaged Views with null data (an empty tensor from another library) are valid
// where the extent is 0: nothing is read or written but Y's elements (K = 0: LeakyReLU of the
// scaled bias). A View with elements and null data is refused (TestErrors.cpp).
TEST(Views, ZeroExtentNullViews) {
  using U = Kokkos::View<float**, Kokkos::LayoutRight, MemorySpace, Kokkos::MemoryUnmanaged>;
  using UV = Kokkos::View<float*, Kokkos::LayoutRight, MemorySpace, Kokkos::MemoryUnmanaged>;
  Plain p;
  const U none_x(nullptr, 0, K), none_y(nullptr, 0, N);
  for (Precision precision : all_precisions)
    for (Algorithm a : all_algorithms) {
      const Options o = options(a, precision);
      // M = 0: X and Y empty and null.
      if (const auto info = attempt(ExecSpace(), none_x, p.W, p.b, none_y, 2, 0.1, o))
        EXPECT_EQ(info->gemm, Gemm::None) << describe(o, *info);
      // N = 0: W, b and Y empty and null.
      const U none_w(nullptr, 0, K), none_y2(nullptr, M, 0);
      const UV none_b(nullptr, 0);
      if (const auto info = attempt(ExecSpace(), p.X, none_w, none_b, none_y2, 2, 0.1, o))
        EXPECT_EQ(info->gemm, Gemm::None) << describe(o, *info);
      // K = 0: X and W empty and null; Y = LeakyReLU(multiplier * b) on every row.
      const U none_x3(nullptr, M, 0), none_w3(nullptr, N, 0);
      Kokkos::deep_copy(p.Y, std::numeric_limits<float>::quiet_NaN());
      if (const auto info = attempt(ExecSpace(), none_x3, none_w3, p.b, p.Y, -2, 0.1, o)) {
        EXPECT_EQ(info->gemm, Gemm::None) << describe(o, *info);
        HostInputs in;
        in.M = M, in.K = 0, in.N = N, in.b = values().b;
        EXPECT_TRUE(Reference(in, -2, 0.1).check<float>(host_matrix(p.Y))) << describe(o, *info);
      }
    }
  // And through a Plan, made and executed with them.
  FusedLinear::Plan plan(ExecSpace(), none_x, p.W, p.b, none_y, 2.f, 0.1f);
  plan.execute(none_x, p.W, p.b, none_y);
  EXPECT_EQ(plan.workspace_bytes(), 0u);
  EXPECT_EQ(plan.info().gemm, Gemm::None);
  Kokkos::fence();
}

/// Writes v(i, j) = scale * hashed(i, j, salt) on `exec`, slowly (many rounds of the hash per
/// element: the kernel must still run when a gemm on another stream would start).
template <class View>
struct SlowFill {
  View v;
  std::uint64_t salt;
  double scale;
  int rounds;
  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i, std::int64_t j) const {
    double x = 0;
    for (int r = 0; r < rounds; ++r) x += hashed(i + r * 7919u, j, salt) * 1e-30;
    v(i, j) = typename View::non_const_value_type(scale * hashed(i, j, salt) + x * 0);
  }
};
template <class View>
void slow_fill(const ExecSpace& exec, const View& v, std::uint64_t salt, double scale) {
  using Policy = Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>, Kokkos::IndexType<std::int64_t>>;
  Kokkos::parallel_for("FusedLinearTest::slow_fill",
                       Policy(exec, {0, 0}, {std::int64_t(v.extent(0)), std::int64_t(v.extent(1))}),
                       SlowFill<View>{v, salt, scale, Impl::is_host_space<ExecSpace>() ? 1 : 200});
}

// Kokkos Kernels 3.4's gemm takes no instance and runs on the default one; with W LayoutLeft (X
// LayoutRight) it runs its native kernel, not cuBLAS (which the library points at the caller's
// stream). X, W and b are written by kernels on the caller's non-blocking stream just before the
// call, with no fence between: the library must order the gemm after them and its epilogue
// (on the caller's stream) after the gemm. Both instances launched before either is fenced.
TEST(Concurrency, NativeGemmOnTheCallersStream) {
  TwoInstances two;
  using LeftMatrix = Kokkos::View<float**, Kokkos::LayoutLeft, MemorySpace>;
  const std::int64_t M = 512 / debug_scale, K = 2048, N = 384;
  struct Inputs {
    P::Matrix X, Y;
    LeftMatrix W;
    P::Matrix b2d;  // b as row 0 of a 1 x N matrix, written by the same kind of kernel
    Inputs(std::int64_t M, std::int64_t K, std::int64_t N)
        : X("X", M, K), Y("Y", M, N), W("W", N, K), b2d("b", 1, N) {}
  };
  std::vector<Inputs> in;
  in.emplace_back(M, K, N);
  in.emplace_back(M, K, N);
  for (int round = 0; round < 3; ++round) {
    for (auto& i : in) {  // stale inputs would show as NaN
      Kokkos::deep_copy(i.X, std::numeric_limits<float>::quiet_NaN());
      Kokkos::deep_copy(i.W, std::numeric_limits<float>::quiet_NaN());
      Kokkos::deep_copy(i.b2d, std::numeric_limits<float>::quiet_NaN());
      Kokkos::deep_copy(i.Y, std::numeric_limits<float>::quiet_NaN());
    }
    Kokkos::fence();
    std::vector<RunInfo> infos;
    for (int s = 0; s < 2; ++s) {
      Inputs& i = in[std::size_t(s)];
      const std::uint64_t salt = 10 * round + 3 * s;
      slow_fill(two.spaces[std::size_t(s)], i.X, salt + 1, 1.0);
      slow_fill(two.spaces[std::size_t(s)], i.W, salt + 2, 1 / std::sqrt(double(K)));
      slow_fill(two.spaces[std::size_t(s)], i.b2d, salt + 3, 1 / std::sqrt(double(K)));
      infos.push_back(FusedLinear::linear_leaky_relu(two.spaces[std::size_t(s)], i.X, i.W,
                                                     Kokkos::subview(i.b2d, 0, Kokkos::ALL), i.Y,
                                                     2.f, 0.1f, Algorithm::Vendor));
    }
    for (auto& s : two.spaces) s.fence();
    for (int s = 0; s < 2; ++s) {
      Inputs& i = in[std::size_t(s)];
      EXPECT_EQ(infos[std::size_t(s)].gemm, Gemm::KokkosKernelsNative);
      const Reference ref(host_inputs(i.X, i.W, Kokkos::subview(i.b2d, 0, Kokkos::ALL)), 2, 0.1);
      EXPECT_TRUE(ref.check<float>(host_matrix(i.Y))) << "instance " << s << ", round " << round;
    }
  }
}

}  // namespace
