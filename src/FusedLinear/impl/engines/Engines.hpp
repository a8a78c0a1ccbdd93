// SPDX-License-Identifier: Apache-2.0
/// \file Engines.hpp
/// The engines a plan can hold, in one list, and the one switch from a Decision to its engine.
/// Every engine is a type in every build: one whose backend is absent is UnavailableEngine,
/// which the dispatch never chooses (Facts say the backend cannot serve).
#ifndef FUSED_LINEAR_IMPL_ENGINES_ENGINES_HPP
#define FUSED_LINEAR_IMPL_ENGINES_ENGINES_HPP

#include <stdexcept>
#include <variant>

#include "FusedLinear/Types.hpp"
#include "FusedLinear/impl/Dispatch.hpp"
#include "FusedLinear/impl/engines/CublasLt.hpp"
#include "FusedLinear/impl/engines/Engine.hpp"
#include "FusedLinear/impl/engines/Portable.hpp"
#include "FusedLinear/impl/engines/Sm90.hpp"
#include "FusedLinear/impl/engines/Vendor.hpp"

namespace FusedLinear {
namespace Impl {

/// One engine per path, each with EngineBase's interface and run(exec, X, W, b, Y, function);
/// `Any` holds the plan's.
template <class ExecSpace, class XView, class WView, class BView, class YView>
struct Engines {
  using NoProduct = NoProductEngine<ExecSpace, XView, WView, BView, YView>;
  using Fused = FusedEngine<ExecSpace, XView, WView, BView, YView>;
  using Skinny = SkinnyEngine<ExecSpace, XView, WView, BView, YView>;
  using KokkosBlas = KokkosBlasEngine<ExecSpace, XView, WView, BView, YView>;
  using CublasLt = CublasLtEngine<ExecSpace, XView, WView, BView, YView>;
  using Sm90 = Sm90Engine<ExecSpace, XView, WView, BView, YView>;
  using Any = std::variant<NoProduct, Fused, Skinny, KokkosBlas, CublasLt, Sm90>;

  /// Sets up the engine of `s.decision`'s GEMM, its resources included, in `engine`.
  static void make(Any& engine, const EngineSetup<ExecSpace, XView, WView, BView, YView>& s) {
    switch (s.decision.gemm) {
      case Gemm::None: engine.template emplace<NoProduct>(s); return;
      case Gemm::FusedKernel: engine.template emplace<Fused>(s); return;
      case Gemm::SkinnyKernel: engine.template emplace<Skinny>(s); return;
      case Gemm::HostBlas:
      case Gemm::Cublas:
      case Gemm::Rocblas:
      case Gemm::OneMkl:
      case Gemm::KokkosKernelsNative: engine.template emplace<KokkosBlas>(s); return;
      case Gemm::CublasLt: engine.template emplace<CublasLt>(s); return;
      case Gemm::Sm90Tf32x3Kernel:
      case Gemm::Sm90SkinnyKernel: engine.template emplace<Sm90>(s); return;
    }
    throw std::logic_error("FusedLinear: a decision without an engine");
  }
};

}  // namespace Impl
}  // namespace FusedLinear

#endif
