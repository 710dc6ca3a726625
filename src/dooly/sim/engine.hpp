#pragma once
// A serving engine as the simulator sees it: requests go in (admit), and the engine runs one step at a time. An
// engine model owns its policies (queues, the KV cache, the scheduler, CUDA-graph padding) and how it combines a
// step's priced parts into time and energy (cost_model.hpp); the simulator owns the clock and the metrics.
//
// Engines are made by name from a registry that rejects duplicates: "hf" (transformers 5.17 continuous batching,
// hf_engine.hpp) and "vllm" (vLLM v1's scheduler, vllm_engine.hpp; not validated against a live vLLM).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dooly/plan/composition.hpp"
#include "dooly/sim/cost_model.hpp"
#include "dooly/sim/engine_config.hpp"
#include "dooly/sim/request_state.hpp"

namespace dooly::sim {

// One request's part in a step.
struct Slice {
  int32_t request = 0;
  int32_t tokens = 0;      // query tokens computed this step
  int64_t context = 0;     // tokens already in its KV cache
  bool new_token = false;  // the step ends with a token for it (its prompt is done)
};

// A scheduled step, priced.
struct StepPlan {
  std::vector<Slice> slices;  // in the engine's order
  plan::Composition composition;
  StepShape shape;
  StepCost cost;
  double duration_s = 0;  // the engine's combination of cost's parts
  double energy_j = 0;    // cost.energy_j + idle power over (duration - device)
  int64_t tokens = 0;
  int64_t prefill_tokens = 0;   // query tokens of requests still in their prompt
  int64_t decode_requests = 0;  // requests computing one generated token
  int64_t free_blocks = 0;      // KV blocks free once the step is scheduled
  int64_t waiting = 0;          // requests waiting once the step is scheduled
  int32_t preempted = 0;        // requests evicted while scheduling it
};

class Engine {
 public:
  virtual ~Engine() = default;
  // Before any work: every request this engine would refuse is one InputError (e.g. larger than the whole cache).
  virtual void check(const std::vector<RequestState>& requests) const = 0;
  // The request arrived: it joins the engine's input queue (read at the next step).
  virtual void admit(int32_t request) = 0;
  // The next step, or nullptr when nothing can run now. Valid until the next call.
  virtual const StepPlan* schedule() = 0;
  // The step's forward finished: requests advance; the ones done are appended to `finished`.
  virtual void complete(std::vector<int32_t>& finished) = 0;
  virtual bool has_pending() const = 0;
  // The configuration the engine resolved (cache blocks, token budget, ...), for the result file.
  virtual nlohmann::json resolved() const = 0;
  // What the store's prices are known to miss under this configuration, one sentence each (the result file's
  // "cautions", and the terminal). None by default.
  virtual std::vector<std::string> cautions() const { return {}; }
  // What a real engine keeps from requests it served before this run, taken from a model of the same kind that
  // served them (`--warmup-requests`): HF's captured CUDA graphs. Nothing by default (vLLM captures at start-up).
  virtual void carry_over(const Engine& warmed) { (void)warmed; }
};

// What an engine model is built from.
struct EngineContext {
  const EngineConfig& config;
  const ModelSpec& model;
  const CostModel& cost;
  std::vector<RequestState>& requests;
};

using EngineFactory = std::unique_ptr<Engine> (*)(const EngineContext&);
// Throws DuplicateError for a name already registered.
void register_engine(const std::string& name, EngineFactory factory);
// Throws InputError naming the known engines.
std::unique_ptr<Engine> make_engine(const std::string& name, const EngineContext& ctx);
std::vector<std::string> engine_names();

// Helpers the engine models share.
int64_t pad_to_interval(int64_t size, int64_t interval, int64_t max_value);  // HF utils.pad_to_interval
int64_t pad_to_pow2(int64_t value, int64_t max_value, int64_t min_value);    // HF utils.pad_to_pow2
// step energy and time from the priced parts (docs/simulate.md, "Step time")
void combine(StepPlan& s, double idle_power_w);

}  // namespace dooly::sim
