#include "dooly/power/nvml/nvml_errors.hpp"

#include <fmt/format.h>

namespace dooly::power::nvml {

namespace {

struct Entry {
  Return code;
  ErrorInfo info;
};

// Codes as numbered in nvml.h.
constexpr Entry kTable[] = {
    {1, {"NVML_ERROR_UNINITIALIZED", "this is a dooly bug (NVML used before nvmlInit); please report it"}},
    {2,
     {"NVML_ERROR_INVALID_ARGUMENT",
      "check the GPU selection (CUDA ordinals, CUDA_VISIBLE_DEVICES); DOOLY_LOG=debug shows what dooly asked for"}},
    {3,
     {"NVML_ERROR_NOT_SUPPORTED",
      "this GPU or driver does not provide the reading; let dooly choose (unset DOOLY_NVML_MODE), update the "
      "driver, or choose another power source with DOOLY_POWER_SOURCE"}},
    {4,
     {"NVML_ERROR_NO_PERMISSION",
      "run as a user allowed to query the GPU (check the permissions of /dev/nvidia*), or ask the administrator"}},
    {5, {"NVML_ERROR_ALREADY_INITIALIZED", "harmless; please report it if it stops dooly"}},
    {6,
     {"NVML_ERROR_NOT_FOUND",
      "the GPU is not visible to NVML: compare `nvidia-smi -L` with CUDA_VISIBLE_DEVICES and the requested devices"}},
    {7, {"NVML_ERROR_INSUFFICIENT_SIZE", "this is a dooly bug (buffer too small); please report it"}},
    {8, {"NVML_ERROR_INSUFFICIENT_POWER", "check the GPU's auxiliary power cables"}},
    {9,
     {"NVML_ERROR_DRIVER_NOT_LOADED",
      "load the NVIDIA kernel driver (`nvidia-smi` must work), or choose another power source with "
      "DOOLY_POWER_SOURCE"}},
    {10, {"NVML_ERROR_TIMEOUT", "retry; if it persists, check `nvidia-smi` and dmesg"}},
    {11, {"NVML_ERROR_IRQ_ISSUE", "the kernel driver reports interrupt problems: check dmesg and the driver install"}},
    {12,
     {"NVML_ERROR_LIBRARY_NOT_FOUND",
      "install the NVIDIA driver's NVML library, or set DOOLY_NVML_LIBRARY to libnvidia-ml.so.1"}},
    {13, {"NVML_ERROR_FUNCTION_NOT_FOUND", "update the NVIDIA driver: this NVML lacks a function dooly needs"}},
    {14, {"NVML_ERROR_CORRUPTED_INFOROM", "the GPU's infoROM is corrupted: contact the administrator or the vendor"}},
    {15,
     {"NVML_ERROR_GPU_IS_LOST",
      "the GPU fell off the bus or stopped responding: check dmesg for Xid errors, then reset the GPU "
      "(`nvidia-smi -r`) or reboot"}},
    {16, {"NVML_ERROR_RESET_REQUIRED", "reset the GPU (`nvidia-smi -r`) or reboot"}},
    {17, {"NVML_ERROR_OPERATING_SYSTEM", "the operating system blocked the call: check dmesg and the driver install"}},
    {18,
     {"NVML_ERROR_LIB_RM_VERSION_MISMATCH",
      "the NVML library and the loaded kernel driver have different versions (driver updated without reboot): "
      "reboot, or reload the nvidia kernel modules"}},
    {19, {"NVML_ERROR_IN_USE", "another process holds the GPU in a mode that blocks the query; retry later"}},
    {20, {"NVML_ERROR_MEMORY", "free host memory and retry"}},
    {21, {"NVML_ERROR_NO_DATA", "no data yet: retry after the GPU has run for a moment"}},
    {22, {"NVML_ERROR_VGPU_ECC_NOT_SUPPORTED", "not expected for power queries; please report it"}},
    {23, {"NVML_ERROR_INSUFFICIENT_RESOURCES", "free GPU or host resources and retry"}},
    {24, {"NVML_ERROR_FREQ_NOT_SUPPORTED", "not expected for power queries; please report it"}},
    {25, {"NVML_ERROR_ARGUMENT_VERSION_MISMATCH", "update the NVIDIA driver, or report the driver version to dooly"}},
    {26, {"NVML_ERROR_DEPRECATED", "update dooly, or report the driver version"}},
    {27, {"NVML_ERROR_NOT_READY", "the GPU is not ready yet: retry in a moment"}},
    {28, {"NVML_ERROR_GPU_NOT_FOUND", "the GPU is not visible to NVML: check `nvidia-smi -L`"}},
    {29, {"NVML_ERROR_INVALID_STATE", "the GPU is in a state that forbids the query: check `nvidia-smi -q`"}},
    {999, {"NVML_ERROR_UNKNOWN", "check `nvidia-smi` and dmesg, and update the NVIDIA driver"}},
};

}  // namespace

ErrorInfo error_info(Return code) noexcept {
  for (const auto& e : kTable)
    if (e.code == code) return e.info;
  return {"NVML_ERROR_(unlisted)", "check `nvidia-smi` and dmesg, and update the NVIDIA driver"};
}

bool is_fatal(Return code) noexcept {
  return code == kErrorGpuIsLost || code == kErrorResetRequired || code == kErrorDriverNotLoaded ||
         code == kErrorUninitialized || code == kErrorLibRmVersionMismatch || code == 28 /* GPU_NOT_FOUND */;
}

std::string describe(Return code, const char* vendor_string) {
  const ErrorInfo info = error_info(code);
  if (vendor_string && *vendor_string) return fmt::format("{} ({}, code {})", vendor_string, info.name, code);
  return fmt::format("{} (code {})", info.name, code);
}

SourceError make_error(Return code, const char* vendor_string, std::string_view call, std::string_view subject) {
  return SourceError("nvml", code, fmt::format("{}: {} failed: {}", subject, call, describe(code, vendor_string)),
                     std::string(error_info(code).fix));
}

}  // namespace dooly::power::nvml
