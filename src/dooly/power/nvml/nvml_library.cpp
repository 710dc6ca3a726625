#include "dooly/power/nvml/nvml_library.hpp"

#include <fmt/format.h>

#include "dooly/common/env.hpp"

namespace dooly::power::nvml {

namespace {
constexpr const char* kDefaultFile = "libnvidia-ml.so.1";

template <typename Fn>
void resolve(const DynamicLibrary& lib, Fn& slot, const char* name, bool required) {
  slot = lib.symbol<Fn>(name);
  if (!slot && required)
    throw SourceError("nvml", 0, fmt::format("{} lacks the function {}", lib.file(), name),
                      "update the NVIDIA driver, or point DOOLY_NVML_LIBRARY at a current libnvidia-ml.so.1");
}
}  // namespace

std::string library_file(const std::string& option) {
  if (!option.empty()) return option;
  if (auto v = env::get("DOOLY_NVML_LIBRARY")) return *v;
  return kDefaultFile;
}

Library::Library(const std::string& option) : lib_(library_file(option)) {
  if (!lib_.loaded()) {
    const bool is_default = lib_.file() == kDefaultFile;
    throw SourceError(
        "nvml", 0, fmt::format("cannot load {}: {}", lib_.file(), lib_.error()),
        is_default ? "install the NVIDIA driver (it provides libnvidia-ml.so.1) or add its folder to "
                     "LD_LIBRARY_PATH; on a machine without an NVIDIA GPU choose another source with "
                     "DOOLY_POWER_SOURCE"
                   : "point DOOLY_NVML_LIBRARY (or the library option) at an existing libnvidia-ml.so.1, or unset it");
  }
  resolve(lib_, api_.init_v2, "nvmlInit_v2", true);
  resolve(lib_, api_.shutdown, "nvmlShutdown", true);
  resolve(lib_, api_.error_string, "nvmlErrorString", true);
  resolve(lib_, api_.device_get_count_v2, "nvmlDeviceGetCount_v2", true);
  resolve(lib_, api_.device_get_handle_by_index_v2, "nvmlDeviceGetHandleByIndex_v2", true);
  resolve(lib_, api_.device_get_name, "nvmlDeviceGetName", true);
  resolve(lib_, api_.device_get_power_usage, "nvmlDeviceGetPowerUsage", true);
  resolve(lib_, api_.device_get_handle_by_pci_bus_id_v2, "nvmlDeviceGetHandleByPciBusId_v2", false);
  resolve(lib_, api_.device_get_pci_info_v3, "nvmlDeviceGetPciInfo_v3", false);
  resolve(lib_, api_.device_get_field_values, "nvmlDeviceGetFieldValues", false);
  resolve(lib_, api_.device_get_samples, "nvmlDeviceGetSamples", false);
  resolve(lib_, api_.device_get_total_energy_consumption, "nvmlDeviceGetTotalEnergyConsumption", false);

  const Return rc = api_.init_v2();
  if (rc != kSuccess) throw error(rc, "nvmlInit_v2", lib_.file());
  initialised_ = true;
}

Library::~Library() {
  if (initialised_) api_.shutdown();
}

const char* Library::vendor_string(Return code) const noexcept {
  return api_.error_string ? api_.error_string(code) : nullptr;
}

}  // namespace dooly::power::nvml
