// SPDX-License-Identifier: Apache-2.0
/// \file Engine.hpp
/// What every engine (one per path behind a plan, Engines.hpp) shares: how it is set up, its
/// workspace, the refusals it may raise at execute, and the default interface it overrides.
#ifndef FUSED_LINEAR_IMPL_ENGINES_ENGINE_HPP
#define FUSED_LINEAR_IMPL_ENGINES_ENGINE_HPP

#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <Kokkos_Core.hpp>

#include "FusedLinear/Epilogue.hpp"
#include "FusedLinear/Types.hpp"
#include "FusedLinear/impl/Dispatch.hpp"
#include "FusedLinear/impl/Errors.hpp"
#include "FusedLinear/impl/cuda/Device.hpp"

namespace FusedLinear {
namespace Impl {

/// Everything an engine is made from: the plan's instance, Views, decision and options.
template <class ExecSpace, class XView, class WView, class BView, class YView>
struct EngineSetup {
  using Scalar = typename YView::non_const_value_type;
  const ExecSpace& exec;
  const XView& X;
  const WView& W;
  const BView& b;
  const YView& Y;
  Decision decision;
  LeakyReLUEpilogue<Scalar> ep;
  const Options& options;
  /// vendor_lt (strict, tf32): cuBLASLt's ranked algorithms to hold (Planning::Measure times
  /// them); 1 otherwise.
  int lt_algorithms;
  const char* function;
};

/// Refuses (std::invalid_argument naming `function`, saying `why`) where `exec`'s stream is being
/// captured into a CUDA graph; nothing on other execution spaces.
template <class ExecSpace>
void refuse_if_capturing(const ExecSpace& exec, const char* function, const char* why) {
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value) {
    if (stream_is_capturing(exec.cuda_stream())) refuse(function, why);
  }
#endif
  (void)exec, (void)function, (void)why;
}

/// Makes the execution space's device current for a scope (CUDA; nothing elsewhere).
template <class ExecSpace>
class ExecDeviceGuard {
 public:
  ExecDeviceGuard(const ExecSpace& exec, const char* function) {
#if defined(KOKKOS_ENABLE_CUDA)
    if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value)
      m_guard.emplace(exec.cuda_device(), function);
#endif
    (void)exec, (void)function;
  }

 private:
#if defined(KOKKOS_ENABLE_CUDA)
  std::optional<CudaDeviceGuard> m_guard;
#endif
};

/// An execute-time refusal: the call's Views lack what the plan's path was set up for.
[[noreturn]] inline void refuse_other_views(const char* function, Algorithm a, const char* why) {
  refuse(function, std::string(to_string(a)) +
                       ": these Views differ from those the plan was made for (" + why +
                       "); make a plan for them");
}

/// An engine's device (or host) memory, allocated once, its start at a 256-byte boundary
/// (cuBLASLt's preferred alignment, TMA's 16 bytes, and Scalars' own). Moving it keeps the
/// allocation, so pointers into it stay valid.
template <class Memory>
class Workspace {
 public:
  Workspace() = default;
  /// Nothing for 0 bytes; std::runtime_error naming `function` and the path if it cannot be had.
  Workspace(std::size_t bytes, const char* function, Algorithm a) {
    if (bytes == 0) return;
    try {
      m_view = View(Kokkos::view_alloc(Kokkos::WithoutInitializing, "FusedLinear::workspace"),
                    bytes + 256);
    } catch (const std::exception& e) {
      throw std::runtime_error(std::string(function) + ": cannot allocate " +
                               std::to_string(bytes) + " bytes of workspace for " + to_string(a) +
                               " (" + e.what() + ")");
    }
    const auto start = reinterpret_cast<std::uintptr_t>(m_view.data());
    m_base = m_view.data() + ((start + 255) / 256 * 256 - start);
  }
  /// The aligned start (nullptr when empty), and `offset` bytes past it.
  unsigned char* base() const { return m_base; }
  template <class T>
  T* at(std::size_t offset) const {
    return reinterpret_cast<T*>(m_base + offset);
  }
  std::size_t bytes() const { return m_view.size(); }

  /// `n` bytes rounded up to whole 256-byte pieces, so that each piece starts aligned.
  static constexpr std::size_t piece(std::size_t n) { return (n + 255) / 256 * 256; }

 private:
  using View = Kokkos::View<unsigned char*, Memory>;
  View m_view;
  unsigned char* m_base = nullptr;
};

/// The interface every engine has, with the defaults most take: no workspace, nothing the
/// call's Views must have beyond their extents (Checks.hpp), one variant to time.
struct EngineBase {
  std::size_t workspace_bytes() const { return 0; }
  template <class... Args>
  void check(const Args&...) const {}
  int variants() const { return 1; }
  void select(int) {}
  /// The selected variant's configuration, as wisdom keeps it (cuBLASLt's); empty elsewhere.
  std::string variant_config() const { return {}; }
};

/// The engine of a backend absent from this build, or that cannot serve these Views: never
/// chosen by the dispatch (Facts say so), and a logic error if it were.
struct UnavailableEngine : EngineBase {
  template <class Setup>
  explicit UnavailableEngine(const Setup&, const char* what) {
    throw std::logic_error(std::string("FusedLinear: ") + what + " was chosen where it cannot run");
  }
  template <class... Args>
  void run(const Args&...) const {}
};

}  // namespace Impl
}  // namespace FusedLinear

#endif
