#pragma once
// A simulation from its configuration: prepare() builds and checks everything (the model, the requests, the cost
// model, the engine and whether it would take every request) before any work, so bad input is one InputError;
// run() is the event loop.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dooly/sim/config.hpp"
#include "dooly/sim/cost_model.hpp"
#include "dooly/sim/engine.hpp"
#include "dooly/sim/metrics.hpp"
#include "dooly/sim/model_spec.hpp"
#include "dooly/sim/recorder.hpp"
#include "dooly/sim/workload.hpp"
#include "dooly/sim/world.hpp"

namespace dooly::sim {

struct Simulation {
  SimConfig config;
  ModelSpec model;
  Workload workload;
  std::vector<Request> requests;  // the workload's (ids), in arrival order (closed loop: sending order)
  std::optional<Slo> slo;
  std::unique_ptr<CostModel> cost;
  std::vector<RequestState> states;  // one per request, the engine's and the simulator's view
  std::unique_ptr<Engine> engine;
};

struct SimResult {
  Recorder recorder;
  Summary summary;
};

// `models_dir`: where model names are looked up (data/models/).
std::unique_ptr<Simulation> prepare(const SimConfig& config, const std::string& models_dir);
// Runs the simulation to its end. `observer` sees every step as it happens; `keep_steps` keeps them all in the
// result (plots, tests); without either only the totals are kept (sweeps).
SimResult run(Simulation& sim, StepObserver* observer = nullptr, bool keep_steps = false);
// The event loop itself, on a world whose first events are queued.
void run_events(World& w);

}  // namespace dooly::sim
