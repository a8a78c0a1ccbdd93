// SPDX-License-Identifier: Apache-2.0
/// \file PlanCache.hpp
/// The plans behind the one-shot linear_leaky_relu: made on first use for a (stream, shape,
/// Views, parameters, options) and reused, so that a call in a loop costs what Plan::execute
/// costs (no cuBLASLt heuristic query, no allocation). Bounded; released at Kokkos::finalize and
/// by FusedLinear::release_cached_plans(). Its parts are beside it: the key (PlanKey.hpp), the
/// instance and the end of its work (StreamIdentity.hpp), the plans CUDA graphs hold
/// (cuda/CapturedPlans.hpp).
#ifndef FUSED_LINEAR_IMPL_PLAN_CACHE_HPP
#define FUSED_LINEAR_IMPL_PLAN_CACHE_HPP

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <Kokkos_Core.hpp>

#include "FusedLinear/Types.hpp"
#include "FusedLinear/impl/Errors.hpp"
#include "FusedLinear/impl/Fork.hpp"
#include "FusedLinear/impl/PlanKey.hpp"
#include "FusedLinear/impl/StreamIdentity.hpp"
#include "FusedLinear/impl/cuda/CapturedPlans.hpp"
#include "FusedLinear/impl/cuda/Device.hpp"
#include "FusedLinear/impl/kernels/Common.hpp"

namespace FusedLinear {
namespace Impl {

/// One cached plan and the lock its calls take: a plan is not made for concurrent calls, and
/// several host threads may call on one stream.
struct CachedPlanBase {
  virtual ~CachedPlanBase() = default;
  std::mutex mutex;
  /// Taken by a CUDA graph capture: the graph replays its memory, so it is released only once
  /// the graph is gone. Set under the cache's lock.
  bool captured = false;
  int device = -1;  // CUDA: the device of the plan's memory
};
template <class PlanType, class ExecSpace>
struct CachedPlan : CachedPlanBase {
  template <class... Args>
  explicit CachedPlan(const ExecSpace& exec, Args&&... args)
      : plan(exec, std::forward<Args>(args)...), done(exec, plan.workspace_bytes() > 0) {
    device = device_of(exec);
  }
  ~CachedPlan() override {
    // Work enqueued with the plan's workspace may still run: wait for the last call's work
    // (only that: not the device), then let the memory go. A graph's replays are known to no
    // event, but the graph is gone (the cache releases a captured plan only then) and its
    // launches with it; the device is waited for all the same. Never throws: the cache
    // destroys plans only while no capture it knows of is in progress.
    wait_quietly(device, [this] {
      if (captured)
        Kokkos::fence();
      else
        done.wait();
    });
  }
  PlanType plan;
  CompletionMark<ExecSpace> done;
};

/// Something whose release waits for a safe moment: a plan of the cache, or a FusedLinear::Plan
/// destroyed while its stream was being captured.
struct Deferred {
  virtual ~Deferred() = default;
};
template <class T>
struct DeferredOwner : Deferred {
  explicit DeferredOwner(std::shared_ptr<T> p) : owned(std::move(p)) {}
  std::shared_ptr<T> owned;
};

template <class T>
struct FencedOwner : Deferred {
  FencedOwner(std::unique_ptr<T> p, int d) : owned(std::move(p)), device(d) {}
  ~FencedOwner() override {
    wait_quietly(device, [] { Kokkos::fence(); });
  }
  std::unique_ptr<T> owned;
  int device;
};

/// The plans of the one-shot call. Two kinds:
/// - eager plans, one per key (stream, Views, parameters, options), at most `capacity`, the
///   least recently used one dropped first;
/// - captured plans (CUDA): a call captured into a CUDA graph takes the eager plan of its key
///   out of the eager ones, so that no other graph and no later eager call shares its memory
///   (the next eager call makes another); further calls of that key in the same capture use
///   it again. The graph owns it through a CUDA user object, whose release (when the graph and
///   its executable graphs are destroyed and their launches done) marks the plan, freed at the
///   cache's next call or release. Captured plans count against no capacity.
/// Releases (evictions, release(), graphs destroyed) are deferred while a capture the cache
/// knows of is in progress (a capture a call was made in, or one on a stream that synchronises
/// with the legacy default stream): freeing device memory or waiting for the device would
/// invalidate it, or throw from a destructor.
class PlanCache {
 public:
  /// The process's cache (never destroyed: it empties itself at Kokkos::finalize, before the
  /// memory it holds would become invalid).
  static PlanCache& instance() {
    static PlanCache* cache = new PlanCache();
    return *cache;
  }

  /// The eager plan for `key`, made by `make()` (a std::unique_ptr<CachedPlan<...>>) on first
  /// use, outside the cache's lock (a plan's making queries cuBLASLt and allocates: other
  /// threads' calls go on meanwhile); the least recently used one goes when the cache is full.
  template <class Cached, class Make>
  std::shared_ptr<Cached> get(const PlanKey& key, Make&& make) {
    collect();
    if (auto found = find(key)) return std::static_pointer_cast<Cached>(found);
    std::shared_ptr<Cached> made(make());
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      for (const auto& entry : m_entries)  // made meanwhile by another thread: use that one
        if (entry.first == key) return std::static_pointer_cast<Cached>(entry.second);
      insert(key, made);
    }
    collect();  // the plan evicted, if any
    return made;
  }

