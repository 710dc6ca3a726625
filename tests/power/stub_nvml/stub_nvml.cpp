// A stub libnvidia-ml.so.1 for tests: the NVML functions dooly uses, serving the scripted devices and power
// trace of stub_script.hpp (DOOLY_STUB_NVML_SCRIPT, read at the first nvmlInit_v2). Its ABI types are written
// here from NVML's documented layout, independently of dooly's own declarations, so a layout slip on either
// side shows up as wrong values in the tests.
#include <sys/time.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "stub_script.hpp"

extern "C" {

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef union {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  unsigned short usVal;
} nvmlValue_t;
typedef struct {
  unsigned long long timeStamp;
  nvmlValue_t sampleValue;
} nvmlSample_t;
typedef struct {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  int valueType;
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
} nvmlFieldValue_t;
typedef struct {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;

}  // extern "C"

static_assert(sizeof(nvmlFieldValue_t) == 40);
static_assert(offsetof(nvmlFieldValue_t, value) == 32);
static_assert(sizeof(nvmlSample_t) == 16);

namespace {

constexpr nvmlReturn_t SUCCESS = 0, UNINITIALIZED = 1, INVALID_ARGUMENT = 2, NOT_SUPPORTED = 3, NOT_FOUND = 6,
                       INSUFFICIENT_SIZE = 7, GPU_IS_LOST = 15, UNKNOWN = 999;
constexpr unsigned FIELD_POWER_INSTANT = 186;
constexpr int VALUE_UNSIGNED_INT = 1;
constexpr int MAX_DEVICES = 16;

struct DeviceSlot {
  int index;
};

struct State {
  std::mutex mu;
  int init_count = 0;
  stub::Script script;
  long long init_wall_us = 0;
  long reading_calls = 0;
  DeviceSlot slots[MAX_DEVICES];
} g;

long long wall_us() {
  timeval tv;
  gettimeofday(&tv, nullptr);
  return static_cast<long long>(tv.tv_sec) * 1000000 + tv.tv_usec;
}

double now_ms() { return static_cast<double>(wall_us() - g.init_wall_us) / 1000.0; }

double field_boundary_ms() {
  return std::floor(now_ms() / g.script.field_period_ms) * g.script.field_period_ms;
}

// Resolves a handle and applies the lost-GPU switch; counts reading calls.
nvmlReturn_t device(nvmlDevice_t h, const stub::Device*& out, bool reading) {
  if (g.init_count == 0) return UNINITIALIZED;
  auto* slot = reinterpret_cast<DeviceSlot*>(h);
  if (slot < g.slots || slot >= g.slots + MAX_DEVICES || slot->index >= static_cast<int>(g.script.devices.size()))
    return INVALID_ARGUMENT;
  if (g.script.lost_after >= 0 && g.reading_calls >= g.script.lost_after) return GPU_IS_LOST;
  if (reading) ++g.reading_calls;
  out = &g.script.devices[static_cast<size_t>(slot->index)];
  return SUCCESS;
}

unsigned mw(double w) { return static_cast<unsigned>(std::llround(w * 1000.0)); }

template <typename F>
nvmlReturn_t guarded(F&& f) noexcept {
  try {
    std::lock_guard<std::mutex> lock(g.mu);
    return f();
  } catch (...) {
    return UNKNOWN;
  }
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlInit_v2(void) {
  return guarded([]() -> nvmlReturn_t {
    if (g.init_count == 0) {
      stub::Script s;
      std::string error;
      if (!stub::load_script(s, error)) return UNKNOWN;
      if (s.init_fail) return s.init_fail;
      g.script = std::move(s);
      g.init_wall_us = wall_us();
      g.reading_calls = 0;
      for (int i = 0; i < MAX_DEVICES; ++i) g.slots[i].index = i;
    }
    ++g.init_count;
    return SUCCESS;
  });
}

// For tests: how many nvmlInit_v2 calls are not yet matched by nvmlShutdown.
int stub_nvml_init_count(void) {
  std::lock_guard<std::mutex> lock(g.mu);
  return g.init_count;
}

nvmlReturn_t nvmlShutdown(void) {
  return guarded([]() -> nvmlReturn_t {
    if (g.init_count == 0) return UNINITIALIZED;
    --g.init_count;
    return SUCCESS;
  });
}

const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case 0: return "stub-nvml: Success";
    case 1: return "stub-nvml: Uninitialized";
    case 2: return "stub-nvml: Invalid Argument";
    case 3: return "stub-nvml: Not Supported";
    case 4: return "stub-nvml: Insufficient Permissions";
    case 6: return "stub-nvml: Not Found";
    case 7: return "stub-nvml: Insufficient Size";
    case 9: return "stub-nvml: Driver Not Loaded";
    case 15: return "stub-nvml: GPU is lost";
    case 18: return "stub-nvml: RM has detected an NVML/RM version mismatch";
    default: return "stub-nvml: Unknown Error";
  }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  return guarded([&]() -> nvmlReturn_t {
    if (g.init_count == 0) return UNINITIALIZED;
    *count = static_cast<unsigned>(g.script.devices.size());
    return SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* h) {
  return guarded([&]() -> nvmlReturn_t {
    if (g.init_count == 0) return UNINITIALIZED;
    if (index >= g.script.devices.size()) return INVALID_ARGUMENT;
    *h = reinterpret_cast<nvmlDevice_t>(&g.slots[index]);
    return SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, nvmlDevice_t* h) {
  return guarded([&]() -> nvmlReturn_t {
    if (g.init_count == 0) return UNINITIALIZED;
    for (size_t i = 0; i < g.script.devices.size(); ++i)
      if (stub::same_pci_bus_id(bus_id, g.script.devices[i].pci_bus_id)) {
        *h = reinterpret_cast<nvmlDevice_t>(&g.slots[i]);
        return SUCCESS;
      }
    return NOT_FOUND;
  });
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t h, nvmlPciInfo_t* pci) {
  return guarded([&]() -> nvmlReturn_t {
    const stub::Device* d = nullptr;
    if (nvmlReturn_t rc = device(h, d, false)) return rc;
    std::memset(pci, 0, sizeof *pci);
    std::snprintf(pci->busId, sizeof pci->busId, "%s", d->pci_bus_id.c_str());
    std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%s", d->pci_bus_id.c_str());
    return SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t h, char* name, unsigned int length) {
  return guarded([&]() -> nvmlReturn_t {
    const stub::Device* d = nullptr;
    if (nvmlReturn_t rc = device(h, d, false)) return rc;
    if (d->name.size() + 1 > length) return INSUFFICIENT_SIZE;
    std::memcpy(name, d->name.c_str(), d->name.size() + 1);
    return SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t h, int type, unsigned long long last_seen, int* value_type,
                                  unsigned int* count, nvmlSample_t* samples) {
  return guarded([&]() -> nvmlReturn_t {
    const stub::Device* d = nullptr;
    if (nvmlReturn_t rc = device(h, d, true)) return rc;
    if (g.script.samples_not_supported) return NOT_SUPPORTED;
    if (type != 0 || !count) return INVALID_ARGUMENT;
    const double period = g.script.sample_period_ms;
    const long k_first = static_cast<long>(std::ceil(-g.script.history_ms / period));
    const long k_last = static_cast<long>(std::floor(now_ms() / period));
    std::vector<nvmlSample_t> out;
    for (long k = std::max(k_first, k_last - g.script.buffer_samples + 1); k <= k_last; ++k) {
      const double t = static_cast<double>(k) * period;
      const unsigned long long ts =
          static_cast<unsigned long long>(g.init_wall_us + static_cast<long long>(std::llround(t * 1000.0)));
      if (ts <= last_seen) continue;
      nvmlSample_t s{};
      s.timeStamp = ts;
      s.sampleValue.uiVal = mw(d->trace.power_w(t));
      out.push_back(s);
    }
    if (value_type) *value_type = VALUE_UNSIGNED_INT;
    if (!samples) {  // like driver 580: the null-buffer call reports the buffer's capacity, whatever is new
      *count = static_cast<unsigned>(g.script.buffer_samples);
      return SUCCESS;
    }
    if (out.empty()) return NOT_FOUND;
    // Like driver 580, a buffer too small is filled and SUCCESS returned (the stub keeps the oldest samples).
    const size_t n = std::min<size_t>(*count, out.size());
    std::memcpy(samples, out.data(), n * sizeof(nvmlSample_t));
    *count = static_cast<unsigned>(n);
    return SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t h, int n, nvmlFieldValue_t* values) {
  return guarded([&]() -> nvmlReturn_t {
    const stub::Device* d = nullptr;
    if (nvmlReturn_t rc = device(h, d, true)) return rc;
    const double b = field_boundary_ms();
    for (int i = 0; i < n; ++i) {
      nvmlFieldValue_t& v = values[i];
      v.latencyUsec = 0;
      if (v.fieldId != FIELD_POWER_INSTANT || g.script.field_not_supported) {
        v.nvmlReturn = NOT_SUPPORTED;
        continue;
      }
      v.nvmlReturn = SUCCESS;
      v.timestamp = g.init_wall_us + static_cast<long long>(std::llround(b * 1000.0));
      v.valueType = VALUE_UNSIGNED_INT;
      v.value.uiVal = mw(d->trace.power_w(b));
    }
    return SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t h, unsigned int* power_mw) {
  return guarded([&]() -> nvmlReturn_t {
    const stub::Device* d = nullptr;
    if (nvmlReturn_t rc = device(h, d, true)) return rc;
    if (g.script.power_usage_not_supported) return NOT_SUPPORTED;
    const double b = field_boundary_ms();
    *power_mw = mw(d->trace.integral_wms(b - 1000.0, b) / 1000.0);
    return SUCCESS;
  });
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t h, unsigned long long* energy_mj) {
  return guarded([&]() -> nvmlReturn_t {
    const stub::Device* d = nullptr;
    if (nvmlReturn_t rc = device(h, d, true)) return rc;
    if (g.script.energy_not_supported) return NOT_SUPPORTED;
    const double b = field_boundary_ms();
    *energy_mj = static_cast<unsigned long long>(std::llround(g.script.energy_base_mj + d->trace.integral_wms(0, b)));
    return SUCCESS;
  });
}

}  // extern "C"
