#include "dooly/cupti/tracer.hpp"

#include <chrono>

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "dooly/common/clock.hpp"
#include "dooly/common/error.hpp"
#include "dooly/common/log_text.hpp"
#include "dooly/cupti/kernel_names.hpp"
#include "dooly/power/registry.hpp"

namespace dooly::cupti {

using energy::KeyId;
using energy::Kind;

namespace {

// CUPTI's buffer callbacks carry no user pointer: they reach the one attached tracer through this.
std::atomic<Tracer*> g_attached{nullptr};

void on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  if (Tracer* t = g_attached.load(std::memory_order_acquire)) return t->buffer_requested(buffer, size, max_records);
  *buffer = nullptr;
  *size = 0;
  *max_records = 0;
}
void on_buffer_completed(void* context, uint32_t stream, uint8_t* buffer, size_t size, size_t valid) {
  if (Tracer* t = g_attached.load(std::memory_order_acquire))
    return t->buffer_completed(context, stream, buffer, size, valid);
  std::free(buffer);  // a buffer handed out before the tracer finished
}

using log::level_from_word;
using log::one_line;

// The file a loaded function lives in (libdooly_cupti.so's full path, for NVTX_INJECTION64_PATH).
std::string file_of(const void* fn) {
  Dl_info info{};
  if (fn && dladdr(fn, &info) && info.dli_fname) return info.dli_fname;
  return {};
}

}  // namespace

TracerSettings TracerSettings::from_settings(const SettingValues& v) {
  TracerSettings s;
  s.profiler = energy::ProfilerOptions::from_settings(v);
  // The tracer starts in InitializeInjection, which the driver calls from inside cuInit: a second cuInit there
  // (NVML's device mapping asks libcuda for PCI bus ids) fails the program's own ("initialization error").
  s.profiler.power.inside_cuda_init = true;
  s.profiler.event_delay_ns = static_cast<int64_t>(v.number("CUPTI_DELAY_MS").value_or(1000.0) * 1e6);
  s.output = energy::OutputSettings::from_settings(v);
  if (s.output.ranks) s.profiler.per_rank(s.output.ranks->rank);
  if (auto x = v.choice("LOG")) s.log_level = level_from_word(*x);
  if (auto x = v.text("CUPTI_LIB")) s.cupti_library = *x;
  if (auto x = v.whole("CUPTI_BUFFER_KB")) s.buffer_bytes = static_cast<size_t>(*x) * 1024;
  if (auto x = v.whole("CUPTI_MAX_BUFFERS")) s.max_buffers = static_cast<size_t>(*x);
  if (auto x = v.flag("CUPTI_NVTX")) s.nvtx = *x;
  if (auto x = v.number("CUPTI_FLUSH_MS")) s.flush_period_ns = static_cast<int64_t>(*x * 1e6);
  if (auto x = v.flag("CUPTI_DISCARD")) s.discard = *x;
  return s;
}

TracerSettings TracerSettings::from_env() { return from_settings(SettingValues::from_env()); }

Tracer::Tracer(ProfilerFactory factory) : factory_(std::move(factory)) {
  if (!factory_) {
    factory_ = [](const energy::ProfilerOptions& o) {
      static const power::Registry registry = power::make_default_registry();
      return energy::Profiler::open(o, registry);
    };
  }
  static std::atomic<uint64_t> generations{0};
  generation_ = generations.fetch_add(1) + 1;
}

Tracer::~Tracer() {
  finish();
  std::lock_guard<std::mutex> lock(buffers_mu_);
  for (uint8_t* b : free_buffers_) std::free(b);
}

