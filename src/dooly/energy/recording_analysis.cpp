#include "dooly/energy/recording_analysis.hpp"

#include <algorithm>
#include <charconv>

#include "dooly/common/error.hpp"

namespace dooly::energy {

namespace {
std::optional<int64_t> meta_int(const Recording& rec, std::string_view key) {
  for (const auto& [k, v] : rec.meta)
    if (k == key) {
      int64_t x = 0;
      auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
      if (ec == std::errc() && p == v.data() + v.size()) return x;
      DOOLY_THROW(InputError, "fix or remove that meta line", "recording meta '{}' is not an integer: '{}'", key, v);
    }
  return std::nullopt;
}

// The run's bounds obey the same limits as the recording's stamps (recording.hpp). t_first/t_last are
// INT64_MAX/INT64_MIN for a recording without samples or events.
void check_run_bounds(int64_t run_start, int64_t run_end, int64_t t_first, int64_t t_last) {
  namespace lim = recording_limits;
  for (auto [key, t] : {std::pair<const char*, int64_t>{"run_start_ns", run_start}, {"run_end_ns", run_end}}) {
    const int64_t lo = std::min({t, t_first == INT64_MAX ? t : t_first}),
                  hi = std::max({t, t_last == INT64_MIN ? t : t_last});
    if (t < -lim::max_abs_t_ns || t > lim::max_abs_t_ns || hi - lo > lim::max_span_ns)
      DOOLY_THROW(InputError, "fix or remove that meta line",
                  "recording meta '{}' = {} is more than 2^52 ns (52 days) from the recorded times, or not within "
                  "|t| < 2^62",
                  key, t);
  }
  if (run_end < run_start)
    DOOLY_THROW(InputError, "fix or remove those meta lines", "recording meta run_end_ns {} is before run_start_ns {}",
                run_end, run_start);
}
}  // namespace

Report analyze_recording(const Recording& rec, const AnalysisOptions& options) {
  // The attributor's tables are dense in the key id: the recording's ids (below 2^24, possibly sparse) are
  // numbered 0, 1, 2, ... in their own order, so memory follows the keys declared, not the largest id, and
  // rows that tie keep their order.
  std::vector<uint32_t> ids;
  ids.reserve(rec.keys.size());
  for (const auto& k : rec.keys) ids.push_back(k.id);
  std::sort(ids.begin(), ids.end());
  auto dense = [&](uint32_t id) {  // an undeclared id (a Recording built in code) stays one unknown key
    const auto it = std::lower_bound(ids.begin(), ids.end(), id);
    return static_cast<KeyId>(it != ids.end() && *it == id ? it - ids.begin() : ids.size());
  };
  KeyTable keys;
  for (const auto& k : rec.keys) keys.insert(dense(k.id), k.name, kind_from_string(k.kind));

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
  check_run_bounds(run_start, run_end, t_first, t_last);

  attr.begin_run(run_start);
  for (const auto& c : rec.counters) attr.add_counter(c.channel, c.t_ns, c.energy_j);
  for (const auto& s : rec.samples) attr.add_reading(s);
  std::vector<Event> events = rec.events;
  for (Event& e : events) e.key = dense(e.key);
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.t_ns < b.t_ns; });
  for (const Event& e : events) attr.add_event(e);

  Report report = attr.finish(run_end);
  report.mode = options.mode;
  report.meta = rec.meta;
  for (const auto& [k, v] : rec.meta)
    if (k == "backend") report.backend = v;
  return report;
}

}  // namespace dooly::energy