  /// Drops every eager plan, and the captured plans whose graphs are gone; their memory is
  /// freed once calls in flight on other threads return, and not before a capture the cache
  /// knows of has ended (the next call or release then frees it). `finalizing` (Kokkos::finalize
  /// begins): every plan, captured ones included (destroy the graphs first), at once.
  void release(bool finalizing = false) {
    if (finalizing) {
      std::vector<std::unique_ptr<Deferred>> gone;
      {
        std::lock_guard<std::mutex> lock(m_mutex);
        for (auto& e : m_entries)
          gone.push_back(std::make_unique<DeferredOwner<CachedPlanBase>>(std::move(e.second)));
        for (auto& h : m_captured)
          gone.push_back(std::make_unique<DeferredOwner<CachedPlanBase>>(std::move(h.plan)));
        for (auto& d : m_doomed) gone.push_back(std::move(d));
        m_entries.clear(), m_captured.clear(), m_doomed.clear();
        note_pending();
        m_captures.clear();
        m_hook_registered = false;
      }
      return;  // `gone` is destroyed here, outside the lock
    }
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      for (auto& e : m_entries)
        m_doomed.push_back(std::make_unique<DeferredOwner<CachedPlanBase>>(std::move(e.second)));
      m_entries.clear();
      m_collect = true;
      note_pending();
    }
    collect(true);
  }

  /// Takes ownership of a FusedLinear::Plan's implementation whose destructor could not wait
  /// for its stream (the stream is being captured), and destroys it after a device-wide fence
  /// at the next moment no capture the cache knows of is in progress.
  template <class T>
  void defer_plan(std::unique_ptr<T> owned, int device) {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_doomed.push_back(std::make_unique<FencedOwner<T>>(std::move(owned), device));
    m_collect = true;
    note_pending();
  }

  /// Eager plans held.
  std::size_t size() {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_entries.size();
  }
  /// Captured plans held (their graphs alive, or their release not yet done).
  std::size_t captured_size() {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_captured.size();
  }
  /// Plans released but not yet destroyed (a capture was in progress).
  std::size_t deferred_size() {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_doomed.size();
  }

#if defined(KOKKOS_ENABLE_CUDA)
  /// The plan of `key` for the capture `capture` of `stream`: the one this capture took before,
  /// or the eager plan of `key`, taken out of the eager ones and handed to the capture's graph.
  /// Refuses (std::invalid_argument naming `function`) where there is neither: a plan cannot be
  /// made during a capture (it allocates).
  template <class Cached>
  std::shared_ptr<Cached> take_for_capture(const PlanKey& key, cudaStream_t stream,
                                           const StreamCapture& capture, const char* function) {
    std::lock_guard<std::mutex> lock(m_mutex);
    for (const Captured& c : m_captured)
      if (c.capture == capture.id && c.key == key && !c.released->load())
        return std::static_pointer_cast<Cached>(c.plan);
    std::size_t i = 0;
    while (i < m_entries.size() && !(m_entries[i].first == key)) ++i;
    if (i == m_entries.size())
      refuse(function,
             "no plan is cached for these arguments on this stream, and none can be made while "
             "the stream is being captured into a CUDA graph (it allocates): each graph takes a "
             "plan of its own, made by a call outside the capture; make one call with these "
             "arguments on this stream before each capture");
    if (capture.graph == nullptr)
      refuse(function,
             "the stream's capture into a CUDA graph was invalidated, or its state cannot be "
             "queried");
    // The graph's reference: its release only sets the flag; the cache frees the plan later.
    std::shared_ptr<std::atomic<bool>> released = hand_to_graph(capture.graph, function);
    Captured c{capture.id, key, std::move(m_entries[i].second), released};
    c.plan->captured = true;
    m_entries.erase(m_entries.begin() + std::ptrdiff_t(i));
    m_captured.push_back(c);
    note_pending();
    m_captures.add(stream, capture.id, c.plan->device);
    return std::static_pointer_cast<Cached>(c.plan);
  }

  /// A call outside any capture on `stream`: a capture the cache knew on it has ended, and is
  /// forgotten (its stream is never queried again; it may be destroyed).
  void not_capturing(cudaStream_t stream) {
    if (!m_captures.any()) return;
    std::lock_guard<std::mutex> lock(m_mutex);
    m_captures.forget(stream);
  }
#endif

  static constexpr std::size_t capacity = 32;  // eager plans

