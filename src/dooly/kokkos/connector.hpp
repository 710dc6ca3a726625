#pragma once
// Kokkos Tools semantics on top of the energy engine. Every hook is noexcept: a failure is logged once and
// the connector degrades to doing nothing, so the host program always runs on.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "dooly/common/log.hpp"
#include "dooly/energy/profiler.hpp"
#include "dooly/energy/report_writers.hpp"
#include "dooly/kokkos/kokkos_abi.hpp"

namespace dooly::kokkos {

struct ConnectorSettings {
  energy::ProfilerOptions profiler;     // under ranks, one recording and trace per rank
  energy::OutputSettings output;        // OUTPUT, TABLE, TABLE_FILE, RANKS*: the files and table at finalize
  bool fences = false;                  // FENCES: give fences their own rows (off: no rows, hooks removed if possible)
  std::optional<log::Level> log_level;  // LOG

  // From checked values (common/settings.hpp: the environment, tool arguments over it); throws InputError.
  static ConnectorSettings from_settings(const SettingValues& values);
  static ConnectorSettings from_env();  // from_settings(SettingValues::from_env())
};

class Connector {
 public:
  using ProfilerFactory = std::function<std::unique_ptr<energy::Profiler>(const energy::ProfilerOptions&)>;
  // Asks the Kokkos runtime to stop calling the tool's fence hooks; true when it could. Default: Kokkos's own
  // Tools::Experimental::set_{begin,end}_fence_callback(nullptr), looked up in the running program.
  using FenceHookRemover = std::function<bool()>;
  explicit Connector(ProfilerFactory factory = {}, FenceHookRemover remove_fence_hooks = {});
  ~Connector();

  // Measurement starts once both init and parse_args have come, in either order (Kokkos 3.4 and 4.x call init
  // first, then parse_args: once in 3.4, twice in 4.x with the same arguments), with the settings of the
  // environment and the arguments over them. Where parse_args never comes (Kokkos 3.4 initialised without
  // argv), the first other hook after init starts it with the environment's settings. Later parse_args calls
  // are ignored, and so is everything after finalize or print_help.
  void parse_args(int argc, char** argv) noexcept;
  void init(int load_seq, uint64_t interface_version) noexcept;
  void finalize() noexcept;
  // --kokkos-tools-help: prints the settings to stdout; nothing is measured (Kokkos finalizes and exits next).
  void print_help() noexcept;
  bool active() const noexcept { return profiler_ != nullptr; }

  // The kernel hooks: inline, so that the extern "C" entry points compile to one short function each.
  [[gnu::always_inline]] void begin_kernel(energy::Kind kind, const char* name, uint32_t dev_id,
                                           uint64_t* kernel_id) noexcept {
    if (kernel_id) *kernel_id = 0;
    energy::EventBuffers::Thread* t = hook_thread();
    if (!t || !name) return;
    const int32_t device = gpu_ordinal(dev_id);
    energy::KeyId key = t->labels.find(name, kind);
    if (key == energy::kNoKey) [[unlikely]] {
      key = learn_label(*t, name, kind);
      if (key == energy::kNoKey) return;
    }
    t->record(key, device, true, energy::flags::nested);
    if (kernel_id) *kernel_id = encode(key, device);
  }
  [[gnu::always_inline]] void end_kernel(uint64_t kernel_id) noexcept {
    if (kernel_id == 0) return;
    if (energy::EventBuffers::Thread* t = hook_thread())
      t->record(decode_key(kernel_id), static_cast<int32_t>(kernel_id & 0xffffffffu) - 1, false, energy::flags::nested);
  }
  void push_region(const char* name) noexcept;
  void pop_region() noexcept;
  void create_section(const char* name, uint32_t* section_id) noexcept;
  void start_section(uint32_t section_id) noexcept;
  void stop_section(uint32_t section_id) noexcept;
  void destroy_section(uint32_t section_id) noexcept;
  void profile_event(const char* name) noexcept;
  void declare_metadata(const char* key, const char* value) noexcept;
  void begin_fence(const char* name, uint32_t dev_id, uint64_t* handle) noexcept;
  void end_fence(uint64_t handle) noexcept;
  void allocate(const Kokkos_Profiling_SpaceHandle& space, const char* label, uint64_t size) noexcept;
  void deallocate(const Kokkos_Profiling_SpaceHandle& space, const char* label, uint64_t size) noexcept;
  void begin_deep_copy(const Kokkos_Profiling_SpaceHandle& dst, const char* dst_label,
                       const Kokkos_Profiling_SpaceHandle& src, const char* src_label, uint64_t size) noexcept;
  void end_deep_copy() noexcept;
  void request_tool_settings(uint32_t count, Kokkos_Tools_ToolSettings* settings) noexcept;
  static std::string help();

