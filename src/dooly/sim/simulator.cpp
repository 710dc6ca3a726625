#include "dooly/sim/simulator.hpp"

#include "dooly/common/error.hpp"
#include "dooly/sim/step_times_cost.hpp"

namespace dooly::sim {
namespace {

// The warm-up's steps cost nothing: only what the engine keeps from them matters.
class Unpriced final : public CostModel {
 public:
  StepCost step(const plan::Composition& /*c*/, const StepShape& /*shape*/) const override { return {}; }
  double idle_power_w() const override { return 0; }
  std::string describe() const override { return "unpriced (warm-up)"; }
};

// `dooly live --warmup N`: the first N requests' lengths (the first repeated when the workload has fewer) served
// as one batch, all at once, by a second engine of the same configuration; the simulated engine keeps what a real
// one would (Engine::carry_over).
void warm_up(Simulation& sim) {
  const int64_t n = sim.config.engine.warmup_requests;
  if (n <= 0 || sim.requests.empty()) return;
  std::vector<RequestState> states(static_cast<size_t>(n));
  for (size_t i = 0; i < states.size(); ++i) {
    const Request& r = sim.requests[i < sim.requests.size() ? i : 0];
    states[i].prompt_tokens = r.prompt_tokens;
    states[i].output_tokens = r.output_tokens;
  }
  const Unpriced unpriced;
  const std::unique_ptr<Engine> engine =
      make_engine(sim.config.engine.engine, {sim.config.engine, sim.model, unpriced, states});
  engine->check(states);
  for (size_t i = 0; i < states.size(); ++i) engine->admit(static_cast<int32_t>(i));
  std::vector<int32_t> finished;
  while (engine->has_pending()) {
    if (engine->schedule() == nullptr)
      DOOLY_THROW(Error, "report it with the command line: the engine model stalled in the warm-up",
                  "--warmup-requests {}: the warm-up batch left requests unserved", n);
    engine->complete(finished);
  }
  sim.engine->carry_over(*engine);
}

}  // namespace

std::unique_ptr<Simulation> prepare(const SimConfig& config, const std::string& models_dir) {
  if (config.model.empty()) DOOLY_THROW(InputError, "give --model NAME (data/models/) or a config.json", "no --model");
  if (config.workload.empty())
    DOOLY_THROW(InputError, "give --workload poisson:rate=R,n=N,prompt=DIST,output=DIST or trace:FILE.jsonl",
                "no --workload");
  auto sim = std::make_unique<Simulation>();
  sim->config = config;
  sim->model = load_model(config.model, models_dir);
  sim->workload = parse_workload(config.workload);
  if (!config.slo.empty()) sim->slo = parse_slo(config.slo);
  CostSpec cs;
  cs.kind = config.cost;
  cs.db = config.db;
  cs.engine = config.engine.engine;
  cs.attention = config.engine.attention;
  cs.dtype_bytes = config.engine.dtype_bytes();
  cs.cuda_graphs = config.engine.cuda_graphs == "on";
  cs.allow_missing = config.allow_missing;
  cs.moe_routing = config.moe_routing;
  cs.model = sim->model;
  cs.gpu = config.engine.gpu;
  sim->cost = make_cost_model(cs);
  if (!config.step_times.empty())
    sim->cost = std::make_unique<StepTimesCost>(std::move(sim->cost), StepTimesCost::read(config.step_times),
                                                config.step_times);
  sim->requests = generate(sim->workload);
  sim->states.resize(sim->requests.size());
  for (size_t i = 0; i < sim->requests.size(); ++i) {
    RequestState& s = sim->states[i];
    s.arrival_s = sim->requests[i].arrival_s;
    s.prompt_tokens = sim->requests[i].prompt_tokens;
    s.output_tokens = sim->requests[i].output_tokens;
  }
  sim->engine = make_engine(config.engine.engine, {sim->config.engine, sim->model, *sim->cost, sim->states});
  sim->engine->check(sim->states);
  warm_up(*sim);
  return sim;
}

void run_events(World& w) {
  static constexpr void (*kHandlers[kEventTypes])(World&, const Event&) = {on_step_end, on_arrival, on_step_start};
  while (!w.queue.empty()) {
    const Event e = w.queue.pop();
    w.now_s = e.t_s;
    kHandlers[static_cast<int>(e.type)](w, e);
  }
}

SimResult run(Simulation& sim, StepObserver* observer, bool keep_steps) {
  World w{sim.states, *sim.engine};
  w.idle_power_w = sim.cost->idle_power_w();
  w.recorder.keep_steps = keep_steps;
  w.recorder.observer = observer;
  if (sim.workload.arrivals == Workload::Arrivals::closed) {
    w.arrivals = {true, sim.workload.users, sim.workload.think_s};
    for (int64_t u = 0; u < sim.workload.users; ++u) send_next(w, static_cast<int32_t>(u), 0.0);
  } else if (!sim.states.empty()) {
    w.next_request = 1;
    w.queue.push({sim.states[0].arrival_s, EventType::arrival, 0});
  }
  run_events(w);
  if (w.engine.has_pending())
    DOOLY_THROW(Error, "report it with the command line: the engine model left requests unserved",
                "the simulation ended at {} s with requests still queued", w.now_s);
  SimResult r;
  r.recorder = std::move(w.recorder);
  r.recorder.observer = nullptr;
  r.summary = summarize(sim.states, r.recorder, w.idle_power_w, sim.slo);
  return r;
}

}  // namespace dooly::sim
