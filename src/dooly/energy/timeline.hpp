#pragma once
// DOOLY_TRACE: the run as a Chrome / Perfetto trace-event JSON file (open it in ui.perfetto.dev or
// chrome://tracing): every window as a slice on its track (a host thread, a GPU stream), each with its energy on
// every channel it is charged to (the trapezoid over the readings: E(end) - E(begin)) as arguments, and every
// power reading as a counter track per channel.
//
// It sees what the attributor sees, in the same order (edges in time order, readings as they come), so it serves
// every front end alike. Bounded: the first `max_windows` windows are kept whole; after that each name keeps only
// a count and a total time, written in the file's metadata ("otherData") and said on stderr. Readings past
// `max_readings` are counted, not kept.
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "dooly/energy/event.hpp"
#include "dooly/energy/key_table.hpp"
#include "dooly/power/power_source.hpp"

namespace dooly::energy {

inline constexpr int kTraceVersion = 1;

struct TimelineOptions {
  size_t max_windows = 1'000'000;  // DOOLY_TRACE_MAX_WINDOWS
  size_t max_readings = 1u << 22;  // per run (50 Hz NVML: ~23 hours)
};

class Timeline {
 public:
  Timeline(std::vector<power::Channel> channels, TimelineOptions options = {});

  void begin_run(int64_t t_ns) { t0_ns_ = t_ns; }
  void add_event(const Event& e);
  void add_reading(const power::Reading& r);
  // A track's name in the viewer ("stream 7", "host thread 0"); device >= 0 groups it under that GPU.
  void name_track(uint32_t track, std::string name, int32_t device);

  size_t windows_kept() const noexcept { return windows_.size(); }
  uint64_t windows_seen() const noexcept { return windows_seen_; }
  uint64_t windows_aggregated() const noexcept { return windows_seen_ - windows_.size(); }
  uint64_t readings_dropped() const noexcept { return readings_dropped_; }

  // The trace as JSON text (keys: names and kinds of the windows). Windows still open are left out.
  std::string to_json_text(const KeyTable& keys) const;

 private:
  struct Window {
    int64_t t0_ns, t1_ns;
    KeyId key;
    int32_t device;
    uint32_t track;
    int depth;  // nesting depth on its track when it opened (Perfetto stacks slices by time anyway)
  };
  struct Open {
    KeyId key;
    int32_t device;
    int64_t t0_ns;
  };
  struct Aggregate {
    uint64_t calls = 0;
    int64_t time_ns = 0;
  };
  struct TrackName {
    std::string name;
    int32_t device = -1;
  };
  void close(const Open& o, uint32_t track, int64_t t1_ns, int depth);
  void metadata_events(std::vector<std::string>& out) const;  // to_json_text's parts
  void window_events(std::vector<std::string>& out, const std::vector<KeyInfo>& infos) const;
  std::string other_data(const std::vector<KeyInfo>& infos) const;

  std::vector<power::Channel> channels_;
  TimelineOptions options_;
  int64_t t0_ns_ = 0;
  std::unordered_map<uint32_t, std::vector<Open>> nested_;  // per track
  std::unordered_map<uint64_t, std::vector<Open>> free_;    // per (track, key)
  std::vector<Window> windows_;
  std::map<KeyId, Aggregate> aggregated_;
  uint64_t windows_seen_ = 0;
  std::vector<power::Reading> readings_;
  uint64_t readings_dropped_ = 0;
  std::map<uint32_t, TrackName> track_names_;
};

}  // namespace dooly::energy
