// SPDX-License-Identifier: Apache-2.0
// Every path of FusedLinear::linear_leaky_relu against the float64 host reference, typed over
// value type and layout, on the default execution space (host or CUDA, whichever Kokkos has).
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>

#include "TestHelpers.hpp"

namespace {

using namespace FusedLinearTest;
using FusedLinear::Algorithm;

template <class Scalar_, class Layout_>
struct Config {
  using Scalar = Scalar_;
  using Layout = Layout_;
};

template <class C>
class LinearLeakyReLU : public ::testing::Test {
 public:
  using Scalar = typename C::Scalar;
  using Layout = typename C::Layout;
  using P = Problem<Scalar, Layout>;

  /// Runs every algorithm on fresh inputs and checks each against the reference.
  void check_all(std::int64_t M, std::int64_t K, std::int64_t N, double multiplier, double slope,
                 std::uint64_t seed = 1234) {
    P p(M, K, N, seed);
    for (Algorithm a : all_algorithms) {
      p.poison();
      const auto info = FusedLinear::linear_leaky_relu(ExecSpace(), p.X, p.W, p.b, p.Y,
                                                       Scalar(multiplier), Scalar(slope), a);
      Kokkos::fence();
      EXPECT_NE(info.algorithm, Algorithm::Auto);
      EXPECT_TRUE(matches_reference(p, multiplier, slope, p.Y)) << describe(a, info);
    }
  }
};

using Configs = ::testing::Types<Config<float, Kokkos::LayoutRight>,
                                 Config<float, Kokkos::LayoutLeft>,
                                 Config<double, Kokkos::LayoutRight>,
                                 Config<double, Kokkos::LayoutLeft>>;
TYPED_TEST_SUITE(LinearLeakyReLU, Configs);

// Shapes: single elements, K = 1, skinny M = 1 and N = 1, odd sizes, sizes that are and are not
// multiples of every tile (fused: GPU 128x128x16, host 4x16; fused_skinny: 16 or 8 rows x 32
// columns x chunks of 256 or 128 k on GPUs, 16 x 4 x 64 on hosts) and of the 16-byte pack
// (4 floats, 2 doubles), and one larger odd shape as Kokkos Kernels' own gemm tests use.
TYPED_TEST(LinearLeakyReLU, EdgeAndOddShapes) {
  const std::int64_t shapes[][3] = {
      {1, 1, 1},     {1, 7, 1},     {3, 1, 5},     {1, 257, 300},  {300, 257, 1},
      {13, 15, 17},  {17, 16, 12},  {64, 64, 64},  {128, 128, 128}, {129, 136, 131},
      {127, 129, 255}, {256, 72, 260}, {12, 3071, 517}, {17, 513, 33}, {40, 1030, 65},
      {16, 256, 32}, {9, 130, 31}};
  for (const auto& s : shapes) this->check_all(s[0], s[1], s[2], 2.0, 0.1);
}

// fused_skinny with K split across teams (the GPU does it by itself where tiles are few): the
// last team of each tile adds the splits' partial sums and applies the epilogue. Forced here on
// every backend, over more splits than chunks, K not a multiple of a chunk, partial row blocks
// and column blocks; the result must be the reference's and the same bits on every run (the
// partial sums are added in split order whichever team finishes last).
TYPED_TEST(LinearLeakyReLU, SkinnySplitKMatchesAndIsReproducible) {
  using Scalar = typename TestFixture::Scalar;
  struct Force {
    explicit Force(int s) { FusedLinear::Impl::SkinnySplit::override_splits() = s; }
    ~Force() { FusedLinear::Impl::SkinnySplit::override_splits() = 0; }
  };
  const std::int64_t shapes[][3] = {{1, 1000, 70}, {17, 700, 33}, {40, 1030, 65}, {5, 129, 300}};
  for (int splits : {2, 3, 64}) {
    Force force(splits);
    for (const auto& s : shapes) {
      typename TestFixture::P p(s[0], s[1], s[2], 77 + splits);
      FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, Scalar(2), Scalar(0.1),
                                     Algorithm::FusedSkinny);
      Kokkos::fence();
      EXPECT_TRUE(matches_reference(p, 2.0, 0.1, p.Y)) << splits << " splits";
      auto first = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.Y);
      p.poison();
      FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, Scalar(2), Scalar(0.1),
                                     Algorithm::FusedSkinny);
      auto again = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.Y);
      for (std::int64_t i = 0; i < p.M; ++i)
        for (std::int64_t j = 0; j < p.N; ++j)
          ASSERT_EQ(std::memcmp(&first(i, j), &again(i, j), sizeof(Scalar)), 0)
              << splits << " splits, " << p.M << "x" << p.K << "x" << p.N << " at " << i << ","
              << j;
    }
  }
}

