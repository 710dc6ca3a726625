#pragma once
// One NVML session: the selected GPUs, each read in the best mode it supports (chosen at open):
//   samples  nvmlDeviceGetSamples(NVML_TOTAL_POWER_SAMPLES): the driver's ~50 Hz buffer, each sample stamped
//   instant  field 186 NVML_FI_DEV_POWER_INSTANT through nvmlDeviceGetFieldValues, with the field's own stamp
//   average  nvmlDeviceGetPowerUsage: a 1-second moving average on Ampere and newer, stamped at read time
// DOOLY_NVML_MODE forces one mode.
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dooly/common/clock.hpp"
#include "dooly/power/nvml/nvml_library.hpp"
#include "dooly/power/power_source.hpp"

namespace dooly::power::nvml {

enum class Mode { samples, instant, average };
std::string_view to_string(Mode m) noexcept;

// DOOLY_NVML_MODE, if set; throws InputError for an unknown value.
std::optional<Mode> forced_mode_from_env();

// The sensor model each mode stands for (description without the GPU name).
SensorModel sensor_model(Mode m);

class NvmlSession final : public Session {
 public:
  // Throws SourceError / InputError with the fix.
  explicit NvmlSession(const Options& options);
  ~NvmlSession() override;  // nvmlShutdown, then dlclose

  const std::vector<Channel>& channels() const noexcept override { return channels_; }
  PollStatus poll(std::vector<Reading>& out) noexcept override;
  bool supports_energy_counter() const noexcept override { return energy_counter_; }
  std::optional<double> energy_counter_j(uint32_t channel) noexcept override;

  Mode mode(uint32_t channel) const noexcept { return gpus_[channel].mode; }
  // Samples mode returns the driver's backlog (120 samples, ~2.4 s at 50 Hz) and costs 0.3-0.65 ms of CPU a
  // call on an H200: poll it every 500 ms instead of every 20 ms (~0.1 % of a core per GPU instead of ~3 %;
  // measured 0.17-0.19 % at 250 ms), still ~5 polls inside the driver's buffer.
  int64_t preferred_poll_period_ns() const noexcept override {
    for (const auto& g : gpus_)
      if (g.mode == Mode::samples) return 500'000'000;
    return 0;
  }

 private:
  struct Gpu {
    Device handle = nullptr;
    Mode mode = Mode::samples;
    unsigned long long last_seen_us = 0;  // samples: newest stamp returned so far
    long long last_field_us = -1;         // instant: stamp of the last field value returned
    std::vector<Sample> buffer;
  };

  Return probe_mode(const Gpu& gpu, Mode m) const noexcept;
  Mode choose_mode(Gpu& gpu, const std::string& subject, std::optional<Mode> forced) const;
  // Sizes gpu.buffer by the null-buffer call of nvmlDeviceGetSamples (which reports how many samples it holds).
  Return size_sample_buffer(Gpu& gpu) const;
  // Appends gpu i's fresh readings; on failure returns the status and sets `call`.
  Return read(uint32_t i, std::vector<Reading>& out, const char*& call);
  void emit(std::vector<Reading>& out, uint32_t channel, int64_t t_ns, double power_w);

  std::unique_ptr<Library> lib_;
  std::vector<Channel> channels_;
  std::vector<Gpu> gpus_;
  std::vector<int64_t> last_t_ns_;
  WallToSteady clock_;
  bool energy_counter_ = false;
  bool fatal_ = false;
  std::string fatal_message_;
  std::atomic<bool> lost_{false};
};

}  // namespace dooly::power::nvml
