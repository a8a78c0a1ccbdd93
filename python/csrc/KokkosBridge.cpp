// SPDX-License-Identifier: Apache-2.0
/// \file KokkosBridge.cpp
/// The Kokkos side of the PyTorch extension: Kokkos' lifetime in the Python process, one
/// Kokkos::Cuda instance per CUDA stream (and capture lanes for captures on streams without
/// one), and the library calls on unmanaged Views over the tensors' storage. Includes no PyTorch
/// header (see KokkosBridge.hpp).
#include "KokkosBridge.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <FusedLinear.hpp>
#include <FusedLinear/impl/Fork.hpp>  // the library's fork registry, which this bridge joins
#include <Kokkos_Core.hpp>

#if defined(KOKKOS_ENABLE_CUDA)
#include <cuda_runtime.h>
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
#include <omp.h>
#endif

namespace FusedLinearTorch {
namespace {

constexpr const char* prefix = "fused_linear: ";

// ------------------------------------------------------------------ lifetime
std::mutex g_life_mutex;
std::atomic<bool> g_ready{false};  // Kokkos is up and usable (checked on every call, unlocked)
bool g_owned = false;              // this extension initialised Kokkos and will finalise it
bool g_finalized = false;
// Calls inside the library now, and finalize() begun: finalize waits for the calls to leave
// (a daemon thread may be inside one at interpreter exit) and refuses new ones.
std::atomic<int> g_calls{0};
std::atomic<bool> g_closing{false};
// A child forked after this library was loaded: its host thread pools (GNU OpenMP's) are the
// parent's, whose threads fork did not copy; host calls run on Kokkos::Serial there.
std::atomic<bool> g_forked{false};

constexpr const char* finalised_message =
    "Kokkos was finalised (at interpreter exit, or by fused_linear.finalize()); Kokkos cannot "
    "start again in a process";

/// A child forked after Kokkos started has the parent's CUDA context, unusable there: refused
/// by name before any CUDA call (one would fail, or abort in Kokkos).
[[noreturn]] void refuse_cuda_in_forked_child() {
  throw std::runtime_error(std::string(prefix) +
                           "CUDA tensors cannot be used in this process: it was forked after "
                           "Kokkos initialised CUDA, whose context does not survive fork(); "
                           "compute on CPU tensors in the child, or start processes with spawn");
}

#if defined(KOKKOS_ENABLE_CUDA)
/// A library-owned stream for a call captured into a CUDA graph on a stream that has no instance
/// yet (making one allocates, which a capture cannot): the call forks onto the lane (its stream
/// joins the capture), runs there and joins back. Made ahead, outside any capture.
/// What a lane costs, read from CudaInternal::initialize (a Kokkos::Cuda(stream)): 8 KiB of
/// reduction flags and 64 KiB of reduction scratch on the device, plus, in Kokkos 3.4, a bitset
/// of one bit per resident thread (64 KiB on a 132-SM H100) and a device synchronisation when
/// made, in Kokkos 4 one int per resident thread (1 MiB there); and a stream and two events.
struct CaptureLane {
  cudaStream_t stream = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
  std::unique_ptr<Kokkos::Cuda> instance;
  bool leased = false;  // a call is on it now
};

/// Kokkos 3.4 makes a Kokkos::Cuda(stream) expensively (it allocates the instance's scratch and
/// flags), so each stream gets one instance, kept until finalize(). Kokkos 3.4 drives one device,
/// so the stream alone is the key. Heap-allocated and never destroyed: at static destruction the
/// CUDA runtime may be gone; finalize() empties it while Kokkos is alive.
struct CudaInstances {
  static constexpr std::size_t limit = 128;  // torch's stream pools hold 32 per priority per device
  static constexpr std::size_t lane_count = 4;  // captures in progress at once on unseen streams
  std::mutex mutex;
  std::unordered_map<void*, Kokkos::Cuda> by_stream;
  std::deque<void*> order;  // insertion order: the oldest is dropped past `limit`
  std::vector<CaptureLane> lanes;
  bool lanes_made = false;  // tried once, at the first call outside a capture
};
/// Replaced in a forked child (the parent's instances, on the parent's device, are abandoned).
CudaInstances*& cuda_instances_slot() {
  static CudaInstances* instances = new CudaInstances;
  return instances;
}
CudaInstances& cuda_instances() { return *cuda_instances_slot(); }
#endif

/// One call inside the library: counted while it lasts, refused once finalize() has begun.
class CallScope {
 public:
  CallScope() {
    g_calls.fetch_add(1);  // sequentially consistent with finalize's g_closing, g_calls
    if (g_closing.load() || !g_ready.load()) {
      g_calls.fetch_sub(1);
      if (g_closing.load() || g_finalized)
        throw std::runtime_error(std::string(prefix) + finalised_message);
      throw std::runtime_error(std::string(prefix) +
                               "Kokkos is not initialised (internal error: the op initialises "
                               "it before its first call)");
    }
  }
  ~CallScope() { g_calls.fetch_sub(1); }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;
};

// ------------------------------------------------------------------ the host execution space
// Which threads may run the default host space is Kokkos' state, asked of Kokkos:
// - Kokkos 4's OpenMP runs from any thread (each instance takes its own lock);
// - Kokkos 3.4's OpenMP runs on the thread whose thread-local instance pointer is set (the
//   initialising thread): the pool is lent to the calling thread for the call, under
//   g_host_mutex, so every thread computes on the pool, one call at a time;
// - other pools (Threads, HPX) run on the thread that initialised Kokkos (marked
//   thread-locally, so a new thread never inherits the mark, whatever its id); other threads
//   use Kokkos::Serial (with the application's Kokkos, every thread uses the pool).
// Inside an OpenMP parallel region, and in a forked child, host calls run on Kokkos::Serial.
std::mutex g_host_mutex;  // one host call at a time where Kokkos 3.4's pool or Serial is shared
constexpr bool host_default_is_serial =
#if defined(KOKKOS_ENABLE_SERIAL)
    std::is_same<Kokkos::DefaultHostExecutionSpace, Kokkos::Serial>::value;
#else
    false;
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
constexpr bool host_default_is_openmp =
    std::is_same<Kokkos::DefaultHostExecutionSpace, Kokkos::OpenMP>::value;
#else
constexpr bool host_default_is_openmp = false;
#endif
#if defined(KOKKOS_ENABLE_OPENMP) && KOKKOS_VERSION < 40000
#define FUSED_LINEAR_TORCH_LENDS_POOL 1
Kokkos::Impl::OpenMPExec* g_openmp_pool = nullptr;  // the initialising thread's, under g_life_mutex

/// The pool lent to a thread that has none, for as long as the object lives (g_host_mutex held).
class LentPool {
 public:
  LentPool() : m_lent(Kokkos::Impl::t_openmp_instance == nullptr && g_openmp_pool != nullptr) {
    if (m_lent) Kokkos::Impl::t_openmp_instance = g_openmp_pool;
  }
  ~LentPool() {
    if (m_lent) Kokkos::Impl::t_openmp_instance = nullptr;
  }
  LentPool(const LentPool&) = delete;
  LentPool& operator=(const LentPool&) = delete;

