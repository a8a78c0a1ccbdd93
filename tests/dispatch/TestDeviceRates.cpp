// SPDX-License-Identifier: Apache-2.0
// The device's rates the GPU cost model counts in (DeviceRates.hpp, rules/GpuModel.hpp):
// from a device report as GatherFacts reads it, without a GPU. FP32 lanes by compute
// capability, a MIG slice's bandwidth scaled by its share of the memory, a lower application
// clock counted with, an unknown rate taken with all of the fitted device's, and from compute
// capability 10 on a rate for the model but no bound for Planning::Measure.
#include <gtest/gtest.h>

#include <string>

#include "FusedLinear/impl/DeviceRates.hpp"
#include "FusedLinear/impl/Dispatch.hpp"
#include "FusedLinear/impl/Planner.hpp"

namespace {

namespace Impl = FusedLinear::Impl;
using FusedLinear::Algorithm;
using FusedLinear::Precision;
using FusedLinear::RatesSource;
using Impl::DeviceReport;
using Impl::Facts;

// A CUDA device's report: `sms` multiprocessors at 1.5 GHz, 1.2 GHz memory on a 5120-bit bus,
// NVML read and telling nothing to correct.
DeviceReport cuda_report(int major, int minor, std::int64_t sms = 100) {
  DeviceReport r;
  r.backend = Impl::Backend::Cuda;
  r.cc_major = major, r.cc_minor = minor;
  r.multiprocessors = sms;
  r.clock_khz = 1.5e6;
  r.memory_clock_khz = 1.2e6;
  r.memory_bus_bits = 5120;
  r.nvml = DeviceReport::Nvml::Read;
  return r;
}

Facts facts_of(const DeviceReport& r) {
  Facts f;
  f.backend = r.backend;
  Impl::set_device_rates(r, f);
  return f;
}

TEST(DeviceRates, Fp32LanesByComputeCapability) {
  const std::pair<int, int> half[] = {{6, 0}, {7, 0}, {7, 5}, {8, 0}};
  const std::pair<int, int> full[] = {{5, 2}, {6, 1}, {8, 6}, {8, 9}, {9, 0}, {10, 0}, {12, 0}};
  for (auto cc : half) EXPECT_EQ(Impl::fp32_lanes(cuda_report(cc.first, cc.second)), 64);
  for (auto cc : full) EXPECT_EQ(Impl::fp32_lanes(cuda_report(cc.first, cc.second)), 128);
  // An A100-like cc 8.0 at the same multiprocessors and clock: half a cc 8.6's rate.
  const Facts a100 = facts_of(cuda_report(8, 0)), ga102 = facts_of(cuda_report(8, 6));
  EXPECT_DOUBLE_EQ(ga102.fp32_gflops, 100 * 128 * 2 * 1.5);
  EXPECT_DOUBLE_EQ(a100.fp32_gflops, ga102.fp32_gflops / 2);
  EXPECT_DOUBLE_EQ(a100.memory_gbps, 2 * 1.2 * 5120 / 8);
  EXPECT_EQ(a100.multiprocessors, 100);
  const FusedLinear::GpuRates g = Impl::gpu_rates(a100);
  EXPECT_EQ(g.source, RatesSource::Device);
  EXPECT_DOUBLE_EQ(g.fp32_gflops, a100.fp32_gflops);
  EXPECT_DOUBLE_EQ(g.multiprocessors, 100);
}

TEST(DeviceRates, MigSliceBandwidthScaledByItsMemoryShare) {
  DeviceReport r = cuda_report(8, 0, 14);
  r.mig = true;
  r.mig_memory_share = 0.125;  // a 1g slice of an 80 GB A100
  const Facts f = facts_of(r), whole = facts_of(cuda_report(8, 0, 14));
  EXPECT_DOUBLE_EQ(f.memory_gbps, whole.memory_gbps * 0.125);
  EXPECT_DOUBLE_EQ(f.fp32_gflops, whole.fp32_gflops) << "the slice's own multiprocessors";
  const FusedLinear::GpuRates g = Impl::gpu_rates(f);
  EXPECT_EQ(g.source, RatesSource::Corrected);
  EXPECT_NE(std::string(g.note).find("MIG"), std::string::npos) << g.note;
}

TEST(DeviceRates, LowerApplicationClockCounted) {
  DeviceReport r = cuda_report(9, 0, 132);
  r.clock_khz = 1.98e6;
  r.sm_clock_max_mhz = 1980;
  r.sm_clock_app_mhz = 1500;
  const Facts f = facts_of(r);
  EXPECT_DOUBLE_EQ(f.fp32_gflops, 132 * 128 * 2 * 1.5);
  EXPECT_EQ(Impl::gpu_rates(f).source, RatesSource::Corrected);
  r.sm_clock_app_mhz = 1980;  // at the maximum: nothing to correct
  EXPECT_DOUBLE_EQ(facts_of(r).fp32_gflops, 132 * 128 * 2 * 1.98);
  EXPECT_EQ(Impl::gpu_rates(facts_of(r)).source, RatesSource::Device);
}

TEST(DeviceRates, NvmlMissingKeepsTheRuntimesRatesAndSaysSo) {
  DeviceReport r = cuda_report(9, 0, 132);
  r.nvml = DeviceReport::Nvml::Unavailable;
  const Facts f = facts_of(r);
  EXPECT_DOUBLE_EQ(f.memory_gbps, 2 * 1.2 * 5120 / 8);
  const FusedLinear::GpuRates g = Impl::gpu_rates(f);
  EXPECT_EQ(g.source, RatesSource::Device);
  EXPECT_NE(std::string(g.note).find("MIG"), std::string::npos) << g.note;
}

// A rate the device does not tell: the fitted device's rates and its multiprocessors, all of
// them, never the device's count with another device's rates.
TEST(DeviceRates, UnknownRateTakesEveryFittedRate) {
  DeviceReport r = cuda_report(9, 0, 78);
  r.memory_bus_bits = 0;
  const Facts f = facts_of(r);
  EXPECT_EQ(f.multiprocessors, 78) << "the kernels still use the device's count";
  const FusedLinear::GpuRates g = Impl::gpu_rates(f);
  EXPECT_EQ(g.source, RatesSource::Fitted);
  EXPECT_DOUBLE_EQ(g.multiprocessors, Impl::GpuRule::fitted_multiprocessors);
  EXPECT_DOUBLE_EQ(g.fp32_gflops, Impl::GpuRule::fitted_fp32_gflops);
  EXPECT_DOUBLE_EQ(g.memory_gbps, Impl::GpuRule::fitted_memory_gbps);
  EXPECT_NE(std::string(g.note).find("memory"), std::string::npos) << g.note;
  // The terms count in the fitted device's rates alike.
  Facts fitted = f;
  fitted.multiprocessors = std::int64_t(Impl::GpuRule::fitted_multiprocessors);
  fitted.fp32_gflops = Impl::GpuRule::fitted_fp32_gflops;
  fitted.memory_gbps = Impl::GpuRule::fitted_memory_gbps;
  const Impl::Shape s{4096, 4096, 4096};
  for (Algorithm a : {Algorithm::Fused, Algorithm::FusedSkinny, Algorithm::Vendor})
    for (int i = 0; i < Impl::GpuTerms::count; ++i)
      EXPECT_DOUBLE_EQ(Impl::gpu_terms(a, s, f).term[i], Impl::gpu_terms(a, s, fitted).term[i])
          << FusedLinear::to_string(a) << " term " << i;
  // A compute capability of unknown lanes, and a device no rates are read on, likewise.
  EXPECT_EQ(Impl::gpu_rates(facts_of(cuda_report(3, 5))).source, RatesSource::Fitted);
  DeviceReport sycl;
  sycl.backend = Impl::Backend::Sycl;
  sycl.multiprocessors = 64;
  EXPECT_EQ(Impl::gpu_rates(facts_of(sycl)).source, RatesSource::Fitted);
}

// HIP: the device's own rates, 64 lanes a compute unit; no bound for Measure.
TEST(DeviceRates, HipReadsItsOwnRates) {
  DeviceReport r;
  r.backend = Impl::Backend::Hip;
  r.multiprocessors = 110;
  r.clock_khz = 1.7e6;
  r.memory_clock_khz = 1.6e6;
  r.memory_bus_bits = 4096;
  const Facts f = facts_of(r);
  EXPECT_DOUBLE_EQ(f.fp32_gflops, 110 * 64 * 2 * 1.7);
  EXPECT_DOUBLE_EQ(f.memory_gbps, 2 * 1.6 * 4096 / 8);
  EXPECT_FALSE(f.fp32_bound);
  EXPECT_EQ(Impl::gpu_rates(f).source, RatesSource::Device);
}

// From compute capability 10 on: the cost model counts in the rate, Measure bounds nothing
// (cuBLAS may emulate fp32 on the tensor cores).
TEST(DeviceRates, Blackwell128LanesButNoMeasureBound) {
  const Facts b = facts_of(cuda_report(10, 0, 148)), h = facts_of(cuda_report(9, 0, 148));
  EXPECT_DOUBLE_EQ(b.fp32_gflops, 148 * 128 * 2 * 1.5);
  EXPECT_DOUBLE_EQ(Impl::gpu_rates(b).fp32_gflops, b.fp32_gflops);
  EXPECT_FALSE(b.fp32_bound);
  EXPECT_TRUE(h.fp32_bound);
  const Impl::Shape s{1024, 8192, 8192};
  const Impl::Choice strict{Algorithm::Vendor, Precision::Strict, 0};
  EXPECT_EQ(Impl::compute_bound_ms(strict, s, b), 0);
  EXPECT_GT(Impl::compute_bound_ms(strict, s, h), 0);
}

// What a plan reports: the rates auto counted in and where they came from; nothing on the host.
TEST(DeviceRates, RunInfoSaysWhatTheModelAssumed) {
  Facts f = facts_of(cuda_report(9, 0, 132));
  f.float_views = true;
  f.blas = FusedLinear::Gemm::Cublas;
  const Impl::Decision d =
      Impl::resolve({Algorithm::Auto, Precision::Strict, false}, {64, 4096, 4096}, f, "test");
  EXPECT_EQ(d.gpu_rates.source, RatesSource::Device);
  EXPECT_DOUBLE_EQ(d.gpu_rates.multiprocessors, 132);
  EXPECT_DOUBLE_EQ(d.gpu_rates.fp32_gflops, f.fp32_gflops);
  EXPECT_DOUBLE_EQ(d.gpu_rates.memory_gbps, f.memory_gbps);
  Facts host;
  host.blas = FusedLinear::Gemm::KokkosKernelsNative;
  const Impl::Decision h =
      Impl::resolve({Algorithm::Auto, Precision::Strict, false}, {64, 64, 64}, host, "test");
  EXPECT_EQ(h.gpu_rates.source, RatesSource::None);
  EXPECT_EQ(h.gpu_rates.fp32_gflops, 0);
  EXPECT_STREQ(FusedLinear::to_string(RatesSource::Fitted), "fitted");
}

}  // namespace
