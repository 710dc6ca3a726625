#pragma once
// The live measurement engine shared by every front end (Kokkos connector, CUPTI, Python): a power session,
// a sampler thread, and the attributor. Hooks call begin/end, which only timestamp and buffer the event;
// all integration happens on the sampler thread.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "dooly/common/fast_clock.hpp"
#include "dooly/common/settings.hpp"
#include "dooly/energy/attributor.hpp"
#include "dooly/energy/event.hpp"
#include "dooly/energy/event_buffers.hpp"
#include "dooly/energy/key_table.hpp"
#include "dooly/energy/report.hpp"
#include "dooly/energy/sampler.hpp"
#include "dooly/energy/timed_events.hpp"
#include "dooly/energy/timeline.hpp"
#include "dooly/power/registry.hpp"

namespace dooly::energy {

struct ProfilerOptions {
  std::string source;              // DOOLY_POWER_SOURCE; empty = auto-detect
  power::Options power;            // DOOLY_REPLAY_FILE, DOOLY_NVML_LIBRARY, ...
  int64_t period_ns = 20'000'000;  // DOOLY_PERIOD_MS (else the source's preferred period, else 20 ms)
  bool period_given = false;
  int64_t baseline_measure_ns = 0;          // DOOLY_BASELINE_MS: quiet interval measured at start
  std::optional<int64_t> sensor_window_ns;  // DOOLY_SENSOR_WINDOW_MS: override the backend's sensor model
  std::optional<int64_t> sensor_delay_ns;   // DOOLY_SENSOR_DELAY_MS
  AttributorOptions attribution;            // DOOLY_BASELINE_W, DOOLY_FIT (formerly DOOLY_MODEL)
  Mode mode = Mode::model;                  // DOOLY_MODE: which mode the table leads with
  std::string record_path;                  // DOOLY_RECORD: write every reading and window for re-analysis
  size_t max_buffered_events = 1u << 18;    // DOOLY_MAX_EVENTS: events per host thread between two sampler ticks
  std::string trace_path;                   // DOOLY_TRACE: a Chrome / Perfetto trace of the run (timeline.hpp)
  size_t trace_max_windows = 1'000'000;     // DOOLY_TRACE_MAX_WINDOWS: windows the trace keeps whole
  // Front ends whose events carry their own time stamps and arrive late (CUPTI) set this: events are staged
  // (timed_events()) and handed to the attributor only once they are this old; 0: straight from the rings.
  int64_t event_delay_ns = 0;
  size_t max_staged_events = 1u << 20;  // DOOLY_CUPTI_MAX_PENDING: edges staged at once (with a delay)

  // The settings above from checked values (settings.hpp's table); throws InputError naming the setting.
  static ProfilerOptions from_settings(const SettingValues& values);
  // from_settings(SettingValues::from_env()).
  static ProfilerOptions from_env();
  // Under MPI ranks (ranks.hpp): the recording and the trace become one file per rank, <name>.rank<N>.<ext>.
  void per_rank(int rank);
};

class Profiler {
 public:
  // Picks the power source (forced or auto-detected); throws SourceError / InputError with the fix.
  static std::unique_ptr<Profiler> open(ProfilerOptions options, const power::Registry& registry);
  Profiler(ProfilerOptions options, std::unique_ptr<power::Session> session, std::string backend);
  ~Profiler();

  const std::string& backend() const noexcept { return backend_; }
  const std::vector<power::Channel>& channels() const noexcept { return channels_; }
  const std::vector<std::string>& skipped_backends() const noexcept { return skipped_; }

  KeyId key(std::string_view name, Kind kind) { return keys_.intern(name, kind); }
  // Hot path: one clock read and one store into this thread's ring; no lock. Never throws. Events are kept
  // between start() and stop() (outside, a thread gets no ring either).
  void begin(KeyId key, int32_t device, uint32_t flags = flags::nested) noexcept {
    if (running_.load(std::memory_order_relaxed)) buffers_.record(key, device, true, flags);
  }
  void end(KeyId key, int32_t device, uint32_t flags = flags::nested) noexcept {
    if (running_.load(std::memory_order_relaxed)) buffers_.record(key, device, false, flags);
  }
  // The rings begin() and end() write: for hooks that record through their thread's share directly.
  EventBuffers& events() noexcept { return buffers_; }
  // Where front ends with their own time stamps put their windows (options.event_delay_ns > 0), else nullptr.
  // Edges added before start() or after stop() are not used.
  TimedEvents* timed_events() noexcept { return staged_.get(); }
  // Names a track (an event's `thread`) in the trace (DOOLY_TRACE); device >= 0 groups it under that GPU.
  void name_track(uint32_t track, std::string name, int32_t device);

  void add_meta(std::string key, std::string value);
  void start();
  Report stop();
  bool running() const noexcept { return running_; }
  int64_t period_ns() const noexcept { return options_.period_ns; }

  double sampler_cpu_s() const noexcept { return sampler_ ? sampler_->thread_cpu_s() : 0.0; }
  // The part of it spent in the power source's poll.
  double poll_cpu_s() const noexcept {
    return static_cast<double>(poll_cpu_ns_.load(std::memory_order_relaxed)) * 1e-9;
  }
  uint64_t sampler_ticks() const noexcept { return sampler_ ? sampler_->ticks() : 0; }

 private:
  void tick(int64_t now_ns) noexcept;
  void poll_readings();  // tick's first half: the power source's readings
  void read_counters() noexcept;
  struct RecordBatch;               // what one tick adds to the recording
  class Recorder;                   // writes DOOLY_RECORD on a thread of its own
  void note_key(KeyId key);         // a key's first event: its line goes into the recording before the event's
  void take_event(const Event& e);  // an event in time order, to the attributor, the recording and the trace
  void finish_trace(Report& report) noexcept;

  ProfilerOptions options_;
  std::unique_ptr<power::Session> session_;
  std::string backend_;
  std::vector<std::string> skipped_;
  std::vector<power::Channel> channels_;
  KeyTable keys_;
  std::unique_ptr<Attributor> attributor_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<Recorder> recorder_;
  std::unique_ptr<RecordBatch> record_;  // the tick's items (sampler thread only)
  std::unique_ptr<TimedEvents> staged_;  // with a delay: every event waits here until it is old enough
  std::unique_ptr<Timeline> timeline_;   // DOOLY_TRACE
  std::mutex tracks_mu_;
  std::vector<std::tuple<uint32_t, std::string, int32_t>> track_names_;
  std::vector<bool> recorded_keys_;  // keys whose line the recording has (sampler thread only)
  std::vector<std::pair<std::string, std::string>> meta_;

  std::mutex attributor_mu_;  // the sampler thread and start/stop's counter reads
  EventBuffers buffers_;
  TickConverter converter_;  // sampler thread only (and start/stop before/after it runs)
  std::vector<EventBuffers::Drained> drained_;
  std::vector<power::Reading> readings_;
  std::vector<bool> channel_dead_;
  std::string last_poll_error_;
  std::atomic<bool> running_{false};
  bool ran_ = false;                     // a run was started before: the next start gets a fresh attributor
  std::atomic<int64_t> poll_cpu_ns_{0};  // sampler thread CPU spent in session_->poll
  int64_t start_ns_ = 0;
};

}  // namespace dooly::energy
