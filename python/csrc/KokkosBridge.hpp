// SPDX-License-Identifier: Apache-2.0
/// \file KokkosBridge.hpp
/// The one interface between the PyTorch side of the extension (TorchOps.cpp) and the Kokkos
/// side (KokkosBridge.cpp). Plain types only: the two translation units never include each
/// other's headers, so PyTorch's compile flags (its _GLIBCXX_USE_CXX11_ABI, its warnings) never
/// meet Kokkos', and no std::string crosses (the two may be built with different string ABIs).
/// Errors cross as std::invalid_argument / std::runtime_error, whose layout is ABI-independent.
#ifndef FUSED_LINEAR_TORCH_KOKKOS_BRIDGE_HPP
#define FUSED_LINEAR_TORCH_KOKKOS_BRIDGE_HPP

#include <cstddef>
#include <cstdint>

namespace FusedLinearTorch {

enum class DType { Float32, Float64 };
enum class Where { Host, Cuda };

/// Where and how a call runs: the place, value type, extents and parameters every call has.
struct CallPlace {
  DType dtype = DType::Float32;
  Where where = Where::Host;
  int device = -1;         ///< CUDA device index (Where::Cuda)
  void* stream = nullptr;  ///< cudaStream_t to order the work on (Where::Cuda)
  std::int64_t m = 0, k = 0, n = 0;
  double multiplier = 1, negative_slope = 0;
  const char* algorithm = "auto";  ///< FusedLinear::algorithm_from_string's names
  std::size_t algorithm_size = 4;
  const char* precision = "strict";  ///< FusedLinear::precision_from_string's names
  std::size_t precision_size = 6;
};

/// One layer call on row-major (C-contiguous) storage: X [M,K], W [N,K], b [N], Y [M,N].
struct Call : CallPlace {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* b = nullptr;
  void* y = nullptr;
};

/// One gradient call on row-major storage: X [M,K], W [N,K], dY and `saved` [M,N] (the
/// forward's output Y, its pre-activation z, or a bool mask of z > 0), dX [M,K], dW [N,K],
/// db [N]; a null output is not computed.
struct BackwardCall : CallPlace {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* dy = nullptr;
  const void* saved = nullptr;
  void* dx = nullptr;
  void* dw = nullptr;
  void* db = nullptr;
  bool saved_is_output = true;  ///< `saved` is Y (FusedLinear::Saved::Output), else z
  bool saved_is_sign = false;   ///< `saved` is a bool mask (FusedLinear::Saved::Sign)
};

/// Initialises Kokkos unless the process already has (then it is left to its owner):
/// host_threads OpenMP/Threads workers (<= 0: Kokkos' default), CUDA device `cuda_device`
/// (< 0: the calling thread's current device). `extra_args` are more Kokkos arguments
/// (whitespace-separated, e.g. from FUSED_LINEAR_KOKKOS_ARGS). Thread-safe, idempotent; throws
/// std::runtime_error after finalize() (Kokkos 3.4's CUDA backend cannot start twice).
void ensure_initialized(int host_threads, int cuda_device, const char* extra_args);
/// Whether Kokkos is initialised and usable (one atomic load).
bool ready();
/// Throws std::runtime_error (naming fork) in a child forked after Kokkos started, whose CUDA
/// context is the parent's: call it before a CUDA tensor's op makes any CUDA call.
void check_cuda_usable();
/// Refuses new calls, waits for those of other threads still inside the library, releases the
/// cached plans and Kokkos instances, then finalises Kokkos if this extension initialised it
/// (in a forked child it releases nothing: those are the parent's). Safe to call more than once.
void finalize();

/// Runs the layer through FusedLinear::linear_leaky_relu (asynchronous on CUDA).
void run(const Call& call);
/// As run(), returning what ran (FusedLinear::RunInfo and the Kokkos execution space) as
/// "algorithm=...;precision=...;gemm=...;execution_space=...;note=..." in `text` (truncated to
/// `capacity`); returns the full length.
std::size_t run_info(const Call& call, char* text, std::size_t capacity);

/// Runs the gradient through FusedLinear::linear_leaky_relu_backward (asynchronous on CUDA).
void run_backward(const BackwardCall& call);

/// Per-call wall-clock times (microseconds, into `us[0..iters)`) of `iters` calls of
/// mode 0: FusedLinear::Plan::execute on a plan made once for `call` (the C++ floor), or
/// mode 1: the one-shot FusedLinear::linear_leaky_relu, as the op calls it.
/// With `sync`, each call is followed by a fence of its instance inside the timed region.
void time_calls(const Call& call, int mode, int iters, bool sync, double* us);
/// Waits for the work of `call`'s instance (its stream on CUDA).
void fence(const Call& call);

/// Facts for Python: what the build and the running Kokkos are.
struct Status {
  bool initialized = false;       ///< Kokkos is initialised now
  bool owned = false;             ///< ... by this extension (it will finalise it)
  bool finalized = false;         ///< finalize() has run
  bool cuda = false;              ///< Kokkos has its CUDA backend in this build
  bool forked = false;            ///< a child forked after the extension was loaded
  bool serial_fallback = false;   ///< some host calls run on Kokkos::Serial (a forked child,
                                  ///< threads other than the initialiser's on a Threads pool)
  int host_threads = 0;           ///< concurrency of the default host execution space
  int cuda_device = -1;           ///< the CUDA device Kokkos runs on
  int cached_cuda_instances = 0;  ///< Kokkos::Cuda instances kept, one per stream
  int cuda_capture_lanes = 0;     ///< streams of the library's own (each with its instance),
                                  ///< made at the first CUDA call: a call captured into a CUDA
                                  ///< graph on a stream with no instance runs on one, forked
                                  ///< from and joined back into that stream; one per capture
                                  ///< in progress at once on such streams
  char host_space[32] = {0};      ///< name of the default host execution space
  char kokkos_version[16] = {0};
};
Status status();

}  // namespace FusedLinearTorch

#endif
