// SPDX-License-Identifier: Apache-2.0
/// \file Portable.hpp
/// The engines of the portable paths, which run on every backend: no product (K = 0), fused
/// and fused_skinny (kernels/FusedKernel.hpp, kernels/SkinnyKernel.hpp). Their kernels take any
/// strides and alignment, decided per call: nothing to check at execute.
#ifndef FUSED_LINEAR_IMPL_ENGINES_PORTABLE_HPP
#define FUSED_LINEAR_IMPL_ENGINES_PORTABLE_HPP

#include <cstddef>

#include <Kokkos_Core.hpp>

#include "FusedLinear/Epilogue.hpp"
#include "FusedLinear/impl/engines/Engine.hpp"
#include "FusedLinear/impl/kernels/EpiloguePasses.hpp"
#include "FusedLinear/impl/kernels/FusedKernel.hpp"
#include "FusedLinear/impl/kernels/SkinnyKernel.hpp"

namespace FusedLinear {
namespace Impl {

/// No product (K = 0: Y = LeakyReLU(multiplier * b) on every row; or an empty output).
template <class ExecSpace, class XView, class WView, class BView, class YView>
class NoProductEngine : public EngineBase {
  using Scalar = typename YView::non_const_value_type;

 public:
  NoProductEngine() = default;
  explicit NoProductEngine(const EngineSetup<ExecSpace, XView, WView, BView, YView>& s)
      : m_ep(s.ep) {}
  void run(const ExecSpace& exec, const XView&, const WView&, const BView& b, const YView& Y,
           const char*) const {
    epilogue_pass<Pass::BiasOnly>("FusedLinear::bias_only", exec, Y, b, m_ep);
  }

 private:
  LeakyReLUEpilogue<Scalar> m_ep{1, 0};
};

/// fused: one tiled kernel, the epilogue applied before the single write of Y.
template <class ExecSpace, class XView, class WView, class BView, class YView>
class FusedEngine : public EngineBase {
  using Scalar = typename YView::non_const_value_type;

 public:
  explicit FusedEngine(const EngineSetup<ExecSpace, XView, WView, BView, YView>& s) : m_ep(s.ep) {}
  void run(const ExecSpace& exec, const XView& X, const WView& W, const BView& b, const YView& Y,
           const char*) const {
    run_fused(exec, X, W, b, Y, m_ep);
  }

 private:
  LeakyReLUEpilogue<Scalar> m_ep;
};

/// fused_skinny: its tiling for the plan's shape, and split K's partial sums and arrival
/// counters (zero between calls: each call numbers itself, see the kernel's fix-up).
template <class ExecSpace, class XView, class WView, class BView, class YView>
class SkinnyEngine : public EngineBase {
  using Scalar = typename YView::non_const_value_type;
  using Memory = typename YView::memory_space;

 public:
  explicit SkinnyEngine(const EngineSetup<ExecSpace, XView, WView, BView, YView>& s)
      : m_ep(s.ep),
        m_choice(choose_skinny<ExecSpace, Scalar>(s.exec, s.Y.extent(0), s.Y.extent(1),
                                                  s.X.extent(1), s.options.tuning.skinny_splits)) {
    if (m_choice.partials == 0) return;
    using W = Workspace<Memory>;
    m_arrivals_at = W::piece(std::size_t(m_choice.partials) * sizeof(Scalar));
    m_workspace = W(m_arrivals_at + W::piece(std::size_t(m_choice.tiles) * sizeof(Counter)),
                    s.function, Algorithm::FusedSkinny);
    using Counters = Kokkos::View<Counter*, Memory, Kokkos::MemoryUnmanaged>;
    Kokkos::deep_copy(s.exec, Counters(arrivals(), m_choice.tiles), Counter(0));
    s.exec.fence();
  }
  std::size_t workspace_bytes() const { return m_workspace.bytes(); }
  void run(const ExecSpace& exec, const XView& X, const WView& W, const BView& b, const YView& Y,
           const char*) const {
    run_skinny(exec, X, W, b, Y, m_ep, m_choice, m_workspace.template at<Scalar>(0), arrivals());
  }

 private:
  using Counter = unsigned long long;
  Counter* arrivals() const { return m_workspace.template at<Counter>(m_arrivals_at); }

  LeakyReLUEpilogue<Scalar> m_ep;
  SkinnyChoice m_choice;
  Workspace<Memory> m_workspace;
  std::size_t m_arrivals_at = 0;
};

}  // namespace Impl
}  // namespace FusedLinear

#endif
