#include "dooly/energy/recording_analysis.hpp"

#include <algorithm>
#include <charconv>

#include "dooly/common/error.hpp"

namespace dooly::energy {

namespace {
std::optional<int64_t> meta_int(const power::Recording& rec, std::string_view key) {
  for (const auto& [k, v] : rec.meta)
    if (k == key) {
      int64_t x = 0;
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
      if (ec == std::errc() && p == v.data() + v.size()) return x;
      DOOLY_THROW(InputError, "fix or remove that meta line", "recording meta '{}' is not an integer: '{}'", key, v);
    }
  return std::nullopt;
}
}  // namespace

Report analyze_recording(const power::Recording& rec, const AnalysisOptions& options) {
  KeyTable keys;
  for (const auto& k : rec.keys) keys.insert(k.id, k.name, kind_from_string(k.kind));

  std::vector<power::Channel> channels = rec.channels;
  for (auto& ch : channels) apply_sensor_overrides(ch, options.sensor_window_ns, options.sensor_delay_ns);
  Attributor attr(channels, keys, options.attribution);

  int64_t t_first = INT64_MAX, t_last = INT64_MIN;
  for (const auto& s : rec.samples) {
    t_first = std::min(t_first, s.t_ns);
    t_last = std::max(t_last, s.t_ns);
  }
  for (const auto& e : rec.events) {
    t_first = std::min(t_first, e.t_ns);
    t_last = std::max(t_last, e.t_ns);
  }
  const int64_t run_start = meta_int(rec, "run_start_ns").value_or(t_first == INT64_MAX ? 0 : t_first);
  const int64_t run_end = meta_int(rec, "run_end_ns").value_or(t_last == INT64_MIN ? 0 : t_last);

  attr.begin_run(run_start);
  for (const auto& c : rec.counters) attr.add_counter(c.channel, c.t_ns, c.energy_j);
  for (const auto& s : rec.samples) attr.add_reading(s);
  std::vector<power::RecordedEvent> events = rec.events;
  std::stable_sort(events.begin(), events.end(),
                   [](const power::RecordedEvent& a, const power::RecordedEvent& b) { return a.t_ns < b.t_ns; });
  for (const auto& e : events) attr.add_event(Event{e.t_ns, e.key, e.thread, e.device, e.begin, e.flags});

  Report report = attr.finish(run_end);
  report.mode = options.mode;
  report.meta = rec.meta;
  for (const auto& [k, v] : rec.meta)
    if (k == "backend") report.backend = v;
  return report;
}

}  // namespace dooly::energy