 private:
  bool m_lent;
};
#endif
thread_local bool t_initialised_here = false;  // this thread initialised Kokkos

/// Restores the calling thread's OpenMP thread count (what torch.get_num_threads() reads),
/// which Kokkos' OpenMP backend sets when it starts.
class KeepOpenMPThreads {
 public:
#if defined(KOKKOS_ENABLE_OPENMP)
  KeepOpenMPThreads() : m_threads(omp_get_max_threads()) {}
  ~KeepOpenMPThreads() { omp_set_num_threads(m_threads); }

 private:
  int m_threads;
#else
  KeepOpenMPThreads() {}
#endif
};

std::vector<std::string> split_words(const char* text) {
  std::vector<std::string> words;
  std::istringstream is(text ? text : "");
  for (std::string word; is >> word;) words.push_back(word);
  return words;
}

// ------------------------------------------------------------------ execution spaces
#if defined(KOKKOS_ENABLE_CUDA)
int g_cuda_device = -1;  // Kokkos' device, read once at initialisation

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    throw std::runtime_error(std::string(prefix) + "cannot " + what + " (" + cudaGetErrorString(e) +
                             ")");
  }
}

/// Under the instances' lock, outside any capture: the capture lanes, on Kokkos' device.
void make_lanes(CudaInstances& c) {
  c.lanes_made = true;  // once: a failure is reported by this call, not by every later one
  const FusedLinear::Impl::CudaDeviceGuard device(g_cuda_device, "fused_linear");
  c.lanes.reserve(CudaInstances::lane_count);
  for (std::size_t i = 0; i < CudaInstances::lane_count; ++i) {
    CaptureLane lane;
    cuda_check(cudaStreamCreateWithFlags(&lane.stream, cudaStreamNonBlocking),
               "create a capture lane's stream");
    cudaError_t e = cudaEventCreateWithFlags(&lane.fork, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&lane.join, cudaEventDisableTiming);
    if (e == cudaSuccess) {
      try {
        lane.instance = std::make_unique<Kokkos::Cuda>(lane.stream);
      } catch (...) {
        e = cudaErrorMemoryAllocation;
      }
    }
    if (e != cudaSuccess) {
      if (lane.join) cudaEventDestroy(lane.join);
      if (lane.fork) cudaEventDestroy(lane.fork);
      cudaStreamDestroy(lane.stream);
      cuda_check(e, "make a capture lane");
    }
    c.lanes.push_back(std::move(lane));
  }
}

