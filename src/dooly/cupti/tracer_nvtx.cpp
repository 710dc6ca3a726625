// The tracer's NVTX side. libdooly_cupti.so is NVTX's injection library (the tracer points NVTX_INJECTION64_PATH
// at it): NVTX calls InitializeInjectionNvtx2, install_nvtx writes the functions below into NVTX's tables, and
// from then on each nvtxRangePush/Pop/Start/End of the program calls them directly, on the calling thread. A range
// becomes a free window on that thread's track, stamped on the host's steady clock, staged with the GPU records.
// No CUPTI callback is subscribed (through CUPTI's NVTX callbacks, a launch-bound loop cost 4.3 % over CUPTI alone
// against 0.5 % without them: docs/results/2026-12-04-h200-issue13-overlap-overhead.md).
#include <unistd.h>

#include <mutex>
#include <string>
#include <unordered_set>

#include <fmt/format.h>

#include "dooly/common/clock.hpp"
#include "dooly/cupti/tracer.hpp"

namespace dooly::cupti {

using energy::KeyId;
using energy::Kind;

namespace {

// Registered strings and domains: the handle NVTX hands back to the program is the interned text itself, so a
// range named by a handle reads its name without a lookup. Never freed: the program keeps its handles.
const char* intern(const char* text) {
  static std::mutex mu;
  static auto* strings = new std::unordered_set<std::string>;
  std::lock_guard<std::mutex> lock(mu);
  return strings->insert(text ? text : "").first->c_str();
}

const char* message_of(const abi::NvtxEventAttributes* a) {
  if (a && a->message && (a->message_type == abi::kNvtxMessageAscii || a->message_type == abi::kNvtxMessageRegistered))
    return static_cast<const char*>(a->message);
  return "<unnamed range>";  // wide strings (nvtx*W) are not read
}

thread_local int t_depth = 0;  // nvtxRangePush/Pop return the level of the range they open or close

}  // namespace

// What NVTX calls (its function types: nvtx3/nvtxDetail/nvtxTypes.h).
struct NvtxEntry {
  static int push(const char* name) {
    if (Tracer* t = Tracer::attached(); t && t->active()) t->push_range(name ? name : "<unnamed range>");
    return t_depth++;
  }
  static int pop() {
    if (Tracer* t = Tracer::attached(); t && t->active()) t->pop_range();
    return t_depth > 0 ? --t_depth : -1;
  }
  static uint64_t start(const char* name) {
    Tracer* t = Tracer::attached();
    return t && t->active() ? t->start_range(name ? name : "<unnamed range>") : 0;
  }
  static void end(uint64_t id) {
    if (Tracer* t = Tracer::attached(); t && t->active()) t->end_range(id);
  }

