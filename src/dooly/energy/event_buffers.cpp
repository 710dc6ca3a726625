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

EventBuffers::Thread::Thread(size_t capacity, uint32_t index, std::thread::id owner, bool tsc, bool accepting)
    : mask_(capacity - 1), accepting_(accepting), tsc_(tsc), index_(index), owner_(owner), slots_(capacity) {
  data_ = slots_.data();
}

EventBuffers::Thread* EventBuffers::register_thread() noexcept {
  Thread* t = nullptr;
  try {
    std::lock_guard<std::mutex> lock(mu_);
    const std::thread::id me = std::this_thread::get_id();
    for (auto& existing : threads_)
      if (existing->owner_ == me) t = existing.get();  // this thread used other buffers in between: keep its share
    if (!t) {
      threads_.push_back(
          std::make_unique<Thread>(capacity_, static_cast<uint32_t>(threads_.size()), me, tsc_, accepting_));
      t = threads_.back().get();
    }
  } catch (...) {
    t = nullptr;  // out of memory: this thread's events are lost, the host program runs on
  }
  local_slot() = LocalThread{generation_, t};
  return t;
}

void EventBuffers::accept(bool on) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  accepting_ = on;
  for (auto& t : threads_) t->accepting_.store(on, std::memory_order_relaxed);
}

void EventBuffers::take(Thread& t, std::vector<Drained>& out) {
  const uint64_t tail = t.tail_.load(std::memory_order_relaxed);
  const uint64_t h = t.head_.load(std::memory_order_acquire);
  for (uint64_t i = tail; i < h; ++i) out.push_back({t.index_, t.data_[i & mask_]});
  t.tail_.store(h, std::memory_order_release);
}

uint64_t EventBuffers::dropped() const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = 0;
  for (const auto& t : threads_) n += t->dropped_.load(std::memory_order_relaxed);
  return n;
}

uint64_t EventBuffers::stray_ends() const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = 0;
  for (const auto& t : threads_) n += t->stray_ends_.load(std::memory_order_relaxed);
  return n;
}

}  // namespace dooly::energy