TYPED_TEST(LinearLeakyReLU, MultipliersAndSlopes) {
  const double multipliers[] = {2.0, 1.0, -1.5, 0.0};
  const double slopes[] = {0.1, 0.0, 1.0, 2.5, -0.5};
  for (double m : multipliers)
    for (double s : slopes) this->check_all(37, 45, 70, m, s, 99);
}

TYPED_TEST(LinearLeakyReLU, EmptyShapesAreValid) {
  using Scalar = typename TestFixture::Scalar;
  for (Algorithm a : all_algorithms) {
    // M = 0 and N = 0: nothing to write, no error.
    typename TestFixture::P m0(0, 8, 5, 1), n0(4, 8, 0, 1);
    EXPECT_NO_THROW(FusedLinear::linear_leaky_relu(m0.X, m0.W, m0.b, m0.Y, Scalar(2), Scalar(0.1), a));
    EXPECT_NO_THROW(FusedLinear::linear_leaky_relu(n0.X, n0.W, n0.b, n0.Y, Scalar(2), Scalar(0.1), a));
    // K = 0: Y = LeakyReLU(multiplier * b) on every row (Kokkos Kernels' gemm would leave Y as is).
    typename TestFixture::P k0(6, 0, 9, 1);
    const auto info = FusedLinear::linear_leaky_relu(k0.X, k0.W, k0.b, k0.Y, Scalar(-2), Scalar(0.1), a);
    Kokkos::fence();
    EXPECT_EQ(info.gemm, "none");
    EXPECT_TRUE(matches_reference(k0, -2.0, 0.1, k0.Y)) << describe(a, info);
  }
}

// NaN and +-Inf in X, W or b reach Y exactly as in PyTorch: a NaN in X(i, k) poisons row i; an
// infinite W(j, k) makes column j infinite (or NaN where signs meet); an infinite bias makes its
// column +-Inf before the activation.
TYPED_TEST(LinearLeakyReLU, NanAndInfPropagate) {
  using Scalar = typename TestFixture::Scalar;
  const Scalar inf = std::numeric_limits<Scalar>::infinity();
  for (Algorithm a : all_algorithms) {
    typename TestFixture::P p(20, 33, 24, 7);
    auto set = [](auto view, auto... index_and_value) {
      auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), view);
      auto t = std::make_tuple(index_and_value...);
      if constexpr (sizeof...(index_and_value) == 3)
        h(std::get<0>(t), std::get<1>(t)) = std::get<2>(t);
      else
        h(std::get<0>(t)) = std::get<1>(t);
      Kokkos::deep_copy(view, h);
    };
    set(p.X, 2, 5, std::numeric_limits<Scalar>::quiet_NaN());
    set(p.W, 7, 3, inf);
    set(p.W, 9, 0, -inf);
    set(p.b, 11, inf);
    set(p.b, 12, -inf);
    const auto info = FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, Scalar(2), Scalar(0.1), a);
    Kokkos::fence();
    EXPECT_TRUE(matches_reference(p, 2.0, 0.1, p.Y)) << describe(a, info);
    auto y = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.Y);
    EXPECT_TRUE(std::isnan(y(2, 0)));         // the NaN row
    EXPECT_EQ(y(5, 12), -inf * Scalar(0.1));  // -Inf bias, after the slope
  }
}

