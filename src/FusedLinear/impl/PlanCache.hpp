// SPDX-License-Identifier: Apache-2.0
/// \file PlanCache.hpp
/// The plans behind the one-shot linear_leaky_relu: made on first use for a (stream, shape,
/// Views, parameters, options) and reused, so that a call in a loop costs what Plan::execute
/// costs (no cuBLASLt heuristic query, no allocation). Bounded; released at Kokkos::finalize and
/// by FusedLinear::release_cached_plans().
#ifndef FUSED_LINEAR_IMPL_PLAN_CACHE_HPP
#define FUSED_LINEAR_IMPL_PLAN_CACHE_HPP

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <typeindex>
#include <typeinfo>
#include <utility>
#include <vector>

#include <Kokkos_Core.hpp>

#include "FusedLinear/Types.hpp"
#include "FusedLinear/impl/Errors.hpp"
#include "FusedLinear/impl/Fork.hpp"
#include "FusedLinear/impl/cuda/Device.hpp"
#include "FusedLinear/impl/kernels/Common.hpp"

namespace FusedLinear {
namespace Impl {

/// Which instance of an execution space, so that calls on different streams get different
/// plans and no workspace is used by two streams at once. On CUDA the stream's own id
/// (cudaStreamGetId): the handle cudaStreamPerThread (and the legacy stream under
/// --default-stream per-thread) names another stream on every thread. Host backends run each
/// call to completion (the cached plan's lock serialises them): 0, but HPX, which dispatches
/// asynchronously. Elsewhere the instance is not known (`std::nullopt`): the one-shot call then
/// waits for its work before returning.
/// `capturing`: the stream is being captured into a CUDA graph, where cudaStreamGetId is not
/// permitted: the id this thread found for the stream's handle before is taken, and a stream
/// this thread never called on outside the capture is refused.
template <class ExecSpace>
std::optional<std::uint64_t> instance_identity(const ExecSpace& exec, const char* function,
                                               bool capturing) {
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value) {
    // The handles this thread identified last (a handle's id is per thread for
    // cudaStreamPerThread); a handle reused by a new stream maps to a dead stream's id, which
    // no live stream has.
    struct Known {
      cudaStream_t handle;
      unsigned long long id;
    };
    static thread_local Known known[16] = {};
    static thread_local unsigned next = 0;
    const cudaStream_t stream = exec.cuda_stream();
    unsigned long long id = 0;
    bool found = false;
    for (const Known& k : known)
      if (k.id != 0 && k.handle == stream) id = k.id, found = true;
    if (!found) {
      if (capturing)
        refuse(function,
               "this thread made no call on this stream before its capture into a CUDA graph "
               "(a plan cannot be made during one: it allocates): make one call before the "
               "capture");
      guarded_cuda_call();
      cuda_check(cudaStreamGetId(stream, &id), function, "identify the stream");
      known[next++ % 16] = {stream, id};
    }
    // Ids are unique within the process; the device keeps two devices' default streams apart.
    return std::uint64_t(id) ^ (std::uint64_t(exec.cuda_device()) << 56);
  }
#endif
#if defined(KOKKOS_ENABLE_HIP)
#if KOKKOS_VERSION >= 40000
  using Hip = Kokkos::HIP;
#else
  using Hip = Kokkos::Experimental::HIP;
#endif
  if constexpr (std::is_same<ExecSpace, Hip>::value) {
    const hipStream_t stream = exec.hip_stream();
    if (stream == nullptr || stream == hipStreamPerThread) return std::nullopt;  // per thread
    return std::uint64_t(reinterpret_cast<std::uintptr_t>(stream));
  }
#endif
  (void)exec, (void)function, (void)capturing;
#if defined(KOKKOS_ENABLE_HPX)
  // HPX dispatches asynchronously: its instances' work may overlap, and they are not told apart.
  if constexpr (std::is_same<ExecSpace, Kokkos::Experimental::HPX>::value) return std::nullopt;
#endif
  if constexpr (is_host_space<ExecSpace>()) return std::uint64_t(0);
  return std::nullopt;
}

/// Where a cached plan's last call ends, so that the plan's memory is freed only after it: on
/// CUDA an event recorded after each call (the caller's stream may be gone by then); host
/// backends finish each call before it returns; other backends wait on the instance.
template <class ExecSpace>
class CompletionMark {
 public:
  CompletionMark(const ExecSpace& exec, bool needed) {
    if (!needed || is_host_space<ExecSpace>()) return;
#if defined(KOKKOS_ENABLE_CUDA)
    if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value) {
      CudaDeviceGuard device(exec.cuda_device(), "FusedLinear::linear_leaky_relu");
      cuda_check(cudaEventCreateWithFlags(&m_event, cudaEventDisableTiming),
                 "FusedLinear::linear_leaky_relu", "create an event");
      return;
    }
#endif
    m_exec.emplace(exec);
  }
  ~CompletionMark() {
#if defined(KOKKOS_ENABLE_CUDA)
    if (m_event) cudaEventDestroy(m_event);
#endif
  }
  CompletionMark(const CompletionMark&) = delete;
  CompletionMark& operator=(const CompletionMark&) = delete;

