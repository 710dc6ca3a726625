#pragma once
// Any CUDA program, unmodified: kernels, memcpys and memsets from CUPTI's Activity API (device time stamps) and
// NVTX ranges through NVTX's own injection interface (dooly's functions in NVTX's tables: no CUPTI callbacks),
// charged with the energy engine and reported like the Kokkos connector's runs. libdooly_cupti.cpp is the thin
// extern "C" entry (InitializeInjection, InitializeInjectionNvtx2) over this class.
//
// Windows: each kernel / memcpy / memset is a nested window on its stream's track (streams serialise their work,
// so one stream's windows never overlap; different streams' do, and the model mode's occupancy rows simply add
// them: docs/energy-attribution.md, "Concurrent kernels"). NVTX ranges are free windows on their host thread's
// track (host time: push to pop, start to end): they get the device's energy over that span, and no model
// column of their own (their occupancy would duplicate their kernels'): their model figures are the kernels' that
// ran inside the span (WindowCharger's free windows). GPU records reach the engine through the
// profiler's staging area (energy/timed_events.hpp), released once older than DOOLY_CUPTI_DELAY_MS. CUPTI hands a
// buffer over when it is full, which at a few hundred kernels a second is many seconds late: a thread of the
// tracer asks for the completed buffers every DOOLY_CUPTI_FLUSH_MS (cuptiActivityFlushAll(0), CUPTI's periodic
// flush), so records come within the delay at any kernel rate.
//
// Bounded: at most DOOLY_CUPTI_MAX_BUFFERS activity buffers of DOOLY_CUPTI_BUFFER_KB are out at once (CUPTI drops
// what finds none, and counts it: the report says how many), and the staging area is bounded too.
// Every method that CUPTI or the host program calls is noexcept: a failure is logged once and the tracer
// degrades to doing nothing, so the program always runs on.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "dooly/common/log.hpp"
#include "dooly/common/settings.hpp"
#include "dooly/cupti/activity_record.hpp"
#include "dooly/cupti/cupti_library.hpp"
#include "dooly/cupti/gpu_clock.hpp"
#include "dooly/energy/profiler.hpp"
#include "dooly/energy/report_writers.hpp"

namespace dooly::cupti {

struct TracerSettings {
  energy::ProfilerOptions profiler;  // event_delay_ns from CUPTI_DELAY_MS
  energy::OutputSettings output;     // OUTPUT, TABLE, TABLE_FILE, RANKS*
  std::optional<log::Level> log_level;
  std::string cupti_library;              // CUPTI_LIB
  size_t buffer_bytes = 1024 * 1024;      // CUPTI_BUFFER_KB
  size_t max_buffers = 64;                // CUPTI_MAX_BUFFERS
  bool nvtx = true;                       // CUPTI_NVTX
  int64_t flush_period_ns = 250'000'000;  // CUPTI_FLUSH_MS (0: none; buffers come when full)
  bool discard = false;                   // CUPTI_DISCARD: records collected and thrown away (overhead baseline)

  static TracerSettings from_settings(const SettingValues& values);  // throws InputError
  static TracerSettings from_env();
};

// Tracks of the attributor's windows: host threads count up from 0; streams from here. Both stay below 2^16, the
// recording's bound on threads (energy/recording.hpp): a thread that would reach the streams' tracks keeps no
// NVTX ranges (cupti.nvtx_ranges still counts them).
inline constexpr uint32_t kStreamTrackBase = 1u << 15;

class Tracer {
 public:
  using ProfilerFactory = std::function<std::unique_ptr<energy::Profiler>(const energy::ProfilerOptions&)>;
  explicit Tracer(ProfilerFactory factory = {});
  ~Tracer();
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // Reads the settings, opens the power source and CUPTI, and starts collecting. false (after one line on
  // stderr) when it cannot: the program then runs unmeasured. One tracer at a time is attached to CUPTI.
  bool start() noexcept;
  // Flushes CUPTI, stops, adds the per-stream rows and writes the outputs. Once; later calls do nothing.
  void finish() noexcept;
  bool active() const noexcept { return active_.load(std::memory_order_acquire); }

  // CUPTI's callbacks (through the trampolines of the attached tracer).
  void buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) noexcept;
  void buffer_completed(void* context, uint32_t stream, uint8_t* buffer, size_t size, size_t valid_size) noexcept;

