#pragma once
// The slice of the Kokkos Tools C ABI the connector uses, declared here so no Kokkos header is needed
// (kokkos/kokkos core/src/impl/Kokkos_Profiling_C_Interface.h).
#include <cstddef>
#include <cstdint>

extern "C" {
struct Kokkos_Profiling_KokkosPDeviceInfo {
  size_t deviceID;
};
struct Kokkos_Profiling_SpaceHandle {
  char name[64];
};
struct Kokkos_Tools_ToolSettings {
  bool requires_global_fencing;
  bool padding[255];
};
}

namespace dooly::kokkos {

// devID bits: top 8 = device type, next 7 = device id (CUDA runtime ordinal), low 17 = instance id.
enum class DeviceType : uint32_t {
  serial = 0,
  openmp = 1,
  cuda = 2,
  hip = 3,
  openmp_target = 4,
  hpx = 5,
  threads = 6,
  sycl = 7,
  openacc = 8
};

struct DeviceId {
  DeviceType type;
  uint32_t device;
  uint32_t instance;
};

constexpr DeviceId decode_device_id(uint32_t dev_id) noexcept {
  return {static_cast<DeviceType>(dev_id >> 24), (dev_id >> 17) & 0x7fu, dev_id & 0x1ffffu};
}

// The GPU ordinal a kernel ran on, or -1 for host back ends.
constexpr int32_t gpu_ordinal(uint32_t dev_id) noexcept {
  const DeviceId d = decode_device_id(dev_id);
  switch (d.type) {
    case DeviceType::cuda:
    case DeviceType::hip:
    case DeviceType::sycl:
    case DeviceType::openacc:
    case DeviceType::openmp_target:
      return static_cast<int32_t>(d.device);
    default:
      return -1;
  }
}

}  // namespace dooly::kokkos
