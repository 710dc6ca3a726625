#include "dooly/power/replay/replay_provider.hpp"

#include <algorithm>
#include <atomic>

#include <fmt/format.h>

#include "dooly/common/clock.hpp"
#include "dooly/common/env.hpp"
#include "dooly/common/error.hpp"
#include "dooly/power/replay/recorded_readings.hpp"

namespace dooly::power {

namespace {

constexpr const char* kSelectFix =
    "set DOOLY_POWER_SOURCE=replay and DOOLY_REPLAY_FILE to a recording written by dooly";

std::string recording_path(const Options& options) {
  if (!options.path.empty()) return options.path;
  if (auto v = env::get("DOOLY_REPLAY_FILE")) return *v;
  return {};
}

// Realtime: stamps shifted so the first sample falls at open, released as the clock reaches them.
// As-is: every sample at the first poll with its recorded stamp. Either way the poll after the last
// sample reports the end of the recording as fatal.
class ReplaySession final : public Session {
 public:
  explicit ReplaySession(const Options& options) : path_(recording_path(options)), realtime_(options.replay_realtime) {
    if (path_.empty())
      throw InputError("replay: no recording given", "set DOOLY_REPLAY_FILE (or the path option) to a recording");
    RecordedReadings rec = read_recorded_readings(path_);
    if (rec.channels.empty())
      DOOLY_THROW(InputError, "replay a recording that holds power channels", "{}: the recording declares no channel",
                  path_);
    if (rec.samples.empty())
      DOOLY_THROW(InputError, "replay a recording that holds power readings",
                  "{}: the recording holds no power sample ('s' line)", path_);
    channels_ = std::move(rec.channels);
    samples_ = std::move(rec.samples);
    counters_ = std::move(rec.counters);
    auto by_time = [](const auto& a, const auto& b) { return a.t_ns < b.t_ns; };
    std::stable_sort(samples_.begin(), samples_.end(), by_time);
    std::stable_sort(counters_.begin(), counters_.end(), by_time);
    shift_ns_ = realtime_ ? now_ns() - samples_.front().t_ns : 0;
  }

  const std::vector<Channel>& channels() const noexcept override { return channels_; }

  PollStatus poll(std::vector<Reading>& out) noexcept override {
    PollStatus status;
    if (next_ >= samples_.size()) {
      status.ok = false;
      status.fatal = true;
      try {
        status.message = fmt::format("replay: end of recording {} ({} samples replayed)", path_, samples_.size());
      } catch (...) {
      }
      return status;
    }
    try {
      const int64_t now = realtime_ ? now_ns() : INT64_MAX;
      while (next_ < samples_.size() && (!realtime_ || samples_[next_].t_ns + shift_ns_ <= now)) {
        Reading r = samples_[next_++];
        r.t_ns += shift_ns_;
        out.push_back(r);
      }
    } catch (...) {
      status.ok = false;
      status.message = "replay: out of memory while returning samples";
    }
    polled_ = true;
    return status;
  }

  bool supports_energy_counter() const noexcept override { return !counters_.empty(); }

  // Realtime: the channel's latest counter reading whose shifted time has passed. As-is: the first reading
  // before the first poll, the last one after it (a run's start and end).
  std::optional<double> energy_counter_j(uint32_t channel) noexcept override {
    const RecordedCounter* found = nullptr;
    if (realtime_) {
      const int64_t now = now_ns();
      for (const auto& c : counters_) {
        if (c.t_ns + shift_ns_ > now) break;
        if (c.channel == channel) found = &c;
      }
    } else {
      for (const auto& c : counters_) {
        if (c.channel != channel) continue;
        found = &c;
        if (!polled_) break;
      }
    }
    if (!found) return std::nullopt;
    return found->energy_j;
  }

 private:
  std::string path_;
  bool realtime_;
  std::vector<Channel> channels_;
  std::vector<Reading> samples_;
  std::vector<RecordedCounter> counters_;
  int64_t shift_ns_ = 0;
  size_t next_ = 0;
  std::atomic<bool> polled_{false};
};

class ReplayProvider final : public Provider {
 public:
  std::string_view name() const noexcept override { return "replay"; }
  std::string_view description() const noexcept override {
    return "power readings replayed from a dooly recording (DOOLY_REPLAY_FILE)";
  }
  bool auto_detected() const noexcept override { return false; }
  Probe probe(const Options& options) const override {
    const std::string path = recording_path(options);
    return {false, path.empty() ? fmt::format("replay is never auto-detected — {}", kSelectFix)
                                : fmt::format("replay is never auto-detected (recording '{}' is set) — select it with "
                                              "DOOLY_POWER_SOURCE=replay",
                                              path)};
  }
  std::unique_ptr<Session> open(const Options& options) const override {
    return std::make_unique<ReplaySession>(options);
  }
};

}  // namespace

std::unique_ptr<Provider> make_replay_provider() { return std::make_unique<ReplayProvider>(); }

}  // namespace dooly::power
