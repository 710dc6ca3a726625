// A stub libcuda.so.1 for tests: cuInit, cuDeviceGetCount, cuDeviceGet and cuDeviceGetPCIBusId over the devices
// of the stub NVML script (stub_script.hpp). CUDA's enumeration is `cuda_order` (NVML indices); like the real
// driver, cuInit applies CUDA_VISIBLE_DEVICES (integers only; parsing stops at the first invalid entry) and
// returns CUDA_ERROR_NO_DEVICE when nothing is left. Like the real driver (driver 580, seen on an H200), a cuInit
// made while the driver is already inside cuInit -- a CUDA injection's InitializeInjection calling back -- fails
// and leaves every later cuInit failing too ("initialization error"): a test that plays the driver sets
// DOOLY_STUB_CUDA_INSIDE_INIT=1 around its call of InitializeInjection.
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "stub_script.hpp"

namespace {

constexpr int CUDA_SUCCESS = 0, CUDA_ERROR_INVALID_VALUE = 1, CUDA_ERROR_NOT_INITIALIZED = 3,
              CUDA_ERROR_NO_DEVICE = 100, CUDA_ERROR_INVALID_DEVICE = 101, CUDA_ERROR_UNKNOWN = 999;

std::mutex mu;
bool initialised = false;
bool poisoned = false;  // cuInit was called from inside cuInit: it fails from then on
std::vector<std::string> visible;  // PCI bus id per CUDA ordinal

}  // namespace

extern "C" {

int cuInit(unsigned int flags) {
  try {
    std::lock_guard<std::mutex> lock(mu);
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    const char* inside = std::getenv("DOOLY_STUB_CUDA_INSIDE_INIT");
    if (inside && std::string(inside) == "1") poisoned = true;
    if (poisoned) return CUDA_ERROR_NOT_INITIALIZED;  // the runtime says "initialization error"
    stub::Script s;
    std::string error;
    if (!stub::load_script(s, error)) return CUDA_ERROR_UNKNOWN;
    if (s.cuda_init_fail) return s.cuda_init_fail;
    std::vector<int> physical = s.cuda_order;  // NVML index per physical CUDA ordinal
    std::vector<int> chosen;
    if (const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES")) {
      std::string list(cvd);
      size_t start = 0;
      while (start <= list.size()) {
        size_t comma = list.find(',', start);
        if (comma == std::string::npos) comma = list.size();
        const std::string item = list.substr(start, comma - start);
        char* end = nullptr;
        const long v = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || v < 0 || v >= static_cast<long>(physical.size())) break;
        chosen.push_back(physical[static_cast<size_t>(v)]);
        start = comma + 1;
      }
    } else {
      chosen = physical;
    }
    visible.clear();
    for (int nvml_index : chosen) visible.push_back(s.devices.at(static_cast<size_t>(nvml_index)).pci_bus_id);
    initialised = true;
    return visible.empty() ? CUDA_ERROR_NO_DEVICE : CUDA_SUCCESS;
  } catch (...) {
    return CUDA_ERROR_UNKNOWN;
  }
}

int cuDeviceGetCount(int* count) {
  std::lock_guard<std::mutex> lock(mu);
  if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
  *count = static_cast<int>(visible.size());
  return CUDA_SUCCESS;
}

int cuDeviceGet(int* device, int ordinal) {
  std::lock_guard<std::mutex> lock(mu);
  if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (ordinal < 0 || ordinal >= static_cast<int>(visible.size())) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

int cuDeviceGetPCIBusId(char* bus_id, int len, int device) {
  std::lock_guard<std::mutex> lock(mu);
  if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
  if (device < 0 || device >= static_cast<int>(visible.size())) return CUDA_ERROR_INVALID_DEVICE;
  if (len <= static_cast<int>(visible[static_cast<size_t>(device)].size())) return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(bus_id, static_cast<size_t>(len), "%s", visible[static_cast<size_t>(device)].c_str());
  return CUDA_SUCCESS;
}

}  // extern "C"