  // What finalize() printed / wrote (for tests).
  const energy::Report& last_report() const noexcept { return report_; }
  const std::string& last_table() const noexcept { return table_; }

 private:
  // Never 0 (0 = "no window"): key 0 on a host device (-1) must still get a handle.
  static uint64_t encode(energy::KeyId key, int32_t device) noexcept {
    return ((static_cast<uint64_t>(key) + 1) << 32) | static_cast<uint32_t>(device + 1);
  }
  static energy::KeyId decode_key(uint64_t handle) noexcept { return static_cast<energy::KeyId>((handle >> 32) - 1); }
  void disable(const std::string& why) noexcept;
  // The calling thread's share of the profiler's event rings; nullptr while nothing is measured.
  energy::EventBuffers::Thread* hook_thread() noexcept {
    // The thread that initialised the tool (the one that launches the kernels, normally) is known by its thread
    // pointer: its hooks read nothing else of the tool's before the ring itself.
    if (energy::thread_pointer() == owner_tp_.load(std::memory_order_acquire)) [[likely]]
      return owner_thread_;
    return other_thread();
  }
  // Any other thread's (out of line: the hooks' code stays short, a few cache lines).
  [[gnu::noinline]] energy::EventBuffers::Thread* other_thread() noexcept {
    energy::EventBuffers* events = events_.load(std::memory_order_acquire);
    if (!events) [[unlikely]]
      return late_start_thread();
    return events->local();
  }
  // Not measuring: starts now if init came and parse_args did not; the calling thread's share, or nullptr.
  [[gnu::cold]] energy::EventBuffers::Thread* late_start_thread() noexcept;
  // The other hooks' check: measuring, or started now (as late_start_thread).
  bool measuring() noexcept { return profiler_ != nullptr || late_start(); }
  [[gnu::cold, gnu::noinline]] bool late_start() noexcept;
  void start_locked() noexcept;  // under start_mu_, in state pending
  // A label the thread's memo does not hold: interned and remembered; kNoKey if that failed (out of memory).
  energy::KeyId learn_label(energy::EventBuffers::Thread& thread, const char* name, energy::Kind kind) noexcept;
  void write_outputs() noexcept;

  // What every kernel hook reads of the connector, first and together (one cache line: after a GPU launch and
  // fence little of the tool is still in cache, and each line it touches costs tens of ns on the H200's host).
  // Published with release stores (owner_thread_ before owner_tp_) and read with acquire loads: plain moves on
  // x86-64, ordered on weaker CPUs (aarch64) when init and finalize race hooks on other threads.
  std::atomic<const void*> owner_tp_{nullptr};  // thread_pointer() of the thread that ran init, while measuring
  energy::EventBuffers::Thread* owner_thread_ = nullptr;  // its share of events_
  std::atomic<energy::EventBuffers*> events_{nullptr};    // the profiler's while it measures, else nullptr
  std::unique_ptr<energy::Profiler> profiler_;
  uint64_t generation_ = 0;  // tells this connector's per-thread region/copy stacks from another's

  ProfilerFactory factory_;
  FenceHookRemover remove_fence_hooks_;
  bool fence_hooks_removed_ = false;  // Kokkos no longer calls begin/end_fence
  ConnectorSettings settings_;
  // waiting (for init) -> pending (init came; for parse_args or a hook) -> measuring | off; off after finalize.
  enum class State { waiting, pending, measuring, off };
  std::atomic<State> state_{State::waiting};
  std::mutex start_mu_;  // state changes
  bool args_seen_ = false;
  std::vector<std::string> args_;
  std::mutex mu_;                                         // sections, counters
  std::vector<std::pair<energy::KeyId, bool>> sections_;  // id -> key, alive
  std::unordered_map<std::string, uint64_t> event_counts_;
  std::unordered_map<std::string, int64_t> space_bytes_, space_peak_;
  energy::Report report_;
  std::string table_;
};

}  // namespace dooly::kokkos