  static int push_a(const char* message) { return push(message); }
  static int push_ex(const abi::NvtxEventAttributes* a) { return push(message_of(a)); }
  static int domain_push_ex(const void*, const abi::NvtxEventAttributes* a) { return push(message_of(a)); }
  static int domain_pop(const void*) { return pop(); }
  static uint64_t start_a(const char* message) { return start(message); }
  static uint64_t start_ex(const abi::NvtxEventAttributes* a) { return start(message_of(a)); }
  static uint64_t domain_start_ex(const void*, const abi::NvtxEventAttributes* a) { return start(message_of(a)); }
  static void domain_end(const void*, uint64_t id) { end(id); }
  static const void* register_string(const void*, const char* text) { return intern(text); }
  static const void* create_domain(const char* name) { return intern(name); }
};

int Tracer::install_nvtx(abi::NvtxGetExportTable get) noexcept {
  const auto* callbacks =
      get ? static_cast<const abi::NvtxExportTableCallbacks*>(get(abi::kNvtxEtidCallbacks)) : nullptr;
  if (!callbacks || callbacks->struct_size < sizeof(abi::NvtxExportTableCallbacks) ||
      !callbacks->GetModuleFunctionTable)
    return 0;
  auto module = [&](int id, auto&& fill) {
    abi::NvtxFunctionTable table = nullptr;
    unsigned size = 0;
    if (!callbacks->GetModuleFunctionTable(id, &table, &size) || !table) return false;
    fill([&](unsigned cbid, auto fn) {
      if (cbid <= size && table[cbid]) *table[cbid] = reinterpret_cast<abi::NvtxFunctionPointer>(fn);
    });
    return true;
  };
  const bool core = module(abi::kNvtxModuleCore, [](auto set) {
    set(abi::kNvtxRangePushA, &NvtxEntry::push_a);
    set(abi::kNvtxRangePushEx, &NvtxEntry::push_ex);
    set(abi::kNvtxRangePop, &NvtxEntry::pop);
    set(abi::kNvtxRangeStartA, &NvtxEntry::start_a);
    set(abi::kNvtxRangeStartEx, &NvtxEntry::start_ex);
    set(abi::kNvtxRangeEnd, &NvtxEntry::end);
  });
  module(abi::kNvtxModuleCore2, [](auto set) {  // domains: absent from NVTX v1-v2 only
    set(abi::kNvtxDomainRangePushEx, &NvtxEntry::domain_push_ex);
    set(abi::kNvtxDomainRangePop, &NvtxEntry::domain_pop);
    set(abi::kNvtxDomainRangeStartEx, &NvtxEntry::domain_start_ex);
    set(abi::kNvtxDomainRangeEnd, &NvtxEntry::domain_end);
    set(abi::kNvtxDomainRegisterStringA, &NvtxEntry::register_string);
    set(abi::kNvtxDomainCreateA, &NvtxEntry::create_domain);
  });
  return core ? 1 : 0;
}

uint32_t Tracer::host_track() noexcept {
  thread_local uint64_t generation = 0;
  thread_local uint32_t track = 0;
  if (generation != generation_) {
    generation = generation_;
    track = host_threads_.fetch_add(1);
    try {
      profiler_->name_track(track, fmt::format("host thread {}", static_cast<long>(gettid())), -1);
    } catch (...) {
    }
  }
  return track;
}

std::vector<Tracer::HostRange>& Tracer::host_stack() noexcept {
  thread_local uint64_t generation = 0;
  thread_local std::vector<HostRange> stack;
  if (generation != generation_) {
    generation = generation_;
    stack.clear();
  }
  return stack;
}

// A range's begin on the calling thread's track; false: not kept (no room, or a thread past the host tracks).
bool Tracer::begin_host_range(KeyId key) {
  nvtx_ranges_.fetch_add(1, std::memory_order_relaxed);
  const uint32_t track = host_track();
  return track < kStreamTrackBase && profiler_->timed_events()->add_begin(key, -1, track, now_ns(), 0);
}

void Tracer::push_range(const std::string& name) noexcept {
  try {
    const KeyId key = profiler_->key(name, Kind::region);
    host_stack().push_back({key, begin_host_range(key)});
  } catch (...) {
  }
}

void Tracer::pop_range() noexcept {
  auto& stack = host_stack();
  if (stack.empty()) return;  // a pop without a push (or one pushed before the tracer started)
  const HostRange r = stack.back();
  stack.pop_back();
  if (r.kept) profiler_->timed_events()->add_end(r.key, -1, host_track(), now_ns(), 0);
}

uint64_t Tracer::start_range(const std::string& name) noexcept {
  static std::atomic<uint64_t> next_id{1};
  try {
    const KeyId key = profiler_->key(name, Kind::region);
    if (!begin_host_range(key)) return 0;
    const uint64_t id = next_id.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(nvtx_mu_);
    open_ranges_[id] = HostRange{key, true};
    return id;
  } catch (...) {
    return 0;
  }
}

void Tracer::end_range(uint64_t id) noexcept {
  HostRange r{};
  {
    std::lock_guard<std::mutex> lock(nvtx_mu_);
    auto it = open_ranges_.find(id);
    if (it == open_ranges_.end()) return;
    r = it->second;
    open_ranges_.erase(it);
  }
  if (const uint32_t track = host_track(); track < kStreamTrackBase)
    profiler_->timed_events()->add_end(r.key, -1, track, now_ns(), 0);
}

}  // namespace dooly::cupti
