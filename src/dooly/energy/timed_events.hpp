#pragma once
// Window edges that carry their own time stamps and arrive late and out of order: GPU activity records, which
// CUPTI hands over in buffers some time after the work completed, and the host ranges that go with them. The
// per-thread rings (event_buffers.hpp) stamp an edge when it is recorded; these are stamped by whoever made
// them and only staged here. Producers (any thread) add under a lock; the sampler thread releases, at each
// tick, the edges older than its horizon (now minus the delay the producer needs), in time order.
//
// Bounded: at most `capacity` edges wait. A window is added whole (kernels) or edge by edge (host ranges, whose
// end comes later); an accepted begin reserves the slot of its end, so a window is kept or dropped whole. An
// edge older than what was already released (it came later than the delay allows) is dropped and counted too:
// the attributor has moved past its time.
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "dooly/energy/event.hpp"

namespace dooly::energy {

class TimedEvents {
 public:
  explicit TimedEvents(size_t capacity) : capacity_(capacity) {}

  // A whole window [t0, t1] on `track` (the attributor's thread: windows on one track nest). t1 is moved to
  // t0 + 1 ns when it is not after t0, so the end always follows the begin. false: dropped (full or late).
  bool add_window(KeyId key, int32_t device, uint32_t track, int64_t t0_ns, int64_t t1_ns, uint32_t flags);
  // A begin whose end comes later (add_end, with the same key, device, track and flags). false: dropped; then
  // its end must not be added.
  bool add_begin(KeyId key, int32_t device, uint32_t track, int64_t t_ns, uint32_t flags);
  // The end of a begin add_begin accepted. Never dropped for room (its slot was reserved); an end that comes too
  // late for the delay is moved up to the released instant (and counted), so its window still closes.
  void add_end(KeyId key, int32_t device, uint32_t track, int64_t t_ns, uint32_t flags);

  // Hands every staged edge older than horizon_ns to sink(const Event&), in time order (at one instant ends
  // before begins: a window that starts where another on its track ends does not nest in it). Consumer only.
  template <typename Sink>
  void release(int64_t horizon_ns, Sink&& sink) {
    take(horizon_ns);
    for (const Event& e : out_) sink(e);
    out_.clear();
  }
  // Edges waiting now.
  size_t size() const;
  uint64_t dropped_full() const;  // windows dropped because the staging area was full
  uint64_t dropped_late() const;  // windows dropped because they came after their time was released
  uint64_t ends_moved() const;    // ends that came late and were moved up to the released instant
  int64_t released_ns() const;    // everything before this instant has been handed over (INT64_MIN: nothing)
  size_t capacity() const noexcept { return capacity_; }

 private:
  void take(int64_t horizon_ns);  // moves the edges before the horizon, sorted, into out_
  bool room_for(size_t edges) const noexcept { return pending_.size() + reserved_ + edges <= capacity_; }

  const size_t capacity_;
  mutable std::mutex mu_;
  std::vector<Event> pending_;  // unsorted
  std::vector<Event> out_;      // the consumer's
  size_t reserved_ = 0;         // slots held for the ends of accepted begins
  uint64_t dropped_full_ = 0, dropped_late_ = 0, ends_moved_ = 0;
  int64_t released_ns_ = INT64_MIN;
};

}  // namespace dooly::energy
