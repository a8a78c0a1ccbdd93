// SPDX-License-Identifier: Apache-2.0
/// \file PlanCache.hpp
/// The plans behind the one-shot linear_leaky_relu: made on first use for a (device, shape,
/// Views, parameters, options) and reused on any stream, so that a call in a loop costs what
/// Plan::execute costs (no cuBLASLt heuristic query, no allocation). Bounded; released at
/// Kokkos::finalize and by FusedLinear::release_cached_plans(). Its parts are beside it: the key
/// (PlanKey.hpp), the scope and the end of a plan's last use (StreamIdentity.hpp), the graphs'
/// references and the captures in progress (cuda/CapturedPlans.hpp).
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
/// several host threads may call on one stream, or on several.
struct CachedPlanBase {
  virtual ~CachedPlanBase() = default;
  std::mutex mutex;
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
    // Work enqueued with the plan's workspace may still run: wait for its last use (only that:
    // not the device), then let the memory go. Graphs that replayed it are gone (the cache
    // drops a plan only then), their launches done. Never throws.
    wait_quietly(device, [this] { done.wait(); });
  }
  PlanType plan;
  CompletionMark<ExecSpace> done;
};

/// Something whose destruction waits for a safe moment: no capture the cache knows of in
/// progress (destroying frees device memory, which would invalidate it).
struct Deferred {
  virtual ~Deferred() = default;
};
template <class T>
struct DeferredOwner : Deferred {
  explicit DeferredOwner(std::shared_ptr<T> p) : owned(std::move(p)) {}
  std::shared_ptr<T> owned;
};
/// What is used on an instance (a FusedLinear::Plan's implementation, a Kokkos instance an
/// extension drops), destroyed once that instance's work is done.
template <class T, class ExecSpace>
struct InstanceOwner : Deferred {
  InstanceOwner(std::unique_ptr<T> p, const ExecSpace& e) : owned(std::move(p)), exec(e) {}
  ~InstanceOwner() override {
    wait_quietly(device_of(exec), [this] { exec.fence(); });
  }
  std::unique_ptr<T> owned;
  ExecSpace exec;
};

/// The plans of the one-shot call, one per key (device, Views, parameters, options), at most
/// limit(), the least recently used one dropped first. Calls on any stream share a plan, each
/// ordered after its last use (CompletionMark). A call captured into a CUDA graph uses the
/// plan of its key too: the graph holds it through a CUDA user object, whose release (the graph
/// and its executable graphs destroyed, their launches done) is marked and seen at the cache's
/// next call or release; a plan dropped from the cache lives on while graphs hold it.
/// Destructions (plans dropped, graphs gone, FusedLinear::Plans released while their stream was
/// captured) wait while a capture the cache knows of is in progress (a capture a call was made
/// in, a capture of a released Plan's stream, or one on a stream that synchronises with the
/// legacy default stream), and are then done with this thread's capture mode relaxed.
class PlanCache {
 public:
  /// The process's cache (never destroyed: it empties itself at Kokkos::finalize, before the
  /// memory it holds would become invalid).
  static PlanCache& instance() {
    static PlanCache* cache = new PlanCache();
    return *cache;
  }

