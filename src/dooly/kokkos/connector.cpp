#include "dooly/kokkos/connector.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "dooly/common/env.hpp"
#include "dooly/common/error.hpp"
#include "dooly/common/log.hpp"
#include "dooly/energy/report_writers.hpp"
#include "dooly/kokkos/program_symbols.hpp"
#include "dooly/power/registry.hpp"

namespace dooly::kokkos {

using energy::Kind;

namespace {

// Per-thread nesting the Kokkos ABI leaves to the tool (regions and deep copies have no handle).
struct ThreadState {
  uint64_t generation = 0;  // the connector's, not its address: a new connector at a reused address starts clean
  std::vector<energy::KeyId> regions;
  std::vector<energy::KeyId> copies;
};

ThreadState& thread_state(uint64_t generation) {
  thread_local ThreadState state;
  if (state.generation != generation) state = ThreadState{generation, {}, {}};
  return state;
}

std::string default_prefix() {
  char host[256] = "host";
  gethostname(host, sizeof(host) - 1);
  return fmt::format("dooly-energy-{}-{}", host, static_cast<long>(getpid()));
}

// Every setting the connector reads, once: tool arguments are checked against it and --kokkos-tools-help prints
// it, so neither can drift from the other.
struct Setting {
  const char* name;  // without the DOOLY_ prefix
  const char* help;
};
constexpr Setting kSettings[] = {
    {"POWER_SOURCE", "nvml|variorum|rapl|replay (default: first available in that order)"},
    {"GPUS", "CUDA ordinals to watch, e.g. 0,1 (default: every visible GPU)"},
    {"PERIOD_MS", "sampling period (default: 500 for NVML's sample buffer, which returns its backlog; else 20)"},
    {"MODE", "model|trapezoid: which attribution the table leads with (default model)"},
    {"MODEL", "0 = skip the model fit"},
    {"BASELINE_W", "idle power to subtract (default: measured from quiet readings)"},
    {"BASELINE_MS", "measure the idle baseline for this long at start"},
    {"OUTPUT", "file prefix for .csv and .json (default dooly-energy-<host>-<pid>; none = no files)"},
    {"TABLE", "1|0 print the table at the end (default 1)"},
    {"TABLE_FILE", "write the table to this file instead of stdout"},
    {"RECORD", "write every reading and window to this file for `dooly analyze`"},
    {"FENCES", "1 = give fences their own rows (default: no rows; Kokkos is asked to stop calling the fence hooks)"},
    {"SENSOR_WINDOW_MS", "the sensor's effective averaging window (model mode)"},
    {"SENSOR_DELAY_MS", "the sensor's lag (model mode)"},
    {"NVML_MODE", "samples|instant|average (default: the best the GPU supports)"},
    {"MAX_EVENTS", "window edges buffered per host thread between two sampler ticks"},
    {"REPLAY_FILE", "recording to replay as the power source"},
    {"REPLAY_REALTIME", "1|0 replay in real time (default 1)"},
    {"LOG", "error|warn|info|debug"},
    {"TSC", "0 = stamp hooks with steady_clock instead of the CPU's time-stamp counter"},
};

}  // namespace

ConnectorSettings ConnectorSettings::from_env() {
  ConnectorSettings s;
  s.profiler = energy::ProfilerOptions::from_env();
  s.output_prefix = env::get("DOOLY_OUTPUT").value_or(default_prefix());
  if (auto v = env::get_bool("DOOLY_TABLE")) s.table = *v;
  if (auto v = env::get_bool("DOOLY_FENCES")) s.fences = *v;
  if (auto v = env::get("DOOLY_TABLE_FILE")) s.table_path = *v;
  return s;
}

void ConnectorSettings::apply_args(const std::vector<std::string>& args) {
  // Arguments override the environment: set them as DOOLY_ variables and re-read, so both paths share one
  // parser and one set of error messages.
  for (const std::string& a : args) {
    const size_t eq = a.find('=');
    if (eq == std::string::npos || eq == 0)
      DOOLY_THROW(InputError, "write tool arguments as key=value, e.g. --kokkos-tools-args=\"mode=model period_ms=10\"",
                  "tool argument '{}' is not key=value", a);
    std::string key = "DOOLY_" + a.substr(0, eq);
    for (char& c : key) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (std::none_of(std::begin(kSettings), std::end(kSettings),
                     [&](const Setting& k) { return key == std::string("DOOLY_") + k.name; }))
      DOOLY_THROW(InputError, "see the list of settings with --kokkos-tools-help", "unknown tool argument '{}'",
                  a.substr(0, eq));
    setenv(key.c_str(), a.substr(eq + 1).c_str(), 1);
  }
  *this = from_env();
}

namespace {
// Kokkos 3.x and 4.x have these in their core library (C++ names: Kokkos::Tools::Experimental::
// set_begin_fence_callback / set_end_fence_callback): called during init they take the tool's fence hooks out
// of Kokkos's callback table. Found among the program's exported symbols (shared Kokkos) or in the executable's
// symbol table (static Kokkos, the CMake default); a stripped executable keeps calling the hooks.
bool remove_kokkos_fence_hooks() noexcept {
  using SetBegin = void (*)(void (*)(const char*, uint32_t, uint64_t*));
  using SetEnd = void (*)(void (*)(uint64_t));
  auto set_begin = reinterpret_cast<SetBegin>(
      find_program_function("_ZN6Kokkos5Tools12Experimental24set_begin_fence_callbackEPFvPKcjPmE"));
  auto set_end =
      reinterpret_cast<SetEnd>(find_program_function("_ZN6Kokkos5Tools12Experimental22set_end_fence_callbackEPFvmE"));
  if (!set_begin || !set_end) return false;
  set_begin(nullptr);
  set_end(nullptr);
  return true;
}
}  // namespace

Connector::Connector(ProfilerFactory factory, FenceHookRemover remove_fence_hooks)
    : factory_(std::move(factory)), remove_fence_hooks_(std::move(remove_fence_hooks)) {
  if (!remove_fence_hooks_) remove_fence_hooks_ = remove_kokkos_fence_hooks;
  if (!factory_) {
    factory_ = [](const energy::ProfilerOptions& o) {
      static const power::Registry registry = power::make_default_registry();
      return energy::Profiler::open(o, registry);
    };
  }
  try {
    settings_ = ConnectorSettings::from_env();
  } catch (const std::exception& e) {
    settings_ok_ = false;
    log::error("{} -- energy measurement is off for this run", e.what());
  }
}

Connector::~Connector() { finalize(); }

void Connector::disable(const std::string& why) noexcept {
  log::error("{} -- the program runs on without energy measurement", why);
  owner_tp_.store(nullptr, std::memory_order_release);
  events_.store(nullptr, std::memory_order_release);
  profiler_.reset();
}

void Connector::parse_args(int argc, char** argv) noexcept {
  try {
    std::vector<std::string> args;
    for (int i = 0; i < argc; ++i) {
      if (!argv[i]) continue;
      std::string a = argv[i];
      if (i == 0 && a.find('=') == std::string::npos) continue;  // argv[0]: the tool library's name
      args.push_back(std::move(a));
    }
    // No arguments: the constructor already read (and, if bad, reported) the environment.
    if (args.empty()) return;
    settings_.apply_args(args);
    settings_ok_ = true;
  } catch (const std::exception& e) {
    settings_ok_ = false;
    log::error("{} -- energy measurement is off for this run", e.what());
  }
}

void Connector::init(int, uint64_t) noexcept {
  if (!settings_ok_ || profiler_) return;
  try {
    if (settings_.output_prefix != "none") {
      energy::check_writable(settings_.output_prefix + ".json");
    }
    profiler_ = factory_(settings_.profiler);
    static std::atomic<uint64_t> generations{0};
    generation_ = generations.fetch_add(1) + 1;
    for (const auto& s : profiler_->skipped_backends()) log::info("skipped {}", s);
    std::string chans;
    for (const auto& ch : profiler_->channels()) chans += (chans.empty() ? "" : ", ") + ch.name;
    log::info("measuring {} through {} every {:g} ms", chans, profiler_->backend(),
              static_cast<double>(profiler_->period_ns()) / 1e6);
    profiler_->start();
    owner_thread_ = profiler_->events().local();
    events_.store(&profiler_->events(), std::memory_order_release);
    if (owner_thread_) owner_tp_.store(energy::thread_pointer(), std::memory_order_release);
    // Kokkos 4 calls the fence hooks ~6 times per kernel; unless fences are to get rows, have it stop (on the
    // H200's host those calls cost more than the kernel hooks themselves).
    if (!settings_.fences) fence_hooks_removed_ = remove_fence_hooks_();
  } catch (const std::exception& e) {
    disable(e.what());
  }
}

energy::KeyId Connector::learn_label(energy::EventBuffers::Thread& thread, const char* name, Kind kind) noexcept {
  try {
    const energy::KeyId key = profiler_->key(name, kind);
    thread.labels.store(name, kind, key);
    return key;
  } catch (...) {
    return energy::kNoKey;  // out of memory: this launch goes unrecorded, the program runs on
  }
}

void Connector::push_region(const char* name) noexcept {
  if (!profiler_ || !name) return;
  try {
    const energy::KeyId key = profiler_->key(name, Kind::region);
    thread_state(generation_).regions.push_back(key);
    profiler_->begin(key, -1);
  } catch (...) {
  }
}

void Connector::pop_region() noexcept {
  if (!profiler_) return;
  auto& regions = thread_state(generation_).regions;
  if (regions.empty()) return;  // a pop without a push: nothing to close
  profiler_->end(regions.back(), -1);
  regions.pop_back();
}

void Connector::create_section(const char* name, uint32_t* section_id) noexcept {
  if (!section_id) return;
  *section_id = UINT32_MAX;
  if (!profiler_ || !name) return;
  try {
    const energy::KeyId key = profiler_->key(name, Kind::section);
    std::lock_guard<std::mutex> lock(mu_);
    sections_.emplace_back(key, true);
    *section_id = static_cast<uint32_t>(sections_.size() - 1);
  } catch (...) {
  }
}

void Connector::start_section(uint32_t id) noexcept {
  if (!profiler_) return;
  energy::KeyId key;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (id >= sections_.size() || !sections_[id].second) return;
    key = sections_[id].first;
  }
  profiler_->begin(key, -1, 0);
}

