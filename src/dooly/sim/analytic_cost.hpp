#pragma once
// The analytic cost model: a roofline from the model config and the GPU's datasheet, plus per-step host costs
// taken from the engine-cost runs on the H200. It is a stand-in, not a measurement: results priced with it say
// "analytic" (describe()). docs/simulate.md, "The analytic cost model", lists every formula and constant.
//
// Device time  = max(FLOPs / (peak × 0.6), bytes / (HBM × 0.8)) + kernels × 2 µs
//   FLOPs  = 2 × (layer parameters a token goes through) × tokens + 2 × vocab × hidden × sequences (LM head on the
//            sampled rows) + 4 × heads × head_dim × (query, key) pairs × layers
//            pairs: HF's paged|sdpa builds one mask over the batch and computes it whole: tokens × keys (padded
//            under graphs); vLLM's kernels skip what the causal mask hides: Σ new × (context + (new + 1) / 2)
//   bytes  = weights read (MoE: the experts a step's tokens reach, uniform routing) + KV read × (HF: 3, the cache is
//            gathered into a copy that SDPA reads; vLLM: 1) + KV written + activations + fp32 logits
// Energy       = device time × (idle + (cap − idle) × min(1, compute share + 0.55 × memory share))
// Host (HF, transformers 5.17, medians of docs/results/2026-12-02-h200-issue11-checks.md §2):
//   launch eager = layers × 0.82 ms (dense) or 1.49 ms (MoE); replay = 0.15 ms; capture = eager launch
//   serial       = 0.9 ms + 0.05 ms × requests + 0.9 µs × tokens
// Host (vLLM v1, assumed, not measured): launch eager = layers × 0.2 ms, replay 0.1 ms, serial 1.5 ms + 10 µs ×
//   requests.
#include <string>

#include "dooly/sim/cost_model.hpp"

namespace dooly::sim {

class AnalyticCost final : public CostModel {
 public:
  struct Constants {
    double compute_efficiency = 0.6;
    double memory_efficiency = 0.8;
    double kernel_s = 2e-6;            // per kernel on the device (launch gaps inside a step)
    double kernels_per_layer = 20;     //
    double memory_power_share = 0.55;  // a memory-bound kernel's share of the (cap - idle) range
    double launch_per_layer_s = 0.82e-3;
    double replay_launch_s = 0.15e-3;
    double serial_s = 0.9e-3;
    double serial_per_request_s = 0.05e-3;
    double serial_per_token_s = 0.9e-6;
    double kv_read_factor = 3;  // HF: index_select copy + SDPA read
    bool whole_mask = true;     // HF: the batch's attention mask is computed whole
  };

  AnalyticCost(ModelSpec model, GpuSpec gpu, int dtype_bytes, std::string engine, Constants k);
  static AnalyticCost for_spec(const CostSpec& spec);  // the constants of spec.engine

  StepCost step(const plan::Composition& c, const StepShape& shape) const override;
  double idle_power_w() const override { return gpu_.idle_power_w; }
  std::string describe() const override;
  const Constants& constants() const { return k_; }

 private:
  double device_flops_bytes(const plan::Composition& c, const StepShape& shape, double& bytes) const;

  ModelSpec model_;
  GpuSpec gpu_;
  int dtype_bytes_;
  std::string engine_;
  Constants k_;
};

}  // namespace dooly::sim
