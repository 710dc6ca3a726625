#pragma once
// Where the hooks put their events: one bounded single-producer/single-consumer ring per host thread (with the
// thread's label memo beside it), so a hook takes no lock and shares no cache line with other threads. The
// sampler thread drains every ring at each tick. A full ring drops the event and counts it (memory stays
// bounded inside the host program).
#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <pthread.h>

#include "dooly/common/fast_clock.hpp"
#include "dooly/energy/event.hpp"
#include "dooly/energy/key_table.hpp"
#include "dooly/energy/label_cache.hpp"

namespace dooly::energy {

struct RawEvent {
  uint64_t ticks;  // dooly::ticks(): converted to steady ns by the sampler
  KeyId key;
  int16_t device;
  uint8_t begin;
  uint8_t flags;
};
static_assert(sizeof(RawEvent) == 16 && offsetof(RawEvent, key) == 8 && offsetof(RawEvent, device) == 12 &&
              offsetof(RawEvent, begin) == 14 && offsetof(RawEvent, flags) == 15);

// The calling thread's thread pointer (on x86-64 the %fs base, read from the thread control block, a line the
// C library keeps hot): a thread's identity without a thread-local access. Like std::thread::id it can be
// reused by a thread started after another has ended.
inline const void* thread_pointer() noexcept {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__aarch64__))
  return __builtin_thread_pointer();
#else
  return reinterpret_cast<const void*>(pthread_self());
#endif
}

class EventBuffers {
 public:
  // capacity: events per thread between two drains (rounded up to a power of two).
  explicit EventBuffers(size_t capacity);
  ~EventBuffers();

  // A host thread's share: its ring of events and its label memo. Only that thread records into it; the
  // consumer drains it. Everything record() reads or writes but the slot itself sits in one cache line.
  class Thread {
   public:
    // Hot path. Never throws, never blocks.
    // A window is kept whole or dropped whole: an accepted begin reserves the slot of its end, and once a nested
    // begin is dropped everything nested inside it is dropped too, with its end. (A kept begin whose end was
    // lost would stay open to the end of the run and be charged all of it.)
    void record(KeyId key, int32_t device, bool begin, uint32_t flags) noexcept {
      if (!accepting_.load(std::memory_order_relaxed)) return;
      const bool nested = (flags & flags::nested) != 0;
      if (begin) {
        const uint64_t h = head_.load(std::memory_order_relaxed);
        if (nested && dropped_depth_ > 0) return drop(key, nested);
        // The tail as last seen: re-read (a cache line the consumer writes) only when the ring looks full.
        if (h - cached_tail_ + reserved_ + 2 > mask_ + 1) {
          cached_tail_ = tail_.load(std::memory_order_acquire);
          if (h - cached_tail_ + reserved_ + 2 > mask_ + 1) return drop(key, nested);
        }
        ++reserved_;
        if (!nested) ++free_open_;
        store(h, key, device, true, flags);
        return;
      }
      if ((nested ? dropped_depth_ > 0 : (free_open_ == 0 || dropped_free_ > 0)) && end_unkept(key, nested)) return;
      if (!nested) --free_open_;
      if (reserved_ > 0) --reserved_;
      store(head_.load(std::memory_order_relaxed), key, device, false, flags);
    }

    LabelCache labels;  // names this thread's hooks were called with -> keys (the caller fills it)

    Thread(size_t capacity, uint32_t index, std::thread::id owner, bool tsc, bool accepting);

