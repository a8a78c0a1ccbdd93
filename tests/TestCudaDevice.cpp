// SPDX-License-Identifier: Apache-2.0
// CUDA: the device of the execution space instance, not the calling thread's current device,
// runs the layer, and the thread's current device is left as it was: a worker thread that never
// set a device; a thread that set device 0; on a machine with two GPUs, a thread with device 1
// current calling on Kokkos' device 0. Every path the build serves, every result checked (on the
// main thread, after the worker has returned).
#include <thread>
#include <vector>

#include "common/TestHelpers.hpp"

namespace {

using namespace FusedLinearTest;

#if defined(KOKKOS_ENABLE_CUDA)
using P = Problem<Kokkos::Cuda, float, Kokkos::LayoutRight>;

struct Outcome {
  std::vector<std::pair<Options, RunInfo>> runs;
  int device_before = -1, device_after = -1;
  std::string error;
};

/// In a new thread: optionally make `set_device` current, then run every request on the
/// default instance (Kokkos' device) into its own output; report the thread's current device
/// before and after. Only the library is called there.
Outcome run_in_thread(const P& p, const std::vector<P::Matrix>& outputs,
                      const std::vector<Options>& requests, int set_device) {
  Outcome out;
  std::thread worker([&] {
    try {
      if (set_device >= 0 && cudaSetDevice(set_device) != cudaSuccess) {
        out.error = "cudaSetDevice failed";
        return;
      }
      cudaGetDevice(&out.device_before);
      for (std::size_t r = 0; r < requests.size(); ++r)
        out.runs.emplace_back(
            requests[r], FusedLinear::linear_leaky_relu(Kokkos::Cuda(), p.X, p.W, p.b, outputs[r],
                                                        2.f, 0.1f, requests[r]));
      cudaGetDevice(&out.device_after);
    } catch (const std::exception& e) {
      out.error = e.what();
    }
  });
  worker.join();
  return out;
}

void check_device_handling(int set_device, int expected_device) {
  P p(37, 1030, 70, 3);
  const std::vector<Options> requests =
      served_requests(Kokkos::Cuda(), p.X, p.W, p.b, p.Y,
                      {Precision::Strict, Precision::TF32, Precision::TF32x3}, 3);
  std::vector<P::Matrix> outputs;
  for (std::size_t r = 0; r < requests.size(); ++r) {
    outputs.emplace_back("Y", p.M, p.N);
    Kokkos::deep_copy(outputs.back(), std::numeric_limits<float>::quiet_NaN());
  }
  Kokkos::fence();
  const Outcome out = run_in_thread(p, outputs, requests, set_device);
  ASSERT_TRUE(out.error.empty()) << out.error;
  EXPECT_EQ(out.device_before, expected_device);
  EXPECT_EQ(out.device_after, expected_device) << "the call changed the thread's current device";
  Kokkos::fence();
  const Reference ref = p.reference(2, 0.1);
  ASSERT_EQ(out.runs.size(), requests.size());
  for (std::size_t r = 0; r < requests.size(); ++r)
    EXPECT_TRUE(
        ref.check<float>(host_matrix(outputs[r]), product_rounding(out.runs[r].second, p.K)))
        << describe(out.runs[r].first, out.runs[r].second);
}

TEST(CudaDevice, WorkerThreadThatNeverSetADevice) {
  // A new thread's current device is 0 until it sets one (the runtime's default).
  check_device_handling(-1, 0);
}

TEST(CudaDevice, ThreadThatSetDeviceZero) {
  ASSERT_EQ(Kokkos::Cuda().cuda_device(), 0) << "the tests expect Kokkos on device 0";
  check_device_handling(0, 0);
}

TEST(CudaDevice, ThreadWithAnotherDeviceCurrent) {
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  if (count < 2)
    GTEST_SKIP() << "needs two GPUs (this machine has " << count
                 << "): a thread with device 1 current calling on Kokkos' device 0";
  ASSERT_EQ(Kokkos::Cuda().cuda_device(), 0);
  check_device_handling(1, 1);
}

// What the cost model counted in, as the plan reports it: the device's own rates (the runtime's,
// or NVML's correction), over the runtime's multiprocessors; the one-shot call's alike.
TEST(CudaDevice, PlanInfoReportsTheDevicesRates) {
  cudaDeviceProp prop;
  ASSERT_EQ(cudaGetDeviceProperties(&prop, Kokkos::Cuda().cuda_device()), cudaSuccess);
  P p(64, 256, 128, 5);
  const FusedLinear::Plan<Kokkos::Cuda, P::Matrix, P::Matrix, P::Vector, P::Matrix> plan(
      Kokkos::Cuda(), p.X, p.W, p.b, p.Y, 2.f, 0.1f);
  const FusedLinear::GpuRates& g = plan.info().gpu_rates;
  ASSERT_NE(g.source, FusedLinear::RatesSource::None) << g.note;
  ASSERT_NE(g.source, FusedLinear::RatesSource::Fitted) << g.note;
  EXPECT_EQ(g.multiprocessors, prop.multiProcessorCount);
  EXPECT_GT(g.fp32_gflops, 0);
  EXPECT_GT(g.memory_gbps, 0);
  // At most 128 lanes a multiprocessor at 3 GHz; at least 64 at 0.5 GHz.
  EXPECT_LE(g.fp32_gflops, prop.multiProcessorCount * 128 * 2 * 3.0);
  EXPECT_GE(g.fp32_gflops, prop.multiProcessorCount * 64 * 2 * 0.5);
  const FusedLinear::RunInfo one_shot =
      FusedLinear::linear_leaky_relu(Kokkos::Cuda(), p.X, p.W, p.b, p.Y, 2.f, 0.1f);
  EXPECT_EQ(one_shot.gpu_rates.fp32_gflops, g.fp32_gflops);
  EXPECT_EQ(one_shot.gpu_rates.memory_gbps, g.memory_gbps);
  EXPECT_STREQ(one_shot.gpu_rates.note, g.note);
}
#else
TEST(CudaDevice, NotACudaBuild) { GTEST_SKIP() << "CUDA builds only"; }
#endif

}  // namespace
