#pragma once
// Test doubles for the simulator: a cost model with fixed, hand-checkable costs, and a stepper that drives an
// engine model step by step (no clock), recording what each step scheduled.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dooly/sim/engine.hpp"
#include "dooly/sim/model_spec.hpp"

namespace dooly::sim::testing {

inline std::string models_dir() { return std::string(DOOLY_SOURCE_DIR) + "/data/models"; }
inline ModelSpec tiny(const std::string& name) { return load_model(name, models_dir() + "/tiny"); }

// device = base + per_token × tokens computed (padded); energy = device × busy power; no host time unless set.
class FixedCost final : public CostModel {
 public:
  double base_s = 0.010, per_token_s = 0.0001, busy_w = 400, idle_w = 100;
  double serial_s = 0, launch_s = 0;
  StepCost step(const plan::Composition& /*c*/, const StepShape& shape) const override {
    StepCost s;
    s.device_s = base_s + per_token_s * static_cast<double>(shape.tokens);
    s.energy_j = s.device_s * busy_w;
    s.host_serial_s = serial_s;
    s.host_launch_s = launch_s;
    return s;
  }
  double idle_power_w() const override { return idle_w; }
  std::string describe() const override { return "fixed (test)"; }
};

struct Req {
  int64_t prompt = 1, output = 1;
};

// One step as scheduled: (request, tokens) in the engine's order.
struct StepSeen {
  std::vector<std::pair<int32_t, int32_t>> slices;
  int64_t tokens = 0, prefill_tokens = 0, decode_requests = 0, preempted = 0, padded = 0;
  int64_t kv_read = 0, kv_padded = 0;  // cached tokens the step reads (sum of contexts), and as padded
  ForwardPath path = ForwardPath::eager;
};

class Stepper {
 public:
  Stepper(const std::string& engine, EngineConfig config, ModelSpec model, const std::vector<Req>& reqs)
      : config_(std::move(config)), model_(std::move(model)) {
    states_.resize(reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) {
      states_[i].prompt_tokens = reqs[i].prompt;
      states_[i].output_tokens = reqs[i].output;
    }
    engine_ = make_engine(engine, {config_, model_, cost_, states_});
  }
  Engine& engine() { return *engine_; }
  std::vector<RequestState>& states() { return states_; }

  void admit(int32_t r) {
    states_[r].status = Status::waiting;
    engine_->admit(r);
  }
  void admit_all() {
    for (size_t i = 0; i < states_.size(); ++i) admit(static_cast<int32_t>(i));
  }
  // One step; false when the engine had nothing to run.
  bool step() {
    const StepPlan* p = engine_->schedule();
    if (p == nullptr) return false;
    StepSeen s;
    for (const Slice& x : p->slices) s.slices.emplace_back(x.request, x.tokens);
    s.tokens = p->tokens;
    s.prefill_tokens = p->prefill_tokens;
    s.decode_requests = p->decode_requests;
    s.preempted = p->preempted;
    s.padded = p->shape.tokens;
    s.kv_padded = p->shape.kv_read_tokens;
    for (const Slice& x : p->slices) s.kv_read += x.context;
    s.path = p->shape.path;
    seen.push_back(s);
    finished.clear();
    engine_->complete(finished);
    return true;
  }
  void run() {
    while (step()) {
    }
  }

  std::vector<StepSeen> seen;
  std::vector<int32_t> finished;
  FixedCost cost_;

 private:
  EngineConfig config_;
  ModelSpec model_;
  std::vector<RequestState> states_;
  std::unique_ptr<Engine> engine_;
};

inline std::vector<std::pair<int32_t, int32_t>> slices(std::initializer_list<std::pair<int32_t, int32_t>> s) {
  return s;
}

}  // namespace dooly::sim::testing
