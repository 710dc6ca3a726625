// A step's forward is done: every request whose prompt is complete gets a token now (its first: TTFT; later ones:
// an inter-token gap), the step's energy is split among its requests by the tokens each computed, finished
// requests free their cache (closed loop: their users send again after thinking), and the engine starts its next
// step at once.
#include "dooly/sim/world.hpp"

namespace dooly::sim {

void on_step_end(World& w, const Event& /*e*/) {
  const StepPlan& step = *w.running;
  const double per_token_j = step.energy_j / static_cast<double>(step.tokens);
  for (const Slice& s : step.slices) {
    RequestState& r = w.requests[s.request];
    r.energy_j += per_token_j * s.tokens;
    if (!s.new_token) continue;
    if (r.first_token_s < 0) {
      r.first_token_s = w.now_s;
    } else {
      w.recorder.itl.add(w.now_s - r.last_token_s);
    }
    r.last_token_s = w.now_s;
  }
  w.finished.clear();
  w.engine.complete(w.finished);
  for (int32_t id : w.finished) {
    w.requests[id].finish_s = w.now_s;
    if (w.arrivals.closed) send_next(w, w.requests[id].user, w.now_s + w.arrivals.think_s);
  }
  w.running = nullptr;
  w.queue.push({w.now_s, EventType::step_start, w.steps_started});
}

}  // namespace dooly::sim
