// SPDX-License-Identifier: Apache-2.0
/// \file Sm90.hpp
/// The engine of the library's own Hopper kernels (fused_sm90, skinny_sm90; cuda/Sm90.hpp),
/// and what they can take. Built with FusedLinear_ENABLE_SM90A on CUDA, for float Views;
/// elsewhere the engine is UnavailableEngine. docs/design/sm90-kernels.md.
#ifndef FUSED_LINEAR_IMPL_ENGINES_SM90_HPP
#define FUSED_LINEAR_IMPL_ENGINES_SM90_HPP

#include <cstddef>
#include <type_traits>

#include <Kokkos_Core.hpp>

#include "FusedLinear/Epilogue.hpp"
#include "FusedLinear/Types.hpp"
#include "FusedLinear/impl/Facts.hpp"
#include "FusedLinear/impl/cuda/Device.hpp"
#include "FusedLinear/impl/cuda/Sm90Adapter.hpp"  // FUSED_LINEAR_SM90A where it is built
#include "FusedLinear/impl/engines/Engine.hpp"

namespace FusedLinear {
namespace Impl {

/// Whether the sm_90a kernels are built and can run on ExecSpace with these Views' value type.
template <class ExecSpace, class Scalar>
constexpr bool sm90_serves() {
#if defined(FUSED_LINEAR_SM90A)
  return std::is_same<ExecSpace, Kokkos::Cuda>::value && std::is_same<Scalar, float>::value;
#else
  return false;
#endif
}

/// Facts::sm90_tf32x3 and sm90_skinny: why each kernel cannot take these Views on `exec`'s
/// device, nullptr where it can.
template <class ExecSpace, class XView, class WView, class BView, class YView>
void sm90_facts(const ExecSpace& exec, const XView& X, const WView& W, const BView& b,
                const YView& Y, Facts& f) {
#if defined(FUSED_LINEAR_SM90A)
  if constexpr (sm90_serves<ExecSpace, typename YView::non_const_value_type>()) {
    const char* views = sm90_layouts_refusal(X, W, b, Y);
    const Sm90::Device device = sm90_device(exec);
    const LeakyReLUEpilogue<float> ep{1, 0};
    f.sm90_tf32x3 = views ? views : Sm90::tf32x3_refusal(device, sm90_problem(X, W, b, Y, ep));
    f.sm90_skinny = views ? views : Sm90::skinny_refusal(device, sm90_problem(X, W, b, Y, ep));
  } else {
    f.sm90_tf32x3 = f.sm90_skinny = "runs on CUDA with float Views only";
  }
#else
  f.sm90_tf32x3 = f.sm90_skinny =
      "is not in this build (a CUDA build with cuBLASLt and FusedLinear_ENABLE_SM90A)";
#endif
  (void)exec, (void)X, (void)W, (void)b, (void)Y;
}

template <class ExecSpace, class XView, class WView, class BView, class YView,
          bool = sm90_serves<ExecSpace, typename YView::non_const_value_type>()>
class Sm90Engine : public UnavailableEngine {
 public:
  template <class Setup>
  explicit Sm90Engine(const Setup& s) : UnavailableEngine(s, "an sm_90a kernel") {}
};

#if defined(FUSED_LINEAR_SM90A)
/// The device as the kernels see it, the kernel's choice and its workspace. The kernels take
/// what they were planned for (rows contiguous, alignment within the workspace planned):
/// execute checks the call's Views against that.
template <class ExecSpace, class XView, class WView, class BView, class YView>
class Sm90Engine<ExecSpace, XView, WView, BView, YView, true> : public EngineBase {
  using Memory = typename YView::memory_space;

 public:
  explicit Sm90Engine(const EngineSetup<ExecSpace, XView, WView, BView, YView>& s)
      : m_ep(s.ep),
        m_algorithm(s.decision.algorithm),
        m_device(sm90_device(s.exec)),
        m_choice(s.options.tuning.sm90_tf32x3_kernel),
        m_splits(s.options.tuning.skinny_splits) {
    if (!tf32x3()) Sm90::skinny_count_clusters(m_device);
    m_bytes = needs(sm90_problem(s.X, s.W, s.b, s.Y, m_ep));
    m_workspace = Workspace<Memory>(Workspace<Memory>::piece(m_bytes), s.function, m_algorithm);
  }

  std::size_t workspace_bytes() const { return m_workspace.bytes(); }
  void check(const ExecSpace&, const XView& X, const WView& W, const BView& b, const YView& Y,
             const char* function) const {
    const Sm90::Problem p = sm90_problem(X, W, b, Y, m_ep);
    const char* why = sm90_layouts_refusal(X, W, b, Y);
    if (!why)
      why = tf32x3() ? Sm90::tf32x3_refusal(m_device, p) : Sm90::skinny_refusal(m_device, p);
    if (!why && needs(p) > m_bytes) why = "their alignment needs more workspace";
    if (why) refuse_other_views(function, m_algorithm, why);
  }
  void run(const ExecSpace& exec, const XView& X, const WView& W, const BView& b, const YView& Y,
           const char* function) const {
    const Sm90::Problem p = sm90_problem(X, W, b, Y, m_ep);
    const cudaStream_t stream = exec.cuda_stream();
    void* workspace = m_bytes > 0 ? m_workspace.base() : nullptr;
    cuda_check(
        tf32x3()
            ? Sm90::tf32x3_linear_leaky_relu(stream, m_device, p, workspace, m_bytes, m_choice)
            : Sm90::skinny_linear_leaky_relu(stream, m_device, p, workspace, m_bytes, m_splits),
        function, tf32x3() ? "run the sm_90a 3xTF32 kernel" : "run the sm_90a few-rows kernel");
  }

 private:
  bool tf32x3() const { return m_algorithm == Algorithm::FusedSm90; }
  std::size_t needs(const Sm90::Problem& p) const {
    return tf32x3() ? Sm90::tf32x3_workspace_bytes(p) : Sm90::skinny_workspace_bytes(m_device, p);
  }

  LeakyReLUEpilogue<float> m_ep;
  Algorithm m_algorithm;
  Sm90::Device m_device;
  int m_choice, m_splits;
  std::size_t m_bytes = 0;
  Workspace<Memory> m_workspace;
};
#endif

}  // namespace Impl
}  // namespace FusedLinear

#endif