 private:
  std::shared_ptr<CachedPlanBase> find(const PlanKey& key) {
    std::lock_guard<std::mutex> lock(m_mutex);
    for (std::size_t i = 0; i < m_entries.size(); ++i) {
      if (m_entries[i].first == key) {
        std::rotate(m_entries.begin(), m_entries.begin() + i, m_entries.begin() + i + 1);
        return m_entries.front().second;
      }
    }
    return nullptr;
  }

  /// Under the lock, after a change: whether collect() may have work.
  void note_pending() {
    m_pending.store(!m_doomed.empty() || !m_captured.empty(), std::memory_order_release);
  }

  /// Under the lock: a new eager plan, first in line; the least recently used one goes (to be
  /// destroyed by collect) when the cache is full.
  void insert(const PlanKey& key, std::shared_ptr<CachedPlanBase> made) {
    if (!m_hook_registered) {
      // Once per Kokkos initialisation: the hook runs at the start of Kokkos::finalize and is
      // registered again at the next initialisation's first call.
      Kokkos::push_finalize_hook([] { PlanCache::instance().release(true); });
      m_hook_registered = true;
    }
    if (m_entries.size() >= capacity) {
      m_doomed.push_back(
          std::make_unique<DeferredOwner<CachedPlanBase>>(std::move(m_entries.back().second)));
      m_entries.pop_back();
      m_collect = true;
      note_pending();
    }
    if (made->device >= 0 && made->device < 64) m_devices |= std::uint64_t(1) << made->device;
    m_entries.insert(m_entries.begin(), {key, std::move(made)});
  }

  /// Destroys what was released (plans dropped, graphs gone), unless a capture the cache knows
  /// of is in progress; cheap when there is nothing to do.
  /// `forget_ended`: look up the captures it knows of even with nothing to free, forgetting
  /// those that ended (release(): before their streams may be destroyed).
  void collect(bool forget_ended = false) {
    if (!forget_ended && !m_pending.load(std::memory_order_acquire)) return;  // the usual case
    std::vector<std::unique_ptr<Deferred>> gone;
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      bool graphs_gone = false;
      for (const Captured& c : m_captured) graphs_gone |= c.released->load();
      if (!m_collect && !graphs_gone) {
        if (forget_ended) (void)capture_in_progress();
        return;
      }
      if (capture_in_progress()) return;
      for (std::size_t i = 0; i < m_captured.size();) {
        if (m_captured[i].released->load()) {
          gone.push_back(
              std::make_unique<DeferredOwner<CachedPlanBase>>(std::move(m_captured[i].plan)));
          m_captured.erase(m_captured.begin() + std::ptrdiff_t(i));
        } else {
          ++i;
        }
      }
      for (auto& d : m_doomed) gone.push_back(std::move(d));
      m_doomed.clear();
      m_collect = false;
      note_pending();
    }
#if defined(KOKKOS_ENABLE_CUDA)
    RelaxedCaptureMode relaxed;  // a capture the cache cannot see: freeing is not refused
#endif
    gone.clear();
  }

  /// Under the lock: whether a capture the cache knows of is still in progress (those that
  /// ended are forgotten).
  bool capture_in_progress() { return m_captures.in_progress(m_devices); }

  struct Captured {
    unsigned long long capture;
    PlanKey key;
    std::shared_ptr<CachedPlanBase> plan;
    std::shared_ptr<std::atomic<bool>> released;  // set when the graph lets the plan go
  };

  PlanCache() {
    ForkRegistry::process().add(ForkSlot::PlanCache, {&fork_prepare, &fork_parent, &fork_child});
  }

  /// fork(): the cache's lock is held across it (no other thread's half-done change is copied),
  /// and in the child every plan is abandoned (another thread may have held its lock, and a
  /// device's memory is not the child's).
  static void fork_prepare() { PlanCache::instance().m_mutex.lock(); }
  static void fork_parent() { PlanCache::instance().m_mutex.unlock(); }
  static void fork_child() {
    PlanCache& c = PlanCache::instance();
    auto* abandoned = new std::vector<std::shared_ptr<CachedPlanBase>>();
    for (auto& e : c.m_entries) abandoned->push_back(std::move(e.second));
    for (auto& h : c.m_captured) abandoned->push_back(std::move(h.plan));
    c.m_entries.clear(), c.m_captured.clear();
    for (auto& d : c.m_doomed) (void)d.release();
    c.m_doomed.clear();
    c.note_pending();
    c.m_captures.clear();
    c.m_mutex.unlock();
  }

  std::mutex m_mutex;
  std::vector<std::pair<PlanKey, std::shared_ptr<CachedPlanBase>>> m_entries;
  std::vector<Captured> m_captured;
  std::vector<std::unique_ptr<Deferred>> m_doomed;  // released, destroyed by collect()
  bool m_collect = false;                           // m_doomed has entries
  std::atomic<bool> m_pending{false};  // plans doomed or captured: collect() has work to check
  KnownCaptures m_captures;            // CUDA: captures plans were handed to
  std::uint64_t m_devices = 0;         // CUDA devices plans were made on
  bool m_hook_registered = false;
};

}  // namespace Impl
}  // namespace FusedLinear

#endif