   private:
    friend class EventBuffers;
    // Only the owning thread writes `dropped_` (others just read it): a plain increment, no locked add.
    [[gnu::noinline, gnu::cold]] void count_drop() noexcept {
      dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
    [[gnu::noinline, gnu::cold]] void drop(KeyId key, bool nested) noexcept {
      if (nested) {
        ++dropped_depth_;
      } else {
        if (dropped_free_known_ < dropped_free_keys_.size()) dropped_free_keys_[dropped_free_known_++] = key;
        ++dropped_free_;
      }
      count_drop();
    }
    // An end with no kept begin on this thread: the end of a window dropped whole (the ring was full), or of a
    // free window this thread never began (begun on another thread, or not at all): not a full ring, said apart.
    // False: the end is a kept window's after all (a free window of another key was dropped), to be stored.
    [[gnu::noinline, gnu::cold]] bool end_unkept(KeyId key, bool nested) noexcept {
      if (nested) {
        --dropped_depth_;
        count_drop();
        return true;
      }
      // The dropped free windows' keys, as many as are remembered; past those, an end no kept window can take.
      for (uint32_t i = 0; i < dropped_free_known_; ++i) {
        if (dropped_free_keys_[i] != key) continue;
        for (uint32_t j = i + 1; j < dropped_free_known_; ++j) dropped_free_keys_[j - 1] = dropped_free_keys_[j];
        --dropped_free_known_;
        --dropped_free_;
        count_drop();
        return true;
      }
      if (free_open_ > 0) return false;
      if (dropped_free_ > dropped_free_known_) {
        --dropped_free_;
        count_drop();
      } else {
        stray_ends_.store(stray_ends_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      }
      return true;
    }
    void store(uint64_t h, KeyId key, int32_t device, bool begin, uint32_t flags) noexcept {
      RawEvent* slot = &data_[h & mask_];
      slot->ticks = read_ticks(tsc_);
      if constexpr (std::endian::native == std::endian::little) {
        // The rest as one 8-byte store of a computed word (field by field, the compiler loads the constant
        // bytes from .rodata: one more cache line per hook).
        const uint64_t rest = static_cast<uint64_t>(key) | static_cast<uint64_t>(static_cast<uint16_t>(device)) << 32 |
                              static_cast<uint64_t>(begin) << 48 |
                              static_cast<uint64_t>(static_cast<uint8_t>(flags)) << 56;
        std::memcpy(reinterpret_cast<char*>(slot) + offsetof(RawEvent, key), &rest, sizeof(rest));
      } else {
        slot->key = key;
        slot->device = static_cast<int16_t>(device);
        slot->begin = static_cast<uint8_t>(begin);
        slot->flags = static_cast<uint8_t>(flags);
      }
      head_.store(h + 1, std::memory_order_release);
    }

    // The producer's cache line.
    alignas(64) std::atomic<uint64_t> head_{0};
    RawEvent* data_;
    uint64_t mask_;
    uint64_t cached_tail_ = 0;    // the tail as the producer last read it (it only ever grows)
    uint64_t reserved_ = 0;       // slots held for the ends of accepted begins
    uint32_t dropped_depth_ = 0;  // open nested windows whose begin was dropped
    uint32_t free_open_ = 0;      // accepted free (non-nested) begins not yet ended
    std::atomic<uint64_t> dropped_{0};
    std::atomic<bool> accepting_;  // EventBuffers::accept
    const bool tsc_;               // read_ticks(tsc_) == ticks()
    uint32_t dropped_free_ = 0;    // free begins dropped whose end has not come yet
    // Cold: only drop and end_unkept (and the consumer's read of the count) touch these.
    std::array<KeyId, 8> dropped_free_keys_{};  // of the dropped free windows pending, the keys of the first 8
    uint32_t dropped_free_known_ = 0;           // how many of dropped_free_keys_ hold one
    std::atomic<uint64_t> stray_ends_{0};       // free-window ends with no free window open on this thread
    // The consumer's.
    alignas(64) std::atomic<uint64_t> tail_{0};
    const uint32_t index_;
    const std::thread::id owner_;
    std::vector<RawEvent> slots_;
  };

  // The calling thread's share, registered on its first call; nullptr when that failed (out of memory: its
  // events are lost, and registration is not retried at every hook).
  Thread* local() noexcept {
    const LocalThread& l = local_slot();
    if (l.generation == generation_) return l.thread;
    return register_thread();
  }

  // Hot path (any thread).
  void record(KeyId key, int32_t device, bool begin, uint32_t flags) noexcept {
    if (Thread* t = local()) t->record(key, device, begin, flags);
  }
  // Whether record() keeps events (all threads, present and future); on at construction.
  void accept(bool on) noexcept;

  struct Drained {
    uint32_t thread;
    RawEvent event;
  };
  // Consumer (one thread): hands every published event to sink(thread, event) in time order (ticks; ties keep each
  // thread's order). When only one thread published since the last drain (the usual case) the events go straight from
  // its ring to the sink, without a copy or a sort; else they are gathered in `scratch` and merged.
  template <typename Sink>
  void drain_in_order(std::vector<Drained>& scratch, Sink&& sink) {
    {  // The threads' shares live as long as the buffers: take the list under the lock, read them without it.
      std::lock_guard<std::mutex> lock(mu_);
      consumer_threads_.clear();
      for (auto& t : threads_) consumer_threads_.push_back(t.get());
    }
    Thread* only = nullptr;
    size_t with_events = 0;
    for (Thread* t : consumer_threads_)
      if (t->head_.load(std::memory_order_acquire) != t->tail_.load(std::memory_order_relaxed)) {
        only = t;
        ++with_events;
      }
    if (with_events == 1) {
      const uint64_t t = only->tail_.load(std::memory_order_relaxed);
      const uint64_t h = only->head_.load(std::memory_order_acquire);
      uint64_t i = t;
      try {
        for (; i < h; ++i) sink(only->index_, only->data_[i & mask_]);
      } catch (...) {
        only->tail_.store(i + 1, std::memory_order_release);  // what was handed over (and the failing one) is gone
        throw;
      }
      only->tail_.store(h, std::memory_order_release);
      return;
    }
    scratch.clear();
    for (Thread* t : consumer_threads_) take(*t, scratch);
    auto by_ticks = [](const Drained& a, const Drained& b) { return a.event.ticks < b.event.ticks; };
    if (!std::is_sorted(scratch.begin(), scratch.end(), by_ticks))
      std::stable_sort(scratch.begin(), scratch.end(), by_ticks);
    for (const Drained& d : scratch) sink(d.thread, d.event);
  }
  uint64_t dropped() const noexcept;
  // Free-window ends that came on a thread with no free window of its own open: a window must end on the thread
  // that began it (each thread's edges are buffered apart), so such an end is ignored and its begin, wherever it
  // was, stays open to the end of the run.
  uint64_t stray_ends() const noexcept;
  size_t capacity() const noexcept { return capacity_; }  // events per thread, as rounded up

 private:
  // One small plain thread-local with the initial-exec model: inside the dlopen'ed connector a general-dynamic
  // thread-local costs a __tls_get_addr call per access, several times the rest of the hook.
  struct LocalThread {
    uint64_t generation;
    Thread* thread;
  };
  static LocalThread& local_slot() noexcept {
    static thread_local LocalThread slot __attribute__((tls_model("initial-exec"))) = {0, nullptr};
    return slot;
  }
  Thread* register_thread() noexcept;
  void take(Thread& t, std::vector<Drained>& out);  // consumer: appends t's published events, frees their slots

  const bool tsc_ = tsc_ticks();
  const size_t capacity_;
  const uint64_t mask_;
  const uint64_t generation_;  // unique per instance: a new buffer at a reused address is not mistaken
  mutable std::mutex mu_;      // guards threads_ and accepting_ (registration, accept, the consumer's copy of the list)
  bool accepting_ = true;
  std::vector<std::unique_ptr<Thread>> threads_;
  std::vector<Thread*> consumer_threads_;  // the consumer's copy of the list
};

}  // namespace dooly::energy
