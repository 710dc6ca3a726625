#pragma once
// A fake power session that drives the real Profiler, sampler thread and attributor without hardware. Two
// forms, one per kind of test:
//   FakeSession([](int64_t t_ns) { return 250.0; }, n)   every channel reads the same function of time; it has
//       an energy counter (a constant 1000 J, so its delta is 0) and can fail like a lost device (fail_after);
//   FakeSession(std::vector<double>{200.0, 100.0})        a constant power per channel (gpu0 = watts[0], gpu1 =
//       watts[1], ...) and no energy counter, so energies are known exactly: energy = P(channel) x time.
// Channels are named gpu0, gpu1, ... (domain gpu, device i, a 1 ms sensor update).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dooly/common/clock.hpp"
#include "dooly/power/power_source.hpp"

namespace dooly::testing {

class FakeSession final : public power::Session {
 public:
  explicit FakeSession(std::function<double(int64_t)> power_w, int n_channels = 1)
      : power_w_(std::move(power_w)) {
    for (int i = 0; i < n_channels; ++i) add_channel(i, "fake");
  }
  explicit FakeSession(std::vector<double> watts) : watts_(std::move(watts)) {
    has_energy_counter = false;
    for (size_t i = 0; i < watts_.size(); ++i) add_channel(static_cast<int>(i), "constant (test)");
  }

  const std::vector<power::Channel>& channels() const noexcept override { return channels_; }
  power::PollStatus poll(std::vector<power::Reading>& out) noexcept override {
    const int64_t t = now_ns();
    ++polls;
    if (fail_after >= 0 && polls > fail_after) return {false, true, "device lost (fake)"};
    for (uint32_t c = 0; c < channels_.size(); ++c) out.push_back({c, t, power_w_ ? power_w_(t) : watts_[c]});
    return {};
  }
  bool supports_energy_counter() const noexcept override { return has_energy_counter; }
  std::optional<double> energy_counter_j(uint32_t) noexcept override {
    if (!has_energy_counter) return std::nullopt;
    ++counter_calls;
    return 1000.0;
  }

  // Every channel's sensor model (as a backend declares it).
  void set_sensor(int64_t window_ns, int64_t delay_ns) {
    for (auto& ch : channels_) {
      ch.sensor.window_ns = window_ns;
      ch.sensor.delay_ns = delay_ns;
    }
  }

  bool has_energy_counter = true;  // the constant form sets it false; a test may change it before the run
  int polls = 0;                   // poll() calls so far
  int fail_after = -1;             // >= 0: every poll after this many returns "device lost"
  int counter_calls = 0;           // energy_counter_j() calls so far

 private:
  std::function<double(int64_t)> power_w_;  // the time-function form; empty in the constant form
  std::vector<double> watts_;               // the constant form, one per channel
  std::vector<power::Channel> channels_;

  void add_channel(int i, const char* description) {
    power::Channel ch;
    ch.name = "gpu" + std::to_string(i);
    ch.domain = power::Domain::gpu;
    ch.device = i;
    ch.sensor.update_ns = 1'000'000;
    ch.sensor.description = description;
    channels_.push_back(ch);
  }
};

}  // namespace dooly::testing
