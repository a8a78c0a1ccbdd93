// SPDX-License-Identifier: Apache-2.0
/// \file Fork.hpp
/// What a process forked after Kokkos started may still do. GNU OpenMP's thread pool does not
/// survive fork(): in the child only the forking thread exists, and the first parallel region
/// waits forever for the others. Kokkos opens every parallel region with its whole pool, so in
/// such a child the layer is refused (std::runtime_error naming the function) on the host
/// backends that run a thread pool, rather than hang; Kokkos::Serial computes there.
#ifndef FUSED_LINEAR_IMPL_FORK_HPP
#define FUSED_LINEAR_IMPL_FORK_HPP

#include <atomic>
#include <stdexcept>
#include <string>
#include <type_traits>

#include <Kokkos_Core.hpp>

#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#define FUSED_LINEAR_IMPL_HAS_ATFORK 1
#endif

#include "FusedLinear/impl/kernels/Common.hpp"

namespace FusedLinear {
namespace Impl {

/// Set in a child forked while Kokkos was initialised (its host thread pool was started then).
inline std::atomic<bool>& forked_after_initialize() {
  static std::atomic<bool> forked{false};
  return forked;
}

/// Handlers run around every fork() of the process: the parent's state is sampled before it
/// forks and the child's flag set from it. Further handlers (the plan cache's and the
/// wisdom's locks) are registered by their owners.
struct ForkHandlers {
  ForkHandlers() {
#if defined(FUSED_LINEAR_IMPL_HAS_ATFORK)
    pthread_atfork(&prepare, nullptr, &child);
#endif
  }
  static std::atomic<bool>& initialized_at_fork() {
    static std::atomic<bool> initialized{false};
    return initialized;
  }
  static void prepare() { initialized_at_fork().store(Kokkos::is_initialized()); }
  static void child() {
    if (initialized_at_fork().load()) forked_after_initialize().store(true);
  }
};
/// Registered when the program starts (every translation unit that can call the layer includes
/// this header), so that a fork before the first call is seen too.
inline const ForkHandlers fork_handlers{};

/// Whether `ExecSpace` runs a pool of host threads (which a fork leaves behind).
template <class ExecSpace>
constexpr bool runs_host_thread_pool() {
#if defined(KOKKOS_ENABLE_SERIAL)
  if (std::is_same<ExecSpace, Kokkos::Serial>::value) return false;
#endif
  return is_host_space<ExecSpace>();
}

/// Refuses (std::runtime_error naming `function`) a call on a host thread pool in a child forked
/// after Kokkos started it, where the call would hang; nothing otherwise (one atomic load).
template <class ExecSpace>
void refuse_if_forked_pool(const ExecSpace& exec, const char* function) {
  if constexpr (runs_host_thread_pool<ExecSpace>()) {
    if (forked_after_initialize().load(std::memory_order_relaxed) && exec.concurrency() > 1)
      throw std::runtime_error(
          std::string(function) + ": " + ExecSpace::name() +
          " cannot run in this process: it was forked after Kokkos started its threads, which "
          "do not survive fork() (its parallel regions would never finish); use "
          "Kokkos::Serial in the child, fork before Kokkos::initialize, or start processes "
          "with spawn");
  }
  (void)exec, (void)function;
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