void Connector::stop_section(uint32_t id) noexcept {
  if (!profiler_) return;
  energy::KeyId key;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (id >= sections_.size() || !sections_[id].second) return;
    key = sections_[id].first;
  }
  profiler_->end(key, -1, 0);
}

void Connector::destroy_section(uint32_t id) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (id < sections_.size()) sections_[id].second = false;
}

void Connector::profile_event(const char* name) noexcept {
  if (!profiler_ || !name) return;
  try {
    std::lock_guard<std::mutex> lock(mu_);
    ++event_counts_[name];
  } catch (...) {
  }
}

void Connector::declare_metadata(const char* key, const char* value) noexcept {
  if (!profiler_ || !key || !value) return;
  try {
    std::lock_guard<std::mutex> lock(mu_);
    profiler_->add_meta(std::string("kokkos.") + key, value);
  } catch (...) {
  }
}

void Connector::begin_fence(const char* name, uint32_t dev_id, uint64_t* handle) noexcept {
  if (handle) *handle = 0;
  if (!settings_.fences || !profiler_ || !name) return;  // no rows wanted: nothing to do, nothing touched
  try {
    const int32_t device = gpu_ordinal(dev_id);
    const energy::KeyId key = profiler_->key(name, Kind::fence);
    profiler_->begin(key, device);
    if (handle) *handle = encode(key, device);
  } catch (...) {
  }
}