TYPED_TEST(LinearLeakyReLU, VendorAndFusedAgree) {
  using Scalar = typename TestFixture::Scalar;
  typename TestFixture::P p(70, 300, 90, 5);
  typename TestFixture::P::Matrix y_vendor("y_vendor", p.M, p.N);
  FusedLinear::linear_leaky_relu(p.X, p.W, p.b, y_vendor, Scalar(2), Scalar(0.1), Algorithm::Vendor);
  FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, Scalar(2), Scalar(0.1), Algorithm::Fused);
  auto v = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), y_vendor);
  auto f = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.Y);
  auto X = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.X);
  auto W = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.W);
  auto b = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), p.b);
  // Each is within the reference bound, so they are within twice that bound of each other.
  const double g = gamma<Scalar>(p.K + 3);
  for (std::int64_t i = 0; i < p.M; ++i)
    for (std::int64_t j = 0; j < p.N; ++j) {
      double magnitude = std::abs(double(b(j)));
      for (std::int64_t k = 0; k < p.K; ++k) magnitude += std::abs(double(X(i, k)) * W(j, k));
      ASSERT_LE(std::abs(double(v(i, j)) - f(i, j)), 2 * 2.0 * g * magnitude) << i << "," << j;
    }
}

TYPED_TEST(LinearLeakyReLU, ReportsWhatRan) {
  using Scalar = typename TestFixture::Scalar;
  using Layout = typename TestFixture::Layout;
  typename TestFixture::P p(8, 8, 8, 3);
  const auto fused = FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, Scalar(2), Scalar(0.1),
                                                    Algorithm::Fused);
  EXPECT_EQ(fused.algorithm, Algorithm::Fused);
  EXPECT_FALSE(fused.vendor_blas);

  const auto vendor = FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, Scalar(2), Scalar(0.1),
                                                     Algorithm::Vendor);
  EXPECT_EQ(vendor.algorithm, Algorithm::Vendor);
  // All three Views share one layout here: the BLAS TPL of this build serves them.
  EXPECT_TRUE(vendor.vendor_blas) << vendor.note;
  EXPECT_TRUE(vendor.note.empty()) << vendor.note;

  // Auto's documented rule: fused_skinny on host backends and for few rows (this one); on GPUs
  // fused_skinny for small layers, else cuBLASLt, the vendor BLAS or fused, in that order.
  constexpr bool host = FusedLinear::Impl::is_host_space<ExecSpace>();
  const auto automatic = FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, Scalar(2), Scalar(0.1));
  EXPECT_EQ(automatic.algorithm, Algorithm::FusedSkinny);
  using Matrix = typename TestFixture::P::Matrix;
  using Rule = FusedLinear::Impl::AutoRule;
  constexpr bool lt_serves = FusedLinear::Impl::cublaslt_serves<ExecSpace, Matrix, Matrix, Matrix>();
  const Algorithm large = FusedLinear::Impl::choose_algorithm<ExecSpace, Matrix, Matrix, Matrix>(
      Rule::small_rows + 1, 1024, 1024);
  EXPECT_EQ(large, host ? Algorithm::FusedSkinny : lt_serves ? Algorithm::VendorLt : Algorithm::Vendor);
  EXPECT_EQ((FusedLinear::Impl::choose_algorithm<ExecSpace, Matrix, Matrix, Matrix>(
                Rule::small_rows, 1024, 1024)),
            Algorithm::FusedSkinny);
  EXPECT_EQ((FusedLinear::Impl::choose_algorithm<ExecSpace, Matrix, Matrix, Matrix>(
                Rule::skinny_rows, 8192, 8192)),
            Algorithm::FusedSkinny);
  EXPECT_EQ((FusedLinear::Impl::choose_algorithm<ExecSpace, Matrix, Matrix, Matrix>(
                Rule::mid_rows, 2048, 2048)),
            Algorithm::FusedSkinny);
  EXPECT_EQ((FusedLinear::Impl::choose_algorithm<ExecSpace, Matrix, Matrix, Matrix>(
                Rule::mid_rows + 1, 2048, 2048)),
            large);

  // Mixed layouts: Kokkos Kernels would silently use its native gemm; we say so.
  using Other = std::conditional_t<std::is_same<Layout, Kokkos::LayoutRight>::value,
                                   Kokkos::LayoutLeft, Kokkos::LayoutRight>;
  Kokkos::View<Scalar**, Other, MemorySpace> W_other("W_other", p.N, p.K);
  Kokkos::deep_copy(W_other, p.W);
  p.poison();
  const auto mixed = FusedLinear::linear_leaky_relu(p.X, W_other, p.b, p.Y, Scalar(2), Scalar(0.1),
                                                    Algorithm::Vendor);
  Kokkos::fence();
  EXPECT_FALSE(mixed.vendor_blas);
  EXPECT_EQ(mixed.gemm, "Kokkos Kernels native gemm");
  EXPECT_NE(mixed.note.find("native"), std::string::npos);
  EXPECT_TRUE(matches_reference(p, 2.0, 0.1, p.Y));
  using OtherMatrix = decltype(W_other);
  EXPECT_EQ((FusedLinear::Impl::choose_algorithm<ExecSpace, Matrix, OtherMatrix, Matrix>(
                Rule::small_rows + 1, 1024, 1024)),
            host ? Algorithm::FusedSkinny : Algorithm::Fused);

  // vendor_lt where cuBLASLt cannot serve the Views (other backends, builds without it): vendor
  // runs, and the result says so.
  p.poison();
  const auto lt = FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, Scalar(2), Scalar(0.1),
                                                 Algorithm::VendorLt);
  Kokkos::fence();
  if (lt_serves) {
    EXPECT_EQ(lt.algorithm, Algorithm::VendorLt);
    EXPECT_EQ(lt.gemm, "cuBLASLt");
    EXPECT_TRUE(lt.note.empty()) << lt.note;
  } else {
    EXPECT_EQ(lt.algorithm, Algorithm::Vendor);
    EXPECT_NE(lt.note.find("cuBLASLt"), std::string::npos) << lt.note;
  }
  EXPECT_TRUE(matches_reference(p, 2.0, 0.1, p.Y));

  // vendor_prefill with multiplier 0 would let the BLAS skip the product: reported fallback.
  const auto zero = FusedLinear::linear_leaky_relu(p.X, p.W, p.b, p.Y, Scalar(0), Scalar(0.1),
                                                   Algorithm::VendorPrefill);
  EXPECT_EQ(zero.algorithm, Algorithm::Vendor);
  EXPECT_FALSE(zero.note.empty());
}

