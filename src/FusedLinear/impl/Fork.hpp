// SPDX-License-Identifier: Apache-2.0
/// \file Fork.hpp
/// What a process forked after Kokkos started may still do. GNU OpenMP's thread pool does not
/// survive fork(): in the child only the forking thread exists, and the first parallel region
/// waits forever for the others; nor does a CUDA or HIP context. So in such a child the layer is
/// refused (std::runtime_error naming the function) on the host backends that run a thread pool
/// and on devices, rather than hang or abort; Kokkos::Serial computes there.
/// And the process's one registration with pthread_atfork: each piece of shared state (the plan
/// cache, the wisdom, an extension's tables) adds its actions to it, run in one fixed order.
#ifndef FUSED_LINEAR_IMPL_FORK_HPP
#define FUSED_LINEAR_IMPL_FORK_HPP

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

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

/// Where a piece of the process's shared state takes its turn around fork(). Prepare actions
/// run in this order, parent and child actions in the reverse one: locks are taken outer first
/// (an extension's calls enter the library; the plan cache's and the wisdom's locks are never
/// held together) and released inner first, so a fork never takes two locks in the opposite
/// order of a call.
enum class ForkSlot : unsigned {
  Extension,    ///< a program built on the library (the PyTorch bridge: its locks, its calls)
  PlanCache,    ///< the one-shot call's plans
  Wisdom,       ///< what Planning::Measure learned
  KokkosState,  ///< whether Kokkos had started its host threads
};

/// What a piece of shared state does around fork(); any may be null.
struct ForkActions {
  void (*prepare)() = nullptr;  ///< in the parent, before the fork (takes the lock)
  void (*parent)() = nullptr;   ///< in the parent, after it
  void (*child)() = nullptr;    ///< in the child, the forking thread alone
};

/// The one registration with pthread_atfork (process()), which runs every piece's actions in
/// ForkSlot order, whenever each piece registered. Its own lock is held from prepare to
/// parent/child, as glibc holds its list's lock: a piece registering meanwhile waits for the
/// fork to end, and never has a parent or child action run without its prepare.
class ForkRegistry {
 public:
  /// The process's registry, registered with pthread_atfork when first used (never destroyed:
  /// a fork during static destruction still runs it).
  static ForkRegistry& process() {
    static ForkRegistry* registry = [] {
      auto* r = new ForkRegistry();
#if defined(FUSED_LINEAR_IMPL_HAS_ATFORK)
      pthread_atfork([] { ForkRegistry::process().prepare(); },
                     [] { ForkRegistry::process().parent(); },
                     [] { ForkRegistry::process().child(); });
#endif
      return r;
    }();
    return *registry;
  }

  /// `actions` for `slot`; several in one slot prepare in the order they came.
  void add(ForkSlot slot, ForkActions actions) {
    std::lock_guard<std::mutex> lock(m_mutex);
    auto at = m_entries.begin();
    while (at != m_entries.end() && at->first <= slot) ++at;
    m_entries.insert(at, {slot, actions});
  }

  void prepare() {
    m_mutex.lock();  // released by parent() or child()
    for (const auto& e : m_entries)
      if (e.second.prepare) e.second.prepare();
  }
  void parent() {
    for (auto e = m_entries.rbegin(); e != m_entries.rend(); ++e)
      if (e->second.parent) e->second.parent();
    m_mutex.unlock();
  }
  /// The forking thread holds the lock in the child too: it alone exists there.
  void child() {
    for (auto e = m_entries.rbegin(); e != m_entries.rend(); ++e)
      if (e->second.child) e->second.child();
    m_mutex.unlock();
  }

 private:
  std::mutex m_mutex;
  std::vector<std::pair<ForkSlot, ForkActions>> m_entries;  // in ForkSlot order
};

/// Whether Kokkos had started when the process forked: the parent's state is sampled before it
/// forks and the child's flag set from it.
struct ForkHandlers {
  ForkHandlers() {
    ForkRegistry::process().add(ForkSlot::KokkosState, {&prepare, nullptr, &child});
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

/// Refuses (std::runtime_error naming `function`) a call in a child forked after Kokkos started,
/// where it would hang or abort: on a host thread pool (its parallel regions would never finish)
/// and on a device (the parent's CUDA or HIP context is unusable in the child, and Kokkos'
/// failing check aborts); nothing otherwise (one atomic load).
template <class ExecSpace>
void refuse_if_forked(const ExecSpace& exec, const char* function) {
  if (!forked_after_initialize().load(std::memory_order_relaxed)) return;
  if constexpr (runs_host_thread_pool<ExecSpace>()) {
    if (exec.concurrency() > 1)
      throw std::runtime_error(
          std::string(function) + ": " + ExecSpace::name() +
          " cannot run in this process: it was forked after Kokkos started its threads, which "
          "do not survive fork() (its parallel regions would never finish); use "
          "Kokkos::Serial in the child, fork before Kokkos::initialize, or start processes "
          "with spawn");
  } else if constexpr (!is_host_space<ExecSpace>()) {
    throw std::runtime_error(
        std::string(function) + ": " + ExecSpace::name() +
        " cannot run in this process: it was forked after Kokkos initialised the device, whose "
        "context does not survive fork(); compute on a host space in the child (nor free a "
        "managed device View, nor fence: Kokkos would enter the device), or start processes "
        "with spawn");
  }
  (void)exec, (void)function;
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