bool Tracer::start() noexcept {
  Tracer* expected = nullptr;
  if (!g_attached.compare_exchange_strong(expected, this)) {
    log::error("another dooly CUPTI tracer is attached in this process -- this one measures nothing");
    return false;
  }
  try {
    start_locked();
    return true;
  } catch (const std::exception& e) {
    log::error("{} -- the program runs on without energy measurement", one_line(e.what()));
  } catch (...) {
    log::error("starting the CUPTI tracer failed -- the program runs on without energy measurement");
  }
  stop_flusher();
  if (lib_)  // whatever was enabled before the failure: CUPTI would go on collecting for nobody
    for (int kind : {abi::kKindConcurrentKernel, abi::kKindMemcpy, abi::kKindMemset})
      lib_->api().cuptiActivityDisable(kind);
  if (profiler_ && profiler_->running()) (void)profiler_->stop();
  profiler_.reset();
  g_attached.store(nullptr, std::memory_order_release);
  return false;
}

void Tracer::start_locked() {
  SettingValues values = SettingValues::from_env();
  settings_ = TracerSettings::from_settings(values);
  if (settings_.log_level) log::set_threshold(*settings_.log_level);
  for (const std::string& w : values.warnings()) log::warn("{}", w);
  lib_ = std::make_unique<Library>(settings_.cupti_library);
  if (settings_.discard) return start_discarding();
  if (settings_.output.prefix != "none") energy::check_writable(settings_.output.prefix + ".json");
  const abi::Api& api = lib_->api();
  profiler_ = factory_(settings_.profiler);
  if (!profiler_ || !profiler_->timed_events())
    throw SourceError("cupti", 0, "the profiler was opened without a delay for GPU records",
                      "set DOOLY_CUPTI_DELAY_MS (a bug if it is set)");
  clock_ = std::make_unique<GpuClock>([get = api.cuptiGetTimestamp] {
    uint64_t t = 0;
    get(&t);
    return t;
  });
  lib_->check(api.cuptiActivityRegisterCallbacks(on_buffer_requested, on_buffer_completed),
              "cuptiActivityRegisterCallbacks");
  profiler_->start();
  enable_activities();
  if (settings_.nvtx) route_nvtx();
  start_flusher();
  active_.store(true, std::memory_order_release);
  std::string chans;
  for (const auto& ch : profiler_->channels()) chans += (chans.empty() ? "" : ", ") + ch.name;
  log::info("measuring {} through {}; GPU work through {}", chans, profiler_->backend(), lib_->file());
}

// CUPTI's own cost, for the overhead measurement: the same activity kinds and buffers, every record thrown away.
void Tracer::start_discarding() {
  lib_->check(lib_->api().cuptiActivityRegisterCallbacks(on_buffer_requested, on_buffer_completed),
              "cuptiActivityRegisterCallbacks");
  enable_activities();
  start_flusher();  // the same CUPTI work as when measuring
  active_.store(true, std::memory_order_release);
  log::info("DOOLY_CUPTI_DISCARD=1: collecting GPU records through {} and discarding them", lib_->file());
}

Tracer* Tracer::attached() noexcept { return g_attached.load(std::memory_order_acquire); }

// NVTX ranges are a bonus: without them (another tool is NVTX's injection) kernels are still measured. NVTX loads
// the library NVTX_INJECTION64_PATH names at each module's first NVTX call; pointed here, it calls
// InitializeInjectionNvtx2 (libdooly_cupti.cpp -> install_nvtx). A module whose first NVTX call came before this
// (before the program's first CUDA call) has turned NVTX off for itself and gives no ranges.
void Tracer::route_nvtx() {
  const std::string self = file_of(reinterpret_cast<const void*>(&Tracer::install_nvtx));
  const char* named = std::getenv("NVTX_INJECTION64_PATH");
  if (named && *named && self != named) {
    log::warn(
        "NVTX ranges are off: NVTX_INJECTION64_PATH names {} (another tool receives them) -- unset it for "
        "NVTX rows",
        named);
    return;
  }
  if (self.empty() || setenv("NVTX_INJECTION64_PATH", self.c_str(), 1) != 0) {
    log::warn("NVTX ranges are off: cannot name this library in NVTX_INJECTION64_PATH");
    return;
  }
  log::info("NVTX ranges through {}", self);
}