/// Destroys the lanes' instances, then their streams and events (finalize(), Kokkos alive).
void destroy_lanes(CudaInstances& c) {
  for (CaptureLane& lane : c.lanes) lane.instance.reset();
  for (CaptureLane& lane : c.lanes) {
    cudaEventDestroy(lane.join);
    cudaEventDestroy(lane.fork);
    cudaStreamDestroy(lane.stream);
  }
  (void)cudaGetLastError();
  c.lanes.clear();
  c.lanes_made = false;
}

/// The instance a call on `stream` runs on: the stream's own (made at its first call outside a
/// capture), or, for a stream being captured that has none, a capture lane forked from it for
/// the call (joined back by finish() or the destructor).
class CudaCall {
 public:
  explicit CudaCall(void* stream) : m_stream(static_cast<cudaStream_t>(stream)) {
    std::unique_ptr<Kokkos::Cuda> evicted;
    {
      CudaInstances& c = cuda_instances();
      std::lock_guard<std::mutex> lock(c.mutex);
      auto found = c.by_stream.find(stream);
      if (found != c.by_stream.end()) {
        m_instance = found->second;  // a copy: a reference count
        return;
      }
      const FusedLinear::Impl::StreamCapture capture = FusedLinear::Impl::stream_capture(m_stream);
      if (capture.capturing) {
        lease_lane(c, capture);
        return;
      }
      if (!c.lanes_made) make_lanes(c);
      if (c.by_stream.size() >= CudaInstances::limit) {
        auto oldest = c.by_stream.find(c.order.front());
        evicted = std::make_unique<Kokkos::Cuda>(oldest->second);
        c.by_stream.erase(oldest);
        c.order.pop_front();
      }
      // Torch's default stream is the legacy NULL stream, Kokkos 3.4's default instance's too:
      // that one is Kokkos' own instance rather than a second one on the same stream.
      const Kokkos::Cuda default_instance;
      const bool is_default = stream == static_cast<void*>(default_instance.cuda_stream());
      auto made =
          c.by_stream.emplace(stream, is_default ? default_instance : Kokkos::Cuda(m_stream));
      c.order.push_back(stream);
      m_instance = made.first->second;
    }
    // Destroying an instance frees device memory, which would break a capture in progress on
    // another thread: the plan cache destroys it once its work is done and no capture is known.
    // Plans made on it keep their own copy of it: nothing dangles.
    if (evicted) {
      const Kokkos::Cuda exec = *evicted;
      FusedLinear::Impl::PlanCache::instance().destroy_when_safe(std::move(evicted), exec);
    }
  }
  ~CudaCall() {
    try {
      finish();
    } catch (...) {  // the capture reports it: cudaStreamEndCapture fails on an unjoined lane
    }
  }
  CudaCall(const CudaCall&) = delete;
  CudaCall& operator=(const CudaCall&) = delete;