  /// After a call enqueued on `exec`.
  void record(const ExecSpace& exec) {
#if defined(KOKKOS_ENABLE_CUDA)
    if constexpr (std::is_same<ExecSpace, Kokkos::Cuda>::value) {
      if (m_event) {
        CudaDeviceGuard device(exec.cuda_device(), "FusedLinear::linear_leaky_relu");
        guarded_cuda_call();
        cuda_check(cudaEventRecord(m_event, exec.cuda_stream()), "FusedLinear::linear_leaky_relu",
                   "record an event");
      }
    }
#endif
    (void)exec;
  }
  void wait() {
#if defined(KOKKOS_ENABLE_CUDA)
    if (m_event) {
      guarded_cuda_call();
      cudaEventSynchronize(m_event);
    }
#endif
    if (m_exec) m_exec->fence();
  }

 private:
  std::optional<ExecSpace> m_exec;  // backends without events
#if defined(KOKKOS_ENABLE_CUDA)
  cudaEvent_t m_event = nullptr;
#endif
};

/// Everything a plan depends on, as plain bytes compared with memcmp (no padding between the
/// members, in this order).
struct PlanKey {
  const std::type_info* type;  // the plan's type: value type, layouts, memory spaces
  std::uint64_t instance;
  std::int64_t extents[3];   // M, K, N
  std::int64_t strides[7];   // X, W (2 each), b, Y (2)
  std::uint64_t alignments;  // log2 of min(256, alignment) of X, W, b, Y, 8 bits each
  double multiplier, slope;
  std::uint64_t partials_limit;
  std::uint64_t measure_clock;  // options.tuning.measure_clock (tests): another plan
  std::int32_t algorithm, precision, splits, sm90_kernel;
  std::int32_t planning, unused;

  bool operator==(const PlanKey& o) const { return std::memcmp(this, &o, sizeof *this) == 0; }
};
static_assert(sizeof(PlanKey) == 160, "PlanKey has no padding");

inline std::uint64_t alignment_log2(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::uint64_t log2 = 0;
  while (log2 < 8 && (a & ((std::uintptr_t(1) << (log2 + 1)) - 1)) == 0) ++log2;
  return log2;
}

