// A request reaches the engine: it joins the engine's input queue, the next open-loop arrival is queued, and an
// idle engine wakes up.
#include "dooly/sim/world.hpp"

namespace dooly::sim {

void wake_engine(World& w) {
  if (w.engine_busy) return;
  w.engine_busy = true;
  w.queue.push({w.now_s, EventType::step_start, w.steps_started});
}

void send_next(World& w, int32_t user, double at_s) {
  if (w.next_request >= w.requests.size()) return;
  const auto id = static_cast<int32_t>(w.next_request++);
  w.requests[id].user = user;
  w.queue.push({at_s, EventType::arrival, id});
}

void on_arrival(World& w, const Event& e) {
  const auto id = static_cast<int32_t>(e.id);
  w.requests[id].arrival_s = e.t_s;
  w.requests[id].status = Status::waiting;
  w.engine.admit(id);
  if (!w.arrivals.closed && w.next_request < w.requests.size()) {
    const auto next = static_cast<int32_t>(w.next_request++);
    w.queue.push({w.requests[next].arrival_s, EventType::arrival, next});
  }
  wake_engine(w);
}

}  // namespace dooly::sim
