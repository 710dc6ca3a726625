#include "dooly/energy/profiler.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <thread>

#include "dooly/common/clock.hpp"
#include "dooly/common/error.hpp"
#include "dooly/common/log.hpp"
#include "dooly/energy/ranks.hpp"
#include "dooly/energy/recording.hpp"
#include "dooly/energy/report.hpp"
#include "dooly/energy/report_writers.hpp"

namespace dooly::energy {

namespace {
// The longest wait before the start's baseline measurement (a sensor window longer than this is unusual).
constexpr int64_t kMaxBaselineSettleNs = 5'000'000'000;
int64_t ms_to_ns(double ms) { return static_cast<int64_t>(ms * 1e6); }

// The attribution's own settings: baseline, the model fit, the split of concurrent kernels.
void attribution_from(const SettingValues& v, AttributorOptions& a) {
  if (auto x = v.number("BASELINE_W")) a.baseline_w = *x;
  if (auto x = v.flag("FIT")) a.model = *x;
  if (auto x = v.flag("OVERLAP_SPLIT")) a.split_overlaps = *x;
  if (auto x = v.number("OVERLAP_SPAN_MS")) a.split_span_ns = ms_to_ns(*x);
}
}  // namespace

ProfilerOptions ProfilerOptions::from_settings(const SettingValues& v) {
  ProfilerOptions o;
  if (auto x = v.choice("POWER_SOURCE")) o.source = *x;
  if (auto x = v.text("REPLAY_FILE")) o.power.path = *x;
  if (auto x = v.flag("REPLAY_REALTIME")) o.power.replay_realtime = *x;
  if (auto x = v.number("PERIOD_MS")) {
    o.period_ns = ms_to_ns(*x);
    o.period_given = true;
  }
  if (auto x = v.number("BASELINE_MS")) o.baseline_measure_ns = ms_to_ns(*x);
  if (auto x = v.number("SENSOR_WINDOW_MS")) o.sensor_window_ns = ms_to_ns(*x);
  if (auto x = v.number("SENSOR_DELAY_MS")) o.sensor_delay_ns = ms_to_ns(*x);
  attribution_from(v, o.attribution);
  if (auto x = v.choice("MODE")) o.mode = mode_from_string(*x);
  if (auto x = v.text("RECORD")) o.record_path = *x;
  if (auto x = v.whole("MAX_EVENTS")) o.max_buffered_events = static_cast<size_t>(*x);
  if (auto x = v.text("TRACE")) o.trace_path = *x;
  if (auto x = v.whole("TRACE_MAX_WINDOWS")) o.trace_max_windows = static_cast<size_t>(*x);
  if (auto x = v.whole("CUPTI_MAX_PENDING")) o.max_staged_events = static_cast<size_t>(*x);
  if (auto x = v.list("GPUS")) {
    for (const auto& item : *x) {
      int d = -1;
      try {
        size_t pos = 0;
        d = std::stoi(item, &pos);
        if (pos != item.size() || d < 0) throw std::invalid_argument(item);
      } catch (const std::exception&) {
        DOOLY_THROW(InputError, "set DOOLY_GPUS to CUDA ordinals such as 0,1",
                    "DOOLY_GPUS item '{}' is not a GPU ordinal", item);
      }
      o.power.cuda_devices.push_back(d);
    }
  }
  return o;
}

ProfilerOptions ProfilerOptions::from_env() { return from_settings(SettingValues::from_env()); }

void ProfilerOptions::per_rank(int rank) {
  if (!record_path.empty()) record_path = per_rank_path(record_path, rank);
  if (!trace_path.empty()) trace_path = per_rank_path(trace_path, rank);
}

// The recording is written on a thread of its own. Formatting two lines per kernel on the sampler's tick made
// the sampler fall behind at a million kernels a second (13 ticks in 1.4 s instead of ~70) and the hooks' rings
// overflow (~29 % of the windows dropped). Now a tick hands its items over in one batch and goes on. The queue
// is bounded (kMaxQueued items, ~64 MiB: ~1.5 s of a million kernels a second with the disk stalled): a producer
// that finds it full waits for the writer (the time waited is in the meta), so memory stays bounded and the
// recording whole.
struct Profiler::RecordBatch {
  std::vector<std::pair<std::string, std::string>> meta;
  std::vector<RecordedKey> keys;
  std::vector<power::Reading> samples;
  std::vector<Event> events;
  std::vector<power::RecordedCounter> counters;
  size_t size() const noexcept { return meta.size() + keys.size() + samples.size() + events.size() + counters.size(); }
  void clear() noexcept {
    meta.clear();
    keys.clear();
    samples.clear();
    events.clear();
    counters.clear();
  }
};

class Profiler::Recorder {
 public:
  using Batch = RecordBatch;
  static constexpr size_t kMaxQueued = size_t{1} << 21;

