#pragma once
// The slice of NVML's C ABI dooly uses, declared here because NVML headers are not in Debian
// (docs/power-sources.md, nvml). Layouts follow nvml.h; the static_asserts pin what the ABI promises.
#include <cstddef>

namespace dooly::power::nvml {

using Return = int;  // nvmlReturn_t
struct DeviceOpaque;
using Device = DeviceOpaque*;  // nvmlDevice_t

inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorUninitialized = 1;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNoPermission = 4;
inline constexpr Return kErrorNotFound = 6;
inline constexpr Return kErrorInsufficientSize = 7;
inline constexpr Return kErrorDriverNotLoaded = 9;
inline constexpr Return kErrorGpuIsLost = 15;
inline constexpr Return kErrorResetRequired = 16;
inline constexpr Return kErrorLibRmVersionMismatch = 18;
inline constexpr Return kErrorUnknown = 999;

// nvmlValueType_t
enum ValueType : int {
  kValueDouble = 0,
  kValueUnsignedInt = 1,
  kValueUnsignedLong = 2,
  kValueUnsignedLongLong = 3,
  kValueSignedLongLong = 4,
  kValueSignedInt = 5,
  kValueUnsignedShort = 6,
};

union Value {  // nvmlValue_t
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  long long sllVal;
  unsigned short usVal;
};
static_assert(sizeof(Value) == 8);

struct Sample {                  // nvmlSample_t
  unsigned long long timeStamp;  // us since the epoch
  Value sampleValue;
};
static_assert(sizeof(Sample) == 16);

struct FieldValue {  // nvmlFieldValue_t
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;  // us since the epoch
  long long latencyUsec;
  int valueType;      // ValueType
  Return nvmlReturn;  // per-field status: check it, the call's own status only covers the call
  Value value;
};
static_assert(sizeof(FieldValue) == 40);
static_assert(offsetof(FieldValue, timestamp) == 8);
static_assert(offsetof(FieldValue, nvmlReturn) == 28);
static_assert(offsetof(FieldValue, value) == 32);

struct PciInfo {  // nvmlPciInfo_t (v3)
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
};
static_assert(sizeof(PciInfo) == 68);

inline constexpr unsigned kFieldPowerInstant = 186;  // NVML_FI_DEV_POWER_INSTANT
inline constexpr int kTotalPowerSamples = 0;         // NVML_TOTAL_POWER_SAMPLES
inline constexpr unsigned kDeviceNameBufferSize = 96;

// Function table, filled by dlsym. Optional entries may stay null (older drivers); the session treats a
// missing reading function as NOT_SUPPORTED.
struct Api {
  Return (*init_v2)() = nullptr;
  Return (*shutdown)() = nullptr;
  const char* (*error_string)(Return) = nullptr;
  Return (*device_get_count_v2)(unsigned int*) = nullptr;
  Return (*device_get_handle_by_index_v2)(unsigned int, Device*) = nullptr;
  Return (*device_get_name)(Device, char*, unsigned int) = nullptr;
  Return (*device_get_power_usage)(Device, unsigned int*) = nullptr;
  // optional
  Return (*device_get_handle_by_pci_bus_id_v2)(const char*, Device*) = nullptr;
  Return (*device_get_pci_info_v3)(Device, PciInfo*) = nullptr;
  Return (*device_get_field_values)(Device, int, FieldValue*) = nullptr;
  Return (*device_get_samples)(Device, int, unsigned long long, int*, unsigned int*, Sample*) = nullptr;
  Return (*device_get_total_energy_consumption)(Device, unsigned long long*) = nullptr;
};

}  // namespace dooly::power::nvml
