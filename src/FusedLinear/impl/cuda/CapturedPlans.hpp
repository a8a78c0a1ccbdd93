// SPDX-License-Identifier: Apache-2.0
/// \file cuda/CapturedPlans.hpp
/// The plan cache's CUDA graph bookkeeping: how a graph holds a captured plan (a CUDA user
/// object whose release only marks the plan), and the captures the cache knows of, during
/// which it frees nothing (freeing device memory or waiting for the device would invalidate
/// them). Without CUDA nothing is captured: KnownCaptures is then empty.
#ifndef FUSED_LINEAR_IMPL_CUDA_CAPTURED_PLANS_HPP
#define FUSED_LINEAR_IMPL_CUDA_CAPTURED_PLANS_HPP

#include <cstdint>

#include <Kokkos_Core.hpp>  // KOKKOS_ENABLE_CUDA

#if defined(KOKKOS_ENABLE_CUDA)
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "FusedLinear/impl/cuda/Device.hpp"

namespace FusedLinear {
namespace Impl {

/// The CUDA user object's destructor: it may not call CUDA, nor wait; it only marks.
inline void CUDART_CB graph_released(void* token) {
  auto* released = static_cast<std::shared_ptr<std::atomic<bool>>*>(token);
  (*released)->store(true);
  delete released;
}

/// Hands a plan to `graph`: the graph's reference is a CUDA user object whose release (the
/// graph and its executable graphs destroyed, their launches done) only sets the flag returned;
/// the cache frees the plan later. Throws std::runtime_error naming `function` where CUDA
/// refuses (nothing is then handed over).
inline std::shared_ptr<std::atomic<bool>> hand_to_graph(cudaGraph_t graph, const char* function) {
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
  if (cudaGraphRetainUserObject(graph, object, 1, cudaGraphUserObjectMove) != cudaSuccess) {
    cudaUserObjectRelease(object, 1);  // runs graph_released: the token goes
    (void)cudaGetLastError();
    throw std::runtime_error(std::string(function) +
                             ": cannot hand the captured plan to the CUDA graph");
  }
  return released;
}

/// The captures the plan cache handed plans to, kept while they may be in progress. Changed
/// under the cache's lock; any() is read without it.
class KnownCaptures {
 public:
  /// Whether any is known (a call outside captures then takes the cache's lock to forget).
  bool any() const { return m_known.load(std::memory_order_relaxed) != 0; }

  /// The capture `id` of `stream`, on `device`, once.
  void add(cudaStream_t stream, unsigned long long id, int device) {
    if (std::none_of(m_captures.begin(), m_captures.end(),
                     [&](const KnownCapture& k) { return k.id == id; }))
      m_captures.push_back({stream, id, device});
    m_known.store(int(m_captures.size()), std::memory_order_relaxed);
  }

  /// A call outside any capture on `stream`: a capture known on it has ended, and is forgotten
  /// (its stream is never queried again; it may be destroyed).
  void forget(cudaStream_t stream) {
    m_captures.erase(std::remove_if(m_captures.begin(), m_captures.end(),
                                    [&](const KnownCapture& k) { return k.stream == stream; }),
                     m_captures.end());
    m_known.store(int(m_captures.size()), std::memory_order_relaxed);
  }

  /// Whether a known capture is still in progress (those that ended are forgotten), or one on a
  /// stream that synchronises with the legacy default stream of a device in `devices` (bit d:
  /// device d).
  bool in_progress(std::uint64_t devices) {
    for (std::size_t i = 0; i < m_captures.size();) {
      CudaDeviceGuardNoThrow guard(m_captures[i].device);
      const StreamCapture now = stream_capture(m_captures[i].stream);
      // A query that fails (the stream destroyed after its capture) forgets it too.
      if (now.capturing && now.id == m_captures[i].id) return true;
      m_captures.erase(m_captures.begin() + std::ptrdiff_t(i));
    }
    m_known.store(int(m_captures.size()), std::memory_order_relaxed);
    for (int d = 0; d < 64; ++d) {
      if ((devices >> d & 1) == 0) continue;
      CudaDeviceGuardNoThrow guard(d);
      if (blocking_capture_on_current_device()) return true;
    }
    return false;
  }

  void clear() {
    m_captures.clear();
    m_known.store(0);
  }

 private:
  struct KnownCapture {
    cudaStream_t stream;
    unsigned long long id;
    int device;
  };
  std::vector<KnownCapture> m_captures;
  std::atomic<int> m_known{0};  // m_captures.size(), read without the lock
};

}  // namespace Impl
}  // namespace FusedLinear

#else

namespace FusedLinear {
namespace Impl {

/// Without CUDA no capture is known, nor in progress.
class KnownCaptures {
 public:
  bool in_progress(std::uint64_t devices) {
    (void)devices;
    return false;
  }
  void clear() {}
};

}  // namespace Impl
}  // namespace FusedLinear

#endif
#endif