  // Throws InputError with the fix when the file cannot be written.
  Recorder(const std::string& path, const std::string& backend, const std::vector<power::Channel>& channels)
      : writer_(path) {
    writer_.write_meta("backend", backend);
    for (const auto& ch : channels) writer_.write_channel(ch);
    thread_ = std::thread([this] { run(); });
  }
  ~Recorder() {
    try {
      finish();
    } catch (...) {
    }
  }

  // Queues the batch's items and leaves `batch` empty (with a recycled batch's capacity). Thread-safe.
  void submit(Batch& batch) noexcept {
    if (batch.size() == 0) return;
    try {
      std::unique_lock<std::mutex> lock(mu_);
      if (queued_ > 0 && queued_ + batch.size() > kMaxQueued) {
        const int64_t t0 = now_ns();
        space_.wait(lock, [&] { return queued_ == 0 || queued_ + batch.size() <= kMaxQueued; });
        wait_ns_ += now_ns() - t0;
      }
      Batch next;
      if (!spares_.empty()) {
        next = std::move(spares_.back());
        spares_.pop_back();
      }
      queued_ += batch.size();
      queue_.push_back(std::move(batch));
      batch = std::move(next);
      work_.notify_one();
    } catch (const std::exception& e) {
      fail(e.what());
      batch.clear();
    }
  }
  // Writes what is queued, ends the thread and flushes; throws InputError if the recording did not reach the
  // file. Once.
  void finish() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (done_) return;
      done_ = true;
      work_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
    writer_.flush();
  }
  double wait_s() {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<double>(wait_ns_) * 1e-9;
  }

 private:
  void fail(const char* why) noexcept {
    if (!failed_.exchange(true)) log::error("recording to {} failed, it stops here: {}", writer_.path(), why);
  }
  void write(const Batch& b) noexcept {
    if (failed_.load(std::memory_order_relaxed)) return;
    try {
      // Keys before the events that name them; within a tick the order of the kinds does not matter.
      for (const auto& [k, v] : b.meta) writer_.write_meta(k, v);
      for (const auto& k : b.keys) writer_.write_key(k);
      for (const auto& r : b.samples) writer_.write_sample(r);
      for (const auto& e : b.events) writer_.write_event(e);
      for (const auto& c : b.counters) writer_.write_counter(c);
    } catch (const std::exception& e) {
      fail(e.what());
    }
  }
  void run() noexcept {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      work_.wait(lock, [this] { return done_ || !queue_.empty(); });
      if (queue_.empty()) return;  // done and drained
      Batch b = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      write(b);
      const size_t n = b.size();
      b.clear();
      lock.lock();
      queued_ -= n;
      try {
        if (spares_.size() < 2) spares_.push_back(std::move(b));
      } catch (...) {
      }
      space_.notify_all();
    }
  }

  RecordingWriter writer_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable work_, space_;
  std::deque<Batch> queue_;
  std::vector<Batch> spares_;
  size_t queued_ = 0;
  bool done_ = false;
  int64_t wait_ns_ = 0;
  std::atomic<bool> failed_{false};
};

std::unique_ptr<Profiler> Profiler::open(ProfilerOptions options, const power::Registry& registry) {
  power::Selection sel = power::select(registry, options.power, options.source);
  auto p = std::make_unique<Profiler>(std::move(options), std::move(sel.session), sel.backend);
  p->skipped_ = std::move(sel.skipped);
  return p;
}

Profiler::Profiler(ProfilerOptions options, std::unique_ptr<power::Session> session, std::string backend)
    : options_(std::move(options)),
      session_(std::move(session)),
      backend_(std::move(backend)),
      buffers_(options_.max_buffered_events) {
  buffers_.accept(false);  // until start()
  channels_ = session_->channels();
  if (!options_.period_given && session_->preferred_poll_period_ns() > 0)
    options_.period_ns = session_->preferred_poll_period_ns();
  for (auto& ch : channels_) apply_sensor_overrides(ch, options_.sensor_window_ns, options_.sensor_delay_ns);
  channel_dead_.assign(channels_.size(), false);
  attributor_ = std::make_unique<Attributor>(channels_, keys_, options_.attribution);
  if (options_.event_delay_ns > 0) staged_ = std::make_unique<TimedEvents>(options_.max_staged_events);
  if (!options_.trace_path.empty()) check_writable(options_.trace_path);
  if (!options_.record_path.empty()) {
    recorder_ = std::make_unique<Recorder>(options_.record_path, backend_, channels_);  // throws InputError
    record_ = std::make_unique<RecordBatch>();
  }
}

