#pragma once
// A power session whose readings come from a function of time: drives the real profiler and sampler.
#include <functional>
#include <mutex>

#include "dooly/common/clock.hpp"
#include "dooly/power/power_source.hpp"

namespace dooly::energy::testing {

class FakeSession : public power::Session {
 public:
  explicit FakeSession(std::function<double(int64_t)> power_w, int n_channels = 1)
      : power_w_(std::move(power_w)) {
    for (int i = 0; i < n_channels; ++i) {
      power::Channel ch;
      ch.name = "gpu" + std::to_string(i);
      ch.domain = power::Domain::gpu;
      ch.device = i;
      ch.sensor.update_ns = 1'000'000;
      ch.sensor.description = "fake";
      channels_.push_back(ch);
    }
  }
  const std::vector<power::Channel>& channels() const noexcept override { return channels_; }
  power::PollStatus poll(std::vector<power::Reading>& out) noexcept override {
    const int64_t t = now_ns();
    ++polls;
    if (fail_after >= 0 && polls > fail_after) return {false, true, "device lost (fake)"};
    for (uint32_t c = 0; c < channels_.size(); ++c) out.push_back({c, t, power_w_(t)});
    return {};
  }
  bool supports_energy_counter() const noexcept override { return true; }
  std::optional<double> energy_counter_j(uint32_t) noexcept override { return 1000.0 + counter_calls++ * 0.0; }

  int polls = 0;
  int fail_after = -1;
  int counter_calls = 0;

 private:
  std::function<double(int64_t)> power_w_;
  std::vector<power::Channel> channels_;
};

}  // namespace dooly::energy::testing