// ------------------------------------------------------------------ misuse: clear exceptions
class LinearLeakyReLUErrors : public ::testing::Test {
 protected:
  using P = Problem<float, Kokkos::LayoutRight>;
  P p{6, 5, 4, 11};

  template <class... Args>
  static std::string error_of(Args&&... args) {
    try {
      FusedLinear::linear_leaky_relu(std::forward<Args>(args)...);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no exception";
  }
  static bool names(const std::string& what, const std::string& problem) {
    return what.rfind("FusedLinear::linear_leaky_relu: ", 0) == 0 &&
           what.find(problem) != std::string::npos;
  }
};

TEST_F(LinearLeakyReLUErrors, MismatchedExtents) {
  P::Matrix W_bad_k("W", 4, 6), Y_bad_m("Y", 7, 4), Y_bad_n("Y", 6, 3);
  P::Vector b_bad("b", 5);
  for (Algorithm a : all_algorithms) {
    EXPECT_TRUE(names(error_of(p.X, W_bad_k, p.b, p.Y, 2.f, 0.1f, a), "extents do not match"));
    EXPECT_TRUE(names(error_of(p.X, p.W, b_bad, p.Y, 2.f, 0.1f, a), "extents do not match"));
    EXPECT_TRUE(names(error_of(p.X, p.W, p.b, Y_bad_m, 2.f, 0.1f, a), "extents do not match"));
    EXPECT_TRUE(names(error_of(p.X, p.W, p.b, Y_bad_n, 2.f, 0.1f, a), "X [6,5], W [4,5], b [4], Y [6,3]"));
  }
}

TEST_F(LinearLeakyReLUErrors, ExtentsPast32Bits) {
  // Unmanaged Views over a few floats with a 2^31 extent: refused before anything is touched.
  using Unmanaged = Kokkos::View<float**, Kokkos::LayoutRight, MemorySpace, Kokkos::MemoryUnmanaged>;
  const std::size_t huge = std::size_t(1) << 31;
  Unmanaged X_huge(p.X.data(), huge, 5), Y_huge(p.Y.data(), huge, 4);
  EXPECT_TRUE(names(error_of(X_huge, p.W, p.b, Y_huge, 2.f, 0.1f), "must each be below 2^31"));
}

TEST_F(LinearLeakyReLUErrors, ReferenceAllocationFailureIsAnException) {
  // The one place the library allocates: the float64 reference, here 2^24 x 2^24 doubles (2 PB).
  float x[4] = {}, w[4] = {}, bias[4] = {};
  const std::size_t huge = std::size_t(1) << 24;
  Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> X(x, huge, 1), W(w, huge, 1);
  Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryUnmanaged> b(bias, huge);
  auto expect_clear_error = [](auto&& call) {
    try {
      call();
      ADD_FAILURE() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("FusedLinear::reference_linear_leaky_relu: cannot allocate"),
                std::string::npos) << e.what();
    }
  };
  expect_clear_error([&] { FusedLinear::reference_linear_leaky_relu(X, W, b, 2.0, 0.1); });
  // 2^31 x 2^31 doubles: the byte count itself overflows 64 bits.
  const std::size_t past = std::size_t(1) << 31;
  decltype(X) X_past(x, past, 1), W_past(w, past, 1);
  decltype(b) b_past(bias, past);
  expect_clear_error([&] { FusedLinear::reference_linear_leaky_relu(X_past, W_past, b_past, 2.0, 0.1); });
}