  // NVTX's injection entry (InitializeInjectionNvtx2 of libdooly_cupti.so; NVTX calls it once per module that uses
  // NVTX, before that module's first NVTX call): writes dooly's range functions into the module's tables. They
  // report to the attached tracer while it is active and do nothing otherwise. 1: installed; 0: not an NVTX this
  // build can read (NVTX then turns itself off for that module).
  static int install_nvtx(abi::NvtxGetExportTable get) noexcept;

  const energy::Report& last_report() const noexcept { return report_; }
  const std::string& last_table() const noexcept { return table_; }

 private:
  struct StreamKey {
    uint32_t device, context, stream;
    bool operator<(const StreamKey& o) const noexcept {
      return device != o.device ? device < o.device : context != o.context ? context < o.context : stream < o.stream;
    }
  };
  struct StreamTally {  // per stream track and key: what the stream rows are summed from
    uint64_t calls = 0;
    int64_t time_ns = 0;
  };
  struct HostRange {
    energy::KeyId key;
    bool kept;
  };

  void start_locked();  // throws: set-up
  void start_discarding();
  void route_nvtx();
  void enable_activities();
  void start_flusher();
  void stop_flusher() noexcept;
  void record(const GpuRecord& r);
  energy::KeyId key_of(const GpuRecord& r);
  uint32_t stream_track(const GpuRecord& r);
  bool begin_host_range(energy::KeyId key);
  void push_range(const std::string& name) noexcept;
  void pop_range() noexcept;
  uint64_t start_range(const std::string& name) noexcept;  // the range's id (0: not kept)
  void end_range(uint64_t id) noexcept;
  uint32_t host_track() noexcept;
  friend struct NvtxEntry;  // tracer_nvtx.cpp: the functions NVTX calls
  static Tracer* attached() noexcept;
  void add_stream_rows(energy::Report& report) const;
  std::optional<energy::RegionRow> stream_row(uint32_t track, const StreamKey& sk,
                                              const energy::ChannelReport& ch) const;
  void add_meta(energy::Report& report) const;
  void count_dropped(void* context, uint32_t stream) noexcept;
  std::vector<HostRange>& host_stack() noexcept;

  ProfilerFactory factory_;
  TracerSettings settings_;
  std::unique_ptr<Library> lib_;
  std::unique_ptr<energy::Profiler> profiler_;
  std::unique_ptr<GpuClock> clock_;
  std::atomic<bool> active_{false};
  bool finished_ = false;
  std::mutex finish_mu_;
  uint64_t generation_ = 0;

  std::thread flusher_;  // cuptiActivityFlushAll(0) every flush period, until stop_flusher
  std::mutex flusher_mu_;
  std::condition_variable flusher_cv_;
  bool flusher_stop_ = false;

  std::mutex buffers_mu_;  // the buffer pool
  std::vector<uint8_t*> free_buffers_;
  size_t buffers_out_ = 0, buffers_made_ = 0;
  uint64_t buffers_refused_ = 0;

  std::mutex records_mu_;  // what buffer_completed keeps (CUPTI's thread, or a flush on another)
  std::unordered_map<const char*, energy::KeyId> kernel_keys_;  // CUPTI's name pointer -> key
  std::unordered_map<energy::KeyId, std::string> short_names_;
  std::map<StreamKey, uint32_t> stream_tracks_;
  std::map<std::pair<uint32_t, energy::KeyId>, StreamTally> stream_tallies_;
  std::map<uint32_t, StreamKey> stream_of_track_;
  std::unordered_map<int, energy::KeyId> copy_keys_;  // memcpy kind (memset: -1) -> key
  std::unordered_map<energy::KeyId, std::pair<std::string, energy::Kind>> key_names_;
  uint64_t records_ = 0, incomplete_ = 0, windows_refused_ = 0;
  uint64_t buffers_walked_ = 0;  // buffers buffer_completed walked, and the time it spent on them (CUPTI's thread
  int64_t walk_ns_ = 0;          // waits for it: the overhead measurement reads these)
  uint64_t cupti_dropped_ = 0;
  int64_t first_gpu_ns_ = INT64_MAX, last_gpu_ns_ = INT64_MIN;

  std::mutex nvtx_mu_;  // start/end ranges
  std::unordered_map<uint64_t, HostRange> open_ranges_;
  std::atomic<uint32_t> host_threads_{0};
  std::atomic<uint64_t> nvtx_ranges_{0};

  energy::Report report_;
  std::string table_;
};

}  // namespace dooly::cupti
