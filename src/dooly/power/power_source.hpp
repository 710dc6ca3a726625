#pragma once
// A power source is a Provider (probe, open) that returns a Session (channels, poll, energy counter).
// Adding a backend = one sub-folder + one line in registry.cpp + one test file.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dooly::power {

enum class Domain : uint8_t { gpu, cpu, dram, node, other };
std::string_view to_string(Domain d) noexcept;

// What one reading stands for in time. A reading stamped t is the mean power over
// [t - delay_ns - window_ns, t - delay_ns]: window_ns == 0 is an instantaneous sample; NVML's GetPowerUsage on
// Ampere+ is a 1 s boxcar. update_ns is how often the sensor produces a fresh value; region windows shorter
// than it are flagged. Defaults come from the backend and can be overridden (DOOLY_SENSOR_WINDOW_MS,
// DOOLY_SENSOR_DELAY_MS) after characterising a sensor.
struct SensorModel {
  int64_t window_ns = 0;
  int64_t delay_ns = 0;
  int64_t update_ns = 0;
  std::string description;  // e.g. "nvmlDeviceGetSamples (instantaneous, ~20 ms)"
};

struct Channel {
  std::string name;  // "gpu0", "cpu0", "dram0", "node", "package-0"
  Domain domain = Domain::other;
  int device = -1;  // GPU: CUDA ordinal (after CUDA_VISIBLE_DEVICES); CPU/DRAM: socket; else -1
  SensorModel sensor;
};

// One fresh value. Channel indexes Session::channels(). t_ns is on dooly's steady clock (common/clock.hpp).
struct Reading {
  uint32_t channel = 0;
  int64_t t_ns = 0;
  double power_w = 0.0;
  int64_t window_ns = -1;  // >= 0: this reading's own window (RAPL: time since the previous read); -1: channel's
};

struct PollStatus {
  bool ok = true;      // false: something failed this time; message says what
  bool fatal = false;  // true: the session will produce nothing more (device lost, file ended)
  std::string message;
};

// Options common to every backend; each reads what concerns it and ignores the rest.
struct Options {
  std::vector<int> cuda_devices;  // GPUs to watch by CUDA ordinal; empty = every visible GPU
  std::string root = "/";         // rapl: the directory that holds sys/class/powercap (injectable for tests)
  std::string path;               // replay: the recorded trace file
  std::string library;            // nvml / variorum: library file to dlopen instead of the default name
  bool replay_realtime = true;    // replay: shift stamps so the first sample is "now" and release them as time
                                  // passes (live use); false: return every sample at once with its own stamp
  bool inside_cuda_init = false;  // nvml: opened from inside cuInit (a CUDA injection's InitializeInjection), where
                                  // calling the driver again makes the program's own cuInit fail: CUDA ordinals
                                  // then come from CUDA_VISIBLE_DEVICES instead of the driver's PCI bus ids
};

class Session {
 public:
  virtual ~Session() = default;
  virtual const std::vector<Channel>& channels() const noexcept = 0;
  // Appends readings newer than any returned before, per channel, in time order. Never throws.
  virtual PollStatus poll(std::vector<Reading>& out) noexcept = 0;
  // How often this session wants to be polled, 0 = no preference. A source that buffers readings (NVML's
  // sample buffer returns the backlog, but one call costs ~0.5 ms of CPU) asks for a longer period than its
  // update rate; the profiler uses it unless the user set DOOLY_PERIOD_MS.
  virtual int64_t preferred_poll_period_ns() const noexcept { return 0; }
  // Vendor's own energy integral (joules since an arbitrary origin), read at a few points only.
  virtual bool supports_energy_counter() const noexcept { return false; }
  virtual std::optional<double> energy_counter_j(uint32_t channel) noexcept { return std::nullopt; }
};

struct Probe {
  bool available = false;
  std::string reason;  // why not, in one line with the fix; or what was found
};

class Provider {
 public:
  virtual ~Provider() = default;
  virtual std::string_view name() const noexcept = 0;
  virtual std::string_view description() const noexcept = 0;
  virtual Probe probe(const Options& options) const = 0;
  // False for a source that is only ever chosen by name (replay): auto-detection passes it over silently.
  virtual bool auto_detected() const noexcept { return true; }
  // Throws SourceError (vendor failure) or InputError (bad options) with the fix.
  virtual std::unique_ptr<Session> open(const Options& options) const = 0;
};

}  // namespace dooly::power