void Connector::end_fence(uint64_t handle) noexcept { end_kernel(handle); }

void Connector::allocate(const Kokkos_Profiling_SpaceHandle& space, const char*, uint64_t size) noexcept {
  if (!profiler_) return;
  try {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string s(space.name, strnlen(space.name, sizeof(space.name)));
    int64_t& cur = space_bytes_[s];
    cur += static_cast<int64_t>(size);
    int64_t& peak = space_peak_[s];
    peak = std::max(peak, cur);
  } catch (...) {
  }
}

void Connector::deallocate(const Kokkos_Profiling_SpaceHandle& space, const char*, uint64_t size) noexcept {
  if (!profiler_) return;
  try {
    std::lock_guard<std::mutex> lock(mu_);
    space_bytes_[std::string(space.name, strnlen(space.name, sizeof(space.name)))] -= static_cast<int64_t>(size);
  } catch (...) {
  }
}

void Connector::begin_deep_copy(const Kokkos_Profiling_SpaceHandle& dst, const char* dst_label,
                                const Kokkos_Profiling_SpaceHandle& src, const char* src_label, uint64_t) noexcept {
  if (!profiler_) return;
  try {
    const std::string name =
        fmt::format("deep_copy {}:{} <- {}:{}", std::string(dst.name, strnlen(dst.name, sizeof(dst.name))),
                    dst_label ? dst_label : "", std::string(src.name, strnlen(src.name, sizeof(src.name))),
                    src_label ? src_label : "");
    const energy::KeyId key = profiler_->key(name, Kind::copy);
    thread_state(generation_).copies.push_back(key);
    profiler_->begin(key, -1);
  } catch (...) {
  }
}

