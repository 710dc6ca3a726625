#pragma once
// The seam between the simulator and the cost side: what one engine step costs, in seconds and joules.
//
// An engine model (hf_engine, vllm_engine) decides what a step computes (plan::Composition: per request, the new
// tokens and the tokens already cached) and how the engine runs it (StepShape: eager, a CUDA-graph replay or a
// capture, and the padded sizes the device then executes). A CostModel prices those parts; the engine model
// combines them the way its engine executes (docs/simulate.md, "Step time"):
//   eager:          step = host_serial + max(host_launch, device)       (the device runs behind the launches)
//   graph replay:   step = host_serial + host_launch + device          (one replay call, then the device)
//   graph capture:  step = host_serial + max(host_launch, device) + device   (a warm-up forward, eager; then the
//                   capture, priced as one more device pass: recording the ops costs the host far less than an
//                   eager launch: the H200's live captures took one eager forward plus about a replay, 470 captures
//                   of 24 runs, docs/results/2026-12-05-h200-captures-routing-heldout.md)
//   step energy = energy (the device's, during `device`) + idle power × (step − device)
//
// Two implementations: the analytic roofline (analytic_cost.hpp; tests, benchmarks, and `--cost analytic`), and the
// predictors fitted on a profiling store (store_cost.hpp: dooly::predict's step model; `--db`).
#include <cstdint>
#include <memory>
#include <string>

#include "dooly/plan/composition.hpp"
#include "dooly/sim/gpu_spec.hpp"
#include "dooly/sim/model_spec.hpp"

namespace dooly::sim {

// How the engine runs a step's forward.
enum class ForwardPath : uint8_t {
  eager,          // every op launched from Python
  graph_replay,   // a captured CUDA graph replayed at the padded shape
  graph_capture,  // first step at a padded shape: a warm-up forward, then the capture
};
const char* to_string(ForwardPath p);

// What the device executes. Eager: the composition's own sizes. Graphs: the padded sizes (HF pads the query tokens
// and the cached tokens read to intervals, vLLM the tokens to a capture size); padding slots compute like real ones.
struct StepShape {
  ForwardPath path = ForwardPath::eager;
  int64_t tokens = 0;          // query tokens the forward computes
  int64_t kv_read_tokens = 0;  // cached tokens the attention reads besides this step's own (HF: max_kv_read)
  int64_t sequences = 0;       // sequences the forward sees
};

// The parts of one step, before the engine model combines them.
struct StepCost {
  double device_s = 0;       // GPU busy time: forward, logits, sampling
  double host_serial_s = 0;  // host work the device cannot overlap: scheduling, inputs, outputs, bookkeeping
  double host_launch_s = 0;  // host time issuing the forward (eager: every op; replay: the call; capture: eager's)
  double energy_j = 0;       // device energy during device_s (the units' energies); idle power is the engine's
  int extrapolated = 0;      // units priced outside the range they were measured over
  // The cost model's own duration of the step (step_duration of its parts) where the parts were then set from
  // elsewhere (StepTimesCost: the live run's duration); < 0 where the parts are the model's own.
  double model_duration_s = -1;
};

// The step's duration: its parts combined the way the engine runs `path` (the three lines at the top of this file).
double step_duration(const StepCost& c, ForwardPath path);

class CostModel {
 public:
  virtual ~CostModel() = default;
  // `c`: the scheduled requests as computed (unpadded); `shape`: how the engine runs them.
  virtual StepCost step(const plan::Composition& c, const StepShape& shape) const = 0;
  // Board power while the device waits (between a step's device work, and when the engine has nothing to do).
  virtual double idle_power_w() const = 0;
  // One line for the result and the console: what the costs come from.
  virtual std::string describe() const = 0;
};

// What make_cost_model needs to build a cost model.
struct CostSpec {
  std::string kind = "auto";  // "analytic", "store" (a profiling store, `db`), or "auto": store iff a db is given
  std::string db;             // the profiling store (dooly profile's SQLite)
  std::string engine;         // "hf" or "vllm": whose host cost
  std::string attention;      // "paged|sdpa", ...
  int dtype_bytes = 2;
  bool cuda_graphs = false;
  bool allow_missing = false;        // store: price without the unmeasured op signatures instead of refusing
  std::string moe_routing = "auto";  // store, MoE models: the grouped GEMMs' routing (predict::parse_moe_routing)
  ModelSpec model;
  GpuSpec gpu;
};

// The one factory: "store" loads the predictors of spec.db (an InputError naming the fix when the store lacks the
// model, its backend or measurements; never a silent fallback to the analytic model).
std::unique_ptr<CostModel> make_cost_model(const CostSpec& spec);

}  // namespace dooly::sim