Profiler::~Profiler() {
  if (running_) {
    try {
      (void)stop();
    } catch (...) {
    }
  }
}

void Profiler::add_meta(std::string key, std::string value) {
  if (recorder_) {
    Recorder::Batch b;
    b.meta.emplace_back(key, value);
    recorder_->submit(b);
  }
  meta_.emplace_back(std::move(key), std::move(value));
}

void Profiler::read_counters() noexcept {
  if (!session_->supports_energy_counter()) return;
  for (uint32_t c = 0; c < channels_.size(); ++c) {
    const int64_t t0 = now_ns();
    std::optional<double> e = session_->energy_counter_j(c);
    const int64_t t1 = now_ns();
    if (!e) continue;
    const int64_t t = t0 + (t1 - t0) / 2;
    std::lock_guard<std::mutex> lock(attributor_mu_);
    attributor_->add_counter(c, t, *e);
    if (recorder_) {
      try {
        Recorder::Batch b;
        b.counters.push_back(power::RecordedCounter{c, t, *e});
        recorder_->submit(b);
      } catch (...) {
      }
    }
  }
}

// One poll of the power source: its readings to the attributor, the trace and the recording; a fatal status marks
// every channel dead (after its last readings). Called by tick() under the attributor's lock; may throw.
void Profiler::poll_readings() {
  readings_.clear();
  const int64_t cpu0 = thread_cpu_ns();
  const power::PollStatus st = session_->poll(readings_);
  poll_cpu_ns_.fetch_add(thread_cpu_ns() - cpu0, std::memory_order_relaxed);
  if (!st.ok && st.message != last_poll_error_) {
    log::warn("{}: {}", backend_, st.message);
    last_poll_error_ = st.message;
  }
  for (const power::Reading& r : readings_) attributor_->add_reading(r);
  if (timeline_)
    for (const power::Reading& r : readings_) timeline_->add_reading(r);
  if (recorder_) record_->samples.insert(record_->samples.end(), readings_.begin(), readings_.end());
  // After this poll's readings (the last a failing source hands over): the model keeps the segments a live
  // channel's readings still need, not a dead one's.
  if (!st.fatal) return;
  for (uint32_t c = 0; c < channels_.size(); ++c) {
    if (channel_dead_[c]) continue;
    channel_dead_[c] = true;
    attributor_->mark_dead(c);
  }
}

void Profiler::tick(int64_t) noexcept {
  std::lock_guard<std::mutex> attributor_lock(attributor_mu_);
  try {
    poll_readings();
    // Every event stamped before this calibration pair is drained now, but for one whose thread was
    // preempted between its clock read and its store: it comes at a later tick and the attributor puts it
    // back in time order.
    converter_.calibrate();
    const int64_t complete_ns = converter_.to_ns(ticks());
    attributor_->expect_events(complete_ns);
    if (staged_) {
      // Events with their own time stamps come late: only what is older than the delay is final.
      buffers_.drain_in_order(drained_, [&](uint32_t thread, const RawEvent& raw) {
        const int64_t t = converter_.to_ns(raw.ticks);
        if (raw.begin)
          (void)staged_->add_begin(raw.key, raw.device, thread, t, raw.flags);
        else
          staged_->add_end(raw.key, raw.device, thread, t, raw.flags);
      });
      const int64_t horizon = complete_ns - options_.event_delay_ns;
      attributor_->expect_events(horizon);
      staged_->release(horizon, [&](const Event& e) { take_event(e); });
      attributor_->advance(horizon);
      if (recorder_) recorder_->submit(*record_);
      return;
    }
    // Per event, inlined into the drain loop (a call per event was ~7 % of the sampler's time).
    buffers_.drain_in_order(
        drained_, [&](uint32_t thread, const RawEvent& raw) __attribute__((always_inline)) {
          const Event e{converter_.to_ns(raw.ticks), raw.key, thread, raw.device, raw.begin != 0, raw.flags};
          if (timeline_) [[unlikely]]
            return take_event(e);
          attributor_->add_event(e);
          if (recorder_) {
            if (e.key >= recorded_keys_.size() || !recorded_keys_[e.key]) [[unlikely]]
              note_key(e.key);
            record_->events.push_back(e);
          }
        });
    attributor_->advance(complete_ns);
    if (recorder_) recorder_->submit(*record_);
  } catch (const std::exception& ex) {
    log::error("sampler tick failed: {}", ex.what());
    if (record_) record_->clear();
  }
}

