#pragma once
// Which GPUs CUDA sees, and where they sit on the PCI bus. NVML numbers GPUs by PCI bus and ignores
// CUDA_VISIBLE_DEVICES; CUDA ordinals are what users and Kokkos speak. The CUDA driver API (libcuda.so.1,
// dlopen'ed; DOOLY_LIBCUDA overrides the file) gives each CUDA ordinal's PCI bus id, which NVML accepts.
#include <optional>
#include <string>
#include <vector>

namespace dooly::power::nvml {

struct CudaDevices {
  bool from_libcuda = false;
  std::vector<std::string> pci_bus_ids;  // index = CUDA ordinal (only when from_libcuda)
  std::string why_not;                   // why libcuda could not be used (when !from_libcuda)
};

// Never throws: a missing or failing libcuda is reported in why_not.
CudaDevices list_cuda_devices() noexcept;

// Without libcuda: CUDA ordinal i -> NVML index, from CUDA_VISIBLE_DEVICES when it is a list of integers
// (CUDA stops at the first entry that is not a valid index), else the identity. `note` says which was used.
std::vector<unsigned> ordinals_to_nvml_indices(unsigned nvml_count, const char* cuda_visible_devices,
                                               std::string& note);

}  // namespace dooly::power::nvml
