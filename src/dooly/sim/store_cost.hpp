#pragma once
// The store-backed cost model (`dooly simulate --db`): every step priced by the per-signature predictors fitted on
// a profiling store (dooly::predict::StepModel), the work part 2 measured on the GPU, time and energy.
//
//   device_s, energy_j  the StepModel's sum over the model's op signatures (count per step x predicted per call) at
//                       the step's composition; under CUDA graphs at the padded shape the device runs (the
//                       padding is one more request holding the padded query tokens and cached tokens)
//   host                the engine's host cost measured on the GPU for this model (engine signatures, `python -m
//                       dooly.profile.engine_cost`), per CUDA-graph mode: eager, it is the launch time the device
//                       runs behind (host_launch_s); under graphs, the host work before the replay (host_serial_s);
//                       a capture adds the eager launch. A model or mode the store has no host cost for takes the
//                       analytic model's host terms (medians measured on the H200 for other models), and says so.
//   idle power          the median idle baseline the store's points were measured with, else the GPU's spec
//
// Loading refuses (one InputError line, naming the fix) a store without the model, its backend, or measurements.
// describe() says what priced the run: the store, its measurement context, what is missing (op signatures without
// a measured unit add nothing and are counted), where the host cost came from.
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "dooly/predict/step_model.hpp"
#include "dooly/sim/analytic_cost.hpp"
#include "dooly/sim/cost_model.hpp"

namespace dooly::sim {

class StoreCost final : public CostModel {
 public:
  static std::unique_ptr<StoreCost> load(const CostSpec& spec);

  StepCost step(const plan::Composition& c, const StepShape& shape) const override;
  double idle_power_w() const override { return idle_w_; }
  std::string describe() const override;

  const predict::StepModel& step_model() const { return device_; }
  bool host_measured() const { return host_.has_value() || host_eager_.has_value(); }

 private:
  StoreCost(predict::StepModel device, AnalyticCost analytic)
      : device_(std::move(device)), analytic_(std::move(analytic)) {}

  predict::StepModel device_;                     // device time and energy (and host, in its CUDA-graph mode)
  std::optional<predict::StepModel> host_;        // host cost in the run's mode, when measured
  std::optional<predict::StepModel> host_eager_;  // graphs on: the eager launch a capture repeats
  AnalyticCost analytic_;                         // host terms where the store has none
  double idle_w_ = 0;
  std::string store_path_;
  bool cuda_graphs_ = false;
};

// The composition the device runs under a CUDA graph: `c` plus one request holding the padding (query tokens up to
// shape.tokens, cached tokens read up to shape.kv_read_tokens); `c` itself when there is none.
plan::Composition padded(const plan::Composition& c, const StepShape& shape);

}  // namespace dooly::sim