  /// The plan for `key`, made by `make()` (a std::unique_ptr<CachedPlan<...>>) on first use,
  /// outside the cache's lock (a plan's making queries cuBLASLt and allocates: other threads'
  /// calls go on meanwhile); the least recently used one goes when the cache is full.
  template <class Cached, class Make>
  std::shared_ptr<Cached> get(const PlanKey& key, Make&& make) {
    collect();
    if (auto found = find(key)) return std::static_pointer_cast<Cached>(found);
    std::shared_ptr<Cached> made(make());
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      for (const auto& entry : m_entries) {
        if (entry.first == key) {  // made meanwhile by another thread: that one, ours later
          m_doomed.push_back(std::make_unique<DeferredOwner<Cached>>(std::move(made)));
          note_pending(true);
          return std::static_pointer_cast<Cached>(entry.second);
        }
      }
      insert(key, made);
    }
    collect();  // the plan evicted, if any
    return made;
  }

  /// Drops every plan (those graphs hold live on); their memory is freed once calls in flight
  /// on other threads return, and not before a capture the cache knows of has ended (the next
  /// call or release then frees it). `finalizing` (Kokkos::finalize begins): every plan, those
  /// graphs hold included (destroy the graphs first), at once.
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
        note_pending(false);
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
      note_pending(true);
    }
    collect(true);
  }

  /// Destroys `owned` (a FusedLinear::Plan's implementation, a Kokkos instance) once `exec`'s
  /// work is done and no capture the cache knows of is in progress; where `exec`'s stream is
  /// being captured, that capture is one.
  template <class T, class ExecSpace>
  void destroy_when_safe(std::unique_ptr<T> owned, const ExecSpace& exec) noexcept {
    try {
      std::lock_guard<std::mutex> lock(m_mutex);
#if defined(KOKKOS_ENABLE_CUDA)
      if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value) {
        const CudaDeviceGuardNoThrow device(exec.cuda_device());
        const StreamCapture capture = stream_capture(exec.cuda_stream());
        if (capture.capturing) m_captures.add(exec.cuda_stream(), capture.id, exec.cuda_device());
      }
#endif
      m_doomed.push_back(std::make_unique<InstanceOwner<T, ExecSpace>>(std::move(owned), exec));
      note_pending(true);
    } catch (...) {  // no memory for the bookkeeping: the plan is abandoned rather than thrown
      (void)owned.release();
      return;
    }
    collect();
  }

  /// Plans held (graphs may hold more).
  std::size_t size() {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_entries.size();
  }
  /// References graphs hold (one per capture and plan), released or not yet seen released.
  std::size_t captured_size() {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_captured.size();
  }
  /// Plans released but not yet destroyed (a capture was in progress).
  std::size_t deferred_size() {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_doomed.size();
  }
  /// The most plans held; 64 unless set_limit changed it.
  std::size_t limit() {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_limit;
  }
  /// The most plans held from now on (>= 1); the least recently used ones beyond it are dropped.
  void set_limit(std::size_t plans) {
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_limit = plans;
      while (m_entries.size() > m_limit) evict_last();
    }
    collect();
  }

#if defined(KOKKOS_ENABLE_CUDA)
  /// The plan of `key` for the capture `capture` of `stream`, handed to the capture's graph
  /// (once per capture): the cached one, or one a graph holds. Refuses (std::invalid_argument
  /// naming `function`) where there is none: a plan cannot be made during a capture (it
  /// allocates).
  template <class Cached>
  std::shared_ptr<Cached> for_capture(const PlanKey& key, cudaStream_t stream,
                                      const StreamCapture& capture, const char* function) {
    std::lock_guard<std::mutex> lock(m_mutex);
    std::shared_ptr<CachedPlanBase> plan;
    for (std::size_t i = 0; i < m_entries.size() && !plan; ++i) {
      if (m_entries[i].first == key) {
        std::rotate(m_entries.begin(), m_entries.begin() + i, m_entries.begin() + i + 1);
        plan = m_entries.front().second;
      }
    }
    for (std::size_t i = 0; i < m_captured.size() && !plan; ++i)
      if (m_captured[i].key == key && !m_captured[i].released->load()) plan = m_captured[i].plan;
    if (!plan)
      refuse(function,
             "no plan is cached for these arguments, and none can be made while the stream is "
             "being captured into a CUDA graph (it allocates): make one call with these "
             "arguments on this device (on any stream) before the capture");
    for (const Captured& c : m_captured)
      if (c.capture == capture.id && c.plan == plan) return std::static_pointer_cast<Cached>(plan);
    if (capture.graph == nullptr)
      refuse(function,
             "the stream's capture into a CUDA graph was invalidated, or its state cannot be "
             "queried");
    // The graph's reference: its release only sets the flag; the cache drops the plan later.
    m_captured.push_back({capture.id, key, plan, hand_to_graph(capture.graph, function)});
    note_pending(m_collect);
    m_captures.add(stream, capture.id, plan->device);
    return std::static_pointer_cast<Cached>(plan);
  }

  /// A call outside any capture on `stream`: a capture the cache knew on it has ended, and is
  /// forgotten (its stream is never queried again; it may be destroyed).
  void not_capturing(cudaStream_t stream) {
    if (!m_captures.any()) return;
    std::lock_guard<std::mutex> lock(m_mutex);
    m_captures.forget(stream);
  }