void Tracer::start_flusher() {
  if (settings_.flush_period_ns <= 0) return;
  flusher_stop_ = false;
  flusher_ = std::thread([this, flush = lib_->api().cuptiActivityFlushAll] {
    const auto period = std::chrono::nanoseconds(settings_.flush_period_ns);
    std::unique_lock<std::mutex> lock(flusher_mu_);
    while (!flusher_cv_.wait_for(lock, period, [this] { return flusher_stop_; })) {
      lock.unlock();
      flush(0);  // completed buffers only: CUPTI's documented periodic flush
      lock.lock();
    }
  });
}

void Tracer::stop_flusher() noexcept {
  if (!flusher_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(flusher_mu_);
    flusher_stop_ = true;
  }
  flusher_cv_.notify_all();
  flusher_.join();
}

void Tracer::enable_activities() {
  const abi::Api& api = lib_->api();
  lib_->check(api.cuptiActivityEnable(abi::kKindConcurrentKernel), "cuptiActivityEnable(CONCURRENT_KERNEL)");
  lib_->check(api.cuptiActivityEnable(abi::kKindMemcpy), "cuptiActivityEnable(MEMCPY)");
  lib_->check(api.cuptiActivityEnable(abi::kKindMemset), "cuptiActivityEnable(MEMSET)");
}

void Tracer::buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) noexcept {
  *max_records = 0;  // as many as fit
  std::lock_guard<std::mutex> lock(buffers_mu_);
  uint8_t* b = nullptr;
  if (!free_buffers_.empty()) {
    b = free_buffers_.back();
    free_buffers_.pop_back();
  } else if (buffers_made_ < settings_.max_buffers) {
    b = static_cast<uint8_t*>(std::aligned_alloc(8, settings_.buffer_bytes));
    if (b) ++buffers_made_;
  }
  if (!b) {
    ++buffers_refused_;  // CUPTI drops the records it had for it, and counts them
    *buffer = nullptr;
    *size = 0;
    return;
  }
  ++buffers_out_;
  *buffer = b;
  *size = settings_.buffer_bytes;
}

void Tracer::buffer_completed(void* context, uint32_t stream, uint8_t* buffer, size_t, size_t valid_size) noexcept {
  if (buffer && valid_size > 0 && lib_ && profiler_) {
    const abi::Api& api = lib_->api();
    std::lock_guard<std::mutex> lock(records_mu_);
    const int64_t walk_start = now_ns();
    clock_->calibrate();  // a few ns of CUPTI's clock per buffer: the conversion follows any drift
    abi::Activity* rec = nullptr;
    GpuRecord r;
    while (api.cuptiActivityGetNextRecord(buffer, valid_size, &rec) == abi::kSuccess) {
      if (read_record(rec, r)) {
        try {
          record(r);
        } catch (...) {
          ++windows_refused_;  // out of memory for a new name: this record is lost, the program runs on
        }
      } else if (rec->kind == abi::kKindConcurrentKernel || rec->kind == abi::kKindMemcpy ||
                 rec->kind == abi::kKindMemset) {
        ++incomplete_;
      }
    }
    ++buffers_walked_;
    walk_ns_ += now_ns() - walk_start;
  }
  count_dropped(context, stream);
  if (!buffer) return;
  std::lock_guard<std::mutex> lock(buffers_mu_);
  if (buffers_out_ > 0) --buffers_out_;
  try {
    free_buffers_.push_back(buffer);
  } catch (...) {
    std::free(buffer);
    --buffers_made_;
  }
}

void Tracer::count_dropped(void* context, uint32_t stream) noexcept {
  if (!lib_) return;
  size_t dropped = 0;
  if (lib_->api().cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == abi::kSuccess && dropped > 0) {
    std::lock_guard<std::mutex> lock(records_mu_);
    cupti_dropped_ += dropped;
  }
}

