// The tracer's NVTX side: CUPTI's NVTX callbacks become free windows on the calling thread's track, stamped on the
// host's steady clock when the callback runs, staged with the GPU records.
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>

#include "dooly/common/clock.hpp"
#include "dooly/cupti/tracer.hpp"

namespace dooly::cupti {

using energy::KeyId;
using energy::Kind;

namespace {

// The NVTX argument blocks hold pointers and 64-bit ids at fixed offsets (read with memcpy: no alignment assumed).
const void* pointer_at(const void* params, size_t offset) {
  const void* v = nullptr;
  std::memcpy(&v, static_cast<const char*>(params) + offset, sizeof(v));
  return v;
}
uint64_t id_at(const void* params, size_t offset) {
  uint64_t v = 0;
  std::memcpy(&v, static_cast<const char*>(params) + offset, sizeof(v));
  return v;
}
const char* text_at(const void* params, size_t offset) {
  const auto* text = static_cast<const char*>(pointer_at(params, offset));
  return text ? text : "<unnamed range>";
}
const abi::NvtxEventAttributes* attributes_at(const void* params, size_t offset) {
  return static_cast<const abi::NvtxEventAttributes*>(pointer_at(params, offset));
}

}  // namespace

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

std::string Tracer::attribute_message(const abi::NvtxEventAttributes* a) {
  if (!a || !a->message) return "<unnamed range>";
  if (a->message_type == abi::kNvtxMessageAscii) return static_cast<const char*>(a->message);
  if (a->message_type == abi::kNvtxMessageRegistered) {
    std::lock_guard<std::mutex> lock(nvtx_mu_);
    if (auto it = registered_strings_.find(a->message); it != registered_strings_.end()) return it->second;
  }
  return "<unnamed range>";  // wide strings (nvtx*W) are not read
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

void Tracer::start_range(uint64_t id, const std::string& name) noexcept {
  try {
    const KeyId key = profiler_->key(name, Kind::region);
    const bool kept = begin_host_range(key);
    std::lock_guard<std::mutex> lock(nvtx_mu_);
    if (kept) open_ranges_[id] = HostRange{key, true};
  } catch (...) {
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

void Tracer::nvtx_callback(uint32_t cbid, const abi::NvtxData* data) noexcept {
  if (!active_.load(std::memory_order_acquire) || !data->function_params) return;
  const void* p = data->function_params;
  const auto* ret = static_cast<const uint64_t*>(data->function_return_value);
  // Layouts (generated_nvtx_meta.h): {message} / {eventAttrib} / {id}; the domain forms put the domain first.
  constexpr size_t kDomain = sizeof(void*);
  try {
    switch (cbid) {
      case abi::kNvtxRangePushA:
        return push_range(text_at(p, 0));
      case abi::kNvtxRangePushEx:
        return push_range(attribute_message(attributes_at(p, 0)));
      case abi::kNvtxDomainRangePushEx:
        return push_range(attribute_message(attributes_at(p, kDomain)));
      case abi::kNvtxRangePop:
      case abi::kNvtxDomainRangePop:
        return pop_range();
      case abi::kNvtxRangeStartA:
        if (ret) start_range(*ret, text_at(p, 0));
        return;
      case abi::kNvtxRangeStartEx:
        if (ret) start_range(*ret, attribute_message(attributes_at(p, 0)));
        return;
      case abi::kNvtxDomainRangeStartEx:
        if (ret) start_range(*ret, attribute_message(attributes_at(p, kDomain)));
        return;
      case abi::kNvtxRangeEnd:
        return end_range(id_at(p, 0));
      case abi::kNvtxDomainRangeEnd:
        return end_range(id_at(p, kDomain));
      case abi::kNvtxDomainRegisterStringA: {
        const auto* text = static_cast<const char*>(pointer_at(p, kDomain));
        const auto* handle = static_cast<const void* const*>(data->function_return_value);
        if (!text || !handle) return;
        std::lock_guard<std::mutex> lock(nvtx_mu_);
        registered_strings_[*handle] = text;
        return;
      }
      default:
        return;
    }
  } catch (...) {
  }
}

}  // namespace dooly::cupti