TEST_F(LinearLeakyReLUErrors, UnallocatedViews) {
  P::Matrix none;
  P::Vector no_bias;
  EXPECT_TRUE(names(error_of(none, p.W, p.b, p.Y, 2.f, 0.1f), "X is not allocated"));
  EXPECT_TRUE(names(error_of(p.X, none, p.b, p.Y, 2.f, 0.1f), "W is not allocated"));
  EXPECT_TRUE(names(error_of(p.X, p.W, no_bias, p.Y, 2.f, 0.1f), "b is not allocated"));
  EXPECT_TRUE(names(error_of(p.X, p.W, p.b, none, 2.f, 0.1f), "Y is not allocated"));
}

TEST_F(LinearLeakyReLUErrors, OutputAliasingAnInput) {
  // Y as a 6x4 view on the memory of a 6x5 X, of a 4x5 W (first 16 elements of it as 4x4...),
  // and of b: each must be refused before anything is written.
  P::Matrix XY("XY", 6, 5);
  Kokkos::View<float**, Kokkos::LayoutRight, MemorySpace, Kokkos::MemoryUnmanaged> Y_on_X(XY.data(), 6, 4);
  EXPECT_TRUE(names(error_of(XY, p.W, p.b, Y_on_X, 2.f, 0.1f), "Y aliases X"));
  P::Matrix W_big("W", 4, 5);
  Kokkos::View<float**, Kokkos::LayoutRight, MemorySpace, Kokkos::MemoryUnmanaged> Y_on_W(W_big.data() + 1, 1, 4);
  P::Matrix X1("X1", 1, 5);
  EXPECT_TRUE(names(error_of(X1, W_big, p.b, Y_on_W, 2.f, 0.1f), "Y aliases W"));
  Kokkos::View<float**, Kokkos::LayoutRight, MemorySpace, Kokkos::MemoryUnmanaged> Y_on_b(p.b.data(), 1, 4);
  EXPECT_TRUE(names(error_of(X1, p.W, p.b, Y_on_b, 2.f, 0.1f), "Y aliases b"));
}

TEST_F(LinearLeakyReLUErrors, NonFiniteParameters) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (Algorithm a : all_algorithms) {
    EXPECT_TRUE(names(error_of(p.X, p.W, p.b, p.Y, nan, 0.1f, a), "multiplier must be finite"));
    EXPECT_TRUE(names(error_of(p.X, p.W, p.b, p.Y, -inf, 0.1f, a), "multiplier must be finite"));
    EXPECT_TRUE(names(error_of(p.X, p.W, p.b, p.Y, 2.f, nan, a), "negative_slope must be finite"));
    EXPECT_TRUE(names(error_of(p.X, p.W, p.b, p.Y, 2.f, inf, a), "negative_slope must be finite"));
  }
}

TEST(Algorithms, NamesRoundTrip) {
  for (Algorithm a : all_algorithms)
    EXPECT_EQ(FusedLinear::algorithm_from_string(FusedLinear::to_string(a)), a);
  EXPECT_THROW(FusedLinear::algorithm_from_string("cublas"), std::invalid_argument);
}

}  // namespace