template <class PlanType, class XView, class WView, class BView, class YView, class Scalar>
PlanKey plan_key(std::uint64_t instance, const XView& X, const WView& W, const BView& b,
                 const YView& Y, Scalar multiplier, Scalar slope, const Options& options) {
  PlanKey k;
  std::memset(&k, 0, sizeof k);
  k.type = &typeid(PlanType);
  k.instance = instance;
  k.extents[0] = X.extent(0), k.extents[1] = X.extent(1), k.extents[2] = W.extent(0);
  const std::int64_t strides[7] = {std::int64_t(X.stride(0)), std::int64_t(X.stride(1)),
                                   std::int64_t(W.stride(0)), std::int64_t(W.stride(1)),
                                   std::int64_t(b.stride(0)), std::int64_t(Y.stride(0)),
                                   std::int64_t(Y.stride(1))};
  std::copy(strides, strides + 7, k.strides);
  k.alignments = alignment_log2(X.data()) | alignment_log2(W.data()) << 8 |
                 alignment_log2(b.data()) << 16 | alignment_log2(Y.data()) << 24;
  k.multiplier = double(multiplier), k.slope = double(slope);
  k.algorithm = std::int32_t(options.algorithm), k.precision = std::int32_t(options.precision);
  k.splits = options.tuning.skinny_splits, k.sm90_kernel = options.tuning.sm90_tf32x3_kernel;
  k.partials_limit = options.tuning.tf32x3_partials_limit;
  k.measure_clock = reinterpret_cast<std::uint64_t>(options.tuning.measure_clock);
  k.planning = std::int32_t(options.planning);
  return k;
}

/// Runs `wait` (a fence) with `device` current where it is a CUDA device (>= 0), swallowing what
/// it throws: destructors call it, and a destructor must not throw.
template <class Wait>
void wait_quietly(int device, const Wait& wait) noexcept {
  if (!Kokkos::is_initialized()) return;
#if defined(KOKKOS_ENABLE_CUDA)
  std::optional<CudaDeviceGuardNoThrow> guard;
  if (device >= 0) guard.emplace(device);
#else
  (void)device;
#endif
  try {
    wait();
  } catch (...) {
  }
}

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
  template <class E>
  static int device_of(const E& exec) {
#if defined(KOKKOS_ENABLE_CUDA)
    if constexpr (std::is_same<E, Kokkos::Cuda>::value) return exec.cuda_device();
#endif
    (void)exec;
    return -1;
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
#if defined(KOKKOS_ENABLE_CUDA)
        m_captures.clear();
        m_known.store(0);
#endif
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
    // The graph's reference: its release (the graph and its executable graphs destroyed,
    // their launches done) only sets the flag; the cache frees the plan later.
    auto released = std::make_shared<std::atomic<bool>>(false);
    auto* token = new std::shared_ptr<std::atomic<bool>>(released);
    cudaUserObject_t object = nullptr;
    guarded_cuda_call();
    if (cudaUserObjectCreate(&object, token, &graph_released, 1, cudaUserObjectNoDestructorSync) !=
        cudaSuccess) {
      delete token;
      (void)cudaGetLastError();
      throw std::runtime_error(std::string(function) +
                               ": cannot create a CUDA user object for the captured plan");
    }
    if (cudaGraphRetainUserObject(capture.graph, object, 1, cudaGraphUserObjectMove) !=
        cudaSuccess) {
      cudaUserObjectRelease(object, 1);  // runs graph_released: the token goes
      (void)cudaGetLastError();
      throw std::runtime_error(std::string(function) +
                               ": cannot hand the captured plan to the CUDA graph");
    }
    Captured c{capture.id, key, std::move(m_entries[i].second), released};
    c.plan->captured = true;
    m_entries.erase(m_entries.begin() + std::ptrdiff_t(i));
    m_captured.push_back(c);
    note_pending();
    if (std::none_of(m_captures.begin(), m_captures.end(),
                     [&](const KnownCapture& k) { return k.id == capture.id; }))
      m_captures.push_back({stream, capture.id, c.plan->device});
    m_known.store(int(m_captures.size()), std::memory_order_relaxed);
    return std::static_pointer_cast<Cached>(c.plan);
  }
#endif