void Connector::end_deep_copy() noexcept {
  if (!profiler_) return;
  auto& copies = thread_state(generation_).copies;
  if (copies.empty()) return;
  profiler_->end(copies.back(), -1);
  copies.pop_back();
}

void Connector::request_tool_settings(uint32_t count, Kokkos_Tools_ToolSettings* settings) noexcept {
  // Global fencing makes each begin/end window bracket the device work it names.
  if (settings && count >= 1) settings->requires_global_fencing = true;
}

std::string Connector::help() {
  std::string h =
      "dooly (libkp_gpu_energy.so): energy per Kokkos kernel and region.\n"
      "Settings (environment DOOLY_<NAME>, or tool arguments name=value):\n";
  for (const Setting& k : kSettings) h += fmt::format("  {:<17} {}\n", k.name, k.help);
  return h;
}

void Connector::finalize() noexcept {
  if (!profiler_) return;
  owner_tp_.store(nullptr, std::memory_order_release);
  events_.store(nullptr, std::memory_order_release);
  try {
    report_ = profiler_->stop();
    {
      std::lock_guard<std::mutex> lock(mu_);
      report_.meta.emplace_back("kokkos.fence_hooks", settings_.fences        ? "rows (DOOLY_FENCES=1)"
                                                       : fence_hooks_removed_ ? "removed at init"
                                                                              : "called and ignored (this Kokkos "
                                                                                "does not let a tool remove them)");
      for (const auto& [name, n] : event_counts_) report_.meta.emplace_back("kokkos.event." + name, std::to_string(n));
      for (const auto& [space, peak] : space_peak_)
        report_.meta.emplace_back("kokkos.peak_bytes." + space, std::to_string(peak));
    }
    write_outputs();
  } catch (const std::exception& e) {
    log::error("finalizing the energy report failed: {}", e.what());
  }
  profiler_.reset();
}

void Connector::write_outputs() noexcept {
  table_ = energy::format_table(report_);
  if (settings_.table) {
    if (!settings_.table_path.empty()) {
      try {
        energy::write_file_atomic(settings_.table_path, table_);
      } catch (const std::exception& e) {
        log::error("{}", e.what());
      }
    } else {
      std::fputs(table_.c_str(), stdout);
      std::fflush(stdout);
    }
  }
  if (settings_.output_prefix == "none") return;
  try {
    energy::write_file_atomic(settings_.output_prefix + ".csv", energy::to_csv(report_));
    energy::write_file_atomic(settings_.output_prefix + ".json", energy::to_json(report_).dump(2) + "\n");
    log::info("wrote {}.csv and {}.json", settings_.output_prefix, settings_.output_prefix);
  } catch (const std::exception& e) {
    log::error("{}", e.what());
  }
}

}  // namespace dooly::kokkos