  const Kokkos::Cuda& exec() const { return m_instance; }

  /// Joins the lane's work back into the caller's stream and hands the lane back.
  void finish() {
    if (!m_lane) return;
    CaptureLane* lane = m_lane;
    m_lane = nullptr;
    cudaError_t e = cudaEventRecord(lane->join, lane->stream);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(m_stream, lane->join, 0);
    {
      std::lock_guard<std::mutex> lock(cuda_instances().mutex);
      lane->leased = false;
    }
    cuda_check(e, "join the capture lane's work back into the captured stream");
  }

 private:
  /// Under the instances' lock: a lane in this capture already, or one in none, forked from
  /// the caller's stream; refused when every lane is busy with other captures.
  void lease_lane(CudaInstances& c, const FusedLinear::Impl::StreamCapture& capture) {
    if (!c.lanes_made)
      throw std::invalid_argument(
          std::string(prefix) +
          "the first CUDA call cannot be captured into a CUDA graph (it makes the plans and "
          "streams the calls use, which allocates): call the op once with these shapes before "
          "the capture");
    CaptureLane* free_lane = nullptr;
    for (CaptureLane& lane : c.lanes) {
      if (lane.leased) continue;
      const FusedLinear::Impl::StreamCapture now = FusedLinear::Impl::stream_capture(lane.stream);
      if (now.capturing && now.id == capture.id && capture.id != 0) {
        m_lane = &lane;
        break;
      }
      if (!now.capturing && !free_lane) free_lane = &lane;
    }
    if (!m_lane) m_lane = free_lane;
    if (!m_lane)
      throw std::invalid_argument(
          std::string(prefix) +
          "too many concurrent captures into CUDA graphs on streams the "
          "op was never called on outside a capture: its " +
          std::to_string(c.lanes.size()) +
          " capture lanes are all in use by other captures (none can be made during a "
          "capture: it allocates); call the op once on the capturing stream before its capture, "
          "or capture fewer graphs at once");
    // The lane's stream joins the capture: it waits for the work captured so far.
    cudaError_t e = cudaEventRecord(m_lane->fork, m_stream);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(m_lane->stream, m_lane->fork, 0);
    if (e != cudaSuccess) {
      m_lane = nullptr;
      cuda_check(e, "fork the captured stream onto a capture lane");
    }
    m_lane->leased = true;
    m_instance = *m_lane->instance;
  }

  cudaStream_t m_stream;
  Kokkos::Cuda m_instance;
  CaptureLane* m_lane = nullptr;
};
#endif

FusedLinear::Options options_of(const Call& c) {
  return FusedLinear::Options(
      FusedLinear::algorithm_from_string(std::string(c.algorithm, c.algorithm_size)),
      FusedLinear::precision_from_string(std::string(c.precision, c.precision_size)));
}

/// Unmanaged Views over row-major storage: LayoutRight, so that every path of the library (the
/// vendor BLAS, cuBLASLt and the Hopper kernels need one layout known at compile time) can run.
template <class T, class Memory>
struct Views {
  using In2 = Kokkos::View<const T**, Kokkos::LayoutRight, Memory, Kokkos::MemoryUnmanaged>;
  using In1 = Kokkos::View<const T*, Kokkos::LayoutRight, Memory, Kokkos::MemoryUnmanaged>;
  using Out2 = Kokkos::View<T**, Kokkos::LayoutRight, Memory, Kokkos::MemoryUnmanaged>;
  In2 X, W;
  In1 b;
  Out2 Y;
  explicit Views(const Call& c)
      : X(static_cast<const T*>(c.x), c.m, c.k),
        W(static_cast<const T*>(c.w), c.n, c.k),
        b(static_cast<const T*>(c.b), c.n),
        Y(static_cast<T*>(c.y), c.m, c.n) {}
};

