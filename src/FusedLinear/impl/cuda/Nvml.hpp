// SPDX-License-Identifier: Apache-2.0
/// \file Nvml.hpp
/// What NVML tells of a CUDA device beyond the runtime's properties: whether it is a MIG
/// instance and its share of the parent GPU's memory (the runtime reports the whole GPU's bus
/// and clock for a slice), and the SM clock it is set to run at. NVML is opened at run time
/// (dlopen of libnvidia-ml.so.1: no link dependency, no nvml.h needed); where it is missing or a
/// query fails, the report says it was not read. Asked once per device per process, behind a
/// lock; never throws.
#ifndef FUSED_LINEAR_IMPL_CUDA_NVML_HPP
#define FUSED_LINEAR_IMPL_CUDA_NVML_HPP

#include <cstdio>
#include <map>
#include <mutex>

#if defined(__linux__)
#include <dlfcn.h>
#endif

namespace FusedLinear {
namespace Impl {

/// NVML's answers for one device (0: not told).
struct NvmlReport {
  /// NVML was loaded and found the device (MIG or not).
  bool read = false;
  bool mig = false;
  /// A MIG instance's memory over its parent GPU's.
  double mig_memory_share = 0;
  /// The maximum SM clock, and the application clock the SMs are set to (MHz).
  double sm_clock_max_mhz = 0, sm_clock_app_mhz = 0;
};

namespace Nvml {

// NVML's C ABI (nvml.h, stable since NVML 11): the few entry points this file calls.
struct DeviceSt;
using Device = DeviceSt*;
using Return = int;  // nvmlReturn_t: NVML_SUCCESS is 0
struct Memory {
  unsigned long long total, free, used;  // nvmlMemory_t
};
constexpr int clock_sm = 1;                         // NVML_CLOCK_SM
constexpr int clock_id_app_target = 1;              // NVML_CLOCK_ID_APP_CLOCK_TARGET
using InitFn = Return (*)();                        // nvmlInit_v2
using ByUuidFn = Return (*)(const char*, Device*);  // nvmlDeviceGetHandleByUUID
using IsMigFn = Return (*)(Device, unsigned int*);  // nvmlDeviceIsMigDeviceHandle
using ParentFn = Return (*)(Device, Device*);       // nvmlDeviceGetDeviceHandleFromMigDeviceHandle
using MemoryFn = Return (*)(Device, Memory*);       // nvmlDeviceGetMemoryInfo
using ClockFn = Return (*)(Device, int, int, unsigned int*);  // nvmlDeviceGetClock
using ClockOfFn = Return (*)(Device, int,
                             unsigned int*);  // ...GetApplicationsClock, ...MaxClockInfo

struct Library {
  bool loaded = false;
  ByUuidFn by_uuid = nullptr;
  IsMigFn is_mig = nullptr;
  ParentFn parent = nullptr;
  MemoryFn memory = nullptr;
  ClockFn clock = nullptr;
  ClockOfFn applications_clock = nullptr, max_clock = nullptr;
};

/// The library, opened and initialised once (never closed: other code of the process may use
/// it, and NVML counts its initialisations).
inline const Library& library() {
  static const Library lib = [] {
    Library l;
#if defined(__linux__)
    void* so = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (so == nullptr) return l;
    const auto sym = [so](const char* name) { return dlsym(so, name); };
    const auto init = reinterpret_cast<InitFn>(sym("nvmlInit_v2"));
    l.by_uuid = reinterpret_cast<ByUuidFn>(sym("nvmlDeviceGetHandleByUUID"));
    l.is_mig = reinterpret_cast<IsMigFn>(sym("nvmlDeviceIsMigDeviceHandle"));
    l.parent = reinterpret_cast<ParentFn>(sym("nvmlDeviceGetDeviceHandleFromMigDeviceHandle"));
    l.memory = reinterpret_cast<MemoryFn>(sym("nvmlDeviceGetMemoryInfo"));
    l.clock = reinterpret_cast<ClockFn>(sym("nvmlDeviceGetClock"));
    l.applications_clock = reinterpret_cast<ClockOfFn>(sym("nvmlDeviceGetApplicationsClock"));
    l.max_clock = reinterpret_cast<ClockOfFn>(sym("nvmlDeviceGetMaxClockInfo"));
    l.loaded = init != nullptr && l.by_uuid != nullptr && l.is_mig != nullptr && init() == 0;
#endif
    return l;
  }();
  return lib;
}

/// "GPU-" or "MIG-" and the UUID's 16 bytes as NVML spells them (8-4-4-4-12 hex digits).
inline void uuid_text(const char* prefix, const unsigned char (&b)[16], char (&out)[48]) {
  std::snprintf(out, sizeof out,
                "%s%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", prefix,
                b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
                b[13], b[14], b[15]);
}

inline NvmlReport ask(const unsigned char (&uuid)[16]) {
  NvmlReport r;
  const Library& l = library();
  if (!l.loaded) return r;
  Device h = nullptr;
  char text[48];
  // The runtime's UUID of a MIG instance is NVML's "MIG-" one (drivers from R470).
  uuid_text("MIG-", uuid, text);
  if (l.by_uuid(text, &h) != 0) {
    uuid_text("GPU-", uuid, text);
    if (l.by_uuid(text, &h) != 0) return r;
  }
  unsigned int mig = 0;
  if (l.is_mig(h, &mig) != 0) return r;
  r.read = true;
  r.mig = mig != 0;
  Device gpu = h;
  if (r.mig) {
    Memory slice = {}, whole = {};
    if (l.parent != nullptr && l.memory != nullptr && l.parent(h, &gpu) == 0 &&
        l.memory(h, &slice) == 0 && l.memory(gpu, &whole) == 0 && whole.total > 0)
      r.mig_memory_share = double(slice.total) / double(whole.total);
    else
      gpu = h;
  }
  // Clocks are the physical GPU's (a MIG instance shares them).
  unsigned int mhz = 0;
  if (l.max_clock != nullptr && l.max_clock(gpu, clock_sm, &mhz) == 0) r.sm_clock_max_mhz = mhz;
  mhz = 0;
  if ((l.clock != nullptr && l.clock(gpu, clock_sm, clock_id_app_target, &mhz) == 0) ||
      (l.applications_clock != nullptr && l.applications_clock(gpu, clock_sm, &mhz) == 0))
    r.sm_clock_app_mhz = mhz;
  return r;
}

}  // namespace Nvml

/// NVML's report for the CUDA device `device` of UUID `uuid` (cudaDeviceProp::uuid), asked once
/// per device per process.
inline NvmlReport nvml_report(int device, const unsigned char (&uuid)[16]) {
  static std::mutex lock;
  static std::map<int, NvmlReport> reports;
  std::lock_guard<std::mutex> guard(lock);
  const auto found = reports.find(device);
  if (found != reports.end()) return found->second;
  const NvmlReport r = Nvml::ask(uuid);
  try {
    reports.emplace(device, r);
  } catch (...) {  // no memory to remember it: asked again next time
  }
  return r;
}

}  // namespace Impl
}  // namespace FusedLinear

#endif
