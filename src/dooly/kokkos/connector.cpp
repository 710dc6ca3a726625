#include "dooly/kokkos/connector.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "dooly/common/error.hpp"
#include "dooly/common/log.hpp"
#include "dooly/common/log_text.hpp"
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

using log::level_from_word;
using log::one_line;

}  // namespace

ConnectorSettings ConnectorSettings::from_settings(const SettingValues& v) {
  ConnectorSettings s;
  s.profiler = energy::ProfilerOptions::from_settings(v);
  s.output = energy::OutputSettings::from_settings(v);
  if (s.output.ranks) s.profiler.per_rank(s.output.ranks->rank);
  if (auto x = v.flag("FENCES")) s.fences = *x;
  if (auto x = v.choice("LOG")) s.log_level = level_from_word(*x);
  return s;
}

ConnectorSettings ConnectorSettings::from_env() { return from_settings(SettingValues::from_env()); }

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
}

Connector::~Connector() { finalize(); }

void Connector::disable(const std::string& why) noexcept {
  log::error("{} -- the program runs on without energy measurement", one_line(why));
  owner_tp_.store(nullptr, std::memory_order_release);
  events_.store(nullptr, std::memory_order_release);
  profiler_.reset();
}

void Connector::parse_args(int argc, char** argv) noexcept {
  std::lock_guard<std::mutex> lock(start_mu_);
  if (args_seen_) return;  // Kokkos 4 passes the same arguments a second time
  args_seen_ = true;
  try {
    for (int i = 0; i < argc; ++i)
      if (argv[i]) args_.emplace_back(argv[i]);
  } catch (...) {
    args_.clear();  // out of memory: the environment's settings
  }
  if (state_.load(std::memory_order_relaxed) == State::pending) start_locked();
}

void Connector::init(int, uint64_t) noexcept {
  std::lock_guard<std::mutex> lock(start_mu_);
  if (state_.load(std::memory_order_relaxed) != State::waiting) return;
  state_.store(State::pending, std::memory_order_release);
  if (args_seen_) start_locked();
}

void Connector::print_help() noexcept {
  {
    std::lock_guard<std::mutex> lock(start_mu_);
    if (state_.load(std::memory_order_relaxed) != State::measuring) state_.store(State::off, std::memory_order_release);
  }
  try {
    const std::string h = help();
    std::fputs(h.c_str(), stdout);
    std::fflush(stdout);
  } catch (...) {
  }
}

bool Connector::late_start() noexcept {
  if (state_.load(std::memory_order_acquire) != State::pending) return profiler_ != nullptr;
  std::lock_guard<std::mutex> lock(start_mu_);
  if (state_.load(std::memory_order_relaxed) == State::pending) start_locked();
  return profiler_ != nullptr;
}

energy::EventBuffers::Thread* Connector::late_start_thread() noexcept {
  if (!late_start()) return nullptr;
  energy::EventBuffers* events = events_.load(std::memory_order_acquire);
  return events ? events->local() : nullptr;
}

void Connector::start_locked() noexcept {
  state_.store(State::off, std::memory_order_release);  // unless everything below succeeds
  try {
    SettingValues values = SettingValues::from_env();
    values.apply_args(args_);
    settings_ = ConnectorSettings::from_settings(values);
    if (settings_.log_level) log::set_threshold(*settings_.log_level);
    for (const std::string& w : values.warnings()) log::warn("{}", w);
  } catch (const std::exception& e) {
    log::error("{} -- energy measurement is off for this run", one_line(e.what()));
    return;
  }
  try {
    if (settings_.output.prefix != "none") {
      energy::check_writable(settings_.output.prefix + ".json");
    }
    profiler_ = factory_(settings_.profiler);
    static std::atomic<uint64_t> generations{0};
    generation_ = generations.fetch_add(1) + 1;
    for (const auto& s : profiler_->skipped_backends()) log::info("skipped {}", one_line(s));
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
    state_.store(State::measuring, std::memory_order_release);
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
  if (!measuring() || !name) return;
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
  if (!measuring() || !name) return;
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
  if (!measuring() || !name) return;
  try {
    std::lock_guard<std::mutex> lock(mu_);
    ++event_counts_[name];
  } catch (...) {
  }
}

void Connector::declare_metadata(const char* key, const char* value) noexcept {
  if (!measuring() || !key || !value) return;
  try {
    std::lock_guard<std::mutex> lock(mu_);
    profiler_->add_meta(std::string("kokkos.") + key, value);
  } catch (...) {
  }
}

void Connector::begin_fence(const char* name, uint32_t dev_id, uint64_t* handle) noexcept {
  if (handle) *handle = 0;
  if (!measuring() || !settings_.fences || !name) return;  // no rows wanted: nothing to do, nothing touched
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
  if (!measuring()) return;
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
  if (!measuring()) return;
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
  h += settings_help();
  return h;
}

void Connector::finalize() noexcept {
  std::lock_guard<std::mutex> start_lock(start_mu_);
  state_.store(State::off, std::memory_order_release);  // hooks after finalize start nothing
  if (!profiler_) return;
  owner_tp_.store(nullptr, std::memory_order_release);
  events_.store(nullptr, std::memory_order_release);
  try {
    report_ = profiler_->stop();
    {
      std::lock_guard<std::mutex> lock(mu_);
      report_.meta.emplace_back("kokkos.fence_hooks", settings_.fences       ? "rows (DOOLY_FENCES=1)"
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

void Connector::write_outputs() noexcept { table_ = energy::write_outputs(report_, settings_.output); }

}  // namespace dooly::kokkos
