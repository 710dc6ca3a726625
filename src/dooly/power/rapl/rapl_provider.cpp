#include "dooly/power/rapl/rapl_provider.hpp"

#include <climits>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "dooly/common/clock.hpp"
#include "dooly/common/error.hpp"
#include "dooly/power/rapl/powercap.hpp"

namespace dooly::power {

namespace {

constexpr int64_t kMs = 1'000'000;

// Every zone's energy_uj must be readable, else the session would be silently partial.
void check_readable(const std::vector<rapl::Zone>& zones) {
  for (const auto& z : zones) {
    uint64_t v = 0;
    if (int err = rapl::read_energy_uj(z, v); err)
      throw SourceError("rapl", err, fmt::format("cannot read {}/energy_uj: {}", z.dir, std::strerror(err)),
                        rapl::read_failure_fix(err));
  }
}

class RaplSession final : public Session {
 public:
  explicit RaplSession(const Options& options) {
    std::vector<rapl::Zone> zones = rapl::discover_zones(options.root.empty() ? "/" : options.root);
    for (auto& z : zones) {
      State s;
      if (int err = rapl::read_energy_uj(z, s.last_raw_uj); err)
        throw SourceError("rapl", err, fmt::format("cannot read {}/energy_uj: {}", z.dir, std::strerror(err)),
                          rapl::read_failure_fix(err));
      s.t_reading_ns = now_ns();
      Channel ch;
      ch.name = z.channel;
      ch.domain = z.domain;
      ch.device = (z.domain == Domain::cpu || z.domain == Domain::dram || z.domain == Domain::other) ? z.socket : -1;
      ch.sensor.window_ns = 0;  // each reading carries its own window (the interval since the previous one)
      ch.sensor.update_ns = 1 * kMs;
      ch.sensor.description =
          fmt::format("RAPL {} ({}): average power since the previous read, from energy_uj", z.kind, z.id);
      channels_.push_back(std::move(ch));
      s.zone = std::move(z);
      states_.push_back(std::move(s));
    }
  }

  const std::vector<Channel>& channels() const noexcept override { return channels_; }

  PollStatus poll(std::vector<Reading>& out) noexcept override {
    PollStatus status;
    try {
      std::lock_guard<std::mutex> lock(mu_);
      for (uint32_t i = 0; i < states_.size(); ++i) {
        State& s = states_[i];
        if (int err = advance(s); err) {
          status.ok = false;
          status.message += fmt::format("{}rapl: cannot read {}/energy_uj: {} — {}", status.message.empty() ? "" : "; ",
                                        s.zone.dir, std::strerror(err), rapl::read_failure_fix(err));
          continue;
        }
        const int64_t t = s.t_raw_ns;
        // An unchanged counter is a stale value: keep the interval open until it moves.
        if (s.total_uj == s.total_at_reading_uj || t <= s.t_reading_ns) continue;
        Reading r;
        r.channel = i;
        r.t_ns = t;
        r.window_ns = t - s.t_reading_ns;
        r.power_w =
            static_cast<double>(s.total_uj - s.total_at_reading_uj) * 1e-6 / (static_cast<double>(r.window_ns) * 1e-9);
        out.push_back(r);
        s.total_at_reading_uj = s.total_uj;
        s.t_reading_ns = t;
      }
    } catch (...) {
      status.ok = false;
      status.message = "rapl: out of memory while reading energy counters";
    }
    return status;
  }

  bool supports_energy_counter() const noexcept override { return true; }

  // Joules since open, wrap-corrected (every read, by poll or here, feeds the same accumulator).
  std::optional<double> energy_counter_j(uint32_t channel) noexcept override {
    if (channel >= states_.size()) return std::nullopt;
    try {
      std::lock_guard<std::mutex> lock(mu_);
      State& s = states_[channel];
      if (advance(s)) return std::nullopt;
      return static_cast<double>(s.total_uj) * 1e-6;
    } catch (...) {
      return std::nullopt;
    }
  }

 private:
  struct State {
    rapl::Zone zone;
    uint64_t last_raw_uj = 0;          // energy_uj as last read
    int64_t t_raw_ns = 0;              // when it was read
    uint64_t total_uj = 0;             // wrap-corrected energy since open
    uint64_t total_at_reading_uj = 0;  // total_uj at the last reading returned
    int64_t t_reading_ns = 0;          // time of the last reading returned (or of open)
  };

  // Reads the counter and adds what it moved since the last read. Returns an errno on failure.
  static int advance(State& s) noexcept {
    uint64_t raw = 0;
    if (int err = rapl::read_energy_uj(s.zone, raw); err) return err;
    s.t_raw_ns = now_ns();
    s.total_uj += rapl::counter_delta_uj(s.last_raw_uj, raw, s.zone.modulus_uj);
    s.last_raw_uj = raw;
    return 0;
  }

  std::vector<Channel> channels_;
  std::vector<State> states_;
  std::mutex mu_;
};

class RaplProvider final : public Provider {
 public:
  std::string_view name() const noexcept override { return "rapl"; }
  std::string_view description() const noexcept override {
    return "CPU package, DRAM and platform energy counters through Linux powercap (RAPL)";
  }
  Probe probe(const Options& options) const override {
    try {
      auto zones = rapl::discover_zones(options.root.empty() ? "/" : options.root);
      check_readable(zones);
      std::string names;
      for (const auto& z : zones) names += (names.empty() ? "" : ", ") + z.channel;
      return {true, fmt::format("RAPL zones: {}", names)};
    } catch (const Error& e) {
      return {false, e.what()};
    }
  }
  std::unique_ptr<Session> open(const Options& options) const override {
    return std::make_unique<RaplSession>(options);
  }
};

}  // namespace

std::unique_ptr<Provider> make_rapl_provider() { return std::make_unique<RaplProvider>(); }

}  // namespace dooly::power
