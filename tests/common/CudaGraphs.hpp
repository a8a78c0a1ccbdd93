// SPDX-License-Identifier: Apache-2.0
// CUDA graphs for the tests: a graph with its executable graph, and calls captured into one.
#ifndef FUSED_LINEAR_TEST_COMMON_CUDA_GRAPHS_HPP
#define FUSED_LINEAR_TEST_COMMON_CUDA_GRAPHS_HPP

#include <Kokkos_Core.hpp>

#if defined(KOKKOS_ENABLE_CUDA)
#include <exception>
#include <functional>
#include <string>

#include <cuda_runtime.h>

namespace FusedLinearTest {

/// A graph and its executable graph, destroyed together.
struct Graph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph() { reset(); }
  void reset() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    exec = nullptr, graph = nullptr;
  }
};

/// `calls` captured on `stream` (global mode); the error message of the calls or of the
/// capture, empty when they were captured and the graph instantiated into `g`.
inline std::string capture(cudaStream_t stream, Graph& g, const std::function<void()>& calls) {
  if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) != cudaSuccess)
    return "cudaStreamBeginCapture failed";
  std::string error;
  try {
    calls();
  } catch (const std::exception& e) {
    error = e.what();
  }
  const cudaError_t ended = cudaStreamEndCapture(stream, &g.graph);
  if (error.empty() && ended != cudaSuccess)
    error = std::string("the capture ended with ") + cudaGetErrorString(ended);
  (void)cudaGetLastError();
  if (error.empty() && cudaGraphInstantiate(&g.exec, g.graph, 0) != cudaSuccess)
    error = "cudaGraphInstantiate failed";
  return error;
}

}  // namespace FusedLinearTest

#endif
#endif
