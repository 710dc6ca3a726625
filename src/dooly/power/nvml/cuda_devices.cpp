#include "dooly/power/nvml/cuda_devices.hpp"

#include <charconv>
#include <cstdlib>

#include <fmt/format.h>

#include "dooly/power/dynamic_library.hpp"

namespace dooly::power::nvml {

namespace {
using CuResult = int;
constexpr CuResult kCudaSuccess = 0;
constexpr CuResult kCudaErrorNoDevice = 100;
}  // namespace

CudaDevices list_cuda_devices() noexcept {
  CudaDevices out;
  try {
    const char* override_file = std::getenv("DOOLY_LIBCUDA");
    const std::string file = override_file && *override_file ? override_file : "libcuda.so.1";
    // libcuda is never unloaded once cuInit ran: the driver keeps state that outlives a dlclose.
    DynamicLibrary lib(file, /*keep_loaded=*/true);
    if (!lib.loaded()) {
      out.why_not = fmt::format("cannot load {}: {}", file, lib.error());
      return out;
    }
    auto cu_init = lib.symbol<CuResult (*)(unsigned)>("cuInit");
    auto cu_count = lib.symbol<CuResult (*)(int*)>("cuDeviceGetCount");
    auto cu_get = lib.symbol<CuResult (*)(int*, int)>("cuDeviceGet");
    auto cu_pci = lib.symbol<CuResult (*)(char*, int, int)>("cuDeviceGetPCIBusId");
    if (!cu_init || !cu_count || !cu_get || !cu_pci) {
      out.why_not = fmt::format("{} lacks the CUDA driver functions dooly needs", file);
      return out;
    }
    const CuResult init = cu_init(0);
    if (init == kCudaErrorNoDevice) {  // CUDA sees no GPU (e.g. CUDA_VISIBLE_DEVICES hides them all)
      out.from_libcuda = true;
      return out;
    }
    if (init != kCudaSuccess) {
      out.why_not = fmt::format("cuInit failed with CUDA error {}", init);
      return out;
    }
    int count = 0;
    if (CuResult rc = cu_count(&count); rc != kCudaSuccess) {
      out.why_not = fmt::format("cuDeviceGetCount failed with CUDA error {}", rc);
      return out;
    }
    for (int ordinal = 0; ordinal < count; ++ordinal) {
      int dev = 0;
      char bus_id[64] = {};
      CuResult rc = cu_get(&dev, ordinal);
      if (rc == kCudaSuccess) rc = cu_pci(bus_id, sizeof bus_id, dev);
      if (rc != kCudaSuccess) {
        out.pci_bus_ids.clear();
        out.why_not = fmt::format("cuDeviceGetPCIBusId for CUDA device {} failed with CUDA error {}", ordinal, rc);
        return out;
      }
      bus_id[sizeof bus_id - 1] = '\0';
      out.pci_bus_ids.emplace_back(bus_id);
    }
    out.from_libcuda = true;
  } catch (...) {
    out = CudaDevices{};
    out.why_not = "out of memory while listing CUDA devices";
  }
  return out;
}

std::vector<unsigned> ordinals_to_nvml_indices(unsigned nvml_count, const char* cvd, std::string& note) {
  std::vector<unsigned> map;
  auto identity = [&] {
    map.clear();
    for (unsigned i = 0; i < nvml_count; ++i) map.push_back(i);
  };
  if (!cvd) {
    identity();
    note = "CUDA_VISIBLE_DEVICES is unset: assuming CUDA ordinal i is NVML index i";
    return map;
  }
  const std::string s(cvd);
  if (s.empty()) {
    note = "CUDA_VISIBLE_DEVICES is empty: no GPU is visible to CUDA";
    return map;
  }
  // Entries must all be integers for the mapping to mean anything; UUIDs and MIG names are not handled here.
  bool all_integers = true;
  std::vector<long> entries;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    std::string item = s.substr(start, comma - start);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    long v = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || p != item.data() + item.size()) {
      all_integers = false;
      break;
    }
    entries.push_back(v);
    start = comma + 1;
  }
  if (!all_integers) {
    identity();
    note =
        fmt::format("CUDA_VISIBLE_DEVICES='{}' is not a list of integers: assuming CUDA ordinal i is NVML index i", s);
    return map;
  }
  for (long v : entries) {  // like CUDA: stop at the first invalid or repeated index
    if (v < 0 || v >= static_cast<long>(nvml_count)) break;
    bool repeated = false;
    for (unsigned m : map) repeated |= (m == static_cast<unsigned>(v));
    if (repeated) break;
    map.push_back(static_cast<unsigned>(v));
  }
  note = fmt::format("mapping CUDA ordinals to NVML indices through CUDA_VISIBLE_DEVICES='{}'", s);
  return map;
}

}  // namespace dooly::power::nvml
