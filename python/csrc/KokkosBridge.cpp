// SPDX-License-Identifier: Apache-2.0
/// \file KokkosBridge.cpp
/// The Kokkos side of the PyTorch extension: Kokkos' lifetime in the Python process, one
/// Kokkos::Cuda instance per CUDA stream, and the library calls on unmanaged Views over the
/// tensors' storage. Includes no PyTorch header (see KokkosBridge.hpp).
#include "KokkosBridge.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <FusedLinear.hpp>
#include <Kokkos_Core.hpp>

#if defined(KOKKOS_ENABLE_CUDA)
#include <cuda_runtime.h>
#endif

namespace FusedLinearTorch {
namespace {

constexpr const char* prefix = "fused_linear: ";

// ------------------------------------------------------------------ lifetime
std::mutex g_life_mutex;
std::atomic<bool> g_ready{false};  // Kokkos is up and usable (checked on every call, unlocked)
bool g_owned = false;              // this extension initialised Kokkos and will finalise it
bool g_finalized = false;
std::thread::id g_init_thread;  // Kokkos 3.4 OpenMP runs team kernels from this thread only

#if defined(KOKKOS_ENABLE_CUDA)
/// Kokkos 3.4 makes a Kokkos::Cuda(stream) expensively (it allocates the instance's scratch and
/// flags), so each stream gets one instance, kept until finalize(). Kokkos 3.4 drives one device,
/// so the stream alone is the key. Heap-allocated and never destroyed: at static destruction the
/// CUDA runtime may be gone; finalize() empties it while Kokkos is alive.
struct CudaInstances {
  static constexpr std::size_t limit = 128;  // torch's stream pools hold 32 per priority per device
  std::mutex mutex;
  std::unordered_map<void*, Kokkos::Cuda> by_stream;
  std::deque<void*> order;  // insertion order: the oldest is dropped past `limit`
};
CudaInstances& cuda_instances() {
  static CudaInstances* instances = new CudaInstances;
  return *instances;
}
#endif

/// Kokkos::Serial where a host call comes from a thread other than the one that initialised
/// Kokkos (Kokkos 3.4's OpenMP throws there); one at a time: a Kokkos 3.4 host instance must
/// not be entered from two threads at once.
std::mutex g_serial_mutex;
constexpr bool has_serial_fallback =
#if defined(KOKKOS_ENABLE_SERIAL)
    !std::is_same<Kokkos::DefaultHostExecutionSpace, Kokkos::Serial>::value;
#else
    false;
#endif

void require_ready() {
  if (!g_ready.load(std::memory_order_acquire))
    throw std::runtime_error(std::string(prefix) +
                             "Kokkos is not initialised (internal error: the op initialises it "
                             "before its first call)");
}

std::vector<std::string> split_words(const char* text) {
  std::vector<std::string> words;
  std::istringstream is(text ? text : "");
  for (std::string word; is >> word;) words.push_back(word);
  return words;
}

// ------------------------------------------------------------------ execution spaces
#if defined(KOKKOS_ENABLE_CUDA)
int g_cuda_device = -1;  // Kokkos' device, read once at initialisation

Kokkos::Cuda cuda_instance(void* stream) {
  CudaInstances& c = cuda_instances();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto found = c.by_stream.find(stream);
  if (found != c.by_stream.end()) return found->second;  // a copy: a reference count
  if (c.by_stream.size() >= CudaInstances::limit) {
    // Plans made on the dropped instance keep their own copy of it: nothing dangles.
    c.by_stream.erase(c.order.front());
    c.order.pop_front();
  }
  // A new instance allocates (its scratch), which a stream being captured into a CUDA graph
  // cannot have: refuse rather than invalidate the capture.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &capture) != cudaSuccess ||
      capture != cudaStreamCaptureStatusNone) {
    (void)cudaGetLastError();
    throw std::invalid_argument(
        std::string(prefix) +
        "the first call on a stream cannot be captured into a CUDA graph "
        "(Kokkos makes an instance for the stream, which allocates): call the op once on this "
        "stream, with these shapes, before the capture");
  }
  // Torch's default stream is the legacy NULL stream, Kokkos 3.4's default instance's too:
  // that one is Kokkos' own instance rather than a second one on the same stream.
  const Kokkos::Cuda default_instance;
  const bool is_default = stream == static_cast<void*>(default_instance.cuda_stream());
  auto made = c.by_stream.emplace(
      stream, is_default ? default_instance : Kokkos::Cuda(static_cast<cudaStream_t>(stream)));
  c.order.push_back(stream);
  return made.first->second;
}
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

/// Calls f(exec, Views<T, Memory>) for the call's place and value type.
template <class F>
void dispatch(const Call& c, F&& f) {
  require_ready();
  auto typed = [&](const auto& exec, auto memory) {
    using Memory = decltype(memory);
    if (c.dtype == DType::Float32)
      f(exec, Views<float, Memory>(c));
    else
      f(exec, Views<double, Memory>(c));
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
    typed(cuda_instance(c.stream), Kokkos::CudaSpace());
#else
    throw std::invalid_argument(std::string(prefix) +
                                "this build's Kokkos has no CUDA backend (CPU tensors only)");
#endif
    return;
  }
#if defined(KOKKOS_ENABLE_SERIAL)
  if (has_serial_fallback && g_owned && std::this_thread::get_id() != g_init_thread) {
    std::lock_guard<std::mutex> lock(g_serial_mutex);
    typed(Kokkos::Serial(), Kokkos::HostSpace());
    return;
  }
#endif
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

}  // namespace

// ------------------------------------------------------------------ the interface
void ensure_initialized(int host_threads, int cuda_device, const char* extra_args) {
  if (g_ready.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(g_life_mutex);
  if (g_ready.load(std::memory_order_relaxed)) return;
  if (g_finalized)
    throw std::runtime_error(
        std::string(prefix) +
        "Kokkos was finalised (at interpreter exit, or by "
        "fused_linear.finalize()); Kokkos 3.4 cannot start again in a process");
  if (Kokkos::is_initialized()) {  // the application's Kokkos: use it, leave it to its owner
    set_cuda_device();
    g_ready.store(true, std::memory_order_release);
    return;
  }
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
  Kokkos::initialize(argc, argv.data());
#if defined(KOKKOS_ENABLE_CUDA)
  cudaSetDevice(previous);  // Kokkos made its device current; the caller's stays as it was
#endif
  g_owned = true;
  set_cuda_device();
  g_init_thread = std::this_thread::get_id();
  g_ready.store(true, std::memory_order_release);
}

bool ready() { return g_ready.load(std::memory_order_acquire); }

void finalize() {
  std::lock_guard<std::mutex> lock(g_life_mutex);
  if (!g_ready.load(std::memory_order_acquire)) return;
  // Plans first (they fence their instances), then the instances, then Kokkos.
  FusedLinear::release_cached_plans();
#if defined(KOKKOS_ENABLE_CUDA)
  {
    CudaInstances& c = cuda_instances();
    std::lock_guard<std::mutex> instances_lock(c.mutex);
    for (auto& entry : c.by_stream) entry.second.fence();
    c.by_stream.clear();
    c.order.clear();
  }
#endif
  g_ready.store(false, std::memory_order_release);
  if (g_owned && Kokkos::is_initialized()) {
    Kokkos::finalize();
    g_finalized = true;
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

std::size_t run_info(const Call& c, char* text, std::size_t capacity) {
  std::string out;
  dispatch(c, [&](const auto& exec, const auto& v) {
    using T = typename std::decay_t<decltype(v.Y)>::non_const_value_type;
    const FusedLinear::RunInfo info = FusedLinear::linear_leaky_relu(
        exec, v.X, v.W, v.b, v.Y, T(c.multiplier), T(c.negative_slope), options_of(c));
    out = std::string("algorithm=") + FusedLinear::to_string(info.algorithm) +
          ";precision=" + FusedLinear::to_string(info.precision) +
          ";gemm=" + FusedLinear::to_string(info.gemm) + ";note=" + info.note;
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
  s.serial_fallback = has_serial_fallback;
  std::snprintf(s.kokkos_version, sizeof(s.kokkos_version), "%d.%d.%d", KOKKOS_VERSION / 10000,
                KOKKOS_VERSION / 100 % 100, KOKKOS_VERSION % 100);
  std::snprintf(s.host_space, sizeof(s.host_space), "%s",
                Kokkos::DefaultHostExecutionSpace::name());
#if defined(KOKKOS_ENABLE_CUDA)
  s.cuda = true;
#endif
  if (s.initialized) {
    s.host_threads = Kokkos::DefaultHostExecutionSpace().concurrency();
#if defined(KOKKOS_ENABLE_CUDA)
    s.cuda_device = g_cuda_device;
    CudaInstances& c = cuda_instances();
    std::lock_guard<std::mutex> lock(c.mutex);
    s.cached_cuda_instances = static_cast<int>(c.by_stream.size());
#endif
  }
  return s;
}

}  // namespace FusedLinearTorch
