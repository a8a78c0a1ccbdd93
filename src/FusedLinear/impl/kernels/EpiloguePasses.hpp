// SPDX-License-Identifier: Apache-2.0
/// \file EpiloguePasses.hpp
/// The element-wise passes of the vendor paths over Y, each a use of the shared epilogue.
#ifndef FUSED_LINEAR_IMPL_KERNELS_EPILOGUE_PASSES_HPP
#define FUSED_LINEAR_IMPL_KERNELS_EPILOGUE_PASSES_HPP

#include <cstdint>
#include <type_traits>

#include <Kokkos_Core.hpp>

#include "FusedLinear/Epilogue.hpp"
#include "FusedLinear/impl/kernels/Common.hpp"

namespace FusedLinear {
namespace Impl {

enum class Pass {
  BiasScaleActivation,  ///< after a plain product: the whole epilogue
  ScaleActivation,      ///< after a product that added the bias
  PrefillScaledBias,    ///< before a product with alpha = multiplier, beta = 1
  Activation,           ///< after that product
  BiasOnly,             ///< K = 0: the product is 0
};

template <Pass P>
constexpr bool pass_reads_y = !(P == Pass::PrefillScaledBias || P == Pass::BiasOnly);
template <Pass P>
constexpr bool pass_reads_bias = !(P == Pass::ScaleActivation || P == Pass::Activation);

/// What pass P makes of one element of Y: y its value (read where pass_reads_y), bias its
/// column's (read where pass_reads_bias).
template <Pass P, class Scalar>
KOKKOS_INLINE_FUNCTION Scalar pass_element(const LeakyReLUEpilogue<Scalar>& ep, Scalar y,
                                           Scalar bias) {
  switch (P) {
    case Pass::BiasScaleActivation: return ep(y, bias);
    case Pass::ScaleActivation: return ep.scaled_activation(y);
    case Pass::PrefillScaledBias: return ep.scaled_bias(bias);
    case Pass::Activation: return ep.activation(y);
    case Pass::BiasOnly: return ep(Scalar(0), bias);
  }
  return y;
}

template <class BView, class YView, Pass P>
struct EpiloguePass {
  using Scalar = typename YView::non_const_value_type;
  YView Y;
  BView b;
  LeakyReLUEpilogue<Scalar> ep;

  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t i, std::int64_t j) const {
    Y(i, j) = pass_element<P>(ep, pass_reads_y<P> ? Scalar(Y(i, j)) : Scalar(0),
                              pass_reads_bias<P> ? Scalar(b(j)) : Scalar(0));
  }
};

/// The pass on a GPU where Y's M N elements are one contiguous run from a 16-byte boundary
/// (LayoutRight or LayoutLeft): each thread loads and stores 16 bytes at once. The MDRange
/// pass moves one element per thread, at half the memory's speed on an H200.
template <class BView, class YView, Pass P>
struct PackedPass {
  using Scalar = typename YView::non_const_value_type;
  static constexpr int width = sizeof(Scalar) < 16 ? int(16 / sizeof(Scalar)) : 1;
  struct alignas(16) Pack {
    Scalar v[width];
  };
  static constexpr bool right =
      std::is_same<typename YView::array_layout, Kokkos::LayoutRight>::value;
  Scalar* y;
  BView b;
  LeakyReLUEpilogue<Scalar> ep;
  std::int64_t count;  // M N
  std::int64_t run;    // elements in one contiguous row (LayoutRight: N) or column (M)

  KOKKOS_INLINE_FUNCTION void operator()(std::int64_t t) const {
    std::int64_t p = t * width;
    // The column of element p, followed along the run: a row's ends wrap to column 0, a
    // column's end moves on to the next column.
    std::int64_t j = 0, in_run = 0;
    if (pass_reads_bias<P>) {
      j = right ? p % run : p / run;
      in_run = right ? j : p % run;
    }
    const auto bias = [&] { return pass_reads_bias<P> ? Scalar(b(j)) : Scalar(0); };
    const auto next = [&] {
      if (!pass_reads_bias<P>) return;
      if (++in_run == run) {
        in_run = 0;
        j = right ? 0 : j + 1;
      } else if (right) {
        j = in_run;
      }
    };
    if (p + width <= count) {
      Pack pack{};
      if (pass_reads_y<P>) pack = reinterpret_cast<const Pack*>(y)[t];
      for (int e = 0; e < width; ++e, next()) pack.v[e] = pass_element<P>(ep, pack.v[e], bias());
      reinterpret_cast<Pack*>(y)[t] = pack;
    } else {
      for (; p < count; ++p, next()) y[p] = pass_element<P>(ep, y[p], bias());
    }
  }
};

/// The pass on the host where Y's rows and b are contiguous: rows across threads, each row one
/// loop the compiler vectorises (the MDRange pass went element by element through Kokkos'
/// tiles).
template <class BView, class YView, Pass P>
struct HostRowsPass {
  using Scalar = typename YView::non_const_value_type;
  YView Y;
  BView b;
  LeakyReLUEpilogue<Scalar> ep;
  std::int64_t N;

  void operator()(std::int64_t i) const {
    Scalar* const y = Y.data() + i * std::int64_t(Y.stride(0));
    const Scalar* const bias = b.data();
    const LeakyReLUEpilogue<Scalar> e = ep;
    FUSED_LINEAR_SIMD
    for (std::int64_t j = 0; j < N; ++j)
      y[j] = pass_element<P>(e, pass_reads_y<P> ? y[j] : Scalar(0),
                             pass_reads_bias<P> ? bias[j] : Scalar(0));
  }
};

/// One pass over Y (see elementwise_policy for the thread mapping; HostRowsPass on the host
/// where it applies).
template <Pass P, class ExecSpace, class BView, class YView, class Scalar>
void epilogue_pass(const char* label, const ExecSpace& exec, const YView& Y, const BView& b,
                   const LeakyReLUEpilogue<Scalar>& ep) {
  using Layout = typename YView::array_layout;
  using Range = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>;
  const std::int64_t M = Y.extent(0), N = Y.extent(1);
  if constexpr (is_host_space<ExecSpace>()) {
    if ((N <= 1 || (Y.stride(1) == 1 && b.stride(0) == 1)) && M > 0) {
      Kokkos::parallel_for(label, Range(exec, 0, M), HostRowsPass<BView, YView, P>{Y, b, ep, N});
      return;
    }
  } else if constexpr (std::is_same<Layout, Kokkos::LayoutRight>::value ||
                       std::is_same<Layout, Kokkos::LayoutLeft>::value) {
    using Packed = PackedPass<BView, YView, P>;
    const std::int64_t count = M * N;
    if (count > 0 && std::int64_t(Y.span()) == count && Y.span_is_contiguous() &&
        reinterpret_cast<std::uintptr_t>(Y.data()) % 16 == 0) {
      const std::int64_t run = std::is_same<Layout, Kokkos::LayoutRight>::value ? N : M;
      Kokkos::parallel_for(label, Range(exec, 0, (count + Packed::width - 1) / Packed::width),
                           Packed{Y.data(), b, ep, count, run});
      return;
    }
  }
  Kokkos::parallel_for(label, elementwise_policy<ExecSpace, Layout>(exec, M, N),
                       EpiloguePass<BView, YView, P>{Y, b, ep});
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
