#include "dooly/sim/recorder.hpp"

namespace dooly::sim {

void Recorder::step(double t_s, const StepPlan& p) {
  const int64_t index = step_count++;
  preemptions += p.preempted;
  extrapolated_steps += p.cost.extrapolated > 0 ? 1 : 0;
  batch_requests += static_cast<int64_t>(p.slices.size());
  batch_tokens += p.tokens;
  step_energy_j += p.energy_j;
  busy_s += p.duration_s;
  if (!keep_steps && observer == nullptr) return;
  StepRecord r;
  r.t_s = t_s;
  r.duration_s = p.duration_s;
  r.device_s = p.cost.device_s;
  r.host_s = p.cost.host_serial_s + p.cost.host_launch_s;
  r.energy_j = p.energy_j;
  r.model_duration_s = p.cost.model_duration_s;
  r.requests = static_cast<int32_t>(p.slices.size());
  r.tokens = static_cast<int32_t>(p.tokens);
  r.prefill_tokens = static_cast<int32_t>(p.prefill_tokens);
  r.decode_requests = static_cast<int32_t>(p.decode_requests);
  r.padded_tokens = static_cast<int32_t>(p.shape.tokens);
  r.waiting = static_cast<int32_t>(p.waiting);
  r.free_blocks = static_cast<int32_t>(p.free_blocks);
  r.preempted = p.preempted;
  r.extrapolated = p.cost.extrapolated;
  r.path = p.shape.path;
  if (observer != nullptr) observer->on_step(index, r);
  if (keep_steps) steps.push_back(r);
}

}  // namespace dooly::sim
