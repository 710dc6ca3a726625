#include "dooly/energy/event_buffers.hpp"

namespace dooly::energy {

namespace {
size_t round_up_pow2(size_t n) {
  size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}
std::atomic<uint64_t> next_generation{1};
}  // namespace

EventBuffers::EventBuffers(size_t capacity)
    : capacity_(round_up_pow2(capacity < 16 ? 16 : capacity)),
      mask_(capacity_ - 1),
      generation_(next_generation.fetch_add(1)) {}

EventBuffers::~EventBuffers() = default;

EventBuffers::Ring* EventBuffers::register_thread() noexcept {
  try {
    std::lock_guard<std::mutex> lock(mu_);
    const std::thread::id me = std::this_thread::get_id();
    for (auto& r : rings_)
      if (r->owner == me) return r.get();  // this thread used another buffer in between: keep its ring
    rings_.push_back(std::make_unique<Ring>(capacity_, static_cast<uint32_t>(rings_.size()), me));
    return rings_.back().get();
  } catch (...) {
    return nullptr;  // out of memory: this thread's events are lost, the host program runs on
  }
}

void EventBuffers::take(Ring& r, std::vector<Drained>& out) {
  const uint64_t t = r.tail.load(std::memory_order_relaxed);
  const uint64_t h = r.head.load(std::memory_order_acquire);
  for (uint64_t i = t; i < h; ++i) out.push_back({r.thread, r.data[i & mask_]});
  r.tail.store(h, std::memory_order_release);
}

uint64_t EventBuffers::dropped() const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = 0;
  for (const auto& r : rings_) n += r->dropped.load(std::memory_order_relaxed);
  return n;
}

}  // namespace dooly::energy
