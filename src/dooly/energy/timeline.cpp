#include "dooly/energy/timeline.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dooly/energy/power_trace.hpp"

namespace dooly::energy {

namespace {

// Microseconds from the run's start, to the nanosecond (the trace-event format's unit is the microsecond).
std::string us(int64_t ns) {
  const bool neg = ns < 0;
  const uint64_t a = neg ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  return fmt::format("{}{}.{:03}", neg ? "-" : "", a / 1000, a % 1000);
}

std::string quoted(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Perfetto groups tracks by process: 0 = the host, d + 1 = GPU d.
int pid_of(int32_t device) { return device >= 0 ? device + 1 : 0; }

bool relevant(const power::Channel& ch, int32_t device) {
  const int32_t only = ch.domain == power::Domain::gpu && ch.device >= 0 ? ch.device : -1;
  return only < 0 || device < 0 || only == device;
}

}  // namespace

Timeline::Timeline(std::vector<power::Channel> channels, TimelineOptions options)
    : channels_(std::move(channels)), options_(options) {}

void Timeline::name_track(uint32_t track, std::string name, int32_t device) {
  track_names_[track] = TrackName{std::move(name), device};
}

void Timeline::add_reading(const power::Reading& r) {
  if (readings_.size() >= options_.max_readings) {
    ++readings_dropped_;
    return;
  }
  readings_.push_back(r);
}

void Timeline::close(const Open& o, uint32_t track, int64_t t1_ns, int depth) {
  ++windows_seen_;
  if (windows_.size() < options_.max_windows) {
    windows_.push_back(Window{o.t0_ns, t1_ns, o.key, o.device, track, depth});
    return;
  }
  Aggregate& a = aggregated_[o.key];
  ++a.calls;
  a.time_ns += t1_ns - o.t0_ns;
}

void Timeline::add_event(const Event& e) {
  if ((e.flags & flags::nested) == 0) {  // free windows pair by key, whatever the thread (as the charger does)
    auto& opens = free_[e.key];
    if (e.begin) {
      opens.push_back(Open{e.key, e.device, e.t_ns});
    } else if (!opens.empty()) {
      const Open o = opens.back();
      opens.pop_back();
      close(o, e.thread, e.t_ns, 0);
    }
    return;
  }
  auto& stack = nested_[e.thread];
  if (e.begin) {
    stack.push_back(Open{e.key, e.device, e.t_ns});
    return;
  }
  // An end closes its key's innermost open window; windows opened inside it and left open close with it.
  auto it = std::find_if(stack.rbegin(), stack.rend(), [&](const Open& o) { return o.key == e.key; });
  if (it == stack.rend()) return;
  const size_t keep = static_cast<size_t>(stack.rend() - it) - 1;
  while (stack.size() > keep) {
    const Open o = stack.back();
    stack.pop_back();
    close(o, e.thread, e.t_ns, static_cast<int>(stack.size()));
  }
}

// Perfetto's process and thread names: the host, each GPU, each named track.
void Timeline::metadata_events(std::vector<std::string>& out) const {
  std::map<int, std::string> processes{{0, "host"}};
  for (const Window& w : windows_) processes.emplace(pid_of(w.device), fmt::format("GPU {}", w.device));
  for (const auto& [track, tn] : track_names_) processes.emplace(pid_of(tn.device), fmt::format("GPU {}", tn.device));
  for (const power::Channel& ch : channels_)
    if (ch.domain == power::Domain::gpu && ch.device >= 0)
      processes.emplace(pid_of(ch.device), fmt::format("GPU {}", ch.device));
  for (const auto& [pid, name] : processes)
    out.push_back(
        fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"tid":0,"args":{{"name":{}}}}})", pid, quoted(name)));
  for (const auto& [track, tn] : track_names_)
    out.push_back(fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})",
                              pid_of(tn.device), track, quoted(tn.name)));
}

