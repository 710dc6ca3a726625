// The engine's next step: it schedules a batch (new arrivals, its queues, its cache) and the step's priced duration
// decides when it ends. With nothing to run the engine goes idle until the next arrival.
#include "dooly/sim/world.hpp"

namespace dooly::sim {

void on_step_start(World& w, const Event& /*e*/) {
  const StepPlan* step = w.engine.schedule();
  if (step == nullptr) {
    w.engine_busy = false;
    return;
  }
  w.running = step;
  w.recorder.step(w.now_s, *step);
  w.queue.push({w.now_s + step->duration_s, EventType::step_end, w.steps_started++});
}

}  // namespace dooly::sim
