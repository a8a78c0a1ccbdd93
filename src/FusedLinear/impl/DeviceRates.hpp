// SPDX-License-Identifier: Apache-2.0
/// \file DeviceRates.hpp
/// From what a GPU reports (DeviceReport: its runtime's properties and, on CUDA, what NVML adds)
/// to the rates the GPU cost model counts in (Facts::fp32_gflops, memory_gbps) and whether the
/// fp32 rate bounds strict products (Facts::fp32_bound). Plain C++ without Kokkos: Common.hpp
/// (device_report) reads the report, this file decides, tests/dispatch/TestDeviceRates.cpp
/// checks it without a GPU.
#ifndef FUSED_LINEAR_IMPL_DEVICE_RATES_HPP
#define FUSED_LINEAR_IMPL_DEVICE_RATES_HPP

#include <cstdint>

#include "FusedLinear/Types.hpp"
#include "FusedLinear/impl/Facts.hpp"

namespace FusedLinear {
namespace Impl {

/// What a GPU tells of itself, as read (0 where it does not say).
struct DeviceReport {
  Backend backend = Backend::Host;
  /// CUDA's compute capability (0 elsewhere).
  int cc_major = 0, cc_minor = 0;
  std::int64_t multiprocessors = 0;
  /// The runtime's peak SM clock and memory clock (kHz) and the memory bus width (bits).
  double clock_khz = 0, memory_clock_khz = 0;
  int memory_bus_bits = 0;
  /// NVML (CUDA): not asked (other backends), unavailable (no library, or a query failed), read.
  enum class Nvml { NotAsked, Unavailable, Read } nvml = Nvml::NotAsked;
  /// A MIG instance, and its share of the parent GPU's memory (the memory slices carry the
  /// bandwidth; 0: unknown).
  bool mig = false;
  double mig_memory_share = 0;
  /// NVML's maximum SM clock and the application clock the SMs run at (MHz; 0: unknown).
  double sm_clock_max_mhz = 0, sm_clock_app_mhz = 0;
};

/// FP32 lanes per multiprocessor: 64 on compute capability 6.0, 7.x and 8.0, 128 on 5.x,
/// 6.1–6.2, 8.6–8.9, 9.0 and from 10 on; 64 per AMD compute unit; 0 where unknown.
inline int fp32_lanes(const DeviceReport& r) {
  if (r.backend == Backend::Hip) return 64;
  if (r.backend != Backend::Cuda) return 0;
  switch (r.cc_major) {
    case 5: return 128;
    case 6: return r.cc_minor == 0 ? 64 : 128;
    case 7: return 64;
    case 8: return r.cc_minor == 0 ? 64 : 128;
    default: return r.cc_major >= 9 ? 128 : 0;
  }
}

/// Fills f's rates from the report: lanes × 2 flops (a multiply-add) a cycle at the SM clock
/// (the application clock where NVML says it is below the maximum), two transfers a memory
/// clock over the bus (a MIG slice's share of it). Where a rate stays unknown it is 0 and the
/// note says why (gpu_rates then counts in the fitted device's).
inline void set_device_rates(const DeviceReport& r, Facts& f) {
  f.multiprocessors = r.multiprocessors;
  f.fp32_gflops = f.memory_gbps = 0;
  f.fp32_bound = false;
  f.rates_source = RatesSource::None;
  f.rates_note = "";
  if (r.backend == Backend::Host) return;
  const char* unknown = r.backend != Backend::Cuda && r.backend != Backend::Hip
                            ? "rates are read on CUDA and HIP only"
                        : fp32_lanes(r) == 0 ? "no fp32 lane count is known for this device"
                        : r.clock_khz <= 0   ? "the device reports no SM clock"
                        : r.memory_clock_khz <= 0 || r.memory_bus_bits <= 0
                            ? "the device reports no memory clock or bus width"
                        : r.multiprocessors <= 0 ? "the device reports no multiprocessors"
                                                 : nullptr;
  if (unknown != nullptr) {
    f.rates_source = RatesSource::Fitted;
    f.rates_note = unknown;
    return;
  }
  const double max_mhz = r.sm_clock_max_mhz > 0 ? r.sm_clock_max_mhz : r.clock_khz * 1e-3;
  const bool lower_clock = r.sm_clock_app_mhz > 0 && r.sm_clock_app_mhz < max_mhz;
  const double clock_ghz = lower_clock ? r.sm_clock_app_mhz * 1e-3 : r.clock_khz * 1e-6;
  const bool slice = r.mig && r.mig_memory_share > 0 && r.mig_memory_share < 1;
  f.fp32_gflops = double(r.multiprocessors) * fp32_lanes(r) * 2 * clock_ghz;
  f.memory_gbps = 2.0 * r.memory_clock_khz * 1e-6 * r.memory_bus_bits / 8;
  if (slice) f.memory_gbps *= r.mig_memory_share;
  f.fp32_bound = r.backend == Backend::Cuda && r.cc_major < 10;
  f.rates_source = slice || lower_clock ? RatesSource::Corrected : RatesSource::Device;
  if (r.backend == Backend::Hip)
    f.rates_note = "as the HIP runtime reports them, 64 fp32 lanes a compute unit";
  else if (r.nvml != DeviceReport::Nvml::Read)
    f.rates_note =
        "as the CUDA runtime reports them; NVML could not be read, so a MIG slice (whose "
        "bandwidth the runtime reports as the whole GPU's) and a lower clock were not checked";
  else if (slice && lower_clock)
    f.rates_note =
        "NVML: the memory bandwidth scaled to the MIG slice's share of the GPU's memory, the "
        "fp32 rate at the application clock, below the maximum";
  else if (slice)
    f.rates_note = "NVML: the memory bandwidth scaled to the MIG slice's share of the GPU's memory";
  else if (lower_clock)
    f.rates_note = "NVML: the fp32 rate at the application clock, below the maximum";
  else if (r.mig)
    f.rates_note =
        "as the CUDA runtime reports them; a MIG slice whose share of the memory NVML did not "
        "tell: its bandwidth is the whole GPU's";
  else
    f.rates_note = "as the CUDA runtime reports them; NVML: no MIG slice, no lower clock";
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