#if defined(KOKKOS_ENABLE_CUDA)
  /// A call outside any capture on `stream`: a capture the cache knew on it has ended, and is
  /// forgotten (its stream is never queried again; it may be destroyed).
  void not_capturing(cudaStream_t stream) {
    if (m_known.load(std::memory_order_relaxed) == 0) return;
    std::lock_guard<std::mutex> lock(m_mutex);
    m_captures.erase(std::remove_if(m_captures.begin(), m_captures.end(),
                                    [&](const KnownCapture& k) { return k.stream == stream; }),
                     m_captures.end());
    m_known.store(int(m_captures.size()), std::memory_order_relaxed);
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
  bool capture_in_progress() {
#if defined(KOKKOS_ENABLE_CUDA)
    for (std::size_t i = 0; i < m_captures.size();) {
      CudaDeviceGuardNoThrow guard(m_captures[i].device);
      const StreamCapture now = stream_capture(m_captures[i].stream);
      // A query that fails (the stream destroyed after its capture) forgets it too.
      if (now.capturing && now.id == m_captures[i].id) return true;
      m_captures.erase(m_captures.begin() + std::ptrdiff_t(i));
    }
    m_known.store(int(m_captures.size()), std::memory_order_relaxed);
    for (int d = 0; d < 64; ++d) {
      if ((m_devices >> d & 1) == 0) continue;
      CudaDeviceGuardNoThrow guard(d);
      if (blocking_capture_on_current_device()) return true;
    }
#endif
    return false;
  }

#if defined(KOKKOS_ENABLE_CUDA)
  /// The CUDA user object's destructor: it may not call CUDA, nor wait; it only marks.
  static void CUDART_CB graph_released(void* token) {
    auto* released = static_cast<std::shared_ptr<std::atomic<bool>>*>(token);
    (*released)->store(true);
    delete released;
  }
  struct KnownCapture {
    cudaStream_t stream;
    unsigned long long id;
    int device;
  };
  std::vector<KnownCapture> m_captures;
#endif

  struct Captured {
    unsigned long long capture;
    PlanKey key;
    std::shared_ptr<CachedPlanBase> plan;
    std::shared_ptr<std::atomic<bool>> released;  // set when the graph lets the plan go
  };

  PlanCache() { register_fork_handlers(); }

  /// fork(): the cache's lock is held across it (no other thread's half-done change is copied),
  /// and in the child every plan is abandoned (another thread may have held its lock, and a
  /// device's memory is not the child's).
  void register_fork_handlers() {
#if defined(FUSED_LINEAR_IMPL_HAS_ATFORK)
    pthread_atfork([] { PlanCache::instance().m_mutex.lock(); },
                   [] { PlanCache::instance().m_mutex.unlock(); },
                   [] {
                     PlanCache& c = PlanCache::instance();
                     auto* abandoned = new std::vector<std::shared_ptr<CachedPlanBase>>();
                     for (auto& e : c.m_entries) abandoned->push_back(std::move(e.second));
                     for (auto& h : c.m_captured) abandoned->push_back(std::move(h.plan));
                     c.m_entries.clear(), c.m_captured.clear();
                     for (auto& d : c.m_doomed) (void)d.release();
                     c.m_doomed.clear();
                     c.note_pending();
#if defined(KOKKOS_ENABLE_CUDA)
                     c.m_captures.clear();
                     c.m_known.store(0);
#endif
                     c.m_mutex.unlock();
                   });
#endif
  }

  std::mutex m_mutex;
  std::vector<std::pair<PlanKey, std::shared_ptr<CachedPlanBase>>> m_entries;
  std::vector<Captured> m_captured;
  std::vector<std::unique_ptr<Deferred>> m_doomed;  // released, destroyed by collect()
  bool m_collect = false;                           // m_doomed has entries
  std::atomic<bool> m_pending{false};  // plans doomed or captured: collect() has work to check
  std::atomic<int> m_known{0};         // captures known (m_captures, CUDA)
  std::uint64_t m_devices = 0;         // CUDA devices plans were made on
  bool m_hook_registered = false;
};

}  // namespace Impl
}  // namespace FusedLinear

#endif