/// The gradient's Views, as Views' (row-major); an output the call skips is an empty View.
template <class T, class Memory>
struct GradientViews {
  using In2 = Kokkos::View<const T**, Kokkos::LayoutRight, Memory, Kokkos::MemoryUnmanaged>;
  using Out2 = Kokkos::View<T**, Kokkos::LayoutRight, Memory, Kokkos::MemoryUnmanaged>;
  using Out1 = Kokkos::View<T*, Kokkos::LayoutRight, Memory, Kokkos::MemoryUnmanaged>;
  using Mask = Kokkos::View<const bool**, Kokkos::LayoutRight, Memory, Kokkos::MemoryUnmanaged>;
  In2 X, W, dY, saved;
  Mask sign;
  Out2 dX, dW;
  Out1 db;
  explicit GradientViews(const BackwardCall& c)
      : X(static_cast<const T*>(c.x), c.m, c.k),
        W(static_cast<const T*>(c.w), c.n, c.k),
        dY(static_cast<const T*>(c.dy), c.m, c.n),
        saved(c.saved_is_sign ? In2() : In2(static_cast<const T*>(c.saved), c.m, c.n)),
        sign(c.saved_is_sign ? Mask(static_cast<const bool*>(c.saved), c.m, c.n) : Mask()),
        dX(c.dx ? Out2(static_cast<T*>(c.dx), c.m, c.k) : Out2()),
        dW(c.dw ? Out2(static_cast<T*>(c.dw), c.n, c.k) : Out2()),
        db(c.db ? Out1(static_cast<T*>(c.db), c.n) : Out1()) {}
};

/// Calls f(exec, V<T, Memory>(c)) for the call's place and value type (V: Views for a Call,
/// GradientViews for a BackwardCall).
template <template <class, class> class V = Views, class C, class F>
void dispatch(const C& c, F&& f) {
  const CallScope scope;
  auto typed = [&](const auto& exec, auto memory) {
    using Memory = decltype(memory);
    if (c.dtype == DType::Float32)
      f(exec, V<float, Memory>(c));
    else
      f(exec, V<double, Memory>(c));
  };
  if (c.where == Where::Cuda) {
#if defined(KOKKOS_ENABLE_CUDA)
    const int kokkos_device = g_cuda_device;
    if (c.device != kokkos_device)
      throw std::invalid_argument(
          std::string(prefix) +
          "Kokkos (3.4) drives one CUDA device per process, cuda:" + std::to_string(kokkos_device) +
          " here (the device of the first CUDA call); got tensors "
          "on cuda:" +
          std::to_string(c.device));
    check_cuda_usable();
    CudaCall call(c.stream);
    typed(call.exec(), Kokkos::CudaSpace());
    call.finish();
#else
    throw std::invalid_argument(std::string(prefix) +
                                "this build's Kokkos has no CUDA backend (CPU tensors only)");
#endif
    return;
  }
  auto on_serial = [&] {
#if defined(KOKKOS_ENABLE_SERIAL)
    std::lock_guard<std::mutex> lock(g_host_mutex);
    typed(Kokkos::Serial(), Kokkos::HostSpace());
#else
    throw std::runtime_error(
        std::string(prefix) +
        (g_forked.load() ? "this process was forked after its host thread pool started, which "
                           "fork() does not copy, and this build's Kokkos has no Serial backend "
                           "to compute without it; start processes with spawn"
                         : "this thread cannot run Kokkos' host backend, and this build's Kokkos "
                           "has no Serial backend"));
#endif
  };
  if (host_default_is_serial) {
    std::lock_guard<std::mutex> lock(g_host_mutex);
    typed(Kokkos::DefaultHostExecutionSpace(), Kokkos::HostSpace());
    return;
  }
  if (g_forked.load(std::memory_order_relaxed)) return on_serial();
#if defined(KOKKOS_ENABLE_OPENMP)
  if (host_default_is_openmp && omp_in_parallel()) return on_serial();
#endif
#if defined(FUSED_LINEAR_TORCH_LENDS_POOL)
  if (host_default_is_openmp) {
    std::unique_lock<std::mutex> lock(g_host_mutex);
    const LentPool lent;
    if (Kokkos::Impl::t_openmp_instance == nullptr) {  // another owner's Kokkos, not our pool
      lock.unlock();
      return on_serial();
    }
    typed(Kokkos::DefaultHostExecutionSpace(), Kokkos::HostSpace());
    return;
  }
#else
  if (host_default_is_openmp) {
    typed(Kokkos::DefaultHostExecutionSpace(), Kokkos::HostSpace());
    return;
  }
#endif
  if (g_owned && !t_initialised_here) return on_serial();
  typed(Kokkos::DefaultHostExecutionSpace(), Kokkos::HostSpace());
}

