#include "dooly/energy/timed_events.hpp"

#include <algorithm>

namespace dooly::energy {

bool TimedEvents::add_window(KeyId key, int32_t device, uint32_t track, int64_t t0_ns, int64_t t1_ns, uint32_t flags) {
  if (t1_ns <= t0_ns) t1_ns = t0_ns + 1;
  std::lock_guard<std::mutex> lock(mu_);
  if (t0_ns < released_ns_) {
    ++dropped_late_;
    return false;
  }
  if (!room_for(2)) {
    ++dropped_full_;
    return false;
  }
  pending_.push_back(Event{t0_ns, key, track, device, true, flags});
  pending_.push_back(Event{t1_ns, key, track, device, false, flags});
  return true;
}

bool TimedEvents::add_begin(KeyId key, int32_t device, uint32_t track, int64_t t_ns, uint32_t flags) {
  std::lock_guard<std::mutex> lock(mu_);
  if (t_ns < released_ns_) {
    ++dropped_late_;
    return false;
  }
  if (!room_for(2)) {
    ++dropped_full_;
    return false;
  }
  pending_.push_back(Event{t_ns, key, track, device, true, flags});
  ++reserved_;
  return true;
}

void TimedEvents::add_end(KeyId key, int32_t device, uint32_t track, int64_t t_ns, uint32_t flags) {
  std::lock_guard<std::mutex> lock(mu_);
  if (reserved_ > 0) --reserved_;
  if (t_ns < released_ns_) {
    t_ns = released_ns_;
    ++ends_moved_;
  }
  pending_.push_back(Event{t_ns, key, track, device, false, flags});
}

void TimedEvents::take(int64_t horizon_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  auto ready = std::partition(pending_.begin(), pending_.end(), [&](const Event& e) { return e.t_ns < horizon_ns; });
  out_.assign(pending_.begin(), ready);
  pending_.erase(pending_.begin(), ready);
  // std::partition does not keep the order of equal elements: ties are broken by kind of edge, then track, then
  // key, so the order released does not depend on the order things were added.
  std::sort(out_.begin(), out_.end(), [](const Event& a, const Event& b) {
    if (a.t_ns != b.t_ns) return a.t_ns < b.t_ns;
    if (a.begin != b.begin) return !a.begin;
    if (a.thread != b.thread) return a.thread < b.thread;
    return a.key < b.key;
  });
  if (horizon_ns > released_ns_) released_ns_ = horizon_ns;
}

size_t TimedEvents::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.size();
}
uint64_t TimedEvents::dropped_full() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_full_;
}
uint64_t TimedEvents::dropped_late() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_late_;
}
uint64_t TimedEvents::ends_moved() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ends_moved_;
}
int64_t TimedEvents::released_ns() const {
  std::lock_guard<std::mutex> lock(mu_);
  return released_ns_;
}

}  // namespace dooly::energy
