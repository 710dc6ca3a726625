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
  // What comes out next: one event, or a nested window's begin and end with nothing in between (charged in one
  // step).
  struct Step {
    Event first;
    Event second;
    bool pair = false;
  };

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
  // The next step at or before horizon_ns. hold_last: a nested begin at the back stays (its end may be next).
  // allow_pair: a begin and its end may come out together.
  bool next(int64_t horizon_ns, bool hold_last, bool allow_pair, Step& out) {
    if (pending_.empty() || pending_.front().t_ns > horizon_ns) return false;
    const Event& e = pending_.front();
    if (e.begin && (e.flags & flags::nested)) {
      if (pending_.size() == 1) {
        if (hold_last) return false;
      } else if (allow_pair && closes(e, pending_[1]) && pending_[1].t_ns <= horizon_ns) {
        out = {e, pending_[1], true};
        pending_.pop_front();
        pending_.pop_front();
        mark(out.second.t_ns);
        return true;
      }
    }
    out.first = e;
    out.pair = false;
    pending_.pop_front();
    mark(out.first.t_ns);
    return true;
  }
  // Everything up to horizon_ns is final (no event before it can come any more).
  void processed_to(int64_t horizon_ns) { mark(horizon_ns); }

  size_t size() const noexcept { return pending_.size(); }
  bool empty() const noexcept { return pending_.empty(); }
  int64_t processed_ns() const noexcept { return processed_ns_; }
  int64_t last_event_ns() const noexcept { return last_ns_; }

 private:
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