void Profiler::take_event(const Event& e) {
  attributor_->add_event(e);
  if (timeline_) timeline_->add_event(e);
  if (recorder_) {
    if (e.key >= recorded_keys_.size() || !recorded_keys_[e.key]) [[unlikely]]
      note_key(e.key);
    record_->events.push_back(e);
  }
}

void Profiler::name_track(uint32_t track, std::string name, int32_t device) {
  std::lock_guard<std::mutex> lock(tracks_mu_);
  track_names_.emplace_back(track, std::move(name), device);
}

void Profiler::finish_trace(Report& report) noexcept {
  if (!timeline_) return;
  try {
    {
      std::lock_guard<std::mutex> lock(tracks_mu_);
      for (const auto& [track, name, device] : track_names_) timeline_->name_track(track, name, device);
    }
    write_file_atomic(options_.trace_path, timeline_->to_json_text(keys_));
    report.meta.emplace_back("trace", options_.trace_path);
    if (timeline_->windows_aggregated() > 0) {
      report.meta.emplace_back("trace_windows_aggregated", std::to_string(timeline_->windows_aggregated()));
      log::warn(
          "the trace {} keeps the first {} of {} windows whole; the other {} are a count and a total time per "
          "name in its metadata (raise DOOLY_TRACE_MAX_WINDOWS for more)",
          options_.trace_path, timeline_->windows_kept(), timeline_->windows_seen(), timeline_->windows_aggregated());
    }
    log::info("wrote the trace {} ({} windows)", options_.trace_path, timeline_->windows_kept());
  } catch (const std::exception& e) {
    log::error("writing the trace failed: {}", e.what());
  }
}

void Profiler::note_key(KeyId key) {
  if (key >= recorded_keys_.size()) recorded_keys_.resize(key + 1, false);
  recorded_keys_[key] = true;
  const KeyInfo info = keys_.info(key);
  record_->keys.push_back(RecordedKey{key, std::string(to_string(info.kind)), info.name});
}

void Profiler::start() {
  if (running_) return;
  // Each start/stop is a run of its own: a second start attributes afresh (the profiler's per-point windows).
  if (ran_) attributor_ = std::make_unique<Attributor>(channels_, keys_, options_.attribution);
  ran_ = true;
  if (!options_.trace_path.empty())
    timeline_ = std::make_unique<Timeline>(channels_, TimelineOptions{options_.trace_max_windows});
  converter_.calibrate_initial();
  start_ns_ = now_ns();
  read_counters();
  attributor_->begin_run(start_ns_);
  if (timeline_) timeline_->begin_run(start_ns_);
  running_ = true;
  buffers_.accept(true);
  sampler_ = std::make_unique<Sampler>(options_.period_ns, [this](int64_t now) { tick(now); });
  sampler_->start();
  if (options_.baseline_measure_ns > 0) {
    // A quiet interval measured before the program's work starts: its mean power is the idle baseline. A reading
    // averages the sensor's window before it (and comes its delay late), so the readings of the first window
    // after start still hold what ran before (the program's start-up, CUDA's context): it is waited out first.
    // Variorum's NVIDIA power (NVML's 1-second average) measured 145 W here against 122.6 W for NVML's 25 ms
    // samples on the same H200 (2026-12-04), and every J/call in the trapezoid mode came out 14-23 % low.
    int64_t settle_ns = 0;
    for (const auto& ch : channels_) settle_ns = std::max(settle_ns, ch.sensor.window_ns + ch.sensor.delay_ns);
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<int64_t>(settle_ns, kMaxBaselineSettleNs)));
    const KeyId idle = keys_.intern("<idle baseline>", Kind::idle);
    begin(idle, -1, 0);
    std::this_thread::sleep_for(std::chrono::nanoseconds(options_.baseline_measure_ns));
    end(idle, -1, 0);
  }
}