void Tracer::record(const GpuRecord& r) {
  ++records_;
  const KeyId key = key_of(r);
  const uint32_t track = stream_track(r);
  const int64_t t0 = clock_->to_steady_ns(r.start_ns);
  const int64_t t1 = std::max(clock_->to_steady_ns(r.end_ns), t0 + 1);
  first_gpu_ns_ = std::min(first_gpu_ns_, t0);
  last_gpu_ns_ = std::max(last_gpu_ns_, t1);
  const auto device = static_cast<int32_t>(r.device);
  if (!profiler_->timed_events()->add_window(key, device, track, t0, t1, energy::flags::nested)) {
    ++windows_refused_;
    return;
  }
  StreamTally& tally = stream_tallies_[{track, key}];
  ++tally.calls;
  tally.time_ns += t1 - t0;
}

KeyId Tracer::key_of(const GpuRecord& r) {
  if (r.kind == RecordKind::kernel) {
    if (auto it = kernel_keys_.find(r.name); it != kernel_keys_.end()) return it->second;
    const std::string name = demangle(r.name);
    const KeyId key = profiler_->key(name, Kind::kernel);
    kernel_keys_.emplace(r.name, key);
    key_names_.emplace(key, std::make_pair(name, Kind::kernel));
    std::string brief = short_name(name);
    if (brief != name) short_names_.emplace(key, std::move(brief));
    return key;
  }
  const int which = r.kind == RecordKind::memcpy ? r.copy_kind : -1;
  if (auto it = copy_keys_.find(which); it != copy_keys_.end()) return it->second;
  const std::string name = which >= 0 ? fmt::format("memcpy {}", abi::memcpy_kind_name(r.copy_kind)) : "memset";
  const KeyId key = profiler_->key(name, Kind::copy);
  copy_keys_.emplace(which, key);
  key_names_.emplace(key, std::make_pair(name, Kind::copy));
  return key;
}

uint32_t Tracer::stream_track(const GpuRecord& r) {
  const StreamKey sk{r.device, r.context, r.stream};
  if (auto it = stream_tracks_.find(sk); it != stream_tracks_.end()) return it->second;
  const auto track = kStreamTrackBase + static_cast<uint32_t>(stream_tracks_.size());
  stream_tracks_.emplace(sk, track);
  stream_of_track_.emplace(track, sk);
  profiler_->name_track(track, fmt::format("stream {} (context {})", r.stream, r.context),
                        static_cast<int32_t>(r.device));
  return track;
}

void Tracer::finish() noexcept {
  std::lock_guard<std::mutex> finish_lock(finish_mu_);
  if (finished_ || !active_.load(std::memory_order_acquire)) return;
  finished_ = true;
  try {
    const abi::Api& api = lib_->api();
    stop_flusher();
    // Everything CUPTI still holds, complete or not (incomplete records are counted and skipped).
    if (const abi::Result rc = api.cuptiActivityFlushAll(abi::kFlushForced); rc != abi::kSuccess)
      log::warn("cuptiActivityFlushAll failed: {} -- the last GPU records may be missing", lib_->describe(rc));
    for (int kind : {abi::kKindConcurrentKernel, abi::kKindMemcpy, abi::kKindMemset}) api.cuptiActivityDisable(kind);
    active_.store(false, std::memory_order_release);
    if (!profiler_) {  // discarding: nothing was measured
      log::info("DOOLY_CUPTI_DISCARD=1: {} activity buffers were used", buffers_made_);
      g_attached.store(nullptr, std::memory_order_release);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(records_mu_);
      clock_->calibrate();
    }
    energy::Report report = profiler_->stop();
    add_stream_rows(report);
    add_meta(report);
    report_ = std::move(report);
    table_ = energy::write_outputs(report_, settings_.output);
  } catch (const std::exception& e) {
    log::error("finishing the CUPTI tracer failed: {}", e.what());
  } catch (...) {
    log::error("finishing the CUPTI tracer failed");
  }
  active_.store(false, std::memory_order_release);
  g_attached.store(nullptr, std::memory_order_release);
}

}  // namespace dooly::cupti