template <class Exec>
void fence_of(const Exec& exec) {
  exec.fence();
}

void set_cuda_device() {
#if defined(KOKKOS_ENABLE_CUDA)
  g_cuda_device = Kokkos::Cuda().cuda_device();
#endif
}

/// In a child forked while another thread was inside a call, that thread's locks and count
/// are copies of a thread the child does not have: they start afresh (only the forking thread
/// exists, and it was not inside a call). std::mutex has no other way to be reset.
void forked_child() {
  g_forked.store(true);
  g_calls.store(0);
  new (&g_host_mutex) std::mutex;
  new (&g_life_mutex) std::mutex;
#if defined(KOKKOS_ENABLE_CUDA)
  // The parent's instances and lanes live on its device: abandoned, never destroyed; their
  // lock, which a parent thread may have held, goes with them.
  cuda_instances_slot() = new CudaInstances;
#endif
}

struct ForkHandler {
  ForkHandler() {
    // The library's one fork registration: the extension's state goes last in the child.
    FusedLinear::Impl::ForkRegistry::process().add(FusedLinear::Impl::ForkSlot::Extension,
                                                   {nullptr, nullptr, &forked_child});
  }
};
const ForkHandler fork_handler;  // registered when the extension is loaded

}  // namespace

// ------------------------------------------------------------------ the interface
void ensure_initialized(int host_threads, int cuda_device, const char* extra_args) {
  if (g_ready.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(g_life_mutex);
  if (g_ready.load(std::memory_order_relaxed)) return;
  if (g_finalized) throw std::runtime_error(std::string(prefix) + finalised_message);
  if (Kokkos::is_initialized()) {  // the application's Kokkos: use it, leave it to its owner
    set_cuda_device();
    g_closing.store(false);
    g_ready.store(true, std::memory_order_release);
    return;
  }
  // In a forked child the OpenMP runtime believes the parent's threads exist: Kokkos starts
  // with one host thread there (and the calls run on Serial).
  const bool forked = g_forked.load();
  if (forked) host_threads = 1;
  std::vector<std::string> args{"fused_linear"};
  if (host_threads > 0) {
#if KOKKOS_VERSION >= 30700
    args.push_back("--kokkos-num-threads=" + std::to_string(host_threads));
#else
    args.push_back("--kokkos-threads=" + std::to_string(host_threads));
#endif
  }
#if defined(KOKKOS_ENABLE_CUDA)
  // Kokkos 3.4 aborts the process when it finds no device: refuse with a message instead.
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    throw std::runtime_error(std::string(prefix) +
                             "this build's Kokkos has the CUDA backend, which needs a CUDA device, "
                             "and none is usable (cudaGetDeviceCount: " +
                             (e != cudaSuccess ? cudaGetErrorString(e) : "0 devices") + ")");
  }
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = 0;
  args.push_back("--kokkos-device-id=" + std::to_string(cuda_device >= 0 ? cuda_device : previous));
#else
  (void)cuda_device;
#endif
  // Kokkos' OMP_PROC_BIND advice is for Kokkos applications; PyTorch owns the threads' binding.
  args.push_back("--kokkos-disable-warnings");
  for (auto& word : split_words(extra_args)) args.push_back(word);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(&a[0]);
  argv.push_back(nullptr);
  int argc = static_cast<int>(args.size());
  {
    const KeepOpenMPThreads keep;
#if defined(KOKKOS_ENABLE_OPENMP)
    if (forked) omp_set_num_threads(1);  // Kokkos counts the threads of a first parallel region
#endif
    Kokkos::initialize(argc, argv.data());
  }
#if defined(KOKKOS_ENABLE_CUDA)
  cudaSetDevice(previous);  // Kokkos made its device current; the caller's stays as it was
#endif
  g_owned = true;
  set_cuda_device();
  t_initialised_here = true;
#if defined(FUSED_LINEAR_TORCH_LENDS_POOL)
  g_openmp_pool = Kokkos::Impl::t_openmp_instance;
#endif
  g_closing.store(false);
  g_ready.store(true, std::memory_order_release);
}