#endif

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

  /// Under the lock, after a change: whether m_doomed has entries (`collect`), and so whether
  /// collect() may have work.
  void note_pending(bool collect) {
    m_collect = collect;
    m_pending.store(collect || !m_captured.empty(), std::memory_order_release);
  }

  /// Under the lock: the least recently used plan goes, destroyed by collect().
  void evict_last() {
    m_doomed.push_back(
        std::make_unique<DeferredOwner<CachedPlanBase>>(std::move(m_entries.back().second)));
    m_entries.pop_back();
    note_pending(true);
  }

  /// Under the lock: a new plan, first in line; the least recently used one goes when the cache
  /// is full.
  void insert(const PlanKey& key, std::shared_ptr<CachedPlanBase> made) {
    if (!m_hook_registered) {
      // Once per Kokkos initialisation: the hook runs at the start of Kokkos::finalize and is
      // registered again at the next initialisation's first call.
      Kokkos::push_finalize_hook([] { PlanCache::instance().release(true); });
      m_hook_registered = true;
    }
    while (m_entries.size() >= m_limit) evict_last();
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
      note_pending(false);
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
  /// device's memory is not the child's) and no device is known.
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
    c.note_pending(false);
    c.m_captures.clear();
    c.m_devices = 0;
    c.m_mutex.unlock();
  }

  std::mutex m_mutex;
  std::vector<std::pair<PlanKey, std::shared_ptr<CachedPlanBase>>> m_entries;
  std::vector<Captured> m_captured;
  std::vector<std::unique_ptr<Deferred>> m_doomed;  // released, destroyed by collect()
  bool m_collect = false;                           // m_doomed has entries
  std::atomic<bool> m_pending{false};  // doomed entries or graph references: collect() may work
  KnownCaptures m_captures;            // CUDA: captures plans were handed to
  std::uint64_t m_devices = 0;         // CUDA devices plans were made on
  std::size_t m_limit = 64;
  bool m_hook_registered = false;
};

/// What a Plan's (or GradientPlan's) destruction does with its implementation: never throws,
/// and never waits for the device while a capture the library knows of is in progress (nor
/// when the plan's own stream is being captured): memory is handed to the plan cache, freed
/// once the instance's work is done and no such capture is in progress. In a child forked after
/// Kokkos started a device, the memory is the parent's: abandoned.
template <class T, class ExecSpace>
void release_plan(std::unique_ptr<T>& impl, const ExecSpace& exec) noexcept;

/// What Plan and GradientPlan share: their instance and implementation, moved and released
/// (release_plan) as one.
template <class ExecSpace, class ImplType>
class OwnedPlan {
 public:
  OwnedPlan(const ExecSpace& exec, ImplType* impl) : m_exec(exec), m_impl(impl) {}
  ~OwnedPlan() { release_plan(m_impl, m_exec); }
  OwnedPlan(const OwnedPlan&) = delete;
  OwnedPlan& operator=(const OwnedPlan&) = delete;
  OwnedPlan(OwnedPlan&&) noexcept = default;
  OwnedPlan& operator=(OwnedPlan&& other) noexcept {
    if (this != &other) {
      release_plan(m_impl, m_exec);
      m_exec = std::move(other.m_exec);
      m_impl = std::move(other.m_impl);
    }
    return *this;
  }

 protected:
  ExecSpace m_exec;
  std::unique_ptr<ImplType> m_impl;
};

template <class T, class ExecSpace>
void release_plan(std::unique_ptr<T>& impl, const ExecSpace& exec) noexcept {
  if (!impl) return;
  if (!is_host_space<ExecSpace>() && forked_after_initialize().load()) {
    (void)impl.release();
    return;
  }
  if (impl->workspace_bytes() == 0) {
    impl.reset();
    return;
  }
  PlanCache::instance().destroy_when_safe(std::move(impl), exec);
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