Report Profiler::stop() {
  if (!running_) return Report{};
  running_ = false;
  buffers_.accept(false);
  const int64_t t_end = now_ns();
  read_counters();
  // Readings that cover the last windows may arrive a sensor period later: give the sampler that long.
  int64_t lag_ns = 0;
  for (const auto& ch : channels_) lag_ns = std::max(lag_ns, ch.sensor.delay_ns + ch.sensor.update_ns);
  std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<int64_t>(lag_ns, 200'000'000)));
  sampler_->stop();
  if (staged_) {  // what is still staged: the front end flushed its last records before stopping
    std::lock_guard<std::mutex> lock(attributor_mu_);
    staged_->release(INT64_MAX, [&](const Event& e) {
      if (e.t_ns <= t_end) take_event(e);
    });
    if (recorder_) recorder_->submit(*record_);
  }
  Report report = attributor_->finish(t_end);
  report.backend = backend_;
  report.mode = options_.mode;
  report.meta = meta_;
  report.meta.emplace_back("sampler_period_ms", fmt::format("{:g}", static_cast<double>(options_.period_ns) / 1e6));
  report.meta.emplace_back("sampler_ticks", std::to_string(sampler_->ticks()));
  report.meta.emplace_back("sampler_missed_deadlines", std::to_string(sampler_->missed_deadlines()));
  report.meta.emplace_back("sampler_cpu_s", fmt::format("{:.6f}", sampler_->thread_cpu_s()));
  // Of which reading the power source (NVML's sample buffer costs ~0.5 ms a call); the rest is attribution.
  report.meta.emplace_back("sampler_poll_cpu_s", fmt::format("{:.6f}", poll_cpu_s()));
  report.meta.emplace_back("sampler_page_faults", std::to_string(sampler_->page_faults()));
  report.events_dropped = buffers_.dropped();
  if (report.events_dropped > 0) {
    // Said here, on stderr, whatever outputs are on (the table's line is not printed with DOOLY_TABLE=0).
    report.meta.emplace_back("events_dropped", std::to_string(report.events_dropped));
    log::warn(
        "{} window edges were dropped (the hooks' buffer of {} events per thread filled between two sampler "
        "ticks): those windows' calls and energy are missing from every figure; raise DOOLY_MAX_EVENTS or "
        "lower DOOLY_PERIOD_MS",
        report.events_dropped, buffers_.capacity());
  }
  if (const uint64_t stray = buffers_.stray_ends(); stray > 0) {
    report.meta.emplace_back("window_ends_stray", std::to_string(stray));
    log::warn(
        "{} window ends came on a thread with no window of its own open: a free window (a section) must end on the "
        "thread that began it, so those ends were ignored and their windows, wherever they began, stay open to the "
        "end of the run (counted as unmatched); end each window on its own thread",
        stray);
  }
  if (staged_) {
    const uint64_t full = staged_->dropped_full(), late = staged_->dropped_late();
    report.events_dropped += 2 * (full + late);
    report.meta.emplace_back("staged_windows_dropped_full", std::to_string(full));
    report.meta.emplace_back("staged_windows_dropped_late", std::to_string(late));
    report.meta.emplace_back("staged_ends_moved", std::to_string(staged_->ends_moved()));
    report.meta.emplace_back("event_delay_ms", fmt::format("{:g}", static_cast<double>(options_.event_delay_ns) / 1e6));
    if (full > 0)
      log::warn("{} windows were dropped: {} edges waited for their delay at once (raise DOOLY_CUPTI_MAX_PENDING)",
                full, staged_->capacity());
    if (late > 0)
      log::warn("{} windows came later than the {:g} ms delay allows and were dropped (raise DOOLY_CUPTI_DELAY_MS)",
                late, static_cast<double>(options_.event_delay_ns) / 1e6);
  }
  finish_trace(report);
  if (recorder_) {
    Recorder::Batch b;
    b.meta = {{"run_start_ns", std::to_string(start_ns_)}, {"run_end_ns", std::to_string(t_end)}};
    recorder_->submit(b);
    recorder_->finish();  // throws InputError with the fix if the recording did not reach the disk
    std::error_code ec;   // where it is, for `dooly ranks --joint` run from another folder
    const std::filesystem::path where = std::filesystem::absolute(options_.record_path, ec);
    report.meta.emplace_back("recording", ec ? options_.record_path : where.string());
    report.meta.emplace_back("recording_wait_s", fmt::format("{:.6f}", recorder_->wait_s()));
  }
  return report;
}

}  // namespace dooly::energy