bool ready() { return g_ready.load(std::memory_order_acquire); }

void check_cuda_usable() {
  if (FusedLinear::Impl::forked_after_initialize().load()) refuse_cuda_in_forked_child();
}

void finalize() {
  std::lock_guard<std::mutex> lock(g_life_mutex);
  if (!g_ready.load(std::memory_order_acquire)) return;
  // No new call starts; those inside the library (other threads') finish first.
  g_closing.store(true);
  while (g_calls.load() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (g_forked.load()) {
    // A forked child's plans, instances and pool are copies whose threads and device
    // contexts are the parent's: releasing them would enter them. The process's exit frees it.
    g_ready.store(false, std::memory_order_release);
    g_finalized = g_owned;
    g_owned = false;
    return;
  }
  std::lock_guard<std::mutex> host_lock(g_host_mutex);
#if defined(FUSED_LINEAR_TORCH_LENDS_POOL)
  const LentPool lent;  // Kokkos 3.4 destroys the pool from the thread that holds it
#endif
  // Plans first (they fence their instances), then the instances, then Kokkos.
  FusedLinear::release_cached_plans();
#if defined(KOKKOS_ENABLE_CUDA)
  {
    CudaInstances& c = cuda_instances();
    std::lock_guard<std::mutex> instances_lock(c.mutex);
    for (auto& entry : c.by_stream) entry.second.fence();
    c.by_stream.clear();
    c.order.clear();
    destroy_lanes(c);
  }
#endif
  g_ready.store(false, std::memory_order_release);
  if (g_owned && Kokkos::is_initialized()) {
    Kokkos::finalize();
    g_finalized = true;
#if defined(FUSED_LINEAR_TORCH_LENDS_POOL)
    g_openmp_pool = nullptr;
#endif
  }
  g_owned = false;
}

void run(const Call& c) {
  dispatch(c, [&](const auto& exec, const auto& v) {
    using T = typename std::decay_t<decltype(v.Y)>::non_const_value_type;
    FusedLinear::linear_leaky_relu(exec, v.X, v.W, v.b, v.Y, T(c.multiplier), T(c.negative_slope),
                                   options_of(c));
  });
}

void run_backward(const BackwardCall& c) {
  FusedLinear::GradientOptions options;
  options.algorithm =
      FusedLinear::algorithm_from_string(std::string(c.algorithm, c.algorithm_size));
  options.precision =
      FusedLinear::precision_from_string(std::string(c.precision, c.precision_size));
  options.saved = c.saved_is_sign     ? FusedLinear::Saved::Sign
                  : c.saved_is_output ? FusedLinear::Saved::Output
                                      : FusedLinear::Saved::PreActivation;
  dispatch<GradientViews>(c, [&](const auto& exec, const auto& v) {
    using T = typename std::decay_t<decltype(v.dX)>::non_const_value_type;
    if (c.saved_is_sign)
      FusedLinear::linear_leaky_relu_backward(exec, v.X, v.W, v.dY, v.sign, v.dX, v.dW, v.db,
                                              T(c.multiplier), T(c.negative_slope), options);
    else
      FusedLinear::linear_leaky_relu_backward(exec, v.X, v.W, v.dY, v.saved, v.dX, v.dW, v.db,
                                              T(c.multiplier), T(c.negative_slope), options);
  });
}

std::size_t run_info(const Call& c, char* text, std::size_t capacity) {
  std::string out;
  dispatch(c, [&](const auto& exec, const auto& v) {
    using T = typename std::decay_t<decltype(v.Y)>::non_const_value_type;
    const FusedLinear::RunInfo info = FusedLinear::linear_leaky_relu(
        exec, v.X, v.W, v.b, v.Y, T(c.multiplier), T(c.negative_slope), options_of(c));
    out = std::string("algorithm=") + FusedLinear::to_string(info.algorithm) +
          ";precision=" + FusedLinear::to_string(info.precision) +
          ";gemm=" + FusedLinear::to_string(info.gemm) +
          ";execution_space=" + std::decay_t<decltype(exec)>::name() + ";note=" + info.note;
  });
  if (capacity > 0) {
    const std::size_t copied = std::min(out.size(), capacity - 1);
    std::memcpy(text, out.data(), copied);
    text[copied] = '\0';
  }
  return out.size();
}

void time_calls(const Call& c, int mode, int iters, bool sync, double* us) {
  if (mode != 0 && mode != 1)
    throw std::invalid_argument(std::string(prefix) + "time_calls: mode 0 (plan) or 1 (one-shot)");
  dispatch(c, [&](const auto& exec, const auto& v) {
    using T = typename std::decay_t<decltype(v.Y)>::non_const_value_type;
    using Exec = std::decay_t<decltype(exec)>;
    using V = std::decay_t<decltype(v)>;
    const T m = T(c.multiplier), s = T(c.negative_slope);
    const FusedLinear::Options options = options_of(c);
    using Clock = std::chrono::steady_clock;
    if (mode == 0) {
      FusedLinear::Plan<Exec, typename V::In2, typename V::In2, typename V::In1, typename V::Out2>
          plan(exec, v.X, v.W, v.b, v.Y, m, s, options);
      plan.execute(v.X, v.W, v.b, v.Y);  // first touch outside the timed calls
      exec.fence();
      for (int i = 0; i < iters; ++i) {
        const auto t0 = Clock::now();
        plan.execute(v.X, v.W, v.b, v.Y);
        if (sync) exec.fence();
        us[i] = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      }
    } else {
      FusedLinear::linear_leaky_relu(exec, v.X, v.W, v.b, v.Y, m, s, options);
      exec.fence();
      for (int i = 0; i < iters; ++i) {
        const auto t0 = Clock::now();
        FusedLinear::linear_leaky_relu(exec, v.X, v.W, v.b, v.Y, m, s, options);
        if (sync) exec.fence();
        us[i] = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      }
    }
    exec.fence();
  });
}

void fence(const Call& c) {
  dispatch(c, [&](const auto& exec, const auto&) { fence_of(exec); });
}

Status status() {
  Status s;
  s.initialized = Kokkos::is_initialized();
  s.owned = g_owned;
  s.finalized = g_finalized;
  s.forked = g_forked.load();
  s.serial_fallback = s.forked || (!host_default_is_serial && !host_default_is_openmp);
  std::snprintf(s.kokkos_version, sizeof(s.kokkos_version), "%d.%d.%d", KOKKOS_VERSION / 10000,
                KOKKOS_VERSION / 100 % 100, KOKKOS_VERSION % 100);
  std::snprintf(s.host_space, sizeof(s.host_space), "%s",
                Kokkos::DefaultHostExecutionSpace::name());
#if defined(KOKKOS_ENABLE_CUDA)
  s.cuda = true;
#endif
  if (s.initialized) {
    {
      std::lock_guard<std::mutex> host_lock(g_host_mutex);
#if defined(FUSED_LINEAR_TORCH_LENDS_POOL)
      const LentPool lent;  // Kokkos 3.4 tells the pool's size to the thread that holds it
#endif
      s.host_threads = Kokkos::DefaultHostExecutionSpace().concurrency();
    }
#if defined(KOKKOS_ENABLE_CUDA)
    s.cuda_device = g_cuda_device;
    CudaInstances& c = cuda_instances();
    std::lock_guard<std::mutex> lock(c.mutex);
    s.cached_cuda_instances = static_cast<int>(c.by_stream.size());
    s.cuda_capture_lanes = static_cast<int>(c.lanes.size());
#endif
  }
  return s;
}

}  // namespace FusedLinearTorch
