// SPDX-License-Identifier: Apache-2.0
/// \file PlanCache.hpp
/// The plans behind the one-shot linear_leaky_relu: made on first use for a (stream, shape,
/// Views, parameters, options) and reused, so that a call in a loop costs what Plan::execute
/// costs (no cuBLASLt heuristic query, no allocation). Bounded; released at Kokkos::finalize and
/// by FusedLinear::release_cached_plans().
#ifndef FUSED_LINEAR_IMPL_PLAN_CACHE_HPP
#define FUSED_LINEAR_IMPL_PLAN_CACHE_HPP

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <typeindex>
#include <typeinfo>
#include <utility>
#include <vector>

#include <Kokkos_Core.hpp>

#include "FusedLinear/Types.hpp"
#include "FusedLinear/impl/Errors.hpp"
#include "FusedLinear/impl/cuda/Device.hpp"
#include "FusedLinear/impl/kernels/Common.hpp"

namespace FusedLinear {
namespace Impl {

/// Which instance of an execution space, so that calls on different streams get different
/// plans and no workspace is used by two streams at once. On CUDA the stream's own id
/// (cudaStreamGetId): the handle cudaStreamPerThread (and the legacy stream under
/// --default-stream per-thread) names another stream on every thread. Host backends run each
/// call to completion (the cached plan's lock serialises them): 0. Elsewhere the instance is
/// not known (`std::nullopt`): the one-shot call then waits for its work before returning.
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
        cuda_check(cudaEventRecord(m_event, exec.cuda_stream()), "FusedLinear::linear_leaky_relu",
                   "record an event");
      }
    }
#endif
    (void)exec;
  }
  void wait() {
#if defined(KOKKOS_ENABLE_CUDA)
    if (m_event) cudaEventSynchronize(m_event);
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

/// One cached plan and the lock its calls take: a plan is not made for concurrent calls, and
/// several host threads may call on one stream.
struct CachedPlanBase {
  virtual ~CachedPlanBase() = default;
  std::mutex mutex;
  /// Captured into a CUDA graph: never evicted (the graph replays its memory), released only
  /// by release_cached_plans() or Kokkos::finalize. Set and read under the cache's lock.
  bool pinned = false;
};
template <class PlanType, class ExecSpace>
struct CachedPlan : CachedPlanBase {
  template <class... Args>
  explicit CachedPlan(const ExecSpace& exec, Args&&... args)
      : plan(exec, std::forward<Args>(args)...), done(exec, plan.workspace_bytes() > 0) {}
  ~CachedPlan() override {
    // Work enqueued with the plan's workspace may still run: wait for the last call's work
    // (only that: not the device), then let the memory go. A graph's replays of a pinned plan
    // are known to no event: the device is waited for.
    if (!Kokkos::is_initialized()) return;
    if (pinned)
      Kokkos::fence();
    else
      done.wait();
  }
  PlanType plan;
  CompletionMark<ExecSpace> done;
};

class PlanCache {
 public:
  /// The process's cache (never destroyed: it empties itself at Kokkos::finalize, before the
  /// memory it holds would become invalid).
  static PlanCache& instance() {
    static PlanCache* cache = new PlanCache();
    return *cache;
  }

  /// The cached plan for `key`, made by `make()` (a std::unique_ptr<CachedPlan<...>>) on first
  /// use, outside the cache's lock (a plan's making queries cuBLASLt and allocates: other
  /// threads' calls go on meanwhile); the least recently used one goes when the cache is full.
  template <class Cached, class Make>
  std::shared_ptr<Cached> get(const PlanKey& key, Make&& make) {
    if (auto found = find(key, false)) return std::static_pointer_cast<Cached>(found);
    std::shared_ptr<Cached> made(make());
    std::shared_ptr<CachedPlanBase> evicted;  // released after the lock
    std::lock_guard<std::mutex> lock(m_mutex);
    for (const auto& entry : m_entries)  // made meanwhile by another thread: use that one
      if (entry.first == key) return std::static_pointer_cast<Cached>(entry.second);
    if (!m_hook_registered) {
      // Once per Kokkos initialisation: the hook runs at the start of Kokkos::finalize and is
      // registered again at the next initialisation's first call.
      Kokkos::push_finalize_hook([] { PlanCache::instance().release(true); });
      m_hook_registered = true;
    }
    if (m_entries.size() >= capacity) {  // the least recently used plan not pinned, if any
      for (auto it = m_entries.rbegin(); it != m_entries.rend(); ++it) {
        if (!it->second->pinned) {
          evicted = std::move(it->second);
          m_entries.erase(std::next(it).base());
          break;
        }
      }
    }
    m_entries.insert(m_entries.begin(), {key, made});
    return made;
  }

  /// Drops every cached plan (their memory is freed once calls in flight on other threads
  /// return).
  void release(bool finalizing = false) {
    std::vector<std::pair<PlanKey, std::shared_ptr<CachedPlanBase>>> gone;
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      gone.swap(m_entries);
      if (finalizing) m_hook_registered = false;
    }
  }

  std::size_t size() {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_entries.size();
  }

  /// The cached plan for `key`, pinned (for a CUDA graph capture), or nullptr: nothing is made.
  template <class Cached>
  std::shared_ptr<Cached> pin(const PlanKey& key) {
    return std::static_pointer_cast<Cached>(find(key, true));
  }

  static constexpr std::size_t capacity = 32;  // unpinned plans

 private:
  std::shared_ptr<CachedPlanBase> find(const PlanKey& key, bool pin) {
    std::lock_guard<std::mutex> lock(m_mutex);
    for (std::size_t i = 0; i < m_entries.size(); ++i) {
      if (m_entries[i].first == key) {
        m_entries[i].second->pinned |= pin;
        std::rotate(m_entries.begin(), m_entries.begin() + i, m_entries.begin() + i + 1);
        return m_entries.front().second;
      }
    }
    return nullptr;
  }

  PlanCache() = default;
  std::mutex m_mutex;
  std::vector<std::pair<PlanKey, std::shared_ptr<CachedPlanBase>>> m_entries;
  bool m_hook_registered = false;
};

}  // namespace Impl
}  // namespace FusedLinear

#endif
