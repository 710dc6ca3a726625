#pragma once
// The simulator's events and their order. Events are plain values ordered by (time, type, id), so a run is the same
// for the same input on every platform: at one instant a step's end comes first (it frees blocks, finishes
// requests and lets closed-loop users send), then arrivals in request order, then the engine's next step.
#include <cstddef>
#include <cstdint>
#include <queue>
#include <tuple>
#include <vector>

namespace dooly::sim {

enum class EventType : uint8_t {
  step_end = 0,    // events/step_end.cpp: the forward is done, tokens come out
  arrival = 1,     // events/arrival.cpp: a request reaches the engine
  step_start = 2,  // events/step_start.cpp: the engine schedules and runs its next step
};
inline constexpr int kEventTypes = 3;

struct Event {
  double t_s = 0;
  EventType type = EventType::arrival;
  int64_t id = 0;  // arrival: the request; steps: the step's index
};

inline bool operator<(const Event& a, const Event& b) {
  return std::tie(a.t_s, a.type, a.id) < std::tie(b.t_s, b.type, b.id);
}

class EventQueue {
 public:
  void push(const Event& e) { q_.push(e); }
  Event pop() {
    Event e = q_.top();
    q_.pop();
    return e;
  }
  bool empty() const { return q_.empty(); }
  size_t size() const { return q_.size(); }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const { return b < a; }
  };
  std::priority_queue<Event, std::vector<Event>, Later> q_;
};

}  // namespace dooly::sim