// A slice per kept window, with its energy on every channel it is charged on (trapezoid, idle included).
void Timeline::window_events(std::vector<std::string>& out, const std::vector<KeyInfo>& infos) const {
  // Each channel's readings as E(t), placed where the attributor places them (the centre of what they measure).
  std::vector<PowerTrace> traces(channels_.size());
  for (const power::Reading& r : readings_) {
    if (r.channel >= channels_.size()) continue;
    const power::SensorModel& s = channels_[r.channel].sensor;
    const int64_t window = r.window_ns >= 0 ? r.window_ns : s.window_ns;
    traces[r.channel].append(r.t_ns - s.delay_ns - window / 2, r.power_w);
  }
  for (const Window& w : windows_) {
    const KeyInfo ki = w.key < infos.size() ? infos[w.key] : KeyInfo{"<unknown>", Kind::other};
    std::string args = fmt::format(R"("kind":"{}")", to_string(ki.kind));
    for (size_t c = 0; c < channels_.size(); ++c) {
      if (!relevant(channels_[c], w.device) || traces[c].empty()) continue;
      args += fmt::format(R"(,"energy_j_{}":{:.9g})", channels_[c].name,
                          traces[c].energy_j(w.t1_ns) - traces[c].energy_j(w.t0_ns));
    }
    out.push_back(fmt::format(R"({{"ph":"X","name":{},"cat":"{}","pid":{},"tid":{},"ts":{},"dur":{},"args":{{{}}}}})",
                              quoted(ki.name), to_string(ki.kind), pid_of(w.device), w.track, us(w.t0_ns - t0_ns_),
                              us(w.t1_ns - w.t0_ns), args));
  }
}

// The trace's otherData: what was kept, what was dropped, and the windows past the cap as aggregates.
std::string Timeline::other_data(const std::vector<KeyInfo>& infos) const {
  std::string out = fmt::format(R"("dooly_trace_version":{},"windows_seen":{},"windows_kept":{},"max_windows":{},)",
                                kTraceVersion, windows_seen_, windows_.size(), options_.max_windows);
  out +=
      fmt::format(R"("readings_kept":{},"readings_dropped":{},"energy":"trapezoid over the readings, idle included")",
                  readings_.size(), readings_dropped_);
  if (aggregated_.empty()) return out;
  out += fmt::format(
      R"j(,"truncated":"the first {} windows are kept whole; later ones only as a count and total time per name (aggregated)")j",
      options_.max_windows);
  out += ",\"aggregated\":[";
  bool first = true;
  for (const auto& [key, a] : aggregated_) {
    const KeyInfo ki = key < infos.size() ? infos[key] : KeyInfo{"<unknown>", Kind::other};
    out += fmt::format(R"({}{{"name":{},"kind":"{}","calls":{},"time_s":{:.9g}}})", first ? "" : ",", quoted(ki.name),
                       to_string(ki.kind), a.calls, static_cast<double>(a.time_ns) * 1e-9);
    first = false;
  }
  return out + "]";
}

std::string Timeline::to_json_text(const KeyTable& keys) const {
  const std::vector<KeyInfo> infos = keys.snapshot();
  std::vector<std::string> events;
  metadata_events(events);
  window_events(events, infos);
  for (const power::Reading& r : readings_) {
    if (r.channel >= channels_.size()) continue;
    const power::Channel& ch = channels_[r.channel];
    const int32_t device = ch.domain == power::Domain::gpu ? ch.device : -1;
    events.push_back(fmt::format(R"j({{"ph":"C","name":"power {} (W)","pid":{},"ts":{},"args":{{"W":{:.6g}}}}})j",
                                 ch.name, pid_of(device), us(r.t_ns - t0_ns_), r.power_w));
  }
  std::string out = "{\"traceEvents\":[\n";
  for (size_t i = 0; i < events.size(); ++i) {
    if (i) out += ",\n";
    out += events[i];
  }
  out += "\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{";
  out += other_data(infos);
  out += "}\n}\n";
  return out;
}

}  // namespace dooly::energy
