#pragma once
// The attribution engine's order of work: events wait here until every live channel's power trace covers their
// instant, and come out in time order. Counter reads (taken on another thread, at their own instants) wait in a
// queue of their own. Hooks on several threads store their events a little out of order; a late event is sorted
// in among those still waiting, and one older than what was already processed is moved up to that instant.
#include <algorithm>
#include <cstdint>

#include "dooly/common/fifo.hpp"
#include "dooly/energy/event.hpp"

namespace dooly::energy {

class EventOrder {
 public:
  void push(Event e) {
    if (e.t_ns < processed_ns_) e.t_ns = processed_ns_;
    if (e.t_ns >= last_ns_) {
      last_ns_ = e.t_ns;
      pending_.push_back(e);
      return;
    }
    auto pos = std::upper_bound(pending_.begin(), pending_.end(), e.t_ns,
                                [](int64_t t, const Event& x) { return t < x.t_ns; });
    pending_.insert(pos, e);
  }
  // The next step at or before horizon_ns: 0 (nothing), 1 (one event, front()) or 2 (a nested window's begin and
  // its end with nothing in between, front() and second(): charged in one step). hold_last: a nested begin at the
  // back stays (its end may be next). allow_pair: a begin and its end may come out together. The step is final
  // (processed_ns() reaches it) but stays queued, read in place, until pop(step); nothing may be pushed between.
  int next(int64_t horizon_ns, bool hold_last, bool allow_pair) {
    if (pending_.empty() || pending_.front().t_ns > horizon_ns) return 0;
    const Event& e = pending_.front();
    int step = 1;
    if (opens_nested(e)) {
      if (pending_.size() == 1) {
        if (hold_last) return 0;
      } else if (allow_pair && closes(e, pending_[1]) && pending_[1].t_ns <= horizon_ns) {
        step = 2;
      }
    }
    mark(pending_[static_cast<size_t>(step) - 1].t_ns);
    return step;
  }
  const Event& front() const noexcept { return pending_.front(); }
  const Event& second() const noexcept { return pending_[1]; }
  void pop(int step) noexcept { pending_.pop_front(static_cast<size_t>(step)); }
  // What waits is one nested begin alone and `end` (in order, not yet pushed) closes it: the pair can be charged
  // without queueing the end. take_end() then counts the end as pushed and processed; the begin is front().
  bool closes_front(const Event& end) const noexcept { return holds_one_begin() && closes(pending_.front(), end); }
  void take_end(const Event& end) noexcept {
    last_ns_ = end.t_ns;
    mark(end.t_ns);
  }
  // What waits is one nested begin alone, which next() holds for its end (with hold_last).
  bool holds_one_begin() const noexcept { return pending_.size() == 1 && opens_nested(pending_.front()); }
  // Everything up to horizon_ns is final (no event before it can come any more).
  void processed_to(int64_t horizon_ns) { mark(horizon_ns); }

  size_t size() const noexcept { return pending_.size(); }
  bool empty() const noexcept { return pending_.empty(); }
  int64_t processed_ns() const noexcept { return processed_ns_; }
  int64_t last_event_ns() const noexcept { return last_ns_; }

 private:
  static bool opens_nested(const Event& e) noexcept { return e.begin && (e.flags & flags::nested); }
  static bool closes(const Event& begin, const Event& e) noexcept {
    return !e.begin && (e.flags & flags::nested) && e.key == begin.key && e.thread == begin.thread;
  }
  void mark(int64_t t) {
    if (t > processed_ns_) processed_ns_ = t;
  }

  Fifo<Event> pending_;
  int64_t processed_ns_ = INT64_MIN;  // processed up to here
  int64_t last_ns_ = INT64_MIN;       // the newest event pushed
};

}  // namespace dooly::energy
