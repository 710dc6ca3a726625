#pragma once
// A power session with a constant power per channel (gpu0 = watts[0], gpu1 = watts[1], ...), so energies
// driven through the real Profiler and sampler thread are known exactly: energy = P(channel) x time.
#include <atomic>
#include <string>
#include <vector>

#include "dooly/common/clock.hpp"
#include "dooly/power/power_source.hpp"

namespace dooly::kokkos::testing {

class ConstantPowerSession final : public power::Session {
 public:
  explicit ConstantPowerSession(std::vector<double> watts) : watts_(std::move(watts)) {
    for (size_t i = 0; i < watts_.size(); ++i) {
      power::Channel ch;
      ch.name = "gpu" + std::to_string(i);
      ch.domain = power::Domain::gpu;
      ch.device = static_cast<int>(i);
      ch.sensor.update_ns = 1'000'000;
      ch.sensor.description = "constant (test)";
      channels_.push_back(ch);
    }
  }
  const std::vector<power::Channel>& channels() const noexcept override { return channels_; }
  power::PollStatus poll(std::vector<power::Reading>& out) noexcept override {
    const int64_t t = now_ns();
    for (uint32_t c = 0; c < channels_.size(); ++c) out.push_back({c, t, watts_[c]});
    return {};
  }

 private:
  std::vector<double> watts_;
  std::vector<power::Channel> channels_;
};

}  // namespace dooly::kokkos::testing
