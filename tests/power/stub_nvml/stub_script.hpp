#pragma once
// The script that drives the stub libnvidia-ml.so.1 and the stub libcuda.so.1 (both read the file named by
// DOOLY_STUB_NVML_SCRIPT: NVML at nvmlInit_v2, CUDA at cuInit). One directive per line; '#' starts a comment.
//
//   device <pci_bus_id> <name ...>     a GPU, in NVML (PCI) order: NVML index 0, 1, ...
//   cuda_order <i> <j> ...             CUDA's own enumeration as NVML indices (default: NVML order); the stub
//                                      libcuda applies CUDA_VISIBLE_DEVICES (integers) on top of it
//   power <device|*> <t_ms> <watts>    a point of a device's power trace. t_ms is relative to nvmlInit and may
//                                      be negative; points at distinct times; linear between points, constant
//                                      beyond the ends; no point at all: 100 W
//   history_ms <ms>                    the driver's sample buffer already holds samples from -ms (default 0)
//   sample_period_ms <ms>              spacing of nvmlDeviceGetSamples samples, at k * period (default 20)
//   buffer_samples <n>                 the sample ring buffer keeps the newest n samples (default 100)
//   field_period_ms <ms>               field 186, nvmlDeviceGetPowerUsage and the energy counter refresh at
//                                      k * period (default 100)
//   energy_base_mj <mJ>                nvmlDeviceGetTotalEnergyConsumption at t = 0 (default 1000000)
//   init_fail <code>                   nvmlInit_v2 returns <code>
//   cuda_init_fail <code>              cuInit returns <code>
//   samples_not_supported              nvmlDeviceGetSamples returns NOT_SUPPORTED
//   field_not_supported                field 186 carries a per-field NOT_SUPPORTED
//   power_usage_not_supported          nvmlDeviceGetPowerUsage returns NOT_SUPPORTED
//   energy_not_supported               nvmlDeviceGetTotalEnergyConsumption returns NOT_SUPPORTED
//   lost_after <k>                     after k reading calls (GetSamples, GetFieldValues, GetPowerUsage,
//                                      GetTotalEnergyConsumption, over all devices) every device call returns
//                                      GPU_IS_LOST (15)
//
// What each query returns at time t (ms since nvmlInit), with P the trace and b = the latest field boundary:
//   GetSamples    samples at k * sample_period in [-history, t] (the newest buffer_samples of them), newer
//                 than lastSeenTimeStamp, P in mW (unsigned int), stamped init wall time + k * period (us since
//                 the epoch); NOT_FOUND when none is newer. As measured on driver 580.159.04: a null buffer
//                 gets SUCCESS and count = buffer_samples (the capacity); a buffer too small is filled (here
//                 with the oldest samples) and SUCCESS returned.
//   field 186     P(b) in mW, stamped init wall time + b
//   PowerUsage    the mean of P over [b - 1000 ms, b], in mW (NVML's 1-second average)
//   TotalEnergy   energy_base_mj + the integral of P over [0, b], in mJ
#include <string>
#include <vector>

namespace stub {

struct Point {
  double t_ms;
  double power_w;
};

struct Trace {
  std::vector<Point> points;  // sorted by t_ms
  double power_w(double t_ms) const;
  double integral_wms(double a_ms, double b_ms) const;  // W * ms = mJ
};

struct Device {
  std::string pci_bus_id;
  std::string name;
  Trace trace;
};

struct Script {
  std::vector<Device> devices;
  std::vector<int> cuda_order;
  double history_ms = 0;
  double sample_period_ms = 20;
  int buffer_samples = 100;
  double field_period_ms = 100;
  double energy_base_mj = 1'000'000;
  int init_fail = 0;
  int cuda_init_fail = 0;
  bool samples_not_supported = false;
  bool field_not_supported = false;
  bool power_usage_not_supported = false;
  bool energy_not_supported = false;
  long lost_after = -1;
};

// Reads the file named by DOOLY_STUB_NVML_SCRIPT. Returns false (and `error`) if it is unset or malformed.
bool load_script(Script& out, std::string& error);

// "0000:1B:00.0", "00000000:1b:00.0" and "1b:00.0" all compare equal.
bool same_pci_bus_id(const std::string& a, const std::string& b);

}  // namespace stub
