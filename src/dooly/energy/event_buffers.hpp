#pragma once
// Where the hooks put their events: one bounded single-producer/single-consumer ring per host thread, so a
// hook takes no lock and shares no cache line with other threads. The sampler thread drains every ring at each
// tick. A full ring drops the event and counts it (memory stays bounded inside the host program).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "dooly/common/fast_clock.hpp"
#include "dooly/energy/event.hpp"
#include "dooly/energy/key_table.hpp"

namespace dooly::energy {

struct RawEvent {
  uint64_t ticks;  // dooly::ticks(): converted to steady ns by the sampler
  KeyId key;
  int16_t device;
  uint8_t begin;
  uint8_t flags;
};
static_assert(sizeof(RawEvent) == 16);

class EventBuffers {
 public:
  // capacity: events per thread between two drains (rounded up to a power of two).
  explicit EventBuffers(size_t capacity);
  ~EventBuffers();

  // Hot path (any thread). Never throws, never blocks except on a thread's very first event.
  // A window is kept whole or dropped whole: an accepted begin reserves the slot of its end, and once a nested
  // begin is dropped everything nested inside it is dropped too, with its end. (A kept begin whose end was
  // lost would stay open to the end of the run and be charged all of it.)
  void record(KeyId key, int32_t device, bool begin, uint32_t flags) noexcept {
    Ring* r = local_ring();
    if (!r) return;
    const bool nested = (flags & flags::nested) != 0;
    if (begin) {
      const uint64_t h = r->head.load(std::memory_order_relaxed);
      if (nested && r->dropped_depth > 0) return drop(r, nested);
      // The tail as last seen: re-read (a cache line the sampler writes) only when the ring looks full.
      if (h - r->cached_tail + r->reserved + 2 > capacity_) {
        r->cached_tail = r->tail.load(std::memory_order_acquire);
        if (h - r->cached_tail + r->reserved + 2 > capacity_) return drop(r, nested);
      }
      ++r->reserved;
      if (!nested) ++r->free_open;
      store(r, h, key, device, true, flags);
      return;
    }
    if (nested ? r->dropped_depth > 0 : r->free_open == 0) {
      if (nested) --r->dropped_depth;
      count_drop(r);
      return;
    }
    if (!nested) --r->free_open;
    if (r->reserved > 0) --r->reserved;
    store(r, r->head.load(std::memory_order_relaxed), key, device, false, flags);
  }

  struct Drained {
    uint32_t thread;
    RawEvent event;
  };
  // Consumer (one thread): hands every published event to sink(thread, event) in time order (ticks; ties keep each thread's
  // order). When only one thread published since the last drain (the usual case) the events go straight from
  // its ring to the sink, without a copy or a sort; else they are gathered in `scratch` and merged.
  template <typename Sink>
  void drain_in_order(std::vector<Drained>& scratch, Sink&& sink) {
    {  // The rings live as long as the buffers: take the list under the lock, read them without it.
      std::lock_guard<std::mutex> lock(mu_);
      consumer_rings_.clear();
      for (auto& r : rings_) consumer_rings_.push_back(r.get());
    }
    Ring* only = nullptr;
    size_t with_events = 0;
    for (Ring* r : consumer_rings_)
      if (r->head.load(std::memory_order_acquire) != r->tail.load(std::memory_order_relaxed)) {
        only = r;
        ++with_events;
      }
    if (with_events == 1) {
      const uint64_t t = only->tail.load(std::memory_order_relaxed);
      const uint64_t h = only->head.load(std::memory_order_acquire);
      uint64_t i = t;
      try {
        for (; i < h; ++i) sink(only->thread, only->data[i & mask_]);
      } catch (...) {
        only->tail.store(i + 1, std::memory_order_release);  // what was handed over (and the failing one) is gone
        throw;
      }
      only->tail.store(h, std::memory_order_release);
      return;
    }
    scratch.clear();
    for (Ring* r : consumer_rings_) take(*r, scratch);
    auto by_ticks = [](const Drained& a, const Drained& b) { return a.event.ticks < b.event.ticks; };
    if (!std::is_sorted(scratch.begin(), scratch.end(), by_ticks)) std::stable_sort(scratch.begin(), scratch.end(), by_ticks);
    for (const Drained& d : scratch) sink(d.thread, d.event);
  }
  uint64_t dropped() const noexcept;

 private:
  struct Ring {
    Ring(size_t capacity, uint32_t index, std::thread::id id)
        : slots(capacity), data(slots.data()), thread(index), owner(id) {}
    std::vector<RawEvent> slots;
    // The producer's cache line: everything a hook reads or writes but the slot itself.
    alignas(64) std::atomic<uint64_t> head{0};
    RawEvent* data;
    uint64_t cached_tail = 0;    // the tail as the producer last read it (it only ever grows)
    uint64_t reserved = 0;       // slots held for the ends of accepted begins
    uint32_t dropped_depth = 0;  // open nested windows whose begin was dropped
    uint32_t free_open = 0;      // accepted free (non-nested) begins not yet ended
    std::atomic<uint64_t> dropped{0};
    // The consumer's.
    alignas(64) std::atomic<uint64_t> tail{0};
    uint32_t thread;
    std::thread::id owner;
  };
  // Only the ring's own thread writes `dropped` (others just read it): a plain increment, no locked add.
  static void count_drop(Ring* r) noexcept {
    r->dropped.store(r->dropped.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  static void drop(Ring* r, bool nested) noexcept {
    if (nested) ++r->dropped_depth;
    count_drop(r);
  }
  void store(Ring* r, uint64_t h, KeyId key, int32_t device, bool begin, uint32_t flags) noexcept {
    r->data[h & mask_] = RawEvent{read_ticks(tsc_), key, static_cast<int16_t>(device), static_cast<uint8_t>(begin),
                                   static_cast<uint8_t>(flags)};
    r->head.store(h + 1, std::memory_order_release);
  }
  // One small plain thread-local with the initial-exec model: inside the dlopen'ed connector a general-dynamic
  // thread-local costs a __tls_get_addr call per access, several times the rest of the hook.
  struct LocalRing {
    uint64_t generation;
    Ring* ring;
  };
  static LocalRing& local() noexcept {
    static thread_local LocalRing slot __attribute__((tls_model("initial-exec"))) = {0, nullptr};
    return slot;
  }
  Ring* local_ring() noexcept {
    LocalRing& l = local();
    if (l.generation != generation_) {
      l.ring = register_thread();
      l.generation = generation_;
    }
    return l.ring;
  }
  Ring* register_thread() noexcept;
  void take(Ring& r, std::vector<Drained>& out);  // consumer: appends r's published events, frees their slots

  const bool tsc_ = tsc_ticks();  // ticks() without its function-local static: one cache line fewer per hook
  const size_t capacity_;
  const uint64_t mask_;
  const uint64_t generation_;  // unique per instance: a new buffer at a reused address is not mistaken
  mutable std::mutex mu_;      // guards rings_ (registration, and the consumer's copy of the list)
  std::vector<std::unique_ptr<Ring>> rings_;
  std::vector<Ring*> consumer_rings_;  // the consumer's copy of the list
};

}  // namespace dooly::energy
